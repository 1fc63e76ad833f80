#!/usr/bin/env bash
# bench/run.sh — the end-to-end benchmark (bench/README.md).
#
# Builds blgen, blbaseline and batchlake; generates an N-record OpenAI batch
# (reused when DATA already holds one made with the same N, seed and generator);
# then RUNS times, each on a fresh lake, runs whole processes under
# /usr/bin/time -v:
#   batchlake plan      --lake L --provider openai --input input.jsonl --tenant bench --prompt-version v1
#   batchlake ingest    --lake L --job JOB --output output.jsonl --errors errors.jsonl
#   batchlake ingest    of the output's first SHARD_LINES lines, as one collect
#                       step ingests a batch's file (on a hard-link copy of L)
#   batchlake reconcile --lake L --job JOB          (exit 10 or 11 is expected)
#   batchlake report    --lake L --job JOB          (rows of their own, not in
#   batchlake sql       "SELECT count(*) … FROM accepted"   the total)
#   blbaseline          (DuckDB read_ndjson -> Parquet + the three set queries)
#   blbaseline -contract  (the contract floor: the output and error loads, then
#                        the lake tables batchlake writes, made by DuckDB alone)
#   python3 bench/reconcile.py  (a plain single-threaded Python reconciler:
#                        json.loads of the three files, dicts and sets, the counts)
# and, on a lake of its own, plan again over input.shuffled.jsonl (the same
# lines in a random order, as an export without ORDER BY gives them; made by
# blgen -shuffle): a row of its own, not in the total, whose job key must be
# the first plan's. batchlake's steps go first in odd runs, blbaseline and the
# Python reconciler in even ones. It prints, per step, the median wall time,
# records/s, MB/s of the step's input files, the peak RSS and cpu seconds, the
# batchlake total beside the baseline, the contract floor and the Python
# reconciler, the ratios (wall and cpu: batchlake / baseline, Python /
# batchlake; and wall run by run), plan's and ingest's MB/s
# against their target, and (at N = 1M and 10M) each step's peak RSS against
# the memory target (RSS_TARGET below), and the collect step's against its
# pod's limit (COLLECT_RSS_TARGET). Every reconcile report (and every
# baseline, floor and Python result) is checked against truth.json; any
# difference prints MISMATCH and fails the run.
#
# Environment (all optional):
#   N=1000000 SEED=1 RUNS=3        size, generator seed, runs per step
#   DATA=./bench-data              generated files (kept and reused)
#   WORK=$DATA/runs                lakes, logs, timings and bench.json
#   BIN=./bin/bench                where the binaries are built
#   BATCHLAKE=path                 use this batchlake binary instead of building ./cmd/batchlake
#   SKIP_BATCHLAKE=1 SKIP_BASELINE=1   leave a side out
#   SKIP_FLOOR=1                   leave out the contract floor (blbaseline -contract)
#   SKIP_PYTHON=1                  leave out the Python reconciler (bench/reconcile.py)
#   PYTHON=python3                 the Python interpreter it runs under
#   SKIP_SHUFFLED=1                leave out the plan of the shuffled input
#   BASELINE_FLAGS="-memory-limit 512MB -threads 2"   extra blbaseline flags (both runs)
#   KEEP=1                         keep each run's lake and Parquet files
#   SHARD_LINES=50000              lines of the output ingested as one collect step
#   PARTITIONS=8                   also reconcile in partitions: on a copy of the
#                                  lake made before the single reconcile, run
#                                  reconcile --partition k/8 for k = 0..7 one after
#                                  another, then --merge (checked against
#                                  truth.json); print their total cpu against the
#                                  single reconcile's and the bytes each read
#                                  (rchar of /proc/<pid>/io, by bench/procio.py,
#                                  against the single reconcile's). Off by default:
#                                  it is another reconcile's time and a lake copy
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD

N=${N:-1000000}
SEED=${SEED:-1}
RUNS=${RUNS:-3}
DATA=${DATA:-$ROOT/bench-data}
WORK=${WORK:-$DATA/runs}
BIN=${BIN:-$ROOT/bin/bench}
SKIP_BATCHLAKE=${SKIP_BATCHLAKE:-}
SKIP_BASELINE=${SKIP_BASELINE:-}
SKIP_SHUFFLED=${SKIP_SHUFFLED:-}
SKIP_FLOOR=${SKIP_FLOOR:-}
SKIP_PYTHON=${SKIP_PYTHON:-}
PYTHON=${PYTHON:-python3}
BASELINE_FLAGS=${BASELINE_FLAGS:-}
KEEP=${KEEP:-}
PARTITIONS=${PARTITIONS:-}
TIME=/usr/bin/time

