#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The peer table: mimprof next to other allocators' own heap profilers
(Python 3 stdlib only).

Speed. The reference workloads (tests/bench/workload.c) run under

  mimalloc          plain mimalloc: libmimalloc.so.2 (Debian's, raw: every mimalloc row's
                    baseline)
  mimprof-allocator this project's allocator package: libmimprof-allocator-override.so
  mimprof-mimalloc  mimprof sampling over mimalloc: libmimprof-preload-mimalloc.so
  jemalloc          plain jemalloc: libjemalloc.so.2 (Debian's, built with profiling support,
                    profiling off)
  jemalloc-prof     jemalloc's profiler: MALLOC_CONF=prof:true,lg_prof_sample:19
  mimprof-jemalloc  mimprof sampling over jemalloc: libmimprof-preload-jemalloc.so
  tcmalloc          plain tcmalloc: libtcmalloc.so.4, TCMALLOC_SAMPLE_PARAMETER=0 (sampler off)
  tcmalloc-sample   tcmalloc's sampler: TCMALLOC_SAMPLE_PARAMETER=524288

mimprof runs as `mimprof run` deploys it (MIMPROF_EVERY=10s: the preload
runtime's reporter thread writes a report every 10 s and at exit, so the
cost of reporting is in the figures). Every profiler samples at the same
mean interval, 512 KiB (MIMPROF_INTERVAL=512k; the
interval in a case's name belongs to the A/B/B/A driver only; --interval
per-case uses the case's own interval for every profiler instead: 1k, 512k
and 1m are powers of two, so lg_prof_sample matches exactly). The runs are
interleaved: in each round every case runs once under every configuration,
in an order rotated from round to round. A profiler's cost is the paired
ratio of its throughput to the matching plain allocator's *in the same
round*; the table gives the median over the rounds and the range.

Accuracy. `workload population` allocates a known population (truth: objects
and requested bytes) from one function whose run-time address range it
prints, keeps it live and exits. Each profiler's exit-time heap profile is
decoded here, the stacks through that function are kept, and their
estimated live bytes and objects are compared with the truth:

  mimprof   the pprof the preload writes at exit (MIMPROF_OUTPUT); decoded by
            the workspace's test pprof decoder (tests/support/pprof_wire.py;
            gzip or plain); inuse_space /
            inuse_objects are already unbiased by mimprof.
  jemalloc  MALLOC_CONF=...,prof_final:true,prof_prefix:<dir>/jeprof: the
            heap_v2 dump at exit; unbiased per stack as jeprof does
            (scale = 1 / (1 - exp(-avg / 2^lg_prof_sample)), avg = bytes /
            count of the stack's record). jemalloc counts usable sizes (its
            size classes), so requested-byte truth exposes that rounding too.
  tcmalloc  MallocExtension::GetHeapSample (the data gperftools serves as
            /pprof/heap; HEAPPROFILE is not the sampler, it records every
            allocation) written at exit by libmimprof-bench-tcmalloc-sample.so;
            unbiased per record as pprof does for heap_v2.

Instructions (--icount PAIRS): scripts/callgrind_peers.sh counts, under
callgrind, the instructions per malloc/free pair of every available
configuration on a fixed-count churn (tests/bench/pairs.c) and mimprof's
report at exit; its table goes into summary.json and summary.md with the
others. Exact counts: the machine's load does not change them.

Records (fresh output directory, refused when non-empty): manifest.json with
SHA-256 of every file involved, every run's command, stdout, stderr and
profile under runs/, summary.json and summary.md (the README table).

