// src/passes/gpu/reorder_loads.cpp - load reordering (gpu_passes.hpp, reorder_loads): global loads
// issued as early as their operands allow, so that several are in flight before the first use.
//
// A program's statements run in order on all its threads, and the GPU lowering turns some of them
// into code that neither LLVM nor ptxas moves a load across: a reduction, scan, sort, histogram or
// convert_layout through shared memory ends in bar.sync, a gather or a shape change may too. A load
// written after such a statement (layernorm's w and b after the row's two reductions, a
// cross-entropy's target logit after the row's max and sum) waits for it before it is even issued,
// and its latency - hundreds of cycles from DRAM - adds to the program's. FlagTree's TLE does the
// same reordering at the tile level (../shared/brief/flagtree-tle-notes.md, section 6.3).
//
// Within each block, a global load (not volatile, not pipelined: those are already copied ahead;
// not from a shared buffer or a pointer of unknown origin) that comes after such work moves up to
// right after the last op it may not cross, taking along the cheap ops that compute its operands
// (address arithmetic: constants, arange, program_id, broadcast, expand_dims, reshape, elementwise
// ops, addptr, hint). It may cross only ops without side effects and other non-volatile loads:
// pure ops (reductions and conversions included, when their combine regions are pure too) and
// loads touch no memory another op reads, so the program computes exactly what it computed
// before. Stores, atomics, barriers, mbarrier, async-copy and TMA ops, volatile loads, impure
// inline asm, CUDA calls and warp_specialize stay where they are, and so does every load after
// them; so do `for` and `if` ops (a loop may run long: the latency a load saves is small beside
// it, and its registers would be held through the loop). A load that would cross only address
// arithmetic and other loads stays where it is (ptxas schedules that itself; moving it would only
// lengthen live ranges). A load never leaves its block; loads keep their order among themselves
// wherever several are ready together. A load whose operand is computed by an op that may not
// move (another load, a reduction, a conversion, a loop) goes right after it.
#include <algorithm>
#include <iterator>
#include <list>
#include <memory>
#include <set>
#include <unordered_map>
#include <vector>

#include "passes/gpu/gpu_passes.hpp"
#include "passes/pointer_origin.hpp"

