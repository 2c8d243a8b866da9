// tests/ops_util.hpp - helpers shared by the CPU numerical op tests (tests/test_ops*.cpp):
// host buffers (bool-safe), random data, f16/bf16 conversions and a mismatch reporter that
// names the first bad element so a failing CHECK says what went wrong.
#pragma once
#include <catch2/catch.hpp>
#include <tle/tle.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

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

/// A heap buffer of T (works for bool, unlike std::vector<bool>). new[] is 16-byte aligned.
template <class T> struct Buf {
  std::unique_ptr<T[]> p;
  size_t n = 0;
  Buf() = default;
  explicit Buf(size_t count, T init = T()) : p(new T[count ? count : 1]), n(count) {
    for (size_t i = 0; i < n; ++i) p[i] = init;
  }
  Buf(const Buf& o) : Buf(o.n) {
    for (size_t i = 0; i < n; ++i) p[i] = o.p[i];
  }
  Buf& operator=(const Buf& o) {
    Buf t(o);
    std::swap(p, t.p);
    std::swap(n, t.n);
    return *this;
  }
  T* data() { return p.get(); }
  const T* data() const { return p.get(); }
  size_t size() const { return n; }
  T& operator[](size_t i) { return p[i]; }
  const T& operator[](size_t i) const { return p[i]; }
};

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
