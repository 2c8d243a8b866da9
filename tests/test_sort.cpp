// tests/test_sort.cpp - sort, argsort, sort_with_indices, topk and gather (docs/semantics.md,
// "Sorting and gathering") against std::stable_sort references: every dtype, ties, all-equal
// lines, NaN, +-inf, -0.0 / +0.0, descending, axes of 1-, 2- and 3-D tiles, ragged lengths on the
// CPU (powers of two on the GPU, with explicit padding that sorts last); gather with indices on
// and past the edges; the user errors; PTX of sort, topk and gather kernels assembled by ptxas.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "error_util.hpp"
#include "ops_util.hpp"
#include "ptxas_util.hpp"

using namespace tle;
using namespace opstest;

namespace {

/// The element order of docs/semantics.md: a sorts strictly before b (ascending). NaN after
/// everything, -0.0 == +0.0, unsigned integers unsigned, false < true.
template <class T> bool before(T a, T b) {
  if constexpr (is_fp_v<T>) {
    const double x = to_d(a), y = to_d(b);
    const bool nx = std::isnan(x), ny = std::isnan(y);
    if (nx || ny) return !nx && ny;
    return x < y;
  } else {
    return a < b;
  }
}

/// The indices of a line of n elements (element j at x[j * stride]) in stable sorted order.
template <class T> std::vector<int32_t> ref_order(const T* x, int64_t n, int64_t stride, bool descending) {
  std::vector<int32_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) {
    return descending ? before(x[b * stride], x[a * stride]) : before(x[a * stride], x[b * stride]);
  });
  return idx;
}

template <class T> bool same_bits(T a, T b) { return std::memcmp(&a, &b, sizeof(T)) == 0; }

/// A value that sorts after every other (or ties with the last and, having a higher index,
/// stays after it): the padding of a line on the GPU.
template <class T> auto pad_last(bool descending) {
  if constexpr (std::is_same_v<T, bool>) return !descending;
  else if constexpr (is_fp_v<T>)
    return descending ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  else return descending ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
}

/// Test data with many ties: mode 0 from a small pool (for floats NaN of both signs, +-inf,
/// -0.0, +0.0 and a few values), 1 all equal, 2 spread over the type's range.
template <class T> Buf<T> sort_data(size_t n, unsigned seed, int mode) {
  std::mt19937_64 g(seed);
  Buf<T> b(n);
  if (mode == 1) {
    T v;
    if constexpr (std::is_same_v<T, bool>) v = (seed & 1) != 0;
    else if constexpr (is_fp_v<T>) v = from_d<T>(-0.0);
    else v = random_full<T>(1, seed)[0];
    for (size_t i = 0; i < n; ++i) b[i] = v;
    return b;
  }
  if constexpr (std::is_same_v<T, bool>) {
    for (size_t i = 0; i < n; ++i) b[i] = (g() & 1) != 0;
  } else if constexpr (is_fp_v<T>) {
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    const double pool[] = {nan, -nan, inf, -inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.0, 3.0, 1e-3};
    std::uniform_real_distribution<double> d(-1000, 1000);
    for (size_t i = 0; i < n; ++i) b[i] = mode == 0 ? from_d<T>(pool[g() % 12]) : from_d<T>(d(g));
  } else {
    Buf<T> full = random_full<T>(n, seed);
    for (size_t i = 0; i < n; ++i) {
      if (mode == 2) b[i] = full[i];
      else {
        const T pool[] = {T(0), T(1), T(2), T(3), std::numeric_limits<T>::max(), std::numeric_limits<T>::lowest()};
        b[i] = std::is_signed_v<T> && g() % 3 == 0 ? T(0 - static_cast<long long>(g() % 3)) : pool[g() % 6];
      }
    }
  }
  return b;
}

/// One line sorted by the kernel (values and indices) against the reference order.
template <class T>
std::string check_line(const T* x, int64_t n, int64_t xstride, const T* vals, const int32_t* idx, int64_t k,
                       int64_t ostride, bool descending) {
  auto want = ref_order(x, n, xstride, descending);
  for (int64_t j = 0; j < k; ++j) {
    const int32_t w = want[static_cast<size_t>(j)], gi = idx[j * ostride];
    if (gi != w)
      return "position " + std::to_string(j) + ": index " + std::to_string(gi) + ", want " + std::to_string(w);
    if (!same_bits(vals[j * ostride], x[w * xstride]))
      return "position " + std::to_string(j) + ": value " + show(vals[j * ostride]) + ", want " + show(x[w * xstride]);
  }
  return "";
}

