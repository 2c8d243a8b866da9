// tests/test_ops_lite.cpp - TLE-Lite primitives (issue #15 items 1 and 2): extract_tile /
// insert_tile (docs/semantics.md "Sub-tiles") against plain C++ references on ragged shapes (1,
// 17, 1001 where the sub-tile divides, 2-D and 3-D tiles), static and dynamic indices, round
// trips; the async load hint (load(..., {.is_async = true})) computes what a plain load does; user
// errors at the call's line ([errors]); the GPU lowering: a register-aligned static extract moves
// no data through shared memory, a dynamic one does, async loads in a loop become cp.async
// ([ptx], ptxas -arch=sm_90a); the GPU passes on them ([pipeline], [gpu-pad]: pad_shapes' output
// evaluated by the interpreter). [ops] tests are mirrored on the GPU (ops_util.hpp); [.gpu] runs the
// 2-D cases on the GPU at 1, 4 and 8 warps.
#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "error_util.hpp"
#include "interp/interp.hpp"
#include "ir/printer.hpp"
#include "ops_util.hpp"
#include "ptxas_util.hpp"
#include "trace_util.hpp"
#include "passes/gpu/gpu_passes.hpp"
#include "passes/gpu/layout_rules.hpp"

using namespace tle;
using namespace opstest;

namespace {

/// Host reference of the grid: the start per dim of sub-tile `id` (a dynamic id wraps: per dim
/// ((id as u32) / stride) mod grid, docs/semantics.md).
std::vector<int64_t> starts(const std::vector<int64_t>& x, const std::vector<int64_t>& s, int64_t id) {
  const size_t r = x.size();
  std::vector<int64_t> grid(r), stride(r, 1), off(r);
  for (size_t d = 0; d < r; ++d) grid[d] = x[d] / s[d];
  for (size_t d = r - 1; d > 0; --d) stride[d - 1] = stride[d] * grid[d];
  const uint64_t u = static_cast<uint32_t>(static_cast<int32_t>(id));
  for (size_t d = 0; d < r; ++d) off[d] = static_cast<int64_t>(u / stride[d] % grid[d]) * s[d];
  return off;
}

/// Row-major coordinates of linear index k in shape s.
std::vector<int64_t> unflat(int64_t k, const std::vector<int64_t>& s) {
  std::vector<int64_t> c(s.size());
  for (size_t d = s.size(); d-- > 0;) c[d] = k % s[d], k /= s[d];
  return c;
}
int64_t flat(const std::vector<int64_t>& c, const std::vector<int64_t>& s) {
  int64_t k = 0;
  for (size_t d = 0; d < s.size(); ++d) k = k * s[d] + c[d];
  return k;
}
int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

template <class T> std::vector<T> ref_extract(const Buf<T>& x, const std::vector<int64_t>& xs,
                                              const std::vector<int64_t>& ss, int64_t id) {
  auto off = starts(xs, ss, id);
  std::vector<T> r(static_cast<size_t>(numel(ss)));
  for (int64_t k = 0; k < numel(ss); ++k) {
    auto c = unflat(k, ss);
    for (size_t d = 0; d < c.size(); ++d) c[d] += off[d];
    r[static_cast<size_t>(k)] = x[static_cast<size_t>(flat(c, xs))];
  }
  return r;
}
template <class T> std::vector<T> ref_insert(const Buf<T>& x, const Buf<T>& y, const std::vector<int64_t>& xs,
                                             const std::vector<int64_t>& ss, int64_t id) {
  auto off = starts(xs, ss, id);
  std::vector<T> r(x.begin(), x.end());
  for (int64_t k = 0; k < numel(ss); ++k) {
    auto c = unflat(k, ss);
    for (size_t d = 0; d < c.size(); ++d) c[d] += off[d];
    r[static_cast<size_t>(flat(c, xs))] = y[static_cast<size_t>(k)];
  }
  return r;
}
/// Test data: integers over their whole range, floats in [-100, 100], bool a coin.
template <class T> Buf<T> data(size_t n, unsigned seed) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) return random_full<T>(n, seed);
  else return random_buf<T>(n, seed, -100, 100);
}
template <class T> std::vector<T> slice(const Buf<T>& b, size_t at, size_t n) {
  return std::vector<T>(b.begin() + at, b.begin() + at + n);
}

/// 1-D: x [N], y [S]; out = extract(x, K) | extract(x, dyn) | insert(x, y, K) | insert(x, y, dyn)
/// | insert(x, extract(x, dyn), dyn) | extract(insert(x, y, dyn), dyn).
template <class T> auto make_1d() {
  return jit("lite_subtile_1d", [](Ptr<T> x, Ptr<T> y, Ptr<T> out, Tile<int32_t> dyn, Constexpr<int> N,
                                   Constexpr<int> S, Constexpr<int> K) {
    Tile<T> vx = load(x + arange(0, N)), vy = load(y + arange(0, S));
    Tile<int32_t> os = arange(0, S), on = arange(0, N);
    store(out + os, extract_tile(vx, K, {S}));  // a Constexpr index
    store(out + S + os, extract_tile(vx, dyn, {S}));
    store(out + 2 * S + on, insert_tile(vx, vy, int64_t(K)));
    store(out + 2 * S + N + on, insert_tile(vx, vy, dyn));
    store(out + 2 * S + 2 * N + on, insert_tile(vx, extract_tile(vx, dyn, {S}), dyn));
    store(out + 2 * S + 3 * N + os, extract_tile(insert_tile(vx, vy, dyn), dyn, {S}));
  });
}

