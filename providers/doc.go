// Package providers is the seam between batchlake's submit protocol and a
// provider's batch API. Adapters live in sub-packages named so they never
// clash with SDK packages (providers/openaibatch, providers/sim).
package providers