die() { echo "bench: $*" >&2; exit 1; }
log() { echo "bench: $*" >&2; }

[[ $N =~ ^[1-9][0-9]*$ ]] || die "N must be a positive integer, got '$N'"
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer, got '$RUNS'"
[[ -z $PARTITIONS || $PARTITIONS =~ ^[1-9][0-9]*$ ]] || die "PARTITIONS must be a positive integer, got '$PARTITIONS'"
[[ -z $PARTITIONS ]] || command -v "$PYTHON" >/dev/null || die "PARTITIONS needs $PYTHON (bench/procio.py)"
[[ -x $TIME ]] || die "$TIME is missing (Debian/Ubuntu: apt-get install time)"
command -v jq >/dev/null || die "jq is missing (Debian/Ubuntu: apt-get install jq)"
command -v go >/dev/null || die "go is missing"
[[ -n $SKIP_PYTHON ]] || command -v "$PYTHON" >/dev/null || die "$PYTHON is missing (or set SKIP_PYTHON=1)"

# ---- build -------------------------------------------------------------------
mkdir -p "$BIN"
log "building blgen and blbaseline into $BIN"
go build -o "$BIN/blgen" ./cmd/blgen
[[ -n $SKIP_BASELINE && -n $SKIP_FLOOR ]] || go build -o "$BIN/blbaseline" ./cmd/blbaseline
if [[ -z $SKIP_BATCHLAKE ]]; then
	if [[ -n ${BATCHLAKE:-} ]]; then
		[[ -x $BATCHLAKE ]] || die "BATCHLAKE=$BATCHLAKE is not an executable"
	else
		[[ -d cmd/batchlake ]] || die "cmd/batchlake does not exist in this checkout (set BATCHLAKE=path, or SKIP_BATCHLAKE=1 to run the generator and baseline only)"
		log "building batchlake into $BIN"
		go build -tags duckdb_arrow -o "$BIN/batchlake" ./cmd/batchlake
		BATCHLAKE=$BIN/batchlake
	fi
fi

# ---- measurement helpers -------------------------------------------------------

# timed NAME OUTDIR CMD...: run CMD under /usr/bin/time -v, stdout to
# OUTDIR/NAME.json, stderr to OUTDIR/NAME.log, the time report to
# OUTDIR/NAME.time; sets RC, WALL and CPU (user + system) seconds and RSS
# (KiB), and with IO set, RCHAR (bytes read, bench/procio.py; its counters in
# OUTDIR/NAME.io). Never fails.
IO=""
timed() {
	local name=$1 dir=$2
	shift 2
	RC=0 RCHAR=0
	if [[ -n $IO ]]; then
		set -- "$PYTHON" "$ROOT/bench/procio.py" "$dir/$name.io" "$@"
	fi
	"$TIME" -v -o "$dir/$name.time" "$@" >"$dir/$name.json" 2>"$dir/$name.log" || RC=$?
	if [[ -n $IO && -s $dir/$name.io ]]; then
		RCHAR=$(jq .rchar "$dir/$name.io")
	fi
	WALL=$(awk -F': ' '/Elapsed \(wall clock\) time/ {
		n = split($2, p, ":"); s = 0
		for (i = 1; i <= n; i++) s = s * 60 + p[i]
		print s }' "$dir/$name.time")
	RSS=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$dir/$name.time")
	CPU=$(awk -F': ' '/(User|System) time \(seconds\)/ {s += $2} END {print s + 0}' "$dir/$name.time")
	[[ -n $WALL && -n $RSS ]] || { WALL=0; RSS=0; CPU=0; }
}

# samples of one step: lines "wall rss cpu" in $WORK/samples/STEP
record() { echo "$2 $3 $4" >>"$WORK/samples/$1"; }