template <class T> void check_1d(const char* dt) {
  auto k = make_1d<T>();
  const std::pair<int, int> cases[] = {{1, 1}, {17, 1}, {17, 17}, {1001, 7}, {1001, 143}, {1001, 1001},
                                       {256, 32}, {64, 16}, {128, 1}};
  for (auto [N, S] : cases) {
    const int count = N / S;
    for (int K : {0, count - 1, count / 2}) {
      for (int dyn : {count - 1, 0, count + 1, -1}) {
        INFO(dt << " N=" << N << " S=" << S << " K=" << K << " dyn=" << dyn);
        Buf<T> x = data<T>(size_t(N), 3 + N), y = data<T>(size_t(S), 5 + S);
        Buf<T> out(size_t(4 * S + 3 * N));
        k(Grid(1), x.data(), y.data(), out.data(), dyn, N, S, K);
        const std::vector<int64_t> xs = {N}, ss = {S};
        CHECK(diffs(slice(out, 0, S), ref_extract(x, xs, ss, K)) == "");
        CHECK(diffs(slice(out, S, S), ref_extract(x, xs, ss, dyn)) == "");
        CHECK(diffs(slice(out, 2 * S, N), ref_insert(x, y, xs, ss, K)) == "");
        CHECK(diffs(slice(out, 2 * S + N, N), ref_insert(x, y, xs, ss, dyn)) == "");
        CHECK(diffs(slice(out, 2 * S + 2 * N, N), std::vector<T>(x.begin(), x.end())) == "");
        CHECK(diffs(slice(out, 2 * S + 3 * N, S), std::vector<T>(y.begin(), y.end())) == "");
        if (count == 1) break;  // one sub-tile: every index is it
      }
    }
  }
}

/// 2-D: x [M, N], y [A, B]; static index {I, J} and linear L, dynamic {di, dj} and linear dl.
/// out = extract {I,J} | extract L | extract {di,dj} | extract dl | insert {I,J} | insert {di,dj}
/// | insert dl.
template <class T>
auto subtile_2d_fn = [](Ptr<T> x, Ptr<T> y, Ptr<T> out, Tile<int32_t> di, Tile<int32_t> dj, Tile<int32_t> dl,
                        Constexpr<int> M, Constexpr<int> N, Constexpr<int> A, Constexpr<int> B, Constexpr<int> I,
                        Constexpr<int> J, Constexpr<int> L) {
  Tile<int32_t> ox = expand_dims(arange(0, M), 1) * N + expand_dims(arange(0, N), 0);
  Tile<int32_t> oy = expand_dims(arange(0, A), 1) * B + expand_dims(arange(0, B), 0);
  Tile<T> vx = load(x + ox), vy = load(y + oy);
  const int ab = A * B, mn = M * N;
  store(out + oy, extract_tile(vx, {I, J}, {A, B}));
  store(out + ab + oy, extract_tile(vx, int64_t(L), {A, B}));
  store(out + 2 * ab + oy, extract_tile(vx, {di, dj}, {A, B}));
  store(out + 3 * ab + oy, extract_tile(vx, dl, {A, B}));
  store(out + 4 * ab + ox, insert_tile(vx, vy, {int64_t(I), int64_t(J)}));
  store(out + 4 * ab + mn + ox, insert_tile(vx, vy, {di, dj}));
  store(out + 4 * ab + 2 * mn + ox, insert_tile(vx, vy, dl));
};
template <class T> auto make_2d() { return jit("lite_subtile_2d", subtile_2d_fn<T>); }

struct Case2d {
  int M, N, A, B;
};
const Case2d kCases2d[] = {{1, 17, 1, 17}, {17, 33, 17, 11}, {6, 1001, 3, 143}, {17, 17, 1, 17}, {64, 32, 16, 32},
                           {32, 64, 32, 16}, {64, 64, 16, 16}, {16, 128, 8, 32}, {2, 1001, 1, 7}, {24, 20, 8, 5}};

