// tests/test_ops.cpp - CPU numerical tests through the public API, part 1: program ids, creation,
// load/store, elementwise arithmetic (broadcasting, promotion, scalars), comparisons, logical and
// bitwise ops, where, casts and bitcasts. Every kernel's output is compared with plain C++.
#include "ops_util.hpp"

using namespace tle;
using namespace opstest;

// Fixed ragged tile sizes of the tests below (the GPU pads them: src/passes/gpu/pad_shapes.cpp).
static const int N17 = 17, N33 = 33;

// ============================================================ program_id / num_programs

TEST_CASE("ops: program_id and num_programs on 3 axes", "[ops]") {
  auto k = jit("pid3", [](Ptr<int32_t> out) {
    Tile<int32_t> x = program_id(0), y = program_id(1), z = program_id(2);
    Tile<int32_t> nx = num_programs(0), ny = num_programs(1), nz = num_programs(2);
    Tile<int32_t> base = ((z * ny + y) * nx + x) * 6;
    store(out + base + 0, x);
    store(out + base + 1, y);
    store(out + base + 2, z);
    store(out + base + 3, nx);
    store(out + base + 4, ny);
    store(out + base + 5, nz);
  });
  struct G { int x, y, z; };
  for (G g : {G{2, 3, 4}, G{1, 1, 1}, G{17, 1, 3}, G{1001, 1, 1}, G{1, 5, 1}}) {
    CAPTURE(g.x, g.y, g.z);
    size_t n = size_t(g.x) * g.y * g.z;
    Buf<int32_t> out(n * 6, -1);
    std::vector<int32_t> want(n * 6);
    for (int z = 0; z < g.z; ++z)
      for (int y = 0; y < g.y; ++y)
        for (int x = 0; x < g.x; ++x) {
          size_t b = ((size_t(z) * g.y + y) * g.x + x) * 6;
          want[b] = x, want[b + 1] = y, want[b + 2] = z, want[b + 3] = g.x, want[b + 4] = g.y, want[b + 5] = g.z;
        }
    k(Grid(g.x, g.y, g.z), out.data());
    CHECK(diffs(out, want) == "");
  }
}

// ============================================================ arange / full / zeros

TEST_CASE("ops: arange with any bounds", "[ops]") {
  auto k = jit("arange", [](Ptr<int32_t> out, Constexpr<int> START, Constexpr<int> END) {
    store(out + arange(0, END - START), arange(START, END));
  });
  struct R { int s, e; };
  for (R r : {R{0, 1}, R{0, 17}, R{-3, 14}, R{5, 1006}, R{-1001, 0}, R{1000000, 1000017}}) {
    CAPTURE(r.s, r.e);
    Buf<int32_t> out(size_t(r.e - r.s), -7);
    std::vector<int32_t> want;
    for (int i = r.s; i < r.e; ++i) want.push_back(i);
    k(Grid(1), out.data(), r.s, r.e);
    CHECK(diffs(out, want) == "");
  }
}

template <class T> void full_case(T value) {
  auto k = jit("full", [](Ptr<T> out, Tile<T> v, Constexpr<int> M, Constexpr<int> N) {
    Tile<int32_t> i = expand_dims(arange(0, M), 1), j = expand_dims(arange(0, N), 0);
    Ptr<T> p = out + i * N + j;
    Tile<T> f = full<T>({M, N}, v);
    CHECK(f.shape() == Shape{M, N});
    store(p, f);
    Tile<T> z = zeros<T>({M, N});
    store(p + M * N, z);
    Tile<T> s = full<T>({N}, v);  // 1-D, broadcast against the 2-D pointers by store
    store(p + 2 * M * N, s);
  });
  for (auto [m0_, n0_] : {std::pair{1, 1}, std::pair{17, 3}, std::pair{1, 1001}, std::pair{33, 17}}) {
    const int m = m0_, n = n0_;
    CAPTURE(m, n);
    size_t cnt = size_t(m) * n;
    Buf<T> out(cnt * 3);
    std::vector<T> want(cnt * 3);
    for (size_t i = 0; i < cnt; ++i) want[i] = value, want[cnt + i] = from_d<T>(0), want[2 * cnt + i] = value;
    for (size_t i = 0; i < out.size(); ++i) out[i] = from_d<T>(std::is_same_v<T, bool> ? 0 : 99);
    k(Grid(1), out.data(), value, m, n);
    CHECK(diffs(out, want) == "");
  }
}

TEST_CASE("ops: full and zeros across dtypes", "[ops]") {
  full_case<float>(-2.5f);
  full_case<double>(1e300);
  full_case<f16>(f16(3.140625));
  full_case<bf16>(bf16(-0.75));
  full_case<int8_t>(-128);
  full_case<int16_t>(12345);
  full_case<int32_t>(-7);
  full_case<int64_t>(int64_t(1) << 40);
  full_case<uint8_t>(255);
  full_case<uint32_t>(4000000000u);
  full_case<bool>(true);
}

TEST_CASE("ops: full with a C++ literal and a scalar tile", "[ops]") {
  auto k = jit("full_lit", [](Ptr<float> out, Ptr<int64_t> out2, Tile<float> s) {
    Tile<int32_t> i = arange(0, N17);
    store(out + i, full<float>({N17}, 0.5f));
    store(out + N17 + i, full<float>({N17}, s * 2.0f));
    store(out2 + i, full<int64_t>({N17}, -5000000000LL));
  });
  Buf<float> out((2 * N17));
  Buf<int64_t> out2(N17);
  k(Grid(1), out.data(), out2.data(), 1.25f);
  std::vector<float> want((2 * N17), 0.5f);
  for (int i = N17; i < (2 * N17); ++i) want[i] = 2.5f;
  CHECK(diffs(out, want) == "");
  CHECK(diffs(out2, std::vector<int64_t>(N17, -5000000000LL)) == "");
}

// ============================================================ load / store

template <class T> void load_store_case(T other_value, unsigned seed) {
  // out1: unmasked store of a masked load (masked lanes get `other`);
  // out2: masked store (lanes past n untouched); out3: masked load with no other (0), with hints.
  auto k = jit("ldst", [](Ptr<T> x, Ptr<T> out1, Ptr<T> out2, Ptr<T> out3, Tile<int32_t> n, Tile<T> other,
                          Constexpr<int> BLOCK) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> m = offs < n;
    Tile<T> v = load(x + offs, m, other);
    store(out1 + offs, v);
    store(out2 + offs, load(x + offs, m), m);
    Tile<T> h = load(x + offs, m, other, MemHints{".cg", "", false});
    Tile<T> h1 = load(x + offs, m, other, MemHints{"", "evict_last", false});
    Tile<T> h2 = load(x + offs, m, other, MemHints{"", "", true});
    store(out3 + offs, where(m, h, h2), m, MemHints{".cs", "", false});
    store(out3 + offs, h1, m, MemHints{"", "evict_first", false});  // the same values again
    store(out3 + offs, load(x + offs, m), !m, MemHints{".wt", "", false});  // writes 0 past n
  });
  for (int n : kSizes) {
    for (int block : {16, 256}) {
      CAPTURE(n, block);
      int grid = int(cdiv(n, block));
      size_t cap = size_t(grid) * block;
      Buf<T> x = random_buf<T>(cap, seed + n, -100, 100);
      T sentinel = std::is_same_v<T, bool> ? T(true) : from_d<T>(42);
      Buf<T> out1(cap, sentinel), out2(cap, sentinel), out3(cap, sentinel);
      std::vector<T> w1(cap), w2(cap), w3(cap);
      for (size_t i = 0; i < cap; ++i) {
        bool in = int(i) < n;
        w1[i] = in ? x[i] : other_value;
        w2[i] = in ? x[i] : sentinel;
        w3[i] = in ? x[i] : from_d<T>(0);
      }
      k(Grid(grid), x.data(), out1.data(), out2.data(), out3.data(), n, other_value, block);
      CHECK(diffs(out1, w1) == "");
      CHECK(diffs(out2, w2) == "");
      CHECK(diffs(out3, w3) == "");
    }
  }
}