median() { sort -g | awk '{v[NR] = $1} END { if (NR == 0) { print 0; exit } if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
maxof() { sort -g | tail -n 1; }

MISMATCHES=0
# check WHAT JSONFILE KEYS...: compare keys of a JSON result with truth.json.
check() {
	local what=$1 file=$2 key got want
	shift 2
	for key in "$@"; do
		got=$(jq -c --arg k "$key" 'if type == "object" and has($k) then .[$k] else "<absent>" end' "$file" 2>/dev/null || echo "<not JSON>")
		want=$(jq -c --arg k "$key" '.[$k]' "$DATA/truth.json")
		if [[ $got != "$want" ]]; then
			echo "!!!!!!!! MISMATCH  $what: $key = $got, truth.json says $want" >&2
			MISMATCHES=$((MISMATCHES + 1))
		fi
	done
}

# ---- data ----------------------------------------------------------------------
GEN_WALL="" GEN_RSS="" GEN_CPU=""
want_gen=$("$BIN/blgen" -version)
mkdir -p "$DATA"
if [[ -f $DATA/truth.json ]] &&
	[[ $(jq -r '"\(.n) \(.seed) \(.generator)"' "$DATA/truth.json") == "$N $SEED $want_gen" ]]; then
	log "reusing $DATA (n=$N seed=$SEED)"
else
	log "generating $N records into $DATA"
	mkdir -p "$WORK"
	timed blgen "$WORK" "$BIN/blgen" -n "$N" -seed "$SEED" -out "$DATA"
	[[ $RC == 0 ]] || { cat "$WORK/blgen.log" >&2; die "blgen failed (exit $RC)"; }
	GEN_WALL=$WALL GEN_RSS=$RSS GEN_CPU=$CPU
fi
jq -e --argjson n "$N" '.expected == $n' "$DATA/truth.json" >/dev/null || die "$DATA/truth.json does not describe $N records"

IN=$DATA/input.jsonl OUT=$DATA/output.jsonl ERR=$DATA/errors.jsonl
SHUF=$DATA/input.shuffled.jsonl
if [[ -z $SKIP_BATCHLAKE && -z $SKIP_SHUFFLED ]] && ! [[ -f $SHUF && $SHUF -nt $IN ]]; then
	log "shuffling the input into $SHUF"
	"$BIN/blgen" -out "$DATA" -seed "$SEED" -shuffle || die "blgen -shuffle failed"
fi
size() { stat -c %s "$1"; }
B_IN=$(size "$IN")
B_RES=$(($(size "$OUT") + $(size "$ERR")))
B_ALL=$((B_IN + B_RES))
log "files: $(awk -v b="$B_ALL" 'BEGIN {printf "%.1f MB", b / 1e6}') in total; reading them once into the page cache"
cat "$IN" "$OUT" "$ERR" >/dev/null

rm -rf "$WORK/samples" "$WORK/inner"
mkdir -p "$WORK/samples" "$WORK/inner"

# ---- runs ----------------------------------------------------------------------

# duckdb_side NAME WHAT [FLAGS...]: one run (r, in $run) of blbaseline with
# FLAGS as step NAME (samples/NAME, inner/NAME-STEP for its own steps); its
# counts are checked against truth.json; LAST_NAME (upper case) is its JSON.
duckdb_side() {
	local name=$1 what=$2 s
	shift 2
	log "run $r/$RUNS: $what"
	# shellcheck disable=SC2086 # BASELINE_FLAGS is a list of flags
	timed "$name" "$run" "$BIN/blbaseline" "$@" -input "$IN" -output "$OUT" -errors "$ERR" -work "$run/$name" $BASELINE_FLAGS
	if [[ $RC != 0 ]]; then
		log "$what failed (exit $RC); see $run/$name.log"
		FAILED=1
	else
		record "$name" "$WALL" "$RSS" "$CPU"
		printf -v "LAST_${name^^}" '%s' "$run/$name.json"
		check "run $r $what" "$run/$name.json" expected missing unknown duplicate
		for s in $(jq -r '.steps[].step' "$run/$name.json"); do
			jq -r --arg s "$s" '.steps[] | select(.step == $s) | .seconds' "$run/$name.json" >>"$WORK/inner/$name-$s"
		done
	fi
	[[ -n $KEEP ]] || rm -rf "$run/$name"
}

# partitions LAKE: reconcile --partition k/$PARTITIONS of $job in LAKE for
# each k, one after another, then --merge; samples/partitions gets the
# partitions' total "wall rss cpu", inner/rchar-partitions each one's bytes
# read. The merged report is checked against truth.json.
partitions() {
	local plake=$1 k wall=0 rss=0 cpu=0 ok=1
	IO=1
	for ((k = 0; k < PARTITIONS; k++)); do
		log "run $r/$RUNS: batchlake reconcile --partition $k/$PARTITIONS"
		timed "partition-$k" "$run" "$BATCHLAKE" reconcile --lake "$plake" --job "$job" --partition "$k/$PARTITIONS"
		if [[ $RC != 0 ]]; then
			log "partition $k/$PARTITIONS failed (exit $RC); see $run/partition-$k.log"
			FAILED=1 ok=""
			break
		fi
		wall=$(awk -v a="$wall" -v b="$WALL" 'BEGIN {print a + b}')
		cpu=$(awk -v a="$cpu" -v b="$CPU" 'BEGIN {print a + b}')
		rss=$(printf '%s
' "$rss" "$RSS" | maxof)
		echo "$RCHAR" >>"$WORK/inner/rchar-partitions"
	done
	IO=""
	[[ -n $ok ]] || return 0
	record partitions "$wall" "$rss" "$cpu"
	log "run $r/$RUNS: batchlake reconcile --merge"
	timed merge "$run" "$BATCHLAKE" reconcile --lake "$plake" --job "$job" --merge
	case $RC in
	0 | 10 | 11)
		record merge "$WALL" "$RSS" "$CPU"
		check "run $r merged report of $PARTITIONS partitions" "$run/merge.json" "${TRUTH_KEYS[@]}"
		;;
	*)
		log "merge failed (exit $RC); see $run/merge.log"
		FAILED=1
		;;
	esac
}

