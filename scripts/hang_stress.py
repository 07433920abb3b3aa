#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Runs one command many times under load and names every hang.

    scripts/hang_stress.py [-n RUNS] [-j PARALLEL] [--timeout S] [--hog N]
                           [--cpus LIST] -- COMMAND...

Each run gets its own process group and a deadline; a run still alive at
its deadline is a hang: the stacks of every thread of every process in
its tree go to the log (gdb -batch, tests/support/hang_dump.sh), then the
tree is killed. `--hog N` keeps N busy loops running meanwhile, `--cpus`
pins the runs and the hogs to those CPUs (taskset), so a run's threads are
preempted at every point. Prints one line of counts at the end and exits
1 when any run hung or failed.
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DUMP = os.path.join(HERE, "..", "tests", "support", "hang_dump.sh")


def start(cmd, cpus):
    """A run in its own session; its stderr in an unlinked file (a pipe
    nobody reads while it runs would fill and stall it: a false hang)."""
    if cpus:
        cmd = ["taskset", "-c", cpus] + cmd
    err = tempfile.TemporaryFile()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    p.err = err
    return p


def stderr_of(p):
    p.err.seek(0)
    text = p.err.read().decode(errors="replace")
    p.err.close()
    return text


def hang(p, log):
    dump = subprocess.run(["sh", DUMP, str(p.pid)], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=300)
    log.write(f"=== run pid {p.pid} hung; stacks:\n")
    log.write(dump.stdout.decode(errors="replace"))
    log.flush()
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    stderr_of(p)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("-j", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--hog", type=int, default=0)
    ap.add_argument("--cpus", default="")
    ap.add_argument("--log", default="-")
    ap.add_argument("cmd", nargs="+")
    a = ap.parse_args()
    log = sys.stdout if a.log == "-" else open(a.log, "a")
    # a SIGTERM or SIGHUP ends the runs and the hogs too (the finally below)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda n, f: sys.exit(128 + n))
    hogs = [start(["sh", "-c", "while :; do :; done"], a.cpus) for _ in range(a.hog)]
    running, done, hung, failed = {}, 0, 0, 0
    t0 = time.monotonic()
    try:
        while done < a.n:
            while len(running) < a.j and done + len(running) < a.n:
                p = start(a.cmd, a.cpus)
                running[p] = time.monotonic() + a.timeout
            time.sleep(0.05)
            for p, deadline in list(running.items()):
                if p.poll() is None:
                    if time.monotonic() > deadline:
                        hang(p, log)
                        hung += 1
                        del running[p]
                        done += 1
                    continue
                err = stderr_of(p)
                if p.returncode != 0:
                    failed += 1
                    log.write(f"=== run failed ({p.returncode}):\n{err[-4000:]}\n")
                del running[p]
                done += 1
    finally:
        for p in list(running) + hogs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    print(f"hang_stress: {done} runs, {hung} hung, {failed} failed, "
          f"{time.monotonic() - t0:.0f} s, -j {a.j}, hogs {a.hog}, cpus '{a.cpus or 'all'}'")
    return 1 if hung or failed else 0


if __name__ == "__main__":
    sys.exit(main())
