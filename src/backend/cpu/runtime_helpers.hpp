// src/backend/cpu/runtime_helpers.hpp - the C helpers JIT code may call (see runtime_helpers.cpp).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace tle::cpu::detail {
/// (symbol name, address) of every helper, for registration as absolute JIT symbols.
std::vector<std::pair<const char*, void*>> runtime_helpers();
}  // namespace tle::cpu::detail

extern "C" uint16_t tle_cpu_i64_to_bf16(int64_t v);
extern "C" uint16_t tle_cpu_u64_to_bf16(uint64_t v);
