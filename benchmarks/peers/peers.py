#!/usr/bin/env python3
"""benchmarks/peers/peers.py - the peers' side of tle's GPU benchmark suite (docs/benchmarks.md).

Runs the cases of benchmarks/gpu_bench.cpp with PyTorch (cuBLAS through torch.matmul) and Triton,
timed exactly the way gpu_bench times tle, and prints one JSON line per (case, peer) on stdout:

    {"case": "softmax/f32/8192x8192", "peer": "triton", "ms": ..., "spread": ..., "p10_ms": ...,
     "p90_ms": ..., "min_ms": ..., "reps": 100, "ok": true, "config": "..."}

The first line is {"meta": {...}} (GPU, torch, triton and CUDA versions, date). A case that fails
to compile, run or check prints "ok": false with "error", and the run goes on.

Timing (same as benchmarks/bench_util.hpp): one call, an estimate from 3 calls, warm-up calls worth
~25 ms (3..50), then `--reps` (default 100) repetitions, each: fill a 256 MB buffer (flushes the
50 MB L2; not timed), record a start event, the call, record a stop event; one synchronize at the
end; median, p10, p90, min, max of the per-repetition event times. Every case is checked against a
float64 / float32 reference before it is timed.

Peers: "torch" (torch.softmax, F.layer_norm, torch.add, Tensor.copy_), "cublas" (torch.matmul on
bf16: cuBLAS through PyTorch), "torch_scaled_mm" (torch._scaled_mm on fp8 e4m3), "triton" (kernels written as in Triton's tutorials: 01 vector add,
02 fused softmax, 03 matrix multiplication with its autotune configs, 05 layer norm). Compile
latency: Triton cold (a new JITFunction and a fresh, empty TRITON_CACHE_DIR), disk (a new
JITFunction, the populated cache dir) and memory hit (host time of a launch of a compiled kernel).
Launch overhead: host time of a 1-program Triton launch (and torch.add on 128 elements).
Library kernels: topk against torch.topk ("torch") and torch.sort ("torch_sort"); moe_align against
a torch composition (bincount + cumsum + stable argsort, "torch") and a Triton kernel in the
structure of vLLM's Triton moe_align path ("triton"); the launch floor, an empty Triton kernel.

Needs a CUDA GPU, torch and triton; no network.

    python3 benchmarks/peers/peers.py [--reps 100] [--groups copy,softmax,...] > peers.jsonl
"""
import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
import traceback
from datetime import datetime, timezone

import torch
import torch.nn.functional as F

try:
    import triton
    import triton.language as tl
    TRITON_ERROR = None
except Exception as e:  # noqa: BLE001 - report any import failure as a per-case error
    triton = None
    TRITON_ERROR = "import triton failed: %r" % (e,)

    class tl:  # noqa: N801 - stand-in so the kernel definitions below still evaluate
        constexpr = "constexpr"

GROUPS = ["copy", "vector_add", "softmax", "layernorm", "matmul", "matmul_fp8", "gemm_ws", "attention", "compile", "launch", "topk", "moe_align",
          "transpose", "reorder"]


# ----------------------------------------------------------------------------------- output

def emit(obj):
    sys.stdout.write(json.dumps(obj, allow_nan=False, default=str) + "\n")
    sys.stdout.flush()


def finite(x):
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None


