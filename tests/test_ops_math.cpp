// tests/test_ops_math.cpp - CPU numerical tests through the public API, part 2: math functions,
// reductions (built-in and with a combine function), scans and dot.
#include "ops_util.hpp"
#include "../examples/kernels.hpp"
#include "gpu_kernels.hpp"

using namespace tle;
using namespace opstest;

// Fixed ragged tile sizes of the tests below (the GPU pads them: src/passes/gpu/pad_shapes.cpp).
static const int N17 = 17, N33 = 33;

namespace {

/// Relative tolerance of one unit in the last place of T (f16/bf16 math is computed in f32 and
/// rounded once, so the result is within half an ulp of the f32 result, itself within a few f32 ulp).
template <class T> double ulp_rtol() {
  if constexpr (std::is_same_v<T, f16>) return std::ldexp(1.0, -10);
  else if constexpr (std::is_same_v<T, bf16>) return std::ldexp(1.0, -7);
  else if constexpr (std::is_same_v<T, float>) return 4 * std::ldexp(1.0, -23);
  else return 8 * std::ldexp(1.0, -52);
}

enum Fn { Exp, Exp2, Log, Log2, Sqrt, Rsqrt, Abs, Floor, Ceil, Round, Rint, Nearbyint, Sin, Cos, Tanh, Erf, NumFn };
const char* fn_name(int f) {
  static const char* n[] = {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "floor", "ceil", "round", "rint",
                            "nearbyint", "sin", "cos", "tanh", "erf"};
  return n[f];
}
double ref_fn(int f, double x) {
  switch (f) {
    case Exp: return std::exp(x);
    case Exp2: return std::exp2(x);
    case Log: return std::log(x);
    case Log2: return std::log2(x);
    case Sqrt: return std::sqrt(x);
    case Rsqrt: return 1.0 / std::sqrt(x);
    case Abs: return std::fabs(x);
    case Floor: return std::floor(x);
    case Ceil: return std::ceil(x);
    case Round: return std::round(x);
    case Rint: return std::rint(x);
    case Nearbyint: return std::nearbyint(x);
    case Sin: return std::sin(x);
    case Cos: return std::cos(x);
    case Tanh: return std::tanh(x);
    default: return std::erf(x);
  }
}
// input ranges per function
std::pair<double, double> fn_domain(int f) {
  switch (f) {
    case Exp: case Exp2: return {-10, 10};
    case Log: case Log2: case Sqrt: case Rsqrt: return {1e-3, 1e3};
    case Sin: case Cos: return {-10, 10};
    case Tanh: return {-5, 5};
    case Erf: return {-3, 3};
    default: return {-100, 100};
  }
}

template <class T> void unary_math_case(unsigned seed) {
  auto k = jit("unary_math", [](Ptr<T> x, Ptr<T> out, Tile<int32_t> n, Constexpr<int> FN, Constexpr<int> BLOCK) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> m = offs < n;
    Tile<T> v = load(x + offs, m, 1);
    Tile<T> r;
    switch (int(FN)) {
      case Exp: r = exp(v); break;
      case Exp2: r = exp2(v); break;
      case Log: r = log(v); break;
      case Log2: r = log2(v); break;
      case Sqrt: r = sqrt(v); break;
      case Rsqrt: r = rsqrt(v); break;
      case Abs: r = abs(v); break;
      case Floor: r = floor(v); break;
      case Ceil: r = ceil(v); break;
      case Round: r = round(v); break;
      case Rint: r = rint(v); break;
      case Nearbyint: r = nearbyint(v); break;
      case Sin: r = sin(v); break;
      case Cos: r = cos(v); break;
      case Tanh: r = tanh(v); break;
      default: r = erf(v); break;
    }
    store(out + offs, r, m);
  });
  for (int f = 0; f < NumFn; ++f) {
    for (int n : kSizes) {
      CAPTURE(fn_name(f), n);
      auto [lo, hi] = fn_domain(f);
      Buf<T> x = random_buf<T>(n, seed + f * 7 + n, lo, hi);
      const bool exact = f == Abs || f == Floor || f == Ceil || f == Round || f == Rint || f == Nearbyint;
      // signed zero, integers and halfway cases (round: away from zero; rint/nearbyint: to even)
      const double special[] = {-0.0, 2.0, -2.5, 0.5, -0.5, 1.5, 2.5, -3.5, 0.49999997, -1.0 / 1024};
      if (exact)
        for (int i = 0; i < n && i < 10; ++i) x[i] = from_d<T>(special[i]);
      Buf<T> out(n);
      std::vector<double> want(n);
      for (int i = 0; i < n; ++i) {
        double w = ref_fn(f, to_d(x[i]));
        // f16/bf16: the exact result rounded to T (what "computed in f32, rounded once" approximates)
        if constexpr (is_half_v<T>) w = to_d(T(w));
        else if constexpr (std::is_same_v<T, float>) w = double(float(w));
        want[i] = w;
      }
      k(Grid(cdiv(n, 128)), x.data(), out.data(), n, f, 128);
      double rtol = exact ? 0 : ulp_rtol<T>();
      // sin/cos near their zeros: absolute error relative to the input magnitude
      double atol = exact ? 0 : (f == Sin || f == Cos ? 10 * ulp_rtol<T>() : 1e-300);
      if (!exact && std::is_same_v<T, f16>) atol = std::max(atol, std::ldexp(1.0, -24));  // f16 subnormals
      CHECK(diffs(out, want, rtol, atol) == "");
      if (exact)  // the sign of a zero result too (round(-0.3) == -0.0)
        for (int i = 0; i < n; ++i)
          if (!std::isnan(want[i]) && std::signbit(to_d(out[i])) != std::signbit(want[i])) FAIL("sign of element " << i);
    }
  }
}

}  // namespace

TEST_CASE("ops: unary math f32", "[ops]") { unary_math_case<float>(100); }
TEST_CASE("ops: unary math f64", "[ops]") { unary_math_case<double>(200); }
TEST_CASE("ops: unary math f16", "[ops]") { unary_math_case<f16>(300); }
TEST_CASE("ops: unary math bf16", "[ops]") { unary_math_case<bf16>(400); }

TEST_CASE("ops: math special values (f32)", "[ops]") {
  auto k = jit("math_special", [](Ptr<float> x, Ptr<float> out) {
    Tile<int32_t> r = arange(0, 8);
    Tile<float> v = load(x + r);
    store(out + r, exp(v));
    store(out + 8 + r, log(v));
    store(out + 16 + r, sqrt(v));
    store(out + 24 + r, rsqrt(v));
    store(out + 32 + r, abs(v));
    store(out + 40 + r, tanh(v));
    store(out + 48 + r, round(v));
    store(out + 56 + r, rint(v));
  });
  const float xs[8] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1.0f, -1.0f, 4.0f};
  Buf<float> x(8), out(64);
  for (int i = 0; i < 8; ++i) x[i] = xs[i];
  std::vector<float> want(64);
  for (int i = 0; i < 8; ++i) {
    want[i] = std::exp(xs[i]), want[8 + i] = std::log(xs[i]), want[16 + i] = std::sqrt(xs[i]);
    want[24 + i] = 1.0f / std::sqrt(xs[i]), want[32 + i] = std::fabs(xs[i]), want[40 + i] = std::tanh(xs[i]);
    want[48 + i] = std::round(xs[i]), want[56 + i] = std::rint(xs[i]);
  }
  k(Grid(1), x.data(), out.data());
  CHECK(diffs(out, want, 4 * std::ldexp(1.0, -23), 0) == "");
}

TEST_CASE("ops: abs on integers (abs(INT_MIN) wraps)", "[ops]") {
  auto k = jit("iabs", [](Ptr<int8_t> a, Ptr<int32_t> b, Ptr<int64_t> c, Ptr<int8_t> oa, Ptr<int32_t> ob,
                          Ptr<int64_t> oc) {
    Tile<int32_t> r = arange(0, N17);
    store(oa + r, abs(load(a + r)));
    store(ob + r, abs(load(b + r)));
    store(oc + r, abs(load(c + r)));
  });
  Buf<int8_t> a = random_full<int8_t>(N17, 1);
  Buf<int32_t> b = random_full<int32_t>(N17, 2);
  Buf<int64_t> c = random_full<int64_t>(N17, 3);
  a[0] = -128, b[0] = std::numeric_limits<int32_t>::min(), c[0] = std::numeric_limits<int64_t>::min();
  Buf<int8_t> oa(N17);
  Buf<int32_t> ob(N17);
  Buf<int64_t> oc(N17);
  std::vector<int8_t> wa(N17);
  std::vector<int32_t> wb(N17);
  std::vector<int64_t> wc(N17);
  for (int i = 0; i < N17; ++i) {
    wa[i] = a[i] < 0 ? int8_t(-int(a[i])) : a[i];
    wb[i] = b[i] < 0 ? int32_t(0u - uint32_t(b[i])) : b[i];
    wc[i] = c[i] < 0 ? int64_t(0ull - uint64_t(c[i])) : c[i];
  }
  k(Grid(1), a.data(), b.data(), c.data(), oa.data(), ob.data(), oc.data());
  CHECK(diffs(oa, wa) == "");
  CHECK(diffs(ob, wb) == "");
  CHECK(diffs(oc, wc) == "");
}

