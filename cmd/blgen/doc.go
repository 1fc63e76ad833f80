// Command blgen writes a synthetic N-record OpenAI Batch API job for
// benchmarks and tests: input.jsonl (chat-completion requests), output.jsonl
// and errors.jsonl (what the provider returned, with seeded defects) and
// truth.json (the exact counts a correct reconciler must report).
//
//	blgen -n 1000000 -seed 1 -out bench-data
//
// Files are written to temporary names and renamed into place, truth.json
// last, so a directory holding truth.json holds complete files. The generator
// itself is package github.com/batchlake/batchlake/bench/gen.
package main
