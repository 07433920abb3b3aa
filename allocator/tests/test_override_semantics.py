#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The override over mimalloc against raw mimalloc, semantic by semantic.

Runs family-probe (one line per semantic of the malloc family's contract,
<mimprof/sys-override.inc.h>) under raw mimalloc (LD_PRELOAD=the system's
libmimalloc.so.2) and under the override preloaded. Checks:

1. Under the override every line is the contract's value (CONTRACT below),
   and malloc and free are mimalloc's own entry points.
2. Every member the override leaves to mimalloc (the probe's "owner" line
   says libmimalloc) behaves under raw mimalloc as the contract says,
   except for what mimalloc's error callback, which the override
   registers, adds (ERRNO_BY_CALLBACK); every member the override-glibc
   object serves violates the contract under raw mimalloc in at least one
   line. So the version script's list is exactly the measured difference.
3. The override without its first filtee beside it does not load (it
   never serves mimalloc's realloc(p, 0) silently).

Usage: test_override_semantics.py PROBE OVERRIDE MIMALLOC
       test_override_semantics.py --contract PROBE PRELOAD...
The second form checks only 1's contract, under each PRELOAD (mimprof's
preload objects), with a session and dormant (MIMPROF_DORMANT=1).
"""
import os
import shutil
import subprocess
import sys
import tempfile


CONTRACT = {
    "malloc size_max": "NULL errno=ENOMEM",
    "malloc huge": "NULL errno=ENOMEM",
    "malloc zero": "ptr errno=0",
    "calloc overflow": "NULL errno=ENOMEM",
    "calloc huge": "NULL errno=ENOMEM",
    "calloc zero": "ptr errno=0",
    "calloc zeroed": "1",
    "realloc huge": "NULL errno=ENOMEM intact=1",
    "realloc zero": "NULL errno=0",
    "realloc null": "ptr errno=0",
    "reallocarray overflow": "NULL errno=ENOMEM",
    "reallocarray zero": "NULL errno=0",
    "posix_memalign align3": "22",
    "posix_memalign align4": "22",
    "posix_memalign huge": "12",
    "posix_memalign 4096": "0 aligned=1",
    "aligned_alloc align24": "NULL errno=EINVAL",
    "aligned_alloc align0": "NULL errno=EINVAL",
    "aligned_alloc huge": "NULL errno=ENOMEM",
    "aligned_alloc 256": "aligned=1",
    "memalign align24": "ptr aligned32=1",
    "memalign huge": "NULL errno=ENOMEM",
    "valloc 10": "aligned=1",
    "valloc huge": "NULL errno=ENOMEM",
    "pvalloc 10": "aligned=1 whole_page=1",
    "pvalloc size_max": "NULL errno=ENOMEM",
    "malloc_usable_size null": "0",
    "malloc_usable_size 100": "1",
    "free null": "errno_kept=1",
}
# Lines whose contract value mimalloc reaches only with the error callback
# the override registers (mimalloc 2.0's malloc sets no errno itself).
ERRNO_BY_CALLBACK = {"malloc size_max"}
MEMBERS = ["malloc", "free", "calloc", "realloc", "reallocarray", "posix_memalign",
           "aligned_alloc", "memalign", "valloc", "pvalloc", "malloc_usable_size"]

failures = []


def run(preload, **extra):
    env = dict(os.environ, LD_PRELOAD=preload, **extra)
    out = subprocess.run([PROBE], env=env, capture_output=True, text=True, check=True).stdout
    lines = {}
    for line in out.splitlines():
        key, _, value = line.partition(": ")
        lines[key] = value
    return lines


def member_of(key):
    return key.split(" ")[0]


def check_contract(lines, who):
    for key, want in CONTRACT.items():
        if lines.get(key) != want:
            failures.append(f"{who}: {key}: {lines.get(key)!r}, contract {want!r}")


def override_vs_raw(OVERRIDE, MIMALLOC):
    raw = run(MIMALLOC)
    ovr = run(OVERRIDE)

    # 1. the override meets the contract, and its members are served as built
    check_contract(ovr, "override")
    served_by_mimalloc = {m for m in MEMBERS if ovr.get("owner " + m) == "libmimalloc"}
    served_by_glibc = {m for m in MEMBERS if ovr.get("owner " + m) == "override-glibc"}
    if served_by_mimalloc | served_by_glibc != set(MEMBERS):
        failures.append("override: members served by neither mimalloc nor override-glibc: "
                        + ", ".join(m for m in MEMBERS if m not in served_by_mimalloc | served_by_glibc))
    for m in ("malloc", "free"):  # the pair the overhead target is about
        if m not in served_by_mimalloc:
            failures.append(f"override: {m} is not mimalloc's own entry point ({ovr.get('owner ' + m)})")

    # 2. the split is the measured difference from raw mimalloc
    for m in MEMBERS:
        keys = [k for k in CONTRACT if member_of(k) == m]
        wrong = [k for k in keys if raw.get(k) != CONTRACT[k] and k not in ERRNO_BY_CALLBACK]
        if m in served_by_mimalloc and wrong:
            failures.append(f"{m} is left to mimalloc, whose {wrong[0]} is {raw.get(wrong[0])!r}")
        if m in served_by_glibc and not wrong:
            failures.append(f"{m} is wrapped, yet raw mimalloc meets the contract on every line")
    for k in ERRNO_BY_CALLBACK:
        if raw.get(k) == CONTRACT[k]:
            print(f"note: raw mimalloc now gives {k} = {raw[k]!r} by itself")

    # 3. without the first filtee the override does not load
    with tempfile.TemporaryDirectory() as d:
        alone = os.path.join(d, os.path.basename(OVERRIDE))
        shutil.copy(OVERRIDE, alone)
        env = dict(os.environ, LD_PRELOAD=alone)
        env.pop("LD_LIBRARY_PATH", None)  # meson's, which holds the build's filtee
        r = subprocess.run([PROBE], env=env, capture_output=True, text=True)
        if r.returncode == 0 and "owner realloc: libmimalloc" in r.stdout:
            failures.append("override without its filtee ran with mimalloc's realloc")
        if r.returncode == 0 and "cannot" not in r.stderr:
            failures.append("override without its filtee: the loader said nothing")

    print("raw mimalloc differs from the contract in:",
          ", ".join(k for k in CONTRACT if raw.get(k) != CONTRACT[k]))
    print("served by mimalloc:", ", ".join(sorted(served_by_mimalloc)))
    print("served by override-glibc:", ", ".join(sorted(served_by_glibc)))


def preloads(paths):
    with tempfile.TemporaryDirectory() as d:
        for p in paths:
            check_contract(run(p, MIMPROF_OUTPUT=d + os.sep), os.path.basename(p))
            check_contract(run(p, MIMPROF_OUTPUT=d + os.sep, MIMPROF_DORMANT="1"),
                           os.path.basename(p) + " dormant")


if __name__ == "__main__":
    if sys.argv[1] == "--contract":
        PROBE = sys.argv[2]
        preloads(sys.argv[3:])
    else:
        PROBE = sys.argv[1]
        override_vs_raw(*sys.argv[2:4])
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)
