#!/usr/bin/env python3
"""procio.py OUT CMD...: run CMD and write to OUT, as JSON, its I/O counters
from /proc/<pid>/io (read when it exits, before it is reaped: rchar counts
every byte its read and pread calls returned, from the page cache or not)
and its user + system cpu seconds. Exits with CMD's exit code. Linux only.
"""
import json
import os
import subprocess
import sys

out = sys.argv[1]
p = subprocess.Popen(sys.argv[2:])
os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
io = {}
with open(f"/proc/{p.pid}/io") as f:
    for line in f:
        k, v = line.split(":")
        io[k] = int(v)
_, status, ru = os.wait4(p.pid, 0)
rc = os.waitstatus_to_exitcode(status)
with open(out, "w") as f:
    json.dump({"rc": rc, "cpu_s": ru.ru_utime + ru.ru_stime, **io}, f)
sys.exit(rc)
