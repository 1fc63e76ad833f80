// Package providers is the seam between batchlake's submit protocol
// (package lifecycle) and a provider's batch API: Client and the Batch it
// returns. Adapters live in sub-packages, one per provider API, named so
// they never clash with SDK packages (providers/openaibatch,
// anthropicbatch, bedrockbatch, geminibatch). The simulator and the fake
// servers the adapters are tested against are under internal/.
package providers
