#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Real services under `mimprof run`, with their own benchmark tools.

redis-server (redis-benchmark), memcached (memcslap), nginx with two
workers (wrk) and PostgreSQL (pgbench), each started plainly and under
`mimprof run` (defaults: 512 KiB interval, a report every 10 s) in A B B A
order per round, on loopback ports of their own. Per run: the benchmark's
throughput, the service's resident memory (the largest sum of PSS over
its process tree, polled during the load), the service's own figure of
its memory and, under mimprof, the in-use of a report taken right after
that figure (`mimprof ctl PID report`) in the same process. The verdicts
are medians over rounds; the load average beside each row says how busy
the machine was. Not a test: it prints a Markdown table.

    cli/bench/services.py [BUILD_DIR] [ROUNDS] [redis|memcached|nginx|postgres ...]

Needs the Debian packages redis-server, redis-tools, memcached,
libmemcached-tools, nginx-light (or nginx), wrk and postgresql; a service
whose programs are missing is skipped. Runs as root (PostgreSQL's server
runs as the `postgres` user, and so does its `mimprof run`).
"""
import glob
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
import pprof_wire  # noqa: E402

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 2
ONLY = sys.argv[3:]
MIMPROF = os.path.join(BUILD, "subprojects", "mimprof-cli", "mimprof")
PG_BIN = "/usr/lib/postgresql/15/bin"


PORTS = (6411, 11411, 8411)  # redis, memcached, nginx (postgres: a Unix socket)


def tree(pid):
    """pid and its descendants."""
    kids = {}
    for st in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(st) as f:
                text = f.read()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        kids.setdefault(int(fields[1]), []).append(int(st.split("/")[2]))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def rss(pid):
    """The proportional set size of pid (a page shared by n processes counts
    1/n in each: PostgreSQL's shared buffers, a forked worker's copy-on-write
    pages), so that a sum over a process tree counts each page once."""
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            m = re.search(r"^Pss:\s+(\d+) kB", f.read(), re.M)
        return int(m.group(1)) * 1024 if m else 0
    except OSError:
        return 0


class RssPoll:
    """The largest PSS sum over a process tree while the load runs."""

    def __init__(self, pid):
        self.pid, self.peak, self.stop = pid, 0, threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop.wait(0.25):
            self.peak = max(self.peak, sum(rss(p) for p in tree(self.pid)))

    def end(self):
        self.stop.set()
        self.t.join()
        return self.peak


def wait_port(port, deadline=30):
    t = time.monotonic() + deadline
    while time.monotonic() < t:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("port %d did not open" % port)


def inuse_now(pid, tmp, user=None):
    """The in-use bytes of a report of process `pid` taken now."""
    path = os.path.join(tmp, "out", "ctl-%d-%d.pb.gz" % (pid, time.monotonic_ns()))
    cmd = [MIMPROF, "ctl", str(pid), "report", "-o", path]
    if user:
        cmd = ["runuser", "-u", user, "--"] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError("ctl report %d: %s" % (pid, r.stderr))
    with open(path, "rb") as f:
        return pprof_wire.totals(pprof_wire.decode_profile(f.read()), "inuse_space")


def launch(argv, profiled, tmp, user=None):
    for port in PORTS:  # a service left from an interrupted run would answer instead
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            raise RuntimeError("port %d is taken" % port)
        except ConnectionRefusedError:
            pass
    if profiled:
        out = os.path.join(tmp, "out")
        os.makedirs(out, exist_ok=True)
        if user:
            shutil.chown(out, user)
        argv = [MIMPROF, "run", "-q", "-o", out, "--"] + argv
    if user:
        argv = ["runuser", "-u", user, "--"] + argv
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def service_pid(proc, name):
    """The pid of the process named `name` in proc's tree (the service
    under runuser and mimprof run)."""
    t = time.monotonic() + 30
    while time.monotonic() < t:
        for p in tree(proc.pid):
            try:
                with open("/proc/%d/comm" % p) as f:
                    if f.read().strip() == name:
                        return p
            except OSError:
                pass
        time.sleep(0.1)
    raise RuntimeError("no %s under %d" % (name, proc.pid))


def stop(proc, pid, sig=signal.SIGTERM):
    """Stops the service `pid` (not runuser or mimprof run above it, which
    need not forward the signal) and waits for proc."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# ------------------------------------------------------------------ redis

