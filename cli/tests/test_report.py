#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""mimprof report: the page's data against what `mimprof top` says of the
same files, on a program with known phases under `mimprof run`
(report_phases.c: a site kept from the start, one that grows, a spike
freed at once); processes chosen by pid, program or memory; bad inputs
(damaged, truncated, foreign, empty files) skipped and named while the
page is written from the good ones; names that could break out of the
page's <script> stay data.

Needs: MIMPROF; MIMPROF_REPORT_PHASES (the phased program) for the run
(skipped without it: the sanitizer trees do not preload).
"""
import gzip
import json
import os
import re
import unittest

import pprof_wire
from tool_testlib import (TempDirTest, heap_profile, mimprof, parse_top, parse_value, reports,
                          rounding)

MiB = 1 << 20
PHASES = os.environ.get("MIMPROF_REPORT_PHASES", "")


def page_data(path):
    with open(path, encoding="utf-8") as f:
        html = f.read()
    m = re.search(r'<script type="application/json" id="data">(.*?)</script>', html, re.S)
    assert m, "no data in the page"
    return json.loads(m.group(1)), html


def top_rows(d, m):
    """The moment's top table: [(name, flat, cum)]."""
    t = m["top"]
    return [(d["names"][t[i]], t[i + 1], t[i + 2]) for i in range(0, len(t), 3)]


def site_values(d, m):
    """{site name: value} of a moment's bands."""
    names = [" < ".join(d["names"][n] for n in s) for s in d["sites"]]
    return dict(zip(names + ["(rest)"], m["b"]))


def kept_by_age(d, m, older):
    """The kept stacks (as name lists) at least `older` seconds old."""
    st = m["st"]
    return [[d["names"][n] for n in d["stacks"][st[i]]] for i in range(0, len(st), 3)
            if st[i + 1] >= older]


