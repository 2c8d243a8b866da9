#!/usr/bin/env python3
"""benchmarks/report.py - merges gpu_bench's and peers.py's JSON lines into the results of a run.

    python3 benchmarks/report.py --tle tle.jsonl --peers peers.jsonl \\
        [--out-dir benchmarks/results] [--results-md benchmarks/RESULTS.md] \\
        [--command "the exact command that produced the inputs"] [--driver 580.82.07]

Writes
    <out-dir>/latest.jsonl   one JSON object per case: case, kernel, shape, dtype, tle_ms, tle_spread,
                             peers {name: ms}, ratios {name: peer_ms / tle_ms}, best_peer,
                             best_peer_ms, ratio_vs_best, floor_ms, pct_of_floor, gbps/tflops,
                             ok, error, notes, gpu, driver, date (see docs/benchmarks.md)
    <out-dir>/chart.png      speedup per case and throughput against the roofline (matplotlib;
                             skipped with a note when matplotlib is missing)
    <results-md>             the Markdown table for benchmarks/RESULTS.md (default
                             <out-dir>/RESULTS.md; pass --results-md benchmarks/RESULTS.md to
                             write the committed one)
and prints the table on stdout. Needs only the Python standard library (and matplotlib for the
chart). Exits 1 when an input file is missing or holds no case.

Floors: bandwidth-bound cases: bytes / (the highest copy bandwidth measured in the run: tle's copy
kernel, cuMemcpyDtoD, torch copy_, Triton copy). GEMM: max(FLOPs / (the highest GEMM rate measured
in the run, normally cuBLAS), bytes / copy bandwidth). pct_of_floor = 100 * floor_ms / tle_ms.
"""
import argparse
import json
import math
import os
import sys

LATENCY_PREFIXES = ("compile_cold/", "compile_disk/", "compile_mem/", "launch_host/", "launch_sync/", "launch_floor/",
                    "moe_align/")
US_PREFIXES = ("compile_mem/", "launch_host/", "launch_sync/")
PEER_ORDER = ["cublas", "torch_scaled_mm", "torch", "torch_flash", "torch_sort", "triton", "triton_tma", "cuMemcpyDtoD", "cuLaunchKernel"]


def read_jsonl(path):
    meta, rows, bad = [], [], 0
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                bad += 1
                continue
            if "meta" in obj:
                meta.append(obj["meta"])
            elif "case" in obj:
                rows.append(obj)
    if bad:
        sys.stderr.write("report.py: %s: %d unparsable line(s) skipped\n" % (path, bad))
    return meta, rows


def num(x):
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def case_work(case):
    """(bytes, flops, kind) that define a case, from its name (kind: bandwidth, gemm, flops - compute
    bound but not a GEMM, so it does not set the GEMM ceiling - or latency)."""
    parts = case.split("/")
    kernel = parts[0]
    if case.startswith(LATENCY_PREFIXES) or len(parts) < 3:
        return None, None, "latency"
    dtype, shape = parts[1], parts[2]
    esize = {"f32": 4, "bf16": 2, "f16": 2, "fp8": 1}.get(dtype, 4)
    if kernel in ("copy", "vector_add"):
        n = 2 ** int(shape[2:]) if shape.startswith("2^") else int(shape)
        return (2 if kernel == "copy" else 3) * esize * n, (n if kernel == "vector_add" else 0), "bandwidth"
    dims = [int(d) for d in shape.split("x")]
    if kernel in ("softmax", "raw_softmax", "transpose"):
        return 2 * esize * dims[0] * dims[1], 0, "bandwidth"
    if kernel == "layernorm":
        return 2 * esize * dims[0] * dims[1] + 2 * esize * dims[1], 0, "bandwidth"
    if kernel == "layernorm_row":  # x read, y written (f32 w, b: read once per program, from L2)
        return 2 * esize * dims[0] * dims[1], 0, "bandwidth"
    if kernel == "cross_entropy":  # logits read, int32 target read and f32 loss written per row
        return esize * dims[0] * dims[1] + 8 * dims[0], 0, "bandwidth"
    if kernel == "cosine_rows":  # both matrices read, one f32 per row written
        return 2 * esize * dims[0] * dims[1] + 4 * dims[0], 0, "bandwidth"
    if kernel == "matmul" and dtype == "fp8":  # fp8 A and B, bf16 C; its own ceiling (fp8 tensor cores)
        m, n, k = dims
        return m * k + k * n + 2 * m * n, 2 * m * n * k, "fp8gemm"
    if kernel in ("matmul", "gemm_ws"):
        m, n, k = dims
        return esize * (m * k + k * n + m * n), 2 * m * n * k, "gemm"
    if kernel == "topk":  # rows x n, "/k<k>": the matrix read once, values and int32 indices written
        rows, n = dims
        k = int(parts[3][1:]) if len(parts) > 3 and parts[3].startswith("k") else 0
        return esize * rows * n + (esize + 4) * rows * k, 0, "bandwidth"
    if kernel == "attention":  # batch x heads x S x D, "/causal": half the score matrix
        b, h, s, d = dims
        causal = len(parts) > 3 and parts[3] == "causal"
        return 4 * esize * b * h * s * d, 4 * b * h * s * s * d // (2 if causal else 1), "flops"
    return None, None, "latency"


