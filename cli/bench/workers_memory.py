#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Private memory per forked worker (issue: the profiler's cost must not
multiply by the number of processes): mimprof-test-forked-workers with N
workers, each holding BYTES, run plain with mimalloc alone (the
allocator's override object), under `mimprof run --no-collector` (every
process symbolizes and writes itself) and under `mimprof run` (the
collector); after at least two report periods, each worker's
/proc/PID/smaps_rollup Private_Dirty (kB) is read and averaged.

usage: workers_memory.py MIMPROF WORKERS ALLOCATOR_OVERRIDE_SO [N [BYTES]]"""
import os
import subprocess
import sys
import tempfile
import time

import smaps


def measure(cmd, env=None, wait=2.5):
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, env=env)
    pids = []
    for line in p.stdout:
        if line.startswith("worker "):
            pids.append(int(line.split()[1]))
        if line.strip() == "ready":
            break
    time.sleep(wait)
    rows = [smaps.rollup(pid) for pid in pids]
    p.communicate("\n", timeout=120)
    return smaps.mean(rows)


def main():
    mimprof, workers, override = sys.argv[1:4]
    n = sys.argv[4] if len(sys.argv) > 4 else "50"
    nbytes = sys.argv[5] if len(sys.argv) > 5 else str(1 << 20)
    prog = [workers, n, nbytes]
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, LD_PRELOAD=override)
        rows = [("mimalloc alone", measure(prog, env)),
                ("mimprof run --no-collector", measure(
                    [mimprof, "run", "-q", "-e", "1s", "-o", d + "/a", "--no-collector", "--"] + prog)),
                ("mimprof run (collector)", measure(
                    [mimprof, "run", "-q", "-e", "1s", "-o", d + "/b", "--"] + prog))]
    smaps.print_table("per worker (kB)", rows)


if __name__ == "__main__":
    main()
