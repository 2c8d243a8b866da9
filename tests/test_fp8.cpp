// tests/test_fp8.cpp - the OCP 8-bit float element types tle::f8e4m3 and tle::f8e5m2 (dtype.hpp):
// conversions against a bit-exact reference written here (nearest representable value found by
// search over the codes, ties to the even code, saturation, NaN), on the host types, on the
// kernel backend the test runs on ([fp8]: the CPU backend, or TLE_BACKEND=interp), in the PTX for
// sm_90a / sm_89 / sm_80 ([ptx][fp8]: assembled by ptxas), and on the GPU ([.gpu][fp8]); then the
// storage-type rule (arithmetic on fp8 is a UserError at the user's line), DLPack's refusal, and
// fp8 x fp8 -> f32 dots (exact f32 reference on the CPU / interpreter, double on the GPU), and on
// sm_90a their wgmma.m64nNk32 form: K-major operands pipelined by cp.async or TMA, an N-major B
// staged from registers (PTX checks; GPU results within Hopper's fp8 accumulation, fp8_close).
#include <catch2/catch.hpp>
#include <dlpack/dlpack.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../examples/kernels.hpp"
#include "env_util.hpp"
#include "error_util.hpp"
#include "ptxas_util.hpp"
#include "tle/dlpack.hpp"
#include "tle/tle.hpp"

using namespace tle;

namespace {

// ---------------------------------------------------------------- the reference
// OCP OFP8 rev. 1.0: E4M3: bias 7, 3 mantissa bits, no infinities, S.1111.111 NaN, max 448.
// E5M2: bias 15, 2 mantissa bits, S.11111.00 infinity, S.11111.{01,10,11} NaN, max 57344.

template <class T> constexpr bool kE4 = std::is_same_v<T, f8e4m3>;

/// The value of code b (NaN for the NaN codes, +-inf for E5M2's infinities).
double ref_decode(uint8_t b, bool e4) {
  const int mbits = e4 ? 3 : 2, bias = e4 ? 7 : 15;
  const int ef = (b & 0x7F) >> mbits, mf = b & ((1 << mbits) - 1);
  double mag;
  if (e4 && (b & 0x7F) == 0x7F) mag = std::numeric_limits<double>::quiet_NaN();
  else if (!e4 && ef == 31) mag = mf ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (ef == 0) mag = mf * std::pow(2.0, 1 - bias - mbits);
  else mag = (1.0 + mf / double(1 << mbits)) * std::pow(2.0, ef - bias);
  return (b & 0x80) ? -mag : mag;
}

/// The code of x: NaN -> sign | 0x7F; |x| at or above the max finite value (inf too) -> +-max;
/// else the nearest finite code by search, a tie going to the even code; the sign is x's (so -0
/// and negative values that round to zero give 0x80).
uint8_t ref_encode(double x, bool e4) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x)) return sign | 0x7F;
  const int maxcode = e4 ? 0x7E : 0x7B;
  const double a = std::fabs(x);
  if (a >= ref_decode(uint8_t(maxcode), e4)) return uint8_t(sign | maxcode);
  int best = 0;
  for (int c = 1; c <= maxcode; ++c) {
    const double dc = std::fabs(ref_decode(uint8_t(c), e4) - a), db = std::fabs(ref_decode(uint8_t(best), e4) - a);
    if (dc < db || (dc == db && c % 2 == 0)) best = c;
  }
  return uint8_t(sign | best);
}

/// Bits of a float value as f32 (the conversion to f32 is exact; NaN: sign | 0x7FC00000).
uint32_t ref_f32_bits(uint8_t b, bool e4) {
  const double v = ref_decode(b, e4);
  if (std::isnan(v)) return (b & 0x80 ? 0x80000000u : 0u) | 0x7FC00000u;
  return std::bit_cast<uint32_t>(static_cast<float>(v));
}

float f32_of_bits(uint32_t u) { return std::bit_cast<float>(u); }

/// f32 inputs that exercise the rounding: every code's value, every midpoint between neighbouring
/// codes (ties) and the floats just above and below it, half the smallest subnormal and the
/// values around it, the max finite value and the midpoint above it (saturation), infinities,
/// NaNs of both signs with payloads, zeros, f32 subnormals, both signs of all; plus random floats.
std::vector<float> rounding_cases(bool e4) {
  std::vector<float> v;
  auto add = [&](double x) {
    float f = static_cast<float>(x);
    for (float s : {f, -f}) {
      v.push_back(s);
      v.push_back(std::nextafter(s, std::numeric_limits<float>::infinity()));
      v.push_back(std::nextafter(s, -std::numeric_limits<float>::infinity()));
    }
  };
  const int maxcode = e4 ? 0x7E : 0x7B;
  for (int c = 0; c <= maxcode; ++c) {
    const double lo = ref_decode(uint8_t(c), e4);
    add(lo);
    const double hi = c < maxcode ? ref_decode(uint8_t(c + 1), e4) : 2 * lo - ref_decode(uint8_t(c - 1), e4);
    add((lo + hi) / 2);  // a tie (above max: the midpoint to the next would-be value)
  }
  for (double x : {1e-30, 1e-45, 1e6, 1e30, 3.4e38, 65504.0, 57344.0, 61440.0, 448.0, 464.0, 480.0, 1.0 / 3})
    add(x);
  v.push_back(std::numeric_limits<float>::infinity());
  v.push_back(-std::numeric_limits<float>::infinity());
  v.push_back(std::numeric_limits<float>::denorm_min());
  v.push_back(-std::numeric_limits<float>::denorm_min());
  for (uint32_t nan : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFFBFFFFFu, 0x7FC12345u})
    v.push_back(f32_of_bits(nan));
  std::mt19937 g(e4 ? 8 : 9);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::uniform_int_distribution<int> ex(e4 ? -12 : -20, e4 ? 10 : 17);
  for (int i = 0; i < 400; ++i) v.push_back(static_cast<float>(std::ldexp(mant(g), ex(g)) * (i % 2 ? -1 : 1)));
  return v;
}

std::string hex(uint32_t x) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%X", x);
  return b;
}

/// Checks got[i] (fp8 codes) == ref_encode(in[i]) for all i; reports the first few misses.
template <class T, class In> void check_codes(const std::vector<In>& in, const T* got, bool e4, const char* what) {
  int bad = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const double x = static_cast<double>(static_cast<float>(in[i]));
    const uint8_t want = ref_encode(x, e4);
    if (got[i].bits != want && bad++ < 5)
      FAIL_CHECK(what << ": input " << x << " (element " << i << "): got " << hex(got[i].bits) << ", want "
                      << hex(want));
  }
  CHECK(bad == 0);
}

// ---------------------------------------------------------------- kernels
template <class T> auto& to_fp8_kernel() {
  static auto k = jit("fp8_from_f32", [](Ptr<float> x, Ptr<T> out, Tile<int32_t> n, Constexpr<int> B) {
    Tile<int32_t> o = program_id(0) * B + arange(0, B);
    Tile<bool> m = o < n;
    store(out + o, cast<T>(load(x + o, m)), m);
  });
  return k;
}
template <class T> auto& from_fp8_kernel() {
  static auto k = jit("fp8_to_f32", [](Ptr<T> x, Ptr<float> out, Tile<int32_t> n, Constexpr<int> B) {
    Tile<int32_t> o = program_id(0) * B + arange(0, B);
    Tile<bool> m = o < n;
    store(out + o, cast<float>(load(x + o, m)), m);
  });
  return k;
}
/// From f16 or bf16 (H), both fp8 formats at once.
template <class H> auto& half_to_fp8_kernel() {
  static auto k = jit("fp8_from_half", [](Ptr<H> x, Ptr<f8e4m3> o4, Ptr<f8e5m2> o5, Tile<int32_t> n, Constexpr<int> B) {
    Tile<int32_t> o = program_id(0) * B + arange(0, B);
    Tile<bool> m = o < n;
    Tile<H> v = load(x + o, m);
    store(o4 + o, cast<f8e4m3>(v), m);
    store(o5 + o, cast<f8e5m2>(v), m);
  });
  return k;
}

