// src/frontend/trace.cpp - the tracer: builds tile IR for each front-end operation, checking
// shapes, dtypes and axes and reporting mistakes as tle::UserError at the user's file:line.
//
// Device control flow follows the mem2reg idea (DESIGN-NOTES): every live Tile handle is tracked
// when a region opens; for a loop each becomes a block argument, and what the handle holds when
// the region closes is yielded. Values that did not change are removed later by DCE.
#include "frontend/trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <unordered_set>

#include "ir/inline_asm.hpp"
#include "passes/pass.hpp"
#include "passes/pointer_origin.hpp"
#include "tle/tensor_descriptor.hpp"
#include "support/half.hpp"

namespace tle::detail {

ir::Value* stale_value() noexcept {
  static ir::Value stale;
  return &stale;
}

std::string stale_message(const std::string& what) {
  return what + " was made while tracing a kernel whose trace has ended (another kernel's, or an earlier "
                "specialization of this one): a Tile lives only inside the trace that made it, so it cannot be "
                "kept in a static or global variable and used later; compute it again inside this kernel, or pass "
                "the data through memory (a Ptr parameter)";
}

}  // namespace tle::detail

namespace tle::frontend {

namespace {
thread_local TraceContext* g_current = nullptr;

}  // namespace

TraceContext::TraceContext(ir::Function& f) : fn(f), builder(&f.entry()), prev_(g_current) { g_current = this; }

TraceContext::~TraceContext() {
  // Handles still registered outlive the trace (a Tile in a static or global variable): their
  // values are freed with the function, so they now hold the stale marker instead.
  for (auto* h = head; h;) {
    auto* next = h->next;
    h->prev = h->next = nullptr;
    h->attached = false;
    if (h->v) h->v = detail::stale_value();
    h = next;
  }
  g_current = prev_;
}

TraceContext* TraceContext::current() noexcept { return g_current; }

void TraceContext::check_pending() {
  if (pending) {
    UserError e = *pending;
    pending.reset();
    throw e;
  }
}

bool TraceContext::visible(ir::Value* v) const {
  if (v == detail::stale_value()) return false;
  ir::Block* b = v->defining_block();
  if (b == &fn.entry()) return true;
  for (auto& f : frames)
    if (f.block == b) return true;
  return false;
}

ir::Value* TraceContext::use(ir::Value* v, const SrcLoc& loc, const std::string& what) const {
  const std::string pre = what.empty() ? "this tile" : what;
  if (!v) throw UserError(loc, pre + " has no value yet (a default-constructed Tile); assign it before use");
  if (v == detail::stale_value()) throw UserError(loc, detail::stale_message(pre));
  if (!visible(v))
    throw UserError(loc, pre + " was defined inside a device loop, if_ branch, combine function or warp_specialize "
                               "role that has already ended; declare the Tile before that region and assign to it "
                               "inside (roles share data through shared buffers)");
  return v;
}

}  // namespace tle::frontend

namespace tle::detail {

constexpr int64_t kMaxNumel = int64_t(1) << 20;  // as Triton: at most 2^20 elements per tile
using frontend::Frame;
using frontend::TraceContext;
using ir::Type;
using ir::Value;

namespace {

TraceContext& ctx(const SrcLoc& loc) {
  auto* c = TraceContext::current();
  if (!c)
    throw UserError(loc, "tle tile operations can only run while a kernel is traced (inside the lambda given to "
                         "tle::jit, when the kernel is launched)");
  c->check_pending();
  return *c;
}

std::string shape_str(const ShapeVec& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

bool visible(TraceContext& c, V v) { return c.visible(v); }
V use(TraceContext& c, V v, const SrcLoc& loc) { return c.use(v, loc); }

void check_shape(const ShapeVec& s, const SrcLoc& loc) {
  int64_t n = 1;
  for (auto d : s) {
    if (d <= 0)
      throw UserError(loc, fmt::format("tile shape {} has a dimension <= 0; every tile dimension must be at least 1 "
                                       "(handle empty inputs on the host or with a mask)",
                                       shape_str(s)));
    n *= d;
    if (n > kMaxNumel)
      throw UserError(loc, fmt::format("tile shape {} has more than 2^20 elements; use smaller tiles", shape_str(s)));
  }
}

int norm_axis(int axis, int rank, const SrcLoc& loc, const char* what, int extra = 0) {
  int n = rank + extra;
  if (axis < -n || axis >= n)
    throw UserError(loc, fmt::format("{}: axis {} is out of range for a tile of rank {} (valid: {}..{})", what, axis,
                                     rank, -n, n - 1));
  return axis < 0 ? axis + n : axis;
}

Type scalar(DType d, DType pointee = DType::f32) { return ir::scalar_type(d, pointee); }

V cast(TraceContext& c, V v, DType to, const SrcLoc& loc) {
  if (v->type.dtype == to) return v;
  if (v->type.dtype == DType::ptr || to == DType::ptr)
    throw UserError(loc, fmt::format("cannot convert a {} tile to {}; pointer tiles only take integer offsets",
                                     v->type.str(), dtype_name(to)));
  return c.builder.cast(v, to, loc);
}

/// numpy broadcasting of two shapes.
ShapeVec broadcast_shapes(const ShapeVec& a, const ShapeVec& b, const SrcLoc& loc, const char* what) {
  size_t n = std::max(a.size(), b.size());
  ShapeVec r(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw UserError(loc, fmt::format("{}: shapes {} and {} cannot be broadcast together (dimension {}: {} vs {}); "
                                       "use expand_dims/broadcast_to to make them compatible",
                                       what, shape_str(a), shape_str(b), i, da, db));
    r[i] = da == 1 ? db : da;
  }
  return r;
}

V broadcast(TraceContext& c, V v, const ShapeVec& to, const SrcLoc& loc) {
  const ShapeVec& s = v->type.shape;
  if (s == to) return v;
  if (s.size() > to.size())
    throw UserError(loc, fmt::format("cannot broadcast shape {} to {}", shape_str(s), shape_str(to)));
  broadcast_shapes(s, to, loc, "broadcast");
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] != 1 && s[i] != to[i + to.size() - s.size()])
      throw UserError(loc, fmt::format("cannot broadcast shape {} to {}", shape_str(s), shape_str(to)));
  if (s.size() < to.size()) {
    ShapeVec padded(to.size() - s.size(), 1);
    padded.insert(padded.end(), s.begin(), s.end());
    v = c.builder.create(ir::OpKind::Reshape, {v}, {v->type.with_shape(padded)}, {}, loc)->result();
  }
  if (v->type.shape == to) return v;
  return c.builder.create(ir::OpKind::Broadcast, {v}, {v->type.with_shape(to)}, {}, loc)->result();
}

/// Broadcasts all of vs to their common shape.
void broadcast_all(TraceContext& c, std::vector<V*> vs, const SrcLoc& loc, const char* what) {
  ShapeVec s;
  for (auto* v : vs) s = broadcast_shapes(s, (*v)->type.shape, loc, what);
  for (auto* v : vs) *v = broadcast(c, *v, s, loc);
}

void require_dtype(bool ok, V v, const SrcLoc& loc, const char* what, const char* need) {
  if (!ok) throw UserError(loc, fmt::format("{} needs {} tiles, got {}", what, need, v->type.str()));
}

/// fp8 is a storage type (dtype.hpp, is_fp8; docs/semantics.md "fp8"): `what` on fp8 is refused.
void refuse_fp8(DType d, const SrcLoc& loc, const std::string& what) {
  if (!is_fp8(d)) return;
  throw UserError(loc, fmt::format("{} is not defined on {} tiles: fp8 is a storage type (as in Triton), so convert "
                                   "to f32, f16 or bf16 first, e.g. cast<float>(x), and back with cast<tle::{}>(y) "
                                   "to store",
                                   what, dtype_name(d), dtype_name(d)));
}

ir::Op* make(TraceContext& c, ir::OpKind k, std::vector<V> operands, std::vector<Type> results,
             std::map<std::string, ir::Attr> attrs, const SrcLoc& loc, unsigned regions = 0) {
  return c.builder.create(k, std::move(operands), std::move(results), std::move(attrs), loc, regions);
}

/// Opens a region frame: tracks every live handle, so that the region's end can see what the
/// user assigned inside it.
/// `same_as` (if given) supplies the tracked handles instead, e.g. the else-branch of an if_
/// tracks exactly the then-branch's handles (a handle made in the then-branch that outlives it must
/// not shift the pairing of then- and else-values).
Frame& push_frame(TraceContext& c, Frame::Kind kind, ir::Op* op, ir::Block* block, const SrcLoc& loc,
                  const Frame* same_as = nullptr) {
  Frame f;
  f.kind = kind;
  f.op = op;
  f.block = block;
  f.loc = loc;
  if (same_as) {
    f.tracked = same_as->tracked;
    f.before = same_as->before;
  } else {
    for (auto* h = c.head; h; h = h->next) {
      if (h->v && !visible(c, h->v)) continue;  // a stale handle from a closed region: never carried
      f.tracked.push_back(h);
      f.before.push_back(h->v);
    }
  }
  c.frames.push_back(std::move(f));
  c.builder.set_insertion_block(block);
  return c.frames.back();
}

/// Closes the innermost frame and moves the insertion point back to the enclosing block.
Frame pop_frame(TraceContext& c) {
  Frame f = std::move(c.frames.back());
  c.frames.pop_back();
  c.builder.set_insertion_block(c.frames.empty() ? &c.fn.entry() : c.frames.back().block);
  return f;
}

/// Traces `combine` into the combine region of `op` (a reduce or scan over the operands xs): block
/// arguments a_0..a_{n-1} (left), b_0..b_{n-1} (right), one scalar of each operand's dtype; the
/// yield holds the n values it returns. Returns the op's results.
std::vector<V> combine_region(TraceContext& c, ir::Op* op, const std::vector<V>& xs, const CombineFn& combine,
                              const SrcLoc& loc) {
  ir::Block& body = op->region().body();
  const size_t n = xs.size();
  std::vector<V> left, right;
  for (int side = 0; side < 2; ++side)
    for (size_t i = 0; i < n; ++i) {
      const std::string name = fmt::format("{}{}", side ? "b" : "a", n == 1 ? "" : std::to_string(i));
      (side ? right : left).push_back(body.add_arg(scalar(xs[i]->type.dtype), name));
    }
  push_frame(c, Frame::Body, op, &body, loc);
  std::vector<V> r;
  try {
    r = combine(left, right);
  } catch (...) {
    pop_frame(c);
    throw;
  }
  auto fail = [&](const std::string& msg) {
    pop_frame(c);
    throw UserError(loc, msg);
  };
  Frame f = c.frames.back();
  for (size_t i = 0; i < f.tracked.size(); ++i)
    if (f.tracked[i] && f.tracked[i]->v != f.before[i])
      fail("a combine function must not assign to tiles declared outside it; return the combined value instead");
  if (r.size() != n)
    fail(fmt::format("the combine function returns {} value{}, expected {} (one per combined tile, in the order of "
                     "the operands)",
                     r.size(), r.size() == 1 ? "" : "s", n));
  for (size_t i = 0; i < n; ++i) {
    DType dt = xs[i]->type.dtype;
    if (r[i] == stale_value()) fail(stale_message("the tile the combine function returns"));
    if (!r[i] || r[i]->type != scalar(dt)) {
      std::string which = n == 1 ? "" : fmt::format(" value {} (for operand {})", i, i);
      fail(fmt::format("the combine function must return{} a scalar {} tile, got {}", which, dtype_name(dt),
                       r[i] ? r[i]->type.str() : "no value"));
    }
  }
  for (V v : r) use(c, v, loc);
  c.builder.yield(r, loc);
  pop_frame(c);
  std::vector<V> out;
  for (auto& res : op->results) out.push_back(res.get());
  return out;
}

}  // namespace

