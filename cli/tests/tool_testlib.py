# SPDX-License-Identifier: MIT
"""Shared helpers of the mimprof command's tests (standard library only)."""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pprof_wire  # noqa: E402

MIMPROF = os.environ.get("MIMPROF", "mimprof")
EXAMPLE = os.environ.get("MIMPROF_EXAMPLE", "")
SVG_NS = "{http://www.w3.org/2000/svg}"

# Every profiled program in these tests samples from a fixed seed (the
# preload reads MIMPROF_SEED; `mimprof run` passes it through), so each
# estimate checked against a tolerance is the same on every run: a
# statistical bound then can never fail at random. Tests that need other
# seeds set their own.
os.environ.setdefault("MIMPROF_SEED", "12345")


HANG_DUMP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                         "support", "hang_dump.sh")


def dump_stacks(pid):
    """The stacks of every thread of pid and of its descendants (gdb), as
    text: what a test prints before it ends a process that hung, so that
    the log names the hang's cause."""
    if not os.path.exists(HANG_DUMP):
        return "(no %s)" % HANG_DUMP
    r = subprocess.run(["sh", HANG_DUMP, str(pid)], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, errors="replace", timeout=600)
    return r.stdout


def mimprof(*args, check=False, timeout=120, **kw):
    """Runs mimprof; returns CompletedProcess with text stdout/stderr. A run
    that outlives `timeout` has its stacks dumped, is killed, and raises
    subprocess.TimeoutExpired with the stacks as its output."""
    data = kw.pop("input", None)
    if data is not None:
        kw["stdin"] = subprocess.PIPE
    with subprocess.Popen([MIMPROF, *map(str, args)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, errors="replace", **kw) as p:
        try:
            out, err = p.communicate(data, timeout=timeout)
        except subprocess.TimeoutExpired:
            stacks = dump_stacks(p.pid)
            p.kill()
            p.communicate()
            raise subprocess.TimeoutExpired(p.args, timeout, output=stacks)
    r = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    if check and r.returncode != 0:
        raise AssertionError("mimprof %s failed (%d): %s" % (args, r.returncode, r.stderr))
    return r


UNIT = {"B": 1, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3, "TiB": 1024 ** 4,
        "PiB": 1024 ** 5}


def parse_value(text):
    """'1.50MiB' -> bytes, '12' -> 12, '-3.00KiB' -> -3072."""
    m = re.fullmatch(r"([+-]?[0-9.]+)(B|KiB|MiB|GiB|TiB|PiB)?", text)
    if not m:
        raise ValueError(text)
    return float(m.group(1)) * UNIT.get(m.group(2) or "B", 1)


def rounding(v):
    """The largest error of a value printed by mimprof: 2 decimals of its
    binary unit (0.5 for plain bytes/counts)."""
    v = abs(v)
    if v < 1024:
        return 0.5
    scale = 1024
    while v >= scale * 1024:
        scale *= 1024
    return 0.005 * scale + 1e-9


def parse_top(text):
    """Rows of `mimprof top`: [(flat, flat%, sum%, cum, cum%, name)]."""
    rows = []
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.split()[:1] == ["flat"]) + 1
    for line in lines[start:]:
        parts = line.split(None, 5)
        rows.append((parse_value(parts[0]), float(parts[1].rstrip("%")),
                     float(parts[2].rstrip("%")), parse_value(parts[3]),
                     float(parts[4].rstrip("%")), parts[5]))
    return rows


def parse_diff(text):
    """{'grew': [(flat_delta, cum_delta, base, new, name)], 'shrank': [...]}"""
    out, cur = {"grew": [], "shrank": []}, None
    for line in text.splitlines():
        if line.startswith("Grew"):
            cur = "grew"
        elif line.startswith("Shrank"):
            cur = "shrank"
        elif cur and line.split()[:1] not in (["flat"], []):
            p = line.split(None, 4)
            out[cur].append((parse_value(p[0]), parse_value(p[1]), parse_value(p[2]),
                             parse_value(p[3]), p[4]))
    return out


def svg_frames(path):
    """Frames of a flame graph: [{'name', 'x', 'w', 'y', 'v', 'fx', 'fw', 'd', 'fill', 'title', 'text'}]."""
    root = ET.parse(path).getroot()
    frames = []
    for g in root.iter(SVG_NS + "g"):
        if "f" not in (g.get("class") or "").split():
            continue
        rect = g.find(SVG_NS + "rect")
        title = g.find(SVG_NS + "title").text
        frames.append({
            "name": re.sub(r" \([^()]*\)$", "", title), "title": title,
            "x": float(rect.get("x")), "w": float(rect.get("width")), "y": float(rect.get("y")),
            "fill": rect.get("fill"), "v": int(g.get("data-v")),
            "fx": float(g.get("data-x")), "fw": float(g.get("data-w")), "d": int(g.get("data-d")),
            "text": g.find(SVG_NS + "text").text or "",
            "merged": "merged" in g.get("class").split(),
        })
    return root, frames


def reports(d, pid=None, peak=False):
    """{pid: [paths by seq]} of the heap.<pid>.<seq>.pb.gz files `mimprof run`
    wrote in d (of one pid when given); peak=True: the heap.<pid>.<seq>.peak.pb.gz
    next to them instead."""
    out = {}
    for p in glob.glob(os.path.join(d, "heap.*.pb.gz")):
        m = re.fullmatch(r"heap\.(\d+)\.(\d+)\.%spb\.gz" % (r"peak\." if peak else ""),
                         os.path.basename(p))
        if m:
            out.setdefault(int(m.group(1)), []).append((int(m.group(2)), p))
    out = {k: [p for _, p in sorted(v)] for k, v in out.items()}
    return out if pid is None else out.get(pid, [])


def decode(path):
    with open(path, "rb") as f:
        return pprof_wire.decode_profile(f.read())


class TempDirTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="mimprof-test-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def write(self, name, data):
        p = self.path(name)
        with open(p, "wb") as f:
            f.write(data)
        return p


def go_env(tmp):
    """Environment for running the Go toolchain in a sandbox. The build
    cache is MIMPROF_GOCACHE when set (./dev sets one): Go 1.25+ builds
    `go tool pprof` on first use (about 45 s of CPU), once per cache."""
    env = dict(os.environ)
    for k in ("HOME", "GOCACHE", "GOPATH", "GOTMPDIR"):
        d = os.path.join(tmp, k.lower())
        os.makedirs(d, exist_ok=True)
        env[k] = d
    if os.environ.get("MIMPROF_GOCACHE"):
        env["GOCACHE"] = os.environ["MIMPROF_GOCACHE"]
    env["GO111MODULE"] = "off"
    env["GOFLAGS"] = ""
    env["GOTOOLCHAIN"] = "local"
    env["CGO_ENABLED"] = "0"
    return env


def heap_profile(stacks):
    """A heap profile from [(stack leaf-first, [alloc_obj, alloc_space, inuse_obj, inuse_space])]."""
    b = pprof_wire.Builder(pprof_wire.HEAP_TYPES, ("space", "bytes"), 524288)
    for stack, values in stacks:
        b.sample(stack, values)
    return b
