#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The overhead of `mimprof run` on real programs nobody here wrote.

Each program runs under the plain mimalloc preload (the baseline:
libmimprof-allocator-override.so) and under `mimprof run` (default
interval 512 KiB, a report every 10 s and at exit), in A B B A order per
round, so slow drifts of a shared machine cancel. The figure is CPU time
(user + system of the whole process tree, from wait4), which does not
count time the process spent descheduled; the verdict is the median of
the per-round ratios. Not a test: it prints a Markdown table.

    cli/bench/real_programs.py [BUILD_DIR] [ROUNDS]

BUILD_DIR defaults to build/ (the workspace tree of `./dev build`),
ROUNDS to 8 (each program runs 2 x ROUNDS times per side).
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PY_SCRIPT = r"""
import json
# An allocation-heavy interpreter workload: build, serialise, parse and
# drop nested records (dicts, lists, strings, ints), keeping a rolling
# window alive as a service's cache would.
keep = []
for round in range(20):
    recs = [{"id": i, "name": "user-%d" % i, "tags": ["t%d" % (i % 7), "x" * (i % 50)],
             "score": i * 0.5} for i in range(20000)]
    text = json.dumps(recs)
    back = json.loads(text)
    keep.append(back[::50])
    if len(keep) > 10:
        keep.pop(0)
print(sum(len(k) for k in keep))
"""


def sqlite_script(rows):
    lines = ["CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, payload BLOB);",
             "CREATE INDEX t_name ON t(name);", "BEGIN;"]
    for i in range(rows):
        lines.append("INSERT INTO t(name, payload) VALUES('name-%d-%s', randomblob(%d));"
                     % (i, "y" * (i % 40), 16 + i % 900))
    lines += ["COMMIT;", "SELECT count(*), sum(length(payload)) FROM t;",
              "DELETE FROM t WHERE id % 3 = 0;", "SELECT count(*) FROM t;"]
    return "\n".join(lines) + "\n"


def run_once(argv, env, stdin_path):
    """Runs argv to completion; returns (CPU seconds of the tree, wall seconds)."""
    t0 = time.monotonic()
    with open(stdin_path or os.devnull, "rb") as fin:
        pid = os.fork()
        if pid == 0:
            try:
                os.dup2(fin.fileno(), 0)
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                os.execvpe(argv[0], argv, env)
            finally:
                os._exit(127)
        _, status, ru = os.wait4(pid, 0)
    wall = time.monotonic() - t0
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit("bench: %s exited with %d" % (" ".join(argv), code))
    return ru.ru_utime + ru.ru_stime, wall


def main():
    build = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "build")
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    override = os.path.join(build, "subprojects/mimprof-allocator/libmimprof-allocator-override.so")
    mimprof = os.path.join(build, "subprojects/mimprof-cli/mimprof")
    churn = os.path.join(build, "subprojects/mimprof-cli/bench/mimprof-churn")
    for f in (override, mimprof, churn):
        if not os.path.exists(f):
            sys.exit("bench: %s is missing (./dev build)" % f)
    for tool in ("/usr/bin/python3", "/usr/bin/sqlite3", "/usr/bin/sort"):
        if not os.path.exists(tool):
            sys.exit("bench: %s is missing" % tool)

    work = tempfile.mkdtemp(prefix="mimprof-real-")
    try:
        py = os.path.join(work, "alloc.py")
        with open(py, "w") as f:
            f.write(PY_SCRIPT)
        sql = os.path.join(work, "inserts.sql")
        with open(sql, "w") as f:
            f.write(sqlite_script(150000))
        lines = os.path.join(work, "lines.txt")
        with open(lines, "w") as f:  # ~50 MB of pseudo-random lines
            x = 0x9E3779B97F4A7C15
            for i in range(1_300_000):
                x = (x * 6364136223846793005 + 1442695040888963407) & (2**64 - 1)
                f.write("%016x %d %s\n" % (x, i, "z" * (x % 17)))
        programs = [
            ("python3: json build/dump/load, 20 x 20k records", ["/usr/bin/python3", py], None),
            ("sqlite3: 150k inserts with an index, deletes", ["/usr/bin/sqlite3", ":memory:"], sql),
            ("sort: 50 MB of lines", ["/usr/bin/sort", "-S", "200M", lines], None),
            ("mimprof-churn (synthetic: malloc/free only)", [churn, "30000000"], None),
        ]
        base_env = dict(os.environ, LD_PRELOAD=override, LC_ALL="C")
        prof_env = dict(os.environ, LC_ALL="C")
        out = os.path.join(work, "prof")
        print("machine: %d CPUs, load average %.1f; %d rounds (A B B A)" %
              (os.cpu_count(), os.getloadavg()[0], rounds))
        print()
        print("| program | baseline CPU [s] | mimprof run CPU [s] | change (median of rounds) | range |")
        print("|:---|---:|---:|---:|---:|")
        for label, argv, stdin in programs:
            prof_argv = [mimprof, "run", "-q", "-o", out, "--"] + argv
            run_once(argv, base_env, stdin)  # warm the page cache
            run_once(prof_argv, prof_env, stdin)
            a_cpu, b_cpu, ratios = [], [], []
            for _ in range(rounds):
                a1, _ = run_once(argv, base_env, stdin)
                b1, _ = run_once(prof_argv, prof_env, stdin)
                b2, _ = run_once(prof_argv, prof_env, stdin)
                a2, _ = run_once(argv, base_env, stdin)
                a_cpu += [a1, a2]
                b_cpu += [b1, b2]
                ratios.append((b1 + b2) / (a1 + a2))
                shutil.rmtree(out, ignore_errors=True)
            med = statistics.median(ratios)
            print("| %s | %.3f | %.3f | %+.1f%% | %+.1f..%+.1f%% |" %
                  (label, statistics.median(a_cpu), statistics.median(b_cpu), 100 * (med - 1),
                   100 * (min(ratios) - 1), 100 * (max(ratios) - 1)))
            sys.stdout.flush()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