// ====================================================================== handles

void attach(HandleBase* h) noexcept {
  auto* c = TraceContext::current();
  if (!c || h->attached) return;
  h->attached = true;
  h->prev = nullptr;
  h->next = c->head;
  if (c->head) c->head->prev = h;
  c->head = h;
}

void detach(HandleBase* h) noexcept {
  if (!h->attached) return;
  auto* c = TraceContext::current();
  if (!c) return;
  if (h->prev) h->prev->next = h->next;
  else c->head = h->next;
  if (h->next) h->next->prev = h->prev;
  h->attached = false;
  for (auto& f : c->frames)
    for (auto& t : f.tracked)
      if (t == h) t = nullptr;
}

bool tracing() noexcept { return TraceContext::current() != nullptr; }

ShapeVec shape_of_value(V v, const SrcLoc& loc) {
  if (v == stale_value()) throw UserError(loc, stale_message("this tile"));
  return v ? v->type.shape : ShapeVec{};
}

void require_value(V v, const SrcLoc& loc) {
  if (!v) throw UserError(loc, "this tile has no value yet (a default-constructed Tile); assign it before use");
  if (v == stale_value()) throw UserError(loc, stale_message("this tile"));
}

// ====================================================================== creation

V constant_int(DType t, int64_t value, const SrcLoc& loc) {
  auto& c = ctx(loc);
  if (is_float(t)) return constant_float(t, static_cast<double>(value), loc);
  if (t == DType::ptr) throw UserError(loc, "a pointer tile cannot be made from an integer constant");
  bool fits;
  if (t == DType::i1) fits = value == 0 || value == 1;
  else if (is_signed_int(t)) {
    int w = bit_width(t);
    fits = w == 64 || (value >= -(int64_t(1) << (w - 1)) && value < (int64_t(1) << (w - 1)));
  } else {
    int w = bit_width(t);
    fits = value >= 0 && (w == 64 || value < (int64_t(1) << w));
  }
  if (!fits)
    throw UserError(loc, fmt::format("the constant {} does not fit in {}; use a wider tile type or cast explicitly",
                                     value, dtype_name(t)));
  return c.builder.constant(scalar(t), value, loc);
}

V constant_uint(DType t, uint64_t value, const SrcLoc& loc) {
  if (is_float(t)) return constant_float(t, static_cast<double>(value), loc);
  if (t == DType::u64) return ctx(loc).builder.constant(scalar(t), static_cast<int64_t>(value), loc);
  if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw UserError(loc, fmt::format("the constant {} does not fit in {}", value, dtype_name(t)));
  return constant_int(t, static_cast<int64_t>(value), loc);
}

V constant_float(DType t, double value, const SrcLoc& loc) {
  auto& c = ctx(loc);
  double v;
  switch (t) {
    case DType::f64: v = value; break;
    case DType::f32: v = static_cast<float>(value); break;
    case DType::f16: v = f16_bits_to_f64(f64_to_f16_bits(value)); break;
    case DType::bf16: v = bf16_bits_to_f64(f64_to_bf16_bits(value)); break;
    case DType::f8e4m3: case DType::f8e5m2: v = fp8_bits_to_f64(f64_to_fp8_bits(value, t), t); break;
    default:
      throw UserError(loc, fmt::format("a floating-point constant ({}) cannot be used with a {} tile; convert it to an "
                                       "integer explicitly",
                                       value, dtype_name(t)));
  }
  return c.builder.constant(scalar(t), v, loc);
}

V full(const ShapeVec& shape, V s, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, s, loc);
  check_shape(shape, loc);
  if (!s->type.is_scalar())
    throw UserError(loc, fmt::format("full: the fill value must be a scalar, got a {} tile", s->type.str()));
  return broadcast(c, s, shape, loc);
}

V arange(int64_t start, int64_t end, const SrcLoc& loc) {
  auto& c = ctx(loc);
  if (end <= start)
    throw UserError(loc, fmt::format("arange({}, {}) would be empty or negative in size; a tile dimension must be at "
                                     "least 1 (rule E07)",
                                     start, end));
  if (start < std::numeric_limits<int32_t>::min() || end - 1 > std::numeric_limits<int32_t>::max())
    throw UserError(loc, fmt::format("arange({}, {}) does not fit in i32", start, end));
  check_shape({end - start}, loc);
  return make(c, ir::OpKind::Arange, {}, {scalar(DType::i32).with_shape({end - start})},
              {{"start", start}, {"end", end}}, loc)
      ->result();
}

static V grid_query(ir::OpKind k, int axis, const SrcLoc& loc, const char* what) {
  auto& c = ctx(loc);
  if (axis < 0 || axis > 2) throw UserError(loc, fmt::format("{}: axis must be 0, 1 or 2, got {}", what, axis));
  return make(c, k, {}, {scalar(DType::i32)}, {{"axis", int64_t(axis)}}, loc)->result();
}
V program_id(int axis, const SrcLoc& loc) { return grid_query(ir::OpKind::ProgramId, axis, loc, "program_id"); }
V num_programs(int axis, const SrcLoc& loc) { return grid_query(ir::OpKind::NumPrograms, axis, loc, "num_programs"); }

// ====================================================================== elementwise

V convert(V x, DType to, const SrcLoc& loc) {
  auto& c = ctx(loc);
  return cast(c, use(c, x, loc), to, loc);
}

V bitcast(V x, DType to, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, x, loc);
  DType from = x->type.dtype;
  if (from == to) return x;
  if (from == DType::ptr || to == DType::ptr || from == DType::i1 || to == DType::i1 || bit_width(from) != bit_width(to))
    throw UserError(loc, fmt::format("bitcast from {} to {}: both types must be non-boolean, non-pointer and of the "
                                     "same bit width",
                                     dtype_name(from), dtype_name(to)));
  return make(c, ir::OpKind::Bitcast, {x}, {x->type.with_dtype(to)}, {}, loc)->result();
}

V binary(ir::BinaryOp op, V a, V b, DType compute, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, a, loc);
  use(c, b, loc);
  bool bitwise = op == ir::BinaryOp::And || op == ir::BinaryOp::Or || op == ir::BinaryOp::Xor;
  bool intonly = op == ir::BinaryOp::Rem || op == ir::BinaryOp::Shl || op == ir::BinaryOp::Shr;
  bool floatonly = op == ir::BinaryOp::Pow || op == ir::BinaryOp::Atan2;
  if (compute == DType::ptr) throw UserError(loc, "arithmetic on pointer tiles: only `pointer + integer offset` is allowed");
  refuse_fp8(compute, loc, fmt::format("operator '{}'", ir::name(op)));
  if ((bitwise && is_float(compute)) || (intonly && !(is_int(compute) && compute != DType::i1)) ||
      (floatonly && !is_float(compute)))
    throw UserError(loc, fmt::format("operator '{}' is not defined for {} tiles", ir::name(op), dtype_name(compute)));
  a = cast(c, a, compute, loc);
  b = cast(c, b, compute, loc);
  broadcast_all(c, {&a, &b}, loc, ir::name(op));
  return c.builder.binary(op, a, b, loc);
}

V compare(ir::CmpPred p, V a, V b, DType compute, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, a, loc);
  use(c, b, loc);
  refuse_fp8(compute, loc, fmt::format("comparison '{}'", ir::name(p)));
  a = cast(c, a, compute, loc);
  b = cast(c, b, compute, loc);
  broadcast_all(c, {&a, &b}, loc, ir::name(p));
  return c.builder.cmp(p, a, b, loc);
}

V unary(ir::UnaryOp op, V x, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, x, loc);
  DType d = x->type.dtype;
  refuse_fp8(d, loc, fmt::format("'{}'", ir::name(op)));
  bool math = op != ir::UnaryOp::Neg && op != ir::UnaryOp::Not && op != ir::UnaryOp::Abs;
  if (d == DType::ptr || (math && !is_float(d)) || (op == ir::UnaryOp::Not && is_float(d)))
    throw UserError(loc, fmt::format("'{}' is not defined for {} tiles", ir::name(op), x->type.str()));
  return c.builder.unary(op, x, loc);
}

V fma(V a, V b, V cc, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, a, loc), use(c, b, loc), use(c, cc, loc);
  require_dtype(is_float(a->type.dtype), a, loc, "fma", "floating-point");
  refuse_fp8(a->type.dtype, loc, "fma");
  b = cast(c, b, a->type.dtype, loc);
  cc = cast(c, cc, a->type.dtype, loc);
  broadcast_all(c, {&a, &b, &cc}, loc, "fma");
  return make(c, ir::OpKind::Fma, {a, b, cc}, {a->type}, {}, loc)->result();
}

V select(V cond, V a, V b, DType compute, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, cond, loc), use(c, a, loc), use(c, b, loc);
  require_dtype(cond->type.dtype == DType::i1, cond, loc, "where (condition)", "bool");
  if (compute != DType::ptr) {
    a = cast(c, a, compute, loc);
    b = cast(c, b, compute, loc);
  } else if (a->type.dtype != DType::ptr || b->type.dtype != DType::ptr || a->type.pointee != b->type.pointee) {
    throw UserError(loc, "where: both values must be pointer tiles of the same element type");
  }
  broadcast_all(c, {&cond, &a, &b}, loc, "where");
  return make(c, ir::OpKind::Select, {cond, a, b}, {a->type}, {}, loc)->result();
}

V addptr(V p, V off, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, p, loc), use(c, off, loc);
  require_dtype(p->type.dtype == DType::ptr, p, loc, "pointer + offset", "pointer");
  require_dtype(is_int(off->type.dtype) && off->type.dtype != DType::i1, off, loc, "pointer + offset (offset)",
                "integer");
  broadcast_all(c, {&p, &off}, loc, "pointer + offset");
  return make(c, ir::OpKind::AddPtr, {p, off}, {p->type}, {}, loc)->result();
}

V hint(V x, int64_t multiple_of, int64_t max_contiguous, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, x, loc);
  std::map<std::string, ir::Attr> attrs;
  if (multiple_of) {
    if (multiple_of < 1) throw UserError(loc, "multiple_of: the divisor must be at least 1");
    attrs["multiple_of"] = multiple_of;
  }
  if (max_contiguous) {
    if (max_contiguous < 1) throw UserError(loc, "max_contiguous: the run length must be at least 1");
    attrs["max_contiguous"] = max_contiguous;
  }
  return make(c, ir::OpKind::Hint, {x}, {x->type}, std::move(attrs), loc)->result();
}

