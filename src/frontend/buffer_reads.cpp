// src/frontend/buffer_reads.cpp - the tracer's warning for a shared buffer read before anything
// writes it (TLE-Struct, issue #13 item 6): entry point frontend::unwritten_buffer_reads.
//
// A load from a gpu::alloc buffer reads uninitialized shared memory when no statement of the
// kernel writes the buffer, or when, in program order, no write of it comes first: a store,
// atomic, gpu::copy (cp.async or TMA) into it, or inline asm / a CUDA call given a pointer into
// it. Roles of gpu::warp_specialize run at once and order their accesses through mbarriers, so a
// write in another role (or before the roles) counts as first. A read inside an if_ branch is left
// alone (its condition may be what keeps it after the write), and so is a load that may read
// one of several buffers (pointers swapped in a loop). A write through a pointer whose buffer
// cannot be named may write anything: then nothing is reported.
#include <fmt/format.h>

#include <map>
#include <set>

#include "frontend/trace.hpp"
#include "passes/pointer_origin.hpp"

namespace tle::frontend {
namespace {

bool inside_if(const ir::Op& op) {
  for (const ir::Block* b = op.parent; b;) {
    const ir::Op* p = b->parent_op();
    if (!p || p->kind == ir::OpKind::WarpSpecialize) return false;
    if (p->kind == ir::OpKind::If) return true;
    b = p->parent;
  }
  return false;
}

}  // namespace

std::vector<BufferReadWarning> unwritten_buffer_reads(const ir::Function& f) {
  // Every write, by buffer: the roles (their bodies; null outside roles) that write it.
  std::map<const ir::Op*, std::set<const ir::Block*>> writers;
  bool unknown = false;
  auto role_of = [](const ir::Op& op) -> const ir::Block* { return ir::enclosing_role(op.parent); };
  ir::walk(f.entry(), [&](const ir::Op& op) {
    for (const ir::Value* p : passes::written_pointers(op)) {
      const passes::PointerOrigin o = passes::pointer_origin(p);
      unknown |= o.unknown;
      for (const ir::Op* a : o.allocs) writers[a].insert(role_of(op));
    }
  });
  if (unknown) return {};
  std::vector<BufferReadWarning> out;
  std::map<const ir::Op*, std::set<const ir::Block*>> written;  // so far, in program order
  std::set<const ir::Op*> reported;
  ir::walk(f.entry(), [&](const ir::Op& op) {
    const ir::Block* role = role_of(op);
    // (a load that may read one of several buffers - pointers swapped in a loop, selected - is
    // left alone: which one it reads first is not known here)
    const passes::PointerOrigin o =
        op.kind == ir::OpKind::Load ? passes::pointer_origin(op.operands.at(0)) : passes::PointerOrigin{};
    if (o.allocs.size() == 1 && !o.unknown && !o.global && !inside_if(op)) {
      for (const ir::Op* a : o.allocs) {
        if (reported.count(a)) continue;
        auto w = writers.find(a);
        std::string what;
        if (w == writers.end()) {
          what = ", which no statement of the kernel writes (no gpu::copy, store or atomic into it)";
        } else {
          bool first = written[a].count(nullptr) || written[a].count(role);
          for (const ir::Block* r : w->second) first |= r && r != role;  // another role's write (ordered by mbarriers)
          if (!first) what = " before any copy or store into it (the first one follows, in program order)";
        }
        if (what.empty()) continue;
        reported.insert(a);
        out.push_back({op.loc, fmt::format("this load reads the shared buffer allocated at {}:{}{}: it reads "
                                           "uninitialized shared memory",
                                           a->loc.file, a->loc.line, what)});
      }
    }
    for (const ir::Value* p : passes::written_pointers(op))
      for (const ir::Op* a : passes::pointer_origin(p).allocs) written[a].insert(role);
  });
  return out;
}

}  // namespace tle::frontend
