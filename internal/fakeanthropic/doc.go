// Package fakeanthropic is an in-process Anthropic Message Batches API over
// real HTTP, for tests: create (inline requests[]), list newest first with
// after_id paging, get, cancel and the results stream, spoken to by the
// official SDK.
//
// Batches end after Options.PollsPerStep GETs; each request's outcome
// (succeeded, errored with the double-nested error, canceled, expired)
// comes from Options.Outcome, so a test knows the exact report to expect.
// Faults are counters ("the next N creates …"): a create whose answer is
// lost after the batch was made, 5xx or 429 before or after creating.
// Inject adds a batch somebody else created (a foreign batch), to prove
// the adapter's lookup does not adopt it. Every request is recorded.
package fakeanthropic
