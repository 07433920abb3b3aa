#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Sets the workspace version and every package's version at once.

  bump_version.py [--root WORKSPACE] NEW_VERSION

Rewrites the version: of the project() call in the root meson.build and in
<pkg>/meson.build for every package directory that has one (sys, allocator,
image, profiling, pyroscope-adapter, cli), and the Rust crates' version
(rust/Cargo.toml: [workspace.package] and the "=VERSION" of the workspace's
own crates; rust/Cargo.lock's entries of those crates), then runs
tests/workspace/check_versions.py on the result. Nothing else changes (the
sibling constraints are written as '=' + meson.project_version()).
CHANGELOG.md is the maintainer's: add the `## [NEW_VERSION]` section there.
Exit status 0 on success, 1 if a file has no project() version or the
check fails, 2 on a malformed version.
"""
import argparse
import re
import subprocess
import sys
from pathlib import Path

PACKAGES = ["sys", "allocator", "image", "profiling", "pyroscope-adapter", "cli"]
VERSION_RE = re.compile(r"\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]+)?")
# The version: keyword inside the first project( ... ) call.
PROJECT_VERSION_RE = re.compile(r"(\bproject\((?:[^()]|\([^()]*\))*?version:\s*')([^']+)(')", re.S)


def bump_file(path, new):
    text = path.read_text()
    # Search with comments blanked out (same offsets), edit the real text.
    masked = re.sub(r"#[^\n]*", lambda c: " " * len(c.group(0)), text)
    m = PROJECT_VERSION_RE.search(masked)
    if not m:
        raise ValueError(f"{path}: no project() version")
    old = m.group(2)
    path.write_text(text[:m.start(2)] + new + text[m.end(2):])
    return old


def bump_cargo(rust, new):
    """rust/Cargo.toml and Cargo.lock: the workspace's crates at `new`."""
    toml = rust / "Cargo.toml"
    text = toml.read_text()
    m = re.search(r'(\[workspace\.package\][^\[]*?\nversion\s*=\s*")([^"]+)(")', text)
    if not m:
        raise ValueError(f"{toml}: no [workspace.package] version")
    old = m.group(2)
    text = text[:m.start(2)] + new + text[m.end(2):]
    # the workspace crates' own requirements ("=OLD") in [workspace.dependencies]
    text = re.sub(r'(path\s*=\s*"[^"]+"\s*,\s*version\s*=\s*"=)' + re.escape(old) + '"',
                  lambda x: x.group(1) + new + '"', text)
    toml.write_text(text)
    lock = rust / "Cargo.lock"
    if lock.is_file():
        members = [rust / d / "Cargo.toml" for d in re.findall(r'"([^"]+)"', re.search(
            r"members\s*=\s*\[([^\]]*)\]", text).group(1))]
        names = [re.search(r'^name\s*=\s*"([^"]+)"', f.read_text(), re.M).group(1)
                 for f in members if f.is_file()]
        ltext = lock.read_text()
        for n in names:
            ltext = ltext.replace(f'name = "{n}"\nversion = "{old}"\n', f'name = "{n}"\nversion = "{new}"\n')
        lock.write_text(ltext)
    return old


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(Path(__file__).resolve().parent.parent))
    ap.add_argument("version")
    args = ap.parse_args(argv[1:])
    if not VERSION_RE.fullmatch(args.version):
        print(f"bump_version: {args.version!r} is not MAJOR.MINOR.PATCH[-pre]", file=sys.stderr)
        return 2
    root = Path(args.root)
    files = [root / "meson.build"] + [root / p / "meson.build" for p in PACKAGES
                                      if (root / p / "meson.build").is_file()]
    try:
        for f in files:
            old = bump_file(f, args.version)
            print(f"{f.relative_to(root)}: {old} -> {args.version}")
        if (root / "rust" / "Cargo.toml").is_file():
            old = bump_cargo(root / "rust", args.version)
            print(f"rust/Cargo.toml, rust/Cargo.lock: {old} -> {args.version}")
    except ValueError as e:
        print(f"bump_version: {e}", file=sys.stderr)
        return 1
    check = root / "tests" / "workspace" / "check_versions.py"
    if check.is_file():
        r = subprocess.run([sys.executable, str(check), str(root)])
        if r.returncode != 0:
            return 1
    print(f"next: add a '## [{args.version}] - YYYY-MM-DD' section to CHANGELOG.md, commit, "
          f"tag v{args.version}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
