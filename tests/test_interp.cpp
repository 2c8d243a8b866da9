// tests/test_interp.cpp - the reference interpreter (src/interp/interp.hpp), tag [interp]: its
// rules on values chosen to hit each one (docs/semantics.md), its memory checks and errors, and
// kernels run with Backend::Interp and TLE_BACKEND=interp against the CPU backend.
// (The whole numerical suite also runs on it: TLE_TEST_BACKEND=interp tle_tests "[ops],[edge]".)
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "env_util.hpp"
#include "frontend/trace.hpp"
#include "interp/interp.hpp"
#include "ir/builder.hpp"
#include "ops_util.hpp"
#include "support/half.hpp"
#include "tle/tle.hpp"
#include "trace_util.hpp"

using namespace tle;
using opstest::Buf;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

/// Runs `k` with these arguments on the interpreter and on the CPU backend, each on its own copy
/// of `out` (the first argument); returns both results.
template <class T, class K, class... A>
std::pair<Buf<T>, Buf<T>> both(const K& k, Grid g, const Buf<T>& out, const A&... args) {
  Buf<T> a = out, c = out;
  k(Grid(g).backend(Backend::Interp), a.data(), args...);
  k(Grid(g).backend(Backend::CPU), c.data(), args...);
  return {a, c};
}

template <class T> bool same_bits(const Buf<T>& a, const Buf<T>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    }
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("interp: integer division, remainder and shifts follow E04", "[interp]") {
  auto k = jit("idiv", [](Ptr<int32_t> out, Ptr<int32_t> a, Ptr<int32_t> b) {
    auto i = arange(0, 6);
    Tile<int32_t> x = load(a + i), y = load(b + i);
    store(out + i, x / y);
    store(out + 6 + i, x % y);
    store(out + 12 + i, x << y);
    store(out + 18 + i, x >> y);
  });
  const int32_t mn = std::numeric_limits<int32_t>::min();
  Buf<int32_t> a{7, -7, mn, mn, 5, -1}, b{0, 2, -1, 0, 33, 31}, out(24, 0);
  k(Grid(1).backend(Backend::Interp), out.data(), a.data(), b.data());
  std::vector<int32_t> want = {0, -3, mn, 0, 0, 0,                 // x / 0 == 0, MIN / -1 == MIN
                               7, -1, 0, mn, 5, -1,                // x % 0 == x, MIN % -1 == 0
                               7, -28, 0, mn, 0, mn,               // shifts by >= 32 give 0
                               7, -2, -1, mn, 0, -1};              // signed >> 33 gives the sign fill
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i);
    CHECK(out[i] == want[i]);
  }
}

TEST_CASE("interp: NaN, -0 and infinity rules (E02, E03) and round-once casts (E26)", "[interp]") {
  auto k = jit("nanrules", [](Ptr<float> out, Ptr<float> x) {
    auto i = arange(0, 4);
    Tile<float> v = load(x + i);
    store(out + i, maximum(v, Tile<float>(0.0f)));
    store(out + 4, max(v, 0));
    store(out + 5, argmax(v, 0).to<float>());
    store(out + 6, argmin(v, 0).to<float>());
    store(out + 7 + i, v.to<int8_t>().to<float>());  // saturating, NaN -> 0
  });
  Buf<float> x{-0.0f, kNaN, 300.0f, -kInf}, out(11, 0);
  k(Grid(1).backend(Backend::Interp), out.data(), x.data());
  CHECK(std::bit_cast<uint32_t>(out[0]) == 0);  // maximum(-0, +0) == +0
  CHECK(std::isnan(out[1]));
  CHECK(out[2] == 300.0f);
  CHECK(out[3] == 0.0f);
  CHECK(std::isnan(out[4]));  // NaN propagates through max
  CHECK(out[5] == 1.0f);      // the first NaN
  CHECK(out[6] == 1.0f);
  CHECK(out[7] == 0.0f);
  CHECK(out[8] == 0.0f);
  CHECK(out[9] == 127.0f);
  CHECK(out[10] == -128.0f);

  auto r = jit("roundonce", [](Ptr<f16> out, Ptr<double> x) { store(out, load(x).to<f16>()); });
  Buf<double> d{1025.49995};
  Buf<f16> h(1);
  r(Grid(1).backend(Backend::Interp), h.data(), d.data());
  CHECK(float(h[0]) == 1025.0f);  // not 1026: f64 -> f16 does not go through f32
}

