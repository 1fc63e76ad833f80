// Package openaibatch is batchlake's adapter for the OpenAI Batch API,
// built on github.com/openai/openai-go/v3. It implements providers.Client.
//
// What it promises the submit protocol:
//   - Create never retries on its own (SDK retries are off for that call):
//     a lost response, a timeout, a 408/409/429 or a 5xx after the request
//     was sent returns an error wrapping providers.ErrUnknownOutcome, because
//     the batch may exist. Only a definite 4xx refusal is a plain error.
//   - Find pages GET /v1/batches newest first back to `since` (minus a
//     clock-skew margin) and matches the batchlake metadata; of several
//     matches it returns the oldest and lists the rest as Duplicates.
//   - Upload reuses an earlier upload with the same file name (which embeds
//     the content digest) and size, so a resumed submit uploads nothing new.
//   - Download streams a result file; a 404 is providers.ErrFileGone.
//   - The API key never appears in an error string or a log line: API
//     errors are reduced to an APIError (status, type, code, message with the
//     key redacted) that holds no request or headers.
//
// Credentials and endpoint come from OPENAI_API_KEY and OPENAI_BASE_URL
// unless Config says otherwise; OPENAI_BASE_URL must end in /v1/.
package openaibatch