TEST_CASE("ops: load/store with mask, other and cache hints across dtypes", "[ops]") {
  load_store_case<float>(-1.5f, 1);
  load_store_case<double>(7.25, 2);
  load_store_case<f16>(f16(-3.0), 3);
  load_store_case<bf16>(bf16(9.0), 4);
  load_store_case<int8_t>(-7, 5);
  load_store_case<int16_t>(-300, 6);
  load_store_case<int32_t>(123456, 7);
  load_store_case<int64_t>(-(int64_t(1) << 50), 8);
  load_store_case<uint8_t>(200, 9);
  load_store_case<uint32_t>(3000000000u, 10);
  load_store_case<bool>(true, 11);
}

TEST_CASE("ops: 2-D masked load with a literal other, broadcast mask, scalar store", "[ops]") {
  // x is an R x C row-major matrix; one program loads a BM x BN block with masks from rows and cols.
  auto k = jit("ld2d", [](Ptr<float> x, Ptr<float> out, Ptr<float> out_s, Tile<int32_t> R, Tile<int32_t> C,
                          Constexpr<int> BM, Constexpr<int> BN) {
    Tile<int32_t> r = expand_dims(arange(0, BM), 1), c = expand_dims(arange(0, BN), 0);
    Tile<bool> m = (r < R) & (c < C);
    Tile<float> v = load(x + r * C + c, m, -INFINITY);
    store(out + r * BN + c, v);
    // a scalar value stored through a tile of pointers (broadcast), under a row mask only
    store(out_s + r * BN + c, 3.0f, r < R);
  });
  struct S { int R, C, BM, BN; };
  for (S s : {S{1, 1, 1, 1}, S{17, 17, 32, 32}, S{5, 1001, 8, 1024}, S{17, 3, 17, 3}}) {
    CAPTURE(s.R, s.C, s.BM, s.BN);
    Buf<float> x = random_buf<float>(size_t(s.R) * s.C, 77);
    Buf<float> out(size_t(s.BM) * s.BN, 5.f), out_s(size_t(s.BM) * s.BN, 5.f);
    std::vector<float> w(out.size()), ws(out.size());
    for (int r = 0; r < s.BM; ++r)
      for (int c = 0; c < s.BN; ++c) {
        w[size_t(r) * s.BN + c] = (r < s.R && c < s.C) ? x[size_t(r) * s.C + c] : -INFINITY;
        ws[size_t(r) * s.BN + c] = r < s.R ? 3.f : 5.f;
      }
    k(Grid(1), x.data(), out.data(), out_s.data(), s.R, s.C, s.BM, s.BN);
    CHECK(diffs(out, w) == "");
    CHECK(diffs(out_s, ws) == "");
  }
}

TEST_CASE("ops: gather/scatter through computed pointers", "[ops]") {
  // out[perm[i]] = x[idx[i]] with idx/perm loaded from memory (i64 and u8 offsets).
  auto k = jit("gather", [](Ptr<float> x, Ptr<int64_t> idx, Ptr<uint8_t> perm, Ptr<float> out, Tile<int32_t> n,
                            Constexpr<int> BLOCK) {
    Tile<int32_t> i = arange(0, BLOCK);
    Tile<bool> m = i < n;
    Tile<int64_t> src = load(idx + i, m);
    Tile<uint8_t> dst = load(perm + i, m);
    store(out + dst, load(x + src, m), m);
  });
  for (int n : {1, 17, 200}) {
    CAPTURE(n);
    Buf<float> x = random_buf<float>(1000, 3);
    Buf<int64_t> idx = random_buf<int64_t>(n, 4, 0, 999);
    Buf<uint8_t> perm(n);
    for (int i = 0; i < n; ++i) perm[i] = uint8_t((i * 37 + 11) % n);  // a permutation when gcd(37, n) == 1
    Buf<float> out(n, 0.f);
    std::vector<float> want(n);
    for (int i = 0; i < n; ++i) want[perm[i]] = x[idx[i]];
    k(Grid(1), x.data(), idx.data(), perm.data(), out.data(), n, 256);
    CHECK(diffs(out, want) == "");
  }
}

// ============================================================ arithmetic

template <class T> T ref_arith(int op, T a, T b) {
  if constexpr (is_half_v<T>) {
    float x = a, y = b;
    float r = op == 0 ? x + y : op == 1 ? x - y : op == 2 ? x * y : x / y;
    return T(r);
  } else if constexpr (std::is_floating_point_v<T>) {
    return op == 0 ? a + b : op == 1 ? a - b : op == 2 ? a * b : a / b;
  } else {
    uint64_t x = static_cast<uint64_t>(static_cast<int64_t>(a)), y = static_cast<uint64_t>(static_cast<int64_t>(b));
    if constexpr (std::is_unsigned_v<T>) x = uint64_t(a), y = uint64_t(b);
    switch (op) {
      case 0: return static_cast<T>(x + y);
      case 1: return static_cast<T>(x - y);
      case 2: return static_cast<T>(x * y);
      case 3:
        if (b == 0) return 0;
        if constexpr (std::is_signed_v<T>)
          if (a == std::numeric_limits<T>::min() && b == -1) return a;
        return static_cast<T>(a / b);
      default:
        if (b == 0) return a;
        if constexpr (std::is_signed_v<T>)
          if (b == -1) return 0;
        return static_cast<T>(a % b);
    }
  }
}

template <class T> auto make_arith2d() {
  return jit("arith2d", [](Ptr<T> a, Ptr<T> b, Ptr<T> out, Constexpr<int> M, Constexpr<int> N) {
    Tile<int32_t> i = arange(0, M), j = arange(0, N);
    Tile<T> col = expand_dims(load(a + i), 1);  // [M, 1]
    Tile<T> row = expand_dims(load(b + j), 0);  // [1, N]
    Tile<int32_t> o = expand_dims(i, 1) * N + expand_dims(j, 0);
    const int MN = M * N;
    Tile<T> s = col + row;
    CHECK(s.shape() == Shape{M, N});
    store(out + o, s);
    store(out + MN + o, col - row);
    store(out + 2 * MN + o, col * row);
    store(out + 3 * MN + o, col / row);
    if constexpr (std::is_integral_v<T>) store(out + 4 * MN + o, col % row);
  });
}