template <class T> void binary_math_case(unsigned seed) {
  auto k = jit("binmath", [](Ptr<T> a, Ptr<T> b, Ptr<T> c, Ptr<T> out, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> m = offs < n;
    Tile<T> x = load(a + offs, m), y = load(b + offs, m), z = load(c + offs, m);
    store(out + offs, fma(x, y, z), m);
    store(out + n + offs, minimum(x, y), m);
    store(out + 2 * n + offs, maximum(x, y), m);
    store(out + 3 * n + offs, clamp(x, -0.5, z), m);  // lo literal, hi tile
    store(out + 4 * n + offs, pow(abs(x) + 0.5, y), m);
    store(out + 5 * n + offs, fma(x, 2, 1.0), m);  // scalar operands
  });
  for (int n : kSizes) {
    CAPTURE(n);
    Buf<T> a = random_buf<T>(n, seed, -4, 4), b = random_buf<T>(n, seed + 1, -4, 4), c = random_buf<T>(n, seed + 2, 0, 4);
    if (n > 4) a[1] = from_d<T>(NAN), b[2] = from_d<T>(NAN), a[3] = from_d<T>(0.0), b[3] = from_d<T>(-0.0);
    Buf<T> out(6 * size_t(n));
    std::vector<double> want(6 * size_t(n));
    for (int i = 0; i < n; ++i) {
      double x = to_d(a[i]), y = to_d(b[i]), z = to_d(c[i]);
      auto nanmin = [](double p, double q) { return std::isnan(p) || std::isnan(q) ? NAN : std::min(p, q); };
      auto nanmax = [](double p, double q) { return std::isnan(p) || std::isnan(q) ? NAN : std::max(p, q); };
      if constexpr (std::is_same_v<T, float>) want[i] = std::fma(float(x), float(y), float(z));
      else if constexpr (std::is_same_v<T, double>) want[i] = std::fma(x, y, z);
      else want[i] = to_d(T(std::fmaf(float(x), float(y), float(z))));  // f16/bf16: computed in f32, rounded to T
      want[n + i] = nanmin(x, y), want[2 * n + i] = nanmax(x, y);
      double lo = to_d(from_d<T>(-0.5));
      want[3 * n + i] = nanmin(nanmax(x, lo), z);
      double p = to_d(from_d<T>(std::fabs(x) + 0.5));
      if constexpr (is_half_v<T>) p = to_d(T(float(std::fabs(x)) + 0.5f));
      want[4 * n + i] = std::pow(p, y);
      if constexpr (is_half_v<T>) want[4 * n + i] = to_d(T(want[4 * n + i]));
      want[5 * n + i] = std::fma(x, 2.0, 1.0);
      if constexpr (is_half_v<T>) want[5 * n + i] = to_d(T(want[5 * n + i]));
      if constexpr (std::is_same_v<T, float>) want[5 * n + i] = std::fma(float(x), 2.0f, 1.0f);
    }
    k(Grid(cdiv(n, 64)), a.data(), b.data(), c.data(), out.data(), n, 64);
    // fma, minimum, maximum, clamp are exact; pow within a few ulp. Check them separately.
    Buf<T> exact_part(4 * size_t(n)), pow_part(n), fma2_part(n);
    std::vector<double> we(4 * size_t(n)), wp(n), wf2(n);
    for (size_t i = 0; i < 4 * size_t(n); ++i) exact_part[i] = out[i], we[i] = want[i];
    for (int i = 0; i < n; ++i) pow_part[i] = out[4 * n + i], wp[i] = want[4 * n + i];
    for (int i = 0; i < n; ++i) fma2_part[i] = out[5 * n + i], wf2[i] = want[5 * n + i];
    // -0.0 vs 0.0 in min/max is not specified: compare values (0 == -0 in close_d)
    CHECK(diffs(exact_part, we) == "");
    CHECK(diffs(pow_part, wp, std::is_same_v<T, double> ? 1e-14 : 2 * ulp_rtol<T>(), 0) == "");
    CHECK(diffs(fma2_part, wf2) == "");
  }
}

TEST_CASE("ops: fma, minimum, maximum, clamp, pow (f32, f64, f16, bf16)", "[ops]") {
  binary_math_case<float>(1);
  binary_math_case<double>(2);
  binary_math_case<f16>(3);
  binary_math_case<bf16>(4);
}

TEST_CASE("ops: fma rounds once", "[ops]") {
  auto k = jit("fma1", [](Ptr<float> x, Ptr<float> out) {
    Tile<float> a = load(x), c = load(x + 1);
    store(out, fma(a, a, c));
    store(out + 1, a * a + c);
  });
  float a = 1.0f + std::ldexp(1.0f, -12);
  float c = -(1.0f + std::ldexp(1.0f, -11));
  Buf<float> x(2), out(2);
  x[0] = a, x[1] = c;
  k(Grid(1), x.data(), out.data());
  CHECK(out[0] == std::ldexp(1.0f, -24));
  CHECK(out[1] == 0.0f);  // separate multiply and add (no contraction into an fma)

  // bf16 (and f16) at run time: one rounding of the exact a*b+c, also when c is far below the
  // product (1.25 * 1.203125 is a bf16 midpoint; the smallest bf16 decides the direction).
  auto kb = jit("fma_bf16", [](Ptr<bf16> x, Ptr<bf16> out) {
    Tile<int32_t> i = arange(0, 4);
    store(out + i, fma(load(x + i), load(x + 4 + i), load(x + 8 + i)));
  });
  const double tiny = std::ldexp(1.0, -133);
  Buf<bf16> xb(12), ob(4);
  const double va[4] = {1.25, 1.25, 1.5, 1.5}, vb[4] = {1.203125, 1.203125, 1.0078125, 1.0078125},
               vc[4] = {tiny, -tiny, -tiny, tiny}, want[4] = {1.5078125, 1.5, 1.5078125, 1.515625};
  for (int i = 0; i < 4; ++i) xb[i] = bf16(va[i]), xb[4 + i] = bf16(vb[i]), xb[8 + i] = bf16(vc[i]);
  REQUIRE(float(xb[8]) == float(tiny));
  kb(Grid(1), xb.data(), ob.data());
  for (int i = 0; i < 4; ++i) {
    INFO("case " << i);
    CHECK(float(ob[i]) == float(want[i]));
  }
}

TEST_CASE("ops: minimum / maximum / clamp on integers", "[ops]") {
  auto k = jit("imm", [](Ptr<int32_t> a, Ptr<int32_t> b, Ptr<uint8_t> c, Ptr<int32_t> out, Ptr<uint8_t> outc) {
    Tile<int32_t> r = arange(0, N33);
    Tile<int32_t> x = load(a + r), y = load(b + r);
    Tile<uint8_t> z = load(c + r);
    store(out + r, minimum(x, y));
    store(out + N33 + r, maximum(x, y));
    store(out + (2 * N33) + r, clamp(x, -1000, 1000));
    store(outc + r, clamp(z, 10, 200));
    store(outc + N33 + r, maximum(z, 128));
  });
  Buf<int32_t> a = random_full<int32_t>(N33, 1), b = random_buf<int32_t>(N33, 2, -2000, 2000);
  Buf<uint8_t> c = random_full<uint8_t>(N33, 3);
  for (int i = 0; i < N33; i += 4) a[i] = random_buf<int32_t>(1, i, -2000, 2000)[0];
  Buf<int32_t> out((3 * N33));
  Buf<uint8_t> outc((2 * N33));
  std::vector<int32_t> w((3 * N33));
  std::vector<uint8_t> wc((2 * N33));
  for (int i = 0; i < N33; ++i) {
    w[i] = std::min(a[i], b[i]), w[N33 + i] = std::max(a[i], b[i]), w[(2 * N33) + i] = std::clamp(a[i], -1000, 1000);
    wc[i] = std::clamp<int>(c[i], 10, 200), wc[N33 + i] = std::max<int>(c[i], 128);
  }
  k(Grid(1), a.data(), b.data(), c.data(), out.data(), outc.data());
  CHECK(diffs(out, w) == "");
  CHECK(diffs(outc, wc) == "");
}

