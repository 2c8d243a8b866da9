// tests/test_ops_scan.cpp - reductions and scans over several tiles at once (the tuple forms of
// reduce / associative_scan) and the order rule of user combines (docs/semantics.md, "Reductions
// and scans with a combine"): associative, not commutative combines whose result changes when the
// order is wrong, on ragged shapes, at 1, 4 and 8 warps (the GPU's tree: registers, lanes, warps);
// the GPU lowering assembled by ptxas ([ptx]). [ops] tests are mirrored on the GPU (ops_util.hpp).
#include <algorithm>
#include <array>
#include <functional>
#include <tuple>

#include "../examples/kernels.hpp"
#include "ops_util.hpp"
#include "ptxas_util.hpp"

using namespace tle;
using namespace opstest;

namespace {

/// The linear recurrence h -> a h + b: (a1, b1) o (a2, b2) = (a1 a2, a2 b1 + b2) applies 1, then 2.
auto recurrence = [](auto l, auto r) {
  auto [a1, b1] = l;
  auto [a2, b2] = r;
  return std::tuple{a1 * a2, a2 * b1 + b2};
};

/// Host reference of `recurrence` on u32 pairs (wrapping).
std::pair<uint32_t, uint32_t> rec(std::pair<uint32_t, uint32_t> l, std::pair<uint32_t, uint32_t> r) {
  return {l.first * r.first, r.first * l.second + r.second};
}

/// The kernel of "ops: tuple reduce and associative_scan of a linear recurrence": [M, N] tiles a, b
/// (u32); writes reduce along 1 and 0, scan along 1, reverse scan along 0 and along 1, (a, b) each.
auto make_recurrence() {
  return jit("tuple_recurrence", [](Ptr<uint32_t> a, Ptr<uint32_t> b, Ptr<uint32_t> out, Constexpr<int> M,
                                    Constexpr<int> N) {
    Tile<int32_t> o = expand_dims(arange(0, M), 1) * N + expand_dims(arange(0, N), 0);
    Tile<uint32_t> va = load(a + o), vb = load(b + o);
    const int MN = M * N;
    auto [r1a, r1b] = reduce(std::tuple{va, vb}, 1, recurrence);
    store(out + arange(0, M), r1a);
    store(out + M + arange(0, M), r1b);
    auto [r0a, r0b] = reduce(std::tuple{va, vb}, -2, recurrence);
    store(out + 2 * M + arange(0, N), r0a);
    store(out + 2 * M + N + arange(0, N), r0b);
    Ptr<uint32_t> s = out + 2 * (M + N);
    auto [s1a, s1b] = associative_scan(std::tuple{va, vb}, 1, recurrence);
    store(s + o, s1a);
    store(s + MN + o, s1b);
    auto [s0a, s0b] = associative_scan(std::tuple{va, vb}, 0, recurrence, true);
    store(s + 2 * MN + o, s0a);
    store(s + 3 * MN + o, s0b);
    auto [t1a, t1b] = associative_scan(std::tuple{va, vb}, 1, recurrence, true);
    store(s + 4 * MN + o, t1a);
    store(s + 5 * MN + o, t1b);
  });
}

}  // namespace

