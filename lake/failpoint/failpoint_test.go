package failpoint

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		name string
		n    int64
	}{
		{"", "", 1},
		{"submit.after-create", "submit.after-create", 1},
		{"collect.after-ingest@3", "collect.after-ingest", 3},
		{"x@0", "x", 1},
		{"x@junk", "x", 1},
	} {
		t.Run(c.in, func(t *testing.T) {
			name, n := parse(c.in)
			if name != c.name || n != c.n {
				t.Errorf("parse(%q) = %q, %d; want %q, %d", c.in, name, n, c.name, c.n)
			}
		})
	}
}

// TestHitKills runs this test binary as a child that hits a failpoint and
// checks it died of SIGKILL at the armed hit, not before and not after.
func TestHitKills(t *testing.T) {
	if os.Getenv("FAILPOINT_CHILD") == "1" {
		for i := 1; i <= 3; i++ {
			Hit("other")
			Hit(SubmitAfterCreate)
			os.Stdout.WriteString("survived hit " + string(rune('0'+i)) + "\n")
		}
		os.Exit(0)
	}
	for _, c := range []struct {
		env  string
		out  string
		kill bool
	}{
		{"", "survived hit 1\nsurvived hit 2\nsurvived hit 3\n", false},
		{SubmitAfterCreate, "", true},
		{SubmitAfterCreate + "@2", "survived hit 1\n", true},
		{SubmitAfterCreate + "@4", "survived hit 1\nsurvived hit 2\nsurvived hit 3\n", false},
		{CollectAfterIngest, "survived hit 1\nsurvived hit 2\nsurvived hit 3\n", false},
	} {
		t.Run(c.env, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHitKills$")
			cmd.Env = append(os.Environ(), "FAILPOINT_CHILD=1", EnvVar+"="+c.env)
			out, err := cmd.Output()
			if string(out) != c.out {
				t.Errorf("stdout %q, want %q", out, c.out)
			}
			killed := false
			if ee, ok := err.(*exec.ExitError); ok {
				ws, _ := ee.Sys().(syscall.WaitStatus)
				killed = ws.Signaled() && ws.Signal() == syscall.SIGKILL
			} else if err != nil {
				t.Fatal(err)
			}
			if killed != c.kill {
				t.Errorf("killed by SIGKILL = %v, want %v (err %v)", killed, c.kill, err)
			}
		})
	}
}