/// Runs `run(x, y, out, di, dj, dl, I, J, L)` for indices spread over the grid of each case and
/// checks out against the references.
template <class T, class Run> void check_2d(const char* dt, Run run, int64_t max_padded = INT64_MAX) {
  auto pow2 = [](int64_t v) {
    int64_t p = 1;
    while (p < v) p *= 2;
    return p;
  };
  for (auto [M, N, A, B] : kCases2d) {
    if (pow2(M) * pow2(N) > max_padded) continue;  // (the GPU at 1 warp: registers per thread)
    const int gi = M / A, gj = N / B;
    for (auto [I, J, di, dj] : {std::tuple{0, 0, gi - 1, gj - 1}, std::tuple{gi - 1, gj / 2, 0, gj / 3},
                                std::tuple{gi / 2, gj - 1, gi / 2, 0}}) {
      const int L = (I * gj + J + 1) % (gi * gj), dl = (di * gj + dj + 2) % (gi * gj);
      INFO(dt << " [" << M << "," << N << "] sub [" << A << "," << B << "] I=" << I << " J=" << J << " L=" << L
              << " di=" << di << " dj=" << dj << " dl=" << dl);
      Buf<T> x = data<T>(size_t(M) * N, 7 + N), y = data<T>(size_t(A) * B, 9 + B);
      const size_t ab = size_t(A) * B, mn = size_t(M) * N;
      Buf<T> out(4 * ab + 3 * mn);
      run(x, y, out, di, dj, dl, std::vector<int64_t>{M, N, A, B, I, J, L});
      const std::vector<int64_t> xs = {M, N}, ss = {A, B};
      CHECK(diffs(slice(out, 0, ab), ref_extract(x, xs, ss, I * gj + J)) == "");
      CHECK(diffs(slice(out, ab, ab), ref_extract(x, xs, ss, L)) == "");
      CHECK(diffs(slice(out, 2 * ab, ab), ref_extract(x, xs, ss, di * gj + dj)) == "");
      CHECK(diffs(slice(out, 3 * ab, ab), ref_extract(x, xs, ss, dl)) == "");
      CHECK(diffs(slice(out, 4 * ab, mn), ref_insert(x, y, xs, ss, I * gj + J)) == "");
      CHECK(diffs(slice(out, 4 * ab + mn, mn), ref_insert(x, y, xs, ss, di * gj + dj)) == "");
      CHECK(diffs(slice(out, 4 * ab + 2 * mn, mn), ref_insert(x, y, xs, ss, dl)) == "");
    }
  }
}
template <class T> void check_2d(const char* dt) {
  auto k = make_2d<T>();
  check_2d<T>(dt, [&](Buf<T>& x, Buf<T>& y, Buf<T>& out, int di, int dj, int dl, const std::vector<int64_t>& c) {
    k(Grid(1), x.data(), y.data(), out.data(), di, dj, dl, int(c[0]), int(c[1]), int(c[2]), int(c[3]), int(c[4]),
      int(c[5]), int(c[6]));
  });
}

/// 3-D: x [P, M, N], y [C, A, B]; out = extract K | extract {dp, dm, dn} | insert K | insert dl.
auto make_3d() {
  return jit("lite_subtile_3d", [](Ptr<float> x, Ptr<float> y, Ptr<float> out, Tile<int32_t> dp, Tile<int32_t> dm,
                                   Tile<int32_t> dn, Tile<int32_t> dl, Constexpr<int> P, Constexpr<int> M,
                                   Constexpr<int> N, Constexpr<int> C, Constexpr<int> A, Constexpr<int> B,
                                   Constexpr<int> K) {
    auto offs = [](int p, int m, int n) {
      Tile<int32_t> a = expand_dims(expand_dims(arange(0, p), 1), 2) * (m * n);
      Tile<int32_t> b = expand_dims(expand_dims(arange(0, m), 0), 2) * n;
      Tile<int32_t> c = expand_dims(expand_dims(arange(0, n), 0), 0);
      return a + b + c;
    };
    Tile<int32_t> ox = offs(P, M, N), oy = offs(C, A, B);
    Tile<float> vx = load(x + ox), vy = load(y + oy);
    const int cab = C * A * B, pmn = P * M * N;
    store(out + oy, extract_tile(vx, int64_t(K), {C, A, B}));
    store(out + cab + oy, extract_tile(vx, {dp, dm, dn}, {C, A, B}));
    store(out + 2 * cab + ox, insert_tile(vx, vy, int64_t(K)));
    store(out + 2 * cab + pmn + ox, insert_tile(vx, vy, dl));
  });
}

}  // namespace

TEST_CASE("ops: extract_tile and insert_tile 1-D, static and dynamic indices, round trips", "[ops][lite]") {
  check_1d<float>("f32");
  check_1d<int32_t>("i32");
  check_1d<int8_t>("i8");
  check_1d<bf16>("bf16");
  check_1d<bool>("bool");
}

TEST_CASE("ops: extract_tile and insert_tile 2-D, multi-dim and linear indices", "[ops][lite]") {
  check_2d<float>("f32");
  check_2d<int64_t>("i64");
  check_2d<f16>("f16");
}