template <class T> void arith2d_case(unsigned seed) {
  auto k = make_arith2d<T>();
  const int nops = std::is_integral_v<T> ? 5 : 4;
  for (auto [m0_, n0_] : {std::pair{1, 1}, std::pair{17, 1}, std::pair{1, 17}, std::pair{17, 33}, std::pair{3, 1001}}) {
    const int m = m0_, n = n0_;
    CAPTURE(m, n);
    Buf<T> a, b;
    if constexpr (std::is_integral_v<T>) {
      a = random_full<T>(m, seed), b = random_full<T>(n, seed + 1);
      // small divisors, zero and -1 so that division and remainder cover their special cases
      for (int j = 0; j < n; j += 3) b[j] = static_cast<T>(j % 9 == 0 ? 0 : (j % 9 == 3 ? T(-1) : T(j % 7 + 1)));
      if (m > 1) a[0] = std::numeric_limits<T>::min();
      if (m > 2) a[1] = std::numeric_limits<T>::max();
    } else {
      a = random_buf<T>(m, seed, -10, 10), b = random_buf<T>(n, seed + 1, -10, 10);
    }
    size_t mn = size_t(m) * n;
    Buf<T> out(mn * nops);
    std::vector<T> want(mn * nops);
    for (int op = 0; op < nops; ++op)
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) want[op * mn + size_t(i) * n + j] = ref_arith<T>(op, a[i], b[j]);
    k(Grid(1), a.data(), b.data(), out.data(), m, n);
    CHECK(diffs(out, want) == "");
  }
}

TEST_CASE("ops: + - * / % with row/column broadcasting across dtypes", "[ops]") {
  SECTION("f32") { arith2d_case<float>(10); }
  SECTION("f64") { arith2d_case<double>(11); }
  SECTION("f16") { arith2d_case<f16>(12); }
  SECTION("bf16") { arith2d_case<bf16>(13); }
  SECTION("i8") { arith2d_case<int8_t>(14); }
  SECTION("i16") { arith2d_case<int16_t>(15); }
  SECTION("i32") { arith2d_case<int32_t>(16); }
  SECTION("i64") { arith2d_case<int64_t>(17); }
  SECTION("u8") { arith2d_case<uint8_t>(18); }
  SECTION("u32") { arith2d_case<uint32_t>(19); }
}

TEST_CASE("ops: 1-D masked elementwise arithmetic, unary minus and compound assignment", "[ops]") {
  auto k = jit("ew1d", [](Ptr<float> x, Ptr<float> y, Ptr<float> out, Ptr<int32_t> iout, Tile<int32_t> n,
                          Constexpr<int> BLOCK) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> m = offs < n;
    Tile<float> a = load(x + offs, m), b = load(y + offs, m);
    Tile<float> r = -a;
    r += b;
    r *= a;
    r -= 1.0f;
    r /= b;
    store(out + offs, r, m);
    Tile<int32_t> t = offs;
    t += 3;
    t *= -2;
    t -= offs;
    t /= 5;
    store(iout + offs, -t, m);
  });
  for (int n : kSizes) {
    CAPTURE(n);
    Buf<float> x = random_buf<float>(n, 1), y = random_buf<float>(n, 2, 0.5, 2);
    Buf<float> out(n);
    Buf<int32_t> iout(n);
    std::vector<float> w(n);
    std::vector<int32_t> wi(n);
    for (int i = 0; i < n; ++i) {
      w[i] = ((-x[i] + y[i]) * x[i] - 1.0f) / y[i];
      wi[i] = -(((i + 3) * -2 - i) / 5);
    }
    k(Grid(cdiv(n, 128)), x.data(), y.data(), out.data(), iout.data(), n, 128);
    CHECK(diffs(out, w) == "");
    CHECK(diffs(iout, wi) == "");
  }
}

template <class A, class B> concept Multipliable = requires(A a, B b) { a * b; };

TEST_CASE("ops: f16 with bf16 tiles need an explicit cast (dtype.hpp rule 4)", "[ops]") {
  // Neither type promotes into the other, so the operators do not compile on such a pair; the user
  // casts one side (to f32, the common type promote() reports).
  CHECK(!Multipliable<Tile<f16>, Tile<bf16>>);
  CHECK(!Multipliable<Tile<bf16>, Tile<f16>>);
  CHECK(Multipliable<Tile<f16>, Tile<float>>);
  CHECK(Multipliable<Tile<int32_t>, Tile<float>>);
}

TEST_CASE("ops: mixed-dtype promotion", "[ops]") {
  static_assert(std::is_same_v<promote_t<int32_t, float>, float>);
  static_assert(std::is_same_v<promote_t<int32_t, int64_t>, int64_t>);
  static_assert(std::is_same_v<promote_t<int8_t, uint32_t>, uint32_t>);
  static_assert(std::is_same_v<promote_t<uint8_t, int32_t>, int32_t>);
  static_assert(std::is_same_v<promote_t<f16, bf16>, float>);
  static_assert(std::is_same_v<promote_t<bool, int16_t>, int16_t>);
  static_assert(std::is_same_v<promote_t<int64_t, f16>, f16>);

  auto k = jit("promote", [](Ptr<int32_t> pi, Ptr<float> pf, Ptr<int64_t> pl, Ptr<uint8_t> pu8, Ptr<int8_t> pi8,
                             Ptr<uint32_t> pu32, Ptr<f16> ph, Ptr<bf16> pb, Ptr<bool> pz, Ptr<float> of,
                             Ptr<int64_t> ol, Ptr<int32_t> oi, Ptr<uint32_t> ou, Ptr<float> of2, Ptr<f16> oh,
                             Ptr<double> od) {
    Tile<int32_t> r = arange(0, N17);
    Tile<int32_t> i = load(pi + r);
    Tile<float> f = load(pf + r);
    Tile<int64_t> l = load(pl + r);
    Tile<uint8_t> u8 = load(pu8 + r);
    Tile<int8_t> i8 = load(pi8 + r);
    Tile<uint32_t> u32 = load(pu32 + r);
    Tile<f16> h = load(ph + r);
    Tile<bf16> b = load(pb + r);
    Tile<bool> z = load(pz + r);

    auto s1 = i + f;
    static_assert(std::is_same_v<decltype(s1), Tile<float>>);
    auto s2 = i + l;
    static_assert(std::is_same_v<decltype(s2), Tile<int64_t>>);
    auto s3 = u8 * i;
    static_assert(std::is_same_v<decltype(s3), Tile<int32_t>>);
    auto s4 = i8 + u32;
    static_assert(std::is_same_v<decltype(s4), Tile<uint32_t>>);
    // f16 with bf16: an explicit cast (see the test above).
    Tile<float> s5 = h.to<float>() * b.to<float>();
    auto s6 = h + i;
    static_assert(std::is_same_v<decltype(s6), Tile<f16>>);
    auto s7 = z + i;
    static_assert(std::is_same_v<decltype(s7), Tile<int32_t>>);
    auto s8 = f - l;
    static_assert(std::is_same_v<decltype(s8), Tile<float>>);
    Tile<double> s9 = f;  // implicit widening conversion of a tile
    store(of + r, s1);
    store(ol + r, s2);
    store(ol + N17 + r, s2 * l);
    store(oi + r, s3);
    store(oi + N17 + r, s7);
    store(ou + r, s4);
    store(of2 + r, s5);
    store(of2 + N17 + r, s8);
    store(oh + r, s6);
    store(od + r, s9 * 3.0);
  });
  const int n = N17;
  Buf<int32_t> pi = random_buf<int32_t>(n, 1, -100000, 100000);
  Buf<float> pf = random_buf<float>(n, 2, -1000, 1000);
  Buf<int64_t> pl = random_buf<int64_t>(n, 3, -1e15, 1e15);
  Buf<uint8_t> pu8 = random_full<uint8_t>(n, 4);
  Buf<int8_t> pi8 = random_full<int8_t>(n, 5);
  Buf<uint32_t> pu32 = random_full<uint32_t>(n, 6);
  Buf<f16> ph = random_buf<f16>(n, 7, -10, 10);
  Buf<bf16> pb = random_buf<bf16>(n, 8, -10, 10);
  Buf<bool> pz = random_buf<bool>(n, 9);
  pi[0] = 16777217;  // not exactly representable in f32: the i32 -> f32 conversion rounds first
  pi[1] = 2049;      // not exactly representable in f16
  Buf<float> of(n), of2(2 * n);
  Buf<int64_t> ol(2 * n);
  Buf<int32_t> oi(2 * n);
  Buf<uint32_t> ou(n);
  Buf<f16> oh(n);
  Buf<double> od(n);
  k(Grid(1), pi.data(), pf.data(), pl.data(), pu8.data(), pi8.data(), pu32.data(), ph.data(), pb.data(), pz.data(),
    of.data(), ol.data(), oi.data(), ou.data(), of2.data(), oh.data(), od.data());
  std::vector<float> wf(n), wf2(2 * n);
  std::vector<int64_t> wl(2 * n);
  std::vector<int32_t> wi(2 * n);
  std::vector<uint32_t> wu(n);
  std::vector<f16> wh(n);
  std::vector<double> wd(n);
  for (int i = 0; i < n; ++i) {
    wf[i] = float(pi[i]) + pf[i];
    wl[i] = int64_t(pi[i]) + pl[i];
    wl[n + i] = int64_t(uint64_t(wl[i]) * uint64_t(pl[i]));
    wi[i] = int32_t(uint32_t(pu8[i]) * uint32_t(pi[i]));  // wraps, as the kernel's i32 multiply (UBSan: no signed overflow here)
    wi[n + i] = int32_t(pz[i]) + pi[i];
    wu[i] = uint32_t(int32_t(pi8[i])) + pu32[i];
    wf2[i] = float(ph[i]) * float(pb[i]);
    wf2[n + i] = pf[i] - float(pl[i]);
    wh[i] = f16(float(ph[i]) + float(f16(double(pi[i]))));
    wd[i] = double(pf[i]) * 3.0;
  }
  CHECK(diffs(of, wf) == "");
  CHECK(diffs(ol, wl) == "");
  CHECK(diffs(oi, wi) == "");
  CHECK(diffs(ou, wu) == "");
  CHECK(diffs(of2, wf2) == "");
  CHECK(diffs(oh, wh) == "");
  CHECK(diffs(od, wd) == "");
}