// ============================================================ reductions

namespace {
enum RK { RSum, RMax, RMin, RArgmax, RArgmin };

template <class T> T line_total(uint64_t us, double s) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(us);  // wraps
  else return from_d<T>(s);
}

template <class T> auto make_reduce2d() {
  // x is [M, N] row-major; out holds 5 results for axis 0 ([N] each) then 5 for axis 1 ([M] each),
  // each written twice (without and with keepdims).
  return jit("reduce2d", [](Ptr<T> x, Ptr<T> vals, Ptr<int32_t> idx, Constexpr<int> M, Constexpr<int> N) {
    Tile<int32_t> i = arange(0, M), j = arange(0, N);
    Tile<int32_t> ci = expand_dims(i, 1), rj = expand_dims(j, 0);
    Tile<T> v = load(x + ci * N + rj);
    // axis 0 -> [N]
    store(vals + j, sum(v, 0));
    store(vals + N + j, max(v, 0));
    store(vals + 2 * N + j, min(v, 0));
    store(idx + j, argmax(v, 0));
    store(idx + N + j, argmin(v, 0));
    // axis 1 -> [M]
    int o = 3 * N, oi = 2 * N;
    store(vals + o + i, sum(v, 1));
    store(vals + o + M + i, max(v, 1));
    store(vals + o + 2 * M + i, min(v, 1));
    store(idx + oi + i, argmax(v, 1));
    store(idx + oi + M + i, argmin(v, 1));
    // keepdims: [1, N] and [M, 1]
    int k0 = 3 * N + 3 * M, ki = 2 * N + 2 * M;
    Tile<T> s0 = sum(v, 0, true);
    CHECK(s0.shape() == Shape{1, N});
    Tile<int32_t> a1 = argmax(v, 1, true);
    CHECK(a1.shape() == Shape{M, 1});
    store(vals + k0 + rj, s0);
    store(vals + k0 + N + rj, max(v, 0, true));
    store(vals + k0 + 2 * N + ci, min(v, -1, true));  // negative axis counts from the end
    store(idx + ki + ci, a1);
    store(idx + ki + M + rj, argmin(v, 0, true));
  });
}

template <class T> void reduce2d_case(unsigned seed, bool ties) {
  auto k = make_reduce2d<T>();
  for (auto [M0_, N0_] : {std::pair{1, 1}, std::pair{17, 1}, std::pair{1, 17}, std::pair{17, 33}, std::pair{3, 1001}}) {
    const int M = M0_, N = N0_;
    CAPTURE(M, N, ties);
    Buf<T> x = ties ? random_buf<T>(size_t(M) * N, seed, 0, 3) : random_buf<T>(size_t(M) * N, seed, -100, 100);
    if constexpr (std::is_integral_v<T> && sizeof(T) <= 2)
      if (!ties) x = random_full<T>(size_t(M) * N, seed);  // sums wrap
    auto at = [&](int i, int j) { return x[size_t(i) * N + j]; };
    size_t nv = 3 * N + 3 * M + 2 * N + M, ni = 2 * N + 2 * M + M + N;
    Buf<T> vals(nv);
    Buf<int32_t> idx(ni, -1);
    std::vector<double> wsum(nv, 0);  // sums (with tolerance for floats)
    std::vector<T> wv(nv);
    std::vector<int32_t> wi(ni);
    double sum_abs_max = 0;
    auto reduce_line = [&](int len, auto get, double& s, T& mx, T& mn, int& amx, int& amn) {
      s = 0;
      long double ls = 0;
      uint64_t us = 0;
      mx = get(0), mn = get(0), amx = 0, amn = 0;
      double sa = 0;
      for (int t = 0; t < len; ++t) {
        T e = get(t);
        ls += to_d(e), sa += std::fabs(to_d(e));
        if constexpr (std::is_integral_v<T>) us += uint64_t(int64_t(e));
        if (to_d(e) > to_d(mx)) mx = e, amx = t;
        if (to_d(e) < to_d(mn)) mn = e, amn = t;
        if constexpr (std::is_integral_v<T>) {  // exact for i64
          if (e > mx) mx = e, amx = t;
          if (e < mn) mn = e, amn = t;
        }
      }
      if constexpr (std::is_integral_v<T>) s = 0, (void)ls;
      else s = double(ls);
      sum_abs_max = std::max(sum_abs_max, sa);
      return us;
    };
    // axis 0
    for (int j = 0; j < N; ++j) {
      double s;
      T mx, mn;
      int amx, amn;
      uint64_t us = reduce_line(M, [&](int t) { return at(t, j); }, s, mx, mn, amx, amn);
      T st = line_total<T>(us, s);
      wsum[j] = std::is_integral_v<T> ? 0 : s;
      wv[j] = st, wv[N + j] = mx, wv[2 * N + j] = mn, wi[j] = amx, wi[N + j] = amn;
      size_t k0 = 3 * N + 3 * M;
      wv[k0 + j] = st, wsum[k0 + j] = wsum[j], wv[k0 + N + j] = mx;
      wi[2 * N + 2 * M + M + j] = amn;
    }
    // axis 1
    for (int i = 0; i < M; ++i) {
      double s;
      T mx, mn;
      int amx, amn;
      uint64_t us = reduce_line(N, [&](int t) { return at(i, t); }, s, mx, mn, amx, amn);
      T st = line_total<T>(us, s);
      size_t o = 3 * N;
      wv[o + i] = st, wsum[o + i] = std::is_integral_v<T> ? 0 : s, wv[o + M + i] = mx, wv[o + 2 * M + i] = mn;
      wi[2 * N + i] = amx, wi[2 * N + M + i] = amn;
      wv[3 * N + 3 * M + 2 * N + i] = mn;
      wi[2 * N + 2 * M + i] = amx;
    }
    k(Grid(1), x.data(), vals.data(), idx.data(), M, N);
    CHECK(diffs(idx, wi) == "");
    if constexpr (std::is_integral_v<T>) {
      CHECK(diffs(vals, wv) == "");
    } else {
      // max/min exact; sums to within a few ulp of the largest partial magnitude
      double eps = std::is_same_v<T, double> ? 1e-15 : std::is_same_v<T, float> ? 1e-6 : is_half_v<T> ? ulp_rtol<T>() * 2 : 0;
      double atol = eps * sum_abs_max * 4;
      std::vector<T> gs, go;
      std::vector<double> ws, wo;
      for (size_t t = 0; t < nv; ++t) {
        bool is_sum = (t < size_t(N)) || (t >= size_t(3 * N) && t < size_t(3 * N + M)) ||
                      (t >= size_t(3 * N + 3 * M) && t < size_t(4 * N + 3 * M));
        if (is_sum) gs.push_back(vals[t]), ws.push_back(wsum[t]);
        else go.push_back(vals[t]), wo.push_back(to_d(wv[t]));
      }
      CHECK(diffs(gs, ws, eps, atol) == "");
      CHECK(diffs(go, wo) == "");  // max / min are exact
    }
  }
}
}  // namespace

TEST_CASE("ops: sum/max/min/argmax/argmin over axis 0 and 1, keepdims", "[ops]") {
  SECTION("f32") { reduce2d_case<float>(1, false); }
  SECTION("f32 ties") { reduce2d_case<float>(2, true); }
  SECTION("f64") { reduce2d_case<double>(3, false); }
  SECTION("f16") { reduce2d_case<f16>(4, false); }
  SECTION("bf16 ties") { reduce2d_case<bf16>(5, true); }
  SECTION("i8 wraps") { reduce2d_case<int8_t>(6, false); }
  SECTION("i16 wraps") { reduce2d_case<int16_t>(7, false); }
  SECTION("i32 ties") { reduce2d_case<int32_t>(8, true); }
  SECTION("i64") { reduce2d_case<int64_t>(9, false); }
  SECTION("u8") { reduce2d_case<uint8_t>(10, false); }
  SECTION("u32 ties") { reduce2d_case<uint32_t>(11, true); }
}

