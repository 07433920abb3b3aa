#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Fails when the workspace's versions disagree.

1. Every package's project() version equals the workspace version (the
   root meson.build's project() version).
2. Every package's `min_versions` constraints equal the workspace's
   DEPENDENCIES file, and every dependency() on an external library
   listed there states its constraint through min_versions.

Usage: check_versions.py WORKSPACE_ROOT
Prints one line per problem and exits 1 if there is any.
"""
import pathlib
import re
import sys

PACKAGES = ["sys", "allocator", "image", "profiling", "pyroscope-adapter", "cli"]

PROJECT_RE = re.compile(r"project\(\s*'([^']+)'.*?version:\s*'([^']+)'", re.S)
MIN_VERSIONS_RE = re.compile(r"min_versions\s*=\s*\{(.*?)\}", re.S)
ENTRY_RE = re.compile(r"'([^']+)'\s*:\s*'([^']+)'")
DEPENDENCY_RE = re.compile(r"dependency\(\s*'([^']+)'([^)]*)\)", re.S)


def strip_comments(text):
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


def read_dependencies(path):
    deps = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, constraint = line.split()
            deps[name] = constraint
    return deps


def project_version(meson_build):
    m = PROJECT_RE.search(strip_comments(meson_build.read_text()))
    if not m:
        raise ValueError(f"{meson_build}: no project() with a version")
    return m.group(1), m.group(2)


def check_package(pkg_dir, workspace_version, wanted):
    problems = []
    build = pkg_dir / "meson.build"
    text = strip_comments(build.read_text())
    name, version = project_version(build)
    if version != workspace_version:
        problems.append(f"{build}: {name} version {version} != workspace {workspace_version}")
    stated = {}
    m = MIN_VERSIONS_RE.search(text)
    if m:
        stated = dict(ENTRY_RE.findall(m.group(1)))
    for dep, constraint in stated.items():
        if dep not in wanted:
            problems.append(f"{build}: min_versions names '{dep}', which DEPENDENCIES does not list")
        elif constraint != wanted[dep]:
            problems.append(f"{build}: {dep} {constraint} != workspace {wanted[dep]}")
    for dep, args in DEPENDENCY_RE.findall(text):
        if dep in wanted:
            if f"min_versions['{dep}']" not in args:
                problems.append(f"{build}: dependency('{dep}') does not use min_versions['{dep}']")
            if dep not in stated:
                problems.append(f"{build}: dependency('{dep}') but min_versions lacks it")
    return problems


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    root = pathlib.Path(argv[1])
    _, workspace_version = project_version(root / "meson.build")
    wanted = read_dependencies(root / "DEPENDENCIES")
    problems = []
    checked = 0
    for pkg in PACKAGES:
        if (root / pkg / "meson.build").is_file():
            problems += check_package(root / pkg, workspace_version, wanted)
            checked += 1
    for p in problems:
        print(p)
    print(f"checked {checked} packages against workspace {workspace_version}: "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
