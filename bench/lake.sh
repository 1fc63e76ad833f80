#!/usr/bin/env bash
# bench/lake.sh — lake-wide queries over a lake of many small jobs (make bench-lake).
#
# Grows one lake with bllake (bench/lakegen: jobs made in-process the way
# `batchlake run --provider sim` makes them, 5 records each, over 10 tenants;
# a first attempt with its retry children) through the sizes in STEPS, up to
# JOBS jobs, and at each size times, as whole processes:
#   batchlake sql "SELECT tenant, sum(cost_usd) FROM costs GROUP BY 1 ORDER BY 1"
#   batchlake sql "SELECT tenant, final_state, count(*), sum(cost_usd) FROM records GROUP BY ALL ORDER BY ALL"
# read live (the lake's compactions moved aside), then `batchlake compact`,
# then the same two queries again over the compaction, and `batchlake verify`;
# and, live and compacted, `batchlake report --job` of the lake's newest first
# attempt, which reads only the jobs that can hold its records (its family in
# these lakes, each job with a source version of its own, or with business
# keys of its own under SAME_VERSIONS), so its time should not grow with the
# lake.
# The answers with and without the compaction must be byte for byte the same
# and verify must pass, or the run fails (exit 3). Later sizes keep the
# earlier compaction, so their live row shows a lake whose newest jobs are not
# in a compaction yet, and compacting again writes their segment (the
# compaction's segments are printed beside compact's time).
#
# After the table it prints whether the compacted queries at the largest
# size met the target (<= 2 s wall each).
#
# Environment (all optional):
#   JOBS=10000           largest lake (jobs, i.e. manifests)
#   STEPS="1 100 1000 10000"   sizes measured (those <= JOBS)
#   RUNS=3               runs per query (median printed)
#   LIVE_RUNS=$RUNS      runs per live query (a live query reads every job:
#                        minutes a run at 10,000 jobs)
#   LAKE=./bench-lake    the lake (kept and grown on the next run)
#   WORKERS=2            jobs bllake makes at once
#   NICE=10              bllake's niceness (it takes both cores for minutes)
#   SAME_VERSIONS=1      jobs planned as a daily pipeline plans them: one prompt
#                        version, no source version, each job's business keys its
#                        own (bllake -same-versions); the report's job then shares
#                        its versions with every job of its tenant
#   BIN=./bin/bench      where batchlake and bllake are built
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
JOBS=${JOBS:-10000}
STEPS=${STEPS:-"1 100 1000 10000"}
RUNS=${RUNS:-3}
LIVE_RUNS=${LIVE_RUNS:-$RUNS}
NICE=${NICE:-10}
LAKE=${LAKE:-$ROOT/bench-lake}
WORKERS=${WORKERS:-2}
BIN=${BIN:-$ROOT/bin/bench}
TIME=/usr/bin/time
Q_COSTS="SELECT tenant, sum(cost_usd) FROM costs GROUP BY 1 ORDER BY 1"
Q_RECORDS="SELECT tenant, final_state, count(*), sum(cost_usd) FROM records GROUP BY ALL ORDER BY ALL"

die() { echo "bench-lake: $*" >&2; exit 1; }
log() { echo "bench-lake: $*" >&2; }
[[ -x $TIME ]] || die "$TIME is missing (Debian/Ubuntu: apt-get install time)"

mkdir -p "$BIN"
log "building batchlake and bllake into $BIN"
go build -tags duckdb_arrow -o "$BIN/batchlake" ./cmd/batchlake
go build -tags duckdb_arrow -o "$BIN/bllake" ./cmd/bllake
BL=$BIN/batchlake
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$LAKE"

jobs_in_lake() { { find "$LAKE/manifests" -name '*.json' 2>/dev/null || true; } | wc -l; }
inputs_in_lake() { cat "$LAKE.inputs" 2>/dev/null || echo 0; }

# newest_first_attempt: the key of the lake's newest job without a parent.
newest_first_attempt() {
	"$BL" jobs --lake "$LAKE" | python3 -c 'import json, sys
print(next(j["job_key"] for j in json.load(sys.stdin)["jobs"] if not j.get("parent_job_key")))'
}

# grow N: add inputs until the lake holds at least N jobs.
grow() {
	local want=$1 have next
	while (( $(jobs_in_lake) < want )); do
		have=$(inputs_in_lake)
		next=$(( have + ( want - $(jobs_in_lake) + 1 ) / 2 ))
		(( next > have )) || next=$(( have + 1 ))
		nice -n "$NICE" "$BIN/bllake" -lake "$LAKE" -from "$have" -to "$next" -workers "$WORKERS" ${SAME_VERSIONS:+-same-versions} >/dev/null
		echo "$next" >"$LAKE.inputs"
	done
}

