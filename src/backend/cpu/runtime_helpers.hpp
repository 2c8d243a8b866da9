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
extern "C" void tle_cpu_sort_lines(const void* keys, int32_t key_bits, int64_t outer, int64_t n, int64_t inner,
                                   int64_t k, int32_t* perm, int32_t* scratch);
