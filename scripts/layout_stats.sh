#!/usr/bin/env bash
# scripts/layout_stats.sh [BUILD_DIR] - the convert_layout table of issue #15 (no GPU needed).
# Compiles every kernel of the examples, of the benchmark suite (gpu_bench --ptx-check) and of the
# CPU test suite's numerical tests for sm_90a with TLE_STATS (TLE_CHECK_GPU makes each CPU launch
# compile for the GPU as well), then prints per source file the convert_layout ops the layout pass
# leaves beside those forward layout inference alone would leave (scripts/layout_stats.py).
# STATS_OUT=<file> keeps the raw TLE_STATS lines. BUILD_DIR defaults to build/ beside scripts/.
set -euo pipefail
build=$(realpath "${1:-$(dirname "$0")/../build}")
stats=$(realpath -m "${STATS_OUT:-$(mktemp "${TMPDIR:-/tmp}/tle-stats-XXXXXX.jsonl")}")
cd "$(dirname "$0")/.."
: > "$stats"
export TLE_STATS="$stats" TLE_CHECK_GPU=1 TLE_CACHE=0 TLE_QUIET=1 TLE_TEST_BACKEND=cpu
for ex in "$build"/examples/*; do
  [ -x "$ex" ] && [ -f "$ex" ] || continue
  "$ex" > /dev/null 2>&1 || echo "layout_stats: $(basename "$ex") failed (its kernels compiled so far are counted)"
done
"$build/benchmarks/gpu_bench" --ptx-check > /dev/null ||
  echo "layout_stats: gpu_bench --ptx-check failed (its kernels compiled so far are counted)"
"$build/tests/tle_tests" "[ops],[edge],[cpu],[struct]" > /dev/null 2>&1 ||
  echo "layout_stats: tle_tests failed (its kernels compiled so far are counted)"
python3 scripts/layout_stats.py "$stats"
