#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The size and speed of `mimprof report` on a week-long run: N reports of
S stacks each (default 1,000 x 10,000, a report every 10 minutes for a
week), written as mimprof writes them (gzip pprof with age labels and the
memory comments). Of the stacks, 80% are a service's steady set with
heavy-tailed sizes, 20% churn (new small stacks at every report), so the
run holds many more distinct stacks than one report.

Checks (exit 1 when not met): the page is under 20 MB; its totals equal
the files' (exact); in headless Chromium (with CHROMIUM and CHROMEDRIVER)
the page loads without a console error and every click redraws. Prints
the sizes and times measured; times are not asserted (the machine is
shared).

    report_scale.py [--reports N] [--stacks S] [--keep DIR]
Needs: MIMPROF; tests/support and cli/tests on PYTHONPATH.
"""
import argparse
import gzip
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "support"))
import pbwire as pb  # noqa: E402

MIMPROF = os.environ.get("MIMPROF", "mimprof")
AGES = [0, 1, 3, 10, 30, 60, 180, 600, 1800, 3600, 10800, 21600, 43200, 86400, 259200, 604800]
T0 = 1_800_000_000_000_000_000


class Run:
    """The common part of every file (strings, functions, locations,
    mapping) and the pre-encoded stacks."""

    def __init__(self, nfuncs=4000, seed=1):
        self.rng = random.Random(seed)
        self.strings = [b"", b"alloc_objects", b"count", b"alloc_space", b"bytes",
                        b"inuse_objects", b"inuse_space", b"space", b"age", b"seconds",
                        b"/opt/svc/bin/service"]
        self.nfuncs = nfuncs
        base = len(self.strings)
        for f in range(nfuncs):
            self.strings.append(("svc::module%d::function_%d" % (f % 97, f)).encode())
        common = bytearray()
        for t, u in ((1, 2), (3, 4), (5, 2), (6, 4)):
            common += pb.f_bytes(1, pb.f_varint(1, t) + pb.f_varint(2, u))
        common += pb.f_bytes(3, pb.f_varint(1, 1) + pb.f_varint(2, 0x400000) +
                             pb.f_varint(3, 0x900000) + pb.f_varint(5, 10))
        for f in range(nfuncs):  # location f+1 = function f+1, one line
            common += pb.f_bytes(4, pb.f_varint(1, f + 1) + pb.f_varint(2, 1) +
                                 pb.f_varint(3, 0x400000 + 16 * f) +
                                 pb.f_bytes(4, pb.f_varint(1, f + 1) + pb.f_varint(2, 1)))
            common += pb.f_bytes(5, pb.f_varint(1, f + 1) + pb.f_varint(2, base + f))
        self.common_tail = bytes(common)
        self.cache = {}

    def stack(self, k):
        """Stack k (pre-encoded location ids): 6 to 16 frames, from a root
        set shared by all (main, the event loop), deterministic in k."""
        s = self.cache.get(k)
        if s is None:
            r = random.Random(k * 7919 + 13)
            depth = r.randint(6, 16)
            frames = [r.randrange(8, self.nfuncs) for _ in range(depth - 3)] + [3, 2, 1]
            s = self.cache[k] = pb.f_packed(1, frames)
            if len(self.cache) > 400_000:
                self.cache.clear()
        return s

    @staticmethod
    def sample(i, j, nstacks):
        """(stack number, in-use bytes) of sample j of report i."""
        steady = int(nstacks * 0.8)
        if j < steady:
            return j, int(200_000_000 / (j + 1) ** 1.1 * (1 + i / 2000)) + 64
        k = 1_000_000 + i * (nstacks - steady) + (j - steady)  # churn: new small stacks
        return k, 64 + (k % 4096)

    def total(self, i, nstacks):
        return sum(self.sample(i, j, nstacks)[1] for j in range(nstacks))

    def encode(self, i, nstacks, strings_extra):
        out = bytearray()
        total = 0
        for j in range(nstacks):
            k, v = self.sample(i, j, nstacks)
            age = AGES[min(len(AGES) - 1, (j * 7 + i) % 11)]
            total += v
            out += pb.f_bytes(2, self.stack(k) + pb.f_packed(2, [1, v, 1, v]) +
                              pb.f_bytes(3, pb.f_varint(1, 8) + pb.f_varint(3, age) +
                                         pb.f_varint(4, 9)))
        out += self.common_tail
        strings = self.strings + strings_extra(total)
        for s in strings:
            out += pb.f_bytes(6, s)
        for c in range(len(self.strings), len(strings)):
            out += pb.f_varint(13, c)
        out += pb.f_varint(9, T0 + i * 600 * 10**9) + pb.f_varint(10, 600 * 10**9)
        out += pb.f_bytes(11, pb.f_varint(1, 7) + pb.f_varint(2, 4)) + pb.f_varint(12, 524288)
        return gzip.compress(bytes(out), compresslevel=1), total


def memory(total):
    return [("memory rss: %d bytes (the process's resident set)" % (total + 2**28)).encode(),
            ("memory allocator: mimalloc resident=%d committed=%d (bytes)"
             % (total + 2**26, total + 2**29)).encode(),
            ("memory live heap: %d bytes (estimated: the sum of inuse_space)" % total).encode(),
            b"memory profiler: 52428800 bytes (live table, stacks, thread records, symbol data)"]


def browse(page):
    from webdriver import Browser, click_at  # cli/tests
    real = "/usr/lib/chromium/chromium"
    chromium = real if os.path.exists(real) else os.environ["CHROMIUM"]
    tmp = tempfile.mkdtemp(prefix="mimprof-scale-browser-")
    b = Browser(os.environ["CHROMEDRIVER"], chromium, tmp)
    ok = True
    try:
        t = time.monotonic()
        b.get("file://" + page)
        ready = b.script("return document.body.getAttribute('data-ready')")
        print("page load to ready: %.0f ms (WebDriver get; ready=%s)" % (
            (time.monotonic() - t) * 1000, ready))
        ok &= ready == "1"
        print("page open to ready: %s ms (in the page, from navigation start)"
              % b.script("return document.body.getAttribute('data-ready-ms')"))
        box = b.script("var r=document.getElementById('heap').getBoundingClientRect();"
                       "return [r.left, r.top, r.width, r.height];")
        for frac in (0.1, 0.5, 0.9):
            # a real click at that point of the chart, on whichever moment is there
            x, y = box[0] + box[2] * frac, box[1] + box[3] / 2
            b.script("window.scrollTo(0, 0)")
            before = int(b.script("return document.body.getAttribute('data-draws')"))
            t = time.monotonic()
            click_at(b, x, y)
            wall = (time.monotonic() - t) * 1000
            after = int(b.script("return document.body.getAttribute('data-draws')"))
            print("click at %d%% of the chart (%s): redraw %s ms in the page, %.0f ms through "
                  "WebDriver%s" % (frac * 100, b.script("return document.getElementById("
                                                        "'m-title').textContent.split(':')[0]"),
                                   b.script("return document.body.getAttribute('data-draw-ms')"),
                                   wall, "" if after == before + 1 else "  NO REDRAW"))
            ok &= after == before + 1
        bad = [e for e in b.console() if e.get("level") == "SEVERE"]
        if bad:
            print("console errors:", bad)
        ok &= not bad
    finally:
        b.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reports", type=int, default=1000)
    ap.add_argument("--stacks", type=int, default=10000)
    ap.add_argument("--keep")
    ap.add_argument("--reuse", action="store_true",
                    help="with --keep: the files already there (same --reports and --stacks)")
    a = ap.parse_args()
    d = a.keep or tempfile.mkdtemp(prefix="mimprof-scale-")
    out = os.path.join(d, "out")
    os.makedirs(out, exist_ok=True)
    run, totals = Run(), []
    t = time.monotonic()
    for i in range(a.reports):
        if a.reuse:
            totals.append(run.total(i, a.stacks))
            continue
        data, total = run.encode(i, a.stacks, memory)
        totals.append(total)
        with open(os.path.join(out, "heap.4242.%d.pb.gz" % i), "wb") as f:
            f.write(data)
    inputs = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    print("%d reports x %d stacks written in %.0f s (%.1f MB of gzip pprof)" % (
        a.reports, a.stacks, time.monotonic() - t, inputs / 1e6))
    page = os.path.join(d, "report.html")
    t = time.monotonic()
    r = subprocess.run([MIMPROF, "report", out, "-o", page], capture_output=True, text=True)
    print("mimprof report: %.1f s, exit %d %s" % (time.monotonic() - t, r.returncode,
                                                 r.stderr.strip()))
    ok = r.returncode == 0
    size = os.path.getsize(page) if ok else 0
    print("page: %.2f MB (bound 20 MB)" % (size / 1e6))
    ok &= 0 < size < 20_000_000
    if ok:
        with open(page, encoding="utf-8") as f:
            html = f.read()
        data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>',
                                    html, re.S).group(1))
        got = [m["tot"] for m in data["moments"]]
        exact = got == totals and all(sum(m["b"]) == m["tot"] for m in data["moments"]) and \
            all(sum(m["st"][2::3]) + m["oth"] == m["tot"] for m in data["moments"])
        print("totals exact: %s; %d stacks and %d names in the page" % (
            exact, len(data["stacks"]), len(data["names"])))
        ok &= exact
    if ok and os.environ.get("CHROMIUM") and os.environ.get("CHROMEDRIVER"):
        ok &= browse(page)
    if not a.keep:
        shutil.rmtree(d, ignore_errors=True)
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
