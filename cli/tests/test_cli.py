#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""mimprof top / flame / diff / usage on profiles with known answers
(built here with an independent encoder), and error handling.

Needs: MIMPROF (the command). No preload, no network: runs in every tree.
"""
import gzip
import os
import re
import subprocess
import unittest
import zlib

from tool_testlib import (MIMPROF, TempDirTest, heap_profile, mimprof, parse_diff, parse_top,
                          pprof_wire, rounding, svg_frames)

MiB = 1 << 20

# A request loop: the leak dominates inuse, the response dominates alloc.
KNOWN = [
    (["remember_session", "handle_request", "main"], [4000, 32 * MiB, 4000, 32 * MiB]),
    (["cache_store", "handle_request", "main"], [4000, 32 * MiB, 256, 2 * MiB]),
    (["render_response", "handle_request", "main"], [4000, 64 * MiB, 0, 0]),
    (["load_config", "main"], [1, MiB, 1, MiB]),
    ([("inlined_helper", "parse_request"), "handle_request", "main"], [64000, 8 * MiB, 0, 0]),
]


class Usage(TempDirTest):
    def test_help_and_version(self):
        r = mimprof("--help")
        self.assertEqual(r.returncode, 0)
        for cmd in ("run", "top", "flame", "diff"):
            self.assertIn(cmd, r.stdout)
            h = mimprof(cmd, "--help")
            self.assertEqual(h.returncode, 0, cmd)
            self.assertIn("usage: mimprof " + cmd, h.stdout)
        v = mimprof("--version")
        self.assertEqual(v.returncode, 0)
        self.assertRegex(v.stdout, r"^mimprof \d+\.\d+\.\d+\n$")

    def one_line_error(self, r, pattern=None):
        self.assertNotEqual(r.returncode, 0)
        self.assertLess(r.returncode, 128, "crashed: %r" % r)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertTrue(lines[0].startswith("mimprof"), lines[0])
        if pattern:
            self.assertRegex(lines[0], pattern)

    def test_bad_usage(self):
        good = self.write("p.pb", heap_profile(KNOWN).encode())
        r = mimprof()
        self.assertEqual(r.returncode, 2)
        self.one_line_error(mimprof("frobnicate"), "unknown command")
        self.one_line_error(mimprof("top", "--frob", good), "unknown option")
        self.one_line_error(mimprof("top"), "one FILE")
        self.one_line_error(mimprof("top", good, good), "one FILE")
        self.one_line_error(mimprof("top", good, "-n", "x"), "-n")
        self.one_line_error(mimprof("top", good, "--type"), "needs a value")
        self.one_line_error(mimprof("top", good, "--type", "cpu"), "no sample type 'cpu'.*inuse_space")
        self.one_line_error(mimprof("flame", good, "--width", "5"), "--width")
        self.one_line_error(mimprof("diff", good), "BASE and NEW")
        self.one_line_error(mimprof("run"), "no command")
        self.one_line_error(mimprof("run", "--interval", "lots", "--", "true"), "--interval")
        self.one_line_error(mimprof("run", "--every", "soon", "--", "true"), "--every")
        self.one_line_error(mimprof("run", "--allocator", "tcmalloc", "--", "true"), "--allocator")
        self.one_line_error(mimprof("run", "--symbolize", "all", "--", "true"), "--symbolize")

    def test_missing_and_corrupt_files(self):
        good = heap_profile(KNOWN).encode()
        gz = gzip.compress(good)
        cases = {
            "missing": None,
            "empty": b"",
            "text": b"this is not a profile\n",
            "truncated": good[: len(good) // 2],
            "truncated.gz": gz[: len(gz) // 2],
            "bad.gz": gz[:20] + bytes(64) + gz[84:],
            "gz-of-garbage": gzip.compress(b"\xff" * 100),
        }
        for name, data in cases.items():
            path = self.path(name) if data is None else self.write(name, data)
            for cmd in (["top", path], ["flame", path, "-o", self.path("x.svg")],
                        ["diff", path, path]):
                r = mimprof(*cmd)
                self.one_line_error(r)
                self.assertIn(name, r.stderr)
        self.assertFalse(os.path.exists(self.path("x.svg")), "no SVG from a bad file")

    def test_dangling_references_are_errors(self):
        b = pprof_wire.Builder(pprof_wire.HEAP_TYPES)
        b.sample([99], [1, 2, 3, 4])  # location 99 does not exist
        r = mimprof("top", self.write("dangling.pb", b.encode()))
        self.one_line_error(r, "missing location 99")
        b = pprof_wire.Builder(pprof_wire.HEAP_TYPES)
        b.sample(["f"], [1, 2])  # two values for four types
        self.one_line_error(mimprof("top", self.write("short.pb", b.encode())), "2 values")


class Top(TempDirTest):
    def expected(self, type_name):
        prof = pprof_wire.decode_profile(heap_profile(KNOWN).encode())
        return pprof_wire.per_function(prof, type_name), pprof_wire.totals(prof, type_name)

    def check_top(self, out, type_name, by_cum=False):
        want, total = self.expected(type_name)
        self.assertIn("Type: %s" % type_name, out)
        rows = parse_top(out)
        self.assertEqual({r[5] for r in rows}, {k for k, v in want.items() if v != (0, 0)})
        for flat, flat_pct, _, cum, cum_pct, name in rows:
            # values print with 3 significant decimals of their unit
            self.assertAlmostEqual(flat, want[name][0], delta=rounding(want[name][0]))
            self.assertAlmostEqual(cum, want[name][1], delta=rounding(want[name][1]))
            self.assertAlmostEqual(flat_pct, 100.0 * want[name][0] / total, delta=0.01)
            self.assertAlmostEqual(cum_pct, 100.0 * want[name][1] / total, delta=0.01)
        key = 3 if by_cum else 0
        self.assertEqual([r[key] for r in rows], sorted((r[key] for r in rows), reverse=True))
        self.assertAlmostEqual(rows[-1][2], 100.0, delta=0.02)  # sum% ends at 100
        return rows

    def test_known_profile_all_types(self):
        raw = self.write("p.pb", heap_profile(KNOWN).encode())
        gz = self.write("p.pb.gz", heap_profile(KNOWN).encode(gz=True))
        for t in ("alloc_space", "alloc_objects", "inuse_space", "inuse_objects"):
            a = mimprof("top", raw, "--type", t, "-n", "0", check=True).stdout
            b = mimprof("top", gz, "-t", t, "-n", "0", check=True).stdout
            self.assertEqual(a, b, "gzip and raw read alike")
            self.check_top(a, t)
            self.check_top(mimprof("top", raw, "--type", t, "--cum", "-n", "0", check=True).stdout,
                           t, by_cum=True)
        rows = parse_top(mimprof("top", raw, check=True).stdout)  # default type: the last
        self.assertEqual(rows[0][5], "remember_session")
        self.assertEqual(rows[0][0], 32 * MiB)
        rows = parse_top(mimprof("top", raw, "-t", "alloc_space", check=True).stdout)
        self.assertEqual(rows[0][5], "render_response")
        rows = parse_top(mimprof("top", raw, "-t", "alloc_objects", check=True).stdout)
        self.assertEqual(rows[0][5], "inlined_helper", "inlined frames are functions of their own")
        self.assertEqual(len(parse_top(mimprof("top", raw, "-n", "2", check=True).stdout)), 2)

    def test_recursion_counts_once_in_cum(self):
        b = heap_profile([(["leaf", "rec", "rec", "rec", "main"], [1, 100, 1, 100])])
        rows = {r[5]: r for r in parse_top(mimprof("top", self.write("r.pb", b.encode()),
                                                  check=True).stdout)}
        self.assertEqual(rows["rec"][3], 100)
        self.assertEqual(rows["rec"][4], 100.0)

    def test_address_only_frames_and_hostile_names(self):
        b = pprof_wire.Builder(pprof_wire.HEAP_TYPES)
        b.mapping(1, 0x400000, 0x500000, 0x1000, "/usr/lib/libthing.so.1", "abcd")
        loc = b.address_location(0x401234, mapping_id=1)
        b.sample([loc, "main"], [1, 10, 1, 10])
        b.sample(["evil\x1b[31mred\x07", "main"], [1, 20, 1, 20])
        b.sample([b"bad\xff\xfeutf8", "main"], [1, 30, 1, 30])
        out = mimprof("top", self.write("a.pb", b.encode()), check=True).stdout
        self.assertIn("libthing.so.1+0x2234", out)  # address - start + file offset
        self.assertNotIn("\x1b", out)
        self.assertNotIn("\x07", out)
        self.assertIn("evil?[31mred?", out)
        self.assertIn("bad??utf8", out)



def limited(mem_bytes):
    """preexec_fn: the address space of the child bounded (a reader that
    is not bounded fails here instead of taking the machine's memory).
    Not under AddressSanitizer or ThreadSanitizer, which reserve terabytes
    of address space at start (TSan cannot start at all under the limit;
    ASan reports an allocation beyond its own limit itself)."""
    import resource

    with open(MIMPROF, "rb") as f:
        exe = f.read()
    if b"__asan_init" in exe or b"__tsan_init" in exe:
        return None

    def f():
        resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
    return f


def sanitized():
    """Whether MIMPROF is built with AddressSanitizer or ThreadSanitizer:
    their quarantine and shadow memory make a peak RSS not the reader's."""
    with open(MIMPROF, "rb") as f:
        exe = f.read()
    return b"__asan_init" in exe or b"__tsan_init" in exe


def peak_rss(args, env=None):
    """(exit status, stderr, peak RSS in bytes) of `mimprof ARGS`, the
    peak from the kernel's account of that child alone (wait4)."""
    import tempfile
    with open(os.devnull, "wb") as null, tempfile.TemporaryFile() as err:
        p = subprocess.Popen([MIMPROF, *args], stdout=null, stderr=err, stdin=null,
                             env=dict(os.environ, **(env or {})))
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read().decode(errors="replace")
    return p.returncode, text, ru.ru_maxrss * 1024


def gzip_bomb(path, size=1 << 30):
    """A gzip file of `size` zero bytes (about 1 MiB on disk)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(1 << 20)
    with open(path, "wb") as f:
        for _ in range(size >> 20):
            f.write(z.compress(block))
        f.write(z.flush())
    return path


class ReadersWithinMemory(TempDirTest):
    """Every reader (top, flame, diff, report, image) stays within 256 MiB
    of memory on any input: a 1 GiB gzip bomb and /dev/zero stop at the
    readers' bound (MIMPROF_READ_LIMIT), with a clear error. The peak is
    the kernel's (getrusage of the child), not a timing."""

    CAP = 256 << 20

    @classmethod
    def setUpClass(cls):
        import tempfile
        cls.dir = tempfile.mkdtemp(prefix="mimprof-bomb-")
        cls.bomb = gzip_bomb(os.path.join(cls.dir, "heap.999991.0.pb.gz"))
        cls.good = os.path.join(cls.dir, "heap.999990.0.pb.gz")
        with open(cls.good, "wb") as f:
            f.write(gzip.compress(heap_profile(KNOWN).encode()))

    @classmethod
    def tearDownClass(cls):
        import shutil
        shutil.rmtree(cls.dir, ignore_errors=True)

    def refused(self, *args):
        status, err, peak = peak_rss([str(a) for a in args])
        self.assertGreater(status, 0, (args, err))  # an error, not a signal
        self.assertRegex(err, r"limit of \d+ (MiB|bytes)", (args, err))
        if not sanitized():
            self.assertLessEqual(peak, self.CAP, (args, peak >> 20))
        return err, peak

    def test_bomb(self):
        peaks = {}
        for name, args in [("top", ["top", self.bomb]),
                           ("flame", ["flame", "-o", self.path("f.svg"), self.bomb]),
                           ("diff", ["diff", self.good, self.bomb]),
                           ("image", ["image", "info", self.bomb])]:
            if name == "image":
                status, err, peak = peak_rss(args)
                self.assertGreater(status, 0, err)
                if not sanitized():
                    self.assertLessEqual(peak, self.CAP, (args, peak >> 20))
            else:
                _, peak = self.refused(*args)
            peaks[name] = peak >> 20
        print("peak RSS (MiB) on a 1 GiB gzip bomb:", peaks)

    def test_dev_zero(self):
        peaks = {}
        for name, args in [("top", ["top", "/dev/zero"]),
                           ("flame", ["flame", "-o", self.path("f.svg"), "/dev/zero"]),
                           ("diff", ["diff", self.good, "/dev/zero"]),
                           ("report", ["report", "-o", self.path("r.html"), "/dev/zero"]),
                           ("image", ["image", "info", "/dev/zero"])]:
            _, peak = self.refused(*args)
            peaks[name] = peak >> 20
        print("peak RSS (MiB) on /dev/zero:", peaks)

    def test_report_dir_names_the_bomb(self):
        # the bomb is another process's file than the one shown: it is
        # still named on the page and on stderr
        page = self.path("r.html")
        status, err, peak = peak_rss(["report", "-o", page, self.dir])
        self.assertEqual(status, 0, err)
        if not sanitized():
            self.assertLessEqual(peak, self.CAP, peak >> 20)
        self.assertIn("skipped %s" % self.bomb, err)
        with open(page) as f:
            html = f.read()
        self.assertIn("heap.999991.0.pb.gz", html)
        print("peak RSS (MiB) of report DIR with a bomb:", peak >> 20)

    def test_the_bound_is_a_setting(self):
        # 64 KiB once inflated: refused under 16k, read under 1m
        b = heap_profile([(["f%d" % i, "main"], [1, 1, 1, 1]) for i in range(4000)])
        data = b.encode()
        self.assertGreater(len(data), 16 << 10)
        path = self.write("big.pb.gz", gzip.compress(data))
        status, err, _ = peak_rss(["top", path], env={"MIMPROF_READ_LIMIT": "16k"})
        self.assertEqual(status, 1, err)
        self.assertIn("MIMPROF_READ_LIMIT", err)
        status, err, _ = peak_rss(["top", path], env={"MIMPROF_READ_LIMIT": "1m"})
        self.assertEqual(status, 0, err)
        status, err, _ = peak_rss(["top", path], env={"MIMPROF_READ_LIMIT": "junk"})
        self.assertEqual(status, 0, err)
        self.assertIn("MIMPROF_READ_LIMIT=junk is not a size", err)


class ReconciliationTerms(TempDirTest):
    """`mimprof top`'s reconciliation prints no negative term: where the
    estimated live heap exceeds the resident figure (the sampled estimate
    has its tolerance; blocks not written are not resident), the excess
    and the estimate's standard deviation are said instead."""

    def profile(self, comments):
        b = pprof_wire.Builder(pprof_wire.HEAP_TYPES, ("space", "bytes"), 524288)
        b.sample(["main"], [1, 8 * MiB, 1, 8 * MiB])
        ids = [b.s(c) for c in comments]
        data = b.encode() + b"".join(pprof_wire.pb.f_varint(13, i) for i in ids)
        return self.write("recon.pb", data)

    def head(self, comments):
        out = mimprof("top", self.profile(comments), check=True).stdout
        return [l for l in out.splitlines() if l.startswith("memory ")]

    def test_estimate_above_the_allocators_resident_bytes(self):
        # as a mimprof report writes them (profiling/src/reconcile.c), with
        # the live heap estimate 1065961 bytes above the allocator's resident
        head = self.head([
            "memory rss: 12000000 bytes (the process's resident set)",
            "memory allocator: mimalloc committed=20000000 resident=9000000 (bytes)",
            "memory live heap: 8388608 bytes (estimated: the sum of inuse_space)",
            "memory profiler: 1677353 bytes (live table, stacks, thread records, symbol data)",
            "memory unexplained: 1934039 bytes = rss - live heap - profiler",
            "memory unexplained = allocator slack -1065961 (allocator resident - live heap - "
            "profiler) + outside the allocator 3000000 (rss - allocator resident)",
            "memory allocator slack below zero: the estimated live heap and the profiler exceed "
            "the allocator's resident bytes by 1065961 (blocks not written yet are not "
            "resident; the estimate has its tolerance)"])
        text = "\n".join(head)
        self.assertIsNone(re.search(r"(?<![\w=])-\d", text), text)
        self.assertIn("memory rss: 12000000 bytes", text)
        self.assertIn("memory unexplained: 3000000 bytes = rss - allocator resident", text)
        self.assertIn("exceed the allocator's resident bytes by 1065961 bytes", text)
        # sqrt(8388608 x 524288)
        self.assertIn("standard deviation is at most 2097152 bytes", text)
        self.assertIn("memory unexplained = allocator slack 0 ", text)
        self.assertIn("outside the allocator 3000000 ", text)

    def test_estimate_above_rss_without_an_allocator_figure(self):
        head = self.head([
            "memory rss: 9000000 bytes (the process's resident set)",
            "memory allocator: no statistics",
            "memory live heap: 8388608 bytes (estimated: the sum of inuse_space)",
            "memory profiler: 1000000 bytes (live table, stacks, thread records, symbol data)",
            "memory unexplained: -388608 bytes = rss - live heap - profiler"])
        text = "\n".join(head)
        self.assertIsNone(re.search(r"(?<![\w=])-\d", text), text)
        self.assertIn("memory unexplained: 0 bytes (the estimated live heap and the profiler "
                      "exceed rss by 388608 bytes", text)

    def test_terms_as_written_when_none_is_negative(self):
        head = self.head([
            "memory rss: 20000000 bytes (the process's resident set)",
            "memory allocator: jemalloc resident=15000000 (bytes)",
            "memory live heap: 8388608 bytes (estimated: the sum of inuse_space)",
            "memory profiler: 1000000 bytes (live table, stacks, thread records, symbol data)",
            "memory unexplained: 10611392 bytes = rss - live heap - profiler",
            "memory unexplained = allocator slack 5611392 (allocator resident - live heap - "
            "profiler) + outside the allocator 5000000 (rss - allocator resident)"])
        self.assertEqual(head[4], "memory unexplained: 10611392 bytes = rss - live heap - profiler")
        self.assertEqual(head[5], "memory unexplained = allocator slack 5611392 (allocator resident "
                         "- live heap - profiler) + outside the allocator 5000000 (rss - allocator "
                         "resident)")


class BoundedReaders(TempDirTest):
    """Every reader bounds what it decodes, with a clear error."""

    def test_expanding_pprof_is_refused_before_it_is_unpacked(self):
        # 20 million empty samples: 40 MB of wire data, ~40 KB gzipped,
        # ~2.5 GB once protobuf-c has unpacked them.
        head = heap_profile([(["main"], [1, 1, 1, 1])]).encode()
        data = gzip.compress(head + b"\x12\x00" * 20_000_000, 9)
        self.assertLess(len(data), 200_000)
        path = self.write("expand.pb.gz", data)
        r = mimprof("top", path, preexec_fn=limited(1 << 30))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertRegex(r.stderr, r"limit of \d+ MiB")
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)

    def test_image_info_of_an_endless_file_is_refused(self):
        r = mimprof("image", "info", "/dev/zero", preexec_fn=limited(3 << 29), timeout=120)
        self.assertNotEqual(r.returncode, 0)
        self.assertGreater(r.returncode, 0, "an error, not a signal")
        self.assertRegex(r.stderr, r"larger than the limit of \d+ MiB")

    def test_totals_saturate_instead_of_wrapping(self):
        big = 6 * 10 ** 18  # two of them exceed INT64_MAX
        b = heap_profile([(["a", "main"], [1, big, 1, big]), (["b", "main"], [1, big, 1, big])])
        out = mimprof("top", self.write("big.pb", b.encode()), check=True).stdout
        total = next(l for l in out.splitlines() if "Total" in l)
        self.assertNotIn("-", total, total)
        rows = parse_top(out)
        # shares of the saturated total (INT64_MAX): positive, and equal
        self.assertTrue(all(0 <= r[1] <= 100 and 0 < r[2] <= 100 for r in rows), rows)
        self.assertEqual(rows[0][1], rows[1][1])


