// tests/test_concurrency.cpp - many host threads launching the same and different kernels at once
// (issue #12 item 5), tag [concurrency]: first-use compiles racing on one kernel object and on many,
// several specializations compiled while other threads launch, the CPU backend and the
// interpreter, every result checked against a host reference, and each specialization compiled
// exactly once. (CPU only: the GPU half runs with the device tests.)
#include <catch2/catch.hpp>

#include <atomic>
#include <barrier>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ops_util.hpp"
#include "tle/tle.hpp"

using namespace tle;
using opstest::Buf;

namespace {

// Shared kernels: every thread launches these (the first launches race to compile).
auto g_axpy = jit("conc_axpy", [](Ptr<int32_t> x, Ptr<int32_t> y, Ptr<int32_t> out, Tile<int32_t> a, Tile<int32_t> n,
                                  Constexpr<int> B) {
  Tile<int32_t> i = program_id(0) * B + arange(0, B);
  Tile<bool> m = i < n;
  store(out + i, a * load(x + i, m) + load(y + i, m), m);
});
auto g_rowsum = jit("conc_rowsum", [](Ptr<float> x, Ptr<float> out, Constexpr<int> C) {
  Tile<int32_t> r = program_id(0);
  Tile<float> v = load(x + r * C + arange(0, C));
  store(out + r, sum(v, 0));
  store(out + num_programs(0) + r, max(cumsum(v, 0), 0));
});
auto g_hist = jit("conc_hist", [](Ptr<int32_t> x, Ptr<int32_t> counts, Tile<int32_t> n) {
  Tile<int32_t> i = arange(0, 64);
  Tile<bool> m = i < n;
  Tile<int32_t> h = histogram(load(x + i, m, 0), 8, m);
  atomic_add(counts + arange(0, 8), h);
});

constexpr int kThreads = 16;
constexpr int kLaunches = 1000;

}  // namespace

TEST_CASE("concurrency: 16 threads x 1000 launches of shared and own kernels, CPU and interpreter",
          "[concurrency]") {
  SKIP_ON_GPU("the CPU backend and the interpreter run host threads; the GPU half runs with the device tests");
  std::barrier start(kThreads);
  std::atomic<int> failures{0};
  std::vector<std::string> first_failure(kThreads);
  auto fail = [&](int t, const std::string& what) {
    if (first_failure[t].empty()) first_failure[t] = what;  // each thread writes only its own slot
    ++failures;
  };
  auto worker = [&](int t) {
    std::mt19937 g(static_cast<unsigned>(t) * 7919u + 1);
    // A kernel of this thread's own, created in the thread: its first launch compiles while the
    // other threads compile theirs (the JIT, the tracer's thread-local context).
    auto own = jit("conc_own", [](Ptr<int64_t> out, Tile<int64_t> v, Constexpr<int> scale) {
      store(out + arange(0, 4), v * scale + arange(0, 4).to<int64_t>());
    });
    start.arrive_and_wait();  // every thread reaches its first launch at once
    try {
      for (int k = 0; k < kLaunches; ++k) {
        const Backend be = g() % 8 == 0 ? Backend::Interp : Backend::CPU;
        switch (g() % 4) {
          case 0: {
            static const int blocks[3] = {16, 32, 64};
            const int B = blocks[g() % 3];
            const int n = 1 + static_cast<int>(g() % 100);
            const int a = static_cast<int>(g() % 7) - 3;
            Buf<int32_t> x(100), y(100), out(100, -7);
            for (int i = 0; i < 100; ++i) x[i] = static_cast<int32_t>(g() % 1000), y[i] = static_cast<int32_t>(g() % 1000);
            g_axpy(Grid(cdiv(n, B)).backend(be), x.data(), y.data(), out.data(), a, n, B);
            for (int i = 0; i < 100; ++i)
              if (out[i] != (i < n ? a * x[i] + y[i] : -7)) return fail(t, "axpy at " + std::to_string(i));
            break;
          }
          case 1: {
            const int C = g() % 2 ? 8 : 24, R = 1 + static_cast<int>(g() % 4);
            Buf<float> x(R * C), out(2 * R);
            for (int i = 0; i < R * C; ++i) x[i] = static_cast<float>(static_cast<int>(g() % 17) - 8);  // exact sums
            g_rowsum(Grid(R).backend(be), x.data(), out.data(), C);
            for (int r = 0; r < R; ++r) {
              float s = 0, run = 0, best = -1e30f;
              for (int c = 0; c < C; ++c) s += x[r * C + c], run += x[r * C + c], best = std::max(best, run);
              if (out[r] != s || out[R + r] != best) return fail(t, "rowsum row " + std::to_string(r));
            }
            break;
          }
          case 2: {
            const int n = static_cast<int>(g() % 65), P = 1 + static_cast<int>(g() % 3);
            Buf<int32_t> x(64), counts(8, 0);
            for (int i = 0; i < 64; ++i) x[i] = static_cast<int32_t>(g() % 12) - 2;
            g_hist(Grid(P).backend(be), x.data(), counts.data(), n);
            for (int b = 0; b < 8; ++b) {
              int want = 0;
              for (int i = 0; i < n; ++i) want += x[i] == b;
              if (counts[b] != P * want) return fail(t, "histogram bin " + std::to_string(b));
            }
            break;
          }
          default: {
            const int64_t v = static_cast<int64_t>(g() % 1000000);
            Buf<int64_t> out(4, 0);
            own(Grid(1).backend(be), out.data(), v, t + 1);
            for (int i = 0; i < 4; ++i)
              if (out[i] != v * (t + 1) + i) return fail(t, "own kernel element " + std::to_string(i));
          }
        }
      }
    } catch (const std::exception& e) {
      fail(t, std::string("exception: ") + e.what());
    }
  };
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) ts.emplace_back(worker, t);
  for (auto& th : ts) th.join();
  for (int t = 0; t < kThreads; ++t) {
    INFO("thread " << t << ": " << first_failure[t]);
    CHECK(first_failure[t].empty());
  }
  CHECK(failures == 0);
  // One cache entry per specialization, however many threads raced to make it: rowsum has
  // exactly 2 widths x 2 backends; axpy and histogram at most their key counts (kernel.cpp
  // specializes an integer argument equal to 1, else on the power of two, up to 16, dividing it:
  // a in -3..3 falls in 4 classes, n in 0..100 in 6; pointers from the heap are 16-aligned).
  CHECK(g_rowsum.num_compiled() == 4);
  CHECK(g_axpy.num_compiled() <= 3 * 4 * 6 * 2);
  CHECK(g_hist.num_compiled() <= 6 * 2);
}
