// Tiled matmul C[M,N] = A[M,K] @ B[K,N], 1024^3, with f32 inputs and with bf16 inputs (f32
// accumulation). One program per BM x BN block of C; the K loop is a device loop with a carried
// accumulator and masked tails. With --gpu-sizes: 8192^3 bf16 only, checked on 1024 sampled
// entries of C. Runs on tle::default_backend(); on the GPU through DeviceBuffers, with bf16
// inputs read through tensor descriptors (ex::make_matmul_tma: on sm_90a the K loop's blocks move
// by TMA into wgmma's buffers; the rows here are whole 16-byte chunks, as descriptors need). Then
// the same for fp8 e4m3 inputs with per-tensor scales (run_fp8).
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

// The FP8 GEMM of FP8 checkpoints with torch._scaled_mm's contract (ex::make_scaled_mm_fp8): e4m3 A
// [M, K] and B given as its transpose [N, K], per-tensor scales, bf16 C. On the GPU through
// descriptors, one 128x256 block per program with BK = 128, 8 warps and 4 stages (on sm_90a a TMA
// producer warpgroup feeding wgmma.m64nNk32); checked within Hopper's fp8 accumulation (2^-9 of the
// sum of |products|, docs/semantics.md "fp8") plus bf16 rounding.
bool run_fp8(tle::Backend backend, const char* label, int M, int N, int K, bool sampled) {
  using namespace tle;
  auto quantized = [](size_t n, unsigned seed) {
    std::vector<float> f = ex::random_vector(n, seed);
    return std::vector<f8e4m3>(f.begin(), f.end());
  };
  const std::vector<f8e4m3> a = quantized(size_t(M) * K, 7), bt = quantized(size_t(N) * K, 8);
  const float sa = 0.5f, sb = 1.5f;
  std::vector<size_t> at;
  for (size_t s = 0; s < (sampled ? 1024 : size_t(M) * N); ++s)
    at.push_back(sampled ? (s * 2654435761ull + 12345) % (size_t(M) * N) : s);
  std::vector<double> want(at.size()), mag(at.size());
  for (size_t s = 0; s < at.size(); ++s) {
    const size_t i = at[s] / N, j = at[s] % N;
    for (int k = 0; k < K; ++k) {
      const double p = double(float(a[i * K + k])) * double(float(bt[j * K + k])) * sa * sb;
      want[s] += p, mag[s] += std::fabs(p);
    }
  }
  std::vector<bf16> c(size_t(M) * N);
  auto mm = ex::make_scaled_mm_fp8<f8e4m3, false>();
  const bool gpu = backend == Backend::GPU;
  const int BM = gpu ? 128 : 64, BN = gpu ? 256 : 64, BK = gpu ? 128 : 64;
  const Grid grid = Grid(cdiv(M, BM), cdiv(N, BN)).with_warps(gpu ? 8 : 4).with_stages(4);
  double ms;
  if (gpu) {
    DeviceBuffer<f8e4m3> da(a), dbt(bt);
    DeviceBuffer<bf16> dc(c.size());
    const TensorDescriptor<f8e4m3, 2> ta(da, {M, K}, {K, 1}, {BM, BK}), tb(dbt, {N, K}, {K, 1}, {BN, BK});
    ms = ex::time_gpu_ms([&] { mm(grid, ta, tb, dc, sa, sb, M, N, K); }, 5);
    dc.copy_to_host(c.data(), c.size());
  } else {
    const TensorDescriptor<f8e4m3, 2> ta(a.data(), {M, K}, {K, 1}, {BM, BK}), tb(bt.data(), {N, K}, {K, 1}, {BN, BK});
    ms = ex::time_ms([&] { mm(grid, ta, tb, c.data(), sa, sb, M, N, K); }, 3);
  }
  int bad = 0;
  for (size_t s = 0; s < at.size(); ++s) {
    const double got = double(float(c[at[s]]));
    if (std::fabs(got - want[s]) > 0x1p-8 * std::fabs(want[s]) + 0x1p-9 * mag[s] + 1e-30 && bad++ < 5)
      std::printf("%s: C[%zu] = %g, want %g\n", label, at[s], got, want[s]);
  }
  std::printf("%s (%s): %.2f ms, %.2f GFLOP/s%s\n", label, backend_name(backend), ms, 2.0 * M * N * K / ms / 1e6,
              bad ? " - WRONG" : "");
  return bad == 0;
}

static int example(int argc, char** argv) {
  const tle::Backend backend = ex::announce_backend("matmul");
  if (ex::has_flag(argc, argv, "--gpu-sizes")) {
    bool ok = run<tle::bf16>(backend, "matmul 8192^3 bf16->f32", 8192, 8192, 8192, true);
    ok &= run_fp8(backend, "matmul 8192^3 fp8 e4m3 (scaled, bf16 out)", 8192, 8192, 8192, true);
    return ok ? 0 : 1;
  }
  bool ok = run<float>(backend, "matmul 1024^3 f32", 1024, 1024, 1024, false);
  ok &= run<tle::bf16>(backend, "matmul 1024^3 bf16->f32", 1024, 1024, 1024, false);
  ok &= run_fp8(backend, "matmul 1000x768x1024 fp8 e4m3 (scaled, bf16 out)", 1000, 768, 1024, false);
  return ok ? 0 : 1;
}

int main(int argc, char** argv) { return ex::guarded(argc, argv, example); }
