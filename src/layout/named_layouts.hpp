// src/layout/named_layouts.hpp - the named GPU layouts, each built as a LinearLayout.
//
// Every named layout is only a constructor: passes and codegen work on the resulting
// LinearLayout (conversions, broadcasts and reductions are computed from the maps). Register
// layouts have the input dimensions reg, lane, warp, block (always all four, in this order; block
// has size 1 until clusters are used) and the output dimensions dim0..dim{rank-1}, whose sizes
// are exactly the tile shape - so every register layout returned here is surjective (covers the
// tile); it is injective unless the CTA is larger than the tile (then some lanes / warps hold
// copies: zero bases).
//
// Conventions shared with Triton:
//  - `order` lists the dimensions from the fastest-varying (most minor) to the slowest; the
//    row-major order of a rank-r tile is [r-1, ..., 1, 0] (default_order).
//  - When the tile is larger than what the CTA covers, the CTA pattern repeats in registers: the
//    extra register bits are added along order[0] first, then order[1], ...
//  - When the tile is smaller, register bits that would leave the tile are dropped and lane / warp
//    / block bits that would leave it become zero bases (replication).
//
// Shapes are the logical tile shapes of the IR (int64_t). Every size must be a power of two;
// violations throw tle::InternalError naming the constructor and the offending value.
#pragma once
#include <cstdint>
#include <vector>

#include "layout/linear_layout.hpp"

