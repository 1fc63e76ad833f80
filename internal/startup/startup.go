package startup

import (
	"os"
	"runtime/debug"
)

// held is the collector's setting from before init turned it off, or none:
// init left it alone (GOGC is set), or Done has put it back.
var held = none

// none is no setting: SetGCPercent's are -1 (off) and up.
const none = -2

func init() {
	if os.Getenv("GOGC") == "" {
		held = debug.SetGCPercent(-1)
	}
}

// Done turns the collector back on at the setting the process started with.
// Calls after the first change nothing.
func Done() {
	if held != none {
		debug.SetGCPercent(held)
		held = none
	}
}