TEST_CASE("ops: 1-D masked reductions to a scalar over many programs", "[ops]") {
  auto k = jit("rowred", [](Ptr<float> x, Ptr<float> out, Ptr<int32_t> iout, Tile<int32_t> ncols,
                            Constexpr<int> BLOCK) {
    Tile<int32_t> row = program_id(0);
    Tile<int32_t> c = arange(0, BLOCK);
    Tile<bool> m = c < ncols;
    Ptr<float> p = x + row * ncols + c;
    Tile<float> s = sum(load(p, m, 0.0f), 0);
    CHECK(s.rank() == 0);
    store(out + row * 3, s);
    store(out + row * 3 + 1, max(load(p, m, -INFINITY), 0));
    store(out + row * 3 + 2, min(load(p, m, INFINITY), 0));
    store(iout + row * 2, argmax(load(p, m, -INFINITY), 0));
    store(iout + row * 2 + 1, argmin(load(p, m, INFINITY), 0));
  });
  const int rows = 5;
  for (int n : kSizes) {
    CAPTURE(n);
    Buf<float> x = random_buf<float>(size_t(rows) * n, n, -10, 10);
    Buf<float> out(rows * 3);
    Buf<int32_t> iout(rows * 2);
    std::vector<float> w(rows * 3);
    std::vector<int32_t> wi(rows * 2);
    double atol = 0;
    for (int r = 0; r < rows; ++r) {
      double s = 0, sa = 0;
      float mx = -INFINITY, mn = INFINITY;
      int amx = 0, amn = 0;
      for (int c = 0; c < n; ++c) {
        float v = x[size_t(r) * n + c];
        s += v, sa += std::fabs(v);
        if (v > mx) mx = v, amx = c;
        if (v < mn) mn = v, amn = c;
      }
      w[r * 3] = float(s), w[r * 3 + 1] = mx, w[r * 3 + 2] = mn, wi[r * 2] = amx, wi[r * 2 + 1] = amn;
      atol = std::max(atol, sa * 1e-6);
    }
    k(Grid(rows), x.data(), out.data(), iout.data(), n, 1024);
    CHECK(diffs(out, w, 0, atol) == "");
    CHECK(diffs(iout, wi) == "");
  }
}

TEST_CASE("ops: max/argmax with NaN propagate the first NaN", "[ops]") {
  auto k = jit("nanred", [](Ptr<float> x, Ptr<float> out, Ptr<int32_t> iout) {
    Tile<int32_t> r = arange(0, N17);
    Tile<float> v = load(x + r);
    store(out, max(v, 0));
    store(out + 1, min(v, 0));
    store(iout, argmax(v, 0));
    store(iout + 1, argmin(v, 0));
  });
  Buf<float> x = random_buf<float>(N17, 5);
  x[5] = NAN, x[11] = NAN, x[13] = 100.f, x[2] = -100.f;
  Buf<float> out(2);
  Buf<int32_t> iout(2);
  k(Grid(1), x.data(), out.data(), iout.data());
  CHECK(std::isnan(out[0]));
  CHECK(std::isnan(out[1]));
  CHECK(iout[0] == 5);
  CHECK(iout[1] == 5);
}

TEST_CASE("ops: reduce with a user combine function", "[ops]") {
  auto k = jit("reduce_combine", [](Ptr<float> x, Ptr<int32_t> xi, Ptr<float> out, Ptr<int32_t> iout,
                                    Constexpr<int> M, Constexpr<int> N) {
    Tile<int32_t> ci = expand_dims(arange(0, M), 1), rj = expand_dims(arange(0, N), 0);
    Tile<float> v = load(x + ci * N + rj);
    Tile<int32_t> vi = load(xi + ci * N + rj);
    auto prod = [](Tile<float> a, Tile<float> b) { return a * b; };
    auto maxabs = [](Tile<float> a, Tile<float> b) { return maximum(abs(a), abs(b)); };
    store(out + arange(0, M), reduce(v, 1, prod));
    store(out + M + arange(0, N), reduce(v, 0, maxabs));
    Tile<float> kd = reduce(v, 0, maxabs, true);
    CHECK(kd.shape() == Shape{1, N});
    store(out + M + N + rj, kd);
    // integer product (wraps) and a bitwise-or reduction
    store(iout + arange(0, M), reduce(vi, 1, [](Tile<int32_t> a, Tile<int32_t> b) { return a * b; }));
    store(iout + M + arange(0, N), reduce(vi, 0, [](Tile<int32_t> a, Tile<int32_t> b) { return a | b; }));
    // "applied left to right from element 0" on the CPU (docs/ir.md): Horner's rule acc * 2 + e, a
    // combine that is not associative (tests/test_ops_scan.cpp has associative, non-commutative ones)
    store(iout + M + N + arange(0, M),
          reduce(vi & 1, 1, [](Tile<int32_t> acc, Tile<int32_t> e) { return acc * 2 + e; }));
  });
  for (auto [M0_, N0_] : {std::pair{1, 1}, std::pair{17, 5}, std::pair{4, 17}, std::pair{2, 29}}) {
    const int M = M0_, N = N0_;
    CAPTURE(M, N);
    Buf<float> x = random_buf<float>(size_t(M) * N, 1, -1.5, 1.5);
    for (size_t t = 0; t < x.size(); ++t) x[t] = x[t] >= 0 ? x[t] + 0.25f : x[t] - 0.25f;
    Buf<int32_t> xi = random_full<int32_t>(size_t(M) * N, 2);
    Buf<float> out(M + 2 * N);
    Buf<int32_t> iout(2 * M + N);
    std::vector<float> w(M + 2 * N);
    std::vector<int32_t> wi(2 * M + N);
    for (int i = 0; i < M; ++i) {
      float p = x[size_t(i) * N];
      uint32_t ip = uint32_t(xi[size_t(i) * N]);
      uint32_t h = uint32_t(xi[size_t(i) * N]) & 1;
      for (int j = 1; j < N; ++j) {
        p *= x[size_t(i) * N + j];
        ip *= uint32_t(xi[size_t(i) * N + j]);
        h = h * 2 + (uint32_t(xi[size_t(i) * N + j]) & 1);
      }
      w[i] = p, wi[i] = int32_t(ip), wi[M + N + i] = int32_t(h);
    }
    for (int j = 0; j < N; ++j) {
      float ma = x[j];  // the combine is applied from element 0: one element stays as it is
      int32_t o = 0;
      for (int i = 0; i < M; ++i) o |= xi[size_t(i) * N + j];
      for (int i = 1; i < M; ++i) ma = std::max(std::fabs(ma), std::fabs(x[size_t(i) * N + j]));
      w[M + j] = ma, w[M + N + j] = ma, wi[M + j] = o;
    }
    k(Grid(1), x.data(), xi.data(), out.data(), iout.data(), M, N);
    // the float product may be evaluated in any association: a few ulp per factor
    CHECK(diffs(out, w, 1e-6 * N, 0) == "");
    if (gpu_mode()) {
      // Horner's rule is not associative: on the GPU (a tree across lanes and warps) its result
      // depends on the bracketing (docs/semantics.md: combines must be associative); the rest must match.
      std::vector<int32_t> got(iout.begin(), iout.begin() + M + N), want(wi.begin(), wi.begin() + M + N);
      CHECK(diffs(got, want) == "");
    } else {
      CHECK(diffs(iout, wi) == "");
    }
  }
}

// ============================================================ scans

TEST_CASE("ops: cumsum over axis 0/1, forward and reverse", "[ops]") {
  auto k = jit("cumsum", [](Ptr<int32_t> x, Ptr<float> xf, Ptr<int32_t> out, Ptr<float> outf, Constexpr<int> M,
                            Constexpr<int> N) {
    Tile<int32_t> ci = expand_dims(arange(0, M), 1), rj = expand_dims(arange(0, N), 0);
    Tile<int32_t> o = ci * N + rj;
    Tile<int32_t> v = load(x + o);
    Tile<float> vf = load(xf + o);
    const int MN = M * N;
    store(out + o, cumsum(v, 0));
    store(out + MN + o, cumsum(v, 1));
    store(out + 2 * MN + o, cumsum(v, 0, true));
    store(out + 3 * MN + o, cumsum(v, 1, true));
    store(outf + o, cumsum(vf, 1));
    store(outf + MN + o, cumsum(vf, 0, true));
  });
  for (auto [M0_, N0_] : {std::pair{1, 1}, std::pair{17, 1}, std::pair{1, 17}, std::pair{17, 33}, std::pair{2, 1001}}) {
    const int M = M0_, N = N0_;
    CAPTURE(M, N);
    size_t mn = size_t(M) * N;
    Buf<int32_t> x = random_full<int32_t>(mn, 3);  // wraps
    Buf<float> xf = random_buf<float>(mn, 4, -1, 1);
    Buf<int32_t> out(4 * mn);
    Buf<float> outf(2 * mn);
    std::vector<int32_t> w(4 * mn);
    std::vector<float> wf(2 * mn);
    auto X = [&](int i, int j) { return uint32_t(x[size_t(i) * N + j]); };
    for (int j = 0; j < N; ++j) {
      uint32_t s = 0, r = 0;
      double fr = 0;
      for (int i = 0; i < M; ++i) s += X(i, j), w[size_t(i) * N + j] = int32_t(s);
      for (int i = M - 1; i >= 0; --i) {
        r += X(i, j), w[2 * mn + size_t(i) * N + j] = int32_t(r);
        fr += xf[size_t(i) * N + j], wf[mn + size_t(i) * N + j] = float(fr);
      }
    }
    for (int i = 0; i < M; ++i) {
      uint32_t s = 0, r = 0;
      double fs = 0;
      for (int j = 0; j < N; ++j) {
        s += X(i, j), w[mn + size_t(i) * N + j] = int32_t(s);
        fs += xf[size_t(i) * N + j], wf[size_t(i) * N + j] = float(fs);
      }
      for (int j = N - 1; j >= 0; --j) r += X(i, j), w[3 * mn + size_t(i) * N + j] = int32_t(r);
    }
    k(Grid(1), x.data(), xf.data(), out.data(), outf.data(), M, N);
    CHECK(diffs(out, w) == "");
    CHECK(diffs(outf, wf, 0, 1e-6 * std::max(M, N)) == "");
  }
}

