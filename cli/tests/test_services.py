#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Real services under `mimprof run`, briefly (cli/bench/services.py
measures them at length):

- redis-server (Debian's links libjemalloc): profiled over jemalloc
  without being told, one line saying so; jemalloc's statistics in its
  INFO see the data set, and the profile's in-use agrees with its
  used_memory;
- memcached -c 64 at a soft descriptor limit of 64: it accepts as many
  connections as without mimprof (the runtime's descriptors are above the
  limit), and is profiled.

Each service is skipped when it is not installed (`./dev` installs
redis-server, redis-tools and memcached). Needs MIMPROF.
"""
import os
import resource
import shutil
import socket
import subprocess
import time
import unittest

from tool_testlib import MIMPROF, TempDirTest, decode, mimprof, pprof_wire, reports


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, deadline=20):
    t = time.monotonic() + deadline
    while time.monotonic() < t:
        if proc.poll() is not None:
            raise AssertionError("the service exited: %s" % proc.returncode)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("port %d never opened" % port)


def child_named(pid, name):
    """pid, or its child named `name` (the service under mimprof run)."""
    for _ in range(200):
        for p in [pid] + [int(c) for c in open("/proc/%d/task/%d/children" % (pid, pid)).read().split()]:
            try:
                if open("/proc/%d/comm" % p).read().strip() == name:
                    return p
            except OSError:
                pass
        time.sleep(0.05)
    raise AssertionError("no %s under %d" % (name, pid))


@unittest.skipUnless(shutil.which("redis-server") and shutil.which("redis-cli"),
                     "redis-server not installed")
class Redis(TempDirTest):
    def test_redis_is_profiled_over_the_jemalloc_it_links(self):
        port = free_port()
        out = self.path("out")
        proc = subprocess.Popen([MIMPROF, "run", "--every", "0", "--interval", "4k", "-o", out, "--",
                                 "redis-server", "--port", str(port), "--save", "",
                                 "--appendonly", "no", "--dir", self.path(".")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            wait_port(port, proc)
            cli = ["redis-cli", "-p", str(port)]
            # 20 MB of values the server keeps
            r = subprocess.run(cli + ["eval", "for i=1,2000 do redis.call('set', 'k'..i, "
                                      "string.rep('x', 10000)) end return 1", "0"],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(r.stdout.strip(), "1", r.stderr)
            info = subprocess.run(cli + ["info", "memory"], capture_output=True, text=True,
                                  timeout=30).stdout
            used = int(info.split("used_memory:")[1].split()[0])
            # jemalloc's own statistics see the data set (over mimalloc
            # they read some 28 KB, and MEMORY DOCTOR warns falsely)
            allocated = int(info.split("allocator_allocated:")[1].split()[0])
            self.assertGreater(allocated, 20_000_000, info)
            pid = child_named(proc.pid, "redis-server")
            report = self.path("now.pb.gz")
            r = mimprof("ctl", str(pid), "report", "-o", report)
            self.assertEqual(r.returncode, 0, r.stderr)
            inuse = pprof_wire.totals(decode(report), "inuse_space")
            # redis counts jemalloc's size classes, the profile what was
            # asked for. At a 4 KiB interval a 10 kB value is sampled with
            # p = 0.91: 2000 of them estimate to 0.7 % (1 sigma).
            self.assertGreater(inuse, 0.95 * 20_000_000, (inuse, used))
            self.assertLess(inuse, 1.05 * used, (inuse, used))
            subprocess.run(cli + ["shutdown", "nosave"], capture_output=True, timeout=30)
            _, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.assertEqual(proc.returncode, 0, err)
        picked = [l for l in err.splitlines() if "links libjemalloc" in l]
        self.assertEqual(len(picked), 1, err)
        self.assertIn("profiling over jemalloc", picked[0])
        self.assertEqual(len(reports(out)), 1, err)


@unittest.skipUnless(shutil.which("memcached"), "memcached not installed")
class Memcached(TempDirTest):
    def connections(self, *pre):
        """How many connections memcached -c 64 serves at once, at a soft
        descriptor limit of 64."""
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard <= 64:
            self.skipTest("hard descriptor limit %d" % hard)
        port = free_port()
        proc = subprocess.Popen([*pre, "memcached", "-u", "root", "-p", str(port), "-U", "0",
                                 "-c", "64", "-t", "1"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: resource.setrlimit(
                                    resource.RLIMIT_NOFILE, (64, hard)))
        socks = []
        try:
            wait_port(port, proc)
            for _ in range(80):
                try:
                    s = socket.create_connection(("127.0.0.1", port), timeout=2)
                    s.sendall(b"version\r\n")
                    if not s.recv(64).startswith(b"VERSION"):
                        s.close()
                        break
                    socks.append(s)
                except OSError:
                    break
            served = len(socks)
        finally:
            for s in socks:
                s.close()
            pid = child_named(proc.pid, "memcached")
            os.kill(pid, 15)
            _, err = proc.communicate(timeout=30)
        return served, err

    def test_memcached_serves_as_many_connections_at_a_low_limit(self):
        plain, _ = self.connections()
        out = self.path("out")
        profiled, err = self.connections(MIMPROF, "run", "--every", "0", "-o", out, "--")
        self.assertGreater(plain, 30)
        self.assertEqual(profiled, plain, err)
        self.assertEqual(len(reports(out)), 1, err)


if __name__ == "__main__":
    unittest.main()
