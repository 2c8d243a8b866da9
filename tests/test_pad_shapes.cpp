// tests/test_pad_shapes.cpp - tiles whose dims are not powers of two on the GPU: the pad_shapes
// pass (src/passes/gpu/pad_shapes.cpp) on the IR ([gpu-pad]), the PTX of kernels over ragged
// tiles assembled by ptxas at 1, 4 and 8 warps ([ptx]), and their results against C++ references:
// [ops] (CPU here, TLE_TEST_BACKEND=interp / gpu mirrored) and [.gpu] (the GPU backend forced at
// 1, 4 and 8 warps, on the GPU machine).
#include <catch2/catch.hpp>

#include <tle/tle.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "error_util.hpp"
#include "interp/interp.hpp"
#include "ir/ir.hpp"
#include "ops_util.hpp"
#include "passes/gpu/gpu_passes.hpp"
#include "passes/pass.hpp"
#include "ptxas_util.hpp"
#include "trace_util.hpp"

using namespace tle;
using tracetest::ops_of;

namespace {

int line = 0;

template <class T> T* fake(uintptr_t a = 0x10000) { return reinterpret_cast<T*>(a); }

// ------------------------------------------------------------------------------------ kernels

/// Every op the padding touches on a 1-D tile of N elements. x in [-2, -1], so padding that leaked
/// in (a pad lane holds 0 after a masked load, 1 after the + 1) would change each result.
/// of: [0, N) x * 2, [N, 2N) cumsum(x), [2N, 3N) reverse cumsum(x + 1), 3N sum(x + 1),
///     3N + 1 max(x), 3N + 2 min(-x), 3N + 3 sum of reshape(x, [1, N]) along 1.
/// oi: 0 argmax(x), 1 argmin(-x), 2 reduce(y, a + b + 1), [3, 3 + N) its reverse scan,
///     [3 + N, 8 + N) histogram(y & 7, 5), [8 + N, 11 + N) atomic counts of i % 3.
const auto pad_1d_fn = [](Ptr<float> x, Ptr<int32_t> y, Ptr<float> of, Ptr<int32_t> oi, Constexpr<int> N) {
    auto plus1 = [](Tile<int32_t> a, Tile<int32_t> b) { return a + b + 1; };
    Tile<int32_t> o = arange(0, N);
    Tile<float> xv = load(x + o);
    Tile<int32_t> yv = load(y + o);
    store(of + o, xv * 2.0f);
    store(of + N + o, cumsum(xv, 0));
    store(of + 2 * N + o, cumsum(xv + 1.0f, 0, true));
    store(of + 3 * N, sum(xv + 1.0f, 0));
    store(of + 3 * N + 1, max(xv, 0));
    store(of + 3 * N + 2, min(-xv, 0));
    store(of + 3 * N + 3 + arange(0, 1), sum(reshape(xv, {1, N}), 1));
    store(oi, argmax(xv, 0));
    store(oi + 1, argmin(-xv, 0));
    store(oi + 2, reduce(yv, 0, plus1));
    store(oi + 3 + o, associative_scan(yv, 0, plus1, true));
    store(oi + 3 + N + arange(0, 5), histogram(yv & 7, 5));
    (void)atomic_add(oi + 8 + N + o % 3, 1);
};
auto pad_1d() { return jit("pad_1d", pad_1d_fn); }

/// User combines over a padded dim that only the "real" flag operand keeps exact: an i64 combine
/// (p + q + 1: every pad that leaked in would add one) and the two-tile linear recurrence
/// (a1, b1) o (a2, b2) = (a1 a2, a2 b1 + b2) on u32 (not commutative), reduced and reverse-scanned.
/// o64: [0] reduce(z, p + q + 1). o32: [0] [1] the recurrence reduced, [2, 2 + N) its reverse scan's
/// a, [2 + N, 2 + 2N) its b.
const auto pad_tuple_fn = [](Ptr<int64_t> z, Ptr<uint32_t> a, Ptr<uint32_t> b, Ptr<int64_t> o64, Ptr<uint32_t> o32,
                             Constexpr<int> N) {
    auto rec = [](auto l, auto r) {
      auto [a1, b1] = l;
      auto [a2, b2] = r;
      return std::tuple{a1 * a2, a2 * b1 + b2};
    };
    Tile<int32_t> o = arange(0, N);
    store(o64, reduce(load(z + o), 0, [](Tile<int64_t> p, Tile<int64_t> q) { return p + q + 1; }));
    Tile<uint32_t> av = load(a + o), bv = load(b + o);
    auto [ra, rb] = reduce(std::tuple{av, bv}, 0, rec);
    store(o32, ra);
    store(o32 + 1, rb);
    auto [sa, sb] = associative_scan(std::tuple{av, bv}, 0, rec, true);
    store(o32 + 2 + o, sa);
    store(o32 + 2 + N + o, sb);
};
auto pad_tuple() { return jit("pad_tuple", pad_tuple_fn); }

/// sort, topk and gather over a padded [N] (N >= 3): pad lanes must sort last in both directions
/// (x holds ties and values above and below the 0 a pad lane reads), and an index into the
/// padding must read 0 (out of range), not a pad.
/// of: [0, N) sort ascending, [N, 2N) descending, [2N, 2N + 3) topk(3), [2N + 3, 3N + 3) gather(x, g).
/// oi: [0, N) argsort ascending, [N, 2N) descending, [2N, 2N + 3) topk's indices.
const auto pad_sort_fn = [](Ptr<float> x, Ptr<int32_t> g, Ptr<float> of, Ptr<int32_t> oi, Constexpr<int> N) {
    Tile<int32_t> o = arange(0, N), k3 = arange(0, 3);
    Tile<float> xv = load(x + o);
    auto up = sort_with_indices(xv, 0);
    auto down = sort_with_indices(xv, 0, true);
    auto top = topk(xv, 3);
    store(of + o, up.values);
    store(of + N + o, down.values);
    store(of + 2 * N + k3, top.values);
    store(of + 2 * N + 3 + o, gather(xv, load(g + o), 0));
    store(oi + o, up.indices);
    store(oi + N + o, down.indices);
    store(oi + 2 * N + k3, top.indices);
};
auto pad_sort() { return jit("pad_sort", pad_sort_fn); }

/// Reductions along each dim of an [R, C] tile (x, y row-major R x C).
/// of: [0, RC) x * 2, [RC, 2RC) reverse cumsum(x + 1) along 1, [2RC, 3RC) the same along 0,
///     3RC + [0, R) max along 1, + R + [0, C) max along 0, + R + C + [0, R) sum(x + 1) along 1.
/// oi: [0, R) argmax along 1, R + [0, C) argmax along 0, R + C + [0, R) reduce(y, a + b + 1)
///     along 1, 2R + C + [0, C) the same along 0.
const auto pad_2d_fn = [](Ptr<float> x, Ptr<int32_t> y, Ptr<float> of, Ptr<int32_t> oi, Constexpr<int> R,
                          Constexpr<int> C) {
    auto plus1 = [](Tile<int32_t> a, Tile<int32_t> b) { return a + b + 1; };
    Tile<int32_t> ri = arange(0, R), cj = arange(0, C);
    Tile<int32_t> off = expand_dims(ri, 1) * C + expand_dims(cj, 0);
    Tile<float> xv = load(x + off);
    Tile<int32_t> yv = load(y + off);
    const int RC = R * C;
    store(of + off, xv * 2.0f);
    store(of + RC + off, cumsum(xv + 1.0f, 1, true));
    store(of + 2 * RC + off, cumsum(xv + 1.0f, 0, true));
    store(of + 3 * RC + ri, max(xv, 1));
    store(of + 3 * RC + R + cj, max(xv, 0));
    store(of + 3 * RC + R + C + ri, sum(xv + 1.0f, 1));
    store(oi + ri, argmax(xv, 1));
    store(oi + R + cj, argmax(xv, 0));
    store(oi + R + C + ri, reduce(yv, 1, plus1));
    store(oi + 2 * R + C + cj, reduce(yv, 0, plus1));
};
auto pad_2d() { return jit("pad_2d", pad_2d_fn); }

/// c = (a + 1) @ (b + 1) for a [M, K], b [K, N] row-major: a padded K lane that were not zeroed
/// would add (0 + 1) * (0 + 1) per pad.
template <class T>
const auto pad_dot_fn = [](Ptr<T> a, Ptr<T> b, Ptr<float> c, Constexpr<int> M, Constexpr<int> K, Constexpr<int> N) {
    Tile<int32_t> m = expand_dims(arange(0, M), 1), k0 = expand_dims(arange(0, K), 0);
    Tile<int32_t> k1 = expand_dims(arange(0, K), 1), n = expand_dims(arange(0, N), 0);
    Tile<T> av = load(a + m * K + k0) + 1.0f;
    Tile<T> bv = load(b + k1 * N + n) + 1.0f;
    store(c + m * N + n, dot(av, bv));
};
template <class T> auto pad_dot() { return jit("pad_dot", pad_dot_fn<T>); }

/// reshape [R, C] -> [R * C] -> [C, R] of an i32 tile, both stored row-major after each other (each
/// equals x): with ragged dims the padded positions differ, so the GPU moves the elements.
const auto pad_reshape_fn = [](Ptr<int32_t> x, Ptr<int32_t> out, Constexpr<int> R, Constexpr<int> C) {
    Tile<int32_t> off = expand_dims(arange(0, R), 1) * C + expand_dims(arange(0, C), 0);
    Tile<int32_t> flat = reshape(load(x + off), {R * C});
    store(out + arange(0, R * C), flat);
    Tile<int32_t> t = reshape(flat + 1, {C, R});
    store(out + R * C + expand_dims(arange(0, C), 1) * R + expand_dims(arange(0, R), 0), t);
};
auto pad_reshape() { return jit("pad_reshape", pad_reshape_fn); }

// --------------------------------------------------------------------------- runs and references

/// Where a check runs: on a backend (none: the test backend) with `warps`, or (padded_interp) the
/// kernel's pad_shapes output on the reference interpreter, allowed to touch nothing but the
/// buffers: the pass's IR alone must compute the references, pad lanes masked.
struct How {
  std::optional<Backend> b;
  int warps = 4;
  bool padded_interp = false;
};

struct Bytes {
  void* p;
  size_t n;
};
template <class T> Bytes bytes(const ManagedBuffer<T>& m) { return {m.data(), m.size() * sizeof(T)}; }

/// Runs `call` on a Grid(1) for `how`, or traces `fn` (constexprs `cx`, pointer arguments `bufs`
/// in order), pads it and runs it on the interpreter.
template <class F>
void launch(const How& how, const F& fn, const char* name, std::vector<int64_t> cx, std::vector<Bytes> bufs,
            const std::function<void(Grid)>& call) {
  if (!how.padded_interp) {
    Grid g = Grid(1).with_warps(how.warps);
    if (how.b) g.backend(*how.b);
    call(g);
    synchronize();
    return;
  }
  auto f = tracetest::trace(name, fn, std::move(cx), true, false);
  passes::pad_shapes(*f);
  INFO(ir::print(*f));
  REQUIRE_NOTHROW(ir::verify(*f));
  std::vector<void*> ptrs;
  for (auto& b : bufs) ptrs.push_back(b.p);
  std::vector<void*> args;
  for (auto& p : ptrs) args.push_back(&p);
  interp::Options o;
  o.check_access = [&](uintptr_t a, size_t n, bool) {
    for (auto& b : bufs)
      if (a >= reinterpret_cast<uintptr_t>(b.p) && a + n <= reinterpret_cast<uintptr_t>(b.p) + b.n) return true;
    return false;
  };
  const int64_t one[3] = {1, 1, 1};
  interp::run(*f, args.data(), one, o);
}

template <class T> std::vector<T> host(const ManagedBuffer<T>& m) { return std::vector<T>(m.data(), m.data() + m.size()); }
template <class T> void fill(ManagedBuffer<T>& m, const opstest::Buf<T>& v) { std::copy(v.begin(), v.end(), m.data()); }

int first_max(const float* v, int n, int stride) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (v[i * stride] > v[best * stride]) best = i;
  return best;
}