TEST_CASE("ops: C++ scalar operands are weak (take the tile's type)", "[ops]") {
  auto k = jit("scalars", [](Ptr<float> x, Ptr<int8_t> b, Ptr<f16> h, Ptr<uint32_t> u, Ptr<float> of,
                             Ptr<int8_t> ob, Ptr<f16> oh, Ptr<uint32_t> ou, Tile<int32_t> n, Constexpr<int> BLOCK,
                             Constexpr<int> K) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> m = offs < n;
    Tile<float> xv = load(x + offs, m);
    Tile<int8_t> bv = load(b + offs, m);
    Tile<f16> hv = load(h + offs, m);
    Tile<uint32_t> uv = load(u + offs, m);
    auto f1 = 2.5f - xv * 2 + 1.0 / (xv + 3);  // double literal on a float tile stays f32
    static_assert(std::is_same_v<decltype(f1), Tile<float>>);
    store(of + offs, f1, m);
    store(of + n + offs, xv * K, m);  // a Constexpr operand
    auto b1 = 100 - bv * 3;  // int literals on an i8 tile: i8 arithmetic (wraps)
    static_assert(std::is_same_v<decltype(b1), Tile<int8_t>>);
    store(ob + offs, b1, m);
    auto h1 = hv * 0.1 + 1;  // 0.1 rounds to f16 first
    static_assert(std::is_same_v<decltype(h1), Tile<f16>>);
    store(oh + offs, h1, m);
    auto u1 = uv / 7u + 4000000000u;
    static_assert(std::is_same_v<decltype(u1), Tile<uint32_t>>);
    store(ou + offs, u1, m);
  });
  for (int n : kSizes) {
    CAPTURE(n);
    Buf<float> x = random_buf<float>(n, 1, -2, 2);
    Buf<int8_t> b = random_full<int8_t>(n, 2);
    Buf<f16> h = random_buf<f16>(n, 3, -30, 30);
    Buf<uint32_t> u = random_full<uint32_t>(n, 4);
    Buf<float> of(2 * size_t(n));
    Buf<int8_t> ob(n);
    Buf<f16> oh(n);
    Buf<uint32_t> ou(n);
    std::vector<float> wf(2 * size_t(n));
    std::vector<int8_t> wb(n);
    std::vector<f16> wh(n);
    std::vector<uint32_t> wu(n);
    const float tenth = float(f16(0.1));
    for (int i = 0; i < n; ++i) {
      float t1 = x[i] * 2.0f, t2 = 1.0f / (x[i] + 3.0f);
      wf[i] = (2.5f - t1) + t2;
      wf[n + i] = x[i] * 7.0f;
      wb[i] = int8_t(uint8_t(100 - uint8_t(b[i] * 3)));
      wh[i] = f16(float(f16(float(h[i]) * tenth)) + 1.0f);
      wu[i] = u[i] / 7u + 4000000000u;
    }
    k(Grid(cdiv(n, 64)), x.data(), b.data(), h.data(), u.data(), of.data(), ob.data(), oh.data(), ou.data(), n, 64,
      7);
    CHECK(diffs(of, wf) == "");
    CHECK(diffs(ob, wb) == "");
    CHECK(diffs(oh, wh) == "");
    CHECK(diffs(ou, wu) == "");
  }
}

// ============================================================ comparisons

template <class T> void compare_case(unsigned seed) {
  auto k = jit("cmp", [](Ptr<T> a, Ptr<T> b, Ptr<bool> out, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> m = offs < n;
    Tile<T> x = load(a + offs, m), y = load(b + offs, m);
    store(out + offs, x == y, m);
    store(out + n + offs, x != y, m);
    store(out + 2 * n + offs, x < y, m);
    store(out + 3 * n + offs, x <= y, m);
    store(out + 4 * n + offs, x > y, m);
    store(out + 5 * n + offs, x >= y, m);
    store(out + 6 * n + offs, x > 0, m);   // literal operand
    store(out + 7 * n + offs, 1 <= x, m);  // literal on the left
  });
  for (int n : kSizes) {
    CAPTURE(n);
    Buf<T> a = random_buf<T>(n, seed, -3, 3), b = random_buf<T>(n, seed + 1, -3, 3);
    if constexpr (std::is_integral_v<T>) {
      if (n > 2) a[1] = std::numeric_limits<T>::max(), b[1] = std::numeric_limits<T>::min();
    }
    if constexpr (is_fp_v<T>) {
      for (int i = 0; i < n; i += 5) b[i] = a[i];  // some equal pairs
      if (n > 3) a[2] = from_d<T>(NAN), b[3] = from_d<T>(NAN), a[3] = from_d<T>(-0.0), b[2] = from_d<T>(0.0);
    }
    Buf<bool> out(8 * size_t(n));
    std::vector<uint8_t> want(8 * size_t(n));
    for (int i = 0; i < n; ++i) {
      double x = to_d(a[i]), y = to_d(b[i]);
      if constexpr (std::is_integral_v<T>) {  // compare integers exactly (i64 does not fit a double)
        T xi = a[i], yi = b[i];
        want[i] = xi == yi, want[n + i] = xi != yi, want[2 * n + i] = xi < yi, want[3 * n + i] = xi <= yi;
        want[4 * n + i] = xi > yi, want[5 * n + i] = xi >= yi, want[6 * n + i] = xi > 0, want[7 * n + i] = 1 <= xi;
      } else {
        want[i] = x == y, want[n + i] = x != y, want[2 * n + i] = x < y, want[3 * n + i] = x <= y;
        want[4 * n + i] = x > y, want[5 * n + i] = x >= y, want[6 * n + i] = x > 0, want[7 * n + i] = 1 <= x;
      }
    }
    k(Grid(cdiv(n, 32)), a.data(), b.data(), out.data(), n, 32);
    Buf<uint8_t> got(out.size());
    for (size_t i = 0; i < out.size(); ++i) got[i] = out[i];
    CHECK(diffs(got, want) == "");
  }
}

