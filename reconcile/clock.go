package reconcile

import "time"

// now reads clock, or the system clock when clock is nil, in UTC.
func now(clock func() time.Time) time.Time {
	if clock != nil {
		return clock().UTC()
	}
	return time.Now().UTC()
}
