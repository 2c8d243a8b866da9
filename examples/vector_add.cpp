// Vector add: out = x + y over 2^24 f32 values, one program per BLOCK elements.
#include <tle/tle.hpp>

#include "common.hpp"

int main() {
  using namespace tle;
  auto add = jit("vector_add", [](Ptr<float> x, Ptr<float> y, Ptr<float> out, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> mask = offs < n;
    store(out + offs, load(x + offs, mask) + load(y + offs, mask), mask);
  });

  const int n = 1 << 24, block = 1024;
  auto x = ex::random_vector(n, 1), y = ex::random_vector(n, 2);
  std::vector<float> out(n), want(n);
  for (int i = 0; i < n; ++i) want[i] = x[i] + y[i];

  double ms = ex::time_ms([&] { add(Grid(cdiv(n, block)), x.data(), y.data(), out.data(), n, block); });
  bool ok = ex::check("vector_add 2^24 f32", out, want, 0, 0);
  std::printf("vector_add: %.3f ms, %.1f GB/s (3 x 4 bytes per element)\n", ms, 12.0 * n / ms / 1e6);
  return ok ? 0 : 1;
}
