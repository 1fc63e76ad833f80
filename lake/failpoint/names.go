package failpoint

// Failpoints of plan, ingest, reconcile and retry (the crash matrix of
// cmd/batchlake/crash2_test.go). Each names the durable step just finished;
// where a step repeats (one per shard, per ledger event), name@N crashes at
// the N-th. retry plans its child job with ingest.Plan, so the plan.*
// failpoints also crash a retry after the child's shards, expected table,
// manifest or first ledger event.
const (
	PlanAfterShard    = "plan.after-shard"    // one shard object stored (per shard)
	PlanAfterExpected = "plan.after-expected" // the expected table file stored; no manifest yet
	PlanAfterManifest = "plan.after-manifest" // the manifest (commit marker) stored; no ledger event yet
	PlanAfterLedger   = "plan.after-ledger"   // a CREATED or VALIDATED event appended (per event)

	IngestAfterRaw      = "ingest.after-raw"      // the raw file archived; no table yet
	IngestAfterAttempts = "ingest.after-attempts" // the attempts table file stored; no marker yet
	IngestAfterMarker   = "ingest.after-marker"   // the ingest record (commit marker) stored

	ReconcileAfterReconciling = "reconcile.after-reconciling" // a shard's RECONCILING lease appended (per shard)
	ReconcileAfterOutcomes    = "reconcile.after-outcomes"    // the outcomes table file stored
	ReconcileAfterTables      = "reconcile.after-tables"      // outcomes and costs table files stored
	ReconcileAfterRetry       = "reconcile.after-retry"       // retry shard(s) and lineage objects stored
	ReconcileAfterReport      = "reconcile.after-report"      // the report (commit marker) stored; ledger not closed
	ReconcileBeforeFinal      = "reconcile.before-final"      // about to append a shard's PARTIAL/COMPLETED (per shard)

	RetryBeforePlan = "retry.before-plan" // the child's input assembled from the retry shards; nothing planned yet

	SyncAfterSubmitting = "sync.after-submitting" // a shard's SUBMITTING (mode sync, with lease) appended; no call yet
	SyncAfterCall       = "sync.after-call"       // a record's call record stored; the HTTP attempt not sent yet (per attempt)
	SyncAfterResult     = "sync.after-result"     // a record's answer kept in the lake (per record)
	SyncAfterIngest     = "sync.after-ingest"     // the shard's output file archived and ingested; the shard not bound yet
)

// Names lists every failpoint placed in batchlake.
var Names = []string{
	SubmitBeforeSubmitting, SubmitAfterSubmitting, SubmitAfterCreate, CollectAfterDownload, CollectAfterIngest,
	PlanAfterShard, PlanAfterExpected, PlanAfterManifest, PlanAfterLedger,
	IngestAfterRaw, IngestAfterAttempts, IngestAfterMarker,
	ReconcileAfterReconciling, ReconcileAfterOutcomes, ReconcileAfterTables, ReconcileAfterRetry, ReconcileAfterReport, ReconcileBeforeFinal,
	RetryBeforePlan,
	SyncAfterSubmitting, SyncAfterCall, SyncAfterResult, SyncAfterIngest,
}
