#!/usr/bin/env bash
# benchmarks/compare_bundles.sh BASE.tgz NEW.tgz [ROUNDS] - tle against tle: the gpu_bench of two
# bundles (scripts/device-run.sh build; e.g. the main branch's and a change's) on one GPU, in
# alternating rounds (base, new, base, new, ...) so that clock and thermal drift fall on both,
# then per case the median over rounds of each and their ratio (benchmarks/compare_bundles.py).
# For the "no kernel slower" checks of a compiler change. Environment: BENCH_GROUPS (gpu_bench
# --groups, default copy,softmax,layernorm,attention,topk,moe_align), BENCH_REPS (default 20),
# GPU_BENCH_TIMEOUT (seconds per group, default 240), BASE_ENV / NEW_ENV (variable assignments for
# that side's gpu_bench, e.g. BASE_ENV=TLE_REORDER_LOADS=0 with one bundle given twice: a compiler
# switch on and off), GPU_BENCH_ARGS (more gpu_bench arguments for both sides, e.g. "--case 131072";
# a bundle older than dae20d6 ignores --case under --groups and runs every case of the group);
# writes into $OUT/compare (or /tmp/tle-compare).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
base=$1 new=$2 rounds=${3:-2}
out=${OUT:+$OUT/compare}
out=${out:-/tmp/tle-compare}
mkdir -p "$out/base" "$out/new"
tar -C "$out/base" -xzf "$base" && tar -C "$out/new" -xzf "$new" || exit 2
groups=${BENCH_GROUPS:-copy,softmax,layernorm,attention,topk,moe_align}
rc=0
for r in $(seq 1 "$rounds"); do
  for side in base new; do
    echo "=== round $r: $side"
    side_env=BASE_ENV
    [ "$side" = new ] && side_env=NEW_ENV
    # Each side its own kernel and tuning cache: the tuning key holds neither the compiler's
    # switches (BASE_ENV / NEW_ENV) nor unreleased compiler changes, so a shared cache would hand
    # one side's tuned configs to the other. Later rounds reuse their side's.
    # shellcheck disable=SC2086 # the assignments are split on purpose
    env TLE_CACHE_DIR="$out/$side/cache" ${!side_env:-} "$out/$side/bundle/bin/gpu_bench" --reps "${BENCH_REPS:-20}" --timeout "${GPU_BENCH_TIMEOUT:-240}" \
      --groups "$groups" ${GPU_BENCH_ARGS:-} > "$out/$side.$r.jsonl" || rc=1
  done
done
python3 "$root/benchmarks/compare_bundles.py" "$out" "$rounds" || rc=1
rm -rf "$out/base" "$out/new"
exit $rc