/// The ragged (n, block) pairs every conversion runs over: one element, 17 in one ragged tile,
/// 1001 in one tile, and all of them in programs of 17.
std::vector<std::pair<int, int>> shapes(int total) { return {{1, 1}, {17, 17}, {1001, 1001}, {total, 17}}; }

template <class T> void f32_to_fp8_on_backend() {
  constexpr bool e4 = kE4<T>;
  const std::vector<float> in = rounding_cases(e4);
  for (auto [n, b] : shapes(int(in.size()))) {
    INFO("n = " << n << ", block = " << b);
    std::vector<T> out(n, T::from_bits(0x55));
    to_fp8_kernel<T>()(Grid(cdiv(n, b)), in.data(), out.data(), n, b);
    check_codes(std::vector<float>(in.begin(), in.begin() + n), out.data(), e4, "f32 -> fp8");
  }
}

template <class T> void fp8_to_f32_on_backend() {
  constexpr bool e4 = kE4<T>;
  std::vector<T> in(1001);  // every code, about four times over
  for (int i = 0; i < 1001; ++i) in[i] = T::from_bits(uint8_t(i % 256));
  for (auto [n, b] : shapes(1001)) {
    INFO("n = " << n << ", block = " << b);
    std::vector<float> out(n, -1.0f);
    from_fp8_kernel<T>()(Grid(cdiv(n, b)), in.data(), out.data(), n, b);
    int bad = 0;
    for (int i = 0; i < n; ++i) {
      const std::string got = hex(std::bit_cast<uint32_t>(out[i])), want = hex(ref_f32_bits(uint8_t(i % 256), e4));
      if (got != want && bad++ < 5) FAIL_CHECK("code " << hex(uint32_t(i % 256)) << ": got " << got << ", want " << want);
    }
    CHECK(bad == 0);
  }
}

}  // namespace

// ==================================================================== host types

TEST_CASE("fp8: host types decode all 256 codes exactly and round f32 and f64 like the reference", "[fp8]") {
  for (int c = 0; c < 256; ++c) {
    INFO("code " << hex(uint32_t(c)));
    CHECK(hex(std::bit_cast<uint32_t>(float(f8e4m3::from_bits(uint8_t(c))))) == hex(ref_f32_bits(uint8_t(c), true)));
    CHECK(hex(std::bit_cast<uint32_t>(float(f8e5m2::from_bits(uint8_t(c))))) == hex(ref_f32_bits(uint8_t(c), false)));
  }
  // Spot values of the formats (OFP8 table 1).
  CHECK(float(f8e4m3::from_bits(0x7E)) == 448.0f);
  CHECK(float(f8e4m3::from_bits(0x01)) == std::ldexp(1.0f, -9));
  CHECK(float(f8e4m3::from_bits(0x08)) == std::ldexp(1.0f, -6));
  CHECK(float(f8e5m2::from_bits(0x7B)) == 57344.0f);
  CHECK(float(f8e5m2::from_bits(0x01)) == std::ldexp(1.0f, -16));
  CHECK(float(f8e5m2::from_bits(0x7C)) == std::numeric_limits<float>::infinity());
  for (bool e4 : {true, false}) {
    INFO((e4 ? "e4m3" : "e5m2"));
    std::vector<float> in = rounding_cases(e4);
    std::vector<f8e4m3> g4;
    std::vector<f8e5m2> g5;
    for (float x : in) g4.push_back(f8e4m3(x)), g5.push_back(f8e5m2(x));
    if (e4) check_codes(in, g4.data(), true, "f8e4m3(float)");
    else check_codes(in, g5.data(), false, "f8e5m2(float)");
  }
  // From double: one rounding (a value a hair above a tie rounds up, where rounding through f32
  // first would make it the tie and round to even).
  const double tie = 1.0 + 1.0 / 16;  // e4m3: between 1.0 (even) and 1.125
  CHECK(f8e4m3(tie).bits == 0x38);
  CHECK(f8e4m3(tie + 1e-12).bits == 0x39);
  CHECK(f8e5m2(1.125 + 1e-12).bits == 0x3D);  // e5m2: between 1.0 and 1.25
  CHECK(f8e4m3(-0.0).bits == 0x80);
  CHECK(f8e4m3(std::nan("")).bits == 0x7F);
  CHECK(f8e5m2(-std::numeric_limits<double>::infinity()).bits == 0xFB);
}

// ==================================================================== kernels

TEST_CASE("fp8: f32 -> f8e4m3 and f8e5m2 in kernels: ties, saturation, NaN, subnormals, -0, ragged sizes",
          "[fp8]") {
  SECTION("e4m3") { f32_to_fp8_on_backend<f8e4m3>(); }
  SECTION("e5m2") { f32_to_fp8_on_backend<f8e5m2>(); }
}

TEST_CASE("fp8: all 256 codes of both formats -> f32 in kernels, exact, ragged sizes", "[fp8]") {
  SECTION("e4m3") { fp8_to_f32_on_backend<f8e4m3>(); }
  SECTION("e5m2") { fp8_to_f32_on_backend<f8e5m2>(); }
}

TEST_CASE("fp8: every f16 and every bf16 bit pattern -> both fp8 formats in kernels", "[fp8]") {
  std::vector<f16> h(65536);
  std::vector<bf16> bh(65536);
  for (int i = 0; i < 65536; ++i) h[i] = f16::from_bits(uint16_t(i)), bh[i] = bf16::from_bits(uint16_t(i));
  for (int n : {1, 17, 65536}) {
    INFO("n = " << n);
    std::vector<f8e4m3> o4(n);
    std::vector<f8e5m2> o5(n);
    half_to_fp8_kernel<f16>()(Grid(cdiv(n, 1024)), h.data(), o4.data(), o5.data(), n, 1024);
    std::vector<f16> hin(h.begin(), h.begin() + n);
    check_codes(hin, o4.data(), true, "f16 -> e4m3");
    check_codes(hin, o5.data(), false, "f16 -> e5m2");
    half_to_fp8_kernel<bf16>()(Grid(cdiv(n, 1001)), bh.data(), o4.data(), o5.data(), n, 1001);
    std::vector<bf16> bin(bh.begin(), bh.begin() + n);
    check_codes(bin, o4.data(), true, "bf16 -> e4m3");
    check_codes(bin, o5.data(), false, "bf16 -> e5m2");
  }
}

