// tests/fuzz/generate.cpp - generate(): well-typed random programs, free of undefined behaviour by
// construction (YARPGen's approach: the generator knows every integer variable's value range when
// it can, and uses it to prove accesses in bounds; where it cannot, a mask guards the lanes).
//
// tle defines the result of every arithmetic op for all inputs (docs/semantics.md: integers wrap,
// x / 0 == 0, MIN / -1 == MIN, shifts by >= the width, saturating float -> int casts, NaN rules),
// so arithmetic needs no care. What could be undefined, and how it is avoided:
//  - memory: loads read input buffers at offsets whose range lies in [0, size), or under a mask
//    that tests exactly that; stores and atomics write offsets pid * numel + (a permutation of
//    0 .. numel-1), so each program owns its region and no lane of one op repeats an address;
//    outputs are never read back (reading your own stores is CPU-only, docs/semantics.md);
//  - loops: bounds come from literals, constants or parameters of known value, so a loop runs at
//    most a few trips (E24's extreme bounds included);
//  - bitcasts: a float is bitcast only after `where(x != x, 0, x)`: NaN payloads are not
//    specified (interp.hpp), so a NaN must not reach an integer's bits.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>

#include "fuzz/program.hpp"
#include "support/half.hpp"

namespace fuzz {
namespace {

namespace ir = tle::ir;
using ir::BinaryOp;
using ir::CmpPred;
using ir::UnaryOp;
using i128 = __int128;

/// Known value range of an integer variable (inclusive), in the canonical integer value.
struct Range {
  i128 lo = 0, hi = 0;
};
using MaybeRange = std::optional<Range>;

i128 dmin(DType d) {
  if (d == DType::i1 || tle::is_unsigned_int(d)) return 0;
  return -(i128(1) << (tle::bit_width(d) - 1));
}
i128 dmax(DType d) {
  if (d == DType::i1) return 1;
  if (tle::is_unsigned_int(d)) return (i128(1) << tle::bit_width(d)) - 1;
  return (i128(1) << (tle::bit_width(d) - 1)) - 1;
}
/// The range if it fits dtype d (the operation did not wrap), else unknown.
MaybeRange fit(DType d, i128 lo, i128 hi) {
  if (!tle::is_int(d) || lo < dmin(d) || hi > dmax(d) || lo > hi) return std::nullopt;
  return Range{lo, hi};
}

constexpr DType kAll[] = {DType::i1,  DType::i8,  DType::i16, DType::i32, DType::i64,  DType::u8, DType::u16,
                          DType::u32, DType::u64, DType::f16, DType::bf16, DType::f32, DType::f64};

bool arith(DType d) { return d != DType::i1 && d != DType::ptr; }

struct VarInfo {
  MaybeRange range;
  int depth = 0;  // block depth it was declared at
};

class Gen {
 public:
  Gen(uint64_t seed, const GenOptions& o) : rng_(seed * 0x9E3779B97F4A7C15ull + 0x1234567), opt_(o) {
    P.seed = seed;
    if (opt_.portable) opt_.pow2 = true;
  }

  Program run() {
    // Now and then larger tiles, so that vectorized loops run their main bodies (8-bit types too).
    if (coin(0.15)) opt_.max_numel = std::max<int64_t>(opt_.max_numel, 256);
    P.grid[0] = uni(1, 3);
    P.grid[1] = coin(0.3) ? 2 : 1;
    P.grid[2] = coin(0.2) ? 2 : 1;
    for (int i = 0; i < 3; ++i) base_shapes_.push_back(random_shape(i == 0 ? 2 : uni(1, 3)));
    scopes_.push_back({});
    blocks_.push_back(&P.body);
    // Scalar parameters: a ragged length, a small loop bound.
    n_param_ = scalar_param(DType::i32, Literal::integer(uni(0, 12)), Range{0, 12});
    t_param_ = scalar_param(DType::i32, Literal::integer(uni(0, 3)), Range{0, 3});
    // pid = program_id(0) + num_programs(0) * (program_id(1) + num_programs(1) * program_id(2))
    int x = def_simple(Kind::ProgramId, 0), y = def_simple(Kind::ProgramId, 1), z = def_simple(Kind::ProgramId, 2);
    int gx = def_simple(Kind::NumPrograms, 0), gy = def_simple(Kind::NumPrograms, 1);
    pid_ = binary(BinaryOp::Add, x, binary(BinaryOp::Mul, gx, binary(BinaryOp::Add, y, binary(BinaryOp::Mul, gy, z))));
    block(opt_.statements);
    store_leaves();
    // The shared buffers' allocations go first (gpu::alloc is only allowed in the top-level
    // block); their ids were taken when the round trips needed them.
    P.body.insert(P.body.begin(), local_allocs_.begin(), local_allocs_.end());
    return std::move(P);
  }

 private:
  Program P;
  std::mt19937_64 rng_;
  GenOptions opt_;
  std::vector<VarInfo> info_;
  std::vector<std::vector<int>> scopes_;
  std::vector<std::vector<Stmt>*> blocks_;
  std::vector<Stmt> local_allocs_;  // gpu::alloc statements, put at the top of the body by run()
  std::vector<Shape> base_shapes_;
  int pid_ = -1, n_param_ = -1, t_param_ = -1;
  int depth_ = 0;
  std::vector<int> uses_;                 // per variable: statements that read it
  std::map<std::pair<DType, int>, int> out_buffer_;  // the output buffer parameter of each dtype (and ULP bound)
  struct Offsets {
    Shape shape;
    int offs, lin;
  };
  std::vector<Offsets> region_cache_;     // region_offsets() already made, per shape
  std::vector<int> ivs_;                  // induction variables of the enclosing loops