# collect_shard LAKE JOB: what each collect step of a fan-out does, ingest one
# batch's output file into the job: the first $SHARD_LINES lines of the
# output (an OpenAI batch holds at most 50,000), ingested into a copy of LAKE
# by hard links, so the run's own lake and its counts are untouched. Its peak
# RSS is held to COLLECT_RSS_TARGET, the collect pod's memory limit in
# deploy/.
SHARD_LINES=${SHARD_LINES:-50000}
collect_shard() {
	local from=$1 job=$2
	head -n "$SHARD_LINES" "$OUT" >"$run/shard.jsonl"
	B_SHARD=$(stat -c %s "$run/shard.jsonl") SHARD_ROWS=$(wc -l <"$run/shard.jsonl")
	cp -al "$from" "$run/lake-collect"
	log "run $r/$RUNS: batchlake ingest of one $SHARD_LINES-line batch output (a collect step)"
	timed collect "$run" "$BATCHLAKE" ingest --lake "$run/lake-collect" --job "$job" --output "$run/shard.jsonl"
	if [[ $RC == 0 ]]; then
		record collect "$WALL" "$RSS" "$CPU"
	else
		log "ingest of one batch output failed (exit $RC); see $run/collect.log"
		FAILED=1
	fi
	rm -rf "$run/lake-collect" "$run/shard.jsonl"
}

