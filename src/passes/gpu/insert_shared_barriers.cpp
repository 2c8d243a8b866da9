// src/passes/gpu/insert_shared_barriers.cpp - CTA barriers between conflicting accesses of the
// program's shared buffers (see gpu_passes.hpp).
//
// A tile statement runs on all the program's threads, each on the elements its layout gives it,
// so two statements on one shared buffer touch its bytes from different threads. The program's
// order is kept by a barrier between an access and an earlier one it conflicts with: a read
// after a write (a plain store or an atomic), a write after a read or a write, a plain access
// after an atomic one or an atomic after a plain one, and two atomics unless both are updates of
// one kind that commute exactly (integer add, and, or, xor, max, min; float max, min) and neither
// one's old values are used; two reads need none. (As FlagTree's TleInsertLocalPointerBarriers.)
// A cuda_call given a pointer that may point into a buffer counts as writing all of it. An async
// copy (gpu::copy) writes its destination, but lands at an unknown time until an async_wait: it
// is ordered after earlier accesses like a write (a barrier before it where they conflict), stays
// pending across barriers while in flight, and counts as a plain write made at every async_wait
// that may complete it (a barrier between the wait and a conflicting access after it), until a
// wait_group(0) after its commit. Nothing orders an access after a
// copy still in flight: it reads another stage, or the program races (the interpreter stops it).
// A TMA copy (gpu::copy from a descriptor) is ordered after earlier accesses the same way, but
// lands by its mbarrier phase, which every thread waits for itself: it needs no barrier after it.
// Accesses
// are compared by the bytes their buffers occupy (plan_shared_buffers' offsets, so buffers sharing
// bytes conflict too); a pointer of unknown origin may touch every byte.
//
// The pass walks the body in program order with the set of accesses made since the last barrier
// (`pending`). An access that conflicts with a pending one gets a barrier right before it, which
// empties the set (of all but the copies in flight). A loop whose body conflicts with what is pending before it gets one barrier
// before it instead; its body then starts from what is pending before the loop joined with what
// is pending at the end of its body (the previous iteration), computed to a fixpoint before any
// barrier is inserted; after the loop, the same join (zero trips included). An if's branches start
// from the same set and join after it. A barrier the program wrote (gpu::sync) empties it too.
// A warp_specialize's roles each start from what is pending after the barrier of all warps the
// lowering puts before them, and get barriers of their own warps; what orders one role's
// accesses after another's is the program's mbarriers.
// Uniform control flow (tle's loops and ifs run the same trips and branch on every thread) makes
// every barrier reached by all threads (of the role); the tracer refuses shared-buffer accesses and gpu::sync
// inside combine functions (their code runs a varying number of times per thread).
#include <algorithm>
#include <compare>
#include <iterator>
#include <list>
#include <memory>
#include <map>
#include <vector>

#include "passes/gpu/gpu_passes.hpp"
#include "passes/pointer_origin.hpp"

