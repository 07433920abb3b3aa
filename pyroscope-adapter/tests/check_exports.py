#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The shared library exports exactly the functions that
include/mimprof/pyroscope.h declares, each marked MP_PYRO_API."""
import re
import subprocess
import sys

header, lib = sys.argv[1:3]
text = open(header).read()
declared = set(re.findall(r"^[A-Za-z_][A-Za-z0-9_ \*]*?\b(mp_pyro_[a-z0-9_]+)\(", text, re.M))
marked = set(re.findall(r"^MP_PYRO_API\b[A-Za-z0-9_ \*]*?\b(mp_pyro_[a-z0-9_]+)\(", text, re.M))
out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
exported = {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}
ok = True
for what, a, b in (("declared but not marked MP_PYRO_API", declared, marked),
                   ("declared but not exported", declared, exported),
                   ("exported but not declared", exported, declared)):
    if a - b:
        print("%s: %s" % (what, ", ".join(sorted(a - b))))
        ok = False
print("%d public functions" % len(declared))
sys.exit(0 if ok else 1)
