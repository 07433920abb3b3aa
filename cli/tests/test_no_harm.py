#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What mimprof must never do to the program it profiles, and options that
must do what they say: the environment is read, never written (bash keeps
its own copy of it); an exec that replaces the profiled process continues
its profile; output paths never replace what they name; reports are
written atomically, with their directories created; every `mimprof run`
option changes what it says.

Preload-based (same gate as tool-run). Needs MIMPROF, MIMPROF_EXAMPLE and
MIMPROF_PRELOAD.
"""
import os
import re
import resource
import signal
import stat
import subprocess
import unittest

from tool_testlib import EXAMPLE, TempDirTest, decode, mimprof, pprof_wire, reports

PRELOAD = os.environ.get("MIMPROF_PRELOAD", "")
PYTHON = "/usr/bin/python3"
BASH = "/bin/bash"


def last_named(stderr):
    m = re.search(r"last: (.*/heap\.(\d+)\.\d+\.pb\.gz)", stderr)
    assert m, "no summary line in: " + stderr
    return m.group(1), int(m.group(2))


def functions(path):
    return set(pprof_wire.per_function(decode(path), "alloc_space"))


class Environment(TempDirTest):
    """bash exports its own getenv/setenv: the runtime reads the initial
    environment once and never changes it."""

    def test_bash_profile_goes_where_asked_with_the_period_asked(self):
        out = self.path("out")
        r = mimprof("run", "-i", "1k", "--every", "0", "-o", out, "--", BASH, "-c",
                    "x=1; /bin/true; exit 3", cwd=self.tmp)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertFalse(os.path.exists(self.path("mimprof-out")), "nothing in ./mimprof-out")
        files = reports(out)
        self.assertEqual(len(files), 1, ("bash only, /bin/true is not followed", files))
        (pid, paths), = files.items()
        self.assertEqual(decode(paths[-1])["period"], 1024)
        last, last_pid = last_named(r.stderr)
        self.assertEqual((last, last_pid), (paths[-1], pid))

    def test_children_of_bash_follow_exec_when_asked(self):
        out = self.path("out")
        r = mimprof("run", "-i", "4k", "--every", "0", "--follow-exec", "-o", out, "--", BASH,
                    "-c", "%s --rounds 50 --sleep-us 0; exit 4" % EXAMPLE)
        self.assertEqual(r.returncode, 4, r.stderr)
        files = reports(out)
        self.assertEqual(len(files), 2, ("bash and the example", files))
        example = [p for p in files if p != last_named(r.stderr)[1]]
        self.assertIn("remember_session", functions(files[example[0]][-1]))
        self.assertEqual(decode(files[example[0]][-1])["period"], 4096)

    def test_environment_of_the_program_is_what_mimprof_run_passed(self):
        # Nothing is removed or added by the runtime in the profiled
        # process: what a child sees is what `mimprof run` passed.
        r = mimprof("run", "--every", "0", "-o", self.path("out"), "--", "sh", "-c", "env; true")
        env = dict(l.split("=", 1) for l in r.stdout.splitlines() if "=" in l)
        self.assertIn("libmimprof-preload-mimalloc.so", env.get("LD_PRELOAD", ""))
        self.assertNotIn("MIMPROF_DISABLE", env)


class ExecReplaces(TempDirTest):
    """An exec that replaces the profiled process continues its profile."""

    def run_and_find_example(self, *cmd, opts=()):
        out = self.path("out")
        r = mimprof("run", "-i", "4k", "--every", "0", "-o", out, *opts, "--", *cmd,
                    cwd=self.tmp)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("served 50 requests", r.stdout)
        last, pid = last_named(r.stderr)
        self.assertIn("remember_session", functions(last), r.stderr)
        return out, pid

    def test_env_wrapper(self):
        self.run_and_find_example("env", "FOO=1", EXAMPLE, "--rounds", "50", "--sleep-us", "0")

    def test_script_ending_in_exec(self):
        wrapper = self.write("wrapper.sh", b'#!/bin/sh\nexport BAR=2\nexec "$@"\n')
        os.chmod(wrapper, 0o755)
        self.run_and_find_example(wrapper, EXAMPLE, "--rounds", "50", "--sleep-us", "0")

    def test_sh_c_exec(self):
        self.run_and_find_example("sh", "-c", "exec %s --rounds 50 --sleep-us 0" % EXAMPLE)

    def test_bash_wrapper_like_a_pyenv_shim(self):
        shim = self.write("shim", b'#!/bin/bash\nset -e\nprog="$1"; shift\nexec "$prog" "$@"\n')
        os.chmod(shim, 0o755)
        self.run_and_find_example(shim, EXAMPLE, "--rounds", "50", "--sleep-us", "0")


def bare(env_extra, *cmd, **kw):
    """Runs cmd under the bare preload (no mimprof run)."""
    env = dict(os.environ, LD_PRELOAD=PRELOAD, **env_extra)
    kw.setdefault("timeout", 60)
    return subprocess.run(list(cmd), env=env, capture_output=True, text=True, **kw)


EXAMPLE_ARGS = ("--rounds", "50", "--sleep-us", "0")
# For a bare run of the example whose profile must hold remember_session:
# its 50 blocks of 8 KiB are all missed with probability e^-100 at 4 KiB,
# whatever the random stream; at the default 512 KiB about half the time.
SAMPLES_THE_LEAK = {"MIMPROF_INTERVAL": "4k"}


class OutputPaths(TempDirTest):
    """Output paths never replace what they name: anything but a regular
    file or a directory is refused with one line, the program runs on."""

    MODES = {"bare": {}, "runtime": {"MIMPROF_EVERY": "0"}}

    def check_refused(self, target, mode_env):
        r = bare(dict(mode_env, MIMPROF_OUTPUT=target), EXAMPLE, *EXAMPLE_ARGS)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("served 50 requests", r.stdout)
        self.assertIn("not a regular file", r.stderr)
        self.assertEqual(len([l for l in r.stderr.splitlines() if l.startswith("mimprof:")]), 1,
                         r.stderr)
        return r

    def test_fifo_is_refused_not_replaced(self):
        for mode, menv in self.MODES.items():
            with self.subTest(mode=mode):
                fifo = self.path("fifo-" + mode)
                os.mkfifo(fifo)
                self.check_refused(fifo, menv)
                self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode), "still a FIFO")

    def test_symlink_to_a_fifo_is_refused_and_kept(self):
        for mode, menv in self.MODES.items():
            with self.subTest(mode=mode):
                fifo = self.path("fifo2-" + mode)
                os.mkfifo(fifo)
                link = self.path("link-" + mode)
                os.symlink(fifo, link)
                self.check_refused(link, menv)
                self.assertTrue(stat.S_ISLNK(os.lstat(link).st_mode), "still a symlink")
                self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode), "still a FIFO")

    def test_symlink_to_a_regular_file_writes_the_file(self):
        for mode, menv in self.MODES.items():
            with self.subTest(mode=mode):
                real = self.write("real-%s.pb" % mode, b"old")
                link = self.path("link-%s.pb" % mode)
                os.symlink(real, link)
                r = bare(dict(menv, MIMPROF_OUTPUT=link, **SAMPLES_THE_LEAK), EXAMPLE,
                         *EXAMPLE_ARGS)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertTrue(stat.S_ISLNK(os.lstat(link).st_mode), "still a symlink")
                self.assertIn("remember_session", functions(real))
                self.assertEqual(os.listdir(self.tmp).count(os.path.basename(real)), 1)
                self.assertFalse([n for n in os.listdir(self.tmp) if n.endswith(".tmp")])

    def test_character_device_is_refused(self):
        # A device node of its own (never the machine's /dev/null: on main
        # the runtime renamed a regular file over the path it was given,
        # which as root replaces the machine's device).
        dev = self.path("null-device")
        try:
            os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            self.skipTest("mknod needs CAP_MKNOD")
        before = os.lstat(dev)
        for mode, menv in self.MODES.items():
            with self.subTest(mode=mode):
                self.check_refused(dev, menv)
                after = os.lstat(dev)
                self.assertTrue(stat.S_ISCHR(after.st_mode), "still a character device")
                self.assertEqual((after.st_ino, after.st_rdev), (before.st_ino, before.st_rdev))


class AtomicOutput(TempDirTest):
    """The bare preload creates directories as the runtime does and writes
    atomically (one output module for both modes)."""

    def test_trailing_slash_creates_missing_parents(self):
        for mode, menv in OutputPaths.MODES.items():
            with self.subTest(mode=mode):
                d = self.path(mode + "/a/b/")
                r = bare(dict(menv, MIMPROF_OUTPUT=d, **SAMPLES_THE_LEAK), EXAMPLE, *EXAMPLE_ARGS)
                self.assertEqual(r.returncode, 0, r.stderr)
                # the report (and, in runtime mode, its window's peak next to it)
                names = [n for n in os.listdir(d) if ".peak." not in n]
                self.assertEqual(len(names), 1, os.listdir(d))
                self.assertIn("remember_session", functions(os.path.join(d, names[0])))

    def test_a_failed_write_leaves_the_previous_file_whole(self):
        # A file size limit makes write() fail part way (EFBIG), as a full
        # disk does (ENOSPC): the previous report stays, no partial file,
        # no temporary left behind.
        def limit():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))

        for mode, menv in OutputPaths.MODES.items():
            with self.subTest(mode=mode):
                target = self.write("prev-%s.pb" % mode, b"previous report")
                r = bare(dict(menv, MIMPROF_OUTPUT=target, MIMPROF_INTERVAL="1k"), PYTHON, "-c",
                         "x = [bytearray(100) for _ in range(20000)]", preexec_fn=limit)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("cannot write", r.stderr)
                with open(target, "rb") as f:
                    self.assertEqual(f.read(), b"previous report")
                self.assertEqual(sorted(os.listdir(self.tmp)),
                                 sorted(n for n in os.listdir(self.tmp) if not n.endswith(".tmp")))

    def test_forked_children_never_share_a_temporary_or_a_final_name(self):
        # A pattern without %p: 30 forked children. Every file that exists
        # afterwards is a whole report, and each child either has its own
        # name or was told it is not profiled.
        prog = ("import os\n"
                "kids = []\n"
                "for i in range(30):\n"
                "    pid = os.fork()\n"
                "    if pid == 0:\n"
                "        x = [bytearray(512) for _ in range(2000)]\n"
                "        os._exit(0) if False else None\n"
                "        raise SystemExit(0)\n"
                "    kids.append(pid)\n"
                "for k in kids: os.waitpid(k, 0)\n")
        for mode, menv in OutputPaths.MODES.items():
            with self.subTest(mode=mode):
                d = self.path("fk-" + mode)
                os.mkdir(d)
                target = os.path.join(d, "one.pb")
                r = bare(dict(menv, MIMPROF_OUTPUT=target, MIMPROF_INTERVAL="4k"), PYTHON, "-c",
                         prog)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(os.listdir(d), ["one.pb"])
                prof = decode(target)  # whole: decodes
                self.assertEqual(prof["period"], 4096)
                said = [l for l in r.stderr.splitlines() if "has no %p" in l]
                self.assertEqual(len(said), 1, ("said once", r.stderr))


class RunOptions(TempDirTest):
    """Every option of `mimprof run` changes what it says."""

    def test_max_depth_bounds_every_stack(self):
        out = self.path("out")
        r = mimprof("run", "--max-depth", "3", "-i", "4k", "--every", "0", "-o", out, "--",
                    EXAMPLE, *EXAMPLE_ARGS)
        self.assertEqual(r.returncode, 0, r.stderr)
        prof = decode(last_named(r.stderr)[0])
        self.assertTrue(prof["samples"])
        real = [[f for f in s[0] if f != "[truncated]"] for s in prof["samples"]]
        self.assertLessEqual(max(len(f) for f in real), 3)
        self.assertTrue(any("[truncated]" in s[0] for s in prof["samples"]))
        out = self.path("deep")
        r = mimprof("run", "-i", "4k", "--every", "0", "-o", out, "--", EXAMPLE, *EXAMPLE_ARGS)
        prof = decode(last_named(r.stderr)[0])
        self.assertGreater(max(len(s[0]) for s in prof["samples"]), 3)

    def test_quiet_removes_the_summary_not_the_errors(self):
        out = self.path("out")
        # the program replaces its output directory by a file: no report
        # can be written, and -q must not hide that
        r = mimprof("run", "-q", "--every", "0", "-o", out, "--", PYTHON, "-c",
                    "import shutil; shutil.rmtree(%r); open(%r, 'w').close()" % (out, out))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("cannot write", r.stderr)
        self.assertNotIn("profile", r.stderr.replace("cannot write", ""))
        r = mimprof("run", "-q", "--every", "0", "-o", self.path("ok"), "--", "true")
        self.assertEqual((r.returncode, r.stderr), (0, ""))

    def test_unwritable_output_directory_is_refused_before_the_program_starts(self):
        marker = self.path("started")
        r = mimprof("run", "--every", "0", "-o", "/proc", "--", "sh", "-c", ": > '%s'" % marker)
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn("/proc", r.stderr)
        self.assertFalse(os.path.exists(marker), "the program did not start")

    def test_follow_flags_the_last_one_wins(self):
        fork = ("import os\n"
                "pid = os.fork()\n"
                "if pid == 0:\n    b = bytearray(1 << 20)\n    raise SystemExit(0)\n"
                "os.waitpid(pid, 0)\n")
        out = self.path("ff")
        r = mimprof("run", "--every", "0", "--no-follow-fork", "--follow-fork", "-o", out, "--",
                    PYTHON, "-c", fork)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(reports(out)), 2, "--follow-fork: parent and child")
        cmd = ["sh", "-c", "%s --rounds 5 --sleep-us 0; true" % EXAMPLE]
        out = self.path("fe")
        r = mimprof("run", "--every", "0", "--follow-exec", "--no-follow-exec", "--output", out,
                    "--", *cmd)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(reports(out)), 1, "--no-follow-exec: sh only")

    def test_interval_and_seed_and_symbolize_and_every(self):
        out = self.path("i")
        r = mimprof("run", "-i", "2k", "--every", "0", "-o", out, "--", "true")
        self.assertEqual(decode(last_named(r.stderr)[0])["period"], 2048)
        names = []
        for s in ("none", "functions"):
            out = self.path("s" + s)
            r = mimprof("run", "-i", "4k", "-s", s, "--every", "0", "-o", out, "--", EXAMPLE,
                        *EXAMPLE_ARGS)
            names.append(functions(last_named(r.stderr)[0]))
        self.assertNotIn("remember_session", names[0])
        self.assertIn("remember_session", names[1])
        same = []
        for n in range(2):
            out = self.path("seed%d" % n)
            r = mimprof("run", "-i", "4k", "--seed", "99", "--every", "0", "-o", out, "--",
                        EXAMPLE, *EXAMPLE_ARGS)
            same.append(pprof_wire.totals(decode(last_named(r.stderr)[0]), "alloc_space"))
        self.assertEqual(same[0], same[1])


if __name__ == "__main__":
    unittest.main(verbosity=2)
