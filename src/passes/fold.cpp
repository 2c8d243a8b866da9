// src/passes/fold.cpp - exact scalar constant folding (rules: docs/ir.md, "Arithmetic rules").
//
// Integers are computed on uint64_t bit patterns and wrapped to the dtype's width; floats are
// computed in the dtype's own precision (f16/bf16: in f32, then rounded once to the dtype with
// src/support/half.hpp), so a folded constant is bit-identical to what the kernel would compute.
// Transcendental functions (exp, log, sin, pow, ...) fold through the host C math library in the
// operand precision (expf for f32/f16/bf16, exp for f64): the CPU backend calls the same libm
// functions, so results agree on the machine that runs the kernel.
#include "passes/fold.hpp"

#include <bit>
#include <cmath>
#include <limits>

#include "support/half.hpp"

namespace tle::passes {
namespace {

using ir::Attr;
using ir::BinaryOp;
using ir::CmpPred;
using ir::UnaryOp;

// ---- integers
uint64_t low_mask(int w) { return w >= 64 ? ~uint64_t(0) : (uint64_t(1) << w) - 1; }

/// Canonical int64 of bit pattern `bits` as dtype d.
int64_t wrap(DType d, uint64_t bits) {
  int w = bit_width(d);
  bits &= low_mask(w);
  if (is_signed_int(d) && w < 64 && (bits >> (w - 1)) & 1) bits |= ~low_mask(w);
  return static_cast<int64_t>(bits);
}

std::optional<int64_t> as_int(DType d, const Attr& a) {
  if (!is_int(d)) return std::nullopt;
  auto* i = std::get_if<int64_t>(&a);
  if (!i) return std::nullopt;
  return wrap(d, static_cast<uint64_t>(*i));
}

// ---- floats
/// fp8 bits of a value of dtype d: E5M2's infinities are values of the type (a conversion to fp8
/// saturates them, fold_cast; a value already of the type keeps them).
uint8_t fp8_value_bits(DType d, double x) {
  if (d == DType::f8e5m2 && std::isinf(x)) return x < 0 ? 0xFC : 0x7C;
  return f64_to_fp8_bits(x, d);
}

double round_to(DType d, double x) {
  switch (d) {
    case DType::f64: return x;
    case DType::f32: return static_cast<double>(static_cast<float>(x));
    case DType::f16: return f16_bits_to_f64(f64_to_f16_bits(x));
    case DType::bf16: return bf16_bits_to_f64(f64_to_bf16_bits(x));
    case DType::f8e4m3: case DType::f8e5m2: return fp8_bits_to_f64(fp8_value_bits(d, x), d);
    default: return x;
  }
}

std::optional<double> as_float(DType d, const Attr& a) {
  if (!is_float(d)) return std::nullopt;
  auto* x = std::get_if<double>(&a);
  if (!x) return std::nullopt;
  return round_to(d, *x);
}

// IEEE 754-2019 maximum/minimum (llvm.maximum/minimum): NaN propagates, -0 < +0.
template <class T> T fmaximum(T a, T b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  if (a == 0 && b == 0) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}
template <class T> T fminimum(T a, T b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  if (a == 0 && b == 0) return std::signbit(a) ? a : b;
  return a < b ? a : b;
}

// Math in precision T (float or double), calling the libm function of that precision.
template <class T> struct Math;
template <> struct Math<float> {
  static float pow(float a, float b) { return ::powf(a, b); }
  static float atan2(float a, float b) { return ::atan2f(a, b); }
  static float fmod(float a, float b) { return ::fmodf(a, b); }
  static float exp(float x) { return ::expf(x); }
  static float exp2(float x) { return ::exp2f(x); }
  static float log(float x) { return ::logf(x); }
  static float log2(float x) { return ::log2f(x); }
  static float sqrt(float x) { return ::sqrtf(x); }
  static float floor(float x) { return ::floorf(x); }
  static float ceil(float x) { return ::ceilf(x); }
  static float round(float x) { return ::roundf(x); }
  static float nearbyint(float x) { return ::nearbyintf(x); }
  static float sin(float x) { return ::sinf(x); }
  static float cos(float x) { return ::cosf(x); }
  static float tanh(float x) { return ::tanhf(x); }
  static float erf(float x) { return ::erff(x); }
  static float fabs(float x) { return ::fabsf(x); }
  static float fma(float a, float b, float c) { return ::fmaf(a, b, c); }
};
template <> struct Math<double> {
  static double pow(double a, double b) { return ::pow(a, b); }
  static double atan2(double a, double b) { return ::atan2(a, b); }
  static double fmod(double a, double b) { return ::fmod(a, b); }
  static double exp(double x) { return ::exp(x); }
  static double exp2(double x) { return ::exp2(x); }
  static double log(double x) { return ::log(x); }
  static double log2(double x) { return ::log2(x); }
  static double sqrt(double x) { return ::sqrt(x); }
  static double floor(double x) { return ::floor(x); }
  static double ceil(double x) { return ::ceil(x); }
  static double round(double x) { return ::round(x); }
  static double nearbyint(double x) { return ::nearbyint(x); }
  static double sin(double x) { return ::sin(x); }
  static double cos(double x) { return ::cos(x); }
  static double tanh(double x) { return ::tanh(x); }
  static double erf(double x) { return ::erf(x); }
  static double fabs(double x) { return ::fabs(x); }
  static double fma(double a, double b, double c) { return ::fma(a, b, c); }
};

template <class T> std::optional<T> float_binary(BinaryOp op, T a, T b) {
  using M = Math<T>;
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
    case BinaryOp::Rem: return M::fmod(a, b);
    case BinaryOp::Min: return fminimum(a, b);
    case BinaryOp::Max: return fmaximum(a, b);
    case BinaryOp::Pow: return M::pow(a, b);
    case BinaryOp::Atan2: return M::atan2(a, b);
    default: return std::nullopt;  // bitwise ops and shifts are integer only
  }
}

template <class T> std::optional<T> float_unary(UnaryOp op, T x) {
  using M = Math<T>;
  switch (op) {
    case UnaryOp::Neg: return -x;
    case UnaryOp::Not: return std::nullopt;
    case UnaryOp::Exp: return M::exp(x);
    case UnaryOp::Exp2: return M::exp2(x);
    case UnaryOp::Log: return M::log(x);
    case UnaryOp::Log2: return M::log2(x);
    case UnaryOp::Sqrt: return M::sqrt(x);
    case UnaryOp::Rsqrt: return T(1) / M::sqrt(x);
    case UnaryOp::Abs: return M::fabs(x);
    case UnaryOp::Floor: return M::floor(x);
    case UnaryOp::Ceil: return M::ceil(x);
    case UnaryOp::Round: return M::round(x);
    case UnaryOp::Rint: return M::nearbyint(x);
    case UnaryOp::Sin: return M::sin(x);
    case UnaryOp::Cos: return M::cos(x);
    case UnaryOp::Tanh: return M::tanh(x);
    case UnaryOp::Erf: return M::erf(x);
  }
  return std::nullopt;
}

// Exact integer value -> double such that rounding the double to any format with at most 51
// mantissa bits gives the correctly rounded integer (round-to-odd on the dropped bits).
double int_to_double_sticky(bool neg, uint64_t mag) {
  int bits = 64 - std::countl_zero(mag);
  if (bits > 53) {
    int shift = bits - 53;
    uint64_t kept = mag >> shift;
    if (mag & low_mask(shift)) kept |= 1;
    double v = std::ldexp(static_cast<double>(kept), shift);
    return neg ? -v : v;
  }
  double v = static_cast<double>(mag);
  return neg ? -v : v;
}

// The integer constant `v` of dtype `from` converted to float dtype `to`, rounded once.
double int_to_float(DType from, int64_t v, DType to) {
  bool uns = !is_signed_int(from);  // i1 and unsigned types are zero-extended
  if (to == DType::f64) return uns ? static_cast<double>(static_cast<uint64_t>(v)) : static_cast<double>(v);
  if (to == DType::f32)
    return static_cast<double>(uns ? static_cast<float>(static_cast<uint64_t>(v)) : static_cast<float>(v));
  bool neg = !uns && v < 0;
  uint64_t mag = neg ? uint64_t(0) - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  return round_to(to, int_to_double_sticky(neg, mag));
}

// Float -> integer: truncate toward zero, saturate, NaN -> 0.
int64_t float_to_int(double x, DType to) {
  if (std::isnan(x)) return 0;
  double t = std::trunc(x);
  int w = bit_width(to);
  if (is_signed_int(to)) {
    double hi = std::ldexp(1.0, w - 1);  // 2^(w-1): first value above the max
    if (t >= hi) return wrap(to, low_mask(w - 1));
    if (t <= -hi) return wrap(to, uint64_t(1) << (w - 1));
    return static_cast<int64_t>(t);
  }
  if (t <= 0) return 0;
  double hi = std::ldexp(1.0, w);
  if (t >= hi) return wrap(to, low_mask(w));
  return wrap(to, static_cast<uint64_t>(t));
}

std::optional<Attr> int_binary(BinaryOp op, DType d, int64_t a, int64_t b) {
  const bool sgn = is_signed_int(d);
  const int w = bit_width(d);
  const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  // Unsigned values in canonical form are zero-extended (u64: the bit pattern).
  auto lt = [&](int64_t x, int64_t y) { return sgn ? x < y : static_cast<uint64_t>(x) < static_cast<uint64_t>(y); };
  switch (op) {
    case BinaryOp::Add: return Attr(wrap(d, ua + ub));
    case BinaryOp::Sub: return Attr(wrap(d, ua - ub));
    case BinaryOp::Mul: return Attr(wrap(d, ua * ub));
    case BinaryOp::Div:
      if (b == 0) return Attr(int64_t(0));
      if (sgn) {
        if (b == -1) return Attr(wrap(d, uint64_t(0) - ua));  // INT_MIN / -1 wraps to INT_MIN
        return Attr(wrap(d, static_cast<uint64_t>(a / b)));
      }
      return Attr(wrap(d, ua / ub));
    case BinaryOp::Rem:
      if (b == 0) return Attr(a);
      if (sgn) {
        if (b == -1) return Attr(int64_t(0));
        return Attr(wrap(d, static_cast<uint64_t>(a % b)));
      }
      return Attr(wrap(d, ua % ub));
    case BinaryOp::And: return Attr(wrap(d, ua & ub));
    case BinaryOp::Or: return Attr(wrap(d, ua | ub));
    case BinaryOp::Xor: return Attr(wrap(d, ua ^ ub));
    case BinaryOp::Shl: {
      bool out = sgn ? (b < 0 || b >= w) : ub >= static_cast<uint64_t>(w);
      if (out) return Attr(int64_t(0));
      return Attr(wrap(d, ua << ub));
    }
    case BinaryOp::Shr: {
      bool out = sgn ? (b < 0 || b >= w) : ub >= static_cast<uint64_t>(w);
      if (sgn) return Attr(out ? (a < 0 ? int64_t(-1) : int64_t(0)) : wrap(d, static_cast<uint64_t>(a >> b)));
      if (out) return Attr(int64_t(0));
      return Attr(wrap(d, ua >> ub));
    }
    case BinaryOp::Min: return Attr(lt(b, a) ? b : a);
    case BinaryOp::Max: return Attr(lt(a, b) ? b : a);
    case BinaryOp::Pow:
    case BinaryOp::Atan2: return std::nullopt;  // float only
  }
  return std::nullopt;
}

template <class T> Attr round_result(DType d, T r) { return Attr(round_to(d, static_cast<double>(r))); }

/// x*y + z for f16/bf16 operands, rounded to odd in f64: the product is exact in f64 (at most 22
/// significant bits), TwoSum gives the exact error e of s = p + z, and an inexact s moves to its
/// neighbour toward e when its last bit is even. A value rounded to odd with 53 bits rounds
/// correctly to any format of at most 51 bits, so rounding the result to f16/bf16 rounds a*b+c
/// once. (An f64 fma would round first: bf16's exponent range lets an addend fall below the
/// product's last f64 bit and leave an exact bf16 midpoint behind.) ScalarEmitter::fma emits the
/// same steps.
double fma_round_to_odd(double x, double y, double z) {
  const double p = x * y, s = p + z;
  if (!std::isfinite(s)) return s;
  const double bb = s - p, e = (p - (s - bb)) + (z - bb);
  const uint64_t b = std::bit_cast<uint64_t>(s);
  if (e == 0 || (b & 1)) return s;
  return std::bit_cast<double>(std::signbit(s) == std::signbit(e) ? b + 1 : b - 1);  // s != 0 when inexact
}

}  // namespace

