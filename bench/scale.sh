#!/usr/bin/env bash
# bench/scale.sh — how batchlake's time grows from 1M to 10M records
# (bench/README.md, "Scaling").
#
# In one session, so that both sizes see the same machine: RUNS runs at SMALL
# records and BIG_RUNS at BIG, the small ones spread around the big ones, each
# on a fresh lake, of
#   batchlake plan      --lake L --provider openai --input input.jsonl --tenant bench --prompt-version v1
#   batchlake ingest    --lake L --job JOB --output output.jsonl --errors errors.jsonl
#   batchlake reconcile --lake L --job JOB          (exit 10 or 11 is expected)
# under /usr/bin/time, each step's input files read into the page cache just
# before it (at 10M the three files do not all stay there: plan writes as
# much again). Every reconcile report is checked against truth.json. Prints
# each step's median wall and cpu seconds at both sizes, the ratio BIG /
# SMALL per step and for the total (the target: at most 1.1 x the ratio of
# the sizes, 11 x for 10 x the records), and each step's peak RSS at BIG
# against 1 GiB.
#
# The data are bench/run.sh's: DATA_SMALL and DATA_BIG hold (or get) blgen's
# batch of SMALL and BIG records, seed SEED; reused when truth.json matches.
#
# Environment (all optional):
#   SMALL=1000000 BIG=10000000      the two sizes
#   RUNS=3 BIG_RUNS=1               runs at each
#   SEED=1
#   DATA_SMALL=./bench-data DATA_BIG=./bench-data-10m
#   WORK=$DATA_BIG/scale            lakes (removed after each run), logs and times
#   BIN=./bin/bench                 where blgen and batchlake are built
#   BATCHLAKE=path                  measure this binary instead of building one
#   TMP=$WORK/tmp                   every step's --tmp-dir (reconcile's spill files)
#   PRINT_ONLY=1                    print the table of the samples already in $WORK
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
SMALL=${SMALL:-1000000}
BIG=${BIG:-10000000}
RUNS=${RUNS:-3}
BIG_RUNS=${BIG_RUNS:-1}
SEED=${SEED:-1}
DATA_SMALL=${DATA_SMALL:-$ROOT/bench-data}
DATA_BIG=${DATA_BIG:-$ROOT/bench-data-10m}
WORK=${WORK:-$DATA_BIG/scale}
BIN=${BIN:-$ROOT/bin/bench}
TMP=${TMP:-$WORK/tmp}
TIME=/usr/bin/time
GIB_KB=1048576

die() { echo "bench-scale: $*" >&2; exit 1; }
log() { echo "bench-scale: $*" >&2; }

for v in SMALL BIG RUNS BIG_RUNS SEED; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, got '${!v}'"
done
[[ -x $TIME ]] || die "$TIME is missing (Debian/Ubuntu: apt-get install time)"
command -v jq >/dev/null || die "jq is missing (Debian/Ubuntu: apt-get install jq)"

mkdir -p "$BIN" "$WORK" "$TMP"
if [[ -z ${PRINT_ONLY:-} ]]; then
	go build -o "$BIN/blgen" ./cmd/blgen
	if [[ -n ${BATCHLAKE:-} ]]; then
		[[ -x $BATCHLAKE ]] || die "BATCHLAKE=$BATCHLAKE is not an executable"
	else
		log "building batchlake into $BIN"
		go build -tags duckdb_arrow -o "$BIN/batchlake" ./cmd/batchlake
		BATCHLAKE=$BIN/batchlake
	fi
fi

# data N DIR: make sure DIR holds blgen's batch of N records.
data() {
	local n=$1 dir=$2 gen
	gen=$("$BIN/blgen" -version)
	if [[ -f $dir/truth.json ]] && [[ $(jq -r '"\(.n) \(.seed) \(.generator)"' "$dir/truth.json") == "$n $SEED $gen" ]]; then
		log "reusing $dir (n=$n seed=$SEED)"
		return
	fi
	log "generating $n records into $dir"
	mkdir -p "$dir"
	"$BIN/blgen" -n "$n" -seed "$SEED" -out "$dir" >/dev/null || die "blgen failed"
}

