// LayerNorm forward over the rows of a 4096 x 4096 f32 matrix: y = (x - mean) / sqrt(var + eps) * w + b.
// With --gpu-sizes: 16384 x 4096 with bf16 x and y (statistics in f32; --f32 keeps f32). Runs on
// tle::default_backend(); on the GPU through DeviceBuffers.
#include <tle/tle.hpp>

#include "common.hpp"
#include "kernels.hpp"

template <class T> bool run(tle::Backend backend, const char* label, int rows, int cols, double rtol, double atol) {
  using namespace tle;
  const float eps = 1e-5f;
  auto xf = ex::random_vector(size_t(rows) * cols, 4, -2.f, 2.f);
  auto w = ex::random_vector(cols, 5), b = ex::random_vector(cols, 6);
  std::vector<T> x(xf.begin(), xf.end()), y(x.size());
  std::vector<float> want(x.size());
  for (int r = 0; r < rows; ++r) {
    const T* xr = &x[size_t(r) * cols];
    double mean = 0, var = 0;
    for (int c = 0; c < cols; ++c) mean += float(xr[c]);
    mean /= cols;
    for (int c = 0; c < cols; ++c) var += (float(xr[c]) - mean) * (float(xr[c]) - mean);
    var /= cols;
    double rstd = 1.0 / std::sqrt(var + eps);
    for (int c = 0; c < cols; ++c) want[size_t(r) * cols + c] = float((float(xr[c]) - mean) * rstd * w[c] + b[c]);
  }
  auto layernorm = ex::make_layernorm<T>();
  double ms;
  if (backend == Backend::GPU) {
    const int warps = ex::row_warps(cols);
    // persistent: 2 programs per SM, each with 3 rows in shared memory (benchmarks/RESULTS.md)
    const int programs = std::min(rows, 2 * tle::gpu_info()->num_sms);
    DeviceBuffer<T> dx(x), dy(x.size());
    DeviceBuffer<float> dw(w), db(b);
    ms = ex::time_gpu_ms([&] { layernorm(Grid(programs).with_warps(warps), dx, dy, dw, db, rows, cols, eps, cols); });
    dy.copy_to_host(y.data(), y.size());
  } else {
    ms = ex::time_ms([&] { layernorm(Grid(rows), x.data(), y.data(), w.data(), b.data(), rows, cols, eps, cols); });
  }
  std::vector<float> got(y.begin(), y.end());
  bool ok = ex::check(label, got, want, rtol, atol);
  std::printf("layernorm (%s): %.3f ms, %.1f GB/s (read + write)\n", backend_name(backend), ms,
              2.0 * sizeof(T) * rows * cols / ms / 1e6);
  return ok;
}

static int example(int argc, char** argv) {
  const tle::Backend backend = ex::announce_backend("layernorm");
  if (!ex::has_flag(argc, argv, "--gpu-sizes")) return run<float>(backend, "layernorm 4096x4096 f32", 4096, 4096, 1e-4, 1e-5) ? 0 : 1;
  if (ex::has_flag(argc, argv, "--f32")) return run<float>(backend, "layernorm 16384x4096 f32", 16384, 4096, 1e-4, 1e-5) ? 0 : 1;
  return run<tle::bf16>(backend, "layernorm 16384x4096 bf16", 16384, 4096, 8e-3, 2e-2) ? 0 : 1;
}

int main(int argc, char** argv) { return ex::guarded(argc, argv, example); }