void check_1d(int N, const How& how) {
  INFO("[" << N << "] warps " << how.warps << (how.padded_interp ? " padded IR on the interpreter" : ""));
  static auto k = pad_1d();
  ManagedBuffer<float> x(N), of(3 * N + 4, -7.0f);
  ManagedBuffer<int32_t> y(N), oi(11 + N, 0);
  fill(x, opstest::random_buf<float>(N, 11, -2, -1));
  fill(y, opstest::random_buf<int32_t>(N, 12, -100, 100));
  launch(how, pad_1d_fn, "pad_1d", {N}, {bytes(x), bytes(y), bytes(of), bytes(oi)},
         [&](Grid g) { k(g, x.data(), y.data(), of.data(), oi.data(), N); });
  std::vector<float> wf(3 * N + 4);
  std::vector<int32_t> wi(11 + N, 0);
  double run = 0, s1 = 0;
  float mx = x[0], mn = -x[0];
  for (int i = 0; i < N; ++i) {
    wf[i] = x[i] * 2.0f;
    run += x[i];
    wf[N + i] = float(run);
    s1 += x[i] + 1.0f;
    mx = std::max(mx, x[i]), mn = std::min(mn, -x[i]);
  }
  double back = 0;
  for (int i = N - 1; i >= 0; --i) wf[2 * N + i] = float(back += x[i] + 1.0f);
  wf[3 * N] = float(s1), wf[3 * N + 1] = mx, wf[3 * N + 2] = mn, wf[3 * N + 3] = float(run);
  wi[0] = wi[1] = first_max(x.data(), N, 1);  // argmin(-x) is argmax(x)
  int64_t ys = 0;
  for (int i = 0; i < N; ++i) ys += y[i];
  wi[2] = int32_t(ys + N - 1);
  int64_t tail = 0;
  for (int i = N - 1; i >= 0; --i) {
    tail += y[i];
    wi[3 + i] = int32_t(tail + (N - 1 - i));
  }
  for (int i = 0; i < N; ++i) {
    int v = y[i] & 7;
    if (v < 5) ++wi[3 + N + v];
    ++wi[8 + N + i % 3];
  }
  auto gf = host(of);
  auto gi = host(oi);
  CHECK(opstest::diffs(std::vector<float>(gf.begin(), gf.begin() + N), std::vector<float>(wf.begin(), wf.begin() + N)) == "");
  CHECK(opstest::diffs(gf, wf, 1e-5, 1e-4) == "");
  CHECK(gf[3 * N + 1] == mx);
  CHECK(gf[3 * N + 2] == mn);
  CHECK(opstest::diffs(gi, wi) == "");
}

