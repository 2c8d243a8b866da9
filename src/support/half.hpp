// src/support/half.hpp - bit-exact f16/bf16 conversions shared by constant folding, the argument
// packer and the CPU backend's runtime helpers.
#pragma once
#include <cstdint>

#include "tle/dtype.hpp"

namespace tle {
uint16_t f64_to_f16_bits(double v);   // round to nearest even, once
uint16_t f64_to_bf16_bits(double v);  // round to nearest even, once
double f16_bits_to_f64(uint16_t b);
double bf16_bits_to_f64(uint16_t b);
}  // namespace tle
