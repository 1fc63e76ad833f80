package startup

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestDone: the package's init left the collector off (this test binary's
// GOGC is unset), and Done puts back the default, 100, once.
func TestDone(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC is set: init leaves the collector alone")
	}
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("before Done the collector's setting is %d, want -1 (off)", got)
	}
	Done()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("after Done the collector's setting is %d, want 100", got)
	}
	debug.SetGCPercent(50)
	Done()
	if got := debug.SetGCPercent(100); got != 50 {
		t.Errorf("a second Done changed the setting to %d, want it left at 50", got)
	}
}
