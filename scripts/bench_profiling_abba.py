#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A/B/B/A overhead comparison of two frozen executables (Python 3 stdlib only).

Each side is an executable (the workload program, tests/bench/workload.c)
plus, optionally, objects to LD_PRELOAD into it (the profiler preload, the
plain allocator override, ...). For every workload case the driver runs
baseline, candidate, candidate, baseline (A/B/B/A), one process per run,
and compares the throughput the workload measured itself.

Gates (a comparison failing one is reported as rejected, with the reason,
kept on disk and not used):
  * baseline drift  |A1 - A2| / mean(A1, A2)  <= 5%
  * candidate drift |B1 - B2| / mean(B1, B2)  <= 5%
  * record drops: every run's dropped / samples <= 1%
  * every run exits 0, prints its result line, and every preload loaded
  * no file involved changed while the comparison ran (SHA-256 before/after)

--control runs the baseline on both sides; it must be accepted before a
comparison of different builds is trusted (pass its output directory to the
comparison with --control-summary, repeatable, and the summary records
whether every compared case was accepted in a control of the same baseline
files under the same metric).

Records, in a fresh output directory (an existing non-empty one is
refused): manifest.json (machine, argv, SHA-256 of every file involved: the
executables, the preload objects and every shared object they load), for
every run its exact command line, environment changes, stdout and stderr
(runs/<case>/<n>-<A|B>/), and summary.json plus summary.txt (a readable
table).

The compared figure is the workload's throughput (operations per
wall-clock second of the window); --metric cpu_throughput compares
operations per CPU-second of the whole process instead (profiler threads
included), which time spent descheduled by other load does not distort.
Every run records both, and --rejudge DIR --metric M prints an earlier
run's verdicts under the other metric without running anything.

The profiler interval of a case is the one its name gives (alloc-1m-* and
live-1m: 1 MiB, alloc-1k-64k: 1 KiB, the other cases 512 KiB) and reaches
the profiler as MIMPROF_INTERVAL; --interval overrides it for every case,
--env / --baseline-env / --candidate-env override both. MIMPROF_OUTPUT is
the run's own directory (its working directory too), so the reports a
mimprof preload writes are kept with the run.

CPU affinity and isolation are not the driver's business: run the whole
driver under them, e.g.
    taskset -c 0,1 /usr/bin/python3 scripts/bench_profiling_abba.py ...
(optionally on CPUs isolated with isolcpus= / cset shield, frequency
scaling pinned). The affinity the driver saw is recorded in the manifest.

Freeze the builds before comparing: copy each build tree (cp -a build
/tmp/frozen-a); relative RUNPATHs keep working, and the hashes in the
manifest name exactly what ran.

