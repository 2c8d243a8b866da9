// Compile latency on the CPU backend: trace + optimize + LLVM O3 + ORC JIT of the softmax kernel,
// cold (a new kernel object, so nothing is cached) and from the in-memory specialization cache
// (the whole host path of a launch that hits the cache, on a 1-program grid).
#include <tle/tle.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

using namespace tle;
using clk = std::chrono::steady_clock;

static auto make_softmax() {
  return jit("softmax", [](Ptr<float> x, Ptr<float> y, Tile<int32_t> ncols, Constexpr<int> BLOCK) {
    Tile<int64_t> row = program_id(0).to<int64_t>();
    Tile<int32_t> cols = arange(0, BLOCK);
    Tile<bool> mask = cols < ncols;
    Tile<float> v = load(x + row * ncols + cols, mask, -INFINITY);
    Tile<float> e = exp(v - max(v, 0));
    store(y + row * ncols + cols, e / sum(e, 0), mask);
  });
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main() {
  std::vector<float> x(1024, 1.0f), y(1024);
  // The first compile in a process also creates the JIT; report it on its own.
  auto t0 = clk::now();
  {
    auto k = make_softmax();
    k(Grid(1), x.data(), y.data(), 1024, 1024);
  }
  double first = std::chrono::duration<double, std::milli>(clk::now() - t0).count();

  std::vector<double> cold;
  for (int i = 0; i < 20; ++i) {
    auto k = make_softmax();
    auto a = clk::now();
    k(Grid(1), x.data(), y.data(), 1024, 1024);
    cold.push_back(std::chrono::duration<double, std::milli>(clk::now() - a).count());
  }

  auto k = make_softmax();
  k(Grid(1), x.data(), y.data(), 16, 16);
  std::vector<double> hit;
  for (int i = 0; i < 20000; ++i) {
    auto a = clk::now();
    k(Grid(1), x.data(), y.data(), 16, 16);
    hit.push_back(std::chrono::duration<double, std::micro>(clk::now() - a).count());
  }
  bool ok = std::fabs(y[0] - 1.0f / 16) < 1e-6f;
  std::printf("compile_latency softmax (CPU backend): first in process %.2f ms, cold %.2f ms (median of 20), "
              "cached launch %.2f us (median of 20000, 1 program of 16 elements)%s\n",
              first, median(cold), median(hit), ok ? "" : "  [WRONG RESULT]");
  std::printf("{\"case\":\"compile_latency_softmax_cpu\",\"first_ms\":%.3f,\"cold_ms\":%.3f,\"cached_launch_us\":%.3f}\n",
              first, median(cold), median(hit));
  return ok ? 0 : 1;
}
