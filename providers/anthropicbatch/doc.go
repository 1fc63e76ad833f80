// Package anthropicbatch is batchlake's adapter for Anthropic Message
// Batches, built on github.com/anthropics/anthropic-sdk-go/v2. It
// implements providers.Client.
//
// Anthropic has no file upload and no batch metadata, so the protocol's
// steps map differently than for OpenAI:
//   - Upload stages the shard (its lines are the requests[] elements,
//     {custom_id, params}) in a temporary file and returns a local id;
//     Create sends them inline as {"requests":[…]} in one POST, exactly
//     once (SDK retries off). A lost answer, a timeout, a 408/409/429 or a
//     5xx wraps providers.ErrUnknownOutcome: the batch may exist.
//   - Find cannot match metadata. It lists batches newest first back to
//     `since` (minus a clock-skew margin) and keeps candidates that the
//     lake has not bound to another shard: ended batches with the shard's
//     request count, and batches still in progress whose request_counts add
//     up to the shard's count or less (processing is a live count: a batch
//     being set up may not show all its requests yet, so a smaller count is
//     not proof that it is another batch).
//     No candidate proves absence (nil, nil). A candidate that has ended is
//     verified by reading its results: it is this shard's batch only if the
//     custom_id set equals the shard's. A candidate still in progress (or
//     whose results are archived) cannot be verified — Anthropic shows no
//     custom_ids before a batch ends — so Find returns an error wrapping
//     ErrUnverified (and providers.ErrUnknownOutcome): the shard stays
//     SUBMITTING ("unknown") and nothing is created twice. The next submit
//     looks again; once the candidate ends it is adopted or ruled out.
//   - Status words are mapped to the lifecycle's vocabulary: in_progress,
//     cancelling (canceling), and for ended batches cancelled (a cancel was
//     initiated), expired (some requests expired) or completed.
//   - A batch's single results stream (results_url) is its output file; it
//     holds successes and errors alike, in the format ingest's anthropic
//     parser reads. results_url is followed only on the API's own origin:
//     the key is never sent elsewhere.
//
// The API key (ANTHROPIC_API_KEY unless Config says otherwise; base URL
// from ANTHROPIC_BASE_URL) never appears in an error or a log line.
package anthropicbatch
