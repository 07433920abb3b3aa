#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""mimprof run on a program with known phases (cli/tests/phases.c: 40 MiB
kept, a 120 MiB spike freed, 20 MiB at the end, 64 KiB blocks): the peak
profile next to each report holds the spike while the report at exit does
not, and --report-above writes a report while the spike is live, saying
why, without changing what the program sees.

Tolerances come from the estimator (p = 1 - exp(-S/R); a sample stands for
S/p bytes): for n blocks of S bytes the byte estimate's standard deviation
is S sqrt(n (1 - p) / p). The peak is the maximum of the estimate along the
run, a martingale around the true live bytes: by the reflection principle
its chance to stray beyond k sigma is at most twice a fixed instant's, so
5 sigma still bounds a false failure below 1e-6; below the true peak the
mark may also lag by its step, 1/64 of it (profiling.h).
"""
import math
import os
import re
import subprocess
import unittest

from tool_testlib import TempDirTest, decode, mimprof, reports

MiB = 1 << 20
PHASES = os.environ.get("MIMPROF_PHASES", "")
S, R = 64 << 10, 16 << 10
SIGMAS = 5.0
STEP = 1.0 / 64


def sigma(n):
    p = 1 - math.exp(-S / R)
    return S * math.sqrt(n * (1 - p) / p)


def site(profile, name, type_name="inuse_space"):
    t = [n for n, _ in profile["types"]].index(type_name)
    return sum(v[t] for frames, v, _, _ in profile["samples"] if name in frames)


def total(profile, type_name="inuse_space"):
    t = [n for n, _ in profile["types"]].index(type_name)
    return sum(v[t] for _, v, _, _ in profile["samples"])


@unittest.skipUnless(PHASES, "MIMPROF_PHASES is not set")
class Peak(TempDirTest):
    def run_phases(self, *opts, wait=False):
        out = self.path("out")
        args = ["run", "-q", "-i", "16k", "--every", "0", *opts, "-o", out, "--", PHASES]
        r = mimprof(*args, *([out] if wait else []))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("done\n", r.stdout)
        (pid, files), = reports(out).items()
        return out, pid, files, r

    def test_peak_holds_the_spike_and_the_exit_report_does_not(self):
        out, pid, files, _ = self.run_phases()
        self.assertEqual(len(files), 1, "only the report at exit")
        peaks = reports(out, pid, peak=True)
        self.assertEqual([p.replace(".peak.pb.gz", ".pb.gz") for p in peaks], files)
        end, peak = decode(files[0]), decode(peaks[0])

        self.assertEqual([t for t, _ in peak["types"]], ["inuse_objects", "inuse_space"])
        n_keep, n_spike, n_late = 40 * 16, 120 * 16, 20 * 16
        true_peak = (n_keep + n_spike) * S
        spike = site(peak, "spike_site")
        lo = n_spike * S - STEP * true_peak - SIGMAS * sigma(n_spike)
        self.assertGreaterEqual(spike, lo, "the peak lost the spike")
        self.assertLessEqual(spike, n_spike * S + SIGMAS * sigma(n_spike))
        self.assertLessEqual(abs(site(peak, "keep_site") - n_keep * S),
                             STEP * true_peak + SIGMAS * sigma(n_keep))
        self.assertEqual(site(peak, "late_site"), 0, "allocated after the peak")
        comments = "\n".join(peak["comments"])
        m = re.search(r"peak: (\d+) bytes estimated live at (\S+Z)", comments)
        self.assertTrue(m, comments)
        self.assertGreaterEqual(int(m.group(1)), true_peak * (1 - STEP) - SIGMAS * sigma(n_keep + n_spike))
        self.assertLessEqual(abs(total(peak) - int(m.group(1))), len(peak["samples"]) + 1,
                             "the profile is the set the comment sizes")

        # The report at exit: 60 MiB live, no spike.
        self.assertEqual(site(end, "spike_site"), 0)
        self.assertLessEqual(abs(site(end, "late_site") - n_late * S), SIGMAS * sigma(n_late))
        self.assertLess(total(end), lo + n_keep * S - SIGMAS * sigma(n_keep))
        self.assertFalse([c for c in end["comments"] if c.startswith("report-above")])

    def test_report_above_fires_while_the_spike_is_live(self):
        out, pid, files, r = self.run_phases("--report-above", "100m", wait=True)
        fired = re.search(r"fired after ([0-9.]+) s", r.stdout)
        self.assertTrue(fired, r.stdout)
        print("report-above: the report appeared %s s after the spike was complete"
              % fired.group(1))
        above = [f for f in files
                 if any(c.startswith("report-above: written because the RSS")
                        for c in decode(f)["comments"])]
        self.assertTrue(above, "no report says it was written for --report-above")
        self.assertNotIn(files[-1], above, "the report at exit is an ordinary one")
        first = decode(above[0])
        self.assertGreater(site(first, "spike_site"), 0, "written while the spike was live")
        # RSS >= 100 MiB when it was taken: the heap then held all of it but
        # what is not heap (libraries, the profiler's own memory).
        self.assertGreater(total(first), 100 * MiB - 32 * MiB - SIGMAS * sigma(160 * 16))
        comment = [c for c in first["comments"] if c.startswith("report-above")][0]
        self.assertRegex(comment, r"crossed 100\.0 MiB \(--report-above 100\.0 MiB; the next "
                                  r"report at \d+\.\d MiB\)")
        for f in above:
            self.assertTrue(os.path.exists(f.replace(".pb.gz", ".peak.pb.gz")))

    def test_report_above_writes_a_heap_image_with_the_image_options(self):
        out, pid, files, r = self.run_phases("--report-above", "100m", "--image-on-exit",
                                             wait=True)
        images = sorted(n for n in os.listdir(out) if n.endswith(".mpimg"))
        # one when the threshold was crossed, one at exit
        self.assertGreaterEqual(len(images), 2, images)
        info = mimprof("image", "info", os.path.join(out, images[0]))
        self.assertEqual(info.returncode, 0, info.stderr)
        # the image at exit holds its window's peak: the spike, which its
        # snapshot (after the spike was freed) does not
        last = os.path.join(out, images[-1])
        peak = mimprof("image", "top", last, "--peak", "-n", "0")
        self.assertEqual(peak.returncode, 0, peak.stderr)
        self.assertIn("spike_site", peak.stdout)
        snap = mimprof("image", "top", last, "-n", "0")
        self.assertNotIn("spike_site", snap.stdout)

    def test_report_above_changes_nothing_the_program_sees(self):
        code = "import os; print(os.open('/dev/null', os.O_RDONLY))"
        plain = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True)
        r = mimprof("run", "-q", "--every", "0", "--report-above", "1m", "-o", self.path("o"),
                    "--", "/usr/bin/python3", "-c", code)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, plain.stdout, "the first free descriptor moved")

    def test_percent_without_a_cgroup_limit_says_so(self):
        r = mimprof("run", "--every", "0", "--report-above", "90%", "-o", self.path("o"), "--",
                    "/bin/true")
        self.assertEqual(r.returncode, 0, r.stderr)
        limited = False
        try:
            with open("/proc/self/cgroup") as f:
                cg = [l[3:].strip() for l in f if l.startswith("0::")]
            with open("/proc/self/mountinfo") as f:
                mounts = [l.split()[4] for l in f if " - cgroup2 " in l]
            for m in mounts:
                d = m + (cg[0] if cg and cg[0] != "/" else "")
                while d.startswith(m):
                    for name in ("memory.max", "memory.high"):
                        try:
                            with open(os.path.join(d, name)) as f:
                                limited |= f.read().strip() != "max"
                        except OSError:
                            pass
                    d = os.path.dirname(d)
                    if d == os.path.dirname(m):
                        break
        except OSError:
            pass
        if not limited:
            self.assertIn("no cgroup v2 memory.max or memory.high limits this process", r.stderr)

    def test_bad_threshold_is_refused_before_the_program_runs(self):
        for bad in ("0", "101%", "lots"):
            r = mimprof("run", "--report-above", bad, "--", "/bin/echo", "ran")
            self.assertEqual(r.returncode, 125, bad)
            self.assertNotIn("ran", r.stdout)
            self.assertIn("--report-above", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
