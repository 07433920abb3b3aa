#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""End-to-end tests of the release pipeline on the real workspace (its HEAD
commit), against the loopback registry of registry_server.py.

The archives are packed and pretested once per session into a shared
directory (MIMPROF_RELEASE_CACHE, inside the meson build dir); each test
copies that and runs the step it is about against a fresh registry. The
archives embed the registry URL (their sibling wraps), so every test's
registry listens on the same loopback port, chosen once per session.

Writes only under the cache directory and a temporary directory; the
network is 127.0.0.1 only.
"""
import hashlib
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = Path(os.environ.get("MIMPROF_REPO", HERE.parent.parent)).resolve()
TOOL = REPO / "release" / "release.py"
PY = "/usr/bin/python3"
sys.path.insert(0, str(HERE))
from registry_server import RegistryServer  # noqa: E402


class S:
    """Session state, set up once in setUpModule."""
    root = None      # cache dir
    repo = None      # tag-less clone of the workspace at HEAD
    commit = None
    version = None
    port = None
    base = None
    changelog = None
    shared = None    # packed + pretested work directory
    packages = None  # manifest entries, release order
    pretest = None   # (exit status, output) of the session's pretest
    timings = {}


def free_port():
    """A free port below Linux's ephemeral range (32768-60999), so that no
    port-0 bind elsewhere (e.g. test_rules.py running in parallel) takes it
    while this session's registry is between two tests."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no free loopback port in 20000-32000")


def git(*args, env=None, stdin=None):
    return subprocess.run(["git", "-C", str(S.repo)] + list(args), check=True, capture_output=True,
                          text=True, input=stdin, env=env).stdout.strip()


def run_tool(step, workdir, *extra, env_extra=None, commit=None):
    env = dict(os.environ, no_proxy="127.0.0.1,localhost", NO_PROXY="127.0.0.1,localhost")
    for k in ("MIMPROF_REGISTRY_TOKEN", "MIMPROF_REGISTRY_USER", "MIMPROF_REGISTRY_PASSWORD",
              "MIMPROF_REGISTRY_URL", "GITHUB_REF_TYPE", "GITHUB_REF_NAME"):
        env.pop(k, None)
    env.update(env_extra or {})
    cmd = [PY, str(TOOL), step, "--repo", str(S.repo), "--commit", commit or S.commit, "--tag", f"v{S.version}",
           "--changelog", str(S.changelog), "--registry", S.base, "--workdir", str(workdir),
           "--poll-interval", "0.1", "--poll-timeout", "10", "--http-timeout", "10"] + list(extra)
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    S.timings[step] = S.timings.get(step, 0) + time.monotonic() - t0
    return r.returncode, r.stdout + r.stderr


def setUpModule():
    S.root = Path(os.environ.get("MIMPROF_RELEASE_CACHE") or tempfile.mkdtemp(prefix="mimprof-release-"))
    if S.root.exists():
        shutil.rmtree(S.root)
    S.root.mkdir(parents=True)
    S.commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip()
    S.repo = S.root / "repo"
    subprocess.run(["git", "clone", "-q", "--shared", "--no-tags", "--no-checkout", str(REPO), str(S.repo)],
                   check=True)
    text = subprocess.run(["git", "-C", str(REPO), "show", f"{S.commit}:meson.build"], check=True,
                          capture_output=True, text=True).stdout
    S.version = re.search(r"project\(\s*'[^']+'.*?version:\s*'([^']+)'", text, re.S).group(1)
    S.changelog = S.root / "CHANGELOG.md"
    S.changelog.write_text(f"# Changelog\n\n## [Unreleased]\n\n## [{S.version}] - 2030-01-01\n\n"
                           "### Added\n- release test notes\n")
    S.port = free_port()
    S.base = f"http://127.0.0.1:{S.port}"
    S.shared = S.root / "shared"
    rc, out = run_tool("pack", S.shared)
    if rc != 0:
        raise RuntimeError(f"session pack failed:\n{out}")
    S.packages = json.loads((S.shared / "pack" / "manifest.json").read_text())["packages"]
    # A failing package test fails the full-release test (which needs this
    # stamp); the publish-fault tests do not depend on it.
    S.pretest = run_tool("pretest", S.shared)


def tearDownModule():
    print("\nrelease test step times: " +
          ", ".join(f"{k} {v:.0f}s" for k, v in sorted(S.timings.items())), file=sys.stderr)