TEST_CASE("ops: tuple reduce and associative_scan of a linear recurrence (u32, not commutative)", "[ops]") {
  auto k = make_recurrence();
  for (auto [M0, N0] : {std::pair{1, 1}, std::pair{1, 17}, std::pair{17, 1}, std::pair{3, 1001}, std::pair{1001, 2},
                        std::pair{17, 33}}) {
    const int M = M0, N = N0;
    const size_t mn = size_t(M) * N;
    Buf<uint32_t> a = random_full<uint32_t>(mn, 11), b = random_full<uint32_t>(mn, 12);
    using P = std::pair<uint32_t, uint32_t>;
    auto X = [&](int i, int j) { return P{a[size_t(i) * N + j], b[size_t(i) * N + j]}; };
    std::vector<uint32_t> w(2 * (M + N) + 6 * mn);
    for (int i = 0; i < M; ++i) {
      P s = X(i, 0);
      for (int j = 1; j < N; ++j) s = rec(s, X(i, j));
      w[i] = s.first, w[M + i] = s.second;
    }
    for (int j = 0; j < N; ++j) {
      P s = X(0, j);
      for (int i = 1; i < M; ++i) s = rec(s, X(i, j));
      w[2 * M + j] = s.first, w[2 * M + N + j] = s.second;
    }
    uint32_t* ws = w.data() + 2 * (M + N);
    for (int i = 0; i < M; ++i) {
      P s = X(i, 0), t = X(i, N - 1);
      for (int j = 0; j < N; ++j) {
        if (j) s = rec(s, X(i, j));
        ws[size_t(i) * N + j] = s.first, ws[mn + size_t(i) * N + j] = s.second;
      }
      for (int j = N - 1; j >= 0; --j) {  // reverse: the accumulated higher indices on the left
        if (j < N - 1) t = rec(t, X(i, j));
        ws[4 * mn + size_t(i) * N + j] = t.first, ws[5 * mn + size_t(i) * N + j] = t.second;
      }
    }
    for (int j = 0; j < N; ++j) {
      P s = X(M - 1, j);
      for (int i = M - 1; i >= 0; --i) {
        if (i < M - 1) s = rec(s, X(i, j));
        ws[2 * mn + size_t(i) * N + j] = s.first, ws[3 * mn + size_t(i) * N + j] = s.second;
      }
    }
    for (int warps : {1, 4, 8, 16, 32}) {  // up to 5 warp bits in the GPU's register scans
      CAPTURE(M, N, warps);
      Buf<uint32_t> out(w.size());
      k(Grid(1).with_warps(warps), a.data(), b.data(), out.data(), M, N);
      CHECK(diffs(out, w) == "");
    }
  }
}

TEST_CASE("ops: tuple reduce and scan over mixed dtypes (i32 signs, f64 and f32 values)", "[ops]") {
  // h -> s h + v with s = +-1 (i32) and small integer v: every partial result is an exact integer
  // in f64 and in f32, so any order-keeping bracketing gives the same bits; a swapped order does not.
  auto k = jit("tuple_mixed", [](Ptr<int32_t> s, Ptr<double> v, Ptr<float> f, Ptr<int32_t> os, Ptr<double> ov,
                                 Ptr<float> of, Constexpr<int> N) {
    Tile<int32_t> i = arange(0, N);
    auto combine = [](auto l, auto r) {
      auto [s1, v1, f1] = l;
      auto [s2, v2, f2] = r;
      return std::tuple{s1 * s2, cast<double>(s2) * v1 + v2, cast<float>(s2) * f1 + f2};
    };
    auto [rs, rv, rf] = reduce(std::tuple{load(s + i), load(v + i), load(f + i)}, 0, combine, true);
    CHECK(rv.shape() == Shape{1});
    store(os + arange(0, 1), rs);
    store(ov + arange(0, 1), rv);
    store(of + arange(0, 1), rf);
    auto [cs, cv, cf] = associative_scan(std::tuple{load(s + i), load(v + i), load(f + i)}, 0, combine);
    store(os + 1 + i, cs);
    store(ov + 1 + i, cv);
    store(of + 1 + i, cf);
  });
  for (int N0 : {1, 17, 1001, 4096}) {
    const int N = N0;
    Buf<int32_t> s = random_buf<int32_t>(size_t(N), 21, 0, 1);
    for (size_t t = 0; t < s.size(); ++t) s[t] = s[t] > 0 ? 1 : -1;
    Buf<double> v(static_cast<size_t>(N));
    Buf<float> f(static_cast<size_t>(N));
    Buf<int32_t> vi = random_buf<int32_t>(size_t(N), 22, -8, 8);
    for (size_t t = 0; t < v.size(); ++t) v[t] = vi[t], f[t] = static_cast<float>(vi[t]) * 0.5f;
    std::vector<int32_t> ws(size_t(N) + 1);
    std::vector<double> wv(size_t(N) + 1);
    std::vector<float> wf(size_t(N) + 1);
    int32_t cs = s[0];
    double cv = v[0];
    float cf = f[0];
    for (int j = 0; j < N; ++j) {
      if (j) cv = s[j] * cv + v[j], cf = static_cast<float>(s[j]) * cf + f[j], cs *= s[j];
      ws[size_t(j) + 1] = cs, wv[size_t(j) + 1] = cv, wf[size_t(j) + 1] = cf;
    }
    ws[0] = cs, wv[0] = cv, wf[0] = cf;
    for (int warps : {1, 4, 8}) {
      CAPTURE(N, warps);
      Buf<int32_t> os(ws.size());
      Buf<double> ov(wv.size());
      Buf<float> of(wf.size());
      k(Grid(1).with_warps(warps), s.data(), v.data(), f.data(), os.data(), ov.data(), of.data(), N);
      CHECK(diffs(os, ws) == "");
      CHECK(diffs(ov, wv) == "");
      CHECK(diffs(of, wf) == "");
    }
  }
}

