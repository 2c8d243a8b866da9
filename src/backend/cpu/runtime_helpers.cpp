// src/backend/cpu/runtime_helpers.cpp - C functions the JIT-compiled code may call, registered as
// absolute symbols so nothing depends on what libgcc/compiler-rt the process has: the f16/bf16
// conversion libcalls LLVM emits when the CPU lacks F16C/AVX512-BF16 (x86-64 passes half/bfloat
// in XMM registers, like _Float16; bf16 values travel in a _Float16 carrier of the same bits);
// tle's exact i64/u64 -> bf16 conversions (every conversion rounds once, to nearest even); and the
// stable sort of the `sort` op's lines (tle_cpu_sort_lines, lower_sort.cpp).
#include "backend/cpu/runtime_helpers.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "backend/cpu/program_guard.hpp"
#include "support/half.hpp"

namespace tle::cpu::detail {
namespace {

#if defined(__x86_64__) && defined(__FLT16_MAX__)
using Half = _Float16;
#define TLE_HAVE_HALF_ABI 1
#endif

#ifdef TLE_HAVE_HALF_ABI
Half from_bits(uint16_t b) { Half h; std::memcpy(&h, &b, 2); return h; }
uint16_t to_bits(Half h) { uint16_t b; std::memcpy(&b, &h, 2); return b; }

float extendhfsf2(Half h) { return static_cast<float>(f16_bits_to_f64(to_bits(h))); }
double extendhfdf2(Half h) { return f16_bits_to_f64(to_bits(h)); }
Half truncsfhf2(float f) { return from_bits(f64_to_f16_bits(f)); }
Half truncdfhf2(double d) { return from_bits(f64_to_f16_bits(d)); }
float extendbfsf2(Half h) { return static_cast<float>(bf16_bits_to_f64(to_bits(h))); }
Half truncsfbf2(float f) { return from_bits(f64_to_bf16_bits(f)); }
Half truncdfbf2(double d) { return from_bits(f64_to_bf16_bits(d)); }
#endif
float gnu_h2f_ieee(uint16_t b) { return static_cast<float>(f16_bits_to_f64(b)); }
uint16_t gnu_f2h_ieee(float f) { return f64_to_f16_bits(f); }

// |v| as a double rounded to odd (exact below 2^53), so the final rounding to bf16 is the only one.
double u64_to_double_odd(uint64_t m) {
  int bits = 64 - __builtin_clzll(m | 1);
  if (bits > 53) {
    int shift = bits - 53;
    uint64_t kept = m >> shift;
    if (m & ((uint64_t(1) << shift) - 1)) kept |= 1;
    return static_cast<double>(kept) * static_cast<double>(uint64_t(1) << shift);  // exact
  }
  return static_cast<double>(m);
}

}  // namespace

extern "C" uint16_t tle_cpu_i64_to_bf16(int64_t v) {
  uint64_t mag = v < 0 ? uint64_t(0) - uint64_t(v) : uint64_t(v);
  double d = u64_to_double_odd(mag);
  return f64_to_bf16_bits(v < 0 ? -d : d);
}
extern "C" uint16_t tle_cpu_u64_to_bf16(uint64_t v) { return f64_to_bf16_bits(u64_to_double_odd(v)); }

namespace {
/// Per line [outer, n, inner] of keys: a bottom-up merge sort of the indices 0..n-1 by ascending
/// key, stable (on equal keys the left run's index comes first); the first k go to perm.
template <class K>
void sort_lines(const K* keys, int64_t outer, int64_t n, int64_t inner, int64_t k, int32_t* perm, int32_t* scratch) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int32_t* a = scratch;
      int32_t* b = scratch + n;
      for (int64_t j = 0; j < n; ++j) a[j] = static_cast<int32_t>(j);
      const K* line = keys + o * n * inner + i;
      for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
          const int64_t mid = std::min(lo + w, n), hi = std::min(lo + 2 * w, n);
          int64_t p = lo, q = mid, out = lo;
          while (p < mid && q < hi) b[out++] = line[a[q] * inner] < line[a[p] * inner] ? a[q++] : a[p++];
          while (p < mid) b[out++] = a[p++];
          while (q < hi) b[out++] = a[q++];
        }
        std::swap(a, b);
      }
      for (int64_t j = 0; j < k; ++j) perm[(o * k + j) * inner + i] = a[j];
    }
}
}  // namespace

extern "C" void tle_cpu_sort_lines(const void* keys, int32_t key_bits, int64_t outer, int64_t n, int64_t inner,
                                   int64_t k, int32_t* perm, int32_t* scratch) {
  if (key_bits == 64) sort_lines(static_cast<const uint64_t*>(keys), outer, n, inner, k, perm, scratch);
  else sort_lines(static_cast<const uint32_t*>(keys), outer, n, inner, k, perm, scratch);
}

extern "C" void tle_cpu_signal_wait(uint64_t* flag, uint64_t value, int32_t cmp, int64_t timeout_ns) {
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t spin = 0;; ++spin) {
    const uint64_t v = std::atomic_ref<uint64_t>(*flag).load(std::memory_order_acquire);
    if (cmp == 0 ? v >= value : v == value) return;
    if (spin < 64) continue;
    std::this_thread::yield();
    if (timeout_ns <= 0 || spin % 256 != 0) continue;
    const auto waited = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
    if (waited.count() < timeout_ns) continue;
    char text[512];
    std::snprintf(text, sizeof text,
                  "signal_wait timed out after %.3g s: the flag at %p holds %llu, waiting for %s %llu (a rank that "
                  "should signal it did not: it was not launched, failed, or waits itself; or the value is wrong). "
                  "MeshOptions::timeout_s or TLE_MESH_TIMEOUT sets the limit",
                  static_cast<double>(timeout_ns) * 1e-9, static_cast<void*>(flag), static_cast<unsigned long long>(v),
                  cmp == 0 ? ">=" : "==", static_cast<unsigned long long>(value));
    stop_program(text);
  }
}

std::vector<std::pair<const char*, void*>> runtime_helpers() {
  std::vector<std::pair<const char*, void*>> h = {
      {"tle_cpu_i64_to_bf16", reinterpret_cast<void*>(&tle_cpu_i64_to_bf16)},
      {"tle_cpu_u64_to_bf16", reinterpret_cast<void*>(&tle_cpu_u64_to_bf16)},
      {"tle_cpu_sort_lines", reinterpret_cast<void*>(&tle_cpu_sort_lines)},
      {"tle_cpu_signal_wait", reinterpret_cast<void*>(&tle_cpu_signal_wait)},
      {"__gnu_h2f_ieee", reinterpret_cast<void*>(&gnu_h2f_ieee)},
      {"__gnu_f2h_ieee", reinterpret_cast<void*>(&gnu_f2h_ieee)},
  };
#ifdef TLE_HAVE_HALF_ABI
  h.insert(h.end(), {
                        {"__extendhfsf2", reinterpret_cast<void*>(&extendhfsf2)},
                        {"__extendhfdf2", reinterpret_cast<void*>(&extendhfdf2)},
                        {"__truncsfhf2", reinterpret_cast<void*>(&truncsfhf2)},
                        {"__truncdfhf2", reinterpret_cast<void*>(&truncdfhf2)},
                        {"__extendbfsf2", reinterpret_cast<void*>(&extendbfsf2)},
                        {"__truncsfbf2", reinterpret_cast<void*>(&truncsfbf2)},
                        {"__truncdfbf2", reinterpret_cast<void*>(&truncdfbf2)},
                    });
#endif
  return h;
}

}  // namespace tle::cpu::detail
