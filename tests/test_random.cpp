// tests/test_random.cpp - in-kernel random numbers (tle/random.hpp): a plain C++ Philox4x32-10
// checked against the Random123 known-answer vectors, the kernels' bits against it (seeds of
// several widths and signs, ragged offsets), uniform and normal statistics over 1e5 draws. [ops]
// tests are mirrored on the GPU (ops_util.hpp).
#include <array>
#include <cmath>
#include <cstring>

#include "ops_util.hpp"
#include "ptxas_util.hpp"

using namespace tle;
using namespace opstest;

namespace {

using Words = std::array<uint32_t, 4>;

/// Philox4x32-10 (Salmon et al., SC'11, Random123's philox4x32 with R = 10), written from the
/// paper: the round function and the Weyl key schedule.
Words philox_ref(Words c, uint32_t k0, uint32_t k1) {
  for (int r = 0; r < 10; ++r) {
    if (r) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    const uint64_t p0 = uint64_t(0xD2511F53u) * c[0], p1 = uint64_t(0xCD9E8D57u) * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k0, uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k1, uint32_t(p0)};
  }
  return c;
}

/// Triton's seed mapping: the seed as u64 (signed seeds sign-extend), key = (low, high) halves.
Words randint4x_ref(int64_t seed, int32_t offset) {
  const uint64_t s = static_cast<uint64_t>(seed);
  return philox_ref({static_cast<uint32_t>(offset), 0, 0, 0}, uint32_t(s), uint32_t(s >> 32));
}

/// Triton's uint32_to_uniform_float.
float uniform_ref(uint32_t bits) {
  int32_t x;
  std::memcpy(&x, &bits, 4);
  if (x < 0) x = ~x;  // -x - 1
  return static_cast<float>(x) * 4.656613e-10f;
}

float normal_ref(uint32_t b1, uint32_t b2) {
  const float u1 = std::max(uniform_ref(b1), 1.0e-7f), u2 = uniform_ref(b2);
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.283185307179586f * u2);
}

}  // namespace

