// src/passes/gpu/pad_shapes.cpp - power-of-two tile shapes for the GPU (gpu_passes.hpp).
//
// GPU layouts are linear maps over GF(2), so every tile dim must be a power of two. This pass pads
// each dim d of real size R to P = the next power of two (the padding at the end of the dim) and
// keeps the program's results exact on the real elements: the extra "pad" lanes hold values
// nothing observes. Where an op could observe them, it gets the tile's "element is real"
// predicate (`arange(0, P) < R` per padded dim, broadcast and and-ed; built once per shape at the
// start of the function, or of the warp_specialize role the op is in, whose tiles are its own):
//  - load / store / atomic_rmw / atomic_cas / histogram / histogram_ranks: mask = mask && real (atomic_cas gets the
//    optional mask operand only this pass creates); loads' pad lanes then hold `other` or 0;
//    async_copy gets `real` as its "active" operand (after a mask, all true if it had none), since
//    its mask zero-fills the destination rather than skipping it;
//  - reduce along a padded dim: sum / max / min / argmax / argmin select the identity (-0.0 or 0,
//    -inf or the lowest value, +inf or the highest) on pad lanes; a combine reduce (of any number
//    of operands, any dtypes) gets the "element is real" flag as one more operand, and the wrapped
//    combine returns the other side when one is a pad, so only real elements reach the results;
//  - scan along a padded dim: forward scans never reach the pads (they come last); reverse scans
//    select the identity (cumsum) or carry the flag (combine) like reduce;
//  - dot: a pad K column of a is -0.0 (0 for i8) and a pad K row of b +0.0, so each pad product is
//    -0.0 (or 0), which leaves every sum as it was;
//  - arange over the padded length (pad lanes continue the sequence), histogram bins padded;
//  - reshape: register-wise when every real element keeps its padded position ([1, 100] ->
//    [100]); otherwise (e.g. [3, 5] -> [15]) it is marked with its real shapes (real_in, real_out)
//    and lowered through shared memory (pointer tiles: UserError);
//  - extract_tile / insert_tile of padded tiles: marked with their real shapes (real_x,
//    real_sub); the grid of sub-tiles is over those, and the lowering reads and writes only real
//    elements (a pad of an extracted sub-tile holds an unobserved value, insert keeps x's pads);
//  - cuda_call and inline_asm with side effects on padded tiles: UserError (the callee would see
//    or act on pad elements).
// Elementwise, broadcast, expand_dims, permute, for / if, constants: only their types change (a
// broadcast's size-1 dims stay 1, so pads stay pads).
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>

#include "ir/builder.hpp"
#include "passes/gpu/gpu_passes.hpp"
#include "passes/pass.hpp"

namespace tle::passes {
namespace {

using ir::Block;
using ir::Op;
using ir::OpKind;
using ir::Shape;
using ir::Type;
using ir::Value;
using OpIter = std::list<std::unique_ptr<Op>>::iterator;

bool pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }
int64_t pow2_ceil(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}
Shape padded(const Shape& s) {
  Shape p = s;
  for (auto& d : p) d = pow2_ceil(d);
  return p;
}
bool needs_pad(const Shape& s) {
  for (auto d : s)
    if (!pow2(d)) return true;
  return false;
}
std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }


/// Creates ops right before a position of a block.
struct At {
  Block* blk;
  OpIter pos;
  SrcLoc loc;