class Flame(TempDirTest):
    def test_widths_proportional_to_values(self):
        src = self.write("p.pb.gz", heap_profile(KNOWN).encode(gz=True))
        for t in ("inuse_space", "alloc_space", "alloc_objects"):
            svg = self.path(t + ".svg")
            mimprof("flame", src, "--type", t, "-o", svg, check=True)
            root, frames = svg_frames(svg)
            width = float(root.get("width"))
            usable = width - 20
            total = pprof_wire.totals(pprof_wire.decode_profile(heap_profile(KNOWN).encode()), t)
            all_frame = [f for f in frames if f["d"] == 0]
            self.assertEqual(len(all_frame), 1)
            self.assertEqual(all_frame[0]["v"], total)
            self.assertAlmostEqual(all_frame[0]["w"], usable, delta=0.01)
            for f in frames:
                # width in px = value / total * usable (2 decimals in the file)
                self.assertAlmostEqual(f["w"], f["v"] / total * usable, delta=0.006, msg=f["name"])
                self.assertAlmostEqual(f["fw"], f["v"] / total, delta=1e-8)
                self.assertAlmostEqual(f["x"], 10 + f["fx"] * usable, delta=0.006)
            # children sit inside their parent and do not overlap
            by_depth = {}
            for f in frames:
                by_depth.setdefault(f["d"], []).append(f)
            for d, fs in by_depth.items():
                fs.sort(key=lambda f: f["x"])
                for a, b in zip(fs, fs[1:]):
                    self.assertLessEqual(a["x"] + a["w"], b["x"] + 0.011)
            want = pprof_wire.per_function(pprof_wire.decode_profile(
                heap_profile(KNOWN).encode()), t)
            for f in frames:
                if f["d"] > 0 and not f["merged"]:
                    self.assertLessEqual(f["v"], want[f["name"]][1])

    def test_self_contained_interactive_and_stable_colours(self):
        src = self.write("p.pb", heap_profile(KNOWN).encode())
        a, b = self.path("a.svg"), self.path("b.svg")
        mimprof("flame", src, "-o", a, check=True)
        mimprof("flame", src, "-t", "alloc_space", "-o", b, "--title", "A <b>title</b> & more",
                check=True)
        with open(a, encoding="utf-8") as f:
            text = f.read()
        # nothing fetched from elsewhere
        urls = re.findall(r"(?:href|src)\s*=|url\(|@import|https?://[^\"' ]+", text)
        self.assertEqual([u for u in urls if not u.startswith("http://www.w3.org/")], [])
        self.assertIn("<script>", text)
        self.assertIn("<style>", text)
        for feature in ("function zoom", "function find", 'id="search"', "<title>"):
            self.assertIn(feature, text)
        _, fa = svg_frames(a)
        root_b, fb = svg_frames(b)
        self.assertIn("A <b>title</b> & more", "".join(root_b.itertext()))
        colours_a = {f["name"]: f["fill"] for f in fa}
        for f in fb:
            if f["name"] in colours_a:
                self.assertEqual(f["fill"], colours_a[f["name"]], "colour stable per name")
        leak = next(f for f in fa if f["name"] == "remember_session")
        self.assertRegex(leak["title"], r"^remember_session \(32\.00MiB, [0-9.]+%\)$")
        self.assertEqual(leak["text"], "remember_session")
        self.assertEqual(mimprof("flame", src, "-o", "-", check=True).stdout, text)

    def test_large_profile_merges_tiny_frames(self):
        b = pprof_wire.Builder(pprof_wire.HEAP_TYPES)
        stacks = 20000
        for i in range(stacks):
            b.sample(["leaf_%d" % i, "mid_%d" % (i % 50), "main"], [1, 100, 1, 100])
        b.sample(["big", "main"], [1, 100 * stacks, 1, 100 * stacks])
        src = self.write("big.pb.gz", b.encode(gz=True))
        svg = self.path("big.svg")
        # no time limit here: speed is measured by benchmarks, not asserted
        mimprof("flame", src, "-o", svg, check=True)
        _, frames = svg_frames(svg)
        self.assertLess(len(frames), 300, "tiny frames merged")
        self.assertLess(os.path.getsize(svg), 300_000)
        merged = [f for f in frames if f["merged"]]
        self.assertTrue(merged)
        self.assertTrue(all(re.fullmatch(r"\[\d+ frames merged\]", f["name"]) for f in merged))
        total = sum(f["v"] for f in frames if f["d"] == 2)
        self.assertEqual(total, 2 * 100 * stacks, "merging keeps the values")
        self.assertTrue(any(f["name"] == "big" for f in frames))

    def test_min_width_decides_what_is_merged(self):
        b = pprof_wire.Builder(pprof_wire.HEAP_TYPES)
        for i in range(200):
            b.sample(["leaf_%d" % i, "main"], [1, 100, 1, 100])
        b.sample(["big", "main"], [1, 100 * 200, 1, 100 * 200])
        src = self.write("mw.pb", b.encode())
        counts = {}
        for mw in ("0.01", "20"):
            svg = self.path("mw%s.svg" % mw)
            mimprof("flame", src, "--min-width", mw, "-o", svg, check=True)
            _, frames = svg_frames(svg)
            counts[mw] = (len(frames), sum(f["merged"] for f in frames))
        self.assertEqual(counts["0.01"][1], 0, "nothing merged at 0.01 px")
        self.assertGreater(counts["0.01"][0], 200)
        self.assertGreater(counts["20"][1], 0, "tiny frames merged at 20 px")
        self.assertLess(counts["20"][0], 50)

    def test_hostile_names_make_valid_xml(self):
        b = pprof_wire.Builder(pprof_wire.HEAP_TYPES)
        b.sample(["a<b>&\"c'</text>]]>", "main"], [1, 10, 1, 10])
        b.sample([b"bad\xff\xfe\x01", "main"], [1, 10, 1, 10])
        svg = self.path("h.svg")
        mimprof("flame", self.write("h.pb", b.encode()), "-o", svg, check=True)
        _, frames = svg_frames(svg)  # parses, or fails the test
        names = {f["name"] for f in frames}
        self.assertIn("a<b>&\"c'</text>]]>", names)
        self.assertIn("bad???", names)


