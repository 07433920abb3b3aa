#!/usr/bin/python3
"""The shared library exports exactly the functions that
include/mimprof/pyroscope.h declares (and the version script lists)."""
import re
import subprocess
import sys

header, mapfile, lib = sys.argv[1:4]
text = open(header).read()
declared = set(re.findall(r"^[A-Za-z_][A-Za-z0-9_ \*]*?\b(mp_pyro_[a-z0-9_]+)\(", text, re.M))
listed = set(re.findall(r"^\s+(mp_pyro_[a-z0-9_]+);", open(mapfile).read(), re.M))
out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
exported = {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}
exported = {s for s in exported if not s.startswith("MIMPROF_PYROSCOPE")}
ok = True
for what, a, b in (("declared but not listed in the version script", declared, listed),
                   ("listed but not declared", listed, declared),
                   ("declared but not exported", declared, exported),
                   ("exported but not declared", exported, declared)):
    if a - b:
        print("%s: %s" % (what, ", ".join(sorted(a - b))))
        ok = False
print("%d public functions" % len(declared))
sys.exit(0 if ok else 1)