  // ---- random helpers
  int64_t uni(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  bool coin(double p) { return std::bernoulli_distribution(p)(rng_); }
  template <class T> const T& pick(const std::vector<T>& v) { return v[static_cast<size_t>(uni(0, static_cast<int64_t>(v.size()) - 1))]; }

  DType random_dtype() {
    static const std::vector<std::pair<DType, int>> w = {
        {DType::i1, 1},  {DType::i8, 2},  {DType::i16, 1}, {DType::i32, 5}, {DType::i64, 2},  {DType::u8, 2},  {DType::u16, 1},
        {DType::u32, 2}, {DType::u64, 1}, {DType::f16, 3}, {DType::bf16, 3}, {DType::f32, 5}, {DType::f64, 2}};
    int total = 0;
    for (auto& [d, n] : w) total += n;
    int r = static_cast<int>(uni(0, total - 1));
    for (auto& [d, n] : w)
      if ((r -= n) < 0) return d;
    return DType::f32;
  }

  int64_t numel(const Shape& s) const {
    int64_t n = 1;
    for (auto d : s) n *= d;
    return n;
  }

  Shape random_shape(int rank) {
    static const std::vector<int64_t> dims = {1, 2, 3, 4, 4, 5, 6, 7, 8, 8, 16};
    static const std::vector<int64_t> big = {1, 3, 8, 16, 32, 64, 128};
    for (;;) {
      Shape s;
      for (int i = 0; i < rank; ++i) {
        int64_t d;
        do d = opt_.max_numel >= 256 && coin(0.5) ? pick(big) : pick(dims);
        while (opt_.pow2 && (d & (d - 1)) != 0);
        s.push_back(d);
      }
      if (numel(s) <= opt_.max_numel) return s;
    }
  }
  Shape some_shape() {
    if (coin(0.7)) return pick(base_shapes_);
    return random_shape(static_cast<int>(uni(0, 3)));
  }

  /// A value of dtype d for a literal: special values often.
  Literal literal(DType d) {
    if (tle::is_float(d)) {
      double v;
      double maxf = d == DType::f16 ? 65504.0 : d == DType::bf16 ? 3.3895313892515355e38 : d == DType::f32 ? 3.4028234663852886e38 : 1.7976931348623157e308;
      double minn = d == DType::f16 ? 6.103515625e-05 : d == DType::f64 ? 2.2250738585072014e-308 : 1.1754943508222875e-38;
      double mins = d == DType::f16 ? 5.960464477539063e-08 : d == DType::bf16 ? 9.183549615799121e-41
                          : d == DType::f32 ? 1.401298464324817e-45 : 4.9406564584124654e-324;
      if (tle::is_fp8(d)) {  // OCP FP8: E4M3 max 448, normals from 2^-6, subnormals from 2^-9; E5M2 57344, 2^-14, 2^-16
        maxf = d == DType::f8e4m3 ? 448.0 : 57344.0;
        minn = std::ldexp(1.0, d == DType::f8e4m3 ? -6 : -14);
        mins = std::ldexp(1.0, d == DType::f8e4m3 ? -9 : -16);
      }
      switch (uni(0, 14)) {
        case 0: v = 0.0; break;
        case 1: v = -0.0; break;
        case 2: v = std::numeric_limits<double>::infinity(); break;
        case 3: v = -std::numeric_limits<double>::infinity(); break;
        case 4: v = std::numeric_limits<double>::quiet_NaN(); break;
        case 5: v = coin(0.5) ? maxf : -maxf; break;
        case 6: v = coin(0.5) ? minn : -minn; break;
        case 7: v = (coin(0.5) ? 1 : -1) * mins * static_cast<double>(uni(1, 3)); break;
        case 8: v = static_cast<double>(uni(-8, 8)); break;
        case 9: v = static_cast<double>(uni(-8, 8)) + 0.5; break;
        default: v = std::ldexp(std::uniform_real_distribution<double>(-1, 1)(rng_), static_cast<int>(uni(-12, 12)));
      }
      return Literal::real(round_to(d, v));
    }
    i128 lo = dmin(d), hi = dmax(d), v;
    switch (uni(0, 9)) {
      case 0: v = lo; break;
      case 1: v = hi; break;
      case 2: v = 0; break;
      case 3: v = 1; break;
      case 4: v = d == DType::i1 || tle::is_unsigned_int(d) ? 1 : -1; break;
      case 5: v = i128(1) << uni(0, tle::bit_width(d) - 1); break;
      default: v = uni(-9, 9);
    }
    if (v < lo) v = lo;
    if (v > hi) v = hi;
    return Literal::integer(static_cast<int64_t>(static_cast<uint64_t>(v)));  // unsigned: the bit pattern
  }
  static double round_to(DType d, double v) {
    switch (d) {
      case DType::f16: return tle::f16_bits_to_f64(tle::f64_to_f16_bits(v));
      case DType::bf16: return tle::bf16_bits_to_f64(tle::f64_to_bf16_bits(v));
      case DType::f32: return static_cast<double>(static_cast<float>(v));
      case DType::f8e4m3: case DType::f8e5m2: return tle::fp8_bits_to_f64(tle::f64_to_fp8_bits(v, d), d);  // saturating
      default: return v;
    }
  }
  static MaybeRange range_of_literal(DType d, const Literal& l) {
    if (!tle::is_int(d) || l.is_float) return std::nullopt;
    i128 v = tle::is_unsigned_int(d) ? i128(static_cast<uint64_t>(l.i)) : i128(l.i);
    return Range{v, v};
  }

  // ---- variables and statements

  const Var& var(int v) const { return P.vars.at(static_cast<size_t>(v)); }
  DType dt(int v) const { return var(v).dtype; }
  const Shape& shp(int v) const { return var(v).shape; }
  MaybeRange rng_of(int v) const { return info_.at(static_cast<size_t>(v)).range; }
  bool arith_or_bool(int v) const { return dt(v) != DType::ptr; }

  int fresh(DType d, Shape s, MaybeRange r, DType pointee = DType::f32) {
    if (d == DType::i1) r = Range{0, 1};
    P.vars.push_back(Var{d, pointee, std::move(s)});
    info_.push_back(VarInfo{r, depth_});
    int id = static_cast<int>(P.vars.size()) - 1;
    scopes_.back().push_back(id);
    return id;
  }
  int emit(Stmt s, DType d, Shape sh, MaybeRange r = std::nullopt, DType pointee = DType::f32) {
    count_uses(s);
    s.result = fresh(d, std::move(sh), r, pointee);
    blocks_.back()->push_back(std::move(s));
    return blocks_.back()->back().result;
  }
  void emit_void(Stmt s) {
    count_uses(s);
    blocks_.back()->push_back(std::move(s));
  }
  void count_uses(const Stmt& s) {
    for (int a : s.args)
      if (a >= 0) {
        if (uses_.size() <= static_cast<size_t>(a)) uses_.resize(static_cast<size_t>(a) + 1, 0);
        ++uses_[static_cast<size_t>(a)];
      }
  }
  int uses(int v) const { return static_cast<size_t>(v) < uses_.size() ? uses_[static_cast<size_t>(v)] : 0; }
  bool is_visible(int v) const {
    for (auto& sc : scopes_)
      for (int x : sc)
        if (x == v) return true;
    return false;
  }

  template <class Pred> std::vector<int> visible(Pred pred) const {
    std::vector<int> r;
    for (auto& sc : scopes_)
      for (int v : sc)
        if (pred(v)) r.push_back(v);
    return r;
  }

  int scalar_param(DType d, Literal value, MaybeRange r) {
    int v = fresh(d, {}, r);
    P.params.push_back(Param{v, -1, value});
    return v;
  }
  int buffer_param(Buffer b) {
    P.buffers.push_back(b);
    int v = fresh(DType::ptr, {}, std::nullopt, b.dtype);
    // Parameters are visible everywhere: move it to the outermost scope.
    scopes_.back().pop_back();
    scopes_.front().push_back(v);
    info_[static_cast<size_t>(v)].depth = 0;
    P.params.push_back(Param{v, static_cast<int>(P.buffers.size()) - 1, {}});
    return v;
  }

  int def_simple(Kind k, int axis) {
    Stmt s;
    s.kind = k;
    s.axis = axis;
    int64_t g = P.grid[axis];
    return emit(s, DType::i32, {}, k == Kind::ProgramId ? Range{0, g - 1} : Range{g, g});
  }

  int constant(DType d, const Shape& sh, Literal l) {
    Stmt s;
    s.kind = Kind::Const;
    s.shape = sh;
    s.lit = l;
    return emit(s, d, sh, range_of_literal(d, l));
  }
  int iconst(DType d, int64_t v, const Shape& sh = {}) { return constant(d, sh, Literal::integer(v)); }

  static Shape broadcast_shape(const Shape& a, const Shape& b) {
    Shape r = a.size() >= b.size() ? a : b;
    const Shape& o = a.size() >= b.size() ? b : a;
    size_t off = r.size() - o.size();
    for (size_t i = 0; i < o.size(); ++i)
      if (r[off + i] == 1) r[off + i] = o[i];
    return r;
  }

  // ---- range propagation (sound for tle's wrapping semantics: unknown whenever it may wrap)
  MaybeRange binary_range(BinaryOp op, DType d, MaybeRange a, MaybeRange b) const {
    if (!a || !b || !tle::is_int(d) || d == DType::i1) return std::nullopt;
    switch (op) {
      case BinaryOp::Add: return fit(d, a->lo + b->lo, a->hi + b->hi);
      case BinaryOp::Sub: return fit(d, a->lo - b->hi, a->hi - b->lo);
      case BinaryOp::Mul: {
        i128 c[4] = {a->lo * b->lo, a->lo * b->hi, a->hi * b->lo, a->hi * b->hi};
        return fit(d, *std::min_element(c, c + 4), *std::max_element(c, c + 4));
      }
      case BinaryOp::Max: return fit(d, std::max(a->lo, b->lo), std::max(a->hi, b->hi));
      case BinaryOp::Min: return fit(d, std::min(a->lo, b->lo), std::min(a->hi, b->hi));
      case BinaryOp::Rem: {
        // |x % y| < |y| (x % 0 == x), sign of the dividend.
        i128 m = std::max({a->hi < 0 ? -a->lo : a->hi, -a->lo, b->hi, -b->lo});
        if (b->lo <= 0 && b->hi >= 0) return std::nullopt;  // may divide by 0: x itself
        i128 my = std::max(b->hi, -b->lo) - 1;
        i128 lim = std::min(m, my);
        return fit(d, a->lo >= 0 ? 0 : -lim, a->hi <= 0 ? 0 : lim);
      }
      case BinaryOp::And:
        if (a->lo >= 0 && b->lo >= 0) return fit(d, 0, std::min(a->hi, b->hi));
        return std::nullopt;
      default: return std::nullopt;
    }
  }

  int binary(BinaryOp op, int a, int b) {
    Stmt s;
    s.kind = Kind::Binary;
    s.op = static_cast<int>(op);
    s.args = {a, b};
    return emit(s, dt(a), broadcast_shape(shp(a), shp(b)), binary_range(op, dt(a), rng_of(a), rng_of(b)));
  }
  int compare(CmpPred p, int a, int b) {
    Stmt s;
    s.kind = Kind::Compare;
    s.op = static_cast<int>(p);
    s.args = {a, b};
    return emit(s, DType::i1, broadcast_shape(shp(a), shp(b)));
  }
  int cast(int x, DType to) {
    if (dt(x) == to) return x;
    Stmt s;
    s.kind = Kind::Cast;
    s.args = {x};
    s.to = to;
    MaybeRange r;
    DType from = dt(x);
    if (tle::is_int(to) && to != DType::i1) {
      if (tle::is_float(from)) r = Range{dmin(to), dmax(to)};  // saturating
      else if (auto xr = rng_of(x)) r = fit(to, xr->lo, xr->hi);
    }
    if (dmax(to) > dmax(DType::i64) && r && r->hi > dmax(DType::i64)) r = std::nullopt;  // keep ranges in int64
    return emit(s, to, shp(x), r);
  }
  /// base + offs: a pointer tile (base a pointer parameter or tile; the shapes broadcast).
  int addptr(int base, int offs) {
    Stmt s;
    s.kind = Kind::AddPtr;
    s.args = {base, offs};
    return emit(s, DType::ptr, broadcast_shape(shp(base), shp(offs)), std::nullopt, var(base).pointee);
  }
  /// load(p [, mask [, other]]): other a variable (>= 0), or `lit` when given.
  int load_at(int p, int mask = -1, int other = -1, std::optional<Literal> lit = std::nullopt, MaybeRange r = std::nullopt) {
    Stmt l;
    l.kind = Kind::Load;
    l.args = {p, mask, other};
    if (lit) l.flag = true, l.lit = *lit;
    l.is_async = coin(0.2);  // the hint must not change the value (on the GPU: cp.async when pipelined)
    return emit(l, var(p).pointee, shp(p), r);
  }

  /// reshape / broadcast_to of x to sh (x itself when it has that shape); the same values.
  int reshaped(Kind k, int x, Shape sh) {
    if (shp(x) == sh) return x;
    Stmt s;
    s.kind = k;
    s.args = {x};
    s.shape = sh;
    return emit(s, dt(x), sh, rng_of(x));
  }
  int reshape(int x, Shape sh) { return reshaped(Kind::Reshape, x, sh); }
  int broadcast_to(int x, Shape sh) { return reshaped(Kind::BroadcastTo, x, sh); }
  /// multiple_of(x, m) (m > 0) or max_contiguous(x, c): the caller knows the promise holds.
  int hint(int x, int64_t m, int64_t c) {
    Stmt s;
    s.kind = Kind::Hint;
    s.args = {x};
    s.a = m;
    s.b = c;
    return emit(s, dt(x), shp(x), rng_of(x));
  }
  int arange(int64_t a, int64_t b) {
    Stmt s;
    s.kind = Kind::Arange;
    s.a = a;
    s.b = b;
    return emit(s, DType::i32, {b - a}, Range{a, b - 1});
  }

  /// True when x's shape broadcasts to `to` exactly (rank <= and every dim 1 or equal).
  bool broadcasts_to(const Shape& x, const Shape& to) const {
    if (x.size() > to.size()) return false;
    size_t off = to.size() - x.size();
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i] != 1 && x[i] != to[off + i]) return false;
    return true;
  }

