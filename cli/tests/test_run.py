#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""mimprof run: the bundled example (known answer), exit statuses, signals,
periodic and on-demand reports, fork/exec following, and real programs
nobody here wrote (python3, sort, sqlite3) keeping their output and exit
code while their profiles come out right.

Preload-based: registered only when preload tests are allowed and the tree
is not sanitized. Needs MIMPROF and MIMPROF_EXAMPLE.

Tolerances come from the estimator (p = 1 - exp(-S/R); a sample stands for
S/p bytes): for n objects of size S the relative standard deviation of the
byte estimate is sqrt((1 - p) / (n p)); each bound below states the sigma
it allows.
"""
import glob
import hashlib
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import unittest

from tool_testlib import (EXAMPLE, MIMPROF, TempDirTest, decode, dump_stacks, mimprof, parse_diff,
                          parse_top, pprof_wire, reports, rounding)

MiB = 1 << 20
PYTHON = "/usr/bin/python3"
PRELOAD = os.environ.get("MIMPROF_PRELOAD", "")


def rel_sd(size, interval, n):
    p = 1 - math.exp(-size / interval)
    return math.sqrt((1 - p) / (n * p))


def main_pid(stderr):
    m = re.search(r"last: .*/heap\.(\d+)\.\d+\.pb\.gz", stderr)
    assert m, "no summary line in: " + stderr
    return int(m.group(1))


class Example(TempDirTest):
    ROUNDS = 2000
    SESSION = 8192

    def run_example(self, *extra, rounds=ROUNDS, every="0", interval="16k"):
        out = self.path("out")
        r = mimprof("run", "--interval", interval, "--every", every, "--seed", "7", "-o", out,
                    "--", EXAMPLE, "--rounds", rounds, "--sleep-us", "0", *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("served %d requests" % rounds, r.stdout)
        return out, r

    def test_leak_is_the_top_inuse_site(self):
        out, r = self.run_example("--checkpoints", "2")
        files = reports(out, main_pid(r.stderr))
        self.assertEqual(len(files), 2, "one checkpoint report + the final one")
        rows = parse_top(mimprof("top", files[-1], "-t", "inuse_space", check=True).stdout)
        self.assertEqual(rows[0][5], "remember_session")
        self.assertEqual([x[5] for x in rows[1:3]], ["cache_store", "load_config"])
        held = self.ROUNDS * self.SESSION
        sd = rel_sd(self.SESSION, 16384, self.ROUNDS)  # 2.8%
        self.assertLess(abs(rows[0][0] / held - 1), 4.5 * sd, (rows[0][0], held))
        cfg = next(x for x in rows if x[5] == "load_config")
        self.assertAlmostEqual(cfg[0], MiB, delta=MiB * 0.001)  # p = 1 - e^-64: exact
        # the same with the independent decoder, all four types present
        prof = decode(files[-1])
        self.assertEqual([t for t, _ in prof["types"]],
                         ["alloc_objects", "alloc_space", "inuse_objects", "inuse_space"])
        self.assertEqual(prof["period"], 16384)
        per = pprof_wire.per_function(prof, "inuse_space")
        self.assertAlmostEqual(per["remember_session"][0], rows[0][0], delta=rounding(rows[0][0]))
        leak_stacks = [s for s in prof["samples"] if s[0][:1] == ["remember_session"]]
        self.assertTrue(all(s[0][1:3] == ["handle_request", "main"] for s in leak_stacks))

    def test_diff_finds_the_leak(self):
        out, r = self.run_example("--checkpoints", "2")
        base, new = reports(out, main_pid(r.stderr))
        d = parse_diff(mimprof("diff", base, new, check=True).stdout)
        self.assertEqual(d["grew"][0][4], "remember_session")
        grown = (self.ROUNDS - self.ROUNDS // 2 - 1) * self.SESSION  # after the checkpoint
        sd = rel_sd(self.SESSION, 16384, self.ROUNDS // 2)  # 3.9%
        self.assertLess(abs(d["grew"][0][0] / grown - 1), 4.5 * sd, (d["grew"][0][0], grown))
        for row in d["grew"][1:] + d["shrank"]:
            self.assertLess(abs(row[0]), grown * 0.1, row)  # nothing else moved much

    def test_periodic_reports(self):
        out = self.path("slow")  # ~0.7 s: 600 requests, 1 ms apart
        r = mimprof("run", "--every", "100ms", "--interval", "64k", "-o", out, "--", EXAMPLE,
                    "--rounds", "600", "--sleep-us", "1000")
        self.assertEqual(r.returncode, 0, r.stderr)
        files = reports(out, main_pid(r.stderr))
        self.assertGreaterEqual(len(files), 4, files)
        self.assertEqual([int(f.rsplit(".", 3)[1]) for f in files], list(range(len(files))))
        leak = [pprof_wire.per_function(decode(f), "inuse_space").get("remember_session", (0, 0))[0]
                for f in files]
        self.assertEqual(leak, sorted(leak), "the leak only grows")
        self.assertGreater(leak[-1], leak[0])
        allocs = sum(pprof_wire.totals(decode(f), "alloc_space") for f in files)
        # every report holds the allocations since the previous one: their
        # sum estimates the whole run (~34 KiB per round, 64k interval)
        self.assertGreater(allocs, 600 * 30_000)
        self.assertLess(allocs, 600 * 40_000)
        self.assertFalse(glob.glob(os.path.join(out, ".*tmp")), "no temporary files left")


class RuntimeAllocations(TempDirTest):
    # The runtime's start-up work (opendir of the output and image
    # directories, 32 KiB each) ran after the session had started, so a
    # small interval sampled it into the program's profile as
    # start_locked -> mpt_rt_first_free_seq -> opendir.
    RUNTIME_FRAMES = ("mpt_rt_first_free_seq", "opendir", "__alloc_dir")

    def test_start_up_work_is_not_in_the_programs_profile(self):
        out = self.path("out")
        r = mimprof("run", "--interval", "1k", "--every", "0", "--image-on-exit", "-o", out,
                    "--", EXAMPLE, "--rounds", "50", "--sleep-us", "0")
        self.assertEqual(r.returncode, 0, r.stderr)
        files = reports(out, main_pid(r.stderr))
        self.assertTrue(files, r.stderr)
        for f in files:
            funcs = pprof_wire.per_function(decode(f), "alloc_space")
            self.assertIn("remember_session", funcs, "the program's own sites are sampled")
            found = [n for n in funcs if n in self.RUNTIME_FRAMES]
            self.assertEqual(found, [], "runtime frames in %s" % f)


class ExitStatus(TempDirTest):
    def run_cmd(self, *cmd, **kw):
        return mimprof("run", "--every", "0", "-o", self.path("out"), "--", *cmd, **kw)

    def test_status_passthrough(self):
        r = self.run_cmd("sh", "-c", "echo hello; echo oops >&2; exit 7")
        self.assertEqual(r.returncode, 7)
        self.assertEqual(r.stdout, "hello\n")
        self.assertTrue(r.stderr.startswith("oops\n"), r.stderr)
        self.assertEqual(self.run_cmd("false").returncode, 1)
        self.assertEqual(self.run_cmd("true").returncode, 0)
        r = self.run_cmd(EXAMPLE, "--bogus")
        self.assertEqual(r.returncode, 2)
        self.assertIn("usage: mimprof-example", r.stderr)

    def test_cannot_run(self):
        r = self.run_cmd("/nonexistent/program", "arg")
        self.assertEqual(r.returncode, 127)
        self.assertIn("cannot run '/nonexistent/program': No such file or directory", r.stderr)
        noexec = self.write("noexec.sh", b"#!/bin/sh\necho hi\n")
        r = self.run_cmd(noexec)
        self.assertEqual(r.returncode, 127)
        self.assertIn("Permission denied", r.stderr)
        r = self.run_cmd("no-such-command-mimprof")
        self.assertEqual(r.returncode, 127)

    def test_killed_by_signal_is_reported_with_a_last_report(self):
        out = self.path("out")
        r = mimprof("run", "--every", "0", "-o", out, "--", PYTHON, "-c",
                    "import os, signal\nb = bytearray(8 << 20)\n"
                    "os.kill(os.getpid(), signal.SIGTERM)")
        self.assertEqual(r.returncode, 128 + signal.SIGTERM)
        self.assertRegex(r.stderr, r"was killed by signal 15 \(Terminated\)")
        files = [f for fs in reports(out).values() for f in fs]
        self.assertEqual(len(files), 1, "the last report was written")
        per = pprof_wire.per_function(decode(files[0]), "inuse_space")
        self.assertGreaterEqual(sum(v[0] for v in per.values()), 8 << 20)
        out = self.path("segv")
        r = mimprof("run", "--every", "0", "-o", out, "--", "sh", "-c", "kill -SEGV $$")
        self.assertEqual(r.returncode, 128 + signal.SIGSEGV)
        self.assertIn("signal 11 (Segmentation fault)", r.stderr)
        self.assertEqual(len(reports(out)), 1, "the last report of sh was written")


class PreloadLookup(TempDirTest):
    def test_install_prefix_and_override(self):
        prefix = self.path("prefix")
        os.makedirs(os.path.join(prefix, "bin"))
        exe = os.path.join(prefix, "bin", "mimprof")
        shutil.copy2(MIMPROF, exe)
        r = subprocess.run([exe, "run", "-o", self.path("o1"), "--", "true"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 125)
        m = re.search(r"looked in: (.*); set MIMPROF_PRELOAD_DIR", r.stderr)
        self.assertTrue(m, r.stderr)
        libdir = os.path.normpath(m.group(1).split(", ")[-1])  # the install-prefix candidate
        self.assertTrue(libdir.startswith(prefix + "/"), libdir)
        os.makedirs(libdir)
        # an installed libdir: the preload and the library it needs ($ORIGIN)
        for f in glob.glob(os.path.join(os.path.dirname(PRELOAD), "libmimprof-profiling.so*")):
            if os.path.isfile(f):
                shutil.copy2(f, libdir)
        shutil.copy2(PRELOAD, os.path.join(libdir, os.path.basename(PRELOAD)))
        r = subprocess.run([exe, "run", "--every", "0", "-o", self.path("o1"), "--", "true"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(reports(self.path("o1"))), 1)
        # $MIMPROF_PRELOAD_DIR comes first
        os.remove(os.path.join(libdir, os.path.basename(PRELOAD)))
        r = subprocess.run([exe, "run", "--every", "0", "-o", self.path("o2"), "--", "true"],
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, MIMPROF_PRELOAD_DIR=os.path.dirname(PRELOAD)))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(reports(self.path("o2"))), 1)

    @unittest.skipUnless(os.environ.get("MIMPROF_HAVE_JEMALLOC") == "1", "no jemalloc preload")
    def test_jemalloc(self):
        out = self.path("je")
        r = mimprof("run", "--allocator", "jemalloc", "--every", "0", "--interval", "16k",
                    "-o", out, "--", EXAMPLE, "--rounds", "1000", "--sleep-us", "0")
        self.assertEqual(r.returncode, 0, r.stderr)
        files = reports(out, main_pid(r.stderr))
        rows = parse_top(mimprof("top", files[-1], check=True).stdout)
        self.assertEqual(rows[0][5], "remember_session")
        sd = rel_sd(8192, 16384, 1000)
        self.assertLess(abs(rows[0][0] / (1000 * 8192) - 1), 4.5 * sd)


class Signals(TempDirTest):
    def start(self, code, *opts):
        out = self.path("out")
        p = subprocess.Popen([MIMPROF, "run", "--every", "0", "-o", out, *opts, "--", PYTHON,
                              "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        self.assertEqual(p.stdout.readline(), "ready\n")
        return p, out

    def test_sigusr2_to_mimprof_asks_for_a_report(self):
        code = ("import sys, time\nkeep = bytearray(4 << 20)\nprint('ready', flush=True)\n"
                "time.sleep(60)\n")
        p, out = self.start(code)
        try:
            for i in range(2):
                p.send_signal(signal.SIGUSR2)
                deadline = time.monotonic() + 10
                while len(glob.glob(os.path.join(out, "heap.*[0-9].pb.gz"))) < i + 1:
                    self.assertLess(time.monotonic(), deadline, "no report after SIGUSR2")
                    time.sleep(0.02)
            self.assertIsNone(p.poll(), "SIGUSR2 did not kill the program")
            p.send_signal(signal.SIGTERM)  # forwarded; ends with a last report
            _, err = p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
        self.assertEqual(p.returncode, 128 + signal.SIGTERM, err)
        files = [f for fs in reports(out).values() for f in fs]
        self.assertEqual(len(files), 3)
        first = pprof_wire.totals(decode(sorted(files)[0]), "inuse_space")
        self.assertGreaterEqual(first, 4 << 20)

    def test_report_asked_for_just_before_exit_is_not_dropped(self):
        # Regression: the reporter used to stop on the exit without looking
        # at a SIGUSR2 request it had not taken yet (1 file instead of 2
        # whenever the program exited first: 14 of 200 runs here). 30
        # rounds: the race is won by either side at random.
        code = ("import os, signal\nkeep = bytearray(1 << 20)\n"
                "os.kill(os.getpid(), signal.SIGUSR2)\n")
        for i in range(30):
            out = self.path("out%d" % i)
            r = mimprof("run", "--every", "0", "-o", out, "--", PYTHON, "-c", code)
            self.assertEqual(r.returncode, 0, r.stderr)
            files = [f for fs in reports(out).values() for f in fs]
            self.assertEqual(len(files), 2, "the asked-for report and the exit's (%r)" % files)

    def test_python_sees_its_own_dispositions(self):
        # Regression: the runtime's handlers, installed
        # before main, were what Python found: getsignal(SIGINT) was None
        # (Python installs its handler only over SIG_DFL) and SIGINT killed
        # the interpreter (130) instead of raising KeyboardInterrupt.
        code = ("import os, signal, time\n"
                "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler,\n"
                "      [signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGSEGV,\n"
                "       signal.SIGUSR2, signal.SIGHUP)])\n"
                "try:\n    os.kill(os.getpid(), signal.SIGINT)\n    time.sleep(5)\n"
                "except KeyboardInterrupt:\n    print('KeyboardInterrupt')\n"
                "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "print(signal.getsignal(signal.SIGTERM))\n"
                "os.kill(os.getpid(), signal.SIGTERM)\n"
                "signal.signal(signal.SIGTERM, signal.SIG_DFL)\n"
                "print(signal.getsignal(signal.SIGTERM))\n")
        plain = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=60)
        self.assertEqual(plain.returncode, 0, plain.stderr)
        r = mimprof("run", "--every", "0", "-o", self.path("out"), "--", PYTHON, "-c", code)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, plain.stdout)
        self.assertTrue(r.stdout.startswith("True [<Handlers.SIG_DFL: 0>"), r.stdout)
        self.assertIn("KeyboardInterrupt\n", r.stdout)

    def test_malloc_in_a_signal_handler_never_hangs(self):
        # A program that mallocs in a 200 us SIGALRM
        # handler hung once in 25 runs (an endless walk of a depot chain in
        # mp_depot_clear at exit, after the interrupted allocator handed out
        # a block twice). The program's own undefined behaviour may still
        # crash it (the plain mimalloc override and glibc do too): only a
        # hang is a failure. Bounded rounds; 120 s each on a loaded machine.
        prog = os.environ["MIMPROF_ALARM_MALLOC"]
        for i in range(4):
            rc, _, err = self.run_bounded([MIMPROF, "run", "-q", "-i", "1k", "-e", "100ms", "-o",
                                           self.path("o%d" % i), "--", prog, "100000"],
                                          "run %d" % i)
            self.assertTrue(rc == 0 or rc > 128, (rc, err))

    def run_bounded(self, argv, what, timeout=120):
        """Runs argv in its own session; a run that outlives timeout has
        the stacks of its processes in the failure (issue 39)."""
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stacks = dump_stacks(p.pid)
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            self.fail("%s hung; the stacks of its processes:\n%s" % (what, stacks))
        return p.returncode, out, err

    def test_threads_that_sample_while_the_main_thread_forks_never_hang(self):
        # Issue 39: a fork while another thread was inside a stack capture
        # (libunwind's locks, the loader's) gave a child that waited
        # forever. Four allocating threads, 150 forks whose children end
        # by _exit, exit (an exit report each) and exec, sampled at 4 KiB.
        prog = os.environ["MIMPROF_FORK_THREADS"]
        out = self.path("fork")
        rc, _, err = self.run_bounded([MIMPROF, "run", "-q", "-i", "4k", "-e", "0", "-o", out,
                                       "--", prog, "150"], "fork_threads")
        self.assertEqual(rc, 0, err)
        self.assertTrue(reports(out), "no report written")

    def test_python_threads_running_subprocesses_never_hang(self):
        # The same pattern as Python services have it: a thread pool whose
        # workers allocate and run subprocesses (fork + exec) at once.
        code = ("import concurrent.futures, subprocess\n"
                "def job(i):\n"
                "    junk = [bytes(1000 + i % 5000) for _ in range(200)]\n"
                "    return subprocess.run(['/bin/true']).returncode + len(junk) - 200\n"
                "with concurrent.futures.ThreadPoolExecutor(4) as ex:\n"
                "    assert sum(ex.map(job, range(120))) == 0\n"
                "print('ok')\n")
        out = self.path("py")
        rc, stdout, err = self.run_bounded([MIMPROF, "run", "-q", "-i", "4k", "-e", "0", "-o",
                                            out, "--", PYTHON, "-c", code], "python pool")
        self.assertEqual((rc, stdout), (0, "ok\n"), err)

    def test_program_that_handles_sigusr2_keeps_it(self):
        code = ("import os, signal, time\ngot = []\n"
                "signal.signal(signal.SIGUSR2, lambda *a: got.append(1))\n"
                "print('ready', flush=True)\nos.kill(os.getpid(), signal.SIGUSR2)\n"
                "for _ in range(500):\n    if got: break\n    time.sleep(0.01)\n"
                "print('handled' if got else 'lost', flush=True)\n")
        p, out = self.start(code)
        rest = p.stdout.read()  # not communicate(): readline() may have buffered it
        err = p.stderr.read()
        self.assertEqual(p.wait(timeout=30), 0, err)
        self.assertEqual(rest, "handled\n")
        self.assertEqual(len([f for fs in reports(out).values() for f in fs]), 1, "final only")


class Descriptors(TempDirTest):
    def test_daemon_keeps_its_descriptors_and_files(self):
        # Regression: libunwind's validation pipe took
        # the numbers the daemon reopened (read-back wrong in 10 of 10
        # runs, stray bytes in its log, or its files replaced by a pipe).
        prog = os.environ["MIMPROF_DAEMON_FDS"]
        def run(profiled, i):
            d = self.path("%s%d" % ("prof" if profiled else "plain", i))
            os.makedirs(d)
            cmd = [prog, d]
            if profiled:
                cmd = [MIMPROF, "run", "-q", "-i", "4k", "-e", "0", "-o", d + "/out", "--"] + cmd
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            with open(os.path.join(d, "tables")) as f:
                tables = f.read().replace(d, "DIR")
            with open(os.path.join(d, "log")) as f:
                log = f.read()
            return r.returncode, tables, log, os.path.getsize(os.path.join(d, "data"))
        def without_message_fd(tables):
            # Under the collector the runtime keeps no descriptor in the
            # process (rt_collector.h, rt_ctlhost.h): the daemon's three
            # tables are the plain ones, number for number.
            top = r"^(\d+) -> (?:pipe|socket):\[\d+\](?: \(cloexec\))?\n"
            kept = re.findall(top, tables, re.M)
            self.assertEqual(kept, [], tables)
            return tables
        plain = run(False, 0)
        self.assertEqual(plain[0], 0)
        self.assertEqual(plain[2], "".join("%d\n" % i for i in range(2000)))
        self.assertEqual(plain[3], 2000 * 32)
        for i in range(3):
            status, tables, log, size = run(True, i)
            self.assertEqual((status, without_message_fd(tables), log, size), plain,
                             "run %d: status, descriptor tables, log, data size" % i)


    def test_program_that_closes_every_descriptor_keeps_its_numbers(self):
        # Regression: after the program's close_range(3, ~0U) the control
        # thread kept polling its old numbers. Reused by the program's own
        # listening socket, the thread accepted the program's connections
        # (10 of 10 exchanges lost) and a dormant one never let the
        # program finish; left closed, it spun on POLLNVAL at a full core.
        prog = os.environ["MIMPROF_FD_REUSE"]
        plain = subprocess.run([prog], capture_output=True, text=True, timeout=60)
        self.assertEqual(plain.returncode, 0, plain.stdout + plain.stderr)
        for mode in (["-e", "100ms", "-o", self.path("out")], ["--dormant"]):
            r = subprocess.run([MIMPROF, "run", "-q", *mode, "--", prog], capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(r.returncode, 0, (mode, r.stdout, r.stderr))
            m = re.match(r"cpu ([0-9.]+) failed 0$", r.stdout.strip())
            self.assertTrue(m, (mode, r.stdout))
            # the program sleeps 1.5 s; a spinning thread would add ~1.5 s
            self.assertLess(float(m.group(1)), 0.75, (mode, r.stdout))

    def test_unprofiled_child_has_no_descriptor_of_ours(self):
        # A program run by the profiled one (not followed: it keeps the
        # preload as its allocator) has exactly the descriptors it would
        # have without mimprof: CPython's test_subprocess
        # test_pass_fds_redirected counts them (the runtime's message
        # descriptor was taken there too).
        code = ("import subprocess, sys\n"
                "subprocess.run([sys.executable, '-c', 'import os; "
                "print(sorted(os.listdir(\"/proc/self/fd\")))'], close_fds=True)\n")
        plain = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=60)
        r = mimprof("run", "--every", "0", "-o", self.path("out"), "--", PYTHON, "-c", code)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, plain.stdout)


class DescriptorLimit(TempDirTest):
    """At any descriptor limit the program gets every number it would get
    without mimprof: fd_fill opens /dev/null until EMFILE and prints the
    numbers it got. Under the collector a process keeps no descriptor of
    its own (rt_collector.h, rt_ctlhost.h): it is profiled at every limit,
    also soft = hard (`ulimit -n N`) and above 4096, where the runtime's
    descriptors used to sit inside the program's numbers (issue #26,
    item 4). A report is made on a descriptor that lives for the one
    call: above the soft limit when the program holds every number below
    it and the hard limit leaves room (the exit report is written); with
    no room at all that report cannot be made, and one line says so."""
    FILL = os.environ.get("MIMPROF_FD_FILL", "")

    def fill(self, soft, hard, *pre):
        import resource
        def limit():
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        return subprocess.run([*pre, self.FILL], capture_output=True, text=True, timeout=60,
                              preexec_fn=limit)

    def test_program_gets_every_number_it_would_get_plainly(self):
        import resource
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        for n in (64, 256, 1024, 4096, 8192):
            if n > hard:
                continue
            for h in sorted({n, hard}):
                out = self.path("out.%d.%d" % (n, h))
                plain = self.fill(n, h)
                prof = self.fill(n, h, MIMPROF, "run", "-o", out, "--")
                self.assertEqual(plain.returncode, 0, plain.stderr)
                self.assertEqual(prof.returncode, 0, prof.stderr)
                self.assertEqual(prof.stdout, plain.stdout, (n, h, prof.stderr))
                self.assertTrue(plain.stdout.strip().endswith("-%d" % (n - 1)), plain.stdout)
                self.assertNotIn("not profiled", prof.stderr)
                if h > n:  # room above: the exit report written
                    self.assertEqual(len(reports(out)), 1, (n, h, prof.stderr))
                else:  # every number the program's, none above: said
                    self.assertEqual(reports(out), {}, (n, h, prof.stderr))
                    lines = [l for l in prof.stderr.splitlines() if "report not written" in l]
                    self.assertEqual(len(lines), 1, prof.stderr)

    def test_profiled_at_a_low_limit_equal_to_the_hard_one(self):
        # `ulimit -n 64` sets soft = hard: the runtime used to step aside
        # there; holding nothing, it profiles the program now.
        out = self.path("out")
        def limit():
            import resource
            resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        r = subprocess.run([MIMPROF, "run", "-o", out, "--", PYTHON, "-c",
                            "import os; print(sorted(os.listdir('/proc/self/fd')))"],
                           capture_output=True, text=True, timeout=60, preexec_fn=limit)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "['0', '1', '2', '3']", r.stderr)
        self.assertNotIn("not profiled", r.stderr)
        self.assertEqual(len(reports(out)), 1, r.stderr)


@unittest.skipUnless(os.environ.get("MIMPROF_JE_DIRECT"), "built without jemalloc")
class AllocatorChoice(TempDirTest):
    """Without --allocator, mimprof run profiles a program linked with
    jemalloc (directly, or through a library that links it) over jemalloc,
    and says so once: the program's own jemalloc statistics then see its
    heap, as they do without mimprof (redis INFO, MEMORY DOCTOR)."""
    PICKED = "links libjemalloc"
    HAVE_JE = os.environ.get("MIMPROF_HAVE_JEMALLOC") == "1"

    def run_prog(self, prog, *opts):
        r = mimprof("run", "--every", "0", "-o", self.path("out"), *opts, "--", prog)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r

    def test_jemalloc_programs_are_profiled_over_jemalloc(self):
        for prog in (os.environ["MIMPROF_JE_DIRECT"], os.environ["MIMPROF_JE_VIA_LIB"]):
            r = self.run_prog(prog)
            lines = [l for l in r.stderr.splitlines() if self.PICKED in l]
            self.assertEqual(len(lines), 1, r.stderr)
            if self.HAVE_JE:
                self.assertIn("profiling over jemalloc", lines[0])
                self.assertIn("--allocator mimalloc", lines[0])
                self.assertEqual(r.stdout, "jemalloc sees the heap\n", (prog, r.stderr))
            else:
                self.assertIn("no jemalloc preload", lines[0])
            # --allocator decides, silently
            r = self.run_prog(prog, "--allocator", "mimalloc")
            self.assertNotIn(self.PICKED, r.stderr)
            self.assertEqual(r.stdout, "jemalloc sees no heap\n", (prog, r.stderr))
            r = self.run_prog(prog, "-q")
            self.assertNotIn(self.PICKED, r.stderr)

    def test_other_programs_stay_on_mimalloc_silently(self):
        r = mimprof("run", "--every", "0", "-o", self.path("out"), "--", PYTHON, "-c", "pass")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn(self.PICKED, r.stderr)


class FollowForkExec(TempDirTest):
    FORK = ("import os, sys\n"
            "def child_work():\n    global b\n    b = bytearray(8 << 20)\n"
            "pid = os.fork()\n"
            "if pid == 0:\n    child_work()\n    sys.exit(0)\n"
            "os.waitpid(pid, 0)\nprint(pid)\n")

    def run_fork(self, *opts):
        out = self.path("out" + "".join(opts))
        r = mimprof("run", "--every", "0", "-o", out, *opts, "--", PYTHON, "-c", self.FORK)
        self.assertEqual(r.returncode, 0, r.stderr)
        return int(r.stdout), main_pid(r.stderr), reports(out)

    def test_fork_followed_by_default(self):
        child, parent, files = self.run_fork()
        self.assertEqual(set(files), {child, parent})
        alloc = pprof_wire.totals(decode(files[child][-1]), "alloc_space")
        self.assertGreaterEqual(alloc, 8 << 20)
        child, parent, files = self.run_fork("--no-follow-fork")
        self.assertEqual(set(files), {parent})

    # The child reports on SIGUSR2 while it holds everything (at exit the
    # interpreter has freed it), then leaves with os._exit.
    INHERIT = ("import os, signal, sys, time\n"
               "held = [bytearray(1 << 20) for _ in range(49)]\n"
               "pid = os.fork()\n"
               "if pid == 0:\n"
               "    own = [bytearray(1 << 20) for _ in range(10)]\n"
               "    os.kill(os.getpid(), signal.SIGUSR2)\n"
               "    for _ in range(3000):\n"
               "        if os.path.exists(sys.argv[1] + '/heap.%d.0.pb.gz' % os.getpid()):\n"
               "            break\n"
               "        time.sleep(0.01)\n"
               "    os._exit(0)\n"
               "os.waitpid(pid, 0)\nprint(pid)\n")

    def test_fork_child_inuse_includes_what_it_inherited(self):
        # The parent holds 49 MiB and forks; the child allocates 10 MiB.
        # The child's in-use is what is live in it (49 + 10 MiB), its
        # allocations only its own (10 MiB and the interpreter's small
        # change). At a 64 KiB interval a 1 MiB block is sampled with
        # p = 1 - e^-16: the estimate is exact to a few bytes.
        out = self.path("out")
        r = mimprof("run", "--every", "0", "--interval", "64k", "-o", out, "--",
                    PYTHON, "-c", self.INHERIT, out)
        self.assertEqual(r.returncode, 0, r.stderr)
        child = int(r.stdout)
        prof = decode(reports(out)[child][0])  # the child's first report: on SIGUSR2
        inuse = pprof_wire.totals(prof, "inuse_space")
        alloc = pprof_wire.totals(prof, "alloc_space")
        self.assertGreaterEqual(inuse, 59 * MiB, (inuse, alloc))
        self.assertLess(inuse, 62 * MiB, (inuse, alloc))
        self.assertGreaterEqual(alloc, 10 * MiB, (inuse, alloc))
        self.assertLess(alloc, 12 * MiB, (inuse, alloc))

    def test_unprofiled_programs_are_counted_at_exit(self):
        # sh (profiled) forks and executes true twice and ls once: three
        # programs that ran unprofiled, named, with the option that
        # includes them; none with --follow-exec, no line with -q.
        cmd = ["sh", "-c", "/bin/true; /bin/true; ls / >/dev/null; exit 0"]
        r = mimprof("run", "--every", "0", "-o", self.path("a"), "--", *cmd)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = [l for l in r.stderr.splitlines() if "ran unprofiled" in l]
        self.assertEqual(lines, ["mimprof: 3 programs the command executed ran unprofiled "
                                 "(ls, true); --follow-exec profiles them too"], r.stderr)
        for opts in (["--follow-exec"], ["-q"]):
            r = mimprof("run", "--every", "0", "-o", self.path("b"), *opts, "--", *cmd)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn("ran unprofiled", r.stderr)

    def test_exec_not_followed_by_default(self):
        cmd = ["sh", "-c", PYTHON + " -c 'x = bytearray(1 << 20)'; true"]
        out = self.path("a")
        r = mimprof("run", "--every", "0", "-o", out, "--", *cmd)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(reports(out)), 1, "only sh")
        out = self.path("b")
        r = mimprof("run", "--every", "0", "--follow-exec", "-o", out, "--", *cmd)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(reports(out)), 2, "sh and python")
        # what a program run by the profiled one sees: the environment
        # `mimprof run` passed, unchanged by the runtime (it never writes
        # the environment; MIMPROF_ROOT_PID tells a child it is not the
        # profiled process)
        env_cmd = ["sh", "-c", "env; true"]
        def seen(r):
            env = dict(l.split("=", 1) for l in r.stdout.splitlines() if "=" in l)
            return env.get("LD_PRELOAD", ""), env.get("MIMPROF_EVERY"), env.get("MIMPROF_FOLLOW_EXEC")
        r = mimprof("run", "--every", "0", "-o", self.path("c"), "--", *env_cmd)
        self.assertIn("libmimprof-preload-mimalloc.so", seen(r)[0])
        self.assertEqual(seen(r)[1:], ("0ms", "0"))
        r = mimprof("run", "--every", "0", "--follow-exec", "-o", self.path("d"), "--", *env_cmd)
        self.assertIn("libmimprof-preload-mimalloc.so", seen(r)[0])
        self.assertEqual(seen(r)[1:], ("0ms", "1"))


class RealPrograms(TempDirTest):
    def plain_and_profiled(self, cmd, interval="64k", stdin=None, plain_stdin=None, env=None):
        """Runs cmd alone and under mimprof run; stdin/plain_stdin are bytes."""
        kw = dict(capture_output=True, timeout=120, env=env)
        plain = subprocess.run(cmd, input=plain_stdin if plain_stdin is not None else stdin, **kw)
        out = self.path("out")
        prof = subprocess.run([MIMPROF, "run", "--every", "0", "--interval", interval,
                               "-o", out, "--", *cmd], input=stdin, **kw)
        return plain, prof, out

    def test_python(self):
        # Debian's python3.11 links libpython statically: the interpreter's
        # functions live in /usr/bin/python3.11 (exported, so named).
        script = self.write("alloc.py", b"""
