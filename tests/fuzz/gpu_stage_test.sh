#!/usr/bin/env bash
# tests/fuzz/gpu_stage_test.sh <tle_fuzz> <case> - ctest checks of `tle_fuzz --gpu` that need no GPU
# (tests/CMakeLists.txt): the exit statuses, the final line and the failure files.
#   no-gpu    with the CUDA driver made unloadable (TLE_LIBCUDA), --gpu says why and exits 77
#   cpu       the stage on the CPU backend (--device-backend cpu): 24 programs on 2 jobs pass, exit 0
#   mismatch  the same with seed 5's outputs corrupted (--plant-mismatch 5): exit 1, the final line
#             counts it, and seed-5.cpp holds the program as a test case
set -uo pipefail
fuzz=$1
case_=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "gpu_stage_test $case_: $*"; echo "--- stdout"; cat "$tmp/out"; echo "--- stderr"; cat "$tmp/err"; exit 1; }
case "$case_" in
  no-gpu)
    TLE_LIBCUDA=/nonexistent/libcuda.so.1 "$fuzz" --gpu --count 5 --out "$tmp/f" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ $rc -eq 77 ] || fail "exit status $rc, expected 77"
    grep -q "no usable GPU" "$tmp/err" || fail "no 'no usable GPU' message"
    grep -q "programs=" "$tmp/out" && fail "programs ran without a GPU"
    ;;
  cpu)
    "$fuzz" --gpu --device-backend cpu --seed 1 --count 24 --jobs 2 --out "$tmp/f" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ $rc -eq 0 ] || fail "exit status $rc, expected 0"
    [ "$(tail -1 "$tmp/out")" = "programs=24 mismatches=0 seeds=[1,25)" ] || fail "wrong final line"
    ;;
  mismatch)
    "$fuzz" --gpu --device-backend cpu --seed 1 --count 8 --jobs 2 --plant-mismatch 5 --out "$tmp/f" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ $rc -eq 1 ] || fail "exit status $rc, expected 1"
    [ "$(tail -1 "$tmp/out")" = "programs=8 mismatches=1 seeds=[1,9)" ] || fail "wrong final line"
    grep -q "^seed 5: cpu w1 s3: buffer" "$tmp/out" || fail "no line for seed 5"
    grep -q 'TEST_CASE("fuzz gpu: seed 5"' "$tmp/f/seed-5.cpp" || fail "no test case in seed-5.cpp"
    grep -q "tle_fuzz --gpu --seed 5 --count 1: stage cpu w1 s3" "$tmp/f/seed-5.cpp" || fail "seed-5.cpp names no stage"
    ;;
  *) echo "usage: $0 <tle_fuzz> no-gpu|cpu|mismatch" >&2; exit 2 ;;
esac
echo "gpu_stage_test $case_: ok"