std::optional<Attr> normalize_constant(DType d, const Attr& v) {
  if (is_int(d)) {
    auto i = as_int(d, v);
    if (!i) return std::nullopt;
    return Attr(*i);
  }
  auto x = as_float(d, v);
  if (!x) return std::nullopt;
  return Attr(*x);
}

std::optional<Attr> fold_binary(BinaryOp op, DType d, const Attr& a, const Attr& b) {
  if (is_int(d)) {
    auto x = as_int(d, a), y = as_int(d, b);
    if (!x || !y) return std::nullopt;
    return int_binary(op, d, *x, *y);
  }
  auto x = as_float(d, a), y = as_float(d, b);
  if (!x || !y) return std::nullopt;
  if (d == DType::f64) {
    auto r = float_binary<double>(op, *x, *y);
    if (!r) return std::nullopt;
    return Attr(*r);
  }
  auto r = float_binary<float>(op, static_cast<float>(*x), static_cast<float>(*y));
  if (!r) return std::nullopt;
  return round_result(d, *r);
}

std::optional<Attr> fold_unary(UnaryOp op, DType d, const Attr& a) {
  if (is_int(d)) {
    auto x = as_int(d, a);
    if (!x) return std::nullopt;
    uint64_t ux = static_cast<uint64_t>(*x);
    switch (op) {
      case UnaryOp::Neg: return Attr(wrap(d, uint64_t(0) - ux));
      case UnaryOp::Not: return Attr(wrap(d, ~ux));
      case UnaryOp::Abs: return Attr(is_signed_int(d) && *x < 0 ? wrap(d, uint64_t(0) - ux) : *x);
      default: return std::nullopt;
    }
  }
  auto x = as_float(d, a);
  if (!x) return std::nullopt;
  if (d == DType::f64) {
    auto r = float_unary<double>(op, *x);
    if (!r) return std::nullopt;
    return Attr(*r);
  }
  auto r = float_unary<float>(op, static_cast<float>(*x));
  if (!r) return std::nullopt;
  return round_result(d, *r);
}

