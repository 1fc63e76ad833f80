package failpoint

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// EnvVar arms a failpoint: "name" or "name@N" (crash at the N-th hit).
const EnvVar = "BATCHLAKE_FAILPOINT"

// The failpoints placed in batchlake (see the package doc).
const (
	SubmitBeforeSubmitting = "submit.before-submitting"
	SubmitAfterSubmitting  = "submit.after-submitting"
	SubmitAfterCreate      = "submit.after-create"
	CollectAfterDownload   = "collect.after-download"
	CollectAfterIngest     = "collect.after-ingest"
)

var (
	once  sync.Once
	armed string // the failpoint armed by EnvVar, "" if none
	nth   int64  // crash at this hit of armed (1-based)
	hits  atomic.Int64
)

// parse splits "name@N"; a missing or unreadable N means 1.
func parse(v string) (string, int64) {
	name, n, ok := strings.Cut(v, "@")
	if !ok {
		return name, 1
	}
	k, err := strconv.ParseInt(n, 10, 64)
	if err != nil || k < 1 {
		return name, 1
	}
	return name, k
}

// Hit crashes the process with SIGKILL when name is the armed failpoint and
// this is its armed hit; otherwise it returns at once.
func Hit(name string) {
	once.Do(func() { armed, nth = parse(os.Getenv(EnvVar)) })
	if armed == "" || name != armed {
		return
	}
	if hits.Add(1) == nth {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL is not delivered synchronously everywhere: never go on.
	}
}
