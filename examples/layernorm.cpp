// LayerNorm forward over the rows of a 4096 x 4096 f32 matrix: y = (x - mean) / sqrt(var + eps) * w + b.
#include <tle/tle.hpp>

#include "common.hpp"

int main() {
  using namespace tle;
  auto layernorm = jit("layernorm", [](Ptr<float> x, Ptr<float> y, Ptr<float> w, Ptr<float> b, Tile<int32_t> ncols,
                                       Tile<float> eps, Constexpr<int> BLOCK) {
    Tile<int64_t> base = program_id(0).to<int64_t>() * ncols;
    Tile<int32_t> cols = arange(0, BLOCK);
    Tile<bool> mask = cols < ncols;
    Tile<float> v = load(x + base + cols, mask);
    Tile<float> n = ncols.to<float>();
    Tile<float> mean = sum(v, 0) / n;
    Tile<float> d = where(mask, v - mean, 0.0f);
    Tile<float> rstd = rsqrt(sum(d * d, 0) / n + eps);
    store(y + base + cols, d * rstd * load(w + cols, mask) + load(b + cols, mask), mask);
  });

  const int rows = 4096, cols = 4096;
  const float eps = 1e-5f;
  auto x = ex::random_vector(size_t(rows) * cols, 4, -2.f, 2.f);
  auto w = ex::random_vector(cols, 5), b = ex::random_vector(cols, 6);
  std::vector<float> y(x.size()), want(x.size());
  for (int r = 0; r < rows; ++r) {
    const float* xr = &x[size_t(r) * cols];
    double mean = 0, var = 0;
    for (int c = 0; c < cols; ++c) mean += xr[c];
    mean /= cols;
    for (int c = 0; c < cols; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    var /= cols;
    double rstd = 1.0 / std::sqrt(var + eps);
    for (int c = 0; c < cols; ++c) want[size_t(r) * cols + c] = float((xr[c] - mean) * rstd * w[c] + b[c]);
  }
  double ms = ex::time_ms([&] { layernorm(Grid(rows), x.data(), y.data(), w.data(), b.data(), cols, eps, cols); });
  bool ok = ex::check("layernorm 4096x4096 f32", y, want, 1e-4, 1e-5);
  std::printf("layernorm: %.3f ms, %.1f GB/s (read + write)\n", ms, 8.0 * rows * cols / ms / 1e6);
  return ok ? 0 : 1;
}
