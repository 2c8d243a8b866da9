#!/usr/bin/env bash
# scripts/build.sh {examples|test|sanitize|tsan} [build-dir]
# Installs what is missing (Debian packages), configures and builds tle, then runs either the main
# examples (each checks its result against a plain C++ reference) or the whole test suite.
#   sanitize: ASan + UBSan build (build-asan) of libtle and tle_tests, then the CPU test suite
#             (TLE_SAN_TESTS selects Catch2 tests, default: all that run without a GPU).
#   tsan:     ThreadSanitizer build (build-tsan) of libtle and tle_concurrency_tests, then the
#             concurrency and cache tests (TLE_SAN_TESTS, default "[concurrency],[cache]").
# Suppressions (LLVM-internal findings only, each with its reason) are in scripts/sanitizers/.
# Neither is part of CI: on 2 cores each build takes tens of minutes (docs/testing.md).
set -euo pipefail
what=${1:-examples}
build=${2:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

pkgs=(cmake g++ ninja-build llvm-19-dev libfmt-dev catch2 libzstd-dev libdlpack-dev libxgboost-dev zlib1g-dev libncurses-dev libxml2-dev libedit-dev libffi-dev)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

jobs=$(nproc)
case "$what" in
  sanitize|tsan)
    san=address,undefined; [ "$what" = tsan ] && san=thread
    [ "$build" = build ] && build=build-$([ "$what" = tsan ] && echo tsan || echo asan)
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTLE_SANITIZE=$san \
      -DTLE_BUILD_EXAMPLES=OFF -DTLE_BUILD_BENCHMARKS=OFF >/dev/null
    bin=tle_tests; [ "$what" = tsan ] && bin=tle_concurrency_tests
    cmake --build "$build" -j "$jobs" --target $bin
    supp="$root/scripts/sanitizers"
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
    export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
    export TLE_BACKEND=cpu
    if [ "$what" = tsan ]; then tests=${TLE_SAN_TESTS:-"[concurrency],[cache]"}; else tests=${TLE_SAN_TESTS:-"~[.]"}; fi
    echo "== $build/tests/$bin $tests"
    exec "$build/tests/$bin" "$tests" ;;
esac
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$jobs"

case "$what" in
  examples)
    status=0
    for ex in vector_add softmax layernorm matmul gemm_ws attention attention_fwd all_gather_gemm; do
      echo "== $ex"
      "$build/examples/$ex" || status=1
    done
    exit $status ;;
  test)
    cd "$build" && ctest --output-on-failure -j "$jobs" ;;
  *) echo "usage: $0 {examples|test|sanitize|tsan} [build-dir]" >&2; exit 2 ;;
esac