# step NAME SIZE RUN CMD...: time CMD; appends "size name run wall cpu rss_kb" to $WORK/samples.
step() {
	local name=$1 size=$2 r=$3 out=$WORK/$2-$3-$1 rc=0
	shift 3
	"$TIME" -f "%e %U %S %M" -o "$out.time" "$@" >"$out.json" 2>"$out.log" || rc=$?
	case $name:$rc in
	plan:0 | ingest:0 | reconcile:0 | reconcile:10 | reconcile:11) ;;
	*) cat "$out.log" >&2; die "$name at $size records exited $rc (see $out.log)" ;;
	esac
	awk -v s="$size" -v n="$name" -v r="$r" 'END { printf "%s %s %s %s %.2f %s\n", s, n, r, $1, $2 + $3, $4 }' "$out.time" >>"$WORK/samples"
}

MISMATCHES=0
# one SIZE DIR RUN: plan, ingest and reconcile on a fresh lake.
one() {
	local size=$1 dir=$2 r=$3 lake=$WORK/lake job k got want
	rm -rf "$lake"
	log "$size records, run $r: plan"
	cat "$dir/input.jsonl" >/dev/null
	step plan "$size" "$r" "$BATCHLAKE" plan --lake "$lake" --tmp-dir "$TMP" --provider openai \
		--input "$dir/input.jsonl" --tenant bench --prompt-version v1
	job=$(jq -r .job_key "$WORK/$size-$r-plan.json")
	log "$size records, run $r: ingest"
	cat "$dir/output.jsonl" "$dir/errors.jsonl" >/dev/null
	step ingest "$size" "$r" "$BATCHLAKE" ingest --lake "$lake" --tmp-dir "$TMP" --job "$job" \
		--output "$dir/output.jsonl" --errors "$dir/errors.jsonl"
	log "$size records, run $r: reconcile"
	step reconcile "$size" "$r" "$BATCHLAKE" reconcile --lake "$lake" --tmp-dir "$TMP" --job "$job"
	for k in expected succeeded quality_failed failed_retryable failed_permanent missing unknown duplicate quarantined retry_records closed; do
		got=$(jq -c --arg k "$k" '.[$k]' "$WORK/$size-$r-reconcile.json")
		want=$(jq -c --arg k "$k" '.[$k]' "$dir/truth.json")
		if [[ $got != "$want" ]]; then
			echo "!!!!!!!! MISMATCH  $size records run $r: $k = $got, truth.json says $want" >&2
			MISMATCHES=$((MISMATCHES + 1))
		fi
	done
	rm -rf "$lake"
}

# room DIR: fail early unless the lake and spill files of a run on DIR's batch fit.
# A reconciled lake held 1.16 x its batch's files at 1M (the shards, the
# archived results, the tables, the retry shards), and reconcile's spill
# files peaked at 0.59 x at 10M.
room() {
	local dir=$1 bytes lake_need tmp_need
	bytes=$(($(stat -c %s "$dir/input.jsonl") + $(stat -c %s "$dir/output.jsonl") + $(stat -c %s "$dir/errors.jsonl")))
	lake_need=$((bytes * 12 / 10)) tmp_need=$((bytes * 7 / 10))
	if [[ $(stat -c %d "$WORK") == $(stat -c %d "$TMP") ]]; then
		lake_need=$((lake_need + tmp_need)) tmp_need=0
	fi
	avail() { df -P -B1 "$1" | awk 'NR == 2 { print $4 }'; }
	(($(avail "$WORK") >= lake_need)) || die "$WORK has $(($(avail "$WORK") / 1000000)) MB free; a run at $BIG records needs about $((lake_need / 1000000)) MB (the lake$( ((tmp_need > 0)) || echo " and the spill files in TMP"))"
	((tmp_need == 0 || $(avail "$TMP") >= tmp_need)) || die "$TMP has $(($(avail "$TMP") / 1000000)) MB free; reconcile's spill files at $BIG records need about $((tmp_need / 1000000)) MB"
}