namespace {
/// 2x2 matrices over the integers mod 2^32, row-major (m00, m01, m10, m11).
using Mat = std::array<uint32_t, 4>;
Mat matmul(const Mat& x, const Mat& y) {
  return {x[0] * y[0] + x[1] * y[2], x[0] * y[1] + x[1] * y[3], x[2] * y[0] + x[3] * y[2], x[2] * y[1] + x[3] * y[3]};
}
auto mat_combine = [](auto l, auto r) {
  auto [a, b, c, d] = l;
  auto [e, f, g, h] = r;
  return std::tuple{a * e + b * g, a * f + b * h, c * e + d * g, c * f + d * h};
};

/// The kernel of the [.gpu] order test: the 2x2 matrix product of a 1-D tile of N matrices.
auto make_tuple_order() {
  return jit("gpu_tuple_order", [](Ptr<uint32_t> m, Ptr<uint32_t> out, Constexpr<int> N) {
    Tile<int32_t> i = arange(0, N);
    std::tuple x{load(m + i), load(m + N + i), load(m + 2 * N + i), load(m + 3 * N + i)};
    auto [r0, r1, r2, r3] = reduce(x, 0, mat_combine, true);
    Tile<int32_t> z = arange(0, 1);
    store(out + z, r0);
    store(out + 1 + z, r1);
    store(out + 2 + z, r2);
    store(out + 3 + z, r3);
  });
}

/// The kernel of the [.gpu] order test on a dot result: first non-zero along both axes.
auto make_dot_first_nonzero() {
  return jit("gpu_dot_first_nz", [](Ptr<f16> a, Ptr<float> out, Constexpr<int> M) {
    Tile<int32_t> o = expand_dims(arange(0, M), 1) * M + expand_dims(arange(0, M), 0);
    Tile<f16> v = load(a + o);
    Tile<float> c = dot(v, permute(v, {1, 0}));
    auto [f0, z0] = reduce(std::tuple{c, c * 0.0f}, 0, [](auto l, auto r) {
      auto [l0, l1] = l;
      auto [r0, r1] = r;
      return std::tuple{where(l0 != 0.0f, l0, r0), l1 + r1};
    });
    store(out + arange(0, M), f0 + z0);
    store(out + M + arange(0, M), reduce(c, 1, [](auto l, auto r) { return where(l != 0.0f, l, r); }));
  });
}

}  // namespace

