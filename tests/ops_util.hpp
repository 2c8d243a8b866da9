// tests/ops_util.hpp - helpers shared by the numerical tests (tests/test_ops*.cpp,
// test_edge_cases.cpp, test_cpu_backend.cpp): the test backend switch, kernel buffers (bool-safe),
// random data, f16/bf16 conversions and a mismatch reporter that names the first bad element so a
// failing CHECK says what went wrong.
//
// Test backend. The numerical tests launch kernels on host buffers: `k(Grid(n), buf.data(), ...)`.
// TLE_TEST_BACKEND=cpu (the default) runs them on the CPU backend. TLE_TEST_BACKEND=gpu runs the
// same code on the GPU: main.cpp then sets TLE_BACKEND=gpu (launches without .backend(...) go to
// the GPU) and TLE_LAUNCH_BLOCKING=1 (each launch waits for its kernel, so results are read right
// after it and a fault fails the launch that caused it), and Buf / Vec allocate CUDA managed
// memory (tle::ManagedBuffer), one address for host and GPU. Without a usable GPU, main exits with
// status 2 and says why. The same reference checks apply on both backends, except where a test
// says otherwise (docs/semantics.md, "What backends may differ in").
//
// Ragged tile shapes (dims that are not powers of two) run in gpu mode as they are: the GPU pads
// them (src/passes/gpu/pad_shapes.cpp). What does not run in gpu mode: whole test cases that check
// CPU-only behaviour, SKIP_ON_GPU("reason") (a WARN naming it).
// The mirrored run is `TLE_TEST_BACKEND=gpu tle_tests "[ops],[edge],[cpu],[mesh]"`
// (scripts/device-run.sh remote). TLE_TEST_BACKEND=interp runs the same launches on the reference
// interpreter (src/interp; main.cpp sets TLE_BACKEND=interp; host memory as on the CPU).
#pragma once
#include <catch2/catch.hpp>
#include <tle/tle.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace opstest {

/// True when TLE_TEST_BACKEND=gpu (read once).
inline bool gpu_mode() {
  static const bool g = [] {
    const char* e = std::getenv("TLE_TEST_BACKEND");
    return e && (std::strcmp(e, "gpu") == 0 || std::strcmp(e, "GPU") == 0);
  }();
  return g;
}

}  // namespace opstest

/// Ends a test case in gpu mode, with a warning that names the reason (CPU-only behaviour).
#define SKIP_ON_GPU(reason)                                   \
  do {                                                        \
    if (::opstest::gpu_mode()) {                              \
      WARN("not run with TLE_TEST_BACKEND=gpu: " << reason);  \
      return;                                                 \
    }                                                         \
  } while (0)

