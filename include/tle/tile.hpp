// tle/tile.hpp - the tile language: Tile<T>, Ptr<T>, operators and tile operations.
//
// Kernels are C++ lambdas run once per specialization while libtle records what they do (tracing).
// A Tile<T> is a handle to a value of the kernel: a tile of elements of type T whose shape is known
// at trace time (a scalar is a 0-d tile). Shapes come from C++ values (constexpr parameters), so
// plain C++ `if`/`for` over them run at trace time; device control flow is tle::range and tle::if_.
//
// Every operation takes the user's std::source_location (defaulted), and throws tle::UserError
// naming that file:line when the request is invalid (shape or dtype mismatch, bad axis, ...).
// Semantics of each operation, including NaN, integer division and rounding rules: docs/semantics.md.
#pragma once
#include <source_location>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tle/detail/trace_api.hpp"
#include "tle/dtype.hpp"
#include "tle/error.hpp"

namespace tle {

using Shape = std::vector<int64_t>;
using ir::Precision;
using loc_t = std::source_location;

template <class T> class Tile;
/// A tile of pointers to T (a kernel argument `Ptr<float>` is a scalar pointer).
template <class T> using Ptr = Tile<ptr_t<T>>;

/// A JIT-time constant kernel parameter: a plain C++ value while tracing (so tile shapes may come
/// from it), part of the specialization key at launch. Host side: pass a plain value.
template <class T> struct Constexpr {
  static_assert(std::is_arithmetic_v<T>, "Constexpr<T>: T must be an integer, bool or floating-point type");
  T value;
  constexpr operator T() const { return value; }
};

namespace detail {
template <class T> V value_of(const Tile<T>& t);
template <class T> struct is_constexpr : std::false_type {};
template <class T> struct is_constexpr<Constexpr<T>> : std::true_type {};
template <class T> struct is_tile : std::false_type {};
template <class T> struct is_tile<Tile<T>> : std::true_type {};

template <class T> concept Arith = ScalarElement<T> && !std::is_same_v<T, bool>;
template <class T> concept FloatElem = Arith<T> && is_float(dtype_of<T>::value);
template <class T> concept IntElem = Arith<T> && is_int(dtype_of<T>::value);
template <class T> concept BoolOrInt = std::is_same_v<T, bool> || IntElem<T>;
template <class T> concept HostScalar = std::is_arithmetic_v<T>;

/// A tile of U may be used where a tile of T is expected when U promotes into T.
template <class U, class T> concept PromotesInto = ScalarElement<U> && ScalarElement<T> &&
    (promote(dtype_of<U>::value, dtype_of<T>::value) == dtype_of<T>::value);
/// A C++ scalar of type U may be used with a tile of T ("weak" scalars take the tile's type):
/// any arithmetic value with a float tile; integers and bool with an integer tile; bool with bool.
template <class U, class T> concept ScalarInto = HostScalar<U> && ScalarElement<T> &&
    (is_float(dtype_of<T>::value) ? true
     : std::is_same_v<T, bool>    ? std::is_same_v<U, bool>
                                  : std::is_integral_v<U>);

template <class T, class U> V host_constant(U x, const SrcLoc& loc) {
  constexpr DType d = dtype_of<T>::value;
  if constexpr (std::is_floating_point_v<U>) return constant_float(d, static_cast<double>(x), loc);
  else if constexpr (std::is_same_v<U, bool>) return constant_int(d, x ? 1 : 0, loc);
  else if constexpr (std::is_signed_v<U>) return constant_int(d, static_cast<int64_t>(x), loc);
  else return constant_uint(d, static_cast<uint64_t>(x), loc);
}
}  // namespace detail

/// An operand of an operation on tiles of T, with the user's source position of the expression.
/// Built implicitly from a Tile<U> with U promoting into T (a cast is recorded), or from a C++
/// scalar (recorded as a constant of type T; an integer that does not fit T is a UserError).
template <class T> struct Operand {
  detail::V v;
  SrcLoc loc;
  template <class U>
    requires detail::PromotesInto<U, T>
  Operand(const Tile<U>& t, loc_t l = loc_t::current()) : loc(l) {
    v = detail::value_of(t);
    detail::require_value(v, loc);
    if constexpr (!std::is_same_v<U, T>) v = detail::convert(v, detail::dtype_of<T>::value, loc);
  }
  template <class U>
    requires detail::ScalarInto<U, T>
  Operand(U x, loc_t l = loc_t::current()) : v(detail::host_constant<T>(x, l)), loc(l) {}
  template <class U>
    requires detail::ScalarInto<U, T>
  Operand(Constexpr<U> x, loc_t l = loc_t::current()) : v(detail::host_constant<T>(x.value, l)), loc(l) {}
};
/// An operand of an ordering comparison (<, <=, >, >=): as Operand, but never a boolean, so that a
/// chained comparison such as `a < b < c` does not compile (edge case E25).
template <class T> struct Ordered : Operand<T> {
  template <class U>
    requires(detail::PromotesInto<U, T> && !std::is_same_v<U, bool>)
  Ordered(const Tile<U>& t, loc_t l = loc_t::current()) : Operand<T>(t, l) {}
  template <class U>
    requires(detail::ScalarInto<U, T> && !std::is_same_v<U, bool>)
  Ordered(U x, loc_t l = loc_t::current()) : Operand<T>(x, l) {}
  template <class U>
    requires(detail::ScalarInto<U, T> && !std::is_same_v<U, bool>)
  Ordered(Constexpr<U> x, loc_t l = loc_t::current()) : Operand<T>(x.value, l) {}
};
/// An integer offset for pointer arithmetic: any integer tile or C++ integer.
struct Offset {
  detail::V v;
  SrcLoc loc;
  template <class U>
    requires detail::IntElem<U>
  Offset(const Tile<U>& t, loc_t l = loc_t::current()) : v(detail::value_of(t)), loc(l) {
    detail::require_value(v, loc);
  }
  template <class U>
    requires std::is_integral_v<U>
  Offset(U x, loc_t l = loc_t::current())
      : v(detail::constant_int(DType::i64, static_cast<int64_t>(x), l)), loc(l) {}
  template <class U>
    requires std::is_integral_v<U>
  Offset(Constexpr<U> x, loc_t l = loc_t::current())
      : v(detail::constant_int(DType::i64, static_cast<int64_t>(x.value), l)), loc(l) {}
};

/// A tile of elements of type T. Copying a Tile copies the handle (values are immutable SSA
/// values); assigning to a Tile inside tle::range / tle::if_ makes it loop-carried / an if result.
template <class T> class Tile : private detail::HandleBase {
  static_assert(detail::Element<T>, "Tile<T>: T must be bool, a fixed-width integer, f16, bf16, f8e4m3, f8e5m2, "
                                    "float, double or ptr_t<U>");

 public:
  using element_type = T;
  static constexpr DType dtype = detail::dtype_of<T>::value;

  /// An empty handle, to be assigned later (e.g. in both branches of tle::if_).
  Tile() noexcept { detail::attach(this); }
  /// Wraps a traced value (used by tle itself).
  explicit Tile(detail::V value) noexcept { v = value; detail::attach(this); }
  Tile(const Tile& o) noexcept : detail::HandleBase() { v = o.v; detail::attach(this); }
  /// A scalar constant (weak C++ scalar rules as in Operand).
  template <class U>
    requires detail::ScalarInto<U, T>
  Tile(U x, loc_t l = loc_t::current()) {
    v = detail::host_constant<T>(x, l);
    detail::attach(this);
  }
  /// A tile of a type that promotes into T (records a cast).
  template <class U>
    requires(detail::PromotesInto<U, T> && !std::is_same_v<U, T>)
  Tile(const Tile<U>& o, loc_t l = loc_t::current()) {
    v = Operand<T>(o, l).v;
    detail::attach(this);
  }
  ~Tile() { detail::detach(this); }
  /// Assigning registers a handle made outside any trace (a static or global Tile) with the
  /// current trace, so that it too is marked stale when the trace ends.
  Tile& operator=(const Tile& o) noexcept {
    v = o.v;
    detail::attach(this);
    return *this;
  }
  // Assigning a C++ scalar or a tile of a promotable type goes through the converting
  // constructors above, whose defaulted source_location is the user's assignment.

  /// The traced shape ([] for a scalar). UserError if the Tile outlived its kernel's trace.
  Shape shape(loc_t l = loc_t::current()) const { return detail::shape_of_value(v, l); }
  int rank(loc_t l = loc_t::current()) const { return static_cast<int>(shape(l).size()); }
  detail::V value() const { return v; }

  /// Value conversion to a tile of U (float->int saturates, NaN->0; see docs/semantics.md).
  template <class U> Tile<U> to(loc_t l = loc_t::current()) const {
    detail::require_value(v, l);
    return Tile<U>(detail::convert(v, detail::dtype_of<U>::value, l));
  }

  // ---- arithmetic (numeric, non-boolean tiles)
  friend Tile operator+(Operand<T> a, Operand<T> b) requires detail::Arith<T> { return bin(ir::BinaryOp::Add, a, b); }
  friend Tile operator-(Operand<T> a, Operand<T> b) requires detail::Arith<T> { return bin(ir::BinaryOp::Sub, a, b); }
  friend Tile operator*(Operand<T> a, Operand<T> b) requires detail::Arith<T> { return bin(ir::BinaryOp::Mul, a, b); }
  /// Division: IEEE for floats; truncation toward zero for integers, x / 0 == 0 (docs/semantics.md).
  friend Tile operator/(Operand<T> a, Operand<T> b) requires detail::Arith<T> { return bin(ir::BinaryOp::Div, a, b); }
  /// Integer remainder with the sign of the dividend (C++), x % 0 == x.
  friend Tile operator%(Operand<T> a, Operand<T> b) requires detail::IntElem<T> { return bin(ir::BinaryOp::Rem, a, b); }
  friend Tile operator&(Operand<T> a, Operand<T> b) requires detail::BoolOrInt<T> { return bin(ir::BinaryOp::And, a, b); }
  friend Tile operator|(Operand<T> a, Operand<T> b) requires detail::BoolOrInt<T> { return bin(ir::BinaryOp::Or, a, b); }
  friend Tile operator^(Operand<T> a, Operand<T> b) requires detail::BoolOrInt<T> { return bin(ir::BinaryOp::Xor, a, b); }
  /// Shifts by >= the bit width give 0 (or the sign fill for a signed >>).
  friend Tile operator<<(Operand<T> a, Operand<T> b) requires detail::IntElem<T> { return bin(ir::BinaryOp::Shl, a, b); }
  friend Tile operator>>(Operand<T> a, Operand<T> b) requires detail::IntElem<T> { return bin(ir::BinaryOp::Shr, a, b); }
  /// Logical and/or of boolean tiles (both sides are always evaluated: they are tiles).
  friend Tile operator&&(Operand<T> a, Operand<T> b) requires std::is_same_v<T, bool> { return bin(ir::BinaryOp::And, a, b); }
  friend Tile operator||(Operand<T> a, Operand<T> b) requires std::is_same_v<T, bool> { return bin(ir::BinaryOp::Or, a, b); }

  // Unary operators take an Operand too, so that their errors carry the user's position.
  friend Tile operator-(Operand<T> a) requires detail::Arith<T> { return un(ir::UnaryOp::Neg, a); }
  friend Tile operator~(Operand<T> a) requires detail::IntElem<T> { return un(ir::UnaryOp::Not, a); }
  friend Tile operator!(Operand<T> a) requires std::is_same_v<T, bool> { return un(ir::UnaryOp::Not, a); }

  // ---- comparisons (result: Tile<bool>). Floats compare ordered: NaN is unequal to everything.
  friend Tile<bool> operator==(Operand<T> a, Operand<T> b) requires detail::ScalarElement<T> { return cmp(ir::CmpPred::Eq, a, b); }
  friend Tile<bool> operator!=(Operand<T> a, Operand<T> b) requires detail::ScalarElement<T> { return cmp(ir::CmpPred::Ne, a, b); }
  friend Tile<bool> operator<(Ordered<T> a, Ordered<T> b) requires detail::Arith<T> { return cmp(ir::CmpPred::Lt, a, b); }
  friend Tile<bool> operator<=(Ordered<T> a, Ordered<T> b) requires detail::Arith<T> { return cmp(ir::CmpPred::Le, a, b); }
  friend Tile<bool> operator>(Ordered<T> a, Ordered<T> b) requires detail::Arith<T> { return cmp(ir::CmpPred::Gt, a, b); }
  friend Tile<bool> operator>=(Ordered<T> a, Ordered<T> b) requires detail::Arith<T> { return cmp(ir::CmpPred::Ge, a, b); }

  // ---- pointer arithmetic: p + offset advances by offset elements (offsets are widened to 64 bits)
  friend Tile operator+(const Tile& p, Offset off) requires detail::is_ptr<T>::value { return ptr_add(p, off); }
  friend Tile operator+(Offset off, const Tile& p) requires detail::is_ptr<T>::value { return ptr_add(p, off); }

  // ---- compound assignment
  Tile& operator+=(Operand<T> b) requires detail::Arith<T> { return *this = bin(ir::BinaryOp::Add, self(b.loc), b); }
  Tile& operator-=(Operand<T> b) requires detail::Arith<T> { return *this = bin(ir::BinaryOp::Sub, self(b.loc), b); }
  Tile& operator*=(Operand<T> b) requires detail::Arith<T> { return *this = bin(ir::BinaryOp::Mul, self(b.loc), b); }
  Tile& operator/=(Operand<T> b) requires detail::Arith<T> { return *this = bin(ir::BinaryOp::Div, self(b.loc), b); }
  Tile& operator+=(Offset off) requires detail::is_ptr<T>::value { return *this = ptr_add(*this, off); }

 private:
  template <class> friend class Tile;
  template <class U> friend detail::V detail::value_of(const Tile<U>&);
  Operand<T> self(const SrcLoc& l) const {
    Operand<T> o = *this;
    o.loc = l;
    return o;
  }
  static Tile bin(ir::BinaryOp op, const Operand<T>& a, const Operand<T>& b) {
    return Tile(detail::binary(op, a.v, b.v, dtype, b.loc));
  }
  static Tile<bool> cmp(ir::CmpPred p, const Operand<T>& a, const Operand<T>& b) {
    return Tile<bool>(detail::compare(p, a.v, b.v, dtype, b.loc));
  }
  static Tile un(ir::UnaryOp op, const Operand<T>& a) { return Tile(detail::unary(op, a.v, a.loc)); }
  static Tile ptr_add(const Tile& p, const Offset& off) {
    detail::require_value(p.v, off.loc);
    return Tile(detail::addptr(p.v, off.v, off.loc));
  }
};

template <class T> detail::V detail::value_of(const Tile<T>& t) { return t.v; }

// ============================================================== creation

/// The index of this program (CTA) along `axis` (0, 1 or 2) of the launch grid; i32 scalar.
inline Tile<int32_t> program_id(int axis, loc_t l = loc_t::current()) { return Tile<int32_t>(detail::program_id(axis, l)); }
/// The number of programs along `axis` of the launch grid; i32 scalar.
inline Tile<int32_t> num_programs(int axis, loc_t l = loc_t::current()) { return Tile<int32_t>(detail::num_programs(axis, l)); }
/// i32 tile [end - start] holding start, start+1, ..., end-1. Bounds are trace-time constants;
/// end > start (a 0-sized tile is a UserError, rule E07).
inline Tile<int32_t> arange(int64_t start, int64_t end, loc_t l = loc_t::current()) {
  return Tile<int32_t>(detail::arange(start, end, l));
}
/// arange bounds must be known at trace time: passing a runtime tile is reported at the call.
template <class A, class B>
  requires(detail::is_tile<A>::value || detail::is_tile<B>::value)
Tile<int32_t> arange(const A&, const B&, loc_t l = loc_t::current()) {
  throw UserError(l, "arange bounds must be known at trace time (C++ integers or Constexpr parameters), not "
                     "runtime tiles; make the bound a Constexpr parameter");
}
/// A tile of `shape` with every element equal to `value` (a C++ scalar or a scalar tile of T).
template <class T> Tile<T> full(const Shape& shape, Operand<T> value, loc_t l = loc_t::current()) {
  return Tile<T>(detail::full(shape, value.v, l));
}
template <class T> Tile<T> zeros(const Shape& shape, loc_t l = loc_t::current()) {
  if constexpr (std::is_same_v<T, bool>) return full<T>(shape, Operand<T>(false, l), l);  // bool takes only bool scalars
  else return full<T>(shape, Operand<T>(0, l), l);
}

// ============================================================== conversions

/// Value conversion (see Tile::to). Narrowing float conversions round once, to nearest even.
template <class U, class T> Tile<U> cast(const Tile<T>& x, loc_t l = loc_t::current()) { return x.template to<U>(l); }
/// Reinterprets the bits as U (same bit width, not bool).
template <class U, class T> Tile<U> bitcast(const Tile<T>& x, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  return Tile<U>(detail::bitcast(x.value(), detail::dtype_of<U>::value, l));
}

// ============================================================== math
#define TLE_FLOAT_UNARY(fn, code, doc)                                                   \
  /** doc; float tiles (f16/bf16 computed in f32, rounded once). */                      \
  template <detail::FloatElem T> Tile<T> fn(const Tile<T>& x, loc_t l = loc_t::current()) { \
    detail::require_value(x.value(), l);                                                 \
    return Tile<T>(detail::unary(ir::UnaryOp::code, x.value(), l));                      \
  }
TLE_FLOAT_UNARY(exp, Exp, e^x)
TLE_FLOAT_UNARY(exp2, Exp2, 2^x)
TLE_FLOAT_UNARY(log, Log, natural logarithm)
TLE_FLOAT_UNARY(log2, Log2, base-2 logarithm)
TLE_FLOAT_UNARY(sqrt, Sqrt, square root)
TLE_FLOAT_UNARY(rsqrt, Rsqrt, 1 / sqrt(x))
TLE_FLOAT_UNARY(floor, Floor, round toward -inf)
TLE_FLOAT_UNARY(ceil, Ceil, round toward +inf)
TLE_FLOAT_UNARY(round, Round, round to the nearest integer with halfway cases away from zero (C round))
TLE_FLOAT_UNARY(rint, Rint, round to the nearest integer with halfway cases to even (C rint / nearbyint; no FP exceptions))
TLE_FLOAT_UNARY(nearbyint, Rint, the same as rint (C nearbyint))
TLE_FLOAT_UNARY(sin, Sin, sine (radians))
TLE_FLOAT_UNARY(cos, Cos, cosine (radians))
TLE_FLOAT_UNARY(tanh, Tanh, hyperbolic tangent)
TLE_FLOAT_UNARY(erf, Erf, error function)
#undef TLE_FLOAT_UNARY
/// |x| for numeric tiles (integers wrap: abs(INT_MIN) == INT_MIN).
template <detail::Arith T> Tile<T> abs(const Tile<T>& x, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  return Tile<T>(detail::unary(ir::UnaryOp::Abs, x.value(), l));
}
/// a * b + c with a single rounding (float tiles; operands broadcast).
template <detail::FloatElem T>
Tile<T> fma(const Tile<T>& a, std::type_identity_t<Operand<T>> b, std::type_identity_t<Operand<T>> c,
            loc_t l = loc_t::current()) {
  detail::require_value(a.value(), l);
  return Tile<T>(detail::fma(a.value(), b.v, c.v, l));
}
/// Elementwise maximum / minimum; NaN propagates (rule E02).
template <detail::Arith T>
Tile<T> maximum(const Tile<T>& a, std::type_identity_t<Operand<T>> b, loc_t l = loc_t::current()) {
  detail::require_value(a.value(), l);
  return Tile<T>(detail::binary(ir::BinaryOp::Max, a.value(), b.v, Tile<T>::dtype, l));
}
template <detail::Arith T>
Tile<T> minimum(const Tile<T>& a, std::type_identity_t<Operand<T>> b, loc_t l = loc_t::current()) {
  detail::require_value(a.value(), l);
  return Tile<T>(detail::binary(ir::BinaryOp::Min, a.value(), b.v, Tile<T>::dtype, l));
}
/// min(max(x, lo), hi); NaN in x propagates.
template <detail::Arith T>
Tile<T> clamp(const Tile<T>& x, std::type_identity_t<Operand<T>> lo, std::type_identity_t<Operand<T>> hi,
              loc_t l = loc_t::current()) {
  return minimum(maximum(x, lo, l), hi, l);
}
/// x^y and atan2(y, x) for float tiles.
template <detail::FloatElem T>
Tile<T> pow(const Tile<T>& x, std::type_identity_t<Operand<T>> y, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  return Tile<T>(detail::binary(ir::BinaryOp::Pow, x.value(), y.v, Tile<T>::dtype, l));
}

/// cond ? a : b elementwise, with broadcasting; a and b promote to a common type.
template <class T>
Tile<T> where(const Tile<bool>& c, const Tile<T>& a, std::type_identity_t<Operand<T>> b, loc_t l = loc_t::current()) {
  detail::require_value(c.value(), l);
  detail::require_value(a.value(), l);
  return Tile<T>(detail::select(c.value(), a.value(), b.v, Tile<T>::dtype, l));
}
template <class S, class T>
  requires detail::ScalarInto<S, T>
Tile<T> where(const Tile<bool>& c, S a, const Tile<T>& b, loc_t l = loc_t::current()) {
  detail::require_value(c.value(), l);
  detail::require_value(b.value(), l);
  return Tile<T>(detail::select(c.value(), Operand<T>(a, l).v, b.value(), Tile<T>::dtype, l));
}

/// The smallest power of two >= n, for host code choosing tile sizes (Triton's
/// triton.next_power_of_2): 1 -> 1, 3 -> 4, 1000 -> 1024, 2^31 + 1 -> 2^32. As Triton's, 0 gives 0.
/// n must be in [0, 2^62]: a larger n has no power of two >= n in int64_t, and a negative n none
/// at all; both throw UserError at the caller (a compile error in a constant expression).
constexpr int64_t next_power_of_2(int64_t n, loc_t l = loc_t::current()) {
  if (n < 0 || n > (int64_t(1) << 62))
    throw UserError(l, "next_power_of_2: n = " + std::to_string(n) + " is outside [0, 2^62] (the powers of two "
                       "an int64_t holds)");
  uint64_t v = static_cast<uint64_t>(n) - 1;  // 0 -> all ones -> 0, as Triton
  for (int s = 1; s < 64; s *= 2) v |= v >> s;
  return static_cast<int64_t>(v + 1);
}

/// Ceiling division: cdiv(a, b) = ceil(a / b) for integers of either sign (cdiv(-36, 5) == -7).
constexpr int64_t cdiv(int64_t a, int64_t b) { return a / b + ((a % b != 0) && ((a < 0) == (b < 0)) ? 1 : 0); }
template <detail::IntElem T> Tile<T> cdiv(const Tile<T>& a, std::type_identity_t<Operand<T>> b, loc_t l = loc_t::current()) {
  Operand<T> av(a, l);
  Tile<T> q(detail::binary(ir::BinaryOp::Div, av.v, b.v, Tile<T>::dtype, l));
  Tile<T> r(detail::binary(ir::BinaryOp::Rem, av.v, b.v, Tile<T>::dtype, l));
  Tile<T> bt(b.v);  // b may be a scalar or a tile (broadcast by the comparisons below)
  Tile<bool> up = (r != 0) & ((r < 0) == (bt < 0));
  return q + up.template to<T>(l);
}

/// Coalescing hints: every element is a multiple of `n` / runs of `n` contiguous values.
template <detail::IntElem T> Tile<T> multiple_of(const Tile<T>& x, int64_t n, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  return Tile<T>(detail::hint(x.value(), n, 0, l));
}
template <detail::IntElem T> Tile<T> max_contiguous(const Tile<T>& x, int64_t n, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  return Tile<T>(detail::hint(x.value(), 0, n, l));
}

// ============================================================== inline PTX

/// One argument of tle::inline_asm: a tile (or scalar tile) of any integer or floating-point type.
/// C++ scalars need an explicit type: `Tile<int32_t>(3)`.
struct AsmArg {
  detail::V v;
  template <class U>
    requires detail::Arith<U>
  AsmArg(const Tile<U>& t) : v(detail::value_of(t)) {}
};

/// Elementwise inline PTX (Triton's inline_asm_elementwise): runs the PTX snippet `asm_text` once
/// per group of `pack` elements of the arguments, which broadcast to one shape like the operands of
/// other elementwise ops (each keeps its dtype); the result is a Tile<R> of that shape.
///
/// `constraints` are LLVM inline-asm constraints, outputs first: "=r,r,r" for an i32 result of two
/// i32 operands; `$0` is the result register, `$1`... the operands'. Letters: 'h' 16-bit (i16, u16,
/// f16, bf16 as bits), 'r' 32-bit (i32, u32, or f32 as bits), 'f' f32, 'l' 64-bit (or f64 as bits),
/// 'd' f64. With pack > 1, narrow elements share a register (two 16-bit elements per 'r', element
/// k in bits [16k, 16k+16); four 8-bit per 'r', two per 'h'), and 32/64-bit values take `pack`
/// registers each, so "ex2.approx.f16x2 $0, $1;" is pack = 2 with "=r,r". 8-bit tiles need
/// pack >= 2; bool and pointer tiles are not supported. Checked at trace time (UserError here):
/// the asm is not empty, the number of register constraints equals the result's plus the
/// operands' registers, each letter fits its value's dtype, `$n` stays in range; optional trailing
/// clobbers such as "~{memory}" are passed through.
///
/// `pure` (the default) promises no side effects: the op may be merged with an identical one
/// (CSE) or deleted when its result is unused; pure = false keeps every one (LLVM: has side
/// effects). The snippet must compute element k of the result from element k of the arguments
/// only; a thread runs it for every element it holds, replicated elements included.
///
/// GPU backend only: compiling a kernel that uses it for the CPU backend throws UserError at this
/// call ("inline_asm runs on the GPU backend only"), docs/semantics.md.
template <detail::Arith R>
Tile<R> inline_asm(const std::string& asm_text, const std::string& constraints, const std::vector<AsmArg>& args,
                   bool pure = true, int pack = 1, loc_t l = loc_t::current()) {
  std::vector<detail::V> vs;
  vs.reserve(args.size());
  for (const AsmArg& a : args) vs.push_back(a.v);
  return Tile<R>(detail::inline_asm(detail::dtype_of<R>::value, asm_text, constraints, std::move(vs), pure, pack, l));
}

// ============================================================== shapes

/// Inserts a dimension of size 1 at `axis` (0..rank; negative counts from the end).
template <class T> Tile<T> expand_dims(const Tile<T>& x, int axis, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  return Tile<T>(detail::expand_dims(x.value(), axis, l));
}
/// Broadcasts numpy-style to `shape`.
template <class T> Tile<T> broadcast_to(const Tile<T>& x, const Shape& shape, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  return Tile<T>(detail::broadcast_to(x.value(), shape, l));
}
/// Same elements in row-major order, new shape with the same element count.
template <class T> Tile<T> reshape(const Tile<T>& x, const Shape& shape, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  return Tile<T>(detail::reshape(x.value(), shape, l));
}
/// Result dimension i is x's dimension order[i].
template <class T> Tile<T> permute(const Tile<T>& x, const std::vector<int>& order, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  return Tile<T>(detail::permute(x.value(), order, l));
}
/// Transpose of a 2-D tile (permute {1, 0}); another rank is a UserError naming trans.
template <class T> Tile<T> trans(const Tile<T>& x, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  return Tile<T>(detail::trans(x.value(), l));
}

/// Which sub-tile extract_tile / insert_tile address, in the grid that views a tile of shape X as
/// sub-tiles of shape S (grid G, G[d] = X[d] / S[d], sub-tile ids row-major over G):
///   - a C++ integer (or an integer Constexpr parameter): the static linear id (0 .. prod(G) - 1);
///   - `{i, j, ...}` of C++ integers: the static index per grid dim (0 .. G[d] - 1);
///   - an integer scalar Tile: the dynamic linear id;
///   - `{ti, tj, ...}` of i32 scalar Tiles (C++ integers may be mixed in): the dynamic index per
///     grid dim, linearized row-major in i32 (sum of index[d] * stride[d]).
/// A static index outside the grid is a UserError. A dynamic one outside it addresses the sub-tile
/// whose per-dim index is (u / stride[d]) mod G[d], u the linear id as an unsigned 32-bit number
/// (so it never reads or writes outside the tile).
class TileIndex {
 public:
  TileIndex(int64_t linear) { s_.ints = {linear}; }
  template <class C>
    requires(detail::is_constexpr<C>::value && std::is_integral_v<decltype(C::value)>)
  TileIndex(C linear) : TileIndex(static_cast<int64_t>(linear.value)) {}
  TileIndex(std::initializer_list<int64_t> per_dim) : TileIndex() {
    s_.ints.assign(per_dim.begin(), per_dim.end());
    s_.multi = true;
  }
  TileIndex(std::initializer_list<Constexpr<int>> per_dim) : TileIndex() {  // {I, J} of Constexpr parameters
    for (const auto& c : per_dim) s_.ints.push_back(c.value);
    s_.multi = true;
  }
  template <detail::IntElem I> TileIndex(const Tile<I>& linear, loc_t l = loc_t::current()) {
    detail::require_value(linear.value(), l);
    s_.values = {linear.value()};
  }
  TileIndex(std::initializer_list<Operand<int32_t>> per_dim) {
    for (const auto& o : per_dim) s_.values.push_back(o.v);
    s_.multi = true;
  }
  const detail::SubTileIndex& spec() const { return s_; }

