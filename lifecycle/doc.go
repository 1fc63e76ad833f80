// Package lifecycle drives a job's shards through a provider: submit exactly
// once, poll status, collect results, cancel. It writes the ledger before
// every provider call that costs money and recovers from a lost create
// response by looking the batch up remotely, never by creating it again.
package lifecycle