  // NB: functions that emit statements take shapes by value: a caller's shp(v) refers into
  // P.vars, which emitting a statement may reallocate. (A const Shape& here was a use after free:
  // load() read its shape after emitting; valgrind showed it when "fuzz: generated programs cover
  // the op families" failed under ctest only, with std::bad_array_new_length.)

  /// A variable of dtype d and exactly shape sh: an existing one, or made (cast, broadcast,
  /// load, constant).
  int operand(DType d, Shape sh) {
    auto same = visible([&](int v) { return dt(v) == d && shp(v) == sh; });
    if (!same.empty() && coin(0.75)) return pick(same);
    int r = static_cast<int>(uni(0, 9));
    if (r < 3) {
      auto bc = visible([&](int v) { return dt(v) == d && broadcasts_to(shp(v), sh); });
      if (!bc.empty()) return broadcast_to(pick(bc), sh);
    }
    if (r < 6) {
      auto other = visible([&](int v) { return dt(v) != DType::ptr && shp(v) == sh; });
      if (!other.empty()) return cast(pick(other), d);
    }
    if (r < 8 && !sh.empty()) return load(d, sh);
    if (r == 8 && tle::is_int(d) && d != DType::i1 && sh.size() == 1 && dmax(d) >= sh[0] + 4) {
      int64_t start = uni(-4, 4);
      if (tle::is_unsigned_int(d)) start = std::max<int64_t>(start, 0);
      return cast(arange(start, start + sh[0]), d);
    }
    return constant(d, sh, literal(d));
  }
  /// A variable of dtype d whose shape broadcasts to sh: same shape, a scalar, or with 1s.
  int operand_compat(DType d, Shape sh) {
    int r = static_cast<int>(uni(0, 9));
    if (r < 6 || sh.empty()) return operand(d, sh);
    if (r < 8) return operand(d, {});
    Shape s = sh;
    for (auto& x : s)
      if (coin(0.5)) x = 1;
    if (coin(0.3) && !s.empty()) s.erase(s.begin());
    return operand(d, s);
  }
  /// A visible variable satisfying pred, else one of fallback_d made. Never an fp8 one: fp8 is a
  /// storage type (docs/semantics.md), which the op families here would compute in; fp8
  /// variables are read by gen_fp8 and gen_subtile, by casts (operand) and by the stores of leaves.
  int any_var(std::function<bool(int)> pred, DType fallback_d) {
    auto c = visible([&](int v) { return dt(v) != DType::ptr && !tle::is_fp8(dt(v)) && pred(v); });
    if (!c.empty() && coin(0.85)) return pick(c);
    return operand(fallback_d, some_shape());
  }

  // ---- memory

  int buffer_for(DType d, int64_t size, Buffer::Fill fill, int64_t lo = 0, int64_t hi = 0) {
    for (size_t i = 0; i < P.buffers.size(); ++i) {
      const Buffer& b = P.buffers[i];
      if (b.role == Buffer::In && b.dtype == d && b.fill == fill && b.lo == lo && b.hi == hi && b.size >= size && coin(0.7))
        for (auto& pa : P.params)
          if (pa.buffer == static_cast<int>(i)) return pa.var;
    }
    Buffer b;
    b.role = Buffer::In;
    b.dtype = d;
    b.size = size;
    b.fill = fill;
    b.lo = lo;
    b.hi = hi;
    return buffer_param(b);
  }
  int64_t buffer_size(int ptr_param) const {
    for (auto& pa : P.params)
      if (pa.var == ptr_param) return P.buffers[static_cast<size_t>(pa.buffer)].size;
    return 0;
  }
  const Buffer& buffer_of(int ptr_param) const {
    for (auto& pa : P.params)
      if (pa.var == ptr_param) return P.buffers[static_cast<size_t>(pa.buffer)];
    throw tle::InternalError("fuzz: not a buffer parameter");
  }

  /// Offsets 0 .. numel-1 of shape sh, each once, in one of several layouts (range [0, numel-1]).
  int permutation_offsets(Shape sh) {
    int64_t n = numel(sh);
    if (sh.empty()) return iconst(DType::i32, 0);
    int r = static_cast<int>(uni(0, 3));
    int lin;
    if (r == 1 && sh.size() >= 2) {
      // sum over dims of arange(0, d_i) * stride_i, broadcast together
      int acc = -1;
      int64_t stride = 1;
      for (int i = static_cast<int>(sh.size()) - 1; i >= 0; --i) {
        Shape one(sh.size(), 1);
        one[static_cast<size_t>(i)] = sh[static_cast<size_t>(i)];
        int t = reshape(arange(0, sh[static_cast<size_t>(i)]), one);
        if (stride != 1) t = binary(BinaryOp::Mul, t, iconst(DType::i32, stride));
        acc = acc < 0 ? t : binary(BinaryOp::Add, acc, t);
        stride *= sh[static_cast<size_t>(i)];
      }
      lin = broadcast_to(acc, sh);
    } else if (r == 2 && sh.size() == 2) {
      Stmt s;
      s.kind = Kind::Permute;
      s.order = {1, 0};
      s.args = {reshape(arange(0, n), {sh[1], sh[0]})};
      lin = emit(s, DType::i32, sh, Range{0, n - 1});
    } else {
      lin = reshape(arange(0, n), sh);
      if (r == 3) lin = binary(BinaryOp::Sub, iconst(DType::i32, n - 1), lin);
      else if (sh.size() == 1 && coin(0.3)) lin = hint(lin, 0, n);  // true: one run of n
    }
    return lin;
  }

  /// A mask of shape compatible with sh that is sometimes ragged (lane < n, n a parameter).
  int extra_mask(Shape sh, int lin) {
    if (coin(0.5) && lin >= 0) return compare(CmpPred::Lt, lin, n_param_);
    auto bools = visible([&](int v) { return dt(v) == DType::i1 && broadcasts_to(shp(v), sh); });
    if (!bools.empty()) return pick(bools);
    return operand(DType::i1, sh);
  }

  /// A load of dtype d with result shape sh from an input buffer; offsets in range or masked.
  int load(DType d, Shape sh) {
    const int64_t L = pick(std::vector<int64_t>{16, 32, 64, 100, 128, 256});
    int buf = buffer_for(d, L, Buffer::Special);
    const int64_t size = buffer_size(buf);
    int lin = -1, offs;
    int recipe = static_cast<int>(uni(0, 9));
    int iv = ivs_.empty() ? -1 : ivs_.back();
    if (iv >= 0 && recipe < 3 && rng_of(iv) && fit(DType::i32, rng_of(iv)->lo, rng_of(iv)->hi)) {
      // the K-loop pattern: x + lin + i * stride (masked when the loop's range may leave the buffer)
      lin = permutation_offsets(sh);
      int i32v = cast(iv, DType::i32);
      offs = binary(BinaryOp::Add, lin, binary(BinaryOp::Mul, i32v, iconst(DType::i32, uni(1, 4) * (coin(0.2) ? -1 : 1))));
    } else if (recipe < 5) {
      lin = permutation_offsets(sh);
      offs = lin;
      if (coin(0.4)) offs = binary(BinaryOp::Add, offs, iconst(DType::i32, uni(-3, size)));
    } else if (recipe < 7) {
      // gather through an index buffer holding values in [0, size)
      DType id = pick(std::vector<DType>{DType::i32, DType::i64, DType::u16, DType::i16, DType::u32});
      int ib = buffer_for(id, std::max<int64_t>(64, numel(sh)), Buffer::Index, 0,
                          std::min<int64_t>(size - 1, static_cast<int64_t>(dmax(id))));
      lin = permutation_offsets(sh);
      const Buffer& B = buffer_of(ib);
      offs = load_at(addptr(ib, lin), -1, -1, std::nullopt, Range{B.lo, B.hi});
    } else {
      // data-dependent offsets: any integer values (masked below unless provably in range)
      offs = any_var([&](int v) { return tle::is_int(dt(v)) && dt(v) != DType::i1 && shp(v) == sh; }, DType::i32);
      if (!tle::is_int(dt(offs)) || dt(offs) == DType::i1 || shp(offs) != sh) offs = cast(operand(DType::i32, sh), DType::i32);
      if (coin(0.5) && tle::is_signed_int(dt(offs)) && dmax(dt(offs)) >= size)
        offs = binary(BinaryOp::Rem, offs, iconst(dt(offs), size));
    }
    if (coin(0.3) && dt(offs) == DType::i32) {
      // other offset dtypes: addptr sign- or zero-extends them
      MaybeRange r = rng_of(offs);
      DType to = pick(std::vector<DType>{DType::i64, DType::u32, DType::i16, DType::u8, DType::u64});
      if (r && fit(to, r->lo, r->hi)) offs = cast(offs, to);
    }
    MaybeRange r = rng_of(offs);
    const bool in_bounds = r && r->lo >= 0 && r->hi < size;
    int mask = -1;
    if (!in_bounds) {
      DType od = dt(offs);
      int ge = compare(CmpPred::Ge, offs, iconst(od, 0));
      mask = dmax(od) < size ? ge : binary(BinaryOp::And, ge, compare(CmpPred::Lt, offs, iconst(od, size)));
    }
    if (coin(0.35)) {
      int m = extra_mask(sh, lin);  // broadcasts to sh
      mask = mask < 0 ? m : binary(BinaryOp::And, mask, m);
    }
    const int p = addptr(buf, offs);
    const int o = mask >= 0 ? static_cast<int>(uni(0, 3)) : 0;
    if (o == 1) return load_at(p, mask, -1, literal(d));
    return load_at(p, mask, o == 2 ? operand_compat(d, sh) : -1);
  }

