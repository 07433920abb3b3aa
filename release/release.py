#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""mimprof release tool: packs, tests, publishes and verifies the workspace's
packages for one `v<VERSION>` tag (see release/README.md).

  release.py [options] plan | pack | pretest | publish | verify | consumer-test | all

plan           checks the release rules (tag = workspace = package versions,
               CHANGELOG section) and lists what will be released.
pack           one reproducible archive per package (meson dist, normalized).
pretest        builds and tests every archive standalone; siblings come from
               the local archives (wrap overrides through packagecache).
crates         `cargo package` of the Rust crates (rust/), planned after the
               C packages they link; the .crate archives and their SHA-256s
               (publishing to crates.io is the maintainers' `cargo publish`).
publish        uploads sys, allocator, image, profiling, pyroscope-adapter in
               that order, verifying each (index entry, downloaded SHA-256)
               before the next; stops at the first failure.
verify         builds and tests the profiling archive from the registry with
               no local overrides; checks its graph holds no allocator package.
consumer-test  isolated consumer projects (mimalloc, jemalloc, allocator-only)
               pulling everything through wrap files from the registry; then
               prints the wrap files and the consumer snippet.
all            the above in order.

Python 3 standard library + meson only. Exit status: 0 success, 1 a step
failed or a rule refused the release, 2 usage error.
"""
import argparse
import base64
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

TOOL_DIR = Path(__file__).resolve().parent
DEFAULT_REPO = TOOL_DIR.parent

# Publication order = dependency order. A package takes part once
# <dir>/meson.build exists in the released commit.
PACKAGE_DIRS = ["sys", "allocator", "image", "profiling", "pyroscope-adapter", "cli"]
PROFILING_DIR = "profiling"
# Substrings that must not appear in the profiling package's default
# resolved graph (module names, -l flags, NEEDED / ldd names).
ALLOCATOR_PARTS = ["mimprof-sys-", "mimprof-allocator", "libmimalloc", "libjemalloc"]
# What an allocator-only consumer must not pull in (as tests/graph/meson.build).
PROFILER_PARTS = ["unwind", "protobuf-c", "curl", "libelf", "libdw", "mimprof-profiling",
                  "mimprof-image", "mimprof-pyroscope", "libz"]
# Package options turned off in sibling subprojects and in consumer builds.
OFF_OPTIONS = ["tests", "benchmarks", "fuzzing", "docs", "preload_tests"]
# ... and additionally in consumer builds (what a consumer does not need).
CONSUMER_OFF_OPTIONS = OFF_OPTIONS + ["preload"]
PROVIDERS = ["mimalloc", "jemalloc"]
STEPS = ["plan", "pack", "pretest", "crates", "publish", "verify", "consumer-test"]
# The Cargo workspace of the Rust crates, and how a crate's build script
# names the C packages it links (pkg-config probes).
RUST_DIR = "rust"
CRATE_LINK_RE = re.compile(r'probe\(\s*"([A-Za-z0-9_.+-]+)"\s*\)')


class ReleaseError(Exception):
    """A refusal or a failed step: the message is what the operator reads."""


# ---------------------------------------------------------------- helpers

class Log:
    """Prints to stdout and appends to the current step's log file."""

    def __init__(self):
        self.fh = None

    def open(self, path):
        self.close()
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fh = open(path, "w", encoding="utf-8")

    def close(self):
        if self.fh:
            self.fh.close()
            self.fh = None

    def __call__(self, msg=""):
        print(msg, flush=True)
        if self.fh:
            self.fh.write(msg + "\n")
            self.fh.flush()

    def raw(self, text):
        if self.fh:
            self.fh.write(text)
            self.fh.flush()


log = Log()


def sha256_bytes(data):
    return hashlib.sha256(data).hexdigest()


def sha256_file(path):
    return sha256_bytes(Path(path).read_bytes())


def run(cmd, cwd=None, env=None, what=None, capture=False):
    """Runs a command, its output going to the step log. Raises ReleaseError
    with the output's tail on failure."""
    log.raw(f"$ {' '.join(str(c) for c in cmd)}\n")
    r = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    log.raw(r.stdout)
    if r.returncode != 0:
        tail = "\n".join(r.stdout.splitlines()[-25:])
        raise ReleaseError(f"{what or cmd[0]} failed (exit {r.returncode}):\n{tail}")
    return r.stdout if capture else None


def git(repo, *args):
    r = subprocess.run(["git", "-C", str(repo)] + list(args), capture_output=True, text=True)
    if r.returncode != 0:
        raise ReleaseError(f"git {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def git_try(repo, *args):
    r = subprocess.run(["git", "-C", str(repo)] + list(args), capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


def strip_comments(text):
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


PROJECT_RE = re.compile(r"project\(\s*'([^']+)'.*?version:\s*'([^']+)'", re.S)
OPTION_RE = re.compile(r"option\(\s*'([^']+)'")
OVERRIDE_RE = re.compile(r"meson\.override_dependency\(\s*((?:'[^']*'\s*\+?\s*)+)\s*,\s*([A-Za-z_]\w*)\s*\)")
OVERRIDE_ANY_RE = re.compile(r"meson\.override_dependency\(\s*([^,]*),")
DEP_RE = re.compile(r"dependency\(\s*'(mimprof-[^']*)'\s*(\+)?")
FALLBACK_RE = re.compile(r"fallback\s*:\s*\[\s*'([^']+)'")
SUBPROJECT_RE = re.compile(r"subproject\(\s*'(mimprof-[^']+)'")
# The tests' shared decoders (tests/support, no package): a package's tests
# reach them through the link subprojects/test-support, which an archive
# cannot keep; the archive carries a copy of the directory instead.
TEST_SUPPORT = "test-support"


def write_json(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def read_json(path):
    return json.loads(Path(path).read_text())


# ---------------------------------------------------------------- rules

def changelog_section(text, version):
    """The body of the `## [VERSION]` (or `## VERSION`, `## vVERSION`) section."""
    lines = text.splitlines()
    head = re.compile(r"^##\s+\[?v?" + re.escape(version) + r"\]?(\s|$)")
    for i, line in enumerate(lines):
        if head.match(line):
            body = []
            for nxt in lines[i + 1:]:
                if nxt.startswith("## ") or re.match(r"^\[[^\]]+\]:\s", nxt):
                    break
                body.append(nxt)
            return "\n".join(body).strip()
    return None


class Package:
    def __init__(self, d):
        self.dir = d
        self.name = None
        self.version = None
        self.options = []
        self.provides = {}
        self.uses_deps = set()      # mimprof-* dependency names (exact)
        self.uses_prefixes = set()  # 'mimprof-sys-' + x  prefixes
        self.uses_subprojects = set()
        self.siblings = []          # names, transitive, in release order
        self.direct = []            # the siblings its own meson.build files name

    @property
    def archive(self):
        return f"{self.name}-{self.version}.tar.gz"

    @property
    def directory(self):
        return f"{self.name}-{self.version}"


class Crate:
    """A published crate of the Cargo workspace."""

    def __init__(self, name, d, version):
        self.name = name
        self.dir = d
        self.version = version
        self.crates = set()   # workspace crates it depends on
        self.links = set()    # pkg-config names its build script probes
        self.after = []       # C packages (release order) it links, directly or through a crate

    @property
    def archive(self):
        return f"{self.name}-{self.version}.crate"


class Release:
    """What one tag releases, read from the released commit (never from the
    working tree, so concurrent edits cannot leak into a release)."""

    def __init__(self, args):
        self.args = args
        self.repo = Path(args.repo).resolve()
        self.registry = (args.registry or os.environ.get("MIMPROF_REGISTRY_URL", "")).rstrip("/")
        origin = "ci" if os.environ.get("CI") == "true" else "local"
        self.origin = origin
        self.tag, self.commit = self._tag_and_commit()
        self.commit_time = int(git(self.repo, "show", "-s", "--format=%ct", self.commit).strip())
        self.version = self._workspace_version()
        wd = args.workdir or (self.repo / "build-release" / origin / f"v{self.version}")
        self.workdir = Path(wd).resolve()
        self.packages = []
        self.crates = []
        self.notes = None

    def show(self, path):
        return git_try(self.repo, "show", f"{self.commit}:{path}")

    def _tag_and_commit(self):
        tag = self.args.tag
        if not tag and os.environ.get("GITHUB_REF_TYPE") == "tag":
            tag = os.environ.get("GITHUB_REF_NAME")
        commit = self.args.commit
        if not tag:
            t = git_try(self.repo, "describe", "--exact-match", "--tags", commit or "HEAD")
            tag = t.strip() if t else None
        if not tag:
            raise ReleaseError("no release tag: pass --tag v<VERSION> (or run on a tagged commit)")
        tagged = git_try(self.repo, "rev-parse", "--verify", "-q", f"refs/tags/{tag}^{{commit}}")
        if commit:
            commit = git(self.repo, "rev-parse", "--verify", f"{commit}^{{commit}}").strip()
            if tagged and tagged.strip() != commit:
                raise ReleaseError(f"tag {tag} points at {tagged.strip()[:12]}, not at the requested "
                                   f"commit {commit[:12]}")
        else:
            commit = tagged.strip() if tagged else git(self.repo, "rev-parse", "HEAD").strip()
        return tag, commit

    def _workspace_version(self):
        text = self.show("meson.build")
        if text is None:
            raise ReleaseError(f"no meson.build at the root of commit {self.commit[:12]}")
        m = PROJECT_RE.search(strip_comments(text))
        if not m:
            raise ReleaseError("root meson.build: no project() with a version")
        return m.group(2)

    # -- the plan ---------------------------------------------------------
    def load(self):
        """Reads every package and checks the rules; raises on a refusal."""
        problems = []
        if not re.fullmatch(r"v\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]+)?", self.tag or ""):
            problems.append(f"tag {self.tag!r} is not of the form v<VERSION>")
        if self.tag != f"v{self.version}":
            problems.append(f"tag {self.tag} does not match the workspace version {self.version} "
                            f"(root meson.build at {self.commit[:12]})")
        files = git(self.repo, "ls-tree", "-r", "--name-only", self.commit).splitlines()
        for d in PACKAGE_DIRS:
            if f"{d}/meson.build" not in files:
                continue
            p = Package(d)
            text = strip_comments(self.show(f"{d}/meson.build"))
            m = PROJECT_RE.search(text)
            if not m:
                problems.append(f"{d}/meson.build: no project() with a version")
                continue
            p.name, p.version = m.group(1), m.group(2)
            if p.version != self.version:
                problems.append(f"{d}/meson.build: {p.name} version {p.version} != workspace "
                                f"{self.version} (tag {self.tag})")
            opts = self.show(f"{d}/meson_options.txt") or ""
            p.options = OPTION_RE.findall(strip_comments(opts))
            for f in files:
                if f.startswith(d + "/") and f.endswith("meson.build"):
                    self._scan(p, f, strip_comments(self.show(f)), problems)
            self.packages.append(p)
        if not self.packages:
            problems.append(f"no package has a meson.build at {self.commit[:12]}")
        self._resolve_siblings(problems)
        self._load_crates(files, problems)
        self._check_root_list(problems)
        self._changelog(problems)
        if problems:
            raise ReleaseError("release refused:\n  " + "\n  ".join(problems))

    def _scan(self, p, path, text, problems):
        for m in OVERRIDE_ANY_RE.finditer(text):
            lit = OVERRIDE_RE.match(text, m.start())
            line = text.count("\n", 0, m.start()) + 1
            if not lit:
                problems.append(f"{path}:{line}: override_dependency() with a computed name; the "
                                "release needs literal names for the wrap's [provide] section")
                continue
            name = "".join(re.findall(r"'([^']*)'", lit.group(1)))
            p.provides[name] = lit.group(2)
        for m in DEP_RE.finditer(text):
            (p.uses_prefixes if m.group(2) else p.uses_deps).add(m.group(1))
        p.uses_subprojects.update(FALLBACK_RE.findall(text))
        p.uses_subprojects.update(SUBPROJECT_RE.findall(text))

    def _resolve_siblings(self, problems):
        by_name = {}
        for i, p in enumerate(self.packages):
            direct = set()
            for dep in p.uses_deps:
                owner = [q for q in self.packages if dep in q.provides]
                if dep in p.provides:
                    continue
                if not owner:
                    problems.append(f"{p.dir}: dependency('{dep}') is provided by no package of "
                                    "this release")
                else:
                    direct.add(owner[0].name)
            for prefix in p.uses_prefixes:
                owner = [q for q in self.packages if q is not p and any(n.startswith(prefix) for n in q.provides)]
                direct.update(q.name for q in owner)
            for sp in p.uses_subprojects:
                if sp == p.name:
                    continue
                if not any(q.name == sp for q in self.packages):
                    problems.append(f"{p.dir}: falls back to subproject '{sp}', which is no "
                                    "package of this release")
                else:
                    direct.add(sp)
            closure = set()
            for n in direct:
                if n not in by_name:
                    problems.append(f"{p.dir}: needs {n}, which is not released before it "
                                    f"(order: {', '.join(PACKAGE_DIRS)})")
                    continue
                closure.add(n)
                closure.update(by_name[n].siblings)
            p.siblings = [q.name for q in self.packages[:i] if q.name in closure]
            p.direct = [n for n in p.siblings if n in direct]
            by_name[p.name] = p

    def _load_crates(self, files, problems):
        """The crates of rust/ (those published: not `publish = false`), in
        dependency order, each after the C packages it links."""
        text = self.show(f"{RUST_DIR}/Cargo.toml")
        if text is None:
            return
        where = f"{RUST_DIR}/Cargo.toml"
        try:
            ws = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            problems.append(f"{where}: {e}")
            return
        wsver = ws.get("workspace", {}).get("package", {}).get("version")
        if wsver != self.version:
            problems.append(f"{where}: workspace version {wsver} != {self.version} (tag {self.tag}); "
                            "the crates release with the C packages")
        if f"{RUST_DIR}/Cargo.lock" not in files:
            problems.append(f"{RUST_DIR}/Cargo.lock is not committed")
        found = {}
        unpublished = set()
        for m in ws.get("workspace", {}).get("members", []):
            path = f"{RUST_DIR}/{m}/Cargo.toml"
            try:
                t = tomllib.loads(self.show(path) or "")
            except tomllib.TOMLDecodeError as e:
                problems.append(f"{path}: {e}")
                continue
            pkg = t.get("package", {})
            ver = pkg.get("version")
            ver = wsver if ver == {"workspace": True} else ver
            if pkg.get("publish", True) is False:
                unpublished.add(pkg.get("name"))
                continue
            if ver != self.version:
                problems.append(f"{path}: {pkg.get('name')} version {ver} != {self.version}")
            c = Crate(pkg.get("name"), f"{RUST_DIR}/{m}", ver)
            c.crates = set(t.get("dependencies", {}))
            c.links = set(CRATE_LINK_RE.findall(self.show(f"{RUST_DIR}/{m}/build.rs") or ""))
            found[c.name] = c
        order = [p.name for p in self.packages]
        while found:
            ready = sorted(n for n, c in found.items() if not (c.crates & set(found)))
            if not ready:
                problems.append(f"{RUST_DIR}: the crates {', '.join(sorted(found))} depend on each other "
                                "in a cycle")
                return
            for n in ready:
                c = found.pop(n)
                after = set()
                for dep in sorted(c.crates & unpublished):
                    problems.append(f"{c.dir}: depends on {dep}, which is not published")
                for link in sorted(c.links):
                    owner = [p for p in self.packages if link in p.provides]
                    if not owner:
                        problems.append(f"{c.dir}: links {link}, which no C package of this release provides")
                        continue
                    after.add(owner[0].name)
                    after.update(owner[0].siblings)
                for prev in self.crates:
                    if prev.name in c.crates:
                        after.update(prev.after)
                c.after = [p for p in order if p in after]
                self.crates.append(c)

    def _check_root_list(self, problems):
        root = strip_comments(self.show("meson.build"))
        listed = re.findall(r"\[\s*'([^']+)'\s*,\s*'(mimprof-[^']+)'", root)
        names = dict(listed)
        for p in self.packages:
            if p.dir in names and names[p.dir] != p.name:
                problems.append(f"root meson.build names {p.dir} '{names[p.dir]}' but its project() "
                                f"is '{p.name}'")
        order = [d for d, _ in listed if d in PACKAGE_DIRS]
        if order and order != [d for d in PACKAGE_DIRS if d in order]:
            problems.append(f"root meson.build lists packages as {order}, release order is {PACKAGE_DIRS}")

    def _changelog(self, problems):
        if self.args.changelog:
            path = Path(self.args.changelog)
            text = path.read_text() if path.is_file() else None
            where = str(path)
        else:
            text = self.show("CHANGELOG.md")
            where = f"CHANGELOG.md at {self.commit[:12]}"
        if text is None:
            problems.append(f"{where}: missing; the release notes come from its {self.version} section")
            return
        body = changelog_section(text, self.version)
        if body is None:
            problems.append(f"{where} has no section for {self.version} (add '## [{self.version}] - "
                            "YYYY-MM-DD' with the release notes)")
        elif not body:
            problems.append(f"{where}: the {self.version} section is empty")
        else:
            self.notes = body

    # -- paths --------------------------------------------------------------
    def step_dir(self, step):
        return self.workdir / step

    def need_registry(self):
        if not self.registry:
            raise ReleaseError("no registry: pass --registry URL or set MIMPROF_REGISTRY_URL")
        if not re.match(r"https?://", self.registry):
            raise ReleaseError(f"registry {self.registry!r} is not an http(s) URL")

    def archive_url(self, name, version, archive, base=None):
        return f"{base or self.registry}/{name}/{version}/{archive}"


def wrap_text(name, version, archive, sha, provides, url):
    lines = [f"; {name} {version}: generated by mimprof release/release.py", "[wrap-file]",
             f"directory = {name}-{version}", f"source_url = {url}",
             f"source_filename = {archive}", f"source_hash = {sha}", "", "[provide]"]
    lines += [f"{dep} = {var}" for dep, var in sorted(provides.items())]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- archives

def normalize_archive(raw, top, mtime, extra_files):
    """Rewrites a source tarball reproducibly: entries sorted by name, owner
    root (0/0, no names), mode 0644/0755, every mtime = `mtime`, PAX format,
    gzip header mtime 0 and no file name. Symlinks under subprojects/ (the
    in-tree sibling links) are dropped; `extra_files` {relpath: bytes} are
    added (the generated wraps). Returns (bytes, dropped link names)."""
    entries = {}
    dropped = []
    with tarfile.open(raw, "r:*") as t:
        for m in t.getmembers():
            name = m.name.rstrip("/")
            if name != top and not name.startswith(top + "/"):
                raise ReleaseError(f"archive member {m.name!r} is outside {top}/")
            rel = name[len(top) + 1:]
            if m.issym() or m.islnk():
                parts = rel.split("/")
                if len(parts) == 2 and parts[0] == "subprojects":
                    dropped.append(rel)
                    continue
                target = os.path.normpath(os.path.join(os.path.dirname(rel), m.linkname))
                if m.islnk() or os.path.isabs(m.linkname) or target.startswith(".."):
                    raise ReleaseError(f"{top}/{rel} links outside the archive ({m.linkname})")
                entries[name] = (m, None)
            elif m.isdir():
                entries[name] = (m, None)
            elif m.isfile():
                entries[name] = (m, t.extractfile(m).read())
            else:
                raise ReleaseError(f"{top}/{rel}: unsupported archive member type")
    for rel, data in extra_files.items():
        name = f"{top}/{rel}"
        if name in entries:
            raise ReleaseError(f"{name} is committed in the package, but the release generates it")
        parent = os.path.dirname(name)
        while parent and parent not in entries:
            d = tarfile.TarInfo(parent)
            d.type = tarfile.DIRTYPE
            entries[parent] = (d, None)
            parent = os.path.dirname(parent)
        f = tarfile.TarInfo(name)
        f.mode = 0o644
        entries[name] = (f, data)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as out:
        for name in sorted(entries):
            m, data = entries[name]
            ti = tarfile.TarInfo(name)
            ti.mtime = mtime
            ti.uid = ti.gid = 0
            ti.uname = ti.gname = ""
            if m.isdir():
                ti.type, ti.mode = tarfile.DIRTYPE, 0o755
                out.addfile(ti)
            elif m.issym():
                ti.type, ti.mode, ti.linkname = tarfile.SYMTYPE, 0o777, m.linkname
                out.addfile(ti)
            else:
                ti.mode = 0o755 if m.mode & 0o111 else 0o644
                ti.size = len(data)
                out.addfile(ti, io.BytesIO(data))
    gz = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=gz, mtime=0, compresslevel=9) as z:
        z.write(buf.getvalue())
    return gz.getvalue(), sorted(dropped)


def extract_archive(path, dest):
    """Unpacks a release archive, refusing members that would land outside."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "r:*") as t:
        inside = str(dest) + os.sep
        for m in t.getmembers():
            target = os.path.normpath(os.path.join(dest, m.name))
            if os.path.isabs(m.name) or not target.startswith(inside):
                raise ReleaseError(f"{path}: member {m.name!r} escapes the archive")
            if m.islnk() or (m.issym() and (os.path.isabs(m.linkname) or not os.path.normpath(
                    os.path.join(os.path.dirname(target), m.linkname)).startswith(inside))):
                raise ReleaseError(f"{path}: link {m.name!r} escapes the archive")
            if not (m.isfile() or m.isdir() or m.issym()):
                raise ReleaseError(f"{path}: member {m.name!r} is not a file, directory or link")
        if hasattr(tarfile, "data_filter"):
            t.extractall(dest, filter="data")
        else:
            t.extractall(dest)


# ---------------------------------------------------------------- registry

class RegistryError(Exception):
    pass


class Registry:
    """The protocol of release/REGISTRY.md."""

    def __init__(self, base, timeout=30):
        self.base = base
        self.timeout = timeout
        self.headers = {"User-Agent": "mimprof-release/1"}
        token = os.environ.get("MIMPROF_REGISTRY_TOKEN")
        user = os.environ.get("MIMPROF_REGISTRY_USER")
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        elif user:
            pw = os.environ.get("MIMPROF_REGISTRY_PASSWORD", "")
            self.headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode()
        host = urllib.parse.urlparse(base).hostname or ""
        handlers = [urllib.request.ProxyHandler({})] if host in ("127.0.0.1", "localhost", "::1") else []
        self.opener = urllib.request.build_opener(*handlers)

    def _request(self, method, path, data=None, headers=None):
        url = f"{self.base}/{path}"
        h = dict(self.headers)
        h.update(headers or {})
        req = urllib.request.Request(url, data=data, method=method, headers=h)
        try:
            with self.opener.open(req, timeout=self.timeout) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as e:
            body = e.read()[:200].decode("utf-8", "replace").strip()
            raise RegistryError(f"{method} {url}: HTTP {e.code} {e.reason}" + (f": {body}" if body else ""))
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise RegistryError(f"{method} {url}: registry unreachable ({reason})")

    def index(self):
        """{(package, version): entry}"""
        _, body = self._request("GET", "index.json", headers={"Cache-Control": "no-cache"})
        try:
            doc = json.loads(body)
            out = {}
            for e in doc["entries"]:
                e = {k: e[k] for k in ("package", "version", "archive", "size", "sha256")}
                out[(e["package"], e["version"])] = e
            return out
        except (ValueError, KeyError, TypeError) as err:
            raise RegistryError(f"GET {self.base}/index.json: malformed index ({err})")

    def put(self, name, version, archive, data):
        self._request("PUT", f"{name}/{version}/{archive}", data=data,
                      headers={"Content-Type": "application/gzip",
                               "X-Checksum-Sha256": sha256_bytes(data)})

    def download(self, name, version, archive):
        return self._request("GET", f"{name}/{version}/{archive}")[1]


# ---------------------------------------------------------------- steps

def load_manifest(rel):
    path = rel.step_dir("pack") / "manifest.json"
    if not path.is_file():
        raise ReleaseError(f"no packed archives in {path.parent}: run `pack` first")
    man = read_json(path)
    want = {p.name: p.dir for p in rel.packages}
    if man["commit"] != rel.commit or man["version"] != rel.version or \
            man["registry"] != rel.registry or {p["name"]: p["dir"] for p in man["packages"]} != want:
        raise ReleaseError(f"{path} was packed for another commit, version, registry or package set: "
                           "run `pack` again")
    for p in man["packages"]:
        a = path.parent / "archives" / p["archive"]
        if not a.is_file() or sha256_file(a) != p["sha256"]:
            raise ReleaseError(f"{a}: missing or changed since `pack`: run `pack` again")
    return man


def step_plan(rel):
    log(f"mimprof {rel.version}: tag {rel.tag}, commit {rel.commit[:12]} ({rel.origin} run)")
    log(f"registry: {rel.registry or '(none given)'}")
    log(f"work directory: {rel.workdir}")
    for i, p in enumerate(rel.packages, 1):
        log(f"  {i}. {p.dir:<18} {p.name} {p.version} -> {p.archive}")
        log(f"     needs: {', '.join(p.siblings) or 'no sibling'}; provides: {', '.join(sorted(p.provides))}")
    missing = [d for d in PACKAGE_DIRS if d not in {p.dir for p in rel.packages}]
    if missing:
        log(f"  not in this commit (no meson.build): {', '.join(missing)}")
    if rel.crates:
        log(f"crates ({RUST_DIR}/, crates.io), after the C packages they link:")
        for i, c in enumerate(rel.crates, len(rel.packages) + 1):
            log(f"  {i}. {c.dir:<18} {c.name} {c.version} -> {c.archive}")
            log(f"     after: {', '.join(c.after) or 'no C package'}; "
                f"crates: {', '.join(sorted(x for x in c.crates if x in {d.name for d in rel.crates})) or 'none'}")
    notes = rel.step_dir("plan") / "release-notes.md"
    notes.parent.mkdir(parents=True, exist_ok=True)
    notes.write_text(rel.notes + "\n")
    log(f"release notes ({len(rel.notes.splitlines())} lines from the CHANGELOG {rel.version} section): {notes}")
    write_json(rel.step_dir("plan") / "result.json", {
        "tag": rel.tag, "version": rel.version, "commit": rel.commit, "origin": rel.origin,
        "registry": rel.registry,
        "packages": [{"dir": p.dir, "name": p.name, "siblings": p.siblings} for p in rel.packages],
        "crates": [{"dir": c.dir, "name": c.name, "after": c.after} for c in rel.crates]})


def configure_args(opts, off_for_self=False):
    return [f"-D{o}=disabled" for o in OFF_OPTIONS if o in opts] if off_for_self else []


def test_support(src, p):
    """{subprojects/test-support/<file>: bytes} of tests/support at the
    checkout `src` when package p links it, else {}."""
    if not (src / p.dir / "subprojects" / TEST_SUPPORT).is_symlink():
        return {}
    files = git(src, "ls-files", "-z", "--", "tests/support").split("\0")
    return {f"subprojects/{TEST_SUPPORT}/{f[len('tests/support/'):]}": (src / f).read_bytes()
            for f in files if f}


def step_pack(rel):
    rel.need_registry()
    out = rel.step_dir("pack")
    tmp = out / "tmp"
    shutil.rmtree(out / "archives", ignore_errors=True)
    shutil.rmtree(tmp, ignore_errors=True)
    (out / "archives").mkdir(parents=True)
    (out / "wraps").mkdir(exist_ok=True)
    for w in (out / "wraps").glob("*.wrap"):
        w.unlink()
    (out / "manifest.json").unlink(missing_ok=True)
    src = tmp / "src"
    # A private checkout of exactly the released commit: the working tree
    # may hold other people's uncommitted changes.
    run(["git", "clone", "-q", "--shared", "--no-checkout", rel.repo, src], what="git clone")
    run(["git", "-C", src, "checkout", "-q", "--detach", rel.commit], what="git checkout")
    done = {}
    entries = []
    for p in rel.packages:
        bld = tmp / f"build-{p.dir}"
        log(f"pack {p.name}: meson dist of {p.dir}/ at {rel.commit[:12]}")
        run(["meson", "setup", bld, src / p.dir, "--wrap-mode=nodownload"] + configure_args(p.options, True),
            what=f"meson setup of {p.dir} (for meson dist)")
        run(["meson", "dist", "-C", bld, "--no-tests", "--formats", "gztar"], what=f"meson dist of {p.dir}")
        raw = bld / "meson-dist" / p.archive
        if not raw.is_file():
            raise ReleaseError(f"meson dist of {p.dir} did not produce {raw.name}")
        wraps = {}
        for s in p.siblings:
            e = done[s]
            wraps[f"subprojects/{s}.wrap"] = wrap_text(
                s, e["version"], e["archive"], e["sha256"], e["provides"],
                rel.archive_url(s, e["version"], e["archive"])).encode()
        # Every entry's mtime: the time of the last commit that changed the
        # package directory, so an unchanged package packs to the same bytes
        # from a later commit too (a re-tagged release then skips it).
        mtime = int(git(rel.repo, "log", "-1", "--format=%ct", rel.commit, "--", p.dir).strip())
        data, dropped = normalize_archive(raw, p.directory, mtime, {**wraps, **test_support(src, p)})
        (out / "archives" / p.archive).write_bytes(data)
        e = {"dir": p.dir, "name": p.name, "version": p.version, "archive": p.archive,
             "sha256": sha256_bytes(data), "size": len(data), "siblings": p.siblings, "direct": p.direct,
             "provides": p.provides, "options": p.options, "method": "meson dist",
             "dropped_links": dropped, "wraps": sorted(wraps), "mtime": mtime}
        done[p.name] = e
        entries.append(e)
        (out / "wraps" / f"{p.name}.wrap").write_text(wrap_text(
            p.name, p.version, p.archive, e["sha256"], p.provides,
            rel.archive_url(p.name, p.version, p.archive)))
        log(f"  {p.archive}  sha256 {e['sha256']}  {e['size']} bytes"
            + (f"  (sibling links replaced by wraps: {', '.join(dropped)})" if dropped else ""))
    write_json(out / "manifest.json", {"version": rel.version, "tag": rel.tag, "commit": rel.commit,
                                       "commit_time": rel.commit_time, "registry": rel.registry,
                                       "packages": entries})
    shutil.rmtree(tmp, ignore_errors=True)


def sibling_setup_args(man, pkg_entry):
    """--force-fallback-for the siblings (never a system-installed copy) and
    their tests/benchmarks/... off: only this package's suites run."""
    by = {p["name"]: p for p in man["packages"]}
    args = []
    if pkg_entry["siblings"]:
        args.append("--force-fallback-for=" + ",".join(pkg_entry["siblings"]))
    for s in pkg_entry["siblings"]:
        args += [f"-D{s}:{o}=disabled" for o in OFF_OPTIONS if o in by[s]["options"]]
    return args


def build_and_test(src, bld, setup_args, what, env=None, test=True):
    run(["meson", "setup", bld, src] + setup_args, env=env, what=f"{what}: meson setup")
    run(["ninja", "-C", bld], env=env, what=f"{what}: build")
    if test:
        out = run(["meson", "test", "-C", bld, "--print-errorlogs"], env=env,
                  what=f"{what}: tests", capture=True)
        summary = [re.sub(r"\s+", " ", l.strip()) for l in out.splitlines()
                   if re.match(r"\s*(Ok|Fail|Skipped|Timeout):", l)]
        return ", ".join(summary) or "no tests defined"
    return ""


def child_env(rel):
    env = dict(os.environ)
    host = urllib.parse.urlparse(rel.registry).hostname if rel.registry else None
    if host in ("127.0.0.1", "localhost", "::1"):
        env["no_proxy"] = ",".join(filter(None, [env.get("no_proxy"), host]))
        env["NO_PROXY"] = env["no_proxy"]
    return env


def step_pretest(rel):
    man = load_manifest(rel)
    out = rel.step_dir("pretest")
    stamp = out / "result.json"
    want = {p["archive"]: p["sha256"] for p in man["packages"]}
    if stamp.is_file():
        prev = read_json(stamp)
        if prev.get("passed") and prev.get("archives") == want:
            log("pretest: these exact archives already passed (same SHA-256s); not rebuilding")
            return
    stamp.unlink(missing_ok=True)
    archives = rel.step_dir("pack") / "archives"
    results = {}
    by = {p["name"]: p for p in man["packages"]}
    for p in man["packages"]:
        tree = out / "tree" / p["dir"]
        shutil.rmtree(tree, ignore_errors=True)
        extract_archive(archives / p["archive"], tree)
        src = tree / f"{p['name']}-{p['version']}"
        cache = src / "subprojects" / "packagecache"
        for s in p["siblings"]:
            cache.mkdir(parents=True, exist_ok=True)
            shutil.copy2(archives / by[s]["archive"], cache / by[s]["archive"])
        log(f"pretest {p['name']}: standalone build of {p['archive']}"
            + (f"; local overrides (packagecache) for {', '.join(p['siblings'])}" if p["siblings"] else ""))
        summary = build_and_test(src, tree / "build", ["--wrap-mode=nodownload"] + sibling_setup_args(man, p),
                                 f"pretest of {p['name']}")
        # A direct sibling behind `required: false` that failed to resolve
        # would pass silently. (Transitive ones may be legitimately unused.)
        missing = [s for s in p["direct"] if not (src / "subprojects" / f"{s}-{by[s]['version']}").is_dir()]
        if missing:
            raise ReleaseError(f"pretest of {p['name']}: sibling(s) {', '.join(missing)} were not used by "
                               "the build (an optional dependency that failed to resolve?)")
        log(f"  ok: {summary}")
        results[p["name"]] = summary
        shutil.rmtree(tree, ignore_errors=True)
    write_json(stamp, {"passed": True, "archives": want, "commit": rel.commit, "tests": results})


def step_crates(rel):
    """`cargo package` of every published crate at the released commit, in
    plan order: the archives crates.io would get. Without verification
    (building a packaged crate needs the C libraries through pkg-config;
    the tree's `rust` suite builds and tests the same sources over them).
    Publishing to crates.io is `cargo publish -p <crate>` in this order,
    once the C packages are published."""
    out = rel.step_dir("crates")
    if not rel.crates:
        log(f"no crates: {RUST_DIR}/Cargo.toml is not in this commit")
        write_json(out / "result.json", {"crates": []})
        return
    tmp = out / "tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(out / "archives", ignore_errors=True)
    (out / "archives").mkdir(parents=True)
    src = tmp / "src"
    run(["git", "clone", "-q", "--shared", "--no-checkout", rel.repo, src], what="git clone")
    run(["git", "-C", src, "checkout", "-q", "--detach", rel.commit], what="git checkout")
    env = dict(os.environ, CARGO_TARGET_DIR=str(tmp / "target"))
    cmd = ["cargo", "package", "--locked", "--no-verify"]
    for c in rel.crates:
        cmd += ["-p", c.name]
    run(cmd, cwd=src / RUST_DIR, env=env, what="cargo package")
    entries = []
    for c in rel.crates:
        a = tmp / "target" / "package" / c.archive
        if not a.is_file():
            raise ReleaseError(f"cargo package did not produce {c.archive}")
        shutil.copy2(a, out / "archives" / c.archive)
        with tarfile.open(a) as t:
            members = sorted(m.name.split("/", 1)[1] for m in t.getmembers() if "/" in m.name)
        for need in ("Cargo.toml", "README.md", "src/lib.rs"):
            if need not in members:
                raise ReleaseError(f"{c.archive}: no {need} in the archive")
        e = {"name": c.name, "version": c.version, "archive": c.archive, "sha256": sha256_file(a),
             "size": a.stat().st_size, "after": c.after, "files": len(members)}
        entries.append(e)
        log(f"  {c.archive}  sha256 {e['sha256']}  {e['size']} bytes, {len(members)} files"
            f"  (after {', '.join(c.after)})")
    if rel.args.dry_run:
        log("dry run: nothing is uploaded to crates.io; publish them in this order with "
            + "; ".join(f"cargo publish -p {c.name}" for c in rel.crates))
    write_json(out / "result.json", {"dry_run": rel.args.dry_run, "commit": rel.commit, "crates": entries})
    shutil.rmtree(tmp, ignore_errors=True)


def step_publish(rel):
    rel.need_registry()
    man = load_manifest(rel)
    stamp = rel.step_dir("pretest") / "result.json"
    want = {p["archive"]: p["sha256"] for p in man["packages"]}
    if not stamp.is_file() or read_json(stamp).get("archives") != want or not read_json(stamp).get("passed"):
        raise ReleaseError("publish refused: these archives have not passed `pretest`")
    reg = Registry(rel.registry, timeout=rel.args.http_timeout)
    archives = rel.step_dir("pack") / "archives"
    names = [p["name"] for p in man["packages"]]
    results = []
    out = rel.step_dir("publish")

    def fail(i, check, detail):
        rest = names[i + 1:]
        write_json(out / "result.json", {"dry_run": rel.args.dry_run, "packages": results,
                                         "failed": {"package": names[i], "check": check, "detail": detail}})
        raise ReleaseError(f"publish stopped at {names[i]} ({check}): {detail}\n"
                           f"not published: {', '.join(rest) if rest else '(none; it was the last)'}")

    for i, p in enumerate(man["packages"]):
        name, ver, archive, sha = p["name"], p["version"], p["archive"], p["sha256"]
        data = (archives / archive).read_bytes()
        try:
            index = reg.index()
        except RegistryError as e:
            if rel.args.dry_run:
                log(f"dry run: {e}; would upload {archive} ({sha})")
                results.append({"package": name, "status": "would-upload"})
                continue
            fail(i, "registry index read", str(e))
        have = index.get((name, ver))
        if have and have["sha256"] != sha:
            fail(i, "existing version", f"refusing: {name} {ver} is already published with sha256 "
                 f"{have['sha256']}, the local archive has {sha}; a published version never changes "
                 "(bump the version to release different content)")
        if rel.args.dry_run:
            status = "would-skip" if have else "would-upload"
            log(f"dry run: {name} {ver}: " + ("already published with the same SHA-256, would skip"
                                             if have else f"would PUT {rel.archive_url(name, ver, archive)}"))
            results.append({"package": name, "status": status})
            continue
        if have:
            log(f"publish {name} {ver}: already published with the same SHA-256 ({sha}); skipping the upload")
            status = "skipped"
        else:
            log(f"publish {name} {ver}: PUT {rel.archive_url(name, ver, archive)} ({len(data)} bytes)")
            try:
                reg.put(name, ver, archive, data)
            except RegistryError as e:
                fail(i, "upload", str(e))
            status = "uploaded"
        # Index entry visible, with bounded polling.
        deadline = time.monotonic() + rel.args.poll_timeout
        start = time.monotonic()
        while True:
            try:
                entry = reg.index().get((name, ver))
            except RegistryError as e:
                fail(i, "index check", str(e))
            if entry:
                break
            if time.monotonic() >= deadline:
                fail(i, "index check", f"no index entry for {name} {ver} after "
                     f"{rel.args.poll_timeout:g}s of polling {rel.registry}/index.json")
            time.sleep(rel.args.poll_interval)
        if entry["sha256"] != sha or entry["archive"] != archive or int(entry["size"]) != len(data):
            fail(i, "index check", f"index lists {entry['archive']} sha256 {entry['sha256']} size "
                 f"{entry['size']}; uploaded {archive} sha256 {sha} size {len(data)}")
        log(f"  index entry visible after {time.monotonic() - start:.1f}s: sha256 and size match")
        try:
            got = reg.download(name, ver, archive)
        except RegistryError as e:
            fail(i, "download check", str(e))
        if sha256_bytes(got) != sha:
            fail(i, "download check", f"downloaded archive has sha256 {sha256_bytes(got)}, "
                 f"uploaded {sha}")
        log("  downloaded archive: same SHA-256 as uploaded")
        results.append({"package": name, "version": ver, "status": status, "sha256": sha})
    write_json(out / "result.json", {"dry_run": rel.args.dry_run, "packages": results})


def registry_wraps(rel, man, reg):
    """Wrap files generated from the registry index (never from local files);
    each entry must be the archive this release packed."""
    index = reg.index()
    wraps = {}
    for p in man["packages"]:
        e = index.get((p["name"], p["version"]))
        if not e:
            raise ReleaseError(f"{p['name']} {p['version']} is not in the registry index: run `publish`")
        if e["sha256"] != p["sha256"]:
            raise ReleaseError(f"registry lists {p['name']} {p['version']} with sha256 {e['sha256']}, "
                               f"this release packed {p['sha256']}")
        wraps[p["name"]] = wrap_text(p["name"], p["version"], e["archive"], e["sha256"], p["provides"],
                                     rel.archive_url(p["name"], p["version"], e["archive"]))
    return wraps


def check_graph(args):
    checker = rel_checker()
    out = run(["/usr/bin/python3", checker] + args, what="dependency-graph check", capture=True)
    return out.strip().splitlines()[-1]


def rel_checker():
    c = DEFAULT_REPO / "tests" / "graph" / "check_graph.py"
    if not c.is_file():
        raise ReleaseError(f"{c} is missing (the graph checker the release reuses)")
    return c


def introspect_targets(bld, subproject=None):
    out = subprocess.run(["meson", "introspect", "--targets", str(bld)], capture_output=True, text=True)
    if out.returncode != 0:
        raise ReleaseError(f"meson introspect {bld}: {out.stderr.strip()}")
    return [t for t in json.loads(out.stdout) if t.get("subproject") == subproject]


def step_verify(rel):
    rel.need_registry()
    if rel.args.dry_run:
        log("verify: skipped in a dry run (nothing was published)")
        return
    man = load_manifest(rel)
    reg = Registry(rel.registry, timeout=rel.args.http_timeout)
    wraps = registry_wraps(rel, man, reg)
    by = {p["name"]: p for p in man["packages"]}
    target = next((p for p in man["packages"] if p["dir"] == PROFILING_DIR), None)
    graph = target is not None
    if not target:
        # The most downstream package (most siblings, later on a tie).
        target = max(reversed(man["packages"]), key=lambda p: len(p["siblings"]))
        log(f"verify: profiling is not in this release; building {target['name']} (the package with "
            "the most siblings) from the registry instead, without the graph check")
    out = rel.step_dir("verify")
    shutil.rmtree(out / "tree", ignore_errors=True)
    tree = out / "tree"
    tree.mkdir(parents=True)
    data = reg.download(target["name"], target["version"], target["archive"])
    if sha256_bytes(data) != target["sha256"]:
        raise ReleaseError(f"verify: downloaded {target['archive']} sha256 {sha256_bytes(data)} != "
                           f"index {target['sha256']}")
    (tree / target["archive"]).write_bytes(data)
    extract_archive(tree / target["archive"], tree)
    src = tree / f"{target['name']}-{target['version']}"
    # The archive's wraps must be exactly the registry's: same URL and hash.
    for s in target["siblings"]:
        embedded = (src / "subprojects" / f"{s}.wrap").read_text()
        if embedded != wraps[s]:
            raise ReleaseError(f"verify: {target['archive']} carries a {s}.wrap that differs from the "
                               f"registry's:\n{embedded}\nregistry:\n{wraps[s]}")
    if (src / "subprojects" / "packagecache").exists():
        raise ReleaseError(f"verify: {target['archive']} ships a packagecache (a local override)")
    log(f"verify {target['name']}: archive from the registry; siblings "
        f"{', '.join(by[s]['name'] + ' ' + by[s]['version'] for s in target['siblings']) or '(none)'} "
        "downloaded by Meson from the registry wraps, no local overrides")
    bld = tree / "build"
    summary = build_and_test(src, bld, sibling_setup_args(man, target), f"verify of {target['name']}",
                             env=child_env(rel))
    log(f"  ok: {summary}")
    sub = src / "subprojects"
    fetched = sorted(p.name for p in sub.iterdir()
                     if p.is_dir() and p.name not in ("packagecache", TEST_SUPPORT)) \
        if sub.is_dir() else []
    want_dirs = sorted(f"{s}-{by[s]['version']}" for s in target["siblings"])
    if fetched != want_dirs:
        raise ReleaseError(f"verify: subprojects used {fetched}, expected exactly {want_dirs}")
    result = {"package": target["name"], "tests": summary, "subprojects": fetched}
    if graph:
        libs = [t for t in introspect_targets(bld) if t["type"] == "shared library"
                and t["name"] == target["name"]]
        if not libs:
            raise ReleaseError(f"verify: no shared library target '{target['name']}' in {bld}")
        args = []
        for f in ALLOCATOR_PARTS:
            args += ["--forbid", f]
        args += ["--pc-path", str(bld / "meson-private"), "--pc", target["name"]]
        for t in libs:
            args += ["--elf", t["filename"][0]]
        try:
            verdict = check_graph(args)
        except ReleaseError as e:
            raise ReleaseError(f"verify: the default dependency graph of {target['name']} holds an "
                               f"allocator package:\n{e}")
        log(f"  default dependency graph (.pc + NEEDED): no allocator package ({verdict})")
        result["graph"] = verdict
    write_json(out / "result.json", result)
    shutil.rmtree(tree, ignore_errors=True)


CONSUMER_HEAD = """\
# Generated by mimprof release/release.py: an isolated consumer of the
# published packages, resolved only through subprojects/*.wrap.
project('{name}', 'c', default_options: ['c_std=c11', 'warning_level=3'])
"""


def consumer_setup(rel, man, used, extra=()):
    by = {p["name"]: p for p in man["packages"]}
    args = ["--force-fallback-for=" + ",".join(used)]
    for s in used:
        args += [f"-D{s}:{o}=disabled" for o in CONSUMER_OFF_OPTIONS if o in by[s]["options"]]
    return args + list(extra)


def step_consumer_test(rel):
    rel.need_registry()
    man = load_manifest(rel)
    if rel.args.dry_run:
        log("consumer-test: skipped in a dry run (nothing was published)")
        print_consumer_info(rel, man, None)
        return
    reg = Registry(rel.registry, timeout=rel.args.http_timeout)
    wraps = registry_wraps(rel, man, reg)
    by = {p["name"]: p for p in man["packages"]}
    by_dir = {p["dir"]: p for p in man["packages"]}
    out = rel.step_dir("consumer-test")
    shutil.rmtree(out / "projects", ignore_errors=True)
    contract = rel.show("tests/contracts/contract.c")
    if contract is None:
        raise ReleaseError("tests/contracts/contract.c is missing at the released commit")
    env = child_env(rel)
    results = {}
    sys_name = by_dir["sys"]["name"]
    prof = by_dir.get(PROFILING_DIR)

    def project(pname, meson_build, files, used, extra=()):
        d = out / "projects" / pname
        (d / "subprojects").mkdir(parents=True)
        closure = []
        for u in used:
            closure += [s for s in by[u]["siblings"] + [u] if s not in closure]
        for s in closure:
            (d / "subprojects" / f"{s}.wrap").write_text(wraps[s])
        (d / "meson.build").write_text(CONSUMER_HEAD.format(name=pname) + meson_build)
        for fname, text in files.items():
            (d / fname).write_text(text)
        summary = build_and_test(d, d / "build", consumer_setup(rel, man, closure, extra), pname, env=env)
        got = sorted(p.name for p in (d / "subprojects").iterdir() if p.is_dir())
        want = sorted(f"{s}-{by[s]['version']}" for s in closure) + ["packagecache"]
        if got != want:
            raise ReleaseError(f"{pname}: subprojects {got}, expected exactly {want}")
        return d, summary

    for prov in PROVIDERS:
        pname = f"consumer-{prov}"
        body = (f"sys_dep = dependency('{sys_name}-{prov}')\n"
                "criterion = dependency('criterion')\nthreads = dependency('threads')\n"
                f"contract = executable('contract-{prov}', 'contract.c',\n"
                f"  c_args: ['-DCONTRACT_PROVIDER=mp_sys_{prov}', '-DCONTRACT_INCLUDE=<mimprof/sys.h>'],\n"
                "  dependencies: [sys_dep, criterion, threads])\n"
                f"test('contract-{prov}', contract, timeout: 300)\n")
        files = {"contract.c": contract}
        used = [sys_name]
        if prof:
            body += (f"prof_dep = dependency('{prof['name']}')\n"
                     f"test('profile-roundtrip-{prov}', executable('roundtrip', 'roundtrip.c',\n"
                     f"  c_args: ['-DROUNDTRIP_PROVIDER=mp_sys_{prov}'],\n"
                     "  dependencies: [prof_dep, sys_dep]))\n")
            files["roundtrip.c"] = (TOOL_DIR / "consumer" / "roundtrip.c").read_text()
            used.append(prof["name"])
        log(f"consumer-test {pname}: {', '.join(used)} through registry wraps; shared contract suite"
            + (" + profile round trip" if prof else ""))
        d, summary = project(pname, body, files, used, [f"-D{sys_name}:{prov}=enabled"])
        other = [p for p in PROVIDERS if p != prov]
        verdict = check_graph(sum((["--forbid", o] for o in other), []) +
                              ["--elf", str(d / "build" / f"contract-{prov}")])
        log(f"  ok: {summary}; the {prov} contract binary links no {', '.join(other)} ({verdict})")
        results[pname] = summary
    alloc = by_dir.get("allocator")
    if alloc:
        pname = "consumer-allocator-only"
        body = (f"alloc_dep = dependency('{alloc['name']}')\n"
                "test('allocator-only', executable('alloc_only', 'alloc_only.c', dependencies: alloc_dep))\n")
        log(f"consumer-test {pname}: only {alloc['name']} (+ {', '.join(alloc['siblings'])}); "
            "nothing of the profiler may be fetched or linked")
        d, summary = project(pname, body, {"alloc_only.c": (TOOL_DIR / "consumer" / "alloc_only.c").read_text()},
                             [alloc["name"]])
        verdict = check_graph(sum((["--forbid", f] for f in PROFILER_PARTS), []) +
                              ["--elf", str(d / "build" / "alloc_only")])
        log(f"  ok: {summary}; no profiler component in its graph ({verdict})")
        results[pname] = summary
    write_json(out / "result.json", {"passed": True, "projects": results})
    shutil.rmtree(out / "projects", ignore_errors=True)
    print_consumer_info(rel, man, wraps)


def print_consumer_info(rel, man, wraps):
    out = rel.step_dir("consumer-test") / "wraps"
    if wraps is None:
        log("\nwrap files (NOT published: dry run; from the local archives):")
        wraps = {p["name"]: (rel.step_dir("pack") / "wraps" / f"{p['name']}.wrap").read_text()
                 for p in man["packages"]}
    else:
        log(f"\nall {len(man['packages'])} packages are published and verified; consumers can switch "
            "from Git to these wrap files (copy into subprojects/):")
    out.mkdir(parents=True, exist_ok=True)
    for name, text in wraps.items():
        (out / f"{name}.wrap").write_text(text)
        log(f"\n--- subprojects/{name}.wrap\n{text.rstrip()}")
    by_dir = {p["dir"]: p["name"] for p in man["packages"]}
    log("\n--- consumer meson.build snippet")
    if "allocator" in by_dir:
        log(f"alloc_dep = dependency('{by_dir['allocator']}')          # the allocator alone")
    if PROFILING_DIR in by_dir:
        log(f"prof_dep = dependency('{by_dir[PROFILING_DIR]}')         # the profiler")
    log(f"sys_dep = dependency('{by_dir['sys']}-mimalloc')           # or -jemalloc: a provider")
    log(f"(wrap files also in {out})")


# ---------------------------------------------------------------- main

def main(argv):
    ap = argparse.ArgumentParser(prog="release.py", description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("step", choices=STEPS + ["all"])
    ap.add_argument("--repo", default=str(DEFAULT_REPO), help="the workspace git repository")
    ap.add_argument("--tag", help="v<VERSION> (default: $GITHUB_REF_NAME on tag pushes, or the tag at --commit)")
    ap.add_argument("--commit", help="commit to release (default: the tag's commit, else HEAD)")
    ap.add_argument("--registry", help="registry base URL (default: $MIMPROF_REGISTRY_URL); credentials "
                    "from $MIMPROF_REGISTRY_TOKEN or $MIMPROF_REGISTRY_USER/$MIMPROF_REGISTRY_PASSWORD")
    ap.add_argument("--workdir", help="results and archives (default: <repo>/build-release/<local|ci>/v<VERSION>)")
    ap.add_argument("--changelog", help="release notes source (default: CHANGELOG.md at the commit)")
    ap.add_argument("--dry-run", action="store_true", help="no upload and no other remote change")
    ap.add_argument("--poll-timeout", type=float, default=120.0, help="seconds to wait for an index entry")
    ap.add_argument("--poll-interval", type=float, default=2.0)
    ap.add_argument("--http-timeout", type=float, default=60.0)
    args = ap.parse_args(argv[1:])
    steps = STEPS if args.step == "all" else [args.step]
    try:
        rel = Release(args)
        rel.load()
        for step in steps:
            log.open(rel.step_dir(step) / "log.txt")
            log(f"== {step}" + (" (dry run)" if args.dry_run else ""))
            t0 = time.monotonic()
            {"plan": step_plan, "pack": step_pack, "pretest": step_pretest, "crates": step_crates,
             "publish": step_publish,
             "verify": step_verify, "consumer-test": step_consumer_test}[step](rel)
            log(f"== {step}: ok ({time.monotonic() - t0:.1f}s)")
    except (ReleaseError, RegistryError) as e:
        log(f"release.py: {e}")
        log.close()
        return 1
    log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
