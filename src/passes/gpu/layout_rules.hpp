// src/passes/gpu/layout_rules.hpp - the layout relations between an op's operands and results
// (docs/ir.md, "GPU layouts"), shared by assign_layouts and verify_layouts.
#pragma once
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
    case ir::OpKind::Hint:
      return true;
    default: return false;
  }
}
/// Loads, stores and atomics: all non-scalar operands and the result share one layout.
inline bool is_memory(ir::OpKind k) {
  return k == ir::OpKind::Load || k == ir::OpKind::Store || k == ir::OpKind::AtomicRMW || k == ir::OpKind::AtomicCas;
}

/// `l` with every basis component along the listed dims zeroed and those out dims sized 1.
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

}  // namespace tle::passes::gpu_rules