void check_sort(int N, const How& how) {
  INFO("sort [" << N << "] warps " << how.warps << (how.padded_interp ? " padded IR on the interpreter" : ""));
  static auto k = pad_sort();
  ManagedBuffer<float> x(N), of(3 * N + 3, -7.0f);
  ManagedBuffer<int32_t> g(N), oi(2 * N + 3, -1);
  for (int i = 0; i < N; ++i) {
    x[i] = float((i * 7) % 5) - 2.0f;  // -2..2 with ties; pads (0 after a masked load) tie with the zeros
    g[i] = i % 4 == 0 ? N + i % 3 : i % 4 == 1 ? -1 - i : (i * 5) % N;  // into the padding, negative, real
  }
  launch(how, pad_sort_fn, "pad_sort", {N}, {bytes(x), bytes(g), bytes(of), bytes(oi)},
         [&](Grid gr) { k(gr, x.data(), g.data(), of.data(), oi.data(), N); });
  std::vector<int> up(N), down(N);
  std::iota(up.begin(), up.end(), 0);
  std::iota(down.begin(), down.end(), 0);
  std::stable_sort(up.begin(), up.end(), [&](int a, int b) { return x[a] < x[b]; });
  std::stable_sort(down.begin(), down.end(), [&](int a, int b) { return x[a] > x[b]; });
  for (int i = 0; i < N; ++i) {
    INFO("position " << i);
    CHECK(oi[i] == up[i]);
    CHECK(of[i] == x[up[i]]);
    CHECK(oi[N + i] == down[i]);
    CHECK(of[N + i] == x[down[i]]);
    const int gi = g[i];
    CHECK(of[2 * N + 3 + i] == (gi >= 0 && gi < N ? x[gi] : 0.0f));
  }
  for (int j = 0; j < 3 && j < N; ++j) {
    CHECK(oi[2 * N + j] == down[j]);
    CHECK(of[2 * N + j] == x[down[j]]);
  }
}