TEST_CASE("ops: cumsum on a masked 1-D block across dtypes", "[ops]") {
  auto k = jit("cumsum1d", [](Ptr<int64_t> x, Ptr<int64_t> out, Ptr<double> xd, Ptr<double> outd, Tile<int32_t> n,
                              Constexpr<int> BLOCK) {
    Tile<int32_t> r = arange(0, BLOCK);
    Tile<bool> m = r < n;
    store(out + r, cumsum(load(x + r, m), 0), m);
    store(outd + r, cumsum(load(xd + r, m), 0, true), m);
  });
  for (int n : kSizes) {
    CAPTURE(n);
    Buf<int64_t> x = random_buf<int64_t>(n, 1, -1e15, 1e15);
    Buf<double> xd = random_buf<double>(n, 2, 0, 1);
    Buf<int64_t> out(n);
    Buf<double> outd(n);
    std::vector<int64_t> w(n);
    std::vector<double> wd(n);
    int64_t s = 0;
    for (int i = 0; i < n; ++i) s += x[i], w[i] = s;
    double sd = 0;
    for (int i = n - 1; i >= 0; --i) sd += xd[i], wd[i] = sd;
    k(Grid(1), x.data(), out.data(), xd.data(), outd.data(), n, 1024);
    CHECK(diffs(out, w) == "");
    CHECK(diffs(outd, wd, 1e-13, 0) == "");
  }
}

// Exclusive / reverse cumsum with the line total (FlagTree's cumsum forms) on every axis of a 3-D
// tile: integers exactly against a plain loop; floats bit for bit against the same launch's
// inclusive scan (exclusive i == inclusive i -+ 1, total == the line's last inclusive element) and
// to rounding against a double reference.
TEST_CASE("ops: cumsum exclusive and reverse with the total on every axis of a 3-D tile", "[ops]") {
  auto k = jit("cumsum_forms", [](Ptr<int32_t> x, Ptr<float> xf, Ptr<int32_t> out, Ptr<float> outf, Constexpr<int> A,
                                  Constexpr<int> B, Constexpr<int> C, Constexpr<int> AXIS) {
    Tile<int32_t> ia = reshape(arange(0, A), {A, 1, 1}), ib = reshape(arange(0, B), {1, B, 1}),
                  ic = reshape(arange(0, C), {1, 1, C});
    Tile<int32_t> o = ia * (B * C) + ib * C + ic;
    Tile<int32_t> v = load(x + o);
    Tile<float> vf = load(xf + o);
    const int n = A * B * C;
    int slot = 0;
    for (bool rev : {false, true})
      for (bool excl : {false, true}) {
        auto [s, t] = cumsum_total(v, AXIS, {.exclusive = excl, .reverse = rev});
        auto [sf, tf] = cumsum_total(vf, AXIS - 3, {.exclusive = excl, .reverse = rev});  // negative axis
        store(out + slot * n + o, s);
        store(outf + slot * n + o, sf);
        ++slot;
        // The total, one per line, broadcast back over the line.
        store(out + slot * n + o, broadcast_to(expand_dims(t, AXIS), {A, B, C}));
        store(outf + slot * n + o, broadcast_to(expand_dims(tf, AXIS), {A, B, C}));
        ++slot;
      }
    store(out + slot * n + o, cumsum(v, AXIS, {.exclusive = true}));  // the Tile-returning form
  });
  for (auto [A, B, C] : {std::tuple{1, 1, 1}, std::tuple{1, 1, 17}, std::tuple{3, 5, 7}, std::tuple{2, 17, 33}})
    for (int axis = 0; axis < 3; ++axis) {
      CAPTURE(A, B, C, axis);
      const size_t n = size_t(A) * B * C;
      Buf<int32_t> x = random_full<int32_t>(n, 11);  // wraps
      Buf<float> xf = random_buf<float>(n, 12, -1, 1);
      Buf<int32_t> out(9 * n);
      Buf<float> outf(8 * n);
      k(Grid(1), x.data(), xf.data(), out.data(), outf.data(), A, B, C, axis);
      const int dims[3] = {A, B, C}, len = dims[axis];
      std::vector<int32_t> w(9 * n);
      std::vector<double> wf(8 * n);
      auto at = [&](int a, int b, int c) { return (size_t(a) * B + b) * C + c; };
      for (int a = 0; a < A; ++a)
        for (int b = 0; b < B; ++b)
          for (int c = 0; c < C; ++c) {
            if ((axis == 0 && a) || (axis == 1 && b) || (axis == 2 && c)) continue;  // one line each
            auto idx = [&](int i) {
              int q[3] = {a, b, c};
              q[axis] = i;
              return at(q[0], q[1], q[2]);
            };
            int slot = 0;
            for (bool rev : {false, true})
              for (bool excl : {false, true}) {
                uint32_t s = 0;
                double sf = 0;
                for (int step = 0; step < len; ++step) {
                  const int i = rev ? len - 1 - step : step;
                  if (excl) w[slot * n + idx(i)] = int32_t(s), wf[slot * n + idx(i)] = sf;
                  s += uint32_t(x[idx(i)]), sf += xf[idx(i)];
                  if (!excl) w[slot * n + idx(i)] = int32_t(s), wf[slot * n + idx(i)] = sf;
                }
                for (int i = 0; i < len; ++i) w[(slot + 1) * n + idx(i)] = int32_t(s), wf[(slot + 1) * n + idx(i)] = sf;
                slot += 2;
              }
            for (int i = 0; i < len; ++i) w[8 * n + idx(i)] = w[2 * n + idx(i)];
            // Bit for bit: exclusive == the inclusive scan shifted, total == its last element.
            for (int rev = 0; rev < 2; ++rev) {
              const size_t incl = size_t(4 * rev) * n, excl = incl + 2 * n;
              const int first = rev ? len - 1 : 0, last = rev ? 0 : len - 1;
              for (int i = 0; i < len; ++i) {
                const int prev = rev ? i + 1 : i - 1;
                const float want_ex = i == first ? 0.0f : outf[incl + idx(prev)];
                if (std::memcmp(&outf[excl + idx(i)], &want_ex, 4) != 0) {
                  FAIL_CHECK("exclusive f32 element " << i << " (reverse " << rev << "): " << outf[excl + idx(i)]
                                                      << ", the inclusive scan's neighbour is " << want_ex);
                  break;
                }
                CHECK(std::memcmp(&outf[incl + n + idx(i)], &outf[incl + idx(last)], 4) == 0);
                CHECK(std::memcmp(&outf[excl + n + idx(i)], &outf[incl + idx(last)], 4) == 0);
              }
            }
          }
      CHECK(diffs(out, w) == "");
      std::vector<float> wff(wf.begin(), wf.end());
      CHECK(diffs(outf, wff, 0, 1e-6 * std::max({A, B, C})) == "");
    }
}

TEST_CASE("ops: exclusive cumsum of a masked 1-D block and its scalar total", "[ops]") {
  auto k = jit("cumsum_total1d", [](Ptr<int64_t> x, Ptr<int64_t> out, Ptr<int64_t> total, Tile<int32_t> n,
                                    Constexpr<int> BLOCK) {
    Tile<int32_t> r = arange(0, BLOCK);
    Tile<bool> m = r < n;
    auto [s, t] = cumsum_total(load(x + r, m, int64_t(0)), 0, {.exclusive = true});
    store(out + r, s, m);
    store(total, t);
  });
  for (int n : kSizes) {
    CAPTURE(n);
    Buf<int64_t> x = random_buf<int64_t>(n, 5, -1e15, 1e15);
    Buf<int64_t> out(n), total(1);
    std::vector<int64_t> w(n);
    int64_t s = 0;
    for (int i = 0; i < n; ++i) w[i] = s, s += x[i];
    k(Grid(1), x.data(), out.data(), total.data(), n, 1024);
    CHECK(diffs(out, w) == "");
    CHECK(total[0] == s);
  }
}