namespace tle::passes {
namespace {

using ir::Op;
using ir::OpKind;

/// Atomic: an atomic whose old values nobody reads; AtomicRead: one whose old values are used
/// (they must include every earlier statement's update, so it is ordered after earlier atomics).
enum class Access { Read, Write, Atomic, AtomicRead };

struct Range {
  int64_t lo, hi;  // bytes [lo, hi)
  Access kind;
  /// Atomic: which updates it commutes with exactly (the same op on the same dtype: integer add,
  /// and, or, xor, max, min; float max, min), -1 for none (xchg, compare-and-swap, float add,
  /// whose results depend on the order).
  int64_t commutes = -1;
  /// An async copy (gpu::copy) not yet waited for: its bytes land at an unknown time before the
  /// async_wait that completes it, so no barrier orders it; the wait turns it into a plain write.
  bool inflight = false;
  /// An async copy in flight whose group is committed: async_wait(0) completes it.
  bool committed = false;
  /// A TMA copy in flight: it lands by its mbarrier's phase, which every thread waits for, so it
  /// never becomes a write that needs a barrier (an async_wait does not complete it).
  bool tma = false;
  auto operator<=>(const Range&) const = default;
};
using Pending = std::vector<Range>;  // sorted, unique

/// Whether access `cur` must wait for the earlier access `prev` (both may touch common bytes).
bool conflicts(const Range& cur, const Range& prev) {
  if (cur.hi <= prev.lo || prev.hi <= cur.lo) return false;
  // A barrier cannot order an access after a copy in flight (only its wait can): either it reads
  // another stage than the copy writes, or the program races (the interpreter reports that).
  if (prev.inflight) return false;
  if (cur.kind == Access::Read && prev.kind == Access::Read) return false;
  // Atomic updates of one commuting kind may land in any order; old values that are read must
  // reflect exactly the earlier statements.
  if (cur.kind == Access::Atomic && prev.kind == Access::Atomic && cur.commutes >= 0 && cur.commutes == prev.commutes)
    return false;
  return true;
}

/// Whether any of `rs` must wait for any pending access.
bool clashes(const std::vector<Range>& rs, const Pending& pending) {
  for (const Range& r : rs)
    for (const Range& p : pending)
      if (conflicts(r, p)) return true;
  return false;
}

/// What stays pending across a barrier: the copies in flight.
void barrier_passed(Pending& p) { std::erase_if(p, [](const Range& r) { return !r.inflight; }); }

/// At async_commit: the copies in flight so far form committed groups.
void copies_committed(Pending& p) {
  for (Range& r : p)
    if (r.inflight && !r.tma) r.committed = true;
  std::sort(p.begin(), p.end());
  p.erase(std::unique(p.begin(), p.end()), p.end());
}

/// At an async_wait: any copy in flight may have landed here (to a thread's own copies the wait
/// makes them visible; a barrier then makes them visible to the program), so each is a plain
/// write made here. Which ones the wait completes is not tracked: those that may still be in
/// flight (any, after wait_group(n > 0); uncommitted ones, after wait_group(0)) stay in flight
/// too, and the next wait writes them again.
void copies_landed(Pending& p, bool all_committed_done) {
  Pending out;
  for (const Range& r : p) {
    if (!r.inflight || r.tma) {
      out.push_back(r);
      continue;
    }
    Range w = r;
    w.inflight = w.committed = false;
    out.push_back(w);
    if (!(all_committed_done && r.committed)) out.push_back(r);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  p = std::move(out);
}

Pending join(const Pending& a, const Pending& b) {
  Pending r;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(r));
  return r;
}

class Inserter {
 public:
  explicit Inserter(const ir::Function& f) : uses_(ir::count_uses(f.entry())) {}
  int inserted = 0;

  /// The shared-memory ranges op touches (empty: none of the program's buffers). Loads read,
  /// stores write, atomics update; a cuda_call given a pointer that may point into a buffer counts
  /// as writing all of that buffer (it may read or write any of it).
  std::vector<Range> ranges(const Op& op) const {
    Access kind;
    int64_t commutes = -1;
    std::vector<const ir::Value*> ptrs = {};
    switch (op.kind) {
      case OpKind::Load: kind = Access::Read; break;
      case OpKind::Store: kind = Access::Write; break;
      case OpKind::AtomicRMW: case OpKind::AtomicCas: {
        auto u = uses_.find(op.result());
        kind = u != uses_.end() && u->second > 0 ? Access::AtomicRead : Access::Atomic;
        if (op.kind == OpKind::AtomicRMW) {
          const auto aop = op.enum_attr<ir::AtomicOp>("op");
          const DType d = op.operands[0]->type.pointee;
          const bool exact = is_int(d) ? aop != ir::AtomicOp::Xchg
                                       : aop == ir::AtomicOp::Max || aop == ir::AtomicOp::Min;
          if (exact) commutes = static_cast<int64_t>(aop) * 64 + static_cast<int64_t>(d);
        }
        break;
      }
      case OpKind::AsyncCopy:  // writes its destination (operand 1), in flight until waited for
        kind = Access::Write;
        ptrs.push_back(op.operands.at(1));
        break;
      case OpKind::MBarrierInit:  // writes the mbarriers' bytes (perhaps a dead buffer's)
        kind = Access::Write;
        break;
      case OpKind::TmaCopy:  // writes its view, in flight until its mbarrier phase
        kind = Access::Write;
        ptrs.push_back(op.operands.at(static_cast<size_t>(2 + 3 * op.int_attr("rank"))));
        break;
      case OpKind::CudaCall:  // (inline_asm takes no pointers)
        kind = Access::Write;
        for (const ir::Value* v : op.operands)
          if (v->type.dtype == DType::ptr) ptrs.push_back(v);
        if (ptrs.empty()) return {};  // no pointer: it names no buffer
        break;
      default: return {};
    }
    if (ptrs.empty()) ptrs.push_back(op.operands.at(0));
    std::vector<Range> r;
    for (const ir::Value* p : ptrs) {
      PointerOrigin o = pointer_origin(p);
      if (o.unknown) return {{0, INT64_MAX, kind, commutes}};
      for (const Op* a : o.allocs) {
        const int64_t lo = a->int_attr("offset");
        const bool tma = op.kind == OpKind::TmaCopy;
        r.push_back({lo, lo + ir::local_alloc_bytes(*a), kind, commutes, tma || op.kind == OpKind::AsyncCopy, tma});
      }
    }
    return r;
  }

