// src/passes/gpu/layout_rules.cpp - layout algebra for the per-op relations (layout_rules.hpp).
#include "passes/gpu/layout_rules.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "tle/error.hpp"

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

namespace tle::passes::gpu_rules {

LL requested_layout(const ir::Op& op, int num_warps, bool wgmma) {
  const ir::Shape& shape = op.result()->type.shape;
  const std::string kind = op.has_attr("kind") ? op.str_attr("kind") : "blocked";
  const bool sliced = op.has_attr("slice_dim");
  const int dim = sliced ? static_cast<int>(op.int_attr("slice_dim")) : -1;
  auto v32 = [&](const char* k) {
    std::vector<int32_t> v;
    for (int64_t x : op.ints_attr(k)) v.push_back(static_cast<int32_t>(x));
    return v;
  };
  const std::string base = kind == "mma" ? "MmaLayout" : kind == "dot_operand" ? "DotOperandLayout" : "BlockedLayout";
  const std::string what = fmt::format("gpu::set_layout({}{})", sliced ? "SliceLayout of a " : "", base);
  const std::vector<int32_t> wpc = v32("warps_per_cta");
  int64_t warps = 1;
  for (int32_t w : wpc) warps = std::min<int64_t>(warps * w, int64_t(1) << 40);
  if (warps != num_warps)
    throw UserError(op.loc, fmt::format("{}: warps_per_cta [{}] spreads the tile over {} warps, but the kernel is "
                                        "compiled for {} (Grid::with_warps); make them agree",
                                        what, fmt::join(wpc, ", "), warps, num_warps));
  auto sliced_out = [&](LL l) { return sliced ? layout::slice(l, dim) : l; };
  if (kind == "blocked") {
    ir::Shape ps = shape;
    if (sliced) ps.insert(ps.begin() + dim, 1);
    return sliced_out(layout::blocked(ps, v32("size_per_thread"), v32("threads_per_warp"), wpc, v32("order")));
  }
  const int64_t version = op.int_attr("version"), instr_n = op.int_attr("instr_n");
  const int32_t wm = wpc.at(0), wn = wpc.at(1);
  if (version == 3 && !wgmma)
    throw UserError(op.loc, fmt::format("{}: an MmaLayout of version 3 is wgmma's, which only sm_90a has; this kernel "
                                        "is compiled for another target: use version 2 (mma.sync) there",
                                        what));
  const bool operand = kind == "dot_operand";
  const int64_t op_idx = operand ? op.int_attr("op_idx") : -1, kw = operand ? op.int_attr("k_width") : 0;
  // The smallest parent extent along each dim (what a slice inserts), and the minimum the layout needs.
  std::vector<int64_t> least;
  if (!operand) least = {version == 2 ? 16 : 16 * int64_t(wm), (version == 2 || instr_n == 0 ? 8 : instr_n) * int64_t(wn)};
  else if (op_idx == 0) least = {16, 8 * kw};
  else least = {8 * kw, 8};
  ir::Shape ps = shape;
  if (sliced) ps.insert(ps.begin() + dim, least[static_cast<size_t>(dim)]);
  const std::string tile = sliced ? fmt::format("the parent shape [{}] (the tile's with dim {} inserted)",
                                                fmt::join(ps, ", "), dim)
                                  : fmt::format("the tile [{}] (padded to powers of two)", fmt::join(ps, ", "));
  const char* dims = !operand ? "[M, N]" : op_idx == 0 ? "[M, K]" : "[K, N]";
  auto need = [&](bool ok, const std::string& rule) {
    if (!ok)
      throw UserError(op.loc, fmt::format("{}: {} cannot be tiled by this layout: {} {}; use a larger tile or another "
                                          "layout",
                                          what, tile, dims, rule));
  };
  if (operand) {
    const std::vector<int32_t> warps{wm, wn};
    need(ps[0] >= least[0] && ps[1] >= least[1],
         fmt::format("needs at least [{}, {}] (one m16n8k{} {} fragment at k_width {})", least[0], least[1], 8 * kw,
                     op_idx == 0 ? "A" : "B", kw));
    return sliced_out(layout::mma_v2_operand(static_cast<int>(op_idx), ps, warps, static_cast<int>(32 / kw)));
  }
  if (version == 2) {
    need(ps[0] >= 16 && ps[1] >= 8, "needs M >= 16 and N >= 8 (one m16n8 tile)");
    return sliced_out(layout::mma_v2_accumulator(ps, wpc));
  }
  const int64_t n = instr_n != 0 ? instr_n : ps[1] / wn;
  need(ps[0] % (16 * int64_t(wm)) == 0,
       fmt::format("needs M to be a multiple of {} (64 rows per warpgroup, {} warpgroups along M)", 16 * int64_t(wm),
                   wm / 4));
  need(n >= 8 && ps[1] % (n * wn) == 0,
       fmt::format("needs N to be a multiple of {} (instr_n {} times wn {}, instr_n at least 8)", std::max<int64_t>(n, 8) * wn,
                   n, wn));
  const std::vector<int32_t> groups{wm / 4, wn};
  if (n * wn == ps[1]) return sliced_out(layout::wgmma_accumulator(ps, groups));
  // instr_n narrower than N / wn: the [16 wm, n wn] CTA tile repeats in registers along N, then M.
  const LL cta = layout::wgmma_accumulator({16 * int64_t(wm), n * wn}, groups);
  return sliced_out(layout::tile_to_shape(cta, ps, {1, 0}));
}

}  // namespace tle::passes::gpu_rules