TEST_CASE("ops: comparisons across dtypes (NaN ordered, != true)", "[ops]") {
  compare_case<float>(1);
  compare_case<double>(2);
  compare_case<f16>(3);
  compare_case<bf16>(4);
  compare_case<int8_t>(5);
  compare_case<int16_t>(6);
  compare_case<int32_t>(7);
  compare_case<int64_t>(8);
  compare_case<uint8_t>(9);
  compare_case<uint32_t>(10);
}

TEST_CASE("ops: equality on bool tiles and mixed signed/unsigned compare", "[ops]") {
  auto k = jit("cmpb", [](Ptr<bool> a, Ptr<bool> b, Ptr<int8_t> c, Ptr<uint32_t> d, Ptr<bool> out) {
    Tile<int32_t> r = arange(0, N17);
    Tile<bool> x = load(a + r), y = load(b + r);
    store(out + r, x == y);
    store(out + N17 + r, x != y);
    // i8 vs u32 compares as u32 (promotion rule 6): -1 becomes 4294967295
    store(out + (2 * N17) + r, load(c + r) < load(d + r));
  });
  Buf<bool> a = random_buf<bool>(N17, 1), b = random_buf<bool>(N17, 2), out((3 * N17));
  Buf<int8_t> c = random_full<int8_t>(N17, 3);
  Buf<uint32_t> d = random_buf<uint32_t>(N17, 4, 0, 300);
  std::vector<uint8_t> want((3 * N17));
  for (int i = 0; i < N17; ++i) {
    want[i] = a[i] == b[i];
    want[N17 + i] = a[i] != b[i];
    want[(2 * N17) + i] = uint32_t(int32_t(c[i])) < d[i];
  }
  k(Grid(1), a.data(), b.data(), c.data(), d.data(), out.data());
  Buf<uint8_t> got((3 * N17));
  for (int i = 0; i < (3 * N17); ++i) got[i] = out[i];
  CHECK(diffs(got, want) == "");
}

// ============================================================ logical and bitwise

TEST_CASE("ops: logical && || ! and bitwise ops on bool tiles", "[ops]") {
  auto k = jit("logic", [](Ptr<bool> a, Ptr<bool> b, Ptr<float> x, Ptr<bool> out, Tile<int32_t> n,
                           Constexpr<int> BLOCK) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> m = offs < n;
    Tile<bool> p = load(a + offs, m), q = load(b + offs, m);
    Tile<float> v = load(x + offs, m);
    store(out + offs, p && q, m);
    store(out + n + offs, p || q, m);
    store(out + 2 * n + offs, !p, m);
    store(out + 3 * n + offs, p ^ q, m);
    store(out + 4 * n + offs, (p & !q) | (v > 0.5f), m);
    store(out + 5 * n + offs, (v > -0.5f) && (v < 0.5f) || p, m);
    store(out + 6 * n + offs, p && true, m);
    store(out + 7 * n + offs, false || !(v < 0), m);
  });
  for (int n : kSizes) {
    CAPTURE(n);
    Buf<bool> a = random_buf<bool>(n, 1), b = random_buf<bool>(n, 2), out(8 * size_t(n));
    Buf<float> x = random_buf<float>(n, 3);
    std::vector<uint8_t> want(8 * size_t(n));
    for (int i = 0; i < n; ++i) {
      bool p = a[i], q = b[i];
      float v = x[i];
      want[i] = p && q, want[n + i] = p || q, want[2 * n + i] = !p, want[3 * n + i] = p != q;
      want[4 * n + i] = (p && !q) || v > 0.5f, want[5 * n + i] = (v > -0.5f && v < 0.5f) || p;
      want[6 * n + i] = p, want[7 * n + i] = !(v < 0);
    }
    k(Grid(cdiv(n, 64)), a.data(), b.data(), x.data(), out.data(), n, 64);
    Buf<uint8_t> got(out.size());
    for (size_t i = 0; i < out.size(); ++i) got[i] = out[i];
    CHECK(diffs(got, want) == "");
  }
}

template <class T> T ref_shl(T a, T s) {
  constexpr int W = sizeof(T) * 8;
  if constexpr (std::is_signed_v<T>)
    if (s < 0) return 0;
  if (uint64_t(s) >= uint64_t(W)) return 0;
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) << s));
}
template <class T> T ref_shr(T a, T s) {
  constexpr int W = sizeof(T) * 8;
  bool out_of_range = uint64_t(s) >= uint64_t(W);
  if constexpr (std::is_signed_v<T>) {
    if (s < 0 || out_of_range) return a < 0 ? T(-1) : T(0);
    return static_cast<T>(a >> s);  // arithmetic (C++20)
  } else {
    if (out_of_range) return 0;
    return static_cast<T>(a >> s);
  }
}

template <class T> void bitwise_case(unsigned seed) {
  auto k = jit("bits", [](Ptr<T> a, Ptr<T> b, Ptr<T> s, Ptr<T> out, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> m = offs < n;
    Tile<T> x = load(a + offs, m), y = load(b + offs, m), sh = load(s + offs, m);
    store(out + offs, x & y, m);
    store(out + n + offs, x | y, m);
    store(out + 2 * n + offs, x ^ y, m);
    store(out + 3 * n + offs, ~x, m);
    store(out + 4 * n + offs, x << sh, m);
    store(out + 5 * n + offs, x >> sh, m);
    store(out + 6 * n + offs, (x >> 1) ^ (x & 5) | (T(3) << 2), m);  // literals
  });
  constexpr int W = sizeof(T) * 8;
  for (int n : kSizes) {
    CAPTURE(n);
    Buf<T> a = random_full<T>(n, seed), b = random_full<T>(n, seed + 1);
    // shift amounts: in range, at/over the width, and (signed) negative
    Buf<T> s = random_buf<T>(n, seed + 2, std::is_signed_v<T> ? -3 : 0, W + 4);
    Buf<T> out(7 * size_t(n));
    std::vector<T> want(7 * size_t(n));
    for (int i = 0; i < n; ++i) {
      T x = a[i], y = b[i];
      want[i] = T(x & y), want[n + i] = T(x | y), want[2 * n + i] = T(x ^ y), want[3 * n + i] = T(~x);
      want[4 * n + i] = ref_shl<T>(x, s[i]), want[5 * n + i] = ref_shr<T>(x, s[i]);
      want[6 * n + i] = T(T(ref_shr<T>(x, 1) ^ T(x & 5)) | T(12));
    }
    k(Grid(cdiv(n, 128)), a.data(), b.data(), s.data(), out.data(), n, 128);
    CHECK(diffs(out, want) == "");
  }
}