Exit status: 0 every comparison accepted, 1 some rejected, 2 usage error
(including a non-empty output directory).
"""

import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import shlex
import subprocess
import sys

DRIFT_GATE_PCT = 5.0
DROP_GATE_PCT = 1.0
LINE_PREFIX = "mimprof-bench "
ORDER = ("A", "B", "B", "A")
METRICS = ("throughput", "cpu_throughput")

# case -> (profiler interval the reference workloads name, reference window s)
CASES = {
    "alloc-1m-1w": ("1m", 8.0),
    "alloc-1m-2w": ("1m", 8.0),
    "alloc-1k-64k": ("1k", 8.0),
    "live-1m": ("1m", 20.0),
    "mixed-churn": ("512k", 8.0),
    "producer-consumer": ("512k", 8.0),
    "realloc-heavy": ("512k", 8.0),
}

# Inherited variables that would change what runs; removed from every run
# (a side sets what it needs explicitly).
SCRUBBED_PREFIXES = ("LD_PRELOAD", "MALLOC_CONF", "MIMALLOC_", "TCMALLOC_", "MIMPROF_",
                     "HEAPPROFILE", "HEAPCHECK", "JE_MALLOC_CONF")

PRELOAD_ERROR = re.compile(r"ld\.so: object .* cannot be preloaded|"
                           r"error while loading shared libraries")


class UsageError(Exception):
    pass


# ------------------------------------------------------------------ files

def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def loaded_objects(exe, preload):
    """Shared objects the dynamic loader resolves for exe and for each
    preload object (ldd on each file separately: ldd is a shell script, and
    an LD_PRELOAD in its environment would load the profiler into the shell).
    Empty for a program that is not a dynamic ELF executable (scripts)."""
    env = scrubbed_environ()
    paths = []
    for target in [exe] + list(preload):
        try:
            out = subprocess.run(["ldd", target], env=env, capture_output=True, text=True,
                                 timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        for line in out.splitlines():
            m = re.search(r"=>\s+(/\S+)\s+\(0x", line) or re.match(r"\s*(/\S+)\s+\(0x", line)
            if m and os.path.isfile(m.group(1)):
                paths.append(os.path.realpath(m.group(1)))
    return paths


class Side:
    """One side of a comparison: an executable, objects to preload and
    environment settings."""

    def __init__(self, label, exe, preload=(), env=None):
        self.label = label
        if not exe:
            raise UsageError(f"{label}: no executable given")
        self.exe = os.path.abspath(exe)
        if not os.path.isfile(self.exe) or not os.access(self.exe, os.X_OK):
            raise UsageError(f"{label}: not an executable file: {exe}")
        self.preload = []
        for p in preload or ():
            path = os.path.abspath(p)
            if not os.path.isfile(path):
                raise UsageError(f"{label}: preload object not found: {p}")
            self.preload.append(path)
        self.env = dict(env or {})

    def files(self):
        """Every file involved, in a stable order, without duplicates."""
        seen, out = set(), []
        for p in [self.exe] + self.preload + loaded_objects(self.exe, self.preload):
            real = os.path.realpath(p)
            if real not in seen:
                seen.add(real)
                out.append(p)
        return out

    def hashes(self):
        return {p: sha256_file(p) for p in self.files()}

    def describe(self):
        return {"exe": self.exe, "preload": self.preload, "env": self.env}


# ------------------------------------------------------------- environment

def scrubbed_environ():
    return {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED_PREFIXES)}


def parse_env_items(items, what):
    env = {}
    for item in items or ():
        if "=" not in item or item.startswith("="):
            raise UsageError(f"{what}: expected NAME=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        env[k] = v
    return env


def machine_info():
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        affinity = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    return {
        "hostname": platform.node(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpu_model": model,
        "nproc": os.cpu_count(),
        "affinity": affinity,
        "python": platform.python_version(),
    }


def loadavg():
    """1/5/15-minute load averages (other work on the machine skews runs)."""
    try:
        return list(os.getloadavg())
    except OSError:
        return None


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def prepare_outdir(path):
    """Creates a fresh output directory; refuses an existing non-empty one."""
    path = os.path.abspath(path)
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise UsageError(f"output path exists and is not a directory: {path}")
        if os.listdir(path):
            raise UsageError(f"output directory exists and is not empty: {path} "
                             "(use a fresh directory for every run)")
    os.makedirs(path, exist_ok=True)
    return path


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=False)
        f.write("\n")


# --------------------------------------------------------------- one run

def parse_result_line(text):
    """The workload's result line as a dict (numbers converted), or None."""
    found = None
    for line in text.splitlines():
        if line.startswith(LINE_PREFIX):
            found = line
    if found is None:
        return None
    out = {}
    for token in found[len(LINE_PREFIX):].split():
        if "=" not in token:
            continue
        k, v = token.split("=", 1)
        if re.fullmatch(r"-?\d+", v):
            out[k] = int(v)
        elif re.fullmatch(r"-?\d+\.\d*(e[-+]?\d+)?|-?\d+e[-+]?\d+", v):
            out[k] = float(v)
        else:
            out[k] = v
    return out


def command_text(env_set, env_unset, argv):
    parts = ["env"]
    for k in sorted(env_unset):
        parts += ["-u", k]
    parts += [f"{k}={v}" for k, v in env_set.items()]
    return shlex.join(parts + list(argv))