  /// Every range the ops of b touch, at any depth.
  void all_ranges(const ir::Block& b, std::vector<Range>& out) const {
    for (const auto& op : b.ops) {
      for (const Range& r : ranges(*op)) out.push_back(r);
      for (const auto& reg : op->regions) all_ranges(reg->body(), out);
    }
  }

  void insert_barrier(ir::Block& b, std::list<std::unique_ptr<Op>>::iterator at, const SrcLoc& loc) {
    auto bar = std::make_unique<Op>();
    bar->kind = OpKind::Barrier;
    bar->parent = &b;
    bar->loc = loc;
    b.ops.insert(at, std::move(bar));
    ++inserted;
  }

  /// Walks block b from `pending`; with `insert`, puts barriers where needed. Returns what is
  /// pending at its end.
  Pending block(ir::Block& b, Pending pending, bool insert) {
    for (auto it = b.ops.begin(); it != b.ops.end(); ++it) {
      Op& op = **it;
      if (op.kind == OpKind::Barrier) {
        barrier_passed(pending);
        continue;
      }
      if (op.kind == OpKind::AsyncWait) {
        copies_landed(pending, op.int_attr("pending") == 0);
        continue;
      }
      if (op.kind == OpKind::AsyncCommit) {
        copies_committed(pending);
        continue;
      }
      if (op.kind == OpKind::For) {
        ir::Block& body = op.region().body();
        // An access in the loop that conflicts with one from before it: one barrier before the
        // loop rather than one in every iteration.
        std::vector<Range> inside;
        all_ranges(body, inside);
        if (clashes(inside, pending)) {
          barrier_passed(pending);
          if (insert) insert_barrier(b, it, op.loc);
        }
        Pending in = pending;
        for (int guard = 0; guard < 64; ++guard) {  // sets only grow: a fixpoint in a few rounds
          Pending next = block(body, in, false);
          Pending in2 = join(pending, next);
          if (in2 == in) break;
          in = std::move(in2);
        }
        pending = join(pending, block(body, in, insert));
        continue;
      }
      if (op.kind == OpKind::WarpSpecialize) {
        // The lowering puts a barrier of all the program's warps before the roles start; then
        // each role is ordered on its own (its barriers are its warps'), and the roles order
        // their accesses to each other with mbarriers.
        barrier_passed(pending);
        Pending out = pending;
        for (auto& r : op.regions) out = join(out, block(r->body(), pending, insert));
        pending = std::move(out);
        continue;
      }
      if (op.kind == OpKind::If) {
        Pending out;
        for (auto& r : op.regions) out = join(out, block(r->body(), pending, insert));
        pending = std::move(out);
        continue;
      }
      std::vector<Range> rs = ranges(op);
      if (rs.empty()) continue;
      if (clashes(rs, pending)) {
        barrier_passed(pending);
        if (insert) insert_barrier(b, it, op.loc);
      }
      std::sort(rs.begin(), rs.end());
      pending = join(pending, rs);
    }
    return pending;
  }

 private:
  std::map<const ir::Value*, int> uses_;
};

}  // namespace

int insert_shared_barriers(ir::Function& f) {
  if (!has_local_alloc(f)) return 0;
  Inserter ins(f);
  ins.block(f.entry(), {}, true);
  return ins.inserted;
}

}  // namespace tle::passes
