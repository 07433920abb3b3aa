#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The test harness's watchdog: `meson test --wrapper` for every tree.

    meson test -C BUILD --wrapper "python3 tests/support/hang_watch.py BUILD"

Runs the test as its child, unchanged (same arguments, environment,
descriptors, process group; its exit status or signal passed on). When the
test is still running shortly before meson's timeout for it (read from
BUILD/meson-info/intro-tests.json: the test whose command is this one),
the stacks of every thread of every process in its tree go to stderr
(tests/support/hang_dump.sh, gdb -batch), so a hang names its cause in the
log; meson then ends the test as before. A test without a timeout, or one
not found, is only run.
"""
import json
import os
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def timeout_of(build, cmd):
    try:
        with open(os.path.join(build, "meson-info", "intro-tests.json")) as f:
            tests = json.load(f)
    except (OSError, ValueError):
        return None
    for t in tests:
        if t.get("cmd") == cmd and t.get("timeout"):
            return float(t["timeout"])
    return None


def main():
    build, cmd = sys.argv[1], sys.argv[2:]
    timeout = timeout_of(build, cmd)
    child = subprocess.Popen(cmd, close_fds=False)
    # The signals meson (or a terminal) sends reach the whole process
    # group, the child too: the watchdog outlives the child and then ends
    # as the child did.
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, lambda n, f: None)
    deadline = None
    if timeout is not None:
        deadline = timeout - 15 if timeout > 45 else timeout * 0.75
    try:
        rc = child.wait(timeout=deadline)
    except subprocess.TimeoutExpired:
        sys.stderr.write("hang_watch: %s still runs after %.0f s of its %.0f s timeout; "
                         "the stacks of its processes:\n" % (cmd[0], deadline, timeout))
        sys.stderr.flush()
        subprocess.run(["sh", os.path.join(HERE, "hang_dump.sh"), str(child.pid)],
                       stdout=sys.stderr, stderr=subprocess.STDOUT)
        rc = child.wait()
    if rc < 0:  # ended by a signal: end the same way
        signal.signal(-rc, signal.SIG_DFL)
        os.kill(os.getpid(), -rc)
    return rc


if __name__ == "__main__":
    sys.exit(main())
