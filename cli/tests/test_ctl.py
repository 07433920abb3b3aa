#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A process profiled while it runs: `mimprof run --dormant` (and
MIMPROF_DORMANT), `mimprof ctl PID ...` over the runtime's control socket,
and `--http`'s /debug/pprof endpoint read by real clients (`go tool pprof`,
curl), on a service that leaks slowly (slow_leak.c); and the same through
the profiling library's control API, on slow_leak built as a program that
opens it (LibraryApi).

Preload-based (same gate as tool-run). Needs MIMPROF, MIMPROF_PRELOAD,
MIMPROF_SLOW_LEAK and MIMPROF_SLOW_LEAK_LIB.
"""
import os
import gzip
import random
import re
import shutil
import socket
import struct
import subprocess
import threading
import time
import unittest

from tool_testlib import TempDirTest, decode, go_env, mimprof, pprof_wire, reports

GO = shutil.which("go")
CURL = shutil.which("curl")

MIMPROF = os.environ.get("MIMPROF", "mimprof")
PRELOAD = os.environ.get("MIMPROF_PRELOAD", "")
SLOW_LEAK = os.environ.get("MIMPROF_SLOW_LEAK", "")
DORMANT_PRELOAD = PRELOAD.replace(".so", "-dormant.so")
SLOW_LEAK_LIB = os.environ.get("MIMPROF_SLOW_LEAK_LIB", "")


class Service:
    """slow_leak (or a mode of it) started under `cmd`; stops when its
    stdin is closed."""

    def __init__(self, cmd, env=None, cwd=None):
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
        self.lines = []
        line = self.proc.stdout.readline()
        while line.startswith("fd "):
            self.lines.append(line.strip())
            line = self.proc.stdout.readline()
        assert line.startswith("ready "), "no ready line: %r %s" % (line, self.stop()[1])
        self.pid = int(line.split()[1])

    def forked(self):
        """slow_leak fork|exec: the second "ready" line is the other
        process's; returns the child's pid (and makes self.pid the
        parent's)."""
        other = int(self.proc.stdout.readline().split()[1])
        with open("/proc/%d/stat" % other) as f:
            ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        if ppid != self.pid:  # the child printed first
            self.pid, other = other, self.pid
        return other

    def count(self):
        """Blocks leaked so far (slow_leak answers each line)."""
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line.startswith("count "), line
        return int(line.split()[1])

    def threads(self):
        return len(os.listdir("/proc/%d/task" % self.pid))

    def stop(self):
        out, err = self.proc.communicate(input="", timeout=120)
        return self.proc.returncode, err, out


LEAK = 4096  # bytes per leak_slowly() block (slow_leak.c)


def ctl(*args, **kw):
    return mimprof("ctl", *args, **kw)


def listed():
    """The pids `mimprof ctl list` shows (a command line of another
    process may hold newlines: only lines that start with a pid count)."""
    return [int(m.group(1)) for m in
            re.finditer(r"^(\d+) ", ctl("list", check=True).stdout, re.M)]


def children(pid):
    """The pids of the processes whose parent is pid."""
    out = []
    for e in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % e) as f:
                if e.isdigit() and int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(e))
        except (OSError, ValueError, IndexError):
            pass
    return out


def field(status, key):
    m = re.search(r"^%s: (.*)$" % re.escape(key), status, re.M)
    assert m, "no %s in: %s" % (key, status)
    return m.group(1)


def start_leak_report(test, svc, path):
    """`start --interval 16k` on a dormant slow_leak, 1500 blocks leaked,
    `report -o path`, whose leak_slowly must hold what was leaked; returns
    the block count at the start."""
    before = svc.count()
    r = ctl(svc.pid, "start", "--interval", "16k", check=True)
    test.assertEqual(field(r.stdout, "state"), "running")
    test.assertEqual(field(r.stdout, "interval"), "16384")
    while svc.count() - before < 1500:
        time.sleep(0.1)
    low = svc.count() - before
    ctl(svc.pid, "report", "-o", path, check=True)
    high = svc.count() - before
    inuse = pprof_wire.per_function(decode(path), "inuse_space")
    got = inuse.get("leak_slowly", (0, 0))[0]
    # 1500+ blocks of 4 KiB at a 16 KiB interval: about 330 samples,
    # a relative standard deviation of 5%; a fixed seed.
    test.assertGreater(got, 0.7 * low * LEAK, (low, high, got))
    test.assertLess(got, 1.3 * high * LEAK, (low, high, got))
    return before


