#!/usr/bin/env python3
"""A process profiled while it runs: `mimprof run --dormant` (and
MIMPROF_DORMANT), on a service that leaks slowly (slow_leak.c).

Preload-based (same gate as tool-run). Needs MIMPROF, MIMPROF_PRELOAD and
MIMPROF_SLOW_LEAK.
"""
import os
import subprocess
import unittest

from tool_testlib import TempDirTest, decode, mimprof, pprof_wire, reports

MIMPROF = os.environ.get("MIMPROF", "mimprof")
PRELOAD = os.environ.get("MIMPROF_PRELOAD", "")
SLOW_LEAK = os.environ.get("MIMPROF_SLOW_LEAK", "")
DORMANT_PRELOAD = PRELOAD.replace(".so", "-dormant.so")


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

    def threads(self):
        return len(os.listdir("/proc/%d/task" % self.pid))

    def stop(self):
        out, err = self.proc.communicate(input="", timeout=120)
        return self.proc.returncode, err, out


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
        self.assertEqual((rc, threads), (plain_rc, plain_threads), err)
        self.assertEqual(rc, 3)
        self.assertEqual(svc.lines, plain.lines, "the program's descriptors")
        self.assertTrue(stdout.startswith("leaked "), stdout)
        self.assertEqual(reports(out), {}, "a dormant process writes no report")
        self.assertIn("no profile written", err)

    def test_dormant_variable_with_the_dormant_object(self):
        env = dict(os.environ, LD_PRELOAD=DORMANT_PRELOAD, MIMPROF_DORMANT="1",
                   MIMPROF_EVERY="100ms", MIMPROF_OUTPUT=self.path("out") + "/")
        svc = Service([SLOW_LEAK], env=env)
        self.assertEqual(svc.threads(), 1, "no thread of the profiler")
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


if __name__ == "__main__":
    unittest.main(verbosity=2)
