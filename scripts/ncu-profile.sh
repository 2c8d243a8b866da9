#!/usr/bin/env bash
# scripts/ncu-profile.sh - where a gpu_bench group's time goes, kernel by kernel, on the GPU machine.
#
#   scripts/ncu-profile.sh BUNDLE_DIR GROUP OUT_DIR [KERNEL_REGEX ...]
#
# Runs THERE (inside a `run` call, after unpacking the bundle; scripts/device-run.sh says how):
#   1. `ncu --metrics gpu__time_duration.sum,launch__grid_size,...` over `gpu_bench --only GROUP
#      --reps 1` -> OUT_DIR/GROUP-times.csv, and OUT_DIR/GROUP-times.txt: for every kernel launch
#      in order, its name, grid, block, registers and duration (the first launch of each case is the
#      checked run; compile and check time are not in the durations).
#   2. For each PICK (a kernel-name regex, e.g. tle_ops_moe_align): the first launch of each launch
#      configuration (grid, block, shared memory) of the matching kernels is profiled again with
#      `--set full`; the SASS source pages (per-instruction samples and stall reasons, one table per
#      launch, in launch order) go to OUT_DIR/GROUP-<n>.source.csv, the details pages to
#      OUT_DIR/GROUP-<n>.details.txt.
# CASE=SUBSTR profiles only the group's cases whose name contains SUBSTR (gpu_bench --case).
# SKIP_TIMES=1 leaves step 1 out. ncu runs with --clock-control none (the device README: leave the clocks alone). The durations
# under ncu are of serialized launches, not the suite's back-to-back timings: use them to split a
# case's time between its kernels, and the suite for the case's time.
set -uo pipefail
B=$1 group=$2 out=$3
shift 3
mkdir -p "$out"
export TLE_CACHE_DIR=${TLE_CACHE_DIR:-/tmp/tle-ncu-cache}
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$ncu" ] || { echo "ncu-profile: no ncu on this machine"; exit 1; }
"$ncu" --version | tail -1
if [ "${SKIP_TIMES:-0}" != 1 ]; then
"$ncu" --clock-control none --csv \
  --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread,launch__shared_mem_per_block_static,launch__shared_mem_per_block_dynamic \
  "$B/bin/gpu_bench" --only "$group" --reps 1 ${CASE:+--case "$CASE"} > "$out/$group-times.csv" 2> "$out/$group-times.err"
python3 - "$out/$group-times.csv" > "$out/$group-times.txt" <<'EOF'
import csv, sys, collections
rows = list(csv.reader(open(sys.argv[1])))
start = next(i for i, r in enumerate(rows) if r and r[0] == "ID")
head = rows[start]
body = [r for r in rows[start + 1:] if len(r) == len(head)]
col = {h: i for i, h in enumerate(head)}
k = collections.OrderedDict()
for r in body:
    key = r[col["ID"]]
    e = k.setdefault(key, {"name": r[col["Kernel Name"]]})
    e[r[col["Metric Name"]]] = r[col["Metric Value"]].replace(",", "")  # ncu writes thousands separators
for i, e in k.items():
    print(i, e["name"][:60], "grid", e.get("launch__grid_size"), "block", e.get("launch__block_size"),
          "regs", e.get("launch__registers_per_thread"),
          "smem", e.get("launch__shared_mem_per_block_static"), e.get("launch__shared_mem_per_block_dynamic"),
          "ns", e.get("gpu__time_duration.sum"))
EOF
rm -f "$out/$group-times.csv"
[ -s "$out/$group-times.err" ] || rm -f "$out/$group-times.err"
fi
n=0
for re in "$@"; do
  n=$((n + 1))
  rep=/tmp/ncu-profile-$group-$n
  "$ncu" --clock-control none --set full --import-source no -k "regex:$re" --filter-mode per-launch-config \
    --launch-count 1 -f -o "$rep" "$B/bin/gpu_bench" --only "$group" --reps 1 ${CASE:+--case "$CASE"} > /dev/null 2> "$out/$group-$n.err"
  "$ncu" -i "$rep.ncu-rep" --page source --csv --print-source sass > "$out/$group-$n.source.csv" 2>&1
  "$ncu" -i "$rep.ncu-rep" --page details > "$out/$group-$n.details.txt" 2>&1
  [ -s "$out/$group-$n.err" ] || rm -f "$out/$group-$n.err"
done