def redis(profiled, tmp):
    port = 6411
    proc = launch(["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
                   "--daemonize", "no", "--dir", tmp], profiled, tmp)
    wait_port(port)
    pid = service_pid(proc, "redis-server")
    bench = ["redis-benchmark", "-p", str(port), "-r", "200000", "-d", "256", "-c", "50"]
    subprocess.run(bench + ["-t", "set", "-n", "200000", "-q"], capture_output=True, check=True)
    poll = RssPoll(pid)
    r = subprocess.run(bench + ["-t", "get,set", "-n", "200000", "--csv"], capture_output=True,
                       text=True, check=True)
    peak = poll.end()
    rps = [float(l.split(",")[1].strip('"')) for l in r.stdout.splitlines()[1:] if l]
    info = subprocess.run(["redis-cli", "-p", str(port), "info", "memory"], capture_output=True,
                          text=True, check=True).stdout
    own = int(re.search(r"used_memory:(\d+)", info).group(1))
    inuse = inuse_now(pid, tmp) if profiled else None
    subprocess.run(["redis-cli", "-p", str(port), "shutdown", "nosave"], capture_output=True)
    proc.wait(timeout=60)
    return statistics.mean(rps), peak, own, inuse, "used_memory"


# -------------------------------------------------------------- memcached

def memcached(profiled, tmp):
    port = 11411
    proc = launch(["memcached", "-u", "root", "-p", str(port), "-m", "1024", "-t", "2",
                   "-c", "1024"], profiled, tmp)
    wait_port(port)
    pid = service_pid(proc, "memcached")
    srv = "127.0.0.1:%d" % port
    poll = RssPoll(pid)
    t0 = time.monotonic()
    n, conc = 40000, 8
    subprocess.run(["memcslap", "-s", srv, "-t", "set", "-c", str(conc), "-e", str(n)],
                   capture_output=True, check=True)
    dt = time.monotonic() - t0
    peak = poll.end()
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"stats slabs\r\n")
        data = b""
        while not data.endswith(b"END\r\n"):
            data += s.recv(65536)
    own = int(re.search(rb"STAT total_malloced (\d+)", data).group(1))
    inuse = inuse_now(pid, tmp) if profiled else None
    stop(proc, pid)
    return n * conc / dt, peak, own, inuse, "total_malloced (slabs)"


# ------------------------------------------------------------------ nginx

NGINX_CONF = """
worker_processes 2;
user root;
daemon off;
master_process on;
pid %(tmp)s/nginx.pid;
error_log %(tmp)s/error.log;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path %(tmp)s/body;
    proxy_temp_path %(tmp)s/proxy;
    fastcgi_temp_path %(tmp)s/fastcgi;
    uwsgi_temp_path %(tmp)s/uwsgi;
    scgi_temp_path %(tmp)s/scgi;
    server { listen 127.0.0.1:%(port)d; root %(tmp)s/www; }
}
"""


def nginx(profiled, tmp):
    port = 8411
    os.makedirs(os.path.join(tmp, "www"), exist_ok=True)
    with open(os.path.join(tmp, "www", "index.html"), "w") as f:
        f.write("x" * 4096)
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write(NGINX_CONF % {"tmp": tmp, "port": port})
    proc = launch(["nginx", "-c", conf, "-p", tmp], profiled, tmp)
    wait_port(port)
    master = service_pid(proc, "nginx")
    time.sleep(0.5)
    poll = RssPoll(master)
    r = subprocess.run(["wrk", "-t2", "-c32", "-d5s", "http://127.0.0.1:%d/index.html" % port],
                       capture_output=True, text=True, check=True)
    peak = poll.end()
    rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", r.stdout).group(1))
    inuse = sum(inuse_now(p, tmp) for p in tree(master)) if profiled else None
    stop(proc, master, signal.SIGQUIT)
    return rps, peak, None, inuse, "(none)"


# --------------------------------------------------------------- postgres

def pg_cluster(base):
    data = os.path.join(base, "pgdata")
    if not os.path.isdir(data):
        os.makedirs(base, exist_ok=True)
        shutil.chown(base, "postgres")
        subprocess.run(["runuser", "-u", "postgres", "--", PG_BIN + "/initdb", "-D", data,
                        "-A", "trust"], capture_output=True, check=True)
    return data


def psql(port, sock, sql, **kw):
    return subprocess.run(["runuser", "-u", "postgres", "--", PG_BIN + "/psql", "-X", "-A", "-t",
                           "-h", sock, "-p", str(port), "-d", "postgres", "-c", sql],
                          capture_output=True, text=True, **kw)