  /// Offsets of this program's own region of a buffer of numel(sh) elements per program
  /// (pid * numel + a permutation of 0 .. numel-1), and the permutation; reused while visible.
  std::pair<int, int> region_offsets(Shape sh) {
    for (auto& c : region_cache_)
      if (c.shape == sh && is_visible(c.offs) && is_visible(c.lin) && coin(0.8)) return {c.offs, c.lin};
    int64_t n = numel(sh);
    int lin = permutation_offsets(sh);
    int base = binary(BinaryOp::Mul, pid_, iconst(DType::i32, n));
    if (coin(0.3)) base = hint(base, n, 0);  // true: pid * n
    int offs = binary(BinaryOp::Add, base, lin);
    region_cache_.push_back({sh, offs, lin});
    return {offs, lin};
  }

  /// Stores v into its own region of the output buffer of its dtype (and ULP bound: a
  /// math-function leaf of a portable program goes to a buffer compared with that tolerance).
  void store(int v, int ulp = 0) {
    const Shape sh = shp(v);
    const DType d = dt(v);
    const std::pair<DType, int> key{d, ulp};
    if (!out_buffer_.count(key)) {
      Buffer b;
      b.role = Buffer::Out;
      b.dtype = d;
      b.size = 0;
      b.fill = Buffer::Sentinel;
      b.ulp = ulp;
      out_buffer_[key] = buffer_param(b);
    }
    const int buf = out_buffer_[key];
    Buffer* B = nullptr;
    for (auto& pa : P.params)
      if (pa.var == buf) B = &P.buffers[static_cast<size_t>(pa.buffer)];
    const int64_t start = B->size;
    B->size += P.programs() * numel(sh);
    auto [offs, lin] = region_offsets(sh);
    if (start > 0) offs = binary(BinaryOp::Add, offs, iconst(DType::i32, start));
    if (coin(0.2)) offs = cast(offs, pick(std::vector<DType>{DType::i64, DType::u32, DType::u64}));
    int mask = coin(0.25) ? extra_mask(sh, lin) : -1;
    int p = addptr(buf, offs);
    Stmt s;
    s.kind = Kind::Store;
    s.args = {p, v, mask};
    emit_void(s);
  }

  /// A round trip through a shared buffer (TLE-Struct, gpu::alloc): a tile stored whole into a
  /// buffer of its element count at one permutation of the slots, or copied there from an input
  /// buffer by gpu::copy (so every slot is written: the buffer's initial contents are undefined), now and then updated by an atomic at another
  /// permutation (one lane per slot: the old values are defined), and read back at a third,
  /// possibly in another shape, masked or not. On the GPU the statements' threads differ, so
  /// this checks the barriers the compiler inserts (passes::insert_shared_barriers), loops'
  /// back edges included.
  void gen_shared() {
    DType d = dtype_from_pool();
    if (d == DType::i1) d = DType::i32;
    Shape sh = some_shape_nonscalar();
    const int64_t n = numel(sh);
    Stmt a;
    a.kind = Kind::LocalAlloc;
    a.to = d;
    a.a = n;
    a.result = fresh(DType::ptr, {}, std::nullopt, d);
    scopes_.back().pop_back();  // used only here
    const int buf = a.result;
    count_uses(a);
    // In the top-level block, half the time allocated right here (so that the GPU may give it the
    // bytes of a buffer whose use has ended: plan_shared_buffers' reuse, and the barriers between
    // the two); else at the top of the body (run()), as inside loops and branches it must be.
    if (depth_ == 0 && coin(0.5)) blocks_.back()->push_back(a);
    else local_allocs_.push_back(a);
    if (coin(0.3)) {
      // filled by gpu::copy from an input buffer (masked lanes zero-filled), its group committed
      // and waited for: the compiler orders the wait before the reads (a barrier on the GPU)
      const int src = buffer_for(d, std::max<int64_t>(n, 16), Buffer::Special);
      Stmt cp;
      cp.kind = Kind::Copy;
      cp.args = {addptr(src, permutation_offsets(sh)), addptr(buf, permutation_offsets(sh)),
                 coin(0.4) ? extra_mask(sh, -1) : -1};
      emit_void(cp);
      Stmt commit;
      commit.kind = Kind::CopyCommit;
      emit_void(commit);
      Stmt wait;
      wait.kind = Kind::CopyWait;
      wait.a = 0;
      emit_void(wait);
    } else {
      const int v = operand(d, sh);
      Stmt st;
      st.kind = Kind::Store;
      st.args = {addptr(buf, permutation_offsets(sh)), v, -1};
      emit_void(st);
    }
    if (tle::is_int(d) && tle::byte_size(d) >= 2 && coin(0.3)) {  // atomics: 16/32/64-bit integers
      Shape s2 = coin(0.5) ? sh : Shape{n};
      Stmt at;
      at.kind = Kind::Atomic;
      at.op = pick(std::vector<int>{int(ir::AtomicOp::Add), int(ir::AtomicOp::Max), int(ir::AtomicOp::Xor)});
      at.args = {addptr(buf, permutation_offsets(s2)), operand_compat(d, s2), -1};
      emit(at, d, s2);
    }
    Shape s3 = coin(0.5) ? sh : Shape{n};
    const int p = addptr(buf, permutation_offsets(s3));
    if (coin(0.3)) load_at(p, extra_mask(s3, -1), -1, literal(d));
    else load_at(p);
  }

  void atomic() {
    static const std::vector<DType> ds = {DType::i16, DType::i32, DType::i64, DType::u16, DType::u32,
                                          DType::u64, DType::f32, DType::f64, DType::f16, DType::bf16};
    DType d = pick(ds);
    const bool half = d == DType::f16 || d == DType::bf16;
    const bool cas = !half && coin(0.2);
    // Portable: no f32 atomic_add; the GPU's atom.add.f32 flushes subnormal inputs and results to
    // zero (docs/semantics.md), and subnormal operands come from literals and arithmetic too.
    std::vector<int> ops;
    if (!(opt_.portable && d == DType::f32)) ops.push_back(int(ir::AtomicOp::Add));
    if (!half) {
      ops.insert(ops.end(), {int(ir::AtomicOp::Max), int(ir::AtomicOp::Min), int(ir::AtomicOp::Xchg)});
      if (tle::is_int(d)) ops.insert(ops.end(), {int(ir::AtomicOp::And), int(ir::AtomicOp::Or), int(ir::AtomicOp::Xor)});
    }
    Shape sh = some_shape();
    Buffer b;
    b.role = Buffer::InOut;
    b.dtype = d;
    b.size = P.programs() * numel(sh);
    b.fill = Buffer::Special;
    int buf = buffer_param(b);
    auto [offs, lin] = region_offsets(sh);
    if (coin(0.3)) offs = cast(offs, pick(std::vector<DType>{DType::i64, DType::u32, DType::u64}));
    int p = addptr(buf, offs);
    int reps = coin(0.3) ? 2 : 1;  // the same addresses again: sequential read-modify-writes
    for (int i = 0; i < reps; ++i) {
      Stmt s;
      if (cas) {
        s.kind = Kind::AtomicCas;
        s.args = {p, operand_compat(d, sh), operand_compat(d, sh)};
      } else {
        s.kind = Kind::Atomic;
        s.op = pick(ops);
        s.args = {p, operand_compat(d, sh), coin(0.3) ? extra_mask(sh, lin) : -1};
      }
      emit(s, d, sh);
    }
  }

  // ---- op families

  std::vector<int> binary_ops(DType d) {
    using B = BinaryOp;
    if (d == DType::i1) return {int(B::And), int(B::Or), int(B::Xor)};
    std::vector<int> v = {int(B::Add), int(B::Sub), int(B::Mul), int(B::Div), int(B::Max), int(B::Min)};
    if (tle::is_int(d)) v.insert(v.end(), {int(B::Rem), int(B::And), int(B::Or), int(B::Xor), int(B::Shl), int(B::Shr)});
    else if (!opt_.portable) v.push_back(int(B::Pow));  // portable: pow only as a leaf (math_leaf)
    return v;
  }

  /// Portable programs: a math-function result (libdevice on the GPU, the host's libm on the CPU
  /// and in the interpreter: they may differ in the last bits) is stored at once into a buffer
  /// compared with a ULP bound, and nothing else reads it (an inexact value used further, in a
  /// comparison or a cast, could change anything downstream). Bounds: CUDA's documented maximum
  /// errors (expf, sinf, tanhf, erff 2 ulp, logf 1; doubles at most 2; powf 4, 8 in older CUDA
  /// versions) plus the host's (glibc: 1 to 2), rounded up: 4 ulp, 16 for pow; f16 and bf16
  /// compute in f32 and round once, so an f32 result that close rounds to the same or a
  /// neighbouring value: 1 ulp.
  static int math_ulp(DType d, bool pow) {
    if (d == DType::f16 || d == DType::bf16) return 1;
    return pow ? 16 : 4;
  }
  void math_leaf(Stmt s, DType d, Shape sh, bool pow) {
    const int v = emit(std::move(s), d, sh);
    scopes_.back().pop_back();  // invisible: nothing else reads it
    store(v, math_ulp(d, pow));
  }
  static bool is_math(int u) {
    using U = UnaryOp;
    switch (static_cast<U>(u)) {
      case U::Exp: case U::Exp2: case U::Log: case U::Log2: case U::Sin: case U::Cos: case U::Tanh: case U::Erf: return true;
      default: return false;
    }
  }

