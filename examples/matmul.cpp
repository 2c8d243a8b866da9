// Tiled matmul C[M,N] = A[M,K] @ B[K,N], 1024^3, with f32 inputs and with bf16 inputs (f32
// accumulation). One program per BM x BN block of C; the K loop is a device loop with a carried
// accumulator and masked tails.
#include <tle/tle.hpp>

#include "common.hpp"

template <class T> auto make_matmul() {
  using namespace tle;
  return jit("matmul", [](Ptr<T> a, Ptr<T> b, Ptr<float> c, Tile<int32_t> M, Tile<int32_t> N, Tile<int32_t> K,
                          Constexpr<int> BM, Constexpr<int> BN, Constexpr<int> BK) {
    Tile<int32_t> rm = program_id(0) * BM + arange(0, BM);
    Tile<int32_t> rn = program_id(1) * BN + arange(0, BN);
    Tile<int32_t> rk = arange(0, BK);
    Tile<float> acc = zeros<float>({BM, BN});
    for (auto k0 : range(0, K, BK)) {
      Tile<int32_t> kk = k0 + rk;
      Tile<bool> ma = expand_dims(rm < M, 1) & expand_dims(kk < K, 0);
      Tile<bool> mb = expand_dims(kk < K, 1) & expand_dims(rn < N, 0);
      Tile<T> ta = load(a + expand_dims(rm, 1) * K + expand_dims(kk, 0), ma);
      Tile<T> tb = load(b + expand_dims(kk, 1) * N + expand_dims(rn, 0), mb);
      acc = dot(ta, tb, acc);
    }
    store(c + expand_dims(rm, 1) * N + expand_dims(rn, 0), acc, expand_dims(rm < M, 1) & expand_dims(rn < N, 0));
  });
}

template <class T> bool run(const char* label, int M, int N, int K) {
  std::vector<float> af = ex::random_vector(size_t(M) * K, 7), bf = ex::random_vector(size_t(K) * N, 8);
  std::vector<T> a(af.begin(), af.end()), b(bf.begin(), bf.end());
  // reference from the rounded inputs, accumulated in double
  std::vector<float> want(size_t(M) * N), c(size_t(M) * N);
  std::vector<float> ar(a.begin(), a.end()), br(b.begin(), b.end());
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double s = 0;
      for (int k = 0; k < K; ++k) s += double(ar[size_t(i) * K + k]) * br[size_t(k) * N + j];
      want[size_t(i) * N + j] = float(s);
    }
  auto mm = make_matmul<T>();
  const int BM = 64, BN = 64, BK = 32;
  double ms = ex::time_ms([&] {
    mm(tle::Grid(tle::cdiv(M, BM), tle::cdiv(N, BN)), a.data(), b.data(), c.data(), M, N, K, BM, BN, BK);
  }, 3);
  bool ok = ex::check(label, c, want, 1e-4, 1e-3);
  std::printf("%s: %.2f ms, %.2f GFLOP/s\n", label, ms, 2.0 * M * N * K / ms / 1e6);
  return ok;
}

int main() {
  bool ok = run<float>("matmul 1024^3 f32", 1024, 1024, 1024);
  ok &= run<tle::bf16>("matmul 1024^3 bf16->f32", 1024, 1024, 1024);
  return ok ? 0 : 1;
}
