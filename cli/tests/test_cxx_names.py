#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""C++ names end to end: cxx/shop.cpp built here with g++ -O2 -g,
with g++ -O2 -g0 -rdynamic and stripped, and with clang++ -O2 -g where
clang++ is installed, profiled by `mimprof run` in both symbolize modes.
The profile's Function.name is the demangled, qualified name
(shop::Cache<shop::Item>::put, the lambda, the anonymous namespace,
operator new, inlined libstdc++ frames in `lines`), Function.system_name
the linkage name; `mimprof top` and `go tool pprof -top` show the same
names; a C program's names are untouched (name == system_name).

Needs MIMPROF, MIMPROF_PRELOAD (the run tests' gate) and MIMPROF_EXAMPLE
(the C program); go is optional (its check skips without it).
"""
import glob
import os
import shutil
import subprocess
import tempfile
import unittest

from tool_testlib import EXAMPLE, TempDirTest, go_env, mimprof, parse_top, pprof_wire

HERE = os.path.dirname(os.path.abspath(__file__))
SHOP = os.path.join(HERE, "cxx", "shop.cpp")
ROUNDS = "300"
PUT = "shop::Cache<shop::Item>::put"
LAMBDA = "shop::fill(unsigned long)::{lambda(unsigned long)#1}::operator()"
# Named in every build: what .dynsym of the stripped -rdynamic build and
# libstdc++'s own .dynsym carry (global functions; put and make_vector
# are weak template instances, fill global). (operator new[] is not on
# the stacks: libstdc++'s jumps to operator new, a tail call.)
ALWAYS = {PUT, "shop::make_vector<int>", "shop::fill", "shop::Square::describe[abi:cxx11]",
          "operator new"}
# Local functions: named only where .symtab or DWARF is there. (clang
# names a lambda of a function with internal-linkage numbering,
# shop::fill(unsigned long)::$_0::operator(); g++ as LAMBDA.)
LOCAL = {"(anonymous namespace)::scratch"}


def shown(name):
    """A name as mimprof top prints it: over 200 characters, cut to 198 and
    ".." appended."""
    return name if len(name) <= 200 else name[:198] + ".."


def build(out_dir, compiler, *flags, strip=False):
    exe = os.path.join(out_dir, "shop-%s%s" % (os.path.basename(compiler), "-stripped" if strip else ""))
    subprocess.run([compiler, "-O2", *flags, SHOP, "-o", exe], check=True, timeout=300)
    if strip:
        subprocess.run(["strip", "--strip-all", exe], check=True, timeout=60)
    return exe


class CxxNames(TempDirTest):
    @classmethod
    def setUpClass(cls):
        cls.bin = tempfile.mkdtemp(prefix="mimprof-cxx-")
        cls.builds = {"g++ -g": build(cls.bin, "g++", "-g"),
                      "g++ -g0 stripped": build(cls.bin, "g++", "-g0", "-rdynamic", strip=True)}
        if shutil.which("clang++"):
            cls.builds["clang++ -g"] = build(cls.bin, shutil.which("clang++"), "-g")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.bin, ignore_errors=True)

    def profile(self, exe, mode):
        out = self.path("out-%s-%s" % (os.path.basename(exe), mode))
        r = subprocess.run([os.environ["MIMPROF"], "run", "-q", "-i", "16k", "-s", mode, "-o", out,
                            "--", exe, ROUNDS], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "300 items, 1500 kept\n")
        files = sorted(glob.glob(os.path.join(out, "heap.*[0-9].pb.gz")))
        self.assertTrue(files, "a report was written")
        with open(files[-1], "rb") as f:
            return files[-1], pprof_wire.decode_profile(f.read())

    def names(self, prof):
        return {f["name"] for f in prof["functions"].values()}

    def check_build(self, label, exe, mode):
        path, prof = self.profile(exe, mode)
        names = self.names(prof)
        where = "%s, %s: %s" % (label, mode, sorted(names))
        self.assertTrue(ALWAYS <= names, where)
        if "stripped" not in label:
            self.assertTrue(LOCAL <= names, where)
            lambdas = [n for n in names if n.startswith("shop::fill(unsigned long)::")]
            self.assertEqual(len(lambdas), 1, where)
            self.assertTrue(lambdas[0].endswith("::operator()"), where)
            if label.startswith("g++"):
                self.assertEqual(lambdas[0], LAMBDA)
        self.assertFalse([n for n in names if n.startswith("_Z")], where)
        self.assertNotIn("put", names, where)
        for f in prof["functions"].values():
            if f["name"] == PUT:
                self.assertTrue(f["system_name"].startswith("_ZN4shop5CacheINS_4ItemEE3put"), f)
            if f["name"] == "operator new":
                self.assertEqual(f["system_name"], "_Znwm")
            if f["name"] == "main":
                self.assertEqual(f["system_name"], "main")
        if mode == "lines" and "stripped" not in label:
            # inlined libstdc++ frames are qualified like any other
            self.assertIn("std::vector<int, std::allocator<int> >::_M_default_append", names,
                          where)
        # mimprof top shows those names, not linkage names
        top = {r[5] for r in parse_top(mimprof("top", path, "-n", "0", check=True).stdout)}
        self.assertIn(PUT, top)
        self.assertFalse([n for n in top if n.startswith("_Z")], top)
        raw = {r[5] for r in parse_top(mimprof("top", path, "-n", "0", "--no-demangle",
                                               check=True).stdout)}
        self.assertTrue([n for n in raw if n.startswith("_ZN4shop5CacheINS_4ItemEE3put")], raw)
        return path

    def test_gcc_debug_info(self):
        for mode in ("functions", "lines"):
            self.check_build("g++ -g", self.builds["g++ -g"], mode)

    def test_gcc_stripped_without_debug_info(self):
        for mode in ("functions", "lines"):
            self.check_build("g++ -g0 stripped", self.builds["g++ -g0 stripped"], mode)

    def test_clang(self):
        if "clang++ -g" not in self.builds:
            self.skipTest("no clang++")
        for mode in ("functions", "lines"):
            self.check_build("clang++ -g", self.builds["clang++ -g"], mode)

    def test_go_pprof_top_agrees(self):
        go = shutil.which("go")
        if go is None:
            self.skipTest("no go")
        for mode in ("functions", "lines"):
            path = self.check_build("g++ -g", self.builds["g++ -g"], mode)
            ours = parse_top(mimprof("top", path, "-n", "0", "-t", "inuse_space",
                                     check=True).stdout)
            r = subprocess.run([go, "tool", "pprof", "-top", "-nodefraction=0",
                                "-sample_index=inuse_space", path], capture_output=True,
                               text=True, env=go_env(self.tmp), timeout=600)
            self.assertEqual(r.returncode, 0, r.stderr)
            theirs = set()
            for line in r.stdout.splitlines():
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[1].endswith("%") and parts[4].endswith("%"):
                    theirs.add(shown(parts[5].removesuffix(" (inline)")))
            self.assertEqual({row[5] for row in ours}, theirs, r.stdout)

    def test_c_program_names_untouched(self):
        out = self.path("c")
        r = subprocess.run([os.environ["MIMPROF"], "run", "-q", "-i", "16k", "-o", out, "--",
                            EXAMPLE, "--rounds", "200"], capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(sorted(glob.glob(os.path.join(out, "heap.*[0-9].pb.gz")))[-1], "rb") as f:
            prof = pprof_wire.decode_profile(f.read())
        fns = list(prof["functions"].values())
        self.assertIn("remember_session", {f["name"] for f in fns})
        for f in fns:
            self.assertEqual(f["name"], f["system_name"], f)


if __name__ == "__main__":
    assert os.environ.get("MIMPROF") and os.environ.get("MIMPROF_PRELOAD"), "set MIMPROF"
    unittest.main(verbosity=2)