TEST_CASE("ops: tuple reduce and scan of 2x2 matrix products mod 2^32 along either axis", "[ops]") {
  // Products of random matrices: any swap of two factors changes the result.
  auto k = jit("tuple_matmul", [](Ptr<uint32_t> m, Ptr<uint32_t> out, Constexpr<int> M, Constexpr<int> N,
                                  Constexpr<int> axis) {
    Tile<int32_t> o = expand_dims(arange(0, M), 1) * N + expand_dims(arange(0, N), 0);
    const int MN = M * N;
    std::tuple x{load(m + o), load(m + MN + o), load(m + 2 * MN + o), load(m + 3 * MN + o)};
    auto [r0, r1, r2, r3] = reduce(x, axis, mat_combine, true);
    Tile<int32_t> ro = axis == 1 ? expand_dims(arange(0, M), 1) : expand_dims(arange(0, N), 0);
    const int RN = axis == 1 ? M : N;
    store(out + ro, r0);
    store(out + RN + ro, r1);
    store(out + 2 * RN + ro, r2);
    store(out + 3 * RN + ro, r3);
    auto [s0, s1, s2, s3] = associative_scan(x, axis, mat_combine);
    Ptr<uint32_t> so = out + 4 * RN;
    store(so + o, s0);
    store(so + MN + o, s1);
    store(so + 2 * MN + o, s2);
    store(so + 3 * MN + o, s3);
  });
  for (auto [M0, N0] :
       {std::pair{1, 1001}, std::pair{17, 17}, std::pair{1001, 1}, std::pair{32, 32}, std::pair{4, 512}}) {
    const int M = M0, N = N0;
    const size_t mn = size_t(M) * N;
    Buf<uint32_t> m = random_full<uint32_t>(4 * mn, 31);
    auto X = [&](int i, int j) {
      const size_t t = size_t(i) * N + j;
      return Mat{m[t], m[mn + t], m[2 * mn + t], m[3 * mn + t]};
    };
    for (int axis : {0, 1}) {
      const int RN = axis == 1 ? M : N, L = axis == 1 ? N : M;
      std::vector<uint32_t> w(4 * size_t(RN) + 4 * mn);
      for (int r = 0; r < RN; ++r) {
        auto at = [&](int q) { return axis == 1 ? X(r, q) : X(q, r); };
        Mat s = at(0);
        for (int q = 0; q < L; ++q) {
          if (q) s = matmul(s, at(q));
          const size_t t = axis == 1 ? size_t(r) * N + q : size_t(q) * N + r;
          for (int c = 0; c < 4; ++c) w[4 * size_t(RN) + c * mn + t] = s[c];
        }
        for (int c = 0; c < 4; ++c) w[size_t(c) * RN + r] = s[c];
      }
      for (int warps : {1, 4, 8}) {
        CAPTURE(M, N, axis, warps);
        Buf<uint32_t> out(w.size());
        k(Grid(1).with_warps(warps), m.data(), out.data(), M, N, axis);
        CHECK(diffs(out, w) == "");
      }
    }
  }
}

