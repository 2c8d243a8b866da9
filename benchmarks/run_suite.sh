#!/usr/bin/env bash
# benchmarks/run_suite.sh - the GPU benchmark suite, on the GPU machine (docs/benchmarks.md):
# gpu_bench (tle), then benchmarks/peers/peers.py (PyTorch + cuBLAS, Triton), then
# benchmarks/report.py, in one run on one GPU. Run from anywhere; the bundle comes from
# `scripts/device-run.sh build` (carried to the machine), e.g. through the agent's run tool:
#
#   run(command="set -o pipefail; bash benchmarks/run_suite.sh build-device/bundle.tgz 2>&1 | tee $OUT/bench-suite.log",
#       carry=["build-device/bundle.tgz"], timeout_s=600)
#
# (`scripts/device-run.sh remote` runs this too, after the tests and examples.)
#
# Writes into $BENCH_OUT (default $OUT/bench when $OUT is set, so the files come back; else
# /tmp/tle-bench): tle.jsonl (gpu_bench), peers.jsonl (peers.py), latest.jsonl, RESULTS.md and
# chart.png (report.py). To publish a run, copy latest.jsonl and chart.png into benchmarks/results/
# and RESULTS.md to benchmarks/RESULTS.md.
#
# Environment: BENCH_REPS (timed repetitions per case, default 100), BENCH_GROUPS (comma-separated
# subset of copy,vector_add,softmax,layernorm,matmul,gemm_ws,compile,launch,topk,moe_align for both sides; default all),
# GPU_BENCH_TIMEOUT (seconds per gpu_bench group, default 240), PEERS_TIMEOUT (seconds for
# peers.py, default 420), PYTHON (default python3).
# Exits non-zero if a step failed or any case failed (the results are written all the same).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bundle=${1:-build-device/bundle.tgz}
if [ -f "$bundle" ]; then  # the compressed bundle made by `scripts/device-run.sh build`
  tar -C "$(dirname "$bundle")" -xzf "$bundle"
  bundle=${bundle%.tgz}
fi
out=${BENCH_OUT:-${OUT:+$OUT/bench}}
out=${out:-/tmp/tle-bench}
reps=${BENCH_REPS:-100}
py=${PYTHON:-python3}
mkdir -p "$out"
group_args=()
[ -n "${BENCH_GROUPS:-}" ] && group_args=(--groups "$BENCH_GROUPS")
if [ ! -x "$bundle/bin/gpu_bench" ]; then
  echo "run_suite: no $bundle/bin/gpu_bench; run 'scripts/device-run.sh build' here and carry $bundle" >&2
  exit 2
fi
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
command="bash benchmarks/run_suite.sh $bundle  (BENCH_REPS=$reps${BENCH_GROUPS:+ BENCH_GROUPS=$BENCH_GROUPS}: $bundle/bin/gpu_bench --reps $reps${BENCH_GROUPS:+ --groups $BENCH_GROUPS}; $py benchmarks/peers/peers.py --reps $reps${BENCH_GROUPS:+ --groups $BENCH_GROUPS}; $py benchmarks/report.py)"
rc=0
t0=$SECONDS

echo "=================== gpu_bench (tle)"
"$bundle/bin/gpu_bench" --reps "$reps" --timeout "${GPU_BENCH_TIMEOUT:-240}" "${group_args[@]}" | tee "$out/tle.jsonl"
r=${PIPESTATUS[0]}
echo "gpu_bench: rc=$r, $((SECONDS - t0)) s"
[ "$r" -eq 0 ] || rc=1

echo "=================== peers.py (PyTorch, cuBLAS, Triton)"
t1=$SECONDS
timeout -k 5 "${PEERS_TIMEOUT:-420}" "$py" benchmarks/peers/peers.py --reps "$reps" "${group_args[@]}" | tee "$out/peers.jsonl"
r=${PIPESTATUS[0]}
echo "peers.py: rc=$r, $((SECONDS - t1)) s"
[ "$r" -eq 0 ] || rc=1

echo "=================== report.py"
"$py" benchmarks/report.py --tle "$out/tle.jsonl" --peers "$out/peers.jsonl" --out-dir "$out" \
  --driver "${driver:-unknown}" --command "$command" || rc=1
echo "run_suite: results in $out ($((SECONDS - t0)) s in all); rc=$rc"
exit $rc