TEST_CASE("ops: a compaction - cumsum positions and the sum of the same flags - over a ragged row", "[ops]") {
  // The GPU lowering reuses the scan's line total for a later sum of the same 1-D integer tile in
  // the same block (lower_reduce.cpp): the count must still be the sum, step after step, forward
  // and reversed, with masked-off tails.
  auto k = jit("compaction", [](Ptr<int32_t> x, Ptr<int32_t> out, Ptr<int32_t> rout, Ptr<int32_t> count,
                                Tile<int32_t> n, Tile<int32_t> t, Constexpr<int> BLOCK) {
    Tile<int32_t> c = 0, rc = 0;
    for (auto i : range(0, n, int(BLOCK))) {
      Tile<int32_t> offs = i + arange(0, BLOCK);
      Tile<bool> m = offs < n;
      Tile<int32_t> v = load(x + offs, m, 0);
      Tile<int32_t> keep = (m & (v > t)).to<int32_t>();
      store(out + (c + cumsum(keep, 0) - 1), v, keep != 0);
      c = c + sum(keep, 0);
      // reversed within the step: the kept elements of each step from its end
      store(rout + (rc + cumsum(keep, 0, /*reverse=*/true) - 1), v, keep != 0);
      rc = rc + sum(keep, 0);
    }
    store(count, c);
    store(count + 1, rc);
  });
  for (int n : {1, 17, 1001, 4100}) {
    for (int t : {-1, 0, 60}) {
      CAPTURE(n, t);
      Buf<int32_t> x = random_buf<int32_t>(n, 11 + n, -100, 100);
      Buf<int32_t> out(n, -7), rout(n, -7), count(2, -1);
      k(Grid(1), x.data(), out.data(), rout.data(), count.data(), n, t, 256);
      std::vector<int32_t> want, rwant;
      for (int i0 = 0; i0 < n; i0 += 256) {
        std::vector<int32_t> step;
        for (int i = i0; i < std::min(n, i0 + 256); ++i)
          if (x[i] > t) want.push_back(x[i]), step.push_back(x[i]);
        rwant.insert(rwant.end(), step.rbegin(), step.rend());
      }
      REQUIRE(count[0] == int32_t(want.size()));
      REQUIRE(count[1] == int32_t(want.size()));
      CHECK(std::vector<int32_t>(out.begin(), out.begin() + count[0]) == want);
      CHECK(std::vector<int32_t>(rout.begin(), rout.begin() + count[1]) == rwant);
      CHECK(std::all_of(out.begin() + count[0], out.end(), [](int32_t v) { return v == -7; }));
    }
  }
}

TEST_CASE("ops: associative_scan with a combine function", "[ops]") {
  auto k = jit("scan_combine", [](Ptr<int32_t> x, Ptr<float> xf, Ptr<int32_t> out, Ptr<float> outf,
                                  Constexpr<int> M, Constexpr<int> N) {
    Tile<int32_t> ci = expand_dims(arange(0, M), 1), rj = expand_dims(arange(0, N), 0);
    Tile<int32_t> o = ci * N + rj;
    Tile<int32_t> v = load(x + o);
    Tile<float> vf = load(xf + o);
    const int MN = M * N;
    auto mx = [](Tile<int32_t> a, Tile<int32_t> b) { return maximum(a, b); };
    // associative but not commutative: "the last non-zero value so far"
    auto last_nz = [](Tile<int32_t> a, Tile<int32_t> b) { return where(b != 0, b, a); };
    store(out + o, associative_scan(v, 1, mx));
    store(out + MN + o, associative_scan(v, 0, mx, true));
    store(out + 2 * MN + o, associative_scan(v, 1, last_nz));
    store(out + 3 * MN + o, associative_scan(v, 0, last_nz));
    store(outf + o, associative_scan(vf, 1, [](Tile<float> a, Tile<float> b) { return a * b; }));
    store(outf + MN + o, associative_scan(vf, 1, [](Tile<float> a, Tile<float> b) { return minimum(a, b); }, true));
  });
  for (auto [M0_, N0_] : {std::pair{1, 1}, std::pair{17, 1}, std::pair{3, 17}, std::pair{17, 33}, std::pair{2, 1001}}) {
    const int M = M0_, N = N0_;
    CAPTURE(M, N);
    size_t mn = size_t(M) * N;
    Buf<int32_t> x = random_buf<int32_t>(mn, 5, -1000, 1000);
    for (size_t t = 0; t < mn; t += 2) x[t] = 0;  // runs of zeros for last_nz
    Buf<float> xf = random_buf<float>(mn, 6, 0.9, 1.1);
    Buf<int32_t> out(4 * mn);
    Buf<float> outf(2 * mn);
    std::vector<int32_t> w(4 * mn);
    std::vector<float> wf(2 * mn);
    auto X = [&](int i, int j) { return x[size_t(i) * N + j]; };
    for (int i = 0; i < M; ++i) {
      int32_t m = X(i, 0), l = X(i, 0);
      float p = xf[size_t(i) * N];
      for (int j = 0; j < N; ++j) {
        if (j) m = std::max(m, X(i, j)), l = X(i, j) != 0 ? X(i, j) : l, p *= xf[size_t(i) * N + j];
        w[size_t(i) * N + j] = m, w[2 * mn + size_t(i) * N + j] = l, wf[size_t(i) * N + j] = p;
      }
      float mnv = INFINITY;
      for (int j = N - 1; j >= 0; --j) mnv = std::min(mnv, xf[size_t(i) * N + j]), wf[mn + size_t(i) * N + j] = mnv;
    }
    for (int j = 0; j < N; ++j) {
      int32_t m = std::numeric_limits<int32_t>::min();
      for (int i = M - 1; i >= 0; --i) m = std::max(m, X(i, j)), w[mn + size_t(i) * N + j] = m;
      int32_t l = X(0, j);
      for (int i = 0; i < M; ++i) l = X(i, j) != 0 ? X(i, j) : l, w[3 * mn + size_t(i) * N + j] = l;
    }
    k(Grid(1), x.data(), xf.data(), out.data(), outf.data(), M, N);
    CHECK(diffs(out, w) == "");
    CHECK(diffs(outf, wf, 1e-6 * N, 0) == "");
  }
}

// ============================================================ dot

namespace {
float tf32_round(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  if ((b & 0x7F800000u) != 0x7F800000u) {
    uint32_t lsb = (b >> 13) & 1u;
    b += 0x0FFFu + lsb;
    b &= ~0x1FFFu;
  }
  std::memcpy(&f, &b, 4);
  return f;
}

template <class T> auto make_dot() {
  return jit("dot", [](Ptr<T> a, Ptr<T> b, Ptr<dot_acc_t<T>> acc, Ptr<dot_acc_t<T>> out, Constexpr<int> M,
                       Constexpr<int> N, Constexpr<int> K, Constexpr<bool> USE_ACC, Constexpr<bool> TF32) {
    Tile<int32_t> mi = expand_dims(arange(0, M), 1), nj = expand_dims(arange(0, N), 0);
    Tile<int32_t> kr = expand_dims(arange(0, K), 0), kc = expand_dims(arange(0, K), 1);
    Tile<T> ta = load(a + mi * K + kr);  // [M, K]
    Tile<T> tb = load(b + kc * N + nj);  // [K, N]
    Precision p = TF32 ? Precision::TF32 : Precision::IEEE;
    Tile<dot_acc_t<T>> r;
    if (USE_ACC) r = dot(ta, tb, load(acc + mi * N + nj), p);
    else r = dot(ta, tb, p);
    CHECK(r.shape() == Shape{M, N});
    store(out + mi * N + nj, r);
  });
}

template <class T> void dot_case(unsigned seed, bool tf32 = false) {
  using Acc = dot_acc_t<T>;
  auto k = make_dot<T>();
  struct S { int M, N, K; };
  for (S s : {S{16, 33, 17}, S{16, 17, 33}, S{1, 1, 1}, S{17, 5, 64}, S{2, 3, 1}, S{32, 32, 32}}) {
    for (bool use_acc : {false, true}) {
      CAPTURE(s.M, s.N, s.K, use_acc, tf32);
      Buf<T> a, b;
      if constexpr (std::is_integral_v<T>) a = random_full<T>(size_t(s.M) * s.K, seed), b = random_full<T>(size_t(s.K) * s.N, seed + 1);
      else a = random_buf<T>(size_t(s.M) * s.K, seed, -2, 2), b = random_buf<T>(size_t(s.K) * s.N, seed + 1, -2, 2);
      Buf<Acc> acc = std::is_integral_v<T> ? random_buf<Acc>(size_t(s.M) * s.N, seed + 2, -1e6, 1e6)
                                           : random_buf<Acc>(size_t(s.M) * s.N, seed + 2, -3, 3);
      Buf<Acc> out(size_t(s.M) * s.N);
      std::vector<Acc> wi(out.size());
      std::vector<double> wf(out.size());
      double worst_mag = 0;
      for (int i = 0; i < s.M; ++i)
        for (int j = 0; j < s.N; ++j) {
          double sum = use_acc ? to_d(acc[size_t(i) * s.N + j]) : 0, mag = std::fabs(sum);
          int64_t isum = use_acc ? int64_t(acc[size_t(i) * s.N + j]) : 0;
          for (int kk = 0; kk < s.K; ++kk) {
            T x = a[size_t(i) * s.K + kk], y = b[size_t(kk) * s.N + j];
            if constexpr (std::is_integral_v<T>) {
              isum += int64_t(x) * int64_t(y);
            } else {
              double p = tf32 ? double(tf32_round(float(to_d(x)))) * double(tf32_round(float(to_d(y)))) : to_d(x) * to_d(y);
              sum += p, mag += std::fabs(p);
            }
          }
          wi[size_t(i) * s.N + j] = Acc(isum);
          wf[size_t(i) * s.N + j] = sum;
          worst_mag = std::max(worst_mag, mag);
        }
      k(Grid(1), a.data(), b.data(), acc.data(), out.data(), s.M, s.N, s.K, use_acc, tf32);
      if constexpr (std::is_integral_v<T>) CHECK(diffs(out, wi) == "");
      else CHECK(diffs(out, wf, 0, worst_mag * (std::is_same_v<T, double> ? 1e-14 : 1e-6)) == "");  // f64: no f32 step
    }
  }
}
}  // namespace