template <class T> auto sort_1d_kernel() {
  return jit("sort_1d", [](Ptr<T> x, Ptr<T> vals, Ptr<int32_t> idx, Ptr<T> vals2, Ptr<int32_t> idx2, Tile<int32_t> n,
                           Constexpr<int> BLOCK, Constexpr<bool> DESC) {
    Tile<int32_t> o = arange(0, BLOCK);
    Tile<bool> m = o < n;
    Tile<T> v = load(x + o, m, pad_last<T>(DESC));
    auto [sv, si] = sort_with_indices(v, 0, DESC);
    store(vals + o, sv, m);
    store(idx + o, si, m);
    store(vals2 + o, sort(v, -1, DESC), m);
    store(idx2 + o, argsort(v, 0, DESC), m);
  });
}

}  // namespace

TEMPLATE_TEST_CASE("sort: 1-D lines of every dtype, ragged, with ties, NaN, infinities and signed zeros", "[ops][sort]",
                   float, double, f16, bf16, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t,
                   bool) {
  using T = TestType;
  auto k = sort_1d_kernel<T>();
  unsigned seed = 1;
  for (int n : {1, 2, 17, 100, 1001}) {
    int p2 = 1;
    while (p2 < n) p2 *= 2;
    std::vector<int> blocks = {n};  // the line's own length, and padded to a power of two
    if (p2 != n) blocks.push_back(p2);
    for (int block : blocks) {
      for (int mode : {0, 1, 2})
        for (bool desc : {false, true}) {
          INFO("n " << n << " block " << block << " mode " << mode << " descending " << desc);
          Buf<T> x = sort_data<T>(static_cast<size_t>(n), seed++, mode);
          Buf<T> vals(n), vals2(n);
          Buf<int32_t> idx(n, -1), idx2(n, -1);
          k(Grid(1), x.data(), vals.data(), idx.data(), vals2.data(), idx2.data(), n, block, desc);
          CHECK(check_line(x.data(), n, 1, vals.data(), idx.data(), n, 1, desc) == "");
          CHECK(check_line(x.data(), n, 1, vals2.data(), idx2.data(), n, 1, desc) == "");
        }
    }
  }
}

// Values alone (no indices used anywhere in the kernel): on the GPU an integer sort then moves its
// keys alone through the network and rebuilds each element from its key (lower_sort's keys-only
// form); the values must be those of a plain sort, padded lines and topk's k included.
TEMPLATE_TEST_CASE("sort: values alone of integer lines, and topk values", "[ops][sort]", int8_t, int32_t, int64_t,
                   uint16_t, uint64_t, bool) {
  using T = TestType;
  auto k = jit("sort_values_only", [](Ptr<T> x, Ptr<T> vals, Ptr<T> top, Tile<int32_t> n, Constexpr<int> BLOCK,
                                      Constexpr<int> K, Constexpr<bool> DESC) {
    Tile<int32_t> o = arange(0, BLOCK);
    Tile<bool> m = o < n;
    Tile<T> v = load(x + o, m, pad_last<T>(DESC));
    store(vals + o, sort(v, 0, DESC), m);
    store(top + arange(0, K), topk(v, K, 0, DESC).values);
  });
  unsigned seed = 500;
  for (int n : {1, 17, 1001}) {
    int p2 = 1;
    while (p2 < n) p2 *= 2;
    for (int block : {n, p2}) {
      for (int mode : {0, 1, 2})
        for (bool desc : {false, true}) {
          INFO("n " << n << " block " << block << " mode " << mode << " descending " << desc);
          Buf<T> x = sort_data<T>(static_cast<size_t>(n), seed++, mode);
          std::vector<T> want(x.begin(), x.end());
          std::stable_sort(want.begin(), want.end(), [&](T a, T b) { return desc ? b < a : a < b; });
          const int kk = n == 1 ? 1 : n / 2 + 1;
          Buf<T> vals(n), top(kk);
          k(Grid(1), x.data(), vals.data(), top.data(), n, block, kk, desc);
          for (int i = 0; i < n; ++i) REQUIRE(vals[i] == want[i]);
          for (int i = 0; i < kk; ++i) REQUIRE(top[i] == want[i]);
        }
    }
  }
}

