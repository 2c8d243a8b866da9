// src/passes/gpu/hoist_conversions.cpp - loop-invariant code motion of layout conversions
// (gpu_passes.hpp, hoist_conversions).
//
// assign_layouts inserts a convert_layout right before the op that needs the new layout; when that
// op is in a loop and the converted value comes from outside it (attention's q tile, read by the
// K/V loop's first dot in wgmma's register-A layout; a row of weights used in every iteration),
// the conversion - a round trip through shared memory with barriers - would run every iteration.
// This pass moves such a conversion (directly in a `for` body, its operand defined outside the
// loop) to right before the loop, repeating outward through nested loops, as LLVM's LICM does for
// loop-invariant instructions. A conversion is pure, so running it once before a loop that may
// run zero times changes no result.
#include "passes/gpu/gpu_passes.hpp"

#include <vector>

namespace tle::passes {
namespace {

using ir::Block;
using ir::Op;
using ir::OpKind;

/// v is defined outside `loop` (not in its body or in a region nested in it).
bool defined_outside(const ir::Value* v, const Op& loop) {
  for (const Block* b = v->defining_block(); b;) {
    const Op* p = b->parent_op();
    if (p == &loop) return false;
    b = p ? p->parent : nullptr;
  }
  return true;
}

/// Hoists out of every loop in `b`, inner loops first (so a conversion hoisted out of an inner
/// loop into an outer loop's body moves on out of that one too); returns the number of moves.
int hoist_block(Block& b) {
  int moved = 0;
  for (auto it = b.ops.begin(); it != b.ops.end(); ++it) {
    Op& op = **it;
    for (auto& r : op.regions) moved += hoist_block(r->body());
    if (op.kind != OpKind::For) continue;
    Block& body = op.region().body();
    for (auto c = body.ops.begin(); c != body.ops.end();) {
      Op& conv = **c;
      if (conv.kind == OpKind::ConvertLayout && defined_outside(conv.operands.at(0), op)) {
        conv.parent = &b;
        b.ops.splice(it, body.ops, c++);  // right before the loop
        ++moved;
      } else {
        ++c;
      }
    }
  }
  return moved;
}

}  // namespace

int hoist_conversions(ir::Function& f) { return hoist_block(f.entry()); }

}  // namespace tle::passes