namespace opstest {

template <class T> inline constexpr bool is_half_v = std::is_same_v<T, tle::f16> || std::is_same_v<T, tle::bf16>;
template <class T> inline constexpr bool is_fp_v = is_half_v<T> || std::is_floating_point_v<T>;

template <class T> double to_d(T v) {
  if constexpr (is_half_v<T>) return static_cast<double>(static_cast<float>(v));
  else return static_cast<double>(v);
}
template <class T> T from_d(double d) {
  if constexpr (is_half_v<T>) return T(d);
  else return static_cast<T>(d);
}

/// Memory for T[n] that kernels on the test backend can use: the heap on the CPU, CUDA managed
/// memory in gpu mode. Aligned to at least 16 bytes.
inline void* test_alloc(size_t bytes) {
  if (gpu_mode()) return tle::detail::managed_alloc(bytes ? bytes : 1);
  return ::operator new(bytes ? bytes : 1, std::align_val_t(64));
}
inline void test_free(void* p) noexcept {
  if (!p) return;
  if (gpu_mode()) tle::detail::managed_free(p);
  else ::operator delete(p, std::align_val_t(64));
}

/// A buffer of T for kernel arguments (works for bool, unlike std::vector<bool>), in test_alloc
/// memory. Copyable; indexable on the host.
template <class T> struct Buf {
  static_assert(std::is_trivially_copyable_v<T>);
  T* p = nullptr;
  size_t n = 0;
  Buf() = default;
  explicit Buf(size_t count, T init = T()) : p(static_cast<T*>(test_alloc(count * sizeof(T)))), n(count) {
    for (size_t i = 0; i < n; ++i) new (p + i) T(init);
  }
  Buf(std::initializer_list<T> v) : Buf(v.size()) { std::copy(v.begin(), v.end(), p); }
  explicit Buf(const std::vector<T>& v) : Buf(v.size()) { std::copy(v.begin(), v.end(), p); }
  Buf(const Buf& o) : Buf(o.n) { std::copy(o.p, o.p + o.n, p); }
  Buf(Buf&& o) noexcept : p(o.p), n(o.n) { o.p = nullptr, o.n = 0; }
  Buf& operator=(Buf o) noexcept {
    std::swap(p, o.p);
    std::swap(n, o.n);
    return *this;
  }
  ~Buf() { test_free(p); }
  T* data() { return p; }
  const T* data() const { return p; }
  size_t size() const { return n; }
  T& operator[](size_t i) { return p[i]; }
  const T& operator[](size_t i) const { return p[i]; }
  T* begin() { return p; }
  T* end() { return p + n; }
  const T* begin() const { return p; }
  const T* end() const { return p + n; }
};

/// std::allocator's replacement that puts a std::vector in test_alloc memory, so vectors passed to
/// kernels (Vec<T>) work on both test backends.
template <class T> struct TestAlloc {
  using value_type = T;
  TestAlloc() = default;
  template <class U> TestAlloc(const TestAlloc<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(test_alloc(n * sizeof(T))); }
  void deallocate(T* p, size_t) noexcept { test_free(p); }
  template <class U> bool operator==(const TestAlloc<U>&) const noexcept { return true; }
};
template <class T> using Vec = std::vector<T, TestAlloc<T>>;

/// Random values of T: floats uniform in [lo, hi] (rounded to T), integers uniform in [lo, hi]
/// clamped to T's range, bool fair coin.
template <class T> Buf<T> random_buf(size_t n, unsigned seed, double lo = -1, double hi = 1) {
  std::mt19937_64 g(seed);
  Buf<T> b(n);
  if constexpr (std::is_same_v<T, bool>) {
    for (size_t i = 0; i < n; ++i) b[i] = (g() & 1) != 0;
  } else if constexpr (is_fp_v<T>) {
    std::uniform_real_distribution<double> d(lo, hi);
    for (size_t i = 0; i < n; ++i) b[i] = from_d<T>(d(g));
  } else {
    double tlo = std::max(lo, double(std::numeric_limits<T>::min()));
    double thi = std::min(hi, double(std::numeric_limits<T>::max()));
    std::uniform_int_distribution<long long> d(static_cast<long long>(tlo), static_cast<long long>(thi));
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<T>(d(g));
  }
  return b;
}

/// Random integers over the whole range of T.
template <class T> Buf<T> random_full(size_t n, unsigned seed) {
  std::mt19937_64 g(seed);
  Buf<T> b(n);
  for (size_t i = 0; i < n; ++i) {
    uint64_t r = g();
    T v;
    std::memcpy(&v, &r, sizeof(T));
    b[i] = v;
  }
  return b;
}

template <class T> std::string show(T v) {
  std::ostringstream o;
  if constexpr (std::is_same_v<T, bool>) o << (v ? "true" : "false");
  else if constexpr (is_half_v<T>) o << static_cast<float>(v) << " (bits 0x" << std::hex << v.bits << ")";
  else if constexpr (std::is_integral_v<T> && sizeof(T) == 1) o << int(v);
  else if constexpr (std::is_floating_point_v<T>) {
    o.precision(std::numeric_limits<T>::max_digits10);
    o << v;
  } else o << v;
  return o.str();
}

inline bool close_d(double got, double want, double rtol, double atol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  if (got == want) return true;
  return std::fabs(got - want) <= atol + rtol * std::fabs(want);
}

/// "" when every element matches (exactly for integers / bool, within tolerance for floats;
/// NaN matches NaN), else a description of the mismatches and the first one.
template <class CG, class CW> std::string diffs(const CG& got, const CW& want, double rtol = 0, double atol = 0) {
  if (got.size() != want.size())
    return "size mismatch: got " + std::to_string(got.size()) + " want " + std::to_string(want.size());
  using G = std::decay_t<decltype(got[0])>;
  using W = std::decay_t<decltype(want[0])>;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    bool ok;
    if constexpr (std::is_integral_v<G> && std::is_integral_v<W>) ok = got[i] == static_cast<G>(want[i]);
    else ok = close_d(to_d<G>(got[i]), to_d<W>(want[i]), rtol, atol);
    if (!ok && bad++ == 0) first = i;
  }
  if (!bad) return "";
  return std::to_string(bad) + " of " + std::to_string(got.size()) + " elements differ; first at [" +
         std::to_string(first) + "]: got " + show<G>(got[first]) + ", want " + show<W>(want[first]);
}

inline const int kSizes[] = {1, 17, 1001};

template <class T> uint16_t bits16(T h) { return h.bits; }

}  // namespace opstest