void check_tuple(int N, const How& how) {
  INFO("tuple [" << N << "] warps " << how.warps << (how.padded_interp ? " padded IR on the interpreter" : ""));
  static auto k = pad_tuple();
  ManagedBuffer<int64_t> z(N), o64(1, 0);
  ManagedBuffer<uint32_t> a(N), b(N), o32(2 + 2 * N, 0);
  for (int i = 0; i < N; ++i) {
    z[i] = (int64_t(i) << 33) - 7 * i;  // beyond 32 bits
    a[i] = 2654435761u * uint32_t(i + 1) | 1u, b[i] = 40503u * uint32_t(i) + 17u;
  }
  launch(how, pad_tuple_fn, "pad_tuple", {N}, {bytes(z), bytes(a), bytes(b), bytes(o64), bytes(o32)},
         [&](Grid g) { k(g, z.data(), a.data(), b.data(), o64.data(), o32.data(), N); });
  int64_t zs = z[0];
  for (int i = 1; i < N; ++i) zs = zs + z[i] + 1;
  CHECK(o64[0] == zs);
  uint32_t ra = a[0], rb = b[0];
  for (int i = 1; i < N; ++i) rb = a[i] * rb + b[i], ra = ra * a[i];
  CHECK(o32[0] == ra);
  CHECK(o32[1] == rb);
  // reverse: element i = x[N-1] o ... o x[i] (the accumulated higher indices on the left)
  uint32_t sa = a[N - 1], sb = b[N - 1];
  for (int i = N - 1; i >= 0; --i) {
    if (i < N - 1) sb = a[i] * sb + b[i], sa = sa * a[i];
    INFO("reverse scan element " << i);
    CHECK(o32[2 + i] == sa);
    CHECK(o32[2 + N + i] == sb);
  }
}

void check_2d(int R, int C, const How& how) {
  INFO("[" << R << ", " << C << "] warps " << how.warps << (how.padded_interp ? " padded IR on the interpreter" : ""));
  static auto k = pad_2d();
  const int RC = R * C;
  ManagedBuffer<float> x(RC), of(3 * RC + 2 * R + C, -7.0f);
  ManagedBuffer<int32_t> y(RC), oi(2 * R + 2 * C, 0);
  fill(x, opstest::random_buf<float>(RC, 21, -2, -1));
  fill(y, opstest::random_buf<int32_t>(RC, 22, -100, 100));
  launch(how, pad_2d_fn, "pad_2d", {R, C}, {bytes(x), bytes(y), bytes(of), bytes(oi)},
         [&](Grid g) { k(g, x.data(), y.data(), of.data(), oi.data(), R, C); });
  std::vector<float> wf(3 * RC + 2 * R + C);
  std::vector<int32_t> wi(2 * R + 2 * C);
  for (int r = 0; r < R; ++r) {
    double back = 0, s = 0;
    for (int c = C - 1; c >= 0; --c) wf[RC + r * C + c] = float(back += x[r * C + c] + 1.0f);
    for (int c = 0; c < C; ++c) wf[r * C + c] = x[r * C + c] * 2.0f, s += x[r * C + c] + 1.0f;
    int am = first_max(x.data() + r * C, C, 1);
    wf[3 * RC + r] = x[r * C + am];
    wf[3 * RC + R + C + r] = float(s);
    wi[r] = am;
    int64_t ys = 0;
    for (int c = 0; c < C; ++c) ys += y[r * C + c];
    wi[R + C + r] = int32_t(ys + C - 1);
  }
  for (int c = 0; c < C; ++c) {
    double back = 0;
    for (int r = R - 1; r >= 0; --r) wf[2 * RC + r * C + c] = float(back += x[r * C + c] + 1.0f);
    int am = first_max(x.data() + c, R, C);
    wf[3 * RC + R + c] = x[am * C + c];
    wi[R + c] = am;
    int64_t ys = 0;
    for (int r = 0; r < R; ++r) ys += y[r * C + c];
    wi[2 * R + C + c] = int32_t(ys + R - 1);
  }
  auto gf = host(of);
  auto gi = host(oi);
  CHECK(opstest::diffs(gf, wf, 1e-4, 1e-3) == "");
  for (int i = 3 * RC; i < 3 * RC + R + C; ++i) CHECK(gf[size_t(i)] == wf[size_t(i)]);  // max: exact
  CHECK(opstest::diffs(gi, wi) == "");
}