@unittest.skipUnless(PHASES, "MIMPROF_REPORT_PHASES is not set")
class Phases(TempDirTest):
    @classmethod
    def setUpClass(cls):
        import tempfile
        cls.dir = tempfile.mkdtemp(prefix="mimprof-report-")
        cls.out = os.path.join(cls.dir, "out")
        r = mimprof("run", "-q", "-i", "16k", "--every", "500ms", "--report-page", "-o", cls.out,
                    "--", PHASES)
        assert r.returncode == 0 and "done" in r.stdout, r.stderr
        cls.page = os.path.join(cls.dir, "report.html")
        r = mimprof("report", cls.out, "-o", cls.page)
        assert r.returncode == 0, r.stderr
        cls.stderr = r.stderr
        cls.d, cls.html = page_data(cls.page)

    @classmethod
    def tearDownClass(cls):
        import shutil
        shutil.rmtree(cls.dir, ignore_errors=True)

    def moments(self, kind):
        return [m for m in self.d["moments"] if m["k"] == kind]

    def test_every_report_equals_mimprof_top(self):
        (pid, files), = reports(self.out).items()
        self.assertEqual(self.d["pid"], pid)
        self.assertEqual(self.d["program"], os.path.basename(PHASES))
        by_file = {m["f"]: m for m in self.d["moments"]}
        self.assertEqual(len(self.moments("r")), len(files))
        self.assertEqual(len(self.moments("p")), len(reports(self.out, peak=True)[pid]))
        for f in files + reports(self.out, peak=True)[pid]:
            m = by_file[os.path.basename(f)]
            top = mimprof("top", f, "-n", "0", check=True).stdout
            total = parse_value(re.search(r"^Total: (\S+)", top, re.M).group(1))
            self.assertLessEqual(abs(m["tot"] - total), rounding(total), f)
            self.assertEqual(sum(m["b"]), m["tot"], "the bands add up to the total")
            ages = m["ages"]
            self.assertEqual(sum(ages[1::2]), m["tot"], "the ages add up to the total")
            rows = parse_top(top)
            page = top_rows(self.d, m)
            self.assertEqual([r[0] for r in page], [r[5] for r in rows][:len(page)], f)
            for (name, flat, cum), r in zip(page, rows):
                self.assertLessEqual(abs(flat - r[0]), rounding(flat), (f, name))
                self.assertLessEqual(abs(cum - r[3]), rounding(cum), (f, name))
            mem = dict(re.findall(r"^memory (rss|live heap|profiler): (\d+) bytes", top, re.M))
            if m["k"] == "r":
                self.assertEqual(m["mem"][0], int(mem["rss"]), f)
                self.assertEqual(m["mem"][3], int(mem["live heap"]), f)
                self.assertEqual(m["mem"][4], int(mem["profiler"]), f)
                res = int(re.search(r"^memory allocator: mimalloc.* resident=(\d+)", top,
                                    re.M).group(1))
                self.assertEqual(m["mem"][1], res, f)
                self.assertLessEqual(res, m["mem"][0], "resident <= rss")

    def test_the_grown_site_grows_and_the_spike_is_at_its_peak(self):
        grow = [site_values(self.d, m).get("grow_site", 0) for m in self.moments("r")]
        self.assertEqual(grow, sorted(grow), "grow_site never shrinks")
        self.assertGreater(grow[-1], 12 * MiB * 0.8)
        peaks = self.moments("p")
        top_peak = max(peaks, key=lambda m: m["tot"])
        # the highest moment of the run is a window's peak (a peak mark may
        # lag the true peak by 1/64: profiling.h; a report that happened to
        # land on the spike may then stand a little above it)
        self.assertGreaterEqual(top_peak["tot"],
                                max(m["tot"] for m in self.d["moments"]) * (1 - 1 / 64))
        spike = site_values(self.d, top_peak).get("spike_site", 0)
        self.assertGreater(spike, 48 * MiB * 0.8, "the spike is at its peak marker")
        # the spike is freed at once: the report at exit does not hold it
        self.assertEqual(site_values(self.d, self.moments("r")[-1]).get("spike_site", 0), 0)

    def test_older_than_keeps_the_early_site_only(self):
        last = self.moments("r")[-1]
        old = kept_by_age(self.d, last, 3)
        self.assertTrue(old)
        for stack in old:
            self.assertIn("early_site", stack)
            self.assertNotIn("grow_site", stack)
        self.assertTrue(any("grow_site" in s for s in kept_by_age(self.d, last, 0)))
        # the page's exact ages against mimprof top --older-than
        f = os.path.join(self.out, last["f"])
        top = mimprof("top", f, "--older-than", "3s", check=True).stdout
        total = parse_value(re.search(r"^Total: (\S+)", top, re.M).group(1))
        ages = last["ages"]
        older = sum(ages[i + 1] for i in range(0, len(ages), 2) if ages[i] >= 3)
        self.assertLessEqual(abs(older - total), rounding(total))
        self.assertEqual([r[5] for r in parse_top(top) if r[0] > 0], ["early_site"])

    def test_run_report_page_is_the_same_page(self):
        # mimprof run --report-page wrote DIR/report.html at exit, of the
        # same files (the explicit report above read it too: it is not pprof)
        d, _ = page_data(os.path.join(self.out, "report.html"))
        self.assertEqual(d["moments"], self.d["moments"])
        self.assertEqual(d["pid"], self.d["pid"])

    def test_the_page_is_self_contained(self):
        self.assertIn("mimprof report: wrote", self.stderr)
        # no external resource: no src=, no href=, no url(, no @import
        self.assertNotRegex(self.html, r"\b(src|href)\s*=|url\(|@import")


def heap(stacks, program="/usr/bin/svc", comments=(), time_nanos=0):
    """A heap profile (raw pprof) whose first mapping is `program`, with
    comments and a time."""
    b = heap_profile(stacks)
    b.mapping(1, 0x1000, 0x9000, 0, program)
    ids = [b.s(c) for c in comments]  # in the string table before encode()
    pb = pprof_wire.pb
    return (b.encode() + b"".join(pb.f_varint(13, i) for i in ids)
            + (pb.f_varint(9, time_nanos) if time_nanos else b""))


