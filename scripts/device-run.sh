#!/usr/bin/env bash
# scripts/device-run.sh - the one way to run tle on the GPU machine.
#
# Only the agent's `run` tool reaches the H200 machine (driver 580, Ubuntu 24.04, no LLVM, no
# network), so this script has two halves:
#
#   scripts/device-run.sh build [jobs]
#       HERE: builds Release into build-device/ ($TLE_DEVICE_BUILD overrides; default 2 jobs),
#       makes build-device/bundle/ with
#         lib/libtle.so.0            (stripped --strip-unneeded)
#         lib/xgboost/               libxgboost.so.0, libdmlc.so.0 (and libgomp.so.1) from this
#                                    machine's libxgboost-dev: the GPU machine has no XGBoost, and
#                                    the autotuner's ranking model opens it with dlopen (docs/autotune.md)
#         bin/tle_tests, bin/tle_fuzz, bin/<examples>, bin/<benchmarks>   (RUNPATH $ORIGIN/../lib)
#       checks every binary resolves libtle from the bundle, packs it into build-device/bundle.tgz
#       (what travels: < 64 MiB with the working tree), and prints the exact `run` call to make.
#
#   scripts/device-run.sh remote [bundle.tgz | bundle-dir]
#       THERE (what the `run` command executes, in the repository root): nvidia-smi, the GPU tests
#       (tle_tests "[.gpu]"), the CPU numerical tests mirrored on the GPU (TLE_TEST_BACKEND=gpu
#       tle_tests "[ops],[edge],[cpu],[mesh]"), the fuzzer's GPU stage (tle_fuzz --gpu: generated programs,
#       interpreter vs GPU backend at several num_warps / stages; docs/testing.md), every example
#       with TLE_BACKEND=gpu (default sizes, then --gpu-sizes), the benchmarks, and a summary
#       printed last. Exits non-zero if any step failed.
#
# Environment for `remote`: STEP_TIMEOUT (seconds per step, default 120), SKIP_GPU_SIZES=1 to run
# only the default example sizes, TESTS="<catch2 filter>" (default "[.gpu]"), MIRROR_TESTS="<catch2
# filter>" for the mirrored run (default "[ops],[edge],[cpu],[mesh]"); FUZZ_COUNT (programs, default 10000),
# FUZZ_SEED (first seed, default 1), FUZZ_JOBS (worker threads, default 16), FUZZ_TIMEOUT (seconds
# for the fuzz step, default STEP_TIMEOUT; tle_fuzz stops starting programs a little before it and
# reports the seeds it ran), FUZZ_ONE_CONFIG=1 (each program at one GPU configuration, not all),
# SKIP_FUZZ=1 to leave the fuzz step out; SKIP_TESTS=1 leaves out the [.gpu] and mirrored tests,
# SKIP_TMA_OFF=1 the descriptor tests rerun with TLE_TMA=0, RUN_TUNE_STUDY=1 adds
# benchmarks/tune_study (TUNE_STUDY_ARGS, TUNE_STUDY_TIMEOUT), SKIP_EXAMPLES=1 the examples (to spend a call on the fuzzer or the sanitizers alone). Failing fuzz programs are
# written as C++ to $OUT/fuzz-gpu/ (/tmp/fuzz-gpu without $OUT). SANITIZE_TESTS (catch2 filter
# for the compute-sanitizer memcheck/racecheck/synccheck/initcheck steps), SKIP_SANITIZE=1 to leave them out.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mode=${1:-}
EXAMPLES=(vector_add softmax layernorm matmul gemm_ws attention attention_fwd raw_softmax raw_device_function all_gather_gemm)
BENCHMARKS=(compile_latency gpu_bench tune_report)  # tune_report: after the suite, on the tuning cache it filled
STUDIES=(tune_study)  # in the bundle, run only when asked (RUN_TUNE_STUDY=1: minutes of device time)
LIMIT=$((64 * 1024 * 1024))