def pick(rows):
    """One line per case: the first ok one, else the last failure (gpu_bench may print a case twice,
    e.g. a failed bf16-output matmul and its f32-output retry)."""
    out, order = {}, []
    for r in rows:
        c = r["case"]
        if c not in out:
            order.append(c)
            out[c] = r
        elif not out[c].get("ok"):
            if r.get("ok") and out[c].get("error"):
                r = dict(r, superseded_error=out[c]["error"])
            out[c] = r
    return out, order


def merge(tle_meta, tle_rows, peer_meta, peer_rows, driver=None, command=None):
    tle, order = pick([r for r in tle_rows if not r["case"].endswith("/*")])
    group_errors = [r for r in tle_rows if r["case"].endswith("/*")]
    peers = {}  # case -> peer -> row
    for r in peer_rows:
        if r["case"].endswith("/*"):
            group_errors.append(dict(r, source="peers"))
            continue
        p = peers.setdefault(r["case"], {})
        prev = p.get(r["peer"])
        if prev is None or (not prev.get("ok") and r.get("ok")):
            p[r["peer"]] = r
        if r["case"] not in tle and r["case"] not in order:
            order.append(r["case"])

    tm = tle_meta[0] if tle_meta else {}
    pm = peer_meta[0] if peer_meta else {}
    gpu = tm.get("gpu") or pm.get("gpu")
    date = tm.get("date") or pm.get("date")
    dv = tm.get("driver_version")
    cuda_driver_api = "%d.%d" % (dv // 1000, (dv % 1000) // 10) if isinstance(dv, int) and dv > 0 else None

    records = []
    for c in order:
        t = tle.get(c, {"case": c, "ok": False, "error": "no tle result for this case"})
        bytes_, flops, kind = case_work(c)
        rec = {"case": c, "kernel": t.get("kernel") or c.split("/")[0], "shape": t.get("shape"),
               "dtype": t.get("dtype") or (c.split("/")[1] if kind != "latency" else None), "kind": kind,
               "tle_ms": num(t.get("tle_ms")) if t.get("ok") else None,
               "tle_spread": num(t.get("tle_spread")), "tle_p10_ms": num(t.get("tle_p10_ms")),
               "tle_p90_ms": num(t.get("tle_p90_ms")), "reps": t.get("reps"),
               "bytes": bytes_, "flops": flops, "config": t.get("config"), "ok": bool(t.get("ok"))}
        if not t.get("ok"):
            rec["error"] = t.get("error", "failed")
        notes = []
        extra = t.get("extra") or {}
        if extra.get("note"):
            notes.append("tle: " + extra["note"])
        if t.get("superseded_error"):
            notes.append("tle: an earlier attempt failed: " + t["superseded_error"][:300])
        pm_ms, pm_spread, peer_errors, peer_cfg = {}, {}, {}, {}
        for name, ms in (t.get("peers") or {}).items():  # measured by gpu_bench itself
            if num(ms) is not None:
                pm_ms[name] = ms
        for name in ("cuMemcpyDtoD_spread",):
            if num(extra.get(name)) is not None:
                pm_spread["cuMemcpyDtoD"] = extra[name]
        for name, r in (peers.get(c) or {}).items():
            if r.get("ok") and num(r.get("ms")) is not None:
                pm_ms[name] = r["ms"]
                if num(r.get("spread")) is not None:
                    pm_spread[name] = r["spread"]
                if r.get("config"):
                    peer_cfg[name] = r["config"]
                if r.get("note"):
                    notes.append("%s: %s" % (name, r["note"]))
            else:
                peer_errors[name] = r.get("error", "failed")
        rec["peers"] = pm_ms
        rec["peer_spread"] = pm_spread
        rec["peer_config"] = peer_cfg
        if peer_errors:
            rec["peer_errors"] = peer_errors
        tle_ms = rec["tle_ms"]
        rec["ratios"] = {n: ms / tle_ms for n, ms in pm_ms.items()} if tle_ms else {}
        if pm_ms:
            best = min(pm_ms, key=lambda n: pm_ms[n])
            rec["best_peer"], rec["best_peer_ms"] = best, pm_ms[best]
            rec["ratio_vs_best"] = pm_ms[best] / tle_ms if tle_ms else None
        else:
            rec["best_peer"] = rec["best_peer_ms"] = rec["ratio_vs_best"] = None
        if notes:
            rec["notes"] = notes
        if num(extra.get("memcpy_same_bytes_ms")) is not None:
            rec["memcpy_same_bytes_ms"] = extra["memcpy_same_bytes_ms"]
        rec.update({"gpu": gpu, "driver": driver or cuda_driver_api, "cuda_driver_api": cuda_driver_api,
                    "date": date, "torch": pm.get("torch"), "triton": pm.get("triton")})
        if command:
            rec["command"] = command
        records.append(rec)

    # Ceilings measured in this run.
    copy_bw = None  # bytes per ms
    peak = None     # flops per ms
    fp8_peak = None  # flops per ms of the fp8 GEMMs
    for rec in records:
        times = ([rec["tle_ms"]] if rec["tle_ms"] else []) + list(rec["peers"].values())
        if rec["kernel"] == "copy" and rec["bytes"]:
            for ms in times:
                copy_bw = max(copy_bw or 0, rec["bytes"] / ms)
        if rec["kind"] == "gemm":
            for ms in times:
                peak = max(peak or 0, rec["flops"] / ms)
        if rec["kind"] == "fp8gemm":
            for ms in times:
                fp8_peak = max(fp8_peak or 0, rec["flops"] / ms)
    for rec in records:
        floor = None
        if rec["kind"] == "bandwidth" and copy_bw:
            floor = rec["bytes"] / copy_bw
        elif rec["kind"] in ("gemm", "flops") and peak:
            floor = max(rec["flops"] / peak, rec["bytes"] / copy_bw if copy_bw else 0)
        elif rec["kind"] == "fp8gemm" and fp8_peak:
            floor = max(rec["flops"] / fp8_peak, rec["bytes"] / copy_bw if copy_bw else 0)
        rec["floor_ms"] = floor
        rec["pct_of_floor"] = 100.0 * floor / rec["tle_ms"] if floor and rec["tle_ms"] else None
        if rec["tle_ms"] and rec["kind"] != "latency":
            rec["tle_gbps"] = rec["bytes"] / rec["tle_ms"] / 1e6
            if rec["flops"]:
                rec["tle_tflops"] = rec["flops"] / rec["tle_ms"] / 1e9
    ceilings = {"copy_gbps": copy_bw / 1e6 if copy_bw else None, "gemm_tflops": peak / 1e9 if peak else None,
                "fp8_gemm_tflops": fp8_peak / 1e9 if fp8_peak else None}
    info = {"gpu": gpu, "driver": driver, "cuda_driver_api": cuda_driver_api, "date": date,
            "torch": pm.get("torch"), "triton": pm.get("triton"), "cuda_runtime": pm.get("cuda"),
            "reps": tm.get("reps") or pm.get("reps"), "command": command, "ceilings": ceilings,
            "group_errors": group_errors}
    return records, info


# ----------------------------------------------------------------------------------- formatting

def fmt_time(case, ms):
    if ms is None:
        return "-"
    if case.startswith(US_PREFIXES):
        return "%.1f us" % (ms * 1e3)
    if ms >= 100:
        return "%.0f ms" % ms
    if ms >= 1:
        return "%.2f ms" % ms
    return "%.3f ms" % ms


def fmt_ratio(x):
    return "-" if x is None else ("%.2fx" % x)


def fmt_pct(x):
    return "-" if x is None else ("%.0f%%" % x)


def throughput(rec, ms):
    if ms is None or rec["kind"] == "latency":
        return "-"
    if rec["kind"] in ("gemm", "flops", "fp8gemm"):
        return "%.0f TFLOP/s" % (rec["flops"] / ms / 1e9)
    return "%.0f GB/s" % (rec["bytes"] / ms / 1e6)


def ceilings_text(c):
    """The run's ceilings: copy bandwidth, the bf16 GEMM's and (when the run has fp8 GEMMs) the fp8 GEMM's."""
    f = lambda x: "%.0f" % x if x else "-"  # noqa: E731
    text = "copy %s GB/s, GEMM %s TFLOP/s" % (f(c["copy_gbps"]), f(c["gemm_tflops"]))
    if c.get("fp8_gemm_tflops"):
        text += ", fp8 GEMM %s TFLOP/s" % f(c["fp8_gemm_tflops"])
    return text


def status(rec):
    if rec["ok"] and rec["tle_ms"] is not None:
        return "ok" + (" (note)" if rec.get("notes") else "")
    return "FAIL"


def text_table(records, info):
    rows = [("case", "tle", "tle throughput", "best peer", "peer time", "speedup", "% floor", "status")]
    for r in records:
        rows.append((r["case"], fmt_time(r["case"], r["tle_ms"]), throughput(r, r["tle_ms"]), r["best_peer"] or "-",
                     fmt_time(r["case"], r["best_peer_ms"]), fmt_ratio(r["ratio_vs_best"]), fmt_pct(r["pct_of_floor"]),
                     status(r)))
    w = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(str(v).ljust(w[i]) for i, v in enumerate(row)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * x for x in w))
    c = info["ceilings"]
    lines.append("")
    lines.append("ceilings measured in this run: " + ceilings_text(c))
    lines.append("speedup = best peer time / tle time (> 1: tle is faster); % floor = floor time / tle time")
    return "\n".join(lines)


