#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks that a package's dependency graph contains none of a set of
forbidden components, from the files the build produced.

  check_graph.py --forbid NAME [--forbid NAME ...]
                 [--pc-path DIR] [--pc PACKAGE ...] [--elf FILE ...]

--pc PACKAGE  pkg-config module, resolved with PKG_CONFIG_PATH=DIR (the
              build's meson-private directory) plus the system paths: its
              Requires, Requires.private and static Libs, transitively.
--elf FILE    a built shared object or executable: its NEEDED entries
              (readelf -d) and the transitive closure the loader resolves
              (ldd).
A forbidden NAME matches as a substring of a module name, a -l flag or a
library file name (so "unwind" catches libunwind and -lunwind).
Exits 1 listing every hit, 0 when the graph is clean, 2 on usage errors.
--expect-hit  inverts the verdict for the checker's own tests: exit 0 only
              when something forbidden was found (errors still exit 2).
"""
import argparse
import os
import re
import subprocess
import sys


def pkg_config(args, pc_path):
    env = dict(os.environ)
    env["PKG_CONFIG_PATH"] = pc_path + (":" + env["PKG_CONFIG_PATH"] if env.get("PKG_CONFIG_PATH") else "")
    r = subprocess.run(["pkg-config"] + args, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"pkg-config {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def pc_components(module, pc_path):
    """Every module name and -l library in the module's closure."""
    seen, todo, libs = set(), [module], set()
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        for flag in ("--print-requires", "--print-requires-private"):
            for line in pkg_config([flag, m], pc_path).splitlines():
                name = re.split(r"\s|[<>=]", line.strip())[0]
                if name:
                    todo.append(name)
    for tok in pkg_config(["--libs", "--static", module], pc_path).split():
        if tok.startswith("-l"):
            libs.add("lib" + tok[2:])
    return [("pkg-config module", m) for m in sorted(seen)] + [("pkg-config -l", l) for l in sorted(libs)]


def elf_components(path):
    out = []
    r = subprocess.run(["readelf", "-d", path], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"readelf -d {path}: {r.stderr.strip()}")
    for m in re.finditer(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", r.stdout):
        out.append(("NEEDED", m.group(1)))
    r = subprocess.run(["ldd", path], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        name = line.strip().split(" ", 1)[0]
        if name:
            out.append(("ldd", name))
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--forbid", action="append", required=True)
    ap.add_argument("--pc-path", default="")
    ap.add_argument("--pc", action="append", default=[])
    ap.add_argument("--elf", action="append", default=[])
    ap.add_argument("--expect-hit", action="store_true")
    args = ap.parse_args(argv[1:])
    if not args.pc and not args.elf:
        ap.error("name at least one --pc or --elf")
    components = []
    try:
        for m in args.pc:
            components += [(m, kind, c) for kind, c in pc_components(m, args.pc_path)]
        for e in args.elf:
            components += [(os.path.basename(e), kind, c) for kind, c in elf_components(e)]
    except RuntimeError as err:
        print(f"error: {err}")
        return 2
    hits = [(src, kind, c, f) for src, kind, c in components for f in args.forbid if f in c]
    for src, kind, c, f in hits:
        print(f"FORBIDDEN: {src}: {kind} {c} matches '{f}'")
    print(f"checked {len(components)} components of {len(args.pc) + len(args.elf)} "
          f"artifacts: {len(hits)} forbidden")
    if args.expect_hit:
        return 0 if hits else 1
    return 1 if hits else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
