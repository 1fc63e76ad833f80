// Package fakegemini is an in-process Gemini API batch mode over real HTTP,
// for tests: resumable file upload and file listing, batchGenerateContent
// with file or inline input, batches get/list (page tokens)/cancel, and the
// :download endpoint, in the REST shapes (BATCH_STATE_*, batchStats as
// strings with zeros omitted, inlined responses double nested).
//
// Batches move PENDING → RUNNING → SUCCEEDED, one step per
// Options.PollsPerStep GETs. Each request's result comes from
// Options.Outcome: a response, a blocked prompt, or a google.rpc.Status
// error with a gRPC code. Faults are counters: create answers lost after
// the batch was made, 5xx or 429 RESOURCE_EXHAUSTED before or after
// creating, failing list calls, expiry. Every request is recorded.
package fakegemini
