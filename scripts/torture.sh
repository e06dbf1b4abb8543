#!/usr/bin/env bash
# Crash torture (test/helpers/crash_torture.cc): random SIGKILLs of the real
# certmountd under publish, unpublish and renewal traffic, the node's
# invariants checked after every restart. Needs root (it mounts). Runs the
# local-CA mode, then the cert-manager mode against the in-process fake API
# server (which also checks that no CertificateRequest outlives or follows
# its volume); TORTURE_ISSUER=local or cert-manager runs one of them.
#   scripts/torture.sh                    # 20 kills (CI): 10 local + 10 cert-manager
#   TORTURE_KILLS=500 TORTURE_ISSUER=cert-manager scripts/torture.sh  # a recorded run (docs/design.md)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build build -j"${JOBS:-2}" --target crash_torture certmountd >/dev/null
seed="${TORTURE_SEED:-$(date +%s)}"
kills="${TORTURE_KILLS:-20}"
if [ -n "${TORTURE_ISSUER:-}" ]; then
  ./build/crash_torture --kills "$kills" --seed "$seed" --issuer "$TORTURE_ISSUER"
else
  # Both modes share the campaign, so CI's time stays that of $kills kills.
  ./build/crash_torture --kills "$(( (kills + 1) / 2 ))" --seed "$seed" --issuer local
  ./build/crash_torture --kills "$(( kills / 2 > 0 ? kills / 2 : 1 ))" --seed "$seed" --issuer cert-manager
fi
