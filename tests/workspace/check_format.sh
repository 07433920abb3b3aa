#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every tracked C source and header is clang-formatted (.clang-format at
# the root): the same check as the GitHub workflow's format job.
set -euo pipefail
cd "$1"
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "not a git checkout: nothing to check"
  exit 77
fi
git ls-files -z '*.c' '*.h' '*.cc' | xargs -0 clang-format --dry-run --Werror
echo "all tracked C sources are formatted"