template <class T> void check_dot(int M, int K, int N, const How& how) {
  INFO("dot " << M << "x" << K << "x" << N << " warps " << how.warps << (how.padded_interp ? " padded IR" : ""));
  static auto k = pad_dot<T>();
  ManagedBuffer<T> a(size_t(M) * K), bm(size_t(K) * N);
  ManagedBuffer<float> c(size_t(M) * N, -7.0f);
  // Multiples of 1/8 in [-1, 1]: a + 1, b + 1 and every product and sum are exact in f16 / f32.
  auto ra = opstest::random_buf<int32_t>(a.size(), 31, -8, 8), rb = opstest::random_buf<int32_t>(bm.size(), 32, -8, 8);
  for (size_t i = 0; i < a.size(); ++i) a[i] = T(float(ra[i]) / 8);
  for (size_t i = 0; i < bm.size(); ++i) bm[i] = T(float(rb[i]) / 8);
  launch(how, pad_dot_fn<T>, "pad_dot", {M, K, N}, {bytes(a), bytes(bm), bytes(c)},
         [&](Grid g) { k(g, a.data(), bm.data(), c.data(), M, K, N); });
  std::vector<float> w(size_t(M) * N);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double s = 0;
      for (int q = 0; q < K; ++q)
        s += (double(ra[size_t(i * K + q)]) / 8 + 1) * (double(rb[size_t(q * N + j)]) / 8 + 1);
      w[size_t(i * N + j)] = float(s);
    }
  CHECK(opstest::diffs(host(c), w) == "");
}

void check_reshape(int R, int C, const How& how) {
  INFO("reshape [" << R << ", " << C << "] warps " << how.warps << (how.padded_interp ? " padded IR" : ""));
  static auto k = pad_reshape();
  const int RC = R * C;
  ManagedBuffer<int32_t> x(RC), out(2 * RC + 1, -7);
  fill(x, opstest::random_full<int32_t>(RC, 41));
  launch(how, pad_reshape_fn, "pad_reshape", {R, C}, {bytes(x), bytes(out)},
         [&](Grid g) { k(g, x.data(), out.data(), R, C); });
  std::vector<int32_t> w(2 * RC + 1, -7);
  for (int i = 0; i < RC; ++i) w[i] = x[i], w[RC + i] = int32_t(uint32_t(x[i]) + 1u);
  CHECK(opstest::diffs(host(out), w) == "");
}

const std::pair<int, int> kReshapes[] = {{3, 5}, {5, 3}, {17, 33}, {4, 1001}, {1, 100}, {24, 1}};

const int kShapes1d[] = {3, 5, 24, 48, 96, 100, 160, 1, 17, 1001};
const std::pair<int, int> kShapes2d[] = {{32, 3}, {3, 5}, {17, 1001}, {1, 100}, {100, 1}};

/// Whether pad_2d's tiles, padded, fit check_tile_registers (kMaxTileRegs per thread) at `warps`:
/// its pointer tiles take two registers per element, so [17, 1001] (padded [32, 1024]) needs 2048
/// registers per thread on 1 warp.
bool fits_warps(int R, int C, int warps) {
  int64_t p = 1, q = 1;
  while (p < R) p *= 2;
  while (q < C) q *= 2;
  return p * q * 2 / (32 * warps) <= passes::kMaxTileRegs;
}

/// Traces `fn` (constexprs `cx`), runs the generic pipeline, then pad_shapes; the result verifies.
template <class F> std::unique_ptr<ir::Function> padded(const char* name, F fn, std::vector<int64_t> cx) {
  auto f = tracetest::trace(name, fn, std::move(cx), true, false);
  passes::pad_shapes(*f);
  INFO(ir::print(*f));
  REQUIRE_NOTHROW(ir::verify(*f));
  return f;
}

bool all_pow2(const ir::Function& f) {
  bool ok = true;
  auto check = [&](const ir::Value* v) {
    for (auto d : v->type.shape) ok = ok && d > 0 && (d & (d - 1)) == 0;
  };
  ir::walk(f.entry(), [&](const ir::Op& op) {
    for (auto& r : op.results) check(r.get());
    for (auto& reg : op.regions)
      for (auto& a : reg->body().args) check(a.get());
  });
  return ok;
}

}  // namespace

// ================================================================================ the pass, IR

TEST_CASE("pad_shapes: aranges, loads and stores of a [100] tile get the padded type and the real mask",
          "[gpu-pad]") {
  auto f = padded("pad_store", [](Ptr<float> x, Ptr<float> y, Constexpr<int> N) {
    Tile<int32_t> o = arange(0, N);
    store(y + o, load(x + o) * 2.0f);
  }, {100});
  CHECK(all_pow2(*f));
  const std::string text = ir::print(*f);
  CHECK_THAT(text, Catch::Contains("arange {end=128, start=0} : i32[128]"));
  CHECK_THAT(text, Catch::Contains("constant {value=100} : i32[128]"));
  auto loads = ops_of(*f, ir::OpKind::Load);
  auto stores = ops_of(*f, ir::OpKind::Store);
  REQUIRE(loads.size() == 1);
  REQUIRE(stores.size() == 1);
  REQUIRE(loads[0]->operands.size() == 2);   // mask added
  REQUIRE(stores[0]->operands.size() == 3);
  CHECK(loads[0]->operands[1] == stores[0]->operands[2]);  // one real mask per shape
  CHECK(loads[0]->operands[1]->def->kind == ir::OpKind::Compare);
  CHECK(loads[0]->result()->type.shape == ir::Shape{128});
  // The layout pass accepts the result.
  passes::assign_layouts(*f, 4);
  passes::verify_layouts(*f, 4);
}

