#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`mimprof run` as pid 1 of a PID namespace, as a container's entrypoint
runs it (`unshare --pid --fork`, as root): it reaps every orphan of the
namespace, forwards the signals a container runtime sends to the command,
whose exit report is written, and exits with the command's status."""
import os
import shutil
import signal
import subprocess
import time
import unittest

from tool_testlib import MIMPROF, TempDirTest, reports

UNSHARE = shutil.which("unshare")


def children(pid):
    out = []
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                out += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def state(pid):
    """The one-letter state of a process ('Z': a zombie), None when gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def default_signals():
    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1,
                signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)


def wait_for(cond, what, timeout=60):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


@unittest.skipUnless(UNSHARE and os.getuid() == 0, "needs root and unshare (as ./dev test runs)")
class Pid1(TempDirTest):
    def start(self, script):
        out = self.path("out")
        # every signal at its default, as a container's pid 1 starts (a
        # test runner started in the background may ignore SIGINT and
        # SIGQUIT, which a shell then cannot trap)
        p = subprocess.Popen([UNSHARE, "--pid", "--fork", "--mount-proc", MIMPROF, "run", "-o",
                              out, "--", "sh", "-c", script], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, errors="replace",
                             preexec_fn=default_signals)
        # unshare's child is `mimprof run`, pid 1 of the new namespace
        run = wait_for(lambda: children(p.pid), "mimprof run")[0]

        def end():
            if p.poll() is None:
                os.kill(run, signal.SIGKILL)  # pid 1: the whole namespace ends
                p.kill()
            p.communicate()
        self.addCleanup(end)
        return p, run, out

    def test_orphans_are_reaped(self):
        mark = self.path("mark")
        # the subshell ends at once: its sleep, an orphan, is re-parented
        # to pid 1 and ends 0.2 s later; the mark is 1 s after that
        p, run, _out = self.start("(sleep 0.2 &); sleep 1.2; : > %s; sleep 1" % mark)
        wait_for(lambda: os.path.exists(mark), "the mark")
        zombies = [c for c in children(run) if state(c) == "Z"]
        self.assertEqual(zombies, [], "children of pid 1 left as zombies")
        _o, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, err)

    def test_signals_reach_the_command(self):
        # what a container runtime sends (docker stop: TERM; kill -s ...)
        for n, sig in enumerate((signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT,
                                 signal.SIGUSR1, signal.SIGUSR2)):
            with self.subTest(sig=sig.name):
                status = 20 + n
                ready = self.path("ready%d" % n)
                p, run, out = self.start("trap 'exit %d' %s; : > %s; while :; do sleep 0.05; "
                                         "done" % (status, sig.name[3:], ready))
                wait_for(lambda: os.path.exists(ready), "the command's trap")
                os.kill(run, sig)
                _o, err = p.communicate(timeout=60)
                self.assertEqual(p.returncode, status, err)
                # the command is pid 2 of the namespace: its exit report
                self.assertTrue(reports(out, 2), (os.listdir(out), err))
                shutil.rmtree(out)


if __name__ == "__main__":
    assert MIMPROF and os.path.exists(MIMPROF), "set MIMPROF"
    unittest.main(verbosity=2)