def run_once(side, argv_tail, extra_env, run_dir, timeout, require=("throughput",)):
    """Runs side.exe argv_tail in run_dir (its working directory, so files a
    profiler writes land next to the run's records). Returns a record."""
    os.makedirs(run_dir)
    base = scrubbed_environ()
    env_set = {}
    if side.preload:
        env_set["LD_PRELOAD"] = ":".join(side.preload)
    env_set.update(extra_env)
    env_set.update(side.env)
    env = dict(base)
    env.update(env_set)
    env_unset = sorted(k for k in os.environ if k not in base)
    argv = [side.exe] + list(argv_tail)
    cmd = command_text(env_set, env_unset, argv)
    with open(os.path.join(run_dir, "command.txt"), "w") as f:
        f.write(f"cd {shlex.quote(run_dir)} && {cmd}\n")
    record = {"side": side.label, "dir": run_dir, "command": cmd, "argv": argv,
              "env_set": env_set, "env_unset": env_unset, "started": utc_now(),
              "loadavg_before": loadavg()}
    error = None
    try:
        proc = subprocess.run(argv, env=env, cwd=run_dir, capture_output=True, timeout=timeout)
        stdout, stderr, rc = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        stdout, stderr, rc = e.stdout or b"", e.stderr or b"", None
        error = f"timed out after {timeout:.0f} s"
    except OSError as e:
        stdout, stderr, rc = b"", f"cannot run: {e}\n".encode(), None
        error = f"cannot run: {e}"
    stdout = stdout.decode("utf-8", "replace")
    stderr = stderr.decode("utf-8", "replace")
    with open(os.path.join(run_dir, "stdout.txt"), "w") as f:
        f.write(stdout)
    with open(os.path.join(run_dir, "stderr.txt"), "w") as f:
        f.write(stderr)
    record["loadavg_after"] = loadavg()
    record["returncode"] = rc
    record["result"] = parse_result_line(stdout)
    if error is not None:
        pass
    elif rc != 0:
        error = f"exit status {rc}"
    elif record["result"] is None:
        error = "no result line"
    else:
        missing = [k for k in require if k not in record["result"]]
        if missing:
            error = "result line without " + ", ".join(missing)
    if error is None and PRELOAD_ERROR.search(stderr):
        error = "a preload object was not loaded (see stderr.txt)"
    record["error"] = error
    return record


# --------------------------------------------------------------- verdicts

def drift_pct(x, y):
    mean = (x + y) / 2.0
    return abs(x - y) / mean * 100.0 if mean > 0 else float("inf")


def drop_pct(result):
    samples = int(result.get("samples", 0) or 0)
    dropped = int(result.get("dropped", 0) or 0)
    if samples == 0:
        return 0.0 if dropped == 0 else float("inf")
    return dropped / samples * 100.0


def evaluate(runs, drift_gate=DRIFT_GATE_PCT, drop_gate=DROP_GATE_PCT,
             require_profiler=(), control=False, metric="throughput"):
    """Verdict of one A/B/B/A comparison from its four run records (in
    order). Returns a dict with the measurements, 'verdict' and 'reasons'.
    A control (the same program on both sides) must also show a change
    within the drift gate: anything larger is noise the gates missed."""
    reasons = []
    for i, r in enumerate(runs):
        if r.get("error"):
            reasons.append(f"run {i + 1} ({r['side']}) failed: {r['error']}")
        elif not isinstance(r["result"].get(metric), (int, float)) or r["result"][metric] <= 0:
            reasons.append(f"run {i + 1} ({r['side']}) reported no {metric}")
    out = {"baseline_drift_pct": None, "candidate_drift_pct": None, "max_drop_pct": None,
           "baseline_throughput": None, "candidate_throughput": None, "change_pct": None}
    if not reasons:
        tp = [float(r["result"][metric]) for r in runs]
        a1, b1, b2, a2 = tp
        bd, cd = drift_pct(a1, a2), drift_pct(b1, b2)
        drops = [drop_pct(r["result"]) for r in runs]
        mean_a, mean_b = (a1 + a2) / 2.0, (b1 + b2) / 2.0
        out.update({
            "baseline_drift_pct": bd, "candidate_drift_pct": cd, "max_drop_pct": max(drops),
            "baseline_throughput": mean_a, "candidate_throughput": mean_b,
            "change_pct": (mean_b / mean_a - 1.0) * 100.0 if mean_a > 0 else None,
        })
        if bd > drift_gate:
            reasons.append(f"baseline drift {bd:.2f}% > {drift_gate:g}%")
        if cd > drift_gate:
            reasons.append(f"candidate drift {cd:.2f}% > {drift_gate:g}%")
        change = out["change_pct"]
        if control and change is not None and abs(change) > drift_gate:
            reasons.append(f"control change {change:+.2f}% exceeds {drift_gate:g}% "
                           "(same program on both sides)")
        for i, (r, d) in enumerate(zip(runs, drops)):
            if d > drop_gate:
                res = r["result"]
                reasons.append(f"run {i + 1} ({r['side']}) dropped {res.get('dropped', 0)} of "
                               f"{res.get('samples', 0)} samples ({d:.2f}% > {drop_gate:g}%)")
        for i, r in enumerate(runs):
            if r["side"] in require_profiler and not r["result"].get("profiler"):
                reasons.append(f"run {i + 1} ({r['side']}) ran without the profiler "
                               "(mp_prof_diagnostics not found)")
            elif r["side"] in require_profiler and not r["result"].get("samples"):
                reasons.append(f"run {i + 1} ({r['side']}) took no samples "
                               "(the profiling session did not run)")
    out["verdict"] = "rejected" if reasons else "accepted"
    out["reasons"] = reasons
    out["used"] = not reasons
    return out


