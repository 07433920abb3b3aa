#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The version checker itself catches a drifting package version, a
drifting minimum version, and a dependency() that bypasses min_versions."""
import pathlib
import subprocess
import sys
import tempfile
import unittest

CHECKER = pathlib.Path(__file__).with_name("check_versions.py")

GOOD_PKG = """project('mimprof-sys', 'c', version: '1.2.3')
min_versions = {
  'criterion': '>=2.4.1',  # a comment
}
criterion = dependency('criterion', version: min_versions['criterion'])
"""


class CheckVersionsTest(unittest.TestCase):
    def workspace(self, pkg_text, root_version="1.2.3"):
        d = pathlib.Path(tempfile.mkdtemp())
        (d / "meson.build").write_text(f"project('mimprof', 'c', version: '{root_version}')\n")
        (d / "DEPENDENCIES").write_text("# name constraint\ncriterion >=2.4.1\n")
        (d / "sys").mkdir()
        (d / "sys" / "meson.build").write_text(pkg_text)
        return d

    def run_checker(self, root):
        return subprocess.run([sys.executable, str(CHECKER), str(root)],
                              capture_output=True, text=True)

    def test_consistent_workspace_passes(self):
        r = self.run_checker(self.workspace(GOOD_PKG))
        self.assertEqual(r.returncode, 0, r.stdout)

    def test_package_version_drift_fails(self):
        r = self.run_checker(self.workspace(GOOD_PKG, root_version="1.2.4"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("version 1.2.3 != workspace 1.2.4", r.stdout)

    def test_min_version_drift_fails(self):
        r = self.run_checker(self.workspace(GOOD_PKG.replace(">=2.4.1", ">=2.3")))
        self.assertEqual(r.returncode, 1)
        self.assertIn("criterion >=2.3 != workspace >=2.4.1", r.stdout)

    def test_literal_constraint_fails(self):
        text = GOOD_PKG.replace("version: min_versions['criterion']", "version: '>=2.0'")
        r = self.run_checker(self.workspace(text))
        self.assertEqual(r.returncode, 1)
        self.assertIn("does not use min_versions['criterion']", r.stdout)


if __name__ == "__main__":
    unittest.main()
