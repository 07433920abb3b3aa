#!/usr/bin/env bash
# The main job on the built-in example: run by `./dev demo` after the build.
set -euo pipefail
build=${1:-build}
echo "Running the example program on libmimprof-allocator:"
"$build/examples/alloc-demo"
override=$build/subprojects/mimprof-allocator/libmimprof-allocator-override.so
echo
echo "Running 'sort' (a program nobody here wrote) with LD_PRELOAD=$override:"
seq 200000 | LC_ALL=C sort -r | head -3
seq 200000 | LD_PRELOAD=$override LC_ALL=C sort -r | head -3
echo "Both runs printed the same lines; the second ran on mimalloc through the override."