TEST_CASE("ops: bitwise & | ^ ~ << >> on integers (shift out of range)", "[ops]") {
  bitwise_case<int8_t>(1);
  bitwise_case<int16_t>(2);
  bitwise_case<int32_t>(3);
  bitwise_case<int64_t>(4);
  bitwise_case<uint8_t>(5);
  bitwise_case<uint32_t>(6);
}

// ============================================================ where

template <class T> void where_case(unsigned seed) {
  auto k = jit("where", [](Ptr<bool> c, Ptr<T> a, Ptr<T> b, Ptr<T> out, Tile<int32_t> n, Tile<T> s,
                           Constexpr<int> BLOCK) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> m = offs < n;
    Tile<bool> cv = load(c + offs, m);
    Tile<T> x = load(a + offs, m), y = load(b + offs, m);
    store(out + offs, where(cv, x, y), m);
    store(out + n + offs, where(cv, x, s), m);  // scalar tile operand broadcast
  });
  for (int n : kSizes) {
    CAPTURE(n);
    Buf<bool> c = random_buf<bool>(n, seed);
    Buf<T> a = random_buf<T>(n, seed + 1, -50, 50), b = random_buf<T>(n, seed + 2, -50, 50);
    T s = from_d<T>(std::is_same_v<T, bool> ? 1 : 9);
    Buf<T> out(2 * size_t(n));
    std::vector<T> want(2 * size_t(n));
    for (int i = 0; i < n; ++i) want[i] = c[i] ? a[i] : b[i], want[n + i] = c[i] ? a[i] : s;
    k(Grid(cdiv(n, 256)), c.data(), a.data(), b.data(), out.data(), n, s, 256);
    CHECK(diffs(out, want) == "");
  }
}

TEST_CASE("ops: where across dtypes", "[ops]") {
  where_case<float>(1);
  where_case<double>(2);
  where_case<f16>(3);
  where_case<bf16>(4);
  where_case<int8_t>(5);
  where_case<int16_t>(6);
  where_case<int32_t>(7);
  where_case<int64_t>(8);
  where_case<uint8_t>(9);
  where_case<uint32_t>(10);
  where_case<bool>(11);
}

TEST_CASE("ops: where with broadcasting, literals and promotion", "[ops]") {
  auto k = jit("where2", [](Ptr<float> a, Ptr<int32_t> b, Ptr<float> out, Constexpr<int> M, Constexpr<int> N) {
    Tile<int32_t> i = expand_dims(arange(0, M), 1), j = expand_dims(arange(0, N), 0);
    Tile<float> row = expand_dims(load(a + arange(0, N)), 0);  // [1, N]
    Tile<int32_t> col = expand_dims(load(b + arange(0, M)), 1);  // [M, 1] i32, promoted to f32
    Tile<float> r = where(i > j, row, col);                      // [M, N]
    CHECK(r.shape() == Shape{M, N});
    store(out + i * N + j, r);
    store(out + M * N + i * N + j, where(i == j, 1.0f, row));    // literal first
    store(out + 2 * M * N + i * N + j, where(j < 2, row, -1));   // literal second
  });
  for (auto [m0_, n0_] : {std::pair{1, 1}, std::pair{17, 33}, std::pair{2, 1001}}) {
    const int m = m0_, n = n0_;
    CAPTURE(m, n);
    Buf<float> a = random_buf<float>(n, 1);
    Buf<int32_t> b = random_buf<int32_t>(m, 2, -100, 100);
    size_t mn = size_t(m) * n;
    Buf<float> out(3 * mn);
    std::vector<float> want(3 * mn);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        want[size_t(i) * n + j] = i > j ? a[j] : float(b[i]);
        want[mn + size_t(i) * n + j] = i == j ? 1.0f : a[j];
        want[2 * mn + size_t(i) * n + j] = j < 2 ? a[j] : -1.0f;
      }
    k(Grid(1), a.data(), b.data(), out.data(), m, n);
    CHECK(diffs(out, want) == "");
  }
}

// ============================================================ cast / to / bitcast

