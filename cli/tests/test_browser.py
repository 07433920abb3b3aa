#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The flame graph in a real browser: headless Chromium renders a non-blank
image in which the top function's frame colour appears, its name is in the
DOM, the inline script ran (data-ready), and the zoom and search work
(driven through the URL fragment #zoom=NAME&search=REGEX).

Needs: MIMPROF, CHROMIUM (the browser executable). Registered behind the
`browser_tests` feature; skips (77) when CHROMIUM is unset.
"""
import os
import re
import struct
import subprocess
import sys
import unittest
import zlib

from tool_testlib import TempDirTest, heap_profile, mimprof, svg_frames, SVG_NS

CHROMIUM = os.environ.get("CHROMIUM", "")
MiB = 1 << 20

STACKS = [
    (["remember_session", "handle_request", "main"], [4000, 32 * MiB, 4000, 32 * MiB]),
    (["cache_store", "handle_request", "main"], [4000, 32 * MiB, 256, 2 * MiB]),
    (["load_config", "main"], [1, MiB, 1, MiB]),
]


def read_png(path):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit RGB/RGBA PNG."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    i, idat, hdr = 8, b"", None
    while i < len(data):
        n, kind = struct.unpack(">I4s", data[i:i + 8])
        body = data[i + 8:i + 8 + n]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        i += 12 + n
    w, h, depth, ctype, _, _, interlace = hdr
    assert depth == 8 and ctype in (2, 6) and interlace == 0, hdr
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        ft = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if ft == 1:
                line[x] = (line[x] + a) & 0xFF
            elif ft == 2:
                line[x] = (line[x] + b) & 0xFF
            elif ft == 3:
                line[x] = (line[x] + (a + b) // 2) & 0xFF
            elif ft == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pr = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[x] = (line[x] + pr) & 0xFF
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, bpp)])
        prev = line
    return w, h, rows


class Browser(TempDirTest):
    def chromium(self, url, *mode):
        profile = self.path("chromium-profile-%d" % len(os.listdir(self.tmp)))
        args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run", "--user-data-dir=" + profile,
                "--window-size=1200,400", *mode, url]
        r = subprocess.run(args, capture_output=True, timeout=90, text=True, errors="replace")
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        return r.stdout

    def setUp(self):
        super().setUp()
        self.svg = self.path("flame.svg")
        mimprof("flame", self.write("p.pb.gz", heap_profile(STACKS).encode(gz=True)),
                "-o", self.svg, check=True)
        self.url = "file://" + self.svg

    def test_renders_non_blank_with_the_top_function(self):
        png = self.path("shot.png")
        self.chromium(self.url, "--screenshot=" + png)
        w, h, rows = read_png(png)
        self.assertEqual((w, h), (1200, 400))
        pixels = [p for row in rows for p in row]
        background = max(set(pixels[::97]), key=pixels[::97].count)
        busy = sum(1 for p in pixels if p != background) / len(pixels)
        self.assertGreater(busy, 0.05, "the image is (almost) blank")
        self.assertGreater(len(set(pixels[::13])), 10, "too few colours")
        _, frames = svg_frames(self.svg)
        top = max((f for f in frames if f["d"] > 0), key=lambda f: (f["v"], -f["d"]))
        leak = next(f for f in frames if f["name"] == "remember_session")
        rgb = tuple(int(c) for c in re.findall(r"\d+", leak["fill"]))
        y = int(leak["y"] + 4)
        x0, x1 = int(leak["x"] + 2), int(leak["x"] + leak["w"] - 2)
        row = rows[y]
        share = sum(1 for x in range(x0, x1) if row[x] == rgb) / (x1 - x0)
        self.assertGreater(share, 0.5, "the leak's frame is drawn in its colour (%r)" % (rgb,))
        dom = self.chromium(self.url, "--dump-dom")
        self.assertIn('data-ready="1"', dom, "the inline script ran")
        self.assertIn(top["name"], dom)
        self.assertRegex(dom, r">remember_session</text>")

    def test_zoom_and_search(self):
        dom = self.chromium(self.url + "#zoom=handle_request&search=^remember", "--dump-dom")
        self.assertIn('data-ready="1"', dom)
        # handle_request now spans the width, load_config is hidden, the
        # leak is highlighted and the match share shown
        groups = re.findall(r'<g class="f[^"]*"[^>]*>.*?</g>', dom, re.S)
        self.assertTrue(groups)
        by_name = {}
        for g in groups:
            name = re.search(r"<title>(.*?) \(", g).group(1)
            by_name[name] = g
        self.assertIn('display: none', by_name["load_config"])
        width = float(re.search(r'<rect[^>]* width="([0-9.]+)"', by_name["handle_request"]).group(1))
        self.assertAlmostEqual(width, 1180.0, delta=0.01)
        self.assertIn('fill="rgb(230,0,230)"', by_name["remember_session"])
        self.assertNotIn('fill="rgb(230,0,230)"', by_name["cache_store"])
        self.assertRegex(dom, r"Matched: 9[0-9]\.[0-9]{2}%")

    def test_search_finds_demangled_cxx_names(self):
        # linkage names in the file: the flame graph shows and searches the
        # human names (shop::Cache<shop::Item>::put)
        put = "_ZN4shop5CacheINS_4ItemEE3putERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"
        stacks = [(["_Znwm", put, "main"], [1, 3 * MiB, 1, 3 * MiB]),
                  (["_Znwm", "_ZN4shop4fillEm", "main"], [1, MiB, 1, MiB])]
        svg = self.path("cxx.svg")
        mimprof("flame", self.write("cxx.pb", heap_profile(stacks).encode()), "-o", svg,
                check=True)
        for term in ("shop::Cache", "put"):
            dom = self.chromium("file://" + svg + "#search=" + term, "--dump-dom")
            self.assertIn('data-ready="1"', dom)
            groups = re.findall(r'<g class="f[^"]*"[^>]*>.*?</g>', dom, re.S)
            hits = [re.search(r"<title>(.*?) \(", g).group(1) for g in groups
                    if 'fill="rgb(230,0,230)"' in g]
            self.assertEqual(hits, ["shop::Cache&lt;shop::Item&gt;::put"], term)
            self.assertRegex(dom, r"Matched: 75\.00%")


if __name__ == "__main__":
    if not CHROMIUM:
        print("CHROMIUM not set: skipped")
        sys.exit(77)
    unittest.main(verbosity=2)