  Op* op(OpKind k, std::vector<Value*> operands, std::vector<Type> results, std::map<std::string, ir::Attr> attrs = {},
         unsigned regions = 0) const {
    ir::Builder b(blk);
    Op* o = b.create(k, std::move(operands), std::move(results), std::move(attrs), loc, regions);
    blk->ops.splice(pos, blk->ops, std::prev(blk->ops.end()));
    return o;
  }
  Value* v(OpKind k, std::vector<Value*> operands, Type t, std::map<std::string, ir::Attr> attrs = {}) const {
    return op(k, std::move(operands), {std::move(t)}, std::move(attrs))->result();
  }
  Value* constant(Type t, ir::Attr value) const { t.layout = nullptr; return v(OpKind::Constant, {}, t, {{"value", value}}); }
  Value* binary(ir::BinaryOp o, Value* a, Value* b) const {
    return v(OpKind::Binary, {a, b}, a->type, {{"op", int64_t(o)}});
  }
  Value* cmp(ir::CmpPred p, Value* a, Value* b) const {
    return v(OpKind::Compare, {a, b}, a->type.with_dtype(DType::i1), {{"pred", int64_t(p)}});
  }
  Value* select(Value* c, Value* a, Value* b) const { return v(OpKind::Select, {c, a, b}, a->type); }
  Value* cast(Value* x, DType d) const { return x->type.dtype == d ? x : v(OpKind::Cast, {x}, x->type.with_dtype(d)); }
  Value* bitcast(Value* x, DType d) const { return x->type.dtype == d ? x : v(OpKind::Bitcast, {x}, x->type.with_dtype(d)); }

};

/// Identity of a reduction (or reverse scan) on dtype d: what pad lanes hold.
ir::Attr identity(DType d, bool sum, bool max) {
  if (sum) return is_float(d) ? ir::Attr(-0.0) : ir::Attr(int64_t{0});
  if (is_float(d)) return max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  if (d == DType::i1 || is_unsigned_int(d)) {
    if (max) return int64_t{0};
    return d == DType::i1 ? int64_t{1} : d == DType::u64 ? int64_t{-1} : int64_t((uint64_t{1} << bit_width(d)) - 1);
  }
  const int w = bit_width(d);
  const int64_t hi = w == 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (w - 1)) - 1;
  return max ? -hi - 1 : hi;
}

class Padder {
 public:
  explicit Padder(ir::Function& f) : f_(f) {}

  bool run() {
    pad_types(f_.entry());
    if (real_.empty()) return false;
    Block& e = f_.entry();
    std::vector<std::pair<Block*, OpIter>> ops;
    collect(e, ops);
    for (auto& [b, it] : ops) {
      scope_ = scope_of(b);
      fix(*b, it);
    }
    return true;
  }

 private:
  ir::Function& f_;
  std::unordered_map<const Value*, Shape> real_;  // real shape of every padded value
  std::map<std::tuple<Block*, Shape, Shape>, Value*> masks_;  // per scope, real and padded shape
  Block* scope_ = nullptr;  // where the predicates of the op being fixed go: its role's block, or the entry

  /// The body of the warp_specialize role holding block b, or the function's entry.
  Block* scope_of(Block* b) const {
    Block* role = ir::enclosing_role(b);
    return role ? role : &f_.entry();
  }

  const Shape* real_shape(const Value* v) const {
    auto it = real_.find(v);
    return it == real_.end() ? nullptr : &it->second;
  }

  void pad_value(Value* v) {
    if (!needs_pad(v->type.shape)) return;
    real_[v] = v->type.shape;
    v->type.shape = padded(v->type.shape);
  }

  // Step 1: padded types everywhere; attributes that hold a size follow.
  void pad_types(Block& b) {
    for (auto& op : b.ops) {
      for (auto& r : op->results) pad_value(r.get());
      if (op->kind == OpKind::Arange && real_shape(op->result())) {
        const int64_t start = op->int_attr("start"), end = start + op->result()->type.shape[0];
        if (end - 1 > std::numeric_limits<int32_t>::max())
          throw UserError(op->loc, fmt::format("arange({}, {}): on the GPU its length is padded to {}, which takes "
                                               "values past the i32 range; start lower",
                                               start, op->int_attr("end"), end - start));
        op->attrs["end"] = end;
      }
      if (op->kind == OpKind::Histogram && real_shape(op->result())) op->attrs["bins"] = op->result()->type.shape[0];
      if (op->kind == OpKind::Sort && real_shape(op->result()))  // topk's k: the padded result length
        op->attrs["k"] = op->result()->type.shape[static_cast<size_t>(op->int_attr("axis"))];
      for (auto& reg : op->regions) {
        for (auto& a : reg->body().args) pad_value(a.get());
        pad_types(reg->body());
      }
    }
  }

