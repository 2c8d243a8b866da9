// src/passes/pointer_origin.cpp - see pointer_origin.hpp.
#include "passes/pointer_origin.hpp"

#include <unordered_set>
#include <vector>

namespace tle::passes {

PointerOrigin pointer_origin(const ir::Value* p) {
  using ir::OpKind;
  PointerOrigin o;
  std::unordered_set<const ir::Value*> seen;
  std::vector<const ir::Value*> work = {p};
  auto push = [&](const ir::Value* v) {
    if (v->type.dtype == DType::ptr && seen.insert(v).second) work.push_back(v);
  };
  seen.insert(p);
  while (!work.empty()) {
    const ir::Value* v = work.back();
    work.pop_back();
    if (v->is_block_arg()) {
      const ir::Op* parent = v->owner->parent_op();
      if (!parent) {
        o.global = true;  // a kernel argument
        o.args.insert(v->index);
      } else if (parent->kind == OpKind::For && v->index >= 1) {
        // carried value i: the init (operand 3 + i - 1) and what the body yields for it (while
        // the tracer builds the body, it has no yield yet: the init only)
        const size_t i = v->index - 1;
        push(parent->operands.at(3 + i));
        if (const ir::Op* y = parent->region().body().terminator()) push(y->operands.at(i));
      } else {
        o.unknown = true;  // a combine region's argument, or the induction variable
      }
      continue;
    }
    const ir::Op& d = *v->def;
    switch (d.kind) {
      case OpKind::LocalAlloc: o.allocs.insert(&d); break;
      case OpKind::Constant: break;  // a null pointer points nowhere
      case OpKind::AddPtr: case OpKind::Broadcast: case OpKind::ExpandDims: case OpKind::Reshape:
      case OpKind::Permute: case OpKind::Hint: case OpKind::ConvertLayout: case OpKind::SetLayout:
      case OpKind::ExtractTile:
        push(d.operands.at(0));
        break;
      case OpKind::InsertTile: push(d.operands.at(0)), push(d.operands.at(1)); break;
      case OpKind::Select: push(d.operands.at(1)), push(d.operands.at(2)); break;
      case OpKind::For: {
        const size_t i = v->index;  // result i: carried value i
        push(d.operands.at(3 + i));
        push(d.region().body().terminator()->operands.at(i));
        break;
      }
      case OpKind::If:
        for (const auto& r : d.regions) push(r->body().terminator()->operands.at(v->index));
        break;
      default: o.unknown = true; break;  // a loaded pointer, a gather, ...
    }
  }
  return o;
}

std::vector<const ir::Value*> written_pointers(const ir::Op& op) {
  using K = ir::OpKind;
  switch (op.kind) {
    case K::Store: case K::AtomicRMW: case K::AtomicCas: return {op.operands.at(0)};
    case K::AsyncCopy: return {op.operands.at(1)};
    case K::TmaCopy: return {op.operands.at(static_cast<size_t>(2 + 3 * op.int_attr("rank")))};
    case K::InlineAsm: case K::CudaCall: {
      std::vector<const ir::Value*> ps;
      for (const ir::Value* x : op.operands)
        if (x->type.dtype == DType::ptr) ps.push_back(x);
      return ps;
    }
    default: return {};
  }
}

bool has_local_alloc(const ir::Function& f) {
  bool any = false;
  ir::walk(f.entry(), [&](const ir::Op& op) { any = any || op.kind == ir::OpKind::LocalAlloc; });
  return any;
}

}  // namespace tle::passes
