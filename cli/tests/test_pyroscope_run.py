#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""mimprof run --pyroscope and the bare preload's PYROSCOPE_* variables,
against the workspace's Pyroscope stand-in (tests/pyroscope-server), every
result queried back through its query API (ProfileTypes, LabelValues,
SelectSeries, SelectMergeProfile): uploads while the program runs, interval
(alloc_*, __delta__="false") and live (inuse_*) values right, the program's
output and exit status unchanged, bad settings refused before the program
starts, an unreachable server costing nothing but a reported loss.

Registered by pyroscope-adapter/meson.build (it knows the library) from
cli/tests/meson.build's description: preload tests allowed, no
sanitizer. Needs MIMPROF, MIMPROF_EXAMPLE, MIMPROF_PRELOAD,
MIMPROF_PYROSCOPE_LIB and PYROSCOPE_STANDIN.

Tolerances: the example's requests allocate 2 KiB + 16 small tokens +
16 KiB + 8 KiB + 8 KiB each (~35,000 bytes) and leak 8 KiB; at a 16 KiB
interval the estimates over 1000+ requests are within a few percent (see
test_run.py for the estimator's standard deviation).
"""
import glob
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import unittest
import urllib.request

from tool_testlib import EXAMPLE, MIMPROF, TempDirTest, pprof_wire

PYTHON = "/usr/bin/python3"
PRELOAD = os.environ.get("MIMPROF_PRELOAD", "")
PYRO_LIB = os.environ.get("MIMPROF_PYROSCOPE_LIB", "")
STANDIN = os.environ.get("PYROSCOPE_STANDIN", "")
TYPES = {t: "memory:%s:%s:space:bytes" % (t, u) for t, u in (
    ("alloc_objects", "count"), ("alloc_space", "bytes"),
    ("inuse_objects", "count"), ("inuse_space", "bytes"),
    ("peak_inuse_objects", "count"), ("peak_inuse_space", "bytes"))}
PER_REQUEST = 2048 + 16384 + 8192 + 8192  # plus 16 small tokens


def rel_sd(size, interval, n):
    p = 1 - math.exp(-size / interval)
    return math.sqrt((1 - p) / (n * p))


class StandIn:
    """The stand-in on ephemeral ports, as the adapter's tests start it."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([PYTHON, STANDIN, "--rate-limit-mb", "0", *args],
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.match(r"READY data=(\d+) control=(\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError("stand-in did not start: %r" % line)
        self.port, self.control = int(m.group(1)), int(m.group(2))
        self.url = "http://127.0.0.1:%d" % self.port

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.proc.stdout.close()

    def _post(self, port, path, obj, headers=None):
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path),
                                     data=json.dumps(obj).encode(), method="POST",
                                     headers=dict({"Content-Type": "application/json"},
                                                  **(headers or {})))
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read().decode() or "{}")

    def control_post(self, path, obj=None):
        return self._post(self.control, path, obj or {})

    def control_get(self, path):
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.control, path),
                                    timeout=30) as r:
            return r.read().decode()

    def summary(self):
        return {k: int(v) for k, v in (l.split() for l in self.control_get("/summary").splitlines())}

    def requests(self):
        return json.loads(self.control_get("/requests"))["requests"]

    def query(self, method, tenant=None, **body):
        """A querier.v1 call in JSON; start/end default to the last hour."""
        now = int(time.time() * 1000)
        body.setdefault("start", now - 3600 * 1000)
        body.setdefault("end", now + 600 * 1000)
        headers = {"X-Scope-OrgID": tenant} if tenant else None
        return self._post(self.port, "/querier.v1.QuerierService/" + method, body, headers)

    def types(self, tenant=None):
        return {t["ID"] for t in self.query("ProfileTypes", tenant)["profileTypes"]}

    def label_values(self, name, selector, tenant=None):
        return self.query("LabelValues", tenant, name=name, matchers=[selector])["names"]

    def points(self, type_name, selector, tenant=None):
        """[(timestamp ms, value)] of one series, one point per stored profile."""
        out = self.query("SelectSeries", tenant, profileTypeID=TYPES[type_name],
                         labelSelector=selector, step=0.001)["series"]
        return sorted((int(p["timestamp"]), p["value"]) for s in out for p in s["points"])

    def merged(self, type_name, selector, start, end, tenant=None):
        """SelectMergeProfile -> {leaf function: value}."""
        prof = self.query("SelectMergeProfile", tenant, profileTypeID=TYPES[type_name],
                          labelSelector=selector, start=start, end=end)
        strings = prof.get("stringTable", [])
        fn = {f["id"]: strings[int(f["name"])] for f in prof.get("function", [])}
        loc = {l["id"]: fn[l["line"][0]["functionId"]] for l in prof.get("location", [])}
        leaves = {}
        for s in prof.get("sample", []):
            leaf = loc[s["locationId"][0]]
            leaves[leaf] = leaves.get(leaf, 0) + int(s["value"][0])
        return leaves


