// src/passes/gpu/plan_shared_buffers.cpp - places the program's shared buffers (local_alloc) in
// shared memory, reusing the bytes of buffers that are no longer used (see gpu_passes.hpp).
//
// Liveness is measured in positions of the kernel body's top-level ops (local_alloc only occurs
// there): a buffer is live from its local_alloc to the last top-level op that uses, at any depth,
// a pointer that may point into it (pointer_origin; a pointer of unknown origin keeps every
// buffer allocated so far live). A loop is one position, so a buffer used anywhere in a loop is
// live across all of it; the destination of an async or TMA copy (gpu::copy) lives to the end,
// since its bytes may land as late as that, and so do mbarriers. Buffers are placed in order of allocation, each at the lowest offset,
// aligned as it asks, that no placed buffer with an overlapping live range occupies (first fit).
// Two buffers that share bytes are used at disjoint times; insert_shared_barriers orders the
// last accesses of the first before the first accesses of the second, as it works on bytes.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <vector>

#include "passes/gpu/gpu_passes.hpp"
#include "passes/pointer_origin.hpp"

namespace tle::passes {

int64_t plan_shared_buffers(ir::Function& f) {
  struct Buf {
    ir::Op* op;
    int64_t first, last, bytes, align, offset = 0;
  };
  std::vector<Buf> bufs;
  std::map<const ir::Op*, size_t> index;
  int64_t pos = 0;
  for (auto& top : f.entry().ops) {
    if (top->kind == ir::OpKind::LocalAlloc) {
      index[top.get()] = bufs.size();
      bufs.push_back({top.get(), pos, pos, ir::local_alloc_bytes(*top),
                      top->int_attr("align")});
    }
    auto use = [&](const ir::Op& op) {
      for (const ir::Value* v : op.operands) {
        if (v->type.dtype != DType::ptr) continue;
        PointerOrigin o = pointer_origin(v);
        if (o.unknown)
          for (auto& b : bufs) b.last = std::max(b.last, pos);
        // An async copy's bytes land as late as the kernel's end (a wait the planner does not
        // match to it): its destination stays live throughout; so do mbarriers (their bytes
        // are not reused without mbarrier.inval).
        const bool to_end = op.kind == ir::OpKind::AsyncCopy || op.kind == ir::OpKind::TmaCopy ||
                            op.kind == ir::OpKind::MBarrierInit;
        const int64_t until = to_end ? INT64_MAX : pos;
        for (const ir::Op* a : o.allocs) bufs[index.at(a)].last = std::max(bufs[index.at(a)].last, until);
      }
    };
    use(*top);
    for (auto& r : top->regions) ir::walk(static_cast<const ir::Block&>(r->body()), use);
    ++pos;
  }
  int64_t total = 0;
  for (size_t i = 0; i < bufs.size(); ++i) {
    Buf& b = bufs[i];
    // the placed buffers live at the same time as b, by offset
    std::vector<const Buf*> busy;
    for (size_t j = 0; j < i; ++j)
      if (bufs[j].first <= b.last && b.first <= bufs[j].last) busy.push_back(&bufs[j]);
    std::sort(busy.begin(), busy.end(), [](const Buf* x, const Buf* y) { return x->offset < y->offset; });
    int64_t at = 0;
    for (const Buf* o : busy) {
      at = (at + b.align - 1) / b.align * b.align;
      if (at + b.bytes <= o->offset) break;
      at = std::max(at, o->offset + o->bytes);
    }
    b.offset = (at + b.align - 1) / b.align * b.align;
    b.op->attrs["offset"] = b.offset;
    total = std::max(total, b.offset + b.bytes);
  }
  return total;
}

}  // namespace tle::passes