TEST_CASE("sort: the order of special float values, ascending and descending", "[ops][sort]") {
  // A fixed line whose sorted order is known by heart: -inf < -1 < -0.0 == +0.0 (stable) < 1 < inf < NaN.
  auto k = sort_1d_kernel<float>();
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  Buf<float> x = {nan, 1.0f, 0.0f, -inf, -0.0f, inf, -1.0f, -nan};
  Buf<float> vals(8), vals2(8);
  Buf<int32_t> idx(8), idx2(8);
  k(Grid(1), x.data(), vals.data(), idx.data(), vals2.data(), idx2.data(), 8, 8, false);
  CHECK(std::vector<int32_t>(idx.begin(), idx.end()) == std::vector<int32_t>{3, 6, 2, 4, 1, 5, 0, 7});
  CHECK(std::signbit(vals[2]) == false);
  CHECK(std::signbit(vals[3]) == true);
  k(Grid(1), x.data(), vals.data(), idx.data(), vals2.data(), idx2.data(), 8, 8, true);
  CHECK(std::vector<int32_t>(idx.begin(), idx.end()) == std::vector<int32_t>{0, 7, 5, 1, 2, 4, 6, 3});
  CHECK(std::isnan(vals[0]));
  CHECK(std::signbit(vals[1]) == true);  // -nan keeps its bits
}

namespace {
template <class T> auto sort_2d_kernel() {
  return jit("sort_2d", [](Ptr<T> x, Ptr<T> vals, Ptr<int32_t> idx, Ptr<T> gathered, Constexpr<int> M,
                           Constexpr<int> N, Constexpr<int> AXIS, Constexpr<bool> DESC) {
    Tile<int32_t> off = expand_dims(arange(0, M), 1) * N + expand_dims(arange(0, N), 0);
    Tile<T> v = load(x + off);
    auto [sv, si] = sort_with_indices(v, AXIS, DESC);
    store(vals + off, sv);
    store(idx + off, si);
    store(gathered + off, gather(v, si, AXIS));  // carrying a tile along: the values again
  });
}

template <class T> void run_sort_2d() {
  auto k = sort_2d_kernel<T>();
  unsigned seed = 100;
  const int shapes[][2] = {{1, 1}, {3, 17}, {4, 8}, {16, 2}, {5, 1}, {32, 64}};
  for (auto& s : shapes) {
    const int M = s[0], N = s[1];
    for (int axis : {0, 1})
      for (bool desc : {false, true})
        for (int w : {1, 8}) {
          INFO("shape [" << M << ", " << N << "] axis " << axis << " descending " << desc << " warps " << w);
          Buf<T> x = sort_data<T>(static_cast<size_t>(M * N), seed, static_cast<int>(seed % 3));
          ++seed;
          Buf<T> vals(M * N), gathered(M * N);
          Buf<int32_t> idx(M * N, -1);
          k(Grid(1).with_warps(w), x.data(), vals.data(), idx.data(), gathered.data(), M, N, axis, desc);
          const int lines = axis == 0 ? N : M, n = axis == 0 ? M : N, stride = axis == 0 ? N : 1;
          for (int line = 0; line < lines; ++line) {
            const int start = axis == 0 ? line : line * N;
            INFO("line " << line);
            CHECK(check_line(x.data() + start, n, stride, vals.data() + start, idx.data() + start, n, stride, desc) ==
                  "");
          }
          bool same = true;
          for (int i = 0; i < M * N; ++i) same = same && same_bits(vals[i], gathered[i]);
          CHECK(same);
        }
  }
}
}  // namespace

TEST_CASE("sort: axis 0 and 1 of 2-D tiles (f32, i32, bf16, u64), gather with the indices", "[ops][sort]") {
  run_sort_2d<float>();
  run_sort_2d<int32_t>();
  run_sort_2d<bf16>();
  run_sort_2d<uint64_t>();
}

