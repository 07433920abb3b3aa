#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The profiling package's non-ELF path, proven on Linux: configure and build
# profiling alone with the generic platform backend (-Dplatform=generic: no
# dl_iterate_phdr, no ELF build-ids, no libunwind, no libdw, no preload;
# stack capture through backtrace()), then run its Criterion suite there.
# That suite is what macOS runs minus the Mach-O specifics: test_platform.c
# (sessions, decoded reports, captured stacks, names right or absent,
# MP_PROF_E_UNSUPPORTED for symbolize=lines and heap images) and the core
# tests; the ELF-only tests are not compiled (profiling/tests/meson.build).
# Usage: check_platform_generic.sh WORKSPACE_ROOT
set -euo pipefail
root=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
log=$scratch/log
fail() {
  echo "FAILED: $1"
  tail -40 "$log"
  exit 1
}
meson setup "$scratch/b" "$root/profiling" -Dplatform=generic -Djemalloc=disabled \
  -Dbenchmarks=disabled -Dfuzzing=disabled -Dtests=enabled >"$log" 2>&1 ||
  fail "profiling does not configure with -Dplatform=generic"
grep -Eq 'platform +: generic' "$log" || fail "the summary does not say platform: generic"
ninja -C "$scratch/b" >>"$log" 2>&1 || fail "profiling does not build with -Dplatform=generic"
# Nothing ELF- or unwinder-specific may be compiled into the library.
lib=$(find "$scratch/b" -maxdepth 1 -name 'libmimprof-profiling.so*' -type f | head -1)
[ -n "$lib" ] || fail "no libmimprof-profiling.so"
if nm -D --undefined-only "$lib" | grep -Ew 'dl_iterate_phdr|unw_backtrace|dwfl_begin' >>"$log" 2>&1; then
  fail "the generic library references dl_iterate_phdr, libunwind or libdw"
fi
undef=$(nm -D --undefined-only "$lib")
grep -qw backtrace <<<"$undef" || fail "the generic library does not capture with backtrace()"
meson test -C "$scratch/b" --print-errorlogs >>"$log" 2>&1 || fail "profiling's tests fail with -Dplatform=generic"
list=$(meson test -C "$scratch/b" --list 2>/dev/null)
grep -q 'profiling-platform' <<<"$list" || fail "profiling-platform is not in the generic suite"
grep -E '^ *[0-9]+/[0-9]+ ' "$log" | sed 's/^/  /'
echo "ok: profiling builds and passes its tests with the generic platform backend"
