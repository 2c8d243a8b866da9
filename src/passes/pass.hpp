// src/passes/pass.hpp - the pass interface, the passes' entry points and the pipeline driver.
//
// A pass rewrites an ir::Function in place and returns whether it changed anything. The order in
// which passes run lives in one place, src/passes/pipeline.cpp (docs/ir.md, "Passes").
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "ir/ir.hpp"

namespace tle::passes {

using PassFn = bool (*)(ir::Function&);
struct Pass {
  const char* name;  // used in dumps: "<kernel>.<NN>.<name>.tir"
  PassFn run;
};

/// Constant folding and exact algebraic simplification to a fixpoint (canonicalize.cpp).
bool canonicalize(ir::Function& f);
/// Common-subexpression elimination of pure region-free ops, scoped by region (cse.cpp).
bool cse(ir::Function& f);
/// Dead-code elimination, including dead/invariant loop-carried and if-carried values (dce.cpp).
bool dce(ir::Function& f);

/// Rewrites tensor-descriptor accesses (desc_load / desc_store) into masked pointer loads and
/// stores (expand_descriptors.cpp); with keep_tma, those whose block TMA takes (tma_block_ok) stay.
/// tma_copy ops (TLE-Struct) stay with keep_tma; `gpu_final` (the GPU pipeline, which knows the
/// target) then checks their alignment (UserError at the copy) and drops their view pointer tile.
bool expand_descriptors(ir::Function& f, bool keep_tma, bool gpu_final = false);
/// Whether the GPU moves a block of this dtype and shape with TMA (cp.async.bulk.tensor): rank 1
/// to 5, every dimension a power of two up to 256, the innermost row a multiple of 16 bytes, at
/// most 64 KiB (its shared-memory buffer), a dtype TMA has (not bool). The launch encodes a
/// CUtensorMap for these.
bool tma_block_ok(DType d, const std::vector<int64_t>& block);

/// The passes of one round of the pipeline, in order.
const std::vector<Pass>& pipeline_passes();

struct PipelineOptions {
  /// Run ir::verify on the traced IR and after every pass. Default: on in debug builds
  /// (!NDEBUG) or when the environment variable TLE_VERIFY=1.
  bool verify = false;
  /// Honour TLE_DUMP_IR (1: dumps to stderr; a directory: one file per stage).
  bool dump_from_env = true;
  /// If non-null, receives (stage name, printed IR) for the traced IR ("trace") and after each pass.
  std::vector<std::pair<std::string, std::string>>* dumps = nullptr;
  /// Keep the tensor-descriptor ops TMA could take (GPU compiles: run_gpu_pipeline decides by
  /// target); otherwise every one is expanded into pointer loads and stores first.
  bool keep_tma_descriptors = false;
};
/// Options from the build type and the environment (TLE_VERIFY, TLE_DUMP_IR).
PipelineOptions default_pipeline_options();

/// The GPU passes, after run_pipeline, for a kernel of `num_warps` warps: expand_descriptors
/// (all but TMA's blocks on sm_90a, `wgmma`; all elsewhere), pad_shapes, assign_layouts (GPU
/// layouts and convert_layout ops, passes/gpu/gpu_passes.hpp), then dce (values the layout pass
/// replaced by recomputation), then hoist_conversions (loop-invariant conversions out of loops),
/// then pipeline_loads (marks the loads of `for` loops that the
/// backend software-pipelines `num_stages` deep; 1 = hinted loops only, 0 = none), then
/// reorder_loads (global loads as early as their operands allow; skipped when `reorder` is false), then
/// plan_shared_buffers and insert_shared_barriers (the program's own shared buffers), then
/// check_tile_registers, then, when verifying, ir::verify and
/// verify_layouts. `wgmma`: the target has wgmma (sm_90a), so f16/bf16 dots that fit
/// gpu_rules::mma_v3_plan run on it. Dumps as run_pipeline does (stages numbered from 50).
/// `tma`: keep the descriptor accesses TMA takes (gpu::Options::tma on sm_90a).
/// `stats`, when given, receives the conversion counts and the loads reordered (GpuPassStats).
struct GpuPassStats {
  int conversions = 0;                      ///< convert_layout ops after the GPU passes
  int conversions_without_elimination = 0;  ///< count_conversions_without_elimination's count
  int loads_reordered = 0;                  ///< reorder_loads' count
};
void run_gpu_pipeline(ir::Function& f, int num_warps, int num_stages = 1, bool wgmma = false, bool tma = false,
                      bool reorder = true, GpuPassStats* stats = nullptr);

/// Runs the pipeline on freshly traced IR with default_pipeline_options() (keep_tma_descriptors
/// as given).
void run_pipeline(ir::Function& f, bool keep_tma_descriptors = false);
void run_pipeline(ir::Function& f, const PipelineOptions& options);

// ---- small helpers shared by the passes
/// True if `v` is defined inside one of `op`'s regions (at any depth).
inline bool defined_inside(const ir::Value* v, const ir::Op& op) {
  for (const ir::Block* b = v->defining_block(); b; ) {
    const ir::Op* p = b->parent_op();
    if (!p) return false;
    if (p == &op) return true;
    b = p->parent;
  }
  return false;
}

}  // namespace tle::passes
