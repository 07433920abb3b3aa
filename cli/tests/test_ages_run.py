#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Ages, peaks and RSS through `mimprof run` on a program with known
phases (phased_heap.c): 40 MiB kept from the start (keep_old), a 120 MiB
spike freed again, a sleep, 20 MiB allocated just before the end
(keep_young).

- ages: `mimprof top --older-than/--younger-than` and go tool pprof's
  -tagfocus/-tagignore on the age label separate keep_old from keep_young;
  top --age shows their ages; flame filters alike; the heap image written
  at exit keeps the ages (`mimprof image top --older-than`);
- RSS: every report's comments (go tool pprof -comments) name RSS and the
  allocator's own figures, and the parts add up as profiling/README.md
  documents ("Reconciling with RSS").

The program sleeps SLEEP seconds (no CPU): keep_old is then at least that
old at the exit report, whatever the machine's speed; keep_young is
younger than the 10 s bound unless the exit report comes more than 10 s
after its allocation.
"""
import os
import re
import shutil
import subprocess
import sys
import unittest

from tool_testlib import TempDirTest, go_env, mimprof, parse_top, parse_value, reports

PHASED = os.environ["MIMPROF_PHASED"]
HAVE_JEMALLOC = os.environ.get("MIMPROF_HAVE_JEMALLOC") == "1"
GO = shutil.which("go")
MiB = 1 << 20
SLEEP = "10.5"
INTERVAL = 64 << 10
BLOCK = 64 << 10


def tolerance(total_bytes):
    """5 sigma of the estimator's byte estimate for blocks of BLOCK bytes at
    INTERVAL: S * sqrt(n (1 - p) / p), p = 1 - exp(-S/R)."""
    import math
    p = -math.expm1(-BLOCK / INTERVAL)
    n = total_bytes / BLOCK
    return 5 * BLOCK * math.sqrt(n * (1 - p) / p)


def functions(top_text):
    return {row[5]: row for row in parse_top(top_text)}


def memory(comments):
    """The "memory ..." comment lines as {'rss': n, 'live heap': n, ...}
    plus the allocator's k=v figures and the split of the rest."""
    out = {}
    for line in comments:
        m = re.match(r"memory (rss|live heap|profiler|unexplained): (-?\d+) bytes", line)
        if m:
            out[m.group(1)] = int(m.group(2))
        m = re.match(r"memory allocator: (\w+)((?: \w+=\d+)*) \(bytes\)", line)
        if m:
            out["allocator"] = m.group(1)
            out.update({k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))})
        m = re.match(r"memory unexplained = allocator slack (-?\d+) .* outside the allocator "
                     r"(-?\d+) ", line)
        if m:
            out["slack"], out["outside"] = int(m.group(1)), int(m.group(2))
    return out