TEST_CASE("ops: single-tile reduce with an associative, not commutative combine (first non-zero)", "[ops]") {
  // first_nz(a, b) = a != 0 ? a : b: the reduction is the first non-zero element along the axis,
  // the scan the first non-zero so far; a dot result (tensor-core layouts on the GPU) as well.
  auto k = jit("first_nonzero", [](Ptr<int32_t> x, Ptr<int32_t> out, Ptr<float> fout, Constexpr<int> M,
                                   Constexpr<int> N) {
    Tile<int32_t> o = expand_dims(arange(0, M), 1) * N + expand_dims(arange(0, N), 0);
    Tile<int32_t> v = load(x + o);
    auto first_nz = [](auto a, auto b) { return where(a != 0, a, b); };
    store(out + arange(0, M), reduce(v, 1, first_nz));
    store(out + M + arange(0, N), reduce(v, 0, first_nz));
    Tile<float> c = dot(cast<f16>(v), cast<f16>(permute(v, {1, 0})));  // [M, M], exact small integers
    Tile<int32_t> cm = expand_dims(arange(0, M), 1) * M + expand_dims(arange(0, M), 0);
    store(fout + arange(0, M), reduce(c, 0, first_nz));
    store(fout + M + cm, associative_scan(c, 0, first_nz));
  });
  for (auto [M0, N0] : {std::pair{1, 17}, std::pair{17, 1}, std::pair{16, 129}, std::pair{64, 16}, std::pair{32, 8}}) {
    const int M = M0, N = N0;
    const size_t mn = size_t(M) * N;
    Buf<int32_t> x = random_buf<int32_t>(mn, 41, -3, 3);
    for (size_t t = 0; t < mn; ++t)
      if (t % 5 != 3) x[t] = 0;  // mostly zeros: the first non-zero is somewhere inside
    std::vector<int32_t> w(size_t(M) + N, 0);  // the first non-zero element, 0 if none
    for (int i = M - 1; i >= 0; --i)
      for (int j = N - 1; j >= 0; --j)
        if (int32_t e = x[size_t(i) * N + j]; e != 0) w[size_t(i)] = e, w[size_t(M) + j] = e;
    std::vector<float> c(size_t(M) * M, 0.f), wf(size_t(M) + size_t(M) * M, 0.f);
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < M; ++j)
        for (int q = 0; q < N; ++q) c[size_t(i) * M + j] += float(x[size_t(i) * N + q] * x[size_t(j) * N + q]);
    for (int j = 0; j < M; ++j) {
      float s = c[size_t(j)];
      for (int i = 0; i < M; ++i) {
        if (i && s == 0.f) s = c[size_t(i) * M + j];
        wf[M + size_t(i) * M + j] = s;
      }
      wf[size_t(j)] = s;
    }
    for (int warps : {1, 4, 8}) {
      CAPTURE(M, N, warps);
      Buf<int32_t> out(w.size());
      Buf<float> fout(wf.size());
      k(Grid(1).with_warps(warps), x.data(), out.data(), fout.data(), M, N);
      CHECK(diffs(out, w) == "");
      CHECK(diffs(fout, wf) == "");
    }
  }
}

TEST_CASE("ptx: tuple reductions and scans at 1 to 32 warps assemble", "[ptx]") {
  auto k = make_recurrence();
  for (auto [M, N] : {std::pair{1, 1024}, std::pair{32, 64}, std::pair{256, 4}})
    for (int warps : {1, 4, 8, 16, 32}) {
      CAPTURE(M, N, warps);
      auto* p = reinterpret_cast<uint32_t*>(uintptr_t(0x10000));
      std::string ptx = k.ptx(90, warps, p, p, p, M, N);
      CHECK(ptx.find("shfl.sync.bfly") != std::string::npos);
      ptxtest::assemble("tuple_recurrence", ptx, "sm_90a");
    }
  // register bits above the lanes and warps (partial states), and a dot result's layout (staged)
  auto ko = make_tuple_order();
  auto kd = make_dot_first_nonzero();
  for (int warps : {1, 4, 8}) {
    CAPTURE(warps);
    auto* p = reinterpret_cast<uint32_t*>(uintptr_t(0x10000));
    ptxtest::assemble("gpu_tuple_order", ko.ptx(90, warps, p, p, 4096), "sm_90a");
    if (warps == 1) continue;
    auto* h = reinterpret_cast<f16*>(uintptr_t(0x10000));
    auto* f = reinterpret_cast<float*>(uintptr_t(0x10000));
    for (int sm : {90, 80})
      ptxtest::assemble("gpu_dot_first_nz", kd.ptx(sm, warps, h, f, 64), sm == 90 ? "sm_90a" : "sm_80");
  }
}

