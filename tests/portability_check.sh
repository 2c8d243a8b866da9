#!/usr/bin/env bash
# tests/portability_check.sh <tle_tests> [catch2 filter] - the portability suite's CI half (no GPU):
# runs the numerical tests on the CPU with TLE_CHECK_GPU=<dir>, so every kernel specialization they
# launch is also compiled for the GPU (sm_90a PTX; a kernel the GPU backend refuses fails its test),
# then assembles every PTX file with `ptxas -arch=sm_90a`. The other half runs on the H200:
# scripts/device-run.sh runs the same tests with TLE_TEST_BACKEND=gpu against the same references.
set -euo pipefail
tests=$1
filter=${2:-"[ops],[edge],[cpu]"}
ptxas=${TLE_PTXAS:-/usr/local/cuda/bin/ptxas}
[ -x "$ptxas" ] || ptxas=$(command -v ptxas || true)
if [ -z "$ptxas" ]; then echo "portability_check: no ptxas (CUDA toolkit) - cannot check"; exit 1; fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/tle-portability-XXXXXX")
trap 'rm -rf "$dir"' EXIT
TLE_CHECK_GPU="$dir" TLE_TEST_BACKEND=cpu "$tests" "$filter"
n=$(find "$dir" -name '*.ptx' | wc -l)
echo "portability_check: $n PTX files from the kernels of $filter; assembling with $ptxas -arch=sm_90a"
[ "$n" -gt 0 ] || { echo "portability_check: no PTX was written (TLE_CHECK_GPU not honoured?)"; exit 1; }
fail=0
for f in "$dir"/*.ptx; do
  if ! "$ptxas" -arch=sm_90a "$f" -o /dev/null > "$f.log" 2>&1; then
    echo "ptxas failed on $(basename "$f"):"; head -20 "$f.log"; fail=1
  fi
done
exit $fail
