#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The overhead of `mimprof run` on an allocation-churn program, against the
# same program with only the mimalloc preload (libmimprof-allocator-override.so),
# measured side by side in one hyperfine run. Not a test: numbers go to
# cli/BENCHMARKS.md.
#
#   cli/bench/run.sh [BUILD_DIR] [OPERATIONS] [RUNS]
#
# BUILD_DIR defaults to build/ (the workspace tree `./dev build` makes),
# OPERATIONS to 50,000,000 (about 2-3 s), RUNS to 15.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
ops=${2:-50000000}
runs=${3:-15}
cli=$build/subprojects/mimprof-cli
override=$build/subprojects/mimprof-allocator/libmimprof-allocator-override.so
churn=$cli/bench/mimprof-churn
mimprof=$cli/mimprof
for f in "$override" "$churn" "$mimprof"; do
  [ -e "$f" ] || { echo "bench: $f is missing (build with benchmarks and preload)" >&2; exit 1; }
done
command -v hyperfine >/dev/null || { echo "bench: hyperfine is not installed" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "machine: $(nproc) CPUs, $(uname -r); churn: $ops operations"
# The third command adds the one-off cost of DWARF symbolization
# (--symbolize lines) in the first report to the per-allocation cost.
hyperfine --warmup 2 --runs "$runs" --export-markdown "$out/results.md" \
  --export-json "$out/results.json" \
  -n "mimalloc preload only" "LD_PRELOAD=$override $churn $ops" \
  -n "mimprof run (512k, every 10s)" "$mimprof run -q -o $out/prof -- $churn $ops" \
  -n "mimprof run --symbolize lines" "$mimprof run -q -s lines -o $out/prof -- $churn $ops"
echo
cat "$out/results.md"
# CPU time (user + system) is less sensitive to other load than wall time.
/usr/bin/python3 - "$out/results.json" <<'PY'
import json, statistics, sys
res = json.load(open(sys.argv[1]))["results"]
base = res[0]["user"] + res[0]["system"]
print("\n| Command | median wall [s] | mean CPU (user+sys) [s] | CPU vs. preload only |")
print("|:---|---:|---:|---:|")
for r in res:
    cpu = r["user"] + r["system"]
    print("| `%s` | %.3f | %.3f | %+.1f%% |" % (r["command"], statistics.median(r["times"]), cpu,
                                             100 * (cpu / base - 1)))
PY
