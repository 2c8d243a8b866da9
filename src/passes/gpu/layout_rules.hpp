// src/passes/gpu/layout_rules.hpp - the layout relations between an op's operands and results
// (docs/ir.md, "GPU layouts"), shared by assign_layouts and verify_layouts.
#pragma once
#include <optional>
#include <vector>

#include "ir/ir.hpp"
#include "layout/ir_layout.hpp"
#include "layout/named_layouts.hpp"

namespace tle::passes::gpu_rules {

using LL = layout::LinearLayout;

/// Ops whose non-scalar operands all carry the result's layout.
inline bool is_elementwise(ir::OpKind k) {
  switch (k) {
    case ir::OpKind::Binary: case ir::OpKind::Compare: case ir::OpKind::Unary: case ir::OpKind::Fma:
    case ir::OpKind::Select: case ir::OpKind::Cast: case ir::OpKind::Bitcast: case ir::OpKind::AddPtr:
    case ir::OpKind::Hint: case ir::OpKind::InlineAsm: case ir::OpKind::SetLayout:
      return true;
    default: return false;
  }
}
/// Loads, stores, atomics and async copies: all non-scalar operands and the result share one
/// layout; operand 0 is the pointer tile whose accesses anchor it (an async copy's source).
inline bool is_memory(ir::OpKind k) {
  return k == ir::OpKind::Load || k == ir::OpKind::Store || k == ir::OpKind::AtomicRMW || k == ir::OpKind::AtomicCas ||
         k == ir::OpKind::AsyncCopy;
}

/// A reshape of padded tiles that moves elements (pad_shapes.cpp: attributes real_in / real_out):
/// its operand and result take any layouts, and the lowering goes through shared memory.
inline bool is_remap(const ir::Op& op) { return op.kind == ir::OpKind::Reshape && op.has_attr("real_in"); }

/// The layout of a sub-tile of shape `sub` (powers of two dividing l's dims) that each thread
/// holds in whole registers of `l` wherever the sub-tile sits in the grid (extract_tile /
/// insert_tile without data movement): every lane, warp and block basis of l lies inside the
/// sub-tile (each component < sub's), every register basis lies inside it or moves only between
/// sub-tiles (each component a multiple of sub's); the result keeps the hardware bases and the
/// inside register bases. nullopt when l is not so (the sub-tile is smaller than a thread group's
/// footprint, or a register basis straddles sub-tiles).
std::optional<LL> subtile_layout(const LL& l, const ir::Shape& sub);
/// `l` with every basis component along the listed dims zeroed and those out dims sized 1; the
/// register bases left all zero are dropped (those registers repeat others), as layout::slice
/// drops them, so that a broadcast operand and a reduction result of one tile agree.
LL project(const LL& l, const std::vector<int>& dims);
/// `l` without output dim `axis` (which must have size 1); later dims renamed down.
LL remove_dim(const LL& l, int axis);
/// `l` with a new output dim `axis` of size 1 (all components 0); later dims renamed up.
LL insert_dim(const LL& l, int axis);
/// The broadcast dims of broadcast(x) -> r: dims where x has size 1.
std::vector<int> broadcast_dims(const ir::Type& x);
/// The layout operand 0 of a shape op (broadcast, expand_dims, reshape, permute) must have when
/// its result has layout `r`. Only for non-scalar operands.
LL shape_op_operand_layout(const ir::Op& op, const LL& r);
/// The inverse of a permutation given as op attribute "order".
std::vector<int32_t> inverse_order(const std::vector<int64_t>& order);

/// How a `dot` runs on tensor cores with mma.sync.aligned.m16n8k16 (f32 accumulators): the warp
/// grid of the accumulator and the layouts of the result / acc (`acc`), a (`a`) and b (`b`).
struct MmaV2Plan {
  std::vector<int32_t> warps;  ///< warps_per_cta {wm, wn}: warps along M, along N
  LL acc, a, b;
};
/// The plan for dot `op` with `num_warps` warps, or nullopt when it does not qualify: a and b both
/// f16 or both bf16 (fp8 dots have no mma.sync plan), acc and result f32, M a multiple of 16 * wm, N of 8 * wn, K of 16. The warp
/// grid follows Triton's warpsPerTileV2: starting from {1, 1}, double the warps along M while
/// M/16/wm >= N/8/wn (ties go to M) and there is room, else along N; no plan if the tile has
/// fewer than num_warps 16x8 tiles (no replicated warps). Deterministic in (shape, num_warps), so
/// every dot of one result shape gets the same accumulator layout. Used by assign_layouts (which
/// gives the result and acc `acc` and converts a and b to `a` and `b`) and by the GPU lowering
/// (which takes the mma path only when all three layouts match the plan).
std::optional<MmaV2Plan> mma_v2_plan(const ir::Op& op, int num_warps);

/// How a `dot` runs on Hopper tensor cores with wgmma.mma_async.m64nNk16 (f16 / bf16) or
/// m64nNk32 (f8e4m3 or f8e5m2: `dot` takes one element type on both sides) (sm_90a; f32 accumulators): a and b
/// are read from shared memory through matrix descriptors, so they need no register layout; the
/// result and acc take `acc`. fp8 operands must be K-major in shared memory (PTX ISA 9.7.15.5.1:
/// the transpose bits exist only for 16-bit types); an operand that is not is written there from
/// registers by the lowering.
struct MmaV3Plan {
  std::vector<int32_t> warpgroups;  ///< {gm, gn}: warpgroups (4 consecutive warps) along M, along N
  int32_t instr_n = 0;              ///< N of one instruction: min(N / gn, 256)
  LL acc;                           ///< layout::wgmma_accumulator(shape, warpgroups)
  /// a held in registers (wgmma's register-A form, PTX ISA Figure 148: per warp the mma.sync
  /// m16n8k16 A fragment, warp w of a warpgroup on rows 16w..16w+15): mma_v2_operand(0, a.shape,
  /// {4 gm, gn}, 16), replicated over the gn warpgroups of a row block.
  LL a_regs;
};
/// The plan for dot `op` with `num_warps` warps, or nullopt when it does not qualify: a and b both
/// f16 or both bf16 (K a multiple of 16) or both fp8 (K a multiple of 32), acc and result f32,
/// rank 2, powers of two, num_warps a multiple of 4, M a multiple of 64, and each warpgroup at
/// least 16 columns. Warpgroups go along M while
/// 64-row blocks are left (gm = min(num_warps / 4, M / 64)), the rest along N (Triton's
/// warpsPerTileV3 puts warps along M the same way). Deterministic in (shape, num_warps). Used by
/// assign_layouts on targets with wgmma (before mma_v2_plan), by pipeline_loads and by the GPU
/// lowering (which takes the wgmma path when the result and acc carry `acc`).
std::optional<MmaV3Plan> mma_v3_plan(const ir::Op& op, int num_warps);
/// Whether wgmma dot `dot` reads a from registers (`a_regs`) rather than shared memory: a is not
/// a load (or the 2-D transpose of one) in the dot's own block - e.g. a tile loaded before the K
/// loop (converted once, before it: passes::hoist_conversions) or computed in the loop, like the
/// probabilities of attention. Loads of the dot's block are pipelined into shared memory instead.
/// Never for fp8 (tle has no register-A layout of 8-bit elements: such an a is written to shared
/// memory).
bool wgmma_a_in_registers(const ir::Op& dot);

/// The layout gpu::set_layout op `op` asks for its (padded) result: its "kind" attribute's blocked,
/// mma (version 2: layout::mma_v2_accumulator; 3: layout::wgmma_accumulator, repeated along N
/// when instr_n is less than N / wn) or dot_operand (layout::mma_v2_operand; wgmma's register A)
/// layout, sliced along slice_dim when that attribute is there (layout::slice of the parent laid
/// out over the tile's shape with slice_dim inserted at the parent's smallest extent, 1 for a
/// blocked parent: Triton's SliceEncoding). UserError at op's line for warps that do not make
/// `num_warps`, version 3 without wgmma (a target other than sm_90a), or a shape the layout cannot
/// tile.
LL requested_layout(const ir::Op& op, int num_warps, bool wgmma);

/// The atom width (columns of 32, 64 or 128 bytes: the 32, 64 or 128-byte swizzle; 16-64 16-bit
/// elements, 32-128 8-bit ones) of the shared-memory tile that operand `idx` (0: a, 1: b) of wgmma
/// dot `dot` is read from when the tile is contiguous along operand dim `cdim`: 128 bytes (the
/// 128-byte swizzle) except for an MN-major b (cdim 1), whose atoms must not be wider than one
/// instruction's N (mma_v3_plan's instr_n); 0 for an MN-major fp8 operand, which wgmma cannot read. The
/// pipelining pass records it on the loads it pipelines for wgmma; the lowering lays the buffers
/// out with it (SwizzledTile::make_wgmma) and builds the descriptors from the buffer.
int64_t wgmma_atom(const ir::Op& dot, unsigned idx, int cdim, int num_warps);

}  // namespace tle::passes::gpu_rules