class Inputs(TempDirTest):
    T = 1_800_000_000_000_000_000

    def good(self, d, pid, seq, mib, program="/usr/bin/svc"):
        stacks = [(["leak", "main"], [1, mib * MiB, 1, mib * MiB]),
                  (["cache", "main"], [1, MiB, 1, MiB])]
        data = heap(stacks, program, ["memory rss: %d bytes (the process's resident set)"
                                      % ((mib + 4) * MiB)], self.T + seq * 10**9)
        return self.write(os.path.join(d, "heap.%d.%d.pb.gz" % (pid, seq)), gzip.compress(data))

    def report(self, *args):
        page = self.path("page.html")
        r = mimprof("report", *args, "-o", page)
        return r, (page_data(page)[0] if r.returncode == 0 else None)

    def test_bad_files_are_skipped_and_named(self):
        os.mkdir(self.path("d"))
        for seq in range(3):
            self.good("d", 7, seq, 2 + seq)
        raw = heap([(["leak", "main"], [1, MiB, 1, MiB])])
        gz = bytearray(gzip.compress(raw))
        gz[len(gz) // 2] ^= 0xFF
        self.write("d/heap.7.3.pb.gz", bytes(gz))                   # damaged
        self.write("d/heap.7.4.pb", raw[:len(raw) // 2])            # truncated
        cpu = pprof_wire.Builder([("samples", "count"), ("cpu", "nanoseconds")])
        cpu.sample(["spin", "main"], [3, 3000])
        self.write("d/cpu.pb.gz", gzip.compress(cpu.encode()))      # foreign: no heap
        self.write("d/notes.pb.gz", b"not a profile at all\n")      # foreign: not pprof
        self.write("d/heap.7.5.pb.gz", b"")                         # empty
        r, d = self.report(self.path("d"))
        self.assertEqual(r.returncode, 0, r.stderr)
        skipped = {s[0]: s[1] for s in d["skipped"]}
        bad = ["heap.7.3.pb.gz", "heap.7.4.pb", "cpu.pb.gz", "notes.pb.gz", "heap.7.5.pb.gz"]
        self.assertEqual(sorted(skipped), sorted(bad))
        for name in bad:
            self.assertIn("skipped " + self.path("d/" + name), r.stderr)
        self.assertIn("inuse_space", skipped["cpu.pb.gz"])
        self.assertEqual([m["f"] for m in d["moments"]],
                         ["heap.7.%d.pb.gz" % s for s in range(3)])
        self.assertEqual([m["tot"] for m in d["moments"]], [(3 + s) * MiB for s in range(3)])
        # only bad files: no page, a failure
        r, _ = self.report(self.path("d/notes.pb.gz"), self.path("d/heap.7.5.pb.gz"))
        self.assertEqual(r.returncode, 1)

    def test_the_process_with_most_memory_or_the_one_asked_for(self):
        os.mkdir(self.path("d"))
        for seq in range(2):
            self.good("d", 10, seq, 1, "/usr/bin/small")
            self.good("d", 20, seq, 30, "/opt/big")
        _, d = self.report(self.path("d"))
        self.assertEqual((d["pid"], d["program"]), (20, "big"))
        self.assertEqual(sorted(p[0] for p in d["processes"]), [10, 20])
        _, d = self.report(self.path("d"), "--pid", "10")
        self.assertEqual((d["pid"], d["program"]), (10, "small"))
        self.assertTrue(all(m["f"].startswith("heap.10.") for m in d["moments"]))
        _, d = self.report(self.path("d"), "--program", "small")
        self.assertEqual(d["pid"], 10)
        r, _ = self.report(self.path("d"), "--pid", "99")
        self.assertEqual(r.returncode, 2)
        self.assertIn("10 (small)", r.stderr)

    def test_reduction_keeps_totals_exact(self):
        os.mkdir(self.path("d"))
        stacks = [(["f%d" % i, "mid%d" % (i % 7), "main"], [1, (i + 1) * 1000, 1, (i + 1) * 1000])
                  for i in range(300)]
        self.write("d/heap.3.0.pb", heap(stacks))
        r, d = self.report(self.path("d"), "--stacks", "20", "--sites", "4", "--top", "5")
        self.assertEqual(r.returncode, 0, r.stderr)
        m, = d["moments"]
        total = sum((i + 1) * 1000 for i in range(300))
        self.assertEqual(m["tot"], total)
        self.assertEqual(len(m["st"]), 3 * 20)
        self.assertEqual(m["noth"], 280)
        self.assertEqual(sum(m["st"][2::3]) + m["oth"], total)
        self.assertEqual(sum(m["b"]), total)
        self.assertEqual(len(d["sites"]), 4)
        self.assertEqual([d["names"][s[0]] for s in d["sites"]], ["f299", "f298", "f297", "f296"])
        rows = top_rows(d, m)
        self.assertEqual(len(rows), 5)
        self.assertEqual(rows[0], ("f299", 300000, 300000))
        # only the stacks kept are in the page's table
        self.assertEqual(len(d["stacks"]), 20)
        # sites of two frames: the function and its caller
        _, d = self.report(self.path("d"), "--sites", "2", "--site-frames", "2")
        self.assertEqual([[d["names"][n] for n in s] for s in d["sites"]],
                         [["f299", "mid5"], ["f298", "mid4"]])

    def test_names_stay_data(self):
        evil = "</script><script>document.title='x'</script>&<!--"
        self.write("p.pb", heap([([evil, "main"], [1, MiB, 1, MiB])]))
        r, d = self.report(self.path("p.pb"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(evil, d["names"])
        _, html = page_data(self.path("page.html"))
        self.assertEqual(html.lower().count("</script"), 2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
