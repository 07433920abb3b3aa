#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Tests of scripts/bench_profiling_abba.py.

The driver's logic runs against fake workloads: small Python programs that
print the result lines a test gives them, one per invocation and case, in
order. RealControlTest runs a short control through the real workload
binary (BENCH_WORKLOAD, and BENCH_PRELOAD when set) to prove the plumbing;
no test asserts a speed.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SCRIPTS = os.environ.get("BENCH_SCRIPTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts")
DRIVER = os.path.join(SCRIPTS, "bench_profiling_abba.py")
sys.path.insert(0, SCRIPTS)
import bench_profiling_abba as abba  # noqa: E402

FAKE = r'''#!{python}
# fake workload {name}: prints the next given line for the case
import json, os, sys
SPEC, STATE = {spec!r}, {state!r}
case = sys.argv[1]
with open(SPEC) as f:
    spec = json.load(f)
counter = os.path.join(STATE, "{name}." + case)
n = int(open(counter).read()) if os.path.exists(counter) else 0
with open(counter, "w") as f:
    f.write(str(n + 1))
item = spec[case][n]
if item.get("mutate"):
    with open(__file__, "a") as f:
        f.write("# changed\n")
sys.stderr.write("fake stderr\n")
if "exit" in item:
    sys.exit(item["exit"])
print("some other output")
fields = dict(case=case, operations=int(item["tp"]), seconds="1.000000",
              throughput="%.1f" % item["tp"], cpu_seconds="1.000000",
              cpu_throughput="%.1f" % item.get("cpu", item["tp"]),
              samples=item.get("samples", 1000),
              recorded=item.get("samples", 1000) - item.get("dropped", 0),
              dropped=item.get("dropped", 0), profiler=item.get("profiler", 1),
              interval=os.environ.get("MIMPROF_INTERVAL", "-"))
print("mimprof-bench " + " ".join("%s=%s" % kv for kv in fields.items()))
'''


def line(tp, **kw):
    d = {"tp": tp}
    d.update(kw)
    return d


class Fixture(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="bench-abba-test-")
        self.state = os.path.join(self.tmp, "state")
        os.mkdir(self.state)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def fake(self, name, spec):
        """A fake workload; spec: case -> list of line() items in call order."""
        spec_path = os.path.join(self.tmp, name + ".json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(FAKE.format(python=sys.executable, name=name, spec=spec_path,
                                state=self.state))
        os.chmod(path, 0o755)
        return path

    def calls(self, name, case):
        p = os.path.join(self.state, f"{name}.{case}")
        if not os.path.exists(p):
            return 0
        with open(p) as f:
            return int(f.read())

    def drive(self, *args):
        out = os.path.join(self.tmp, "out")
        proc = subprocess.run([sys.executable, DRIVER, "--quiet", "-o", out] + list(args),
                              capture_output=True, text=True, timeout=120)
        summary = None
        if os.path.exists(os.path.join(out, "summary.json")):
            with open(os.path.join(out, "summary.json")) as f:
                summary = json.load(f)
        return proc, summary, out

    def compare(self, a_lines, b_lines, case="alloc-1m-1w", *extra):
        a = self.fake("base", {case: a_lines})
        b = self.fake("cand", {case: b_lines})
        return self.drive(a, b, "--case", case, *extra)


