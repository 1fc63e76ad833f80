#!/bin/sh
# timed.sh LABEL COMMAND...: run COMMAND (its output discarded) and print its
# wall time and cpu seconds, and what the machine was doing meanwhile: the
# share of the run during which some task waited for the disk (Linux pressure
# stall information, /proc/pressure/io) and the cpu seconds of the whole
# machine. On a shared machine the same work can take half as long again;
# when the disk wait is high, or the machine's cpu seconds are well above the
# command's, the wall time says more about the neighbours than about the code.
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
tick=$(getconf CLK_TCK 2>/dev/null || echo 100)
out=$(mktemp)
before=$(snap)
start=$(date +%s.%N)
/usr/bin/env time -f "%U %S" -o "$out" sh -c '"$@" >/dev/null' timed "$@"
rc=$?
end=$(date +%s.%N)
after=$(snap)
# time writes "Command exited with non-zero status N" first on failure.
read -r user sys <<EOF
$(tail -n 1 "$out")
EOF
rm -f "$out"
echo "$before $after $start $end $user $sys $tick" | awk -v label="$label" -v rc="$rc" '{
	wall = $6 - $5
	printf "%s: %.1f s wall, %.1f cpu s (%.1f user, %.1f sys)", label, wall, $7 + $8, $7, $8
	if ($3 > 0 && wall > 0)
		printf "; meanwhile the machine: %.1f cpu s in all, some task waiting on the disk %.0f %% of the time", ($4 - $2) / $9, 100 * ($3 - $1) / 1e6 / wall
	if (rc != 0)
		printf " (exit %d)", rc
	printf "\n"
}'
exit $rc
