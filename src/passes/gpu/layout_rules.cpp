// src/passes/gpu/layout_rules.cpp - layout algebra for the per-op relations (layout_rules.hpp).
#include "passes/gpu/layout_rules.hpp"

#include <algorithm>

namespace tle::passes::gpu_rules {

using layout::DimSize;
using layout::dim_name;

namespace {
std::vector<LL::InDim> in_dims_of(const LL& l) {
  std::vector<LL::InDim> ins;
  for (const std::string& n : l.in_dim_names()) ins.push_back({n, l.bases(n)});
  return ins;
}
std::vector<DimSize> renamed(std::vector<DimSize> outs) {
  for (size_t i = 0; i < outs.size(); ++i) outs[i].name = dim_name(static_cast<int>(i));
  return outs;
}
}  // namespace

LL project(const LL& l, const std::vector<int>& dims) {
  std::vector<LL::InDim> ins = in_dims_of(l);
  std::vector<DimSize> outs = l.out_dims();
  for (int d : dims) {
    outs.at(d).size = 1;
    for (auto& in : ins)
      for (auto& b : in.bases) b.at(d) = 0;
  }
  // A register that only moved along a projected dim now repeats another: drop it, as slice does.
  for (auto& in : ins)
    if (in.name == layout::kReg)
      std::erase_if(in.bases, [](const LL::Basis& b) { return std::all_of(b.begin(), b.end(), [](int32_t v) { return v == 0; }); });
  return LL(std::move(ins), std::move(outs));
}

LL remove_dim(const LL& l, int axis) {
  std::vector<LL::InDim> ins = in_dims_of(l);
  std::vector<DimSize> outs = l.out_dims();
  if (axis < 0 || axis >= static_cast<int>(outs.size()) || outs[axis].size != 1)
    throw InternalError("remove_dim: output dim " + std::to_string(axis) + " is not of size 1");
  outs.erase(outs.begin() + axis);
  for (auto& in : ins)
    for (auto& b : in.bases) b.erase(b.begin() + axis);
  return LL(std::move(ins), renamed(std::move(outs)));
}

LL insert_dim(const LL& l, int axis) {
  std::vector<LL::InDim> ins = in_dims_of(l);
  std::vector<DimSize> outs = l.out_dims();
  outs.insert(outs.begin() + axis, DimSize{"new", 1});
  for (auto& in : ins)
    for (auto& b : in.bases) b.insert(b.begin() + axis, 0);
  return LL(std::move(ins), renamed(std::move(outs)));
}

std::optional<LL> subtile_layout(const LL& l, const ir::Shape& sub) {
  std::vector<DimSize> outs = l.out_dims();
  if (outs.size() != sub.size()) return std::nullopt;
  for (size_t d = 0; d < sub.size(); ++d) {
    if (!layout::is_pow2(sub[d]) || outs[d].size % sub[d] != 0) return std::nullopt;
    outs[d].size = static_cast<int32_t>(sub[d]);
  }
  auto inside = [&](const LL::Basis& b) {
    for (size_t d = 0; d < sub.size(); ++d)
      if (b[d] >= sub[d]) return false;
    return true;
  };
  auto between = [&](const LL::Basis& b) {
    for (size_t d = 0; d < sub.size(); ++d)
      if (b[d] % sub[d] != 0) return false;
    return true;
  };
  std::vector<LL::InDim> ins = in_dims_of(l);
  for (auto& in : ins) {
    std::vector<LL::Basis> kept;
    for (const auto& b : in.bases) {
      if (inside(b)) kept.push_back(b);
      else if (in.name != layout::kReg || !between(b)) return std::nullopt;
    }
    in.bases = std::move(kept);
  }
  LL r(std::move(ins), std::move(outs));
  if (!r.is_surjective()) return std::nullopt;
  return r;
}

std::vector<int> broadcast_dims(const ir::Type& x) {
  std::vector<int> dims;
  for (int d = 0; d < x.rank(); ++d)
    if (x.shape[d] == 1) dims.push_back(d);
  return dims;
}

std::vector<int32_t> inverse_order(const std::vector<int64_t>& order) {
  std::vector<int32_t> inv(order.size());
  for (size_t i = 0; i < order.size(); ++i) inv.at(order[i]) = static_cast<int32_t>(i);
  return inv;
}

LL shape_op_operand_layout(const ir::Op& op, const LL& r) {
  const ir::Type& x = op.operands.at(0)->type;
  switch (op.kind) {
    case ir::OpKind::Broadcast: return project(r, broadcast_dims(x));
    case ir::OpKind::ExpandDims: return remove_dim(r, static_cast<int>(op.int_attr("axis")));
    case ir::OpKind::Reshape: return layout::reshape_tile(r, x.shape);
    case ir::OpKind::Permute: return layout::transpose_tile(r, inverse_order(op.ints_attr("order")));
    default: throw InternalError("shape_op_operand_layout: not a shape op");
  }
}

namespace {
struct DotShape {
  int64_t M, N, K;
  bool fp8;  // both inputs fp8 (else both f16 or both bf16)
};
/// M, N, K of a rank-2 dot of f16 or bf16 tiles (both the same) or of fp8 tiles (either format on
/// either side) with f32 acc and result, all powers of two: the dots a tensor-core plan may take;
/// nullopt for any other.
std::optional<DotShape> tc_dot_shape(const ir::Op& op) {
  if (op.kind != ir::OpKind::Dot || op.operands.size() != 3) return std::nullopt;
  const ir::Type& a = op.operands[0]->type;
  const ir::Type& b = op.operands[1]->type;
  const ir::Type& c = op.operands[2]->type;
  const ir::Type& r = op.result()->type;
  const bool fp8 = is_fp8(a.dtype) && is_fp8(b.dtype);
  if (!fp8 && (a.dtype != b.dtype || (a.dtype != DType::f16 && a.dtype != DType::bf16))) return std::nullopt;
  if (c.dtype != DType::f32 || r.dtype != DType::f32) return std::nullopt;
  if (a.rank() != 2 || b.rank() != 2 || r.rank() != 2) return std::nullopt;
  DotShape s{a.shape[0], b.shape[1], a.shape[1], fp8};
  if (!layout::is_pow2(s.M) || !layout::is_pow2(s.N) || !layout::is_pow2(s.K)) return std::nullopt;
  return s;
}
}  // namespace

std::optional<MmaV2Plan> mma_v2_plan(const ir::Op& op, int num_warps) {
  auto shape = tc_dot_shape(op);
  if (!shape || shape->fp8) return std::nullopt;
  const int64_t M = shape->M, K = shape->K, N = shape->N;
  if (M % 16 || N % 8 || K % 16) return std::nullopt;
  const ir::Type& a = op.operands[0]->type;
  const ir::Type& b = op.operands[1]->type;
  const ir::Type& r = op.result()->type;
  if (num_warps < 1 || !layout::is_pow2(num_warps)) return std::nullopt;
  const int64_t tm = M / 16, tn = N / 8;  // 16x8 accumulator tiles along M and N
  int32_t wm = 1, wn = 1;
  while (wm * wn < num_warps) {
    const bool room_m = 2 * wm <= tm, room_n = 2 * wn <= tn;
    if (!room_m && !room_n) return std::nullopt;
    if (room_m && (!room_n || tm / wm >= tn / wn)) wm *= 2;
    else wn *= 2;
  }
  MmaV2Plan p;
  p.warps = {wm, wn};
  p.acc = layout::mma_v2_accumulator(r.shape, p.warps);
  p.a = layout::mma_v2_operand(0, a.shape, p.warps, 16);
  p.b = layout::mma_v2_operand(1, b.shape, p.warps, 16);
  return p;
}

std::optional<MmaV3Plan> mma_v3_plan(const ir::Op& op, int num_warps) {
  auto shape = tc_dot_shape(op);
  if (!shape) return std::nullopt;
  const int64_t M = shape->M, K = shape->K, N = shape->N;
  if (M % 64 || K % (shape->fp8 ? 32 : 16)) return std::nullopt;
  const ir::Type& a = op.operands[0]->type;
  const ir::Type& r = op.result()->type;
  if (num_warps < 4 || num_warps % 4 || !layout::is_pow2(num_warps)) return std::nullopt;
  const int32_t groups = num_warps / 4;
  const int32_t gm = static_cast<int32_t>(std::min<int64_t>(groups, M / 64)), gn = groups / gm;
  if (N / gn < 16) return std::nullopt;
  MmaV3Plan p;
  p.warpgroups = {gm, gn};
  p.instr_n = static_cast<int32_t>(std::min<int64_t>(N / gn, 256));
  p.acc = layout::wgmma_accumulator(r.shape, p.warpgroups);
  p.a_regs = layout::mma_v2_operand(0, a.shape, {4 * gm, gn}, 16);
  return p;
}

bool wgmma_a_in_registers(const ir::Op& dot) {
  const ir::Value* a = dot.operands.at(0);
  if (is_fp8(a->type.dtype)) return false;
  if (a->def && a->def->kind == ir::OpKind::Permute) a = a->def->operands.at(0);
  return !(a->def && a->def->kind == ir::OpKind::Load && a->def->parent == dot.parent);
}

int64_t wgmma_atom(const ir::Op& dot, unsigned idx, int cdim, int num_warps) {
  const bool k_major = cdim == (idx == 0 ? 1 : 0);
  if (is_fp8(dot.operands.at(idx)->type.dtype)) return k_major ? 128 : 0;
  if (idx != 1 || cdim != 1) return 64;
  auto plan = mma_v3_plan(dot, num_warps);
  if (!plan) throw InternalError("wgmma_atom: the dot does not run on wgmma");
  return std::min<int64_t>(64, plan->instr_n);
}

}  // namespace tle::passes::gpu_rules
