#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The main job on the bundled example: run by `./dev demo` after the build.
#
# `mimprof run` profiles the example program (a toy request loop with a
# growing leak, cli/examples/leaky_server.c) with a report every
# second, then `mimprof top` shows the last report, `mimprof diff` what grew
# between the first and the last, `mimprof flame` writes flame.svg and
# `mimprof report` the run's page, mimprof-out/report.html.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
cli=$build/subprojects/mimprof-cli
mimprof=$cli/mimprof
example=$cli/examples/mimprof-example
out=$root/mimprof-out
svg=$root/flame.svg

for f in "$mimprof" "$example"; do
  [ -x "$f" ] || { echo "demo: $f is missing (the cli package was not built: -Dpreload=enabled)" >&2; exit 1; }
done

rm -rf "$out"
# A finer sampling interval than the default 512k suits a program this small.
echo "\$ mimprof run --every 1s --interval 64k -o mimprof-out -- mimprof-example"
"$mimprof" run --every 1s --interval 64k -o "$out" -- "$example"

# The example's reports, in order: heap.<pid>.<seq>.pb.gz (each window's
# peak, heap.<pid>.<seq>.peak.pb.gz, stands beside its report)
mapfile -t reports < <(cd "$out" && ls heap.*.pb.gz | grep -v '\.peak\.pb\.gz$' |
  sort -t. -k3,3n | sed "s|^|$out/|")
first=${reports[0]}
last=${reports[${#reports[@]}-1]}

echo
echo "\$ mimprof top ${last#"$root"/}"
"$mimprof" top "$last" --type inuse_space -n 10 | tee "$out/top.txt"

echo
echo "\$ mimprof diff ${first#"$root"/} ${last#"$root"/}"
"$mimprof" diff "$first" "$last" -n 5

"$mimprof" flame "$last" --type inuse_space -o "$svg" \
  --title "mimprof-example: memory in use at exit (inuse_space)"
echo
echo "Flame graph: $svg (open it in a browser: click to zoom, Ctrl-F to search)"

# The leak is what the demo is about: it must be the top in-use site.
top=$(awk 'f { print $NF; exit } $1 == "flat" { f = 1 }' "$out/top.txt")
if [ "$top" != "remember_session" ]; then
  echo "demo: expected the leak (remember_session) as the top inuse site, got '$top'" >&2
  exit 1
fi
echo "The leak, remember_session, is the top in-use site."

# The whole run on one page: the heap over time by site, the peaks, any
# moment's flame graph, two moments' diff, ages, RSS reconciled.
page=$out/report.html
echo
echo "\$ mimprof report mimprof-out -o mimprof-out/report.html"
"$mimprof" report -q "$out" -o "$page"
echo "Report page: $page (open it in a browser: click a time for that moment, shift-click a second)"