TEST_CASE("fp8: casts between the formats, to f16/bf16/f64/integers, from integers and f64", "[fp8]") {
  // e4m3 -> e5m2 -> e4m3 and the other way, f16 / bf16 / f64 (exact), i32 (truncation toward zero,
  // NaN -> 0) for all 256 codes; i32 -> fp8 and f64 -> fp8 (rounded once) on chosen values.
  static auto k = jit("fp8_casts", [](Ptr<f8e4m3> x4, Ptr<f8e5m2> x5, Ptr<f8e5m2> o45, Ptr<f8e4m3> o54, Ptr<f16> oh,
                                      Ptr<bf16> ob, Ptr<double> od, Ptr<int32_t> oi, Ptr<int32_t> iv, Ptr<double> dv,
                                      Ptr<f8e4m3> oi4, Ptr<f8e5m2> oi5, Ptr<f8e4m3> od4, Tile<int32_t> n,
                                      Constexpr<int> B) {
    Tile<int32_t> o = program_id(0) * B + arange(0, B);
    Tile<bool> m = o < n;
    Tile<f8e4m3> a = load(x4 + o, m);
    Tile<f8e5m2> b = load(x5 + o, m);
    store(o45 + o, cast<f8e5m2>(a), m);
    store(o54 + o, cast<f8e4m3>(b), m);
    store(oh + o, cast<f16>(a), m);
    store(ob + o, cast<bf16>(b), m);
    store(od + o, cast<double>(a), m);
    store(oi + o, cast<int32_t>(b), m);
    store(oi4 + o, cast<f8e4m3>(load(iv + o, m)), m);
    store(oi5 + o, cast<f8e5m2>(load(iv + o, m)), m);
    store(od4 + o, cast<f8e4m3>(load(dv + o, m)), m);
  });
  const int n = 256;
  std::vector<f8e4m3> x4(n);
  std::vector<f8e5m2> x5(n);
  std::vector<int32_t> iv(n);
  std::vector<double> dv(n);
  for (int c = 0; c < n; ++c) {
    x4[c] = f8e4m3::from_bits(uint8_t(c)), x5[c] = f8e5m2::from_bits(uint8_t(c));
    iv[c] = (c - 128) * (c % 3 == 0 ? 1 : c % 3 == 1 ? 37 : 1000003);
    const double tie = 1.0 + 1.0 / 16 + (c % 2 ? 1e-12 : -1e-12);  // f64 near an e4m3 tie
    dv[c] = c % 4 == 0 ? tie : c % 4 == 1 ? -tie * 64 : c % 4 == 2 ? std::ldexp(3.0, -11) : 1e300;
  }
  std::vector<f8e5m2> o45(n), oi5(n);
  std::vector<f8e4m3> o54(n), oi4(n), od4(n);
  std::vector<f16> oh(n);
  std::vector<bf16> ob(n);
  std::vector<double> od(n);
  std::vector<int32_t> oi(n);
  k(Grid(cdiv(n, 100)), x4.data(), x5.data(), o45.data(), o54.data(), oh.data(), ob.data(), od.data(), oi.data(),
    iv.data(), dv.data(), oi4.data(), oi5.data(), od4.data(), n, 100);
  for (int c = 0; c < n; ++c) {
    INFO("code " << hex(uint32_t(c)) << ", int " << iv[c] << ", double " << dv[c]);
    const double a = ref_decode(uint8_t(c), true), b = ref_decode(uint8_t(c), false);
    CHECK(hex(o45[c].bits) == hex(ref_encode(a, false)));
    CHECK(hex(o54[c].bits) == hex(ref_encode(b, true)));
    if (std::isnan(a)) {
      CHECK(std::isnan(float(oh[c])));
      CHECK(std::isnan(od[c]));
    } else {
      CHECK(float(oh[c]) == a);
      CHECK(od[c] == a);
    }
    if (std::isnan(b)) CHECK(std::isnan(float(ob[c])));
    else CHECK(float(ob[c]) == b);
    const int32_t want_i = std::isnan(b) ? 0 : std::isinf(b) ? (b > 0 ? INT32_MAX : INT32_MIN) : int32_t(b);
    CHECK(oi[c] == want_i);
    CHECK(hex(oi4[c].bits) == hex(ref_encode(double(iv[c]), true)));
    CHECK(hex(oi5[c].bits) == hex(ref_encode(double(iv[c]), false)));
    CHECK(hex(od4[c].bits) == hex(ref_encode(dv[c], true)));
  }
}

TEST_CASE("fp8: loads with other, where, shape ops, fp8 scalar arguments and mixed arithmetic with f32", "[fp8]") {
  // fp8 moves through masked loads (other), where, trans, and promotes into f32 arithmetic (the
  // wider float: exact, no fp8 rounding until the explicit cast back).
  static auto k = jit("fp8_moves", [](Ptr<f8e4m3> x, Ptr<f8e4m3> out, Ptr<float> sum, Ptr<uint8_t> bits, Ptr<bool> nz,
                                      Tile<f8e4m3> s, Tile<int32_t> n, Constexpr<int> R, Constexpr<int> C) {
    Tile<int32_t> r = arange(0, R), c = arange(0, C);
    Tile<int32_t> idx = expand_dims(r, 1) * C + expand_dims(c, 0);
    Tile<bool> m = idx < n;
    Tile<f8e4m3> v = load(x + idx, m, 1.5);  // masked-off elements read 1.5
    Tile<f8e4m3> w = where(idx % 2 == 0, v, s);
    Tile<f8e4m3> t = trans(w);  // [C, R]
    Tile<int32_t> tidx = expand_dims(arange(0, C), 1) * R + expand_dims(arange(0, R), 0);
    store(out + tidx, t);
    Tile<float> f = v + full<float>({R, C}, 0.25f);
    store(sum + idx, f);
    store(bits + idx, bitcast<uint8_t>(v));  // the code itself
    store(nz + idx, cast<bool>(v));          // x != 0: NaN gives true, -0 false
  });
  for (auto [R, C] : {std::pair{1, 1}, std::pair{3, 17}, std::pair{7, 143}}) {
    const int total = R * C, n = total - total / 3;
    INFO("R = " << R << ", C = " << C << ", n = " << n);
    std::vector<f8e4m3> x(total), out(total);
    std::vector<float> sum(total);
    std::vector<uint8_t> bits(total);
    std::unique_ptr<bool[]> nz(new bool[total]);
    for (int i = 0; i < total; ++i) x[i] = f8e4m3::from_bits(uint8_t((i * 37) % 256));
    const f8e4m3 s = f8e4m3(-3.25);  // rounds to -3.25 exactly (1.625 * 2)
    k(Grid(1), x.data(), out.data(), sum.data(), bits.data(), nz.get(), s, n, R, C);
    for (int i = 0; i < total; ++i) {
      const int ri = i / C, ci = i % C;
      const uint8_t v = i < n ? x[i].bits : uint8_t(0x3C);  // 1.5
      const uint8_t w = i % 2 == 0 ? v : s.bits;
      INFO("element " << i);
      CHECK(hex(out[ci * R + ri].bits) == hex(w));
      const double fv = ref_decode(v, true);
      if (std::isnan(fv)) CHECK(std::isnan(sum[i]));
      else CHECK(sum[i] == static_cast<float>(fv + 0.25));
      CHECK(hex(bits[i]) == hex(v));
      CHECK(nz[i] == (fv != 0));
    }
  }
}

// ==================================================================== the storage-type rule

namespace {
// Set by kernels while they are traced (kernel lambdas capture nothing): the offending line.
int g_line = 0;
std::vector<f8e4m3> g_buf(256);
template <class K> void expect_fp8_error(K& k, const char* phrase) {
  g_line = 0;
  errtest::expect_user_error([&] { k(Grid(1).backend(Backend::CPU), g_buf.data()); },
                             {phrase, "fp8 is a storage type", "cast<float>(x)"}, "test_fp8.cpp", g_line);
}
}  // namespace

TEST_CASE("fp8: arithmetic, comparisons, math, reductions and sorts on fp8 tiles are UserErrors at the line",
          "[fp8][errors]") {
  // Triton's promotion rule computes two fp8 operands in fp8, which its backends then lower by
  // upcasting or refuse; tle makes fp8 a storage type and asks for the cast (docs/semantics.md).
  static auto add = jit("fp8_add", [](Ptr<f8e4m3> p) {
    Tile<f8e4m3> x = load(p + arange(0, 16));
    g_line = __LINE__; store(p + arange(0, 16), x + x);
  });
  expect_fp8_error(add, "operator");
  static auto scale = jit("fp8_scale", [](Ptr<f8e4m3> p) {
    Tile<f8e4m3> x = load(p + arange(0, 16));
    g_line = __LINE__; store(p + arange(0, 16), x * 2.0f);
  });
  expect_fp8_error(scale, "operator");
  static auto cmp = jit("fp8_cmp", [](Ptr<f8e4m3> p) {
    Tile<f8e4m3> x = load(p + arange(0, 16));
    g_line = __LINE__; store(p + arange(0, 16), where(x < x, x, x));
  });
  expect_fp8_error(cmp, "comparison");
  static auto ex = jit("fp8_exp", [](Ptr<f8e4m3> p) {
    Tile<f8e4m3> x = load(p + arange(0, 16));
    g_line = __LINE__; store(p + arange(0, 16), exp(x));
  });
  expect_fp8_error(ex, "is not defined on f8e4m3 tiles");
  static auto red = jit("fp8_sum", [](Ptr<f8e4m3> p) {
    Tile<f8e4m3> x = load(p + arange(0, 16));
    g_line = __LINE__; store(p, sum(x, 0));
  });
  expect_fp8_error(red, "is not defined on f8e4m3 tiles");
  static auto srt = jit("fp8_sort", [](Ptr<f8e4m3> p) {
    Tile<f8e4m3> x = load(p + arange(0, 16));
    g_line = __LINE__; store(p + arange(0, 16), sort(x, 0));
  });
  expect_fp8_error(srt, "is not defined on f8e4m3 tiles");
}

