#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The page of `mimprof report` in a real browser: Debian's Chromium,
headless, driven through chromedriver (W3C WebDriver, webdriver.py). On a
synthetic run (report_synth.py): the page loads with no console error;
clicking a moment shows its flame graph, top table, ages and RSS bar;
clicking a window's peak shows the spike; "older than" keeps the old site
only; shift-clicking a second moment shows the diff and the differential
flame graph; search and zoom work. Assertions are on the DOM; a
screenshot of each state is kept in MIMPROF_ARTEFACTS (the build
directory): report-*.png. Each click's redraw time is printed (measured,
not asserted).

Needs: MIMPROF, CHROMIUM, CHROMEDRIVER. Skips (77) without the browser.
"""
import os
import sys
import tempfile
import time
import unittest

import report_synth
from tool_testlib import TempDirTest, mimprof
from webdriver import Browser, shift_click, type_into

CHROMIUM = os.environ.get("CHROMIUM", "")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "")
ARTEFACTS = os.environ.get("MIMPROF_ARTEFACTS") or tempfile.gettempdir()


class ReportPage(TempDirTest):
    def setUp(self):
        super().setUp()
        report_synth.phased_run(self.path("out"))
        self.page = self.path("report.html")
        r = mimprof("report", self.path("out"), "-o", self.page)
        self.assertEqual(r.returncode, 0, r.stderr)
        # Chromium's real binary (the /usr/bin/chromium wrapper is a shell script)
        real = "/usr/lib/chromium/chromium"
        self.b = Browser(CHROMEDRIVER, real if os.path.exists(real) else CHROMIUM, self.tmp)
        self.addCleanup(self.b.close)
        self.b.get("file://" + self.page)

    def js(self, expr, *args):
        return self.b.script("return " + expr, *args)

    def text(self, css):
        return self.js("document.querySelector(arguments[0]).textContent", css)

    def frames(self, svg="#flame"):
        return set(self.js("Array.from(document.querySelectorAll(arguments[0] + ' g.f'))"
                           ".map(function(g){return g.getAttribute('data-name');})", svg))

    def moment_index(self, name):
        return self.js("(function(n){return JSON.parse(document.getElementById('data')"
                       ".textContent).moments.findIndex(function(m){return m.f===n;});})"
                       "(arguments[0])", name)

    def click(self, css, shift=False):
        before = int(self.js("document.body.getAttribute('data-draws')") or 0)
        t = time.monotonic()
        if shift:
            shift_click(self.b, css)
        else:
            self.b.click(css)
        wall = time.monotonic() - t
        self.assertEqual(int(self.js("document.body.getAttribute('data-draws')")), before + 1,
                         "the click redrew the page")
        print("click %s: redraw %s ms in the page, %.0f ms through WebDriver" % (
            css, self.js("document.body.getAttribute('data-draw-ms')"), wall * 1000))

    def shot(self, name):
        self.b.screenshot(os.path.join(ARTEFACTS, "report-%s.png" % name))

    def no_console_errors(self):
        bad = [e for e in self.b.console() if e.get("level") in ("SEVERE", "WARNING")]
        self.assertEqual(bad, [], "console errors")

    def test_moments_peak_ages_and_diff(self):
        self.assertEqual(self.js("document.body.getAttribute('data-ready')"), "1")
        self.no_console_errors()
        self.assertIn("svc (pid 42)", self.text("#title"))
        self.assertEqual(len(self.b.find_all("#heap path.peak")), 6)
        self.assertEqual(len(self.b.find_all("#heap .above-mark")), 1)
        self.assertEqual(len(self.b.find_all("#heap polygon.band")), 5)  # 4 sites + the rest
        self.shot("loaded")

        # a moment: its flame graph, top table, ages, RSS bar
        self.click('#heap rect.hit[data-i="%d"]' % self.moment_index("heap.42.1.pb.gz"))
        self.assertIn("heap.42.1.pb.gz", self.text("#m-title"))
        self.assertTrue({"all", "main", "handle", "leak", "early_site", "cache_put"}
                        <= self.frames())
        rows = self.js("Array.from(document.querySelectorAll('#top tr[data-name]'))"
                       ".map(function(r){return [r.getAttribute('data-name'),"
                       "+r.getAttribute('data-flat')];})")
        self.assertEqual(rows[:3], [["early_site", 4 << 20], ["leak", 2 << 20],
                                    ["cache_put", 1 << 19]])
        terms = dict(self.js("Array.from(document.querySelectorAll('#recon g.term'))"
                             ".map(function(g){return [g.getAttribute('data-term'),"
                             "+g.getAttribute('data-v')];})"))
        self.assertEqual(sorted(terms), ["live", "outside", "profiler", "slack"])
        self.assertTrue(all(v >= 0 for v in terms.values()), terms)
        self.assertEqual(sum(terms.values()), 6.5 * (1 << 20) + 6 * (1 << 20))
        self.assertEqual(len(self.b.find_all("#ages g.age")), 3)
        self.assertTrue(self.js("document.getElementById('diff').hidden"))
        self.shot("moment")

        # the window's peak with the spike
        self.click('#heap path.peak[data-i="%d"]' % self.moment_index("heap.42.2.peak.pb.gz"))
        self.assertIn("peak", self.text("#m-title"))
        self.assertIn("spike_site", self.frames())
        self.shot("peak")

        # older than 10 s: the early site only
        self.click('#heap rect.hit[data-i="%d"]' % self.moment_index("heap.42.5.pb.gz"))
        self.b.click('#older option[value="10"]')
        names = self.frames()
        self.assertIn("early_site", names)
        self.assertNotIn("leak", names)
        self.assertNotIn("cache_put", names)
        self.assertEqual([r for r in self.js(
            "Array.from(document.querySelectorAll('#top tr[data-name]'))"
            ".filter(function(r){return +r.getAttribute('data-flat')>0;})"
            ".map(function(r){return r.getAttribute('data-name');})")], ["early_site"])
        self.shot("older")
        self.b.click('#older option[value="-1"]')

        # two moments: report 0, then shift-click report 5
        self.click('#heap rect.hit[data-i="%d"]' % self.moment_index("heap.42.0.pb.gz"))
        self.click('#heap rect.hit[data-i="%d"]' % self.moment_index("heap.42.5.pb.gz"),
                   shift=True)
        self.assertFalse(self.js("document.getElementById('diff').hidden"))
        self.assertIn("+5.00MiB", self.text("#d-title"))
        grew = self.js("Array.from(document.querySelectorAll('#diff-table tr.grew'))"
                       ".map(function(r){return [r.getAttribute('data-name'),"
                       "+r.getAttribute('data-delta')];})")
        self.assertEqual(grew[0], ["leak", 5 << 20])
        self.assertIn("leak", self.frames("#dflame"))
        fill = self.js("document.querySelector('#dflame g.f[data-name=\"leak\"] rect')"
                       ".getAttribute('fill')")
        self.assertRegex(fill, r"^rgb\(255,", "growth is red")
        self.shot("diff")

        # search and zoom in the moment's flame graph
        type_into(self.b, "#search", "^leak$")
        self.assertRegex(self.text("#matched"), r"Matched: \d+\.\d\d%")
        self.assertEqual(len(self.b.find_all("#flame g.f.hit")), 1)
        self.b.click('#flame g.f[data-name="handle"]')
        self.assertFalse(self.js("document.getElementById('unzoom').hidden"))
        self.assertNotIn("early_site", self.frames(), "zoomed into handle")
        self.shot("zoom")
        self.no_console_errors()


if __name__ == "__main__":
    if not CHROMIUM or not CHROMEDRIVER:
        print("CHROMIUM or CHROMEDRIVER not set: skipped")
        sys.exit(77)
    unittest.main(verbosity=2)
