#!/bin/sh
# SPDX-License-Identifier: MIT
# Instructions per malloc/free pair of every allocator and profiler on one
# churn (tests/bench/pairs.c: one thread, a sliding window of 4,096 live
# blocks, 16..2063 B), counted by callgrind over the whole process as the
# difference between N and 2N pairs (start-up cancels; mimprof's report at
# exit, whose cost varies a little with what was sampled, is subtracted
# from each run first), and the cost of that report (callgrind's inclusive
# count of mp_profiler_report in the N run). mimprof samples with a fixed
# seed (MIMPROF_SEED=1 unless set), so that a rerun counts the same. Exact
# counts: machine load does not change them.
#
#   scripts/callgrind_peers.sh [BUILD_DIR] [N]      (default build 1000000)
#
# Environment: MIMPROF_* variables pass through to the mimprof rows (e.g.
# MIMPROF_SYMBOLIZE=lines to price that mode); CONFIGS="mimalloc mimprof-mimalloc"
# limits the rows.
set -eu
BUILD=$(cd "${1:-build}" && pwd)
N=${2:-1000000}
W=$BUILD/tests/bench/mimprof-bench-pairs
OV=$BUILD/subprojects/mimprof-allocator/libmimprof-allocator-override.so
PM=$BUILD/subprojects/mimprof-cli/libmimprof-preload-mimalloc.so
PJ=$BUILD/subprojects/mimprof-cli/libmimprof-preload-jemalloc.so
PD=$BUILD/subprojects/mimprof-cli/libmimprof-preload-mimalloc-dormant.so
LIB=/usr/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
JE=$LIB/libjemalloc.so.2
TC=$LIB/libtcmalloc.so.4
MI=$LIB/libmimalloc.so.2
CONFIGS=${CONFIGS:-"mimalloc mimprof-allocator mimprof-mimalloc mimprof-dormant jemalloc jemalloc-prof mimprof-jemalloc tcmalloc tcmalloc-sample"}
# Without address randomization the allocators' own paths repeat exactly
# (with it, placement moves counts by a few tenths of an instruction).
NOASLR=
setarch "$(uname -m)" -R true 2>/dev/null && NOASLR="setarch $(uname -m) -R"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# config -> "PRELOAD ENV..." (nothing printed when it cannot run here)
setup() {
    case $1 in
    # the distribution's mimalloc as it is: every mimprof row's baseline
    mimalloc) [ -f "$MI" ] && echo "$MI" ;;
    # this project's allocator package (its malloc override), a row of its own
    mimprof-allocator) [ -f "$OV" ] && echo "$OV" ;;
    mimprof-mimalloc) [ -f "$PM" ] && echo "$PM MIMPROF_SEED=${MIMPROF_SEED:-1} MIMPROF_OUTPUT=$TMP/out/" ;;
    # loaded, no session (MIMPROF_DORMANT=1, `mimprof run --dormant`)
    mimprof-dormant) [ -f "$PD" ] && echo "$PD MIMPROF_DORMANT=1 MIMPROF_OUTPUT=$TMP/out/" ;;
    jemalloc) [ -f "$JE" ] && echo "$JE" ;;
    jemalloc-prof) [ -f "$JE" ] && echo "$JE MALLOC_CONF=prof:true,lg_prof_sample:19" ;;
    mimprof-jemalloc) [ -f "$PJ" ] && echo "$PJ MIMPROF_SEED=${MIMPROF_SEED:-1} MIMPROF_OUTPUT=$TMP/out/" ;;
    tcmalloc) [ -f "$TC" ] && echo "$TC TCMALLOC_SAMPLE_PARAMETER=0" ;;
    tcmalloc-sample) [ -f "$TC" ] && echo "$TC TCMALLOC_SAMPLE_PARAMETER=524288" ;;
    esac
}
base() { # config -> the plain allocator it is compared with
    case $1 in
    mimprof-allocator | mimprof-mimalloc | mimprof-dormant) echo mimalloc ;;
    jemalloc-prof | mimprof-jemalloc) echo jemalloc ;;
    tcmalloc-sample) echo tcmalloc ;;
    esac
}
count() { # out-file pairs preload env... -> total instructions
    out=$1 n=$2 pre=$3
    shift 3
    mkdir -p "$TMP/out"
    (cd "$TMP" && env "$@" LD_PRELOAD="$pre" $NOASLR valgrind --tool=callgrind \
        --callgrind-out-file="$out" "$W" "$n" >/dev/null 2>"$TMP/err") ||
        { cat "$TMP/err" >&2; exit 1; }
    sed -n 's/^totals: \([0-9]*\).*/\1/p' "$out"
}
report_cost() { # callgrind file -> inclusive instructions of mp_profiler_report
    callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null |
        awk '/:mp_profiler_report[ (]/ { gsub(",", "", $1); print $1; exit }'
}
printf '| %s | %s | %s | %s |\n' configuration "instructions per pair" "over its allocator" \
    "report at exit"
printf '|---|---:|---:|---:|\n'
for c in $CONFIGS; do
    s=$(setup "$c") || true
    [ -n "$s" ] || { echo "| $c | not available | | |"; continue; }
    # shellcheck disable=SC2086
    a=$(count "$TMP/$c.1" "$N" $s)
    # shellcheck disable=SC2086
    b=$(count "$TMP/$c.2" $((2 * N)) $s)
    rep= rep2=0 rep1=0
    case $c in mimprof*)
        rep1=$(report_cost "$TMP/$c.1")
        rep2=$(report_cost "$TMP/$c.2")
        rep1=${rep1:-0} rep2=${rep2:-0} # a dormant process writes no report
        rep=$rep1
        ;;
    esac
    per=$(echo "$a $rep1 $b $rep2 $N" | awk '{ printf "%.1f", (($3 - $4) - ($1 - $2)) / $5 }')
    eval "per_$(echo "$c" | tr - _)=$per"
    over=
    bc=$(base "$c")
    if [ -n "$bc" ]; then
        ref=$(eval echo "\${per_$(echo "$bc" | tr - _):-}")
        [ -n "$ref" ] && over=$(echo "$per $ref" | awk '{ printf "%+.1f", $1 - $2 }')
    fi
    printf '| %s | %s | %s | %s |\n' "$c" "$per" "$over" "$rep"
done