V inline_asm(DType result, const std::string& asm_text, const std::string& constraints, std::vector<V> args,
             bool pure, int pack, const SrcLoc& loc) {
  auto& c = ctx(loc);
  std::vector<DType> ds;
  for (V& a : args) {
    use(c, a, loc);
    ds.push_back(a->type.dtype);
  }
  std::string why = ir::check_inline_asm(asm_text, constraints, result, ds, pack);
  if (!why.empty()) throw UserError(loc, "inline_asm: " + why);
  std::vector<V*> bs;
  for (V& a : args) bs.push_back(&a);
  broadcast_all(c, bs, loc, "inline_asm");
  Type rt = scalar(result).with_shape(args[0]->type.shape);
  return make(c, ir::OpKind::InlineAsm, args, {rt},
              {{"asm", asm_text}, {"constraints", constraints}, {"pure", int64_t(pure ? 1 : 0)}, {"pack", int64_t(pack)}},
              loc)
      ->result();
}

// ====================================================================== shapes

V broadcast_to(V x, const ShapeVec& shape, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, x, loc);
  check_shape(shape, loc);
  return broadcast(c, x, shape, loc);
}

V expand_dims(V x, int axis, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, x, loc);
  int a = norm_axis(axis, x->type.rank(), loc, "expand_dims", 1);
  ShapeVec s = x->type.shape;
  s.insert(s.begin() + a, 1);
  return make(c, ir::OpKind::ExpandDims, {x}, {x->type.with_shape(s)}, {{"axis", int64_t(a)}}, loc)->result();
}

V reshape(V x, const ShapeVec& shape, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, x, loc);
  check_shape(shape, loc);
  Type t = x->type.with_shape(shape);
  if (t.numel() != x->type.numel())
    throw UserError(loc, fmt::format("reshape from {} to {} changes the number of elements ({} vs {})",
                                     shape_str(x->type.shape), shape_str(shape), x->type.numel(), t.numel()));
  if (shape == x->type.shape) return x;
  return make(c, ir::OpKind::Reshape, {x}, {t}, {}, loc)->result();
}

V permute(V x, const std::vector<int>& order, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, x, loc);
  int r = x->type.rank();
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  bool ok = static_cast<int>(order.size()) == r;
  for (int i = 0; ok && i < r; ++i) ok = sorted[i] == i;
  if (!ok)
    throw UserError(loc, fmt::format("permute: order [{}] is not a permutation of the {} dimensions of a {} tile",
                                     fmt::join(order, ", "), r, x->type.str()));
  ShapeVec s(r);
  std::vector<int64_t> ord(r);
  for (int i = 0; i < r; ++i) s[i] = x->type.shape[order[i]], ord[i] = order[i];
  return make(c, ir::OpKind::Permute, {x}, {x->type.with_shape(s)}, {{"order", ord}}, loc)->result();
}

V trans(V x, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, x, loc);
  if (x->type.rank() != 2)
    throw UserError(loc, fmt::format("trans: transposes a 2-D tile, got a {} tile of rank {}; use permute(x, order) "
                                     "to reorder the dimensions of other ranks",
                                     x->type.str(), x->type.rank()));
  return permute(x, {1, 0}, loc);
}

// ====================================================================== memory

// PTX ISA 9.7.9.8 (ld) and 9.7.9.10 (st): loads take .ca/.cg/.cs/.lu/.cv, stores .wb/.cg/.cs/.wt;
// an L1 eviction priority is the other form of the instruction, so not both.
static void add_hints(std::map<std::string, ir::Attr>& attrs, const MemHints& h, bool is_store, const SrcLoc& loc) {
  static const char* load_caches[] = {"", ".ca", ".cg", ".cs", ".lu", ".cv"};
  static const char* store_caches[] = {"", ".wb", ".cg", ".cs", ".wt"};
  static const char* evicts[] = {"", "evict_first", "evict_last", "evict_normal"};
  const char* const* c0 = is_store ? std::begin(store_caches) : std::begin(load_caches);
  const char* const* c1 = is_store ? std::end(store_caches) : std::end(load_caches);
  if (std::find(c0, c1, h.cache) == c1)
    throw UserError(loc, fmt::format("unknown cache modifier '{}' for a {} (use {})", h.cache, is_store ? "store" : "load",
                                     is_store ? ".wb, .cg, .cs or .wt" : ".ca, .cg, .cs, .lu or .cv"));
  if (std::find(std::begin(evicts), std::end(evicts), h.evict) == std::end(evicts))
    throw UserError(loc, fmt::format("unknown eviction policy '{}' (use evict_first, evict_last or evict_normal)",
                                     h.evict));
  if (!h.cache.empty() && !h.evict.empty())
    throw UserError(loc, fmt::format("cache modifier '{}' and eviction policy '{}' together: PTX {} takes one or the "
                                     "other; drop one of them",
                                     h.cache, h.evict, is_store ? "st" : "ld"));
  if (h.is_volatile && (!h.cache.empty() || !h.evict.empty()))
    throw UserError(loc, "a volatile access takes no cache modifier or eviction policy; drop them or is_volatile");
  if (!h.cache.empty()) attrs["cache"] = h.cache;
  if (!h.evict.empty()) attrs["evict"] = h.evict;
  if (h.is_volatile) attrs["volatile"] = int64_t(1);
  if (h.is_async && is_store)
    throw UserError(loc, "is_async is a load hint (an early cp.async copy); a store takes none: drop it");
  if (h.is_async && h.is_volatile)
    throw UserError(loc, "a volatile load is read when the program says, it cannot be issued early; drop is_async or "
                         "is_volatile");
  if (h.is_async) attrs["async"] = int64_t(1);
}

/// Inside a combine function (reduce / scan bodies) the GPU runs the code a varying number of
/// times per thread: a shared-buffer access or a barrier there could not be ordered (or would
/// hang). UserError at loc.
bool in_combine(const TraceContext& c) {
  return std::any_of(c.frames.begin(), c.frames.end(), [](const Frame& f) { return f.kind == Frame::Body; });
}
void refuse_in_combine(const TraceContext& c, const char* what, const SrcLoc& loc) {
  if (in_combine(c))
    throw UserError(loc, fmt::format("{} inside a combine function (reduce / associative_scan): its code runs a "
                                     "varying number of times on each GPU thread; move it out of the combine",
                                     what));
}
void refuse_shared_in_combine(const TraceContext& c, V p, const SrcLoc& loc) {
  if (in_combine(c) && !passes::pointer_origin(p).allocs.empty())
    refuse_in_combine(c, "an access to a gpu::alloc buffer", loc);
}

V load(V p, V mask, V other, const MemHints& hints, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, p, loc);
  require_dtype(p->type.dtype == DType::ptr, p, loc, "load", "pointer");
  refuse_shared_in_combine(c, p, loc);
  std::map<std::string, ir::Attr> attrs;
  add_hints(attrs, hints, false, loc);
  std::vector<V*> bs = {&p};
  if (mask) {
    use(c, mask, loc);
    require_dtype(mask->type.dtype == DType::i1, mask, loc, "load (mask)", "bool");
    bs.push_back(&mask);
  }
  if (other) {
    use(c, other, loc);
    other = cast(c, other, p->type.pointee, loc);
    bs.push_back(&other);
  }
  broadcast_all(c, bs, loc, "load");
  std::vector<V> ops = {p};
  if (mask) ops.push_back(mask);
  if (other) ops.push_back(other);
  Type rt = p->type.with_dtype(p->type.pointee);
  return make(c, ir::OpKind::Load, ops, {rt}, std::move(attrs), loc)->result();
}

void store(V p, V value, V mask, const MemHints& hints, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, p, loc), use(c, value, loc);
  require_dtype(p->type.dtype == DType::ptr, p, loc, "store", "pointer");
  refuse_shared_in_combine(c, p, loc);
  std::map<std::string, ir::Attr> attrs;
  add_hints(attrs, hints, true, loc);
  value = cast(c, value, p->type.pointee, loc);
  if (mask) {
    use(c, mask, loc);
    require_dtype(mask->type.dtype == DType::i1, mask, loc, "store (mask)", "bool");
    broadcast_all(c, {&p, &mask}, loc, "store");
  }
  if (value->type.rank() > p->type.rank() ||
      broadcast_shapes(p->type.shape, value->type.shape, loc, "store") != p->type.shape)
    throw UserError(loc, fmt::format("store: a {} value does not fit the pointer tile's shape {}; the value must "
                                     "broadcast to the pointers' shape",
                                     value->type.str(), shape_str(p->type.shape)));
  value = broadcast(c, value, p->type.shape, loc);
  std::vector<V> ops = {p, value};
  if (mask) ops.push_back(mask);
  make(c, ir::OpKind::Store, ops, {}, std::move(attrs), loc);
}

namespace {
/// The operands of a desc_load / desc_store: the descriptor's values and the offsets as i32.
std::vector<V> desc_operands(TraceContext& c, const std::vector<V>& values, const std::vector<int64_t>& block,
                             const std::vector<V>& offsets, const SrcLoc& loc, const char* what) {
  if (values.empty())
    throw UserError(loc, fmt::format("{}: this TensorDescriptor is a host object; inside a kernel, {} works on a "
                                     "kernel parameter declared tle::TensorDescriptor<T, Rank>",
                                     what, what));
  const size_t rank = block.size();
  if (values.size() != 2 + 2 * rank || offsets.size() != rank)
    throw InternalError(fmt::format("{}: descriptor of rank {} with {} values and {} offsets", what, rank,
                                    values.size(), offsets.size()));
  std::vector<V> ops = values;
  for (size_t d = 0; d < rank; ++d) {
    V o = use(c, offsets[d], loc);
    if (!o->type.is_scalar() || !is_int(o->type.dtype) || o->type.dtype == DType::i1)
      throw UserError(loc, fmt::format("{}: offset {} is a {}; each offset is an integer scalar (elements)", what, d,
                                       o->type.str()));
    ops.push_back(cast(c, o, DType::i32, loc));
  }
  return ops;
}
}  // namespace

V desc_load(const std::vector<V>& values, const std::vector<int64_t>& block, const std::vector<V>& offsets,
            const SrcLoc& loc) {
  auto& c = ctx(loc);
  std::vector<V> ops = desc_operands(c, values, block, offsets, loc, "load");
  Type rt = ir::scalar_type(values[1]->type.pointee).with_shape(block);
  std::map<std::string, ir::Attr> attrs{{"rank", int64_t(block.size())}};
  return make(c, ir::OpKind::DescLoad, ops, {rt}, std::move(attrs), loc)->result();
}

