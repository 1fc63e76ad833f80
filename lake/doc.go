// Package lake is batchlake's system of record: an immutable, content-addressed
// store on gocloud.dev/blob (a local folder, mem://, s3://, gs://, azblob://).
//
// What it promises:
//   - every object is written once, with a conditional create; writing the same
//     bytes again is success, other bytes under the same key is corruption;
//   - content-addressed objects and table files are named by the sha256 of their
//     bytes and re-hashed on every read (ErrCorrupt on mismatch);
//   - JSON markers (manifests, ingest records, reports, ledger events) carry the
//     sha256 of their body in an envelope and are verified the same way;
//   - commit markers are written after the data they reference, so data that no
//     marker references is invisible and harmless;
//   - ledger events are appended with an atomic create of the next sequence
//     number, so of two writers exactly one wins (link(2) on a local folder,
//     conditional PUT on object stores);
//   - Verify walks a whole lake and lists every problem it finds.
//   - readers never create a lake: OpenExisting refuses a URL that holds no
//     job (ErrNoLake), and ResolveJob turns a job key or a unique prefix of
//     one into a job that exists (ErrJobNotFound, *AmbiguousJobError).
//
// The format is described in docs/lake.md.
//
// All object keys are built in keys.go and nowhere else.
package lake