TEST_CASE("pad_shapes: a user mask is and-ed with the real mask, 2-D masks broadcast per padded dim", "[gpu-pad]") {
  auto f = padded("pad_mask", [](Ptr<float> x, Ptr<float> y, Tile<int32_t> n, Constexpr<int> R, Constexpr<int> C) {
    Tile<int32_t> off = expand_dims(arange(0, R), 1) * C + expand_dims(arange(0, C), 0);
    store(y + off, load(x + off, off < n, 1.0f), off < n);
  }, {32, 3});
  CHECK(all_pow2(*f));
  auto loads = ops_of(*f, ir::OpKind::Load);
  REQUIRE(loads.size() == 1);
  REQUIRE(loads[0]->operands.size() == 3);
  const ir::Op* m = loads[0]->operands[1]->def;
  REQUIRE(m->kind == ir::OpKind::Binary);
  CHECK(m->enum_attr<ir::BinaryOp>("op") == ir::BinaryOp::And);
  CHECK(loads[0]->result()->type.shape == ir::Shape{32, 4});
  // Only dim 1 is padded: its predicate [4] is reshaped to [1, 4] and broadcast.
  CHECK_THAT(ir::print(*f), Catch::Contains(": (i1[4]) -> i1[1,4]") && Catch::Contains(": (i1[1,4]) -> i1[32,4]"));
}

TEST_CASE("pad_shapes: reductions select their identity, combines carry a flag, forward scans are left alone",
          "[gpu-pad]") {
  auto f = padded("pad_reduce", [](Ptr<float> x, Ptr<int32_t> y, Ptr<float> o, Ptr<int32_t> oi, Constexpr<int> N) {
    Tile<int32_t> r = arange(0, N);
    Tile<float> v = load(x + r);
    Tile<int32_t> w = load(y + r);
    store(o, max(v, 0));
    store(o + 1, sum(v, 0));
    store(oi, argmin(v, 0));
    store(oi + 1, min(w, 0));
    store(oi + 2, reduce(w, 0, [](Tile<int32_t> a, Tile<int32_t> b) { return a * b; }));
    store(o + 2 + r, cumsum(v, 0));
    store(o + 2 + N + r, cumsum(v, 0, true));
  }, {24});
  CHECK(all_pow2(*f));
  std::vector<const ir::Op*> reduces = ops_of(*f, ir::OpKind::Reduce), scans = ops_of(*f, ir::OpKind::Scan);
  REQUIRE(reduces.size() == 5);
  REQUIRE(scans.size() == 2);
  auto identity = [](const ir::Op* op) -> std::optional<ir::Attr> {
    const ir::Op* s = op->operands[0]->def;
    if (!s || s->kind != ir::OpKind::Select) return std::nullopt;
    return s->operands[2]->def->attrs.at("value");
  };
  for (const ir::Op* op : reduces) {
    auto k = op->enum_attr<ir::ReduceKind>("kind");
    INFO("reduce kind " << ir::name(k));
    if (k == ir::ReduceKind::Combine) {  // one more operand and result: the "element is real" flag
      REQUIRE(op->operands.size() == 2);
      CHECK(op->operands[1]->type.dtype == DType::i1);
      REQUIRE(op->region().body().args.size() == 4);  // (a, a_real, b, b_real)
      CHECK(op->region().body().arg(0)->type.dtype == DType::i32);
      CHECK(op->region().body().arg(1)->type.dtype == DType::i1);
      CHECK(op->region().body().arg(3)->type.dtype == DType::i1);
      CHECK(op->result()->type.dtype == DType::i32);
      CHECK(op->results.size() == 2);
      continue;
    }
    auto id = identity(op);
    REQUIRE(id);
    if (k == ir::ReduceKind::Max) CHECK(std::get<double>(*id) == -INFINITY);
    if (k == ir::ReduceKind::Argmin) CHECK(std::get<double>(*id) == INFINITY);
    if (k == ir::ReduceKind::Sum) CHECK(std::signbit(std::get<double>(*id)));  // -0.0: x + -0.0 == x
    if (k == ir::ReduceKind::Min) CHECK(std::get<int64_t>(*id) == INT32_MAX);
  }
  for (const ir::Op* op : scans) {
    INFO("scan reverse " << op->int_attr("reverse"));
    CHECK(identity(op).has_value() == (op->int_attr("reverse") == 1));
  }
}

TEST_CASE("pad_shapes: a dot over a padded K zeroes both operands' pad lanes", "[gpu-pad]") {
  auto f = padded("pad_dotk", [](Ptr<float> a, Ptr<float> c) {
    Tile<int32_t> m = expand_dims(arange(0, 16), 1), k = expand_dims(arange(0, 24), 0);
    Tile<float> t = load(a + m * 24 + k);  // [16, 24]
    store(c + m * 16 + expand_dims(arange(0, 16), 0), dot(t, trans(t)));
  }, {});
  auto dots = ops_of(*f, ir::OpKind::Dot);
  REQUIRE(dots.size() == 1);
  CHECK(dots[0]->operands[0]->type.shape == ir::Shape{16, 32});
  for (int i : {0, 1}) {
    const ir::Op* s = dots[0]->operands[i]->def;
    REQUIRE(s->kind == ir::OpKind::Select);
    CHECK(std::get<double>(s->operands[2]->def->attrs.at("value")) == 0.0);
  }
}

TEST_CASE("pad_shapes: atomic_cas and histogram get the mask, bins are padded", "[gpu-pad]") {
  auto f = padded("pad_cas", [](Ptr<int32_t> p, Ptr<int32_t> h) {
    Tile<int32_t> r = arange(0, 17);
    store(p + r, atomic_cas(p + r, r, r + 1));
    store(h + arange(0, 5), histogram(load(p + r), 5));
  }, {});
  auto cas = ops_of(*f, ir::OpKind::AtomicCas);
  REQUIRE(cas.size() == 1);
  CHECK(cas[0]->operands.size() == 4);
  auto hist = ops_of(*f, ir::OpKind::Histogram);
  REQUIRE(hist.size() == 1);
  CHECK(hist[0]->operands.size() == 2);
  CHECK(hist[0]->int_attr("bins") == 8);
}

