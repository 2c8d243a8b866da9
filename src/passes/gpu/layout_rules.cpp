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

}  // namespace tle::passes::gpu_rules
