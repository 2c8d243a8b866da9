// Row softmax with an inline-PTX exponential (TLE-Raw, docs/raw.md): the same kernel as
// examples/softmax.cpp, but exp is the PTX instruction ex2.approx.ftz.f32 through tle::inline_asm.
// Checks against a double-precision reference and times it against the pure tile softmax
// (examples/kernels.hpp) on the same data. 4096 x 4096 f32 (8192 x 8192 with --gpu-sizes).
// GPU only: without a GPU it says so and exits 0.
#include <tle/tle.hpp>

#include "common.hpp"
#include "kernels.hpp"
#include "raw_kernels.hpp"

static int example(int argc, char** argv) {
  using namespace tle;
  const Backend backend = ex::announce_backend("raw_softmax");
  if (backend != Backend::GPU) {
    std::printf("raw_softmax: inline PTX needs the GPU backend; no GPU here, nothing to run\n");
    return 0;
  }
  auto raw = ex::make_raw_softmax();
  auto tile = ex::make_softmax();
  const bool big = ex::has_flag(argc, argv, "--gpu-sizes");
  const int rows = big ? 8192 : 4096, cols = big ? 8192 : 4096;
  auto x = ex::random_vector(size_t(rows) * cols, 3, -4.f, 4.f);
  std::vector<float> y(x.size()), want(x.size());
  for (int r = 0; r < rows; ++r) ex::softmax_row_reference(&x[size_t(r) * cols], &want[size_t(r) * cols], cols);
  const int warps = ex::row_warps(cols);
  DeviceBuffer<float> dx(x), dy(x.size());
  // Alternate the two kernels' timings (three rounds each) so that clocks and caches treat them alike.
  double raw_ms = 1e30, tile_ms = 1e30;
  for (int round = 0; round < 3; ++round) {
    tile_ms = std::min(tile_ms, ex::time_gpu_ms([&] { tile(Grid(rows).with_warps(warps), dx, dy, cols, cols); }));
    raw_ms = std::min(raw_ms, ex::time_gpu_ms([&] { raw(Grid(rows).with_warps(warps), dx, dy, cols, cols); }));
  }
  dy.copy_to_host(y.data(), y.size());  // the raw kernel ran last
  // ex2.approx.ftz has a maximum relative error of 2^-22.5 (PTX ISA, "ex2"); the scaling by log2(e)
  // in f32 adds a few ulp of the argument.
  bool ok = ex::check(big ? "raw softmax 8192x8192 f32" : "raw softmax 4096x4096 f32", y, want, 2e-4, 1e-7);
  const double gb = 8.0 * rows * cols / 1e6;
  std::printf("raw_softmax (inline ex2.approx.ftz): %.3f ms, %.1f GB/s; tile softmax: %.3f ms, %.1f GB/s; "
              "raw/tile time %.3f\n",
              raw_ms, gb / raw_ms, tile_ms, gb / tile_ms, raw_ms / tile_ms);
  return ok ? 0 : 1;
}

int main(int argc, char** argv) { return ex::guarded(argc, argv, example); }