namespace tle::layout {

/// [rank-1, ..., 1, 0]: row-major (the last dimension is contiguous).
std::vector<int32_t> default_order(int rank);

/// Fits a CTA-level register layout (reg, lane, warp, block -> dim0..) to `shape` following the
/// conventions above (Triton's combineCtaCgaWithShape): output dimension d gets size shape[d];
/// coordinates that would exceed it are masked away (register bits that become zero are removed,
/// lane/warp/block bits become broadcast), and missing extent is added as new register bits along
/// `order` (minor first). The result always has the input dimensions reg, lane, warp, block.
LinearLayout tile_to_shape(const LinearLayout& cta, const std::vector<int64_t>& shape,
                           const std::vector<int32_t>& order);

/// Triton's BlockedEncodingAttr (TritonGPUAttrDefs.td; LinearLayoutConversions.cpp): each thread
/// holds a size_per_thread[d] sub-tile, a warp is threads_per_warp[d] threads along d, a CTA is
/// warps_per_cta[d] warps along d; within each of the three levels the indices run along `order`
/// (order[0] fastest). The CTA tile (spt*tpw*wpc per dim) is then fitted to `shape` (repeated in
/// registers or replicated, see tile_to_shape).
///   Example: blocked({4,8}, {1,2}, {8,4}, {1,1}, {1,0}) - see the tables in linear_layout.hpp.
/// Requires: equal ranks >= 1, all sizes powers of two, product(threads_per_warp) == 32, `order`
/// a permutation of [0, rank).
LinearLayout blocked(const std::vector<int64_t>& shape, const std::vector<int32_t>& size_per_thread,
                     const std::vector<int32_t>& threads_per_warp,
                     const std::vector<int32_t>& warps_per_cta, const std::vector<int32_t>& order);

/// Triton's SliceEncodingAttr: the layout of `parent` with output dimension `dim` removed - the
/// layout of the result of reducing a tile in layout `parent` along `dim` (and the layout of
/// the operand of expand_dims(dim)). The remaining outputs are renamed dim0..dim{rank-2}. Register
/// bits that become zero are removed (those registers held other elements of the reduced row);
/// lane / warp bits that become zero stay as broadcast bits (those threads all end up holding the
/// reduced value). `parent` must have the outputs dim0..dim{r-1} and 0 <= dim < r.
LinearLayout slice(const LinearLayout& parent, int dim);

/// The accumulator (C/D) fragment of mma.sync.aligned.m16n8k16 (and m16n8k8 / m16n8k32: the same
/// D layout) with f32 or f16x2 accumulators: PTX ISA 9.7.14.5.8 ("Matrix Fragments for
/// mma.m16n8k16 with floating point type", the m16n8 C/D fragment). In one warp, with
/// groupID = lane >> 2 and threadID_in_group = lane % 4, register c_i (i = 0..3) holds
///     row = groupID + 8 * (i >= 2),   col = threadID_in_group * 2 + (i & 1)
/// i.e. reg: (0,1) (8,0); lane: (0,2) (0,4) (1,0) (2,0) (4,0).
/// The 16x8 warp tiles are spread over warps_per_cta = {wm, wn} warps with the warp index running
/// along M first (warp w covers M block w % wm, N block w / wm; Triton's MMAv2 warp order), then
/// the CTA tile [16*wm, 8*wn] repeats in registers along N first, then M (Triton's
/// NvidiaMmaEncodingAttr, version 2). Requires shape = {M, N} with M >= 16, N >= 8, powers of two.
LinearLayout mma_v2_accumulator(const std::vector<int64_t>& shape,
                                const std::vector<int32_t>& warps_per_cta);

/// The A (op_idx 0, shape {M, K}) or B (op_idx 1, shape {K, N}) operand fragment of
/// mma.sync.aligned.m16n8kK for elements of `bitwidth` bits: PTX ISA 9.7.14.5.8 (m16n8k16, f16 /
/// bf16: bitwidth 16), 9.7.14.5.7 (m16n8k8, tf32: bitwidth 32), 9.7.14.5.9 (m16n8k32, 8-bit:
/// bitwidth 8). With v = 32 / bitwidth elements per 32-bit register and kK = 8 * v:
///   A (16 x kK), element a_i: row = groupID + 8 * ((i / v) & 1),
///                             col = threadID_in_group * v + (i % v) + 4v * (i >= 2v)
///   B (kK x 8),  element b_i: row = threadID_in_group * v + (i % v) + 4v * (i >= v),
///                             col = groupID
/// (for f16: a0..a7 with rows g, g, g+8, g+8, g, g, g+8, g+8 and cols 2t, 2t+1, ..., +8; b0..b3
/// with rows 2t, 2t+1, 2t+8, 2t+9). Register index i is the element index: the v elements of one
/// 32-bit register are consecutive registers, as mma.sync expects them packed.
/// Warps: as mma_v2_accumulator with the same warps_per_cta, so a warp holds the A rows and B
/// columns of its own accumulator tile; the warp bits along the other operand's dimension are
/// broadcast (A is replicated over the wn warps of a row, B over the wm warps of a column; Triton's
/// DotOperandEncodingAttr with kWidth = v). The warp tile repeats in registers along K first, then
/// M (for A) / N (for B). Requires bitwidth in {8, 16, 32}, shape a power of two with at least one
/// instruction tile (A: M >= 16, K >= kK; B: K >= kK, N >= 8).
LinearLayout mma_v2_operand(int op_idx, const std::vector<int64_t>& shape,
                            const std::vector<int32_t>& warps_per_cta, int bitwidth = 16);

/// The accumulator (D) fragment of wgmma.mma_async.m64nNk16 / k8 / k32 with 32-bit accumulators
/// (PTX ISA 9.7.15.5.1.1, "Matrix Fragments for wgmma.mma_async.m64nNk16", Figure 149): in warp w
/// of a warpgroup, with groupID = lane >> 2 and threadID_in_group = lane % 4, register d_i holds
///     row = 16 * w + groupID + 8 * ((i >> 1) & 1),   col = 8 * (i >> 2) + threadID_in_group * 2 + (i & 1)
/// i.e. per warp the m16n8 accumulator of mma.sync repeated along N. `warpgroups` = {gm, gn}
/// warpgroups of 4 consecutive warps split the tile: warpgroup g covers the 64-row block g % gm
/// and the N / gn columns of block g / gm (warp bits: +16, +32 rows, then +64 * (1, 2, ..) rows for
/// gm, then +N/gn * (1, 2, ..) columns for gn). Registers: bit 0 -> col + 1, bit 1 -> row + 8, then
/// +8, +16, ... columns up to the warpgroup's N / gn (one instruction's d_0 .. d_{N/2-1} when
/// N / gn <= 256), then the [64 * gm, N] CTA tile repeats along M (Triton's NvidiaMmaEncodingAttr,
/// version 3). Requires shape = {M, N}, warpgroups {gm, gn}, all powers of two, M a multiple of
/// 64 * gm and N / gn >= 8.
LinearLayout wgmma_accumulator(const std::vector<int64_t>& shape, const std::vector<int32_t>& warpgroups);

/// A swizzled shared-memory layout: logical coordinates (inputs dim0..dim{r-1}, sizes = shape) ->
/// element offset in the buffer (output `offset`, size = product(shape)). Triton's
/// SwizzledSharedEncodingAttr / CUTLASS's XOR swizzle: with c the coordinate along order[0] (the
/// contiguous dimension, of size C) and r the one along order[1],
///     phase  = (r / per_phase) % max_phase
///     offset = (dims above order[1]) ... + r * C + (((c / vec) ^ phase) % (C / vec)) * vec + c % vec
/// i.e. groups of `vec` contiguous elements are XOR-permuted within a row by a phase that changes
/// every per_phase rows, so that a column of vec-groups hits different banks. Higher dimensions
/// (order[2], ...) are stacked without swizzle. vec = per_phase = max_phase = 1 gives the plain
/// strided layout. Swizzles are linear over GF(2), so the result is a bijection (invertible).
/// Requires rank >= 1, powers of two everywhere, `order` a permutation of [0, rank).
LinearLayout shared_swizzled(const std::vector<int64_t>& shape, int32_t vec, int32_t per_phase,
                             int32_t max_phase, const std::vector<int32_t>& order);

/// The layout of trans(x) for x in layout `l`: output dimension i of the result is dim{perm[i]}
/// of `l` (renamed dim{i}). Pure relabeling: no data moves.
LinearLayout transpose_tile(const LinearLayout& l, const std::vector<int32_t>& perm);

/// The layout of reshape(x, shape) for x in layout `l` (row-major reshape of the logical tile):
/// no data moves; the outputs are re-split into dim0..dim{rank-1} of `shape`.
LinearLayout reshape_tile(const LinearLayout& l, const std::vector<int64_t>& shape);

}  // namespace tle::layout
