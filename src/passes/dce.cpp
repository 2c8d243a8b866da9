// src/passes/dce.cpp - dead-code elimination.
//
// Entry point: bool dce(ir::Function&). Repeats until nothing changes:
//  1. carried values of `for`:
//     - invariant: the body yields its own block argument unchanged, or yields the init value
//       itself -> uses of the block argument and of the result become uses of the init value;
//     - dead: the result is unused and the block argument only feeds computations that end in its
//       own yield slot (a liveness fixpoint over the body: impure ops and used results are live,
//       and a live slot makes its yield operand live) -> the slot and those computations go;
//     the slot is removed from the inits, the body arguments, the yield and the results, and the
//     remaining ones are renumbered (Value::index);
//  2. results of `if`: both branches yield the same value defined outside the if -> that value;
//     unused results -> removed from both yields and the results;
//  3. pure ops whose results are all unused are erased (reverse order, nested regions included),
//     and so is a `for`/`if` without results whose regions hold only their yield.
#include <algorithm>
#include <unordered_set>

#include "passes/pass.hpp"

namespace tle::passes {
namespace {

using namespace ir;
using Uses = std::map<const Value*, int>;

void renumber(std::vector<std::unique_ptr<Value>>& vs) {
  for (size_t i = 0; i < vs.size(); ++i) vs[i]->index = static_cast<unsigned>(i);
}

// Calls f(v) for every operand of op and of the ops nested in its regions.
template <class F> void for_each_use(const Op& op, F&& f) {
  for (auto* v : op.operands) f(v);
  for (auto& r : op.regions) walk(static_cast<const Block&>(r->body()), [&](const Op& o) {
      for (auto* v : o.operands) f(v);
    });
}

bool only_yield(const Op& op) {
  for (auto& r : op.regions)
    if (r->body().ops.size() != 1) return false;
  return true;
}

// ---- 3. unused pure ops
class DeadOps {
 public:
  explicit DeadOps(Function& f) : uses_(count_uses(f.entry())) {}

  bool sweep(Block& b) {
    bool changed = false;
    auto it = b.ops.end();
    while (it != b.ops.begin()) {
      --it;
      Op& op = **it;
      for (auto& r : op.regions) changed |= sweep(r->body());
      if (dead(op)) {
        for_each_use(op, [&](const Value* v) { --uses_[v]; });
        it = b.ops.erase(it);
        changed = true;
      }
    }
    return changed;
  }

 private:
  bool dead(const Op& op) {
    if ((op.kind == OpKind::For || op.kind == OpKind::If) && op.results.empty() && only_yield(op)) return true;
    if (!op.is_pure()) return false;
    for (auto& r : op.results)
      if (uses_[r.get()] > 0) return false;
    return true;
  }
  Uses uses_;
};

// Removes carried slot i of a for op (operand 3+i, result i, body argument 1+i, yield operand i).
void erase_for_slots(Op& op, const std::vector<bool>& remove) {
  Block& body = op.region().body();
  Op* y = body.terminator();
  for (size_t i = remove.size(); i-- > 0;) {
    if (!remove[i]) continue;
    op.operands.erase(op.operands.begin() + 3 + static_cast<long>(i));
    op.results.erase(op.results.begin() + static_cast<long>(i));
    body.args.erase(body.args.begin() + 1 + static_cast<long>(i));
    y->operands.erase(y->operands.begin() + static_cast<long>(i));
  }
  renumber(op.results);
  renumber(body.args);
}

// ---- 1. for
bool simplify_for(Function& f, Op& op) {
  Block& body = op.region().body();
  Op* y = body.terminator();
  const size_t n = op.results.size();
  bool changed = false;

  // Invariant slots.
  std::vector<bool> remove(n, false);
  for (size_t i = 0; i < n; ++i) {
    Value *a = body.arg(1 + i), *init = op.operands[3 + i], *yv = y->operands[i];
    if (yv == a || yv == init) {
      replace_all_uses(body, a, init);
      replace_all_uses(f.entry(), op.result(i), init);
      remove[i] = true;
      changed = true;
    }
  }
  if (changed) erase_for_slots(op, remove);

  // Dead slots: liveness over the body.
  const size_t m = op.results.size();
  if (m == 0) return changed;
  Uses uses = count_uses(f.entry());
  std::vector<bool> live(m);
  for (size_t i = 0; i < m; ++i) live[i] = uses[op.result(i)] > 0;
  std::unordered_set<const Value*> L;
  std::unordered_set<const Op*> marked;
  for (bool again = true; again;) {
    again = false;
    for (size_t i = 0; i < m; ++i)
      if (live[i]) L.insert(y->operands[i]);
    for (auto it = body.ops.rbegin(); it != body.ops.rend(); ++it) {
      const Op& o = **it;
      if (&o == y || marked.count(&o)) continue;
      bool is_live = !o.is_pure();
      for (auto& r : o.results) is_live |= L.count(r.get()) != 0;
      if (is_live) {
        marked.insert(&o);
        for_each_use(o, [&](const Value* v) { L.insert(v); });
      }
    }
    for (size_t i = 0; i < m; ++i)
      if (!live[i] && L.count(body.arg(1 + i))) live[i] = again = true;
  }
  if (std::all_of(live.begin(), live.end(), [](bool b) { return b; })) return changed;
  // Drop the dead yield operands' computations: unmarked ops only feed dead slots or each other.
  auto it = body.ops.end();
  --it;  // the yield
  while (it != body.ops.begin()) {
    --it;
    if (!marked.count(it->get())) it = body.ops.erase(it);
  }
  std::vector<bool> dead(m);
  for (size_t i = 0; i < m; ++i) dead[i] = !live[i];
  erase_for_slots(op, dead);
  return true;
}

// ---- 2. if
bool simplify_if(Function& f, Op& op) {
  Op* y0 = op.region(0).body().terminator();
  Op* y1 = op.region(1).body().terminator();
  Uses uses = count_uses(f.entry());
  std::vector<bool> remove(op.results.size(), false);
  bool any = false;
  for (size_t k = 0; k < op.results.size(); ++k) {
    Value* a = y0->operands[k];
    if (a == y1->operands[k] && !defined_inside(a, op)) {
      replace_all_uses(f.entry(), op.result(k), a);
      remove[k] = any = true;
    } else if (uses[op.result(k)] == 0) {
      remove[k] = any = true;
    }
  }
  if (!any) return false;
  for (size_t k = remove.size(); k-- > 0;) {
    if (!remove[k]) continue;
    op.results.erase(op.results.begin() + static_cast<long>(k));
    y0->operands.erase(y0->operands.begin() + static_cast<long>(k));
    y1->operands.erase(y1->operands.begin() + static_cast<long>(k));
  }
  renumber(op.results);
  return true;
}

bool simplify_control_flow(Function& f) {
  std::vector<Op*> ops;
  walk(f.entry(), [&](Op& op) {
    if ((op.kind == OpKind::For || op.kind == OpKind::If) && !op.results.empty()) ops.push_back(&op);
  });
  bool changed = false;
  for (Op* op : ops) changed |= op->kind == OpKind::For ? simplify_for(f, *op) : simplify_if(f, *op);
  return changed;
}

}  // namespace

bool dce(Function& f) {
  bool any = false;
  for (;;) {
    bool changed = simplify_control_flow(f);
    changed |= DeadOps(f).sweep(f.entry());
    if (!changed) return any;
    any = true;
  }
}

}  // namespace tle::passes