void desc_store(const std::vector<V>& values, const std::vector<int64_t>& block, const std::vector<V>& offsets,
                V value, const SrcLoc& loc) {
  auto& c = ctx(loc);
  std::vector<V> ops = desc_operands(c, values, block, offsets, loc, "store");
  use(c, value, loc);
  value = cast(c, value, values[1]->type.pointee, loc);
  if (value->type.rank() > static_cast<int>(block.size()) ||
      broadcast_shapes(block, value->type.shape, loc, "store") != block)
    throw UserError(loc, fmt::format("store: a {} value does not fit the descriptor's block shape {}; the value must "
                                     "broadcast to the block shape",
                                     value->type.str(), shape_str(block)));
  ops.push_back(broadcast(c, value, block, loc));
  std::map<std::string, ir::Attr> attrs{{"rank", int64_t(block.size())}};
  make(c, ir::OpKind::DescStore, ops, {}, std::move(attrs), loc);
}

V atomic_rmw(ir::AtomicOp op, V p, V value, V mask, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, p, loc), use(c, value, loc);
  require_dtype(p->type.dtype == DType::ptr, p, loc, "atomic", "pointer");
  refuse_shared_in_combine(c, p, loc);
  DType d = p->type.pointee;
  bool bitwise = op == ir::AtomicOp::And || op == ir::AtomicOp::Or || op == ir::AtomicOp::Xor;
  if ((bitwise && !is_int(d)) || d == DType::i1 || bit_width(d) < 16)
    throw UserError(loc, fmt::format("atomic {} is not supported on {} memory (supported: 16/32/64-bit integers and "
                                     "floats; and/or/xor on integers only)",
                                     ir::name(op), dtype_name(d)));
  value = cast(c, value, d, loc);
  std::vector<V*> bs = {&p, &value};
  if (mask) {
    use(c, mask, loc);
    bs.push_back(&mask);
  }
  broadcast_all(c, bs, loc, "atomic");
  std::vector<V> ops = {p, value};
  if (mask) ops.push_back(mask);
  return make(c, ir::OpKind::AtomicRMW, ops, {p->type.with_dtype(d)}, {{"op", int64_t(op)}}, loc)->result();
}

V atomic_cas(V p, V cmp, V value, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, p, loc), use(c, cmp, loc), use(c, value, loc);
  require_dtype(p->type.dtype == DType::ptr, p, loc, "atomic_cas", "pointer");
  refuse_shared_in_combine(c, p, loc);
  DType d = p->type.pointee;
  if (d == DType::i1 || bit_width(d) < 16)
    throw UserError(loc, fmt::format("atomic_cas is not supported on {} memory (16, 32 and 64-bit types only)",
                                     dtype_name(d)));
  cmp = cast(c, cmp, d, loc);
  value = cast(c, value, d, loc);
  broadcast_all(c, {&p, &cmp, &value}, loc, "atomic_cas");
  return make(c, ir::OpKind::AtomicCas, {p, cmp, value}, {p->type.with_dtype(d)}, {}, loc)->result();
}

// ====================================================================== reductions

static ShapeVec reduced_shape(V x, int axis) {
  ShapeVec s = x->type.shape;
  s.erase(s.begin() + axis);
  return s;
}

static V keep(TraceContext& c, V r, int axis, bool keepdims, const SrcLoc& loc) {
  if (!keepdims) return r;
  ShapeVec s = r->type.shape;
  s.insert(s.begin() + axis, 1);
  return make(c, ir::OpKind::ExpandDims, {r}, {r->type.with_shape(s)}, {{"axis", int64_t(axis)}}, loc)->result();
}

V reduce(V x, int axis, ir::ReduceKind kind, bool keepdims, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, x, loc);
  if (x->type.rank() == 0) throw UserError(loc, fmt::format("{}: cannot reduce a scalar", ir::name(kind)));
  int a = norm_axis(axis, x->type.rank(), loc, ir::name(kind));
  require_dtype(x->type.dtype != DType::ptr && x->type.dtype != DType::i1, x, loc, ir::name(kind), "numeric");
  refuse_fp8(x->type.dtype, loc, ir::name(kind));
  DType rd = (kind == ir::ReduceKind::Argmax || kind == ir::ReduceKind::Argmin) ? DType::i32 : x->type.dtype;
  V r = make(c, ir::OpKind::Reduce, {x}, {x->type.with_shape(reduced_shape(x, a)).with_dtype(rd)},
             {{"axis", int64_t(a)}, {"kind", int64_t(kind)}}, loc)
            ->result();
  return keep(c, r, a, keepdims, loc);
}

/// Checks the operands of a reduce/scan with a combine (`what` names it): at least one, all tiles of
/// one shape (not scalars), no pointers; returns the normalized axis.
static int combine_operands(TraceContext& c, const std::vector<V>& xs, int axis, const char* what, const char* verb,
                            const SrcLoc& loc) {
  if (xs.empty()) throw UserError(loc, fmt::format("{}: needs at least one tile", what));
  for (size_t i = 0; i < xs.size(); ++i) {
    use(c, xs[i], loc);
    if (xs[i]->type.rank() == 0) throw UserError(loc, fmt::format("{}: cannot {} a scalar", what, verb));
    require_dtype(xs[i]->type.dtype != DType::ptr, xs[i], loc, what, "non-pointer");
    if (xs[i]->type.shape != xs[0]->type.shape)
      throw UserError(loc, fmt::format("{}: the tiles combined together must have one shape: operand {} is {}, "
                                       "operand 0 is {}; broadcast them first",
                                       what, i, xs[i]->type.str(), xs[0]->type.str()));
  }
  return norm_axis(axis, xs[0]->type.rank(), loc, what);
}

std::vector<V> reduce_combine(const std::vector<V>& xs, int axis, bool keepdims, const CombineFn& combine,
                              const SrcLoc& loc) {
  auto& c = ctx(loc);
  int a = combine_operands(c, xs, axis, "reduce", "reduce", loc);
  std::vector<Type> rts;
  for (V x : xs) rts.push_back(x->type.with_shape(reduced_shape(x, a)));
  ir::Op* op = make(c, ir::OpKind::Reduce, xs, rts, {{"axis", int64_t(a)}, {"kind", int64_t(ir::ReduceKind::Combine)}},
                    loc, 1);
  std::vector<V> rs = combine_region(c, op, xs, combine, loc);
  for (V& r : rs) r = keep(c, r, a, keepdims, loc);
  return rs;
}

V scan(V x, int axis, bool reverse, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, x, loc);
  if (x->type.rank() == 0) throw UserError(loc, "cumsum: cannot scan a scalar");
  int a = norm_axis(axis, x->type.rank(), loc, "cumsum");
  require_dtype(x->type.dtype != DType::ptr && x->type.dtype != DType::i1, x, loc, "cumsum", "numeric");
  refuse_fp8(x->type.dtype, loc, "cumsum");
  return make(c, ir::OpKind::Scan, {x}, {x->type},
              {{"axis", int64_t(a)}, {"reverse", int64_t(reverse)}, {"kind", int64_t(ir::ScanKind::Cumsum)}}, loc)
      ->result();
}

std::vector<V> scan_combine(const std::vector<V>& xs, int axis, bool reverse, const CombineFn& combine,
                            const SrcLoc& loc) {
  auto& c = ctx(loc);
  int a = combine_operands(c, xs, axis, "associative_scan", "scan", loc);
  std::vector<Type> rts;
  for (V x : xs) rts.push_back(x->type);
  ir::Op* op = make(c, ir::OpKind::Scan, xs, rts,
                    {{"axis", int64_t(a)}, {"reverse", int64_t(reverse)}, {"kind", int64_t(ir::ScanKind::Combine)}},
                    loc, 1);
  return combine_region(c, op, xs, combine, loc);
}

V dot(V a, V b, V acc, ir::Precision precision, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, a, loc), use(c, b, loc);
  if (a->type.rank() != 2 || b->type.rank() != 2)
    throw UserError(loc, fmt::format("dot needs 2-D tiles [M, K] and [K, N], got {} and {}", a->type.str(),
                                     b->type.str()));
  if (a->type.shape[1] != b->type.shape[0])
    throw UserError(loc, fmt::format("dot: inner dimensions differ: {} x {} (a is [M, K], b must be [K, N])",
                                     a->type.str(), b->type.str()));
  DType d = a->type.dtype;
  if (d != b->type.dtype)
    throw UserError(loc, fmt::format("dot: a and b must have the same element type, got {} and {}; cast one of them",
                                     dtype_name(d), dtype_name(b->type.dtype)));
  DType accd;
  if (d == DType::f16 || d == DType::bf16 || d == DType::f32 || is_fp8(d)) accd = DType::f32;
  else if (d == DType::f64) accd = DType::f64;
  else if (d == DType::i8) accd = DType::i32;
  else
    throw UserError(loc, fmt::format("dot supports f16, bf16, f32, f8e4m3, f8e5m2 (f32 accumulation), f64 (f64 "
                                     "accumulation) and i8 (i32 accumulation) inputs, got {}",
                                     dtype_name(d)));
  if (precision != ir::Precision::IEEE && d != DType::f32)
    throw UserError(loc, "dot: the TF32 precisions apply to f32 inputs only");
  ShapeVec rs = {a->type.shape[0], b->type.shape[1]};
  Type rt = scalar(accd).with_shape(rs);
  if (acc) {
    use(c, acc, loc);
    if (acc->type != rt)
      throw UserError(loc, fmt::format("dot: the accumulator must be a {} tile, got {}", rt.str(), acc->type.str()));
  } else {
    acc = broadcast(c, c.builder.constant(scalar(accd), is_float(accd) ? ir::Attr(0.0) : ir::Attr(int64_t(0)), loc),
                    rs, loc);
  }
  return make(c, ir::OpKind::Dot, {a, b, acc}, {rt}, {{"precision", int64_t(precision)}}, loc)->result();
}

namespace {
/// The operands of histogram / histogram_ranks (x, and the mask broadcast to x's shape), checked.
std::vector<V> histogram_operands(TraceContext& c, V x, int64_t bins, V mask, const SrcLoc& loc, const char* what) {
  use(c, x, loc);
  if (x->type.rank() != 1) throw UserError(loc, fmt::format("{} needs a 1-D tile, got {}", what, x->type.str()));
  require_dtype(is_int(x->type.dtype) && x->type.dtype != DType::i1, x, loc, what, "integer");
  if (bins < 1) throw UserError(loc, fmt::format("{}: bins must be at least 1, got {}", what, bins));
  std::vector<V> ops = {x};
  if (mask) {
    use(c, mask, loc);
    require_dtype(mask->type.dtype == DType::i1, mask, loc, fmt::format("{} (mask)", what).c_str(), "bool");
    ops.push_back(broadcast(c, mask, x->type.shape, loc));
  }
  return ops;
}
}  // namespace

V histogram(V x, int64_t bins, V mask, const SrcLoc& loc) {
  auto& c = ctx(loc);
  std::vector<V> ops = histogram_operands(c, x, bins, mask, loc, "histogram");
  check_shape({bins}, loc);
  return make(c, ir::OpKind::Histogram, ops, {scalar(DType::i32).with_shape({bins})}, {{"bins", bins}}, loc)->result();
}