# ----------------------------------------------------------------- output

def fmt_pct(v, signed=False):
    if v is None:
        return "-"
    if v == float("inf"):
        return "inf"
    return f"{v:+.2f}%" if signed else f"{v:.2f}%"


def fmt_tp(v):
    return "-" if v is None else f"{v / 1e6:.3f}M"


def table(summary):
    lines = []
    mode = summary["mode"]
    lines.append(f"# {mode} ({summary['started']} .. {summary.get('finished', '?')})")
    lines.append(f"baseline:  {summary['sides']['baseline']['exe']} "
                 f"preload={summary['sides']['baseline']['preload']}")
    lines.append(f"candidate: {summary['sides']['candidate']['exe']} "
                 f"preload={summary['sides']['candidate']['preload']}")
    if summary.get("control"):
        c = summary["control"]
        lines.append(f"control: {'trusted' if c['trusted'] else 'NOT trusted'} ({c['reason']})")
    elif mode == "comparison":
        lines.append("control: none given (run --control first; pass it with --control-summary)")
    lines.append(f"metric: {summary.get('metric', 'throughput')}; gates: drift <= "
                 f"{summary['gates']['drift_pct']:g}%, "
                 f"drops <= {summary['gates']['drop_pct']:g}% of samples")
    lines.append("")
    lines.append("| case | interval | window | A1 | B1 | B2 | A2 | A drift | B drift | "
                 "max drops | change (B vs A) | verdict |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for c in summary["cases"]:
        tps = []
        for r in c["runs"]:
            res = r.get("result") or {}
            tps.append(fmt_tp(res.get(summary.get("metric", "throughput")))
                       if not r.get("error") else "fail")
        change = fmt_pct(c["change_pct"], signed=True)
        if c["verdict"] != "accepted":
            change = f"({change}, not used)" if c["change_pct"] is not None else "-"
        verdict = "accepted" if c["verdict"] == "accepted" else \
            "REJECTED: " + "; ".join(c["reasons"])
        lines.append(f"| {c['case']} | {c['interval']} | {c['window']:g} s | " + " | ".join(tps) +
                     f" | {fmt_pct(c['baseline_drift_pct'])} | {fmt_pct(c['candidate_drift_pct'])}"
                     f" | {fmt_pct(c['max_drop_pct'])} | {change} | {verdict} |")
    loads = [r[k][0] for c in summary["cases"] for r in c["runs"]
             for k in ("loadavg_before", "loadavg_after") if r.get(k)]
    lines.append("")
    if loads:
        lines.append(f"1-minute load average around the runs: {min(loads):.2f} .. "
                     f"{max(loads):.2f} (nproc {summary['machine']['nproc']})")
    lines.append(f"{summary['accepted']} accepted, {summary['rejected']} rejected "
                 "(million operations per second, or per CPU-second for cpu_throughput; "
                 "rejected runs stay in runs/)")
    return "\n".join(lines) + "\n"


def check_control(control_dirs, baseline_hashes, cases, metric):
    """Whether earlier --control runs vouch for this comparison: every case
    compared here must have been accepted, under the same metric (the
    control's records are judged again when its own metric differs), in a
    control of the very same baseline files. Several control directories
    may share the work (a full control plus --case reruns)."""
    vouched, notes = {}, []
    for control_dir in control_dirs:
        path = os.path.join(control_dir, "summary.json")
        try:
            with open(path) as f:
                ctl = json.load(f)
        except (OSError, ValueError) as e:
            notes.append(f"cannot read {path}: {e}")
            continue
        if ctl.get("mode") != "control":
            notes.append(f"{control_dir} is not a --control run")
            continue
        theirs = ctl["sides"]["baseline"]["files"]
        if {os.path.realpath(k): v for k, v in theirs.items()} != \
                {os.path.realpath(k): v for k, v in baseline_hashes.items()}:
            notes.append(f"{control_dir} ran different baseline files (SHA-256 differ)")
            continue
        if ctl.get("metric", "throughput") != metric:
            ctl = rejudge(control_dir, metric)
        for c in ctl["cases"]:
            if c["verdict"] == "accepted":
                vouched.setdefault(c["case"], control_dir)
    missing = [c for c in cases if c not in vouched]
    if missing:
        reason = f"no accepted {metric} control for: {', '.join(missing)}"
        if notes:
            reason += " (" + "; ".join(notes) + ")"
    else:
        reason = (f"every case accepted in a {metric} control of the same baseline files "
                  f"({', '.join(sorted(set(vouched[c] for c in cases)))})")
    return {"dirs": list(control_dirs), "trusted": not missing, "reason": reason,
            "per_case": {c: vouched.get(c) for c in cases}}


# -------------------------------------------------------------- comparing

def resolve_interval(case, args_interval):
    if args_interval:
        return args_interval
    return CASES.get(case, ("512k", 8.0))[0]


def compare(args, baseline, candidate, outdir, log=print):
    mode = "control" if args.control else "comparison"
    hashes_before = {"baseline": baseline.hashes(), "candidate": candidate.hashes()}
    common_env = parse_env_items(args.env, "--env")
    summary = {
        "tool": "bench_profiling_abba.py", "format": 1, "mode": mode,
        "started": utc_now(), "argv": sys.argv if args.record_argv is None else args.record_argv,
        "machine": machine_info(),
        "gates": {"drift_pct": args.drift_gate, "drop_pct": args.drop_gate},
        "metric": args.metric,
        "require_profiler": sorted(set(args.require_profiler or ())),
        "order": list(ORDER),
        "sides": {
            "baseline": dict(baseline.describe(), files=hashes_before["baseline"]),
            "candidate": dict(candidate.describe(), files=hashes_before["candidate"]),
        },
        "cases": [],
    }
    if args.control_summary:
        summary["control"] = check_control([os.path.abspath(d) for d in args.control_summary],
                                           hashes_before["baseline"], args.case, args.metric)
    write_json(os.path.join(outdir, "manifest.json"),
               {k: summary[k] for k in ("tool", "format", "mode", "started", "argv", "machine",
                                        "gates", "metric", "order", "sides")})
    sides = {"A": baseline, "B": candidate}
    for case in args.case:
        interval = resolve_interval(case, args.interval)
        window = args.window if args.window else CASES.get(case, (None, 8.0))[1]
        extra_env = {"MIMPROF_INTERVAL": interval}
        extra_env.update(common_env)
        tail = [case, "--window", f"{window:g}"]
        runs = []
        for n, tag in enumerate(ORDER, 1):
            side = sides[tag]
            run_dir = os.path.join(outdir, "runs", case, f"{n}-{tag}")
            run_env = dict(extra_env)
            # mimprof's preload writes its reports here (kept with the run)
            run_env.setdefault("MIMPROF_OUTPUT", run_dir + os.sep)
            log(f"[{case}] run {n}/4 ({tag}: {side.label}) ...")
            r = run_once(side, tail, run_env, run_dir, timeout=window + args.run_timeout)
            r["tag"] = tag
            runs.append(r)
            res = r.get("result") or {}
            log(f"[{case}] run {n}/4 ({tag}) " + (f"error: {r['error']}" if r["error"] else
                                                   f"{args.metric} {res.get(args.metric)}"))
        verdict = evaluate(runs, args.drift_gate, args.drop_gate,
                           require_profiler=args.require_profiler or (),
                           control=args.control, metric=args.metric)
        entry = {"case": case, "interval": interval, "window": window, "metric": args.metric,
                 "runs": runs}
        entry.update(verdict)
        summary["cases"].append(entry)
        write_json(os.path.join(outdir, "runs", case, "verdict.json"), entry)
        log(f"[{case}] {entry['verdict']}" +
            (": " + "; ".join(entry["reasons"]) if entry["reasons"] else
             f", change {fmt_pct(entry['change_pct'], True)}"))
    # Frozen means frozen: a file that changed while we ran voids everything.
    hashes_after = {"baseline": baseline.hashes(), "candidate": candidate.hashes()}
    if hashes_after != hashes_before:
        for c in summary["cases"]:
            c["verdict"], c["used"] = "rejected", False
            c["reasons"].append("a file involved changed during the comparison (SHA-256)")
    summary["finished"] = utc_now()
    summary["accepted"] = sum(1 for c in summary["cases"] if c["verdict"] == "accepted")
    summary["rejected"] = len(summary["cases"]) - summary["accepted"]
    summary["all_accepted"] = summary["rejected"] == 0 and bool(summary["cases"])
    write_json(os.path.join(outdir, "summary.json"), summary)
    text = table(summary)
    with open(os.path.join(outdir, "summary.txt"), "w") as f:
        f.write(text)
    return summary, text


def rejudge(outdir, metric):
    """The verdicts of an earlier run's records under another metric (the
    raw results hold both); nothing is run and nothing is written."""
    with open(os.path.join(outdir, "summary.json")) as f:
        summary = json.load(f)
    require = summary.get("require_profiler")
    if require is None:  # summaries written before the field existed
        argv = summary.get("argv", [])
        require = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--require-profiler"]
    gates = summary["gates"]
    for c in summary["cases"]:
        kept = [r for r in c["reasons"] if "changed during the comparison" in r]
        c.update(evaluate(c["runs"], gates["drift_pct"], gates["drop_pct"], require,
                          control=summary["mode"] == "control", metric=metric))
        if kept:
            c["reasons"] += kept
            c["verdict"], c["used"] = "rejected", False
        c["metric"] = metric
    summary["metric"] = metric
    summary["accepted"] = sum(1 for c in summary["cases"] if c["verdict"] == "accepted")
    summary["rejected"] = len(summary["cases"]) - summary["accepted"]
    summary["all_accepted"] = summary["rejected"] == 0 and bool(summary["cases"])
    return summary


def combine(dirs, metric="throughput"):
    """Table of the latest accepted comparison per case over several output
    directories of the same two sides (e.g. a full run plus --case reruns),
    every one judged under `metric`."""
    merged, sides = {}, None
    for d in dirs:
        with open(os.path.join(d, "summary.json")) as f:
            s = json.load(f)
        if s.get("metric", "throughput") != metric:
            s = rejudge(d, metric)
        key = {k: s["sides"][k]["files"] for k in ("baseline", "candidate")}
        if sides is None:
            sides = key
        elif key != sides:
            raise UsageError(f"{d}: different files than {dirs[0]} (SHA-256); not combined")
        for c in s["cases"]:
            c = dict(c, source=d)
            prev = merged.get(c["case"])
            if prev is None or c["verdict"] == "accepted" or prev["verdict"] != "accepted":
                merged[c["case"]] = c
    lines = ["| case | interval | window | change (B vs A) | A drift | B drift | verdict | from |",
             "|---|---|---|---|---|---|---|---|"]
    for c in merged.values():
        change = fmt_pct(c["change_pct"], True) if c["verdict"] == "accepted" else "-"
        verdict = c["verdict"] if c["verdict"] == "accepted" else \
            "REJECTED: " + "; ".join(c["reasons"])
        lines.append(f"| {c['case']} | {c['interval']} | {c['window']:g} s | {change} | "
                     f"{fmt_pct(c['baseline_drift_pct'])} | {fmt_pct(c['candidate_drift_pct'])} | "
                     f"{verdict} | {c['source']} |")
    return "\n".join(lines) + "\n"


def build_parser():
    p = argparse.ArgumentParser(
        description="A/B/B/A throughput comparison of two frozen executables "
                    "(see the module docstring for gates and records).")
    p.add_argument("baseline", nargs="?", help="baseline executable (A)")
    p.add_argument("candidate", nargs="?", help="candidate executable (B); omit with --control")
    p.add_argument("--baseline-preload", action="append", default=[], metavar="SO",
                   help="object to LD_PRELOAD on the baseline side (repeatable)")
    p.add_argument("--candidate-preload", action="append", default=[], metavar="SO",
                   help="object to LD_PRELOAD on the candidate side (repeatable)")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="environment for both sides (repeatable)")
    p.add_argument("--baseline-env", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--candidate-env", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--control", action="store_true",
                   help="run the baseline (with its preload and env) on both sides")
    p.add_argument("--control-summary", metavar="DIR", action="append",
                   help="output directory of an earlier --control run of the same baseline "
                        "(repeatable: a full control plus --case reruns)")
    p.add_argument("--case", action="append", metavar="NAME",
                   help="run only this case (repeatable); default: every case")
    p.add_argument("--window", type=float, metavar="SECONDS",
                   help="measurement window per run (default: the case's reference window, "
                        "8 s; 20 s for live-1m)")
    p.add_argument("--interval", metavar="VALUE",
                   help="MIMPROF_INTERVAL for every case (default: the case's own)")
    p.add_argument("--metric", choices=METRICS, default="throughput",
                   help="what is compared: throughput (operations per wall-clock second, "
                        "the default) or cpu_throughput (per CPU-second of the process, "
                        "steadier on a shared machine)")
    p.add_argument("--require-profiler", action="append", choices=["baseline", "candidate"],
                   help="reject a run of this side that did not have the profiler loaded")
    p.add_argument("--drift-gate", type=float, default=DRIFT_GATE_PCT, help=argparse.SUPPRESS)
    p.add_argument("--drop-gate", type=float, default=DROP_GATE_PCT, help=argparse.SUPPRESS)
    p.add_argument("--run-timeout", type=float, default=300.0,
                   help="seconds a run may take beyond its window (default 300)")
    p.add_argument("-o", "--output", metavar="DIR",
                   help="fresh output directory (default: bench-abba-<UTC time>)")
    p.add_argument("--json", action="store_true", help="print summary.json instead of the table")
    p.add_argument("--combine", nargs="+", metavar="DIR",
                   help="print the latest accepted result per case over these output dirs")
    p.add_argument("--rejudge", metavar="DIR",
                   help="print the verdicts of an earlier output directory under --metric "
                        "(runs nothing, writes nothing)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(record_argv=None)
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    args.record_argv = [sys.argv[0]] + list(argv if argv is not None else sys.argv[1:])
    try:
        if args.combine:
            sys.stdout.write(f"metric: {args.metric}\n" + combine(args.combine, args.metric))
            return 0
        if args.rejudge:
            summary = rejudge(args.rejudge, args.metric)
            if args.json:
                json.dump(summary, sys.stdout, indent=2)
                sys.stdout.write("\n")
            else:
                sys.stdout.write(f"(rejudged {args.rejudge})\n" + table(summary))
            return 0 if summary["all_accepted"] else 1
        if not args.baseline:
            raise UsageError("a baseline executable is required")
        if args.control:
            if args.candidate or args.candidate_preload or args.candidate_env:
                raise UsageError("--control takes one executable (the baseline side) only")
        elif not args.candidate:
            raise UsageError("a candidate executable is required (or --control)")
        if args.window is not None and not args.window > 0:
            raise UsageError("--window must be positive")
        for c in args.case or ():
            if not re.fullmatch(r"[A-Za-z0-9._-]+", c):
                raise UsageError(f"bad case name {c!r}")
        args.case = args.case or list(CASES)
        if len(set(args.case)) != len(args.case):
            raise UsageError("a case is named twice")
        baseline = Side("baseline", args.baseline, args.baseline_preload,
                        parse_env_items(args.baseline_env, "--baseline-env"))
        if args.control:
            candidate = Side("candidate", args.baseline, args.baseline_preload,
                             parse_env_items(args.baseline_env, "--baseline-env"))
        else:
            candidate = Side("candidate", args.candidate, args.candidate_preload,
                             parse_env_items(args.candidate_env, "--candidate-env"))
        out = args.output or "bench-abba-" + \
            datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        outdir = prepare_outdir(out)
    except UsageError as e:
        print(f"bench_profiling_abba.py: {e}", file=sys.stderr)
        return 2

    def log(msg):
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    summary, text = compare(args, baseline, candidate, outdir, log)
    if args.json:
        json.dump(summary, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(text)
        sys.stdout.write(f"records: {outdir}\n")
    return 0 if summary["all_accepted"] else 1


if __name__ == "__main__":
    sys.exit(main())
