#!/bin/sh
# timed.sh LABEL COMMAND...: run COMMAND (its output discarded) and print its
# wall time and cpu seconds, and what the machine was doing meanwhile: the
# share of the run during which some task waited for the disk (Linux pressure
# stall information, /proc/pressure/io) and the cpu seconds of the whole
# machine. On a shared machine the same work can take half as long again;
# when the disk wait is high, or the machine's cpu seconds are well above the
# command's, the wall time says more about the neighbours than about the code.
# The host's speed itself changes from minute to minute (the same tests took
# 80 cpu seconds and then 117, back to back), so a fixed reference workload
# (sha256 of 128 MiB of zeros) is timed before and after: compare runs by it.
# Exits with COMMAND's status.
label=$1
shift
snap() {
	# io "some" stall total in microseconds, then the machine's busy cpu ticks
	# (user, nice, system, irq, softirq, steal) from /proc/stat.
	io=$(awk '/^some/ { sub("total=", "", $5); print $5 }' /proc/pressure/io 2>/dev/null)
	busy=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat 2>/dev/null)
	echo "${io:-0} ${busy:-0}"
}
reference() {
	/usr/bin/env time -f "%U %S" sh -c 'head -c 134217728 /dev/zero | sha256sum >/dev/null' 2>&1 |
		awk '{ printf "%.2f", $1 + $2 }'
}
tick=$(getconf CLK_TCK 2>/dev/null || echo 100)
ref0=$(reference)
out=$(mktemp)
before=$(snap)
start=$(date +%s.%N)
/usr/bin/env time -f "%U %S" -o "$out" sh -c '"$@" >/dev/null' timed "$@"
rc=$?
end=$(date +%s.%N)
after=$(snap)
ref1=$(reference)
# time writes "Command exited with non-zero status N" first on failure.
read -r user sys <<EOF
$(tail -n 1 "$out")
EOF
rm -f "$out"
echo "$before $after $start $end $user $sys $tick" | awk -v label="$label" -v rc="$rc" -v ref0="$ref0" -v ref1="$ref1" '{
	wall = $6 - $5
	printf "%s: %.1f s wall, %.1f cpu s (%.1f user, %.1f sys)", label, wall, $7 + $8, $7, $8
	if ($3 > 0 && wall > 0)
		printf "; meanwhile the machine: %.1f cpu s in all, some task waiting on the disk %.0f %% of the time", ($4 - $2) / $9, 100 * ($3 - $1) / 1e6 / wall
	printf "; the reference workload took %s cpu s before, %s after", ref0, ref1
	if (rc != 0)
		printf " (exit %d)", rc
	printf "\n"
}'
exit $rc