V histogram_ranks(V x, int64_t bins, V mask, const SrcLoc& loc) {
  auto& c = ctx(loc);
  std::vector<V> ops = histogram_operands(c, x, bins, mask, loc, "histogram_ranks");
  if (bins > kMaxNumel)  // it keeps a counter per bin (per warp on the GPU), as histogram's result
    throw UserError(loc, fmt::format("histogram_ranks: bins = {} is more than 2^20 (it keeps a counter per bin); "
                                     "use fewer bins",
                                     bins));
  return make(c, ir::OpKind::HistogramRanks, ops, {x->type.with_dtype(DType::i32)}, {{"bins", bins}}, loc)->result();
}

// ====================================================================== TLE-Struct: shared buffers

V local_alloc(DType elem, const ShapeVec& shape, int64_t numel, int64_t align, const SrcLoc& loc) {
  auto& c = ctx(loc);
  if (!c.frames.empty())
    throw UserError(loc, "gpu::alloc must be called in the kernel's body, outside tle::range, tle::if_, combine "
                         "functions and warp_specialize roles (a shared buffer lives for the whole program); allocate "
                         "it before the loop or the roles");
  if (shape.empty()) throw UserError(loc, "gpu::alloc: the shape needs at least one dimension");
  for (int64_t d : shape)
    if (d < 1) throw UserError(loc, fmt::format("gpu::alloc: shape {} has a dimension < 1", shape_str(shape)));
  if (elem == DType::ptr || elem == DType::i1)
    throw UserError(loc, "gpu::alloc: buffers hold numbers (integers or floats), not bool or pointers");
  int64_t elems = 1;
  for (int64_t d : shape) elems = d > (int64_t(1) << 31) / elems ? (int64_t(1) << 31) : elems * d;
  if (numel < elems || numel < 1 || elems >= (int64_t(1) << 31))
    throw UserError(loc, fmt::format("gpu::alloc: shape {} ({} elements with padding) is far larger than any GPU's "
                                     "shared memory (232448 bytes)",
                                     shape_str(shape), numel));
  // The total the program may hold: the largest shared memory an NVIDIA GPU gives one block (227 KB
  // on sm_90, CUDA Programming Guide, "Compute capabilities"). Checked here, on every backend, so
  // that a kernel run on the CPU does not hide a GPU failure; the GPU compile checks the total with
  // the compiler's own staging buffers again.
  constexpr int64_t kLimit = 232448;
  const int64_t bytes = numel * byte_size(elem);
  int64_t total = 0;
  std::string list;
  ir::walk(c.fn.entry(), [&](const ir::Op& op) {
    if (op.kind != ir::OpKind::LocalAlloc) return;
    const int64_t b = ir::local_alloc_bytes(op);
    const int64_t a = op.int_attr("align");
    total = (total + a - 1) / a * a + b;
    list += fmt::format("{}:{} ({} bytes), ", op.loc.file, op.loc.line, b);
  });
  total = (total + align - 1) / align * align + bytes;
  if (total > kLimit)
    throw UserError(loc, fmt::format("gpu::alloc: this buffer ({} bytes) brings the program's shared buffers to {} "
                                     "bytes, more than the {} bytes a GPU block can use (buffers allocated: {}this "
                                     "one); use fewer stages or smaller tiles",
                                     bytes, total, kLimit, list));
  return make(c, ir::OpKind::LocalAlloc, {}, {scalar(DType::ptr, elem)},
              {{"shape", std::vector<int64_t>(shape)}, {"numel", numel}, {"align", align}}, loc)
      ->result();
}

void barrier(const SrcLoc& loc) {
  auto& c = ctx(loc);
  refuse_in_combine(c, "gpu::sync()", loc);
  make(c, ir::OpKind::Barrier, {}, {}, {}, loc);
}

namespace {
/// A copy's destination must point into the program's buffers only (UserError at loc).
void require_buffer_destination(V p, const SrcLoc& loc) {
  const passes::PointerOrigin o = passes::pointer_origin(p);
  if (o.allocs.empty() || o.global || o.unknown)
    throw UserError(loc, "gpu::copy: the destination must point into a gpu::alloc buffer only (a Buffer view or "
                         "gpu::local_ptr of one)");
}
}  // namespace

void async_copy(V src, V dst, V mask, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, src, loc), use(c, dst, loc);
  require_dtype(src->type.dtype == DType::ptr, src, loc, "gpu::copy (source)", "pointer");
  require_dtype(dst->type.dtype == DType::ptr, dst, loc, "gpu::copy (destination)", "pointer");
  refuse_in_combine(c, "gpu::copy", loc);
  if (!passes::pointer_origin(src).allocs.empty())
    throw UserError(loc, "gpu::copy: the source points into a gpu::alloc buffer; gpu::copy moves global memory into a "
                         "buffer (read a buffer with tle::load and write it with tle::store)");
  require_buffer_destination(dst, loc);
  if (src->type.pointee != dst->type.pointee)
    throw UserError(loc, fmt::format("gpu::copy: the source holds {} and the destination {}; a copy does not convert",
                                     dtype_name(src->type.pointee), dtype_name(dst->type.pointee)));
  if (src->type.shape != dst->type.shape)
    throw UserError(loc, fmt::format("gpu::copy: the source pointers have shape {} and the destination's {}; give "
                                     "one source element per destination element",
                                     shape_str(src->type.shape), shape_str(dst->type.shape)));
  std::vector<V> ops = {src, dst};
  if (mask) {
    use(c, mask, loc);
    require_dtype(mask->type.dtype == DType::i1, mask, loc, "gpu::copy (mask)", "bool");
    if (mask->type.rank() > src->type.rank() ||
        broadcast_shapes(src->type.shape, mask->type.shape, loc, "gpu::copy") != src->type.shape)
      throw UserError(loc, fmt::format("gpu::copy: a mask of shape {} does not broadcast to the copy's shape {}",
                                       shape_str(mask->type.shape), shape_str(src->type.shape)));
    ops.push_back(broadcast(c, mask, src->type.shape, loc));
  }
  make(c, ir::OpKind::AsyncCopy, ops, {}, {}, loc);
}

void async_commit(const SrcLoc& loc) {
  auto& c = ctx(loc);
  refuse_in_combine(c, "gpu::commit_group()", loc);
  make(c, ir::OpKind::AsyncCommit, {}, {}, {}, loc);
}

void async_wait(int64_t pending, const SrcLoc& loc) {
  auto& c = ctx(loc);
  refuse_in_combine(c, "gpu::wait_group()", loc);
  if (pending < 0 || pending > 255)
    throw UserError(loc, fmt::format("gpu::wait_group({}): the number of groups left in flight must be from 0 to 255 "
                                     "(PTX cp.async.wait_group)",
                                     pending));
  make(c, ir::OpKind::AsyncWait, {}, {}, {{"pending", pending}}, loc);
}

V mbarrier_alloc(int64_t n, int64_t count, const SrcLoc& loc) {
  auto& c = ctx(loc);
  if (n < 1 || n > 1024) throw UserError(loc, fmt::format("gpu::alloc_mbarriers: {} mbarriers; allocate 1 to 1024", n));
  if (count < 1 || count >= (int64_t(1) << 20))
    throw UserError(loc, fmt::format("gpu::alloc_mbarriers: {} arrivals per phase; an mbarrier counts 1 to 2^20 - 1 "
                                     "(PTX ISA 9.7.13.15.1)",
                                     count));
  V p = local_alloc(DType::i64, {n}, n, 16, loc);  // refuses regions
  make(c, ir::OpKind::MBarrierInit, {p}, {}, {{"n", n}, {"count", count}}, loc);
  return p;
}

void mbarrier_arrive(V bar, int64_t tx, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, bar, loc);
  refuse_in_combine(c, "an mbarrier arrive", loc);
  if (tx < 0 || tx >= (int64_t(1) << 20))
    throw UserError(loc, fmt::format("gpu::arrive_expect_tx: {} bytes; a phase expects 0 to 2^20 - 1 transaction "
                                     "bytes (PTX ISA 9.7.13.15.1)",
                                     tx));
  make(c, ir::OpKind::MBarrierArrive, {bar}, {}, {{"tx", tx}}, loc);
}

void mbarrier_wait(V bar, V phase, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, bar, loc), use(c, phase, loc);
  refuse_in_combine(c, "an mbarrier wait", loc);
  if (!phase->type.is_scalar())
    throw UserError(loc, fmt::format("gpu::wait: the phase is a {}; give an integer scalar (its parity is waited for)",
                                     phase->type.str()));
  make(c, ir::OpKind::MBarrierWait, {bar, cast(c, phase, DType::i32, loc)}, {}, {}, loc);
}

void tma_copy(const std::vector<V>& values, const std::vector<int64_t>& block, const std::vector<V>& offsets,
              V dst_base, V dst_ptrs, V bar, int64_t swizzle, const SrcLoc& loc) {
  auto& c = ctx(loc);
  refuse_in_combine(c, "gpu::copy", loc);
  std::vector<V> ops = desc_operands(c, values, block, offsets, loc, "gpu::copy");
  use(c, dst_base, loc), use(c, dst_ptrs, loc), use(c, bar, loc);
  const DType d = values[1]->type.pointee;
  if (dst_ptrs->type.shape != block)
    throw UserError(loc, fmt::format("gpu::copy: the descriptor's block is {} but the destination view is {}; copy "
                                     "into a view of the block's shape (one stage: buf[s])",
                                     shape_str(block), shape_str(dst_ptrs->type.shape)));
  if (!passes::tma_block_ok(d, block))
    throw UserError(loc, fmt::format("gpu::copy: TMA cannot move a {} block of {}: every dim a power of two up to 256, "
                                     "rows of at least 16 bytes, at most 64 KiB in all",
                                     shape_str(block), dtype_name(d)));
  require_buffer_destination(dst_base, loc);
  ops.push_back(dst_base);
  ops.push_back(bar);
  ops.push_back(dst_ptrs);
  make(c, ir::OpKind::TmaCopy, ops, {}, {{"rank", int64_t(block.size())}, {"swizzle", swizzle}}, loc);
}

