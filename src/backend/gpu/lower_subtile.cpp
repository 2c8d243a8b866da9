// src/backend/gpu/lower_subtile.cpp - extract_tile and insert_tile (docs/ir.md "extract_tile").
//
// The grid of sub-tiles is over the real shapes (ir/subtile.hpp; pad_shapes' real_x / real_sub).
// Two ways:
//  - register renumbering, no instruction: the index is static, the sub-tile is not padded (its
//    start is then a multiple of its power-of-two dims, so start + c = start XOR c), and the
//    lane, warp and block bases of the tile's and the sub-tile's layouts are equal (the layout pass
//    offers gpu_rules::subtile_layout): register q of the sub-tile is the tile's register whose
//    thread-independent coordinates are start XOR the sub-tile register's;
//  - otherwise through shared memory (FlagTree's "SMEM relay"): extract stores the whole tile in
//    its padded row-major order, a barrier, each thread reads its sub-tile elements at start + c
//    (a pad of the sub-tile reads row start: a value nothing observes), a barrier; insert stores
//    the sub-tile, a barrier, each thread takes for each tile element inside the sub-tile's real
//    box the stored element and keeps its own register elsewhere (pads of the tile are outside
//    the real box), a barrier. A dynamic index wraps: per dim ((id as u32) / stride) mod grid.
#include <unordered_map>

#include "backend/gpu/lower.hpp"
#include "ir/subtile.hpp"

