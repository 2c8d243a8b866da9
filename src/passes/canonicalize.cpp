// src/passes/canonicalize.cpp - local rewrites run to a fixpoint.
//
// Entry point: bool canonicalize(ir::Function&).
// Rules (each exact: the rewritten program computes bit-identical results, docs/ir.md):
//  - constant folding of binary, unary, cmp, fma, cast, bitcast with constant operands (fold.hpp);
//  - broadcast / expand_dims / reshape / permute / hint of a constant -> constant of the result type
//    (a constant is a splat); arange of one element -> constant; reduce max/min of a constant ->
//    the constant, argmax/argmin of a constant -> 0;
//  - select with a constant condition -> the chosen operand; select(c, a, a) -> a;
//    select(c, true, false) on i1 -> c;
//  - identities: x+0, 0+x, x-0, x|0, x^0, x<<0, x>>0, x&~0 (integers); x*1, 1*x, x/1 (all types);
//    x*0, 0*x, x&0, x-x, x^x, x%1 -> 0 (integers); x&x, x|x, min(x,x), max(x,x) -> x;
//    cmp x,x on integers/pointers -> constant; neg(neg x), not(not x) -> x;
//  - cast/bitcast to the operand's own type, broadcast/reshape to the same shape, identity
//    permute -> the operand; reshape(reshape x) and broadcast(broadcast x) -> one op on x;
//  - extract_tile / insert_tile with a constant index operand -> the static form (attribute index,
//    the id wrapped as at run time);
//  - if with a constant condition -> the taken branch inlined; for with constant bounds and no
//    trips -> its init values.
// Floats get no additive identities: x+0 is not x for x = -0.0.
#include <algorithm>
#include <numeric>

#include "ir/subtile.hpp"
#include "passes/fold.hpp"
#include "passes/pass.hpp"

