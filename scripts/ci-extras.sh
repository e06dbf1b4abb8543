#!/usr/bin/env bash
# The verification habits CI runs after the test suite (docs/verification.md):
# every fuzz target for a fixed number of inputs with a fixed seed, the whole
# suite under ASan + UBSan and the concurrency tests under TSan, a Debug
# compile, and a short crash-torture campaign. Their cost on two cores is
# measured in docs/verification.md. CERTMOUNT_CI_SANITIZERS=0 leaves the two
# sanitizer steps out of a quicker local run; under CI=true they always run.
# Prints how long each step took.
set -euo pipefail
cd "$(dirname "$0")/.."
step() {
  local name="$1"
  shift
  local started=$SECONDS
  echo "ci-extras: $name"
  "$@"
  echo "ci-extras: $name took $((SECONDS - started)) s"
}
step "fuzz (${FUZZ_RUNS:=10000} inputs per target, seed 1)" env -u FUZZ_SECONDS FUZZ_RUNS="$FUZZ_RUNS" FUZZ_SEED=1 bash scripts/fuzz.sh
if [ "${CI:-}" = true ] || [ "${CERTMOUNT_CI_SANITIZERS:-1}" != 0 ]; then
  step "ASan + UBSan suite" bash scripts/sanitize.sh address
  step "TSan concurrency tests" bash scripts/sanitize.sh thread
fi
step "Debug build (certmountd, certmountctl)" bash scripts/debug-build.sh certmountd certmountctl
step "crash torture (${TORTURE_KILLS:=20} kills)" env TORTURE_KILLS="$TORTURE_KILLS" bash scripts/torture.sh