TEST_CASE("ops: extract_tile and insert_tile 3-D", "[ops][lite]") {
  auto k = make_3d();
  struct C {
    int P, M, N, C, A, B;
  };
  const C cases[] = {{3, 10, 17, 1, 5, 17}, {4, 8, 16, 2, 4, 8}, {1, 1, 1001, 1, 1, 77}, {2, 4, 32, 1, 4, 32}};
  for (auto [P, M, N, Cc, A, B] : cases) {
    const int gp = P / Cc, gm = M / A, gn = N / B, count = gp * gm * gn;
    const int K = count / 2 + (count > 2), dp = gp - 1, dm = gm / 2, dn = gn - 1, dl = count - 1;
    INFO("[" << P << "," << M << "," << N << "] sub [" << Cc << "," << A << "," << B << "] K=" << K);
    Buf<float> x = data<float>(size_t(P) * M * N, 21), y = data<float>(size_t(Cc) * A * B, 22);
    const size_t cab = size_t(Cc) * A * B, pmn = size_t(P) * M * N;
    Buf<float> out(2 * cab + 2 * pmn);
    k(Grid(1), x.data(), y.data(), out.data(), dp, dm, dn, dl, P, M, N, Cc, A, B, K);
    const std::vector<int64_t> xs = {P, M, N}, ss = {Cc, A, B};
    CHECK(diffs(slice(out, 0, cab), ref_extract(x, xs, ss, K)) == "");
    CHECK(diffs(slice(out, cab, cab), ref_extract(x, xs, ss, (dp * gm + dm) * gn + dn)) == "");
    CHECK(diffs(slice(out, 2 * cab, pmn), ref_insert(x, y, xs, ss, K)) == "");
    CHECK(diffs(slice(out, 2 * cab + pmn, pmn), ref_insert(x, y, xs, ss, dl)) == "");
  }
}

TEST_CASE("ops: extract_tile and insert_tile in a device loop (chunked row sum, rows rewritten)", "[ops][lite]") {
  // A row [N] processed in chunks of S with a dynamic index (the loop variable): each chunk scaled
  // by its index + 1 and written back with insert_tile; the tile then stored and its sum written.
  auto k = jit("lite_subtile_loop", [](Ptr<float> x, Ptr<float> out, Ptr<float> sum, Constexpr<int> N,
                                       Constexpr<int> S) {
    Tile<float> v = load(x + arange(0, N));
    Tile<float> acc = zeros<float>({});
    for (auto i : range(0, N / S)) {
      Tile<float> c = extract_tile(v, i, {S}) * (i + 1).to<float>();
      acc = acc + tle::sum(c, 0);
      v = insert_tile(v, c, i);
    }
    store(out + arange(0, N), v);
    store(sum, acc);
  });
  for (auto [N, S] : {std::pair{1001, 7}, std::pair{17, 17}, std::pair{256, 32}, std::pair{1, 1}}) {
    INFO("N=" << N << " S=" << S);
    Buf<float> x = random_buf<float>(static_cast<size_t>(N), 31), out(static_cast<size_t>(N)), s(1);
    k(Grid(1), x.data(), out.data(), s.data(), N, S);
    std::vector<float> want(static_cast<size_t>(N));
    double total = 0, magnitude = 0;
    for (int j = 0; j < N; ++j) want[j] = x[j] * float(j / S + 1), total += want[j], magnitude += std::fabs(want[j]);
    CHECK(diffs(slice(out, 0, N), want) == "");
    CHECK(close_d(s[0], total, 0, 1e-4 * magnitude));  // f32 sums in any order
  }
}

TEST_CASE("ops: load with is_async computes what a plain load does", "[ops][lite]") {
  // In a device loop (the GPU pipelines it through cp.async), outside one, masked with other.
  auto k = jit("lite_async_load", [](Ptr<float> x, Ptr<float> out, Tile<int32_t> n, Constexpr<int> ROWS,
                                     Constexpr<int> BLOCK) {
    Tile<int32_t> o = arange(0, BLOCK);
    Tile<float> acc = zeros<float>({BLOCK});
    for (auto r : range(0, ROWS)) acc = acc + load(x + r * BLOCK + o, {.is_async = true});
    store(out + o, acc);
    Tile<bool> m = o < n;
    store(out + BLOCK + o, load(x + o, m, MemHints{.is_async = true}) + 1.0f);
    store(out + 2 * BLOCK + o, load(x + o, m, -2.0f, MemHints{.is_async = true}));
  });
  for (auto [R, B, n] : {std::tuple{5, 256, 100}, std::tuple{1, 1, 1}, std::tuple{17, 64, 64}}) {
    INFO("rows=" << R << " block=" << B << " n=" << n);
    Buf<float> x = random_buf<float>(size_t(R) * B, 41), out(size_t(3 * B));
    k(Grid(1), x.data(), out.data(), n, R, B);
    std::vector<float> want(size_t(3 * B));
    for (int j = 0; j < B; ++j) {
      float a = 0;
      for (int r = 0; r < R; ++r) a += x[size_t(r) * B + j];
      want[j] = a;
      want[B + j] = j < n ? x[j] + 1.0f : 1.0f;
      want[2 * B + j] = j < n ? x[j] : -2.0f;
    }
    CHECK(diffs(slice(out, 0, 3 * B), want, 1e-6, 1e-6) == "");
  }
}

// ============================================================================ errors