class ReleaseTest(unittest.TestCase):
    def setUp(self):
        self.dir = S.root / self.id().rsplit(".", 1)[-1]
        shutil.rmtree(self.dir, ignore_errors=True)
        self.work = self.dir / "work"
        (self.work / "pretest").mkdir(parents=True)
        shutil.copytree(S.shared / "pack", self.work / "pack")
        stamp = S.shared / "pretest" / "result.json"
        if stamp.is_file():
            shutil.copy(stamp, self.work / "pretest" / "result.json")
        else:
            # The publish tests are about publish: stand in for the pretest
            # (test_full_release reports the real pretest's failure).
            (self.work / "pretest" / "result.json").write_text(json.dumps({
                "passed": True, "archives": {p["archive"]: p["sha256"] for p in S.packages},
                "note": "stand-in written by tests/release/test_release.py"}))
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            try:
                s.stop()
            except Exception:
                pass

    def server(self, faults=None, root=None, **kw):
        s = RegistryServer(root or self.dir / "registry", S.port, faults, **kw).start()
        self.servers.append(s)
        return s

    def names(self):
        return [p["name"] for p in S.packages]

    def assert_stopped_at(self, rc, out, srv_or_root, pkg, check, message, published_before=True):
        """The release failed at `pkg` on `check`, and nothing after it was
        uploaded or listed."""
        self.assertEqual(rc, 1, out)
        self.assertIn(f"publish stopped at {pkg} ({check}): ", out)
        self.assertRegex(out, message)
        names = self.names()
        after = names[names.index(pkg) + 1:]
        self.assertIn("not published: " + (", ".join(after) if after else "(none"), out)
        srv = srv_or_root
        if isinstance(srv, RegistryServer):
            for path in srv.puts():
                self.assertFalse(any(f"/{a}/" in path for a in after), f"{path} uploaded after the failure")
            listed = {p for p, _ in srv.published()}
            self.assertFalse(listed & set(after), f"published after the failure: {listed & set(after)}")
            if published_before:
                self.assertTrue(set(names[:names.index(pkg)]) <= listed)

    # ------------------------------------------------------------------ pack
    def test_pack_twice_gives_identical_archives(self):
        rc, out = run_tool("pack", self.dir / "again")
        self.assertEqual(rc, 0, out)
        again = json.loads((self.dir / "again" / "pack" / "manifest.json").read_text())["packages"]
        self.assertEqual([(p["archive"], p["sha256"]) for p in again],
                         [(p["archive"], p["sha256"]) for p in S.packages])
        shas = {p["name"]: p["sha256"] for p in S.packages}
        for p in S.packages:
            a = self.dir / "again" / "pack" / "archives" / p["archive"]
            self.assertEqual(a.read_bytes(), (S.shared / "pack" / "archives" / p["archive"]).read_bytes())
            with tarfile.open(a) as t:
                members = t.getmembers()
                top = f"{p['name']}-{p['version']}"
                self.assertEqual({m.mtime for m in members}, {members[0].mtime})
                self.assertEqual({(m.uid, m.gid) for m in members}, {(0, 0)})
                self.assertTrue(all(m.name == top or m.name.startswith(top + "/") for m in members))
                links = [m.name for m in members if m.issym() and "/subprojects/" in m.name]
                self.assertEqual(links, [], "in-tree sibling links leaked into the archive")
                wraps = sorted(m.name.rsplit("/", 1)[1] for m in members
                               if re.fullmatch(re.escape(top) + r"/subprojects/mimprof-[^/]+\.wrap", m.name))
                self.assertEqual(wraps, sorted(f"{s}.wrap" for s in p["siblings"]))
                for s in p["siblings"]:
                    w = t.extractfile(f"{top}/subprojects/{s}.wrap").read().decode()
                    self.assertIn(f"source_hash = {shas[s]}", w)
                    self.assertIn(f"source_url = {S.base}/{s}/{S.version}/", w)

    def test_unchanged_packages_pack_identically_from_a_later_commit(self):
        """A later commit that changes one package (a new file in it): only
        that package's archive changes, and the archives that embed its wrap."""
        changed = next((p for p in S.packages if not any(p["name"] in q["siblings"] for q in S.packages)),
                       S.packages[-1])
        env = dict(os.environ, GIT_INDEX_FILE=str(self.dir / "index"),
                   GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@localhost", GIT_COMMITTER_NAME="t",
                   GIT_COMMITTER_EMAIL="t@localhost", GIT_COMMITTER_DATE="2031-01-01T00:00:00Z",
                   GIT_AUTHOR_DATE="2031-01-01T00:00:00Z")
        self.dir.mkdir(parents=True, exist_ok=True)
        git("read-tree", S.commit, env=env)
        blob = git("hash-object", "-w", "--stdin", stdin="release test\n")
        git("update-index", "--add", "--cacheinfo", f"100644,{blob},{changed['dir']}/RELEASE-TEST", env=env)
        later = git("commit-tree", git("write-tree", env=env), "-p", S.commit, "-m", "later", env=env)
        rc, out = run_tool("pack", self.dir / "later", commit=later)
        self.assertEqual(rc, 0, out)
        again = {p["name"]: p["sha256"] for p in
                 json.loads((self.dir / "later" / "pack" / "manifest.json").read_text())["packages"]}
        for p in S.packages:
            if p["name"] == changed["name"]:
                self.assertNotEqual(again[p["name"]], p["sha256"], p["name"])
            else:
                self.assertEqual(again[p["name"]], p["sha256"], p["name"])

    # ------------------------------------------------------------ full release
    def test_full_release_then_idempotent_rerun(self):
        rc, out = S.pretest
        self.assertEqual(rc, 0, "the session's pretest failed (a package's own tests, built from "
                         f"its archive):\n{out[-3000:]}")
        srv = self.server()
        rc, out = run_tool("all", self.work)
        self.assertEqual(rc, 0, out)
        self.assertIn("pretest: these exact archives already passed", out)
        index = {(e["package"], e["version"]): e["sha256"] for e in srv.index()["entries"]}
        self.assertEqual(index, {(p["name"], p["version"]): p["sha256"] for p in S.packages})
        self.assertIn("== verify: ok", out)
        if any(p["dir"] == "profiling" for p in S.packages):
            self.assertIn("no allocator package", out)
            self.assertEqual(out.count("shared contract suite + profile round trip"), 2)
        for c in ("consumer-mimalloc", "consumer-jemalloc", "consumer-allocator-only"):
            self.assertRegex(out, rf"consumer-test {c}: .*\n  ok: ")
        result = json.loads((self.work / "consumer-test" / "result.json").read_text())
        self.assertEqual(sorted(result["projects"]),
                         ["consumer-allocator-only", "consumer-jemalloc", "consumer-mimalloc"])
        # The wrap files come only after every check passed.
        tail = out[out.index("== consumer-test"):]
        self.assertLess(tail.index("consumer-allocator-only"), tail.index("--- subprojects/"))
        self.assertIn(f"all {len(S.packages)} packages are published and verified", out)
        for p in S.packages:
            w = (self.work / "consumer-test" / "wraps" / f"{p['name']}.wrap").read_text()
            self.assertIn(f"source_hash = {p['sha256']}", w)
        # Re-running the release: every package is skipped, nothing uploaded.
        puts = len(srv.puts())
        rc, out = run_tool("publish", self.work)
        self.assertEqual(rc, 0, out)
        for p in S.packages:
            self.assertIn(f"publish {p['name']} {p['version']}: already published with the same SHA-256", out)
        self.assertEqual(len(srv.puts()), puts)

    # ------------------------------------------------------------------ faults
    def test_upload_500_stops_then_rerun_resumes(self):
        names = self.names()
        pkg = names[1]
        srv = self.server({"upload-500": pkg})
        rc, out = run_tool("publish", self.work)
        self.assert_stopped_at(rc, out, srv, pkg, "upload", r"HTTP 500")
        self.assertEqual(srv.published(), [(names[0], S.version)])
        srv.stop()
        self.servers.remove(srv)
        srv = self.server()  # same storage, fault gone
        rc, out = run_tool("publish", self.work)
        self.assertEqual(rc, 0, out)
        self.assertIn(f"publish {names[0]} {S.version}: already published with the same SHA-256", out)
        self.assertEqual([p for p, _ in srv.published()], sorted(names))
        self.assertFalse(any(f"/{names[0]}/" in p for p in srv.puts()))

    def test_index_entry_delayed_within_the_poll_bound(self):
        pkg = self.names()[-1]
        srv = self.server({"delay-index": f"{pkg}:1.5"})
        rc, out = run_tool("publish", self.work)
        self.assertEqual(rc, 0, out)
        m = re.search(rf"publish {pkg} .*\n  index entry visible after ([0-9.]+)s", out)
        self.assertTrue(m and float(m.group(1)) >= 1.0, out)

    def test_index_entry_never_visible(self):
        pkg = self.names()[0]
        srv = self.server({"delay-index": f"{pkg}:600"})
        rc, out = run_tool("publish", self.work, "--poll-timeout", "1.5")
        self.assert_stopped_at(rc, out, srv, pkg, "index check",
                               rf"no index entry for {pkg} {S.version} after 1.5s of polling")

    def test_corrupted_stored_archive(self):
        pkg = self.names()[-2] if len(self.names()) > 2 else self.names()[0]
        srv = self.server({"corrupt": pkg})
        rc, out = run_tool("publish", self.work)
        self.assert_stopped_at(rc, out, srv, pkg, "download check",
                               r"downloaded archive has sha256 [0-9a-f]{64}, uploaded [0-9a-f]{64}")

    def test_wrong_checksum_in_index(self):
        pkg = self.names()[0]
        srv = self.server({"wrong-sha": pkg})
        rc, out = run_tool("publish", self.work)
        self.assert_stopped_at(rc, out, srv, pkg, "index check",
                               r"index lists \S+ sha256 [0-9a-f]{64} size \d+; uploaded")

    def test_server_down(self):
        rc, out = run_tool("publish", self.work)  # nothing listens on the port
        self.assert_stopped_at(rc, out, None, self.names()[0], "registry index read", r"registry unreachable")

    def test_server_goes_down_mid_release(self):
        names = self.names()
        srv = self.server({"down-at": names[1]})
        rc, out = run_tool("publish", self.work)
        self.assert_stopped_at(rc, out, srv, names[1], "upload", r"registry unreachable")
        self.assertEqual(srv.published(), [(names[0], S.version)])

    # ------------------------------------------------------------------ rules
    def test_changed_archive_for_a_published_version_is_refused(self):
        names = self.names()
        pkg = S.packages[1]
        srv = self.server()
        other = b"another archive published earlier under the same version"
        srv.seed(pkg["name"], pkg["version"], pkg["archive"], other)
        rc, out = run_tool("publish", self.work)
        self.assert_stopped_at(rc, out, srv, pkg["name"], "existing version",
                               rf"refusing: {pkg['name']} {pkg['version']} is already published with "
                               rf"sha256 {hashlib.sha256(other).hexdigest()}, the local archive has {pkg['sha256']}")
        self.assertEqual((srv.root / pkg["name"] / pkg["version"] / pkg["archive"]).read_bytes(), other)
        self.assertFalse(any(f"/{pkg['name']}/" in p for p in srv.puts()))

    def test_dry_run_touches_nothing_remote(self):
        srv = self.server()
        for step in ("crates", "publish", "verify", "consumer-test"):
            rc, out = run_tool(step, self.work, "--dry-run")
            self.assertEqual(rc, 0, out)
            if step == "crates":
                self.check_crates(out)
        self.assertEqual(srv.puts(), [])
        self.assertEqual(srv.published(), [])
        self.assertIn("NOT published: dry run", out)

    def check_crates(self, out):
        """The crates step's archives: every published crate, in plan order,
        packaged by cargo from the released commit."""
        result = json.loads((self.work / "crates" / "result.json").read_text())
        if not (REPO / "rust" / "Cargo.toml").is_file():
            self.assertEqual(result["crates"], [])
            return
        names = [c["name"] for c in result["crates"]]
        self.assertEqual(names, ["mimprof-sys", "mimprof", "pyroscope-mimprof"])
        for c in result["crates"]:
            a = self.work / "crates" / "archives" / c["archive"]
            self.assertEqual(hashlib.sha256(a.read_bytes()).hexdigest(), c["sha256"])
            with tarfile.open(a) as t:
                self.assertIn(f"{c['name']}-{c['version']}/Cargo.toml", t.getnames())
            self.assertIn("mimprof-profiling", c["after"])
        self.assertIn("nothing is uploaded to crates.io; publish them in this order with "
                      "cargo publish -p mimprof-sys; cargo publish -p mimprof", out)

    def test_publish_with_credentials(self):
        srv = self.server(token="t0ken")
        rc, out = run_tool("publish", self.work)
        self.assert_stopped_at(rc, out, srv, self.names()[0], "registry index read", r"HTTP 401")
        rc, out = run_tool("publish", self.work, env_extra={"MIMPROF_REGISTRY_TOKEN": "t0ken"})
        self.assertEqual(rc, 0, out)
        self.assertNotIn("t0ken", out)

    def test_publish_needs_a_passed_pretest(self):
        (self.work / "pretest" / "result.json").unlink()
        srv = self.server()
        rc, out = run_tool("publish", self.work)
        self.assertEqual(rc, 1, out)
        self.assertIn("publish refused: these archives have not passed `pretest`", out)
        self.assertEqual(srv.puts(), [])


if __name__ == "__main__":
    if subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        print(f"{REPO} is not a git checkout: skipped")
        sys.exit(77)
    unittest.main(verbosity=2)
