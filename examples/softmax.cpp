// Row softmax of a 4096 x 4096 f32 matrix (8192 x 8192 with --gpu-sizes): one program per row, the
// whole row in one tile. Then rows of an LLM vocabulary (128256 columns; 16 rows, 2048 with
// --gpu-sizes), longer than a tile holds: ex::make_softmax_looped, two passes over chunks with an
// online max / sum. Runs on tle::default_backend(); on the GPU through DeviceBuffers.
#include <tle/tle.hpp>

#include "common.hpp"
#include "kernels.hpp"

static int example(int argc, char** argv) {
  using namespace tle;
  auto softmax = ex::make_softmax();

  const Backend backend = ex::announce_backend("softmax");
  const bool big = ex::has_flag(argc, argv, "--gpu-sizes");
  const int rows = big ? 8192 : 4096, cols = big ? 8192 : 4096;
  auto x = ex::random_vector(size_t(rows) * cols, 3, -4.f, 4.f);
  std::vector<float> y(x.size()), want(x.size());
  for (int r = 0; r < rows; ++r) ex::softmax_row_reference(&x[size_t(r) * cols], &want[size_t(r) * cols], cols);
  double ms;
  if (backend == Backend::GPU) {
    const int warps = ex::row_warps(cols);
    DeviceBuffer<float> dx(x), dy(x.size());
    ms = ex::time_gpu_ms([&] { softmax(Grid(rows).with_warps(warps), dx, dy, cols, cols); });
    dy.copy_to_host(y.data(), y.size());
  } else {
    ms = ex::time_ms([&] { softmax(Grid(rows), x.data(), y.data(), cols, cols); });
  }
  bool ok = ex::check(big ? "softmax 8192x8192 f32" : "softmax 4096x4096 f32", y, want, 1e-4, 1e-7);
  std::printf("softmax (%s): %.3f ms, %.1f GB/s (read + write)\n", backend_name(backend), ms,
              8.0 * rows * cols / ms / 1e6);

  auto looped = ex::make_softmax_looped();
  const int lrows = big ? 2048 : 16, lcols = 128256, BLOCK = 8192;
  auto lx = ex::random_vector(size_t(lrows) * lcols, 5, -4.f, 4.f);
  std::vector<float> ly(lx.size()), lwant(lx.size());
  for (int r = 0; r < lrows; ++r) ex::softmax_row_reference(&lx[size_t(r) * lcols], &lwant[size_t(r) * lcols], lcols);
  if (backend == Backend::GPU) {
    DeviceBuffer<float> dx(lx), dy(lx.size());
    ms = ex::time_gpu_ms([&] { looped(Grid(lrows).with_warps(16), dx, dy, lcols, BLOCK); });
    dy.copy_to_host(ly.data(), ly.size());
  } else {
    ms = ex::time_ms([&] { looped(Grid(lrows), lx.data(), ly.data(), lcols, BLOCK); });
  }
  ok = ex::check(big ? "softmax 2048x128256 f32 (looped)" : "softmax 16x128256 f32 (looped)", ly, lwant, 1e-4, 1e-9) &&
       ok;
  std::printf("softmax looped (%s): %.3f ms, %.1f GB/s (read + write)\n", backend_name(backend), ms,
              8.0 * lrows * lcols / ms / 1e6);
  return ok ? 0 : 1;
}

int main(int argc, char** argv) { return ex::guarded(argc, argv, example); }