namespace {
int line = 0;
std::vector<float> fbuf(4096, 1.0f);
template <class F> void expect_error(F&& f, const std::vector<std::string>& phrases) {
  errtest::expect_user_error(f, phrases, "test_ops_lite.cpp", line);
}
}  // namespace

TEST_CASE("errors: extract_tile and insert_tile shapes, indices and dtypes", "[errors][lite]") {
  auto k1 = jit("lite_err_divide", [](Ptr<float> x) {
    Tile<float> v = load(x + arange(0, 17));
    line = __LINE__; store(x + arange(0, 4), extract_tile(v, 0, {4}));
  });
  expect_error([&] { k1(Grid(1), fbuf.data()); }, {"dim 0 of the tile", "(17) is not a multiple of the sub-tile's (4)",
                                                   "dims divide"});
  auto k2 = jit("lite_err_rank", [](Ptr<float> x) {
    Tile<float> v = load(x + expand_dims(arange(0, 8), 0) + expand_dims(arange(0, 4), 1));
    line = __LINE__; store(x + arange(0, 4), extract_tile(v, 0, {4}));
  });
  expect_error([&] { k2(Grid(1), fbuf.data()); }, {"sub-tile shape [4] has rank 1", "has rank 2", "one sub-tile dim per"});
  auto k3 = jit("lite_err_static_range", [](Ptr<float> x) {
    Tile<float> v = load(x + arange(0, 16));
    line = __LINE__; store(x + arange(0, 4), extract_tile(v, 4, {4}));
  });
  expect_error([&] { k3(Grid(1), fbuf.data()); }, {"sub-tile 4 is outside the grid of sub-tiles [4]", "0..3"});
  auto k4 = jit("lite_err_multi_range", [](Ptr<float> x) {
    Tile<float> v = load(x + expand_dims(arange(0, 8), 0) + 8 * expand_dims(arange(0, 6), 1));
    line = __LINE__; store(x + arange(0, 4), reshape(extract_tile(v, {1, 4}, {2, 2}), {4}));
  });
  expect_error([&] { k4(Grid(1), fbuf.data()); }, {"index {1, 4} is outside the grid of sub-tiles [3, 4]", "entry 1",
                                                   "0..3"});
  auto k5 = jit("lite_err_arity", [](Ptr<float> x) {
    Tile<float> v = load(x + expand_dims(arange(0, 8), 0) + 8 * expand_dims(arange(0, 6), 1));
    line = __LINE__; store(x + arange(0, 4), reshape(extract_tile(v, {1, 0, 0}, {2, 2}), {4}));
  });
  expect_error([&] { k5(Grid(1), fbuf.data()); }, {"the index has 3 entries", "has rank 2"});
  auto k6 = jit("lite_err_dyn_shape", [](Ptr<float> x) {
    Tile<float> v = load(x + arange(0, 16));
    line = __LINE__; store(x + arange(0, 4), extract_tile(v, arange(0, 2), {4}));
  });
  expect_error([&] { k6(Grid(1), fbuf.data()); }, {"dynamic sub-tile index must be an integer scalar", "i32[2]"});
  auto k7 = jit("lite_err_insert_dtype", [](Ptr<float> x, Ptr<int32_t> y) {
    Tile<float> v = load(x + arange(0, 16));
    Tile<int32_t> s = load(y + arange(0, 4));
    line = __LINE__; store(x + arange(0, 16), insert_tile(v, s, 1));
  });
  std::vector<int32_t> ibuf(16, 0);
  expect_error([&] { k7(Grid(1), fbuf.data(), ibuf.data()); }, {"insert_tile: the sub-tile i32[4]", "differ in element type",
                                                                 "tle::cast"});
  auto k8 = jit("lite_err_insert_divide", [](Ptr<float> x) {
    Tile<float> v = load(x + arange(0, 1001));
    line = __LINE__; store(x + arange(0, 1001), insert_tile(v, zeros<float>({10}), 0));
  });
  expect_error([&] { k8(Grid(1), fbuf.data()); }, {"insert_tile: dim 0", "(1001) is not a multiple of the sub-tile's (10)"});
}

TEST_CASE("errors: is_async on a store or with is_volatile", "[errors][lite]") {
  auto k1 = jit("lite_err_async_store", [](Ptr<float> x) {
    Tile<int32_t> o = arange(0, 4);
    line = __LINE__; store(x + o, 1.0f, o < 4, MemHints{.is_async = true});
  });
  expect_error([&] { k1(Grid(1), fbuf.data()); }, {"is_async is a load hint", "a store takes none"});
  auto k2 = jit("lite_err_async_volatile", [](Ptr<float> x) {
    Tile<int32_t> o = arange(0, 4);
    line = __LINE__; store(x + o, load(x + o, MemHints{.is_volatile = true, .is_async = true}));
  });
  expect_error([&] { k2(Grid(1), fbuf.data()); }, {"volatile load", "drop is_async or is_volatile"});
}

// ============================================================================ GPU lowering