  DType dtype_from_pool() {
    auto v = visible([&](int x) { return dt(x) != DType::ptr && !tle::is_fp8(dt(x)); });
    if (!v.empty() && coin(0.7)) return dt(pick(v));
    return random_dtype();
  }

  void gen_binary() {
    DType d = dtype_from_pool();
    int a = any_var([&](int v) { return dt(v) == d; }, d);
    if (dt(a) != d) a = operand(d, shp(a));
    int b = operand_compat(d, shp(a));
    if (coin(0.3)) std::swap(a, b);
    if (opt_.portable && tle::is_float(d) && coin(0.1)) {
      Stmt s;
      s.kind = Kind::Binary;
      s.op = static_cast<int>(BinaryOp::Pow);
      s.args = {a, b};
      math_leaf(s, d, broadcast_shape(shp(a), shp(b)), true);
      return;
    }
    binary(static_cast<BinaryOp>(pick(binary_ops(d))), a, b);
  }

  void gen_compare() {
    DType d = dtype_from_pool();
    int a = any_var([&](int v) { return dt(v) == d; }, d);
    if (dt(a) != d) a = operand(d, shp(a));
    int b = operand_compat(d, shp(a));
    if (coin(0.3)) std::swap(a, b);
    CmpPred p = d == DType::i1 ? (coin(0.5) ? CmpPred::Eq : CmpPred::Ne) : static_cast<CmpPred>(uni(0, 5));
    compare(p, a, b);
  }

  void gen_unary() {
    DType d = dtype_from_pool();
    int x = any_var([&](int v) { return dt(v) == d; }, d);
    d = dt(x);
    std::vector<int> ops;
    if (d == DType::i1) ops = {int(UnaryOp::Not)};
    else if (tle::is_int(d)) ops = {int(UnaryOp::Neg), int(UnaryOp::Not), int(UnaryOp::Abs)};
    else
      for (int u = 0; u <= int(UnaryOp::Rint); ++u)
        if (u != int(UnaryOp::Not)) ops.push_back(u);
    Stmt s;
    s.kind = Kind::Unary;
    s.op = pick(ops);
    s.args = {x};
    if (opt_.portable && is_math(s.op)) {
      math_leaf(s, d, shp(x), false);
      return;
    }
    MaybeRange r;
    if (auto xr = rng_of(x)) {
      if (s.op == int(UnaryOp::Neg)) r = fit(d, -xr->hi, -xr->lo);
      if (s.op == int(UnaryOp::Not) && d != DType::i1 && tle::is_signed_int(d)) r = fit(d, -xr->hi - 1, -xr->lo - 1);
    }
    emit(s, d, shp(x), r);
  }

  void gen_fma() {
    DType d = pick(std::vector<DType>{DType::f16, DType::bf16, DType::f32, DType::f64});
    int a = any_var([&](int v) { return dt(v) == d; }, d);
    if (dt(a) != d) a = operand(d, shp(a));
    Stmt s;
    s.kind = Kind::Fma;
    s.args = {a, operand_compat(d, shp(a)), operand_compat(d, shp(a))};
    emit(s, d, shp(a));
  }

  void gen_where() {
    DType d = dtype_from_pool();
    int a = any_var([&](int v) { return dt(v) == d; }, d);
    if (dt(a) != d) a = operand(d, shp(a));
    int b = operand_compat(d, shp(a));
    int c = operand_compat(DType::i1, shp(a));
    Stmt s;
    s.kind = Kind::Where;
    s.args = {c, a, b};
    MaybeRange r;
    auto ra = rng_of(a), rb = rng_of(b);
    if (ra && rb) r = Range{std::min(ra->lo, rb->lo), std::max(ra->hi, rb->hi)};
    emit(s, d, shp(a), r);
  }

  void gen_cast() {
    int x = any_var([](int) { return true; }, random_dtype());
    DType to = random_dtype();
    if (to == dt(x)) return;
    cast(x, to);
  }

  void gen_bitcast() {
    int x = any_var([&](int v) { return dt(v) != DType::i1; }, random_dtype());
    DType d = dt(x);
    if (d == DType::i1) return;
    std::vector<DType> to;
    for (DType t : kAll)
      if (t != d && t != DType::i1 && tle::bit_width(t) == tle::bit_width(d)) to.push_back(t);
    if (to.empty()) return;
    if (tle::is_float(d)) {
      // NaN payloads are not specified: clear NaNs first.
      int nan = compare(CmpPred::Ne, x, x);
      Stmt w;
      w.kind = Kind::Where;
      w.args = {nan, constant(d, {}, Literal::real(0.0)), x};
      x = emit(w, d, shp(x));
    }
    Stmt s;
    s.kind = Kind::Bitcast;
    s.args = {x};
    s.to = pick(to);
    emit(s, s.to, shp(x));
  }

  void gen_shape(int x = -1) {
    if (x < 0) x = any_var([&](int v) { return true; }, random_dtype());
    const Shape xs = shp(x);
    const int r = static_cast<int>(xs.size());
    int k = static_cast<int>(uni(0, 3));
    if (k == 0) {  // broadcast_to
      Shape to = xs;
      for (auto& d : to)
        if (d == 1) d = pick(opt_.pow2 ? std::vector<int64_t>{1, 2, 4} : std::vector<int64_t>{1, 2, 3, 4});
      if (r < 3 && coin(0.4)) to.insert(to.begin(), pick(opt_.pow2 ? std::vector<int64_t>{2, 4} : std::vector<int64_t>{2, 3}));
      if (numel(to) <= opt_.max_numel) broadcast_to(x, to);
    } else if (k == 1) {  // expand_dims
      if (r >= 3) return;
      Stmt s;
      s.kind = Kind::ExpandDims;
      s.args = {x};
      int ax = static_cast<int>(uni(0, r));
      Shape to = xs;
      to.insert(to.begin() + ax, 1);
      s.axis = coin(0.3) ? ax - (r + 1) : ax;
      emit(s, dt(x), to, rng_of(x));
    } else if (k == 2) {  // reshape
      int64_t n = numel(xs);
      std::vector<Shape> cands = {{n}};
      for (int64_t a = 1; a <= n; ++a)
        if (n % a == 0) {
          cands.push_back({a, n / a});
          for (int64_t b = 1; b <= n / a; ++b)
            if ((n / a) % b == 0) cands.push_back({a, b, n / a / b});
        }
      if (n == 1) cands.push_back({});
      reshape(x, pick(cands));
    } else {  // permute
      if (r < 2) return;
      std::vector<int> order(static_cast<size_t>(r));
      for (int i = 0; i < r; ++i) order[static_cast<size_t>(i)] = i;
      std::shuffle(order.begin(), order.end(), rng_);
      Shape to;
      for (int o : order) to.push_back(xs[static_cast<size_t>(o)]);
      Stmt s;
      s.kind = Kind::Permute;
      s.args = {x};
      s.order = order;
      emit(s, dt(x), to, rng_of(x));
    }
  }

  /// The form of a combine function (program.hpp): mostly one op; where(p > q, p, q) needs an
  /// ordered dtype (not bool).
  /// Portable programs (the GPU combines as a tree: in index order, but bracketed otherwise than
  /// the CPU's left-to-right) keep to combines that are associative exactly: where(p > q, p, q)
  /// only on integers (on floats a NaN makes it depend on the bracketing), `(p op q) op p` only
  /// for ops where it is associative (and, or, max, min: p op q; xor: q, "the last element"; not
  /// add: 2p + q).
  int combine_form(DType d, int op) {
    int f = static_cast<int>(uni(0, 5));
    if (f >= 4) return 0;
    if ((f == 1 || f == 2) && d == DType::i1) f = 3;
    if (opt_.portable) {
      using B = BinaryOp;
      if ((f == 1 || f == 2) && tle::is_float(d)) return 0;
      if (f == 3 && op != int(B::And) && op != int(B::Or) && op != int(B::Max) && op != int(B::Min) &&
          op != int(B::Xor))
        return 0;
    }
    return f;
  }

  std::vector<int> combine_ops(DType d) {
    using B = BinaryOp;
    if (d == DType::i1) return {int(B::And), int(B::Or), int(B::Xor)};
    // Portable: no float sum or product (rounding depends on the order).
    if (opt_.portable && tle::is_float(d)) return {int(B::Max), int(B::Min)};
    std::vector<int> v = {int(B::Add), int(B::Mul), int(B::Max), int(B::Min)};
    if (tle::is_int(d)) v.insert(v.end(), {int(B::And), int(B::Or), int(B::Xor)});
    return v;
  }

  /// Makes a combine statement over integer x the tuple form (program.hpp) now and then: a second
  /// integer operand of x's shape, the pair combine in s.a, the result kept in s.b. Returns the
  /// result's dtype and range.
  std::pair<DType, MaybeRange> maybe_pair(Stmt& s, int x) {
    const DType d = dt(x);
    if (!tle::is_int(d) || d == DType::i1 || !coin(0.3)) return {DType::i1, std::nullopt};
    auto c = visible([&](int v) { return shp(v) == shp(x) && tle::is_int(dt(v)) && dt(v) != DType::i1; });
    const int y = !c.empty() && coin(0.7) ? pick(c) : operand(d, shp(x));
    s.args = {x, y};
    s.op = 0;
    s.a = dt(y) == d && coin(0.5) ? 4 : 5;
    s.b = static_cast<int64_t>(uni(0, 1));
    const int kept = s.args[static_cast<size_t>(s.b)];
    // the lexicographic maximum picks one of the elements; the recurrence wraps
    return {dt(kept), s.a == 5 ? rng_of(kept) : std::nullopt};
  }