namespace {
/// The name of a set_layout spec's layout type, as the user wrote it.
std::string layout_name(const LayoutSpec& s) {
  const std::string base = s.kind == "mma" ? "MmaLayout" : s.kind == "dot_operand" ? "DotOperandLayout" : "BlockedLayout";
  return s.sliced ? "SliceLayout of a " + base : base;
}

/// Checks a blocked layout of rank r (the tile's, or a slice's parent's); `what` prefixes messages.
void check_blocked(const LayoutSpec& s, size_t r, const std::string& what, const std::string& rank_of,
                   const SrcLoc& loc) {
  auto pow2 = [](int64_t v) { return v >= 1 && (v & (v - 1)) == 0; };
  std::vector<bool> seen(r, false);
  for (auto [name, v] : {std::pair{"size_per_thread", &s.size_per_thread},
                         std::pair{"threads_per_warp", &s.threads_per_warp},
                         std::pair{"warps_per_cta", &s.warps_per_cta}, std::pair{"order", &s.order}}) {
    if (v->size() != r)
      throw UserError(loc, fmt::format("{}: {} has {} entries for {} of rank {}; give one per dim", what, name,
                                       v->size(), rank_of, r));
    for (int64_t e : *v) {
      if (v == &s.order) {
        if (e < 0 || e >= static_cast<int64_t>(r) || seen[static_cast<size_t>(e)])
          throw UserError(loc, fmt::format("{}: order {} is not a permutation of the dims 0..{}", what,
                                           shape_str(s.order), r - 1));
        seen[static_cast<size_t>(e)] = true;
      } else if (!pow2(e) || e > 1024) {
        throw UserError(loc, fmt::format("{}: {} {} has an entry that is not a power of two from 1 to 1024", what,
                                         name, shape_str(*v)));
      }
    }
  }
  int64_t threads = 1;
  for (int64_t t : s.threads_per_warp) threads = std::min<int64_t>(threads * t, int64_t(1) << 40);
  if (threads != 32)
    throw UserError(loc, fmt::format("{}: threads_per_warp {} makes {} threads; a warp has 32", what,
                                     shape_str(s.threads_per_warp), threads));
}

/// Checks an mma layout's own parameters (rank 2; the tile shape is checked when compiled).
void check_mma(const LayoutSpec& s, const std::string& what, const SrcLoc& loc) {
  auto pow2 = [](int64_t v) { return v >= 1 && (v & (v - 1)) == 0; };
  if (s.version != 2 && s.version != 3)
    throw UserError(loc, fmt::format("{}: MmaLayout version {} does not exist; use 2 (mma.sync, sm_80 and newer) or 3 "
                                     "(wgmma, sm_90a)",
                                     what, s.version));
  const ShapeVec& w = s.warps_per_cta;
  if (w.size() != 2 || !pow2(w[0]) || !pow2(w[1]) || w[0] > 32 || w[1] > 32 || w[0] * w[1] > 32)
    throw UserError(loc, fmt::format("{}: MmaLayout warps_per_cta {} must be [wm, wn] (warps along M, along N), powers "
                                     "of two making at most 32 warps",
                                     what, shape_str(w)));
  if (s.version == 3 && w[0] % 4 != 0)
    throw UserError(loc, fmt::format("{}: MmaLayout version 3 warps_per_cta {}: wm must be a multiple of 4 (a wgmma "
                                     "warpgroup is 4 warps along M), e.g. [4, {}]",
                                     what, shape_str(w), std::max<int64_t>(1, w[0] * w[1] / 4)));
  if (s.version == 2 && s.instr_n != 0 && s.instr_n != 8)
    throw UserError(loc, fmt::format("{}: MmaLayout version 2 instr_n {}: mma.sync's m16n8 tiles are 8 columns wide; "
                                     "leave instr_n 0 (or 8)",
                                     what, s.instr_n));
  if (s.version == 3 && s.instr_n != 0 && (!pow2(s.instr_n) || s.instr_n < 8 || s.instr_n > 256))
    throw UserError(loc, fmt::format("{}: MmaLayout version 3 instr_n {} must be 0 (N / wn) or a power of two from 8 "
                                     "to 256 (wgmma's n)",
                                     what, s.instr_n));
}
}  // namespace

V set_layout(V x, const LayoutSpec& spec, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, x, loc);
  LayoutSpec s = spec;
  const size_t r = x->type.shape.size();
  const std::string what = "gpu::set_layout(" + layout_name(s) + ")";
  if (r == 0) throw UserError(loc, "gpu::set_layout: a scalar has no layout (every thread holds it)");
  const bool sliced = s.sliced;
  const size_t pr = sliced ? r + 1 : r;  // the (parent) layout's rank
  if (sliced && (s.slice_dim < 0 || s.slice_dim > static_cast<int64_t>(r)))
    throw UserError(loc, fmt::format("{}: dim {} is out of range for a parent of rank {} (the tile's rank {} + 1); "
                                     "give a dim from 0 to {}",
                                     what, s.slice_dim, pr, r, r));
  const std::string rank_of = sliced ? "a parent (the tile's rank + 1)" : "a tile";
  if (s.kind == "blocked") {
    check_blocked(s, pr, what, rank_of, loc);
  } else if (s.kind == "mma" || s.kind == "dot_operand") {
    if (pr != 2)
      throw UserError(loc, fmt::format("{}: an mma layout has rank 2 ([M, N], or an operand's [M, K] / [K, N]) but {} "
                                       "has rank {}{}",
                                       what, sliced ? "the parent (the tile's rank + 1)" : "the tile", pr,
                                       sliced ? "; only a rank-1 tile is a slice of it"
                                              : "; use a rank-2 tile, or a SliceLayout of it for a rank-1 tile"));
    check_mma(s, what, loc);
    if (s.kind == "dot_operand") {
      if (s.op_idx != 0 && s.op_idx != 1)
        throw UserError(loc, fmt::format("{}: op_idx {} must be 0 (the A operand, [M, K]) or 1 (B, [K, N])", what,
                                         s.op_idx));
      if (s.version == 3 && s.op_idx == 1)
        throw UserError(loc, fmt::format("{}: wgmma (MmaLayout version 3) reads its B operand from shared memory, so "
                                         "B has no register layout; leave B's layout to the compiler, or use a "
                                         "version 2 parent",
                                         what));
      if (s.k_width == 0) {
        const int bits = bit_width(x->type.dtype);
        if (bits != 8 && bits != 16 && bits != 32)
          throw UserError(loc, fmt::format("{}: k_width 0 means 32 / the element's bits, but {} elements have {} "
                                           "bits; give k_width 1, 2 or 4",
                                           what, dtype_name(x->type.dtype), bits));
        s.k_width = 32 / bits;
      }
      if (s.k_width != 1 && s.k_width != 2 && s.k_width != 4)
        throw UserError(loc, fmt::format("{}: k_width {} must be 1 (32-bit elements), 2 (16-bit) or 4 (8-bit): the "
                                         "elements along K in one 32-bit register",
                                         what, s.k_width));
    }
  } else {
    throw InternalError("set_layout: unknown layout kind " + s.kind);
  }
  std::map<std::string, ir::Attr> attrs{{"kind", s.kind}};
  if (sliced) attrs.emplace("slice_dim", s.slice_dim);
  if (s.kind == "blocked") {
    attrs.emplace("size_per_thread", std::vector<int64_t>(s.size_per_thread));
    attrs.emplace("threads_per_warp", std::vector<int64_t>(s.threads_per_warp));
    attrs.emplace("warps_per_cta", std::vector<int64_t>(s.warps_per_cta));
    attrs.emplace("order", std::vector<int64_t>(s.order));
  } else {
    attrs.emplace("version", s.version);
    attrs.emplace("warps_per_cta", std::vector<int64_t>(s.warps_per_cta));
    attrs.emplace("instr_n", s.instr_n);
    if (s.kind == "dot_operand") {
      attrs.emplace("op_idx", s.op_idx);
      attrs.emplace("k_width", s.k_width);
    }
  }
  return make(c, ir::OpKind::SetLayout, {x}, {x->type}, std::move(attrs), loc)->result();
}

// ====================================================================== sort, gather

void sort(V x, int axis, bool descending, int64_t k, V* values, V* indices, const SrcLoc& loc, const char* what) {
  auto& c = ctx(loc);
  use(c, x, loc);
  if (x->type.rank() == 0) throw UserError(loc, fmt::format("{}: cannot sort a scalar", what));
  int a = norm_axis(axis, x->type.rank(), loc, what);
  require_dtype(x->type.dtype != DType::ptr, x, loc, what, "numeric or bool");
  refuse_fp8(x->type.dtype, loc, what);
  const int64_t n = x->type.shape[a];
  if (k == 0) k = n;
  if (k < 1 || k > n)
    throw UserError(loc, fmt::format("{}: k = {} is outside 1..{} (the size of axis {} of the {} tile)", what, k, n, a,
                                     x->type.str()));
  ShapeVec s = x->type.shape;
  s[a] = k;
  ir::Op* op = make(c, ir::OpKind::Sort, {x}, {x->type.with_shape(s), x->type.with_shape(s).with_dtype(DType::i32)},
                    {{"axis", int64_t(a)}, {"descending", int64_t(descending)}, {"k", k}}, loc);
  *values = op->result(0);
  *indices = op->result(1);
}

V gather(V x, V index, int axis, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, x, loc), use(c, index, loc);
  if (x->type.rank() == 0) throw UserError(loc, "gather: cannot gather from a scalar");
  int a = norm_axis(axis, x->type.rank(), loc, "gather");
  require_dtype(x->type.dtype != DType::ptr, x, loc, "gather", "numeric or bool");
  require_dtype(is_int(index->type.dtype) && index->type.dtype != DType::i1, index, loc, "gather (index)", "integer");
  if (index->type.rank() != x->type.rank())
    throw UserError(loc, fmt::format("gather: the index tile {} must have the rank of the input {}", index->type.str(),
                                     x->type.str()));
  for (int d = 0; d < x->type.rank(); ++d)
    if (d != a && index->type.shape[d] != x->type.shape[d])
      throw UserError(loc, fmt::format("gather: the index tile {} and the input {} differ in dimension {}; only the "
                                       "gather axis {} may differ",
                                       index->type.str(), x->type.str(), d, a));
  return make(c, ir::OpKind::Gather, {x, index}, {x->type.with_shape(index->type.shape)}, {{"axis", int64_t(a)}}, loc)
      ->result();
}

// ====================================================================== sub-tiles