def refusing_port(test):
    """A loopback port that refuses connections: bound, never listening,
    and held until the test ends, so no other process can take it."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    test.addCleanup(s.close)
    return s.getsockname()[1]


class PyroscopeTest(TempDirTest):
    STORAGE = "v1"  # would delta a mislabelled alloc_* (and, as 1.x does, drops __delta__)

    @classmethod
    def setUpClass(cls):
        cls.server = StandIn("--storage", cls.STORAGE)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def setUp(self):
        super().setUp()
        self.server.control_post("/reset")
        self.server.control_post("/config", {"multitenancy": False, "auth": None})

    def run_cmd(self, args, env=None, **kw):
        """Runs args in the temporary directory; returns (CompletedProcess, seconds)."""
        kw.setdefault("timeout", 120)
        t0 = time.monotonic()
        r = subprocess.run(args, capture_output=True, text=True, cwd=self.tmp,
                           env=dict(os.environ, **(env or {})), **kw)
        return r, time.monotonic() - t0

    def mimprof_run(self, *opts, cmd, env=None):
        return self.run_cmd([MIMPROF, "run", *opts, "--", *cmd], env=env)[0]

    def assert_uploaded_line(self, stderr, service):
        m = re.search(r"mimprof: pyroscope: pid \d+: (\d+) profiles? uploaded \(service_name=%s\)"
                      % re.escape(service), stderr)
        self.assertTrue(m, stderr)
        return int(m.group(1))


class RunUploads(PyroscopeTest):
    ROUNDS = 1500

    def example(self, rounds, sleep_us):
        return [EXAMPLE, "--rounds", str(rounds), "--sleep-us", str(sleep_us)]

    def test_uploads_while_running_and_values_query_back(self):
        cmd = self.example(self.ROUNDS, 1000)  # >= 1.5 s
        plain, _ = self.run_cmd(cmd)
        self.assertEqual(plain.returncode, 0)
        t0 = int(time.time() * 1000)
        p = subprocess.Popen([MIMPROF, "run", "--pyroscope", self.server.url, "--app", "demo",
                              "--tag", "env=test", "--every", "250ms", "--interval", "16k",
                              "--", *cmd],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=self.tmp)
        try:
            seen_running = 0
            while p.poll() is None:
                if self.server.summary().get("profiles", 0) > 0:
                    seen_running = self.server.summary()["profiles"]
                    break
                time.sleep(0.05)
            out, err = p.communicate(timeout=120)
        finally:
            if p.poll() is None:
                p.kill()
        t1 = int(time.time() * 1000)
        self.assertEqual(p.returncode, 0, err)
        self.assertGreater(seen_running, 0, "a profile arrived while the program ran")
        self.assertEqual(out, plain.stdout)
        self.assertIn(plain.stderr, err, "the program's own stderr is unchanged")
        uploaded = self.assert_uploaded_line(err, "demo")
        self.assertEqual(os.listdir(self.tmp), [], "uploads only: no mimprof-out without -o")
        self.assertEqual(self.server.summary()["profiles"], uploaded)
        self.assertGreaterEqual(uploaded, 5, "every 250 ms over >= 1.5 s, and at exit")

        sel = '{service_name="demo", env="test"}'
        self.assertTrue(set(TYPES.values()) <= self.server.types())
        self.assertEqual(self.server.label_values("service_name", "{}"), ["demo"])
        self.assertEqual(self.server.label_values("env", '{service_name="demo"}'), ["test"])
        self.assertEqual(self.server.label_values("pyroscope_spy", sel), ["mimprof"])

        # interval values: each profile holds its own window's allocations
        # (v1 storage would delta them again without __delta__="false"):
        # their sum is the run's
        alloc = self.server.points("alloc_space", sel)
        self.assertEqual(2 * len(alloc), uploaded, "every report and its peak")
        self.assertTrue(all(t0 - 1000 <= ts <= t1 + 1000 for ts, _ in alloc), (t0, t1, alloc))
        total = sum(v for _, v in alloc)
        self.assertGreater(total, self.ROUNDS * PER_REQUEST * 0.93, total)
        self.assertLess(total, self.ROUNDS * (PER_REQUEST + 1200) * 1.07 + (1 << 20), total)
        # the allocations are spread over the windows, not all in one; a
        # window may be empty only when the program was descheduled for all
        # of its 250 ms (a loaded machine), so most, not all, must allocate
        full = [v for _, v in alloc[1:-1]]
        self.assertGreaterEqual(sum(1 for v in full if v > 0), len(full) / 2, alloc)
        objs = sum(v for _, v in self.server.points("alloc_objects", sel))
        self.assertGreater(objs, self.ROUNDS * 20 * 0.8, objs)  # 20 allocations per request

        # live values: snapshots; the leak grows, the last one holds it all
        inuse = self.server.points("inuse_space", sel)
        self.assertEqual(2 * len(inuse), uploaded)
        self.assertLess(inuse[0][1], inuse[-1][1])
        last_ts = inuse[-1][0]
        leaves = self.server.merged("inuse_space", sel, last_ts, last_ts)
        top = max(leaves, key=leaves.get)
        self.assertEqual(top, "remember_session", leaves)
        held = self.ROUNDS * 8192
        self.assertLess(abs(leaves[top] / held - 1), 4.5 * rel_sd(8192, 16384, self.ROUNDS),
                        (leaves[top], held))
        self.assertGreater(self.server.points("inuse_objects", sel)[-1][1], self.ROUNDS * 0.8)

        # the window's peak: its own profile type, one per report, at the
        # report's timestamp; never below the live heap at the window's end
        # by more than the mark's step (1/64 of the mark)
        peak = self.server.points("peak_inuse_space", sel)
        self.assertEqual([ts for ts, _ in peak], [ts for ts, _ in inuse])
        for (_, pv), (_, iv) in zip(peak, inuse):
            self.assertGreaterEqual(pv, iv * 64 / 65 - 4096, (peak, inuse))
        leaves = self.server.merged("peak_inuse_space", sel, last_ts, last_ts)
        self.assertEqual(max(leaves, key=leaves.get), "remember_session", leaves)

    def test_uploading_is_not_in_the_programs_profile(self):
        # The agent fitted, gzipped and sent each report on threads the
        # session sampled: at a 1 KiB interval every report showed
        # mp_pyro_prepare, mp_pyro_gzip and libcurl's frames, uploaded to
        # Pyroscope as the program's allocations.
        out = os.path.join(self.tmp, "prof")
        r = self.mimprof_run("--pyroscope", self.server.url, "--app", "clean", "--every", "100ms",
                             "--interval", "1k", "-o", out, cmd=self.example(300, 2000))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreaterEqual(self.assert_uploaded_line(r.stderr, "clean"), 3)
        files = sorted(glob.glob(os.path.join(out, "heap.*[0-9].pb.gz")))  # not the peaks
        self.assertGreaterEqual(len(files), 3, r.stderr)
        with_program = 0
        for f in files:
            with open(f, "rb") as fh:
                funcs = pprof_wire.per_function(pprof_wire.decode_profile(fh.read()), "alloc_space")
            # a window may hold no allocation at all (the exit's, a few ms
            # after the last period's: a CI run saw one); none holds ours
            with_program += "remember_session" in funcs
            ours = [n for n in funcs if n.startswith(("mp_pyro_", "mpt_rt_pyro", "report_once"))
                    or "libcurl" in n or n.startswith("curl_")]
            self.assertEqual(ours, [], "the profiler's upload work in %s" % f)
        self.assertGreaterEqual(with_program, 3, files)

    def test_files_too_with_output_and_push_protocol_with_tenant(self):
        self.server.control_post("/config", {"multitenancy": True})
        out = os.path.join(self.tmp, "prof")
        r = self.mimprof_run("--pyroscope", self.server.url, "--app", "pushed", "--tenant", "team-a",
                             "--pyroscope-protocol", "push", "--tag", "a=1,b=2", "--every", "0",
                             "-o", out, cmd=self.example(300, 0))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(glob.glob(os.path.join(out, "heap.*[0-9].pb.gz"))), 1)
        self.assertRegex(r.stderr, r"mimprof: 1 profile in ")
        self.assertEqual(self.assert_uploaded_line(r.stderr, "pushed"), 2, "a report, its peak")
        reqs = self.server.requests()
        self.assertEqual([q["path"] for q in reqs], ["/push.v1.PusherService/Push"] * 2)
        headers = {k.lower(): v for k, v in reqs[0]["headers"]}
        self.assertEqual(headers.get("x-scope-orgid"), "team-a")
        sel = '{service_name="pushed", a="1", b="2"}'
        self.assertEqual(len(self.server.points("alloc_space", sel, tenant="team-a")), 1)
        self.assertEqual(self.server.label_values("service_name", "{}", tenant="other"), [])

    def test_basic_auth_is_hidden_from_ps_and_taken_from_the_environment(self):
        self.server.control_post("/config", {"auth": "basic:stack1:s3cret"})
        code = ("import sys, time\nkeep = bytearray(1 << 20)\nprint('ready', flush=True)\n"
                "sys.stdin.readline()\n")
        p = subprocess.Popen([MIMPROF, "run", "--pyroscope", self.server.url, "--app", "auth",
                              "--basic-auth", "stack1:s3cret", "--every", "0", "--",
                              PYTHON, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=self.tmp)
        try:
            self.assertEqual(p.stdout.readline(), "ready\n")
            with open("/proc/%d/cmdline" % p.pid, "rb") as f:
                cmdline = f.read().split(b"\0")
            self.assertIn(b"stack1:xxxxxx", cmdline)
            self.assertNotIn(b"s3cret", b" ".join(cmdline))
            _, err = p.communicate("\n", timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(self.assert_uploaded_line(err, "auth"), 2)  # a report and its peak
        # USER on the command line, the password in the environment
        r = self.mimprof_run("--pyroscope", self.server.url, "--app", "auth", "--basic-auth",
                             "stack1", "--every", "0", cmd=[PYTHON, "-c", "pass"],
                             env={"PYROSCOPE_BASIC_AUTH_PASSWORD": "s3cret"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.assert_uploaded_line(r.stderr, "auth"), 2)
        # a wrong password: rejected, not retried, reported; the status is the program's
        r = self.mimprof_run("--pyroscope", self.server.url, "--app", "auth", "--basic-auth",
                             "stack1:wrong", "--every", "0",
                             cmd=[PYTHON, "-c", "raise SystemExit(4)"])
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertRegex(r.stderr, r"0 of 2 profiles uploaded, 2 lost \(.*rejected 2,")
        self.assertEqual(self.server.summary()["profiles"], 4)

    def test_the_agents_descriptors_sit_at_the_top_of_the_range(self):
        # The agent's connection, libcurl's own wake-up socketpair and the
        # spool lock are lasting descriptors; they are close-on-exec and at
        # the top of the range (>= RLIMIT_NOFILE - 64, at most 4096), never
        # at a number the program's open() hands out. The program looks
        # once its first uploads are done (the connection is kept alive
        # between them). The program itself opens no socket.
        code = ("import os, resource, time\nkeep = bytearray(1 << 20)\ntime.sleep(1.5)\n"
                "tcp = set()\n"
                "for t in ('/proc/self/net/tcp', '/proc/self/net/tcp6'):\n"
                "    for l in open(t).read().splitlines()[1:]:\n"
                "        tcp.add('socket:[%s]' % l.split()[9])\n"
                "for fd in sorted(int(n) for n in os.listdir('/proc/self/fd')):\n"
                "    try:\n        t = os.readlink('/proc/self/fd/%d' % fd)\n"
                "    except OSError:\n        continue\n"
                "    if t.startswith('socket:') or t.endswith('/.lock'):\n"
                "        kind = 'tcp' if t in tcp else 'lock' if t.endswith('/.lock') else 'pair'\n"
                "        print(fd, t, os.get_inheritable(fd), kind)\n"
                "print('limit', resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n")
        spool = self.path("spool")
        # Under `mimprof run`'s collector, the collector uploads: the
        # program holds no connection and no spool lock of ours.
        r = self.mimprof_run("--pyroscope", self.server.url, "--app", "fds", "--every", "200ms",
                             cmd=[PYTHON, "-c", code],
                             env={"MIMPROF_PYROSCOPE_SPOOL_DIR": spool})
        self.assertEqual(r.returncode, 0, r.stderr)
        kinds = [l.split()[3] for l in r.stdout.splitlines()[:-1]]
        self.assertNotIn("tcp", kinds, r.stdout)
        self.assertNotIn("lock", kinds, r.stdout)
        # A process that uploads itself (--no-collector, the bare preload):
        r = self.mimprof_run("--pyroscope", self.server.url, "--app", "fds", "--every", "200ms",
                             "--no-collector", cmd=[PYTHON, "-c", code],
                             env={"MIMPROF_PYROSCOPE_SPOOL_DIR": spool})
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        limit = int(lines[-1].split()[1])
        held = [l.split() for l in lines[:-1]]
        kinds = [k for _, _, _, k in held]
        self.assertIn("tcp", kinds, r.stdout)
        self.assertIn("lock", kinds, r.stdout)
        self.assertGreaterEqual(kinds.count("pair"), 2, "libcurl's wake-up pair: " + r.stdout)
        for fd, target, inheritable, _ in held:
            self.assertGreaterEqual(int(fd), min(limit, 4096) - 64, (fd, target))
            self.assertEqual(inheritable, "False", (fd, target))

    def test_forked_children_upload_to_the_same_series(self):
        code = ("import os, sys\n"
                "pid = os.fork()\n"
                "if pid == 0:\n    b = bytearray(8 << 20)\n    sys.exit(0)\n"
                "os.waitpid(pid, 0)\nprint(pid)\n")
        r = self.mimprof_run("--pyroscope", self.server.url, "--app", "forks", "--every", "0",
                             "--interval", "64k", cmd=[PYTHON, "-c", code])
        self.assertEqual(r.returncode, 0, r.stderr)
        # the collector's one line; the child's final report and the
        # parent's merged into one profile per window (a report and its
        # peak; one window, or two when the exits straddle a window's
        # middle): the server never gets two profiles of one series with
        # one timestamp (it would keep one of them)
        uploaded = self.assert_uploaded_line(r.stderr, "forks")
        alloc = self.server.points("alloc_space", '{service_name="forks"}')
        self.assertEqual(2 * len(alloc), uploaded)
        self.assertIn(len(alloc), (1, 2), alloc)
        self.assertEqual(len(alloc), len(set(ts for ts, _ in alloc)), alloc)
        self.assertGreaterEqual(sum(v for _, v in alloc), 8 << 20)
        self.server.control_post("/reset")
        r = self.mimprof_run("--pyroscope", self.server.url, "--app", "forks", "--every", "0",
                             "--no-follow-fork", cmd=[PYTHON, "-c", code])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(self.server.points("alloc_space", '{service_name="forks"}')), 1)

    def test_the_environment_alone_turns_uploads_on(self):
        r = self.mimprof_run("--every", "0", "--tag", "from=flag", cmd=self.example(100, 0),
                             env={"PYROSCOPE_SERVER_ADDRESS": self.server.url,
                                  "PYROSCOPE_APPLICATION_NAME": "ambient",
                                  "PYROSCOPE_TAGS": "from=env,kept=yes"})
        self.assertEqual(r.returncode, 125, "a flag adds to the variables, a duplicate is refused")
        self.assertIn("--tag", r.stderr)
        r = self.mimprof_run("--every", "0", "--app", "flagged", cmd=self.example(100, 0),
                             env={"PYROSCOPE_SERVER_ADDRESS": self.server.url,
                                  "PYROSCOPE_APPLICATION_NAME": "ambient",
                                  "PYROSCOPE_TAGS": "kept=yes"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.assert_uploaded_line(r.stderr, "flagged"), 2, "the flag wins")
        self.assertEqual(self.server.label_values("kept", '{service_name="flagged"}'), ["yes"])

    def test_killed_program_uploads_its_last_report(self):
        r = self.mimprof_run("--pyroscope", self.server.url, "--app", "killed", "--every", "0",
                             cmd=[PYTHON, "-c", "import os, signal\nb = bytearray(8 << 20)\n"
                                                "os.kill(os.getpid(), signal.SIGTERM)"])
        self.assertEqual(r.returncode, 128 + signal.SIGTERM, r.stderr)
        inuse = self.server.points("inuse_space", '{service_name="killed"}')
        self.assertEqual(len(inuse), 1)
        self.assertGreaterEqual(inuse[0][1], 8 << 20)


class RunRefuses(PyroscopeTest):
    def refused(self, *opts, env=None):
        marker = os.path.join(self.tmp, "ran")
        r = self.mimprof_run(*opts, cmd=["touch", marker], env=env)
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertFalse(os.path.exists(marker), "the program did not start")
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertTrue(lines[0].startswith("mimprof run: "), lines[0])
        return lines[0]

    def test_bad_settings_are_refused_before_the_program_starts(self):
        url = self.server.url
        line = self.refused("--pyroscope", url, "--app", "demo", "--tag", "__env=test")
        self.assertRegex(line, r"--tag: .*'__env'.*reserve")
        line = self.refused("--pyroscope", url, "--app", "demo", "--tag", "env=a}b")
        self.assertRegex(line, r"--tag: .*env")
        line = self.refused("--pyroscope", url, "--app", "demo", "--tag", "env")
        self.assertIn("--tag: tag 'env' is not written name=value", line)
        # Pyroscope 1.x refuses every upload with such a label
        line = self.refused("--pyroscope", url, "--app", "demo", "--tag", "1az=x")
        self.assertRegex(line, r"--tag: label name '1az' starts with a digit")
        line = self.refused("--pyroscope", url, "--app", "demo",
                            env={"PYROSCOPE_UPLOAD_INTERVAL": "59m"})
        self.assertRegex(line, r"PYROSCOPE_UPLOAD_INTERVAL: .*1 h")
        line = self.refused("--pyroscope", url, "--app", "de mo")
        self.assertRegex(line, r"--app: application name 'de mo'")
        line = self.refused("--pyroscope", url)
        self.assertIn("--pyroscope needs --app NAME (or PYROSCOPE_APPLICATION_NAME)", line)
        line = self.refused("--pyroscope", "ftp://example.com", "--app", "demo")
        self.assertRegex(line, r"--pyroscope: server URL 'ftp://example.com'")
        line = self.refused("--pyroscope", url, "--app", "demo", "--tenant", "..")
        self.assertIn("--tenant", line)
        line = self.refused("--app", "demo", "--tag", "env=test")
        self.assertIn("need --pyroscope URL", line)
        line = self.refused("--pyroscope", url, "--app", "demo", "--basic-auth", "u:p",
                            "--bearer-token", "t")
        self.assertIn("exclude each other", line)
        line = self.refused("--pyroscope", url, "--app", "demo", "--basic-auth", "u")
        self.assertIn("PYROSCOPE_BASIC_AUTH_PASSWORD", line)
        line = self.refused("--pyroscope", url, "--app", "demo", "--pyroscope-protocol", "grpc")
        self.assertIn("--pyroscope-protocol wants one of ingest, push", line)
        # the environment is checked too, its variable named
        line = self.refused("--pyroscope", url, env={"PYROSCOPE_APPLICATION_NAME": "demo",
                                                     "PYROSCOPE_TAGS": "a=1,__b=2"})
        self.assertIn("PYROSCOPE_TAGS", line)
        line = self.refused(env={"PYROSCOPE_SERVER_ADDRESS": url})
        self.assertIn("PYROSCOPE_SERVER_ADDRESS needs --app NAME", line)
        self.assertEqual(self.server.summary().get("requests", 0), 0)

    def test_missing_library_is_a_clear_error(self):
        line = self.refused("--pyroscope", self.server.url, "--app", "demo",
                            env={"MIMPROF_PYROSCOPE_LIB": "/nonexistent/libmimprof-pyroscope.so"})
        self.assertIn("--pyroscope needs libmimprof-pyroscope", line)
        self.assertIn("MIMPROF_PYROSCOPE_LIB=/nonexistent/libmimprof-pyroscope.so", line)
        self.assertIn("-Dpyroscope=enabled", line)

    def test_library_next_to_the_preload(self):
        lib = os.path.join(self.tmp, "lib")
        os.makedirs(lib)
        shutil.copy2(PRELOAD, lib)
        for f in glob.glob(os.path.join(os.path.dirname(PRELOAD), "libmimprof-profiling.so*")):
            if os.path.isfile(f):  # the library the preload needs ($ORIGIN)
                shutil.copy2(f, lib)
        shutil.copy2(PYRO_LIB, os.path.join(lib, "libmimprof-pyroscope.so.0"))
        env = {"MIMPROF_PRELOAD_DIR": lib, "MIMPROF_PYROSCOPE_LIB": ""}
        r = self.mimprof_run("--pyroscope", self.server.url, "--app", "found", "--every", "0",
                             "--follow-exec", cmd=["sh", "-c", "echo $MIMPROF_PYROSCOPE_LIB"],
                             env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), os.path.realpath(os.path.join(lib, "libmimprof-pyroscope.so.0")))
        self.assertEqual(self.assert_uploaded_line(r.stderr, "found"), 2)
        # its report and the report's peak (sh's profile has no sample)
        self.assertEqual(self.server.summary().get("status_200"), 2)


class Unreachable(PyroscopeTest):
    def test_program_runs_unchanged_and_the_loss_is_reported(self):
        code = ("import time\nkeep = [bytearray(100000) for _ in range(50)]\nprint('done')\n"
                "time.sleep(0.6)\nraise SystemExit(3)\n")
        plain, plain_s = self.run_cmd([PYTHON, "-c", code])
        self.assertEqual(plain.returncode, 3)
        url = "http://127.0.0.1:%d" % refusing_port(self)
        r, secs = self.run_cmd([MIMPROF, "run", "--pyroscope", url, "--app", "demo",
                                "--every", "200ms", "--", PYTHON, "-c", code],
                               env={"MIMPROF_PYROSCOPE_FLUSH_DEADLINE": "1s",
                                    "MIMPROF_PYROSCOPE_EXIT_DEADLINE": "1s"})
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertEqual(r.stdout, plain.stdout)
        m = re.search(r"mimprof: pyroscope: pid \d+: 0 of (\d+) profiles uploaded, (\d+) lost "
                      r"\(queue full 0, rejected 0, retries exhausted 0, stop deadline (\d+), "
                      r"spool i/o 0, not queued 0\), 0 spooled; failed requests: connect (\d+), "
                      r".*; last error: .*onnect", r.stderr)
        self.assertTrue(m, r.stderr)
        total, lost, at_deadline, connect = map(int, m.groups())
        self.assertGreaterEqual(total, 3)
        self.assertEqual(lost, total)
        self.assertEqual(at_deadline, total)
        self.assertGreaterEqual(connect, 1)
        # mimprof run says why it waits after the program (the exit deadline)
        self.assertRegex(r.stderr, r"mimprof: collector: \d+ uploads? of the last reports not "
                         r"delivered yet; trying for up to 1 s more "
                         r"\(MIMPROF_PYROSCOPE_EXIT_DEADLINE\)")
        # the program was never blocked: only the exit waited, for the deadline
        # (the collector's, MIMPROF_PYROSCOPE_EXIT_DEADLINE, which uploads here)
        # (retrying would hold it for the retry budget, far longer than this
        # bound, which leaves a loaded machine room for two separate runs)
        self.assertLess(secs, plain_s + 1.0 + 10.0, (secs, plain_s))

    def test_loss_is_reported_when_the_program_closes_its_stderr(self):
        # Regression: sort closes stdout and stderr at
        # exit (gnulib's close_stdout), before the runtime's exit handler
        # counts the loss; the line went to the closed descriptor 2
        # (EBADF) and was lost, or into the agent's socket once that took
        # number 2. Now mimprof run prints it from the process's status file.
        data = self.write("in.txt", "".join("%d\n" % (i * 7919 % 100003) for i in range(50000))
                          .encode())
        plain, _ = self.run_cmd(["/usr/bin/sort", data])
        self.assertEqual(plain.returncode, 0, plain.stderr)
        url = "http://127.0.0.1:%d" % refusing_port(self)
        r, _ = self.run_cmd([MIMPROF, "run", "--pyroscope", url, "--app", "demo", "--every", "0",
                             "--", "/usr/bin/sort", data],
                            env={"MIMPROF_PYROSCOPE_FLUSH_DEADLINE": "1s",
                                 "MIMPROF_PYROSCOPE_EXIT_DEADLINE": "1s", "TMPDIR": self.tmp})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, plain.stdout)
        self.assertRegex(r.stderr, r"mimprof: pyroscope: pid \d+: 0 of 2 profiles uploaded, 2 lost "
                         r"\(.*stop deadline 2,")
        self.assertEqual(glob.glob(os.path.join(self.tmp, "mimprof-run-*")), [], "removed")


class BarePreload(PyroscopeTest):
    """LD_PRELOAD and PYROSCOPE_* without the mimprof launcher."""

    def env(self, app, **extra):
        env = {"LD_PRELOAD": PRELOAD, "PYROSCOPE_SERVER_ADDRESS": self.server.url,
               "PYROSCOPE_APPLICATION_NAME": app, "MIMPROF_PYROSCOPE_LIB": PYRO_LIB}
        env.update(extra)
        return env

    def test_uploads_at_the_upload_interval(self):
        cmd = [EXAMPLE, "--rounds", "1000", "--sleep-us", "1000"]
        plain, _ = self.run_cmd(cmd)
        r, _ = self.run_cmd(cmd, env=self.env("bare", PYROSCOPE_TAGS="mode=bare,team=heap",
                                              PYROSCOPE_UPLOAD_INTERVAL="200ms",
                                              MIMPROF_INTERVAL="16k",
                                              MIMPROF_PYROSCOPE_PROTOCOL="push"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, plain.stdout)
        self.assertEqual(r.stderr, plain.stderr, "nothing to say when nothing was lost")
        self.assertEqual(os.listdir(self.tmp), [], "no report files: uploads only")
        sel = '{service_name="bare", mode="bare", team="heap"}'
        alloc = self.server.points("alloc_space", sel)
        self.assertGreaterEqual(len(alloc), 4, "every 200 ms over >= 1 s, and at exit")
        total = sum(v for _, v in alloc)
        self.assertGreater(total, 1000 * PER_REQUEST * 0.93, total)
        self.assertLess(total, 1000 * (PER_REQUEST + 1200) * 1.07 + (1 << 20), total)
        self.assertEqual({q["path"] for q in self.server.requests()}, {"/push.v1.PusherService/Push"})

    def test_follows_exec_and_respects_disable(self):
        # a shell that execs the program: both images upload (the preload
        # follows exec by default without the launcher)
        r, _ = self.run_cmd(["sh", "-c", 'exec "$0" --rounds 300 --sleep-us 0', EXAMPLE],
                            env=self.env("exec", MIMPROF_INTERVAL="16k",
                                         # reports are aligned to the wall clock: the
                                         # default 10 s could fall in the program's life
                                         PYROSCOPE_UPLOAD_INTERVAL="1800s"))
        self.assertEqual(r.returncode, 0, r.stderr)
        inuse = self.server.points("inuse_space", '{service_name="exec"}')
        self.assertEqual(len(inuse), 1, "one final report: the example's")
        leaves = self.server.merged("inuse_space", '{service_name="exec"}', inuse[0][0], inuse[0][0])
        self.assertEqual(max(leaves, key=leaves.get), "remember_session")
        # MIMPROF_DISABLE=1: the allocator only, nothing uploaded
        self.server.control_post("/reset")
        r, _ = self.run_cmd([EXAMPLE, "--rounds", "100", "--sleep-us", "0"],
                            env=self.env("off", MIMPROF_DISABLE="1"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.server.summary().get("requests", 0), 0)
        self.assertEqual(os.listdir(self.tmp), [])

    def test_configuration_errors_leave_the_program_unprofiled(self):
        r, _ = self.run_cmd([EXAMPLE, "--rounds", "50", "--sleep-us", "0"],
                            env=self.env("bad", PYROSCOPE_TAGS="__x=1"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stderr, r"mimprof: pyroscope: PYROSCOPE_TAGS: .*; not uploading")
        r, _ = self.run_cmd([EXAMPLE, "--rounds", "50", "--sleep-us", "0"],
                            env=self.env("nolib", MIMPROF_PYROSCOPE_LIB="/nonexistent.so"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("mimprof: pyroscope: cannot load libmimprof-pyroscope: /nonexistent.so", r.stderr)
        self.assertEqual(self.server.summary().get("requests", 0), 0)
        self.assertEqual(os.listdir(self.tmp), [], "and no files either")

class NoHarm(PyroscopeTest):
    """bash keeps its own environment table: the runtime must not need to
    write the environment to upload; and what a server answers never
    reaches the terminal raw."""

    def test_bash_uploads(self):
        r = self.mimprof_run("--pyroscope", self.server.url, "--app", "bashapp", "--every", "0",
                             "-i", "4k", cmd=["/bin/bash", "-c", "x=1; /bin/true; exit 3"])
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertGreaterEqual(self.assert_uploaded_line(r.stderr, "bashapp"), 1)
        self.assertGreaterEqual(self.server.summary().get("profiles", 0), 1)

    def test_server_error_body_is_sanitized(self):
        import http.server
        import threading

        class Hostile(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = b'{"code":"invalid","message":"bad\x1b[31mred\x07\x1b]0;title\x07"}'
                self.send_response(400)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        try:
            url = "http://127.0.0.1:%d" % srv.server_address[1]
            r = self.mimprof_run("--pyroscope", url, "--app", "hostile", "--every", "0",
                                 cmd=["true"])
        finally:
            srv.shutdown()
            srv.server_close()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("HTTP 400", r.stderr)
        self.assertIn("bad?[31mred?", r.stderr)
        self.assertNotIn("\x1b", r.stderr)
        self.assertNotIn("\x07", r.stderr)


class CxxNames(PyroscopeTest):
    """What the server receives from a C++ program: demangled,
    qualified names (shop::Cache<shop::Item>::put, not _ZN4shop5Cache...
    nor a bare put) in both symbolize modes, as the query API returns
    them."""

    def test_server_receives_demangled_names(self):
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cxx", "shop.cpp")
        exe = os.path.join(self.tmp, "shop")
        subprocess.run(["g++", "-O2", "-g", src, "-o", exe], check=True, timeout=300)
        for mode in ("functions", "lines"):
            self.server.control_post("/reset")
            app = "shop-" + mode
            r = self.mimprof_run("--pyroscope", self.server.url, "--app", app, "-s", mode,
                                 "--interval", "16k", cmd=[exe, "300"])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout, "300 items, 1500 kept\n")
            sel = '{service_name="%s"}' % app
            inuse = self.server.points("inuse_space", sel)
            self.assertTrue(inuse, "uploaded")
            prof = self.server.query("SelectMergeProfile", profileTypeID=TYPES["inuse_space"],
                                     labelSelector=sel, start=inuse[-1][0], end=inuse[-1][0])
            strings = prof.get("stringTable", [])
            names = {strings[int(f["name"])] for f in prof.get("function", [])}
            # operator new is dropped from the leaf end: no stack holds it
            self.assertNotIn("operator new", names, (mode, sorted(names)))
            for want in ("shop::Cache<shop::Item>::put", "shop::make_vector<int>",
                         "shop::fill(unsigned long)::{lambda(unsigned long)#1}::operator()",
                         "(anonymous namespace)::scratch"):
                self.assertIn(want, names, (mode, sorted(names)))
            self.assertNotIn("put", names)
            self.assertFalse([n for n in names if n.startswith("_Z")], (mode, sorted(names)))


if __name__ == "__main__":
    for need in (MIMPROF, EXAMPLE, PRELOAD, PYRO_LIB, STANDIN):
        assert need and os.path.exists(need), \
            "set MIMPROF, MIMPROF_EXAMPLE, MIMPROF_PRELOAD, MIMPROF_PYROSCOPE_LIB, PYROSCOPE_STANDIN"
    unittest.main(verbosity=2)