TEST_CASE("interp: device loop trip counts at the edges of the index type (E24)", "[interp]") {
  auto k = jit("trips", [](Ptr<int32_t> out, Tile<int32_t> lo, Tile<int32_t> hi, Tile<int32_t> step) {
    Tile<int32_t> n = 0, last = -1;
    for (auto i : range(lo, hi, step)) {
      n = n + 1;
      last = i;
    }
    store(out, n);
    store(out + 1, last);
  });
  const int32_t mx = std::numeric_limits<int32_t>::max(), mn = std::numeric_limits<int32_t>::min();
  struct Case {
    int32_t lo, hi, step, trips, last;
  } cases[] = {{mx - 2, mx, 4, 1, mx - 2}, {0, 10, 3, 4, 9}, {10, 0, -3, 4, 1}, {mn + 1, mn, -5, 1, mn + 1},
               {0, 5, 0, 0, -1},         {5, 0, 1, 0, -1}, {mn, mx, 1 << 30, 4, 1 << 30}};
  for (const Case& c : cases) {
    Buf<int32_t> out(2, 0);
    k(Grid(1).backend(Backend::Interp), out.data(), c.lo, c.hi, c.step);
    INFO(c.lo << ", " << c.hi << ", " << c.step);
    CHECK(out[0] == c.trips);
    CHECK(out[1] == c.last);
  }
}

TEST_CASE("interp: reductions, scans, dot and histogram agree with the CPU backend bit for bit", "[interp]") {
  auto k = jit("mix", [](Ptr<float> out, Ptr<float> x, Ptr<f16> h, Ptr<int8_t> q, Ptr<int32_t> idx) {
    auto r = arange(0, 6), c = arange(0, 5);
    auto off = expand_dims(r, 1) * 5 + expand_dims(c, 0);
    Tile<float> v = load(x + off);
    Tile<f16> hv = load(h + off);
    store(out + off, cumsum(v, 1, true));
    store(out + 30 + r, sum(hv, 1).to<float>());
    store(out + 36 + c, max(v, 0));
    store(out + 41 + off, associative_scan(v, 0, [](Tile<float> a, Tile<float> b) { return a * b; }));
    Tile<float> d = dot(v, trans(v), Precision::TF32);
    auto o6 = expand_dims(r, 1) * 6 + expand_dims(r, 0);
    store(out + 71 + o6, d);
    Tile<int8_t> qa = load(q + off);
    store(out + 107 + o6, dot(qa, trans(qa)).to<float>());
    store(out + 143 + arange(0, 8), histogram(load(idx + arange(0, 30)), 8).to<float>());
    Tile<float> acc = 0.0f;
    for (auto i : range(0, 3)) acc = acc + sum(sum(v, 0), 0) * i.to<float>();
    store(out + 151, acc);
  });
  auto x = opstest::random_buf<float>(30, 1, -3, 3);
  x[4] = kNaN;
  x[7] = -0.0f;
  auto h = opstest::random_buf<f16>(30, 2, -2000, 2000);
  auto q = opstest::random_full<int8_t>(30, 3);
  auto idx = opstest::random_buf<int32_t>(30, 4, -2, 9);
  Buf<float> out(152, 0);
  auto [a, c] = both(k, Grid(1), out, x.data(), h.data(), q.data(), idx.data());
  CHECK(same_bits(a, c));
}

TEST_CASE("interp: atomics, masked loads and stores, and several programs", "[interp]") {
  auto k = jit("mem", [](Ptr<int32_t> out, Ptr<int32_t> x, Ptr<float> f, Tile<int32_t> n) {
    auto i = arange(0, 8);
    auto pid = program_id(0);
    Tile<bool> m = i < n;
    Tile<int32_t> v = load(x + i, m, -5);
    store(out + pid * 8 + i, v * (pid + 1), i != 3);
    Tile<int32_t> old = atomic_add(out + 32 + i, v, m);
    store(out + 40 + pid * 8 + i, old);
    atomic_max(f + i, v.to<float>());
  });
  Buf<int32_t> x{1, -2, 3, -4, 5, -6, 7, -8}, out(72, 9);
  Buf<float> f{0, kNaN, -0.0f, 2, 3, 4, 5, 6};
  Buf<int32_t> a = out, c = out;
  Buf<float> fa = f, fc = f;
  k(Grid(4).backend(Backend::Interp), a.data(), x.data(), fa.data(), 5);
  k(Grid(4).backend(Backend::CPU), c.data(), x.data(), fc.data(), 5);
  // The atomics' old values depend on the order programs run in; the totals do not.
  for (int i = 0; i < 40; ++i) CHECK(a[i] == c[i]);
  CHECK(a[32] == 9 + 4 * 1);
  CHECK(a[36] == 9 + 4 * 5);
  CHECK(a[37] == 9);  // masked off: never touched
  CHECK(a[3] == 9);   // masked-off store lane
  CHECK(a[40] == 9);  // program 0 ran first on the interpreter: it saw the initial value
  CHECK(a[48] == 10);
  CHECK(same_bits(fa, fc));
  CHECK(std::isnan(fa[1]));
}