TEST_CASE("sort: every axis of a 3-D tile (f64, i16)", "[ops][sort]") {
  auto run = [](auto tag) {
    using T = decltype(tag);
    auto k = jit("sort_3d", [](Ptr<T> x, Ptr<T> vals, Ptr<int32_t> idx, Constexpr<int> A, Constexpr<int> B,
                               Constexpr<int> C, Constexpr<int> AXIS, Constexpr<bool> DESC) {
      Tile<int32_t> off = expand_dims(expand_dims(arange(0, A), 1), 2) * (B * C) +
                          expand_dims(expand_dims(arange(0, B), 0), 2) * C +
                          expand_dims(expand_dims(arange(0, C), 0), 0);
      auto [sv, si] = sort_with_indices(load(x + off), AXIS, DESC);
      store(vals + off, sv);
      store(idx + off, si);
    });
    const int shapes[][3] = {{2, 3, 5}, {2, 4, 8}};
    unsigned seed = 7;
    for (auto& s : shapes) {
      const int A = s[0], B = s[1], C = s[2];
      for (int axis : {0, 1, 2})
        for (bool desc : {false, true}) {
          INFO("shape [" << A << ", " << B << ", " << C << "] axis " << axis << " descending " << desc);
          Buf<T> x = sort_data<T>(static_cast<size_t>(A * B * C), seed++, 0);
          Buf<T> vals(A * B * C);
          Buf<int32_t> idx(A * B * C, -1);
          k(Grid(1), x.data(), vals.data(), idx.data(), A, B, C, axis, desc);
          const int dims[3] = {A, B, C}, strides[3] = {B * C, C, 1};
          const int n = dims[axis], stride = strides[axis];
          for (int a = 0; a < A; ++a)
            for (int b = 0; b < B; ++b)
              for (int c = 0; c < C; ++c) {
                const int coord[3] = {a, b, c};
                if (coord[axis] != 0) continue;  // one check per line, at its first element
                const int start = a * B * C + b * C + c;
                CHECK(check_line(x.data() + start, n, stride, vals.data() + start, idx.data() + start, n, stride,
                                 desc) == "");
              }
        }
    }
  };
  run(double{});
  run(int16_t{});
}

namespace {
template <class T> void run_topk() {
  auto k = jit("topk_2d", [](Ptr<T> x, Ptr<T> vals, Ptr<int32_t> idx, Constexpr<int> M, Constexpr<int> N,
                             Constexpr<int> K, Constexpr<int> AXIS, Constexpr<bool> LARGEST) {
    Tile<T> v = load(x + expand_dims(arange(0, M), 1) * N + expand_dims(arange(0, N), 0));
    auto [tv, ti] = topk(v, K, AXIS, LARGEST);
    const int RM = AXIS == 0 ? int(K) : int(M), RN = AXIS == 0 ? int(N) : int(K);
    CHECK(tv.shape() == Shape{RM, RN});
    Tile<int32_t> off = expand_dims(arange(0, RM), 1) * RN + expand_dims(arange(0, RN), 0);
    store(vals + off, tv);
    store(idx + off, ti);
  });
  unsigned seed = 300;
  const int cases[][3] = {{1, 17, 1}, {1, 17, 5}, {1, 17, 17}, {4, 8, 1}, {4, 8, 2}, {4, 8, 8}, {3, 100, 7},
                          {16, 64, 4}, {8, 1, 1}};
  for (auto& c : cases)
    for (int axis : {1, 0, -1}) {
      const int M = axis == 0 ? c[1] : c[0], N = axis == 0 ? c[0] : c[1], K = c[2];
      for (bool largest : {true, false}) {
        INFO("shape [" << M << ", " << N << "] k " << K << " axis " << axis << " largest " << largest);
        Buf<T> x = sort_data<T>(static_cast<size_t>(M * N), seed, static_cast<int>(seed % 3));
        ++seed;
        Buf<T> vals(M * N);
        Buf<int32_t> idx(M * N, -1);
        k(Grid(1), x.data(), vals.data(), idx.data(), M, N, K, axis, largest);
        const bool ax0 = axis == 0;
        const int lines = ax0 ? N : M, n = ax0 ? M : N, xstride = ax0 ? N : 1, ostride = ax0 ? N : 1;
        for (int line = 0; line < lines; ++line) {
          INFO("line " << line);
          const int xs = ax0 ? line : line * N, os = ax0 ? line : line * K;
          CHECK(check_line(x.data() + xs, n, xstride, vals.data() + os, idx.data() + os, K, ostride, largest) == "");
        }
      }
    }
}
}  // namespace

