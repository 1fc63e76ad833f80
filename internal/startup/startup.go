package startup

import (
	"os"
	"runtime/debug"
)

// held is the collector's setting before init turned it off, or off when
// init left it alone or Done has run.
var held = off

const off = -2

func init() {
	if os.Getenv("GOGC") == "" {
		held = debug.SetGCPercent(-1)
	}
}

// Done turns the collector back on at the setting the process started with.
// Calls after the first change nothing.
func Done() {
	if held != off {
		debug.SetGCPercent(held)
		held = off
	}
}
