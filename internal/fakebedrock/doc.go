// Package fakebedrock is an in-process Amazon Bedrock control plane for
// batch inference over real HTTP (restjson1, as the AWS SDK for Go v2 speaks
// it through BaseEndpoint), for tests and demos.
//
// It implements CreateModelInvocationJob, GetModelInvocationJob,
// ListModelInvocationJobs (nameContains, statusEquals, submit-time window,
// sort order, maxResults/nextToken paging) and StopModelInvocationJob, and
// keeps Bedrock's idempotency rule: a create with a clientRequestToken seen
// before and the same parameters answers the existing job's ARN; the same
// token with other parameters is a ConflictException.
//
// Jobs move Submitted → Validating → Scheduled → InProgress → Completed,
// one step per Options.PollsPerStep GETs of the job. On validation the job
// reads its input JSONL from S3 (Options.OpenBucket: the gofakes3 server
// in tests); on completion it writes <output>/<job id>/<input>.out with a
// modelOutput or an error (numeric errorCode) per record, in shuffled order,
// and manifest.json.out beside it. Outcomes are drawn per recordId from
// Options.Seed and Options.Rates; Outcomes returns them so a test can
// compare a reconcile report with the truth.
//
// The same server answers the runtime's InvokeModel (POST
// /model/{modelId}/invoke) for Anthropic Claude bodies (anthropic_version,
// max_tokens, messages) with a Message and its usage, for the synchronous
// tail; RealTimeFaults inject throttling (429, with Retry-After if asked),
// 503 ServiceUnavailableException, 408 ModelTimeoutException, 400
// ValidationException and dropped connections (processed, answer lost), and
// RealTimeCalls lists what was processed.
//
// Faults are counters like fakeopenai's: creates that lose their response
// after creating, creates answered with an error after creating, refused
// creates, throttled or failing lists, jobs that fail validation, end
// PartiallyCompleted or Expired with part of their records, and manifests
// that disagree with the lines. Every request is recorded. The server does
// not check SigV4 signatures (it only requires an Authorization header),
// and has no dependency on package testing.
package fakebedrock
