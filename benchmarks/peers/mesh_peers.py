#!/usr/bin/env python3
"""benchmarks/peers/mesh_peers.py - PyTorch's side of the device-mesh GEMMs (issue #17, docs/mesh.md).

One process per GPU (torch.multiprocessing, NCCL through torch.distributed), bf16, per-rank shapes
m x k x n. For each shape, one JSON line per (case, peer) from rank 0, with the median of `--reps`
CUDA-event timings after a barrier:

  all_gather_gemm: "torch_seq" (all_gather_into_tensor, then torch.matmul), "allgather" (the gather
  alone), "matmul" (the GEMM of the gathered A alone), "torch_fused"
  (torch.distributed._symmetric_memory.fused_all_gather_matmul, where it runs with multicast off);
  gemm_reduce_scatter: "torch_seq" (matmul of A [ranks m, k] @ B, then reduce_scatter_tensor), "reduce_scatter",
  "matmul", "torch_fused" (fused_matmul_reduce_scatter).

The multicast objects NVLink SHARP would create are kept off: NCCL_NVLS_ENABLE=0,
TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1 are set before anything starts.
Needs at least 2 GPUs. Written before a 2-GPU machine was lent: not run yet.

    python3 benchmarks/peers/mesh_peers.py [--ranks 2] [--reps 20] > mesh_peers.jsonl
"""
import argparse
import json
import os

for k, v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ[k] = v

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SHAPES = [(4096, 8192, 14336), (1024, 8192, 28672), (128, 8192, 14336)]  # per rank m, k, n


def timed(fn, reps):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        dist.barrier()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def worker(rank, ranks, reps, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=ranks, device_id=torch.device("cuda", rank))
    group = dist.group.WORLD
    out = []

    def emit(case, peer, ms, **extra):
        if rank == 0:
            out.append(dict(case=case, peer=peer, ms=ms, ranks=ranks, **extra))

    for m, k, n in SHAPES:
        name = "%dx%dx%d" % (m, k, n)
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        gathered = torch.empty(ranks * m, k, device="cuda", dtype=torch.bfloat16)
        emit("all_gather_gemm/bf16/" + name, "allgather", timed(lambda: dist.all_gather_into_tensor(gathered, a), reps))
        emit("all_gather_gemm/bf16/" + name, "matmul", timed(lambda: torch.matmul(gathered, b), reps))
        emit("all_gather_gemm/bf16/" + name, "torch_seq",
             timed(lambda: (dist.all_gather_into_tensor(gathered, a), torch.matmul(gathered, b)), reps))
        try:
            from torch.distributed import _symmetric_memory as symm
            symm.enable_symm_mem_for_group(group.group_name)
            emit("all_gather_gemm/bf16/" + name, "torch_fused",
                 timed(lambda: symm.fused_all_gather_matmul(a, [b], gather_dim=0, group_name=group.group_name), reps))
        except Exception as e:  # noqa: BLE001 - report and go on
            emit("all_gather_gemm/bf16/" + name, "torch_fused", None, error=repr(e))
        full = torch.randn(ranks * m, k, device="cuda", dtype=torch.bfloat16)
        part = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        prod = torch.matmul(full, b)
        emit("gemm_reduce_scatter/bf16/" + name, "matmul", timed(lambda: torch.matmul(full, b), reps))
        emit("gemm_reduce_scatter/bf16/" + name, "reduce_scatter",
             timed(lambda: dist.reduce_scatter_tensor(part, prod), reps))
        emit("gemm_reduce_scatter/bf16/" + name, "torch_seq",
             timed(lambda: dist.reduce_scatter_tensor(part, torch.matmul(full, b)), reps))
        try:
            from torch.distributed import _symmetric_memory as symm
            emit("gemm_reduce_scatter/bf16/" + name, "torch_fused",
                 timed(lambda: symm.fused_matmul_reduce_scatter(full, b, "sum", scatter_dim=0,
                                                                group_name=group.group_name), reps))
        except Exception as e:  # noqa: BLE001
            emit("gemm_reduce_scatter/bf16/" + name, "torch_fused", None, error=repr(e))
    if rank == 0:
        for line in out:
            print(json.dumps(line), flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--port", type=int, default=29517)
    args = p.parse_args()
    if torch.cuda.device_count() < args.ranks:
        raise SystemExit("mesh_peers.py: %d GPUs needed, %d visible" % (args.ranks, torch.cuda.device_count()))
    mp.spawn(worker, args=(args.ranks, args.reps, args.port), nprocs=args.ranks)


if __name__ == "__main__":
    main()