TEST_CASE("ops: dot f32 IEEE", "[ops]") { dot_case<float>(1); }
TEST_CASE("ops: dot f32 TF32", "[ops]") { dot_case<float>(2, true); }
TEST_CASE("ops: dot f16", "[ops]") { dot_case<f16>(3); }
TEST_CASE("ops: dot bf16", "[ops]") { dot_case<bf16>(4); }
TEST_CASE("ops: dot i8 (i32 accumulation)", "[ops]") { dot_case<int8_t>(5); }
TEST_CASE("ops: dot f64 (f64 accumulation)", "[ops]") { dot_case<double>(6); }

TEST_CASE("ops: dot TF32 rounds inputs to 10 mantissa bits, IEEE does not", "[ops]") {
  auto k = make_dot<float>();
  // a = [1 + 2^-12, 1 + 3*2^-11 (exact tie)], b = [1, 1]: IEEE keeps every bit
  Buf<float> a(2), b(2), acc(1, 0.f), out(1);
  a[0] = 1.0f + std::ldexp(1.0f, -12);
  a[1] = 1.0f + 3 * std::ldexp(1.0f, -11);
  b[0] = 1.0f, b[1] = 1.0f;
  CHECK(tf32_round(a[0]) == 1.0f);
  CHECK(tf32_round(a[1]) == 1.0f + std::ldexp(1.0f, -9));
  k(Grid(1), a.data(), b.data(), acc.data(), out.data(), 1, 1, 2, false, false);
  CHECK(out[0] == a[0] + a[1]);
  k(Grid(1), a.data(), b.data(), acc.data(), out.data(), 1, 1, 2, false, true);
  CHECK(out[0] == 2.0f + std::ldexp(1.0f, -9));
}

/// C = A @ B of row-major bf16 A[M,K] and B[K,N], accumulated in double.
static std::vector<double> matmul_reference(const Buf<bf16>& a, const Buf<bf16>& b, int M, int N, int K) {
  std::vector<double> w(size_t(M) * N);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double t = 0;
      for (int kk = 0; kk < K; ++kk) t += to_d(a[size_t(i) * K + kk]) * to_d(b[size_t(kk) * N + j]);
      w[size_t(i) * N + j] = t;
    }
  return w;
}

TEST_CASE("ops: dot in a K loop with a carried accumulator and masked tails", "[ops]") {
  auto mm = ex::make_matmul<bf16>();  // the matmul example's kernel (f32 accumulator and C)
  struct S { int M, N, K; };
  for (S s : {S{1, 1, 1}, S{17, 33, 65}, S{40, 9, 17}}) {
    CAPTURE(s.M, s.N, s.K);
    Buf<bf16> a = random_buf<bf16>(size_t(s.M) * s.K, 1), b = random_buf<bf16>(size_t(s.K) * s.N, 2);
    Buf<float> c(size_t(s.M) * s.N, -99.f);
    std::vector<double> w = matmul_reference(a, b, s.M, s.N, s.K);
    mm(Grid(cdiv(s.M, 16), cdiv(s.N, 16)), a.data(), b.data(), c.data(), s.M, s.N, s.K, 16, 16, 16);
    CHECK(diffs(c, w, 1e-5, 1e-5) == "");
  }
}

TEST_CASE("ops: persistent matmul (programs loop over C's blocks) on ragged shapes", "[ops]") {
  // ex::make_matmul_persistent: a device loop over tiles (start program_id, step num_programs)
  // around the pipelined K loop. Fewer programs than blocks (each does several), as many, and more
  // (the extra ones do nothing); C starts at a canary so a skipped or doubled block shows.
  auto mm = ex::make_matmul_persistent<bf16>();
  struct S { int M, N, K, programs; };
  for (S s : {S{1, 1, 1, 1}, S{17, 33, 65, 2}, S{100, 50, 40, 3}, S{40, 9, 17, 9}, S{33, 17, 16, 50}}) {
    CAPTURE(s.M, s.N, s.K, s.programs);
    Buf<bf16> a = random_buf<bf16>(size_t(s.M) * s.K, 3), b = random_buf<bf16>(size_t(s.K) * s.N, 4);
    Buf<float> c(size_t(s.M) * s.N, -99.f);
    std::vector<double> w = matmul_reference(a, b, s.M, s.N, s.K);
    mm(Grid(s.programs), a.data(), b.data(), c.data(), s.M, s.N, s.K, 16, 16, 16);
    CHECK(diffs(c, w, 1e-5, 1e-5) == "");
  }
}

TEST_CASE("ops: attention (online softmax, two dots per key block) matches a double reference", "[ops]") {
  // The attention example's kernel (ex::make_attention) over ragged sequence lengths (one key
  // block, a partial last block, several), causal and not, two tile configurations (on the H200 in
  // the mirrored run: wgmma with one and with two warpgroups, q and p read from registers).
  auto attn = ex::make_attention<bf16>();
  struct Cfg { int BM, BN, D, warps; };
  for (Cfg cfg : {Cfg{64, 64, 32, 4}, Cfg{128, 64, 64, 8}})
    for (int S : {1, 17, 100, 200})
      for (bool causal : {false, true}) {
        CAPTURE(cfg.BM, cfg.BN, cfg.D, cfg.warps, S, causal);
        const int BH = 3, D = cfg.D;
        const size_t n = size_t(BH) * S * D;
        Buf<bf16> q = random_buf<bf16>(n, 21, -2, 2), k = random_buf<bf16>(n, 22, -2, 2), v = random_buf<bf16>(n, 23);
        Buf<bf16> o(n, bf16(-7.0f));
        const double sm_scale = 1.0 / std::sqrt(double(D));
        attn(Grid(cdiv(S, cfg.BM), BH).with_warps(cfg.warps), q.data(), k.data(), v.data(), o.data(), S,
             float(sm_scale * 1.4426950408889634), cfg.BM, cfg.BN, D, causal);
        std::vector<double> want(n);
        for (int h = 0; h < BH; ++h)
          for (int i = 0; i < S; ++i)
            ex::attention_row_reference(q.data(), k.data(), v.data(), S, D, h, i, causal, sm_scale,
                                        &want[(size_t(h) * S + i) * D]);
        CHECK(diffs(o, want, 1e-2, 1e-2) == "");  // p and o in bf16: ~3 significant digits
      }
}

