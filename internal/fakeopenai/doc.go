// Package fakeopenai is an in-process OpenAI Files + Batch API server over
// real HTTP, for tests and for batchlake's built-in simulated provider.
//
// It implements what providers/openaibatch uses — multipart uploads, file
// listing and content, batch create/list/get/cancel with cursor paging —
// and turns each batch's input file into output and error files with
// Simulate, so results carry seeded defects (shuffled, duplicated, missing
// and unknown lines, retryable and permanent failures, empty answers).
//
// Batches move validating → in_progress → finalizing → completed, one step
// per Options.PollsPerStep GETs of the batch, so a client's polling loop
// drives time. Faults are counters ("the next N creates lose their
// response") that tests and demos set in Options.Faults or later with
// UpdateFaults: lost and slow create responses, 5xx/429 on create and
// upload, batches failing validation, expiry and cancel with partial
// output, result files gone after retention. Every request is recorded
// (Requests, CountRequests), so a test can prove that exactly one batch was
// created; a request whose client went away before its body arrived (a
// process killed between writing its headers and its body) is recorded as
// cut and not counted, for the real API acts on no such request either.
//
// Files and batches live in memory, or with Options.Bucket as objects in a
// bucket, so that servers in several processes sharing it serve the same
// batches: that is how internal/sim, the simulator behind --provider sim,
// keeps them in the lake (store.go).
//
// The server checks `Authorization: Bearer <key>` on every request. It has
// no dependency on package testing, so the simulator runs it in-process.
package fakeopenai
