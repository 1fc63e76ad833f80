// Package sim is batchlake's built-in simulated provider, `--provider sim`:
// the fake OpenAI Files + Batch server of internal/fakeopenai, run in-process
// on loopback with its files and batches kept in the lake (under
// lake.SimStatePrefix), spoken to by the real OpenAI adapter
// (providers/openaibatch). It is deterministic and seedable, and produces
// every kind of trouble a real provider does — shuffled output, retryable
// and permanent failures, expired lines, empty (quality-failing) answers,
// missing, duplicated and unknown lines, and, when asked, create responses
// lost after the batch was made — so the whole loop runs with no account and
// no network.
//
// Because the state is in the lake, `run` and the step commands (submit,
// status, collect, cancel, each a process of its own) see the same batches:
// a job `run` left can be looked at with `status`, and a job submitted by
// one process is found by the next. The simulator serves only jobs planned
// with --provider sim.
package sim
