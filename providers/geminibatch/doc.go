// Package geminibatch is batchlake's adapter for the Gemini API's batch
// mode. It implements providers.Client with a small
// net/http client rather than google.golang.org/genai, which is served
// (v1.77.0 was tried) but does not fit: its BatchJob for the Gemini API
// drops metadata.batchStats (no request counts for status), renames states
// through its own table, re-marshals inlined responses from typed structs
// (ingest wants the raw JSON) and Files.Download returns the whole file as
// one []byte (response files reach 2 GB; collect streams them to disk). The
// REST surface used is small: files upload (resumable) and list,
// models/{model}:batchGenerateContent, batches get/list/:cancel, and the
// :download endpoint.
//
// What it promises the submit protocol:
//   - Create is sent once, never retried: a transport error, a timeout, a
//     408/409/429 or a 5xx wraps providers.ErrUnknownOutcome. Gemini says
//     so itself: creating a batch is not idempotent.
//   - Every batch's displayName is DisplayName(job_key, shard_id). Find
//     pages batches.list to its end and matches it exactly: a complete
//     listing without a match proves absence (the window `since` is not
//     needed, as the name is exact); a listing that fails is an error, never
//     absence. Of several matches the oldest is kept, the others are
//     Duplicates.
//   - Upload sends shards up to Config.InlineMaxBytes (at most 20 MB) as
//     inline requests ({request, metadata.key}); larger ones as a JSONL file
//     through the Files API, reusing an earlier upload with the same display
//     name (which carries the content digest) and size. The file is
//     declared as each of Config.UploadMIMETypes in turn while the API
//     answers 400 "Unsupported MIME type" (some accounts refuse
//     application/jsonl; the refusal comes on the finalize, as a 200 whose
//     body is an error), and fails naming BATCHLAKE_GEMINI_UPLOAD_MIME
//     once all are refused.
//   - States (BATCH_STATE_* from REST, JOB_STATE_* from SDK-shaped
//     gateways) map to the lifecycle's words: pending, in_progress,
//     completed, failed, cancelled, expired. A SUCCEEDED batch whose output
//     is not there yet stays "finalizing", so status polls again instead of
//     collecting nothing.
//   - Download streams a response file (404: providers.ErrFileGone); for
//     inline output (file id "inline:batches/…") it writes the inlined
//     responses as response-file lines (ingest.ParseGeminiBatchOperation).
//   - The key goes in the x-goog-api-key header (never in a URL) and never
//     appears in an error or a log line.
//
// Credentials: GEMINI_API_KEY (or GOOGLE_API_KEY); base URL
// GOOGLE_GEMINI_BASE_URL (as the genai SDKs read it), default
// https://generativelanguage.googleapis.com.
package geminibatch
