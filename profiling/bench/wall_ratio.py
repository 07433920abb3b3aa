#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Whole-process wall and CPU ratio of the churn, the profiler against a baseline.

Interleaved rounds of `hyperfine -N --runs R` over named configurations
of `mimprof-bench-pairs PAIRS THREADS`, the order rotated per round (a b c,
b c a, c a b, ...). Per round: each configuration's median of its R runs,
divided by the first configuration's (the reference: raw mimalloc,
the distribution's libmimalloc.so.2) in the same round; then the median of the rounds and
their min..max. CPU is hyperfine's user + system (its mean over the R runs). The report at
exit is part of every run (MIMPROF_OUTPUT points at a scratch directory).

    wall_ratio.py --pairs W --threads 1 --rounds 7 --runs 3 \\
        raw=/usr/lib/x86_64-linux-gnu/libmimalloc.so.2 \\
        ov=/path/libmimprof-allocator-override.so \\
        now=/path/libmimprof-preload-mimalloc.so base=/other/...so

Prints a Markdown table and the reference's own spread (how noisy the
machine was). A program, not a test: nothing is asserted.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", required=True, help="mimprof-bench-pairs executable")
    ap.add_argument("--n", type=int, default=30000000, help="pairs per thread")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("configs", nargs="+", help="NAME=PRELOAD (the first is the reference)")
    a = ap.parse_args()
    cfg = [c.split("=", 1) for c in a.configs]
    tmp = tempfile.mkdtemp(prefix="wall_ratio.")
    out = os.path.join(tmp, "out") + "/"
    os.makedirs(out)
    wall = {n: [] for n, _ in cfg}
    cpu = {n: [] for n, _ in cfg}
    load = [os.getloadavg()[0]]
    for r in range(a.rounds):
        order = cfg[r % len(cfg):] + cfg[:r % len(cfg)]
        js = os.path.join(tmp, f"r{r}.json")
        cmd = ["hyperfine", "-N", "--runs", str(a.runs), "--style", "none", "--export-json", js]
        for n, pre in order:
            cmd += ["-n", n, f"env MIMPROF_OUTPUT={out} LD_PRELOAD={pre} {a.pairs} {a.n} {a.threads}"]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        res = {x["command"]: x for x in json.load(open(js))["results"]}
        for n, _ in cfg:
            x = res[n]
            wall[n].append(statistics.median(x["times"]))
            cpu[n].append(x["user"] + x["system"])  # hyperfine gives their means only
        load.append(os.getloadavg()[0])
    ref = cfg[0][0]
    print(f"{a.threads} thread(s), {a.n} pairs each, {a.rounds} rounds x {a.runs} runs; "
          f"load average (1 min) {min(load):.1f}..{max(load):.1f}")
    print(f"{ref}: wall {min(wall[ref]):.3f}..{max(wall[ref]):.3f} s (round medians), "
          f"CPU {min(cpu[ref]):.3f}..{max(cpu[ref]):.3f} s")
    print()
    print(f"| ratio to {ref} | wall: median (min..max) | CPU: median (min..max) |")
    print("|---|---:|---:|")
    for n, _ in cfg[1:]:
        w = [x / y for x, y in zip(wall[n], wall[ref])]
        c = [x / y for x, y in zip(cpu[n], cpu[ref])]
        print(f"| {n} | {statistics.median(w):.3f} ({min(w):.2f}..{max(w):.2f}) "
              f"| {statistics.median(c):.3f} ({min(c):.2f}..{max(c):.2f}) |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
