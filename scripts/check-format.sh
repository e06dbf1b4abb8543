#!/usr/bin/env bash
# Checks that every C++ file of the project is as .clang-format lays it out
# (clang-format 14, Debian 12's). Run by ctest as the test `clang_format`.
# Without clang-format the check is skipped (exit 77), except under CI=true,
# where a skipped check fails the run like any other skipped test.
#   scripts/check-format.sh          # report the files that differ
#   scripts/check-format.sh --fix    # rewrite them in place
set -euo pipefail
cd "$(dirname "$0")/.."
format=""
for candidate in clang-format-14 clang-format; do
  if command -v "$candidate" >/dev/null; then
    format="$candidate"
    break
  fi
done
if [ -z "$format" ]; then
  if [ "${CI:-}" = true ]; then
    echo "check-format: clang-format is not installed, and CI=true forbids skipping" >&2
    exit 1
  fi
  echo "check-format: clang-format is not installed; skipped" >&2
  exit 77
fi
mapfile -d '' files < <(find src test bench fuzz -type f \( -name '*.cc' -o -name '*.h' \) -print0 | sort -z)
if [ "${1:-}" = --fix ]; then
  "$format" -i "${files[@]}"
  exit 0
fi
unformatted=()
for f in "${files[@]}"; do
  if ! "$format" --dry-run --Werror "$f" >/dev/null 2>&1; then
    unformatted+=("$f")
  fi
done
if [ "${#unformatted[@]}" -ne 0 ]; then
  echo "check-format: ${#unformatted[@]} of ${#files[@]} files differ from .clang-format:" >&2
  printf '  %s\n' "${unformatted[@]}" >&2
  echo "check-format: scripts/check-format.sh --fix rewrites them" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