  void gen_reduce() {
    int x = any_var([&](int v) { return !shp(v).empty(); }, dtype_from_pool());
    if (shp(x).empty()) return;
    const Shape xs = shp(x);
    const int r = static_cast<int>(xs.size());
    int ax = static_cast<int>(uni(0, r - 1));
    Shape to = xs;
    bool keep = coin(0.3);
    if (keep) to[static_cast<size_t>(ax)] = 1;
    else to.erase(to.begin() + ax);
    const int64_t n = xs[static_cast<size_t>(ax)];
    Stmt s;
    s.args = {x};
    s.axis = coin(0.25) ? ax - r : ax;
    s.flag = keep;
    DType d = dt(x);
    int kind = static_cast<int>(uni(0, 7));
    if (opt_.portable && tle::is_float(d) && kind == int(ir::ReduceKind::Sum)) kind = static_cast<int>(ir::ReduceKind::Max);
    if (d == DType::i1 || kind >= 5) {
      s.kind = Kind::ReduceCombine;
      if (auto [pd, pr] = maybe_pair(s, x); pd != DType::i1) {
        emit(s, pd, to, pr);
        return;
      }
      s.op = pick(combine_ops(d));
      s.a = combine_form(d, s.op);
      MaybeRange rr = s.a == 0 && (s.op == int(BinaryOp::Max) || s.op == int(BinaryOp::Min)) ? rng_of(x) : std::nullopt;
      if (s.a == 1 || s.a == 2) rr = rng_of(x);  // where(p > q, p, q) picks one of the elements
      emit(s, d, to, rr);
      return;
    }
    s.kind = Kind::Reduce;
    s.op = kind;
    MaybeRange rr;
    auto xr = rng_of(x);
    if (kind == int(ir::ReduceKind::Sum) && xr) rr = fit(d, std::min(xr->lo, xr->lo * n), std::max(xr->hi, xr->hi * n));
    if ((kind == int(ir::ReduceKind::Max) || kind == int(ir::ReduceKind::Min)) && xr) rr = xr;
    if (kind >= int(ir::ReduceKind::Argmax)) {
      d = DType::i32;
      rr = Range{0, n - 1};
    }
    emit(s, d, to, rr);
  }

  void gen_scan() {
    int x = any_var([&](int v) { return !shp(v).empty(); }, dtype_from_pool());
    if (shp(x).empty()) return;
    const int r = static_cast<int>(shp(x).size());
    int ax = static_cast<int>(uni(0, r - 1));
    Stmt s;
    s.args = {x};
    s.axis = coin(0.25) ? ax - r : ax;
    s.flag = coin(0.4);
    DType d = dt(x);
    MaybeRange rr;
    if (d == DType::i1 || coin(0.4) || (opt_.portable && tle::is_float(d))) {  // portable: no float cumsum
      s.kind = Kind::ScanCombine;
      if (auto [pd, pr] = maybe_pair(s, x); pd != DType::i1) {
        emit(s, pd, shp(x), pr);
        return;
      }
      s.op = pick(combine_ops(d));
      s.a = combine_form(d, s.op);
      if ((s.a == 0 && (s.op == int(BinaryOp::Max) || s.op == int(BinaryOp::Min))) || s.a == 1 || s.a == 2) rr = rng_of(x);
    } else {
      s.kind = Kind::Cumsum;
      const int64_t n = shp(x)[static_cast<size_t>(ax)];
      if (auto xr = rng_of(x)) rr = fit(d, std::min(xr->lo, xr->lo * n), std::max(xr->hi, xr->hi * n));
    }
    emit(s, d, shp(x), rr);
  }

  void gen_dot() {
    DType d = pick(std::vector<DType>{DType::f16, DType::bf16, DType::f32, DType::f64, DType::i8});
    std::vector<int64_t> dims = opt_.pow2 ? std::vector<int64_t>{1, 2, 4, 8, 16} : std::vector<int64_t>{1, 2, 3, 4, 5, 8, 16};
    if (opt_.max_numel >= 1024) dims.insert(dims.end(), {16, 32, 64, 64});  // tensor-core sizes
    int64_t M, N, K;
    do {
      M = pick(dims), N = pick(dims), K = pick(dims);
    } while (M * K > opt_.max_numel || K * N > opt_.max_numel || M * N > opt_.max_numel);
    DType acc = d == DType::i8 ? DType::i32 : d == DType::f64 ? DType::f64 : DType::f32;
    Stmt s;
    s.kind = Kind::Dot;
    if (opt_.portable && d != DType::i8) {
      // Small integers: every product and partial sum is exact, so any summation order (the
      // GPU's tensor-core trees) gives the CPU's result; the accumulator is never -0.0 (the sign
      // of a zero sum would depend on the order), and an absent one is +0.0.
      s.args = {small_int_load(d, {M, K}), small_int_load(d, {K, N}),
                coin(0.7) ? constant(acc, {M, N}, Literal::real(static_cast<double>(uni(-4, 4)))) : -1};
    } else {
      s.args = {operand(d, {M, K}), operand(d, {K, N}), coin(0.7) ? operand(acc, {M, N}) : -1};
    }
    s.op = d == DType::f32 ? pick(std::vector<int>{0, 0, 1, 2}) : 0;
    emit(s, acc, {M, N});
  }

  void gen_histogram() {
    int x = any_var([&](int v) { return tle::is_int(dt(v)) && dt(v) != DType::i1 && shp(v).size() == 1; }, DType::i32);
    if (!tle::is_int(dt(x)) || dt(x) == DType::i1) x = cast(x, DType::i32);
    if (shp(x).size() != 1) x = reshape(x, {numel(shp(x))});
    Stmt s;
    s.kind = Kind::Histogram;
    s.a = opt_.pow2 ? int64_t(1) << uni(0, 4) : uni(1, 24);
    s.args = {x, coin(0.4) ? operand_compat(DType::i1, shp(x)) : -1};
    s.op = coin(0.3) ? 1 : 0;  // histogram_ranks: i32 of x's shape, -1 .. numel - 1
    if (s.op == 1) emit(s, DType::i32, shp(x), Range{-1, numel(shp(x)) - 1});
    else emit(s, DType::i32, {s.a}, Range{0, numel(shp(x))});
  }

  /// sort / argsort / topk (values or indices) along a random axis: the values are elements of x.
  void gen_sort() {
    int x = any_var([&](int v) { return !shp(v).empty(); }, dtype_from_pool());
    if (shp(x).empty()) return;
    const int r = static_cast<int>(shp(x).size());
    const int ax = static_cast<int>(uni(0, r - 1));
    Stmt s;
    s.kind = Kind::Sort;
    s.args = {x};
    s.axis = coin(0.25) ? ax - r : ax;
    s.flag = coin(0.5);
    s.op = static_cast<int>(uni(0, 3));
    Shape sh = shp(x);
    const int64_t n = sh[static_cast<size_t>(ax)];
    if (s.op >= 2) {
      int64_t k = uni(1, n);
      if (opt_.pow2)
        for (k = 1; k * 2 <= n && coin(0.6);) k *= 2;
      s.a = k;
      sh[static_cast<size_t>(ax)] = k;
    }
    if (s.op == 1 || s.op == 3) emit(s, DType::i32, sh, Range{0, n - 1});
    else emit(s, dt(x), sh, rng_of(x));
  }

  /// gather along a random axis with an index tile of any integer dtype (out-of-range indices
  /// give 0, so any values will do).
  void gen_gather(int x = -1) {
    if (x < 0) x = any_var([&](int v) { return !shp(v).empty(); }, dtype_from_pool());
    if (shp(x).empty()) return;
    const int r = static_cast<int>(shp(x).size());
    const int ax = static_cast<int>(uni(0, r - 1));
    Shape ish = shp(x);
    ish[static_cast<size_t>(ax)] = opt_.pow2 ? int64_t(1) << uni(0, 3) : uni(1, 8);
    if (numel(ish) > opt_.max_numel) ish = shp(x);
    const DType id = pick(std::vector<DType>{DType::i32, DType::i64, DType::i8, DType::u8, DType::i16, DType::u32});
    Stmt s;
    s.kind = Kind::Gather;
    s.axis = coin(0.25) ? ax - r : ax;
    const int idx = operand(id, ish);
    s.args = {x, idx};
    MaybeRange rr = rng_of(x);
    if (rr) rr = Range{std::min<i128>(rr->lo, 0), std::max<i128>(rr->hi, 0)};
    emit(s, dt(x), ish, rr);
  }

  /// extract_tile / insert_tile (tle::TileIndex): a tile of any element type (fp8 and bool
  /// included), a sub-tile shape whose dims divide the tile's (powers of two under pow2: the
  /// divisors of one are), and each form of index: static linear id, static per-dim index, a
  /// dynamic integer scalar of any integer dtype (pid, loop variables, parameters, data; any value:
  /// outside the grid it wraps, docs/semantics.md), one i32 scalar per dim.
  void gen_subtile(int x = -1) {
    auto c = visible([&](int v) { return dt(v) != DType::ptr && !shp(v).empty(); });
    if (x < 0) x = !c.empty() && coin(0.85) ? pick(c) : operand(dtype_from_pool(), some_shape_nonscalar());
    const Shape xs = shp(x);
    Shape sub;
    for (int pass = 0; pass < 2; ++pass) {  // once more when the sub-tile came out as the whole tile
      sub.clear();
      for (int64_t d : xs) {
        std::vector<int64_t> divs;
        for (int64_t q = 1; q <= d; ++q)
          if (d % q == 0) divs.push_back(q);
        sub.push_back(pick(divs));
      }
      if (sub != xs) break;
    }
    Shape grid;
    int64_t count = 1;
    for (size_t i = 0; i < xs.size(); ++i) grid.push_back(xs[i] / sub[i]), count *= grid.back();
    Stmt s;
    s.kind = coin(0.5) ? Kind::ExtractTile : Kind::InsertTile;
    s.args = {x};
    if (s.kind == Kind::InsertTile) s.args.push_back(operand(dt(x), sub));
    s.op = static_cast<int>(uni(0, 3));
    if (s.op == 0) {
      s.index = {uni(0, count - 1)};
    } else if (s.op == 1) {
      for (int64_t g : grid) s.index.push_back(uni(0, g - 1));
    } else if (s.op == 2) {
      auto ints = visible([&](int v) { return tle::is_int(dt(v)) && dt(v) != DType::i1 && shp(v).empty(); });
      if (!ints.empty() && coin(0.8)) {
        s.args.push_back(pick(ints));
      } else {  // a constant, past the grid or negative now and then (it wraps)
        const DType id = pick(std::vector<DType>{DType::i32, DType::i64, DType::u8, DType::i16});
        s.args.push_back(iconst(id, tle::is_unsigned_int(id) ? uni(0, std::min<int64_t>(count + 1, 255)) : uni(-2, count + 1)));
      }
    } else {
      for (int64_t g : grid) {
        auto i32s = visible([&](int v) { return dt(v) == DType::i32 && shp(v).empty(); });
        s.args.push_back(!i32s.empty() && coin(0.6) ? pick(i32s) : iconst(DType::i32, uni(-1, g)));
      }
    }
    MaybeRange r = rng_of(x);
    if (s.kind == Kind::InsertTile) {
      const MaybeRange rs = rng_of(s.args[1]);
      r = r && rs ? MaybeRange(Range{std::min(r->lo, rs->lo), std::max(r->hi, rs->hi)}) : std::nullopt;
    } else {
      s.shape = sub;
    }
    emit(s, dt(x), s.kind == Kind::ExtractTile ? sub : xs, r);
  }

