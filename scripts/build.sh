#!/usr/bin/env bash
# scripts/build.sh {examples|test} [build-dir]
# Installs what is missing (Debian packages), configures and builds tle, then runs either the main
# examples (each checks its result against a plain C++ reference) or the whole test suite.
set -euo pipefail
what=${1:-examples}
build=${2:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

pkgs=(cmake g++ ninja-build llvm-19-dev libfmt-dev catch2 libzstd-dev libdlpack-dev zlib1g-dev libncurses-dev libxml2-dev libedit-dev libffi-dev)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

jobs=$(nproc)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$jobs"

case "$what" in
  examples)
    status=0
    for ex in vector_add softmax layernorm matmul attention; do
      echo "== $ex"
      "$build/examples/$ex" || status=1
    done
    exit $status ;;
  test)
    cd "$build" && ctest --output-on-failure -j "$jobs" ;;
  *) echo "usage: $0 {examples|test} [build-dir]" >&2; exit 2 ;;
esac
