#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Rust programs under `mimprof run`.

Names: rust/leaky.rs built here with `rustc -O -g -C
symbol-mangling-version=v0` (std itself is v0-mangled) is profiled; its
profile names std's and its own frames demangled (std::rt::lang_start_internal,
<leaky::cache::Store<...>>::remember), system_name keeping the v0
linkage name, and so do `mimprof top`, `mimprof flame`, `mimprof diff`
and, where the Pyroscope stand-in is given (PYROSCOPE_STANDIN,
MIMPROF_PYROSCOPE_LIB), the profile the stand-in received.

Empty profiles: a program whose allocations bypass malloc (rust/leaky.rs
with --cfg own_allocator: a #[global_allocator] over mmap; and, with
cargo, rust-global-alloc/: `#[global_allocator] static GLOBAL:
mimalloc::MiMalloc`, the issue's program) says so in one line on its
stderr at exit, not with -q; a program that allocates little says
nothing; `mimprof top` of its profile says it is empty and why.

Needs MIMPROF, MIMPROF_PRELOAD and RUSTC (skipped without rustc); CARGO
and CARGO_TARGET_DIR for the mimalloc crate program.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from tool_testlib import TempDirTest, mimprof, parse_diff, parse_top, pprof_wire

HERE = os.path.dirname(os.path.abspath(__file__))
LEAKY = os.path.join(HERE, "rust", "leaky.rs")
GLOBAL_ALLOC = os.path.join(HERE, "rust-global-alloc")
STD = "std::rt::lang_start_internal"
REMEMBER = "<leaky::cache::Store<alloc::vec::Vec<u8>>>::remember"
SAID = re.compile(r"^mimprof: no allocation reached the profiler, yet the process grew to "
                  r"\d+ MiB: .*#\[global_allocator\].*mimprof crate.*MIMPROF_DISABLE",
                  re.MULTILINE)


def rustc(*args):
    subprocess.run([os.environ["RUSTC"], "-O", "-g", "-C", "symbol-mangling-version=v0",
                    *args], check=True, timeout=600)


class RustTest(TempDirTest):
    @classmethod
    def setUpClass(cls):
        if not os.environ.get("RUSTC") or not shutil.which(os.environ["RUSTC"]):
            raise unittest.SkipTest("no rustc")
        cls.bin = tempfile.mkdtemp(prefix="mimprof-rust-")
        cls.leaky = os.path.join(cls.bin, "leaky")
        cls.own = os.path.join(cls.bin, "leaky-own")
        rustc(LEAKY, "-o", cls.leaky)
        rustc("--cfg", "own_allocator", LEAKY, "-o", cls.own)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.bin, ignore_errors=True)

    def run_profiled(self, name, *cmd, quiet=True, opts=()):
        out = self.path(name)
        r = subprocess.run([os.environ["MIMPROF"], "run", *(["-q"] if quiet else []), *opts,
                            "-o", out, "--", *cmd], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        files = sorted(f for f in glob.glob(os.path.join(out, "heap.*.pb.gz"))
                       if not f.endswith(".peak.pb.gz"))
        self.assertEqual(len(files), 1, files)
        return r, files[0]


class Names(RustTest):
    def test_v0_names_in_the_profile_top_flame_and_diff(self):
        _, small = self.run_profiled("small", self.leaky, "1024", opts=("-i", "16k"))
        _, big = self.run_profiled("big", self.leaky, "4096", opts=("-i", "16k"))
        with open(big, "rb") as f:
            prof = pprof_wire.decode_profile(f.read())
        fns = {f["name"]: f["system_name"] for f in prof["functions"].values()}
        self.assertIn(STD, fns)
        self.assertTrue(fns[STD].startswith("_RNvNtC"), fns[STD])
        self.assertIn(REMEMBER, fns)
        self.assertTrue(fns[REMEMBER].startswith("_R"), fns[REMEMBER])
        self.assertFalse([n for n in fns if n.startswith("_R")], sorted(fns))

        top = {r[5]: r for r in parse_top(mimprof("top", big, "-n", "0", check=True).stdout)}
        self.assertIn(STD, top)
        self.assertIn(REMEMBER, top)
        self.assertGreater(top[REMEMBER][4], 90.0, top[REMEMBER])  # cum%
        self.assertFalse([n for n in top if n.startswith("_R")], sorted(top))
        raw = {r[5] for r in parse_top(mimprof("top", big, "-n", "0", "--no-demangle",
                                               check=True).stdout)}
        self.assertIn(fns[STD], raw)

        svg = mimprof("flame", big, "-o", "-", check=True).stdout
        self.assertIn(STD, svg)
        self.assertIn(REMEMBER.replace("<", "&lt;").replace(">", "&gt;"), svg)
        self.assertNotIn(fns[STD], svg)

        diff = parse_diff(mimprof("diff", small, big, "-n", "0", "--cum", check=True).stdout)
        grew = {row[4] for row in diff["grew"]}
        self.assertIn(REMEMBER, grew)
        self.assertIn(STD, grew)


    def test_v0_names_with_dwarf_lines(self):
        _, path = self.run_profiled("lines", self.leaky, "2048", opts=("-i", "16k", "-s", "lines"))
        with open(path, "rb") as f:
            prof = pprof_wire.decode_profile(f.read())
        names = {f["name"] for f in prof["functions"].values()}
        self.assertIn(STD, names)
        self.assertIn(REMEMBER, names)
        self.assertFalse([n for n in names if n.startswith("_R")], sorted(names))


class SilentProfiles(RustTest):
    def test_allocator_of_its_own_is_said_on_stderr(self):
        r, path = self.run_profiled("own", self.own, "8192", quiet=False)
        self.assertEqual(r.stdout, "8192 blocks kept\n")
        self.assertEqual(len(SAID.findall(r.stderr)), 1, r.stderr)
        top = mimprof("top", path, check=True).stdout
        self.assertIn("0 samples", top)
        self.assertRegex(top, r"Empty: no samples\..*#\[global_allocator\].*mimprof crate")
        # quiet: nothing said
        r, _ = self.run_profiled("own-quiet", self.own, "8192", quiet=True)
        self.assertEqual(r.stderr.strip(), "", r.stderr)

    def test_a_program_profiled_well_says_nothing(self):
        r, path = self.run_profiled("plain", self.leaky, "8192", quiet=False)
        self.assertFalse(SAID.search(r.stderr), r.stderr)
        self.assertNotIn("Empty:", mimprof("top", path, check=True).stdout)
        # nor does a program that allocates little
        r, _ = self.run_profiled("tiny", self.leaky, "1", quiet=False)
        self.assertFalse(SAID.search(r.stderr), r.stderr)

    def test_mimalloc_crate_global_allocator(self):
        cargo, target = os.environ.get("CARGO"), os.environ.get("CARGO_TARGET_DIR")
        if not cargo or not target:
            self.skipTest("no cargo")
        subprocess.run([cargo, "build", "--quiet", "--release", "--locked", "--manifest-path",
                        os.path.join(GLOBAL_ALLOC, "Cargo.toml")], check=True, timeout=900)
        exe = os.path.join(target, "release", "global-alloc")
        r, path = self.run_profiled("mimalloc-crate", exe, "65536", quiet=False)
        self.assertEqual(r.stdout, "65536 blocks kept\n")
        self.assertEqual(len(SAID.findall(r.stderr)), 1, r.stderr)
        self.assertIn("Empty: no samples.", mimprof("top", path, check=True).stdout)
        # the bare preload says the same
        env = dict(os.environ, LD_PRELOAD=os.environ["MIMPROF_PRELOAD"],
                   MIMPROF_OUTPUT=self.path("bare.pb"))
        r = subprocess.run([exe, "65536"], capture_output=True, text=True, timeout=300,
                           env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(SAID.findall(r.stderr)), 1, r.stderr)


@unittest.skipUnless(os.environ.get("PYROSCOPE_STANDIN") and
                     os.environ.get("MIMPROF_PYROSCOPE_LIB"), "no Pyroscope stand-in")
class ToPyroscope(RustTest):
    def test_uploaded_profile_names_std_frames(self):
        sys.path.insert(0, HERE)
        from test_pyroscope_run import TYPES, StandIn
        server = StandIn("--storage", "v1")
        try:
            r = subprocess.run([os.environ["MIMPROF"], "run", "-q", "--pyroscope", server.url,
                                "--app", "rusty", "-i", "16k", "--", self.leaky, "4096"],
                               capture_output=True, text=True, timeout=300, cwd=self.tmp)
            self.assertEqual(r.returncode, 0, r.stderr)
            prof = server.query("SelectMergeProfile", None, profileTypeID=TYPES["inuse_space"],
                                labelSelector='{service_name="rusty"}')
        finally:
            server.stop()
        strings = prof.get("stringTable", [])
        names = {strings[int(f["name"])] for f in prof.get("function", [])}
        self.assertIn(STD, names)
        self.assertIn(REMEMBER, names)
        self.assertFalse([n for n in names if n.startswith("_R")], sorted(names))


if __name__ == "__main__":
    assert os.environ.get("MIMPROF") and os.environ.get("MIMPROF_PRELOAD"), "set MIMPROF"
    unittest.main(verbosity=2)