namespace {
/// The grid viewing x as sub-tiles of shape sub (docs/semantics.md "Sub-tiles"); checks rank and
/// divisibility.
ShapeVec subtile_grid(V x, const ShapeVec& sub, const SrcLoc& loc, const char* what) {
  const int rank = x->type.rank();
  if (rank == 0) throw UserError(loc, fmt::format("{}: a scalar has no sub-tiles; pass a tile of rank 1 or more", what));
  if (static_cast<int>(sub.size()) != rank)
    throw UserError(loc, fmt::format("{}: the sub-tile shape {} has rank {} but the tile {} has rank {}; give one "
                                     "sub-tile dim per tile dim",
                                     what, shape_str(sub), sub.size(), x->type.str(), rank));
  ShapeVec grid(rank);
  for (int d = 0; d < rank; ++d) {
    if (sub[d] < 1 || x->type.shape[d] % sub[d] != 0)
      throw UserError(loc, fmt::format("{}: dim {} of the tile {} ({}) is not a multiple of the sub-tile's ({}); pick a "
                                       "sub-tile shape whose dims divide the tile's",
                                       what, d, x->type.str(), x->type.shape[d], sub[d]));
    grid[d] = x->type.shape[d] / sub[d];
  }
  return grid;
}

/// The sub-tile index as the op takes it: a static linear id (attr "index") or an i32 scalar
/// operand appended to ops (a multi-dim index linearized row-major here).
void subtile_index(TraceContext& c, const SubTileIndex& ix, const ShapeVec& grid, std::vector<V>& ops,
                   std::map<std::string, ir::Attr>& attrs, const SrcLoc& loc, const char* what) {
  const int rank = static_cast<int>(grid.size());
  ShapeVec stride(rank, 1);
  for (int d = rank - 2; d >= 0; --d) stride[d] = stride[d + 1] * grid[d + 1];
  const int64_t count = stride[0] * grid[0];
  const size_t given = ix.values.empty() ? ix.ints.size() : ix.values.size();
  if (ix.multi && static_cast<int>(given) != rank)
    throw UserError(loc, fmt::format("{}: the index has {} entries but the grid of sub-tiles {} has rank {}; give one "
                                     "index per dim (or one linear id)",
                                     what, given, shape_str(grid), rank));
  if (ix.values.empty()) {
    int64_t linear = 0;
    if (ix.multi) {
      for (int d = 0; d < rank; ++d) {
        if (ix.ints[d] < 0 || ix.ints[d] >= grid[d])
          throw UserError(loc, fmt::format("{}: index {{{}}} is outside the grid of sub-tiles {}: entry {} must be in "
                                           "0..{}",
                                           what, fmt::join(ix.ints, ", "), shape_str(grid), d, grid[d] - 1));
        linear += ix.ints[d] * stride[d];
      }
    } else {
      linear = ix.ints.at(0);
      if (linear < 0 || linear >= count)
        throw UserError(loc, fmt::format("{}: sub-tile {} is outside the grid of sub-tiles {}: a linear id must be in "
                                         "0..{}",
                                         what, linear, shape_str(grid), count - 1));
    }
    attrs["index"] = linear;
    return;
  }
  V linear = nullptr;
  for (size_t d = 0; d < ix.values.size(); ++d) {
    V v = use(c, ix.values[d], loc);
    if (!v->type.is_scalar() || !is_int(v->type.dtype) || v->type.dtype == DType::i1)
      throw UserError(loc, fmt::format("{}: a dynamic sub-tile index must be an integer scalar, got {}", what,
                                       v->type.str()));
    v = cast(c, v, DType::i32, loc);
    if (ix.multi && stride[d] != 1)
      v = binary(ir::BinaryOp::Mul, v, constant_int(DType::i32, stride[d], loc), DType::i32, loc);
    linear = linear ? binary(ir::BinaryOp::Add, linear, v, DType::i32, loc) : v;
  }
  ops.push_back(linear);
}
}  // namespace

V extract_tile(V x, const SubTileIndex& index, const ShapeVec& sub, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, x, loc);
  require_dtype(x->type.dtype != DType::ptr, x, loc, "extract_tile", "numeric or bool (take sub-tiles of the offsets, then add them to the pointer)");
  const ShapeVec grid = subtile_grid(x, sub, loc, "extract_tile");
  check_shape(sub, loc);
  std::vector<V> ops = {x};
  std::map<std::string, ir::Attr> attrs;
  subtile_index(c, index, grid, ops, attrs, loc, "extract_tile");
  if (sub == x->type.shape) return x;  // the one sub-tile (a dynamic index wraps to it)
  return make(c, ir::OpKind::ExtractTile, ops, {x->type.with_shape(sub)}, std::move(attrs), loc)->result();
}

V insert_tile(V x, V sub, const SubTileIndex& index, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, x, loc), use(c, sub, loc);
  if (sub->type.dtype != x->type.dtype || (x->type.dtype == DType::ptr && sub->type.pointee != x->type.pointee))
    throw UserError(loc, fmt::format("insert_tile: the sub-tile {} and the tile {} differ in element type; convert the "
                                     "sub-tile to the tile's (tle::cast)",
                                     sub->type.str(), x->type.str()));
  require_dtype(x->type.dtype != DType::ptr, x, loc, "insert_tile", "numeric or bool (insert into the offsets, then add them to the pointer)");
  const ShapeVec grid = subtile_grid(x, sub->type.shape, loc, "insert_tile");
  std::vector<V> ops = {x, sub};
  std::map<std::string, ir::Attr> attrs;
  subtile_index(c, index, grid, ops, attrs, loc, "insert_tile");
  if (sub->type.shape == x->type.shape) return sub;
  return make(c, ir::OpKind::InsertTile, ops, {x->type}, std::move(attrs), loc)->result();
}

// ====================================================================== control flow

V for_begin(V lo, V hi, V step, DType index, const SrcLoc& loc, int num_stages) {
  auto& c = ctx(loc);
  if (num_stages < 0 || num_stages > 8)
    throw UserError(loc, fmt::format("range(..., {{.num_stages = {}}}): a loop's pipelining depth is 1 (off) to 8, "
                                     "or 0 for the launch's default",
                                     num_stages));
  for (V* v : {&lo, &hi, &step}) {
    use(c, *v, loc);
    if (!(*v)->type.is_scalar() || !is_int((*v)->type.dtype) || (*v)->type.dtype == DType::i1)
      throw UserError(loc, fmt::format("range bounds and step must be integer scalars, got {}", (*v)->type.str()));
    *v = cast(c, *v, index, loc);
  }
  // Operands and results are filled in below, once the carried handles are known.
  ir::Op* op = make(c, ir::OpKind::For, {lo, hi, step}, {}, {}, loc, 1);
  if (num_stages > 0) op->attrs["stages"] = int64_t{num_stages};
  ir::Block& body = op->region().body();
  V iv = body.add_arg(scalar(index), "i");
  Frame& f = push_frame(c, Frame::Loop, op, &body, loc);
  for (size_t i = 0; i < f.tracked.size(); ++i) {
    V init = f.before[i];
    if (!init) continue;
    op->operands.push_back(init);
    f.tracked[i]->v = body.add_arg(init->type);
  }
  return iv;
}

void for_end(const SrcLoc& loc) {
  auto* cp = TraceContext::current();
  if (!cp || cp->frames.empty() || cp->frames.back().kind != Frame::Loop)
    throw InternalError("tle::range closed while no device loop is open");
  auto& c = *cp;
  Frame& f = c.frames.back();
  ir::Op* op = f.op;
  ir::Block& body = *f.block;
  std::vector<V> yields;
  unsigned arg = 1;
  for (size_t i = 0; i < f.tracked.size(); ++i) {
    if (!f.before[i]) {
      if (f.tracked[i] && f.tracked[i]->v) {
        V now = f.tracked[i]->v;
        pop_frame(c);
        throw UserError(loc, fmt::format("a Tile with no value before this device loop is assigned a {} inside it; "
                                         "give it an initial value before the loop (e.g. zeros)",
                                         now->type.str()));
      }
      continue;
    }
    V carried = body.arg(arg++);
    V now = f.tracked[i] ? f.tracked[i]->v : carried;
    if (!now) now = carried;
    if (now == stale_value()) {
      pop_frame(c);
      throw UserError(loc, stale_message("a Tile assigned inside this device loop"));
    }
    if (now->type != carried->type) {
      Type before = carried->type;
      pop_frame(c);
      throw UserError(loc, fmt::format("a Tile assigned inside this device loop changes from {} to {}; a loop-carried "
                                       "value must keep its type and shape (cast or broadcast before assigning)",
                                       before.str(), now->type.str()));
    }
    if (!visible(c, now)) {
      pop_frame(c);
      throw UserError(loc, "a Tile assigned inside this device loop holds a value from a region that has ended");
    }
    yields.push_back(now);
  }
  c.builder.yield(yields, loc);
  Frame closed = pop_frame(c);
  // Results, one per carried value, and handles now hold them.
  unsigned r = 0;
  for (size_t i = 0; i < closed.tracked.size(); ++i) {
    if (!closed.before[i]) continue;
    auto v = std::make_unique<Value>();
    v->type = yields[r]->type;
    v->def = op;
    v->index = r;
    op->results.push_back(std::move(v));
    if (closed.tracked[i]) closed.tracked[i]->v = op->results.back().get();
    ++r;
  }
}

void for_abandon(bool exception_in_flight, const SrcLoc& loc) {
  auto* cp = TraceContext::current();
  if (!cp || cp->frames.empty() || cp->frames.back().kind != Frame::Loop) return;
  Frame f = pop_frame(*cp);
  for (size_t i = 0; i < f.tracked.size(); ++i)
    if (f.tracked[i]) f.tracked[i]->v = f.before[i];
  // Drop the unfinished loop op so the function stays well formed, and what remote() noted in it
  // (a kernel that catches the exception and traces on must not reach the deleted values).
  std::unordered_set<const ir::Value*> dropped;
  for (const auto& r : f.op->regions) {
    for (const auto& a : r->body().args) dropped.insert(a.get());
    ir::walk(r->body(), [&](const ir::Op& o) {
      for (const auto& res : o.results) dropped.insert(res.get());
      for (const auto& rr : o.regions)
        for (const auto& a : rr->body().args) dropped.insert(a.get());
    });
  }
  std::erase_if(cp->mesh_remotes, [&](const auto& e) { return dropped.count(e.first) != 0; });
  auto& ops = cp->builder.insertion_block()->ops;
  for (auto it = ops.begin(); it != ops.end(); ++it)
    if (it->get() == f.op) {
      ops.erase(it);
      break;
    }
  if (!exception_in_flight && !cp->pending)
    cp->pending.emplace(loc, "`break` or `return` inside a tle::range loop body is not supported: a device loop's body "
                             "is traced once; use a mask or tle::if_ instead");
}

void if_else(V cond, const std::function<void()>& then_fn, const std::function<void()>& else_fn, const SrcLoc& loc) {
  auto& c = ctx(loc);
  use(c, cond, loc);
  if (cond->type.dtype != DType::i1 || !cond->type.is_scalar())
    throw UserError(loc, fmt::format("if_ needs a scalar bool condition, got {}; reduce the tile first or use where",
                                     cond->type.str()));
  ir::Op* op = make(c, ir::OpKind::If, {cond}, {}, {}, loc, 2);
  std::vector<V> after[2];
  Frame then_frame;  // the handles tracked by both branches (set by the then-branch)
  for (int branch = 0; branch < 2; ++branch) {
    Frame& f = push_frame(c, Frame::Branch, op, &op->region(branch).body(), loc, branch == 0 ? nullptr : &then_frame);
    if (branch == 0) then_frame.tracked = f.tracked, then_frame.before = f.before;
    const auto& fn = branch == 0 ? then_fn : else_fn;
    try {
      if (fn) fn();
    } catch (...) {
      Frame g = pop_frame(c);
      for (size_t i = 0; i < g.tracked.size(); ++i)
        if (g.tracked[i]) g.tracked[i]->v = g.before[i];
      throw;
    }
    Frame g = pop_frame(c);
    after[branch].resize(g.tracked.size());
    for (size_t i = 0; i < g.tracked.size(); ++i) {
      after[branch][i] = g.tracked[i] ? g.tracked[i]->v : g.before[i];
      if (g.tracked[i]) g.tracked[i]->v = g.before[i];
      then_frame.tracked[i] = g.tracked[i];  // a handle destroyed in a branch is null from here on
    }
  }
  const std::vector<HandleBase*>& tracked = then_frame.tracked;
  const std::vector<V>& before = then_frame.before;
  std::vector<V> yields[2];
  std::vector<size_t> result_of;
  for (size_t i = 0; i < tracked.size(); ++i) {
    V t = after[0][i], e = after[1][i];
    if (t == before[i] && e == before[i]) continue;
    if (t == stale_value() || e == stale_value())
      throw UserError(loc, stale_message("a Tile assigned in a branch of this if_"));
    if (!t || !e)
      throw UserError(loc, "a Tile with no value before this if_ is assigned in only one branch; assign it in both "
                           "branches or give it a value before the if_");
    if (t->type != e->type)
      throw UserError(loc, fmt::format("a Tile is assigned a {} in the then-branch and a {} in the else-branch; both "
                                       "branches must give it the same type and shape",
                                       t->type.str(), e->type.str()));
    yields[0].push_back(t);
    yields[1].push_back(e);
    result_of.push_back(i);
  }
  for (int branch = 0; branch < 2; ++branch) {
    c.builder.set_insertion_block(&op->region(branch).body());
    c.builder.yield(yields[branch], loc);
  }
  c.builder.set_insertion_block(c.frames.empty() ? &c.fn.entry() : c.frames.back().block);
  for (size_t r = 0; r < result_of.size(); ++r) {
    auto v = std::make_unique<Value>();
    v->type = yields[0][r]->type;
    v->def = op;
    v->index = static_cast<unsigned>(r);
    op->results.push_back(std::move(v));
    if (tracked[result_of[r]]) tracked[result_of[r]]->v = op->results.back().get();
  }
}