TEST_CASE("random: the C++ Philox4x32-10 reference matches Random123's known answers", "[ops]") {
  // Random123 tests/kat_vectors, the three "philox4x32 10" lines: counter[4] key[2] -> result[4].
  CHECK(philox_ref({0, 0, 0, 0}, 0, 0) == Words{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  CHECK(philox_ref({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, 0xffffffff, 0xffffffff) ==
        Words{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  CHECK(philox_ref({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, 0xa4093822, 0x299f31d0) ==
        Words{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST_CASE("random: philox in a kernel gives Random123's known answers", "[ops]") {
  auto k = jit("philox_kat", [](Ptr<uint32_t> ctr, Ptr<uint32_t> out, Tile<uint64_t> seed) {
    Tile<int32_t> i = arange(0, 1);
    auto [r0, r1, r2, r3] = philox(seed, load(ctr + i), load(ctr + 1 + i), load(ctr + 2 + i), load(ctr + 3 + i));
    store(out + i, r0);
    store(out + 1 + i, r1);
    store(out + 2 + i, r2);
    store(out + 3 + i, r3);
  });
  struct Kat {
    Words ctr;
    uint64_t key;  // (high << 32) | low, the seed that gives key (low, high)
    Words want;
  };
  for (const Kat& t : {Kat{{0, 0, 0, 0}, 0, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
                       Kat{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, ~uint64_t(0),
                           {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
                       Kat{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, 0x299f31d0a4093822ull,
                           {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}}) {
    Buf<uint32_t> ctr(4), out(4);
    for (int c = 0; c < 4; ++c) ctr[c] = t.ctr[size_t(c)];
    k(Grid(1), ctr.data(), out.data(), t.key);
    CHECK(diffs(out, std::vector<uint32_t>(t.want.begin(), t.want.end())) == "");
  }
}

TEST_CASE("random: randint4x, randint, rand and randn match the reference on ragged offsets", "[ops]") {
  auto k = jit("random_draws", [](Ptr<int32_t> offs, Ptr<uint32_t> bits, Ptr<float> u, Ptr<float> g,
                                  Tile<int32_t> seed32, Tile<int64_t> seed64, Tile<uint64_t> seedu, Tile<int32_t> n,
                                  Constexpr<int> BLOCK) {
    Tile<int32_t> i = arange(0, BLOCK);
    Tile<bool> m = i < n;
    Tile<int32_t> o = load(offs + i, m, 0);
    auto [r0, r1, r2, r3] = randint4x(seed64, o);
    store(bits + i, r0, m);
    store(bits + n + i, r1, m);
    store(bits + 2 * n + i, r2, m);
    store(bits + 3 * n + i, r3, m);
    store(bits + 4 * n + i, randint(seed32, o), m);
    store(bits + 5 * n + i, randint(seedu, bitcast<uint32_t>(o)), m);
    store(bits + 6 * n + i, randint(42, o), m);
    store(u + i, rand(seed32, o), m);
    store(u + n + i, rand(seedu, o), m);
    store(g + i, randn(seed64, o), m);
    store(g + n + i, randn(seed32, o), m);
  });
  const int32_t s32 = -7;  // sign-extends: key (0xfffffff9, 0xffffffff)
  const int64_t s64 = 0x0123456789abcdefll;
  const uint64_t su = 0xfedcba9876543210ull;
  for (int n : {1, 17, 1001}) {
    CAPTURE(n);
    Buf<int32_t> offs = random_full<int32_t>(size_t(n), 51);
    offs[0] = 0;
    if (n > 2) offs[1] = -1, offs[2] = INT32_MAX;
    std::vector<uint32_t> wb(7 * size_t(n));
    std::vector<float> wu(2 * size_t(n)), wg(2 * size_t(n));
    for (int j = 0; j < n; ++j) {
      const size_t t = size_t(j);
      Words a = randint4x_ref(s64, offs[t]);
      for (int c = 0; c < 4; ++c) wb[size_t(c) * n + t] = a[size_t(c)];
      Words b = randint4x_ref(s32, offs[t]), d = randint4x_ref(static_cast<int64_t>(su), offs[t]);
      wb[4 * size_t(n) + t] = b[0];
      wb[5 * size_t(n) + t] = d[0];
      wb[6 * size_t(n) + t] = randint4x_ref(42, offs[t])[0];
      wu[t] = uniform_ref(b[0]);
      wu[size_t(n) + t] = uniform_ref(d[0]);
      wg[t] = normal_ref(a[0], a[1]);
      wg[size_t(n) + t] = normal_ref(b[0], b[1]);
    }
    Buf<uint32_t> bits(wb.size());
    Buf<float> u(wu.size()), g(wg.size());
    k(Grid(1), offs.data(), bits.data(), u.data(), g.data(), s32, s64, su, n, n);
    CHECK(diffs(bits, wb) == "");
    CHECK(diffs(u, wu) == "");                // integer bits, one conversion, an exact product
    CHECK(diffs(g, wg, 2e-6, 2e-6) == "");  // f32 log, sqrt, cos: the backend's math library
  }
}

TEST_CASE("random: 1e5 uniform and normal draws have the expected moments", "[ops]") {
  auto k = jit("random_stats", [](Ptr<float> u, Ptr<float> g, Tile<int64_t> seed, Tile<int32_t> n,
                                  Constexpr<int> BLOCK) {
    Tile<int32_t> o = program_id(0) * BLOCK + arange(0, BLOCK);
    store(u + o, rand(seed, o), o < n);
    store(g + o, randn(seed, o), o < n);
  });
  const int n = 100000;
  Buf<float> u(n), g(n);
  k(Grid(cdiv(n, 1024)), u.data(), g.data(), int64_t(20260801), n, 1024);
  double su = 0, su2 = 0, sg = 0, sg2 = 0;
  int bad_u = 0, bad_g = 0, mismatched = 0;
  for (int i = 0; i < n; ++i) {
    su += u[i], su2 += double(u[i]) * u[i], sg += g[i], sg2 += double(g[i]) * g[i];
    bad_u += !(u[i] >= 0.f && u[i] <= 1.f);
    bad_g += !(std::fabs(g[i]) <= 5.7f);
    mismatched += u[i] != uniform_ref(randint4x_ref(20260801, i)[0]);
  }
  CHECK(bad_u == 0);
  CHECK(bad_g == 0);
  CHECK(mismatched == 0);
  const double mu = su / n, vu = su2 / n - mu * mu, mg = sg / n, vg = sg2 / n - mg * mg;
  // Standard errors at n = 1e5: mean(U) 0.0009, var(U) 0.0002, mean(N) 0.0032, var(N) 0.0045;
  // the bounds are 5 to 7 of them (and the seed is fixed: the draws are the same on every run).
  CHECK(std::fabs(mu - 0.5) < 0.005);
  CHECK(std::fabs(vu - 1.0 / 12) < 0.0015);
  CHECK(std::fabs(mg) < 0.02);
  CHECK(std::fabs(vg - 1.0) < 0.03);
}

TEST_CASE("ptx: random numbers assemble, the multiply-high as mul.hi.u32", "[ptx]") {
  auto k = jit("random_ptx", [](Ptr<uint32_t> bits, Ptr<float> u, Tile<int64_t> seed, Constexpr<int> BLOCK) {
    Tile<int32_t> o = program_id(0) * BLOCK + arange(0, BLOCK);
    store(bits + o, randint(seed, o));
    store(u + o, randn(seed, o));
  });
  for (int warps : {1, 4, 8}) {
    CAPTURE(warps);
    std::string ptx = k.ptx(90, warps, reinterpret_cast<uint32_t*>(uintptr_t(0x10000)),
                            reinterpret_cast<float*>(uintptr_t(0x10000)), int64_t(1), 1024);
    // the multiply-highs (2 per round) are 32-bit mul.hi instructions, not 64-bit products
    CHECK(ptx.find("mul.hi.u32") != std::string::npos);
    CHECK(ptx.find("mul.lo.s64") == std::string::npos);
    ptxtest::assemble("random_ptx", ptx, "sm_90a");
  }
}
