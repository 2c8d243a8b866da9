// tle/ops/limits.hpp - device limits the ops library's kernels plan against (header only).
#pragma once
#include <cstdint>
#include <string>

#include "tle/device.hpp"
#include "tle/kernel.hpp"

namespace tle::ops::detail {

/// The shared memory one program may have on `backend`, in bytes: GPU 0's opt-in limit
/// (cudaDevAttrMaxSharedMemoryPerBlockOptin), read once - on a machine whose GPUs differ, launch on
/// the smallest; 232448 (227 KB, sm_90's) on the CPU backend and the interpreter, which run
/// whatever fits on sm_90, and where the driver does not say.
inline int64_t program_smem_limit(Backend backend) {
  if (backend != Backend::GPU) return 232448;
  static const int64_t limit = [] {
    auto info = gpu_info(0);
    return info && info->shared_mem_per_block_optin ? static_cast<int64_t>(info->shared_mem_per_block_optin) : 232448;
  }();
  return limit;
}

/// An ops call's num_warps option: 0 (the kernels' own) or a power of two from 1 to 32, else a
/// UserError at the caller's line naming the call `fn` (e.g. "topk").
inline void check_num_warps(int num_warps, const char* fn, const SrcLoc& l) {
  if (num_warps != 0 && (num_warps < 0 || num_warps > 32 || (num_warps & (num_warps - 1)) != 0))
    throw UserError(l, std::string("tle::ops::") + fn + ": num_warps = " + std::to_string(num_warps) +
                           " is not 0 (the kernels' own) or a power of two from 1 to 32");
}

}  // namespace tle::ops::detail