TEST_CASE("sort: topk, largest and smallest, k = 1 .. n, both axes (f32, bf16, i64, u8)", "[ops][sort]") {
  run_topk<float>();
  run_topk<bf16>();
  run_topk<int64_t>();
  run_topk<uint8_t>();
}

namespace {
template <class T, class I> void run_gather() {
  auto k = jit("gather_2d", [](Ptr<T> x, Ptr<I> index, Ptr<T> out, Constexpr<int> M, Constexpr<int> N, Constexpr<int> P,
                               Constexpr<int> Q, Constexpr<int> AXIS) {
    Tile<T> v = load(x + expand_dims(arange(0, M), 1) * N + expand_dims(arange(0, N), 0));
    Tile<int32_t> off = expand_dims(arange(0, P), 1) * Q + expand_dims(arange(0, Q), 0);
    store(out + off, gather(v, load(index + off), AXIS));
  });
  // (M, N) of x, (P, Q) of the index, axis: the index's dims equal x's except along the axis.
  const int cases[][5] = {{5, 3, 7, 3, 0}, {4, 8, 16, 8, 0}, {1, 1, 1, 1, 0}, {3, 5, 3, 7, 1},
                          {8, 4, 8, 16, 1}, {2, 16, 2, 1, 1}, {16, 16, 16, 16, 1}};
  unsigned seed = 500;
  for (auto& c : cases) {
    const int M = c[0], N = c[1], P = c[2], Q = c[3], axis = c[4];
    INFO("x [" << M << ", " << N << "] index [" << P << ", " << Q << "] axis " << axis);
    const int dim = axis == 0 ? M : N;
    Buf<T> x = sort_data<T>(static_cast<size_t>(M * N), seed++, 2);
    Buf<I> index(P * Q);
    std::mt19937_64 g(seed++);
    for (int i = 0; i < P * Q; ++i) {
      // mostly in range, with the edges and values just past them (and the type's extremes)
      const long long pick[] = {0, dim - 1, dim, -1, static_cast<long long>(std::numeric_limits<I>::max()),
                                static_cast<long long>(std::numeric_limits<I>::lowest())};
      long long v = g() % 3 == 0 ? pick[g() % 6] : static_cast<long long>(g() % static_cast<unsigned>(dim));
      index[i] = static_cast<I>(v);
    }
    Buf<T> out(P * Q);
    k(Grid(1), x.data(), index.data(), out.data(), M, N, P, Q, axis);
    int bad = 0;
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        const long long iv = static_cast<long long>(index[p * Q + q]);
        T want = from_d<T>(0);
        if (iv >= 0 && iv < dim) want = axis == 0 ? x[iv * N + q] : x[p * N + iv];
        if (!same_bits(out[p * Q + q], want) && bad++ == 0)
          FAIL_CHECK("at [" << p << ", " << q << "] index " << iv << ": got " << show(out[p * Q + q]) << ", want "
                            << show(want));
      }
    CHECK(bad == 0);
  }
}
}  // namespace

TEST_CASE("gather: along either axis, indices on and past the edges give 0 outside", "[ops][sort]") {
  run_gather<float, int32_t>();
  run_gather<double, int64_t>();
  run_gather<bf16, uint8_t>();
  run_gather<int16_t, int16_t>();
  run_gather<bool, uint32_t>();
  run_gather<uint64_t, int8_t>();
}

// ============================================================ user errors

namespace {
int line = 0;
std::vector<float> fbuf(64, 1.0f);
std::vector<int32_t> ibuf(64, 0);
template <class F> void expect_error(F&& f, const std::vector<std::string>& phrases) {
  errtest::expect_user_error(f, phrases, "test_sort.cpp", line);
}
}  // namespace

