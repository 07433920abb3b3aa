#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Private memory per PostgreSQL backend (issue #26: the profiler's cost
must not multiply by the number of processes of a process-per-connection
server). A throw-away cluster (initdb as the `postgres` user into a
temporary directory) is started under `mimprof run -i 512k -e 1s`, once
with MIMPROF_DISABLE=1 (the preload's allocator alone, no session), once
with `--no-collector` (every backend symbolizes and writes itself) and
once with the collector; CONNS psql sessions each run a query and then
wait; after at least two report periods each backend's
/proc/PID/smaps_rollup Private_Dirty (kB) is read and averaged.

usage: pg_memory.py MIMPROF [CONNS]   (as root; PostgreSQL 15 installed)"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import smaps

PG_BIN = "/usr/lib/postgresql/15/bin"
QUERY = ("SELECT count(*) FROM (SELECT g, repeat('x', 100) AS s "
         "FROM generate_series(1, 20000) g) t;\n"
         "SELECT 'pid', pg_backend_pid();\n")


def as_pg(argv):
    return ["runuser", "-u", "postgres", "--"] + argv


def measure(mimprof, base, data, extra, env, conns, wait=2.5):
    sock = os.path.join(base, "sock")
    out = os.path.join(base, "out-%d" % time.monotonic_ns())
    os.makedirs(out)
    shutil.chown(out, "postgres")
    port = "5412"
    server = subprocess.Popen(
        as_pg([mimprof, "run", "-q", "-i", "512k", "-e", "1s", "-o", out] + extra +
              ["--", PG_BIN + "/postgres", "-D", data, "-p", port, "-k", sock,
               "-c", "listen_addresses=", "-c", "max_connections=%d" % (conns + 10)]),
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    psql = as_pg([PG_BIN + "/psql", "-X", "-A", "-t", "-h", sock, "-p", port, "-d", "postgres"])
    t = time.monotonic() + 30
    while subprocess.run(psql + ["-c", "select 1"], capture_output=True).returncode != 0:
        if time.monotonic() > t:
            raise RuntimeError("postgres did not start")
        time.sleep(0.2)
    sessions, pids = [], []
    for _ in range(conns):
        s = subprocess.Popen(psql, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        s.stdin.write(QUERY)
        s.stdin.flush()
        line = ""
        while not line.startswith("pid|"):
            line = s.stdout.readline()
        pids.append(int(line.strip().split("|")[1]))
        sessions.append(s)
    time.sleep(wait)
    rows = [smaps.rollup(pid) for pid in pids]
    for s in sessions:
        s.stdin.close()
        s.wait(timeout=60)
    subprocess.run(as_pg([PG_BIN + "/pg_ctl", "-D", data, "-m", "fast", "-w", "stop"]),
                   capture_output=True)
    server.wait(timeout=60)
    return smaps.mean(rows)


def main():
    mimprof = os.path.abspath(sys.argv[1])
    conns = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    base = tempfile.mkdtemp(prefix="mimprof-pgmem-")
    try:
        shutil.chown(base, "postgres")
        os.makedirs(os.path.join(base, "sock"))
        shutil.chown(os.path.join(base, "sock"), "postgres")
        data = os.path.join(base, "data")
        subprocess.run(as_pg([PG_BIN + "/initdb", "-D", data, "-A", "trust"]),
                       capture_output=True, check=True)
        off = dict(os.environ, MIMPROF_DISABLE="1")
        rows = [("preload, MIMPROF_DISABLE=1", measure(mimprof, base, data, [], off, conns)),
                ("mimprof run --no-collector",
                 measure(mimprof, base, data, ["--no-collector"], os.environ, conns)),
                ("mimprof run (collector)", measure(mimprof, base, data, [], os.environ, conns))]
    finally:
        shutil.rmtree(base, ignore_errors=True)
    smaps.print_table("per backend (kB)", rows)


if __name__ == "__main__":
    main()