namespace tle::passes {
namespace {

using namespace ir;

bool is_int_const(const Value* v, int64_t want) {
  auto c = constant_int(v);
  return c && *c == want;
}
bool is_one(const Value* v) {
  if (is_int(v->type.dtype)) return is_int_const(v, 1);
  auto c = constant_float(v);
  return c && *c == 1.0;
}
// All bits set, in canonical form for v's dtype.
bool is_all_ones(const Value* v) {
  DType d = v->type.dtype;
  if (!is_int(d)) return false;
  auto c = constant_int(v);
  if (!c) return false;
  auto want = normalize_constant(d, Attr(int64_t(-1)));
  return want && std::get<int64_t>(*want) == *c;
}

void make_constant(Op& op, Attr value) {
  op.kind = OpKind::Constant;
  op.operands.clear();
  op.regions.clear();
  op.attrs.clear();
  op.attrs["value"] = std::move(value);
}

// The outcome of one rewrite attempt on an op.
struct Rewrite {
  enum Kind { None, Changed, Replace } kind = None;
  std::vector<Value*> values;  // Replace: the values replacing the op's results (then it is erased)
  static Rewrite none() { return {}; }
  static Rewrite changed() { return {Changed, {}}; }
  static Rewrite replace(std::vector<Value*> v) { return {Replace, std::move(v)}; }
};

Rewrite to_constant(Op& op, std::optional<Attr> v) {
  if (!v) return Rewrite::none();
  make_constant(op, std::move(*v));
  return Rewrite::changed();
}

Rewrite binary(Op& op) {
  auto b = op.enum_attr<BinaryOp>("op");
  Value *x = op.operands[0], *y = op.operands[1];
  DType d = op.result()->type.dtype;
  auto cx = constant_value(x), cy = constant_value(y);
  if (cx && cy) return to_constant(op, fold_binary(b, d, *cx, *cy));
  const bool integer = is_int(d);
  auto zero = [&]() -> Rewrite {
    make_constant(op, Attr(int64_t(0)));
    return Rewrite::changed();
  };
  switch (b) {
    case BinaryOp::Add:
      if (integer && is_int_const(y, 0)) return Rewrite::replace({x});
      if (integer && is_int_const(x, 0)) return Rewrite::replace({y});
      break;
    case BinaryOp::Sub:
      if (integer && is_int_const(y, 0)) return Rewrite::replace({x});
      if (integer && x == y) return zero();
      break;
    case BinaryOp::Mul:
      if (is_one(y)) return Rewrite::replace({x});
      if (is_one(x)) return Rewrite::replace({y});
      if (integer && (is_int_const(x, 0) || is_int_const(y, 0))) return zero();
      break;
    case BinaryOp::Div:
      if (is_one(y)) return Rewrite::replace({x});
      break;
    case BinaryOp::Rem:
      if (integer && is_int_const(y, 1)) return zero();
      break;
    case BinaryOp::And:
      if (x == y) return Rewrite::replace({x});
      if (is_int_const(x, 0) || is_int_const(y, 0)) return zero();
      if (is_all_ones(y)) return Rewrite::replace({x});
      if (is_all_ones(x)) return Rewrite::replace({y});
      break;
    case BinaryOp::Or:
      if (x == y) return Rewrite::replace({x});
      if (is_int_const(y, 0)) return Rewrite::replace({x});
      if (is_int_const(x, 0)) return Rewrite::replace({y});
      break;
    case BinaryOp::Xor:
      if (x == y) return zero();
      if (is_int_const(y, 0)) return Rewrite::replace({x});
      if (is_int_const(x, 0)) return Rewrite::replace({y});
      break;
    case BinaryOp::Shl:
    case BinaryOp::Shr:
      if (is_int_const(y, 0)) return Rewrite::replace({x});
      break;
    case BinaryOp::Min:
    case BinaryOp::Max:
      if (x == y) return Rewrite::replace({x});
      break;
    default: break;
  }
  return Rewrite::none();
}

Rewrite compare(Op& op) {
  auto p = op.enum_attr<CmpPred>("pred");
  Value *x = op.operands[0], *y = op.operands[1];
  auto cx = constant_value(x), cy = constant_value(y);
  if (cx && cy) return to_constant(op, fold_compare(p, x->type.dtype, *cx, *cy));
  if (x == y && !is_float(x->type.dtype)) {  // floats: NaN != NaN
    bool r = p == CmpPred::Eq || p == CmpPred::Le || p == CmpPred::Ge;
    make_constant(op, Attr(int64_t(r)));
    return Rewrite::changed();
  }
  return Rewrite::none();
}

Rewrite unary(Op& op) {
  auto u = op.enum_attr<UnaryOp>("op");
  Value* x = op.operands[0];
  if (auto c = constant_value(x)) return to_constant(op, fold_unary(u, x->type.dtype, *c));
  if ((u == UnaryOp::Neg || u == UnaryOp::Not) && x->def && x->def->kind == OpKind::Unary &&
      x->def->enum_attr<UnaryOp>("op") == u)
    return Rewrite::replace({x->def->operands[0]});
  return Rewrite::none();
}

Rewrite select(Op& op) {
  Value *c = op.operands[0], *a = op.operands[1], *b = op.operands[2];
  if (auto cc = constant_int(c)) return Rewrite::replace({*cc ? a : b});
  if (a == b) return Rewrite::replace({a});
  if (op.result()->type.dtype == DType::i1 && op.result()->type == c->type && is_int_const(a, 1) &&
      is_int_const(b, 0))
    return Rewrite::replace({c});
  return Rewrite::none();
}

// Shape ops and hints: a constant operand gives a constant of the result type.
Rewrite of_constant(Op& op) {
  if (auto c = constant_value(op.operands[0])) return to_constant(op, c);
  return Rewrite::none();
}

Rewrite shape_op(Op& op) {
  Rewrite r = of_constant(op);
  if (r.kind != Rewrite::None) return r;
  Value* x = op.operands[0];
  const Type& t = op.result()->type;
  switch (op.kind) {
    case OpKind::Broadcast:
    case OpKind::Reshape:
      if (x->type == t) return Rewrite::replace({x});
      if (x->def && x->def->kind == op.kind) {  // reshape(reshape x), broadcast(broadcast x)
        op.operands[0] = x->def->operands[0];
        return Rewrite::changed();
      }
      break;
    case OpKind::Permute: {
      const auto& order = op.ints_attr("order");
      std::vector<int64_t> id(order.size());
      std::iota(id.begin(), id.end(), 0);
      if (order == id && x->type == t) return Rewrite::replace({x});
      break;
    }
    default: break;
  }
  return Rewrite::none();
}

/// extract_tile / insert_tile whose index operand is a constant: the static form (the id wrapped as
/// a dynamic one is, ir/subtile.hpp), which the GPU lowers without data movement where it can.
Rewrite subtile(Op& op) {
  const size_t nfixed = op.kind == OpKind::InsertTile ? 2 : 1;
  if (op.operands.size() <= nfixed) return Rewrite::none();
  auto c = constant_value(op.operands[nfixed]);
  const int64_t* v = c ? std::get_if<int64_t>(&*c) : nullptr;
  const ir::SubTileGrid g = ir::subtile_grid(op);
  if (!v || !g.valid) return Rewrite::none();
  const std::vector<int64_t> off = ir::subtile_offsets(g, static_cast<uint32_t>(*v));
  int64_t linear = 0;
  for (size_t d = 0; d < off.size(); ++d) linear += off[d] / g.sub[d] * g.stride[d];
  op.operands.pop_back();
  op.attrs["index"] = linear;
  return Rewrite::changed();
}

Rewrite reduce(Op& op) {
  auto c = constant_value(op.operands[0]);
  if (!c) return Rewrite::none();
  switch (op.enum_attr<ReduceKind>("kind")) {
    case ReduceKind::Max:
    case ReduceKind::Min: return to_constant(op, c);
    case ReduceKind::Argmax:
    case ReduceKind::Argmin: return to_constant(op, Attr(int64_t(0)));
    default: return Rewrite::none();
  }
}

// Moves the ops of `body` (except its yield) before `pos` in `parent`; returns the yielded values.
std::vector<Value*> inline_body(Block& body, Block& parent, std::list<std::unique_ptr<Op>>::iterator pos) {
  Op* y = body.terminator();
  std::vector<Value*> vals = y->operands;
  body.ops.pop_back();
  for (auto& o : body.ops) o->parent = &parent;
  parent.ops.splice(pos, body.ops);
  return vals;
}

bool zero_trips(const Op& op) {
  auto lo = constant_int(op.operands[0]), hi = constant_int(op.operands[1]), step = constant_int(op.operands[2]);
  if (!lo || !hi || !step) return false;
  bool sgn = is_signed_int(op.operands[0]->type.dtype);
  auto lt = [&](int64_t a, int64_t b) { return sgn ? a < b : static_cast<uint64_t>(a) < static_cast<uint64_t>(b); };
  if (*step == 0) return true;
  // An unsigned step is never negative.
  bool positive = !sgn || *step > 0;
  return positive ? !lt(*lo, *hi) : !lt(*hi, *lo);
}

class Canonicalizer {
 public:
  explicit Canonicalizer(Function& f) : f_(f) {}

