// src/support/half.cpp - exact f16/bf16 conversions (IEEE 754-2008 binary16; bfloat16), rounding to
// nearest even exactly once from double, so f64 -> f16 never double-rounds through f32 (E26).
#include "support/half.hpp"

#include <cmath>
#include <cstring>

namespace tle {
namespace {

// Rounds a finite or infinite double to a float format with `mbits` explicit mantissa bits and
// exponent bias `bias` (max exponent field all-ones is inf/nan), returning the bit pattern.
uint16_t round_to_small_float(double v, int ebits, int mbits) {
  const int bias = (1 << (ebits - 1)) - 1;
  uint16_t sign = std::signbit(v) ? uint16_t(1u << (ebits + mbits)) : 0;
  const uint16_t inf = uint16_t(((1u << ebits) - 1) << mbits);
  if (std::isnan(v)) return uint16_t(sign | inf | (1u << (mbits - 1)));
  double a = std::fabs(v);
  if (std::isinf(a)) return sign | inf;
  if (a == 0) return sign;
  int e;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  int exp = e - 1;    // a = 1.x * 2^exp
  const int emin = 1 - bias;
  // Quantum (value of one unit in the last place) for this exponent, or the subnormal quantum.
  int qexp = (exp < emin ? emin : exp) - mbits;
  double scaled = std::ldexp(a, -qexp);  // exact: a double scaled by a power of two
  double r = std::nearbyint(scaled);     // default rounding mode: nearest even
  // r * 2^qexp is the rounded value; rebuild bits.
  uint64_t q = static_cast<uint64_t>(r);
  if (exp < emin) {
    // subnormal (or rounds up into the smallest normal, which the bit layout handles)
    return uint16_t(sign | q);
  }
  // normal: q in [2^mbits, 2^(mbits+1)]
  int biased = exp + bias;
  if (q == (1ull << (mbits + 1))) { q >>= 1; biased += 1; }
  if (biased >= (1 << ebits) - 1) return sign | inf;
  return uint16_t(sign | (uint16_t(biased) << mbits) | (q & ((1u << mbits) - 1)));
}

double small_float_to_double(uint16_t b, int ebits, int mbits) {
  const int bias = (1 << (ebits - 1)) - 1;
  bool neg = b >> (ebits + mbits);
  int e = (b >> mbits) & ((1 << ebits) - 1);
  uint32_t m = b & ((1u << mbits) - 1);
  double v;
  if (e == (1 << ebits) - 1) v = m ? NAN : INFINITY;
  else if (e == 0) v = std::ldexp(double(m), 1 - bias - mbits);
  else v = std::ldexp(double(m | (1u << mbits)), e - bias - mbits);
  return neg ? -v : v;
}

}  // namespace

uint16_t f64_to_f16_bits(double v) { return round_to_small_float(v, 5, 10); }
uint16_t f64_to_bf16_bits(double v) { return round_to_small_float(v, 8, 7); }
double f16_bits_to_f64(uint16_t b) { return small_float_to_double(b, 5, 10); }
double bf16_bits_to_f64(uint16_t b) { return small_float_to_double(b, 8, 7); }

float round_to_tf32(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7F800000u) == 0x7F800000u) return x;  // inf, NaN
  uint32_t lsb = (bits >> 13) & 1;
  bits = (bits + 0xFFFu + lsb) & ~0x1FFFu;
  float r;
  std::memcpy(&r, &bits, 4);
  return r;
}

// OCP OFP8 rev. 1.0, table 1: E4M3 has bias 7 and max finite S.1111.110 = 448 (S.1111.111 is NaN,
// no infinities); E5M2 has bias 15 and max finite S.11110.11 = 57344 (IEEE-like specials).
uint8_t f64_to_fp8_bits(double v, DType d) {
  const bool e4 = d == DType::f8e4m3;
  const int mbits = e4 ? 3 : 2, bias = e4 ? 7 : 15;
  const uint8_t maxcode = e4 ? 0x7E : 0x7B;
  const double maxval = e4 ? 448.0 : 57344.0;
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  if (std::isnan(v)) return sign | 0x7F;
  double a = std::fabs(v);
  if (a >= maxval) return sign | maxcode;  // satfinite; ties above max cannot round beyond it
  if (a == 0) return sign;
  int e;
  std::frexp(a, &e);
  const int exp = e - 1, emin = 1 - bias;
  const int qexp = (exp < emin ? emin : exp) - mbits;
  const uint64_t q = static_cast<uint64_t>(std::nearbyint(std::ldexp(a, -qexp)));  // exact scaling, RNE
  if (exp < emin) return uint8_t(sign | q);  // subnormal, or the smallest normal after rounding up
  // q in [2^mbits, 2^(mbits+1)]: exponent field exp + bias, plus the carry of a rounding up
  return uint8_t(sign | ((uint64_t(exp + bias) << mbits) + (q - (uint64_t(1) << mbits))));
}

double fp8_bits_to_f64(uint8_t b, DType d) {
  const bool e4 = d == DType::f8e4m3;
  const int mbits = e4 ? 3 : 2, bias = e4 ? 7 : 15;
  const bool neg = b & 0x80;
  const int e = (b & 0x7F) >> mbits;
  const uint32_t m = b & ((1u << mbits) - 1);
  double v;
  if (e4 && (b & 0x7F) == 0x7F) v = NAN;
  else if (!e4 && e == 31) v = m ? NAN : INFINITY;
  else if (e == 0) v = std::ldexp(double(m), 1 - bias - mbits);
  else v = std::ldexp(double(m | (1u << mbits)), e - bias - mbits);
  return neg ? -v : v;
}

f8e4m3::f8e4m3(double v) : bits(f64_to_fp8_bits(v, DType::f8e4m3)) {}
f8e4m3::operator float() const { return static_cast<float>(fp8_bits_to_f64(bits, DType::f8e4m3)); }
f8e5m2::f8e5m2(double v) : bits(f64_to_fp8_bits(v, DType::f8e5m2)) {}
f8e5m2::operator float() const { return static_cast<float>(fp8_bits_to_f64(bits, DType::f8e5m2)); }

f16::f16(double v) : bits(f64_to_f16_bits(v)) {}
f16::operator float() const { return static_cast<float>(f16_bits_to_f64(bits)); }
bf16::bf16(double v) : bits(f64_to_bf16_bits(v)) {}
bf16::operator float() const { return static_cast<float>(bf16_bits_to_f64(bits)); }

}  // namespace tle