template <class I> I sat_cast(double d) {
  if (std::isnan(d)) return 0;
  if (d <= double(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (d >= double(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(std::trunc(d));
}

TEST_CASE("ops: float -> integer casts saturate, NaN -> 0", "[ops]") {
  auto k = jit("f2i", [](Ptr<float> x, Ptr<double> xd, Ptr<int8_t> o8, Ptr<int32_t> o32, Ptr<uint8_t> ou8,
                         Ptr<uint32_t> ou32, Ptr<int64_t> o64, Ptr<int16_t> o16, Ptr<bool> ob, Tile<int32_t> n,
                         Constexpr<int> BLOCK) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> m = offs < n;
    Tile<float> v = load(x + offs, m);
    Tile<double> vd = load(xd + offs, m);
    store(o8 + offs, v.to<int8_t>(), m);
    store(o32 + offs, cast<int32_t>(v), m);
    store(ou8 + offs, v.to<uint8_t>(), m);
    store(ou32 + offs, v.to<uint32_t>(), m);
    store(o64 + offs, vd.to<int64_t>(), m);
    store(o16 + offs, cast<int16_t>(vd), m);
    store(ob + offs, v.to<bool>(), m);
  });
  for (int n : kSizes) {
    CAPTURE(n);
    Buf<float> x = random_buf<float>(n, 1, -5e9, 5e9);
    Buf<double> xd = random_buf<double>(n, 2, -2e19, 2e19);
    const float specials[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.5f, -0.5f, 127.9f, -128.9f, 255.5f, -1.0f,
                              2147483520.0f, 4294967040.0f, 300.0f, -3e9f};
    const double dspecials[] = {NAN, 9.3e18, -9.3e18, 9223372036854774784.0, -7.9, 32767.5, -32768.9, 0.0};
    for (int i = 0; i < n && i < 14; ++i) x[i] = specials[i];
    for (int i = 0; i < n && i < 8; ++i) xd[i] = dspecials[i];
    for (int i = 14; i < n; i += 3) x[i] = float(x[i] * 1e-7);  // many values in the small range too
    for (int i = 8; i < n; i += 3) xd[i] = xd[i] * 1e-15;
    Buf<int8_t> o8(n);
    Buf<int32_t> o32(n);
    Buf<uint8_t> ou8(n);
    Buf<uint32_t> ou32(n);
    Buf<int64_t> o64(n);
    Buf<int16_t> o16(n);
    Buf<bool> ob(n);
    std::vector<int8_t> w8(n);
    std::vector<int32_t> w32(n);
    std::vector<uint8_t> wu8(n), wb(n);
    std::vector<uint32_t> wu32(n);
    std::vector<int64_t> w64(n);
    std::vector<int16_t> w16(n);
    for (int i = 0; i < n; ++i) {
      w8[i] = sat_cast<int8_t>(x[i]), w32[i] = sat_cast<int32_t>(x[i]), wu8[i] = sat_cast<uint8_t>(x[i]);
      wu32[i] = sat_cast<uint32_t>(x[i]), w64[i] = sat_cast<int64_t>(xd[i]), w16[i] = sat_cast<int16_t>(xd[i]);
      wb[i] = x[i] != 0;  // NaN != 0
    }
    k(Grid(cdiv(n, 64)), x.data(), xd.data(), o8.data(), o32.data(), ou8.data(), ou32.data(), o64.data(), o16.data(),
      ob.data(), n, 64);
    Buf<uint8_t> gb(n);
    for (int i = 0; i < n; ++i) gb[i] = ob[i];
    CHECK(diffs(o8, w8) == "");
    CHECK(diffs(o32, w32) == "");
    CHECK(diffs(ou8, wu8) == "");
    CHECK(diffs(ou32, wu32) == "");
    CHECK(diffs(o64, w64) == "");
    CHECK(diffs(o16, w16) == "");
    CHECK(diffs(gb, wb) == "");
  }
}

TEST_CASE("ops: integer conversions (wrap, sign/zero extension, bool)", "[ops]") {
  auto k = jit("i2i", [](Ptr<int64_t> x, Ptr<int8_t> x8, Ptr<uint8_t> xu8, Ptr<int8_t> o8, Ptr<uint16_t> o16,
                         Ptr<int64_t> o64, Ptr<uint32_t> ou32, Ptr<int32_t> oi32, Ptr<bool> ob) {
    Tile<int32_t> r = arange(0, N33);
    Tile<int64_t> v = load(x + r);
    Tile<int8_t> v8 = load(x8 + r);
    Tile<uint8_t> vu8 = load(xu8 + r);
    store(o8 + r, v.to<int8_t>());
    store(o16 + r, v.to<uint16_t>());
    store(o64 + r, v8.to<int64_t>());
    store(o64 + N33 + r, vu8.to<int64_t>());
    store(ou32 + r, v8.to<uint32_t>());
    store(oi32 + r, (v8 < 0).to<int32_t>() + (vu8 > 127).to<int32_t>() * 10);
    store(ob + r, v.to<bool>());
    store(ob + N33 + r, v8.to<bool>());
  });
  Buf<int64_t> x = random_full<int64_t>(N33, 1);
  Buf<int8_t> x8 = random_full<int8_t>(N33, 2);
  Buf<uint8_t> xu8 = random_full<uint8_t>(N33, 3);
  x[0] = 0, x[1] = 256, x[2] = -1, x[3] = 65536 + 255, x8[0] = 0, x8[1] = -128, x8[2] = 127, xu8[0] = 255;
  Buf<int8_t> o8(N33);
  Buf<uint16_t> o16(N33);
  Buf<int64_t> o64((2 * N33));
  Buf<uint32_t> ou32(N33);
  Buf<int32_t> oi32(N33);
  Buf<bool> ob((2 * N33));
  k(Grid(1), x.data(), x8.data(), xu8.data(), o8.data(), o16.data(), o64.data(), ou32.data(), oi32.data(), ob.data());
  std::vector<int8_t> w8(N33);
  std::vector<uint16_t> w16(N33);
  std::vector<int64_t> w64((2 * N33));
  std::vector<uint32_t> wu32(N33);
  std::vector<int32_t> wi32(N33);
  std::vector<uint8_t> wb((2 * N33));
  for (int i = 0; i < N33; ++i) {
    w8[i] = static_cast<int8_t>(x[i]), w16[i] = static_cast<uint16_t>(x[i]);
    w64[i] = x8[i], w64[N33 + i] = xu8[i], wu32[i] = static_cast<uint32_t>(int32_t(x8[i]));
    wi32[i] = (x8[i] < 0) + (xu8[i] > 127) * 10;
    wb[i] = x[i] != 0, wb[N33 + i] = x8[i] != 0;
  }
  Buf<uint8_t> gb((2 * N33));
  for (int i = 0; i < (2 * N33); ++i) gb[i] = ob[i];
  CHECK(diffs(o8, w8) == "");
  CHECK(diffs(o16, w16) == "");
  CHECK(diffs(o64, w64) == "");
  CHECK(diffs(ou32, wu32) == "");
  CHECK(diffs(oi32, wi32) == "");
  CHECK(diffs(gb, wb) == "");
}

TEST_CASE("ops: int -> float and float -> narrower float round to nearest even once", "[ops]") {
  auto k = jit("f2f", [](Ptr<int32_t> xi, Ptr<uint32_t> xu, Ptr<int64_t> xl, Ptr<double> xd, Ptr<float> xf,
                         Ptr<float> of, Ptr<f16> oh, Ptr<bf16> ob, Ptr<double> od, Ptr<f16> ohi) {
    Tile<int32_t> r = arange(0, N17);
    Tile<double> d = load(xd + r);
    Tile<float> f = load(xf + r);
    store(of + r, load(xi + r).to<float>());
    store(of + N17 + r, load(xu + r).to<float>());
    store(of + (2 * N17) + r, load(xl + r).to<float>());
    store(of + (3 * N17) + r, d.to<float>());
    store(oh + r, d.to<f16>());  // f64 -> f16 directly (no double rounding through f32)
    store(oh + N17 + r, f.to<f16>());
    store(ob + r, d.to<bf16>());
    store(ob + N17 + r, f.to<bf16>());
    store(od + r, f.to<f16>().to<double>());
    store(od + N17 + r, f.to<bf16>().to<float>().to<double>());
    store(ohi + r, load(xi + r).to<f16>());
  });
  Buf<int32_t> xi = random_full<int32_t>(N17, 1);
  Buf<uint32_t> xu = random_full<uint32_t>(N17, 2);
  Buf<int64_t> xl = random_full<int64_t>(N17, 3);
  Buf<double> xd = random_buf<double>(N17, 4, -100, 100);
  Buf<float> xf = random_buf<float>(N17, 5, -100, 100);
  xi[0] = 16777217, xi[1] = -16777219, xi[2] = 2049, xi[3] = 2051, xi[4] = 65520, xi[5] = 70000;
  xu[0] = 4294967295u, xu[1] = 16777217u;
  xl[0] = (int64_t(1) << 53) + 1, xl[1] = std::numeric_limits<int64_t>::min();
  xd[0] = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);  // f16: just above a tie -> rounds up
  xd[1] = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);   // bf16: just above a tie -> rounds up
  xd[2] = 65519.99, xd[3] = 65520.0, xd[4] = 1e-8, xd[5] = -1e300, xd[6] = NAN, xd[7] = std::ldexp(1.0, -24);
  xf[0] = 1.0f + std::ldexp(1.0f, -11);  // exact tie in f16 -> even (1.0)
  xf[1] = 1.0f + 3 * std::ldexp(1.0f, -11);  // tie -> even (up)
  xf[2] = 1.0f + std::ldexp(1.0f, -8);   // exact tie in bf16 -> even (1.0)
  xf[3] = 1.0f + 3 * std::ldexp(1.0f, -8);  // tie -> up (1 + 2^-6)
  xf[4] = 3.0e38f, xf[5] = -0.0f, xf[6] = INFINITY;
  Buf<float> of((4 * N17));
  Buf<f16> oh((2 * N17)), ohi(N17);
  Buf<bf16> ob((2 * N17));
  Buf<double> od((2 * N17));
  k(Grid(1), xi.data(), xu.data(), xl.data(), xd.data(), xf.data(), of.data(), oh.data(), ob.data(), od.data(),
    ohi.data());
  std::vector<float> wf((4 * N17));
  std::vector<uint16_t> wh((2 * N17)), wb((2 * N17)), whi(N17);
  std::vector<double> wd((2 * N17));
  for (int i = 0; i < N17; ++i) {
    wf[i] = float(xi[i]), wf[N17 + i] = float(xu[i]), wf[(2 * N17) + i] = float(xl[i]), wf[(3 * N17) + i] = float(xd[i]);
    wh[i] = f16(xd[i]).bits, wh[N17 + i] = f16(xf[i]).bits;
    wb[i] = bf16(xd[i]).bits, wb[N17 + i] = bf16(xf[i]).bits;
    wd[i] = double(float(f16(xf[i]))), wd[N17 + i] = double(float(bf16(xf[i])));
    whi[i] = f16(double(xi[i])).bits;
  }
  // hand-checked values of the host conversions the reference relies on
  CHECK(f16(xd[0]).bits == 0x3C01);
  CHECK(bf16(xd[1]).bits == 0x3F81);
  CHECK(f16(xf[0]).bits == 0x3C00);
  CHECK(f16(xf[1]).bits == 0x3C02);
  CHECK(bf16(xf[2]).bits == 0x3F80);
  CHECK(bf16(xf[3]).bits == 0x3F82);
  CHECK(f16(65520.0).bits == 0x7C00);
  CHECK(f16(65519.99).bits == 0x7BFF);
  // the NaN lanes: compare "is NaN" rather than bit patterns
  auto is_nan16 = [](uint16_t b, bool bfloat) {
    return bfloat ? ((b & 0x7F80) == 0x7F80 && (b & 0x7F)) : ((b & 0x7C00) == 0x7C00 && (b & 0x3FF));
  };
  CHECK(is_nan16(oh[6].bits, false));
  CHECK(is_nan16(ob[6].bits, true));
  oh[6].bits = wh[6], ob[6].bits = wb[6];
  Buf<uint16_t> gh((2 * N17)), gb((2 * N17)), ghi(N17);
  for (int i = 0; i < (2 * N17); ++i) gh[i] = oh[i].bits, gb[i] = ob[i].bits;
  for (int i = 0; i < N17; ++i) ghi[i] = ohi[i].bits;
  CHECK(diffs(of, wf) == "");
  CHECK(diffs(gh, wh) == "");
  CHECK(diffs(gb, wb) == "");
  CHECK(diffs(od, wd) == "");
  CHECK(diffs(ghi, whi) == "");
}

template <class A, class B> void bitcast_case(unsigned seed) {
  auto k = jit("bitcast", [](Ptr<A> x, Ptr<B> o, Ptr<A> back, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> m = offs < n;
    Tile<B> b = bitcast<B>(load(x + offs, m));
    store(o + offs, b, m);
    store(back + offs, bitcast<A>(b), m);
  });
  for (int n : kSizes) {
    CAPTURE(n);
    Buf<A> x(n);
    Buf<uint64_t> r = random_full<uint64_t>(n, seed);
    for (int i = 0; i < n; ++i) std::memcpy(&x[i], &r[i], sizeof(A));
    Buf<B> o(n);
    Buf<A> back(n);
    k(Grid(cdiv(n, 256)), x.data(), o.data(), back.data(), n, 256);
    Buf<uint64_t> xb(n, 0), ob(n, 0), bb(n, 0);
    for (int i = 0; i < n; ++i) {
      std::memcpy(&xb[i], &x[i], sizeof(A));
      std::memcpy(&ob[i], &o[i], sizeof(A));
      std::memcpy(&bb[i], &back[i], sizeof(A));
    }
    INFO(__PRETTY_FUNCTION__);
    CHECK(diffs(ob, xb) == "");
    CHECK(diffs(bb, xb) == "");
  }
}

TEST_CASE("ops: bitcast round trips keep the bits", "[ops]") {
  static_assert(sizeof(tle::f16) == 2 && sizeof(tle::bf16) == 2);
  bitcast_case<float, int32_t>(1);
  bitcast_case<int32_t, float>(2);  // includes NaN payloads
  bitcast_case<float, uint32_t>(3);
  bitcast_case<double, int64_t>(4);
  bitcast_case<int64_t, double>(5);
  bitcast_case<f16, int16_t>(6);
  bitcast_case<bf16, uint16_t>(7);
  bitcast_case<f16, bf16>(8);
  bitcast_case<int8_t, uint8_t>(9);
}

TEST_CASE("ops: bitcast values are usable arithmetically", "[ops]") {
  // float bits -> exponent field via integer ops
  auto k = jit("expfield", [](Ptr<float> x, Ptr<int32_t> e) {
    Tile<int32_t> r = arange(0, N17);
    Tile<int32_t> b = bitcast<int32_t>(load(x + r));
    store(e + r, ((b >> 23) & 0xFF) - 127);
  });
  Buf<float> x(N17);
  std::vector<int32_t> want(N17);
  for (int i = 0; i < N17; ++i) x[i] = std::ldexp(1.5f, i - 8), want[i] = i - 8;
  Buf<int32_t> e(N17);
  k(Grid(1), x.data(), e.data());
  CHECK(diffs(e, want) == "");
}

TEST_CASE("ops: copies and bitcasts keep signaling-NaN bit patterns", "[ops]") {
  // bf16 0xFF9B / 0x7F81 and f16 0x7C01 / 0xFD55 are signaling NaNs (quiet bit clear).
  auto kb = jit("snan_bf16", [](Ptr<bf16> x, Ptr<bf16> copy, Ptr<uint16_t> bits, Tile<int32_t> n) {
    Tile<int32_t> r = arange(0, 32);
    Tile<bool> m = r < n;
    Tile<bf16> v = load(x + r, m);  // masked (other = 0)
    store(copy + r, v, m);
    store(bits + r, bitcast<uint16_t>(v), m);
  });
  auto kh = jit("snan_f16", [](Ptr<f16> x, Ptr<f16> copy, Ptr<uint16_t> bits, Tile<int32_t> n) {
    Tile<int32_t> r = arange(0, 32);
    Tile<bool> m = r < n;
    Tile<f16> v = load(x + r, m);
    store(copy + r, v, m);
    store(bits + r, bitcast<uint16_t>(v), m);
  });
  const uint16_t bpat[4] = {0xFF9B, 0x7F81, 0x3F80, 0x7FC0};
  const uint16_t hpat[4] = {0x7C01, 0xFD55, 0x3C00, 0x7E00};
  for (int n : {1, 4, 17}) {
    CAPTURE(n);
    Buf<bf16> xb(n), cb(n);
    Buf<f16> xh(n), ch(n);
    Buf<uint16_t> bb(n), bh(n), gcb(n), gch(n);
    std::vector<uint16_t> wb(n), wh(n);
    for (int i = 0; i < n; ++i) {
      xb[i] = bf16::from_bits(bpat[i % 4]), wb[i] = bpat[i % 4];
      xh[i] = f16::from_bits(hpat[i % 4]), wh[i] = hpat[i % 4];
    }
    kb(Grid(1), xb.data(), cb.data(), bb.data(), n);
    kh(Grid(1), xh.data(), ch.data(), bh.data(), n);
    for (int i = 0; i < n; ++i) gcb[i] = cb[i].bits, gch[i] = ch[i].bits;
    CHECK(diffs(gcb, wb) == "");
    CHECK(diffs(bb, wb) == "");
    CHECK(diffs(gch, wh) == "");
    CHECK(diffs(bh, wh) == "");
  }
}