TRUTH_KEYS=(expected succeeded quality_failed failed_retryable failed_permanent missing unknown duplicate quarantined retry_records closed)
FAILED=0
LAST_BASELINE="" LAST_FLOOR=""
# batchlake_side: run $r of plan, ingest, reconcile, report and the accepted
# view (and the partitions and the shuffled plan when asked for).
batchlake_side() {
	if [[ -z $SKIP_BATCHLAKE ]]; then
		lake=$run/lake
		log "run $r/$RUNS: batchlake plan"
		timed plan "$run" "$BATCHLAKE" plan --lake "$lake" --provider openai --input "$IN" --tenant bench --prompt-version v1
		if [[ $RC != 0 ]]; then
			log "plan failed (exit $RC); see $run/plan.log"
			FAILED=1
		else
			record plan "$WALL" "$RSS" "$CPU"
			P_WALL=$WALL P_RSS=$RSS P_CPU=$CPU
			job=$(jq -r '.job_key // empty' "$run/plan.json")
			[[ -n $job ]] || die "plan printed no job_key (see $run/plan.json)"
			log "run $r/$RUNS: batchlake ingest (job $job)"
			timed ingest "$run" "$BATCHLAKE" ingest --lake "$lake" --job "$job" --output "$OUT" --errors "$ERR"
			if [[ $RC != 0 ]]; then
				log "ingest failed (exit $RC); see $run/ingest.log"
				FAILED=1
			else
				record ingest "$WALL" "$RSS" "$CPU"
				I_WALL=$WALL I_RSS=$RSS I_CPU=$CPU
				collect_shard "$lake" "$job"
				# A copy by hard links: a lake's files are written once (new
				# files renamed into place) and never changed, so the copies
				# stay apart, and a 10M lake is not stored twice.
				[[ -z $PARTITIONS ]] || cp -al "$lake" "$run/lake-parts"
				log "run $r/$RUNS: batchlake reconcile"
				IO=$PARTITIONS
				timed reconcile "$run" "$BATCHLAKE" reconcile --lake "$lake" --job "$job"
				IO=""
				[[ -z $PARTITIONS ]] || echo "$RCHAR" >>"$WORK/inner/rchar-reconcile"
				case $RC in
				0 | 10 | 11)
					record reconcile "$WALL" "$RSS" "$CPU"
					record total "$(awk -v a="$P_WALL" -v b="$I_WALL" -v c="$WALL" 'BEGIN {print a + b + c}')" \
						"$(printf '%s\n' "$P_RSS" "$I_RSS" "$RSS" | maxof)" \
						"$(awk -v a="$P_CPU" -v b="$I_CPU" -v c="$CPU" 'BEGIN {print a + b + c}')"
					check "run $r reconcile report" "$run/reconcile.json" "${TRUTH_KEYS[@]}"
					# What analysts read next: the job's report, and the
					# accepted view (one answer per succeeded record).
					log "run $r/$RUNS: batchlake report and the accepted view"
					timed report "$run" "$BATCHLAKE" report --lake "$lake" --job "$job"
					if [[ $RC == 0 ]]; then
						record report "$WALL" "$RSS" "$CPU"
						check "run $r report" "$run/report.json" expected succeeded
					else
						log "report failed (exit $RC); see $run/report.log"
						FAILED=1
					fi
					timed accepted "$run" "$BATCHLAKE" sql --lake "$lake" --format json "SELECT count(*) AS succeeded FROM accepted"
					if [[ $RC == 0 ]]; then
						record accepted "$WALL" "$RSS" "$CPU"
						jq '.[0]' "$run/accepted.json" >"$run/accepted-count.json"
						check "run $r accepted view" "$run/accepted-count.json" succeeded
					else
						log "sql of the accepted view failed (exit $RC); see $run/accepted.log"
						FAILED=1
					fi
					;;
				*)
					log "reconcile failed (exit $RC); see $run/reconcile.log"
					FAILED=1
					;;
				esac
			fi
		fi
		if [[ -n $PARTITIONS && -d $run/lake-parts ]]; then
			partitions "$run/lake-parts"
			[[ -n $KEEP ]] || rm -rf "$run/lake-parts"
		fi
		[[ -n $KEEP ]] || rm -rf "$lake"
		if [[ -z $SKIP_SHUFFLED ]]; then
			log "run $r/$RUNS: batchlake plan of the shuffled input"
			timed plan-shuffled "$run" "$BATCHLAKE" plan --lake "$run/lake-shuffled" --provider openai --input "$SHUF" --tenant bench --prompt-version v1
			if [[ $RC != 0 ]]; then
				log "plan of the shuffled input failed (exit $RC); see $run/plan-shuffled.log"
				FAILED=1
			else
				record plan_shuffled "$WALL" "$RSS" "$CPU"
				got=$(jq -r '.job_key // empty' "$run/plan-shuffled.json")
				if [[ -n ${job:-} && $got != "$job" ]]; then
					echo "!!!!!!!! MISMATCH  run $r plan of the shuffled input: job key $got, the input in order gave $job" >&2
					MISMATCHES=$((MISMATCHES + 1))
				fi
			fi
			[[ -n $KEEP ]] || rm -rf "$run/lake-shuffled"
		fi
	fi
}

# comparison_side: run $r of the DuckDB baseline, the contract floor and the
# Python reconciler.
comparison_side() {
	[[ -n $SKIP_BASELINE ]] || duckdb_side baseline "DuckDB baseline"
	[[ -n $SKIP_FLOOR ]] || duckdb_side floor "DuckDB contract floor" -contract
	if [[ -z $SKIP_PYTHON ]]; then
		log "run $r/$RUNS: Python reconciler"
		timed python "$run" "$PYTHON" bench/reconcile.py "$IN" "$OUT" "$ERR"
		if [[ $RC != 0 ]]; then
			log "the Python reconciler failed (exit $RC); see $run/python.log"
			FAILED=1
		else
			record python "$WALL" "$RSS" "$CPU"
			check "run $r Python reconciler" "$run/python.json" "${TRUTH_KEYS[@]}"
		fi
	fi
}

for ((r = 1; r <= RUNS; r++)); do
	run=$WORK/run-$r
	rm -rf "$run"
	mkdir -p "$run"
	# The sides take turns to go first (batchlake first in odd runs): where
	# the machine's speed drifts over the script, neither side always gets
	# the earlier minutes of a run.
	if ((r % 2)); then
		batchlake_side
		comparison_side
	else
		comparison_side
		batchlake_side
	fi
done