namespace {
template <class T> T* fake(uintptr_t a = 0x10000) { return reinterpret_cast<T*>(a); }
/// Instructions of `ptx` that touch shared memory (st.shared / ld.shared, any width) and barriers.
int smem_traffic(const std::string& ptx) {
  int n = 0;
  for (const char* op : {"st.shared", "ld.shared", "bar.sync", "barrier.sync"})
    for (size_t at = ptx.find(op); at != std::string::npos; at = ptx.find(op, at + 1)) ++n;
  return n;
}
}  // namespace

TEST_CASE("ptx: a register-aligned static extract_tile is register renumbering, a dynamic one uses shared memory",
          "[ptx][lite]") {
  // x [64, 64] f32 in 4 warps: the blocked layout covers [16, 64]... rows per thread group; a
  // [32, 64] or [16, 64] sub-tile at a static index lies in whole registers of every thread.
  auto k = jit("lite_ptx_extract", [](Ptr<float> x, Ptr<float> out, Tile<int32_t> dyn, Constexpr<int> A,
                                      Constexpr<bool> DYN, Constexpr<bool> INS) {
    Tile<int32_t> o = expand_dims(arange(0, 64), 1) * 64 + expand_dims(arange(0, 64), 0);
    Tile<int32_t> os = expand_dims(arange(0, A), 1) * 64 + expand_dims(arange(0, 64), 0);
    Tile<float> v = load(x + o);
    if (INS) {
      Tile<float> s = extract_tile(v, 1, {A, 64}) * 2.0f;
      store(out + o, insert_tile(v, s, 0));
    } else if (DYN) {
      store(out + os, extract_tile(v, dyn, {A, 64}));
    } else {
      store(out + os, extract_tile(v, 1, {A, 64}));
    }
  });
  for (int A : {32, 16}) {
    INFO("sub-tile [" << A << ", 64]");
    const std::string st = k.ptx(90, 4, fake<float>(), fake<float>(), 0, A, false, false);
    CHECK(smem_traffic(st) == 0);
    ptxtest::assemble("static extract_tile", st);
    const std::string ins = k.ptx(90, 4, fake<float>(), fake<float>(), 0, A, false, true);
    CHECK(smem_traffic(ins) == 0);
    ptxtest::assemble("static extract_tile + insert_tile", ins);
    const std::string dy = k.ptx(90, 4, fake<float>(), fake<float>(), 0, A, true, false);
    CHECK(dy.find("st.shared") != std::string::npos);
    CHECK(dy.find("ld.shared") != std::string::npos);
    ptxtest::assemble("dynamic extract_tile", dy);
  }
  // A constant index tile is folded to the static form (canonicalize): no shared memory either.
  auto kc = jit("lite_ptx_extract_const", [](Ptr<float> x, Ptr<float> out) {
    Tile<int32_t> o = expand_dims(arange(0, 64), 1) * 64 + expand_dims(arange(0, 64), 0);
    Tile<int32_t> os = expand_dims(arange(0, 32), 1) * 64 + expand_dims(arange(0, 64), 0);
    Tile<float> v = load(x + o);
    store(out + os, extract_tile(v, {full<int32_t>({}, 1), full<int32_t>({}, 0)}, {32, 64}));
  });
  const std::string cst = kc.ptx(90, 4, fake<float>(), fake<float>());
  CHECK(smem_traffic(cst) == 0);
  ptxtest::assemble("constant-index extract_tile", cst);
  // A sub-tile smaller than a warp's footprint ([2, 2] of [64, 64]) goes through shared memory.
  auto k2 = jit("lite_ptx_extract_small", [](Ptr<float> x, Ptr<float> out) {
    Tile<int32_t> o = expand_dims(arange(0, 64), 1) * 64 + expand_dims(arange(0, 64), 0);
    Tile<float> v = load(x + o);
    store(out + expand_dims(arange(0, 2), 1) * 2 + expand_dims(arange(0, 2), 0), extract_tile(v, 5, {2, 2}));
  });
  const std::string sm = k2.ptx(90, 4, fake<float>(), fake<float>());
  CHECK(sm.find("ld.shared") != std::string::npos);
  ptxtest::assemble("small extract_tile", sm);
}

TEST_CASE("ptx: extract_tile and insert_tile of padded tiles assemble", "[ptx][lite]") {
  auto k = jit("lite_ptx_padded", [](Ptr<float> x, Ptr<float> out, Tile<int32_t> dyn) {
    Tile<int32_t> o = expand_dims(arange(0, 6), 1) * 1001 + expand_dims(arange(0, 1001), 0);
    Tile<float> v = load(x + o);
    Tile<float> s = extract_tile(v, dyn, {3, 143});
    store(out + o, insert_tile(v, s + 1.0f, 5));
  });
  for (int sm : {90, 80}) ptxtest::assemble("padded extract/insert", k.ptx(sm, 4, fake<float>(), fake<float>(), 3),
                                            sm == 90 ? "sm_90a" : "sm_80");
  // The [.gpu] kernel at 1 and 8 warps (the [ops] mirror runs 4).
  auto k2 = make_2d<float>();
  for (int w : {1, 8})
    for (auto [M, N, A, B] : kCases2d) {
      if (int64_t(M) * N > 4096 * w) continue;
      INFO("warps " << w << " [" << M << "," << N << "] sub [" << A << "," << B << "]");
      const int gj = N / B, count = (M / A) * gj;
      ptxtest::assemble("2-D extract/insert", k2.ptx(90, w, fake<float>(), fake<float>(), fake<float>(), 0, 1, 2, M, N,
                                                     A, B, 0, gj - 1, count - 1));
    }
}