std::optional<Attr> fold_compare(CmpPred p, DType d, const Attr& a, const Attr& b) {
  bool r;
  auto decide = [&](auto x, auto y) {
    switch (p) {
      case CmpPred::Eq: return x == y;
      case CmpPred::Ne: return x != y;  // true for NaN: the one unordered predicate
      case CmpPred::Lt: return x < y;
      case CmpPred::Le: return x <= y;
      case CmpPred::Gt: return x > y;
      case CmpPred::Ge: return x >= y;
    }
    return false;
  };
  if (is_int(d)) {
    auto x = as_int(d, a), y = as_int(d, b);
    if (!x || !y) return std::nullopt;
    r = is_signed_int(d) ? decide(*x, *y) : decide(static_cast<uint64_t>(*x), static_cast<uint64_t>(*y));
  } else {
    auto x = as_float(d, a), y = as_float(d, b);
    if (!x || !y) return std::nullopt;
    r = decide(*x, *y);
  }
  return Attr(int64_t(r ? 1 : 0));
}

std::optional<Attr> fold_fma(DType d, const Attr& a, const Attr& b, const Attr& c) {
  auto x = as_float(d, a), y = as_float(d, b), z = as_float(d, c);
  if (!x || !y || !z) return std::nullopt;
  if (d == DType::f32)
    return Attr(static_cast<double>(Math<float>::fma(static_cast<float>(*x), static_cast<float>(*y), static_cast<float>(*z))));
  if (d == DType::f64) return Attr(Math<double>::fma(*x, *y, *z));
  return Attr(round_to(d, fma_round_to_odd(*x, *y, *z)));  // f16/bf16: one rounding of the exact value
}

