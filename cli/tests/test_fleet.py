#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A fleet on Pyroscope, which keeps one profile per series and
millisecond (the stand-in models it; the real v1.12.0 does it):

- replicas of one service in containers (each in its own PID and UTS
  namespace, the same app and tags, uploading at once) are all kept: the
  server's alloc_space over the run is the sum of every replica's local
  reports (`hostname`, the instance label, keeps them apart);
- a process that exits 0, 50, 100, 500 or 999 ms after a report
  boundary loses no report: inuse and peak summed over the run are the
  local reports' sums;
- an exit-only run (-e 0) is found over [start, exit + 1 s];
- a 131,072-stack exit report on a loaded machine is stored whole (the
  real server only: the stand-in takes minutes for it).

Against the stand-in (PYROSCOPE_STANDIN) and the real server
(PYROSCOPE_REAL, when built; required under MIMPROF_PYROSCOPE_REQUIRED=1),
both protocols. Needs MIMPROF, MIMPROF_PYROSCOPE_LIB, MIMPROF_RAMP; the
replicas need root and unshare (as ./dev test runs)."""
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import unittest
import urllib.request

from tool_testlib import MIMPROF, TempDirTest, decode, reports
from test_pyroscope_run import StandIn, TYPES

RAMP = os.environ.get("MIMPROF_RAMP", "")
WIDE_EXIT = os.environ.get("MIMPROF_WIDE_EXIT", "")
UNSHARE = shutil.which("unshare")
REQUIRED = os.environ.get("MIMPROF_PYROSCOPE_REQUIRED") == "1"


def _real_module():
    path = os.environ.get("PYROSCOPE_REAL")
    if not path or not os.path.isfile(path):
        return None
    spec = importlib.util.spec_from_file_location("pyroscope_real", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


REAL = _real_module()
HAVE_REAL = REAL is not None and (REQUIRED or REAL.find_binary() is not None)


def merge_total(url, type_name, selector, start_ms, end_ms):
    """SelectMergeProfile's total (Connect, JSON) over [start_ms, end_ms]."""
    body = json.dumps({"profileTypeID": TYPES[type_name], "labelSelector": selector,
                       "start": str(start_ms), "end": str(end_ms)}).encode()
    req = urllib.request.Request(url + "/querier.v1.QuerierService/SelectMergeProfile",
                                 data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        prof = json.loads(r.read().decode() or "{}")
    return sum(int(s["value"][0]) for s in prof.get("sample", []))


def local_total(dirs, type_name, peak=False):
    """The sum of `type_name` over every report (or peak) in dirs."""
    total = 0
    for d in dirs:
        for paths in reports(d, peak=peak).values():
            for p in paths:
                prof = decode(p)
                names = [t for t, _u in prof["types"]]
                if type_name not in names:
                    continue
                k = names.index(type_name)
                total += sum(s[1][k] for s in prof["samples"])
    return total


def now_ms():
    return int(time.time() * 1000)


class Fleet:
    """The checks, against the server at self.url (set by a subclass)."""

    WAIT_S = 5  # the stand-in stores at once

    def wait_equal(self, type_name, selector, start, end, want):
        """The server's total, polled until it equals want (a real server
        stores eventually) or WAIT_S: then the last answer."""
        deadline = time.monotonic() + self.WAIT_S
        while True:
            got = merge_total(self.url, type_name, selector, start, end)
            if got == want or time.monotonic() > deadline:
                return got
            time.sleep(0.5)

    def check_replicas(self, proto):
        if UNSHARE is None or os.getuid() != 0:
            self.skipTest("needs root and unshare (as ./dev test runs)")
        app = "fleet.%s.%d.%d" % (proto, os.getpid(), now_ms())
        start = now_ms() - 1000
        procs, dirs = [], []
        for i in range(4):
            out = self.path("replica%d" % i)
            dirs.append(out)
            # as a container runs it: pid 1 of its namespace, a host name of its own
            procs.append(subprocess.Popen(
                [UNSHARE, "--pid", "--fork", "--uts", "--mount-proc", "sh", "-c",
                 'hostname "$0" && exec "$@"', "replica-%d" % i, MIMPROF, "run", "--pyroscope",
                 self.url, "--app", app, "--pyroscope-protocol", proto, "-o", out, "-e", "1s",
                 "--", RAMP, "50"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        for p in procs:
            _o, err = p.communicate(timeout=120)
            self.assertEqual(p.returncode, 0, err)
        end = now_ms() + 2000
        sel = '{service_name="%s"}' % app
        # alloc over the run, and in-use summed over every window's instant:
        # a replica's report that another's replaced changes either sum
        for kind in ("alloc_space", "inuse_space"):
            want = local_total(dirs, kind)
            self.assertGreater(want, 0, kind)
            got = self.wait_equal(kind, sel, start, end, want)
            self.assertEqual(got, want, "the server kept %.2f of the replicas' %s"
                             % (got / want, kind))

    def run_ramp(self, app, proto, every, *ramp, opts=(), status=0):
        out = self.path(app)
        start = now_ms() - 1000
        r = subprocess.run([MIMPROF, "run", "--pyroscope", self.url, "--app", app,
                            "--pyroscope-protocol", proto, "-o", out, "-e", every, *opts, "--",
                            RAMP, *map(str, ramp)], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, status, r.stderr)
        return out, start, now_ms()

    def check_exit_offsets(self, proto, opts=(), how="exit"):
        """how: the ramp's end (ramp.c): exit, _exit, or a SIGTERM it does
        not handle (mimprof run's status 128 + 15)."""
        for offset in (0, 50, 100, 500, 999):
            with self.subTest(offset=offset, opts=opts, how=how):
                app = "ramp.%s.%d.%d.%d" % (proto, offset, os.getpid(), now_ms())
                out, start, end = self.run_ramp(app, proto, "2s", 25, 2000, offset, how,
                                                opts=opts, status=143 if how == "term" else 0)
                sel = '{service_name="%s"}' % app
                for kind, peak in (("inuse_space", False), ("peak_inuse_space", True)):
                    want = local_total([out], kind.replace("peak_", ""), peak=peak)
                    self.assertGreater(want, 0, kind)
                    got = self.wait_equal(kind, sel, start, end + 2000, want)
                    self.assertEqual(got, want, "%s: %.3f of the local reports" % (kind, got / want))

    def check_exit_only(self, proto):
        app = "exitonly.%s.%d.%d" % (proto, os.getpid(), now_ms())
        out, start, end = self.run_ramp(app, proto, "0", 20)
        want = local_total([out], "inuse_space")
        self.assertGreater(want, 0)
        got = self.wait_equal("inuse_space", '{service_name="%s"}' % app, start, end + 1000, want)
        self.assertEqual(got, want)

    def check_wide_exit(self, proto):
        """A 131,072-stack exit report (13 parts, above the server's 4 MB/s
        rate limit) on a machine loaded by another job: every part stored
        (the collector's exit deadline, not the 5 s a process waits)."""
        app = "wide.%s.%d.%d" % (proto, os.getpid(), now_ms())
        out = self.path(app)
        load = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            start = now_ms() - 1000
            r = subprocess.run([MIMPROF, "run", "--pyroscope", self.url, "--app", app,
                                "--pyroscope-protocol", proto, "-o", out, "-e", "0", "-i", "16",
                                "--", WIDE_EXIT, "17"], capture_output=True, text=True,
                               timeout=600)
            end = now_ms()
        finally:
            load.kill()
            load.wait()
        self.assertEqual(r.returncode, 0, r.stderr)
        # nothing lost: the upload summary (printed when a request failed,
        # e.g. the server's 429 rate limit, retried) says "0 lost"
        self.assertNotRegex(r.stderr, r"\b[1-9][0-9]* lost\b")
        sel = '{service_name="%s"}' % app
        for kind in ("inuse_space", "alloc_space"):
            want = local_total([out], kind)
            # in use: 2^17 stacks of 1 KiB; allocated: what the profiler's
            # overflow shards held of them
            self.assertGreater(want, (128 << 20) if kind == "inuse_space" else 0, kind)
            got = self.wait_equal(kind, sel, start, end + 1000, want)
            self.assertEqual(got, want, "%s: %.3f of the exit report" % (kind, got / want))


class FleetStandIn(Fleet, TempDirTest):
    @classmethod
    def setUpClass(cls):
        cls.server = StandIn("--storage", "v1")
        cls.url = cls.server.url

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_replicas_all_kept_ingest(self):
        self.check_replicas("ingest")

    def test_exit_after_a_boundary_loses_nothing_ingest(self):
        self.check_exit_offsets("ingest")

    def test_exit_after_a_boundary_loses_nothing_without_collector(self):
        # each process's own agent (its stamper's stop-window rule)
        self.check_exit_offsets("ingest", opts=("--no-collector",))

    def test_underscore_exit_and_sigterm_after_a_boundary_lose_nothing(self):
        self.check_exit_offsets("ingest", how="_exit")
        self.check_exit_offsets("ingest", how="term")

    def test_exit_only_report_inside_the_lifetime_ingest(self):
        self.check_exit_only("ingest")

    def test_instance_label_named_or_off(self):
        """hostname=<host name> by default; --instance NAME names it;
        --instance none and a user's own hostname tag leave it out."""
        for opts, env, want in (((), {}, [socket.gethostname()]),
                                (("--instance", "web-3"), {}, ["web-3"]),
                                (("--instance", "none"), {}, []),
                                (("--tag", "hostname=mine"), {}, ["mine"]),
                                ((), {"PYROSCOPE_TAGS": "zone=a, hostname=env"}, ["env"])):
            with self.subTest(opts=opts, env=env):
                app = "instance.%d" % now_ms()
                r = subprocess.run([MIMPROF, "run", "--pyroscope", self.url, "--app", app,
                                    *opts, "-e", "0", "--", RAMP, "2"], capture_output=True,
                                   text=True, timeout=120, env=dict(os.environ, **env))
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(self.server.label_values("hostname",
                                                          '{service_name="%s"}' % app), want)
        r = subprocess.run([MIMPROF, "run", "--instance", "x", "--", RAMP, "1"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 125, r.stderr)


@unittest.skipUnless(HAVE_REAL, "no real Pyroscope server built")
class FleetReal(Fleet, TempDirTest):
    WAIT_S = 90

    @classmethod
    def setUpClass(cls):
        cls.real = REAL.RealPyroscope()
        cls.url = cls.real.__enter__().url

    @classmethod
    def tearDownClass(cls):
        cls.real.__exit__(None, None, None)

    def test_replicas_all_kept_ingest(self):
        self.check_replicas("ingest")

    def test_replicas_all_kept_push(self):
        self.check_replicas("push")

    def test_exit_after_a_boundary_loses_nothing_ingest(self):
        self.check_exit_offsets("ingest")

    def test_exit_after_a_boundary_loses_nothing_push(self):
        self.check_exit_offsets("push")

    def test_exit_only_report_inside_the_lifetime_ingest(self):
        self.check_exit_only("ingest")

    def test_exit_only_report_inside_the_lifetime_push(self):
        self.check_exit_only("push")

    def test_wide_exit_report_every_part_kept_ingest(self):
        self.check_wide_exit("ingest")

    def test_wide_exit_report_every_part_kept_push(self):
        self.check_wide_exit("push")


if __name__ == "__main__":
    for need in (MIMPROF, RAMP, os.environ.get("MIMPROF_PYROSCOPE_LIB"),
                 os.environ.get("PYROSCOPE_STANDIN")):
        assert need and os.path.exists(need), \
            "set MIMPROF, MIMPROF_RAMP, MIMPROF_PYROSCOPE_LIB and PYROSCOPE_STANDIN"
    unittest.main(verbosity=2)