def md_escape(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


def markdown(records, info, chart_rel):
    c = info["ceilings"]
    out = ["# Benchmark results", ""]
    out.append("Latest run of the GPU benchmark suite (how to read it: [docs/benchmarks.md](../docs/benchmarks.md)). "
               "Every number below was measured side by side in one run on one GPU.")
    out.append("")
    out.append("- Date: %s" % (info["date"] or "?"))
    out.append("- GPU: %s" % (info["gpu"] or "?"))
    drv = info["driver"] or "?"
    if info["cuda_driver_api"]:
        drv += " (CUDA driver API %s)" % info["cuda_driver_api"]
    out.append("- Driver: %s" % drv)
    out.append("- Peers: PyTorch %s (cuBLAS through torch.matmul), Triton %s, CUDA runtime %s" % (
        info["torch"] or "?", info["triton"] or "?", info["cuda_runtime"] or "?"))
    out.append("- Method: CUDA events, warm-up, median of %s repetitions, 256 MB L2 flush between repetitions, "
               "random non-zero inputs, every result checked against a reference before timing" % (info["reps"] or "?"))
    out.append("- Ceilings measured in this run: " + ceilings_text(c))
    if info["command"]:
        out.append("- Command: `%s`" % info["command"])
    out.append("- Raw lines: [results/latest.jsonl](results/latest.jsonl)")
    out.append("")
    out.append("Speedup = best peer's time / tle's time (above 1: tle is faster). % of floor = floor time / "
               "tle's time (100%: tle runs at the measured ceiling).")
    out.append("")
    out.append("| case | tle | tle throughput | best peer | peer time | speedup | % of floor | status |")
    out.append("|---|---:|---:|---|---:|---:|---:|---|")
    for r in records:
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            md_escape(r["case"]), fmt_time(r["case"], r["tle_ms"]), throughput(r, r["tle_ms"]), r["best_peer"] or "-",
            fmt_time(r["case"], r["best_peer_ms"]), fmt_ratio(r["ratio_vs_best"]), fmt_pct(r["pct_of_floor"]),
            status(r)))
    out.append("")
    out.append("## Every peer")
    out.append("")
    names = [p for p in PEER_ORDER if any(p in r["peers"] for r in records)]
    names += sorted({p for r in records for p in r["peers"]} - set(names))
    out.append("| case | tle | " + " | ".join(names) + " | floor |")
    out.append("|---|" + "---:|" * (len(names) + 2))
    for r in records:
        cells = [fmt_time(r["case"], r["tle_ms"])]
        for p in names:
            ms = r["peers"].get(p)
            if ms is None:
                cells.append("fail" if p in (r.get("peer_errors") or {}) else "-")
            else:
                cells.append("%s (%s)" % (fmt_time(r["case"], ms), fmt_ratio(r["ratios"].get(p))))
        cells.append(fmt_time(r["case"], r["floor_ms"]))
        out.append("| %s | %s |" % (md_escape(r["case"]), " | ".join(cells)))
    out.append("")
    out.append("In parentheses: that peer's time / tle's time.")
    same = [r for r in records if num(r.get("memcpy_same_bytes_ms")) and r.get("tle_ms")]
    if same:
        out.append("")
        out.append("## Row kernels against a copy of their own size")
        out.append("")
        out.append("The copy floor comes from the largest copy of the run; `cuMemcpyDtoD` of each row kernel's own bytes, "
                   "timed the same way in the same process:")
        out.append("")
        out.append("| case | tle | cuMemcpyDtoD, same bytes | tle / memcpy speed |")
        out.append("|---|---:|---:|---:|")
        for r in same:
            out.append("| %s | %s | %s | %.0f%% |" % (md_escape(r["case"]), fmt_time(r["case"], r["tle_ms"]),
                                                     fmt_time(r["case"], r["memcpy_same_bytes_ms"]),
                                                     100.0 * r["memcpy_same_bytes_ms"] / r["tle_ms"]))
    if chart_rel:
        out.append("")
        out.append("![speedup per case and throughput against the roofline](%s)" % chart_rel)
    notes = []
    for r in records:
        if r.get("error"):
            notes.append("%s: tle failed: %s" % (r["case"], r["error"][:400]))
        for n in r.get("notes") or []:
            notes.append("%s: %s" % (r["case"], n[:400]))
        for p, e in (r.get("peer_errors") or {}).items():
            notes.append("%s: %s failed: %s" % (r["case"], p, str(e)[:300]))
    for g in info["group_errors"]:
        notes.append("%s (%s): %s" % (g["case"], g.get("source", "gpu_bench"), str(g.get("error"))[:400]))
    if notes:
        out.append("")
        out.append("## Notes and failures")
        out.append("")
        for n in notes:
            out.append("- " + md_escape(n))
    out.append("")
    return "\n".join(out)