 private:
  TileIndex() = default;
  detail::SubTileIndex s_;
};

/// View x (rank >= 1) as a grid of sub-tiles of the trace-time shape `sub` (same rank; every dim
/// of x a multiple of sub's) and return the one at `index` (TileIndex; FlagTree's
/// tle.extract_tile). UserError at the call's line: rank differs, a dim does not divide, a static
/// index outside the grid, a dynamic index that is not an integer scalar. On the GPU a static
/// index whose sub-tile each thread holds in whole registers costs no instruction; other cases go
/// through shared memory (one barrier each way).
template <class T>
Tile<T> extract_tile(const Tile<T>& x, const TileIndex& index, const Shape& sub, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  return Tile<T>(detail::extract_tile(x.value(), index.spec(), sub, l));
}
/// x with the sub-tile at `index` (of the grid of sub's shape, as extract_tile) replaced by sub,
/// which has x's element type (UserError otherwise, and for the shape errors of extract_tile).
template <class T>
Tile<T> insert_tile(const Tile<T>& x, const Tile<T>& sub, const TileIndex& index, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  detail::require_value(sub.value(), l);
  return Tile<T>(detail::insert_tile(x.value(), sub.value(), index.spec(), l));
}
template <class T, class U>
  requires(!std::is_same_v<T, U>)
Tile<T> insert_tile(const Tile<T>& x, const Tile<U>& sub, const TileIndex& index, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  detail::require_value(sub.value(), l);
  return Tile<T>(detail::insert_tile(x.value(), sub.value(), index.spec(), l));  // throws: dtypes differ
}

// ============================================================== memory

/// Cache and eviction hints of a load or store (PTX ISA 9.7.9.8 ld, 9.7.9.10 st): `cache`, a cache
/// operator (loads: .ca .cg .cs .lu .cv; stores: .wb .cg .cs .wt), OR `evict`, an L1 eviction
/// priority (evict_first, evict_last, evict_normal; e.g. evict_last for weights every program
/// reads, evict_first for data read once), not both; `is_volatile` (ld/st.volatile) takes neither.
/// On the GPU they become the instruction's modifiers; the CPU backend ignores them.
/// `is_async` (loads only; FlagTree's tle.load(..., is_async=True)): the load may be issued early as
/// an asynchronous copy into shared memory (cp.async, sm_80+) and read from there later; the value
/// is the same as without it. On the GPU a load directly in the body of an innermost tle::range
/// loop that writes no memory (or whose range carries {.num_stages}) is then software-pipelined
/// like the loads of a hinted loop (LoopOptions::num_stages; depth: the hint, else the launch's
/// num_stages, at least 2), when its pointer, mask and other qualify as documented there; any other
/// load stays an ordinary load. The CPU backend and the interpreter ignore it.
/// An unknown or conflicting hint (also is_async on a store or with is_volatile) is a UserError at
/// the call's line.
using MemHints = detail::MemHints;

/// Loads *p for every element of the pointer tile p. Where `mask` is false nothing is read and the
/// element is `other` (0 when not given, rule E01). mask and other broadcast to p's shape.
template <class T> Tile<T> load(const Ptr<T>& p, loc_t l = loc_t::current()) {
  detail::require_value(p.value(), l);
  return Tile<T>(detail::load(p.value(), nullptr, nullptr, {}, l));
}
template <class T> Tile<T> load(const Ptr<T>& p, const MemHints& hints, loc_t l = loc_t::current()) {
  detail::require_value(p.value(), l);
  return Tile<T>(detail::load(p.value(), nullptr, nullptr, hints, l));
}
template <class T> Tile<T> load(const Ptr<T>& p, const Tile<bool>& mask, loc_t l = loc_t::current()) {
  detail::require_value(p.value(), l);
  detail::require_value(mask.value(), l);
  return Tile<T>(detail::load(p.value(), mask.value(), nullptr, {}, l));
}
template <class T>
Tile<T> load(const Ptr<T>& p, const Tile<bool>& mask, const MemHints& hints, loc_t l = loc_t::current()) {
  detail::require_value(p.value(), l);
  detail::require_value(mask.value(), l);
  return Tile<T>(detail::load(p.value(), mask.value(), nullptr, hints, l));
}
template <class T>
Tile<T> load(const Ptr<T>& p, const Tile<bool>& mask, std::type_identity_t<Operand<T>> other, const MemHints& hints = {},
             loc_t l = loc_t::current()) {
  detail::require_value(p.value(), l);
  detail::require_value(mask.value(), l);
  return Tile<T>(detail::load(p.value(), mask.value(), other.v, hints, l));
}
/// Stores v (broadcast and converted to T) to every pointer of p where mask is true.
template <class T> void store(const Ptr<T>& p, std::type_identity_t<Operand<T>> v, loc_t l = loc_t::current()) {
  detail::require_value(p.value(), l);
  detail::store(p.value(), v.v, nullptr, {}, l);
}
template <class T>
void store(const Ptr<T>& p, std::type_identity_t<Operand<T>> v, const Tile<bool>& mask, const MemHints& hints = {},
           loc_t l = loc_t::current()) {
  detail::require_value(p.value(), l);
  detail::require_value(mask.value(), l);
  detail::store(p.value(), v.v, mask.value(), hints, l);
}

#define TLE_ATOMIC(fn, code)                                                                              \
  template <class T>                                                                                     \
  Tile<T> fn(const Ptr<T>& p, std::type_identity_t<Operand<T>> v, loc_t l = loc_t::current()) {          \
    detail::require_value(p.value(), l);                                                                 \
    return Tile<T>(detail::atomic_rmw(ir::AtomicOp::code, p.value(), v.v, nullptr, l));                  \
  }                                                                                                      \
  template <class T>                                                                                     \
  Tile<T> fn(const Ptr<T>& p, std::type_identity_t<Operand<T>> v, const Tile<bool>& mask,                \
             loc_t l = loc_t::current()) {                                                               \
    detail::require_value(p.value(), l);                                                                 \
    detail::require_value(mask.value(), l);                                                              \
    return Tile<T>(detail::atomic_rmw(ir::AtomicOp::code, p.value(), v.v, mask.value(), l));             \
  }
/// Atomic read-modify-write on global memory per element; returns the old values (0 where masked off).
/// Pointee types: 16/32/64-bit integers and floats (f16/bf16 add, max, min and xchg are compare-and-swap
/// loops on both backends; float max/min follow E02); and/or/xor on integers only (UserError otherwise).
TLE_ATOMIC(atomic_add, Add)
TLE_ATOMIC(atomic_max, Max)
TLE_ATOMIC(atomic_min, Min)
TLE_ATOMIC(atomic_xchg, Xchg)
TLE_ATOMIC(atomic_and, And)
TLE_ATOMIC(atomic_or, Or)
TLE_ATOMIC(atomic_xor, Xor)
#undef TLE_ATOMIC
/// Atomic compare-and-swap per element: if *p == cmp then *p = v; returns the old values.
template <class T>
Tile<T> atomic_cas(const Ptr<T>& p, std::type_identity_t<Operand<T>> cmp, std::type_identity_t<Operand<T>> v,
                   loc_t l = loc_t::current()) {
  detail::require_value(p.value(), l);
  return Tile<T>(detail::atomic_cas(p.value(), cmp.v, v.v, l));
}

// ============================================================== reductions and scans

/// Sum along `axis` (negative counts from the end); integer sums wrap. keepdims keeps a size-1 dim.
template <detail::Arith T> Tile<T> sum(const Tile<T>& x, int axis, bool keepdims = false, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  return Tile<T>(detail::reduce(x.value(), axis, ir::ReduceKind::Sum, keepdims, l));
}
/// Maximum / minimum along `axis`; NaN propagates (E02).
template <detail::Arith T> Tile<T> max(const Tile<T>& x, int axis, bool keepdims = false, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  return Tile<T>(detail::reduce(x.value(), axis, ir::ReduceKind::Max, keepdims, l));
}
template <detail::Arith T> Tile<T> min(const Tile<T>& x, int axis, bool keepdims = false, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  return Tile<T>(detail::reduce(x.value(), axis, ir::ReduceKind::Min, keepdims, l));
}
/// Index (i32) of the maximum / minimum along `axis`: the first NaN if any, else the smallest index
/// of the extreme value (E02, E03).
template <detail::Arith T>
Tile<int32_t> argmax(const Tile<T>& x, int axis, bool keepdims = false, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  return Tile<int32_t>(detail::reduce(x.value(), axis, ir::ReduceKind::Argmax, keepdims, l));
}
template <detail::Arith T>
Tile<int32_t> argmin(const Tile<T>& x, int axis, bool keepdims = false, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  return Tile<int32_t>(detail::reduce(x.value(), axis, ir::ReduceKind::Argmin, keepdims, l));
}
namespace detail {
/// The values a tuple-form combine returns (a tuple of tiles; arity and dtypes are checked by the
/// tracer, which throws UserError at the reduce/scan call).
template <class R> std::vector<V> combine_values(const R& r) {
  return std::apply([](const auto&... t) { return std::vector<V>{t.value()...}; }, r);
}
template <class... T, size_t... I>
std::tuple<Tile<T>...> tiles_of(const std::vector<V>& v, std::index_sequence<I...>) {
  return std::tuple<Tile<T>...>(Tile<T>(v[I])...);
}
template <class... T> std::vector<V> values_of(const std::tuple<Tile<T>...>& xs, loc_t l) {
  return std::apply([&](const auto&... t) {
    (require_value(t.value(), l), ...);
    return std::vector<V>{t.value()...};
  }, xs);
}
/// The CombineFn of a tuple-form combine: called with two tuples of scalar tiles (left, right).
template <class... T, class F> CombineFn tuple_combine(F& combine) {
  return [&combine](const std::vector<V>& a, const std::vector<V>& b) {
    auto idx = std::index_sequence_for<T...>{};
    return combine_values(combine(tiles_of<T...>(a, idx), tiles_of<T...>(b, idx)));
  };
}
/// The CombineFn of a single-tile combine (Tile<T>, Tile<T>) -> Tile<T>.
template <class T, class F> CombineFn single_combine(F& combine) {
  return [&combine](const std::vector<V>& a, const std::vector<V>& b) {
    Tile<T> r = combine(Tile<T>(a[0]), Tile<T>(b[0]));
    return std::vector<V>{r.value()};
  };
}
}  // namespace detail

/// Reduction with a user combine function (Tile<T>, Tile<T>) -> Tile<T> over scalars along `axis`
/// (negative counts from the end); keepdims keeps a size-1 dim. The combine must be associative; it
/// need not be commutative: every backend combines in index order, the left operand holding lower
/// indices than the right (docs/semantics.md, "Reductions and scans with a combine"). Traced once
/// into the reduce op's body. Throws UserError for a scalar x, a pointer tile, or a combine that
/// returns something other than a scalar Tile<T>.
template <class T, class F>
Tile<T> reduce(const Tile<T>& x, int axis, F&& combine, bool keepdims = false, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  return Tile<T>(detail::reduce_combine({x.value()}, axis, keepdims, detail::single_combine<T>(combine), l)[0]);
}
/// Reduction of several tiles of one shape at once (Triton's tl.reduce over a tuple):
/// `auto [x, y] = reduce(std::tuple{a, b}, axis, [](auto l, auto r) { auto [a1, b1] = l; auto [a2, b2] = r;
/// return std::tuple{a1 * a2, a2 * b1 + b2}; })` (the linear recurrence h = a * h + b). The combine
/// takes two std::tuple of scalar tiles, left (lower indices) and right, and returns a std::tuple of
/// as many scalar tiles of the operands' dtypes (dtypes may differ between operands). Associative,
/// not necessarily commutative, as the single-tile form. Throws UserError (at this call) when the
/// tiles' shapes differ, when the combine returns another number of values or another dtype.
template <class... T, class F>
  requires(sizeof...(T) >= 1)
std::tuple<Tile<T>...> reduce(const std::tuple<Tile<T>...>& xs, int axis, F&& combine, bool keepdims = false,
                              loc_t l = loc_t::current()) {
  auto vs = detail::reduce_combine(detail::values_of(xs, l), axis, keepdims, detail::tuple_combine<T...>(combine), l);
  return detail::tiles_of<T...>(vs, std::index_sequence_for<T...>{});
}
/// Inclusive prefix sum along `axis` (reverse: from the end).
template <detail::Arith T> Tile<T> cumsum(const Tile<T>& x, int axis, bool reverse = false, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  return Tile<T>(detail::scan(x.value(), axis, reverse, l));
}
/// Options of the cumsum forms below (FlagTree TLE-Lite's cumsum: exclusive, reverse, total).
struct CumsumOptions {
  bool exclusive = false;  ///< element i sums the elements before i (after i when reverse); the first is 0
  bool reverse = false;    ///< scan from the end of the axis (Triton's reverse=True)
};
/// A cumsum and the total of its line (`auto [scan, total] = cumsum_total(x, axis, {.exclusive =
/// true})`, FlagTree's return_total): `total` has x's shape without `axis` (a scalar tile for a 1-D
/// x) and holds, bit for bit, the inclusive scan's last element along the axis (its first when
/// reverse), i.e. the sum of the whole line in the scan's order. When the total (or the scan) is
/// unused, its code is removed with the rest of the dead code.
template <detail::Arith T> struct CumsumTotal {
  Tile<T> scan;
  Tile<T> total;
};
template <detail::Arith T>
CumsumTotal<T> cumsum_total(const Tile<T>& x, int axis, CumsumOptions o = {}, loc_t l = loc_t::current()) {
  Tile<T> incl = cumsum(x, axis, o.reverse, l);  // checks the axis
  Shape shape = x.shape(l);
  const int rank = static_cast<int>(shape.size());
  if (axis < 0) axis += rank;
  const int64_t n = shape[static_cast<size_t>(axis)];
  Shape line(static_cast<size_t>(rank), 1);  // 1 everywhere but along the axis
  line[static_cast<size_t>(axis)] = n;
  Shape one = shape;  // x's shape with 1 along the axis
  one[static_cast<size_t>(axis)] = 1;
  Shape without = shape;
  without.erase(without.begin() + axis);
  // The inclusive scan's element at the line's end: one gather index per line.
  Tile<int32_t> last = full<int32_t>(one, static_cast<int32_t>(o.reverse ? 0 : n - 1), l);
  Tile<T> total = reshape(gather(incl, last, axis, l), without, l);
  if (!o.exclusive) return {incl, total};
  // Exclusive: element i reads the inclusive scan at i - 1 (i + 1 reversed); the first reads 0.
  Tile<int32_t> i = broadcast_to(reshape(arange(0, n, l), line, l), shape, l);
  Tile<bool> has_prev = o.reverse ? i < static_cast<int32_t>(n - 1) : i > 0;
  Tile<int32_t> prev = where(has_prev, o.reverse ? i + 1 : i - 1, 0, l);
  return {where(has_prev, gather(incl, prev, axis, l), T(0), l), total};
}
/// Prefix sum along `axis` (negative counts from the end) of a tile of any rank, inclusive or
/// exclusive, forward or reverse. The exclusive scan's element i is bit for bit the inclusive
/// scan's element i - 1 (i + 1 when reverse) - the same sums in the same order - and 0 at the
/// first element; integers wrap as in the inclusive form. Throws UserError (at this call) for an
/// axis outside the tile's rank.
template <detail::Arith T>
Tile<T> cumsum(const Tile<T>& x, int axis, CumsumOptions o, loc_t l = loc_t::current()) {
  return cumsum_total(x, axis, o, l).scan;
}
/// Inclusive scan with a user combine function (as in reduce) along `axis`: element i is
/// x[0] o x[1] o ... o x[i]. reverse scans from the end, as Triton's reverse=True (the scan of the
/// tile flipped along the axis, flipped back): element i is x[n-1] o x[n-2] o ... o x[i], the left
/// operand holding the higher indices. The combine must be associative, not necessarily commutative.
template <class T, class F>
Tile<T> associative_scan(const Tile<T>& x, int axis, F&& combine, bool reverse = false, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  return Tile<T>(detail::scan_combine({x.value()}, axis, reverse, detail::single_combine<T>(combine), l)[0]);
}
/// Inclusive scan of several tiles of one shape at once (Triton's tl.associative_scan over a tuple);
/// the combine and the errors are those of the tuple form of reduce, the order that of the
/// single-tile associative_scan. Returns one tile per operand, of its shape and dtype.
template <class... T, class F>
  requires(sizeof...(T) >= 1)
std::tuple<Tile<T>...> associative_scan(const std::tuple<Tile<T>...>& xs, int axis, F&& combine, bool reverse = false,
                                        loc_t l = loc_t::current()) {
  auto vs = detail::scan_combine(detail::values_of(xs, l), axis, reverse, detail::tuple_combine<T...>(combine), l);
  return detail::tiles_of<T...>(vs, std::index_sequence_for<T...>{});
}

/// Counts of the values of a 1-D integer tile in [0, bins): i32 tile [bins]. Values outside the
/// range (and masked-off elements) are ignored (rule E06).
template <detail::IntElem T> Tile<int32_t> histogram(const Tile<T>& x, int64_t bins, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  return Tile<int32_t>(detail::histogram(x.value(), bins, nullptr, l));
}
template <detail::IntElem T>
Tile<int32_t> histogram(const Tile<T>& x, int64_t bins, const Tile<bool>& mask, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  return Tile<int32_t>(detail::histogram(x.value(), bins, mask.value(), l));
}

/// The stable rank of each element of a 1-D integer tile among the equal elements before it:
/// i32 tile of x's shape, where element i holds the number of elements j < i with x[j] == x[i]
/// that histogram(x, bins[, mask]) counts, for an element it counts (0 <= x[i] < bins, mask[i]),
/// and -1 for the others (rule E06b). With c = cumsum(histogram(x, bins, mask)) - histogram(...),
/// c[x[i]] + ranks[i] is element i's position in a stable counting sort of the counted elements
/// (a radix-sort pass; MoE routing's slot of a token within its expert). On the GPU one
/// `match.any.sync` per 32 elements and per-warp counters in shared memory (bins * warps * 4
/// bytes, plus 8 bytes per element), not a sort. Errors (UserError at the caller's line): x not
/// 1-D or not an integer tile, bins < 1 or > 2^20, a mask that does not broadcast to x.
template <detail::IntElem T> Tile<int32_t> histogram_ranks(const Tile<T>& x, int64_t bins, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  return Tile<int32_t>(detail::histogram_ranks(x.value(), bins, nullptr, l));
}
template <detail::IntElem T>
Tile<int32_t> histogram_ranks(const Tile<T>& x, int64_t bins, const Tile<bool>& mask, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  return Tile<int32_t>(detail::histogram_ranks(x.value(), bins, mask.value(), l));
}

// ============================================================== sorting and gathering
// Order (docs/semantics.md, "Sorting and gathering"): as torch.sort(stable=True). Integers by value
// (unsigned types unsigned), bool false < true, floats by value with -0.0 == +0.0 and every NaN
// above +inf (last ascending, first descending). Sorts are stable: equal elements keep the order
// of their indices (lower index first, also when descending). The GPU backend sorts with a bitonic
// network over (key, index) pairs in shared memory (Batcher 1968); the CPU backend with a stable
// merge sort; the results are identical.

/// The sorted elements and the i32 index along the axis where each one was in the input.
template <class T> struct SortResult {
  Tile<T> values;
  Tile<int32_t> indices;
};

/// x (rank >= 1, any numeric or bool dtype) sorted along `axis` (negative counts from the end),
/// ascending unless `descending`; same shape and dtype. UserError at l: axis out of range, scalar x.
template <detail::ScalarElement T>
Tile<T> sort(const Tile<T>& x, int axis, bool descending = false, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  detail::V v, i;
  detail::sort(x.value(), axis, descending, 0, &v, &i, l, "sort");
  return Tile<T>(v);
}
/// The i32 indices that sort x along `axis` (stable; as sort): x's shape, result[..j..] is the
/// index in x of the j-th smallest (largest when descending) element of its line.
template <detail::ScalarElement T>
Tile<int32_t> argsort(const Tile<T>& x, int axis, bool descending = false, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  detail::V v, i;
  detail::sort(x.value(), axis, descending, 0, &v, &i, l, "argsort");
  return Tile<int32_t>(i);
}
/// Both at once, as torch.sort: `auto [values, indices] = sort_with_indices(x, axis)`. To carry
/// another tile along, gather it with the indices: `gather(y, indices, axis)`.
template <detail::ScalarElement T>
SortResult<T> sort_with_indices(const Tile<T>& x, int axis, bool descending = false, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  detail::V v, i;
  detail::sort(x.value(), axis, descending, 0, &v, &i, l, "sort_with_indices");
  return {Tile<T>(v), Tile<int32_t>(i)};
}
/// The k largest (`largest`, default) or smallest elements of each line along `axis` and their i32
/// indices, as torch.topk(sorted=True): sorted descending (ascending for the smallest), ties by
/// lower index, NaN larger than everything. The result has dim k along the axis; k is a trace-time
/// value, 1 <= k <= the axis' size (UserError at l otherwise). Equal to the first k of
/// sort_with_indices(x, axis, largest).
template <detail::ScalarElement T>
SortResult<T> topk(const Tile<T>& x, int64_t k, int axis = -1, bool largest = true, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  if (k < 1) throw UserError(l, "topk: k must be at least 1, got " + std::to_string(k));
  detail::V v, i;
  detail::sort(x.value(), axis, largest, k, &v, &i, l, "topk");
  return {Tile<T>(v), Tile<int32_t>(i)};
}
/// Triton's tl.gather: `index` is an integer tile of x's rank whose dims equal x's except along
/// `axis`; the result has index's shape and x's dtype, result[i][j] = x[index[i][j]][j] for axis 0
/// (likewise for any axis and rank). An index outside [0, x's size along axis) gives 0 (false,
/// +0.0), on every backend, without faulting. UserError at l: axis out of range, index not an
/// integer tile, rank or other dims that differ.
template <detail::ScalarElement T, class I>
Tile<T> gather(const Tile<T>& x, const Tile<I>& index, int axis, loc_t l = loc_t::current()) {
  detail::require_value(x.value(), l);
  detail::require_value(index.value(), l);
  return Tile<T>(detail::gather(x.value(), index.value(), axis, l));
}

// ============================================================== dot

/// The accumulator type of dot: i32 for i8 inputs, f64 for f64 inputs, f32 for f16/bf16/f32 inputs.
template <class T>
using dot_acc_t = std::conditional_t<std::is_integral_v<T>, int32_t, std::conditional_t<std::is_same_v<T, double>, double, float>>;
/// Matrix product of a [M, K] and b [K, N] tiles, plus acc [M, N]: f16/bf16/f32 inputs accumulate in
/// f32, f64 inputs in f64 (products and sums in f64 on every backend: on the GPU an FMA-free loop,
/// not tensor cores), i8 inputs in i32. f32 inputs use full IEEE f32 by default (rule E05); Precision::TF32 rounds
/// inputs to tf32 first. M, N, K may be any size on the CPU backend.
template <class T>
Tile<dot_acc_t<T>> dot(const Tile<T>& a, const Tile<T>& b, const Tile<dot_acc_t<T>>& acc,
                       Precision precision = Precision::IEEE, loc_t l = loc_t::current()) {
  detail::require_value(a.value(), l);
  detail::require_value(b.value(), l);
  detail::require_value(acc.value(), l);
  return Tile<dot_acc_t<T>>(detail::dot(a.value(), b.value(), acc.value(), precision, l));
}
template <class T>
Tile<dot_acc_t<T>> dot(const Tile<T>& a, const Tile<T>& b, Precision precision = Precision::IEEE,
                       loc_t l = loc_t::current()) {
  detail::require_value(a.value(), l);
  detail::require_value(b.value(), l);
  return Tile<dot_acc_t<T>>(detail::dot(a.value(), b.value(), nullptr, precision, l));
}

// ============================================================== device control flow

namespace detail {
template <class A> struct index_of { using type = void; };  // C++ integers: weak
template <class T> struct index_of<Tile<T>> { using type = T; };
template <class A, class B> struct join_index { using type = promote_t<A, B>; };
template <class A> struct join_index<A, void> { using type = A; };
template <class B> struct join_index<void, B> { using type = B; };
template <> struct join_index<void, void> { using type = void; };
template <class... A> struct index_type { using type = void; };
template <class A, class... R> struct index_type<A, R...> {
  using type = typename join_index<typename index_of<std::decay_t<A>>::type, typename index_type<R...>::type>::type;
};
template <class... A> using index_t = std::conditional_t<std::is_void_v<typename index_type<A...>::type>, int32_t,
                                                         typename index_type<A...>::type>;
}  // namespace detail

/// Options of one device loop (TLE-Lite loop hints; Triton's `tl.range(..., num_stages=)`), given as
/// the fourth argument of tle::range: `range(lo, hi, step, {.num_stages = 3})`.
struct LoopOptions {
  /// GPU, sm_80 and newer: software-pipeline this loop's loads num_stages deep (1 to 8; 0, the
  /// default, leaves the loop to Grid::with_stages, which pipelines only K loops feeding
  /// tensor-core dots). The loads of iterations k+1 .. k+S-1 are copied by cp.async into shared
  /// memory (S buffers per load) while iteration k computes, so their latency is hidden without
  /// holding the data in registers. It applies to the loads directly in the body (not in an if_)
  /// whose pointer, mask and other are computed from the induction variable and values defined
  /// before the loop (not loop-carried), with other absent or 0 and vectors of 4, 8 or 16 bytes;
  /// other loads stay as they are, and so do loads after a store (or atomic) of their own
  /// iteration; 1 turns pipelining of this loop off. By giving it the program asserts what
  /// Triton's does: no store of an iteration writes memory that a load of a later iteration of
  /// the same loop reads (the loads run up to S-1 iterations early). A pipelined load's cache and
  /// eviction hints (MemHints) are not applied (the copies are cp.async: .cg for 16-byte vectors,
  /// .ca below). Only innermost loops are pipelined. Ignored on the CPU. UserError outside 0..8.
  int num_stages = 0;
};

/// A device loop: `for (auto i : tle::range(lo, hi, step)) { ... }` traces its body once with a
/// symbolic induction variable i (i32, or i64 if a bound is a Tile<int64_t>). Bounds may be C++
/// integers or scalar integer tiles; a runtime step of either sign works, and the trip count never
/// overflows (docs/semantics.md). Tiles assigned in the body become loop-carried values. `break`
/// and `return` inside the body are not supported (UserError at the end of tracing).
template <class I> class Range {
 public:
  Range(detail::V lo, detail::V hi, detail::V step, const SrcLoc& loc, LoopOptions opts = {})
      : lo_(lo), hi_(hi), step_(step), loc_(loc), opts_(opts) {}
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;
  ~Range() {
    if (open_) detail::for_abandon(std::uncaught_exceptions() > 0, loc_);
  }
  struct sentinel {};
  class iterator {
   public:
    explicit iterator(Range* r) : r_(r) {}
    Tile<I> operator*() const { return Tile<I>(r_->iv_); }
    iterator& operator++() {
      r_->close();
      return *this;
    }
    bool operator!=(sentinel) const { return r_->open_; }

   private:
    Range* r_;
  };
  iterator begin() {
    iv_ = detail::for_begin(lo_, hi_, step_, detail::dtype_of<I>::value, loc_, opts_.num_stages);
    open_ = true;
    return iterator(this);
  }
  sentinel end() { return {}; }

 private:
  void close() {
    open_ = false;
    detail::for_end(loc_);
  }
  detail::V lo_, hi_, step_, iv_ = nullptr;
  SrcLoc loc_;
  LoopOptions opts_;
  bool open_ = false;
};

namespace detail {
template <class A> concept IndexLike = std::is_integral_v<A> || (is_constexpr<A>::value && std::is_integral_v<decltype(A::value)>) ||
                                       (is_tile<A>::value && IntElem<typename A::element_type>);
}
template <detail::IndexLike A, detail::IndexLike B, detail::IndexLike C = int>
Range<detail::index_t<A, B, C>> range(const A& lo, const B& hi, const C& step = 1, loc_t l = loc_t::current()) {
  using I = detail::index_t<A, B, C>;
  return Range<I>(Operand<I>(lo, l).v, Operand<I>(hi, l).v, Operand<I>(step, l).v, l);
}
/// As above with loop options (LoopOptions: e.g. `range(lo, hi, step, {.num_stages = 3})`, or
/// `range(lo, hi, {.num_stages = 3})` with step 1).
template <detail::IndexLike A, detail::IndexLike B, detail::IndexLike C>
Range<detail::index_t<A, B, C>> range(const A& lo, const B& hi, const C& step, LoopOptions opts,
                                      loc_t l = loc_t::current()) {
  using I = detail::index_t<A, B, C>;
  return Range<I>(Operand<I>(lo, l).v, Operand<I>(hi, l).v, Operand<I>(step, l).v, l, opts);
}
template <detail::IndexLike A, detail::IndexLike B>
Range<detail::index_t<A, B, int>> range(const A& lo, const B& hi, LoopOptions opts, loc_t l = loc_t::current()) {
  return range(lo, hi, 1, opts, l);
}

/// Data-dependent branch on a boolean scalar tile: both branches are traced; tiles assigned in them
/// become the if's results (a tile assigned in one branch must have a value before the if_).
template <class F, class G>
void if_(const Tile<bool>& cond, F&& then_fn, G&& else_fn, loc_t l = loc_t::current()) {
  detail::require_value(cond.value(), l);
  detail::if_else(cond.value(), std::function<void()>(std::forward<F>(then_fn)),
                  std::function<void()>(std::forward<G>(else_fn)), l);
}
template <class F> void if_(const Tile<bool>& cond, F&& then_fn, loc_t l = loc_t::current()) {
  detail::require_value(cond.value(), l);
  detail::if_else(cond.value(), std::function<void()>(std::forward<F>(then_fn)), std::function<void()>(), l);
}

}  // namespace tle