TEST_CASE("gpu: tuple reductions keep the order on large tiles and in the tensor-core layout", "[.gpu]") {
  // Larger than the mirrored [ops] cases: 1-D tiles whose layouts put register bits above the lanes
  // and warps (partial states combined last), and a dot result (mma / wgmma accumulator layout:
  // a register bit between the lane and warp bits, reduced through shared memory).
  if (!gpu_info()) {
    WARN("no usable GPU: [.gpu] case skipped");
    return;
  }
  auto k = make_tuple_order();
  for (int n : {2048, 4096, 8192})
    for (int warps : {1, 4, 8}) {
      CAPTURE(n, warps);
      ManagedBuffer<uint32_t> m(4 * size_t(n)), out(4, 0);
      Buf<uint32_t> r = random_full<uint32_t>(4 * size_t(n), 61);
      for (size_t t = 0; t < r.size(); ++t) m.data()[t] = r[t];
      Mat s{r[0], r[size_t(n)], r[2 * size_t(n)], r[3 * size_t(n)]};
      for (int q = 1; q < n; ++q)
        s = matmul(s, Mat{r[q], r[size_t(n) + q], r[2 * size_t(n) + q], r[3 * size_t(n) + q]});
      k(Grid(1).with_warps(warps).backend(Backend::GPU), m.data(), out.data(), n);
      synchronize();
      for (int c = 0; c < 4; ++c) CHECK(out.data()[c] == s[size_t(c)]);
    }
  // first non-zero along both axes of a 64x64 / 128x128 f16 dot (exact small integers)
  auto kd = make_dot_first_nonzero();
  for (int M : {64, 128})
    for (int warps : {4, 8}) {
      CAPTURE(M, warps);
      Buf<int32_t> xi = random_buf<int32_t>(size_t(M) * M, 62, -2, 2);
      ManagedBuffer<f16> a(size_t(M) * M);
      std::vector<float> x(size_t(M) * M);
      for (size_t t = 0; t < x.size(); ++t) {
        if (t % 7 != 3) xi[t] = 0;
        x[t] = float(xi[t]);
        a.data()[t] = f16(x[t]);
      }
      std::vector<float> c(size_t(M) * M, 0.f), want(2 * size_t(M), 0.f);
      for (int i = 0; i < M; ++i)
        for (int j = 0; j < M; ++j)
          for (int q = 0; q < M; ++q) c[size_t(i) * M + j] += x[size_t(i) * M + q] * x[size_t(j) * M + q];
      for (int i = M - 1; i >= 0; --i)
        for (int j = M - 1; j >= 0; --j)
          if (float e = c[size_t(i) * M + j]; e != 0.f) want[size_t(j)] = e, want[size_t(M) + i] = e;
      ManagedBuffer<float> out(2 * size_t(M), -1.f);
      kd(Grid(1).with_warps(warps).backend(Backend::GPU), a.data(), out.data(), M);
      synchronize();
      std::vector<float> got(out.data(), out.data() + 2 * M);
      CHECK(diffs(got, want) == "");
    }
}