# ---- report --------------------------------------------------------------------
# row NAME WALL RSS_KIB BYTES CPU
row() {
	awk -v name="$1" -v wall="$2" -v rss="$3" -v bytes="$4" -v cpu="$5" -v n="${ROWS:-$N}" 'BEGIN {
		rps = wall > 0 ? n / wall : 0; mbs = (wall > 0 && bytes > 0) ? bytes / 1e6 / wall : 0
		printf "%-24s %10.2f %12.0f %9.1f %11.0f %9.2f\n", name, wall, rps, mbs, rss / 1024, cpu }'
}
stepwall() { [[ -s $WORK/samples/$1 ]] && awk '{print $1}' "$WORK/samples/$1" | median || echo 0; }
steprss() { [[ -s $WORK/samples/$1 ]] && awk '{print $2}' "$WORK/samples/$1" | maxof || echo 0; }
stepcpu() { [[ -s $WORK/samples/$1 ]] && awk '{print $3}' "$WORK/samples/$1" | median || echo 0; }
steprow() { row "$1" "$(stepwall "$2")" "$(steprss "$2")" "$3" "$(stepcpu "$2")"; }

echo
echo "batchlake bench: N=$N seed=$SEED runs=$RUNS, $(nproc) cores, files $(awk -v b="$B_ALL" 'BEGIN {printf "%.1f MB", b / 1e6}') (input $(awk -v b="$B_IN" 'BEGIN {printf "%.1f", b / 1e6}') MB), in page cache"
echo "wall = median over runs (s), records/s = N / wall, MB/s = the step's input files / wall,"
echo "peak RSS = max over runs (MiB), cpu = median user + system seconds (wall/cpu shows how contended the cores were)"
printf "%-24s %10s %12s %9s %11s %9s\n" step "wall s" records/s "MB/s" "peak RSS" "cpu s"
if [[ -n $GEN_WALL ]]; then
	row "blgen (generate)" "$GEN_WALL" "$GEN_RSS" "$B_ALL" "$GEN_CPU"
fi
BL_TOTAL="" BASE_TOTAL=""
if [[ -z $SKIP_BATCHLAKE ]]; then
	steprow "batchlake plan" plan "$B_IN"
	steprow "batchlake ingest" ingest "$B_RES"
	steprow "batchlake reconcile" reconcile "$B_ALL"
	if [[ -s $WORK/samples/total ]]; then
		# the total of each complete run, then the median of the totals
		BL_TOTAL=$(stepwall total)
		steprow "batchlake total" total "$B_ALL"
	fi
	# its records/s counts the batch's lines
	[[ ! -s $WORK/samples/collect ]] || ROWS=$SHARD_ROWS steprow "ingest of one batch file" collect "$B_SHARD"
	[[ ! -s $WORK/samples/report ]] || steprow "batchlake report --job" report 0
	[[ ! -s $WORK/samples/accepted ]] || steprow "sql: count of accepted" accepted 0
	if [[ -s $WORK/samples/plan_shuffled ]]; then
		steprow "plan, shuffled input" plan_shuffled "$B_IN"
	fi
	if [[ -s $WORK/samples/partitions ]]; then
		steprow "$PARTITIONS partitions, in turn" partitions "$B_ALL"
		[[ ! -s $WORK/samples/merge ]] || steprow "merge of the partitions" merge "$B_ALL"
	fi
fi
# side_rows NAME LABEL JSON: the row of a blbaseline step and of its own steps.
side_rows() {
	local s
	steprow "$2" "$1" "$B_ALL"
	for s in $(jq -r '.steps[].step' "$3"); do
		printf "  %-22s %10.2f   (inside the process)\n" "$s" "$(median <"$WORK/inner/$1-$s")"
	done
}
FLOOR_TOTAL=""
if [[ -z $SKIP_BASELINE && -s $WORK/samples/baseline ]]; then
	BASE_TOTAL=$(stepwall baseline)
	side_rows baseline "duckdb baseline (total)" "$LAST_BASELINE"
fi
if [[ -z $SKIP_FLOOR && -s $WORK/samples/floor ]]; then
	FLOOR_TOTAL=$(stepwall floor)
	side_rows floor "duckdb contract floor" "$LAST_FLOOR"
fi
PY_TOTAL=""
if [[ -z $SKIP_PYTHON && -s $WORK/samples/python ]]; then
	PY_TOTAL=$(stepwall python)
	steprow "python reconciler" python "$B_ALL"
