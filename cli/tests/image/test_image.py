#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`mimprof image` on images written by a process that has exited
(himg-target): the image's pprof equals the report the process took at the
same instant; offline symbolization from the mappings' files, checked by
build-id; stripped binaries and --binary-path debug files; a replaced
binary is reported, never used; damaged files are refused with the image
package's sentences; top, diff and info.

Environment: MIMPROF (the command), HIMG_TARGET, OBJCOPY, STRIP.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
import pprof_wire  # noqa: E402

MIMPROF = os.environ.get("MIMPROF", "mimprof")
TARGET = os.environ.get("HIMG_TARGET", "himg-target")
OBJCOPY = os.environ.get("OBJCOPY", "objcopy")
STRIP = os.environ.get("STRIP", "strip")
SITES = ("himg_site_keep", "himg_site_churn", "himg_site_deep")


def image(*args, **kw):
    kw.setdefault("timeout", 120)
    return subprocess.run([MIMPROF, "image", *map(str, args)], capture_output=True, text=True,
                          errors="replace", **kw)


def library_path(exe):
    """LD_LIBRARY_PATH that lets a copy of `exe` find what the build tree's
    RUNPATH ($ORIGIN-relative) found for the original."""
    out = subprocess.run(["ldd", exe], capture_output=True, text=True, check=True).stdout
    dirs = []
    for line in out.splitlines():
        parts = line.split("=>")
        if len(parts) == 2 and "mimprof" in parts[1]:
            d = os.path.dirname(parts[1].split("(")[0].strip())
            if d not in dirs:
                dirs.append(d)
    return ":".join(dirs + [os.environ.get("LD_LIBRARY_PATH", "")])


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "Build ID:" in line:
            return line.split("Build ID:")[1].strip()
    return ""


def decode(path):
    with open(path, "rb") as f:
        return pprof_wire.decode_profile(f.read())


def by_stack(profile):
    """{(locations, labels): values}, locations as (address, mapping
    filename, mapping build-id, lines): independent of ids and order."""
    maps = {m["id"]: m for m in profile["mappings"]}
    out = {}
    for _, values, labels, locs in profile["samples"]:
        key = (tuple((l["address"], maps.get(l["mapping"], {}).get("filename"),
                      maps.get(l["mapping"], {}).get("build_id"), tuple(l["lines"]))
                     for l in locs), tuple(sorted(labels.items())))
        assert key not in out, key
        out[key] = values
    return out


def mappings(profile):
    return sorted((m["start"], m["limit"], m["offset"], m["filename"], m["build_id"])
                  for m in profile["mappings"])


def functions(profile):
    return {n for frames, _, _, _ in profile["samples"] for n in frames}


class ImageTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="himg-py-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def path(self, *names):
        return os.path.join(self.tmp, *names)

    def run_target(self, exe=TARGET, mode="functions", copies=0, env=None):
        img, rep = self.path("a.mpimg"), self.path("a.pb")
        r = subprocess.run([exe, img, rep, mode, str(copies)], capture_output=True, text=True,
                           env=env, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        return img, rep

    def pprof(self, img, *extra, name="out.pb.gz"):
        out = self.path(name)
        r = image("pprof", img, "-o", out, *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        return decode(out), r.stderr

    def assert_same_profile(self, live, off):
        self.assertEqual(live["types"], off["types"])
        self.assertEqual(live["period"], off["period"])
        self.assertEqual(live["period_type"], off["period_type"])
        self.assertEqual(mappings(live), mappings(off))
        a, b = by_stack(live), by_stack(off)
        self.assertEqual(set(a), set(b))
        for k in a:
            for i, (x, y) in enumerate(zip(a[k], b[k])):
                # interval sums may be added in another order (a last-bit
                # difference can move a rounding); live sums never are
                self.assertLessEqual(abs(x - y), 1 if i < 2 else 0, (k, a[k], b[k]))

    # ------------------------------------------------------------ equality

    def test_pprof_equals_the_live_report(self):
        # symbolize=lines needs libdw: without it the session refuses to
        # start (MP_PROF_E_UNSUPPORTED), which test_platform.c checks.
        lines = ("lines",) if os.environ.get("HIMG_HAVE_LINES", "1") == "1" else ()
        for mode in ("functions", "none") + lines:
            with self.subTest(mode=mode):
                img, rep = self.run_target(mode=mode)
                off, err = self.pprof(img)
                self.assertEqual(err, "")
                live = decode(rep)
                self.assert_same_profile(live, off)
                if mode != "none":
                    self.assertTrue(set(SITES) <= functions(off), functions(off))

    def test_symbolize_option_overrides_the_image(self):
        img, _ = self.run_target(mode="none")
        off, _ = self.pprof(img, "--symbolize", "functions")
        self.assertTrue(set(SITES) <= functions(off))

    # ---------------------------------------------- offline symbolization

    def copy_target(self, dirname):
        d = self.path(dirname)
        os.makedirs(d)
        exe = os.path.join(d, "himg-target")
        shutil.copy2(TARGET, exe)
        env = dict(os.environ, LD_LIBRARY_PATH=library_path(TARGET))
        return exe, env

    def test_stripped_binary_and_a_debug_file_under_binary_path(self):
        exe, env = self.copy_target("bin")
        bid = build_id(exe)
        self.assertTrue(bid)
        dbg = self.path("debug", ".build-id", bid[:2], bid[2:] + ".debug")
        os.makedirs(os.path.dirname(dbg))
        subprocess.run([OBJCOPY, "--only-keep-debug", exe, dbg], check=True)
        subprocess.run([STRIP, "--strip-all", exe], check=True)
        self.assertEqual(build_id(exe), bid)
        img, _ = self.run_target(exe=exe, env=env)

        stripped, _ = self.pprof(img, name="stripped.pb")
        self.assertFalse(set(SITES) & functions(stripped), functions(stripped))
        main = [m for m in stripped["mappings"] if m["filename"] == os.path.realpath(exe)]
        self.assertEqual(len(main), 1, stripped["mappings"])
        self.assertEqual(main[0]["build_id"], bid)
        # the application's frames keep their addresses in that mapping
        in_main = [l for l in stripped["locations"].values() if l["mapping"] == main[0]["id"]]
        self.assertTrue(in_main)
        for l in in_main:
            self.assertTrue(main[0]["start"] <= l["address"] < main[0]["limit"], l)

        named, err = self.pprof(img, "--binary-path", self.path("debug"), name="named.pb")
        self.assertTrue(set(SITES) <= functions(named), (functions(named), err))
        self.assertEqual(by_stack(stripped).keys() and len(stripped["samples"]),
                         len(named["samples"]))

    def test_moved_binary_found_by_basename_under_binary_path(self):
        exe, env = self.copy_target("bin")
        img, _ = self.run_target(exe=exe, env=env)
        os.makedirs(self.path("moved"))
        shutil.move(exe, self.path("moved", "himg-target"))
        off, err = self.pprof(img, name="gone.pb")
        self.assertIn("no such file", err)
        self.assertFalse(set(SITES) & functions(off))
        off, err = self.pprof(img, "--binary-path", self.path("moved"), name="moved.pb")
        self.assertTrue(set(SITES) <= functions(off), err)

    def test_replaced_binary_is_reported_and_not_used(self):
        exe, env = self.copy_target("bin")
        img, rep = self.run_target(exe=exe, env=env)
        bid = build_id(exe)
        # Another program under the same name: another build-id.
        other = shutil.which("true") or "/bin/true"
        os.remove(exe)
        shutil.copy2(other, exe)
        off, err = self.pprof(img, name="replaced.pb")
        self.assertIn("build-id", err)
        self.assertIn(build_id(exe) or "(none)", err)
        self.assertIn(bid, err)
        self.assertIn("not symbolized", err)
        self.assertFalse(set(SITES) & functions(off))
        # nothing from the other program either: the locations stay bare
        main = [m for m in off["mappings"] if m["filename"] == os.path.realpath(exe)]
        for l in off["locations"].values():
            if main and l["mapping"] == main[0]["id"]:
                self.assertEqual(l["lines"], [], l)
        # the mapping still says which build-id to look for
        self.assertEqual(main[0]["build_id"], bid)

    # --------------------------------------------------------------- views

    def test_top_info_and_diff(self):
        img, rep = self.run_target(copies=2)
        r = image("top", img, "-n", "0")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("himg_site_keep", r.stdout)
        self.assertIn("inuse_space", r.stdout)
        r = image("top", img, "--type", "alloc_space")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("himg_site_churn", r.stdout)

        r = image("diff", img, img + ".2")
        self.assertEqual(r.returncode, 0, r.stderr)
        grew = r.stdout.split("Grew")[1].split("Shrank")[0]
        first = grew.strip().splitlines()[2]
        self.assertTrue(first.rstrip().endswith("himg_site_keep"), r.stdout)

        r = image("info", img)
        self.assertEqual(r.returncode, 0, r.stderr)
        for word in ("snapshot", "himg-target", "live", "code(build-id, path, offset)",
                     "sample interval 4.00KiB", "seed 42"):
            self.assertIn(word, r.stdout)
        live = decode(rep)
        t = [n for n, _ in live["types"]].index("inuse_objects")
        samples = sum(1 for _, v, l, _ in live["samples"] if v[t] and "__delta__" not in l)
        self.assertGreater(samples, 0)

    # ------------------------------------------------------------ refusals

    def test_damaged_and_foreign_files_are_refused(self):
        img, _ = self.run_target()
        with open(img, "rb") as f:
            data = bytearray(f.read())
        bad = self.path("bad.mpimg")
        cases = []
        flipped = bytearray(data)
        flipped[len(data) - 20] ^= 0x10
        cases.append((bytes(flipped), "image checksum mismatch"))
        cases.append((bytes(data[: len(data) // 3]), "image is corrupt"))
        incomplete = bytearray(data)
        incomplete[16:24] = (0x454C504D4F434E49).to_bytes(8, sys.byteorder)
        cases.append((bytes(incomplete), "image is incomplete"))
        cases.append((b"hello, not an image\n" * 20, "not an image"))
        for blob, want in cases:
            with open(bad, "wb") as f:
                f.write(blob)
            for cmd in (["pprof", bad, "-o", self.path("x.pb")], ["top", bad], ["info", bad]):
                r = image(*cmd)
                self.assertEqual(r.returncode, 1, (cmd, want, r.stdout, r.stderr))
                self.assertIn(want, r.stderr, cmd)
                self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertFalse(os.path.exists(self.path("x.pb")))
        r = image("diff", img, bad)
        self.assertEqual(r.returncode, 1)
        self.assertIn("not an image", r.stderr)

    def test_usage_errors(self):
        self.assertEqual(image().returncode, 2)
        self.assertEqual(image("frobnicate", "x").returncode, 2)
        img, _ = self.run_target()
        r = image("pprof", img)
        self.assertEqual(r.returncode, 2)
        self.assertIn("-o", r.stderr)
        self.assertEqual(image("diff", img).returncode, 2)
        self.assertEqual(image("top", img, "--symbolize", "maybe").returncode, 2)
        self.assertEqual(image("top", img, "--binary-path", self.path("nope")).returncode, 2)
        self.assertEqual(image("top", img, "--type", "nope").returncode, 1)
        r = image("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("--binary-path", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