CPU affinity stays outside: taskset -c 0,1 /usr/bin/python3 scripts/bench_peers.py ...
"""

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# pprof_wire: the workspace's pprof decoder (tests/support).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
import bench_profiling_abba as abba  # noqa: E402
import pprof_wire  # noqa: E402

LIBDIR = "/usr/lib/x86_64-linux-gnu"
PEER_INTERVAL = "512k"
ICOUNT_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "callgrind_peers.sh")
# mimprof as `mimprof run` deploys it: the preload runtime with its reporter
# thread writing a report every 10 s (and at exit).
MIMPROF_EVERY = "10s"
INTERVAL_BYTES = {"1k": 1024, "512k": 524288, "1m": 1048576}

# name: (family, label)
CONFIGS = {
    "mimalloc": ("mimalloc", "mimalloc (plain)"),
    "mimprof-allocator": ("mimalloc", "mimprof-allocator override"),
    "mimprof-mimalloc": ("mimalloc", "mimprof over mimalloc"),
    "jemalloc": ("jemalloc", "jemalloc (plain)"),
    "jemalloc-prof": ("jemalloc", "jemalloc prof"),
    "mimprof-jemalloc": ("jemalloc", "mimprof over jemalloc"),
    "tcmalloc": ("tcmalloc", "tcmalloc (plain)"),
    "tcmalloc-sample": ("tcmalloc", "tcmalloc sampler"),
}
PLAIN = {"mimalloc": "mimalloc", "jemalloc": "jemalloc", "tcmalloc": "tcmalloc"}
PROFILERS = ["mimprof-mimalloc", "jemalloc-prof", "tcmalloc-sample", "mimprof-jemalloc"]
# the configurations that run a mimprof session (the override does not)
MIMPROF_SESSIONS = {"mimprof-mimalloc", "mimprof-jemalloc"}
# --icount also counts the dormant preload (no speed row of its own), after
# the sampling one
ICOUNT_EXTRA = {"mimprof-mimalloc": ["mimprof-dormant"]}

POPULATIONS = {
    # name: workload arguments
    "fixed-700B": ["population", "--objects", "2000000", "--size", "700"],
    "mixed-16B-16KiB": ["population", "--objects", "200000", "--mixed"],
}


# ------------------------------------------------------------ configuration

def lg2(n):
    lg = n.bit_length() - 1
    if 1 << lg != n:
        raise abba.UsageError(f"interval {n} is not a power of two (jemalloc needs one)")
    return lg


def config_setup(name, paths, interval_bytes, interval_text):
    """(preload list, env) of a configuration; raises UsageError naming the
    missing file when it cannot run here."""
    need = {
        "mimalloc": ["mimalloc"], "mimprof-allocator": ["override"],
        "mimprof-mimalloc": ["preload_mimalloc"],
        "jemalloc": ["jemalloc"], "jemalloc-prof": ["jemalloc"],
        "mimprof-jemalloc": ["preload_jemalloc"],
        "tcmalloc": ["tcmalloc"], "tcmalloc-sample": ["tcmalloc"],
    }[name]
    for key in need:
        p = paths.get(key)
        if not p or not os.path.isfile(p):
            raise abba.UsageError(f"{key.replace('_', '-')} not found: {p}")
    preload = [paths[k] for k in need]
    env = {}
    if name in MIMPROF_SESSIONS:
        env["MIMPROF_INTERVAL"] = interval_text
        env["MIMPROF_EVERY"] = MIMPROF_EVERY
    elif name == "jemalloc-prof":
        env["MALLOC_CONF"] = f"prof:true,lg_prof_sample:{lg2(interval_bytes)}"
    elif name == "tcmalloc":
        env["TCMALLOC_SAMPLE_PARAMETER"] = "0"
    elif name == "tcmalloc-sample":
        env["TCMALLOC_SAMPLE_PARAMETER"] = str(interval_bytes)
    return preload, env


# ------------------------------------------------------------ pprof decoding

def decode_pprof(data):
    """The parts of a pprof Profile this tool needs, as plain Python data
    (gzip or plain; ValueError when malformed)."""
    p = pprof_wire.decode(pprof_wire.maybe_gunzip(data), utf8_errors="replace")
    return {"sample_type": p.sample_types,
            "samples": [(s["locs"], s["values"]) for s in p.samples],
            "locations": {i: {"id": i, "address": loc["address"],
                              "functions": [fid for fid, _ in loc["lines"]]}
                          for i, loc in p.locations.items()},
            "functions": {i: fn["name"] for i, fn in p.functions.items()},
            "strings": p.strings, "period": p.period}


def in_range(addresses, lo, hi):
    return any(lo <= a < hi for a in addresses)


def estimate_pprof(data, pc_lo, pc_hi, function="population_alloc"):
    """Estimated live (objects, bytes) of the population in a mimprof pprof:
    samples with a frame inside [pc_lo, pc_hi) or named `function`."""
    prof = decode_pprof(data)
    names = [t for t, _ in prof["sample_type"]]
    try:
        io, ib = names.index("inuse_objects"), names.index("inuse_space")
    except ValueError:
        raise ValueError(f"no inuse_objects/inuse_space in sample types {names}")
    objects = space = 0
    for locs, vals in prof["samples"]:
        hit = False
        for lid in locs:
            loc = prof["locations"].get(lid)
            if loc is None:
                continue
            if pc_lo <= loc["address"] < pc_hi or \
                    any(prof["functions"].get(fid) == function for fid in loc["functions"]):
                hit = True
                break
        if hit and len(vals) > max(io, ib):
            objects += vals[io]
            space += vals[ib]
    return objects, space


# --------------------------------------------------- text heap profiles

_ADDR = re.compile(r"0x[0-9a-fA-F]+")


def unsample(count, size, period):
    """pprof's / jeprof's heap_v2 unbiasing of one record."""
    if count <= 0 or period <= 0:
        return float(count), float(size)
    avg = size / count
    scale = 1.0 / (1.0 - math.exp(-avg / period))
    return count * scale, size * scale


def estimate_jemalloc(text, pc_lo, pc_hi):
    """Estimated live (objects, bytes) of the population in a jemalloc
    heap_v2 dump (prof_final), unbiased per stack record as jeprof does."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("heap_v2/"):
        raise ValueError("not a jemalloc heap_v2 dump")
    period = int(lines[0].split("/", 1)[1])
    objects = space = 0.0
    for i, line in enumerate(lines):
        if not line.startswith("@"):
            continue
        addrs = [int(a, 16) for a in _ADDR.findall(line)]
        # the next "t*:" line holds the stack's totals over all threads
        for nxt in lines[i + 1:i + 3]:
            m = re.match(r"\s*t\*:\s*(\d+):\s*(\d+)\s*\[", nxt)
            if m:
                break
        else:
            continue
        if in_range(addrs, pc_lo, pc_hi):
            o, s = unsample(int(m.group(1)), int(m.group(2)), period)
            objects += o
            space += s
    return objects, space