TEST_CASE("pad_shapes: power-of-two kernels are not changed", "[gpu-pad]") {
  auto f = tracetest::trace("pad_none", [](Ptr<float> x, Constexpr<int> N) {
    Tile<int32_t> o = arange(0, N);
    store(x + o, cumsum(load(x + o), 0, true));
  }, {128}, true, false);
  const std::string before = ir::print(*f);
  CHECK_FALSE(passes::pad_shapes(*f));
  CHECK(ir::print(*f) == before);
}

TEST_CASE("pad_shapes: reshapes that move padded positions are marked with their real shapes", "[gpu-pad]") {
  // [1, 100] <-> [100] and [3, 1] -> [3]: the padded orders agree.
  auto ok = padded("pad_reshape_ok", [](Ptr<float> x) {
    Tile<int32_t> o = arange(0, 100);
    Tile<float> v = reshape(load(x + o), {1, 100});
    store(x + o, reshape(v * 2.0f, {100}));
    Tile<int32_t> t = arange(0, 3);
    store(x + t, reshape(expand_dims(load(x + t), 1), {3}));
  }, {});
  CHECK(all_pow2(*ok));
  for (const ir::Op* op : ops_of(*ok, ir::OpKind::Reshape)) CHECK_FALSE(op->has_attr("real_in"));
  // [3, 5] -> [15]: element (1, 0) is at 5 in the result but at 8 in the padded operand.
  auto moved = padded("pad_reshape_moved", [](Ptr<float> x) {
    Tile<int32_t> o = expand_dims(arange(0, 3), 1) * 5 + expand_dims(arange(0, 5), 0);
    store(x + arange(0, 15), reshape(load(x + o), {15}));
  }, {});
  std::vector<const ir::Op*> rs;  // the real-mask builders reshape too: [8] -> [1, 8]
  for (const ir::Op* op : ops_of(*moved, ir::OpKind::Reshape))
    if (op->has_attr("real_in")) rs.push_back(op);
  REQUIRE(rs.size() == 1);
  CHECK(rs[0]->ints_attr("real_in") == std::vector<int64_t>{3, 5});
  CHECK(rs[0]->ints_attr("real_out") == std::vector<int64_t>{15});
  CHECK(rs[0]->operands[0]->type.shape == ir::Shape{4, 8});
  CHECK(rs[0]->result()->type.shape == ir::Shape{16});
  passes::assign_layouts(*moved, 4);  // operand and result take any layouts
  passes::verify_layouts(*moved, 4);
  // Pointer tiles are not moved: a UserError at the reshape.
  auto bad = tracetest::trace("pad_reshape_ptr", [](Ptr<float> x) {
    Ptr<float> p = x + expand_dims(arange(0, 3), 1) * 5 + expand_dims(arange(0, 5), 0);
    line = __LINE__; Ptr<float> flat = reshape(p, {15});
    store(flat, 1.0f);
  }, {}, true, false);
  errtest::expect_user_error([&] { passes::pad_shapes(*bad); },
                             {"reshape [3, 5] -> [15] of pointers", "[4, 8] -> [16]", "power-of-two",
                              "reshape the offsets"},
                             "test_pad_shapes.cpp", line);
}

TEST_CASE("pad_shapes: inline asm with side effects over a padded dim is refused at the op", "[gpu-pad]") {
  auto asm_k = tracetest::trace("pad_asm", [](Ptr<int32_t> x) {
    Tile<int32_t> o = arange(0, 12);
    line = __LINE__; Tile<int32_t> r = inline_asm<int32_t>("mov.b32 $0, $1;", "=r,r", {load(x + o)}, /*pure=*/false);
    store(x + o, r);
  }, {}, true, false);
  errtest::expect_user_error([&] { passes::pad_shapes(*asm_k); }, {"inline_asm", "[12]", "side effects"},
                             "test_pad_shapes.cpp", line);
}

TEST_CASE("pad_shapes: the padded IR computes the references on the interpreter, touching only the buffers",
          "[gpu-pad]") {
  const How padded{std::nullopt, 4, true};
  for (int n : kShapes1d) check_1d(n, padded);
  for (int n : kShapes1d) check_tuple(n, padded);
  for (int n : kShapes1d)
    if (n >= 3) check_sort(n, padded);
  for (auto [r, c] : kShapes2d) check_2d(r, c, padded);
  for (auto [r, c] : kReshapes) check_reshape(r, c, padded);
  for (auto [m, n] : {std::pair{16, 16}, std::pair{5, 7}, std::pair{64, 64}}) {
    check_dot<float>(m, 24, n, padded);
    check_dot<f16>(m, 24, n, padded);
  }
}

// ========================================================================================= PTX

