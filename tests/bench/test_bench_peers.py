#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Tests of scripts/bench_peers.py: the profile decoders (pprof wire format,
jemalloc heap_v2 dumps, gperftools heap samples) on synthetic profiles, the
interleaving schedule, the paired ratios and the configurations."""

import gzip
import math
import os
import sys
import tempfile
import unittest

SCRIPTS = os.environ.get("BENCH_SCRIPTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts")
sys.path.insert(0, SCRIPTS)
sys.path.insert(0, os.path.join(SCRIPTS, "..", "tests", "support"))
import bench_peers as peers  # noqa: E402
import bench_profiling_abba as abba  # noqa: E402
import pbwire as pb  # noqa: E402


# ---- synthetic pprof, written with the workspace's wire writer (tests/support)

def field_varint(f, v):
    """A varint field, written also when v is 0."""
    return pb.key(f, pb.VARINT) + pb.enc_varint(v)


field_bytes = pb.f_bytes
packed = pb.f_packed


def pprof(samples, locations, functions, strings, packed_ints=True):
    """samples: [(location ids, values)]; locations: {id: (address, [function ids])};
    functions: {id: name string index}."""
    out = b""
    for t, u in ((1, 2), (3, 4), (5, 2), (6, 4)):  # alloc_objects/count ... inuse_space/bytes
        out += field_bytes(1, field_varint(1, t) + field_varint(2, u))
    for locs, vals in samples:
        if packed_ints:
            body = packed(1, locs) + packed(2, vals)
        else:
            body = b"".join(field_varint(1, x) for x in locs) + \
                b"".join(field_varint(2, x) for x in vals)
        out += field_bytes(2, body)
    for lid, (addr, fids) in locations.items():
        body = field_varint(1, lid) + field_varint(2, 1) + field_varint(3, addr)
        for fid in fids:
            body += field_bytes(4, field_varint(1, fid) + field_varint(2, 7))
        out += field_bytes(4, body)
    for fid, name in functions.items():
        out += field_bytes(5, field_varint(1, fid) + field_varint(2, name))
    for s in strings:
        out += field_bytes(6, s.encode())
    out += field_varint(12, 524288)
    return out


STRINGS = ["", "alloc_objects", "count", "alloc_space", "bytes", "inuse_objects",
           "inuse_space", "population_alloc", "main", "other"]


class PprofTest(unittest.TestCase):
    def profile(self, **kw):
        locations = {1: (0x1010, []), 2: (0x5000, [2]), 3: (0x9000, [1]), 4: (0x7000, [3])}
        functions = {1: 7, 2: 8, 3: 9}
        samples = [
            ([1, 2], [10, 7000, 4, 2800]),   # frame in [0x1000, 0x1100)
            ([3, 2], [5, 3500, 3, 2100]),    # named population_alloc (no address match)
            ([4, 2], [100, 99999, 50, 55555]),  # somebody else
        ]
        return pprof(samples, locations, functions, STRINGS, **kw)

    def test_decode(self):
        p = peers.decode_pprof(self.profile())
        self.assertEqual(p["sample_type"][3], ("inuse_space", "bytes"))
        self.assertEqual(len(p["samples"]), 3)
        self.assertEqual(p["locations"][2]["address"], 0x5000)
        self.assertEqual(p["functions"][1], "population_alloc")
        self.assertEqual(p["period"], 524288)

    def test_estimate_by_address_and_name(self):
        for packed_ints in (True, False):
            data = self.profile(packed_ints=packed_ints)
            self.assertEqual(peers.estimate_pprof(data, 0x1000, 0x1100), (7, 4900))
            self.assertEqual(peers.estimate_pprof(gzip.compress(data), 0x1000, 0x1100), (7, 4900))

    def test_negative_values_and_missing_types(self):
        data = pprof([([1], [1, 2, -3, -4])], {1: (0x1000, [])}, {}, STRINGS)
        self.assertEqual(peers.estimate_pprof(data, 0x1000, 0x1001), (-3, -4))
        with self.assertRaises(ValueError):
            peers.estimate_pprof(field_bytes(6, b""), 0, 1)

    def test_truncated_input_is_an_error(self):
        with self.assertRaises(ValueError):
            peers.decode_pprof(self.profile()[:-3])


JEMALLOC = """heap_v2/524288
  t*: 3000: 2400000 [0: 0]
  t0: 3000: 2400000 [0: 0]