namespace tle::gpu::detail {

using layout::LinearLayout;
using llvm::Value;

namespace {
/// The lane / warp / block bases of a and b are the same (an in dim one lacks counts as zeros).
bool same_hw_bases(const LinearLayout& a, const LinearLayout& b) {
  for (const char* n : {layout::kLane, layout::kWarp, layout::kBlock}) {
    std::vector<LinearLayout::Basis> ba, bb;
    if (a.has_in_dim(n)) ba = a.bases(n);
    if (b.has_in_dim(n)) bb = b.bases(n);
    const size_t m = std::max(ba.size(), bb.size());
    for (size_t i = 0; i < m; ++i) {
      const LinearLayout::Basis za(static_cast<size_t>(a.num_out_dims()), 0);
      const LinearLayout::Basis zb(static_cast<size_t>(b.num_out_dims()), 0);
      if ((i < ba.size() ? ba[i] : za) != (i < bb.size() ? bb[i] : zb)) return false;
    }
  }
  return true;
}

/// Key of thread-independent coordinates.
uint64_t key(const std::vector<int32_t>& c) {
  uint64_t k = 0;
  for (int32_t v : c) k = k * 1000003u + static_cast<uint32_t>(v);
  return k;
}
}  // namespace

std::vector<Value*> Lowerer::subtile_offsets(const ir::Op& op, const ir::SubTileGrid& g, size_t nfixed) {
  std::vector<Value*> off(g.x.size());
  if (op.operands.size() > nfixed) {
    Value* id = reg(op.operands[nfixed], 0);
    for (size_t d = 0; d < off.size(); ++d)
      off[d] = B.CreateMul(B.CreateURem(B.CreateUDiv(id, i32c(g.stride[d])), i32c(g.grid[d])), i32c(g.sub[d]));
  } else {
    auto o = ir::subtile_offsets(g, static_cast<uint32_t>(op.int_attr("index")));
    for (size_t d = 0; d < off.size(); ++d) off[d] = i32c(o[d]);
  }
  return off;
}

bool Lowerer::subtile_renumber(const ir::Op& op, const ir::SubTileGrid& g, const ir::Value* big, const ir::Value* small,
                               std::vector<Value*>& out) {
  const size_t nfixed = op.kind == ir::OpKind::InsertTile ? 2 : 1;
  if (op.operands.size() > nfixed || g.sub != small->type.shape) return false;
  const LinearLayout* lb = layout_of(big);
  const LinearLayout* ls = layout_of(small);
  if (!lb || !ls || !same_hw_bases(*lb, *ls)) return false;
  const std::vector<int64_t> off = ir::subtile_offsets(g, static_cast<uint32_t>(op.int_attr("index")));
  std::unordered_map<uint64_t, int> small_at;
  for (int q = ls->num_regs(); q-- > 0;) small_at[key(reg_coords(*ls, q))] = q;
  std::unordered_map<uint64_t, int> big_at;
  for (int q = lb->num_regs(); q-- > 0;) big_at[key(reg_coords(*lb, q))] = q;
  out.clear();
  if (op.kind == ir::OpKind::ExtractTile) {
    for (int q = 0; q < ls->num_regs(); ++q) {
      auto c = reg_coords(*ls, q);
      for (size_t d = 0; d < c.size(); ++d) c[d] = static_cast<int32_t>(c[d] + off[d]);
      auto it = big_at.find(key(c));
      if (it == big_at.end()) return false;
      out.push_back(reg(big, it->second));
    }
    return true;
  }
  for (int q = 0; q < lb->num_regs(); ++q) {
    auto c = reg_coords(*lb, q);
    bool inside = true;
    for (size_t d = 0; d < c.size(); ++d) {
      c[d] = static_cast<int32_t>(c[d] - off[d]);
      inside = inside && c[d] >= 0 && c[d] < g.sub[d];
    }
    if (!inside) {
      out.push_back(reg(big, q));
      continue;
    }
    auto it = small_at.find(key(c));
    if (it == small_at.end()) return false;
    out.push_back(reg(small, it->second));
  }
  return true;
}

void Lowerer::lower_subtile(const ir::Op& op) {
  const ir::SubTileGrid g = ir::subtile_grid(op);
  if (!g.valid) fail(op, "the sub-tile shape does not divide the tile's");
  const bool ins = op.kind == ir::OpKind::InsertTile;
  const ir::Value* x = op.operands.at(0);
  const ir::Value* r = op.result();
  const ir::Value* sub = ins ? op.operands.at(1) : r;
  const LinearLayout* lx = layout_of(x);
  const LinearLayout* ls = layout_of(sub);
  if (!lx || !ls) fail(op, "a tile has no layout (the GPU layout pass did not run)");
  if (ins && (!layout_of(r) || *layout_of(r) != *lx)) fail(op, "the result does not have the tile's layout");
  std::vector<Value*> out;
  if (subtile_renumber(op, g, x, sub, out)) {
    regs[r] = out;
    return;
  }
  const DType d = x->type.dtype;
  const std::vector<Value*> off = subtile_offsets(op, g, ins ? 2 : 1);
  const size_t rank = g.x.size();
  if (!ins) {
    const ir::Shape& xs = x->type.shape;
    stage(x, 0);  // row-major, as linear() reads it back
    barrier();
    auto hr = hw_coords(*ls);
    for (int q = 0; q < ls->num_regs(); ++q) {
      auto c = coords(*ls, hr, q);
      for (size_t k = 0; k < rank; ++k) {
        Value* real = B.CreateICmpULT(c[k], i32c(g.sub[k]));
        c[k] = B.CreateAdd(off[k], B.CreateSelect(real, c[k], i32c(0)));
      }
      out.push_back(smem_load(d, 0, linear(c, xs)));
    }
    barrier();
    regs[r] = out;
    return;
  }
  const ir::Shape& ss = sub->type.shape;
  stage(sub, 0);
  barrier();
  auto hx = hw_coords(*lx);
  for (int q = 0; q < lx->num_regs(); ++q) {
    auto c = coords(*lx, hx, q);
    Value* inside = B.getTrue();
    for (size_t k = 0; k < rank; ++k) {
      c[k] = B.CreateSub(c[k], off[k]);  // below the start: huge as unsigned
      inside = B.CreateAnd(inside, B.CreateICmpULT(c[k], i32c(g.sub[k])));
    }
    for (size_t k = 0; k < rank; ++k) c[k] = B.CreateSelect(inside, c[k], i32c(0));
    out.push_back(B.CreateSelect(inside, smem_load(d, 0, linear(c, ss)), reg(x, q)));
  }
  barrier();
  regs[r] = out;
}

}  // namespace tle::gpu::detail