class PhasedRun(TempDirTest):
    def run_phased(self, allocator):
        out = self.path("out-" + allocator)
        r = mimprof("run", "-q", "-a", allocator, "-i", INTERVAL, "-e", "0", "-o", out,
                    "--image-on-exit", "--", PHASED, SLEEP, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        files = [f for fs in reports(out).values() for f in fs]
        self.assertEqual(len(files), 1, files)
        images = [os.path.join(out, n) for n in os.listdir(out) if n.endswith(".mpimg")]
        self.assertEqual(len(images), 1, os.listdir(out))
        return files[0], images[0]

    def check_image(self, img):
        """The heap image keeps the ages: image top filters as top does."""
        old = functions(mimprof("image", "top", img, "-n", 0, "--older-than", "10s",
                                check=True).stdout)
        young = functions(mimprof("image", "top", img, "-n", 0, "--younger-than", "10s",
                                  check=True).stdout)
        self.assertIn("keep_old", old)
        self.assertNotIn("keep_young", old)
        self.assertIn("keep_young", young)
        self.assertNotIn("keep_old", young)
        for fn, mib, rows in (("keep_old", 40, old), ("keep_young", 20, young)):
            self.assertLess(abs(rows[fn][3] - mib * MiB), tolerance(mib * MiB), (fn, rows[fn]))

    def check_ages(self, f):
        old = functions(mimprof("top", f, "-t", "inuse_space", "-n", 0, "--older-than", "10s",
                                check=True).stdout)
        young = functions(mimprof("top", f, "-t", "inuse_space", "-n", 0, "--younger-than",
                                  "10s", check=True).stdout)
        self.assertIn("keep_old", old)
        self.assertNotIn("keep_young", old)
        self.assertIn("keep_young", young)
        self.assertNotIn("keep_old", young)
        for fn, mib in (("keep_old", 40), ("keep_young", 20)):
            have = (old if fn == "keep_old" else young)[fn][3]
            self.assertLess(abs(have - mib * MiB), tolerance(mib * MiB), (fn, have))
        # Allocation samples carry no age: a filter on alloc_space keeps nothing.
        allocs = mimprof("top", f, "-t", "alloc_space", "--older-than", "0s", check=True).stdout
        self.assertIn("Total: 0B", allocs)
        # The age column.
        text = mimprof("top", f, "-t", "inuse_space", "-n", 0, "--age", check=True).stdout
        ages = {}
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 7 and parts[6] in ("keep_old", "keep_young"):
                ages[parts[6]] = parts[5]
        self.assertEqual(ages.get("keep_old"), "10s", text)
        self.assertIn(ages.get("keep_young"), ("0s", "1s", "3s"), text)
        # diff applies the filter to both profiles: a file against itself,
        # only its old memory on both sides.
        r = mimprof("diff", f, f, "--older-than", "10s", check=True)
        m = re.search(r"Total: (\S+) -> (\S+) \(0B\)", r.stdout)
        self.assertIsNotNone(m, r.stdout)
        self.assertEqual(m.group(1), m.group(2))
        self.assertLess(abs(parse_value(m.group(1)) - 40 * MiB), tolerance(40 * MiB), r.stdout)
        r = mimprof("diff", f, f, "--age")
        self.assertEqual(r.returncode, 2, "--age is top's only")
        r = mimprof("top", f, "--older-than", "ten")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--older-than wants a duration", r.stderr)
        # flame takes the same filters.
        svg = self.path("old.svg")
        mimprof("flame", f, "-t", "inuse_space", "--older-than", "10s", "-o", svg, check=True)
        with open(svg, encoding="utf-8") as fh:
            body = fh.read()
        self.assertIn("keep_old", body)
        self.assertNotIn("keep_young", body)

    def go_pprof(self, *args):
        r = subprocess.run([GO, "tool", "pprof", *args], capture_output=True, text=True,
                           env=go_env(self.tmp), timeout=600)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def check_go(self, f):
        if GO is None:
            return
        old = self.go_pprof("-sample_index=inuse_space", "-tagfocus=age=10s:", "-top", f)
        young = self.go_pprof("-sample_index=inuse_space", "-tagignore=age=10s:", "-top", f)
        self.assertIn("keep_old", old)
        self.assertNotIn("keep_young", old)
        self.assertIn("keep_young", young)
        self.assertNotIn("keep_old", young)
        return self.go_pprof("-comments", f).splitlines()

    def check_memory(self, f, allocator, comments):
        if comments is None:  # no Go: mimprof top shows the same lines
            comments = [l for l in mimprof("top", f, check=True).stdout.splitlines()
                        if l.startswith("memory ")]
        m = memory(comments)
        for key in ("rss", "live heap", "profiler", "unexplained"):
            self.assertIn(key, m, comments)
        self.assertEqual(m["allocator"], allocator, comments)
        self.assertEqual(m["unexplained"], m["rss"] - m["live heap"] - m["profiler"], comments)
        self.assertEqual(m["slack"] + m["outside"], m["unexplained"], comments)
        self.assertLess(abs(m["live heap"] - 60 * MiB), tolerance(60 * MiB), comments)
        self.assertGreater(m["rss"], 60 * MiB - tolerance(60 * MiB), "60 MiB written: resident")
        self.assertGreater(m["profiler"], 0)
        # The allocator's resident bytes: mimalloc's measured by the
        # preload (its committed bytes include pages never touched),
        # jemalloc's stats.resident; never above RSS, so that what lies
        # outside the allocator is never below zero.
        # (jemalloc's is an upper bound: above RSS, the comments take RSS)
        foot = min(m["resident"], m["rss"])
        self.assertGreaterEqual(m["outside"], 0, comments)
        if allocator == "mimalloc":
            # 60 MiB written through mimalloc: resident, and its own
            self.assertLessEqual(m["resident"], m["rss"], comments)
            self.assertGreater(foot, 60 * MiB - tolerance(60 * MiB), comments)
        else:
            for key in ("allocated", "active", "resident", "mapped"):
                self.assertIn(key, m, comments)
            self.assertLessEqual(m["allocated"], m["active"])
            self.assertLessEqual(m["active"], m["resident"])
            self.assertLessEqual(m["resident"], m["mapped"])
            # jemalloc's allocated is the program's and the profiler's
            # blocks: the estimate is within its tolerance of it.
            self.assertLess(abs(m["live heap"] + m["profiler"] - m["allocated"]),
                            tolerance(60 * MiB) + 8 * MiB, comments)
        self.assertEqual(m["slack"], foot - m["live heap"] - m["profiler"], comments)
        self.assertEqual(m["outside"], m["rss"] - foot, comments)
        # mimprof top prints the same lines before its table.
        top = mimprof("top", f, check=True).stdout.splitlines()
        self.assertEqual([l for l in top if l.startswith("memory ")],
                         [l for l in comments if l.startswith("memory ")][:len(top)])

    def test_mimalloc(self):
        f, img = self.run_phased("mimalloc")
        self.check_ages(f)
        self.check_image(img)
        self.check_memory(f, "mimalloc", self.check_go(f))

    @unittest.skipUnless(HAVE_JEMALLOC, "no jemalloc preload")
    def test_jemalloc(self):
        f, img = self.run_phased("jemalloc")
        self.check_ages(f)
        self.check_image(img)
        self.check_memory(f, "jemalloc", self.check_go(f))


if __name__ == "__main__":
    unittest.main(verbosity=2)
