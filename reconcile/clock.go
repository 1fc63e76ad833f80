package reconcile

import "time"

// timeNow is replaced in tests.
var timeNow = func() time.Time { return time.Now().UTC() }