namespace {
/// A tuple scan of L elements before a warp-specialized K loop (sm_90a: a TMA / wgmma matmul whose
/// producer warps also run the statements before the loop, the scan included): out gets the
/// scan, c = a @ b.
auto make_scan_before_ws_loop() {
  return jit("scan_before_ws", [](Ptr<bf16> a, Ptr<bf16> b, Ptr<float> c, Ptr<uint32_t> sa, Ptr<uint32_t> sb,
                                  Ptr<uint32_t> out, Tile<int32_t> M, Tile<int32_t> N, Tile<int32_t> K,
                                  Constexpr<int> BM, Constexpr<int> BN, Constexpr<int> BK, Constexpr<int> L) {
    Tile<int32_t> r = arange(0, L);
    auto [xa, xb] = associative_scan(std::tuple{load(sa + r), load(sb + r)}, 0, recurrence);
    Tile<int32_t> rm = arange(0, BM), rn = arange(0, BN);
    Tile<float> acc = ex::matmul_block<bf16>(a, b, rm, rn, M, N, K, BM, BN, BK);
    store(c + expand_dims(rm, 1) * N + expand_dims(rn, 0), acc);
    store(out + r, xa);
    store(out + L + r, xb);
  });
}
/// A sort of L keys before a warp-specialized K loop: the sort's steps hand out items to threads
/// (for_each_item), which the producer warps must not take too (they would redo a consumer's
/// compare-exchange concurrently). out gets the keys sorted descending, c = a @ b.
auto make_sort_before_ws_loop() {
  return jit("sort_before_ws", [](Ptr<bf16> a, Ptr<bf16> b, Ptr<float> c, Ptr<uint32_t> keys, Ptr<uint32_t> out,
                                  Tile<int32_t> M, Tile<int32_t> N, Tile<int32_t> K, Constexpr<int> BM,
                                  Constexpr<int> BN, Constexpr<int> BK, Constexpr<int> L) {
    Tile<int32_t> r = arange(0, L);
    Tile<uint32_t> sorted = sort(load(keys + r), 0, /*descending=*/true);
    Tile<int32_t> rm = arange(0, BM), rn = arange(0, BN);
    Tile<float> acc = ex::matmul_block<bf16>(a, b, rm, rn, M, N, K, BM, BN, BK);
    store(c + expand_dims(rm, 1) * N + expand_dims(rn, 0), acc);
    store(out + r, sorted);
  });
}
}  // namespace

namespace {
/// The PTX of a kernel whose K loop is warp-specialized (ptx_of(grid) at 4 and 8 compute warps, 3
/// stages): 4 producer warps beside the compute warps, assembled by ptxas for sm_90a.
void check_before_ws_ptx(const char* name, const std::function<std::string(const Grid&)>& ptx_of) {
  for (int warps : {4, 8}) {
    CAPTURE(name, warps);
    Grid g(1, 1);
    g.with_warps(warps).with_stages(3);
    const std::string ptx = ptx_of(g);
    CHECK(ptx.find(".reqntid " + std::to_string(32 * (warps + 4))) != std::string::npos);
    ptxtest::assemble(name, ptx, "sm_90a");
  }
}

/// Inputs of the M x N x K = 128 x 128 x 256 bf16 matmul beside the op under test (small
/// integers, exact in bf16 and f32) and its result c_want.
struct WsMatmul {
  static constexpr int M = 128, N = 128, K = 256;
  ManagedBuffer<bf16> a{size_t(M) * K}, b{size_t(K) * N};
  std::vector<float> c_want = std::vector<float>(size_t(M) * N, 0.f);
  WsMatmul(unsigned seed_a, unsigned seed_b) {
    Buf<int32_t> ai = random_buf<int32_t>(size_t(M) * K, seed_a, -3, 3), bi = random_buf<int32_t>(size_t(K) * N, seed_b, -3, 3);
    for (size_t t = 0; t < ai.size(); ++t) a.data()[t] = bf16(float(ai[t]));
    for (size_t t = 0; t < bi.size(); ++t) b.data()[t] = bf16(float(bi[t]));
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j)
        for (int q = 0; q < K; ++q) c_want[size_t(i) * N + j] += float(ai[size_t(i) * K + q] * bi[size_t(q) * N + j]);
  }
};
}  // namespace

TEST_CASE("ptx: a tuple scan and a sort before a warp-specialized K loop assemble", "[ptx]") {
  alignas(16) static char buf[64];
  auto* pb = reinterpret_cast<bf16*>(buf);
  auto* pf = reinterpret_cast<float*>(buf);
  auto* pu = reinterpret_cast<uint32_t*>(buf);
  auto scan = make_scan_before_ws_loop();
  check_before_ws_ptx("scan_before_ws", [&](const Grid& g) {
    return scan.ptx(90, g, pb, pb, pf, pu, pu, pu, 128, 128, 256, 128, 128, 64, 2048);
  });
  // The sort's items are taken by the compute warps alone (for_each_item).
  auto sort = make_sort_before_ws_loop();
  check_before_ws_ptx("sort_before_ws", [&](const Grid& g) {
    return sort.ptx(90, g, pb, pb, pf, pu, pu, 128, 128, 256, 128, 128, 64, 4096);
  });
}