import os, signal, sys, time
OUT = sys.argv[1]
def report():
    n = len(os.listdir(OUT)) if os.path.isdir(OUT) else 0
    os.kill(os.getpid(), signal.SIGUSR2)
    for _ in range(1000):
        if os.path.isdir(OUT) and len(os.listdir(OUT)) > n:
            return
        time.sleep(0.01)
    sys.exit("no report")
with open("/proc/self/maps") as maps:
    profiled = "libmimprof-preload" in maps.read()
if profiled: report()
blobs = [bytearray(256 * 1024) for _ in range(256)]
words = {}
for i in range(200000):
    words[str(i % 5000)] = words.get(str(i % 5000), 0) + 1
if profiled: report()
print("held", sum(len(b) for b in blobs), "words", len(words))
sys.exit(3)
""")
        plain, prof, out = self.plain_and_profiled([PYTHON, script, self.path("out")])
        self.assertEqual(plain.returncode, 3)
        self.assertEqual(prof.returncode, 3, prof.stderr)
        self.assertEqual(prof.stdout, plain.stdout)
        self.assertEqual(prof.stdout, b"held 67108864 words 5000\n")
        files = reports(out, main_pid(prof.stderr.decode()))
        self.assertEqual(len(files), 3, "two SIGUSR2 reports and the final one")
        before, after = decode(files[0]), decode(files[1])
        grown = pprof_wire.totals(after, "inuse_space") - pprof_wire.totals(before, "inuse_space")
        # 256 x 256 KiB at 64 KiB: sd 0.85%; 5% allows ~6 sigma plus the
        # interpreter's own small allocations in between.
        self.assertLess(abs(grown / (64 * MiB) - 1), 0.05, grown)
        big = max(after["samples"], key=lambda s: s[1][3])
        self.assertIn("_PyEval_EvalFrameDefault", big[0])
        self.assertIn("Py_BytesMain", big[0])
        self.assertTrue(any(loc["mapping"] and after["mappings"][0]["filename"].startswith(
            "/usr/bin/python3") for loc in big[3]))
        top = parse_top(mimprof("top", files[1], "--cum", "-n", "0", check=True).stdout)
        self.assertIn("_PyEval_EvalFrameDefault", [r[5] for r in top])

    def test_sort(self):
        data = self.path("input.txt")
        rng = random.Random(5)
        with open(data, "w") as f:
            size = 0
            chunk = []
            while size < 50 * MiB:
                line = "%016x %s\n" % (rng.getrandbits(64), "y" * rng.randint(0, 40))
                chunk.append(line)
                size += len(line)
                if len(chunk) == 10000:
                    f.write("".join(chunk))
                    chunk = []
            f.write("".join(chunk))
        env = dict(os.environ, LC_ALL="C")
        plain, prof, out = self.plain_and_profiled(["sort", data], interval="512k", env=env)
        self.assertEqual(prof.returncode, 0, prof.stderr)
        self.assertEqual(hashlib.sha256(prof.stdout).digest(), hashlib.sha256(plain.stdout).digest())
        self.assertEqual(len(prof.stdout), os.path.getsize(data))
        files = reports(out, main_pid(prof.stderr.decode()))
        self.assertEqual(len(files), 1)
        p = decode(files[0])
        # sort holds the whole input in memory before writing: its
        # allocations cover at least the 50 MiB it read (a lower bound;
        # its buffer size depends on the machine's memory).
        self.assertGreaterEqual(pprof_wire.totals(p, "alloc_space"), 50 * MiB)
        self.assertTrue(any(m["filename"] == "/usr/bin/sort" for m in p["mappings"]))
        frames = {f for s in p["samples"] for f in s[0]}
        self.assertTrue(frames & {"__libc_start_main_impl", "__libc_start_main"}, frames)
        # and a failing sort keeps its status and message
        plain, prof, _ = self.plain_and_profiled(["sort", self.path("missing")], env=env)
        self.assertEqual(prof.returncode, plain.returncode)
        self.assertEqual(prof.returncode, 2)
        self.assertTrue(prof.stderr.startswith(plain.stderr), prof.stderr)

    def test_sqlite3(self):
        sql = ["CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, payload BLOB);", "BEGIN;"]
        sql += ["INSERT INTO t(name, payload) VALUES ('row%d', randomblob(2000));" % i
                for i in range(4000)]
        sql += ["COMMIT;", "SELECT count(*), sum(length(payload)) FROM t;",
                ".stats on", "SELECT 1;", ".stats off",
                # a report now, while the database is in memory
                ".shell kill -USR2 $PPID; sleep 0.5",
                "SELECT count(*) FROM t WHERE name LIKE 'row1%';"]
        # the plain run gets the same script without the SIGUSR2 line
        script = ("\n".join(sql) + "\n").encode()
        plain_script = ("\n".join(l for l in sql if "USR2" not in l) + "\n").encode()
        plain, prof, out = self.plain_and_profiled(["sqlite3", ":memory:"], interval="16k",
                                                   stdin=script, plain_stdin=plain_script)
        self.assertEqual(prof.returncode, 0, prof.stderr)
        self.assertEqual(plain.returncode, 0)

        def strip_stats(b):
            return [l for l in b.decode().splitlines() if ":" not in l]
        self.assertEqual(strip_stats(prof.stdout), strip_stats(plain.stdout))
        self.assertIn("4000|8000000", prof.stdout.decode())
        used = int(re.search(r"Memory Used:\s+(\d+)", prof.stdout.decode()).group(1))
        files = reports(out, main_pid(prof.stderr.decode()))
        self.assertEqual(len(files), 2, "the SIGUSR2 report and the final one")
        p = decode(files[0])
        inuse = pprof_wire.totals(p, "inuse_space")
        # ~2200 live allocations of ~4 KiB pages at a 16 KiB interval: sd
        # ~2.5%; sqlite counts what it asked malloc for, the CLI and stdio
        # hold a little more: 12% allows ~4 sigma plus that.
        self.assertLess(abs(inuse / used - 1), 0.12, (inuse, used))
        big = max(p["samples"], key=lambda s: s[1][3])
        self.assertTrue(any(f.startswith("sqlite3") for f in big[0]), big[0])
        libsql = [m for m in p["mappings"] if "libsqlite3" in m["filename"]]
        self.assertTrue(libsql)
        self.assertTrue(any(loc["mapping"] in {m["id"] for m in libsql} for loc in big[3]),
                        "the stack runs through libsqlite3")


if __name__ == "__main__":
    for need in (MIMPROF, EXAMPLE, PRELOAD):
        assert need and os.path.exists(need), "set MIMPROF, MIMPROF_EXAMPLE and MIMPROF_PRELOAD"
    unittest.main(verbosity=2)