case "$mode" in
build)
  set -e
  jobs=${2:-2}
  build=${TLE_DEVICE_BUILD:-build-device}
  bundle=$build/bundle
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  ninja -C "$build" -j "$jobs" tle tle_tests tle_cache_helper tle_fuzz "${EXAMPLES[@]}" "${BENCHMARKS[@]}" "${STUDIES[@]}"
  rm -rf "$bundle"
  mkdir -p "$bundle/lib" "$bundle/bin"
  cp -L "$build/libtle.so.0" "$bundle/lib/libtle.so.0"
  strip --strip-unneeded "$bundle/lib/libtle.so.0"
  # The autotuner's ranking model (dlopen'ed; optional: without it the search runs unranked).
  xgb=$(ldconfig -p | awk '/libxgboost\.so\.0 .*x86-64/ && !found { print $NF; found = 1 }')
  if [ -n "$xgb" ]; then
    mkdir -p "$bundle/lib/xgboost"
    cp -L "$xgb" "$bundle/lib/xgboost/libxgboost.so.0"
    p=$(ldconfig -p | awk '$1 == "libdmlc.so.0" && /x86-64/ && !found { print $NF; found = 1 }')
    [ -n "$p" ] && cp -L "$p" "$bundle/lib/xgboost/"
    # libgomp only for a machine without one (remote adds it to the path then, not otherwise).
    p=$(ldconfig -p | awk '$1 == "libgomp.so.1" && /x86-64/ && !found { print $NF; found = 1 }')
    [ -n "$p" ] && mkdir -p "$bundle/lib/xgboost/gomp" && cp -L "$p" "$bundle/lib/xgboost/gomp/"
    strip --strip-unneeded "$bundle"/lib/xgboost/*.so.* "$bundle"/lib/xgboost/gomp/* 2>/dev/null || true
  else
    echo "device-run: no libxgboost here (apt-get install libxgboost-dev): the GPU autotuner runs without its model" >&2
  fi
  cp "$build/tests/tle_tests" "$build/tests/tle_cache_helper" "$build/tests/tle_fuzz" "$bundle/bin/"
  for e in "${EXAMPLES[@]}"; do cp "$build/examples/$e" "$bundle/bin/"; done
  for b in "${BENCHMARKS[@]}" "${STUDIES[@]}"; do cp "$build/benchmarks/$b" "$bundle/bin/"; done
  strip --strip-unneeded "$bundle"/bin/*
  # Every binary must find libtle through $ORIGIN/../lib (CMake BUILD_RPATH), not the build tree.
  for f in "$bundle"/bin/*; do
    if ! readelf -d "$f" | grep -E 'R(UN)?PATH' | grep -q '\$ORIGIN/\.\./lib'; then
      echo "device-run: $f has no \$ORIGIN/../lib in its RPATH/RUNPATH:" >&2
      readelf -d "$f" | grep -E 'R(UN)?PATH' >&2 || true
      exit 1
    fi
  done
  # Resolve from a copy outside the build tree, so only $ORIGIN/../lib can supply libtle.
  tmp=$(mktemp -d)
  cp -r "$bundle" "$tmp/b"
  for f in "$tmp"/b/bin/*; do
    where=$(ldd "$f" | awk '/libtle\.so\.0/ {print $3}')
    case "$where" in
      "$tmp"/b/bin/../lib/libtle.so.0|"$tmp"/b/lib/libtle.so.0) ;;
      *) echo "device-run: $(basename "$f") resolves libtle.so.0 to '$where', not the bundle's lib/" >&2; rm -rf "$tmp"; exit 1 ;;
    esac
  done
  rm -rf "$tmp"
  cp "$0" "$bundle/device-run.sh"
  # What travels is the compressed bundle (LLVM in libtle compresses ~4x); `remote` unpacks it.
  tar -C "$build" -czf "$bundle.tgz" bundle
  size=$(stat -c %s "$bundle.tgz")
  # What travels besides the carried bundle: tracked and untracked-not-ignored files.
  tree=$(git ls-files -co --exclude-standard -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
  echo
  ls -l "$bundle/lib" "$bundle/bin"
  awk -v b="$bundle" -v s="$size" -v t="${tree:-0}" 'BEGIN { printf "bundle: %s.tgz (%d bytes = %.1f MiB); working tree that travels: %.1f MiB; limit 64 MiB together\n", b, s, s / 1048576, t / 1048576 }'
  if [ $((size + ${tree:-0})) -ge $LIMIT ]; then
    echo "device-run: bundle + working tree is over 64 MiB; it will not travel" >&2
    exit 1
  fi
  cat <<EOF

Now call the agent's run tool (one call; it takes a few minutes of the shared device budget):
  run(command="set -o pipefail; bash scripts/device-run.sh remote $bundle.tgz 2>&1 | tee \$OUT/device-run.log",
      carry=["$bundle.tgz"], timeout_s=600)
EOF
  ;;

remote)
  bundle=${2:-build-device/bundle.tgz}
  if [ -f "$bundle" ]; then  # the compressed bundle made by `build`: unpack it beside itself
    tar -C "$(dirname "$bundle")" -xzf "$bundle"
    bundle=${bundle%.tgz}
  fi
  STEP_TIMEOUT=${STEP_TIMEOUT:-120}
  TESTS=${TESTS:-[.gpu]}
  MIRROR_TESTS=${MIRROR_TESTS:-[ops],[edge],[cpu],[mesh]}
  bin=$bundle/bin
  if [ ! -x "$bin/tle_tests" ]; then
    echo "device-run: no $bin/tle_tests; run 'scripts/device-run.sh build' here and carry $bundle" >&2
    exit 2
  fi
  export TLE_CACHE_DIR=${TLE_CACHE_DIR:-$(mktemp -d /tmp/tle-cache-XXXXXX)}
  # The bundled XGBoost for the autotuner's model, unless the machine has its own.
  if [ -f "$bundle/lib/xgboost/libxgboost.so.0" ] && ! ldconfig -p | grep -q 'libxgboost\.so\.0 '; then
    export TLE_LIBXGBOOST=$PWD/$bundle/lib/xgboost/libxgboost.so.0
    case $bundle in /*) TLE_LIBXGBOOST=$bundle/lib/xgboost/libxgboost.so.0 ;; esac
    xdir=$(dirname "$TLE_LIBXGBOOST")
    ldconfig -p | grep -q 'libgomp\.so\.1 ' || xdir=$xdir:$xdir/gomp
    export LD_LIBRARY_PATH=$xdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
  export TLE_DUMP_DIR=${TLE_DUMP_DIR:-${OUT:-/tmp}}
  summary=()
  failed=0
  step() {  # step <name> <command...>
    local name=$1; shift
    echo
    echo "=================== $name"
    local t0=$SECONDS
    timeout -k 5 "$STEP_TIMEOUT" "$@"
    local rc=$?
    local verdict=PASS
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then verdict="TIMEOUT(${STEP_TIMEOUT}s)"; failed=1
    elif [ $rc -ne 0 ]; then verdict="FAIL(rc=$rc)"; failed=1; fi
    summary+=("$(printf '%-34s %-14s %4ds' "$name" "$verdict" $((SECONDS - t0)))")
  }
  echo "=================== machine"
  uname -a
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv 2>&1 || echo "(no nvidia-smi)"
  ldd "$bin/tle_tests" | grep -E 'libtle|not found'
  if [ "${SKIP_TESTS:-0}" != 1 ]; then
    step "tle_tests $TESTS" "$bin/tle_tests" "$TESTS" --durations yes
    # The CPU numerical tests mirrored on the GPU (tests/ops_util.hpp: managed memory, blocking launches).
    step "tle_tests $MIRROR_TESTS on the gpu" env TLE_TEST_BACKEND=gpu TLE_LAUNCH_BLOCKING=1 \
      "$bin/tle_tests" "$MIRROR_TESTS" --durations yes
    # The TMA lowering of tensor descriptors (docs/semantics.md) is on by default; the descriptor
    # tests again with it off (TLE_TMA=0: masked accesses), so both lowerings stay checked
    # (SKIP_TMA_OFF=1 leaves these two steps out).
    [ "${SKIP_TMA_OFF:-0}" = 1 ] || step "tle_tests [descriptor] with TLE_TMA=0" env TLE_TMA=0 "$bin/tle_tests" "[.gpu][descriptor]" --durations yes
    [ "${SKIP_TMA_OFF:-0}" = 1 ] || step "tle_tests [ops][descriptor] on the gpu with TLE_TMA=0" env TLE_TMA=0 TLE_TEST_BACKEND=gpu \
      TLE_LAUNCH_BLOCKING=1 "$bin/tle_tests" "[ops][descriptor]" --durations yes
  fi
  # The fuzzer's GPU stage (tests/fuzz, docs/testing.md): portable programs on the interpreter and
  # on the GPU backend at 1, 4 and 8 warps (and pipelining depths for K loops); the last line of its
  # output is `programs=N mismatches=M seeds=[a,b)`.
  if [ "${SKIP_FUZZ:-0}" != 1 ]; then
    fuzz_timeout=${FUZZ_TIMEOUT:-$STEP_TIMEOUT}
    fuzz_limit=$((fuzz_timeout * 9 / 10 - 5))
    [ $fuzz_limit -lt 1 ] && fuzz_limit=1
    if [ -x "$bin/tle_fuzz" ]; then
      STEP_TIMEOUT=$fuzz_timeout step "tle_fuzz --gpu (${FUZZ_COUNT:-10000} programs)" "$bin/tle_fuzz" --gpu \
        --count "${FUZZ_COUNT:-10000}" --seed "${FUZZ_SEED:-1}" --jobs "${FUZZ_JOBS:-16}" --time-limit "$fuzz_limit" ${FUZZ_ONE_CONFIG:+--one-config} \
        --out "${OUT:-/tmp}/fuzz-gpu"
    else
      echo "device-run: no $bin/tle_fuzz in the bundle; rebuild it with 'scripts/device-run.sh build'" >&2
      summary+=("$(printf '%-34s %-14s %4ds' "tle_fuzz --gpu" "MISSING" 0)")
      failed=1
    fi
  fi
  if [ "${SKIP_EXAMPLES:-0}" != 1 ]; then
    for e in "${EXAMPLES[@]}"; do
      step "$e (gpu, default sizes)" env TLE_BACKEND=gpu "$bin/$e"
    done
  fi
  if [ "${SKIP_GPU_SIZES:-0}" != 1 ] && [ "${SKIP_EXAMPLES:-0}" != 1 ]; then
    for e in "${EXAMPLES[@]}"; do
      step "$e (gpu, --gpu-sizes)" env TLE_BACKEND=gpu "$bin/$e" --gpu-sizes
    done
  fi
  # compute-sanitizer (issue #12): memcheck, racecheck, synccheck and initcheck over a set of GPU
  # tests that covers loads/stores at ragged tails, atomics, the tensor-core K loops (mma.sync and
  # wgmma, cp.async pipelines, warp specialization), streams and shared buffers (TLE-Struct), and over the examples at their
  # default sizes. SANITIZE_TESTS overrides the test set, SANITIZE_EXAMPLES the examples (empty:
  # none); SKIP_SANITIZE=1 leaves it all out.
  # Skipped with a note where the machine has no compute-sanitizer.
  if [ "${SKIP_SANITIZE:-0}" != 1 ]; then
    cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
    san_tests=${SANITIZE_TESTS:-"gpu: E27*,gpu: atomics,gpu: E21*,gpu: matmul with a K loop*,gpu: a hinted K loop*,gpu: launches on streams*,gpu: shared-buffer kernels*,gpu: gpu::copy kernels*,gpu: warp_specialize kernels*"}
    if [ -n "$cs" ]; then
      for tool in memcheck racecheck synccheck initcheck; do
        step "compute-sanitizer $tool" "$cs" --tool "$tool" --error-exitcode 9 "$bin/tle_tests" "$san_tests"
        for e in ${SANITIZE_EXAMPLES-vector_add softmax layernorm matmul attention gemm_ws attention_fwd}; do
          step "compute-sanitizer $tool $e" env TLE_BACKEND=gpu "$cs" --tool "$tool" --error-exitcode 9 "$bin/$e"
        done
      done
    else
      echo "device-run: no compute-sanitizer on this machine; the sanitizer steps are skipped"
      summary+=("$(printf '%-34s %-14s %4ds' "compute-sanitizer" "SKIPPED(none)" 0)")
    fi
  fi
  # ---- benchmark suite (owner: benchmarks/, docs/benchmarks.md) --------------------------------
  # gpu_bench (tle), benchmarks/peers/peers.py (PyTorch + cuBLAS, Triton) and benchmarks/report.py
  # through benchmarks/run_suite.sh; results into $OUT/bench (tle.jsonl, peers.jsonl, latest.jsonl,
  # RESULTS.md, chart.png). gpu_bench runs only here, not in the plain benchmark loop below.
  # SKIP_BENCH_SUITE=1 skips it; BENCH_TIMEOUT (default 300 s) bounds it; BENCH_REPS and
  # BENCH_GROUPS pass through (see run_suite.sh).
  plain_benchmarks=()
  for b in "${BENCHMARKS[@]}"; do [ "$b" = gpu_bench ] || plain_benchmarks+=("$b"); done
  BENCHMARKS=("${plain_benchmarks[@]}")
  if [ "${SKIP_BENCH_SUITE:-0}" != 1 ]; then
    STEP_TIMEOUT=${BENCH_TIMEOUT:-300} step "benchmark suite (gpu_bench, peers, report)" \
      bash benchmarks/run_suite.sh "$bundle"
  fi
  # ---- end of benchmark suite ------------------------------------------------------------------
  for b in "${BENCHMARKS[@]}"; do
    step "$b" "$bin/$b"
  done
  # The autotuner study (issue #16: the search against exhaustive, the model's transfer between
  # shapes); TUNE_STUDY_ARGS passes options (e.g. --kernels softmax,layernorm); every measurement
  # goes to $OUT/tune_study.csv (to replay search strategies offline).
  if [ "${RUN_TUNE_STUDY:-0}" = 1 ]; then
    STEP_TIMEOUT=${TUNE_STUDY_TIMEOUT:-480} step "tune_study" "$bin/tune_study" --csv "${OUT:-/tmp}/tune_study.csv" \
      ${TUNE_STUDY_ARGS:-}
  fi
  csv=${OUT:-.}/tune_report.csv
  [ -f "$csv" ] && step "tune_plot" python3 benchmarks/tune_plot.py "$csv"
  echo
  echo "=================== summary (tle device-run)"
  printf '%s\n' "${summary[@]}"
  [ $failed -eq 0 ] && echo "ALL PASSED" || echo "SOME STEPS FAILED"
  exit $failed
  ;;

*)
  echo "usage: $0 build [jobs]     (here: build build-device/bundle and print the run call)" >&2
  echo "       $0 remote [bundle]  (on the GPU machine: tests, examples, benchmarks, summary)" >&2
  exit 2
  ;;
esac