class GateTest(Fixture):
    def test_accepted_comparison_reports_change(self):
        proc, s, _ = self.compare([line(100), line(102)], [line(99), line(100)])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        c = s["cases"][0]
        self.assertEqual(c["verdict"], "accepted")
        self.assertTrue(c["used"])
        self.assertAlmostEqual(c["change_pct"], (99.5 / 101 - 1) * 100, places=6)
        self.assertIn("accepted", proc.stdout)

    def test_baseline_drift_above_5_percent_rejected(self):
        # |100 - 94| / 97 = 6.19%
        proc, s, out = self.compare([line(100), line(94)], [line(100), line(100)])
        self.assertEqual(proc.returncode, 1)
        c = s["cases"][0]
        self.assertEqual(c["verdict"], "rejected")
        self.assertFalse(c["used"])
        self.assertTrue(any("baseline drift 6.19%" in r for r in c["reasons"]), c["reasons"])
        self.assertIn("REJECTED", proc.stdout)
        self.assertIn("not used", proc.stdout)
        # kept on disk
        for n, tag in enumerate("ABBA", 1):
            self.assertTrue(os.path.isfile(os.path.join(out, "runs", "alloc-1m-1w",
                                                        f"{n}-{tag}", "stdout.txt")))

    def test_candidate_drift_above_5_percent_rejected(self):
        proc, s, _ = self.compare([line(100), line(100)], [line(110), line(100)])
        self.assertEqual(proc.returncode, 1)
        reasons = s["cases"][0]["reasons"]
        self.assertTrue(any(r.startswith("candidate drift") for r in reasons), reasons)
        self.assertFalse(any(r.startswith("baseline drift") for r in reasons), reasons)

    def test_drift_at_5_percent_accepted(self):
        # |102.5 - 97.5| / 100 = 5.00% exactly
        proc, s, _ = self.compare([line(102.5), line(97.5)], [line(100), line(100)])
        self.assertEqual(s["cases"][0]["verdict"], "accepted", s["cases"][0]["reasons"])

    def test_drops_above_1_percent_rejected(self):
        proc, s, _ = self.compare([line(100), line(100)],
                                  [line(100, samples=1000, dropped=11), line(100)])
        self.assertEqual(proc.returncode, 1)
        reasons = s["cases"][0]["reasons"]
        self.assertTrue(any("dropped 11 of 1000 samples (1.10% > 1%)" in r for r in reasons),
                        reasons)

    def test_drops_at_1_percent_accepted(self):
        proc, s, _ = self.compare([line(100), line(100)],
                                  [line(100, samples=1000, dropped=10), line(100)])
        self.assertEqual(s["cases"][0]["verdict"], "accepted", s["cases"][0]["reasons"])
        self.assertAlmostEqual(s["cases"][0]["max_drop_pct"], 1.0)

    def test_drops_without_samples_rejected(self):
        proc, s, _ = self.compare([line(100), line(100)],
                                  [line(100, samples=0, dropped=3), line(100)])
        self.assertEqual(s["cases"][0]["verdict"], "rejected")

    def test_failed_run_rejected(self):
        proc, s, _ = self.compare([line(100), line(100)], [line(100, exit=3), line(100)])
        self.assertEqual(proc.returncode, 1)
        self.assertTrue(any("exit status 3" in r for r in s["cases"][0]["reasons"]))

    def test_missing_profiler_rejected_when_required(self):
        proc, s, _ = self.compare([line(100), line(100)],
                                  [line(100, profiler=0), line(100)], "alloc-1m-1w",
                                  "--require-profiler", "candidate")
        self.assertTrue(any("without the profiler" in r for r in s["cases"][0]["reasons"]))

    def test_profiler_without_samples_rejected_when_required(self):
        proc, s, _ = self.compare([line(100), line(100)],
                                  [line(100, samples=0), line(100)], "alloc-1m-1w",
                                  "--require-profiler", "candidate")
        self.assertTrue(any("took no samples" in r for r in s["cases"][0]["reasons"]))

    def test_file_changed_during_run_rejected(self):
        proc, s, _ = self.compare([line(100), line(100, mutate=True)], [line(100), line(100)])
        self.assertEqual(proc.returncode, 1)
        self.assertTrue(any("changed during the comparison" in r
                            for r in s["cases"][0]["reasons"]))

    def test_metric_cpu_throughput(self):
        a = [line(100, cpu=50), line(80, cpu=50.5)] * 2   # wall drift 22%, CPU drift 1%
        b = [line(90, cpu=49), line(95, cpu=49.2)] * 2     # (two driver runs)
        proc, s, _ = self.compare(a, b)
        self.assertEqual(s["cases"][0]["verdict"], "rejected")
        self.assertEqual(s["metric"], "throughput")
        out2 = os.path.join(self.tmp, "out2")
        subprocess.run([sys.executable, DRIVER, "--quiet", "-o", out2,
                        os.path.join(self.tmp, "base"), os.path.join(self.tmp, "cand"),
                        "--case", "alloc-1m-1w", "--metric", "cpu_throughput"],
                       capture_output=True)
        with open(os.path.join(out2, "summary.json")) as f:
            s2 = json.load(f)
        c = s2["cases"][0]
        self.assertEqual(c["verdict"], "accepted", c["reasons"])
        self.assertEqual(c["metric"], "cpu_throughput")
        self.assertAlmostEqual(c["change_pct"], (49.1 / 50.25 - 1) * 100, places=6)
        # the first run's records, judged again by CPU time: accepted, nothing rerun
        first = os.path.join(self.tmp, "out")
        proc = subprocess.run([sys.executable, DRIVER, "--rejudge", first, "--metric",
                               "cpu_throughput", "--json"], capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(json.loads(proc.stdout)["cases"][0]["verdict"], "accepted")
        self.assertEqual(self.calls("base", "alloc-1m-1w"), 4)

    def test_order_is_abba(self):
        a = self.fake("base", {"live-1m": [line(1), line(2)]})
        b = self.fake("cand", {"live-1m": [line(3), line(4)]})
        proc, s, _ = self.drive(a, b, "--case", "live-1m", "--drift-gate", "1000")
        tps = [r["result"]["throughput"] for r in s["cases"][0]["runs"]]
        self.assertEqual(tps, [1.0, 3.0, 4.0, 2.0])
        self.assertEqual([r["side"] for r in s["cases"][0]["runs"]],
                         ["baseline", "candidate", "candidate", "baseline"])


class ControlTest(Fixture):
    def test_control_accepted(self):
        exe = self.fake("same", {"alloc-1m-1w": [line(100), line(101), line(100.5), line(99)]})
        proc, s, _ = self.drive(exe, "--control", "--case", "alloc-1m-1w")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertEqual(s["mode"], "control")
        self.assertTrue(s["all_accepted"])
        self.assertEqual(s["sides"]["baseline"]["exe"], s["sides"]["candidate"]["exe"])
        self.assertEqual(self.calls("same", "alloc-1m-1w"), 4)

    def test_control_with_a_change_beyond_the_gate_rejected(self):
        exe = self.fake("same", {"alloc-1m-1w": [line(100), line(106), line(106), line(100)]})
        proc, s, _ = self.drive(exe, "--control", "--case", "alloc-1m-1w")
        self.assertEqual(proc.returncode, 1)
        self.assertTrue(any(r.startswith("control change +6.00%")
                            for r in s["cases"][0]["reasons"]), s["cases"][0]["reasons"])

    def test_control_must_cover_every_compared_case(self):
        spec = {"alloc-1m-1w": [line(100)] * 8, "live-1m": [line(100), line(80)] * 4}
        a = self.fake("base", spec)
        b = self.fake("cand", spec)
        ctl = os.path.join(self.tmp, "ctl")
        subprocess.run([sys.executable, DRIVER, "--quiet", "-o", ctl, a, "--control",
                        "--case", "alloc-1m-1w", "--case", "live-1m"], capture_output=True)
        proc, s, _ = self.drive(a, b, "--case", "live-1m", "--drift-gate", "1000",
                                "--control-summary", ctl)
        self.assertFalse(s["control"]["trusted"])
        self.assertIn("live-1m", s["control"]["reason"])

    def test_control_takes_one_executable(self):
        exe = self.fake("same", {})
        proc, s, _ = self.drive(exe, exe, "--control")
        self.assertEqual(proc.returncode, 2)

    def test_comparison_trusts_matching_control(self):
        spec = {"alloc-1m-1w": [line(100)] * 8}
        a = self.fake("base", spec)
        b = self.fake("cand", spec)
        ctl = os.path.join(self.tmp, "ctl")
        subprocess.run([sys.executable, DRIVER, "--quiet", "-o", ctl, a, "--control",
                        "--case", "alloc-1m-1w"], check=True, capture_output=True)
        proc, s, _ = self.drive(a, b, "--case", "alloc-1m-1w", "--control-summary", ctl)
        self.assertTrue(s["control"]["trusted"], s["control"])
        self.assertIn("control: trusted", proc.stdout)
        self.assertEqual(s["control"]["per_case"], {"alloc-1m-1w": ctl})
        # a control of another baseline does not count
        with open(b, "a") as f:
            f.write("# other build\n")
        out2 = os.path.join(self.tmp, "out2")
        subprocess.run([sys.executable, DRIVER, "--quiet", "-o", out2, b, a,
                        "--case", "alloc-1m-1w", "--control-summary", ctl],
                       capture_output=True)
        with open(os.path.join(out2, "summary.json")) as f:
            s2 = json.load(f)
        self.assertFalse(s2["control"]["trusted"])


class OutputDirTest(Fixture):
    def test_existing_nonempty_output_dir_refused(self):
        exe = self.fake("same", {"alloc-1m-1w": [line(100)] * 4})
        out = os.path.join(self.tmp, "out")
        os.mkdir(out)
        with open(os.path.join(out, "keep.txt"), "w") as f:
            f.write("earlier results\n")
        proc, s, _ = self.drive(exe, "--control", "--case", "alloc-1m-1w")
        self.assertEqual(proc.returncode, 2)
        self.assertIn("not empty", proc.stderr)
        self.assertEqual(os.listdir(out), ["keep.txt"])
        self.assertEqual(self.calls("same", "alloc-1m-1w"), 0)

    def test_existing_empty_output_dir_used(self):
        exe = self.fake("same", {"alloc-1m-1w": [line(100)] * 4})
        os.mkdir(os.path.join(self.tmp, "out"))
        proc, s, _ = self.drive(exe, "--control", "--case", "alloc-1m-1w")
        self.assertEqual(proc.returncode, 0, proc.stderr)

    def test_records_commands_and_raw_outputs(self):
        exe = self.fake("same", {"alloc-1k-64k": [line(100)] * 4})
        proc, s, out = self.drive(exe, "--control", "--case", "alloc-1k-64k", "--window", "2")
        run = os.path.join(out, "runs", "alloc-1k-64k", "1-A")
        with open(os.path.join(run, "command.txt")) as f:
            cmd = f.read()
        self.assertIn("MIMPROF_INTERVAL=1k", cmd)
        self.assertIn(f"{exe} alloc-1k-64k --window 2", cmd)
        with open(os.path.join(run, "stdout.txt")) as f:
            self.assertIn("some other output", f.read())
        with open(os.path.join(run, "stderr.txt")) as f:
            self.assertEqual(f.read(), "fake stderr\n")
        self.assertEqual(s["cases"][0]["runs"][0]["result"]["interval"], "1k")
        self.assertTrue(os.path.isfile(os.path.join(out, "summary.txt")))
        self.assertTrue(os.path.isfile(os.path.join(out, "manifest.json")))


class CaseAndHashTest(Fixture):
    def test_case_reruns_only_that_case(self):
        spec = {c: [line(100)] * 4 for c in abba.CASES}
        exe = self.fake("same", spec)
        proc, s, out = self.drive(exe, "--control", "--case", "producer-consumer")
        self.assertEqual([c["case"] for c in s["cases"]], ["producer-consumer"])
        self.assertEqual(os.listdir(os.path.join(out, "runs")), ["producer-consumer"])
        for c in abba.CASES:
            self.assertEqual(self.calls("same", c), 4 if c == "producer-consumer" else 0, c)

    def test_default_runs_every_case(self):
        spec = {c: [line(100)] * 4 for c in abba.CASES}
        exe = self.fake("same", spec)
        proc, s, _ = self.drive(exe, "--control")
        self.assertEqual([c["case"] for c in s["cases"]], list(abba.CASES))

    def test_hashes_recorded(self):
        a = self.fake("base", {"alloc-1m-1w": [line(100)] * 2})
        b = self.fake("cand", {"alloc-1m-1w": [line(100)] * 2})
        # a real shared object as the preload (libm: the interpreter loads it anyway)
        libm = next(p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib64/libm.so.6",
                                "/lib64/libm.so.6") if os.path.exists(p))
        proc, s, out = self.drive(a, b, "--case", "alloc-1m-1w", "--candidate-preload", libm)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)

        def sha(p):
            with open(p, "rb") as f:
                return hashlib.sha256(f.read()).hexdigest()
        files_a = s["sides"]["baseline"]["files"]
        files_b = s["sides"]["candidate"]["files"]
        self.assertEqual(files_a[a], sha(a))
        self.assertEqual(files_b[b], sha(b))
        self.assertEqual(files_b[libm], sha(libm))
        with open(os.path.join(out, "manifest.json")) as f:
            self.assertEqual(json.load(f)["sides"]["candidate"]["files"][libm], sha(libm))
        self.assertIn(f"LD_PRELOAD={libm}", s["cases"][0]["runs"][1]["command"])
        self.assertNotIn("LD_PRELOAD", s["cases"][0]["runs"][0]["env_set"])

    def test_preload_that_does_not_load_rejected(self):
        bogus = os.path.join(self.tmp, "libbogus.so")
        with open(bogus, "w") as f:
            f.write("not an ELF object\n")
        proc, s, _ = self.compare([line(100), line(100)], [line(100), line(100)],
                                  "alloc-1m-1w", "--candidate-preload", bogus)
        self.assertEqual(proc.returncode, 1)
        self.assertTrue(any("preload object was not loaded" in r
                            for r in s["cases"][0]["reasons"]), s["cases"][0]["reasons"])

    def test_inherited_preload_is_scrubbed(self):
        exe = self.fake("same", {"alloc-1m-1w": [line(100)] * 4})
        out = os.path.join(self.tmp, "out")
        env = dict(os.environ, MALLOC_CONF="prof:true", MIMPROF_INTERVAL="7")
        subprocess.run([sys.executable, DRIVER, "--quiet", "-o", out, exe, "--control",
                        "--case", "alloc-1m-1w"], env=env, capture_output=True, check=True)
        with open(os.path.join(out, "summary.json")) as f:
            s = json.load(f)
        run = s["cases"][0]["runs"][0]
        self.assertIn("MALLOC_CONF", run["env_unset"])
        self.assertEqual(run["result"]["interval"], "1m")
        self.assertIn("-u MALLOC_CONF", run["command"])