  bool sweep(Block& b) {
    bool changed = false;
    for (auto it = b.ops.begin(); it != b.ops.end();) {
      Op& op = **it;
      if (op.kind == OpKind::If) {
        if (auto c = constant_int(op.operands[0])) {
          auto vals = inline_body(op.region(*c ? 0 : 1).body(), b, it);
          replace_results(op, vals);
          it = b.ops.erase(it);
          changed = true;
          continue;
        }
      } else if (op.kind == OpKind::For && zero_trips(op)) {
        std::vector<Value*> inits(op.operands.begin() + 3, op.operands.end());
        replace_results(op, inits);
        it = b.ops.erase(it);
        changed = true;
        continue;
      }
      Rewrite r = rewrite(op);
      if (r.kind == Rewrite::Replace) {
        replace_results(op, r.values);
        it = b.ops.erase(it);
        changed = true;
        continue;
      }
      if (r.kind == Rewrite::Changed) changed = true;
      for (auto& reg : op.regions) changed |= sweep(reg->body());
      ++it;
    }
    return changed;
  }

 private:
  void replace_results(Op& op, const std::vector<Value*>& vals) {
    for (size_t i = 0; i < op.results.size(); ++i) replace_all_uses(f_.entry(), op.result(i), vals.at(i));
  }

  static Rewrite rewrite(Op& op) {
    switch (op.kind) {
      case OpKind::Binary: return binary(op);
      case OpKind::Compare: return compare(op);
      case OpKind::Unary: return unary(op);
      case OpKind::Fma: {
        auto a = constant_value(op.operands[0]), b = constant_value(op.operands[1]), c = constant_value(op.operands[2]);
        if (a && b && c) return to_constant(op, fold_fma(op.result()->type.dtype, *a, *b, *c));
        return Rewrite::none();
      }
      case OpKind::Select: return select(op);
      case OpKind::Cast: {
        Value* x = op.operands[0];
        if (x->type == op.result()->type) return Rewrite::replace({x});
        if (auto c = constant_value(x)) return to_constant(op, fold_cast(x->type.dtype, op.result()->type.dtype, *c));
        return Rewrite::none();
      }
      case OpKind::Bitcast: {
        Value* x = op.operands[0];
        if (x->type == op.result()->type) return Rewrite::replace({x});
        if (auto c = constant_value(x)) return to_constant(op, fold_bitcast(x->type.dtype, op.result()->type.dtype, *c));
        return Rewrite::none();
      }
      case OpKind::Broadcast:
      case OpKind::ExpandDims:
      case OpKind::Reshape:
      case OpKind::Permute: return shape_op(op);
      case OpKind::Hint: return of_constant(op);
      case OpKind::Arange:
        if (op.result()->type.numel() == 1) return to_constant(op, Attr(op.int_attr("start")));
        return Rewrite::none();
      case OpKind::Reduce: return reduce(op);
      case OpKind::ExtractTile:
      case OpKind::InsertTile: return subtile(op);
      default: return Rewrite::none();
    }
  }

  Function& f_;
};

}  // namespace

bool canonicalize(Function& f) {
  Canonicalizer c(f);
  bool any = false;
  // Every successful rewrite removes an op or turns one into a constant or shortens a chain, so
  // this terminates; the bound only guards against a rule bug.
  for (int round = 0; round < 10000 && c.sweep(f.entry()); ++round) any = true;
  return any;
}

}  // namespace tle::passes
