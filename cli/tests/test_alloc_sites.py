#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The allocation site, not the allocator's entry, is the leaf: cxx/five_sites.cpp
(g++ -O2 -g, and clang++ -O2 -g where installed) under `mimprof run`, in
both symbolize modes. site_new (`new Node`), site_new_array (`new
char[]`) and site_make_unique (std::make_unique) hold their memory flat,
within the estimator's 5 sigma of what they keep; `operator new` holds
none; the profile names its drop_frames; `go tool pprof -top` (which
prunes again at drop_frames) and the Pyroscope stand-in's merged profile
agree. --keep-alloc-frames keeps `operator new` the leaf,
--drop-frames adds the user's own frames, a bad pattern is refused
before the program runs.

Needs MIMPROF and MIMPROF_PRELOAD (the run tests' gate); go and the
Pyroscope stand-in (PYROSCOPE_STANDIN, MIMPROF_PYROSCOPE_LIB) are
optional (their checks skip without them).
"""
import glob
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from tool_testlib import TempDirTest, decode, go_env, mimprof, parse_top

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "cxx", "five_sites.cpp")
ROUNDS = 2000
INTERVAL = 16384
# what each direct site keeps: ROUNDS blocks of SIZE bytes
SITES = {"site_new": 4096, "site_new_array": 8192, "site_make_unique": 4096}
RUST_SOURCE = os.path.join(HERE, "rust", "sites.rs")
# rust/sites.rs: Box::new of 4 KiB, Vec::with_capacity(8192), a Vec<u32>
# grown by push to 1024 (RawVec's growth: alloc::raw_vec is dropped)
RUST_SITES = {"sites::sites::boxed": 4096, "sites::sites::with_capacity": 8192,
              "sites::sites::grown": 4096}
# Cargo's `debug` settings as rustc's -C debuginfo
RUST_DEBUG = {"line-tables-only": "line-tables-only", "limited": "1", "true": "2"}


def five_sigma(size, n):
    """5 standard deviations of the estimate of n blocks of `size` bytes,
    relative (test_run.py's estimator variance)."""
    p = 1 - math.exp(-size / INTERVAL)
    return 5 * math.sqrt((1 - p) / (n * p))


class AllocSites(TempDirTest):
    @classmethod
    def setUpClass(cls):
        cls.bin = tempfile.mkdtemp(prefix="mimprof-sites-")
        cls.builds = {}
        for cxx in ("g++", "clang++"):
            if shutil.which(cxx):
                exe = os.path.join(cls.bin, "five-" + cxx)
                subprocess.run([cxx, "-O2", "-g", SOURCE, "-o", exe], check=True, timeout=300)
                cls.builds[cxx] = exe

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.bin, ignore_errors=True)

    def run_five(self, exe, *opts, out=None):
        out = out or self.path("out")
        r = subprocess.run([os.environ["MIMPROF"], "run", "-q", "-i", str(INTERVAL), "-e", "0",
                            "-o", out, *opts, "--", exe, str(ROUNDS)],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("%d rounds" % ROUNDS, r.stdout)
        files = sorted(glob.glob(os.path.join(out, "heap.*[0-9].pb.gz")))
        self.assertEqual(len(files), 1, files)
        return files[0]

    def flat(self, path):
        """{function: flat inuse_space} as mimprof top shows it."""
        rows = parse_top(mimprof("top", path, "-n", "0", "-t", "inuse_space", check=True).stdout)
        return {r[5]: r[0] for r in rows}

    def check_sites(self, flat, where, sites=SITES):
        for site, size in sites.items():
            want = ROUNDS * size
            got = flat.get(site, 0)
            # a grown Vec's last capacity is `size`; the smaller buffers it
            # went through are freed
            self.assertLess(abs(got - want) / want, five_sigma(size, ROUNDS),
                            "%s: %s flat %d, kept %d: %s" % (where, site, got, want, flat))
        self.assertEqual(flat.get("operator new", 0), 0, "%s: %s" % (where, flat))
        self.assertEqual(flat.get("operator new[]", 0), 0, "%s: %s" % (where, flat))

    def test_sites_are_leaves(self):
        for cxx, exe in self.builds.items():
            for mode in ("functions", "lines"):
                path = self.run_five(exe, "-s", mode, out=self.path("%s-%s" % (cxx, mode)))
                self.check_sites(self.flat(path), "%s %s" % (cxx, mode))
                prof = decode(path)
                self.assertIn("operator new", prof["drop_frames"])
                # no stack goes below a site into the allocator
                for frames, _, _, _ in prof["samples"]:
                    self.assertNotEqual(frames[0], "operator new", frames)

    def rust_build(self, debug):
        rustc = os.environ.get("RUSTC") or shutil.which("rustc")
        if rustc is None:
            self.skipTest("no rustc")
        exe = os.path.join(self.bin, "sites-rs-" + debug)
        if not os.path.exists(exe):
            subprocess.run([rustc, "-O", "-C", "debuginfo=" + RUST_DEBUG[debug], "-C",
                            "symbol-mangling-version=v0", RUST_SOURCE, "-o", exe],
                           check=True, timeout=300)
        return exe

    def test_rust_sites_are_leaves(self):
        """Box::new, Vec::with_capacity and a Vec's growth (RawVec dropped)
        are their functions' memory, in functions mode at every debug
        level and in lines mode where DWARF names the inlined frames
        (limited, true): there the grown Vec's memory is its inlined
        Vec::push_mut (the container's own operation, as C++'s
        _M_realloc_insert), inside sites::sites::grown. With
        line-tables-only, rustc writes short DWARF names only: the
        physical frames are qualified from the ELF symbol (sites::main,
        not main), the inlined std frames cannot be."""
        push = "<alloc::vec::Vec<u32>>::push_mut"
        for debug in RUST_DEBUG:
            exe = self.rust_build(debug)
            modes = ("functions", "lines") if debug != "line-tables-only" else ("functions",)
            for mode in modes:
                path = self.run_five(exe, "-s", mode, out=self.path("rs-%s-%s" % (debug, mode)))
                flat = self.flat(path)
                where = "rust %s %s" % (debug, mode)
                sites = dict(RUST_SITES)
                if mode == "lines":
                    sites[push] = sites.pop("sites::sites::grown")
                self.check_sites(flat, where, sites)
                leaves = {r for r in flat if flat[r] > 0}
                self.assertFalse([n for n in leaves if n.startswith(
                    ("alloc::", "<alloc::alloc", "<alloc::raw_vec", "std::alloc", "__rust"))],
                    "%s: %s" % (where, flat))
                if mode == "lines":
                    # the inline chain, as addr2line -i gives it
                    chains = [[n for n, _, _ in loc["lines"]] for _, _, _, locs
                              in decode(path)["samples"] for loc in locs[:1]]
                    self.assertIn([push, "<alloc::vec::Vec<u32>>::push", "sites::sites::grown"],
                                  chains, where)
        path = self.run_five(self.rust_build("line-tables-only"), "-s", "lines",
                             out=self.path("rs-lto-lines"))
        names = {f["name"] for f in decode(path)["functions"].values()}
        self.assertIn("sites::main", names)
        self.assertIn("sites::sites::boxed", names)
        self.assertNotIn("boxed", names)

    def test_go_pprof_top_agrees(self):
        go = shutil.which("go")
        if go is None:
            self.skipTest("no go")
        path = self.run_five(self.builds["g++"], "-s", "lines")
        r = subprocess.run([go, "tool", "pprof", "-top", "-nodefraction=0",
                            "-sample_index=inuse_space", "-unit=B", path], capture_output=True,
                           text=True, env=go_env(self.tmp), timeout=600)
        self.assertEqual(r.returncode, 0, r.stderr)
        theirs = {}
        for line in r.stdout.splitlines():
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[1].endswith("%") and parts[4].endswith("%"):
                theirs[parts[5].removesuffix(" (inline)")] = int(parts[0].removesuffix("B"))
        self.check_sites(theirs, "go tool pprof")
        ours = self.flat(path)
        for site in SITES:  # ours as top prints it: 3 significant digits
            self.assertAlmostEqual(theirs[site], ours[site], delta=ours[site] / 100,
                                   msg=r.stdout)

    def test_keep_alloc_frames_keeps_operator_new(self):
        flat = self.flat(self.run_five(self.builds["g++"], "--keep-alloc-frames"))
        self.assertGreater(flat.get("operator new", 0), 0, flat)
        for site in SITES:
            self.assertEqual(flat.get(site, 0), 0, flat)

    def test_drop_frames_adds_the_users(self):
        path = self.run_five(self.builds["g++"], "--drop-frames", "site_new_array|site_make_.*")
        flat = self.flat(path)
        self.assertEqual(flat.get("site_new_array", 0), 0, flat)
        self.assertEqual(flat.get("site_make_unique", 0), 0, flat)
        self.assertGreater(flat.get("site_new", 0), 0, flat)
        self.assertGreater(flat.get("main", 0), ROUNDS * (8192 + 4096) / 2, flat)
        prof = decode(path)
        self.assertTrue(prof["drop_frames"].endswith("|site_new_array|site_make_.*"),
                        prof["drop_frames"])

    def test_bad_pattern_refused_before_the_program(self):
        marker = self.path("ran")
        r = subprocess.run([os.environ["MIMPROF"], "run", "-q", "--drop-frames", "site_(new",
                            "--", "touch", marker], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn("--drop-frames wants a regular expression", r.stderr)
        self.assertFalse(os.path.exists(marker))

    def test_environment_variable_of_the_bare_preload(self):
        exe = self.builds["g++"]
        env = dict(os.environ, LD_PRELOAD=os.environ["MIMPROF_PRELOAD"],
                   MIMPROF_INTERVAL=str(INTERVAL), MIMPROF_OUTPUT=self.path("bare.pb"),
                   MIMPROF_DROP_FRAMES="site_new_array")
        r = subprocess.run([exe, str(ROUNDS)], capture_output=True, text=True, timeout=300,
                           env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        flat = self.flat(self.path("bare.pb"))
        self.assertEqual(flat.get("site_new_array", 0), 0, flat)
        self.assertEqual(flat.get("operator new", 0), 0, flat)
        self.assertGreater(flat.get("site_new", 0), 0, flat)
        env["MIMPROF_DROP_FRAMES"] = "("
        r = subprocess.run([exe, "10"], capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)  # the program runs unchanged
        self.assertIn("MIMPROF_DROP_FRAMES=( is not a regular expression", r.stderr)

    @unittest.skipUnless(os.environ.get("PYROSCOPE_STANDIN") and
                         os.environ.get("MIMPROF_PYROSCOPE_LIB"), "no Pyroscope stand-in")
    def test_uploaded_leaves_are_the_sites(self):
        sys.path.insert(0, HERE)
        from test_pyroscope_run import TYPES, StandIn
        server = StandIn("--storage", "v1")
        try:
            r = subprocess.run([os.environ["MIMPROF"], "run", "-q", "--pyroscope", server.url,
                                "--app", "sites", "-i", str(INTERVAL), "--",
                                self.builds["g++"], str(ROUNDS)],
                               capture_output=True, text=True, timeout=300, cwd=self.tmp)
            self.assertEqual(r.returncode, 0, r.stderr)
            prof = server.query("SelectMergeProfile", None, profileTypeID=TYPES["inuse_space"],
                                labelSelector='{service_name="sites"}')
        finally:
            server.stop()
        strings = prof.get("stringTable", [])
        fn = {f["id"]: strings[int(f["name"])] for f in prof.get("function", [])}
        loc = {l["id"]: fn[l["line"][0]["functionId"]] for l in prof.get("location", [])}
        flat = {}
        for s in prof.get("sample", []):
            leaf = loc[s["locationId"][0]]
            flat[leaf] = flat.get(leaf, 0) + int(s["value"][0])
        self.check_sites(flat, "uploaded")


if __name__ == "__main__":
    assert os.environ.get("MIMPROF") and os.environ.get("MIMPROF_PRELOAD"), "set MIMPROF"
    unittest.main(verbosity=2)