namespace tle::passes {
namespace {

using ir::Block;
using ir::Op;
using ir::OpKind;

/// A load this pass moves: from global memory (not a shared buffer), neither volatile nor pipelined.
bool movable_load(const Op& op) {
  if (op.kind != OpKind::Load || op.is_volatile() || op.has_attr("pipelined")) return false;
  return !pointer_origin(op.operands.at(0)).shared();
}

/// An op a load may move above: a non-volatile load, or an op without side effects other than
/// `for` / `if` (see the file comment).
bool crossable(const Op& op) {
  if (op.kind == OpKind::Load) return !op.is_volatile();
  if (op.kind == OpKind::For || op.kind == OpKind::If) return false;
  return op.is_pure();
}

/// Address arithmetic that moves along with a load: pure, no regions, computed in registers by
/// each thread on its own elements (no shared memory, no shuffles).
bool cheap(const Op& op) {
  switch (op.kind) {
    case OpKind::Constant:
    case OpKind::Arange:
    case OpKind::ProgramId:
    case OpKind::NumPrograms:
    case OpKind::Broadcast:
    case OpKind::ExpandDims:
    case OpKind::Binary:
    case OpKind::Compare:
    case OpKind::Unary:
    case OpKind::Fma:
    case OpKind::Select:
    case OpKind::Cast:
    case OpKind::Bitcast:
    case OpKind::AddPtr:
    case OpKind::Hint:
      return true;
    case OpKind::Reshape:
      return !op.has_attr("real_in");  // pad_shapes' reshapes move elements through shared memory
    default:
      return false;
  }
}

/// Reschedules one block (after its nested blocks): the ops in their order, except that a movable
/// load that would go above work (an op that is neither cheap nor a movable load) is emitted, with
/// the cheap ops computing its operands that are not emitted yet, as soon as every op it may not
/// cross that precedes it and every other op computing its operands are emitted - preceded by the
/// earlier movable loads ready at that point, so loads keep their order. Returns the loads moved
/// above work, nested blocks' included.
int reorder_block(Block& b) {
  int moved = 0;
  for (auto& op : b.ops)
    for (auto& r : op->regions) moved += reorder_block(r->body());
  const int nested = moved;

  std::vector<Op*> order;
  std::unordered_map<const Op*, size_t> index;
  for (auto& op : b.ops) {
    index[op.get()] = order.size();
    order.push_back(op.get());
  }
  const size_t n = order.size();
  struct Pending {
    size_t at;                  // the load's index
    long fence;                 // the last op before it it may not cross, or -1
    std::vector<size_t> along;  // cheap ops computing its operands, ascending
    std::vector<size_t> after;  // other ops of this block computing them
  };
  std::vector<Pending> loads;
  long fence = -1;
  for (size_t i = 0; i < n; ++i) {
    if (movable_load(*order[i])) {
      Pending l{i, fence, {}, {}};
      std::set<size_t> along, after;
      std::vector<const ir::Value*> todo(order[i]->operands.begin(), order[i]->operands.end());
      while (!todo.empty()) {
        const ir::Value* v = todo.back();
        todo.pop_back();
        auto it = v->def ? index.find(v->def) : index.end();
        if (it == index.end() || along.count(it->second) || after.count(it->second)) continue;
        if (!cheap(*v->def)) {
          after.insert(it->second);
          continue;
        }
        along.insert(it->second);
        todo.insert(todo.end(), v->def->operands.begin(), v->def->operands.end());
      }
      l.along.assign(along.begin(), along.end());
      l.after.assign(after.begin(), after.end());
      loads.push_back(std::move(l));
    }
    if (!crossable(*order[i])) fence = static_cast<long>(i);
  }
  if (loads.empty()) return moved;

  std::vector<bool> done(n, false);
  std::vector<Op*> next;
  size_t first = 0;  // the first op not emitted
  auto emit = [&](size_t i) {
    done[i] = true;
    next.push_back(order[i]);
  };
  auto ready = [&](const Pending& l) {
    if (done[l.at] || (l.fence >= 0 && !done[static_cast<size_t>(l.fence)])) return false;
    for (size_t d : l.after)
      if (!done[d]) return false;
    return true;
  };
  // work: what a load is worth moving above (not address arithmetic, not another movable load)
  std::vector<bool> work(n);
  for (size_t i = 0; i < n; ++i) work[i] = !cheap(*order[i]);
  for (const Pending& l : loads) work[l.at] = false;
  auto emit_load = [&](const Pending& l) {
    for (size_t a : l.along)
      if (!done[a]) emit(a);
    emit(l.at);
  };
  // settled: ready with no work left before it, so it stays in place (what is emitted only grows:
  // it never has work before it again); each load is scanned once it is ready, then moved or settled
  std::vector<bool> settled(loads.size(), false);
  while (next.size() < n) {
    for (bool again = true; again;) {
      again = false;
      for (size_t k = 0; k < loads.size(); ++k) {
        const Pending& l = loads[k];
        if (settled[k] || !ready(l)) continue;
        bool crosses_work = false;  // some work not emitted yet comes before it in the old order
        for (size_t j = first; j < l.at && !crosses_work; ++j) crosses_work = !done[j] && work[j];
        if (!crosses_work) {
          settled[k] = true;
          continue;
        }
        for (size_t e = 0; e < k; ++e)  // the earlier loads ready now go first: loads keep their order
          if (ready(loads[e])) emit_load(loads[e]);
        emit_load(l);
        ++moved;
        again = true;
        break;
      }
    }
    while (first < n && done[first]) ++first;
    if (first < n) emit(first);
  }
  if (moved == nested) return moved;
  // the block's list in the new order (the ops stay owned by the block)
  std::unordered_map<const Op*, std::list<std::unique_ptr<Op>>::iterator> where;
  for (auto it = b.ops.begin(); it != b.ops.end(); ++it) where[it->get()] = it;
  std::list<std::unique_ptr<Op>> rebuilt;
  for (Op* op : next) rebuilt.splice(rebuilt.end(), b.ops, where.at(op));
  b.ops = std::move(rebuilt);
  return moved;
}

}  // namespace

int reorder_loads(ir::Function& f) { return reorder_block(f.entry()); }

}  // namespace tle::passes