// ==================================================================== dot

namespace {
template <class T> auto& dot_kernel() {
  // C = (A @ B) * scale: fp8 x fp8 -> f32 with a per-tensor scale in the epilogue.
  static auto k = jit("fp8_dot", [](Ptr<T> a, Ptr<T> b, Ptr<float> c, Tile<float> scale, Constexpr<int> M,
                                    Constexpr<int> N, Constexpr<int> K) {
    Tile<int32_t> ia = expand_dims(arange(0, M), 1) * K + expand_dims(arange(0, K), 0);
    Tile<int32_t> ib = expand_dims(arange(0, K), 1) * N + expand_dims(arange(0, N), 0);
    Tile<int32_t> ic = expand_dims(arange(0, M), 1) * N + expand_dims(arange(0, N), 0);
    Tile<float> acc = dot(load(a + ia), load(b + ib));
    store(c + ic, acc * scale);
  });
  return k;
}

/// Random finite codes of T (no NaN, no infinity), about half of them negative.
template <class T> std::vector<T> random_codes(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::vector<T> v(n);
  for (auto& x : v) {
    uint8_t c;
    do c = uint8_t(g() & 0xFF);
    while (!std::isfinite(ref_decode(c, kE4<T>)));
    x = T::from_bits(c);
  }
  return v;
}

struct DotShape {
  int m, n, k;
};
const DotShape kDotShapes[] = {{1, 1, 1}, {17, 17, 17}, {16, 17, 1001}, {64, 32, 64}};

/// |got - want| within Hopper's fp8 tensor-core accumulation: each k32 step's products are added
/// at reduced precision before the f32 accumulator (DeepSeek-V3 report, section 3.3.2: about 14
/// bits), so the bound is 2^-9 of the sum of |products| (a wrong layout or descriptor is off by
/// O(that sum)), plus the output's rounding (`out_rel`: 2^-8 for bf16, 0 for f32).
bool fp8_close(double got, double want, double mag, double out_rel) {
  return std::fabs(got - want) <= 0x1p-9 * mag + out_rel * std::fabs(want) + 1e-30;
}

/// The rule of docs/ir.md: each product exact in f32, summed in f32 in k order, then the scale.
template <class T> std::vector<float> dot_ref_f32(const std::vector<T>& a, const std::vector<T>& b, float scale,
                                                  DotShape s) {
  std::vector<float> c(size_t(s.m) * s.n);
  for (int i = 0; i < s.m; ++i)
    for (int j = 0; j < s.n; ++j) {
      float acc = 0.0f;
      for (int k = 0; k < s.k; ++k) acc = acc + float(a[size_t(i) * s.k + k]) * float(b[size_t(k) * s.n + j]);
      c[size_t(i) * s.n + j] = acc * scale;
    }
  return c;
}
}  // namespace

TEST_CASE("fp8: dot of fp8 tiles accumulates in f32 in k order (exact f32 reference), ragged M, N, K", "[fp8]") {
  auto run = [](auto tag) {
    using T = decltype(tag);
    INFO((kE4<T> ? "e4m3" : "e5m2"));
    for (DotShape s : kDotShapes) {
      INFO("M = " << s.m << ", N = " << s.n << ", K = " << s.k);
      auto a = random_codes<T>(size_t(s.m) * s.k, 1 + s.k), b = random_codes<T>(size_t(s.k) * s.n, 2 + s.n);
      std::vector<float> c(size_t(s.m) * s.n, -1.0f);
      const float scale = 0.375f;
      dot_kernel<T>()(Grid(1), a.data(), b.data(), c.data(), scale, s.m, s.n, s.k);
      const std::vector<float> want = dot_ref_f32(a, b, scale, s);
      int bad = 0;
      for (size_t i = 0; i < c.size(); ++i)
        if (std::bit_cast<uint32_t>(c[i]) != std::bit_cast<uint32_t>(want[i]) && bad++ < 5)
          FAIL_CHECK("C[" << i << "]: got " << c[i] << ", want " << want[i]);
      CHECK(bad == 0);
    }
  };
  run(f8e4m3{});
  run(f8e5m2{});
}

namespace {
/// The FP8 GEMM of DeepSeek-V3 / Llama FP8 checkpoints as a user writes it in tle: a K loop of
/// fp8 x fp8 dots into an f32 accumulator, then a per-row scale of A (sa[M]) and a per-tensor
/// scale of B (sb) in the epilogue, stored as bf16. Masked tails on M, N and K.
template <class T> auto& gemm_kernel() {
  static auto k = jit("fp8_gemm", [](Ptr<T> a, Ptr<T> b, Ptr<bf16> c, Ptr<float> sa, Tile<float> sb, Tile<int32_t> M,
                                     Tile<int32_t> N, Tile<int32_t> K, Constexpr<int> BM, Constexpr<int> BN,
                                     Constexpr<int> BK) {
    Tile<int32_t> rm = program_id(0) * BM + arange(0, BM);
    Tile<int32_t> rn = program_id(1) * BN + arange(0, BN);
    Tile<int32_t> rk = arange(0, BK);
    Tile<float> acc = zeros<float>({BM, BN});
    for (auto k0 : range(0, K, BK)) {
      Tile<int32_t> kk = k0 + rk;
      Tile<T> ta = load(a + expand_dims(rm, 1) * K + expand_dims(kk, 0), expand_dims(rm < M, 1) & expand_dims(kk < K, 0));
      Tile<T> tb = load(b + expand_dims(kk, 1) * N + expand_dims(rn, 0), expand_dims(kk < K, 1) & expand_dims(rn < N, 0));
      acc = dot(ta, tb, acc);
    }
    Tile<float> out = acc * expand_dims(load(sa + rm, rm < M), 1) * sb;
    store(c + expand_dims(rm, 1) * N + expand_dims(rn, 0), cast<bf16>(out),
          expand_dims(rm < M, 1) & expand_dims(rn < N, 0));
  });
  return k;
}
const DotShape kGemmShapes[] = {{1, 1, 1}, {17, 17, 17}, {33, 70, 1000}, {64, 64, 96}};

template <class T> void gemm_on_backend() {
  for (DotShape s : kGemmShapes) {
    INFO("M = " << s.m << ", N = " << s.n << ", K = " << s.k);
    auto a = random_codes<T>(size_t(s.m) * s.k, 3 + s.k), b = random_codes<T>(size_t(s.k) * s.n, 4 + s.n);
    std::vector<float> sa(s.m);
    for (int i = 0; i < s.m; ++i) sa[i] = std::ldexp(1.0f + float(i % 7) / 8, -(i % 5));
    const float sb = 0.0625f;
    std::vector<bf16> c(size_t(s.m) * s.n);
    gemm_kernel<T>()(Grid(cdiv(s.m, 32), cdiv(s.n, 32)), a.data(), b.data(), c.data(), sa.data(), sb, s.m, s.n, s.k,
                     32, 32, 32);
    const std::vector<float> acc = dot_ref_f32(a, b, 1.0f, s);
    int bad = 0;
    for (int i = 0; i < s.m; ++i)
      for (int j = 0; j < s.n; ++j) {
        const bf16 want(acc[size_t(i) * s.n + j] * sa[i] * sb);
        const bf16 got = c[size_t(i) * s.n + j];
        if (got.bits != want.bits && bad++ < 5)
          FAIL_CHECK("C[" << i << ", " << j << "]: got " << float(got) << ", want " << float(want));
      }
    CHECK(bad == 0);
  }
}
}  // namespace

