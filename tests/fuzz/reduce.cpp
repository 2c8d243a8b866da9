// tests/fuzz/reduce.cpp - reduce(): greedy shrinking of a failing program (delta debugging over
// statements, as C-Reduce does over lines). Every candidate stays well typed: a deleted
// definition becomes a constant of the same dtype and shape (then dead-code removal deletes
// what nothing uses), a loop becomes its body once (the induction variable a copy of the lower
// bound), a branch becomes one of its sides. Memory safety of a candidate is not re-proved: the
// interpreter's access check rejects one that leaves its buffers (the failure then differs and
// the candidate is dropped).
#include <functional>
#include <set>

#include "fuzz/harness.hpp"

namespace fuzz {
namespace {

/// Every statement list of the program (blocks), outermost first.
void blocks_of(std::vector<Stmt>& b, std::vector<std::vector<Stmt>*>& out) {
  out.push_back(&b);
  for (Stmt& s : b) {
    blocks_of(s.body, out);
    blocks_of(s.orelse, out);
  }
}

void uses(const std::vector<Stmt>& b, std::set<int>& used) {
  for (const Stmt& s : b) {
    for (int a : s.args)
      if (a >= 0) used.insert(a);
    uses(s.body, used);
    uses(s.orelse, used);
  }
}

bool pure(Kind k) {
  return k != Kind::Store && k != Kind::Atomic && k != Kind::AtomicCas && k != Kind::For && k != Kind::If &&
         k != Kind::Assign && k != Kind::Copy && k != Kind::CopyCommit && k != Kind::CopyWait;
}

/// Deletes definitions nobody uses and assignments to variables nobody reads, to a fixpoint.
void remove_dead(Program& p) {
  for (bool changed = true; changed;) {
    changed = false;
    std::set<int> used;
    uses(p.body, used);
    std::vector<std::vector<Stmt>*> bl;
    blocks_of(p.body, bl);
    for (auto* b : bl)
      for (size_t i = 0; i < b->size();) {
        const Stmt& s = (*b)[i];
        bool dead = (pure(s.kind) && s.result >= 0 && !used.count(s.result)) ||
                    (s.kind == Kind::Assign && !used.count(s.result)) ||
                    ((s.kind == Kind::For || s.kind == Kind::If) && s.body.empty() && s.orelse.empty());
        if (dead) {
          b->erase(b->begin() + static_cast<std::ptrdiff_t>(i));
          changed = true;
          // Blocks nested in the erased statement are gone: restart the walk.
          bl.clear();
          blocks_of(p.body, bl);
          break;
        }
        ++i;
      }
  }
  // Buffers and parameters nothing refers to.
  std::set<int> used;
  uses(p.body, used);
  std::vector<Param> params;
  std::vector<Buffer> buffers;
  for (Param pa : p.params)
    if (used.count(pa.var)) {
      if (pa.buffer >= 0) {
        buffers.push_back(p.buffers[static_cast<size_t>(pa.buffer)]);
        pa.buffer = static_cast<int>(buffers.size()) - 1;
      }
      params.push_back(pa);
    }
  p.params = params;
  p.buffers = buffers;
}

Stmt zero_of(const Program& p, int var) {
  const Var& v = p.vars.at(static_cast<size_t>(var));
  Stmt c;
  c.kind = Kind::Const;
  c.result = var;
  c.shape = v.shape;
  c.lit = tle::is_float(v.dtype) ? Literal::real(0.0) : Literal::integer(0);
  return c;
}

}  // namespace

Program reduce(const Program& start, const std::function<bool(const Program&)>& fails) {
  Program best = start;
  auto attempt = [&](Program cand) {
    remove_dead(cand);
    if (count_statements(cand.body) >= count_statements(best.body) && cand.grid[0] * cand.grid[1] * cand.grid[2] >= best.programs())
      return false;
    if (!fails(cand)) return false;
    best = std::move(cand);
    return true;
  };
  attempt(best);  // dead code first
  for (bool progress = true; progress;) {
    progress = false;
    // A smaller grid.
    for (int ax = 0; ax < 3; ++ax)
      if (best.grid[ax] > 1) {
        Program c = best;
        c.grid[ax] = 1;
        progress |= attempt(c);
      }
    // Statements, innermost blocks last; each index in each block.
    std::vector<std::vector<Stmt>*> bl;
    blocks_of(best.body, bl);
    for (size_t bi = 0; bi < bl.size(); ++bi) {
      for (size_t i = 0;; ++i) {
        // Re-find the block in the current best (indices are stable within one pass).
        std::vector<std::vector<Stmt>*> cur;
        blocks_of(best.body, cur);
        if (bi >= cur.size() || i >= cur[bi]->size()) break;
        const Stmt s = (*cur[bi])[i];
        std::vector<std::vector<Stmt>> replacements;
        if (s.kind == Kind::For) {
          // The body once, with the induction variable a copy of the lower bound.
          Stmt iv;
          if (s.args[0] >= 0) {
            iv.kind = Kind::Cast;
            iv.args = {s.args[0]};
            iv.to = best.vars.at(static_cast<size_t>(s.result)).dtype;
          } else {
            iv.kind = Kind::Const;
            iv.lit = Literal::integer(s.lo);
          }
          iv.result = s.result;
          std::vector<Stmt> once = {iv};
          once.insert(once.end(), s.body.begin(), s.body.end());
          replacements.push_back(once);
          replacements.push_back({});
        } else if (s.kind == Kind::If) {
          replacements.push_back(s.body);
          replacements.push_back(s.orelse);
        } else if (pure(s.kind) && s.kind != Kind::Const && best.vars.at(static_cast<size_t>(s.result)).dtype != DType::ptr) {
          if (s.kind == Kind::InsertTile) {  // the tile without the insert (a copy: .to<T>() of a T)
            Stmt copy;
            copy.kind = Kind::Cast;
            copy.args = {s.args[0]};
            copy.to = best.vars.at(static_cast<size_t>(s.result)).dtype;
            copy.result = s.result;
            replacements.push_back({copy});
          }
          replacements.push_back({zero_of(best, s.result)});
        } else if (!pure(s.kind)) {
          if (s.result >= 0) replacements.push_back({zero_of(best, s.result)});
          else replacements.push_back({});
        }
        for (auto& r : replacements) {
          Program c = best;
          std::vector<std::vector<Stmt>*> cb;
          blocks_of(c.body, cb);
          auto& blk = *cb[bi];
          blk.erase(blk.begin() + static_cast<std::ptrdiff_t>(i));
          blk.insert(blk.begin() + static_cast<std::ptrdiff_t>(i), r.begin(), r.end());
          if (attempt(std::move(c))) {
            progress = true;
            break;
          }
        }
      }
    }
  }
  return best;
}

}  // namespace fuzz
