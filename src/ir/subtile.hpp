// src/ir/subtile.hpp - the grid of sub-tiles of extract_tile / insert_tile (docs/ir.md), shared by
// the verifier, the interpreter and the backends.
#pragma once
#include <cstdint>
#include <vector>

#include "ir/ir.hpp"

namespace tle::ir {

/// x viewed as a grid of sub-tiles: the real shapes (the types' shapes, or after the GPU pass
/// pad_shapes the attributes real_x / real_sub), the grid, its row-major strides and size.
struct SubTileGrid {
  Shape x, sub, grid, stride;
  int64_t count = 1;
  bool valid = false;  // same rank >= 1, every dim of sub >= 1 and dividing x's
};

/// The sub-tile operand's (insert_tile) or result's (extract_tile) type.
inline const Type& subtile_type(const Op& op) {
  return op.kind == OpKind::InsertTile ? op.operands.at(1)->type : op.result()->type;
}

inline SubTileGrid subtile_grid(const Op& op) {
  SubTileGrid g;
  g.x = op.has_attr("real_x") ? op.ints_attr("real_x") : op.operands.at(0)->type.shape;
  g.sub = op.has_attr("real_sub") ? op.ints_attr("real_sub") : subtile_type(op).shape;
  const size_t rank = g.x.size();
  if (rank == 0 || g.sub.size() != rank) return g;
  g.grid.resize(rank);
  g.stride.assign(rank, 1);
  for (size_t d = 0; d < rank; ++d) {
    if (g.sub[d] < 1 || g.x[d] % g.sub[d] != 0) return g;
    g.grid[d] = g.x[d] / g.sub[d];
  }
  for (size_t d = rank - 1; d > 0; --d) g.stride[d - 1] = g.stride[d] * g.grid[d];
  g.count = g.stride[0] * g.grid[0];
  g.valid = true;
  return g;
}

/// The start coordinate per dim of sub-tile `linear` (a dynamic id outside the grid wraps: per
/// dim ((linear as u32) / stride) mod grid).
inline std::vector<int64_t> subtile_offsets(const SubTileGrid& g, uint32_t linear) {
  std::vector<int64_t> off(g.x.size());
  for (size_t d = 0; d < off.size(); ++d)
    off[d] = static_cast<int64_t>((linear / static_cast<uint64_t>(g.stride[d])) % static_cast<uint64_t>(g.grid[d])) *
             g.sub[d];
  return off;
}

}  // namespace tle::ir