TEST_CASE("fp8: a K-loop fp8 GEMM with a per-row and a per-tensor scale and bf16 output, ragged M, N, K", "[fp8]") {
  SECTION("e4m3") { gemm_on_backend<f8e4m3>(); }
  SECTION("e5m2") { gemm_on_backend<f8e5m2>(); }
}

TEST_CASE("ptx: fp8 dots compile for sm_90a and sm_80 and assemble", "[ptx][fp8]") {
  auto* a4 = reinterpret_cast<f8e4m3*>(uintptr_t(0x10000));
  auto* a5 = reinterpret_cast<f8e5m2*>(uintptr_t(0x10000));
  auto* c = reinterpret_cast<float*>(uintptr_t(0x20000));
  for (int sm : {90, 80}) {
    const std::string arch = sm == 90 ? "sm_90a" : "sm_80";
    INFO(arch);
    ptxtest::assemble("fp8 e4m3 dot 64x32x64", dot_kernel<f8e4m3>().ptx(sm, 4, a4, a4, c, 1.0f, 64, 32, 64), arch);
    ptxtest::assemble("fp8 e5m2 dot 16x17x1001", dot_kernel<f8e5m2>().ptx(sm, 4, a5, a5, c, 1.0f, 16, 17, 1001), arch);
    auto* cb = reinterpret_cast<bf16*>(uintptr_t(0x30000));
    ptxtest::assemble("fp8 e4m3 gemm 64x64x32 blocks",
                      gemm_kernel<f8e4m3>().ptx(sm, 4, a4, a4, cb, c, 1.0f, 4096, 4096, 4096, 64, 64, 32), arch);
  }
}

TEST_CASE("gpu: fp8 dots on the device match a double reference of the dequantized inputs", "[.gpu][fp8]") {
  if (!gpu_info()) {
    WARN("no usable GPU: [.gpu] case skipped");
    return;
  }
  auto run = [](auto tag) {
    using T = decltype(tag);
    INFO((kE4<T> ? "e4m3" : "e5m2"));
    for (DotShape s : kDotShapes) {
      INFO("M = " << s.m << ", N = " << s.n << ", K = " << s.k);
      auto a = random_codes<T>(size_t(s.m) * s.k, 1 + s.k), b = random_codes<T>(size_t(s.k) * s.n, 2 + s.n);
      DeviceBuffer<T> da(a), db(b);
      DeviceBuffer<float> dc(size_t(s.m) * s.n);
      const float scale = 0.375f;
      dot_kernel<T>()(Grid(1).backend(Backend::GPU), da, db, dc, scale, s.m, s.n, s.k);
      std::vector<float> c(size_t(s.m) * s.n);
      dc.copy_to_host(c.data(), c.size());
      int bad = 0;
      for (int i = 0; i < s.m; ++i)
        for (int j = 0; j < s.n; ++j) {
          double want = 0, mag = 0;
          for (int k = 0; k < s.k; ++k) {
            const double p = double(float(a[size_t(i) * s.k + k])) * double(float(b[size_t(k) * s.n + j]));
            want += p, mag += std::fabs(p);
          }
          want *= scale, mag *= scale;
          const double got = c[size_t(i) * s.n + j];
          // exact products summed in f32 (k + 1 roundings of at most 2^-24 of mag each) on CUDA
          // cores; the 64x32x64 dot runs on wgmma on sm_90a: Hopper's fp8 accumulation
          const bool tensor_cores = s.m == 64 && s.n == 32 && s.k == 64 && gpu_info()->sm >= 90;
          const bool ok = tensor_cores ? fp8_close(got, want, mag, 0.0)
                                       : std::fabs(got - want) <= (s.k + 1) * 0x1p-24 * mag + 1e-30;
          if (!ok && bad++ < 5)
            FAIL_CHECK("C[" << i << ", " << j << "]: got " << got << ", want " << want);
        }
      CHECK(bad == 0);
    }
  };
  run(f8e4m3{});
  run(f8e5m2{});
}

TEST_CASE("gpu: the fp8 K-loop GEMM on the device matches a double reference of the dequantized inputs",
          "[.gpu][fp8]") {
  if (!gpu_info()) {
    WARN("no usable GPU: [.gpu] case skipped");
    return;
  }
  auto run = [](auto tag) {
    using T = decltype(tag);
    INFO((kE4<T> ? "e4m3" : "e5m2"));
    for (DotShape s : kGemmShapes) {
      INFO("M = " << s.m << ", N = " << s.n << ", K = " << s.k);
      auto a = random_codes<T>(size_t(s.m) * s.k, 3 + s.k), b = random_codes<T>(size_t(s.k) * s.n, 4 + s.n);
      std::vector<float> sa(s.m);
      for (int i = 0; i < s.m; ++i) sa[i] = std::ldexp(1.0f + float(i % 7) / 8, -(i % 5));
      const float sb = 0.0625f;
      DeviceBuffer<T> da(a), db(b);
      DeviceBuffer<float> dsa(sa);
      DeviceBuffer<bf16> dc(size_t(s.m) * s.n);
      gemm_kernel<T>()(Grid(cdiv(s.m, 64), cdiv(s.n, 64)).backend(Backend::GPU), da, db, dc, dsa, sb, s.m, s.n, s.k, 64,
                       64, 32);
      std::vector<bf16> c(size_t(s.m) * s.n);
      dc.copy_to_host(c.data(), c.size());
      int bad = 0;
      for (int i = 0; i < s.m; ++i)
        for (int j = 0; j < s.n; ++j) {
          double want = 0, mag = 0;
          for (int k = 0; k < s.k; ++k) {
            const double p = double(float(a[size_t(i) * s.k + k])) * double(float(b[size_t(k) * s.n + j]));
            want += p, mag += std::fabs(p);
          }
          want *= double(sa[i]) * sb, mag *= double(sa[i]) * sb;
          const double got = float(c[size_t(i) * s.n + j]);
          // bf16 rounding plus the accumulation bound (wgmma on sm_90a: 64x64x32 blocks, 4 warps)
          if (!fp8_close(got, want, mag, 0x1p-8) && bad++ < 5)
            FAIL_CHECK("C[" << i << ", " << j << "]: got " << got << ", want " << want);
        }
      CHECK(bad == 0);
    }
  };
  run(f8e4m3{});
  run(f8e5m2{});
}

// ==================================================================== wgmma (sm_90a)

namespace {
/// C [M, N] (f32) = A [M, K] @ B, B given as bt [N, K]: both operands contiguous along K (the form
/// wgmma reads fp8 in), through pointers; masked tails on M, N and K.
template <class T> auto& gemm_kt_kernel() {
  static auto k = jit("fp8_gemm_kt", [](Ptr<T> a, Ptr<T> bt, Ptr<float> c, Tile<int32_t> M, Tile<int32_t> N,
                                        Tile<int32_t> K, Constexpr<int> BM, Constexpr<int> BN, Constexpr<int> BK) {
    Tile<int32_t> rm = program_id(0) * BM + arange(0, BM);
    Tile<int32_t> rn = program_id(1) * BN + arange(0, BN);
    Tile<float> acc = zeros<float>({BM, BN});
    for (auto k0 : range(0, K, BK)) {
      Tile<int32_t> kk = k0 + arange(0, BK);
      Tile<T> ta = load(a + expand_dims(rm, 1) * K + expand_dims(kk, 0), expand_dims(rm < M, 1) & expand_dims(kk < K, 0));
      Tile<T> tb = load(bt + expand_dims(rn, 1) * K + expand_dims(kk, 0), expand_dims(rn < N, 1) & expand_dims(kk < K, 0));
      acc = dot(ta, trans(tb), acc);
    }
    store(c + expand_dims(rm, 1) * N + expand_dims(rn, 0), acc, expand_dims(rm < M, 1) & expand_dims(rn < N, 0));
  });
  return k;
}

/// bt [N, K] -> b [K, N].
template <class T> std::vector<T> transposed(const std::vector<T>& bt, int n, int k) {
  std::vector<T> b(bt.size());
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < k; ++i) b[size_t(i) * n + j] = bt[size_t(j) * k + i];
  return b;
}