def chart(records, info, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # noqa: BLE001
        return "chart skipped: matplotlib is not available (%s)" % e
    timed = [r for r in records if r["tle_ms"] and r["peers"]]
    bw = [r for r in records if r["kind"] == "bandwidth"]
    gemm = [r for r in records if r["kind"] in ("gemm", "flops", "fp8gemm")]
    fig, axes = plt.subplots(3, 1, figsize=(12, 16))
    colors = {"tle": "#1f77b4", "cublas": "#d62728", "torch_scaled_mm": "#8c564b", "torch": "#ff7f0e", "torch_flash": "#bcbd22", "triton": "#2ca02c", "triton_tma": "#17becf",
              "cuMemcpyDtoD": "#7f7f7f", "cuLaunchKernel": "#9467bd"}

    ax = axes[0]
    if timed:
        peers = [p for p in PEER_ORDER if any(p in r["ratios"] for r in timed)]
        h = 0.8 / max(1, len(peers))
        for i, p in enumerate(peers):
            ys = [k + i * h for k in range(len(timed))]
            xs = [r["ratios"].get(p, float("nan")) for r in timed]
            # Bars grow from 1 (equal time) to the ratio, left for slower, right for faster.
            ax.barh(ys, [x - 1 for x in xs], left=1, height=h, label="vs " + p, color=colors.get(p))
        ax.set_yticks([k + 0.4 - h / 2 for k in range(len(timed))])
        ax.set_yticklabels([r["case"] for r in timed], fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log")
        finite_x = [x for r in timed for x in r["ratios"].values() if x and math.isfinite(x)]
        lo, hi = min(finite_x + [1.0]) / 1.5, max(finite_x + [1.0]) * 1.5
        ax.set_xlim(lo, hi)
        ticks = [t for t in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100) if lo <= t <= hi]
        ax.set_xticks(ticks)
        ax.set_xticklabels(["%gx" % t for t in ticks])
        ax.axvline(1.0, color="black", linewidth=1)
        ax.legend(fontsize=8, loc="lower right")
    ax.set_title("Speedup of tle: peer time / tle time (log scale; right of 1 = tle faster)")

    def throughput_panel(ax, recs, unit, scale, ceiling, title):
        impls = ["tle"] + [p for p in PEER_ORDER if any(p in r["peers"] for r in recs)]
        w = 0.8 / max(1, len(impls))
        for i, name in enumerate(impls):
            vals = []
            for r in recs:
                ms = r["tle_ms"] if name == "tle" else r["peers"].get(name)
                work = r["flops"] if unit == "TFLOP/s" else r["bytes"]
                vals.append(work / ms / scale if ms else 0)
            ax.bar([k + i * w for k in range(len(recs))], vals, width=w, label=name, color=colors.get(name))
        if ceiling:
            ax.axhline(ceiling, color="black", linestyle="--", linewidth=1,
                       label="measured ceiling %.0f %s" % (ceiling, unit))
        ax.set_xticks([k + 0.4 - w / 2 for k in range(len(recs))])
        ax.set_xticklabels([r["case"] for r in recs], rotation=20, ha="right", fontsize=8)
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.legend(fontsize=8)

    c = info["ceilings"]
    throughput_panel(axes[1], bw, "GB/s", 1e6, c["copy_gbps"], "Bandwidth-bound cases: achieved GB/s vs measured copy bandwidth")
    throughput_panel(axes[2], gemm, "TFLOP/s", 1e9, c["gemm_tflops"],
                     "GEMM and attention (bf16): achieved TFLOP/s vs best measured GEMM rate")
    fig.suptitle("tle GPU benchmarks - %s, %s" % (info["gpu"] or "?", info["date"] or "?"))
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def main():
    ap = argparse.ArgumentParser(description="merge gpu_bench and peers.py JSON lines into the results of a run")
    ap.add_argument("--tle", required=True, help="gpu_bench's output (JSON lines)")
    ap.add_argument("--peers", help="peers.py's output (JSON lines); optional")
    ap.add_argument("--out-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    ap.add_argument("--results-md", help="where to write the Markdown (default <out-dir>/RESULTS.md)")
    ap.add_argument("--command", help="the exact command of the run, recorded in the results")
    ap.add_argument("--driver", help="the NVIDIA driver version (nvidia-smi), recorded in the results")
    args = ap.parse_args()

    if not os.path.exists(args.tle):
        sys.stderr.write("report.py: no %s\n" % args.tle)
        return 1
    tle_meta, tle_rows = read_jsonl(args.tle)
    peer_meta, peer_rows = ([], [])
    if args.peers:
        if os.path.exists(args.peers):
            peer_meta, peer_rows = read_jsonl(args.peers)
        else:
            sys.stderr.write("report.py: no %s; peers left out\n" % args.peers)
    if not tle_rows and not peer_rows:
        sys.stderr.write("report.py: no case in the inputs\n")
        return 1
    records, info = merge(tle_meta, tle_rows, peer_meta, peer_rows, driver=args.driver, command=args.command)

    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "latest.jsonl"), "w") as f:
        for r in records:
            f.write(json.dumps(r, sort_keys=False) + "\n")
    chart_path = os.path.join(args.out_dir, "chart.png")
    chart_note = chart(records, info, chart_path)
    md_path = args.results_md or os.path.join(args.out_dir, "RESULTS.md")
    # The committed RESULTS.md sits in benchmarks/, the chart in benchmarks/results/.
    chart_rel = None if chart_note else "results/chart.png"
    md = markdown(records, info, chart_rel)
    if chart_note:
        md += "\n(%s)\n" % chart_note
    with open(md_path, "w") as f:
        f.write(md)

    print(text_table(records, info))
    print()
    print("wrote %s, %s%s" % (os.path.join(args.out_dir, "latest.jsonl"), md_path,
                              "" if chart_note else ", " + chart_path))
    if chart_note:
        print(chart_note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
