// Package bedrockbatch is batchlake's adapter for Amazon Bedrock batch
// inference (CreateModelInvocationJob and friends), built on
// github.com/aws/aws-sdk-go-v2/service/bedrock. It implements
// providers.Client.
//
// What it promises the submit protocol:
//   - Every job carries a clientRequestToken that is a pure function of
//     (job_key, shard_id) (Token) and a jobName that carries both (JobName),
//     within Bedrock's length and character rules. A create retried after a
//     lost response — by the SDK's retryer, a second submitter or a resumed
//     run — sends the same token, and Bedrock answers with the job it made.
//   - Create's outcome is unknown (providers.ErrUnknownOutcome) after a
//     timeout, throttling, a 5xx or a lost connection once the retries are
//     spent, and on a ConflictException (the token is taken); a
//     ValidationException, AccessDenied, ResourceNotFound or quota error is
//     a definite refusal.
//   - Find lists jobs by name (nameContains, newest first, submitted after
//     `since` minus a skew margin, every page) and matches on the token, so
//     an empty answer proves absence.
//   - Status words stay Bedrock's own (Submitted … PartiallyCompleted,
//     Stopped, Expired); providers.Batch.Terminal knows them, and a
//     partially completed, stopped or expired job still has its processed
//     records collected.
//   - Shard files go to the input prefix under their content-addressed
//     name (an upload of the same bytes is reused); results are read from
//     <output>/<job id>/<input name>.out, with the job summary
//     manifest.json.out beside it (SummaryFileID) for collect's cross-check.
//
// Credentials come from the AWS default chain only. The service role ARN
// (Config.RoleARN) is not a secret but is needed only to create.
package bedrockbatch