# timeq NAME QUERY [RUNS]: run the query RUNS times, print "median-wall
# median-cpu", keep the output of the last run in $WORK/NAME.out. A QUERY of
# "report JOB" times batchlake report --job JOB instead.
timeq() {
	local name=$1 q=$2 runs=${3:-$RUNS} walls=() cpus=() cmd
	if [[ $q == report\ * ]]; then cmd=(report --lake "$LAKE" --job "${q#report }"); else cmd=(sql --lake "$LAKE" --format csv "$q"); fi
	for ((r = 0; r < runs; r++)); do
		"$TIME" -f "%e %U %S" -o "$WORK/t" "$BL" "${cmd[@]}" >"$WORK/$name.out" 2>"$WORK/$name.err" ||
			{ cat "$WORK/$name.err" >&2; die "${cmd[0]} failed: $q"; }
		walls+=("$(awk '{print $1}' "$WORK/t")")
		cpus+=("$(awk '{print $2 + $3}' "$WORK/t")")
	done
	echo "$(printf '%s\n' "${walls[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')" \
		"$(printf '%s\n' "${cpus[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
}

printf '%-8s %-9s %-16s %-16s %-16s %-16s\n' jobs query "live wall/cpu s" "compact wall/cpu" "compact s (segs)" "verify wall/cpu s"
status=0
for n in $STEPS; do
	(( n <= JOBS )) || continue
	grow "$n"
	have=$(jobs_in_lake)
	# Live: the compactions moved aside.
	if [[ -d $LAKE/compactions ]]; then mv "$LAKE/compactions" "$WORK/compactions"; fi
	live_c=$(timeq live-costs "$Q_COSTS" "$LIVE_RUNS"); live_r=$(timeq live-records "$Q_RECORDS" "$LIVE_RUNS")
	job=$(newest_first_attempt)
	live_j=$(timeq live-report "report $job")
	if [[ -d $WORK/compactions ]]; then mv "$WORK/compactions" "$LAKE/compactions"; fi
	"$TIME" -f "%e" -o "$WORK/t" "$BL" compact --lake "$LAKE" >"$WORK/compact.json" 2>"$WORK/compact.err" || { cat "$WORK/compact.err" >&2; die "compact failed"; }
	compact_s="$(cat "$WORK/t") ($(python3 -c 'import json, sys; print(json.load(sys.stdin)["segments"])' <"$WORK/compact.json"))"
	comp_c=$(timeq comp-costs "$Q_COSTS"); comp_r=$(timeq comp-records "$Q_RECORDS"); comp_j=$(timeq comp-report "report $job")
	if "$TIME" -f "%e/%U/%S" -o "$WORK/t" "$BL" verify --lake "$LAKE" >"$WORK/verify.json" 2>"$WORK/verify.err"; then
		verify_s=$(awk -F/ '{printf "%s/%.2f", $1, $2 + $3}' "$WORK/t")
	else
		verify_s="FAILED"; status=3; tail -5 "$WORK/verify.err" >&2
	fi
	for q in costs records report; do
		if ! cmp -s "$WORK/live-$q.out" "$WORK/comp-$q.out"; then
			echo "!!!!!!!! MISMATCH: $q differs with the compaction at $have jobs" >&2
			diff "$WORK/live-$q.out" "$WORK/comp-$q.out" | head >&2 || true
			status=3
		fi
	done
	printf '%-8s %-9s %-16s %-16s %-16s %-16s\n' "$have" costs "${live_c/ //}" "${comp_c/ //}" "$compact_s" "$verify_s"
	printf '%-8s %-9s %-16s %-16s\n' "$have" records "${live_r/ //}" "${comp_r/ //}"
	printf '%-8s %-9s %-16s %-16s\n' "$have" report "${live_j/ //}" "${comp_j/ //}"
	last="$have ${comp_c%% *} ${comp_r%% *}"
done
if [[ -n ${last:-} ]]; then
	read -r have wc wr <<<"$last"
	verdict=$(awk -v c="$wc" -v r="$wr" 'BEGIN { print (c <= 2 && r <= 2) ? "met" : "NOT met" }')
	echo "target (compacted, <= 2 s wall each) at $have jobs: $verdict (costs ${wc} s, records ${wr} s)"
fi
exit $status
