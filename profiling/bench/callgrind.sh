#!/bin/sh
# SPDX-License-Identifier: MIT
# Instructions per operation of the sampling allocator against raw
# mimalloc, counted by callgrind around the measured loop only
# (bench_ops icount ...), as the difference between N and 2N iterations so
# that set-up costs cancel.
#
#   profiling/bench/callgrind.sh BUILD_DIR/bench/bench_ops [N]
set -eu
BENCH=$1
N=${2:-200000}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
count() { # variant iterations -> Ir
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$TMP/out" \
        "$BENCH" icount "$1" "$2" >/dev/null 2>&1
    sed -n 's/^totals: \([0-9]*\).*/\1/p' "$TMP/out"
}
per_op() { # variant -> instructions per iteration (2N - N runs)
    a=$(count "$1" "$N")
    b=$(count "$1" $((2 * N)))
    echo "$a $b $N" | awk '{ printf "%.2f", ($2 - $1) / $3 }'
}
printf '%-8s %12s %12s %10s\n' case raw sampled delta
for c in pair free small churn; do
    r=$(per_op "$c-raw")
    s=$(per_op "$c-sampled")
    printf '%-8s %12s %12s %10s\n' "$c" "$r" "$s" "$(echo "$r $s" | awk '{ printf "%+.2f", $2 - $1 }')"
done
