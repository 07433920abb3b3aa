#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The override's filtee (libmimprof-internal-override-glibc.so, the
members of the malloc family whose glibc semantics mimalloc lacks) is not
preloadable by mistake: installed, it is not beside the override in
libdir but in libdir/mimprof, with a name that says it is internal, and
the installed override still finds it (its run path, $ORIGIN/mimprof):
a program preloading the installed override runs.

Preloaded alone the filtee serves half the family (malloc glibc's,
realloc mimalloc's): python3 crashed with `free(): invalid pointer`.

Usage: test_filtee_private.py MESON BUILD_ROOT"""
import os
import subprocess
import sys
import tempfile

WORK = ("import json, zlib\n"
        "s = json.dumps([list(range(i % 97)) for i in range(20000)])\n"
        "print(len(zlib.compress(s.encode())) > 0, len(json.loads(s)))\n")


def main():
    meson, build = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="mimprof-install-") as dest:
        subprocess.run([meson, "install", "-C", build, "--destdir", dest, "--no-rebuild",
                        "--quiet", "--tags", "runtime"], check=True, stdout=subprocess.DEVNULL)
        found = {}
        for root, _, files in os.walk(dest):
            for f in files:
                if f.startswith("libmimprof-") and "override" in f and ".so" in f:
                    found[f] = root
        override = found.get("libmimprof-allocator-override.so")
        filtee = found.get("libmimprof-internal-override-glibc.so")
        assert override and filtee, found
        assert filtee == os.path.join(override, "mimprof"), (override, filtee)
        beside = [f for f, d in found.items() if d == override and "glibc" in f]
        assert beside == [], "a filtee beside the override: %s" % beside
        env = dict(os.environ, LD_PRELOAD=os.path.join(override, "libmimprof-allocator-override.so"))
        r = subprocess.run([sys.executable, "-c", WORK], env=env, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0 and r.stdout == "True 20000\n", (r.returncode, r.stdout, r.stderr)
    print("the filtee is %s/libmimprof-internal-override-glibc.so; the override runs python3"
          % os.path.relpath(filtee, dest))


if __name__ == "__main__":
    main()