std::optional<Attr> fold_cast(DType from, DType to, const Attr& a) {
  if (from == DType::ptr || to == DType::ptr) return std::nullopt;
  if (is_int(from)) {
    auto v = as_int(from, a);
    if (!v) return std::nullopt;
    if (to == DType::i1) return Attr(int64_t(*v != 0));
    if (is_int(to)) return Attr(wrap(to, static_cast<uint64_t>(*v)));
    return Attr(int_to_float(from, *v, to));  // finite: fp8 saturates in round_to
  }
  auto x = as_float(from, a);
  if (!x) return std::nullopt;
  if (to == DType::i1) return Attr(int64_t(*x != 0));  // NaN != 0 is true
  if (is_int(to)) return Attr(float_to_int(*x, to));
  if (is_fp8(to)) return Attr(fp8_bits_to_f64(f64_to_fp8_bits(*x, to), to));  // saturating, infinities too
  return Attr(round_to(to, *x));  // exact widening, or one rounding from the source value
}

std::optional<uint64_t> constant_bits(DType d, const Attr& a) {
  if (d == DType::ptr) {
    auto* p = std::get_if<int64_t>(&a);
    if (!p) return std::nullopt;
    return static_cast<uint64_t>(*p);
  }
  if (is_int(d)) {
    auto v = as_int(d, a);
    if (!v) return std::nullopt;
    return static_cast<uint64_t>(*v) & low_mask(bit_width(d));
  }
  auto x = as_float(d, a);
  if (!x) return std::nullopt;
  switch (d) {
    case DType::f64: return std::bit_cast<uint64_t>(*x);
    case DType::f32: return std::bit_cast<uint32_t>(static_cast<float>(*x));
    case DType::f16: return f64_to_f16_bits(*x);
    case DType::bf16: return f64_to_bf16_bits(*x);
    case DType::f8e4m3: case DType::f8e5m2: return fp8_value_bits(d, *x);
    default: return std::nullopt;
  }
}

