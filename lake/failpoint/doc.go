// Package failpoint crashes the process at named durable steps, so tests can
// prove that a step killed at any point is finished correctly by running it
// again (the crash matrices of cmd/batchlake/crash_test.go and crash2_test.go).
//
// A failpoint is armed by the environment variable BATCHLAKE_FAILPOINT:
//
//	BATCHLAKE_FAILPOINT=submit.after-create      crash at the first hit
//	BATCHLAKE_FAILPOINT=submit.after-create@3    crash at the third hit
//
// When the armed point is reached, the process sends itself SIGKILL: a real
// crash, with no deferred function, no flushed buffer and no released lease.
// The variable is read once; with it unset, Hit costs a load and a compare.
// Failpoints are for tests and fault drills only; nothing else sets the variable.
//
// The failpoints, in the order a job meets them:
//
//	submit.before-submitting  a shard is about to get its SUBMITTING ledger event
//	submit.after-submitting   SUBMITTING (with lease) is durable; no provider call made yet
//	submit.after-create       the provider's create returned a batch; SUBMITTED not yet written
//	collect.after-download    a result file is downloaded to a temp file; nothing ingested yet
//	collect.after-ingest      a result file is archived and ingested (marker written)
//
// Each is hit once per shard (submit) or per result file (collect), so
// name@N crashes at the N-th shard or file. The failpoints of plan, ingest,
// reconcile and retry are listed in names.go.
package failpoint
