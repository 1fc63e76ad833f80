// Package gen generates synthetic OpenAI Batch API files for benchmarks and
// tests: an input JSONL of chat-completion requests and the output and error
// JSONL a provider would return for it, with realistic defects at seeded
// rates, plus the exact counts a correct reconciler must report (Truth,
// following the report's rules in docs/contract.md).
//
// What it promises:
//   - Deterministic: the same Options give the same bytes, whatever the
//     number of workers.
//   - Streaming: memory is bounded by a few blocks of records (Options.Block),
//     not by N, so 10M records cost the same memory as 10k.
//   - Parallel: blocks are rendered on all cores and written in order.
//
// The defects: result lines in another order than the input (blocks of
// records are permuted and shuffled inside), HTTP 500 and 429
// rate_limit_exceeded failures (retryable), HTTP 400 failures (permanent),
// batch_expired error lines (retryable), records with no line at all
// (missing), records with two result lines (duplicate; an identical repeat or
// a line in the other channel), result lines whose custom_id was never sent
// (unknown), 200 responses with empty or null content (they fail the
// default quality gate) and lines that are not valid JSON (quarantined; they
// name no record, so they change no other count).
package gen
