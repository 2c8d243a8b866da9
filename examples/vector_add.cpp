// Vector add: out = x + y over 2^24 f32 values (2^28 with --gpu-sizes), one program per BLOCK
// elements. Runs on tle::default_backend(); on the GPU through DeviceBuffers.
#include <tle/tle.hpp>

#include "common.hpp"
#include "kernels.hpp"

static int example(int argc, char** argv) {
  using namespace tle;
  auto add = ex::make_vector_add();

  const Backend backend = ex::announce_backend("vector_add");
  const bool big = ex::has_flag(argc, argv, "--gpu-sizes");
  const int n = big ? 1 << 28 : 1 << 24, block = 1024;
  auto x = ex::random_vector(n, 1), y = ex::random_vector(n, 2);
  std::vector<float> out(n), want(n);
  for (int i = 0; i < n; ++i) want[i] = x[i] + y[i];

  double ms;
  if (backend == Backend::GPU) {
    DeviceBuffer<float> dx(x), dy(y), dout(n);
    ms = ex::time_gpu_ms([&] { add(Grid(cdiv(n, block)), dx, dy, dout, n, block); });
    dout.copy_to_host(out.data(), out.size());
  } else {
    ms = ex::time_ms([&] { add(Grid(cdiv(n, block)), x.data(), y.data(), out.data(), n, block); });
  }
  bool ok = ex::check(big ? "vector_add 2^28 f32" : "vector_add 2^24 f32", out, want, 0, 0);
  std::printf("vector_add (%s): %.3f ms, %.1f GB/s (3 x 4 bytes per element)\n", backend_name(backend), ms,
              12.0 * n / ms / 1e6);
  return ok ? 0 : 1;
}

int main(int argc, char** argv) { return ex::guarded(argc, argv, example); }