TEST_CASE("ptx: ragged tiles (pad_shapes) assemble at 1, 4 and 8 warps", "[ptx]") {
  auto k1 = pad_1d();
  auto k2 = pad_2d();
  for (int w : {1, 4, 8}) {
    for (int n : {3, 5, 24, 48, 96, 100, 160}) {
      INFO("pad_1d [" << n << "] warps " << w);
      ptxtest::assemble("pad_1d", k1.ptx(90, w, fake<float>(), fake<int32_t>(), fake<float>(), fake<int32_t>(), n));
    }
    for (auto [r, c] : {std::pair{32, 3}, std::pair{17, 1001}, std::pair{3, 5}}) {
      if (!fits_warps(r, c, w)) continue;
      INFO("pad_2d [" << r << ", " << c << "] warps " << w);
      ptxtest::assemble("pad_2d", k2.ptx(90, w, fake<float>(), fake<int32_t>(), fake<float>(), fake<int32_t>(), r, c));
    }
  }
  // Padded tiles count with their padded size in check_tile_registers: on 1 warp a 64-bit [32, 1024]
  // tile (the pointers over [17, 1001]) needs 2048 registers per thread.
  CHECK_FALSE(fits_warps(17, 1001, 1));
  CHECK_THROWS_WITH(k2.ptx(90, 1, fake<float>(), fake<int32_t>(), fake<float>(), fake<int32_t>(), 17, 1001),
                    Catch::Contains("[32,1024] tile needs 2048 32-bit registers"));
  auto k3 = pad_reshape();
  for (int w : {1, 4, 8})
    for (auto [r, c] : kReshapes) {
      INFO("pad_reshape [" << r << ", " << c << "] warps " << w);
      ptxtest::assemble("pad_reshape", k3.ptx(90, w, fake<int32_t>(), fake<int32_t>(), r, c));
    }
  auto k4 = pad_sort();
  auto k5 = pad_tuple();
  for (int w : {1, 4, 8})
    for (int n : {3, 5, 100, 1001}) {
      INFO("pad_sort / pad_tuple [" << n << "] warps " << w);
      ptxtest::assemble("pad_sort", k4.ptx(90, w, fake<float>(), fake<int32_t>(), fake<float>(), fake<int32_t>(), n));
      ptxtest::assemble("pad_tuple", k5.ptx(90, w, fake<int64_t>(), fake<uint32_t>(), fake<uint32_t>(), fake<int64_t>(),
                                            fake<uint32_t>(), n));
    }
  INFO("pad_1d on sm_80");
  ptxtest::assemble("pad_1d sm_80", k1.ptx(80, 4, fake<float>(), fake<int32_t>(), fake<float>(), fake<int32_t>(), 100),
                    "sm_80");
}

TEST_CASE("ptx: dots over K = 24 (pad_shapes) assemble: f32 FMA, f16 mma.sync and wgmma", "[ptx]") {
  auto kf = pad_dot<float>();
  auto kh = pad_dot<f16>();
  for (int w : {1, 4, 8})
    for (auto [m, n] : {std::pair{16, 16}, std::pair{5, 7}, std::pair{64, 64}}) {
      INFO("dot " << m << "x24x" << n << " warps " << w);
      ptxtest::assemble("pad_dot f32", kf.ptx(90, w, fake<float>(), fake<float>(), fake<float>(), m, 24, n));
      ptxtest::assemble("pad_dot f16", kh.ptx(90, w, fake<f16>(), fake<f16>(), fake<float>(), m, 24, n));
      ptxtest::assemble("pad_dot f16 sm_80", kh.ptx(80, w, fake<f16>(), fake<f16>(), fake<float>(), m, 24, n), "sm_80");
    }
}

// ================================================================ numbers: CPU / interp / mirrored

TEST_CASE("ops: ragged 1-D tiles: loads, stores, scans, reductions, combines, histogram, atomics", "[ops]") {
  for (int n : kShapes1d) check_1d(n, How{});
}

TEST_CASE("ops: ragged 1-D tiles: an i64 combine and a two-tile recurrence, reduced and reverse-scanned", "[ops]") {
  for (int n : kShapes1d) check_tuple(n, How{});
}

TEST_CASE("ops: ragged 1-D tiles: sort both ways, topk and gather (pads sort last, an index into them reads 0)",
          "[ops]") {
  for (int n : kShapes1d)
    if (n >= 3) check_sort(n, How{});
}

TEST_CASE("ops: ragged 2-D tiles: reductions and reverse scans along each dim", "[ops]") {
  for (auto [r, c] : kShapes2d) check_2d(r, c, How{});
}

TEST_CASE("ops: reshapes between ragged shapes keep the row-major order", "[ops]") {
  for (auto [r, c] : kReshapes) check_reshape(r, c, How{});
}

TEST_CASE("ops: dots over ragged M, N and K = 24", "[ops]") {
  for (auto [m, n] : {std::pair{16, 16}, std::pair{5, 7}, std::pair{64, 64}}) {
    check_dot<float>(m, 24, n, How{});
    check_dot<f16>(m, 24, n, How{});
  }
}

// ===================================================================================== GPU only

TEST_CASE("gpu: ragged tiles (pad_shapes) match the C++ references at 1, 4 and 8 warps", "[.gpu]") {
  if (!gpu_info()) {
    WARN("no usable GPU: [.gpu] case skipped");
    return;
  }
  for (int w : {1, 4, 8}) {
    for (int n : kShapes1d) check_1d(n, How{Backend::GPU, w});
    for (int n : kShapes1d) check_tuple(n, How{Backend::GPU, w});
    for (int n : kShapes1d)
      if (n >= 3) check_sort(n, How{Backend::GPU, w});
    for (auto [r, c] : kShapes2d)
      if (fits_warps(r, c, w)) check_2d(r, c, How{Backend::GPU, w});
    for (auto [r, c] : kReshapes) check_reshape(r, c, How{Backend::GPU, w});
    for (auto [m, n] : {std::pair{16, 16}, std::pair{5, 7}, std::pair{64, 64}}) {
      check_dot<float>(m, 24, n, How{Backend::GPU, w});
      check_dot<f16>(m, 24, n, How{Backend::GPU, w});
    }
  }
}