namespace {
/// The value `v` stands for: a device loop makes every live handle loop-carried, so a handle
/// the loop does not assign holds a `for` result that only passes its init through.
/// (An if_ around such a loop yields the loop's result from one branch and the value from
/// the other.)
V passed_through(V v) {
  while (v && v->def && (v->def->kind == ir::OpKind::For || v->def->kind == ir::OpKind::If)) {
    const ir::Op* op = v->def;
    const ir::Op* y = op->region().body().terminator();
    if (!y || v->index >= y->operands.size()) break;
    if (op->kind == ir::OpKind::For) {
      if (passed_through(y->operands[v->index]) != op->region().body().arg(1 + v->index)) break;
      v = op->operands[3 + v->index];
    } else {
      const ir::Op* e = op->region(1).body().terminator();
      V t = passed_through(y->operands[v->index]);
      if (!e || v->index >= e->operands.size() || passed_through(e->operands[v->index]) != t) break;
      v = t;
    }
  }
  return v;
}

/// The mbarrier allocation a barrier pointer addresses, when it is exactly one.
const ir::Op* mbarrier_alloc_of(const ir::Value* bar) {
  const passes::PointerOrigin o = passes::pointer_origin(bar);
  return o.allocs.size() == 1 && !o.unknown && !o.global ? *o.allocs.begin() : nullptr;
}

/// What the tracer can prove about a warp-specialized kernel's mbarriers (issue #13 item 6), as
/// UserErrors naming both lines: a wait on mbarriers nothing in the kernel arrives on or completes
/// a TMA copy on (it waits forever); TMA copies completing on mbarriers on which no statement
/// announces bytes, and announced transaction bytes that differ from the bytes of the TMA copies
/// completing on the same mbarriers, when all of both are statements of one block (the phase would
/// never complete, or complete before the data).
void check_role_mbarriers(const ir::Function& f) {
  std::map<const ir::Op*, std::vector<const ir::Op*>> arrives, copies, waits;  // by mbarrier allocation
  ir::walk(f.entry(), [&](const ir::Op& op) {
    if (op.kind == ir::OpKind::MBarrierArrive) arrives[mbarrier_alloc_of(op.operands[0])].push_back(&op);
    if (op.kind == ir::OpKind::MBarrierWait) waits[mbarrier_alloc_of(op.operands[0])].push_back(&op);
    if (op.kind == ir::OpKind::TmaCopy)
      copies[mbarrier_alloc_of(op.operands.at(static_cast<size_t>(3 + 3 * op.int_attr("rank"))))].push_back(&op);
  });
  if (arrives.count(nullptr) || copies.count(nullptr)) return;  // an arrive or copy on an mbarrier we cannot name
  for (const auto& [alloc, w] : waits)
    if (alloc && !arrives.count(alloc) && !copies.count(alloc))
      throw UserError(w[0]->loc, fmt::format("this gpu::wait is on the mbarriers allocated at {}:{}, on which no "
                                             "statement of the kernel arrives and no TMA copy completes: it would "
                                             "wait forever (arrive on them in another role, or wait on the right array)",
                                             alloc->loc.file, alloc->loc.line));
  for (const auto& [alloc, cs] : copies) {
    std::vector<const ir::Op*> tx;
    for (const ir::Op* a : arrives[alloc])
      if (a->int_attr("tx") > 0) tx.push_back(a);
    if (tx.empty())
      throw UserError(cs[0]->loc, fmt::format("this TMA copy completes its bytes on the mbarriers allocated at {}:{}, "
                                              "but no gpu::arrive_expect_tx announces bytes on them: the phase would "
                                              "complete before the data lands; announce the copies' bytes "
                                              "(gpu::arrive_expect_tx, or a tle::pipe's commit(i, bytes))",
                                              alloc->loc.file, alloc->loc.line));
    const ir::Block* block = tx[0]->parent;
    int64_t announced = 0, moved = 0;
    bool one_block = true;
    for (const ir::Op* a : tx) one_block &= a->parent == block, announced += a->int_attr("tx");
    for (const ir::Op* c : cs) {
      one_block &= c->parent == block;
      const ir::Value* ptrs = c->operands.back();
      moved += ptrs->type.numel() * byte_size(ptrs->type.pointee);
    }
    if (one_block && announced != moved)
      throw UserError(tx[0]->loc, fmt::format("this gpu::arrive_expect_tx announces {} bytes on the mbarriers "
                                              "allocated at {}:{}, but the {} TMA cop{} completing on them here move "
                                              "{} (the first at {}:{}): the phase would never complete, or complete "
                                              "before the data; announce the copies' bytes",
                                              announced, alloc->loc.file, alloc->loc.line, cs.size(),
                                              cs.size() == 1 ? "y" : "ies", moved, cs[0]->loc.file, cs[0]->loc.line));
  }
}
}  // namespace

void warp_specialize(const std::vector<RoleSpec>& roles, const SrcLoc& loc) {
  auto& c = ctx(loc);
  if (!c.frames.empty())
    throw UserError(loc, "gpu::warp_specialize must be called in the kernel's body, outside tle::range, tle::if_, "
                         "combine functions and other roles: its roles split the program's warps");
  if (ir::find_warp_specialize(c.fn))
    throw UserError(loc, "gpu::warp_specialize is called twice in this kernel; give one call all the roles");
  if (roles.empty() || roles.size() > 8)
    throw UserError(loc, fmt::format("gpu::warp_specialize: {} roles; give 1 to 8", roles.size()));
  // The roles own the program's warps: a tile made before them would be spread over warps that
  // are now split among them.
  ir::walk(c.fn.entry(), [&](const ir::Op& op) {
    for (auto& r : op.results)
      if (!r->type.is_scalar())
        throw UserError(op.loc, "a kernel with gpu::warp_specialize makes its tiles inside the roles (the roles split "
                                "the program's warps); move this into a role, or pass the data through a shared "
                                "buffer");
  });
  std::vector<int64_t> warps, regs;
  for (const RoleSpec& r : roles) {
    if (r.warps < 1 || r.warps > 32 || (r.warps & (r.warps - 1)))
      throw UserError(r.loc, fmt::format("gpu::Role: {} warps; a role has a power of two from 1 to 32", r.warps));
    if (r.max_regs != 0 && (r.max_regs < 24 || r.max_regs > 256 || r.max_regs % 8))
      throw UserError(r.loc, fmt::format("gpu::Role: max_regs {}; give 0 (unchanged) or a multiple of 8 from 24 to 256 "
                                         "(setmaxnreg, PTX ISA 9.7.17.1)",
                                         r.max_regs));
    if (r.max_regs != 0 && r.warps % 4)
      throw UserError(r.loc, fmt::format("gpu::Role: max_regs needs whole warpgroups (setmaxnreg is per 4 warps); this "
                                         "role has {} warps: give it 4 or more, or max_regs 0",
                                         r.warps));
    if (!r.body) throw UserError(r.loc, "gpu::Role: the role has no body");
    warps.push_back(r.warps);
    regs.push_back(r.max_regs);
  }
  ir::Op* op = make(c, ir::OpKind::WarpSpecialize, {}, {}, {{"warps", warps}, {"regs", regs}}, loc,
                    static_cast<unsigned>(roles.size()));
  if (ir::role_first_warps(*op).back() > 32) {
    const std::vector<int64_t> first = ir::role_first_warps(*op);
    throw UserError(loc, fmt::format("gpu::warp_specialize: the roles take {} warps (their first warps: {}); a program "
                                     "has at most 32",
                                     first.back(), fmt::join(first.begin(), first.end() - 1, ", ")));
  }
  for (size_t i = 0; i < roles.size(); ++i) {
    ir::Block* body = &op->region(static_cast<unsigned>(i)).body();
    push_frame(c, Frame::Role, op, body, roles[i].loc);
    try {
      roles[i].body();
    } catch (...) {
      Frame g = pop_frame(c);
      for (size_t k = 0; k < g.tracked.size(); ++k)
        if (g.tracked[k]) g.tracked[k]->v = g.before[k];
      throw;
    }
    Frame g = pop_frame(c);
    bool assigned = false;
    for (size_t k = 0; k < g.tracked.size(); ++k)
      if (g.tracked[k]) {
        assigned |= passed_through(g.tracked[k]->v) != g.before[k];
        g.tracked[k]->v = g.before[k];  // (a loop in the role left it holding the loop's result)
      }
    if (assigned)
      throw UserError(roles[i].loc, "a gpu::warp_specialize role assigns a Tile declared outside it; roles return "
                                    "nothing: declare the Tile inside the role, or store the data to a shared buffer");
    c.builder.set_insertion_block(body);
    c.builder.yield({}, roles[i].loc);
    c.builder.set_insertion_block(&c.fn.entry());
  }
  check_role_mbarriers(c.fn);
}

}  // namespace tle::detail

namespace tle::frontend {

void trace_into(ir::Function& f, detail::TraceThunk thunk, const void* fn, const detail::TraceParam* params) {
  TraceContext c(f);
  thunk(fn, params);
  c.check_pending();
  if (!c.frames.empty()) throw InternalError("tracing ended with an open region");
  finish_mesh_remotes(c);
  // gpu::warp_specialize's roles run to the end of the program: nothing may follow it.
  const ir::Op* ws = nullptr;
  for (auto& op : f.entry().ops) {
    if (ws)
      throw UserError(op->loc, fmt::format("this statement follows the gpu::warp_specialize at {}:{}; the roles run "
                                           "to the end of the program: make it part of a role",
                                           ws->loc.file, ws->loc.line));
    if (op->kind == ir::OpKind::WarpSpecialize) ws = op.get();
  }
}

}  // namespace tle::frontend