def estimate_tcmalloc(text, pc_lo, pc_hi):
    """Estimated live (objects, bytes) in a gperftools GetHeapSample text,
    unbiased per record as pprof does for heap_v2."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("heap profile:"):
        raise ValueError("not a gperftools heap sample")
    m = re.search(r"heap_v2/(\d+)", lines[0])
    if not m:
        raise ValueError("heap sample without a heap_v2 sampling period")
    period = int(m.group(1))
    objects = space = 0.0
    for line in lines[1:]:
        m = re.match(r"\s*(\d+):\s*(\d+)\s*\[\s*\d+:\s*\d+\]\s*@(.*)", line)
        if not m:
            continue
        addrs = [int(a, 16) for a in _ADDR.findall(m.group(3))]
        if in_range(addrs, pc_lo, pc_hi):
            o, s = unsample(int(m.group(1)), int(m.group(2)), period)
            objects += o
            space += s
    return objects, space


# ------------------------------------------------------------------ speed

def rotated(seq, k):
    k %= len(seq)
    return list(seq[k:]) + list(seq[:k])


def schedule(rounds, cases, configs):
    """[(round, case, config)] interleaved: every round runs every case under
    every configuration, the configuration order rotated by round."""
    out = []
    for r in range(rounds):
        for ci, case in enumerate(cases):
            for cfg in rotated(configs, r + ci):
                out.append((r, case, cfg))
    return out


def paired_changes(results, case, config, plain):
    """Per-round change (%) of config against the plain allocator of the
    same round; rounds where either run failed are left out."""
    out = []
    for r, per_round in sorted(results.items()):
        a = per_round.get((case, plain))
        b = per_round.get((case, config))
        if a and b and a > 0:
            out.append((b / a - 1.0) * 100.0)
    return out


def fmt_change(changes):
    if not changes:
        return "n/a"
    med = statistics.median(changes)
    if len(changes) == 1:
        return f"{med:+.1f}%"
    return f"{med:+.1f}% ({min(changes):+.1f}..{max(changes):+.1f})"


def speed_table(summary):
    configs = summary["speed"]["configs"]
    results = {}
    for run in summary["speed"]["runs"]:
        tp = run.get("throughput")
        if tp:
            results.setdefault(run["round"], {})[(run["case"], run["config"])] = tp
    cols = [c for c in CONFIGS if c in configs]
    head = ["workload"]
    for c in cols:
        head.append(f"{CONFIGS[c][1]} (M ops/s)" if c in PLAIN.values() else CONFIGS[c][1])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for case in summary["speed"]["cases"]:
        row = [case]
        for c in cols:
            if c in PLAIN.values():
                vals = [results[r][(case, c)] for r in results if (case, c) in results[r]]
                row.append(f"{statistics.median(vals) / 1e6:.2f}" if vals else "n/a")
            else:
                row.append(fmt_change(paired_changes(results, case, c, PLAIN[CONFIGS[c][0]])))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def accuracy_table(summary):
    acc = summary["accuracy"]
    cols = [c for c in PROFILERS if c in acc["configs"]]
    head = ["population", "truth"] + [CONFIGS[c][1] for c in cols]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for pop in acc["populations"]:
        truth = next((r for r in acc["runs"] if r["population"] == pop and r.get("truth")), None)
        for what, key in (("bytes", "bytes_error_pct"), ("objects", "objects_error_pct")):
            row = [f"{pop}, {what}"]
            if truth:
                t = truth["truth"]
                row.append(f"{t['bytes'] / 1e6:.1f} MB" if what == "bytes" else f"{t['objects']:,}")
            else:
                row.append("n/a")
            for c in cols:
                errs = [r[key] for r in acc["runs"]
                        if r["population"] == pop and r["config"] == c and r.get(key) is not None]
                if not errs:
                    row.append("n/a")
                elif len(errs) == 1:
                    row.append(f"{errs[0]:+.2f}%")
                else:
                    row.append(f"{statistics.mean(errs):+.2f}% "
                               f"({min(errs):+.2f}..{max(errs):+.2f}), "
                               f"mean abs {statistics.mean(abs(e) for e in errs):.2f}%")
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


# -------------------------------------------------------------- running

def find_profile(run_dir, patterns):
    found = []
    for root, _, files in os.walk(run_dir):
        for name in files:
            if any(re.fullmatch(p, name) for p in patterns):
                found.append(os.path.join(root, name))
    return sorted(found, key=lambda p: (os.stat(p).st_mtime_ns, p))  # the last is the newest


def accuracy_run(config, side, pop_args, run_dir, interval_bytes, paths, timeout):
    os.makedirs(run_dir)
    env = {}
    family = CONFIGS[config][0]
    side = abba.Side(side.label, side.exe, side.preload, dict(side.env))
    if config.startswith("mimprof-"):
        env["MIMPROF_OUTPUT"] = run_dir + os.sep  # a directory: the preload names the file
    elif config == "jemalloc-prof":
        side.env["MALLOC_CONF"] += ",prof_final:true,prof_prefix:jeprof"  # in the run's cwd
    elif config == "tcmalloc-sample":
        helper = paths.get("tcmalloc_helper")
        if not helper or not os.path.isfile(helper):
            return {"error": f"tcmalloc-sample-helper not found: {helper}"}
        side.preload = side.preload + [os.path.abspath(helper)]
        env["MIMPROF_BENCH_TCMALLOC_SAMPLE"] = os.path.join(run_dir, "tcmalloc.heap")
    rec = abba.run_once(side, pop_args, env, os.path.join(run_dir, "run"), timeout,
                        require=("objects", "bytes", "pc_lo", "pc_hi"))
    out = {"dir": run_dir, "command": rec["command"], "error": rec["error"], "family": family}
    if rec["error"]:
        return out
    res = rec["result"]
    truth = {"objects": int(res["objects"]), "bytes": int(res["bytes"])}
    lo, hi = int(res["pc_lo"], 16), int(res["pc_hi"], 16)
    out["truth"] = truth
    try:
        if config.startswith("mimprof-"):
            files = find_profile(run_dir, [r".*\.pb(\.gz)?", r".*\.pprof"])
            if not files:
                raise ValueError("no pprof written (MIMPROF_OUTPUT)")
            with open(files[-1], "rb") as f:
                objects, space = estimate_pprof(f.read(), lo, hi)
        elif config == "jemalloc-prof":
            files = find_profile(run_dir, [r"jeprof\..*\.heap"])
            if not files:
                raise ValueError("no jemalloc heap dump (prof_final)")
            with open(files[-1]) as f:
                objects, space = estimate_jemalloc(f.read(), lo, hi)
        else:
            with open(os.path.join(run_dir, "tcmalloc.heap")) as f:
                objects, space = estimate_tcmalloc(f.read(), lo, hi)
        out["profile"] = files[-1] if config != "tcmalloc-sample" else \
            os.path.join(run_dir, "tcmalloc.heap")
    except (OSError, ValueError) as e:
        out["error"] = f"profile: {e}"
        return out
    out.update({
        "estimated_objects": objects, "estimated_bytes": space,
        "objects_error_pct": (objects / truth["objects"] - 1.0) * 100.0,
        "bytes_error_pct": (space / truth["bytes"] - 1.0) * 100.0,
    })
    return out


def default_paths(build):
    return {
        "workload": os.path.join(build, "tests/bench/mimprof-bench-workload"),
        "override": os.path.join(build, "subprojects/mimprof-allocator/"
                                        "libmimprof-allocator-override.so"),
        "preload_mimalloc": os.path.join(build, "subprojects/mimprof-cli/"
                                                "libmimprof-preload-mimalloc.so"),
        "preload_jemalloc": os.path.join(build, "subprojects/mimprof-cli/"
                                                "libmimprof-preload-jemalloc.so"),
        "tcmalloc_helper": os.path.join(build, "tests/bench/"
                                               "libmimprof-bench-tcmalloc-sample.so"),
        "mimalloc": os.path.join(LIBDIR, "libmimalloc.so.2"),
        "jemalloc": os.path.join(LIBDIR, "libjemalloc.so.2"),
        "tcmalloc": os.path.join(LIBDIR, "libtcmalloc.so.4"),
    }


def build_parser():
    p = argparse.ArgumentParser(description="Peer table: throughput ratios and accuracy of "
                                            "mimprof, jemalloc's and tcmalloc's profilers.")
    p.add_argument("--build-dir", default="build", help="Meson build tree (default: build)")
    for key in ("workload", "override", "preload-mimalloc", "preload-jemalloc",
                "tcmalloc-helper", "mimalloc", "jemalloc", "tcmalloc"):
        p.add_argument("--" + key, metavar="PATH", help=f"path of {key} (default: from build dir)")
    p.add_argument("--config", action="append", choices=list(CONFIGS),
                   help="only these configurations (repeatable; default: all that exist)")
    p.add_argument("--case", action="append", help="only these cases (repeatable)")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    p.add_argument("--window", type=float, default=3.0, help="seconds per run (default 3)")
    p.add_argument("--metric", choices=abba.METRICS, default="throughput",
                   help="throughput (per wall-clock second, default) or cpu_throughput "
                        "(per CPU-second of the process)")
    p.add_argument("--interval", default=PEER_INTERVAL,
                   help="sampling interval for every profiler: 1k, 512k, 1m or per-case "
                        "(default 512k)")
    p.add_argument("--accuracy-repeats", type=int, default=3,
                   help="runs per profiler and population (default 3)")
    p.add_argument("--population", action="append", choices=list(POPULATIONS))
    p.add_argument("--no-speed", action="store_true")
    p.add_argument("--no-accuracy", action="store_true")
    p.add_argument("--icount", type=int, default=0, metavar="PAIRS",
                   help="also count instructions per malloc/free pair under callgrind "
                        "(scripts/callgrind_peers.sh, PAIRS and 2 x PAIRS; default 0: off)")
    p.add_argument("--icount-script", metavar="PATH", default=ICOUNT_SCRIPT,
                   help="the counting script (default: callgrind_peers.sh next to this one)")
    p.add_argument("--run-timeout", type=float, default=300.0)
    p.add_argument("-o", "--output", metavar="DIR", help="fresh output directory (required)")
    p.add_argument("--render", metavar="DIR",
                   help="print the tables of an earlier output directory under --metric "
                        "(runs nothing, writes nothing)")
    p.add_argument("--quiet", action="store_true")
    return p


def interval_for(case, args):
    text = abba.CASES[case][0] if args.interval == "per-case" else args.interval
    if text not in INTERVAL_BYTES:
        raise abba.UsageError(f"unsupported interval {text!r} (1k, 512k, 1m or per-case)")
    return text, INTERVAL_BYTES[text]


def rerender(outdir, metric):
    """summary.md of an earlier run, its speed table judged by `metric`
    (every speed run recorded both)."""
    with open(os.path.join(outdir, "summary.json")) as f:
        summary = json.load(f)
    key = "wall_throughput" if metric == "throughput" else "cpu_throughput"
    for run in summary["speed"]["runs"]:
        run["throughput"] = None if run.get("error") else run.get(key)
    summary["speed"]["metric"] = metric
    return render(summary)


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.render:
        sys.stdout.write(rerender(args.render, args.metric))
        return 0
    if not args.output:
        print("bench_peers.py: -o/--output DIR is required", file=sys.stderr)
        return 2
    paths = default_paths(os.path.abspath(args.build_dir))
    for key in list(paths):
        v = getattr(args, key, None)
        if v:
            paths[key] = os.path.abspath(v)

    def log(msg):
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    try:
        if args.rounds < 1 or args.accuracy_repeats < 0 or not args.window > 0:
            raise abba.UsageError("--rounds >= 1, --accuracy-repeats >= 0, --window > 0")
        cases = args.case or list(abba.CASES)
        for c in cases:
            if c not in abba.CASES:
                raise abba.UsageError(f"unknown case {c}")
        if args.interval != "per-case" and args.interval not in INTERVAL_BYTES:
            raise abba.UsageError(f"unsupported interval {args.interval!r}")
        workload = paths["workload"]
        abba.Side("workload", workload)  # validates
        wanted = args.config or list(CONFIGS)
        available, skipped = [], {}
        for c in wanted:
            try:
                config_setup(c, paths, 524288, "512k")
                available.append(c)
            except abba.UsageError as e:
                skipped[c] = str(e)
        if not available:
            raise abba.UsageError("no configuration can run: " + "; ".join(skipped.values()))
        outdir = abba.prepare_outdir(args.output)
    except abba.UsageError as e:
        print(f"bench_peers.py: {e}", file=sys.stderr)
        return 2
    for c, why in skipped.items():
        log(f"skipping {c}: {why}")

    files = {}
    for c in available:
        pre, _ = config_setup(c, paths, 524288, "512k")
        files.update(abba.Side(c, workload, pre).hashes())
    if os.path.isfile(paths["tcmalloc_helper"]):
        files.update(abba.Side("helper", workload, [paths["tcmalloc_helper"]]).hashes())
    summary = {
        "tool": "bench_peers.py", "format": 1, "started": abba.utc_now(),
        "argv": [sys.argv[0]] + list(argv if argv is not None else sys.argv[1:]),
        "machine": abba.machine_info(), "paths": paths, "files": files,
        "skipped": skipped, "interval": args.interval,
    }
    abba.write_json(os.path.join(outdir, "manifest.json"), summary)

    speed_runs = []
    if not args.no_speed:
        plan = schedule(args.rounds, cases, available)
        for n, (r, case, cfg) in enumerate(plan, 1):
            text, nbytes = interval_for(case, args)
            pre, env = config_setup(cfg, paths, nbytes, text)
            side = abba.Side(cfg, workload, pre, env)
            run_dir = os.path.join(outdir, "runs", "speed", f"round{r + 1}", case, cfg)
            rec = abba.run_once(side, [case, "--window", f"{args.window:g}"],
                                {"MIMPROF_OUTPUT": run_dir + os.sep}, run_dir,
                                args.window + args.run_timeout)
            res = rec.get("result") or {}
            if not rec["error"] and cfg in MIMPROF_SESSIONS and not res.get("samples"):
                rec["error"] = "mimprof took no samples (the session did not run)"
            entry = {"round": r, "case": case, "config": cfg, "interval": text,
                     "dir": run_dir, "command": rec["command"], "error": rec["error"],
                     "throughput": None if rec["error"] else res.get(args.metric),
                     "wall_throughput": res.get("throughput"),
                     "cpu_throughput": res.get("cpu_throughput"),
                     "samples": res.get("samples"), "dropped": res.get("dropped"),
                     "drop_pct": None if rec["error"] else abba.drop_pct(res)}
            speed_runs.append(entry)
            log(f"[{n}/{len(plan)}] round {r + 1} {case} {cfg}: " +
                (f"error {rec['error']}" if rec["error"] else
                 f"{res.get(args.metric):.0f} ({args.metric})"))
    summary["speed"] = {"configs": available, "cases": cases, "rounds": args.rounds,
                        "window": args.window, "metric": args.metric, "runs": speed_runs}

    acc_runs = []
    acc_configs = [c for c in PROFILERS if c in available]
    pops = args.population or list(POPULATIONS)
    if not args.no_accuracy:
        nbytes = INTERVAL_BYTES[PEER_INTERVAL if args.interval == "per-case" else args.interval]
        text = PEER_INTERVAL if args.interval == "per-case" else args.interval
        for pop in pops:
            for rep in range(args.accuracy_repeats):
                for cfg in rotated(acc_configs, rep):
                    pre, env = config_setup(cfg, paths, nbytes, text)
                    side = abba.Side(cfg, workload, pre, env)
                    run_dir = os.path.join(outdir, "runs", "accuracy", pop, cfg, f"rep{rep + 1}")
                    pop_args = POPULATIONS[pop] + ["--seed", str(rep + 1)]
                    res = accuracy_run(cfg, side, pop_args, run_dir, nbytes, paths,
                                       args.run_timeout)
                    res.update({"population": pop, "config": cfg, "repeat": rep + 1})
                    acc_runs.append(res)
                    log(f"accuracy {pop} {cfg} #{rep + 1}: " +
                        (f"error {res['error']}" if res.get("error") else
                         f"bytes {res['bytes_error_pct']:+.2f}%, "
                         f"objects {res['objects_error_pct']:+.2f}%"))
    summary["accuracy"] = {"configs": acc_configs, "populations": pops,
                           "interval": PEER_INTERVAL if args.interval == "per-case"
                           else args.interval, "runs": acc_runs}
    if args.icount > 0:
        log(f"instructions per pair: {args.icount_script} ({args.icount} pairs)")
        ic_configs = [x for c in available for x in [c] + ICOUNT_EXTRA.get(c, [])]
        summary["icount"] = icount_run(args.icount_script, args.build_dir, args.icount,
                                       ic_configs, outdir)
    summary["finished"] = abba.utc_now()
    abba.write_json(os.path.join(outdir, "summary.json"), summary)
    md = render(summary)
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write(md)
    sys.stdout.write(md)
    sys.stdout.write(f"records: {outdir}\n")
    failed = [r for r in speed_runs + acc_runs if r.get("error")]
    if summary.get("icount", {}).get("error"):
        failed.append(summary["icount"])
    return 1 if failed else 0


def icount_run(script, build_dir, pairs, configs, outdir):
    """Runs the callgrind counting script over `configs`; its stdout (a
    markdown table) is kept as the table, with the command and stderr."""
    cmd = ["sh", script, os.path.abspath(build_dir), str(pairs)]
    env = dict(os.environ, CONFIGS=" ".join(configs))
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    except OSError as e:
        return {"command": cmd, "error": str(e), "table": ""}
    with open(os.path.join(outdir, "icount.md"), "w") as f:
        f.write(proc.stdout)
    with open(os.path.join(outdir, "icount.stderr"), "w") as f:
        f.write(proc.stderr)
    table = proc.stdout.strip()
    error = None
    if proc.returncode != 0:
        error = f"exit status {proc.returncode}: {proc.stderr.strip()[-300:]}"
    elif not table.startswith("|"):
        error = "no table in the script's output"
    return {"command": cmd, "configs": list(configs), "pairs": pairs, "error": error,
            "table": table}


def render(summary):
    m = summary["machine"]
    out = [f"Measured {summary['started'][:10]} on {m['cpu_model']}, {m['nproc']} CPUs "
           f"(kernel {m['kernel']}).", ""]
    if summary["speed"]["runs"]:
        s = summary["speed"]
        unit = "CPU-second" if s.get("metric") == "cpu_throughput" else "second"
        out.append(f"Throughput ({s.get('metric', 'throughput')}): plain allocators in million "
                   f"operations per {unit}; profilers as the change against the matching plain "
                   f"allocator, median of {s['rounds']} interleaved rounds (range), "
                   f"{s['window']:g} s windows, sampling interval {summary['interval']}.")
        out.append("")
        out.append(speed_table(summary))
        drops = [r for r in s["runs"] if r.get("drop_pct")]
        if drops:
            worst = max(drops, key=lambda r: r["drop_pct"])
            out.append(f"Record drops: worst run {worst['config']} {worst['case']} "
                       f"{worst['drop_pct']:.2f}% of samples.")
            out.append("")
    if summary["accuracy"]["runs"]:
        a = summary["accuracy"]
        out.append(f"Accuracy: estimated live bytes/objects of a known population against the "
                   f"truth, interval {a['interval']}; mean error over the repeats (range).")
        out.append("")
        out.append(accuracy_table(summary))
    ic = summary.get("icount")
    if ic:
        out.append(f"Instructions per malloc/free pair (callgrind, whole process, "
                   f"{ic['pairs']} and {2 * ic['pairs']} pairs of tests/bench/pairs.c; "
                   f"report at exit: mimprof's mp_profiler_report):")
        out.append("")
        out.append(ic["error"] and f"not measured: {ic['error']}" or ic["table"])
        out.append("")
    if summary.get("skipped"):
        out.append("Not measured: " + "; ".join(f"{k} ({v})" for k, v in
                                                summary["skipped"].items()) + ".")
        out.append("")
    errors = [r for r in summary["speed"]["runs"] + summary["accuracy"]["runs"] if r.get("error")]
    if errors:
        out.append(f"{len(errors)} failed runs (kept under runs/): " +
                   "; ".join(f"{r.get('config')}: {r['error']}" for r in errors[:5]))
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