if [[ -z ${PRINT_ONLY:-} ]]; then
	data "$SMALL" "$DATA_SMALL"
	data "$BIG" "$DATA_BIG"
	room "$DATA_BIG"
	: >"$WORK/samples"
	# The small runs are spread before, between and after the big ones
	# (RUNS=3, BIG_RUNS=1: small, small, big, small), so that the machine's
	# drift over the session, a tenth or more within the hour on a shared
	# host, falls on both sizes alike instead of on the ratio.
	s=0
	for ((b = 0; b <= BIG_RUNS; b++)); do
		for (( ; s < (RUNS * (b + 1) + BIG_RUNS) / (BIG_RUNS + 1); s++)); do one "$SMALL" "$DATA_SMALL" $((s + 1)); done
		if ((b < BIG_RUNS)); then one "$BIG" "$DATA_BIG" $((b + 1)); fi
	done
fi
[[ -s $WORK/samples ]] || die "no samples in $WORK/samples"

# The table: per step (and for the three together, per run) the median at
# each size, the ratio of the medians, and the larger size's peak RSS.
echo "batchlake scale: $SMALL and $BIG records (seed $SEED), $RUNS and $BIG_RUNS runs, $(nproc) cores, samples of $(date -u -r "$WORK/samples" +%Y-%m-%dT%H:%MZ)"
awk -v small="$SMALL" -v big="$BIG" -v gib="$GIB_KB" '
function size(n) { return n % 1000000 == 0 ? n / 1000000 "M" : n % 1000 == 0 ? n / 1000 "k" : n }
function median(list,   n, a, i, j, t) {
	n = split(list, a, " ")
	for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]; a[j + 1] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
	key = $1 SUBSEP $2
	wall[key] = wall[key] " " $4; cpu[key] = cpu[key] " " $5
	if ($6 > rss[key]) rss[key] = $6
	tw[$1 SUBSEP $3] += $4; tc[$1 SUBSEP $3] += $5
	if ($6 > trss[$1]) trss[$1] = $6
}
END {
	for (k in tw) { split(k, p, SUBSEP); wall[p[1] SUBSEP "total"] = wall[p[1] SUBSEP "total"] " " tw[k]; cpu[p[1] SUBSEP "total"] = cpu[p[1] SUBSEP "total"] " " tc[k] }
	rss[small SUBSEP "total"] = trss[small]; rss[big SUBSEP "total"] = trss[big]
	la = size(small); lb = size(big)
	printf "%-10s %11s %11s %11s %11s %8s %8s %13s\n", "step", "wall s " la, "cpu s " la, "wall s " lb, "cpu s " lb, "wall x", "cpu x", "RSS MiB " lb
	n = split("plan ingest reconcile total", steps, " ")
	for (i = 1; i <= n; i++) {
		s = steps[i]; a = small SUBSEP s; b = big SUBSEP s
		ws = median(wall[a]); cs = median(cpu[a]); wb = median(wall[b]); cb = median(cpu[b])
		verdict = rss[b] <= gib ? "<= 1 GiB" : "OVER 1 GiB"
		printf "%-10s %11.2f %11.2f %11.2f %11.2f %8.2f %8.2f %13.0f %s\n", s, ws, cs, wb, cb, wb / ws, cb / cs, rss[b] / 1024, verdict
	}
	# The target allows a tenth more than the records grow (11 x for 10 x).
	ratio = median(wall[big SUBSEP "total"]) / median(wall[small SUBSEP "total"]); limit = 1.1 * big / small
	printf "target: %s records in at most %.3g x the time of %s: %.2f x, %s\n", big, limit, small, ratio, ratio <= limit ? "met" : "NOT MET"
}' "$WORK/samples"
echo "samples (size step run wall cpu rss_kb): $WORK/samples"
if ((MISMATCHES > 0)); then
	echo "bench-scale: $MISMATCHES mismatch(es) against truth.json" >&2
	exit 3
fi
