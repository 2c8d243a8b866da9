// Tiled matmul C[M,N] = A[M,K] @ B[K,N], 1024^3, with f32 inputs and with bf16 inputs (f32
// accumulation). One program per BM x BN block of C; the K loop is a device loop with a carried
// accumulator and masked tails. With --gpu-sizes: 8192^3 bf16 only, checked on 1024 sampled
// entries of C. Runs on tle::default_backend(); on the GPU through DeviceBuffers, with bf16
// inputs read through tensor descriptors (ex::make_matmul_tma: on sm_90a the K loop's blocks move
// by TMA into wgmma's buffers; the rows here are whole 16-byte chunks, as descriptors need).
#include <tle/tle.hpp>

#include "common.hpp"
#include "kernels.hpp"

template <class T> bool run(tle::Backend backend, const char* label, int M, int N, int K, bool sampled) {
  using namespace tle;
  std::vector<float> af = ex::random_vector(size_t(M) * K, 7), bf = ex::random_vector(size_t(K) * N, 8);
  std::vector<T> a(af.begin(), af.end()), b(bf.begin(), bf.end());
  std::vector<float>().swap(af), std::vector<float>().swap(bf);
  std::vector<float> c(size_t(M) * N);
  // Reference from the rounded inputs, accumulated in double: every entry, or 1024 sampled ones.
  std::vector<size_t> at;
  if (sampled) {
    for (size_t s = 0; s < 1024; ++s) at.push_back((s * 2654435761ull + 12345) % (size_t(M) * N));
  } else {
    for (size_t i = 0; i < size_t(M) * N; ++i) at.push_back(i);
  }
  std::vector<float> want(at.size());
  for (size_t s = 0; s < at.size(); ++s) {
    size_t i = at[s] / N, j = at[s] % N;
    double acc = 0;
    for (int k = 0; k < K; ++k) acc += double(float(a[i * K + k])) * double(float(b[size_t(k) * N + j]));
    want[s] = float(acc);
  }
  auto mm = ex::make_matmul<T>();
  double ms;
  if (backend == Backend::GPU) {
    // 16-bit inputs: 128x256 tiles, 4 stages, through descriptors (on sm_90a TMA and wgmma with a
    // producer thread; the config benchmarks/gpu_bench's tuner picks on the H200); f32 inputs:
    // 128x128, 3 stages.
    const bool half = sizeof(T) == 2;
    const int BM = 128, BN = half ? 256 : 128, BK = half ? 64 : 32, stages = half ? 4 : 3;
    DeviceBuffer<T> da(a), db(b);
    DeviceBuffer<float> dc(c.size());
    auto mmt = ex::make_matmul_tma<T, float>();
    const Grid grid = Grid(cdiv(M, BM), cdiv(N, BN)).with_warps(8).with_stages(stages);
    const TensorDescriptor<T, 2> ta(da, {M, K}, {K, 1}, {BM, BK}), tb(db, {K, N}, {N, 1}, {BK, BN});
    ms = ex::time_gpu_ms(
        [&] {
          if (half) mmt(grid, ta, tb, dc, M, N, K);
          else mm(grid, da, db, dc, M, N, K, BM, BN, BK);
        },
        5);
    dc.copy_to_host(c.data(), c.size());
  } else {
    const int BM = 64, BN = 64, BK = 32;
    ms = ex::time_ms([&] { mm(Grid(cdiv(M, BM), cdiv(N, BN)), a.data(), b.data(), c.data(), M, N, K, BM, BN, BK); }, 3);
  }
  std::vector<float> got(at.size());
  for (size_t s = 0; s < at.size(); ++s) got[s] = c[at[s]];
  bool ok = ex::check(label, got, want, 1e-4, sampled ? 1e-2 : 1e-3);
  std::printf("%s (%s): %.2f ms, %.2f GFLOP/s\n", label, backend_name(backend), ms, 2.0 * M * N * K / ms / 1e6);
  return ok;
}

static int example(int argc, char** argv) {
  const tle::Backend backend = ex::announce_backend("matmul");
  if (ex::has_flag(argc, argv, "--gpu-sizes"))
    return run<tle::bf16>(backend, "matmul 8192^3 bf16->f32", 8192, 8192, 8192, true) ? 0 : 1;
  bool ok = run<float>(backend, "matmul 1024^3 f32", 1024, 1024, 1024, false);
  ok &= run<tle::bf16>(backend, "matmul 1024^3 bf16->f32", 1024, 1024, 1024, false);
  return ok ? 0 : 1;
}

int main(int argc, char** argv) { return ex::guarded(argc, argv, example); }