/// Entries of C to check on the GPU: every one of a small C, else 4096 spread over it with the
/// corners and edges.
std::vector<std::pair<int, int>> sample_entries(int m, int n) {
  std::vector<std::pair<int, int>> e;
  if (int64_t(m) * n <= 16384) {
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) e.emplace_back(i, j);
    return e;
  }
  std::mt19937 g(7);
  for (int q = 0; q < 4096; ++q) e.emplace_back(int(g() % unsigned(m)), int(g() % unsigned(n)));
  for (int i : {0, m - 1})
    for (int j : {0, n - 1}) e.emplace_back(i, j);
  return e;
}

}  // namespace

TEST_CASE("fp8: the K-major GEMMs of the wgmma path (pointers, descriptors) on the test backend, exact, ragged M, N, K",
          "[fp8]") {
  // The CPU backend (and the interpreter) sum in k order exactly in f32: the reference is exact.
  for (DotShape s : {DotShape{1, 16, 16}, DotShape{17, 40, 48}, DotShape{100, 72, 160}}) {
    INFO("M = " << s.m << ", N = " << s.n << ", K = " << s.k);
    auto a = random_codes<f8e4m3>(size_t(s.m) * s.k, 5 + s.k), bt = random_codes<f8e4m3>(size_t(s.n) * s.k, 6 + s.n);
    const std::vector<float> want = dot_ref_f32(a, transposed(bt, s.n, s.k), 1.0f, s);
    std::vector<float> c(size_t(s.m) * s.n, -1.0f);
    gemm_kt_kernel<f8e4m3>()(Grid(cdiv(s.m, 32), cdiv(s.n, 32)), a.data(), bt.data(), c.data(), s.m, s.n, s.k, 32, 32,
                             32);
    int bad = 0;
    for (size_t i = 0; i < c.size(); ++i)
      if (std::bit_cast<uint32_t>(c[i]) != std::bit_cast<uint32_t>(want[i]) && bad++ < 5)
        FAIL_CHECK("pointers: C[" << i << "]: got " << c[i] << ", want " << want[i]);
    CHECK(bad == 0);
    // make_scaled_mm_fp8 (descriptors; the CPU expands them into masked loads), per-tensor scales,
    // persistent and one block per program
    const float sa = 0.5f, sb = 0.1875f;
    const TensorDescriptor<f8e4m3, 2> ta(a.data(), {s.m, s.k}, {s.k, 1}, {32, 32}), tb(bt.data(), {s.n, s.k}, {s.k, 1}, {32, 32});
    for (bool persistent : {true, false}) {
      std::vector<bf16> cb(size_t(s.m) * s.n);
      if (persistent) ex::make_scaled_mm_fp8<f8e4m3, true>()(Grid(3), ta, tb, cb.data(), sa, sb, s.m, s.n, s.k);
      else ex::make_scaled_mm_fp8<f8e4m3, false>()(Grid(cdiv(s.m, 32), cdiv(s.n, 32)), ta, tb, cb.data(), sa, sb, s.m, s.n, s.k);
      bad = 0;
      for (size_t i = 0; i < cb.size(); ++i) {
        const bf16 w(want[i] * (sa * sb));
        if (cb[i].bits != w.bits && bad++ < 5)
          FAIL_CHECK((persistent ? "persistent" : "one block") << " scaled_mm: C[" << i << "]: got " << float(cb[i])
                                                                << ", want " << float(w));
      }
      CHECK(bad == 0);
    }
    // row-wise scales (make_scaled_mm_fp8_rowwise): C = acc * sa[m] * sb[n], in that order
    std::vector<float> ra(size_t(s.m)), rb(size_t(s.n));
    for (int i = 0; i < s.m; ++i) ra[size_t(i)] = std::ldexp(1.0f + float(i % 7) / 8, -(i % 3));
    for (int j = 0; j < s.n; ++j) rb[size_t(j)] = 0.25f + float(j % 5) / 16;
    for (bool persistent : {true, false}) {
      std::vector<bf16> cb(size_t(s.m) * s.n);
      if (persistent)
        ex::make_scaled_mm_fp8_rowwise<f8e4m3, true>()(Grid(2), ta, tb, cb.data(), ra.data(), rb.data(), s.m, s.n, s.k);
      else
        ex::make_scaled_mm_fp8_rowwise<f8e4m3, false>()(Grid(cdiv(s.m, 32), cdiv(s.n, 32)), ta, tb, cb.data(), ra.data(),
                                                        rb.data(), s.m, s.n, s.k);
      bad = 0;
      for (int i = 0; i < s.m; ++i)
        for (int j = 0; j < s.n; ++j) {
          const size_t q = size_t(i) * s.n + j;
          const bf16 w(want[q] * ra[size_t(i)] * rb[size_t(j)]);
          if (cb[q].bits != w.bits && bad++ < 5)
            FAIL_CHECK("rowwise scaled_mm: C[" << i << ", " << j << "]: got " << float(cb[q]) << ", want " << float(w));
        }
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("ptx: fp8 dots on sm_90a run on wgmma.m64nNk32 from cp.async and TMA buffers, staged when not K-major",
          "[ptx][fp8][wgmma]") {
  envtest::EnvVar tma("TLE_TMA", "1");
  auto* f8 = reinterpret_cast<f8e4m3*>(uintptr_t(0x10000));
  auto* f5 = reinterpret_cast<f8e5m2*>(uintptr_t(0x10000));
  auto* cf = reinterpret_cast<float*>(uintptr_t(0x20000));
  auto* cb = reinterpret_cast<bf16*>(uintptr_t(0x30000));
  struct Cfg {
    int bm, bn, bk, warps, stages;
  };
  // Pointers, both operands K-major: pipelined by cp.async (16-byte copies) into the swizzled
  // buffers wgmma reads; e4m3 and e5m2.
  for (Cfg c : {Cfg{128, 128, 128, 4, 3}, Cfg{128, 256, 64, 8, 4}, Cfg{64, 64, 32, 4, 2}}) {
    INFO("pointers " << c.bm << "x" << c.bn << "x" << c.bk << " warps " << c.warps << " stages " << c.stages);
    Grid g(8, 8);
    g.with_warps(c.warps).with_stages(c.stages);
    const std::string p4 = gemm_kt_kernel<f8e4m3>().ptx(90, g, f8, f8, cf, 4096, 4096, 4096, c.bm, c.bn, c.bk);
    CHECK(ptxtest::count_of(p4, "k32.f32.e4m3.e4m3") >= 1);
    CHECK(ptxtest::count_of(p4, "cp.async.cg.shared.global") >= 1);
    CHECK(ptxtest::count_of(p4, "st.shared.u8") == 0);  // nothing staged byte by byte
    CHECK(p4.find("mma.sync") == std::string::npos);
    ptxtest::assemble("fp8 e4m3 K-major pointer GEMM", p4, "sm_90a");
    CHECK(ptxtest::spill_store_bytes("fp8 e4m3 K-major pointer GEMM", p4) <= 0);
    const std::string p5 = gemm_kt_kernel<f8e5m2>().ptx(90, g, f5, f5, cf, 4096, 4096, 4096, c.bm, c.bn, c.bk);
    CHECK(ptxtest::count_of(p5, "k32.f32.e5m2.e5m2") >= 1);
    ptxtest::assemble("fp8 e5m2 K-major pointer GEMM", p5, "sm_90a");
  }
  // B [K, N] contiguous along N: wgmma cannot read an 8-bit operand N-major, so b is written from
  // registers into a K-major tile each step (correct, not fast); a stays pipelined.
  {
    Grid g(8, 8);
    g.with_warps(4).with_stages(3);
    const std::string p = gemm_kernel<f8e4m3>().ptx(90, g, f8, f8, cb, cf, 1.0f, 4096, 4096, 4096, 64, 64, 64);
    CHECK(ptxtest::count_of(p, "k32.f32.e4m3.e4m3") >= 1);
    CHECK(ptxtest::count_of(p, "st.shared.u8") >= 1);  // b written K-major byte by byte (its registers run along N)
    ptxtest::assemble("fp8 GEMM with an N-major B", p, "sm_90a");
  }
  // Descriptors (make_scaled_mm_fp8, persistent and warp-specialized): TMA boxes of 128 bytes (or
  // BK) per row into the buffers.
  auto mmp = ex::make_scaled_mm_fp8<f8e4m3, true>();
  auto mm = ex::make_scaled_mm_fp8<f8e4m3, false>();
  for (Cfg c : {Cfg{128, 256, 128, 8, 4}, Cfg{128, 128, 128, 4, 3}, Cfg{64, 64, 64, 4, 2}, Cfg{128, 128, 64, 8, 1}})
    for (bool persistent : {true, false}) {
      INFO("descriptors " << c.bm << "x" << c.bn << "x" << c.bk << " warps " << c.warps << " stages " << c.stages
                          << (persistent ? " persistent" : ""));
      TensorDescriptor<f8e4m3, 2> da(f8, {4096, 4096}, {4096, 1}, {c.bm, c.bk}), db(f8, {4096, 4096}, {4096, 1}, {c.bn, c.bk});
      Grid g = persistent ? Grid(132) : Grid(4096 / c.bm, 4096 / c.bn);
      g.with_warps(c.warps).with_stages(c.stages);
      const std::string p = persistent ? mmp.ptx(90, g, da, db, cb, 1.0f, 1.0f, 4096, 4096, 4096)
                                       : mm.ptx(90, g, da, db, cb, 1.0f, 1.0f, 4096, 4096, 4096);
      if (!persistent && c.stages > 1)  // the K loop is the kernel's: a TMA producer warpgroup beside the warps
        CHECK(p.find(".reqntid " + std::to_string(32 * (c.warps + 4)) + ", 1, 1") != std::string::npos);
      CHECK(ptxtest::count_of(p, "k32.f32.e4m3.e4m3") >= 1);
      if (c.stages > 1) {
        CHECK(ptxtest::count_of(p, "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes") >= 2);
        CHECK(ptxtest::count_of(p, "cp.async.cg.shared.global") == 0);
      }
      ptxtest::assemble("fp8 scaled_mm", p, "sm_90a");
      CHECK(ptxtest::spill_store_bytes("fp8 scaled_mm", p) <= 0);
    }
  // Row-wise scales: the same main loop, two scale vectors in the epilogue (a thread of a
  // 128x256 block holds 64 columns' scales beside 128 accumulators: the warp-specialized form
  // fits, the persistent one spills there (180 bytes), so it is checked at 128x128).
  for (bool persistent : {true, false}) {
    const int64_t bn = persistent ? 128 : 256;
    INFO("rowwise, BN " << bn << (persistent ? " persistent" : " warp-specialized"));
    TensorDescriptor<f8e4m3, 2> da(f8, {4096, 4096}, {4096, 1}, {128, 128}), db(f8, {4096, 4096}, {4096, 1}, {bn, 128});
    Grid g = persistent ? Grid(132) : Grid(32, 16);
    g.with_warps(8).with_stages(4);
    const std::string p =
        persistent ? ex::make_scaled_mm_fp8_rowwise<f8e4m3, true>().ptx(90, g, da, db, cb, cf, cf, 4096, 4096, 4096)
                   : ex::make_scaled_mm_fp8_rowwise<f8e4m3, false>().ptx(90, g, da, db, cb, cf, cf, 4096, 4096, 4096);
    CHECK(ptxtest::count_of(p, "k32.f32.e4m3.e4m3") >= 1);
    ptxtest::assemble("fp8 scaled_mm rowwise", p, "sm_90a");
    CHECK(ptxtest::spill_store_bytes("fp8 scaled_mm rowwise", p) <= 0);
  }
}

TEST_CASE("gpu: fp8 GEMMs on wgmma (K-major pointers, descriptors) match a double reference, ragged shapes",
          "[.gpu][fp8]") {
  if (!gpu_info()) {
    WARN("no usable GPU: [.gpu] case skipped");
    return;
  }
  struct Cfg {
    int bm, bn, bk, warps, stages;
  };
  struct Shape {
    int m, n, k;
  };
  auto mmp = ex::make_scaled_mm_fp8<f8e4m3, true>();
  auto mm = ex::make_scaled_mm_fp8<f8e4m3, false>();
  auto mmr = ex::make_scaled_mm_fp8_rowwise<f8e4m3, true>();
  auto mmr1 = ex::make_scaled_mm_fp8_rowwise<f8e4m3, false>();
  for (Shape s : {Shape{1, 16, 32}, Shape{17, 40, 48}, Shape{129, 200, 1024}, Shape{1000, 1000, 4096}}) {
    auto a = random_codes<f8e4m3>(size_t(s.m) * s.k, 9 + s.k), bt = random_codes<f8e4m3>(size_t(s.n) * s.k, 10 + s.n);
    DeviceBuffer<f8e4m3> da(a), dbt(bt);
    DeviceBuffer<float> dc(size_t(s.m) * s.n);
    DeviceBuffer<bf16> dcb(size_t(s.m) * s.n);
    const float sa = 0.5f, sb = 0.1875f;
    const auto entries = sample_entries(s.m, s.n);
    std::vector<float> ra(size_t(s.m)), rb(size_t(s.n));  // row-wise scales
    for (int i = 0; i < s.m; ++i) ra[size_t(i)] = 0.5f + float(i % 7) / 8;
    for (int j = 0; j < s.n; ++j) rb[size_t(j)] = 1.0f + float(j % 5) / 8;
    DeviceBuffer<float> dra(ra), drb(rb);
    // scale < 0: entry (i, j) has the row-wise scale ra[i] * rb[j]
    auto check = [&](const std::vector<double>& got, double scale, double out_rel, const char* what) {
      int bad = 0;
      for (size_t q = 0; q < entries.size(); ++q) {
        auto [i, j] = entries[q];
        double want = 0, mag = 0;
        for (int k = 0; k < s.k; ++k) {
          const double p = double(float(a[size_t(i) * s.k + k])) * double(float(bt[size_t(j) * s.k + k]));
          want += p, mag += std::fabs(p);
        }
        const double sc = scale < 0 ? double(ra[size_t(i)]) * rb[size_t(j)] : scale;
        if (!fp8_close(got[q], want * sc, mag * sc, out_rel) && bad++ < 5)
          FAIL_CHECK(what << ": C[" << i << ", " << j << "]: got " << got[q] << ", want " << want * sc);
      }
      CHECK(bad == 0);
    };
    for (Cfg c : {Cfg{128, 256, 128, 8, 4}, Cfg{128, 128, 128, 4, 3}, Cfg{64, 64, 64, 4, 2}, Cfg{128, 128, 64, 8, 1}}) {
      INFO("M = " << s.m << ", N = " << s.n << ", K = " << s.k << "; " << c.bm << "x" << c.bn << "x" << c.bk
                  << " warps " << c.warps << " stages " << c.stages);
      Grid g(cdiv(s.m, c.bm), cdiv(s.n, c.bn));
      g.with_warps(c.warps).with_stages(c.stages).backend(Backend::GPU);
      gemm_kt_kernel<f8e4m3>()(g, da, dbt, dc, s.m, s.n, s.k, c.bm, c.bn, c.bk);
      std::vector<float> hc(size_t(s.m) * s.n);
      dc.copy_to_host(hc.data(), hc.size());
      std::vector<double> got;
      for (auto [i, j] : entries) got.push_back(hc[size_t(i) * s.n + j]);
      check(got, 1.0, 0.0, "pointers");
      for (bool rowwise : {false, true})
        for (bool persistent : {true, false}) {
          Grid gp = persistent ? Grid(7) : Grid(cdiv(s.m, c.bm), cdiv(s.n, c.bn));
          gp.with_warps(c.warps).with_stages(c.stages).backend(Backend::GPU);
          const TensorDescriptor<f8e4m3, 2> ta(da, {s.m, s.k}, {s.k, 1}, {c.bm, c.bk}),
              tb(dbt, {s.n, s.k}, {s.k, 1}, {c.bn, c.bk});
          dcb.fill_zero();
          if (rowwise && persistent) mmr(gp, ta, tb, dcb, dra, drb, s.m, s.n, s.k);
          else if (rowwise) mmr1(gp, ta, tb, dcb, dra, drb, s.m, s.n, s.k);
          else if (persistent) mmp(gp, ta, tb, dcb, sa, sb, s.m, s.n, s.k);
          else mm(gp, ta, tb, dcb, sa, sb, s.m, s.n, s.k);
          std::vector<bf16> hb(size_t(s.m) * s.n);
          dcb.copy_to_host(hb.data(), hb.size());
          got.clear();
          for (auto [i, j] : entries) got.push_back(float(hb[size_t(i) * s.n + j]));
          const std::string what = std::string(rowwise ? "row-wise " : "") + "scaled_mm " +
                                   (persistent ? "persistent" : "one block per program");
          check(got, rowwise ? -1.0 : double(sa) * sb, 0x1p-8, what.c_str());
        }
    }
  }
}

TEST_CASE("fp8: DLPack has no fp8 codes in the installed header: an fp8 parameter refuses a DLPack tensor", "[fp8]") {
  // /usr/include/dlpack/dlpack.h (Debian's DLPack 0.6) stops at kDLComplex = 5 (no kDLFloat8_*),
  // so a tensor cannot say it holds fp8: whatever it says, tle refuses it for an fp8 pointer.
  static auto k = jit("fp8_dl", [](Ptr<f8e4m3> x, Ptr<float> out) {
    store(out + arange(0, 4), cast<float>(load(x + arange(0, 4))));
  });
  std::vector<uint8_t> data(4, 0x38);
  std::vector<float> out(4);
  int64_t shape[1] = {4};
  DLTensor t{};
  t.data = data.data(), t.device = DLDevice{kDLCPU, 0}, t.ndim = 1, t.dtype = DLDataType{kDLUInt, 8, 1};
  t.shape = shape;
  int line = __LINE__ + 1;
  errtest::expect_user_error([&] { k(Grid(1).backend(Backend::CPU), &t, out.data()); },
                             {"no fp8 type codes", "tle::f8e4m3 pointer"}, "test_fp8.cpp", line);
  // The documented way: the data pointer as an fp8 pointer.
  k(Grid(1).backend(Backend::CPU), reinterpret_cast<f8e4m3*>(t.data), out.data());
  CHECK(out == std::vector<float>(4, 1.0f));
}

// ==================================================================== PTX

TEST_CASE("ptx: fp8 conversions use cvt ...e4m3x2 / e5m2x2 on sm_89 and sm_90a, integer code on sm_80", "[ptx][fp8]") {
  auto fake = [](uintptr_t a) { return reinterpret_cast<void*>(a); };
  auto* xf = static_cast<float*>(fake(0x10000));
  auto* of = static_cast<float*>(fake(0x20000));
  auto* x4 = static_cast<f8e4m3*>(fake(0x30000));
  auto* x5 = static_cast<f8e5m2*>(fake(0x40000));
  for (int sm : {90, 89, 80}) {
    const std::string arch = sm == 90 ? "sm_90a" : "sm_" + std::to_string(sm);
    INFO(arch);
    const std::string to4 = to_fp8_kernel<f8e4m3>().ptx(sm, 4, xf, x4, 1001, 1024);
    const std::string to5 = to_fp8_kernel<f8e5m2>().ptx(sm, 4, xf, x5, 1001, 17);
    const std::string from4 = from_fp8_kernel<f8e4m3>().ptx(sm, 4, x4, of, 1001, 1024);
    const std::string from5 = from_fp8_kernel<f8e5m2>().ptx(sm, 4, x5, of, 1001, 17);
    const bool hw = sm >= 89;
    CHECK((to4.find("cvt.rn.satfinite.e4m3x2.f32") != std::string::npos) == hw);
    CHECK((to5.find("cvt.rn.satfinite.e5m2x2.f32") != std::string::npos) == hw);
    CHECK((from4.find("cvt.rn.f16x2.e4m3x2") != std::string::npos) == hw);
    CHECK((from5.find("cvt.rn.f16x2.e5m2x2") != std::string::npos) == hw);
    ptxtest::assemble("fp8 f32->e4m3", to4, arch);
    ptxtest::assemble("fp8 f32->e5m2", to5, arch);
    ptxtest::assemble("fp8 e4m3->f32", from4, arch);
    ptxtest::assemble("fp8 e5m2->f32", from5, arch);
  }
}

// ==================================================================== GPU

TEST_CASE("gpu: fp8 conversions on the device match the reference bit for bit", "[.gpu][fp8]") {
  if (!gpu_info()) {
    WARN("no usable GPU: [.gpu] case skipped");
    return;
  }
  auto run = [](auto tag) {
    using T = decltype(tag);
    constexpr bool e4 = kE4<T>;
    INFO((e4 ? "e4m3" : "e5m2"));
    const std::vector<float> in = rounding_cases(e4);
    for (auto [n, b] : shapes(int(in.size()))) {
      INFO("n = " << n << ", block = " << b);
      DeviceBuffer<float> din(std::vector<float>(in.begin(), in.begin() + n));
      DeviceBuffer<T> dout(n);
      to_fp8_kernel<T>()(Grid(cdiv(n, b)).backend(Backend::GPU), din, dout, n, b);
      std::vector<T> out(n);
      dout.copy_to_host(out.data(), n);
      check_codes(std::vector<float>(in.begin(), in.begin() + n), out.data(), e4, "gpu f32 -> fp8");
    }
    std::vector<T> codes(256);
    for (int c = 0; c < 256; ++c) codes[c] = T::from_bits(uint8_t(c));
    DeviceBuffer<T> dc(codes);
    DeviceBuffer<float> df(256);
    from_fp8_kernel<T>()(Grid(cdiv(256, 17)).backend(Backend::GPU), dc, df, 256, 17);
    std::vector<float> f(256);
    df.copy_to_host(f.data(), 256);
    for (int c = 0; c < 256; ++c) {
      INFO("code " << hex(uint32_t(c)));
      CHECK(hex(std::bit_cast<uint32_t>(f[c])) == hex(ref_f32_bits(uint8_t(c), e4)));
    }
  };
  run(f8e4m3{});
  run(f8e5m2{});
  // every f16 and bf16 pattern
  std::vector<f16> h(65536);
  std::vector<bf16> bh(65536);
  for (int i = 0; i < 65536; ++i) h[i] = f16::from_bits(uint16_t(i)), bh[i] = bf16::from_bits(uint16_t(i));
  DeviceBuffer<f16> dh(h);
  DeviceBuffer<bf16> dbh(bh);
  DeviceBuffer<f8e4m3> o4(65536);
  DeviceBuffer<f8e5m2> o5(65536);
  std::vector<f8e4m3> g4(65536);
  std::vector<f8e5m2> g5(65536);
  half_to_fp8_kernel<f16>()(Grid(64).backend(Backend::GPU), dh, o4, o5, 65536, 1024);
  o4.copy_to_host(g4.data(), 65536), o5.copy_to_host(g5.data(), 65536);
  check_codes(h, g4.data(), true, "gpu f16 -> e4m3");
  check_codes(h, g5.data(), false, "gpu f16 -> e5m2");
  half_to_fp8_kernel<bf16>()(Grid(66).backend(Backend::GPU), dbh, o4, o5, 65536, 1001);
  o4.copy_to_host(g4.data(), 65536), o5.copy_to_host(g5.data(), 65536);
  check_codes(bh, g4.data(), true, "gpu bf16 -> e4m3");
  check_codes(bh, g5.data(), false, "gpu bf16 -> e5m2");
}
