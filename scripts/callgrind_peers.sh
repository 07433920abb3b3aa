#!/bin/sh
# Instructions per malloc/free pair of every allocator and profiler on one
# churn (tests/bench/pairs.c: one thread, a sliding window of 4,096 live
# blocks, 16..2063 B), counted by callgrind over the whole process as the
# difference between N and 2N pairs (start-up and the exit report cancel),
# and the cost of mimprof's report at exit (callgrind's inclusive count of
# mp_profiler_report in the N run). Exact counts: machine load does not
# change them.
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
LIB=/usr/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
JE=$LIB/libjemalloc.so.2
TC=$LIB/libtcmalloc.so.4
CONFIGS=${CONFIGS:-"mimalloc mimprof-mimalloc jemalloc jemalloc-prof mimprof-jemalloc tcmalloc tcmalloc-sample"}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# config -> "PRELOAD ENV..." (nothing printed when it cannot run here)
setup() {
    case $1 in
    mimalloc) [ -f "$OV" ] && echo "$OV" ;;
    mimprof-mimalloc) [ -f "$PM" ] && echo "$PM MIMPROF_OUTPUT=$TMP/out/" ;;
    jemalloc) [ -f "$JE" ] && echo "$JE" ;;
    jemalloc-prof) [ -f "$JE" ] && echo "$JE MALLOC_CONF=prof:true,lg_prof_sample:19" ;;
    mimprof-jemalloc) [ -f "$PJ" ] && echo "$PJ MIMPROF_OUTPUT=$TMP/out/" ;;
    tcmalloc) [ -f "$TC" ] && echo "$TC TCMALLOC_SAMPLE_PARAMETER=0" ;;
    tcmalloc-sample) [ -f "$TC" ] && echo "$TC TCMALLOC_SAMPLE_PARAMETER=524288" ;;
    esac
}
base() { # config -> the plain allocator it is compared with
    case $1 in
    mimprof-mimalloc) echo mimalloc ;;
    jemalloc-prof | mimprof-jemalloc) echo jemalloc ;;
    tcmalloc-sample) echo tcmalloc ;;
    esac
}
count() { # out-file pairs preload env... -> total instructions
    out=$1 n=$2 pre=$3
    shift 3
    mkdir -p "$TMP/out"
    (cd "$TMP" && env "$@" LD_PRELOAD="$pre" valgrind --tool=callgrind \
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
    per=$(echo "$a $b $N" | awk '{ printf "%.1f", ($2 - $1) / $3 }')
    eval "per_$(echo "$c" | tr - _)=$per"
    over=
    bc=$(base "$c")
    if [ -n "$bc" ]; then
        ref=$(eval echo "\${per_$(echo "$bc" | tr - _):-}")
        [ -n "$ref" ] && over=$(echo "$per $ref" | awk '{ printf "%+.1f", $1 - $2 }')
    fi
    rep=
    case $c in mimprof*) rep=$(report_cost "$TMP/$c.1") ;; esac
    printf '| %s | %s | %s | %s |\n' "$c" "$per" "$over" "$rep"
done
