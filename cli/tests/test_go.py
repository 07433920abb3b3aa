#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""mimprof top / diff on Go-produced pprof files: one rewritten by
`go tool pprof -proto` (Go's encoder, gzip, its own id and string order)
and a real Go runtime heap profile (runtime/pprof). Skips (77) without Go.
"""
import os
import shutil
import subprocess
import sys
import unittest

from tool_testlib import TempDirTest, go_env, heap_profile, mimprof, parse_top, pprof_wire, rounding

GO = shutil.which("go")
MiB = 1 << 20

GO_PROGRAM = r"""
package main

import (
	"os"
	"runtime"
	"runtime/pprof"
)

var keep [][]byte
var small [][]byte

//go:noinline
func leakyGrow(n int) {
	for i := 0; i < n; i++ {
		keep = append(keep, make([]byte, 64<<10))
	}
}

//go:noinline
func smallCache(n int) {
	for i := 0; i < n; i++ {
		small = append(small, make([]byte, 4<<10))
	}
}

func main() {
	runtime.MemProfileRate = 4096
	leakyGrow(256)  // 16 MiB
	smallCache(256) // 1 MiB
	runtime.GC()
	f, err := os.Create(os.Args[1])
	if err != nil {
		panic(err)
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		panic(err)
	}
	f.Close()
}
"""


class GoProduced(TempDirTest):
    def go(self, *args, **kw):
        r = subprocess.run([GO, *args], capture_output=True, env=go_env(self.tmp), timeout=120, **kw)
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
        return r.stdout

    def test_rewritten_by_go_pprof(self):
        stacks = [
            (["remember_session", "handle_request", "main"], [4000, 32 * MiB, 4000, 32 * MiB]),
            (["cache_store", "handle_request", "main"], [4000, 32 * MiB, 256, 2 * MiB]),
            (["load_config", "main"], [1, MiB, 1, MiB]),
        ]
        src = self.write("ours.pb", heap_profile(stacks).encode())
        gop = self.write("go.pb.gz", self.go("tool", "pprof", "-proto", src))
        with open(gop, "rb") as f:
            self.assertEqual(f.read(2), b"\x1f\x8b", "Go writes gzip")
        for t in ("inuse_space", "alloc_objects"):
            ours = mimprof("top", src, "-t", t, check=True).stdout
            theirs = mimprof("top", gop, "-t", t, check=True).stdout
            self.assertEqual(parse_top(ours), parse_top(theirs))
        # and Go's own reading agrees on the order
        text = self.go("tool", "pprof", "-top", "-sample_index=inuse_space", gop).decode()
        go_names = [l.split()[-1] for l in text.splitlines() if l.strip().endswith(
            ("remember_session", "cache_store", "load_config"))]
        self.assertEqual(go_names, [r[5] for r in parse_top(mimprof("top", gop, check=True).stdout)
                                    if r[0] > 0])

    def test_go_runtime_heap_profile(self):
        prog = self.write("main.go", GO_PROGRAM.encode())
        out = self.path("heap.pb.gz")
        self.go("run", prog, out)
        with open(out, "rb") as f:
            want = pprof_wire.decode_profile(f.read())
        self.assertIn(("inuse_space", "bytes"), want["types"])
        per = pprof_wire.per_function(want, "inuse_space")
        rows = parse_top(mimprof("top", out, "-t", "inuse_space", "-n", "0", check=True).stdout)
        self.assertEqual(rows[0][5], "main.leakyGrow")
        self.assertEqual(rows[1][5], "main.smallCache")
        # Go's scaled estimate of 16 MiB / 1 MiB (its sampler, not ours): loose
        self.assertAlmostEqual(rows[0][0], 16 * MiB, delta=0.25 * 16 * MiB)
        for flat, _, _, cum, _, name in rows:
            self.assertAlmostEqual(flat, per[name][0], delta=rounding(per[name][0]))
            self.assertAlmostEqual(cum, per[name][1], delta=rounding(per[name][1]))
        # the default type of a Go heap profile is its last one, inuse_space
        self.assertEqual(parse_top(mimprof("top", out, check=True).stdout)[0][5], "main.leakyGrow")
        alloc = parse_top(mimprof("top", out, "-t", "alloc_space", check=True).stdout)
        self.assertEqual(alloc[0][5], "main.leakyGrow")
        svg = self.path("go.svg")
        mimprof("flame", out, "-o", svg, check=True)
        with open(svg, encoding="utf-8") as f:
            self.assertIn("main.leakyGrow", f.read())


if __name__ == "__main__":
    if GO is None:
        print("go not found: skipped")
        sys.exit(77)
    unittest.main(verbosity=2)