TEST_CASE("interp: TLE_BACKEND=interp runs kernels on the interpreter", "[interp]") {
  auto k = jit("env", [](Ptr<float> out, Ptr<float> x, Tile<int32_t> n) {
    auto i = arange(0, 16);
    store(out + i, exp(load(x + i, i < n, 0.0f)) / 3.0f, i < n);
  });
  auto x = opstest::random_buf<float>(16, 7, -5, 5);
  Buf<float> a(16, -1), c(16, -1);
  {
    envtest::EnvVar e("TLE_BACKEND", "interp");
    REQUIRE(default_backend() == Backend::Interp);
    k(Grid(1), a.data(), x.data(), 13);
  }
  k(Grid(1).backend(Backend::CPU), c.data(), x.data(), 13);
  CHECK(same_bits(a, c));  // exp is the same libm call in both
  CHECK(a[13] == -1.0f);
  CHECK(k.num_compiled() == 2);  // one specialization per backend
}

TEST_CASE("interp: a refused access names the op, the lane and the address", "[interp]") {
  auto f = tracetest::trace(
      "oob",
      [](Ptr<float> out, Ptr<float> x) {
        auto i = arange(0, 4);
        store(out + i, load(x + i * 2, i != 1));  // lane 1 is masked off: never checked
      },
      {}, false, false);
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[4] = {};
  void* px = x;
  void* po = out;
  void* args[] = {&po, &px};
  const int64_t grid[3] = {1, 1, 1};
  std::vector<uintptr_t> seen;
  interp::Options o;
  o.check_access = [&](uintptr_t a, size_t n, bool write) {
    if (!write) seen.push_back(a);
    return write || a + n <= reinterpret_cast<uintptr_t>(x + 5);  // x[5..7] out of bounds
  };
  try {
    interp::run(*f, args, grid, o);
    FAIL("an access outside the allowed memory must throw");
  } catch (const RuntimeError& e) {
    CHECK(e.call() == "tle::interp");
    CHECK_THAT(e.what(), Catch::Contains("'load'") && Catch::Contains("lane 3") && Catch::Contains("test_interp.cpp"));
  }
  CHECK(seen.size() == 3);  // lanes 0, 2 and 3; not the masked-off lane 1
  CHECK(out[0] == 0.0f);    // nothing stored: the load failed first
}

TEST_CASE("interp: detect_program_races finds accesses two programs race on, and only those", "[interp]") {
  // Each program stores to its own region (no race), reads shared input (no race) and adds to
  // shared bins atomically (no race); then kernels where programs store to one address, read
  // another program's store, or mix a store with another program's atomic.
  auto run3 = [](const ir::Function& f, float* out, float* x) {
    void* po = out;
    void* px = x;
    void* args[] = {&po, &px};
    const int64_t grid[3] = {3, 1, 1};
    interp::Options o;
    o.detect_program_races = true;
    interp::run(f, args, grid, o);
  };
  std::vector<float> out(16, 0.0f), x(16, 1.0f);
  auto fine = tracetest::trace(
      "fine",
      [](Ptr<float> out, Ptr<float> x) {
        Tile<int32_t> i = arange(0, 4);
        store(out + program_id(0) * 4 + i, load(x + i));
        atomic_add(out + 12 + i, load(x + i));
      },
      {}, false, false);
  CHECK_NOTHROW(run3(*fine, out.data(), x.data()));
  CHECK(out[12] == 3.0f);
  auto same_address = tracetest::trace(
      "same_address", [](Ptr<float> out, Ptr<float> x) { store(out + arange(0, 4), load(x + arange(0, 4))); }, {},
      false, false);
  CHECK_THROWS_WITH(run3(*same_address, out.data(), x.data()),
                    Catch::Contains("program 1 stores to") && Catch::Contains("stored by another program"));
  auto reads_other = tracetest::trace(
      "reads_other",
      [](Ptr<float> out, Ptr<float> x) {
        Tile<int32_t> i = arange(0, 4);
        store(out + program_id(0) * 4 + i, load(out + ((program_id(0) + 2) % 3) * 4 + i));
      },
      {}, false, false);
  CHECK_THROWS_WITH(run3(*reads_other, out.data(), x.data()), Catch::Contains("a race between programs"));
  auto store_vs_atomic = tracetest::trace(
      "store_vs_atomic",
      [](Ptr<float> out, Ptr<float> x) {
        Tile<int32_t> i = arange(0, 4);
        atomic_add(out + i, load(x + i), program_id(0) == 0);
        store(out + i, load(x + i), program_id(0) == 1);
      },
      {}, false, false);
  CHECK_THROWS_WITH(run3(*store_vs_atomic, out.data(), x.data()), Catch::Contains("updated atomically by another"));
}

TEST_CASE("interp: GPU-only ops are UserErrors at the op, DeviceBuffers are refused", "[interp]") {
  auto k = jit("asm", [](Ptr<float> out) {
    store(out, inline_asm<float>("mov.b32 $0, $1;", "=f,f", {Tile<float>(1.0f)}));
  });
  Buf<float> out(1);
  CHECK_THROWS_AS(k(Grid(1).backend(Backend::Interp), out.data()), UserError);
  CHECK_THROWS_WITH(k(Grid(1).backend(Backend::Interp), out.data()),
                    Catch::Contains("test_interp.cpp") && Catch::Contains("inline_asm runs on the GPU backend only") &&
                        Catch::Contains("interpreter"));
}