class Diff(TempDirTest):
    def test_finds_the_leak(self):
        base = [(s, [v[0], v[1], v[2], v[3] // 8 if s[0] == "remember_session" else v[3]])
                for s, v in KNOWN]
        new = [(s, list(v)) for s, v in KNOWN]
        new[1] = (new[1][0], [0, 0, 128, MiB])  # the cache shrank
        a = self.write("a.pb", heap_profile(base).encode())
        b = self.write("b.pb.gz", heap_profile(new).encode(gz=True))
        out = mimprof("diff", a, b, check=True).stdout
        self.assertIn("Type: inuse_space", out)
        d = parse_diff(out)
        self.assertEqual(d["grew"][0][4], "remember_session")
        self.assertEqual(d["grew"][0][0], 28 * MiB)
        self.assertEqual(d["grew"][0][2], 4 * MiB)
        self.assertEqual(d["grew"][0][3], 32 * MiB)
        self.assertEqual([r[4] for r in d["shrank"]], ["cache_store"])
        self.assertEqual(d["shrank"][0][0], -MiB)
        self.assertRegex(out, r"Total: 35\.00MiB -> 34\.[0-9]+MiB|Total: 7\.00MiB")
        cum = parse_diff(mimprof("diff", a, b, "--cum", check=True).stdout)
        self.assertEqual(cum["grew"][0][4], "remember_session")
        self.assertEqual(cum["grew"][0][1], 28 * MiB)
        callers = {r[4]: r[1] for r in cum["grew"][1:]}
        self.assertEqual(callers, {"handle_request": 27 * MiB, "main": 27 * MiB})
        same = parse_diff(mimprof("diff", a, a, check=True).stdout)
        self.assertEqual(same, {"grew": [], "shrank": []})
        alloc = parse_diff(mimprof("diff", a, b, "-t", "alloc_space", check=True).stdout)
        self.assertEqual([r[4] for r in alloc["shrank"]], ["cache_store"])

    def test_unit_mismatch_is_an_error(self):
        a = pprof_wire.Builder([("samples", "count"), ("cpu", "nanoseconds")])
        a.sample(["f"], [1, 10])
        b = pprof_wire.Builder([("samples", "count"), ("cpu", "bytes")])
        b.sample(["f"], [1, 10])
        r = mimprof("diff", self.write("a.pb", a.encode()), self.write("b.pb", b.encode()),
                    "-t", "cpu")
        self.assertEqual(r.returncode, 1)
        self.assertIn("different units", r.stderr)


# Linkage names as another tool (or a file written without a demangler)
# leaves them, and the human names mimprof gives them.
PUT_STR = "_ZN4shop5CacheINS_4ItemEE3putERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"
PUT_INT = "_ZN4shop5CacheINS_4ItemEE3putEi"
LAMBDA = "_ZZN4shop4fillEmENKUlmE_clEm"
MANGLED = [
    (["_Znwm", PUT_STR, "main"], [10, 10 * MiB, 10, 10 * MiB]),
    (["_Znwm", PUT_INT, "main"], [10, 6 * MiB, 10, 6 * MiB]),
    (["_Znam", LAMBDA, "_ZN4shop4fillEm", "main"], [5, 2 * MiB, 5, 2 * MiB]),
    (["malloc", "_ZN12_GLOBAL__N_17scratchEm", "main"], [1, MiB, 1, MiB]),
]
HUMAN = {
    "_Znwm": "operator new", "_Znam": "operator new[]",
    PUT_STR: "shop::Cache<shop::Item>::put", PUT_INT: "shop::Cache<shop::Item>::put",
    LAMBDA: "shop::fill(unsigned long)::{lambda(unsigned long)#1}::operator()",
    "_ZN4shop4fillEm": "shop::fill", "_ZN12_GLOBAL__N_17scratchEm": "(anonymous namespace)::scratch",
    "main": "main", "malloc": "malloc",
}


class Names(TempDirTest):
    """Names still mangled in a file are shown demangled (mp_prof_demangle's
    rule); --no-demangle shows the linkage names as written."""

    def test_top_demangles_and_merges_overloads(self):
        f = self.write("p.pb", heap_profile(MANGLED).encode())
        rows = {r[5]: r for r in parse_top(mimprof("top", f, "-n", "0", check=True).stdout)}
        self.assertEqual(set(rows), set(HUMAN.values()))
        # the two overloads of put are one row: 10 + 6 MiB
        self.assertEqual(rows["shop::Cache<shop::Item>::put"][3], 16 * MiB)
        self.assertEqual(rows["operator new"][0], 16 * MiB)
        raw = parse_top(mimprof("top", f, "-n", "0", "--no-demangle", check=True).stdout)
        self.assertEqual({r[5] for r in raw}, set(HUMAN))

    def test_no_demangle_shows_the_system_name_of_a_demangled_file(self):
        b = pprof_wire.Builder(pprof_wire.HEAP_TYPES, ("space", "bytes"), 524288)
        b.system_names["shop::Cache<shop::Item>::put"] = PUT_STR
        b.sample(["shop::Cache<shop::Item>::put", "main"], [1, MiB, 1, MiB])
        f = self.write("p.pb", b.encode())
        names = {r[5] for r in parse_top(mimprof("top", f, check=True).stdout)}
        self.assertEqual(names, {"shop::Cache<shop::Item>::put", "main"})
        raw = {r[5] for r in parse_top(mimprof("top", f, "--no-demangle", check=True).stdout)}
        self.assertEqual(raw, {PUT_STR, "main"})

    def test_flame_and_diff_demangle(self):
        f = self.write("p.pb", heap_profile(MANGLED).encode())
        svg = self.path("f.svg")
        mimprof("flame", f, "-o", svg, check=True)
        names = {fr["name"] for fr in svg_frames(svg)[1]}
        self.assertIn("shop::Cache<shop::Item>::put", names)
        self.assertIn("shop::fill(unsigned long)::{lambda(unsigned long)#1}::operator()", names)
        self.assertFalse([n for n in names if n.startswith("_Z")], names)
        mimprof("flame", f, "-o", svg, "--no-demangle", check=True)
        self.assertIn(PUT_STR, {fr["name"] for fr in svg_frames(svg)[1]})
        base = self.write("a.pb", heap_profile(MANGLED[1:]).encode())
        d = parse_diff(mimprof("diff", base, f, check=True).stdout)
        self.assertEqual([r[4] for r in d["grew"]], ["operator new"])
        cum = parse_diff(mimprof("diff", base, f, "--cum", check=True).stdout)
        self.assertIn("shop::Cache<shop::Item>::put", [r[4] for r in cum["grew"]])
        raw = parse_diff(mimprof("diff", base, f, "--cum", "--no-demangle", check=True).stdout)
        self.assertIn(PUT_STR, [r[4] for r in raw["grew"]])
        self.assertIn("_Znwm", [r[4] for r in raw["grew"]])


if __name__ == "__main__":
    assert os.path.exists(MIMPROF), "set MIMPROF"
    unittest.main(verbosity=2)