@ 0x7f0000001000 0x555500001050 0x555500002000
  t*: 2000: 1536000 [0: 0]
  t0: 2000: 1536000 [0: 0]
@ 0x7f0000001000 0x555500009000
  t*: 1000: 864000 [0: 0]
  t0: 1000: 864000 [0: 0]

MAPPED_LIBRARIES:
555500000000-555500010000 r-xp 00000000 fe:00 1 /bench
"""

TCMALLOC = """heap profile:   3001:  2100700 [  3001:  2100700] @ heap_v2/524288
     1:      700 [     1:      700] @ 0x7f0000001000 0x555500001050 0x555500002000
  2000:  1400000 [  2000:  1400000] @ 0x7f0000001000 0x555500001060
  1000:   700000 [  1000:   700000] @ 0x7f0000001000 0x555500009000

MAPPED_LIBRARIES:
555500000000-555500010000 r-xp 00000000 fe:00 1 /bench
"""


class TextProfileTest(unittest.TestCase):
    def test_jemalloc_unbiased_per_stack_like_jeprof(self):
        objects, space = peers.estimate_jemalloc(JEMALLOC, 0x555500001000, 0x555500001100)
        scale = 1 / (1 - math.exp(-768 / 524288))
        self.assertAlmostEqual(objects, 2000 * scale, places=6)
        self.assertAlmostEqual(space, 1536000 * scale, places=3)

    def test_tcmalloc_unbiased_per_record_like_pprof(self):
        objects, space = peers.estimate_tcmalloc(TCMALLOC, 0x555500001000, 0x555500001100)
        scale = 1 / (1 - math.exp(-700 / 524288))
        self.assertAlmostEqual(objects, 2001 * scale, places=6)
        self.assertAlmostEqual(space, 1400700 * scale, places=3)

    def test_wrong_formats_refused(self):
        with self.assertRaises(ValueError):
            peers.estimate_jemalloc(TCMALLOC, 0, 1)
        with self.assertRaises(ValueError):
            peers.estimate_tcmalloc(JEMALLOC, 0, 1)

    def test_unsample_limits(self):
        self.assertEqual(peers.unsample(0, 0, 524288), (0.0, 0.0))
        o, s = peers.unsample(1, 1 << 30, 524288)  # huge objects: p = 1
        self.assertAlmostEqual(o, 1.0)


class ScheduleTest(unittest.TestCase):
    def test_every_round_runs_every_pair_once_rotated(self):
        plan = peers.schedule(3, ["a", "b"], ["x", "y", "z"])
        self.assertEqual(len(plan), 18)
        for r in range(3):
            for case in "ab":
                got = [cfg for rr, c, cfg in plan if rr == r and c == case]
                self.assertEqual(sorted(got), ["x", "y", "z"])
        firsts = [cfg for rr, c, cfg in plan if c == "a"][::3]
        self.assertEqual(firsts, ["x", "y", "z"])

    def test_paired_changes_use_the_same_round(self):
        results = {0: {("a", "plain"): 100.0, ("a", "prof"): 99.0},
                   1: {("a", "plain"): 50.0, ("a", "prof"): 49.0},
                   2: {("a", "prof"): 10.0}}  # plain failed: round left out
        ch = peers.paired_changes(results, "a", "prof", "plain")
        self.assertEqual(len(ch), 2)
        self.assertAlmostEqual(ch[0], -1.0)
        self.assertAlmostEqual(ch[1], -2.0)
        self.assertEqual(peers.fmt_change(ch), "-1.5% (-2.0..-1.0)")
        self.assertEqual(peers.fmt_change([]), "n/a")


class ConfigTest(unittest.TestCase):
    def test_configs(self):
        with tempfile.NamedTemporaryFile() as f:
            paths = {k: f.name for k in ("override", "preload_mimalloc", "preload_jemalloc",
                                         "mimalloc", "jemalloc", "tcmalloc")}
            # the baseline is raw mimalloc; the override is a row of its own, with no session
            pre, env = peers.config_setup("mimalloc", {**paths, "override": "/nonexistent"},
                                          524288, "512k")
            self.assertEqual((pre, env), ([f.name], {}))
            pre, env = peers.config_setup("mimprof-allocator", paths, 524288, "512k")
            self.assertEqual((pre, env), ([f.name], {}))
            pre, env = peers.config_setup("jemalloc-prof", paths, 524288, "512k")
            self.assertEqual(env, {"MALLOC_CONF": "prof:true,lg_prof_sample:19"})
            pre, env = peers.config_setup("tcmalloc-sample", paths, 524288, "512k")
            self.assertEqual(env, {"TCMALLOC_SAMPLE_PARAMETER": "524288"})
            pre, env = peers.config_setup("tcmalloc", paths, 524288, "512k")
            self.assertEqual(env, {"TCMALLOC_SAMPLE_PARAMETER": "0"})
            pre, env = peers.config_setup("mimprof-mimalloc", paths, 1024, "1k")
            self.assertEqual(env, {"MIMPROF_INTERVAL": "1k", "MIMPROF_EVERY": "10s"})
            pre, env = peers.config_setup("jemalloc-prof", paths, 1 << 20, "1m")
            self.assertEqual(env["MALLOC_CONF"], "prof:true,lg_prof_sample:20")
            self.assertEqual(pre, [f.name])
        with self.assertRaises(abba.UsageError):
            peers.config_setup("mimprof-mimalloc", {"preload_mimalloc": "/nonexistent"},
                               524288, "512k")
        with self.assertRaises(abba.UsageError):
            peers.lg2(1000)

    def test_output_dir_refused(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "x"), "w") as f:
                f.write("x")
            exe = sys.executable
            rc = peers.main(["--workload", exe, "--jemalloc", exe, "--config", "jemalloc",
                             "-o", d, "--quiet"])
            self.assertEqual(rc, 2)


class IcountTest(unittest.TestCase):
    """--icount: the counting script's table (a stand-in script here: the
    real one needs valgrind and a build) lands in the summary."""

    def script(self, d, body):
        path = os.path.join(d, "count.sh")
        with open(path, "w") as f:
            f.write(body)
        return path

    def test_table_kept_with_its_configs_and_pairs(self):
        with tempfile.TemporaryDirectory() as d:
            path = self.script(d, 'echo "| configuration | per pair | $2 | $CONFIGS |"\n')
            ic = peers.icount_run(path, d, 1000, ["mimalloc", "mimprof-mimalloc"], d)
            self.assertIsNone(ic["error"])
            self.assertEqual(ic["table"], "| configuration | per pair | 1000 | "
                                          "mimalloc mimprof-mimalloc |")
            self.assertEqual(ic["pairs"], 1000)
            summary = {"machine": {"cpu_model": "x", "nproc": 2, "kernel": "k"},
                       "started": "2026-12-01T00:00:00Z",
                       "speed": {"runs": []}, "accuracy": {"runs": []}, "icount": ic}
            md = peers.render(summary)
            self.assertIn("1000 and 2000 pairs", md)
            self.assertIn(ic["table"], md)

    def test_failure_is_an_error_not_a_table(self):
        with tempfile.TemporaryDirectory() as d:
            ic = peers.icount_run(self.script(d, "echo broken >&2; exit 3\n"), d, 10, [], d)
            self.assertIn("exit status 3", ic["error"])
            ic = peers.icount_run(self.script(d, "echo no table\n"), d, 10, [], d)
            self.assertEqual(ic["error"], "no table in the script's output")


if __name__ == "__main__":
    unittest.main(verbosity=2)
