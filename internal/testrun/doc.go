// Package testrun holds what the test binaries' TestMain functions share.
// Only tests import it.
package testrun
