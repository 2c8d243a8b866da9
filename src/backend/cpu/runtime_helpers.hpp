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
/// signal_wait (tle/mesh.hpp): spins, yielding, until *flag >= value (cmp 0) or == value (cmp 1),
/// reading with acquire order; after timeout_ns (> 0) it stops the program (stop_program) with a
/// message naming the flag and the values.
extern "C" void tle_cpu_signal_wait(uint64_t* flag, uint64_t value, int32_t cmp, int64_t timeout_ns);
extern "C" void tle_cpu_sort_lines(const void* keys, int32_t key_bits, int64_t outer, int64_t n, int64_t inner,
                                   int64_t k, int32_t* perm, int32_t* scratch);
