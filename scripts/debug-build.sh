#!/usr/bin/env bash
# Compiles the Debug configuration (-O0 -g), the one a user picks to step
# through certmountd, with warnings as errors, in ./build-debug: the given
# targets, or everything (the test binaries too), so code that only a Debug
# build sees (assert()s, code under NDEBUG) keeps compiling. CI
# (scripts/ci-extras.sh) compiles certmountd and certmountctl. Nothing runs:
# the suite runs in RelWithDebInfo (scripts/test.sh) and the image builds
# Release (scripts/image.sh), so CI compiles all three configurations.
#   bash scripts/debug-build.sh [targets...]   (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ccache-env.sh
cmake -S . -B build-debug -DCMAKE_BUILD_TYPE=Debug -DCERTMOUNT_WERROR=ON \
  "${CCACHE_LAUNCHER[@]}" >/dev/null
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(all)
cmake --build build-debug -j"${JOBS:-2}" --target "${targets[@]}"
