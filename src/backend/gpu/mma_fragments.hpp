// src/backend/gpu/mma_fragments.hpp - which registers feed each mma.sync.aligned.m16n8k16 of a dot
// on tensor cores (f16/bf16 inputs, f32 accumulators), found through the layouts. Used by
// lower_mma.cpp; pure (no LLVM), so tests can simulate the warp-level product on the CPU.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "layout/linear_layout.hpp"

namespace tle::gpu::detail {

/// One mma.sync of one warp: its tile indices and, for every thread, the register indices of its
/// fragments. a: a0..a7 (packed in pairs: {a0,a1} {a2,a3} {a4,a5} {a6,a7}), b: b0..b3, c: c0..c3
/// (accumulator in, result out), numbered as in PTX ISA 9.7.14.5.8 for f16/bf16.
struct MmaStep {
  int64_t mt = 0, nt = 0, kt = 0;  ///< the warp's 16x8 tile (mt, nt) and k16 step kt
  std::array<int, 8> a{};
  std::array<int, 4> b{};
  std::array<int, 4> c{};
};

/// Register index by reg-part coordinates (row, col) of a 2-D register layout (the first holder
/// where registers repeat an element): with lane 0 / warp 0 coordinates, the register that holds
/// a fragment element, since a linear layout's register part does not depend on lane or warp.
using RegMap = std::map<std::pair<int32_t, int32_t>, int>;
RegMap regs_by_coords(const layout::LinearLayout& l);

/// The mma.sync steps of a dot a [M,K] x b [K,N] + acc [M,N] whose layouts are
/// mma_v2_operand(0, ...), mma_v2_operand(1, ...) and mma_v2_accumulator(...) of warp grid `warps`
/// ({wm, wn}), in issue order (kt, then mt, then nt). Registers are looked up, not assumed: the
/// register part of a linear layout is lane / warp independent, so fragment element (row, col) of
/// lane 0 / warp 0 of a tile is the register whose reg-part coordinates are the tile origin (in
/// register coordinates: mt * 16 * wm, nt * 8 * wn, kt * 16) plus the fragment offset; the lane
/// and warp parts of the named layouts then place every other lane's element where mma.sync
/// expects it. Every accumulator register is covered exactly once per kt. Throws InternalError
/// (naming the operand and element) when a lookup fails, i.e. a layout is not the fragment layout.
std::vector<MmaStep> mma_v2_steps(const layout::LinearLayout& a, const layout::LinearLayout& b,
                                  const layout::LinearLayout& acc, const std::vector<int32_t>& warps);

}  // namespace tle::gpu::detail
