// tests/fuzz/variants.cpp - metamorphic variants of a program (program.hpp): each computes the same
// outputs bit for bit, through different IR, so any difference is a compiler bug.
#include <optional>
#include <random>

#include "fuzz/program.hpp"

namespace fuzz {
namespace {

namespace ir = tle::ir;

template <class F> void for_each_stmt(std::vector<Stmt>& b, F&& f) {
  for (Stmt& s : b) {
    f(s);
    for_each_stmt(s.body, f);
    for_each_stmt(s.orelse, f);
  }
}

int new_var(Program& p, DType d, Shape s, DType pointee = DType::f32) {
  p.vars.push_back(Var{d, pointee, std::move(s)});
  return static_cast<int>(p.vars.size()) - 1;
}

}  // namespace

Program swap_commutative(const Program& p) {
  Program q = p;
  for_each_stmt(q.body, [](Stmt& s) {
    using B = ir::BinaryOp;
    using C = ir::CmpPred;
    if (s.kind == Kind::Binary) {
      auto op = static_cast<B>(s.op);
      if (op == B::Add || op == B::Mul || op == B::Max || op == B::Min || op == B::And || op == B::Or || op == B::Xor)
        std::swap(s.args[0], s.args[1]);
    } else if (s.kind == Kind::Compare) {
      static const C mirror[] = {C::Eq, C::Ne, C::Gt, C::Ge, C::Lt, C::Le};  // a < b  ==  b > a
      s.op = static_cast<int>(mirror[s.op]);
      std::swap(s.args[0], s.args[1]);
    } else if (s.kind == Kind::Fma) {
      std::swap(s.args[0], s.args[1]);
    }
  });
  return q;
}

Program add_dead_branch(const Program& p, uint64_t seed) {
  Program q = p;
  std::mt19937_64 g(seed ^ 0xDEADull);
  // The condition: a new i32 parameter that is 0 at every launch, tested != 0. The compiler
  // cannot know its value (an argument equal to 0 is not specialized: kernel.cpp).
  int zero = new_var(q, DType::i32, {});
  q.params.push_back(Param{zero, -1, Literal::integer(0)});
  // Where: a random top-level position, or (half the time, when there is one) a random position in
  // the body of a top-level loop, whose carried values the branch then takes part in. What: the
  // top-level variables defined before that point are assigned garbage of their type (some of
  // them), and garbage is stored through each pointer tile defined there.
  std::vector<size_t> loops;
  for (size_t i = 0; i < q.body.size(); ++i)
    if (q.body[i].kind == Kind::For) loops.push_back(i);
  const bool in_loop = !loops.empty() && g() % 2;
  size_t pos = in_loop ? loops[g() % loops.size()]
                       : q.body.empty() ? 0 : static_cast<size_t>(g() % (q.body.size() + 1));
  std::vector<Stmt> then;
  auto stmt_const = [&](DType d, const Shape& s, double f, int64_t i) {
    Stmt c;
    c.kind = Kind::Const;
    c.shape = s;
    c.lit = tle::is_float(d) ? Literal::real(f) : Literal::integer(d == DType::i1 ? 1 : i);
    c.result = new_var(q, d, s);
    then.push_back(c);
    return c.result;
  };
  for (size_t i = 0; i < pos; ++i) {
    const Stmt& s = q.body[i];
    if (s.result < 0 || s.kind == Kind::Assign || s.kind == Kind::For) continue;
    const Var v = q.vars[static_cast<size_t>(s.result)];
    if (v.dtype == DType::ptr) {
      // A store of garbage through an existing pointer tile (never executed).
      Stmt st;
      st.kind = Kind::Store;
      st.args = {s.result, stmt_const(v.pointee, v.shape, -7.25, 77), -1};
      then.push_back(st);
      continue;
    }
    if (g() % 2) continue;
    Stmt a;
    a.kind = Kind::Assign;
    a.result = s.result;
    a.args = {stmt_const(v.dtype, v.shape, 1e30, -12345 & 0x7F)};
    then.push_back(a);
  }
  Stmt zc;
  zc.kind = Kind::Const;
  zc.lit = Literal::integer(0);
  zc.result = new_var(q, DType::i32, {});
  Stmt cond;
  cond.kind = Kind::Compare;
  cond.op = static_cast<int>(ir::CmpPred::Ne);
  cond.args = {zero, zc.result};
  cond.result = new_var(q, DType::i1, {});
  Stmt br;
  br.kind = Kind::If;
  br.args = {cond.result};
  br.body = std::move(then);
  std::vector<Stmt>& block = in_loop ? q.body[pos].body : q.body;
  size_t at = in_loop ? static_cast<size_t>(g() % (block.size() + 1)) : pos;
  block.insert(block.begin() + static_cast<std::ptrdiff_t>(at), {zc, cond, br});
  return q;
}

Program opaque_constants(const Program& p) {
  Program q = p;
  std::vector<Param> extra;
  for_each_stmt(q.body, [&](Stmt& s) {
    if (s.kind != Kind::Const) return;
    // full<T>(shape, c)  ->  full<T>(shape, a_k)  with a parameter a_k whose launch value is c
    DType d = q.vars[static_cast<size_t>(s.result)].dtype;
    int pv = static_cast<int>(q.vars.size());
    q.vars.push_back(Var{d, DType::f32, {}});
    extra.push_back(Param{pv, -1, s.lit});
    if (s.shape.empty()) {
      s.kind = Kind::Cast;  // a copy: .to<T>() of a T is the value itself
      s.to = d;
      s.args = {pv};
    } else {
      s.kind = Kind::BroadcastTo;
      s.args = {pv};
    }
  });
  q.params.insert(q.params.end(), extra.begin(), extra.end());
  return q;
}

std::optional<Program> in_roles(const Program& p, uint64_t seed) {
  Program q = p;
  std::vector<Stmt> top, moved;
  for (Stmt& s : q.body) (s.kind == Kind::LocalAlloc ? top : moved).push_back(std::move(s));
  bool assigns_outer = false;  // a role may not assign a variable declared outside it
  for_each_stmt(moved, [&](Stmt& s) {
    if (s.kind == Kind::Assign)
      for (const Stmt& t : top) assigns_outer |= t.result == s.result;
  });
  if (assigns_outer) return std::nullopt;
  Stmt roles;
  roles.kind = Kind::Roles;
  static const int64_t kWarps[] = {1, 4, 8};
  roles.a = kWarps[seed % 3];
  roles.b = (seed / 3) % 2 ? 4 : 1;
  roles.body = std::move(moved);
  top.push_back(std::move(roles));
  q.body = std::move(top);
  return q;
}

}  // namespace fuzz
