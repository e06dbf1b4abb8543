#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/*_fuzz.cc) with clang-14 in ./build-fuzz
# and runs each one. A crash stops the run, leaves its input in
# build-fuzz/artifacts/ and exits non-zero; make it a regression test and add
# the input to the seed corpus.
#
# By default (CI) a run is deterministic: FUZZ_RUNS inputs (default 10000)
# with the fixed seed FUZZ_SEED (default 1), starting from the committed
# corpus fuzz/corpus/<target>/ only, so the same tree always runs the same
# inputs and a failure is reproducible. FUZZ_CAP_SECONDS (default 180) caps
# each target on a slow machine; the inputs run are then a prefix of the
# same sequence, so the cap can only skip inputs, never add one. With
# FUZZ_SECONDS set, a run is a long exploration instead: wall-clock bound,
# random seed, its working corpus kept in build-fuzz/corpus/<target>/.
#
#   scripts/fuzz.sh                                  # every target, CI's run
#   FUZZ_SECONDS=3600 nice -n 10 scripts/fuzz.sh dn  # a long run
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ccache-env.sh
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 \
  -DCERTMOUNT_FUZZ=ON "${CCACHE_LAUNCHER[@]}" >/dev/null
cmake --build build-fuzz -j"${JOBS:-2}" --target fuzzers

if [ -n "${FUZZ_SECONDS:-}" ]; then
  budget=(-max_total_time="$FUZZ_SECONDS")
  what="${FUZZ_SECONDS} s"
else
  budget=(-runs="${FUZZ_RUNS:=10000}" -seed="${FUZZ_SEED:=1}"
          -max_total_time="${FUZZ_CAP_SECONDS:-180}")
  what="seed $FUZZ_SEED"
fi
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  for dir in fuzz/corpus/*/; do targets+=("$(basename "$dir")"); done
fi
mkdir -p build-fuzz/artifacts
for target in "${targets[@]}"; do
  work="build-fuzz/corpus/$target"
  # A deterministic run must not start from what an earlier run found.
  [ -n "${FUZZ_SECONDS:-}" ] || rm -rf "$work"
  mkdir -p "$work"
  log="build-fuzz/$target.log"
  started=$SECONDS
  if ! "./build-fuzz/${target}_fuzz" "${budget[@]}" -timeout=60 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/${target}-" \
      "$work" "fuzz/corpus/$target" >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "fuzz: $target FAILED (input in build-fuzz/artifacts/)" >&2
    exit 1
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
  echo "fuzz: $target ok ($what): $execs executions in $((SECONDS - started)) s ($rate/s), $cov, corpus $(ls "$work" | wc -l) files"
done
