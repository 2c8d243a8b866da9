// src/backend/gpu/gpu_backend.hpp - the GPU backend: tile IR (after the generic pass pipeline) ->
// GPU passes (layout assignment) -> LLVM IR for nvptx64 -> PTX.
//
// Kernel ABI (what a launch passes): one parameter per entry-block argument of the function, in
// order: pointers as 64-bit global addresses, scalars in their dtype (i1 as one byte, f16/bf16 as
// their 16 bits). Block = 32 * num_warps threads in x; grid = the launch grid; dynamic shared
// memory = shared_bytes (the kernel declares it as an external array).
#pragma once
#include <string>

#include "backend/gpu/nvptx.hpp"
#include "ir/ir.hpp"

namespace tle::gpu {

struct Options {
  int num_warps = 4;  // warps per program (CTA); a power of two from 1 to 32
  /// Software-pipelining depth of K loops (passes/gpu/pipeline_loads.cpp): >= 1, 1 = off (loops
  /// with the program's range num_stages hint take theirs). Below sm_80 (no cp.async) nothing is
  /// pipelined.
  int num_stages = 3;
  /// Registers per thread ptxas may use (PTX ISA 11.4.1, `.maxnreg`); 0: no limit beyond the one
  /// `.reqntid` implies. 24 to 255; ptxas spills to local memory what does not fit. Fewer
  /// registers let more programs share an SM.
  int maxnreg = 0;
  /// On sm_90a, warp-specialize a K loop whose only dot runs on wgmma and reads only pipelined
  /// loads (lower_pipeline.cpp): num_warps more warps copy the operands while the num_warps
  /// warps of the program compute. TLE_WARP_SPECIALIZE=0 turns it off (for comparisons).
  bool warp_specialize = true;
  /// On sm_90a, move the tensor-descriptor blocks TMA takes (passes::tma_block_ok) with
  /// cp.async.bulk.tensor (lower_tma.cpp); otherwise every descriptor access is a masked load or
  /// store. The runtime sets it unless TLE_TMA=0 when it compiles (docs/semantics.md).
  bool tma = false;
  /// Load reordering (passes/gpu/reorder_loads.cpp): global loads issued as early as their operands
  /// allow. TLE_REORDER_LOADS=0 turns it off (for comparisons).
  bool reorder_loads = true;
};

/// What the GPU passes and the lowering made of one kernel (Kernel::stats, TLE_STATS; counts of
/// the emitted code, not of executions).
struct CompileStats {
  int conversions = 0;                      ///< convert_layout ops after the GPU passes
  int conversions_without_elimination = 0;  ///< the same with assign_layouts' elimination off
  int conversions_through_shared = 0;       ///< conversions lowered through shared memory
  int64_t conversion_shared_bytes = 0;      ///< bytes those write to shared memory, each once
  int barriers = 0;                         ///< bar.sync / barrier.sync emitted (not mbarrier waits)
  int loads_reordered = 0;                  ///< global loads passes::reorder_loads moved earlier
};

struct Artifact {
  std::string ptx;          // PTX text for the target
  std::string entry;        // the kernel's symbol in the PTX
  int num_warps = 4;        // warps to launch per CTA (2 * Options::num_warps when warp-specialized)
  int shared_bytes = 0;     // dynamic shared memory the kernel needs per CTA
  std::string llvm_ir;      // LLVM IR before optimization (for dumps), filled when asked
  /// Tensor maps to encode with a swizzled box (kernel argument index, box width in elements):
  /// TMA loads pipelined into wgmma buffers read boxes of {width, rows} with a width * element
  /// bytes (128, 64 or 32) swizzle (lower_pipeline.cpp); every other map: the descriptor's
  /// block, no swizzle.
  std::vector<std::pair<int, int>> tma_swizzled;
  CompileStats stats;
};

/// Compiles `f` for `target`: runs the GPU passes on a copy-free basis (f is modified: layouts are
/// assigned and convert_layout ops inserted), lowers to LLVM IR and emits PTX. Throws UserError
/// for kernels the GPU cannot run as written (e.g. a tile dimension that is not a power of two, at
/// the op's file:line) and RuntimeError for toolchain failures.
Artifact compile(ir::Function& f, const Target& target, const Options& options, bool keep_llvm_ir = false);

}  // namespace tle::gpu
