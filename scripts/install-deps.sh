#!/usr/bin/env bash
# Installs the Debian 12 packages certmount builds and tests with. Idempotent:
# it asks apt only for what dpkg does not already report as installed.
#   scripts/install-deps.sh               # build, tests and verification tools
#   scripts/install-deps.sh --build-only  # what building certmountd needs (the image)
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libsqlite3-dev libsqlitecpp-dev sqlite3
  libssl-dev openssl
  libspdlog-dev libfmt-dev
  libcli11-dev nlohmann-json3-dev libcpp-httplib-dev libcurl4-openssl-dev libyaml-cpp-dev
  prometheus-cpp-dev
  libgtest-dev libgmock-dev
  util-linux procps
)
# Only the tests and the verification builds use these: keytool reads the JKS
# keystores back; clang with libFuzzer and the sanitizer runtimes builds the
# fuzzers; clang-format checks the layout (the clang_format test).
if [ "${1:-}" != --build-only ]; then
  packages+=(openjdk-17-jre-headless clang-14 libclang-rt-14-dev clang-format-14)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing ${missing[*]}; run as root to install them" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