fi
# ratio A B: A / B to two places (0 when B is 0)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}'; }
# runratios A B: the wall time ratio A / B of each run, from the samples of
# steps A and B ("2.06, 2.89, 2.71"); nothing unless both have every run. The
# host's speed can change within a run of this script, and the sides of a
# ratio run minutes apart: each run's own ratio shows how far that moved the
# medians' ratio.
runratios() {
	local a=$WORK/samples/$1 b=$WORK/samples/$2
	[[ -s $a && -s $b && $(wc -l <"$a") == "$RUNS" && $(wc -l <"$b") == "$RUNS" ]] || return 0
	paste -d' ' <(cut -d' ' -f1 "$a") <(cut -d' ' -f1 "$b") |
		awk '{printf "%s%.2f", (NR > 1 ? ", " : ""), ($2 > 0 ? $1 / $2 : 0)}'
}
RATIO="" FLOOR_RATIO="" PY_RATIO="" RATIO_CPU="" PY_RATIO_CPU="" RATIO_RUNS="" PY_RATIO_RUNS=""
if [[ -n $BL_TOTAL && -n $BASE_TOTAL ]]; then
	RATIO=$(ratio "$BL_TOTAL" "$BASE_TOTAL")
	RATIO_CPU=$(ratio "$(stepcpu total)" "$(stepcpu baseline)")
	RATIO_RUNS=$(runratios total baseline)
	echo "batchlake / baseline: ${RATIO}x wall, ${RATIO_CPU}x cpu (target: <= 3.00)${RATIO_RUNS:+; wall, run by run: $RATIO_RUNS}"
fi
if [[ -n $BL_TOTAL && -n $PY_TOTAL ]]; then
	PY_RATIO=$(ratio "$PY_TOTAL" "$BL_TOTAL")
	PY_RATIO_CPU=$(ratio "$(stepcpu python)" "$(stepcpu total)")
	PY_RATIO_RUNS=$(runratios python total)
	echo "Python reconciler / batchlake: ${PY_RATIO}x wall, ${PY_RATIO_CPU}x cpu (target: >= 2.50; batchlake uses every core, Python one)${PY_RATIO_RUNS:+; wall, run by run: $PY_RATIO_RUNS}"
fi
if [[ -n $BL_TOTAL && -n $FLOOR_TOTAL ]]; then
	FLOOR_RATIO=$(ratio "$BL_TOTAL" "$FLOOR_TOTAL")
	echo "batchlake / contract floor wall time: ${FLOOR_RATIO}x (the same tables made by DuckDB alone)"
fi
# partitions: their total cpu against one reconcile's, and the most bytes
# one partition read against one reconcile's (target: <= 1.30 and <= 0.25).
PART_RATIO_CPU="" PART_BYTES=""
if [[ -s $WORK/samples/partitions && -s $WORK/inner/rchar-reconcile ]]; then
	PART_RATIO_CPU=$(ratio "$(stepcpu partitions)" "$(stepcpu reconcile)")
	single_rchar=$(median <"$WORK/inner/rchar-reconcile")
	PART_BYTES=$(ratio "$(maxof <"$WORK/inner/rchar-partitions")" "$single_rchar")
	echo "$PARTITIONS partitions in turn / one reconcile: ${PART_RATIO_CPU}x cpu (target: <= 1.30)"
	echo "bytes read per partition (rchar, MB): $(awk '{printf "%s%.0f", (NR > 1 ? " " : ""), $1 / 1e6}' "$WORK/inner/rchar-partitions"); one reconcile $(awk -v b="$single_rchar" 'BEGIN {printf "%.0f", b / 1e6}'); the most, ${PART_BYTES}x of it (target: <= 0.25)"
fi
# plan and ingest: MB/s of JSONL read (target: >= 400 MB/s each).
if [[ -z $SKIP_BATCHLAKE && -s $WORK/samples/plan && -s $WORK/samples/ingest ]]; then
	mbs() { awk -v b="$1" -v w="$2" 'BEGIN {printf "%.0f", (w > 0 ? b / 1e6 / w : 0)}'; }
	echo "MB/s of JSONL: plan $(mbs "$B_IN" "$(stepwall plan)"), ingest $(mbs "$B_RES" "$(stepwall ingest)") (target: >= 400 each)"
fi
# The memory target: peak RSS per process <= 1 GiB at 1M and 10M (a common
# limit of an Airflow or Argo task's pod).
RSS_TARGET=""
case $N in
1000000 | 10000000) RSS_TARGET=1024 ;;
esac
RSS_MET=""
if [[ -z $SKIP_BATCHLAKE && -n $RSS_TARGET ]]; then
	line="peak RSS per process (target: <= $RSS_TARGET MiB):"
	RSS_MET=true
	for st in plan ingest reconcile report accepted; do
		if [[ ! -s $WORK/samples/$st && ($st == report || $st == accepted) ]]; then
			continue
		fi
		if [[ ! -s $WORK/samples/$st ]]; then
			line+=" $st not measured,"
			RSS_MET=false
			continue
		fi
		mib=$(awk -v k="$(steprss "$st")" 'BEGIN {printf "%.0f", k / 1024}')
		if ((mib <= RSS_TARGET)); then
			line+=" $st $mib met,"
		else
			line+=" $st $mib NOT MET,"
			RSS_MET=false
		fi
	done
	echo "${line%,}"
