#!/usr/bin/env bash
# Installs missing Debian packages, then configures and builds certmount in
# ./build, with warnings as errors (development; a plain cmake build keeps
# them warnings). Shared by the two quick-start commands.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
source scripts/ccache-env.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-RelWithDebInfo}" -DCERTMOUNT_WERROR=ON \
  "${CCACHE_LAUNCHER[@]}" >/dev/null
cmake --build build -j"$(nproc)"