def postgres(profiled, tmp):
    port = 5411
    base = "/tmp/mimprof-bench-pg"
    data = pg_cluster(base)
    sock = base
    proc = launch([PG_BIN + "/postgres", "-D", data, "-p", str(port), "-k", sock,
                   "-c", "shared_buffers=64MB", "-c", "listen_addresses="], profiled, tmp,
                  user="postgres")
    t = time.monotonic() + 30
    while psql(port, sock, "select 1").returncode != 0:
        if time.monotonic() > t:
            raise RuntimeError("postgres did not start")
        time.sleep(0.2)
    pid = service_pid(proc, "postgres")
    pgb = ["runuser", "-u", "postgres", "--", PG_BIN + "/pgbench", "-h", sock, "-p", str(port)]
    if psql(port, sock, "select count(*) from pgbench_branches").returncode != 0:
        subprocess.run(pgb + ["-i", "-s", "5", "postgres"], capture_output=True, check=True)
    poll = RssPoll(pid)
    r = subprocess.run(pgb + ["-S", "-c", "8", "-j", "2", "-T", "8", "postgres"],
                       capture_output=True, text=True, check=True)
    peak = poll.end()
    tps = float(re.search(r"tps = ([0-9.]+)", r.stdout).group(1))
    # One backend with 30 MB of temporary buffers: its memory contexts
    # against its profile, taken while it waits.
    script = ("SET temp_buffers = '64MB';\n"
              "CREATE TEMP TABLE t AS SELECT g, repeat('x', 100) AS s "
              "FROM generate_series(1, 200000) g;\n"
              "SELECT 'ctx', pg_backend_pid(), sum(total_bytes) FROM pg_backend_memory_contexts;\n"
              "SELECT pg_sleep(%d);\n" % (4 if profiled else 0))
    sess = subprocess.Popen(["runuser", "-u", "postgres", "--", PG_BIN + "/psql", "-X", "-A",
                             "-t", "-h", sock, "-p", str(port), "-d", "postgres"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    sess.stdin.write(script)
    sess.stdin.flush()
    line = ""
    while not line.startswith("ctx|"):
        line = sess.stdout.readline()
    _, bpid, own = line.strip().split("|")
    inuse = inuse_now(int(bpid), tmp, user="postgres") if profiled else None
    sess.stdin.close()
    sess.wait(timeout=60)
    stop(proc, pid, signal.SIGINT)
    return tps, peak, int(own), inuse, "backend memory contexts"


SERVICES = {
    "redis": (redis, ["redis-server", "redis-benchmark", "redis-cli"]),
    "memcached": (memcached, ["memcached", "memcslap"]),
    "nginx": (nginx, ["nginx", "wrk"]),
    "postgres": (postgres, [PG_BIN + "/postgres", PG_BIN + "/pgbench"]),
}


def main():
    rows = []
    for name, (fn, progs) in SERVICES.items():
        if ONLY and name not in ONLY:
            continue
        if not all(shutil.which(p) or os.access(p, os.X_OK) for p in progs):
            print("%s: skipped (missing %s)" % (name, ", ".join(progs)), file=sys.stderr)
            continue
        res = {False: [], True: []}
        loads = []
        for _ in range(ROUNDS):
            for profiled in (False, True, True, False):
                tmp = tempfile.mkdtemp(prefix="mimprof-svc-")
                os.chmod(tmp, 0o755)
                loads.append(os.getloadavg()[0])
                res[profiled].append(fn(profiled, tmp))
                shutil.rmtree(tmp, ignore_errors=True)
                print(name, "profiled" if profiled else "plain", res[profiled][-1],
                      "load %.1f" % loads[-1], file=sys.stderr)
        med = lambda k, p: statistics.median(r[k] for r in res[p])
        thr = statistics.median(b[0] / a[0] for a, b in zip(res[False], res[True]))
        rss_ratio = med(1, True) / med(1, False)
        own_p = [r[2] for r in res[True]]
        inuse = [r[3] for r in res[True]]
        what = res[True][0][4]
        own_txt = ("%s %s vs profile in-use %s (%.3f)" % (
            what, "{:,}".format(int(statistics.median(own_p))),
            "{:,}".format(int(statistics.median(inuse))),
            statistics.median(i / o for i, o in zip(inuse, own_p)))
            if own_p[0] is not None else "no figure of its own; profile in-use %s" %
            "{:,}".format(int(statistics.median(inuse))))
        rows.append("| %s | %.3f | %.3f (%.1f -> %.1f MB) | %s | %.1f-%.1f |" % (
            name, thr, rss_ratio, med(1, False) / 1e6, med(1, True) / 1e6, own_txt,
            min(loads), max(loads)))
    print("| service | throughput ratio | PSS ratio (plain -> profiled) | its own memory figure "
          "vs the profile's | load average |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(r)


if __name__ == "__main__":
    main()
