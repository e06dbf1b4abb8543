#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/*_fuzz.cc) with clang-14 in ./build-fuzz
# and runs each for FUZZ_SECONDS (default 30) on a scratch corpus seeded from
# fuzz/corpus/<target>/. A crash stops the run, leaves its input in
# build-fuzz/artifacts/ and exits non-zero; make it a regression test and add
# the input to the seed corpus.
#
#   scripts/fuzz.sh                      # every target, 30 s each
#   FUZZ_SECONDS=3600 nice scripts/fuzz.sh attributes dn   # a long run
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-30}"
source scripts/ccache-env.sh
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 \
  -DCERTMOUNT_FUZZ=ON "${CCACHE_LAUNCHER[@]}" >/dev/null
cmake --build build-fuzz -j"${JOBS:-2}" --target fuzzers

targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  for dir in fuzz/corpus/*/; do targets+=("$(basename "$dir")"); done
fi
mkdir -p build-fuzz/artifacts
for target in "${targets[@]}"; do
  work="build-fuzz/corpus/$target"
  mkdir -p "$work"
  log="build-fuzz/$target.log"
  if ! "./build-fuzz/${target}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/${target}-" \
      "$work" "fuzz/corpus/$target" >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "fuzz: $target FAILED (input in build-fuzz/artifacts/)" >&2
    exit 1
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
  echo "fuzz: $target ok: $execs executions in ${seconds} s ($rate/s), $cov, corpus $(ls "$work" | wc -l) files"
done