  void collect(Block& b, std::vector<std::pair<Block*, OpIter>>& out) {
    for (auto it = b.ops.begin(); it != b.ops.end(); ++it) {
      out.push_back({&b, it});
      for (auto& reg : (*it)->regions) collect(reg->body(), out);
    }
  }

  /// The "element is real" predicate of a padded value (null when v is not padded).
  Value* real_mask(const Value* v) {
    const Shape* r = real_shape(v);
    if (!r) return nullptr;
    const Shape& p = v->type.shape;
    auto key = std::make_tuple(scope_, *r, p);
    if (auto it = masks_.find(key); it != masks_.end()) return it->second;
    At at{scope_, scope_->ops.begin(), f_.loc};
    Value* acc = nullptr;
    const int rank = static_cast<int>(p.size());
    for (int d = 0; d < rank; ++d) {
      if ((*r)[d] == p[d]) continue;
      Type t = ir::scalar_type(DType::i32).with_shape({p[d]});
      Value* io = at.v(OpKind::Arange, {}, t, {{"start", int64_t{0}}, {"end", p[d]}});
      Value* m = at.cmp(ir::CmpPred::Lt, io, at.constant(t, (*r)[d]));
      if (rank > 1) {
        Shape s(rank, 1);
        s[d] = p[d];
        m = at.v(OpKind::Reshape, {m}, m->type.with_shape(s));
        m = at.v(OpKind::Broadcast, {m}, m->type.with_shape(p));
      }
      acc = acc ? at.binary(ir::BinaryOp::And, acc, m) : m;
    }
    masks_[key] = acc;
    return acc;
  }

  /// operand i (a mask, or absent) becomes mask && real(of).
  void and_mask(Op& op, size_t i, const Value* of, const At& at) {
    Value* real = real_mask(of);
    if (!real) return;
    if (op.operands.size() > i) {
      op.operands[i] = at.binary(ir::BinaryOp::And, op.operands[i], real);
    } else {
      if (op.operands.size() != i) throw InternalError("pad_shapes: a masked op's optional operands are out of order");
      op.operands.push_back(real);
    }
  }

  /// Wraps a reduce / scan combine region so pad elements are skipped: the op gets one more
  /// operand, the "element is real" flag (i1), and one more result (the flag's combination, not
  /// used); the region (a_0..a_{n-1}, b_0..b_{n-1}) becomes (a_0..a_{n-1}, a_real, b_0..b_{n-1},
  /// b_real) and yields, per value, the user's combine where both sides are real, else the real
  /// side (a where neither is), plus a_real || b_real. The user's combine runs on every pair, pads
  /// included (its ops are pure); only real results reach the op's results.
  void wrap_combine(OpIter it) {
    Op& op = **it;
    const unsigned n = static_cast<unsigned>(op.operands.size());
    Value* real = real_mask(op.operands[0]);
    op.operands.push_back(real);
    Block& body = op.region().body();
    body.add_arg(ir::scalar_type(DType::i1), "a_real");
    body.add_arg(ir::scalar_type(DType::i1), "b_real");
    // a_real from the end to position n, after the left values
    std::rotate(body.args.begin() + n, body.args.end() - 2, body.args.end() - 1);
    for (unsigned i = 0; i < body.args.size(); ++i) body.args[i]->index = i;
    Value *ar = body.arg(n), *br = body.arg(2 * n + 1);
    Op* yield = body.terminator();
    At tail{&body, std::prev(body.ops.end()), op.loc};  // before the yield
    for (unsigned i = 0; i < n; ++i) {
      Value* keep = tail.select(ar, yield->operands.at(i), body.arg(n + 1 + i));  // b_i when a is a pad
      yield->operands[i] = tail.select(br, keep, body.arg(i));                    // a_i when b is a pad
    }
    yield->operands.push_back(tail.binary(ir::BinaryOp::Or, ar, br));
    auto flag = std::make_unique<Value>();
    flag->type = op.result()->type.with_dtype(DType::i1);
    flag->type.layout = nullptr;
    flag->def = &op;
    flag->index = static_cast<unsigned>(op.results.size());
    op.results.push_back(std::move(flag));
  }