def exchange(s, data, read=True):
    """Sends bytes on the connected socket s; returns all it answers."""
    s.sendall(data)
    out = b""
    while read:
        b = s.recv(65536)
        if not b:
            break
        out += b
    s.close()
    return out


def raw(pid, data, read=True):
    """Sends bytes to the control socket of pid; returns its answer."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect("\0mimprof-ctl.%d" % pid)
    return exchange(s, data, read)


class Dormant(TempDirTest):
    """Loaded, no session: the program's output, status, threads and
    descriptors are those of the plain program, and nothing is written."""

    def test_dormant_run_changes_nothing_and_writes_nothing(self):
        plain = Service([SLOW_LEAK, "fds"])
        plain_threads = plain.threads()
        plain_rc, _, plain_out = plain.stop()
        out = self.path("out")
        svc = Service([MIMPROF, "run", "--dormant", "-e", "100ms", "-o", out, "--", SLOW_LEAK,
                       "fds"])
        threads = svc.threads()
        rc, err, stdout = svc.stop()
        self.assertEqual((rc, threads), (plain_rc, plain_threads + 1), "one control thread")
        self.assertEqual(rc, 3)
        self.assertEqual(svc.lines, plain.lines, "the program's descriptors")
        self.assertTrue(stdout.startswith("leaked "), stdout)
        self.assertEqual(reports(out), {}, "a dormant process writes no report")
        self.assertIn("no profile written", err)

    def test_dormant_variable_with_the_dormant_object(self):
        env = dict(os.environ, LD_PRELOAD=DORMANT_PRELOAD, MIMPROF_DORMANT="1",
                   MIMPROF_EVERY="100ms", MIMPROF_OUTPUT=self.path("out") + "/")
        svc = Service([SLOW_LEAK], env=env)
        self.assertEqual(svc.threads(), 2, "the control thread only")
        rc, err, _ = svc.stop()
        self.assertEqual(rc, 3, err)
        self.assertEqual(err, "")
        self.assertFalse(os.path.exists(self.path("out")) and os.listdir(self.path("out")))

    def test_dormant_object_without_the_variable_samples_as_usual(self):
        env = dict(os.environ, LD_PRELOAD=DORMANT_PRELOAD, MIMPROF_EVERY="0",
                   MIMPROF_INTERVAL="4k", MIMPROF_OUTPUT=self.path("out") + "/")
        svc = Service([SLOW_LEAK], env=env)
        rc, err, _ = svc.stop()
        self.assertEqual(rc, 3, err)
        (pid, paths), = reports(self.path("out")).items()
        self.assertEqual(pid, svc.pid)
        inuse = pprof_wire.per_function(decode(paths[-1]), "inuse_space")
        self.assertGreater(inuse.get("leak_slowly", (0, 0))[0], 0, sorted(inuse))


class Ctl(TempDirTest):
    """mimprof ctl on a dormant slow leak."""

    def start_service(self, *run_opts, mode=()):
        self.out = self.path("out")
        svc = Service([MIMPROF, "run", "--dormant", "-o", self.out, *run_opts, "--", SLOW_LEAK,
                       *mode])
        self.addCleanup(lambda: svc.proc.poll() is None and svc.stop())
        return svc

    def test_dormant_start_report_stop(self):
        svc = self.start_service("-e", "0")
        r = ctl(svc.pid, "status", check=True)
        self.assertEqual(field(r.stdout, "state"), "dormant")
        self.assertIn(svc.pid, listed())
        start_leak_report(self, svc, self.path("now.pb.gz"))
        r = ctl(svc.pid, "stop", check=True)
        self.assertEqual(field(r.stdout, "state"), "dormant")
        self.assertEqual(field(r.stdout, "reports"), "2", "the report asked for, and stop's")
        img = self.path("now.mpimg")
        r = ctl(svc.pid, "image", "-o", img)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("dormant", r.stderr)
        r = ctl(svc.pid, "start", "--every", "200ms", check=True)
        self.assertEqual(field(r.stdout, "every"), "200ms")
        before = svc.count()
        while svc.count() - before < 500:
            time.sleep(0.1)
        r = ctl(svc.pid, "image", "-o", img, check=True)
        r = mimprof("image", "top", img, check=True)
        self.assertIn("leak_slowly", r.stdout)
        rc, err, out = svc.stop()
        self.assertEqual(rc, 3, err)
        self.assertTrue(out.startswith("leaked "), out)
        (pid, paths), = reports(self.out).items()
        self.assertEqual(pid, svc.pid)
        self.assertGreaterEqual(len(paths), 2, "stop's report, the second session's at exit")

    def test_set_interval_applies_to_the_next_start(self):
        svc = self.start_service()
        r = ctl(svc.pid, "set", "interval", "8k", check=True)
        self.assertEqual(field(r.stdout, "next interval"), "8192")
        r = ctl(svc.pid, "start", check=True)
        self.assertEqual(field(r.stdout, "interval"), "8192")
        r = ctl(svc.pid, "set", "interval", "1m", check=True)
        self.assertEqual(field(r.stdout, "interval"), "8192", "a running session keeps its own")
        self.assertEqual(field(r.stdout, "next interval"), "1048576")
        r = ctl(svc.pid, "start")
        self.assertEqual(r.returncode, 1)
        self.assertIn("already running", r.stderr)

    def test_the_pid_of_mimprof_run_reaches_its_child(self):
        svc = self.start_service()
        r = ctl(svc.proc.pid, "status", check=True)
        self.assertEqual(int(field(r.stdout, "pid")), svc.pid)
        self.assertNotEqual(svc.proc.pid, svc.pid)

    def test_another_user_is_refused_and_logged_once(self):
        svc = self.start_service()
        if os.getuid() != 0:
            self.skipTest("needs root to run a client as nobody")
        cmd = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", MIMPROF, "ctl",
               str(svc.pid), "status"]
        for _ in range(2):
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("permission denied", r.stderr)
            self.assertEqual(r.stdout, "")
        self.assertEqual(field(ctl(svc.pid, "status", check=True).stdout, "state"), "dormant")
        rc, err, _ = svc.stop()
        self.assertEqual(rc, 3)
        self.assertEqual(err.count("refused a connection from uid"), 1, err)

    def test_garbage_leaves_program_and_profiler_working(self):
        svc = self.start_service()
        rng = random.Random(7)
        self.assertTrue(raw(svc.pid, b"bogus\n").startswith(b"error: unknown command"))
        self.assertTrue(raw(svc.pid, b"status \n").startswith(b"error: "))
        self.assertTrue(raw(svc.pid, b"x" * 100000).startswith(b"error: request longer"))
        for _ in range(20):
            blob = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 2000)))
            raw(svc.pid, blob + b"\n")
        # slow clients: three half requests held open while others are served
        slow = []
        for _ in range(3):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect("\0mimprof-ctl.%d" % svc.pid)
            s.sendall(b"sta")
            slow.append(s)
        r = ctl(svc.pid, "start", check=True)
        self.assertEqual(field(r.stdout, "state"), "running")
        raw(svc.pid, b"report\n", read=False)  # a client that leaves before the answer
        r = ctl(svc.pid, "report", "-o", self.path("r.pb"), check=True)
        for s in slow:
            s.close()
        rc, err, out = svc.stop()
        self.assertEqual(rc, 3, err)
        self.assertTrue(out.startswith("leaked "))

    def test_forked_children_get_their_own_socket(self):
        svc = self.start_service("--http", "0", mode=("fork",))
        child = svc.forked()
        r = ctl(child, "status", check=True)
        self.assertEqual((int(field(r.stdout, "pid")), field(r.stdout, "state")),
                         (child, "dormant"))
        self.assertEqual(field(r.stdout, "http"), "off", "the port is the parent's")
        self.assertNotEqual(field(ctl(svc.pid, "status", check=True).stdout, "http"), "off")
        ctl(child, "start", check=True)
        self.assertEqual(field(ctl(svc.pid, "status", check=True).stdout, "state"), "dormant",
                         "the parent stays dormant")
        rc, err, _ = svc.stop()
        self.assertEqual(rc, 3, err)
        self.assertEqual(sorted(reports(self.out)), [child], "only the started child reports")

    def test_unfollowed_children_have_no_socket(self):
        for opts, mode in ((("--no-follow-fork",), "fork"), ((), "exec")):
            svc = self.start_service(*opts, mode=(mode,))
            child = svc.forked()
            r = ctl(child, "status")
            self.assertEqual(r.returncode, 1, (mode, r.stdout))
            self.assertIn("has no control socket", r.stderr)
            ctl(svc.pid, "status", check=True)
            svc.stop()

    def test_pid_and_network_namespaces(self):
        unshare, nsenter = shutil.which("unshare"), shutil.which("nsenter")
        if os.getuid() != 0 or unshare is None or nsenter is None:
            self.skipTest("needs root, unshare and nsenter")
        # A PID namespace: the service is pid 2 there; `ctl` takes the
        # host's pid (of the service, or of its mimprof run).
        svc = Service([unshare, "--pid", "--fork", "--mount-proc", MIMPROF, "run", "--dormant",
                       "-o", self.path("o1"), "--", SLOW_LEAK])
        self.addCleanup(lambda: svc.proc.poll() is None and svc.stop())
        self.assertEqual(svc.pid, 2, "the pid as the service sees it")
        def kids(p, of_run=False):
            with open("/proc/%d/task/%d/children" % (p, p)) as f:
                pids = [int(c) for c in f.read().split()]
            def comm(c):
                with open("/proc/%d/comm" % c) as f:
                    return f.read().strip()
            # mimprof run's other child is its collector (named so once it
            # runs; just forked, still "mimprof")
            return [c for c in pids
                    if not of_run or comm(c) not in ("mimprof-collect", "mimprof")]
        (run,) = kids(svc.proc.pid)
        (host,) = kids(run, of_run=True)
        for target in (host, run):
            r = ctl(target, "status", check=True)
            self.assertEqual((field(r.stdout, "pid"), field(r.stdout, "state")), ("2", "dormant"))
        svc.stop()
        # Another network namespace: not reachable, and ctl says how.
        svc = Service([unshare, "--net", MIMPROF, "run", "--dormant", "-o", self.path("o2"), "--",
                       SLOW_LEAK])
        self.addCleanup(lambda: svc.proc.poll() is None and svc.stop())
        r = ctl(svc.pid, "status")
        self.assertEqual(r.returncode, 1)
        self.assertIn("another network namespace", r.stderr)
        r = subprocess.run([nsenter, "-t", str(svc.pid), "-n", MIMPROF, "ctl", str(svc.pid),
                            "status"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(field(r.stdout, "state"), "dormant")
        svc.stop()

    def test_bad_requests_from_the_command_line(self):
        r = ctl("1", "frobnicate")
        self.assertEqual(r.returncode, 2)
        r = ctl("999999999", "status")
        self.assertEqual(r.returncode, 1)
        self.assertIn("no process", r.stderr)
        r = ctl(os.getpid(), "status")
        self.assertIn("has no control socket", r.stderr)

    def test_a_hosted_socket_that_goes_away_unanswered(self):
        # A host (the collector) closes a process's socket when the process
        # ends or execs a program that is not profiled; a request already
        # on its way was reset ("reading the answer: Connection reset by
        # peer", a flaky failure of test_unfollowed_children_have_no_socket
        # under load). ctl looks again and says what it finds then.
        target = subprocess.Popen(["sleep", "60"])
        self.addCleanup(target.kill)
        host = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        host.bind("\0mimprof-ctl.%d" % target.pid)
        host.listen(4)

        def reset_one_then_close():
            c, _ = host.accept()
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.close()  # an RST, before any answer
            host.close()

        t = threading.Thread(target=reset_one_then_close)
        t.start()
        r = ctl(target.pid, "status")
        t.join()
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertNotIn("reset", r.stderr)
        self.assertIn("has no control socket", r.stderr)


def http_get(addr, path, timeout=60):
    """(status, headers dict lower-cased, body bytes) of GET path."""
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=timeout)
    data = exchange(s, ("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (path, addr)).encode())
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict((k.lower(), v.strip()) for k, v in
                   (line.split(":", 1) for line in lines[1:]))
    return int(lines[0].split()[1]), headers, body


def http_garbage(host, port, rng, rounds):
    """`rounds` connections to the HTTP endpoint, each sent random bytes
    (then its end) and read once."""
    for _ in range(rounds):
        s = socket.create_connection((host, int(port)), timeout=30)
        s.sendall(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 3000))))
        s.shutdown(socket.SHUT_WR)
        s.recv(65536)
        s.close()


class Http(TempDirTest):
    """--http on a dormant slow leak: Go's /debug/pprof endpoints."""

    def start_service(self, *opts):
        self.out = self.path("out")
        svc = Service([MIMPROF, "run", "--dormant", "--http", "0", "-e", "0", "-o", self.out,
                       *opts, "--", SLOW_LEAK])
        self.addCleanup(lambda: svc.proc.poll() is None and svc.stop())
        self.addr = field(ctl(svc.pid, "status", check=True).stdout, "http")
        self.assertTrue(self.addr.startswith("127.0.0.1:"), self.addr)
        return svc

    def running(self, svc, blocks=600):
        ctl(svc.pid, "start", "--interval", "16k", check=True)
        before = svc.count()
        while svc.count() - before < blocks:
            time.sleep(0.1)

    def test_dormant_answers_503_with_the_reason(self):
        svc = self.start_service()
        code, headers, body = http_get(self.addr, "/debug/pprof/heap")
        self.assertEqual(code, 503)
        self.assertEqual(headers["content-type"], "text/plain; charset=utf-8")
        self.assertIn(b"is dormant", body)
        self.assertIn(b"mimprof ctl %d start" % svc.pid, body)
        self.assertEqual(field(ctl(svc.pid, "status", check=True).stdout, "state"), "dormant",
                         "a scrape never starts a session")

    def test_heap_and_allocs_have_gos_semantics(self):
        svc = self.start_service()
        self.running(svc)
        code, headers, body = http_get(self.addr, "/debug/pprof/heap")
        self.assertEqual(code, 200, body)
        self.assertEqual(headers["content-type"], "application/octet-stream")
        self.assertEqual(headers["content-disposition"], 'attachment; filename="heap"')
        self.assertEqual(headers["x-content-type-options"], "nosniff")
        self.assertEqual(int(headers["content-length"]), len(body))
        self.assertEqual(body[:2], b"\x1f\x8b", "gzip")
        first = pprof_wire.decode_profile(body)
        self.assertEqual([t for t, _ in first["types"]],
                         ["alloc_objects", "alloc_space", "inuse_objects", "inuse_space"])
        self.assertFalse([lb for _, _, lb, _ in first["samples"] if "__delta__" in lb],
                         "no __delta__ label: scrapers compute deltas")
        leak1 = pprof_wire.per_function(first, "alloc_space")["leak_slowly"][0]
        inuse1 = pprof_wire.per_function(first, "inuse_space")["leak_slowly"][0]
        before = svc.count()
        while svc.count() - before < 300:
            time.sleep(0.1)
        code, headers, body = http_get(self.addr, "/debug/pprof/allocs")
        self.assertEqual(headers["content-disposition"], 'attachment; filename="allocs"')
        second = pprof_wire.decode_profile(body)
        leak2 = pprof_wire.per_function(second, "alloc_space")["leak_slowly"][0]
        inuse2 = pprof_wire.per_function(second, "inuse_space")["leak_slowly"][0]
        self.assertGreater(leak2, leak1, "alloc_* is cumulative since the session started")
        self.assertGreater(inuse2, inuse1, "the leak grows")
        # every leaked block is still live: cumulative allocations = in use
        self.assertAlmostEqual(leak2 / inuse2, 1.0, delta=0.01)
        # each request took a report of the series: written as any other
        (pid, paths), = reports(self.out).items()
        self.assertEqual(len(paths), 2)

    def test_seconds_gives_a_delta_profile(self):
        svc = self.start_service()
        self.running(svc)
        code, headers, body = http_get(self.addr, "/debug/pprof/heap")
        total = pprof_wire.per_function(pprof_wire.decode_profile(body), "alloc_space")
        code, headers, body = http_get(self.addr, "/debug/pprof/heap?seconds=1")
        self.assertEqual(code, 200, body)
        self.assertEqual(headers["content-disposition"], 'attachment; filename="heap-delta"')
        delta = pprof_wire.per_function(pprof_wire.decode_profile(body), "alloc_space")
        self.assertGreater(delta["leak_slowly"][0], 0)
        self.assertLess(delta["leak_slowly"][0], total["leak_slowly"][0] * 5)
        code, _, body = http_get(self.addr, "/debug/pprof/heap?seconds=0")
        self.assertEqual(code, 400, body)

    def test_go_tool_pprof_reads_it(self):
        if GO is None:
            self.skipTest("go not found")
        svc = self.start_service()
        self.running(svc)
        r = subprocess.run([GO, "tool", "pprof", "-top", "-sample_index=inuse_space",
                            "http://%s/debug/pprof/heap" % self.addr],
                           capture_output=True, env=go_env(self.tmp), timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout.decode(), r"\d.*leak_slowly")
        r = subprocess.run([GO, "tool", "pprof", "-top", "-sample_index=alloc_space",
                            "http://%s/debug/pprof/allocs" % self.addr],
                           capture_output=True, env=go_env(self.tmp), timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("churn", r.stdout.decode())

    def test_curl_headers_index_and_errors(self):
        if CURL is None:
            self.skipTest("curl not found")
        svc = self.start_service()
        self.running(svc, blocks=100)

        def curl(*args):
            r = subprocess.run([CURL, "-s", "-S", "-D", "-", "-o", self.path("body"), *args],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(self.path("body"), "rb") as f:
                return r.stdout, f.read()
        head, body = curl("http://%s/debug/pprof/heap" % self.addr)
        self.assertTrue(head.startswith("HTTP/1.1 200 OK"), head)
        self.assertIn('Content-Disposition: attachment; filename="heap"', head)
        self.assertIn("leak_slowly", str(pprof_wire.decode_profile(body)["samples"]))
        head, body = curl("http://%s/debug/pprof/" % self.addr)
        self.assertIn("Content-Type: text/html; charset=utf-8", head)
        self.assertIn(b'href="heap"', body)
        head, _ = curl("http://%s/nope" % self.addr)
        self.assertTrue(head.startswith("HTTP/1.1 404"), head)
        head, _ = curl("-X", "POST", "http://%s/debug/pprof/heap" % self.addr)
        self.assertTrue(head.startswith("HTTP/1.1 405"), head)
        self.assertIn("Allow: GET, HEAD", head)
        head, _ = curl("-H", "X-Big: " + "a" * 20000, "http://%s/debug/pprof/heap" % self.addr)
        self.assertTrue(head.startswith("HTTP/1.1 431"), head)

    def test_garbage_slow_clients_leave_program_and_profiler_working(self):
        svc = self.start_service()
        self.running(svc, blocks=100)
        host, port = self.addr.rsplit(":", 1)
        rng = random.Random(11)
        http_garbage(host, port, rng, 20)
        slow = []
        for _ in range(4):  # slowloris: half a request line, held open
            s = socket.create_connection((host, int(port)), timeout=30)
            s.sendall(b"GET /debug/pp")
            slow.append(s)
        code, _, body = http_get(self.addr, "/debug/pprof/heap")
        self.assertEqual(code, 200, "served while four slow clients wait")
        self.assertEqual(field(ctl(svc.pid, "status", check=True).stdout, "state"), "running")
        ctl(svc.pid, "report", "-o", self.path("r.pb"), check=True)
        for s in slow:
            s.close()
        rc, err, out = svc.stop()
        self.assertEqual(rc, 3, err)
        self.assertTrue(out.startswith("leaked "))

    def test_wildcard_is_refused_unless_asked(self):
        r = mimprof("run", "--http", "0.0.0.0:0", "--", "/bin/true")
        self.assertEqual(r.returncode, 125)
        self.assertIn("every interface", r.stderr)
        r = mimprof("run", "--http", "nonsense", "--", "/bin/true")
        self.assertEqual(r.returncode, 125)
        r = mimprof("run", "--http", "0.0.0.0:0", "--http-wildcard", "-o", self.path("o"), "--",
                    "/bin/true")
        self.assertEqual(r.returncode, 0, r.stderr)


class LibraryApi(TempDirTest):
    """The same service through the profiling library's control API
    (<mimprof/profiling_control.h>): slow_leak built as a program that
    links libmimprof-profiling and opens the control itself (no preload,
    no mimprof run), driven by the real `mimprof ctl`, go tool pprof and
    raw clients."""

    def setUp(self):
        super().setUp()
        if not SLOW_LEAK_LIB:
            self.skipTest("MIMPROF_SLOW_LEAK_LIB not set")

    def start_service(self, *mode, http=True):
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        if http:
            env["SLOW_LEAK_HTTP"] = "0"
        svc = Service([SLOW_LEAK_LIB, *mode], env=env)
        self.addCleanup(lambda: svc.proc.poll() is None and svc.stop())
        return svc

    def send(self, svc, line):
        """A line slow_leak acts on (close, open); its count answer."""
        svc.proc.stdin.write(line + "\n")
        svc.proc.stdin.flush()
        answer = svc.proc.stdout.readline()
        self.assertTrue(answer.startswith("count "), answer)

    def test_dormant_start_report_http_stop(self):
        svc = self.start_service()
        r = ctl(svc.pid, "status", check=True)
        self.assertEqual(field(r.stdout, "state"), "dormant")
        self.assertEqual(field(r.stdout, "every"), "0 (on request)")
        self.assertEqual(field(r.stdout, "output"), "none")
        addr = field(r.stdout, "http")
        self.assertTrue(addr.startswith("127.0.0.1:"), addr)
        self.assertIn(svc.pid, listed())
        code, _, body = http_get(addr, "/debug/pprof/heap")
        self.assertEqual(code, 503)
        self.assertIn(b"is dormant", body)
        before = start_leak_report(self, svc, self.path("now.pb"))
        low = svc.count() - before
        code, headers, body = http_get(addr, "/debug/pprof/heap")
        high = svc.count() - before
        self.assertEqual(code, 200, body)
        self.assertEqual(headers["content-disposition"], 'attachment; filename="heap"')
        self.assertEqual(body[:2], b"\x1f\x8b", "gzip")
        prof = pprof_wire.decode_profile(body)
        self.assertFalse([lb for _, _, lb, _ in prof["samples"] if "__delta__" in lb])
        inuse = pprof_wire.per_function(prof, "inuse_space")["leak_slowly"][0]
        self.assertGreater(inuse, 0.7 * low * LEAK, (low, high, inuse))
        self.assertLess(inuse, 1.3 * high * LEAK, (low, high, inuse))
        # every report was fed: alloc_* since the start = what is live
        alloc = pprof_wire.per_function(prof, "alloc_space")["leak_slowly"][0]
        self.assertAlmostEqual(alloc / inuse, 1.0, delta=0.01)
        if GO is not None:
            r = subprocess.run([GO, "tool", "pprof", "-top", "-sample_index=inuse_space",
                                "http://%s/debug/pprof/heap" % addr],
                               capture_output=True, env=go_env(self.tmp), timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertRegex(r.stdout.decode(), r"\d.*leak_slowly")
        img = self.path("now.mpimg")
        ctl(svc.pid, "image", "-o", img, check=True)
        self.assertIn("leak_slowly", mimprof("image", "top", img, check=True).stdout)
        r = ctl(svc.pid, "set", "interval", "8k", check=True)
        self.assertEqual(field(r.stdout, "next interval"), "8192")
        r = ctl(svc.pid, "stop", check=True)
        self.assertEqual(field(r.stdout, "state"), "dormant")
        self.assertEqual(field(r.stdout, "reports"), "3" if GO is not None else "2",
                         "report -o and the scrapes")
        code, _, _ = http_get(addr, "/debug/pprof/heap")
        self.assertEqual(code, 503, "dormant again")
        r = ctl(svc.pid, "start", "--every", "1s")
        self.assertEqual(r.returncode, 1)
        self.assertIn("on request only", r.stderr)
        r = ctl(svc.pid, "start", check=True)
        self.assertEqual(field(r.stdout, "interval"), "8192")
        rc, err, out = svc.stop()
        self.assertEqual((rc, err), (3, ""))
        self.assertTrue(out.startswith("leaked "), out)

    def test_garbage_then_close_and_reopen(self):
        svc = self.start_service()
        addr = field(ctl(svc.pid, "status", check=True).stdout, "http")
        rng = random.Random(5)
        self.assertTrue(raw(svc.pid, b"bogus\n").startswith(b"error: unknown command"))
        self.assertTrue(raw(svc.pid, b"x" * 100000).startswith(b"error: request longer"))
        for _ in range(10):
            raw(svc.pid, bytes(rng.randrange(256) for _ in range(rng.randrange(1, 2000))))
        host, port = addr.rsplit(":", 1)
        http_garbage(host, port, rng, 10)
        code, _, _ = http_get(addr, "/debug/pprof/heap")
        self.assertEqual(code, 503)
        self.assertEqual(field(ctl(svc.pid, "status", check=True).stdout, "state"), "dormant")
        self.send(svc, "close")
        r = ctl(svc.pid, "status")
        self.assertEqual(r.returncode, 1)
        self.assertIn("has no control socket", r.stderr)
        self.send(svc, "open")
        r = ctl(svc.pid, "status", check=True)
        self.assertEqual(field(r.stdout, "state"), "dormant")
        ctl(svc.pid, "start", check=True)
        ctl(svc.pid, "report", "-o", self.path("r.pb"), check=True)
        self.send(svc, "close")  # a running session ends with the control
        self.send(svc, "open")
        self.assertEqual(field(ctl(svc.pid, "status", check=True).stdout, "state"), "dormant")
        rc, err, _ = svc.stop()
        self.assertEqual((rc, err), (3, ""))

    def test_forked_children(self):
        svc = self.start_service("fork")
        child = svc.forked()
        r = ctl(child, "status", check=True)
        self.assertEqual((int(field(r.stdout, "pid")), field(r.stdout, "state")),
                         (child, "dormant"))
        self.assertEqual(field(r.stdout, "http"), "off", "the port is the parent's")
        ctl(child, "start", check=True)
        self.assertEqual(field(ctl(svc.pid, "status", check=True).stdout, "state"), "dormant")
        self.assertEqual(svc.stop()[0], 3)
        svc = self.start_service("fork-none")
        child = svc.forked()
        r = ctl(child, "status")
        self.assertEqual(r.returncode, 1)
        self.assertIn("has no control socket", r.stderr)
        ctl(svc.pid, "status", check=True)
        self.assertEqual(svc.stop()[0], 3)

    def test_hosted_control_is_trusted_by_its_credentials(self):
        # The socket's server is a relay (as mimprof run's collector):
        # SO_PEERCRED names it, the answer's SCM_CREDENTIALS name the
        # process, and ctl believes the answer.
        svc = self.start_service("hosted", http=False)
        self.assertEqual(len(children(svc.pid)), 1, "the relay")
        r = ctl(svc.pid, "status", check=True)
        self.assertEqual((int(field(r.stdout, "pid")), field(r.stdout, "state")),
                         (svc.pid, "dormant"))
        self.assertIn(svc.pid, listed())
        ctl(svc.pid, "start", "--interval", "16k", check=True)
        while svc.count() < 200:
            time.sleep(0.05)
        path = self.path("hosted.pb")
        ctl(svc.pid, "report", "-o", path, check=True)  # head and body: several chunks
        self.assertIn("leak_slowly", pprof_wire.per_function(decode(path), "inuse_space"))
        rc, err, _ = svc.stop()
        self.assertEqual((rc, err), (3, ""))

    def test_hosted_control_in_a_pid_namespace(self):
        # The credentials are translated into ctl's namespace: the pid
        # they name is the host's pid of the process, as ctl is given.
        unshare = shutil.which("unshare")
        if os.getuid() != 0 or unshare is None:
            self.skipTest("needs root and unshare")
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        svc = Service([unshare, "--pid", "--fork", "--mount-proc", SLOW_LEAK_LIB, "hosted"],
                      env=env)
        self.addCleanup(lambda: svc.proc.poll() is None and svc.stop())
        self.assertEqual(svc.pid, 1, "the pid as the service sees it")
        (outer,) = children(svc.proc.pid)
        r = ctl(outer, "status", check=True)
        self.assertEqual((field(r.stdout, "pid"), field(r.stdout, "state")), ("1", "dormant"))
        svc.stop()

    def test_a_host_that_answers_itself_is_refused(self):
        svc = self.start_service("impostor", http=False)
        [relay] = children(svc.pid)
        r = ctl(svc.pid, "status")
        self.assertEqual(r.returncode, 1)
        self.assertIn("the control socket of pid %d is held by pid %d: not trusted"
                      % (svc.pid, relay), r.stderr)
        self.assertEqual(r.stdout, "")
        self.assertNotIn(svc.pid, listed())
        # a raw client that sets no SO_PASSCRED reads the impostor's answer
        self.assertTrue(raw(svc.pid, b"status\n").startswith(b"ok\npid: %d\n" % svc.pid))
        rc, err, _ = svc.stop()
        self.assertEqual((rc, err), (3, ""))


if __name__ == "__main__":
    unittest.main(verbosity=2)
