#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Fast tests of the release tool: the refusal rules (tag/version mismatch,
CHANGELOG section), the archive normalizer, the test registry itself and
bump_version.py. No archive is built here (see test_release.py).

Writes only under a temporary directory; the network is 127.0.0.1 only.
"""
import gzip
import hashlib
import io
import json
import re
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = Path(os.environ.get("MIMPROF_REPO", HERE.parent.parent)).resolve()
TOOL = REPO / "release" / "release.py"
BUMP = REPO / "release" / "bump_version.py"
PY = "/usr/bin/python3"
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "release"))

from registry_server import RegistryServer  # noqa: E402
import release  # noqa: E402

GIT_ID = ["-c", "user.name=release-test", "-c", "user.email=release-test@localhost",
          "-c", "commit.gpgsign=false"]


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo)] + GIT_ID + list(args), check=True,
                          capture_output=True, text=True).stdout


def git_try_show(path):
    r = subprocess.run(["git", "-C", str(REPO), "show", f"HEAD:{path}"], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


def head_version():
    return release.PROJECT_RE.search(release.strip_comments(
        git(REPO, "show", "HEAD:meson.build"))).group(2)


class Temp(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="mimprof-release-rules-"))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def tool(self, *args, repo=None):
        repo = repo or self.clone()
        r = subprocess.run([PY, str(TOOL)] + list(args) + ["--repo", str(repo), "--workdir",
                                                           str(self.tmp / "work")],
                           capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr

    def clone(self):
        """A private clone of the workspace's HEAD, to commit variations to;
        without the workspace's tags (a real v<VERSION> tag elsewhere must
        not change what these tests see)."""
        c = self.tmp / "clone"
        if c.exists():
            return c
        subprocess.run(["git", "clone", "-q", "--shared", "--no-tags", str(REPO), str(c)], check=True)
        git(c, "checkout", "-q", "--detach", git(REPO, "rev-parse", "HEAD").strip())
        return c


class RuleTests(Temp):
    def changelog(self, text):
        p = self.tmp / "CHANGELOG.md"
        p.write_text(text)
        return str(p)

    def test_tag_must_equal_workspace_version(self):
        v = head_version()
        cl = self.changelog(f"# Changelog\n\n## [9.9.9] - 2030-01-01\n- x\n\n## [{v}]\n- y\n")
        rc, out = self.tool("plan", "--tag", "v9.9.9", "--commit", "HEAD", "--changelog", cl)
        self.assertEqual(rc, 1, out)
        self.assertIn(f"tag v9.9.9 does not match the workspace version {v}", out)
        self.assertIn("release refused", out)

    def test_tag_must_equal_every_package_version(self):
        v = head_version()
        c = self.clone()
        mb = c / "allocator" / "meson.build"
        mb.write_text(mb.read_text().replace(f"version: '{v}'", "version: '7.7.7'", 1))
        git(c, "commit", "-qam", "allocator at another version")
        cl = self.changelog(f"## [{v}]\n- notes\n")
        rc, out = self.tool("plan", "--tag", f"v{v}", "--commit", "HEAD", "--changelog", cl, repo=c)
        self.assertEqual(rc, 1, out)
        self.assertIn(f"allocator/meson.build: mimprof-allocator version 7.7.7 != workspace {v}", out)

    def test_missing_changelog_section_is_refused(self):
        v = head_version()
        cl = self.changelog("# Changelog\n\n## [Unreleased]\n### Added\n- things\n\n## [0.0.1]\n- old\n")
        rc, out = self.tool("plan", "--tag", f"v{v}", "--commit", "HEAD", "--changelog", cl)
        self.assertEqual(rc, 1, out)
        self.assertIn(f"has no section for {v}", out)

    def test_empty_changelog_section_is_refused(self):
        v = head_version()
        cl = self.changelog(f"## [Unreleased]\n\n## [{v}] - 2030-01-01\n\n## [0.0.1]\n- old\n")
        rc, out = self.tool("plan", "--tag", f"v{v}", "--commit", "HEAD", "--changelog", cl)
        self.assertEqual(rc, 1, out)
        self.assertIn(f"the {v} section is empty", out)

    def test_changelog_at_the_commit_gives_the_release_notes(self):
        v = head_version()
        c = self.clone()
        (c / "CHANGELOG.md").write_text(
            f"# Changelog\n\n## [Unreleased]\n\n## [{v}] - 2030-01-01\n\n### Added\n- the packages\n\n"
            f"## [0.0.1] - 2029-01-01\n- old\n\n[{v}]: https://example.invalid/v{v}\n")
        git(c, "add", "CHANGELOG.md")
        git(c, "commit", "-qm", "changelog")
        git(c, "tag", f"v{v}")
        rc, out = self.tool("plan", repo=c)  # tag found at the commit, notes from its CHANGELOG
        self.assertEqual(rc, 0, out)
        notes = (self.tmp / "work" / "plan" / "release-notes.md").read_text()
        self.assertEqual(notes, "### Added\n- the packages\n")
        (c / "CHANGELOG.md").write_text("# Changelog\n\n## [Unreleased]\n- pending\n")
        git(c, "commit", "-qam", "changelog without the section")
        rc, out = self.tool("plan", "--tag", f"v{v}", "--commit", "HEAD", repo=c)
        self.assertEqual(rc, 1, out)
        self.assertIn(f"tag v{v} points at", out)  # the tag is on the older commit
        rc, out = self.tool("plan", "--tag", f"v{v}", repo=c)  # the tag's commit: fine
        self.assertEqual(rc, 0, out)
        git(c, "tag", "-d", f"v{v}")
        rc, out = self.tool("plan", "--tag", f"v{v}", "--commit", "HEAD", repo=c)
        self.assertEqual(rc, 1, out)
        self.assertIn(f"CHANGELOG.md at {git(c, 'rev-parse', 'HEAD')[:12]} has no section for {v}", out)

    def test_changelog_missing_at_commit(self):
        v = head_version()
        c = self.clone()
        if (c / "CHANGELOG.md").exists():
            git(c, "rm", "-q", "CHANGELOG.md")
            git(c, "commit", "-qm", "no changelog")
        rc, out = self.tool("plan", "--tag", f"v{v}", "--commit", "HEAD", repo=c)
        self.assertEqual(rc, 1, out)
        self.assertIn("CHANGELOG.md at", out)
        self.assertIn("missing", out)

    def test_plan_lists_packages_in_order(self):
        v = head_version()
        cl = self.changelog(f"## [{v}]\n- notes\n")
        rc, out = self.tool("plan", "--tag", f"v{v}", "--commit", "HEAD", "--changelog", cl)
        self.assertEqual(rc, 0, out)
        listed = [line.split()[1] for line in out.splitlines()
                  if line.strip()[:2] in ("1.", "2.", "3.", "4.", "5.", "6.")]
        self.assertEqual(listed, [d for d in release.PACKAGE_DIRS if d in listed])
        self.assertEqual(listed[:2], ["sys", "allocator"])
        # the workspace's six packages, the command last (it needs the others)
        self.assertEqual(listed, ["sys", "allocator", "image", "profiling", "pyroscope-adapter",
                                  "cli"])
        needs = next(line for line in out.splitlines()[out.splitlines().index(
            next(l for l in out.splitlines() if l.strip().startswith("6."))) + 1:]
            if "needs:" in line)
        for sibling in ("mimprof-profiling", "mimprof-pyroscope", "mimprof-sys"):
            self.assertIn(sibling, needs)

    def test_plan_lists_the_crates_after_the_c_packages_they_link(self):
        v = head_version()
        cl = self.changelog(f"## [{v}]\n- notes\n")
        rc, out = self.tool("plan", "--tag", f"v{v}", "--commit", "HEAD", "--changelog", cl)
        self.assertEqual(rc, 0, out)
        lines = out.splitlines()
        crates = [l.split()[2] for l in lines if re.match(r"\s+\d+\. rust/", l)]
        self.assertEqual(crates, ["mimprof-sys", "mimprof", "pyroscope-mimprof"])  # bench: publish = false
        numbers = [int(l.split(".")[0]) for l in lines if re.match(r"\s+\d+\. ", l)]
        self.assertEqual(numbers, list(range(1, len(numbers) + 1)), "crates come after the packages")
        afters = [l for l in lines if l.strip().startswith("after:")]
        self.assertEqual(len(afters), 3)
        for a in afters:  # mimprof-sys probes both C libraries (the second behind a feature)
            self.assertIn("mimprof-profiling", a)
            self.assertIn("mimprof-pyroscope", a)
        plan = json.loads((self.tmp / "work" / "plan" / "result.json").read_text())
        self.assertEqual([c["name"] for c in plan["crates"]], crates)

    def test_crate_versions_follow_the_workspace(self):
        v = head_version()
        c = self.clone()
        ct = c / "rust" / "Cargo.toml"
        ct.write_text(ct.read_text().replace(f'version = "{v}"', 'version = "7.7.7"', 1))
        git(c, "commit", "-qam", "crates at another version")
        cl = self.changelog(f"## [{v}]\n- notes\n")
        rc, out = self.tool("plan", "--tag", f"v{v}", "--commit", "HEAD", "--changelog", cl, repo=c)
        self.assertEqual(rc, 1, out)
        self.assertIn(f"rust/Cargo.toml: workspace version 7.7.7 != {v}", out)

    def test_changelog_parser(self):
        text = ("# Changelog\n\n## [Unreleased]\n- u\n\n## [1.2.3] - 2030-01-01\n### Fixed\n- a\n\n"
                "## 1.2.2\n- b\n\n## v1.0.0\n- c\n[1.2.3]: https://x\n")
        self.assertEqual(release.changelog_section(text, "1.2.3"), "### Fixed\n- a")
        self.assertEqual(release.changelog_section(text, "1.2.2"), "- b")
        self.assertEqual(release.changelog_section(text, "1.0.0"), "- c")
        self.assertIsNone(release.changelog_section(text, "1.2"))
        self.assertIsNone(release.changelog_section(text, "9.9.9"))


def make_tar(path, entries, order, mtime, owner):
    with tarfile.open(path, "w:gz") as t:
        for name in order:
            kind, data = entries[name]
            ti = tarfile.TarInfo(name)
            ti.mtime, ti.uid, ti.gid, ti.uname, ti.gname = mtime, owner, owner, f"u{owner}", f"g{owner}"
            if kind == "dir":
                ti.type, ti.mode = tarfile.DIRTYPE, 0o775
                t.addfile(ti)
            elif kind == "link":
                ti.type, ti.linkname = tarfile.SYMTYPE, data
                t.addfile(ti)
            else:
                ti.mode = 0o775 if kind == "exe" else 0o664
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))


class NormalizeTests(Temp):
    ENTRIES = {
        "p-1.0": ("dir", None),
        "p-1.0/meson.build": ("file", b"project('p', 'c')\n"),
        "p-1.0/run.sh": ("exe", b"#!/bin/sh\n"),
        "p-1.0/subprojects": ("dir", None),
        "p-1.0/subprojects/mimprof-sys": ("link", "../../sys"),
        "p-1.0/include": ("dir", None),
        "p-1.0/include/alias.h": ("link", "real.h"),
        "p-1.0/include/real.h": ("file", b"int x;\n"),
    }

    def test_same_content_same_bytes_whatever_the_metadata(self):
        names = list(self.ENTRIES)
        a, b = self.tmp / "a.tar.gz", self.tmp / "b.tar.gz"
        make_tar(a, self.ENTRIES, names, 1000, 1000)
        make_tar(b, self.ENTRIES, list(reversed(names)), 2000, 0)
        wraps = {"subprojects/mimprof-sys.wrap": b"[wrap-file]\n"}
        da, dropped = release.normalize_archive(a, "p-1.0", 1234, wraps)
        db, _ = release.normalize_archive(b, "p-1.0", 1234, wraps)
        self.assertEqual(da, db)
        self.assertEqual(dropped, ["subprojects/mimprof-sys"])
        self.assertEqual(da[4:8], b"\0\0\0\0", "gzip header mtime is 0")
        with tarfile.open(fileobj=io.BytesIO(da)) as t:
            members = t.getmembers()
            self.assertEqual([m.name for m in members], sorted(m.name for m in members))
            for m in members:
                self.assertEqual((m.mtime, m.uid, m.gid, m.uname, m.gname), (1234, 0, 0, "", ""))
            by = {m.name: m for m in members}
            self.assertNotIn("p-1.0/subprojects/mimprof-sys", by)
            self.assertIn("p-1.0/subprojects/mimprof-sys.wrap", by)
            self.assertEqual(by["p-1.0/run.sh"].mode, 0o755)
            self.assertEqual(by["p-1.0/meson.build"].mode, 0o644)
            self.assertTrue(by["p-1.0/include/alias.h"].issym())

    def test_links_out_of_the_archive_are_refused(self):
        entries = dict(self.ENTRIES)
        entries["p-1.0/include/escape.h"] = ("link", "../../../etc/passwd")
        a = self.tmp / "a.tar.gz"
        make_tar(a, entries, list(entries), 1, 1)
        with self.assertRaisesRegex(release.ReleaseError, "links outside the archive"):
            release.normalize_archive(a, "p-1.0", 1, {})

    def test_committed_wrap_collides_with_generated(self):
        entries = dict(self.ENTRIES)
        entries["p-1.0/subprojects/mimprof-sys.wrap"] = ("file", b"x")
        a = self.tmp / "a.tar.gz"
        make_tar(a, entries, list(entries), 1, 1)
        with self.assertRaisesRegex(release.ReleaseError, "release generates it"):
            release.normalize_archive(a, "p-1.0", 1, {"subprojects/mimprof-sys.wrap": b"y"})


class RegistryServerTests(Temp):
    def req(self, method, url, data=None, headers=None):
        r = urllib.request.Request(url, data=data, method=method, headers=headers or {})
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(r, timeout=10) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def test_put_index_get_conflict(self):
        with RegistryServer(self.tmp / "reg") as srv:
            u = srv.url
            self.assertEqual(self.req("PUT", f"{u}/pkg/1.0/pkg-1.0.tar.gz", b"abc")[0], 201)
            self.assertEqual(self.req("PUT", f"{u}/pkg/1.0/pkg-1.0.tar.gz", b"abc")[0], 200)
            self.assertEqual(self.req("PUT", f"{u}/pkg/1.0/pkg-1.0.tar.gz", b"abd")[0], 409)
            code, body = self.req("GET", f"{u}/index.json")
            self.assertEqual(json.loads(body), {"entries": [{
                "package": "pkg", "version": "1.0", "archive": "pkg-1.0.tar.gz", "size": 3,
                "sha256": hashlib.sha256(b"abc").hexdigest()}]})
            self.assertEqual(self.req("GET", f"{u}/pkg/1.0/pkg-1.0.tar.gz"), (200, b"abc"))
            self.assertEqual(self.req("GET", f"{u}/pkg/1.0/other")[0], 404)

    def test_auth(self):
        with RegistryServer(self.tmp / "reg", token="s3cret") as srv:
            self.assertEqual(self.req("GET", f"{srv.url}/index.json")[0], 401)
            self.assertEqual(self.req("GET", f"{srv.url}/index.json",
                                      headers={"Authorization": "Bearer s3cret"})[0], 200)
        with RegistryServer(self.tmp / "reg2", basic="u:p") as srv:
            self.assertEqual(self.req("PUT", f"{srv.url}/a/1/a.tgz", b"x",
                                      headers={"Authorization": "Basic dTpw"})[0], 201)

    def test_faults(self):
        with RegistryServer(self.tmp / "reg", faults={"upload-500": "a", "corrupt": "b",
                                                      "wrong-sha": "c", "delay-index": "d:60"}) as srv:
            u = srv.url
            self.assertEqual(self.req("PUT", f"{u}/a/1/a.tgz", b"aaaa")[0], 500)
            for p in "bcd":
                self.assertEqual(self.req("PUT", f"{u}/{p}/1/{p}.tgz", b"data")[0], 201)
            index = {e["package"]: e for e in json.loads(self.req("GET", f"{u}/index.json")[1])["entries"]}
            good = hashlib.sha256(b"data").hexdigest()
            self.assertEqual(sorted(index), ["b", "c"])  # a failed, d not yet visible
            self.assertEqual(index["b"]["sha256"], good)
            self.assertNotEqual(self.req("GET", f"{u}/b/1/b.tgz")[1], b"data")
            self.assertNotEqual(index["c"]["sha256"], good)
        srv = RegistryServer(self.tmp / "reg3", faults={"down-at": "z"}).start()
        self.assertEqual(self.req("PUT", f"{srv.url}/y/1/y.tgz", b"y")[0], 201)
        with self.assertRaises(Exception):
            self.req("PUT", f"{srv.url}/z/1/z.tgz", b"z")
        srv.thread.join(10)
        # a server going down refuses the connection (URLError) or, when the
        # listening socket was still open as it went, resets it
        with self.assertRaises((urllib.error.URLError, ConnectionError)):
            self.req("GET", f"{srv.url}/index.json")


class BumpVersionTests(Temp):
    def test_bumps_every_package_and_keeps_check_versions_passing(self):
        root = self.tmp / "ws"
        files = ["meson.build", "DEPENDENCIES", "tests/workspace/check_versions.py"]
        files += [f"{p}/meson.build" for p in release.PACKAGE_DIRS if (REPO / p / "meson.build").is_file()]
        files += ["rust/Cargo.toml", "rust/Cargo.lock"] + [f"rust/{m}/Cargo.toml" for m in (
            "mimprof-sys", "mimprof", "pyroscope-mimprof", "bench")]
        files = [f for f in files if git_try_show(f) is not None]
        for f in files:
            (root / f).parent.mkdir(parents=True, exist_ok=True)
            (root / f).write_text(git_try_show(f))
        check = [PY, str(root / "tests/workspace/check_versions.py"), str(root)]
        before = subprocess.run(check, capture_output=True, text=True)
        # A package left behind at another version is brought along too.
        mb = root / "allocator" / "meson.build"
        mb.write_text(mb.read_text().replace(f"version: '{head_version()}'", "version: '0.0.9'", 1))
        r = subprocess.run([PY, str(BUMP), "--root", str(root), "3.4.5"], capture_output=True, text=True)
        # It passes check_versions.py unless HEAD already did not (then the
        # same problems remain and bump_version reports them).
        self.assertEqual(r.returncode, 0 if before.returncode == 0 else 1, r.stdout + r.stderr)
        for f in files:
            if f.endswith("meson.build"):
                name, version = release.PROJECT_RE.search(release.strip_comments((root / f).read_text())).groups()
                self.assertEqual(version, "3.4.5", f)
        after = subprocess.run(check, capture_output=True, text=True)
        problems = lambda out: [l for l in out.splitlines() if not l.startswith("checked ")]  # noqa: E731
        self.assertEqual(problems(after.stdout), problems(before.stdout))
        self.assertEqual(after.returncode, before.returncode)
        if (root / "rust" / "Cargo.toml").is_file():
            ws = (root / "rust" / "Cargo.toml").read_text()
            self.assertIn('[workspace.package]\nversion = "3.4.5"', ws)
            self.assertIn('path = "mimprof-sys", version = "=3.4.5"', ws)
            self.assertNotIn(f'"={head_version()}"', ws)
            lock = (root / "rust" / "Cargo.lock").read_text()
            for crate in ("mimprof-sys", "mimprof", "pyroscope-mimprof"):
                self.assertIn(f'name = "{crate}"\nversion = "3.4.5"\n', lock)
        r = subprocess.run([PY, str(BUMP), "--root", str(root), "3.4"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)


if __name__ == "__main__":
    if subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        print(f"{REPO} is not a git checkout: skipped")
        sys.exit(77)
    unittest.main(verbosity=2)