  void fix(Block& b, OpIter it) {
    Op& op = **it;
    At at{&b, it, op.loc};
    switch (op.kind) {
      case OpKind::Load: and_mask(op, 1, op.operands[0], at); break;
      case OpKind::Store:
      case OpKind::AtomicRMW: and_mask(op, 2, op.operands[0], at); break;
      case OpKind::AtomicCas: and_mask(op, 3, op.operands[0], at); break;
      case OpKind::AsyncCopy:  // pads copy nothing (the mask zero-fills: a separate operand)
        if (!real_mask(op.operands[0])) break;
        if (op.operands.size() == 2) op.operands.push_back(at.constant(op.operands[0]->type.with_dtype(DType::i1), int64_t(1)));
        and_mask(op, 3, op.operands[0], at);
        break;
      case OpKind::Histogram:
      case OpKind::HistogramRanks: and_mask(op, 1, op.operands[0], at); break;
      case OpKind::Reduce:
      case OpKind::Scan: {
        Value* x = op.operands[0];
        const Shape* r = real_shape(x);
        const int64_t axis = op.int_attr("axis");
        if (!r || (*r)[axis] == x->type.shape[axis]) break;
        const bool scan = op.kind == OpKind::Scan;
        if (scan && op.int_attr("reverse") == 0) break;  // pads come after every real lane
        const bool combine = scan ? op.enum_attr<ir::ScanKind>("kind") == ir::ScanKind::Combine
                                  : op.enum_attr<ir::ReduceKind>("kind") == ir::ReduceKind::Combine;
        if (combine) {
          wrap_combine(it);
          break;
        }
        bool sum = scan, max = false;
        if (!scan) {
          auto k = op.enum_attr<ir::ReduceKind>("kind");
          sum = k == ir::ReduceKind::Sum;
          max = k == ir::ReduceKind::Max || k == ir::ReduceKind::Argmax;
        }
        op.operands[0] = at.select(real_mask(x), x, at.constant(x->type, identity(x->type.dtype, sum, max)));
        break;
      }
      case OpKind::Sort: {  // pads sort last (the mask operand), so positions 0..k-1 are real
        const Shape* r = real_shape(op.operands[0]);
        const int64_t axis = op.int_attr("axis");
        if (r && (*r)[axis] != op.operands[0]->type.shape[axis]) op.operands.push_back(real_mask(op.operands[0]));
        break;
      }
      case OpKind::Gather: {  // an index past the real dim reads 0, as out of range, not a pad
        const Shape* r = real_shape(op.operands[0]);
        const int64_t axis = op.int_attr("axis");
        if (r && (*r)[axis] != op.operands[0]->type.shape[axis]) op.attrs["real_dim"] = (*r)[axis];
        break;
      }
      case OpKind::Dot: {
        Value *a = op.operands[0], *bm = op.operands[1];
        const Shape* ra = real_shape(a);
        if (!ra || (*ra)[1] == a->type.shape[1]) break;  // K is not padded
        const bool fl = is_float(a->type.dtype);
        op.operands[0] = at.select(real_mask(a), a, at.constant(a->type, fl ? ir::Attr(-0.0) : ir::Attr(int64_t{0})));
        op.operands[1] = at.select(real_mask(bm), bm, at.constant(bm->type, fl ? ir::Attr(0.0) : ir::Attr(int64_t{0})));
        break;
      }
      case OpKind::Reshape: fix_reshape(op); break;
      case OpKind::ExtractTile:
      case OpKind::InsertTile: {  // the grid is over the real shapes; the lowering keeps pads out of it
        const Value* x = op.operands[0];
        const Value* sub = op.kind == OpKind::InsertTile ? op.operands[1] : op.result();
        const Shape *rx = real_shape(x), *rs = real_shape(sub);
        if (!rx && !rs) break;
        op.attrs["real_x"] = rx ? *rx : x->type.shape;
        op.attrs["real_sub"] = rs ? *rs : sub->type.shape;
        break;
      }
      case OpKind::InlineAsm:
      case OpKind::CudaCall: {
        if (op.kind == OpKind::InlineAsm && op.is_pure()) break;  // pad lanes compute values nobody reads
        const Value* bad = nullptr;
        for (auto* o : op.operands)
          if (real_shape(o)) bad = o;
        for (auto& r : op.results)
          if (real_shape(r.get())) bad = r.get();
        if (bad)
          throw UserError(op.loc, fmt::format("{} on a tile of shape {}: on the GPU tiles are padded to power-of-two "
                                              "dims, and {} would see the padding; use power-of-two tile dims here",
                                              op_mnemonic(op.kind), shape_str(*real_shape(bad)),
                                              op.kind == OpKind::CudaCall ? "the CUDA function"
                                                                          : "inline asm with side effects"));
        break;
      }
      default: break;
    }
  }