TEST_CASE("ptx: load with is_async in a loop becomes cp.async, without it stays ld.global", "[ptx][lite]") {
  auto k = jit("lite_ptx_async", [](Ptr<float> x, Ptr<float> out, Constexpr<bool> ASYNC) {
    Tile<int32_t> o = arange(0, 512);
    Tile<float> acc = zeros<float>({512});
    for (auto r : range(0, 64)) acc = acc + load(x + r * 512 + o, MemHints{.is_async = ASYNC});
    store(out + o, acc);
  });
  for (int sm : {90, 80}) {
    const std::string arch = sm == 90 ? "sm_90a" : "sm_80";
    INFO(arch);
    const std::string a = k.ptx(sm, 4, fake<float>(), fake<float>(), true);
    CHECK(a.find("cp.async") != std::string::npos);
    ptxtest::assemble("async load", a, arch);
    const std::string p = k.ptx(sm, 4, fake<float>(), fake<float>(), false);
    CHECK(p.find("cp.async") == std::string::npos);
    ptxtest::assemble("plain load", p, arch);
  }
}

// ============================================================================ GPU passes

namespace {
/// Rows of x summed in a device loop with an async load; STORE adds a store in the body, HINT
/// the loop hint {.num_stages = 3}.
template <bool ASYNC, bool STORE, bool HINT>
auto async_rows = [](Ptr<float> x, Ptr<float> y, Tile<int32_t> n, Constexpr<int> BLOCK) {
  Tile<int32_t> cols = arange(0, BLOCK);
  Tile<float> acc = zeros<float>({BLOCK});
  for (auto r : range(0, n, 1, {.num_stages = HINT ? 3 : 0})) {
    acc = acc + load(x + r * BLOCK + cols, MemHints{.is_async = ASYNC});
    if constexpr (STORE) store(y + r * BLOCK + cols, acc);
  }
  store(y + cols, acc);
};

/// The loop's one load after the GPU passes (num_warps 4, the launch's num_stages), and the loop.
std::pair<const ir::Op*, const ir::Op*> gpu_loop_load(ir::Function& f, int stages) {
  passes::run_gpu_pipeline(f, 4, stages);
  auto loops = tracetest::ops_of(f, ir::OpKind::For);
  REQUIRE(loops.size() == 1);
  const ir::Op* ld = nullptr;
  for (auto& op : loops[0]->region().body().ops)
    if (op->kind == ir::OpKind::Load) ld = op.get();
  REQUIRE(ld);
  return {ld, loops[0]};
}
bool pipelined(const ir::Op* ld) { return ld->has_attr("pipelined") && ld->int_attr("pipelined") == 1; }
}  // namespace

TEST_CASE("pipeline pass: async loads of a loop that writes no memory are pipelined, others are not",
          "[pipeline][lite]") {
  for (int stages : {1, 3, 4}) {
    INFO("launch num_stages " << stages);
    auto f = tracetest::trace("k", async_rows<true, false, false>, {1024}, true, true);
    CHECK(ir::print(*f).find("async=1") != std::string::npos);
    auto [ld, loop] = gpu_loop_load(*f, stages);
    INFO(ir::print(*f));
    CHECK(pipelined(ld));
    CHECK(ld->int_attr("pipe_vec") == 4);
    CHECK(loop->int_attr("num_stages") == std::max(stages, 2));
  }
  // Without the hint the same loop is left alone (it feeds no tensor-core dot).
  auto plain = tracetest::trace("k", async_rows<false, false, false>, {1024}, true, true);
  auto [ld0, loop0] = gpu_loop_load(*plain, 3);
  CHECK_FALSE(pipelined(ld0));
  CHECK_FALSE(loop0->has_attr("num_stages"));
  // A store in the body: is_async does not promise what the loop hint does, nothing moves.
  auto stores = tracetest::trace("k", async_rows<true, true, false>, {1024}, true, true);
  auto [ld1, loop1] = gpu_loop_load(*stores, 3);
  CHECK_FALSE(pipelined(ld1));
  CHECK_FALSE(loop1->has_attr("num_stages"));
  // ... unless the loop carries the hint: then its depth.
  auto hinted = tracetest::trace("k", async_rows<true, true, true>, {1024}, true, true);
  auto [ld2, loop2] = gpu_loop_load(*hinted, 1);
  CHECK(pipelined(ld2));
  CHECK(loop2->int_attr("num_stages") == 3);
  // No cp.async on the target (num_stages 0): nothing.
  auto old = tracetest::trace("k", async_rows<true, false, false>, {1024}, true, true);
  auto [ld3, loop3] = gpu_loop_load(*old, 0);
  CHECK_FALSE(pipelined(ld3));
  CHECK_FALSE(loop3->has_attr("num_stages"));
}