fi
# A collect step runs in a smaller pod than the others (deploy/argo, docs/deploy.md).
COLLECT_RSS_TARGET=512
if [[ -s $WORK/samples/collect ]]; then
	mib=$(awk -v k="$(steprss collect)" 'BEGIN {printf "%.0f", k / 1024}')
	if ((mib <= COLLECT_RSS_TARGET)); then met=met; else met="NOT MET"; RSS_MET=false; fi
	echo "peak RSS of one batch output's ingest (a collect step; target: <= $COLLECT_RSS_TARGET MiB, the collect pod's limit): $mib $met"
fi

# A machine-readable summary beside the samples.
jq -n --argjson n "$N" --argjson seed "$SEED" --argjson runs "$RUNS" --argjson cores "$(nproc)" \
	--argjson bytes "$B_ALL" --arg bl "${BL_TOTAL:-}" --arg base "${BASE_TOTAL:-}" --arg ratio "${RATIO:-}" \
	--arg floor "${FLOOR_TOTAL:-}" --arg floor_ratio "${FLOOR_RATIO:-}" --arg rss_met "${RSS_MET:-}" \
	--arg ratio_cpu "${RATIO_CPU:-}" --arg py "${PY_TOTAL:-}" --arg py_ratio "${PY_RATIO:-}" --arg py_ratio_cpu "${PY_RATIO_CPU:-}" \
	--arg ratio_runs "${RATIO_RUNS:-}" --arg py_ratio_runs "${PY_RATIO_RUNS:-}" \
	--arg part_ratio_cpu "${PART_RATIO_CPU:-}" --arg part_bytes "${PART_BYTES:-}" \
	--arg gen_wall "${GEN_WALL:-}" --arg gen_rss "${GEN_RSS:-}" --arg gen_cpu "${GEN_CPU:-}" --argjson mismatches "$MISMATCHES" \
	'{n: $n, seed: $seed, runs: $runs, cores: $cores, bytes: $bytes,
	  generate: (if $gen_wall == "" then null else {wall_s: ($gen_wall | tonumber), rss_kib: ($gen_rss | tonumber), cpu_s: ($gen_cpu | tonumber)} end),
	  batchlake_total_s: (if $bl == "" then null else ($bl | tonumber) end),
	  baseline_total_s: (if $base == "" then null else ($base | tonumber) end),
	  ratio: (if $ratio == "" then null else ($ratio | tonumber) end),
	  ratio_cpu: (if $ratio_cpu == "" then null else ($ratio_cpu | tonumber) end),
	  ratio_runs: (if $ratio_runs == "" then null else ($ratio_runs | split(", ") | map(tonumber)) end),
	  python_total_s: (if $py == "" then null else ($py | tonumber) end),
	  python_ratio: (if $py_ratio == "" then null else ($py_ratio | tonumber) end),
	  python_ratio_cpu: (if $py_ratio_cpu == "" then null else ($py_ratio_cpu | tonumber) end),
	  python_ratio_runs: (if $py_ratio_runs == "" then null else ($py_ratio_runs | split(", ") | map(tonumber)) end),
	  floor_total_s: (if $floor == "" then null else ($floor | tonumber) end),
	  floor_ratio: (if $floor_ratio == "" then null else ($floor_ratio | tonumber) end),
	  rss_target_met: (if $rss_met == "" then null else ($rss_met == "true") end),
	  partitions_ratio_cpu: (if $part_ratio_cpu == "" then null else ($part_ratio_cpu | tonumber) end),
	  partition_bytes_ratio: (if $part_bytes == "" then null else ($part_bytes | tonumber) end),
	  mismatches: $mismatches}' >"$WORK/bench.json.tmp"
for f in "$WORK"/samples/*; do
	jq -R -s --arg step "${f##*/}" '{($step): [split("\n")[] | select(length > 0) | split(" ") | {wall_s: (.[0] | tonumber), rss_kib: ((.[1] // "0") | tonumber), cpu_s: ((.[2] // "0") | tonumber)}]}' "$f"
done | jq -s --slurpfile head "$WORK/bench.json.tmp" '$head[0] + {samples: (add // {})}' >"$WORK/bench.json"
rm -f "$WORK/bench.json.tmp"
echo "samples, logs and bench.json in $WORK"

if ((MISMATCHES > 0)); then
	echo
	echo "!!!!!!!! MISMATCH: $MISMATCHES check(s) failed against $DATA/truth.json or the first plan — see above" >&2
	exit 3
fi
if ((FAILED)); then
	die "a step failed; see the logs in $WORK"
fi