  /// fp8 (f8e4m3, f8e5m2), a storage type: an fp8 tile (loaded from an fp8 buffer, or cast from any
  /// dtype: floats, integers, bool), then what fp8 tiles take: casts to any dtype (the other fp8
  /// format too), where, shape ops, sub-tiles, gather, bitcasts to and from 8-bit integers, and
  /// dot of two tiles of one format into f32. No arithmetic (the front end refuses it); fp8 leaves
  /// are stored into fp8 buffers.
  void gen_fp8() {
    const DType f8 = coin(0.5) ? DType::f8e4m3 : DType::f8e5m2;
    auto fp8s = visible([&](int v) { return dt(v) == f8; });
    int x;
    const int src = static_cast<int>(uni(0, 9));
    if (!fp8s.empty() && src < 4) x = pick(fp8s);
    else if (src < 7) x = load(f8, coin(0.15) ? Shape{} : some_shape_nonscalar());
    else x = cast(any_var([](int) { return true; }, pick(std::vector<DType>{DType::f32, DType::f16, DType::bf16, DType::i32})), f8);
    switch (uni(0, 9)) {
      case 0: case 1: case 2: {  // back to a type that computes: any, with f32/f16/bf16 and integers often
        DType to = coin(0.5) ? pick(std::vector<DType>{DType::f32, DType::f16, DType::bf16, DType::i32, DType::u8, DType::i8})
                             : random_dtype();
        if (coin(0.1)) to = f8 == DType::f8e4m3 ? DType::f8e5m2 : DType::f8e4m3;
        cast(x, to);
        return;
      }
      case 3: {  // where(c, x, y)
        Stmt w;
        w.kind = Kind::Where;
        w.args = {operand_compat(DType::i1, shp(x)), x, operand_compat(f8, shp(x))};
        emit(w, f8, shp(x));
        return;
      }
      case 4: gen_shape(x); return;
      case 5: if (!shp(x).empty()) gen_gather(x); return;
      case 8: if (!shp(x).empty()) gen_subtile(x); return;
      case 6: {  // bitcasts: fp8 -> 8-bit integer (NaNs cleared first, through f16: fp8 compares are
                 // refused) or an 8-bit integer -> fp8 (any code: NaNs, E5M2's infinities, subnormals)
        Stmt b;
        b.kind = Kind::Bitcast;
        if (coin(0.5)) {
          const int h = cast(x, DType::f16);
          Stmt w;
          w.kind = Kind::Where;
          w.args = {compare(CmpPred::Ne, h, h), constant(f8, {}, Literal::real(0.0)), x};
          b.args = {emit(w, f8, shp(x))};
          b.to = coin(0.5) ? DType::i8 : DType::u8;
        } else {
          b.args = {operand(coin(0.5) ? DType::i8 : DType::u8, shp(x))};
          b.to = f8;
        }
        emit(b, b.to, shp(b.args[0]));
        return;
      }
      case 7: {  // dot of two fp8 tiles of one format into f32 (portable: small integers, as gen_dot)
        std::vector<int64_t> dims = opt_.pow2 ? std::vector<int64_t>{1, 2, 4, 8, 16} : std::vector<int64_t>{1, 2, 3, 4, 5, 8, 16};
        int64_t M, N, K;
        do M = pick(dims), N = pick(dims), K = pick(dims);
        while (M * K > opt_.max_numel || K * N > opt_.max_numel || M * N > opt_.max_numel);
        Stmt d;
        d.kind = Kind::Dot;
        if (opt_.portable)
          d.args = {small_int_load(f8, {M, K}), small_int_load(f8, {K, N}),
                    coin(0.5) ? constant(DType::f32, {M, N}, Literal::real(static_cast<double>(uni(-4, 4)))) : -1};
        else
          d.args = {operand(f8, {M, K}), operand(f8, {K, N}), coin(0.5) ? operand(DType::f32, {M, N}) : -1};
        emit(d, DType::f32, {M, N});
        return;
      }
      default: return;  // x itself: a leaf, stored into an fp8 buffer
    }
  }

  /// A load of shape sh from a buffer of dtype d holding integers in [-4, 4] (in bounds).
  int small_int_load(DType d, Shape sh) {
    const int buf = buffer_for(d, std::max<int64_t>(64, numel(sh)), Buffer::Index, -4, 4);
    return load_at(addptr(buf, permutation_offsets(sh)));
  }

  /// The K loop of a matrix product, as GEMM kernels write it (large-tile mode only):
  ///   acc = full(f32 [M, N], c);  for (k : range(0, T)) { a = load(A + ra * BK + k * BK + ca, ...);
  ///   b = load(B + (rb + k * BK) * N + cb, ...); acc = dot(a, b, acc); }
  /// with ragged masks on K now and then. The GPU backend pipelines such loads (cp.async, ldmatrix,
  /// mma.sync / wgmma); A and B hold T * M * BK and T * BK * N elements, so all offsets are in bounds.
  void gen_matmul_loop() {
    const DType d = pick(std::vector<DType>{DType::f16, DType::f16, DType::bf16, DType::f32});
    const int64_t M = pick(std::vector<int64_t>{16, 32, 64, 64}), N = pick(std::vector<int64_t>{8, 16, 32, 64});
    const int64_t BK = pick(std::vector<int64_t>{16, 32}), T = uni(1, 4);
    if (M * N > opt_.max_numel || M * BK > opt_.max_numel || BK * N > opt_.max_numel) return;
    // Portable: small integers (exact in any summation order, see gen_dot).
    const Buffer::Fill fill = opt_.portable ? Buffer::Index : Buffer::Special;
    const int64_t flo = opt_.portable ? -4 : 0, fhi = opt_.portable ? 4 : 0;
    const int A = buffer_for(d, T * M * BK, fill, flo, fhi), Bb = buffer_for(d, T * BK * N, fill, flo, fhi);
    // row-major [M, T*BK] and [T*BK, N]
    auto grid2 = [&](int64_t R, int64_t C, int64_t stride) {
      int r = reshape(arange(0, R), {R, 1});
      if (stride != 1) r = binary(BinaryOp::Mul, r, iconst(DType::i32, stride));
      return broadcast_to(binary(BinaryOp::Add, r, reshape(arange(0, C), {1, C})), {R, C});
    };
    const int oa = grid2(M, BK, T * BK), ob = grid2(BK, N, N);
    const int kcol = broadcast_to(reshape(arange(0, BK), {1, BK}), {M, BK});
    int acc = constant(DType::f32, {M, N},
                       coin(0.7)       ? Literal::real(0.0)
                       : opt_.portable ? Literal::real(static_cast<double>(uni(-4, 4)))
                                       : literal(DType::f32));
    Stmt s;
    s.kind = Kind::For;
    s.args = {-1, -1, -1};
    s.lo = 0, s.hi = T, s.step = 1;
    blocks_.back()->push_back(s);
    Stmt& loop = blocks_.back()->back();
    open_block(&loop.body);
    loop.result = fresh(DType::i32, {}, Range{0, T - 1});
    ivs_.push_back(loop.result);
    const int kb = binary(BinaryOp::Mul, loop.result, iconst(DType::i32, BK));
    int ma = -1, mb = -1;
    if (coin(0.3)) {  // a ragged K: columns k*BK + c < kmax (kmax = T*BK - n_param: a parameter)
      int kmax = binary(BinaryOp::Sub, iconst(DType::i32, T * BK), n_param_);
      ma = compare(CmpPred::Lt, binary(BinaryOp::Add, kcol, kb), kmax);
      mb = compare(CmpPred::Lt, binary(BinaryOp::Add, reshape(arange(0, BK), {BK, 1}), kb), kmax);
    }
    const int a = load_at(addptr(A, binary(BinaryOp::Add, oa, kb)), ma);
    const int b = load_at(addptr(Bb, binary(BinaryOp::Add, ob, binary(BinaryOp::Mul, kb, iconst(DType::i32, N)))), mb);
    Stmt dot;
    dot.kind = Kind::Dot;
    dot.args = {a, b, acc};
    dot.op = d == DType::f32 ? pick(std::vector<int>{0, 1}) : 0;
    const int next = emit(dot, DType::f32, {M, N});
    Stmt as;
    as.kind = Kind::Assign;
    as.result = acc;
    as.args = {next};
    emit_void(as);
    ivs_.pop_back();
    close_block();
    if (coin(0.5)) cast(acc, d == DType::f32 ? DType::f32 : d);  // the epilogue's narrowing (a leaf: stored)
  }

