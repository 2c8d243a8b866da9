// src/passes/gpu/gpu_passes.hpp - the GPU-only passes, run by the GPU backend after the generic
// pipeline (passes/pipeline.cpp). Rules: docs/ir.md, "Passes" (GPU).
#pragma once
#include "ir/ir.hpp"

namespace tle::passes {

/// Power-of-two tile shapes (pad_shapes.cpp; the first GPU pass, before assign_layouts): every
/// tile dim that is not a power of two is padded, at its end, to the next power of two (value
/// types, arange `end`, histogram `bins`), and each op that could observe the pad elements gets
/// the tile's "element is real" predicate (`arange(0, P) < R` per padded dim, built once per
/// shape at the start of the function): loads, stores, atomics (atomic_cas takes the optional 4th
/// operand, its mask) and histograms and it into their mask; reductions and reverse scans over a
/// padded dim select their identity on pads, or, with a combine region, carry a validity flag
/// (elements packed into i64, the region wrapped to skip pads); a dot over a padded K selects
/// -0.0 / +0.0 (0 for i8) in a / b; a reshape that moves real elements between padded positions
/// (e.g. [3, 5] -> [15]) gets int-list attributes real_in / real_out, its real shapes (the
/// lowering moves the elements through shared memory). Afterwards every tile dim is a power of two
/// and the program computes, on the real elements, what it computed before (docs/ir.md, "GPU
/// passes"). Throws UserError at the op, saying what to change, for what it cannot pad: such a
/// reshape of pointer tiles, cuda_call or inline asm with side effects on a padded tile, a combine
/// reduction / reverse scan over a padded dim of 64-bit elements, an arange whose padded values
/// pass the i32 range. Returns whether it changed f (power-of-two kernels are left as they are).
bool pad_shapes(ir::Function& f);

/// Assigns a register layout (src/layout) to every value of rank >= 1 and inserts convert_layout
/// ops where an op's operands must share a layout they do not have. Afterwards:
///  - every rank >= 1 op result and block argument has a layout with inputs reg, lane (32), warp
///    (num_warps), block (1) and outputs dim0..dim{r-1} sized as the shape; scalars have none;
///  - the per-op relations of docs/ir.md ("GPU layouts") hold (verify_layouts checks them);
///  - every load / store / atomic_rmw / atomic_cas has int attributes `vec` (elements of one
///    thread accessed as one vector along the fastest dim: pointer contiguity and alignment allow
///    it, vec * element bytes <= 16, power of two) and `mask_vec` (the largest power of two <= vec
///    such that every aligned group of mask_vec elements has one mask value, i.e. the mask is
///    uniform over each vector of that size; == vec when there is no mask).
/// With `wgmma` (an sm_90a target), a dot that fits gpu_rules::mma_v3_plan gets the wgmma
/// accumulator layout on its result and acc and keeps a and b in whatever layout they have (the
/// lowering reads them from shared memory); other f16/bf16 dots take the mma.sync layouts.
/// Needs power-of-two tile dims (pad_shapes first): throws InternalError otherwise.
/// num_warps: a power of two in [1, 32]. Runs verify_layouts at the end in debug builds (and when
/// TLE_VERIFY=1).
void assign_layouts(ir::Function& f, int num_warps, bool wgmma = false);

/// The convert_layout ops assign_layouts would insert into `f` (power-of-two tiles, no layouts
/// yet) with its conversion elimination off: forward layout inference only (memory ops and
/// tensor-core dots give their results their layouts, every other op takes its first tile
/// operand's, or the derived one for shape ops and reductions), nothing offered back to operands,
/// no rematerialization of cheap producers, no conversion moved past a narrowing cast. The
/// baseline of TLE_STATS's "conversions removed"; leaves `f` as it was.
int count_conversions_without_elimination(ir::Function& f, int num_warps, bool wgmma = false);

/// Loop-invariant conversions (hoist_conversions.cpp; run after assign_layouts and dce): every
/// convert_layout directly in a `for` body whose operand is defined outside the loop moves to right
/// before the loop, out of every enclosing loop for which that holds. Returns the number of moves.
int hoist_conversions(ir::Function& f);

/// Software pipelining, the decision (pipeline_loads.cpp; run after assign_layouts and dce): in
/// every innermost `for`, marks the loads the GPU lowering copies ahead with cp.async into
/// `num_stages` shared-memory buffers (int attribute `pipelined = 1` on the load, `num_stages` on
/// the loop; docs/ir.md lists the conditions: a 16-bit rank-2 load whose only use is a
/// convert_layout to a tensor-core dot operand layout, operands recomputable from the induction
/// variable and values defined outside the loop, other absent or 0, 4/8/16-byte vectors with a
/// uniform mask, in a loop that writes no memory). A loop with the program's `stages` hint is
/// pipelined that deep instead, stores and all, and also gets its other qualifying loads marked
/// (`pipe_vec`, read back in their own layout). With `wgmma` a 16-bit rank-2 load whose only use
/// is operand a or b of a dot on wgmma (directly or through a 2-D transpose) qualifies too and
/// gets `wgmma` = its buffers' atom width (gpu_rules::wgmma_atom): they are laid out as wgmma
/// reads them, with no conversion. num_stages
/// 1 marks only hinted loops; 0 (a target without cp.async) marks nothing; < 0 is an InternalError.
/// A kernel with an async_copy, tma_copy or mbarrier_init (TLE-Struct: it pipelines itself) is left
/// unmarked.
void pipeline_loads(ir::Function& f, int num_warps, int num_stages, bool wgmma = false);

/// Load reordering (reorder_loads.cpp; after pipeline_loads, before the shared-buffer passes): in
/// every block, each global load - not volatile, not pipelined, not through a pointer that may
/// point into a shared buffer or whose origin is unknown (pointer_origin) - that comes after work
/// (an op that is neither address arithmetic nor such a load: a reduction, a conversion, a
/// pipelined load, ...) moves up to right after the last op it may not cross - anything with side
/// effects (store, atomic, barrier, mbarrier, async-copy and TMA ops, volatile loads, impure inline
/// asm, cuda_call, warp_specialize, a reduction or scan whose combine has side effects) and every
/// `for` / `if` - or after the op computing one of its operands, whichever is later, taking along
/// the address arithmetic (constant, arange, program_id, num_programs, broadcast, expand_dims,
/// reshape without `real_in`, elementwise ops, addptr, hint) that computes its operands. It crosses
/// only ops without side effects and non-volatile loads, so results are unchanged; loads keep their
/// order among themselves where several are ready together; nothing leaves its block.
/// Returns the number of loads moved (what the lowered code now issues before that work).
int reorder_loads(ir::Function& f);

/// Places the program's shared buffers (plan_shared_buffers.cpp): sets int attribute `offset`
/// (bytes from the start of the buffers' region, aligned as the local_alloc's `align`) on every
/// local_alloc, letting buffers whose uses do not overlap in the kernel body's top-level order
/// share bytes (first fit in allocation order). Returns the region's size in bytes (0 without
/// buffers). The GPU lowering puts the region at the start of the dynamic shared memory.
int64_t plan_shared_buffers(ir::Function& f);

/// Orders the program's statements on its shared buffers (insert_shared_barriers.cpp; after
/// plan_shared_buffers): inserts a `barrier` op before every load / store / atomic that may
/// touch bytes of a buffer that an access since the last barrier touched in a conflicting way
/// (read after write, write after read or write, plain after atomic and atomic after plain,
/// atomic after atomic unless both are exactly commuting updates of one kind whose old values are
/// unused; a cuda_call with a pointer into a buffer counts as a write of it), with one
/// barrier before a loop whose body conflicts with what is pending before it,
/// loops' back edges and ifs' joins included. Returns the number of barriers inserted (0 for a
/// kernel without buffers, which it leaves alone).
int insert_shared_barriers(ir::Function& f);

/// The most 32-bit registers per thread one tile may take (4x the 255 a GPU thread has).
constexpr int64_t kMaxTileRegs = 1024;

/// Refuses tiles too large for registers (check_registers.cpp; the last step of the GPU
/// pipeline): throws UserError at the op defining the largest tile when some tile value takes more
/// than kMaxTileRegs 32-bit registers per thread in its layout (64-bit elements count two), saying
/// how many it takes and which num_warps would bring it under the hardware's 255, or that the tile
/// must be processed in chunks.
void check_tile_registers(const ir::Function& f, int num_warps);

/// Checks the invariants assign_layouts establishes; throws InternalError naming the first op
/// (or block argument) that breaks one. num_warps <= 0: take the warp count from the layouts.
void verify_layouts(const ir::Function& f, int num_warps = 0);

}  // namespace tle::passes
