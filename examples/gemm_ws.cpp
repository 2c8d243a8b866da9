// A warp-specialized bf16 GEMM written with TLE-Struct (ex::make_gemm_ws: a TMA producer
// warpgroup, two wgmma consumer warpgroups, setmaxnreg, an mbarrier ring of 3 stages; persistent
// programs). C[M,N] = A[M,K] @ B[K,N] stored as bf16, checked against a double reference on
// sampled entries. Sizes: 260 x 296 x 136 (ragged: M not a multiple of the 128-row block, N
// not of 256) on the CPU backend, where the roles run interleaved on the interpreter; with
// --gpu-sizes on the GPU, 8192^3 and 4100 x 7168 x 2048 (TFLOP/s printed).
#include <tle/tle.hpp>

#include "common.hpp"
#include "kernels.hpp"

static bool run(tle::Backend backend, int M, int N, int K) {
  using namespace tle;
  std::vector<float> af = ex::random_vector(size_t(M) * K, 7), bf = ex::random_vector(size_t(K) * N, 8);
  std::vector<bf16> a(af.begin(), af.end()), b(bf.begin(), bf.end());
  std::vector<size_t> at;
  for (size_t s = 0; s < 1024; ++s) at.push_back((s * 2654435761ull + 12345) % (size_t(M) * N));
  std::vector<float> want(at.size());
  for (size_t s = 0; s < at.size(); ++s) {
    const size_t i = at[s] / N, j = at[s] % N;
    double acc = 0;
    for (int k = 0; k < K; ++k) acc += double(float(a[i * K + k])) * double(float(b[size_t(k) * N + j]));
    want[s] = float(acc);
  }
  auto gemm = ex::make_gemm_ws<bf16>();
  const int S = 3;
  std::vector<bf16> c(size_t(M) * N);
  double ms;
  if (backend == Backend::GPU) {
    DeviceBuffer<bf16> da(a), db(b), dc(c.size());
    const TensorDescriptor<bf16, 2> ta(da, {M, K}, {K, 1}, {128, 64}), tb(db, {K, N}, {N, 1}, {64, 64});
    const int64_t blocks = cdiv(M, 128) * cdiv(N, 256);
    const Grid grid(std::min<int64_t>(blocks, gpu_info() ? gpu_info()->num_sms : 132));
    ms = ex::time_gpu_ms([&] { gemm(grid, ta, tb, dc, M, N, K, S); }, 10);
    dc.copy_to_host(c.data(), c.size());
  } else {
    const TensorDescriptor<bf16, 2> ta(a.data(), {M, K}, {K, 1}, {128, 64}), tb(b.data(), {K, N}, {N, 1}, {64, 64});
    ms = ex::time_ms([&] { gemm(Grid(4), ta, tb, c.data(), M, N, K, S); }, 1);
  }
  std::vector<float> got(at.size());
  for (size_t s = 0; s < at.size(); ++s) got[s] = float(c[at[s]]);
  const std::string label = "gemm_ws " + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K);
  const bool ok = ex::check(label.c_str(), got, want, 1.0 / 128, 2e-3 * std::sqrt(double(K)));
  std::printf("%s (%s): %.3f ms, %.1f TFLOP/s\n", label.c_str(), backend_name(backend), ms, 2.0 * M * N * K / ms / 1e9);
  return ok;
}

static int example(int argc, char** argv) {
  const tle::Backend backend = ex::announce_backend("gemm_ws");
  bool ok = true;
  if (backend == tle::Backend::GPU && ex::has_flag(argc, argv, "--gpu-sizes")) {
    ok &= run(backend, 8192, 8192, 8192);
    ok &= run(backend, 4100, 7168, 2048);
  } else {
    ok &= run(backend, 260, 296, 136);
  }
  return ok ? 0 : 1;
}

int main(int argc, char** argv) { return ex::guarded(argc, argv, example); }
