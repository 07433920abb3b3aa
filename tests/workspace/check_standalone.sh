#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Each package is a complete Meson project: configure and build it alone,
# out of the workspace, with its own tests off (the workspace runs them).
# Usage: check_standalone.sh WORKSPACE_ROOT PACKAGE...
set -euo pipefail
root=$1; shift
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
status=0
for pkg in "$@"; do
  [ -f "$root/$pkg/meson.build" ] || continue
  if meson setup "$scratch/$pkg" "$root/$pkg" -Dtests=disabled >"$scratch/$pkg.log" 2>&1 &&
     ninja -C "$scratch/$pkg" >>"$scratch/$pkg.log" 2>&1; then
    echo "ok: $pkg configures and builds alone"
  else
    echo "FAILED: $pkg does not build alone:"
    tail -20 "$scratch/$pkg.log"
    status=1
  fi
done
exit $status
