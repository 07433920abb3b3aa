#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""CPython's own test suite under `mimprof run`: the
threading, signal, subprocess, faulthandler and os tests give the same
result profiled as unprofiled. They check, among much else, that Python
finds SIG_DFL where it installs its SIGINT handler, that KeyboardInterrupt
is raised, what faulthandler finds and restores, and what signals and
descriptors children inherit.

Regression: with the runtime's handlers visible, test_signal was killed by
its first SIGINT and four of test_threading's InterruptMainTests failed.

Debian's /usr/bin/python3 and its test package (libpython3.11-testsuite,
in `dev`'s DEBIAN_PACKAGES); skipped without them. The two runs go
side by side, each sequential in one interpreter (-j would run the tests
in worker processes, which `mimprof run` does not follow across exec by
default); no resource-heavy flag (-u) is given. A test case that fails
only profiled is run once more, alone, before it counts: the machine is
shared and some of these tests have timing windows.
"""
import os
import subprocess
import unittest
import xml.etree.ElementTree as ET

from tool_testlib import MIMPROF, TempDirTest

PYTHON = "/usr/bin/python3"
MODULES = ["test_signal", "test_threading", "test_faulthandler", "test_os", "test_subprocess"]


def have_testsuite():
    r = subprocess.run([PYTHON, "-c", "import test.support, test.test_signal"],
                       capture_output=True)
    return r.returncode == 0


def outcomes(xml_path):
    """{test case: 'ok' | 'skip' | 'fail'} from regrtest's --junit-xml."""
    out = {}
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        kinds = {c.tag for c in case}
        out[case.get("name")] = ("fail" if kinds & {"failure", "error"} else
                                 "skip" if "skipped" in kinds else "ok")
    return out


@unittest.skipUnless(os.path.exists(PYTHON) and have_testsuite(),
                     "needs Debian's python3 and libpython3.11-testsuite")
class CPythonSuite(TempDirTest):
    def regrtest(self, profiled, xml, *args):
        cmd = [PYTHON, "-m", "test", "--junit-xml", xml, *args]
        if profiled:
            cmd = [MIMPROF, "run", "--every", "0", "-o", self.path("prof"), "--"] + cmd
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace", cwd=self.tmp)

    def test_same_results_profiled_and_not(self):
        plain_xml, prof_xml = self.path("plain.xml"), self.path("prof.xml")
        plain = self.regrtest(False, plain_xml, *MODULES)
        prof = self.regrtest(True, prof_xml, *MODULES)
        prof_log = prof.communicate(timeout=1500)[0]
        plain_log = plain.communicate(timeout=1500)[0]
        self.assertTrue(os.path.exists(prof_xml), "the profiled run ended early:\n" + prof_log)
        a, b = outcomes(plain_xml), outcomes(prof_xml)
        self.assertGreater(len(a), 500, plain_log[-2000:])
        self.assertEqual(sorted(set(a) ^ set(b)), [], "the same test cases ran")
        self.assertEqual(sorted(k for k in a if (a[k] == "skip") != (b[k] == "skip")), [],
                         "the same test cases were skipped")
        only_profiled = sorted(k for k in a if b[k] == "fail" and a[k] != "fail")
        still = []
        for name in only_profiled:
            module = name.split(".")[1]
            again = self.path("again.xml")
            p = self.regrtest(True, again, module, "-m", name.rsplit(".", 1)[1])
            log = p.communicate(timeout=600)[0]
            if not os.path.exists(again) or outcomes(again).get(name) != "ok":
                still.append((name, log[-3000:]))
        self.assertEqual(still, [], "failed only under mimprof run")
        if not only_profiled:
            self.assertEqual(plain.returncode == 0, prof.returncode == 0,
                             (plain_log[-1500:], prof_log[-1500:]))


if __name__ == "__main__":
    unittest.main(verbosity=2)
