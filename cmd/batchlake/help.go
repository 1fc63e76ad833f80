package main

// lifecycleLong is the --help text of the provider steps lifecycleCmd builds.
var lifecycleLong = map[string]string{
	"submit": `submit binds every shard of --job to exactly one provider batch. For each
shard it first records SUBMITTING with a lease in the ledger, then looks the
batch up at the provider (a create whose answer was lost may have made it),
and creates one only when the lookup proves it absent and the lease is still
held; the provider's batch id is bound with SUBMITTED. Running it again, or
after a crash, never creates a second batch. Exit 75: some shard could not be
bound yet (another worker holds its lease, or a retry child's not-before time
is ahead); run it again later.`,
	"status": `status polls the provider for every bound shard of --job and records each
change in the ledger. Exit 0 once every shard is terminal at the provider
(completed, failed, expired, cancelled), 75 while any is not. --wait polls
every --poll until then; --timeout gives up after that long with exit 75.
A batch the provider completed stays RUNNING in the ledger (provider_status
completed) until reconcile.`,
	"collect": `collect downloads the output and error files of every shard whose batch is
terminal (cancelled and expired ones included: they may hold paid results),
archives them raw and content-addressed, and ingests them into attempt rows.
Files already ingested are skipped. Each shard's "state" is its ledger state
after the step: RUNNING until reconcile moves it on. --shard collects one
shard, so shards can be collected in parallel. Exit 75: some batch is not
terminal yet.`,
	"cancel": `cancel asks the provider to cancel the batches of --job that are still
running, then polls them once and records their state in the ledger (a
provider may take a while to finish cancelling: status follows it). What had
finished is kept: collect and reconcile afterwards, and retry the rest.`,
}

const verifyLong = `verify re-hashes every object and table file the lake holds against its name,
opens every sealed marker (manifests, ingest records, reports, ledger events),
checks that what each marker references exists and verifies, and that each
shard's ledger is gap-free and makes only allowed transitions, and that each
compaction holds exactly the rows its jobs' sources give. Files no marker
references (left by an interrupted run) are warnings; anything else is an
error. Stdout lists every problem ("problems": [] when there is none) with "ok";
exit 1 on any error.`

const catalogLong = `catalog writes a DuckDB database file whose views (the same as sql's:
manifests, shards, expected, attempts, records, costs, ledger, …) read the
lake's files where they are, for notebooks, BI tools and DuckDB's own CLI.
Nothing is copied. Which kind it writes depends on the lake:

  live (a local lake): the views read the lake's folders by globs and its
  JSON markers each time they are queried, so jobs planned, ingested or
  reconciled after the catalog was written are seen without writing it
  again. The paths are relative to the catalog file's folder, and DuckDB
  resolves relative paths against its current directory, so open it from
  that folder:

    batchlake catalog --lake ./lake --out analytics.duckdb
    duckdb -readonly analytics.duckdb      # from the folder holding it
    python -c "import duckdb; print(duckdb.connect('analytics.duckdb', read_only=True).sql('FROM records LIMIT 5'))"

  Hand it to a colleague with the lake: copy the folder that holds both (or
  place the catalog beside their copy at the same relative path). A table
  folder with no file at all when it was written (quarantine, often) reads
  an empty stand-in until catalog --refresh; the result lists those as
  "static".

  snapshot (s3://, gs://, azblob://, mem://: DuckDB reads local files only):
  the views list the files committed when it ran, staged in the local cache
  (--cache-dir), with small tables from the markers in a sidecar folder
  (<out>.d); it opens from any folder but sees newer jobs only after
  catalog --refresh --out <out>.

--refresh rebuilds an existing catalog in place, of the same lake and
tenant (it refuses a catalog of another lake). Without it, --out may name a
catalog batchlake wrote, which is written again, but no other file that is
there (exit 2: it is left as it was).`

const retryLong = `retry turns the retry shard of --job (written by reconcile: records missing,
failed retryably or failing the quality gate, under --max-attempts) into a
child job: attempt n+1, same record ids, parent_job_key set, planned and ready
for submit, for the parent's provider. --not-before delays the child's
submission (submit exits 75 before it). Records that a retry of the same parent
(an earlier child, or its children) already did are left out (already_succeeded).
The child supersedes the parent's older children that were not submitted yet:
their shards move to CANCELLED (detail superseded_by) and submit refuses them.

--mode sync sends the child's records at once through the provider's real-time
API (OpenAI, Anthropic, Gemini, sim) instead of a batch: every HTTP attempt is recorded
in the lake before it goes out, the answers are written as a batch output file,
archived and ingested, and the child is ready to reconcile. --mode auto (the
default) does so for a child below the provider's minimum records per batch
job or below --sync-below. A call that may have reached the provider without
an answer (a crash) is maybe_sent; sending it again is a counted duplicate
submission. Exit 75: another sender holds the shard; 10: interrupted (what
finished is written). See docs/sync.md.`