  /// A reshape of padded tiles stays register-wise when every real element keeps its padded
  /// linear position (size-1 dims added or removed, [1, 100] -> [100]); otherwise (e.g. [3, 5] ->
  /// [15]) it gets the int-list attributes real_in / real_out, its real shapes, and the GPU
  /// lowering moves the elements through shared memory (gpu_rules::is_remap).
  void fix_reshape(Op& op) {
    const Value *x = op.operands[0], *r = op.result();
    const Shape* rx = real_shape(x);
    const Shape* rr = real_shape(r);
    if (!rx && !rr) return;
    const Shape in = rx ? *rx : x->type.shape, out = rr ? *rr : r->type.shape;
    bool same = x->type.numel() == r->type.numel();
    if (same) {
      // Both sides walk the real elements in row-major order; their padded positions must agree.
      int64_t n = 1;
      for (auto d : in) n *= d;
      Shape ii = in, oi = out;
      std::fill(ii.begin(), ii.end(), 0);
      std::fill(oi.begin(), oi.end(), 0);
      auto pos = [](const Shape& idx, const Shape& p) {
        int64_t lin = 0;
        for (size_t k = 0; k < idx.size(); ++k) lin = lin * p[k] + idx[k];
        return lin;
      };
      auto next = [](Shape& idx, const Shape& s) {
        for (size_t k = idx.size(); k-- > 0;) {
          if (++idx[k] < s[k]) return;
          idx[k] = 0;
        }
      };
      for (int64_t t = 0; t < n && same; ++t) {
        same = pos(ii, x->type.shape) == pos(oi, r->type.shape);
        next(ii, in);
        next(oi, out);
      }
    }
    if (same) return;
    if (x->type.dtype == DType::ptr)
      throw UserError(op.loc, fmt::format("reshape {} -> {} of pointers: on the GPU tiles are padded to power-of-two "
                                          "dims ({} -> {}), and this reshape would move elements between padded "
                                          "positions, which the GPU backend does not do for pointer tiles; reshape "
                                          "the offsets before adding them to the pointer",
                                          shape_str(in), shape_str(out), shape_str(x->type.shape),
                                          shape_str(r->type.shape)));
    op.attrs["real_in"] = std::vector<int64_t>(in.begin(), in.end());
    op.attrs["real_out"] = std::vector<int64_t>(out.begin(), out.end());
  }
};

}  // namespace

bool pad_shapes(ir::Function& f) { return Padder(f).run(); }

}  // namespace tle::passes