def summarize(ms, warmup):
    t = sorted(ms)
    n = len(t)
    med = t[n // 2] if n % 2 else 0.5 * (t[n // 2 - 1] + t[n // 2])

    def q(p):
        return t[min(n - 1, int(p * (n - 1) + 0.5))]

    return {"ms": med, "p10_ms": q(0.10), "p90_ms": q(0.90), "min_ms": t[0], "max_ms": t[-1],
            "spread": (q(0.90) - q(0.10)) / med if med > 0 else None, "reps": n, "warmup": warmup}


def emit_ok(case, peer, timing, config="", note="", **extra):
    rec = {"case": case, "peer": peer}
    rec.update({k: finite(v) if isinstance(v, float) else v for k, v in timing.items()})
    if config:
        rec["config"] = config
    if note:
        rec["note"] = note
    rec.update(extra)
    rec["ok"] = True
    emit(rec)


def emit_error(case, peer, error):
    emit({"case": case, "peer": peer, "ok": False, "error": str(error)[-1500:]})


def guarded(case, peer, fn):
    """Runs fn(); an exception becomes an "ok": false line. Returns fn's result or None."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001
        sys.stderr.write("peers.py: %s [%s] failed:\n%s\n" % (case, peer, traceback.format_exc()))
        emit_error(case, peer, "%s: %s" % (type(e).__name__, e))
        return None


def run_checked(f, out, want, what):
    """Zeroes `out`, runs f once and requires out == want exactly, before any timing."""
    out.zero_()
    f()
    torch.cuda.synchronize()
    if not torch.equal(out, want):
        raise AssertionError(what)


def need_triton():
    if triton is None:
        raise RuntimeError(TRITON_ERROR)


# ----------------------------------------------------------------------------------- timing

class Timer:
    def __init__(self, reps):
        self.reps = reps
        self.flush = torch.empty(64 << 20, dtype=torch.int32, device="cuda")  # 256 MB
        self.flush_value = 0

    def flush_l2(self):
        self.flush_value += 1
        self.flush.fill_(self.flush_value)

    def time(self, fn, reps=None):
        reps = reps or self.reps
        fn()
        torch.cuda.synchronize()
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(3):
            fn()
        b.record()
        b.synchronize()
        est = a.elapsed_time(b) / 3
        warm = min(50, max(3, int(25.0 / max(est, 1e-3))))
        if est > 0 and reps * est > 15000.0:  # only a kernel slower than 150 ms: 15 s worth, >= 10
            reps = max(10, int(15000.0 / est))
        for _ in range(warm):
            fn()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        stops = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for i in range(reps):
            self.flush_l2()
            starts[i].record()
            fn()
            stops[i].record()
        torch.cuda.synchronize()
        return summarize([s.elapsed_time(e) for s, e in zip(starts, stops)], warm)


def host_times(fn, n, sync_every=256, warm=200):
    """Host wall-clock milliseconds of each of n calls of fn (enqueue only; the stream is drained
    every sync_every calls, untimed, so the launch queue never fills)."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    t = []
    for i in range(n):
        t0 = time.perf_counter()
        fn()
        t.append((time.perf_counter() - t0) * 1e3)
        if i % sync_every == sync_every - 1:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return summarize(t, warm)


def sync_times(fn, n, warm=100):
    for _ in range(warm):
        fn()
        torch.cuda.synchronize()
    t = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        t.append((time.perf_counter() - t0) * 1e3)
    return summarize(t, warm)


# ----------------------------------------------------------------------------------- inputs

def random_nonzero(shape, dtype, lo=-1.0, hi=1.0, seed=0):
    """Uniform in [lo, hi), nudged away from zero (|v| >= (hi - lo) / 1024), then cast."""
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    x = torch.rand(shape, device="cuda", dtype=torch.float32, generator=g) * (hi - lo) + lo
    eps = (hi - lo) / 1024
    x[x.abs() < eps] = eps
    return x.to(dtype)  # |x| >= 2^-9 (hi - lo): never rounds to zero, even in bf16


def check_close(got, want, rtol, atol, what):
    got = got.double()
    want = want.double()
    err = (got - want).abs()
    bad = ~(err <= atol + rtol * want.abs())
    nbad = int(bad.sum().item())
    if nbad:
        i = int(bad.flatten().nonzero()[0].item())
        raise AssertionError("%s: reference check failed: %d of %d values off (first at %d: got %g, want %g), "
                             "max abs error %.3g" % (what, nbad, got.numel(), i, got.flatten()[i].item(),
                                                     want.flatten()[i].item(), err.max().item()))


# ----------------------------------------------------------------------------------- Triton kernels
# Written as in Triton's tutorials (python/tutorials/01, 02, 03, 05). The raw functions are kept
# undecorated so that the compile-latency trials can make fresh JITFunction objects of them.

def _add_kernel_src(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    output = x + y
    tl.store(output_ptr + offsets, output, mask=mask)


def _copy_kernel_src(x_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(output_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)


def _softmax_kernel_src(output_ptr, input_ptr, input_row_stride, output_row_stride, n_rows, n_cols,
                        BLOCK_SIZE: tl.constexpr, num_stages: tl.constexpr):
    # Tutorial 02 (persistent: each program walks rows start, start + num_programs, ...).
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step, num_stages=num_stages):
        row_start_ptr = input_ptr + row_idx * input_row_stride
        col_offsets = tl.arange(0, BLOCK_SIZE)
        input_ptrs = row_start_ptr + col_offsets
        mask = col_offsets < n_cols
        row = tl.load(input_ptrs, mask=mask, other=-float("inf"))
        row_minus_max = row - tl.max(row, axis=0)
        numerator = tl.exp(row_minus_max)
        denominator = tl.sum(numerator, axis=0)
        softmax_output = numerator / denominator
        output_row_start_ptr = output_ptr + row_idx * output_row_stride
        output_ptrs = output_row_start_ptr + col_offsets
        tl.store(output_ptrs, softmax_output, mask=mask)


def _softmax_row_src(x_ptr, y_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    # One row per program, the same kernel as tle's (used for compile latency only).
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    v = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(y_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=mask)


def _layer_norm_fwd_fused_src(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    # Tutorial 05, forward kernel.
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    mean = 0
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        x_hat = (x - mean) * rstd
        y = x_hat * w + b
        tl.store(Y + cols, y, mask=mask)


def _matmul_kernel_src(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                       BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                       GROUP_SIZE_M: tl.constexpr):
    # Tutorial 03 (grouped ordering for L2 reuse), without the activation; C in c_ptr's dtype.
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    c = accumulator.to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


def matmul_autotune_configs():
    # Tutorial 03's get_cuda_autotune_config() (the fp16/bf16 entries).
    C = triton.Config
    return [
        C({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8}, num_stages=3, num_warps=8),
        C({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}, num_stages=4, num_warps=4),
        C({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}, num_stages=4, num_warps=4),
        C({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}, num_stages=4, num_warps=4),
        C({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}, num_stages=4, num_warps=4),
        C({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}, num_stages=4, num_warps=4),
        C({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}, num_stages=5, num_warps=2),
        C({"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}, num_stages=5, num_warps=2),
    ]


def _matmul_tma_persistent_src(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                               BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr):
    # The structure of Triton's tutorial 09 (persistent matmul with tensor descriptors: TMA loads
    # and stores on Hopper): NUM_SMS programs walk the output tiles in grouped order.
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    group_size = GROUP_M * num_n
    for tile in tl.range(tl.program_id(0), num_m * num_n, NUM_SMS):
        first_m = (tile // group_size) * GROUP_M
        rows = tl.minimum(num_m - first_m, GROUP_M)
        pid_m = first_m + (tile % group_size) % rows
        pid_n = (tile % group_size) // rows
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in range(k_tiles):
            a = a_desc.load([pid_m * BLOCK_M, kk * BLOCK_K])
            b = b_desc.load([kk * BLOCK_K, pid_n * BLOCK_N])
            acc = tl.dot(a, b, acc)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(tl.bfloat16))


def _tma_block_shapes(nargs):
    # Autotuner pre-hook (as tutorial 09's): the descriptors' block shapes follow the config.
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [bm, bk]
    nargs["b_desc"].block_shape = [bk, bn]
    nargs["c_desc"].block_shape = [bm, bn]


def matmul_tma_autotune_configs():
    C = triton.Config
    out = []
    for bm, bn, bk, stages, warps in [(128, 256, 64, 3, 8), (128, 256, 64, 4, 8), (128, 128, 64, 4, 8),
                                      (128, 128, 64, 4, 4), (128, 128, 64, 3, 4), (64, 128, 64, 4, 4),
                                      (128, 64, 64, 4, 4), (64, 64, 64, 5, 4)]:
        out.append(C({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_stages=stages, num_warps=warps,
                     pre_hook=_tma_block_shapes))
    return out


class TK:
    """The Triton kernels, made once triton is known to import."""

    def __init__(self):
        need_triton()
        self.add = triton.jit(_add_kernel_src)
        self.copy = triton.jit(_copy_kernel_src)
        self.softmax = triton.jit(_softmax_kernel_src)
        self.layer_norm = triton.jit(_layer_norm_fwd_fused_src)
        self.matmul = triton.autotune(configs=matmul_autotune_configs(), key=["M", "N", "K"])(
            triton.jit(_matmul_kernel_src))
        self.attention = triton.jit(_attention_kernel_src)
        # The tutorial-06 kernel calls its loop as a Triton function, found by name at compile time.
        globals()["_attn_tma_inner"] = triton.jit(_attn_tma_inner_src)
        self.attention_tma = triton.jit(_attention_tma_src)
        self.empty = triton.jit(_empty_src)
        self.moe1 = triton.jit(_moe_stage1_src)
        self.moe2 = triton.jit(_moe_stage2_src)
        self.moe3 = triton.jit(_moe_stage3_src)
        self.moe4 = triton.jit(_moe_stage4_src)
        self.matmul_tma = triton.autotune(configs=matmul_tma_autotune_configs(), key=["M", "N", "K"])(
            triton.jit(_matmul_tma_persistent_src))
        from triton.runtime import driver
        props = driver.active.utils.get_device_properties(torch.cuda.current_device())
        self.num_sm = props["multiprocessor_count"]
        self.num_regs = props["max_num_regs"]
        self.size_smem = props["max_shared_mem"]
        self.warp_size = props["warpSize"]
        self.softmax_cache = {}


_tk = None


def tk():
    global _tk
    if _tk is None:
        _tk = TK()
    return _tk


def triton_softmax(x, y):
    # Tutorial 02's host code: BLOCK_SIZE = next power of 2, 8 warps, persistent grid sized by
    # occupancy (registers and shared memory of the compiled kernel).
    k = tk()
    n_rows, n_cols = x.shape
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    num_warps = 8
    num_stages = 4 if k.size_smem > 200000 else 2
    key = (BLOCK_SIZE, n_rows)
    if key not in k.softmax_cache:
        kernel = k.softmax.warmup(y, x, x.stride(0), y.stride(0), n_rows, n_cols, BLOCK_SIZE=BLOCK_SIZE,
                                  num_stages=num_stages, num_warps=num_warps, grid=(1,))
        kernel._init_handles()
        n_regs = max(1, kernel.n_regs)
        size_smem = kernel.metadata.shared
        occupancy = k.num_regs // (n_regs * k.warp_size * num_warps)
        if size_smem:
            occupancy = min(occupancy, k.size_smem // size_smem)
        num_programs = min(max(1, k.num_sm * occupancy), n_rows)
        k.softmax_cache[key] = (num_programs, "BLOCK=%d warps=%d stages=%d programs=%d" % (
            BLOCK_SIZE, num_warps, num_stages, num_programs))
    num_programs, _ = k.softmax_cache[key]
    # Through the JITFunction (its in-memory cache holds the kernel warmup() compiled), with the
    # same arguments as the warmup.
    k.softmax[(num_programs, 1, 1)](y, x, x.stride(0), y.stride(0), n_rows, n_cols, BLOCK_SIZE=BLOCK_SIZE,
                                    num_stages=num_stages, num_warps=num_warps)
    return y


def triton_layer_norm(x, w, b, y, mean, rstd, eps):
    # Tutorial 05's host code.
    M, N = x.shape
    MAX_FUSED_SIZE = 65536 // x.element_size()
    BLOCK_SIZE = min(MAX_FUSED_SIZE, triton.next_power_of_2(N))
    if N > BLOCK_SIZE:
        raise RuntimeError("This layer norm doesn't support feature dim >= 64KB.")
    num_warps = min(max(BLOCK_SIZE // 256, 1), 8)
    tk().layer_norm[(M,)](x, y, w, b, mean, rstd, x.stride(0), N, eps, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps,
                          num_ctas=1)
    return "BLOCK=%d warps=%d" % (BLOCK_SIZE, num_warps)


def triton_matmul(a, b, c):
    M, K = a.shape
    K2, N = b.shape
    assert K == K2
    grid = lambda META: (triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),)  # noqa: E731
    tk().matmul[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    return c


def triton_matmul_tma(a, b, c):
    # Host-side tensor descriptors (strides must be multiples of 16 bytes: TMA's rule).
    from triton.tools.tensor_descriptor import TensorDescriptor
    M, K = a.shape
    N = b.shape[1]
    k = tk()
    a_desc = TensorDescriptor(a, list(a.shape), list(a.stride()), [1, 1])
    b_desc = TensorDescriptor(b, list(b.shape), list(b.stride()), [1, 1])
    c_desc = TensorDescriptor(c, list(c.shape), list(c.stride()), [1, 1])
    grid = lambda META: (min(k.num_sm, triton.cdiv(M, META["BLOCK_M"]) * triton.cdiv(N, META["BLOCK_N"])),)  # noqa: E731
    k.matmul_tma[grid](a_desc, b_desc, c_desc, M, N, K, NUM_SMS=k.num_sm)
    return c


# ----------------------------------------------------------------------------------- groups

def group_copy(tm):
    n = 1 << 28
    case = "copy/f32/2^28"
    x = random_nonzero((n,), torch.float32, seed=11)
    y = torch.empty_like(x)

    def torch_case():
        f = lambda: y.copy_(x)  # noqa: E731
        run_checked(f, y, x, "copy_ produced a wrong copy")
        emit_ok(case, "torch", tm.time(f), config="Tensor.copy_")

    def triton_case():
        k = tk()
        BLOCK = 1024
        f = lambda: k.copy[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK_SIZE=BLOCK)  # noqa: E731
        run_checked(f, y, x, "triton copy produced a wrong copy")
        emit_ok(case, "triton", tm.time(f), config="BLOCK_SIZE=1024 (tutorial 01 style)")

    guarded(case, "torch", torch_case)
    guarded(case, "triton", triton_case)


def group_transpose(tm):
    for m, n in ((8192, 8192), (4100, 1000)):
        case = "transpose/f32/%dx%d" % (m, n)
        x = random_nonzero((m, n), torch.float32, seed=9)
        y = torch.empty((n, m), dtype=torch.float32, device=x.device)
        want = x.t().contiguous()

        def torch_case():
            f = lambda: y.copy_(x.t())  # noqa: E731
            run_checked(f, y, want, "copy_ of the transposed view is wrong")
            emit_ok(case, "torch", tm.time(f), config="y.copy_(x.t())")

        guarded(case, "torch", torch_case)


def group_vector_add(tm):
    n = 1 << 28
    case = "vector_add/f32/2^28"
    x = random_nonzero((n,), torch.float32, seed=1)
    y = random_nonzero((n,), torch.float32, seed=2)
    out = torch.empty_like(x)
    want = x + y

    def torch_case():
        f = lambda: torch.add(x, y, out=out)  # noqa: E731
        run_checked(f, out, want, "torch.add: wrong sum")
        emit_ok(case, "torch", tm.time(f), config="torch.add(out=)")

    def triton_case():
        k = tk()
        BLOCK = 1024
        f = lambda: k.add[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK_SIZE=BLOCK)  # noqa: E731
        run_checked(f, out, want, "triton add: wrong sum")
        emit_ok(case, "triton", tm.time(f), config="BLOCK_SIZE=1024 (tutorial 01)")

    guarded(case, "torch", torch_case)
    guarded(case, "triton", triton_case)


def group_softmax(tm):
    for rows, cols in [(8192, 8192), (32768, 1024), (4096, 32768), (32768, 1000)]:
        case = "softmax/f32/%dx%d" % (rows, cols)
        x = random_nonzero((rows, cols), torch.float32, -4.0, 4.0, seed=3)
        want = torch.softmax(x.double(), dim=-1)
        y = torch.empty_like(x)

        def torch_case():
            f = lambda: torch.softmax(x, dim=-1)  # noqa: E731
            check_close(f(), want, 1e-4, 1e-7, "torch.softmax")
            emit_ok(case, "torch", tm.time(f), config="torch.softmax(dim=-1)")

        def triton_case():
            f = lambda: triton_softmax(x, y)  # noqa: E731
            y.zero_()
            f()
            torch.cuda.synchronize()
            check_close(y, want, 1e-4, 1e-7, "triton softmax")
            cfg = tk().softmax_cache[(triton.next_power_of_2(cols), rows)][1]
            emit_ok(case, "triton", tm.time(f), config=cfg + " (tutorial 02)")

        guarded(case, "torch", torch_case)
        guarded(case, "triton", triton_case)
        torch.cuda.empty_cache()
    # LLM-vocabulary rows (tle: the online two-pass kernel, ex::make_softmax_looped). Triton's
    # tutorial kernel holds a whole row in one tile (131072 lanes here) and is left out.
    for rows, cols in [(64, 128256), (2048, 128256)]:
        case = "softmax/f32/%dx%d" % (rows, cols)
        x = random_nonzero((rows, cols), torch.float32, -4.0, 4.0, seed=3)
        want = torch.softmax(x.double(), dim=-1)

        def torch_long():
            f = lambda: torch.softmax(x, dim=-1)  # noqa: E731
            check_close(f(), want, 1e-4, 1e-9, "torch.softmax")
            emit_ok(case, "torch", tm.time(f), config="torch.softmax(dim=-1)")

        guarded(case, "torch", torch_long)
        del want
        torch.cuda.empty_cache()


def group_layernorm(tm):
    eps = 1e-5
    for rows, cols in [(16384, 4096), (4096, 8192)]:
        case = "layernorm/bf16/%dx%d" % (rows, cols)
        x = random_nonzero((rows, cols), torch.bfloat16, -2.0, 2.0, seed=4)
        w = random_nonzero((cols,), torch.bfloat16, 0.5, 1.5, seed=5)
        b = random_nonzero((cols,), torch.bfloat16, seed=6)
        want = F.layer_norm(x.double(), (cols,), w.double(), b.double(), eps)
        y = torch.empty_like(x)
        mean = torch.empty((rows,), dtype=torch.float32, device="cuda")
        rstd = torch.empty((rows,), dtype=torch.float32, device="cuda")

        def torch_case():
            f = lambda: F.layer_norm(x, (cols,), w, b, eps)  # noqa: E731
            check_close(f(), want, 8e-3, 2e-2, "F.layer_norm")
            emit_ok(case, "torch", tm.time(f), config="F.layer_norm, bf16 weight and bias")

        def triton_case():
            y.zero_()
            cfg = triton_layer_norm(x, w, b, y, mean, rstd, eps)
            torch.cuda.synchronize()
            check_close(y, want, 8e-3, 2e-2, "triton layer norm")
            f = lambda: triton_layer_norm(x, w, b, y, mean, rstd, eps)  # noqa: E731
            emit_ok(case, "triton", tm.time(f), config=cfg + " (tutorial 05; also writes mean, rstd)")

        guarded(case, "torch", torch_case)
        guarded(case, "triton", triton_case)


def group_matmul(tm, prefix="matmul", shapes=((8192, 8192, 8192), (4096, 7168, 2048), (16384, 2048, 7168),
                                             (128, 7168, 2048), (4000, 4100, 3000)), triton=True):
    torch.backends.cuda.matmul.allow_tf32 = False
    for M, N, K in shapes:
        case = "%s/bf16/%dx%dx%d" % (prefix, M, N, K)
        a = random_nonzero((M, K), torch.bfloat16, seed=7)
        b = random_nonzero((K, N), torch.bfloat16, seed=8)
        want = a.float() @ b.float()  # f32 GEMM (no TF32) of the bf16 inputs
        c = torch.empty((M, N), dtype=torch.bfloat16, device="cuda")
        rtol, atol = 1.0 / 128, 2e-3 * math.sqrt(K)

        def cublas_case():
            f = lambda: torch.matmul(a, b, out=c)  # noqa: E731
            c.zero_()
            f()
            torch.cuda.synchronize()
            check_close(c, want, rtol, atol, "torch.matmul")
            emit_ok(case, "cublas", tm.time(f), config="torch.matmul(out=) -> cuBLAS, bf16 in/out, f32 accumulate")

        def triton_case():
            f = lambda: triton_matmul(a, b, c)  # noqa: E731
            c.zero_()
            f()  # runs the autotuner for this (M, N, K)
            torch.cuda.synchronize()
            check_close(c, want, rtol, atol, "triton matmul")
            best = getattr(tk().matmul, "best_config", None)
            emit_ok(case, "triton", tm.time(f), config="autotuned (tutorial 03 configs): %s" % (best,))

        def triton_tma_case():
            f = lambda: triton_matmul_tma(a, b, c)  # noqa: E731
            c.zero_()
            f()
            torch.cuda.synchronize()
            check_close(c, want, rtol, atol, "triton persistent TMA matmul")
            best = getattr(tk().matmul_tma, "best_config", None)
            emit_ok(case, "triton_tma", tm.time(f),
                    config="persistent, TMA descriptors (tutorial 09 structure), autotuned: %s" % (best,))

        guarded(case, "cublas", cublas_case)
        if triton:
            guarded(case, "triton", triton_case)
            guarded(case, "triton_tma", triton_tma_case)
        torch.cuda.empty_cache()


def group_matmul_fp8(tm):
    # gpu_bench's matmul_fp8 cases: torch._scaled_mm (cuBLASLt's fp8 GEMM) with the same contract:
    # e4m3 A [M, K] row-major, B [K, N] column-major (the transpose of a row-major [N, K]),
    # per-tensor f32 scales (or, "/rowwise", f32 scales per row of A [M, 1] and column of B [1, N]),
    # bf16 out.
    for M, N, K, rowwise in ((8192, 8192, 8192, False), (4096, 7168, 2048, False), (4000, 4096, 3008, False),
                             (8192, 8192, 8192, True), (4000, 4096, 3008, True)):
        case = "matmul/fp8/%dx%dx%d%s" % (M, N, K, "/rowwise" if rowwise else "")
        a = random_nonzero((M, K), torch.float32, seed=7).to(torch.float8_e4m3fn)
        bt = random_nonzero((N, K), torch.float32, seed=8).to(torch.float8_e4m3fn)
        if rowwise:
            sa = (0.5 + (torch.arange(M, device="cuda") % 7).float() / 8).reshape(M, 1)
            sb = (1.0 + (torch.arange(N, device="cuda") % 5).float() / 8).reshape(1, N)
            want = (a.float() @ bt.float().t()) * sa * sb
        else:
            sa = torch.tensor(0.75, device="cuda")
            sb = torch.tensor(1.25, device="cuda")
            want = (a.float() @ bt.float().t()) * (0.75 * 1.25)

        def scaled_mm_case():
            f = lambda: torch._scaled_mm(a, bt.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)  # noqa: E731
            got = f()
            torch.cuda.synchronize()
            check_close(got, want, 1.0 / 64, 2e-3 * math.sqrt(K), "torch._scaled_mm")
            emit_ok(case, "torch_scaled_mm", tm.time(f),
                    config="torch._scaled_mm(e4m3, e4m3 column-major, %s scales, out bf16) -> cuBLASLt"
                    % ("row-wise" if rowwise else "per-tensor"))

        guarded(case, "torch_scaled_mm", scaled_mm_case)
        torch.cuda.empty_cache()


def group_gemm_ws(tm):
    # gpu_bench's gemm_ws cases (the TLE-Struct warp-specialized GEMM): cuBLAS on the same shapes
    # (Triton is beside tle's tuned matmul in group matmul).
    group_matmul(tm, "gemm_ws", ((8192, 8192, 8192), (16384, 2048, 7168), (4096, 7168, 2048), (4100, 7168, 2048)),
                 triton=False)


def _attention_kernel_src(Q, K, V, O, S, qk_scale, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr,
                          CAUSAL: tl.constexpr):
    # FlashAttention-2 forward (Dao 2023, Algorithm 1) as a Triton user writes it, the same
    # algorithm as tle's ex::make_attention: program (i, bh) takes BM query rows of head bh of
    # contiguous [batch * heads, S, D] tensors; online softmax in base 2.
    start_m = tl.program_id(0) * BM
    head = tl.program_id(1).to(tl.int64) * S * D
    rm = start_m + tl.arange(0, BM)
    rd = tl.arange(0, D)
    q = tl.load(Q + head + rm[:, None] * D + rd[None, :], mask=rm[:, None] < S, other=0.0)
    m_i = tl.full((BM,), float("-inf"), tl.float32)
    l_i = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, D), tl.float32)
    hi = tl.minimum(start_m + BM, S) if CAUSAL else S
    for n0 in range(0, hi, BN):
        rn = n0 + tl.arange(0, BN)
        kv = head + rn[:, None] * D + rd[None, :]
        k = tl.load(K + kv, mask=rn[:, None] < S, other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        keep = rn[None, :] < S
        if CAUSAL:
            keep = keep & (rm[:, None] >= rn[None, :])
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + kv, mask=rn[:, None] < S, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    tl.store(O + head + rm[:, None] * D + rd[None, :], (acc / l_i[:, None]).to(O.dtype.element_ty), mask=rm[:, None] < S)


def _attn_tma_inner_src(acc, l_i, m_i, q, desc_k, desc_v, bh, start_m, S, qk_scale, offs_m, offs_n,
                        BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr, PART: tl.constexpr,
                        WS: tl.constexpr):
    # One part of the key loop of the Triton fused-attention tutorial's Hopper form (tutorial 06,
    # tensor descriptors): PART 1 = the key blocks left of the causal diagonal (no mask), PART 2 =
    # the diagonal block (causal mask), PART 3 = every whole key block (non-causal, no mask),
    # PART 4 = the partial last block when S is not a multiple of BN (masked by n < S; tle's
    # kernel splits its loop the same way). Scores are scaled after the max, in base 2, as the
    # tutorial does.
    if PART == 1:
        lo, hi = 0, start_m * BM
    elif PART == 2:
        lo, hi = start_m * BM, tl.minimum((start_m + 1) * BM, S)
        lo = tl.multiple_of(lo, BM)
    elif PART == 3:
        lo, hi = 0, (S // BN) * BN
    else:
        lo, hi = (S // BN) * BN, S
    for n0 in tl.range(lo, hi, BN, warp_specialize=WS):
        k = desc_k.load([bh, n0, 0]).reshape(BN, D)
        s = tl.dot(q, k.T)
        if PART == 2:
            s = s * qk_scale + tl.where(offs_m[:, None] >= n0 + offs_n[None, :], 0, -1.0e6)
            m_new = tl.maximum(m_i, tl.max(s, 1))
            s -= m_new[:, None]
        else:
            if PART == 4:
                s = tl.where(n0 + offs_n[None, :] < S, s, -1.0e6)
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
            s = s * qk_scale - m_new[:, None]
        p = tl.math.exp2(s)
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = desc_v.load([bh, n0, 0]).reshape(BN, D)
        acc = tl.dot(p.to(tl.bfloat16), v, acc)
        m_i = m_new
    return acc, l_i, m_i


def _attention_tma_src(desc_q, desc_k, desc_v, desc_o, S, qk_scale, BM: tl.constexpr, BN: tl.constexpr,
                       D: tl.constexpr, CAUSAL: tl.constexpr, EVEN: tl.constexpr, WS: tl.constexpr):
    # The structure of Triton's fused-attention tutorial (python/tutorials/06-fused-attention.py,
    # its tensor-descriptor kernel for Hopper): Q, K, V, O through TMA descriptors, the causal key
    # loop split into an unmasked part and the diagonal block, optional warp specialization of the
    # loop (Triton's tl.range(..., warp_specialize=True)). Descriptors are 3-D ([batch * heads, S,
    # D], block [1, rows, D]) so a ragged S reads zeros past a head's end, not the next head.
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    offs_m = start_m * BM + tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    q = desc_q.load([bh, start_m * BM, 0]).reshape(BM, D)
    if CAUSAL:
        acc, l_i, m_i = _attn_tma_inner(acc, l_i, m_i, q, desc_k, desc_v, bh, start_m, S, qk_scale, offs_m, offs_n,
                                        BM, BN, D, 1, WS)
        acc, l_i, m_i = _attn_tma_inner(acc, l_i, m_i, q, desc_k, desc_v, bh, start_m, S, qk_scale, offs_m, offs_n,
                                        BM, BN, D, 2, WS)
    else:
        acc, l_i, m_i = _attn_tma_inner(acc, l_i, m_i, q, desc_k, desc_v, bh, start_m, S, qk_scale, offs_m, offs_n,
                                        BM, BN, D, 3, WS)
        if not EVEN:
            acc, l_i, m_i = _attn_tma_inner(acc, l_i, m_i, q, desc_k, desc_v, bh, start_m, S, qk_scale, offs_m,
                                            offs_n, BM, BN, D, 4, WS)
    out = acc / l_i[:, None]
    desc_o.store([bh, start_m * BM, 0], out.to(tl.bfloat16).reshape(1, BM, D))


# The tutorial's Hopper autotuning list (BM in 64, 128; BN in 32, 64, 128; stages 2, 3, 4, 6;
# warps 4, 8; on sm_90 no 8-warp config below 128 x 128 elements), each also with the loop
# warp-specialized; causal cases leave out BN > BM (the diagonal block is BM keys). Configs that
# fail to compile (e.g. warp specialization where this Triton lacks it) are skipped and reported.
ATTENTION_TMA_CONFIGS = [(bm, bn, w, s, ws) for bm in (64, 128) for bn in (32, 64, 128) for s in (2, 3, 4, 6)
                         for w in (4, 8) for ws in (False, True)
                         if not (bm * bn < 128 * 128 and w == 8)]


ATTENTION_CONFIGS = [(128, 64, 8, 3), (128, 128, 8, 3), (128, 64, 4, 3), (64, 64, 4, 3)]  # BM, BN, warps, stages


def group_attention(tm):
    for batch, heads, S, D in [(4, 32, 4096, 128), (4, 32, 16384, 128), (4, 32, 4000, 128)]:
        shape = (batch, heads, S, D)
        q = random_nonzero(shape, torch.bfloat16, seed=31)
        k = random_nonzero(shape, torch.bfloat16, seed=32)
        v = random_nonzero(shape, torch.bfloat16, seed=33)
        o = torch.empty_like(q)
        sm_scale = 1.0 / math.sqrt(D)
        for causal in (False, True):
            case = "attention/bf16/%dx%dx%dx%d%s" % (batch, heads, S, D, "/causal" if causal else "")
            # Reference on 64 query rows of 4 heads, in f32.
            hsel = [0, 37 % heads, 71 % heads, heads - 1]
            rows = torch.cat([torch.arange(0, S, max(1, S // 16), device="cuda")[:16],
                              torch.tensor([S - 1], device="cuda")])  # and the last row (a partial row block)

            def reference():
                qs, ks, vs = q[0, hsel].float(), k[0, hsel].float(), v[0, hsel].float()
                s = (qs[:, rows] @ ks.transpose(1, 2)) * sm_scale
                if causal:
                    s = s.masked_fill(torch.arange(S, device="cuda")[None, None, :] > rows[None, :, None], float("-inf"))
                return torch.softmax(s, -1) @ vs

            want = reference()

            def check(out, what):
                got = out[0, hsel][:, rows].float()
                if not torch.allclose(got, want, rtol=2e-2, atol=2e-2):
                    raise AssertionError("%s: max abs error %g" % (what, (got - want).abs().max().item()))

            def sdpa(backend):
                # "torch": SDPA as a user calls it (torch picks its backend); "torch_flash": its
                # FlashAttention-2 backend only.
                import contextlib
                from torch.nn.attention import SDPBackend, sdpa_kernel
                ctx = sdpa_kernel([SDPBackend.FLASH_ATTENTION]) if backend == "torch_flash" else contextlib.nullcontext()
                with ctx:
                    o.copy_(F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                    torch.cuda.synchronize()
                    check(o, "torch sdpa")
                    g = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
                    emit_ok(case, backend, tm.time(g),
                            config="torch.nn.functional.scaled_dot_product_attention, %s" % (
                                "flash backend" if backend == "torch_flash" else "default backend choice"))

            def triton_case():
                best = None
                def launcher(BM, BN, warps, stages):
                    grid = (triton.cdiv(S, BM), batch * heads)
                    return lambda: tk().attention[grid](q, k, v, o, S, sm_scale * 1.4426950408889634, BM=BM, BN=BN,
                                                        D=D, CAUSAL=causal, num_warps=warps, num_stages=stages)

                for BM, BN, warps, stages in ATTENTION_CONFIGS:
                    f = launcher(BM, BN, warps, stages)
                    try:
                        o.zero_()
                        f()
                        torch.cuda.synchronize()
                        check(o, "triton attention")
                    except Exception:  # noqa: BLE001 - a config that does not compile or fit is skipped
                        continue
                    t = tm.time(f, reps=3)["ms"]
                    if best is None or t < best[0]:
                        best = (t, f, (BM, BN, warps, stages))
                if best is None:
                    raise RuntimeError("no Triton attention config compiled and passed the check")
                emit_ok(case, "triton", tm.time(best[1]),
                        config="FlashAttention-2 forward in Triton (as tle's example), best of BM, BN, warps, "
                               "stages = %s" % (ATTENTION_CONFIGS,) + ": %s" % (best[2],))

            def triton_tma_case():
                # Triton's fused-attention tutorial kernel (Hopper form), autotuned over its list.
                from triton.tools.tensor_descriptor import TensorDescriptor
                shape3, strides3 = [batch * heads, S, D], [S * D, D, 1]
                best, failed, t0 = None, [], time.time()
                configs = [c for c in ATTENTION_TMA_CONFIGS if not (causal and c[1] > c[0])]
                for BM, BN, warps, stages, ws in configs:
                    if (2 * stages * BN + BM) * D * 2 > 227 * 1024:  # k and v rings + q: over sm_90's shared memory
                        failed.append("%s: shared memory" % ((BM, BN, warps, stages, ws),))
                        continue
                    dq = TensorDescriptor(q, shape3, strides3, [1, BM, D])
                    dk = TensorDescriptor(k, shape3, strides3, [1, BN, D])
                    dv = TensorDescriptor(v, shape3, strides3, [1, BN, D])
                    do = TensorDescriptor(o, shape3, strides3, [1, BM, D])
                    grid = (triton.cdiv(S, BM), batch * heads)
                    f = (lambda dq=dq, dk=dk, dv=dv, do=do, BM=BM, BN=BN, warps=warps, stages=stages, ws=ws, grid=grid:
                         tk().attention_tma[grid](dq, dk, dv, do, S, sm_scale * 1.4426950408889634, BM=BM, BN=BN, D=D,
                                                  # causal rows never meet keys past S (the kernel's PART 2)
                                                  CAUSAL=causal, EVEN=causal or S % BN == 0, WS=ws,
                                                  num_warps=warps, num_stages=stages))
                    try:
                        o.zero_()
                        f()
                        torch.cuda.synchronize()
                        check(o, "triton tutorial attention")
                    except Exception as e:  # noqa: BLE001 - a config that does not compile or fit is skipped
                        failed.append("%s: %s" % ((BM, BN, warps, stages, ws), str(e).splitlines()[0][:120] if str(e) else type(e).__name__))
                        continue
                    t = tm.time(f, reps=3)["ms"]
                    if best is None or t < best[0]:
                        best = (t, f, (BM, BN, warps, stages, ws))
                print("peers.py: %s triton_tma: %d configs tried in %.1f s, %d skipped:%s"
                      % (case, len(configs), time.time() - t0, len(failed), "".join("\n  " + why for why in failed)),
                      file=sys.stderr)
                if best is None:
                    raise RuntimeError("no Triton tutorial attention config compiled and passed the check")
                emit_ok(case, "triton_tma", tm.time(best[1]),
                        config="Triton fused-attention tutorial (06) structure on tensor descriptors, autotuned over "
                               "%d configs (%d skipped); best (BM, BN, warps, stages, warp_specialize) = %s"
                               % (len(configs), len(failed), best[2]))

            guarded(case, "torch", lambda: sdpa("torch"))
            guarded(case, "torch_flash", lambda: sdpa("torch_flash"))
            guarded(case, "triton", triton_case)
            guarded(case, "triton_tma", triton_tma_case)
        del q, k, v, o
        torch.cuda.empty_cache()


def set_triton_cache_dir(path):
    os.environ["TRITON_CACHE_DIR"] = path
    try:
        triton.knobs.cache.dir = path
    except Exception:  # noqa: BLE001 - older tritons read the environment only
        pass


def group_compile(tm):
    need_triton()
    x = random_nonzero((1024,), torch.float32, seed=21)
    y = torch.empty_like(x)
    a = random_nonzero((256, 256), torch.bfloat16, seed=22)
    b = random_nonzero((256, 256), torch.bfloat16, seed=23)
    c = torch.empty((256, 256), dtype=torch.bfloat16, device="cuda")
    base_dir = tempfile.mkdtemp(prefix="triton-bench-cache-")
    try:
        set_triton_cache_dir(os.path.join(base_dir, "warm"))
        # Warm the process (compiler import, context, first load) on an unrelated kernel.
        triton.jit(_add_kernel_src)[(1,)](x, x, y, 1024, BLOCK_SIZE=1024)
        torch.cuda.synchronize()

        def softmax_launch(k):
            k[(1,)](x, y, 1024, BLOCK_SIZE=1024)

        def matmul_launch(k):
            k[(16,)](a, b, c, 256, 256, 256, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                     c.stride(1), BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=32, GROUP_SIZE_M=8, num_warps=4)

        kinds = [("softmax", _softmax_row_src, softmax_launch, 5), ("matmul", _matmul_kernel_src, matmul_launch, 3)]
        for name, src, launch, cold_trials in kinds:
            last_dir = [None]

            def cold():
                t = []
                for i in range(cold_trials):
                    d = os.path.join(base_dir, "%s-cold-%d" % (name, i))
                    set_triton_cache_dir(d)
                    t0 = time.perf_counter()
                    launch(triton.jit(src))
                    torch.cuda.synchronize()
                    t.append((time.perf_counter() - t0) * 1e3)
                    last_dir[0] = d
                emit_ok("compile_cold/" + name, "triton", summarize(t, 0), config="trials=%d" % cold_trials,
                        note="new JITFunction, fresh empty TRITON_CACHE_DIR: first launch + synchronize")

            def disk():
                if last_dir[0] is None:
                    raise RuntimeError("cold compile failed; nothing on disk to hit")
                set_triton_cache_dir(last_dir[0])
                t = []
                for _ in range(10):
                    t0 = time.perf_counter()
                    launch(triton.jit(src))
                    torch.cuda.synchronize()
                    t.append((time.perf_counter() - t0) * 1e3)
                emit_ok("compile_disk/" + name, "triton", summarize(t, 0), config="trials=10",
                        note="new JITFunction, populated TRITON_CACHE_DIR: first launch + synchronize")

            def mem():
                k = triton.jit(src)
                launch(k)
                torch.cuda.synchronize()
                emit_ok("compile_mem/" + name, "triton", host_times(lambda: launch(k), 2000, warm=1),
                        config="trials=2000", note="launch of a compiled JITFunction: host time of the call")

            guarded("compile_cold/" + name, "triton", cold)
            guarded("compile_disk/" + name, "triton", disk)
            guarded("compile_mem/" + name, "triton", mem)
    finally:
        shutil.rmtree(base_dir, ignore_errors=True)


def group_launch(tm):
    n = 128
    x = random_nonzero((n,), torch.float32, seed=31)
    y = random_nonzero((n,), torch.float32, seed=32)
    out = torch.empty_like(x)
    want = x + y

    def triton_cases():
        k = tk().add
        f = lambda: k[(1,)](x, y, out, n, BLOCK_SIZE=128)  # noqa: E731
        run_checked(f, out, want, "triton add: wrong sum")
        emit_ok("launch_host/vector_add", "triton", host_times(f, 10000), config="1 program, 4 warps")
        emit_ok("launch_sync/vector_add", "triton", sync_times(f, 2000), config="1 program, 4 warps")

    def torch_cases():
        f = lambda: torch.add(x, y, out=out)  # noqa: E731
        run_checked(f, out, want, "torch.add: wrong sum")
        emit_ok("launch_host/vector_add", "torch", host_times(f, 10000), config="torch.add(out=) on 128 elements")
        emit_ok("launch_sync/vector_add", "torch", sync_times(f, 2000), config="torch.add(out=) on 128 elements")

    try:
        triton_cases()
    except Exception as e:  # noqa: BLE001
        for c in ("launch_host/vector_add", "launch_sync/vector_add"):
            emit_error(c, "triton", "%s: %s" % (type(e).__name__, e))
    try:
        torch_cases()
    except Exception as e:  # noqa: BLE001
        for c in ("launch_host/vector_add", "launch_sync/vector_add"):
            emit_error(c, "torch", "%s: %s" % (type(e).__name__, e))


# ----------------------------------------------------------------------------------- topk, moe_align

def _empty_src(x_ptr):
    pass


# MoE alignment in the structure of vLLM's Triton moe_align_block_size path (four stages, one
# program per expert; written for this suite): 1. each program counts the experts of its slice of
# the entries into row pid + 1 of cnts [(P + 1), E]; 2. per expert, an inclusive scan over the
# rows (so row p holds the entries of slices < p); 3. one program: the padded cumsum over experts;
# 4. each program writes its expert's blocks of expert_ids and places its slice's entries.
def _moe_stage1_src(ids_ptr, cnts_ptr, numel, per_prog, E: tl.constexpr):
    pid = tl.program_id(0)
    start = pid * per_prog
    end = tl.minimum(start + per_prog, numel)
    row = (pid + 1) * E
    for i in range(start, end):
        e = tl.load(ids_ptr + i)
        c = tl.load(cnts_ptr + row + e)
        tl.store(cnts_ptr + row + e, c + 1)


def _moe_stage2_src(cnts_ptr, P, E: tl.constexpr):
    pid = tl.program_id(0)
    acc = 0
    for p in range(1, P + 1):
        acc += tl.load(cnts_ptr + p * E + pid)
        tl.store(cnts_ptr + p * E + pid, acc)


def _moe_stage3_src(post_ptr, cnts_ptr, cumsum_ptr, P, E: tl.constexpr, BS: tl.constexpr):
    acc = 0
    for e in range(E):
        c = tl.load(cnts_ptr + P * E + e)
        acc += tl.cdiv(c, BS) * BS
        tl.store(cumsum_ptr + e + 1, acc)
    tl.store(post_ptr, acc)


def _moe_stage4_src(ids_ptr, sorted_ptr, expert_ids_ptr, cnts_ptr, cumsum_ptr, numel, per_prog, E: tl.constexpr,
                    BS: tl.constexpr):
    pid = tl.program_id(0)
    s = tl.load(cumsum_ptr + pid)
    t = tl.load(cumsum_ptr + pid + 1)
    for b in range(s, t, BS):
        tl.store(expert_ids_ptr + b // BS, pid)
    start = pid * per_prog
    end = tl.minimum(start + per_prog, numel)
    row = pid * E
    for i in range(start, end):
        e = tl.load(ids_ptr + i)
        r = tl.load(cnts_ptr + row + e)
        tl.store(sorted_ptr + tl.load(cumsum_ptr + e) + r, i)
        tl.store(cnts_ptr + row + e, r + 1)


def triton_moe_align(ids, E, bs, sorted_ids, expert_ids, post, cnts, cumsum):
    """The whole call as a user of this path pays it: buffers reset, four launches."""
    k = tk()
    numel = ids.numel()
    per_prog = triton.cdiv(numel, E)
    sorted_ids.fill_(numel)
    expert_ids.fill_(-1)
    cnts.zero_()
    cumsum.zero_()
    k.moe1[(E,)](ids, cnts, numel, per_prog, E=E)
    k.moe2[(E,)](cnts, E, E=E)
    k.moe3[(1,)](post, cnts, cumsum, E, E=E, BS=bs)
    k.moe4[(E,)](ids, sorted_ids, expert_ids, cnts, cumsum, numel, per_prog, E=E, BS=bs)


def torch_moe_align(ids, E, bs, sorted_ids, expert_ids, post):
    """bincount + cumsum + stable argsort, entries of an expert by increasing flat index."""
    flat = ids.flatten().long()
    numel = flat.numel()
    counts = torch.bincount(flat, minlength=E)
    padded = (counts + bs - 1) // bs * bs
    ends = torch.cumsum(padded, 0)
    order = torch.argsort(flat, stable=True)
    se = flat[order]
    first = torch.cumsum(counts, 0) - counts
    pos = (ends - padded)[se] + torch.arange(numel, device=flat.device) - first[se]
    sorted_ids.fill_(numel)
    sorted_ids[pos] = order.to(torch.int32)
    blocks = torch.arange(expert_ids.numel(), device=flat.device) * bs
    eid = torch.searchsorted(ends, blocks, right=True)
    expert_ids.copy_(torch.where(blocks < ends[-1], eid, -1).to(torch.int32))
    post.copy_(ends[-1:].to(torch.int32))


TOPK_CASES = [("f32", 64, 131072, 2048), ("f32", 1, 131072, 2048), ("f32", 256, 32768, 64), ("f32", 64, 129280, 50),
              ("f32", 4096, 8192, 8), ("bf16", 64, 131072, 2048), ("f16", 64, 128, 8), ("f16", 64, 1024, 32),
              ("f16", 64, 8192, 128), ("f16", 128, 32768, 256), ("f32", 64, 4096, 128), ("f32", 64, 8192, 256),
              ("f32", 64, 32768, 1024), ("f32", 64, 32768, 2048)]

MOE_CASES = [(16384, 8, 256, 64), (256, 8, 256, 64), (1, 8, 256, 64), (16384, 8, 256, 128), (256, 8, 256, 128),
             (1, 8, 256, 128), (4096, 2, 8, 64), (163840, 8, 512, 16)]


def group_topk(tm):
    dtypes = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
    for dt, rows, n, k in TOPK_CASES:
        case = "topk/%s/%dx%d/k%d" % (dt, rows, n, k)
        x = random_nonzero((rows, n), torch.float32, seed=41 + n + k).to(dtypes[dt])
        want_v, _ = torch.topk(x, k, dim=1)
        torch.cuda.synchronize()

        def torch_case():
            f = lambda: torch.topk(x, k, dim=1)  # noqa: E731
            emit_ok(case, "torch", tm.time(f), config="torch.topk(dim=1, largest=True, sorted=True)")

        def sort_case():
            f = lambda: torch.sort(x, dim=1, descending=True, stable=True)  # noqa: E731
            v, _ = f()
            torch.cuda.synchronize()
            if not torch.equal(v[:, :k], want_v):
                raise AssertionError("torch.sort's first k values differ from torch.topk's")
            emit_ok(case, "torch_sort", tm.time(f), config="torch.sort(dim=1, descending=True, stable=True), first k")

        guarded(case, "torch", torch_case)
        guarded(case, "torch_sort", sort_case)
        del x, want_v
        torch.cuda.empty_cache()


def router_ids(tokens, topk, experts, seed):
    """Each token's topk distinct experts, uniformly at random (as a router's top-k)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    scores = torch.rand((tokens, experts), device="cuda", generator=g)
    return torch.topk(scores, topk, dim=1).indices.to(torch.int32).contiguous()


def group_moe_align(tm):
    def floor_case():
        k = tk().empty
        x = torch.zeros(1, dtype=torch.int32, device="cuda")
        f = lambda: k[(1,)](x)  # noqa: E731
        f()
        torch.cuda.synchronize()
        emit_ok("launch_floor/empty", "triton", tm.time(f), config="empty @triton.jit kernel, 1 program")

    guarded("launch_floor/empty", "triton", floor_case)
    for tokens, topk, E, bs in MOE_CASES:
        case = "moe_align/i32/%dx%d/e%d/bs%d" % (tokens, topk, E, bs)
        ids = router_ids(tokens, topk, E, 7 + tokens)
        numel = ids.numel()
        max_padded = numel + E * (bs - 1)
        nblocks = (max_padded + bs - 1) // bs
        want_s = torch.empty(max_padded, dtype=torch.int32, device="cuda")
        want_e = torch.empty(nblocks, dtype=torch.int32, device="cuda")
        want_p = torch.empty(1, dtype=torch.int32, device="cuda")
        torch_moe_align(ids, E, bs, want_s, want_e, want_p)
        # The reference, checked against a plain loop on the host for the small cases.
        if numel <= 4096:
            h = ids.flatten().tolist()
            start, ref_s, ref_e = 0, [numel] * max_padded, [-1] * nblocks
            for e in range(E):
                mine = [i for i, v in enumerate(h) if v == e]
                ref_s[start:start + len(mine)] = mine
                padded = (len(mine) + bs - 1) // bs * bs
                for b in range(start // bs, (start + padded) // bs):
                    ref_e[b] = e
                start += padded
            if want_s.tolist() != ref_s or want_e.tolist() != ref_e or want_p.item() != start:
                raise AssertionError("%s: the torch composition disagrees with the plain loop" % case)
        s = torch.empty_like(want_s)
        e_ = torch.empty_like(want_e)
        p = torch.empty_like(want_p)

        def check(what):
            torch.cuda.synchronize()
            if not (torch.equal(s, want_s) and torch.equal(e_, want_e) and torch.equal(p, want_p)):
                raise AssertionError(what + ": wrong sorted_token_ids, expert_ids or num_tokens_post_padded")

        def torch_case():
            f = lambda: torch_moe_align(ids, E, bs, s, e_, p)  # noqa: E731
            f()
            check("torch composition")
            emit_ok(case, "torch", tm.time(f), config="bincount + cumsum + argsort(stable) + searchsorted")

        def triton_case():
            cnts = torch.zeros((E + 1) * E, dtype=torch.int32, device="cuda")
            cumsum = torch.zeros(E + 1, dtype=torch.int32, device="cuda")
            f = lambda: triton_moe_align(ids, E, bs, s, e_, p, cnts, cumsum)  # noqa: E731
            f()
            check("triton moe_align")
            emit_ok(case, "triton", tm.time(f), config="4 stages, one program per expert (vLLM's Triton structure)")

        guarded(case, "torch", torch_case)
        guarded(case, "triton", triton_case)
        torch.cuda.empty_cache()


def group_reorder(tm):
    """torch beside gpu_bench's group "reorder" (row kernels whose loads follow a reduction)."""
    for rows, cols in [(16384, 4096), (4096, 4100)]:
        case = "layernorm_row/bf16/%dx%d" % (rows, cols)
        x = random_nonzero((rows, cols), torch.bfloat16, -2.0, 2.0, seed=4)
        w = random_nonzero((cols,), torch.bfloat16, 0.5, 1.5, seed=5)
        b = random_nonzero((cols,), torch.bfloat16, seed=6)
        want = F.layer_norm(x.double(), (cols,), w.double(), b.double(), 1e-5)

        def torch_ln():
            f = lambda: F.layer_norm(x, (cols,), w, b, 1e-5)  # noqa: E731
            check_close(f(), want, 8e-3, 2e-2, "F.layer_norm")
            emit_ok(case, "torch", tm.time(f), config="F.layer_norm, bf16 weight and bias")

        guarded(case, "torch", torch_ln)
    for rows, cols in [(4096, 32000), (16384, 1000)]:
        case = "cross_entropy/f32/%dx%d" % (rows, cols)
        x = random_nonzero((rows, cols), torch.float32, -8.0, 8.0, seed=7)
        t = torch.randint(0, cols, (rows,), device="cuda", generator=torch.Generator("cuda").manual_seed(7))
        want = F.cross_entropy(x.double(), t, reduction="none")

        def torch_xent():
            f = lambda: F.cross_entropy(x, t, reduction="none")  # noqa: E731
            check_close(f(), want, 1e-4, 1e-4, "F.cross_entropy")
            emit_ok(case, "torch", tm.time(f), config="F.cross_entropy(reduction='none'), int64 targets")

        guarded(case, "torch", torch_xent)
    for rows, cols in [(16384, 1000), (4096, 4100)]:
        case = "cosine_rows/bf16/%dx%d" % (rows, cols)
        a = random_nonzero((rows, cols), torch.bfloat16, seed=8)
        b = random_nonzero((rows, cols), torch.bfloat16, seed=9)
        want = F.cosine_similarity(a.double(), b.double(), dim=1)

        def torch_cos():
            f = lambda: F.cosine_similarity(a, b, dim=1)  # noqa: E731
            check_close(f(), want, 2e-2, 2e-2, "F.cosine_similarity")
            emit_ok(case, "torch", tm.time(f), config="F.cosine_similarity(dim=1), bf16 result")

        guarded(case, "torch", torch_cos)


# gpu_bench groups that have no peers here (tle against itself: TLE-Raw against tile code): a
# --groups list shared with gpu_bench may name them; they are skipped.
TLE_ONLY_GROUPS = {"raw", "matmul_f32out"}

GROUP_FNS = {"copy": group_copy, "vector_add": group_vector_add, "softmax": group_softmax,
             "layernorm": group_layernorm, "matmul": group_matmul, "matmul_fp8": group_matmul_fp8, "gemm_ws": group_gemm_ws, "attention": group_attention,
             "compile": group_compile, "launch": group_launch, "topk": group_topk, "moe_align": group_moe_align,
             "transpose": group_transpose, "reorder": group_reorder}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=100, help="timed repetitions per case (default 100)")
    ap.add_argument("--groups", default=",".join(GROUPS), help="comma-separated groups (default: all)")
    args = ap.parse_args()
    groups = [g for g in args.groups.split(",") if g]
    for g in groups:
        if g not in GROUP_FNS and g not in TLE_ONLY_GROUPS:
            ap.error("no group %r (groups: %s)" % (g, ", ".join(GROUPS)))
    groups = [g for g in groups if g in GROUP_FNS]  # gpu_bench's groups without peers are skipped
    if not torch.cuda.is_available():
        emit({"meta": {"source": "peers", "error": "torch.cuda.is_available() is False"}})
        return 1
    # A private Triton cache for the run, so earlier runs' caches neither help nor hurt.
    run_cache = tempfile.mkdtemp(prefix="triton-bench-run-")
    if triton is not None:
        set_triton_cache_dir(run_cache)
    props = torch.cuda.get_device_properties(0)
    emit({"meta": {"source": "peers", "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                   "gpu": torch.cuda.get_device_name(0), "sm": props.major * 10 + props.minor,
                   "num_sms": props.multi_processor_count, "torch": torch.__version__,
                   "triton": getattr(triton, "__version__", None), "triton_error": TRITON_ERROR,
                   "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
                   "python": sys.version.split()[0], "reps": args.reps}})
    tm = Timer(args.reps)
    failed = 0
    for g in groups:
        sys.stderr.write("peers.py: group %s\n" % g)
        if triton is not None:
            set_triton_cache_dir(run_cache)
        try:
            GROUP_FNS[g](tm)
        except Exception as e:  # noqa: BLE001 - a group-level failure (outside any case)
            failed += 1
            sys.stderr.write(traceback.format_exc())
            emit({"case": g + "/*", "peer": "*", "ok": False, "error": "%s: %s" % (type(e).__name__, e)})
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    shutil.rmtree(run_cache, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
