#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A real Grafana Pyroscope server (v1.12.0, built from this directory's Go
module by `./dev`) for the tests: single binary on loopback, filesystem
storage in a temporary directory, stopped and removed afterwards.

As a module:

    from server import RealPyroscope, find_binary
    with RealPyroscope() as srv:          # waits for /ready
        srv.url                           # http://127.0.0.1:PORT

As a wrapper (what meson's real-server tests run):

    server.py [--multitenancy] -- PROGRAM ARGS...

starts a server, runs PROGRAM with MIMPROF_PYROSCOPE_URL set to it (and
MIMPROF_PYROSCOPE_REAL=1), stops the server and exits with PROGRAM's
status. Without a binary it exits 77 (skip) unless MIMPROF_PYROSCOPE_REQUIRED=1.

The binary: $MIMPROF_PYROSCOPE_BIN, else the cache `./dev` builds it into,
${XDG_CACHE_HOME:-~/.cache}/mimprof/pyroscope-v1.12.0-<first 16 hex digits
of sha256(go.sum)>/pyroscope."""

import ctypes
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.realpath(__file__))  # through the subprojects/ symlinks
VERSION = "v1.12.0"


def cache_path():
    """Where `./dev` (pyroscope_server_build) puts the binary."""
    with open(os.path.join(HERE, "go.sum"), "rb") as fh:
        key = hashlib.sha256(fh.read()).hexdigest()[:16]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "mimprof", "pyroscope-%s-%s" % (VERSION, key), "pyroscope")


def find_binary():
    """The server binary, or None when it was not built."""
    env = os.environ.get("MIMPROF_PYROSCOPE_BIN")
    for path in ([env] if env else []) + [cache_path()]:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def _free_ports(n):
    """n distinct free TCP ports on loopback (bound together, then freed)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _die_with_parent():
    """In the child: SIGKILL when the test process ends, however it ends
    (prctl PR_SET_PDEATHSIG), so that no server outlives its test."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


class RealPyroscope:
    """One server process; a context manager. `url` once started."""

    def __init__(self, binary=None, multitenancy=False, ready_timeout=120, log=None):
        self.binary = binary or find_binary()
        if self.binary is None:
            raise FileNotFoundError("no Pyroscope binary: run ./dev test once (it builds %s) or set "
                                    "MIMPROF_PYROSCOPE_BIN" % cache_path())
        self.multitenancy = multitenancy
        self.ready_timeout = ready_timeout
        self.log = log
        self.proc = None
        self.dir = None
        self.url = None

    def _args(self, http, grpc, gossip):
        d = self.dir
        return [
            self.binary, "-target=all",
            "-server.http-listen-address=127.0.0.1", "-server.http-listen-port=%d" % http,
            "-server.grpc-listen-address=127.0.0.1", "-server.grpc-listen-port=%d" % grpc,
            "-memberlist.bind-addr=127.0.0.1", "-memberlist.bind-port=%d" % gossip,
            "-memberlist.advertise-addr=127.0.0.1", "-memberlist.advertise-port=%d" % gossip,
            "-memberlist.join=127.0.0.1:%d" % gossip,
            "-ingester.lifecycler.addr=127.0.0.1",
            "-distributor.ring.instance-addr=127.0.0.1",
            "-compactor.ring.instance-addr=127.0.0.1",
            "-overrides-exporter.ring.instance-addr=127.0.0.1",
            "-query-frontend.instance-addr=127.0.0.1",
            "-query-scheduler.ring.instance-addr=127.0.0.1",
            "-store-gateway.sharding-ring.instance-addr=127.0.0.1",
            # readiness waits 15 s after the ring is healthy by default, to
            # pace rolling updates; one instance has nothing to pace
            "-ingester.min-ready-duration=0s",
            "-storage.backend=filesystem", "-storage.filesystem.dir=%s" % os.path.join(d, "bucket"),
            "-pyroscopedb.data-path=%s" % os.path.join(d, "data"),
            "-self-profiling.disable-push=true", "-usage-stats.enabled=false",
            "-auth.multitenancy-enabled=%s" % ("true" if self.multitenancy else "false"),
            "-log.level=warn",
        ]

    def start(self):
        self.dir = tempfile.mkdtemp(prefix="mimprof-pyroscope-")
        last = None
        for _attempt in range(3):  # a port taken between choosing and binding: again
            http, grpc, gossip = _free_ports(3)
            out = self.log if self.log is not None else open(os.path.join(self.dir, "server.log"), "wb")
            self.proc = subprocess.Popen(self._args(http, grpc, gossip), cwd=self.dir,
                                         stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True, preexec_fn=_die_with_parent)
            self.url = "http://127.0.0.1:%d" % http
            try:
                self._wait_ready()
                return self
            except RuntimeError as e:
                last = e
                self._kill()
        self.stop()
        raise last

    def _wait_ready(self):
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("pyroscope exited with %d before /ready; log: %s"
                                   % (self.proc.returncode, self.log_tail()))
            try:
                with urllib.request.urlopen(self.url + "/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.25)
        raise RuntimeError("pyroscope not ready within %d s; log: %s" % (self.ready_timeout,
                                                                          self.log_tail()))

    def log_tail(self, lines=20):
        try:
            with open(os.path.join(self.dir, "server.log"), "rb") as fh:
                return b"\n".join(fh.read().splitlines()[-lines:]).decode("utf-8", "replace")
        except OSError:
            return "(no log)"

    def _kill(self):
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None

    def stop(self):
        self._kill()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


def main(argv):
    multitenancy = False
    if "--" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    opts, cmd = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    for o in opts:
        if o == "--multitenancy":
            multitenancy = True
        else:
            print("unknown option %s" % o, file=sys.stderr)
            return 2
    if find_binary() is None:
        print("no real Pyroscope server (%s): ./dev test builds it" % cache_path(), file=sys.stderr)
        return 1 if os.environ.get("MIMPROF_PYROSCOPE_REQUIRED") == "1" else 77
    # meson's timeout sends SIGTERM: stop the server on the way out
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    t0 = time.monotonic()
    with RealPyroscope(multitenancy=multitenancy) as srv:
        print("pyroscope %s at %s, ready in %.1f s" % (VERSION, srv.url, time.monotonic() - t0),
              flush=True)
        env = dict(os.environ, MIMPROF_PYROSCOPE_URL=srv.url, MIMPROF_PYROSCOPE_REAL="1")
        rc = subprocess.call(cmd, env=env)
        if rc != 0:
            print("server log (last lines):\n" + srv.log_tail(), file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
