#!/usr/bin/env bash
# Crash torture (test/helpers/crash_torture.cc): random SIGKILLs of the real
# certmountd under publish, unpublish and renewal traffic, the node's
# invariants checked after every restart. Needs root (it mounts).
#   scripts/torture.sh                    # 20 kills (CI)
#   TORTURE_KILLS=500 scripts/torture.sh  # the recorded run (docs/design.md)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build build -j"${JOBS:-2}" --target crash_torture certmountd >/dev/null
seed="${TORTURE_SEED:-$(date +%s)}"
./build/crash_torture --kills "${TORTURE_KILLS:-20}" --seed "$seed"