class CombineTest(Fixture):
    def test_combine_prefers_accepted_rerun(self):
        a = self.fake("base", {"alloc-1m-1w": [line(100), line(80), line(100), line(100)]})
        b = self.fake("cand", {"alloc-1m-1w": [line(100)] * 4})
        first = os.path.join(self.tmp, "first")
        second = os.path.join(self.tmp, "second")
        for out in (first, second):
            subprocess.run([sys.executable, DRIVER, "--quiet", "-o", out, a, b, "--case",
                            "alloc-1m-1w"], capture_output=True)
        proc = subprocess.run([sys.executable, DRIVER, "--combine", first, second],
                              capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("| alloc-1m-1w |", proc.stdout)
        self.assertIn("accepted", proc.stdout)
        self.assertIn(second, proc.stdout)


class UnitTest(unittest.TestCase):
    def test_parse_result_line(self):
        r = abba.parse_result_line("x\nmimprof-bench case=a operations=5 seconds=1.5 "
                                   "throughput=3.3 samples=0 interval=512k pc_lo=0x10\n")
        self.assertEqual(r, {"case": "a", "operations": 5, "seconds": 1.5, "throughput": 3.3,
                             "samples": 0, "interval": "512k", "pc_lo": "0x10"})
        self.assertIsNone(abba.parse_result_line("nothing here\n"))

    def test_ldd_never_runs_with_the_preload(self):
        # ldd is a shell script: an LD_PRELOAD in its environment would load
        # the profiler into the shell (which then writes reports of its own).
        seen = []
        real_run = abba.subprocess.run

        def spy(argv, **kw):
            seen.append((argv, dict(kw.get("env") or {})))
            return real_run(argv, **kw)
        abba.subprocess.run = spy
        try:
            os.environ["LD_PRELOAD_TEST_MARK"] = "1"
            abba.loaded_objects(sys.executable, ["/nonexistent/libx.so"])
        finally:
            abba.subprocess.run = real_run
            del os.environ["LD_PRELOAD_TEST_MARK"]
        self.assertEqual([a for a, _ in seen],
                         [["ldd", sys.executable], ["ldd", "/nonexistent/libx.so"]])
        for _, env in seen:
            self.assertFalse([k for k in env if k.startswith("LD_PRELOAD")], env.keys())

    def test_drift(self):
        self.assertAlmostEqual(abba.drift_pct(105, 95), 10.0)
        self.assertAlmostEqual(abba.drift_pct(95, 105), 10.0)


class RealControlTest(unittest.TestCase):
    """A short control through the real workload binary (plumbing only)."""

    def test_real_control(self):
        exe = os.environ.get("BENCH_WORKLOAD")
        if not exe:
            self.skipTest("BENCH_WORKLOAD not set (run through meson test)")
        preload = os.environ.get("BENCH_PRELOAD")
        tmp = tempfile.mkdtemp(prefix="bench-real-")
        try:
            out = os.path.join(tmp, "out")
            args = [sys.executable, DRIVER, "--quiet", "-o", out, exe, "--control",
                    "--case", "alloc-1m-1w", "--window", "0.3"]
            if preload:
                args += ["--baseline-preload", preload]
            proc = subprocess.run(args, capture_output=True, text=True, timeout=100)
            self.assertIn(proc.returncode, (0, 1), proc.stdout + proc.stderr)
            with open(os.path.join(out, "summary.json")) as f:
                s = json.load(f)
            c = s["cases"][0]
            self.assertEqual(len(c["runs"]), 4)
            for r in c["runs"]:
                self.assertIsNone(r["error"], r)
                self.assertEqual(r["result"]["case"], "alloc-1m-1w")
                self.assertGreater(r["result"]["operations"], 0)
                self.assertGreater(r["result"]["seconds"], 0.0)
                self.assertEqual(r["result"]["interval"], "1m")
                if preload:
                    self.assertIn("LD_PRELOAD=", r["command"])
            # a verdict either way; a rejection names its reason
            self.assertIn(c["verdict"], ("accepted", "rejected"))
            self.assertEqual(bool(c["reasons"]), c["verdict"] == "rejected")
            with open(exe, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            self.assertEqual(s["sides"]["baseline"]["files"][os.path.abspath(exe)], digest)
            if preload:
                self.assertIn(os.path.abspath(preload), s["sides"]["baseline"]["files"])
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