TEST_CASE("errors: sort, topk and gather check axes, k, index types and shapes", "[errors][sort]") {
  auto axis = jit("err_sort_axis", [](Ptr<float> x) {
    Tile<float> v = load(x + arange(0, 8));
    line = __LINE__; store(x + arange(0, 8), sort(v, 1));
  });
  expect_error([&] { axis(Grid(1), fbuf.data()); }, {"sort: axis 1 is out of range for a tile of rank 1"});
  auto axis2 = jit("err_argsort_axis", [](Ptr<float> x, Ptr<int32_t> y) {
    Tile<float> v = load(x + expand_dims(arange(0, 4), 1) * 4 + expand_dims(arange(0, 4), 0));
    line = __LINE__; Tile<int32_t> i = argsort(v, -3, true);
    store(y + arange(0, 4), sum(i, 0));
  });
  expect_error([&] { axis2(Grid(1), fbuf.data(), ibuf.data()); }, {"argsort: axis -3 is out of range"});
  auto scalar = jit("err_sort_scalar", [](Ptr<float> x) {
    Tile<float> v = load(x);
    line = __LINE__; store(x, sort(v, 0));
  });
  expect_error([&] { scalar(Grid(1), fbuf.data()); }, {"sort: cannot sort a scalar"});
  auto big_k = jit("err_topk_k", [](Ptr<float> x) {
    Tile<float> v = load(x + arange(0, 8));
    line = __LINE__; auto [tv, ti] = topk(v, 9);
    store(x + arange(0, 9), tv);
  });
  expect_error([&] { big_k(Grid(1), fbuf.data()); }, {"topk: k = 9 is outside 1..8 (the size of axis 0"});
  auto zero_k = jit("err_topk_k0", [](Ptr<float> x) {
    Tile<float> v = load(x + arange(0, 8));
    line = __LINE__; auto r = topk(v, 0);
    store(x, max(r.values, 0));
  });
  expect_error([&] { zero_k(Grid(1), fbuf.data()); }, {"topk: k must be at least 1, got 0"});
  auto float_index = jit("err_gather_float", [](Ptr<float> x) {
    Tile<float> v = load(x + arange(0, 8));
    line = __LINE__; store(x + arange(0, 8), gather(v, v, 0));
  });
  expect_error([&] { float_index(Grid(1), fbuf.data()); }, {"gather (index) needs integer tiles, got f32[8]"});
  auto rank = jit("err_gather_rank", [](Ptr<float> x) {
    Tile<float> v = load(x + expand_dims(arange(0, 4), 1) * 4 + expand_dims(arange(0, 4), 0));
    line = __LINE__; Tile<float> g = gather(v, arange(0, 4), 0);
    store(x + arange(0, 4), g);
  });
  expect_error([&] { rank(Grid(1), fbuf.data()); }, {"gather: the index tile i32[4] must have the rank of the input"});
  auto dims = jit("err_gather_dims", [](Ptr<float> x) {
    Tile<float> v = load(x + expand_dims(arange(0, 4), 1) * 4 + expand_dims(arange(0, 4), 0));
    Tile<int32_t> i = expand_dims(arange(0, 2), 1) + expand_dims(arange(0, 8), 0);  // [2, 8]
    line = __LINE__; Tile<float> g = gather(v, i, 0);
    store(x + arange(0, 2), sum(g, 1));
  });
  expect_error([&] { dims(Grid(1), fbuf.data()); }, {"differ in dimension 1; only the gather axis 0 may differ"});
  auto gaxis = jit("err_gather_axis", [](Ptr<float> x) {
    Tile<float> v = load(x + arange(0, 8));
    line = __LINE__; store(x + arange(0, 8), gather(v, arange(0, 8), 1));
  });
  expect_error([&] { gaxis(Grid(1), fbuf.data()); }, {"gather: axis 1 is out of range"});
}

TEST_CASE("ptx: topk with a k that is not a power of two (a result the GPU pads) assembles", "[ptx][sort]") {
  auto k = jit("topk_k3", [](Ptr<float> x, Ptr<float> y) {
    Tile<float> v = load(x + arange(0, 8));
    auto r = topk(v, 3);
    store(y + arange(0, 3), r.values);
  });
  for (int w : {1, 4}) ptxtest::assemble("topk k=3", k.ptx(90, w, fbuf.data(), fbuf.data()));
}

TEST_CASE("errors: a sort too large for shared memory is refused on the GPU at the call", "[errors][sort]") {
  // [256, 256] f32: keys, indices and elements take 3 * 4 * 65536 bytes, beyond sm_90's 227 KB.
  auto k = jit("err_sort_smem", [](Ptr<float> x) {
    Tile<int32_t> off = expand_dims(arange(0, 256), 1) * 256 + expand_dims(arange(0, 256), 0);
    Tile<float> v = load(x + off);
    line = __LINE__; store(x + off, sort(v, 1));
  });
  expect_error([&] { (void)k.ptx(90, 4, fbuf.data()); }, {"bytes of shared memory per program", "this sort"});
}