Attr constant_from_bits(DType d, uint64_t b) {
  switch (d) {
    case DType::f64: return Attr(std::bit_cast<double>(b));
    case DType::f32: return Attr(static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(b))));
    case DType::f16: return Attr(f16_bits_to_f64(static_cast<uint16_t>(b)));
    case DType::bf16: return Attr(bf16_bits_to_f64(static_cast<uint16_t>(b)));
    case DType::f8e4m3: case DType::f8e5m2: return Attr(fp8_bits_to_f64(static_cast<uint8_t>(b), d));
    case DType::i1: return Attr(int64_t((b & 0xFF) != 0));
    case DType::ptr: return Attr(static_cast<int64_t>(b));
    default: return Attr(wrap(d, b));
  }
}

std::optional<Attr> fold_bitcast(DType from, DType to, const Attr& a) {
  if (from == DType::i1 || to == DType::i1 || from == DType::ptr || to == DType::ptr) return std::nullopt;
  if (bit_width(from) != bit_width(to)) return std::nullopt;
  // NaN payloads are not modelled: a NaN operand or result is left to the run time.
  if (is_float(from)) {
    auto x = as_float(from, a);
    if (!x || std::isnan(*x)) return std::nullopt;
  }
  auto b = constant_bits(from, a);
  if (!b) return std::nullopt;
  Attr r = constant_from_bits(to, *b);
  if (auto* x = std::get_if<double>(&r); x && std::isnan(*x)) return std::nullopt;
  return r;
}

std::optional<Attr> constant_value(const ir::Value* v) {
  if (!v || !v->def || v->def->kind != ir::OpKind::Constant) return std::nullopt;
  auto it = v->def->attrs.find("value");
  if (it == v->def->attrs.end()) return std::nullopt;
  return normalize_constant(v->type.dtype, it->second);
}

std::optional<int64_t> constant_int(const ir::Value* v) {
  auto c = constant_value(v);
  if (!c || !std::holds_alternative<int64_t>(*c)) return std::nullopt;
  return std::get<int64_t>(*c);
}

std::optional<double> constant_float(const ir::Value* v) {
  auto c = constant_value(v);
  if (!c || !std::holds_alternative<double>(*c)) return std::nullopt;
  return std::get<double>(*c);
}

bool is_positive_zero(const ir::Value* v) {
  if (auto i = constant_int(v)) return *i == 0;
  if (auto d = constant_float(v)) return *d == 0.0 && !std::signbit(*d);
  return false;
}

}  // namespace tle::passes
