// Tile code calling CUDA device functions compiled by NVRTC (TLE-Raw, docs/raw.md): each program
// loads a row of a [rows, 1024] f32 matrix, gets its sum of squares from a CUDA warp-shuffle
// reduction and sorts it with a CTA-wide CUDA bitonic sort (examples/raw_kernels.hpp); both are
// checked against references. Then a raw CUDA kernel (tle::raw_kernel) and tile kernels run
// interleaved on one stream: y = 3x + 1 (raw), z = y + x (tile), w = -0.5 z + 2 (raw), checked.
// GPU only: without a GPU it says so and exits 0.
#include <tle/tle.hpp>

#include "common.hpp"
#include "kernels.hpp"
#include "raw_kernels.hpp"

static int example(int argc, char** argv) {
  using namespace tle;
  const Backend backend = ex::announce_backend("raw_device_function");
  if (backend != Backend::GPU) {
    std::printf("raw_device_function: CUDA device code needs the GPU backend; no GPU here, nothing to run\n");
    return 0;
  }
  const bool big = ex::has_flag(argc, argv, "--gpu-sizes");
  const int rows = big ? 16384 : 2048, cols = 1000, BLOCK = 1024;

  // ---- sort and sum of squares per row, in CUDA, called from tile code
  auto sort_rows = ex::make_sort_rows();
  auto x = ex::random_vector(size_t(rows) * cols, 5, -100.f, 100.f);
  std::vector<float> sorted_want(x), ss_want(rows);
  for (int r = 0; r < rows; ++r) {
    auto b = sorted_want.begin() + ptrdiff_t(r) * cols;
    std::sort(b, b + cols);
    double s = 0;
    for (int c = 0; c < cols; ++c) s += double(x[size_t(r) * cols + c]) * x[size_t(r) * cols + c];
    ss_want[r] = float(s);
  }
  DeviceBuffer<float> dx(x), dy(x.size()), dss(rows);
  const double ms = ex::time_gpu_ms([&] { sort_rows(Grid(rows).with_warps(8), dx, dy, dss, cols, BLOCK); });
  bool ok = ex::check("rows sorted by CUDA bitonic", dy.to_host(), sorted_want, 0, 0);
  ok = ex::check("sums of squares (CUDA warps)", dss.to_host(), ss_want, 1e-5, 1e-3) && ok;
  std::printf("sort_rows: %d rows of %d f32, %.3f ms\n", rows, cols, ms);

  // ---- a raw CUDA kernel and tile kernels interleaved on one (non-blocking) stream
  const int n = big ? (1 << 24) : (1 << 20);
  auto affine = ex::make_raw_affine();
  auto add = ex::make_vector_add();
  auto v = ex::random_vector(n, 7);
  DeviceBuffer<float> dv(v), d1(n), d2(n), d3(n);
  Stream stream(/*non_blocking=*/true);
  affine(Grid(cdiv(n, 256)).on(stream), Block(256), d1, dv, 3.0f, 1.0f, n);    // d1 = 3v + 1
  add(Grid(cdiv(n, 1024)).on(stream), d1, dv, d2, n, 1024);                   // d2 = d1 + v
  affine[Grid(cdiv(n, 128)).on(stream)](d3, d2, -0.5f, 2.0f, n);              // d3 = -0.5 d2 + 2
  stream.synchronize();
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) want[i] = -0.5f * ((3.0f * v[i] + 1.0f) + v[i]) + 2.0f;
  ok = ex::check("raw + tile kernels on a stream", d3.to_host(), want, 1e-6, 1e-6) && ok;
  return ok ? 0 : 1;
}

int main(int argc, char** argv) { return ex::guarded(argc, argv, example); }
