// tests/struct_util.hpp - data and references the TLE-Struct tests share (test_struct_copy.cpp,
// test_struct_ws.cpp): hashed values, column sums, and bf16 GEMM operands with their product.
#pragma once
#include <tle/tle.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ops_util.hpp"

namespace structtest {

using opstest::Buf;

/// A pointer value for kernels that are only compiled (Kernel::ptx), never run.
template <class T> T* fake(uintptr_t a = 0x10000) { return reinterpret_cast<T*>(a); }
/// The elements of a test buffer.
template <class T> std::vector<T> all(const Buf<T>& b) { return std::vector<T>(b.begin(), b.end()); }

/// Small integers from a hash of the index (no period a wrong swizzle, stage or row order could
/// hide in).
inline float hashed(size_t i) { return float(int((uint32_t(i) * 2654435761u) >> 26) - 32); }

/// The column sums of the first R rows of x [R, N] (row-major), in f32.
template <class T> std::vector<float> column_sums_of(const Buf<T>& x, int R, int N) {
  std::vector<float> want(size_t(N), 0.0f);
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < N; ++j) want[size_t(j)] += float(x[size_t(i) * N + j]);
  return want;
}

/// Small integers in bf16: exact products and sums in f32 in any order.
inline void gemm_data(Buf<tle::bf16>& a, Buf<tle::bf16>& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] = tle::bf16(float(int(i * 7 % 5) - 2));
  for (size_t i = 0; i < b.size(); ++i) b[i] = tle::bf16(float(int(i * 3 % 7) - 3));
}

/// want [M, N] = a [M, K] @ b [K, N] in f32.
inline void gemm_ref(int M, int N, int K, const Buf<tle::bf16>& a, const Buf<tle::bf16>& b, std::vector<float>& want) {
  want.assign(size_t(M) * N, 0.0f);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      float s = 0;
      for (int k = 0; k < K; ++k) s += float(a[size_t(m) * K + k]) * float(b[size_t(k) * N + n]);
      want[size_t(m) * N + n] = s;
    }
}

/// A [M, K] and B [K, N] (gemm_data) in managed memory, C [M, N] f32 for the GPU to write, and
/// C's reference (gemm_ref).
struct ManagedGemm {
  tle::ManagedBuffer<tle::bf16> a, b;
  tle::ManagedBuffer<float> c;
  std::vector<float> want;
  ManagedGemm(int M, int N, int K) : a(size_t(M) * K), b(size_t(K) * N), c(size_t(M) * N) {
    Buf<tle::bf16> ha(a.size()), hb(b.size());
    gemm_data(ha, hb);
    std::copy(ha.begin(), ha.end(), a.data());
    std::copy(hb.begin(), hb.end(), b.data());
    gemm_ref(M, N, K, ha, hb, want);
  }
  std::vector<float> result() const { return std::vector<float>(c.data(), c.data() + c.size()); }
};

}  // namespace structtest
