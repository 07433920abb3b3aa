#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One step of the Rust workspace's checks over a Meson build tree:
#   run.sh test|fmt|clippy|doc|example|example-real|fastpath
# MIMPROF_SOURCE_ROOT, MIMPROF_BUILD_ROOT and CARGO come from meson test.
set -euo pipefail
src=${MIMPROF_SOURCE_ROOT:?} build=${MIMPROF_BUILD_ROOT:?}
cargo=${CARGO:-cargo}
export PKG_CONFIG_PATH=$build/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export LD_LIBRARY_PATH=$build/subprojects/mimprof-profiling:$build/subprojects/mimprof-pyroscope:$build/subprojects/mimprof-image${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CARGO_TARGET_DIR=$build/cargo-target
cd "$src/rust"
run() { echo "+ $*"; nice -n 5 "$@"; }

case "$1" in
  test) run "$cargo" test --locked --workspace --all-features --release ;;
  fmt) run "$cargo" fmt --all --check ;;
  clippy) run "$cargo" clippy --locked --workspace --all-targets --all-features -- -D warnings ;;
  doc) RUSTDOCFLAGS="-D warnings" run "$cargo" doc --locked --workspace --no-deps --all-features ;;
  example)
    # The examples push to the stand-in and their live heap must arrive:
    # pyroscope-mimprof's (the pyroscope crate's agent, mimprof's reports)
    # and mimprof's service (the C adapter's agent).
    run "$cargo" build --locked --release -p pyroscope-mimprof --example mimalloc
    run "$cargo" build --locked --release -p mimprof --example service --features mimalloc,pyroscope
    out=$(mktemp -d)
    trap 'kill "$srv" 2>/dev/null || true; rm -rf "$out"' EXIT
    /usr/bin/python3 "$src/tests/pyroscope-server/server.py" >"$out/ready" &
    srv=$!
    for _ in $(seq 100); do grep -q READY "$out/ready" && break; sleep 0.1; done
    read -r data control < <(sed -n 's/READY data=\([0-9]*\) control=\([0-9]*\)/\1 \2/p' "$out/ready")
    "$CARGO_TARGET_DIR/release/examples/mimalloc" "http://127.0.0.1:$data" 3
    "$CARGO_TARGET_DIR/release/examples/service" "http://127.0.0.1:$data" 3
    /usr/bin/python3 - "$control" <<'PY'
import sys, urllib.request
tsv = urllib.request.urlopen("http://127.0.0.1:%s/profiles.tsv" % sys.argv[1]).read().decode()
ok = True
for app in ("example.mimalloc", "example.service"):
    live = sum(int(f[3]) for f in (l.split("\t") for l in tsv.splitlines())
               if f[2].startswith("memory:inuse_space") and "service_name=" + app in f[4].split(";")
               and "env=dev" in f[4].split(";"))
    print(app + ": inuse_space on the server:", live)
    ok = ok and live > 0
sys.exit(0 if ok else 1)
PY
    ;;
  example-real)
    # The same two examples against a real Pyroscope server (v1.12.0,
    # tests/pyroscope-real, built by ./dev): what it stores of each,
    # asked back with SelectMergeProfile and polled with a deadline (the
    # server stores eventually).
    run "$cargo" build --locked --release -p pyroscope-mimprof --example mimalloc
    run "$cargo" build --locked --release -p mimprof --example service --features mimalloc,pyroscope
    export EXAMPLES=$CARGO_TARGET_DIR/release/examples
    /usr/bin/python3 "$src/tests/pyroscope-real/server.py" -- /usr/bin/python3 - <<'PY'
import json, os, subprocess, sys, time, urllib.request
url = os.environ["MIMPROF_PYROSCOPE_URL"]
start = int(time.time() * 1000) - 1000
for ex in ("mimalloc", "service"):
    subprocess.run([os.path.join(os.environ["EXAMPLES"], ex), url, "3"], check=True)
end = int(time.time() * 1000) + 60000

def inuse(app):
    body = json.dumps({"profileTypeID": "memory:inuse_space:bytes:space:bytes",
                       "labelSelector": '{service_name="%s", env="dev"}' % app,
                       "start": str(start), "end": str(end)}).encode()
    req = urllib.request.Request(url + "/querier.v1.QuerierService/SelectMergeProfile", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        prof = json.load(r)
    names = prof.get("stringTable", [])
    return sum(int(s["value"][0]) for s in prof.get("sample", [])), names

ok = True
# the leaking function of each example, demangled (v0 names: lld-linked
# Rust binaries, symbolized in the process by the profiling library)
leaks = {"example.mimalloc": "mimalloc::leak_a_little", "example.service": "remember"}
for app, leak in leaks.items():
    deadline, got = time.monotonic() + 60, (0, [])
    while time.monotonic() < deadline:
        got = inuse(app)
        if got[0] > 0:
            break
        time.sleep(0.5)
    named = [n for n in got[1] if n.endswith(leak)]
    print(app + ": inuse_space on the real server:", got[0], "leak named:", named)
    ok = ok and got[0] > 0 and len(named) > 0
sys.exit(0 if ok else 1)
PY
    ;;
  fastpath)
    # Instructions per alloc/dealloc pair over the bare mimalloc crate:
    # callgrind, difference of two churn lengths (start-up cancels out).
    run "$cargo" build --locked --release -p mimprof-bench
    count() {
      valgrind --tool=callgrind --callgrind-out-file=/dev/null "$CARGO_TARGET_DIR/release/$1" "$2" 2>&1 |
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
    }
    b1=$(count churn-bare 1000000) b2=$(count churn-bare 2000000)
    s1=$(count churn-sampled 1000000) s2=$(count churn-sampled 2000000)
    /usr/bin/python3 - "$b1" "$b2" "$s1" "$s2" <<'PY'
import sys
b1, b2, s1, s2 = map(int, sys.argv[1:])
bare, sampled = (b2 - b1) / 1e6, (s2 - s1) / 1e6
print(f"per alloc/dealloc pair: mimalloc {bare:.2f}, mimprof::MiMalloc {sampled:.2f}, +{sampled - bare:.2f}")
sys.exit(0 if sampled - bare <= 12 else 1)
PY
    ;;
  *) echo "unknown step $1" >&2; exit 2 ;;
esac
