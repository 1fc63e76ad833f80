// Package sim is batchlake's built-in simulated batch provider: deterministic
// and seedable, it speaks OpenAI's batch file formats and produces every kind
// of trouble a real provider does — shuffled output, retryable and permanent
// failures, expired lines, empty (quality-failing) answers, missing,
// duplicated and unknown lines — so the whole loop runs with no account and
// no network.
package sim
