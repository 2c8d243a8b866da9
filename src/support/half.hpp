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
/// double -> f8e4m3 / f8e5m2 bits (`d` names the format): round to nearest even once, saturating
/// (|v| above the max finite value, infinities included, gives +-max: PTX's .satfinite), NaN ->
/// S.1111.111 / S.11111.11 with v's sign (dtype.hpp, is_fp8).
uint8_t f64_to_fp8_bits(double v, DType d);
/// fp8 bits -> double, exact (E5M2's 0x7C / 0xFC are +-inf; a NaN code gives a NaN with its sign).
double fp8_bits_to_f64(uint8_t b, DType d);
}  // namespace tle