  /// A scalar bool variable (a branch condition).
  int scalar_cond() {
    auto c = visible([&](int v) { return dt(v) == DType::i1 && shp(v).empty(); });
    if (!c.empty() && coin(0.5)) return pick(c);
    int k = static_cast<int>(uni(0, 2));
    if (k == 0) return compare(static_cast<CmpPred>(uni(0, 5)), pid_, iconst(DType::i32, uni(0, P.programs())));
    if (k == 1) return compare(static_cast<CmpPred>(uni(0, 5)), t_param_, iconst(DType::i32, uni(0, 3)));
    // from data: a reduction of a tile down to a scalar, compared with a constant
    int x = any_var([&](int v) { return arith(dt(v)); }, DType::f32);
    if (!arith(dt(x))) x = cast(x, DType::i32);
    while (!shp(x).empty()) {
      Stmt s;
      s.kind = Kind::Reduce;
      s.op = static_cast<int>(coin(0.5) ? ir::ReduceKind::Max : ir::ReduceKind::Min);
      s.args = {x};
      Shape to = shp(x);
      to.erase(to.begin());
      x = emit(s, dt(x), to);
    }
    return compare(static_cast<CmpPred>(uni(0, 5)), x, constant(dt(x), {}, literal(dt(x))));
  }

  /// Assigns each of `vars` a new value of its type computed from what is visible (a
  /// loop-carried value or an if result); keeps each variable's known range. All new values are
  /// computed before the first assignment, so one may be another's old value (a swap).
  void assign_all(const std::vector<int>& vars) {
    std::vector<std::pair<int, int>> todo;
    for (int c : vars) {
      int w;
      DType d = dt(c);
      auto same = visible([&](int v) { return v != c && dt(v) == d && shp(v) == shp(c); });
      int k = static_cast<int>(uni(0, 9));
      if (k < 5 && !tle::is_fp8(d)) w = binary(static_cast<BinaryOp>(pick(binary_ops(d))), c, operand_compat(d, shp(c)));
      else if (k < 7 && !same.empty()) w = pick(same);
      else w = operand(d, shp(c));
      if (auto cr = rng_of(c)) {
        auto wr = rng_of(w);
        if (!wr || wr->lo < cr->lo || wr->hi > cr->hi) continue;  // would break the range others rely on
      }
      todo.emplace_back(c, w);
    }
    for (auto [c, w] : todo) {
      Stmt s;
      s.kind = Kind::Assign;
      s.result = c;
      s.args = {w};
      emit_void(s);
    }
  }

  std::vector<int> pick_assigned() {
    // Not the offsets of a program's own region (region_cache_) nor their permutation: a store
    // through a reassigned one could write another program's region (a race between programs;
    // the first GPU-stage run, seed 609: an if_ gave the offsets `3 - arange(4)` in one branch).
    auto c = visible([&](int v) {
      return dt(v) != DType::ptr && v != pid_ && v != n_param_ && v != t_param_ && !is_param(v) && !in_region_cache(v);
    });
    std::shuffle(c.begin(), c.end(), rng_);
    c.resize(std::min<size_t>(c.size(), static_cast<size_t>(uni(0, 3))));
    return c;
  }
  bool in_region_cache(int v) const {
    for (auto& c : region_cache_)
      if (c.offs == v || c.lin == v) return true;
    return false;
  }
  bool is_param(int v) const {
    for (auto& p : P.params)
      if (p.var == v) return true;
    return false;
  }

  void open_block(std::vector<Stmt>* b) {
    scopes_.push_back({});
    blocks_.push_back(b);
    ++depth_;
  }
  /// Stores the values of the current block that nothing reads (the leaves of its dataflow), so
  /// that every computation reaches memory and a wrong one shows.
  void store_leaves() {
    std::vector<int> leaves;
    for (int v : scopes_.back())
      if (uses(v) == 0 && dt(v) != DType::ptr && !is_param(v)) leaves.push_back(v);
    const size_t cap = depth_ == 0 ? 16 : 6;
    if (leaves.size() > cap) leaves.erase(leaves.begin(), leaves.end() - static_cast<std::ptrdiff_t>(cap));
    for (int v : leaves) store(v);
  }
  void close_block() {
    store_leaves();
    scopes_.pop_back();
    blocks_.pop_back();
    --depth_;
  }

  void gen_for() {
    Stmt s;
    s.kind = Kind::For;
    s.args = {-1, -1, -1};
    DType index = DType::i32;
    MaybeRange ivr;
    int k = static_cast<int>(uni(0, 9));
    if (k < 5) {  // literal bounds, a few trips either way
      s.step = pick(std::vector<int64_t>{1, 1, 2, 3, -1, -2});
      s.lo = uni(-3, 3);
      s.hi = s.lo + s.step * uni(0, 4) + (coin(0.2) ? uni(-1, 1) : 0);
      ivr = Range{std::min(s.lo, s.hi), std::max(s.lo, s.hi)};
    } else if (k < 7) {  // runtime upper bound t (a parameter in [0, 3])
      s.lo = uni(-1, 1);
      s.args[1] = t_param_;
      s.step = 1;
      ivr = Range{std::min<int64_t>(s.lo, 0), 3};
    } else {  // E24: bounds at the edge of the index type, as constants of that type
      index = pick(std::vector<DType>{DType::i8, DType::i16, DType::i32, DType::i64, DType::u8, DType::u32, DType::u64});
      const bool down = tle::is_signed_int(index) && coin(0.4);
      i128 edge = down ? dmin(index) : dmax(index);
      if (edge > dmax(DType::i64)) edge = dmax(DType::i64);  // u64: keep the literal in int64
      int64_t stepv = uni(1, 4) * (down ? -1 : 1);
      i128 start = edge - (down ? -1 : 1) * uni(0, 9);
      s.args[0] = iconst(index, static_cast<int64_t>(start));
      s.args[1] = iconst(index, static_cast<int64_t>(edge));
      s.args[2] = iconst(index, stepv);
      ivr = fit(index, std::min(start, edge), std::max(start, edge));
    }
    std::vector<int> carried = pick_assigned();
    // A pointer tile that walks through a buffer, k elements per trip (`p = p + k`, as the
    // pointers of a K loop do). Every loop here runs at most 10 trips, so offsets stay below
    // numel - 1 + 10 * 2 < size.
    int walker = -1, step = -1;
    if (coin(0.3)) {
      Shape sh = some_shape_nonscalar();
      DType d = dtype_from_pool();
      if (d == DType::i1) d = DType::i32;
      walker = addptr(buffer_for(d, numel(sh) + 24, Buffer::Special), permutation_offsets(sh));
      step = iconst(pick(std::vector<DType>{DType::i32, DType::i64, DType::u8}), uni(0, 2));
    }
    blocks_.back()->push_back(s);
    Stmt& loop = blocks_.back()->back();
    open_block(&loop.body);
    loop.result = fresh(index, {}, ivr);
    ivs_.push_back(loop.result);
    if (walker >= 0) load_at(walker);
    block(static_cast<int>(uni(1, 5)));
    assign_all(carried);
    if (walker >= 0) {
      Stmt a;
      a.kind = Kind::Assign;
      a.result = walker;
      a.args = {addptr(walker, step)};
      emit_void(a);
    }
    ivs_.pop_back();
    close_block();
  }

  void gen_if() {
    int c = scalar_cond();
    std::vector<int> assigned = pick_assigned();
    Stmt s;
    s.kind = Kind::If;
    s.args = {c};
    blocks_.back()->push_back(s);
    Stmt& st = blocks_.back()->back();
    open_block(&st.body);
    block(static_cast<int>(uni(0, 4)));
    assign_all(assigned);
    close_block();
    if (coin(0.7)) {
      open_block(&st.orelse);
      block(static_cast<int>(uni(0, 3)));
      assign_all(assigned);
      close_block();
    }
  }

  /// `n` random statements into the current block.
  void block(int n) {
    for (int i = 0; i < n; ++i) {
      // NB: blocks_.back() may move when a nested block appends to an enclosing vector, so
      // statements are always appended through blocks_.back().
      // 100..105: extract_tile / insert_tile and fp8 (about 3% of the statements each)
      int r = static_cast<int>(uni(0, 105));
      if (r >= 100) r < 103 ? gen_subtile() : gen_fp8();
      else if (r < 20) gen_binary();
      else if (r < 22) coin(0.5) ? gen_sort() : gen_gather();
      else if (r < 30) gen_compare();
      else if (r < 37) gen_unary();
      else if (r < 40) gen_fma();
      else if (r < 45) gen_where();
      else if (r < 52) gen_cast();
      else if (r < 55) gen_bitcast();
      else if (r < 62) gen_shape();
      else if (r < 68) gen_reduce();
      else if (r < 72) gen_scan();
      else if (r < 75) gen_dot();
      else if (r < 77) gen_histogram();
      else if (r < 82) load(dtype_from_pool(), coin(0.15) ? Shape{} : some_shape_nonscalar());
      else if (r < 85) store(any_var([](int) { return true; }, random_dtype()));
      else if (r < 87) atomic();
      else if (r < 88) gen_shared();
      else if (r < 90 && opt_.max_numel >= 1024 && depth_ < opt_.max_depth) gen_matmul_loop();
      else if (r < 94 && depth_ < opt_.max_depth) gen_for();
      else if (depth_ < opt_.max_depth) gen_if();
    }
  }
  Shape some_shape_nonscalar() {
    Shape s = some_shape();
    if (s.empty()) s = {4};
    return s;
  }
};

}  // namespace

Program generate(uint64_t seed, const GenOptions& opt) { return Gen(seed, opt).run(); }

}  // namespace fuzz