// ============================================================ PTX

namespace {
template <class T> T* fake(uintptr_t a = 0x10000) { return reinterpret_cast<T*>(a); }
void assemble_at_warps(const std::string& name, const std::function<std::string(int warps)>& make) {
  for (int w : {1, 4, 8}) {
    INFO(name << " with " << w << " warps");
    std::string ptx;
    try {
      ptx = make(w);
    } catch (const std::exception& e) {
      FAIL_CHECK("compiling " << name << " threw: " << e.what());
      continue;
    }
    ptxtest::assemble(name + " warps=" + std::to_string(w), ptx, "sm_90a");
  }
}
}  // namespace

TEST_CASE("ptx: sort, topk and gather kernels assemble at 1, 4 and 8 warps", "[ptx][sort]") {
  auto s1 = sort_1d_kernel<float>();
  assemble_at_warps("sort f32 [1024]", [&](int w) {
    return s1.ptx(90, w, fake<float>(), fake<float>(), fake<int32_t>(), fake<float>(), fake<int32_t>(), 1000, 1024,
                  true);
  });
  auto s2 = sort_2d_kernel<int64_t>();
  assemble_at_warps("sort i64 [64, 32] axis 0", [&](int w) {
    return s2.ptx(90, w, fake<int64_t>(), fake<int64_t>(), fake<int32_t>(), fake<int64_t>(), 64, 32, 0, false);
  });
  auto s3 = sort_2d_kernel<f16>();
  assemble_at_warps("sort f16 [16, 128] axis 1", [&](int w) {
    return s3.ptx(90, w, fake<f16>(), fake<f16>(), fake<int32_t>(), fake<f16>(), 16, 128, 1, true);
  });
  auto s4 = sort_1d_kernel<bool>();
  assemble_at_warps("sort bool [1]", [&](int w) {
    return s4.ptx(90, w, fake<bool>(), fake<bool>(), fake<int32_t>(), fake<bool>(), fake<int32_t>(), 1, 1, false);
  });
  auto vo = jit("sort_values_ptx", [](Ptr<int64_t> x, Ptr<int64_t> vals, Ptr<int8_t> y, Ptr<int8_t> top) {
    Tile<int32_t> o = arange(0, 1000);
    store(vals + o, sort(load(x + o), 0, true));  // keys alone (a padded line)
    store(top + arange(0, 100), topk(load(y + o), 100).values);
  });
  assemble_at_warps("sort values i64 [1000], topk values i8 k 100", [&](int w) {
    return vo.ptx(90, w, fake<int64_t>(), fake<int64_t>(), fake<int8_t>(), fake<int8_t>());
  });
  auto tk = jit("topk_ptx", [](Ptr<bf16> x, Ptr<bf16> vals, Ptr<int32_t> idx) {
    Tile<bf16> v = load(x + expand_dims(arange(0, 8), 1) * 256 + expand_dims(arange(0, 256), 0));
    auto [tv, ti] = topk(v, 16);
    Tile<int32_t> off = expand_dims(arange(0, 8), 1) * 16 + expand_dims(arange(0, 16), 0);
    store(vals + off, tv);
    store(idx + off, ti);
  });
  assemble_at_warps("topk bf16 [8, 256] k 16",
                    [&](int w) { return tk.ptx(90, w, fake<bf16>(), fake<bf16>(), fake<int32_t>()); });
  auto ga = jit("gather_ptx", [](Ptr<float> x, Ptr<int64_t> index, Ptr<float> out) {
    Tile<float> v = load(x + expand_dims(arange(0, 32), 1) * 64 + expand_dims(arange(0, 64), 0));
    Tile<int32_t> off = expand_dims(arange(0, 32), 1) * 128 + expand_dims(arange(0, 128), 0);
    store(out + off, gather(v, load(index + off), 1));
  });
  assemble_at_warps("gather f32 [32, 64] -> [32, 128]",
                    [&](int w) { return ga.ptx(90, w, fake<float>(), fake<int64_t>(), fake<float>()); });
}