TEST_CASE("ops: attention on descriptors, with and without the next block's scores issued before the softmax, matches a double reference",
          "[ops][descriptor]") {
  // ex::make_attention_tma<T, true>: s_next = dot(q, k_{j+1}^T) comes before block j's softmax and
  // is carried into the next iteration (on sm_90a its wgmma runs under the softmax). Ragged S (one
  // key block, a partial last block, several), causal and not; the last iteration's s_next reads
  // past the last head's rows (zeros) and is dropped. Both forms walk the key blocks that need no
  // mask (left of the causal diagonal, or wholly inside S) in one loop and the rest in another:
  // block sizes where BN does not divide BM (BN > BM) check that split. Mirrored on the GPU with
  // TLE_TEST_BACKEND=gpu.
  auto attn_ov = ex::make_attention_tma<bf16, true>();
  auto attn_plain = ex::make_attention_tma<bf16, false>();
  // (4 stages: on sm_90a acc's dot also stays in flight into the next iteration)
  struct Cfg { int64_t BM, BN; int D, warps, stages; bool overlap; };
  for (Cfg cfg : {Cfg{64, 64, 64, 4, 3, true}, Cfg{128, 64, 64, 8, 3, true}, Cfg{128, 64, 64, 8, 4, true},
                  Cfg{32, 64, 64, 4, 3, true}, Cfg{128, 64, 64, 8, 3, false}, Cfg{32, 64, 64, 4, 3, false}})
    for (int S : {1, 17, 100, 200})
      for (bool causal : {false, true}) {
        CAPTURE(cfg.BM, cfg.BN, cfg.D, cfg.warps, cfg.stages, cfg.overlap, S, causal);
        const int BH = 3, D = cfg.D;
        const int64_t rows = int64_t(BH) * S;
        const size_t n = size_t(rows) * D;
        Buf<bf16> q = random_buf<bf16>(n, 21, -2, 2), k = random_buf<bf16>(n, 22, -2, 2), v = random_buf<bf16>(n, 23);
        Buf<bf16> o(n, bf16(-7.0f));
        const double sm_scale = 1.0 / std::sqrt(double(D));
        auto run = [&](auto& attn) {
          attn(Grid(cdiv(S, int(cfg.BM)), BH).with_warps(cfg.warps).with_stages(cfg.stages),
               TensorDescriptor<bf16, 2>(q.data(), {rows, D}, {D, 1}, {cfg.BM, D}),
               TensorDescriptor<bf16, 2>(k.data(), {rows, D}, {D, 1}, {cfg.BN, D}),
               TensorDescriptor<bf16, 2>(v.data(), {rows, D}, {D, 1}, {cfg.BN, D}), o.data(), S,
               float(sm_scale * 1.4426950408889634), causal);
        };
        if (cfg.overlap) run(attn_ov);
        else run(attn_plain);
        std::vector<double> want(n);
        for (int h = 0; h < BH; ++h)
          for (int i = 0; i < S; ++i)
            ex::attention_row_reference(q.data(), k.data(), v.data(), S, D, h, i, causal, sm_scale,
                                        &want[(size_t(h) * S + i) * D]);
        CHECK(diffs(o, want, 1e-2, 1e-2) == "");  // p and o in bf16: ~3 significant digits
      }
}

TEST_CASE("ops: softmax over rows longer than its tile (online, two passes) matches the reference", "[ops]") {
  // ex::make_softmax_looped: chunks of BLOCK with a partial last one, one chunk, a row shorter than
  // a chunk; values spread so that the running maximum grows along the row (x rises with the
  // column in row 1) and shrinks (row 2), and a row whose maximum sits in the last chunk.
  auto sm = ex::make_softmax_looped();
  for (int BLOCK : {16, 256})
    for (int cols : {1, 17, 1001, 4100}) {
      CAPTURE(BLOCK, cols);
      const int rows = 4;
      Buf<float> x = random_buf<float>(size_t(rows) * cols, 31, -8, 8);
      for (int c = 0; c < cols; ++c) {
        x[size_t(cols) + c] = -30.0f + 60.0f * float(c) / float(cols);
        x[size_t(2) * cols + c] = 30.0f - 60.0f * float(c) / float(cols);
      }
      x[size_t(3) * cols + cols - 1] = 40.0f;
      Buf<float> y(size_t(rows) * cols, -7.0f);
      sm(Grid(rows), x.data(), y.data(), cols, BLOCK);
      std::vector<double> want(size_t(rows) * cols);
      std::vector<float> row(cols);
      for (int r = 0; r < rows; ++r) {
        ex::softmax_row_reference(&x[size_t(r) * cols], row.data(), cols);
        for (int c = 0; c < cols; ++c) want[size_t(r) * cols + c] = row[c];
      }
      CHECK(diffs(y, want, 1e-5, 1e-30) == "");
    }
}

TEST_CASE("ops: grouped block order is a bijection of the grid, GM row blocks per group", "[ops]") {
  // Each program writes the block it was given; every block of the grid must appear once, and
  // programs in launch order must walk down GM rows of a group before the next column.
  auto k = jit("grouped_ids", [](Ptr<int32_t> out, Constexpr<int> GM) {
    auto [pm, pn] = ex::grouped_block_ids(GM);
    Tile<int32_t> pid = program_id(0) + program_id(1) * num_programs(0);
    store(out + pid * 2, pm);
    store(out + pid * 2 + 1, pn);
  });
  struct S { int gx, gy, gm; };
  for (S s : {S{37, 5, 16}, S{16, 3, 16}, S{1, 7, 16}, S{9, 1, 4}, S{33, 2, 8}}) {
    CAPTURE(s.gx, s.gy, s.gm);
    Buf<int32_t> out(size_t(2) * s.gx * s.gy, -1);
    k(Grid(s.gx, s.gy), out.data(), s.gm);
    std::vector<int> seen(size_t(s.gx) * s.gy, 0);
    bool in_range = true;
    for (int p = 0; p < s.gx * s.gy; ++p) {
      int pm = out[2 * size_t(p)], pn = out[2 * size_t(p) + 1];
      in_range = in_range && pm >= 0 && pm < s.gx && pn >= 0 && pn < s.gy;
      if (pm >= 0 && pm < s.gx && pn >= 0 && pn < s.gy) ++seen[size_t(pn) * s.gx + pm];
      // the reference order: groups of gm rows, column by column, rows fastest
      int group = p / (s.gm * s.gy), first = group * s.gm, rows = std::min(s.gx - first, s.gm);
      int in = p % (s.gm * s.gy);
      CHECK(pm == first + in % rows);
      CHECK(pn == in / rows);
    }
    CHECK(in_range);
    CHECK(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
  }
}

TEST_CASE("ops: two K loops in one kernel, a K loop inside a persistent tile loop", "[ops]") {
  // On the GPU (TLE_TEST_BACKEND=gpu) shapes that are multiples of 16 run both loops, and the inner
  // loop of every tile, through the cp.async pipeline (tests/test_pipeline.cpp checks the PTX).
  auto two = gk::matmul_two_loops<bf16>();
  auto persistent = gk::matmul_persistent<bf16>();
  struct S { int M, N, K; };
  for (S s : {S{128, 64, 128}, S{64, 192, 16}, S{33, 17, 100}}) {
    CAPTURE(s.M, s.N, s.K);
    Buf<bf16> a1 = random_buf<bf16>(size_t(s.M) * s.K, 31, -3, 3), b1 = random_buf<bf16>(size_t(s.K) * s.N, 32, -3, 3);
    Buf<bf16> a2 = random_buf<bf16>(size_t(s.M) * s.K, 33, -3, 3), b2 = random_buf<bf16>(size_t(s.K) * s.N, 34, -3, 3);
    std::vector<double> w1(size_t(s.M) * s.N), w2(w1.size());
    for (int i = 0; i < s.M; ++i)
      for (int j = 0; j < s.N; ++j) {
        double t1 = 0, t2 = 0;
        for (int kk = 0; kk < s.K; ++kk) {
          t1 += to_d(a1[size_t(i) * s.K + kk]) * to_d(b1[size_t(kk) * s.N + j]);
          t2 += to_d(a2[size_t(i) * s.K + kk]) * to_d(b2[size_t(kk) * s.N + j]);
        }
        w1[size_t(i) * s.N + j] = t1;
        w2[size_t(i) * s.N + j] = t1 + t2;
      }
    for (int stages : {1, 3}) {
      CAPTURE(stages);
      Buf<float> c(w1.size(), -99.f);
      two(Grid(cdiv(s.M, 64), cdiv(s.N, 64)).with_warps(4).with_stages(stages), a1.data(), b1.data(), a2.data(), b2.data(),
          c.data(), s.M, s.N, s.K, 64, 64, 32);
      CHECK(diffs(c, w2, 1e-5, 1e-4) == "");
      // 3 programs (fewer than the tiles of the first two shapes, so a program runs two tiles in
      // sequence) and more programs than tiles (some run none).
      for (int programs : {3, int(cdiv(s.M, 64) * cdiv(s.N, 32)) + 5}) {
        CAPTURE(programs);
        Buf<float> d(w1.size(), -99.f);
        persistent(Grid(programs).with_warps(4).with_stages(stages), a1.data(), b1.data(), d.data(), s.M, s.N, s.K, 64, 32,
                   32);
        CHECK(diffs(d, w1, 1e-5, 1e-4) == "");
      }
    }
  }
}
