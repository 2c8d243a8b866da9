// src/support/half.hpp - bit-exact f16/bf16 (and tf32) conversions shared by constant folding, the
// argument packer, the CPU backend's runtime helpers and the interpreter.
#pragma once
#include <cstdint>

#include "tle/dtype.hpp"

namespace tle {
uint16_t f64_to_f16_bits(double v);   // round to nearest even, once
uint16_t f64_to_bf16_bits(double v);  // round to nearest even, once
double f16_bits_to_f64(uint16_t b);
double bf16_bits_to_f64(uint16_t b);
/// f32 -> tf32 (10 explicit mantissa bits, round to nearest even, kept in an f32); inf and NaN
/// unchanged. The rule of dot's Precision::TF32 (docs/ir.md).
float round_to_tf32(float x);
}  // namespace tle
