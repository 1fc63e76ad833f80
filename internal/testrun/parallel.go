package testrun

import (
	"flag"
	"strconv"
)

// DefaultParallel runs up to n parallel tests at once unless -parallel was
// given (go test's default is GOMAXPROCS). It is for packages whose
// parallel tests mostly wait (SDK backoff, injected delays, loopback
// servers), not compute: on a 2-core machine the default queued the waits.
// Call it from TestMain before m.Run.
func DefaultParallel(n int) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
			panic(err)
		}
	}
}