TEST_CASE("gpu: a tuple scan before a warp-specialized K loop (its producer warps run the scan too)", "[.gpu]") {
  if (!gpu_info()) {
    WARN("no usable GPU: [.gpu] case skipped");
    return;
  }
  auto k = make_scan_before_ws_loop();
  const WsMatmul mm(73, 74);
  const int M = mm.M, N = mm.N, K = mm.K, L = 2048;
  Buf<uint32_t> ra = random_full<uint32_t>(L, 71), rb = random_full<uint32_t>(L, 72);
  std::vector<uint32_t> want(2 * size_t(L));
  std::pair<uint32_t, uint32_t> st{ra[0], rb[0]};
  for (int i = 0; i < L; ++i) {
    if (i) st = rec(st, {ra[size_t(i)], rb[size_t(i)]});
    want[size_t(i)] = st.first, want[size_t(L + i)] = st.second;
  }
  ManagedBuffer<uint32_t> sa(L), sb(L);
  for (int i = 0; i < L; ++i) sa.data()[i] = ra[size_t(i)], sb.data()[i] = rb[size_t(i)];
  for (int warps : {4, 8}) {
    CAPTURE(warps);
    ManagedBuffer<float> c(size_t(M) * N, -1.f);
    ManagedBuffer<uint32_t> out(2 * size_t(L), 0);
    Grid g(1, 1);
    g.with_warps(warps).with_stages(3).backend(Backend::GPU);
    k(g, mm.a.data(), mm.b.data(), c.data(), sa.data(), sb.data(), out.data(), M, N, K, 128, 128, 64, L);
    synchronize();
    CHECK(diffs(std::vector<uint32_t>(out.data(), out.data() + 2 * L), want) == "");
    CHECK(diffs(std::vector<float>(c.data(), c.data() + M * N), mm.c_want) == "");
  }
}

TEST_CASE("gpu: a sort before a warp-specialized K loop (its producer warps take no sort items)", "[.gpu]") {
  if (!gpu_info()) {
    WARN("no usable GPU: [.gpu] case skipped");
    return;
  }
  auto k = make_sort_before_ws_loop();
  const WsMatmul mm(75, 76);
  const int M = mm.M, N = mm.N, K = mm.K;
  for (int L : {1024, 4096}) {
    Buf<uint32_t> kv = random_full<uint32_t>(size_t(L), 77 + L);
    std::vector<uint32_t> want(kv.begin(), kv.end());
    std::sort(want.begin(), want.end(), std::greater<uint32_t>());
    ManagedBuffer<uint32_t> keys(static_cast<size_t>(L));
    for (int i = 0; i < L; ++i) keys.data()[i] = kv[size_t(i)];
    for (int warps : {4, 8}) {
      CAPTURE(L, warps);
      ManagedBuffer<float> c(size_t(M) * N, -1.f);
      ManagedBuffer<uint32_t> out(size_t(L), 0);
      Grid g(1, 1);
      g.with_warps(warps).with_stages(3).backend(Backend::GPU);
      k(g, mm.a.data(), mm.b.data(), c.data(), keys.data(), out.data(), M, N, K, 128, 128, 64, L);
      synchronize();
      CHECK(diffs(std::vector<uint32_t>(out.data(), out.data() + L), want) == "");
      CHECK(diffs(std::vector<float>(c.data(), c.data() + M * N), mm.c_want) == "");
    }
  }
}