TEST_CASE("pad_shapes: extract_tile and insert_tile of ragged tiles carry their real shapes", "[gpu-pad][lite]") {
  auto fn = [](Ptr<float> x, Ptr<float> y, Constexpr<int> M, Constexpr<int> N, Constexpr<int> A, Constexpr<int> B) {
    Tile<int32_t> o = expand_dims(arange(0, M), 1) * N + expand_dims(arange(0, N), 0);
    Tile<float> v = load(x + o);
    Tile<float> s = extract_tile(v, 1, {A, B});
    store(y + o, insert_tile(v, s * 2.0f, 0));
  };
  auto f = tracetest::trace("k", fn, {6, 1001, 3, 143}, true, true);
  passes::run_gpu_pipeline(*f, 4, 1);
  INFO(ir::print(*f));
  auto ex = tracetest::ops_of(*f, ir::OpKind::ExtractTile);
  auto in = tracetest::ops_of(*f, ir::OpKind::InsertTile);
  REQUIRE(ex.size() == 1);
  REQUIRE(in.size() == 1);
  for (const ir::Op* op : {ex[0], in[0]}) {
    CHECK(op->ints_attr("real_x") == std::vector<int64_t>{6, 1001});
    CHECK(op->ints_attr("real_sub") == std::vector<int64_t>{3, 143});
    CHECK(op->operands[0]->type.shape == ir::Shape{8, 1024});
  }
  CHECK(ex[0]->result()->type.shape == ir::Shape{4, 256});
  // Power-of-two tiles are left as they are, and a register-aligned sub-tile takes x's registers.
  auto g = tracetest::trace("k", fn, {64, 64, 32, 64}, true, true);
  passes::run_gpu_pipeline(*g, 4, 1);
  INFO(ir::print(*g));
  auto ex2 = tracetest::ops_of(*g, ir::OpKind::ExtractTile);
  REQUIRE(ex2.size() == 1);
  CHECK_FALSE(ex2[0]->has_attr("real_x"));
  REQUIRE(ex2[0]->result()->type.layout);
  CHECK(passes::gpu_rules::subtile_layout(ex2[0]->operands[0]->type.layout->ll, {32, 64}).has_value());
}

TEST_CASE("ops: extract_tile and insert_tile of the GPU's padded IR (pad_shapes) on the interpreter", "[gpu-pad][lite]") {
  // The pass's output alone must compute the references, touching nothing but the buffers.
  check_2d<float>("f32 padded", [](Buf<float>& x, Buf<float>& y, Buf<float>& out, int di, int dj, int dl,
                                   const std::vector<int64_t>& c) {
    auto f = tracetest::trace("lite_padded", subtile_2d_fn<float>, c, true, false);
    passes::pad_shapes(*f);
    INFO(ir::print(*f));
    REQUIRE_NOTHROW(ir::verify(*f));
    void *px = x.data(), *py = y.data(), *po = out.data();
    int32_t vi = di, vj = dj, vl = dl;
    std::vector<void*> args = {&px, &py, &po, &vi, &vj, &vl};
    interp::Options o;
    o.check_access = [&](uintptr_t a, size_t n, bool) {
      for (const Buf<float>* b : {&x, &y, &out})
        if (a >= reinterpret_cast<uintptr_t>(b->p) && a + n <= reinterpret_cast<uintptr_t>(b->p + b->n)) return true;
      return false;
    };
    const int64_t one[3] = {1, 1, 1};
    interp::run(*f, args.data(), one, o);
  });
}

TEST_CASE("gpu: extract_tile and insert_tile match the C++ references at 1, 4 and 8 warps", "[.gpu][lite]") {
  if (!gpu_info()) {
    WARN("no usable GPU: [.gpu] case skipped");
    return;
  }
  auto k = make_2d<float>();
  for (int w : {1, 4, 8}) {
    INFO("num_warps " << w);
    check_2d<float>("f32 gpu", [&](Buf<float>& x, Buf<float>& y, Buf<float>& out, int di, int dj, int dl,
                                   const std::vector<int64_t>& c) {
      ManagedBuffer<float> mx(x.size()), my(y.size()), mo(out.size());
      std::copy(x.begin(), x.end(), mx.data());
      std::copy(y.begin(), y.end(), my.data());
      k(Grid(1).with_warps(w).backend(Backend::GPU), mx.data(), my.data(), mo.data(), di, dj, dl, int(c[0]), int(c[1]),
        int(c[2]), int(c[3]), int(c[4]), int(c[5]), int(c[6]));
      synchronize();
      std::copy(mo.data(), mo.data() + mo.size(), out.begin());
    }, int64_t{4096} * w);
  }
}
