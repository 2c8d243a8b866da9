// tests/test_ops_library.cpp - the library kernels of include/tle/ops/ (tle::ops::topk,
// moe_align_block_size, expert_count) against plain C++ references: ragged row lengths, every
// path of topk (one kernel for short rows, one program per row, several programs per row), NaN,
// +-inf, -0.0 / +0.0, duplicates and all-equal rows, f16 and bf16; routing with empty experts,
// every token on one expert, no tokens; the user errors at the caller's line.
#include <tle/ops.hpp>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <thread>

#include "error_util.hpp"
#include "ops_util.hpp"
#include "ptxas_util.hpp"

using namespace tle;
using namespace opstest;

namespace {

bool interp_mode() {
  const char* e = std::getenv("TLE_TEST_BACKEND");
  return e && (std::strcmp(e, "interp") == 0 || std::strcmp(e, "INTERP") == 0);
}

/// a sorts strictly after b in torch.topk(largest=True)'s order: NaN above everything, -0.0 == +0.0.
template <class T> bool greater(T a, T b) {
  const double x = to_d(a), y = to_d(b);
  const bool nx = std::isnan(x), ny = std::isnan(y);
  if (nx || ny) return nx && !ny;
  return x > y;
}

/// The reference: per row, the first k of a stable sort (descending for the largest), by
/// std::partial_sort over (value, index) with the index as the tie break.
template <class T>
void ref_topk(const Buf<T>& x, int64_t rows, int64_t n, int64_t k, bool largest, std::vector<T>& vals,
              std::vector<int32_t>& idx) {
  vals.assign(size_t(rows * k), T());
  idx.assign(size_t(rows * k), 0);
  std::vector<int32_t> order(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x.data() + r * n;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      const bool ab = largest ? greater(row[a], row[b]) : greater(row[b], row[a]);
      const bool ba = largest ? greater(row[b], row[a]) : greater(row[a], row[b]);
      return ab || (!ba && a < b);
    });
    for (int64_t j = 0; j < k; ++j) {
      idx[size_t(r * k + j)] = order[size_t(j)];
      vals[size_t(r * k + j)] = row[order[size_t(j)]];
    }
  }
}

/// Data: 0 uniform in [-1000, 1000], 1 a small pool with NaN of both signs, +-inf, +-0.0 and
/// repeated values, 2 all equal (-0.0 and +0.0 mixed), 3 (rows of n) per row 1024 distinct values
/// (exact in f16 and bf16, in [2, 510]) 4 times each at random columns, above the rest of the row
/// (50 values, -1 to -50, repeated): the k largest with k a multiple of 4 up to 4096 end with a
/// whole group of ties, others cut one; 4 as 3 with the largest value twice only (so that a
/// multiple of 4 cuts a group in two).
template <class T> Buf<T> topk_data(size_t count, unsigned seed, int mode, size_t n = 0) {
  std::mt19937_64 g(seed);
  Buf<T> b(count);
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const double pool[] = {nan, -nan, inf, -inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.0, 3.0, 1e-3, 7.0, -7.0};
  std::uniform_real_distribution<double> d(-1000, 1000);
  if (mode == 3 || mode == 4) {
    std::vector<size_t> perm(n);
    for (size_t r = 0; r < count / n; ++r) {
      std::iota(perm.begin(), perm.end(), size_t(0));
      std::shuffle(perm.begin(), perm.end(), g);
      for (size_t j = 0; j < n; ++j) {
        const size_t q = (perm[j] + (mode == 4 ? 2 : 0)) / 4;
        const size_t t = 1023 - q;  // group 0 the largest
        b[r * n + j] = from_d<T>(q < 1024 ? std::ldexp(double(128 + t % 128), int(t / 128) - 6) : -1.0 - double(q % 50));
      }
    }
    return b;
  }
  for (size_t i = 0; i < count; ++i) {
    if (mode == 0) b[i] = from_d<T>(d(g));
    else if (mode == 1) b[i] = from_d<T>(pool[g() % 14]);
    else b[i] = from_d<T>(g() % 2 ? 0.0 : -0.0);
  }
  return b;
}

template <class T> std::string bit_diffs(const Buf<T>& got, const std::vector<T>& want) {
  for (size_t i = 0; i < want.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0)
      return "first differing value at [" + std::to_string(i) + "]: got " + show<T>(got[i]) + ", want " +
             show<T>(want[i]);
  return "";
}

template <class T>
void check_topk(int64_t rows, int64_t n, int64_t k, bool largest, int mode, int ppr, unsigned seed, int warps = 0) {
  INFO("rows " << rows << " n " << n << " k " << k << " largest " << largest << " mode " << mode
                << " programs_per_row " << ppr << " num_warps " << warps);
  Buf<T> x = topk_data<T>(size_t(rows * n), seed, mode, size_t(n));
  Buf<T> vals(size_t(rows * k));
  Buf<int32_t> idx(size_t(rows * k), -1);
  ops::TopkOptions o;
  o.largest = largest;
  o.programs_per_row = ppr;
  o.num_warps = warps;
  const size_t ws_size = ops::topk_workspace_size<T>(rows, n, k, o);
  Buf<int32_t> ws(std::max<size_t>(ws_size, 1), 12345);  // garbage: the kernels zero what they use
  if (ws_size) o.workspace = ws.data();
  ops::topk(x.data(), rows, n, k, vals.data(), idx.data(), o);
  std::vector<T> want_v;
  std::vector<int32_t> want_i;
  ref_topk(x, rows, n, k, largest, want_v, want_i);
  CHECK(diffs(idx, want_i) == "");
  CHECK(bit_diffs(vals, want_v) == "");
}

}  // namespace

TEST_CASE("ops library: topk f32 ragged rows, every path", "[ops][ops-library]") {
  const bool slow = interp_mode();
  struct Shape { int64_t rows, n; };
  std::vector<Shape> shapes = {{1, 1}, {3, 17}, {64, 17}, {3, 1000}, {64, 1000}, {3, 4100}, {1, 129280}};
  if (!slow) shapes.push_back({64, 4100}), shapes.push_back({3, 129280});
  unsigned seed = 1;
  for (const Shape& s : shapes)
    for (int64_t k : {1, 7, 50, 2048}) {
      if (k > s.n) continue;
      for (int ppr : {0, 1, 3}) {
        if (slow && s.n > 5000 && ppr == 1) continue;
        check_topk<float>(s.rows, s.n, k, true, 0, ppr, seed++);
      }
    }
}

TEST_CASE("ops library: topk f32 smallest, k = n and one element rows", "[ops][ops-library]") {
  unsigned seed = 100;
  for (int ppr : {0, 1, 2}) {
    check_topk<float>(5, 1, 1, false, 0, ppr, seed++);
    check_topk<float>(3, 17, 17, false, 0, ppr, seed++);
    check_topk<float>(2, 3000, 3000, true, 0, ppr, seed++);
    check_topk<float>(3, 4100, 50, false, 0, ppr, seed++);
    check_topk<float>(2, 5000, 2048, false, 0, ppr, seed++);
  }
}

TEST_CASE("ops library: topk NaN, infinities, signed zeros, duplicates, all-equal rows", "[ops][ops-library]") {
  unsigned seed = 200;
  for (int mode : {1, 2})
    for (bool largest : {true, false})
      for (int ppr : {0, 1, 4}) {
        check_topk<float>(3, 17, 7, largest, mode, ppr, seed++);
        check_topk<float>(2, 4100, 50, largest, mode, ppr, seed++);
        check_topk<float>(2, 9000, 2048, largest, mode, ppr, seed++);
        check_topk<float>(1, 9000, 9000 > 8192 ? 8192 : 9000, largest, mode, ppr, seed++);
      }
}

TEST_CASE("ops library: topk at 1, 4, 16 and 32 warps a program, every path", "[ops][ops-library]") {
  // TopkOptions::num_warps changes every kernel's warps (the CPU backend ignores it; the mirrored
  // GPU run, TLE_TEST_BACKEND=gpu, checks it there).
  unsigned seed = 400;
  const std::vector<int> warps_list = default_backend() == Backend::GPU ? std::vector<int>{1, 4, 16, 32} : std::vector<int>{16};
  for (int warps : warps_list)
    for (int ppr : {0, 1, 3}) {
      check_topk<float>(3, 200, 7, true, 0, ppr, seed++, warps);
      check_topk<float>(3, 4100, 50, true, 1, ppr, seed++, warps);
      check_topk<float>(2, 33000, 2048, false, 0, ppr, seed++, warps);
      check_topk<bf16>(2, 20000, 1000, true, 1, ppr, seed++, warps);
    }
}

TEST_CASE("ops library: topk f16 and bf16", "[ops][ops-library]") {
  unsigned seed = 300;
  for (int mode : {0, 1})
    for (bool largest : {true, false})
      for (int ppr : {0, 1, 3}) {
        check_topk<f16>(3, 17, 7, largest, mode, ppr, seed++);
        check_topk<f16>(3, 4100, 50, largest, mode, ppr, seed++);
        check_topk<bf16>(3, 1000, 7, largest, mode, ppr, seed++);
        check_topk<bf16>(2, 20000, 2048, largest, mode, ppr, seed++);
      }
}

TEST_CASE("ops library: topk cooperative tail at 2, 3, 32 and 256 programs a row, ties at the k-th key",
          "[ops][ops-library]") {
  // The tail kernel reads the candidates of every slice in one [PS, 2048 / PS] tile (PS: ppr
  // rounded up to a power of two, at most 256): 2 and 3 slices (PS 2, 4; also on an odd n, whose
  // rows and candidate regions are not 16-byte aligned), 32, 256, and 1000 asked
  // for on a row of 525000 (clamped to 256, rounded to 129 slices of 4096: PS 256). Ties at
  // k = 2048: data mode 3 ends the k largest with a whole group of 4 equal keys (E == krem > 1,
  // placed in the unordered loop), mode 4 cuts one in two (E > krem: the ordered loop over the
  // slices), so do mode 1 (a pool of 14 values) and 2 (all equal); mode 0 f32 has no ties (E ==
  // krem == 1). One k keeps the kernels compiled few.
  namespace tk = ops::detail_topk;
  const bool slow = interp_mode();
  auto slices = [](int64_t rows, int64_t n, int64_t k, int elem_bytes, int ppr) {
    const tk::Plan p = tk::plan(rows, n, k, elem_bytes, ppr, default_backend());
    return p.mode == tk::Plan::Coop ? p.ppr : int64_t(-1);
  };
  // Mode 3 and 4 rows as described: the ties at the k-th (2048-th largest) element of a row.
  auto ties = [](int mode, int64_t n, unsigned seed) {
    Buf<bf16> x = topk_data<bf16>(size_t(n), seed, mode, size_t(n));
    std::vector<bf16> v;
    std::vector<int32_t> i;
    ref_topk(x, 1, n, 2048, true, v, i);
    const double kth = to_d(v[2047]);
    int64_t e = 0, krem = 0;
    for (int64_t j = 0; j < n; ++j) e += to_d(x[size_t(j)]) == kth;
    for (int64_t j = 0; j < 2048; ++j) krem += to_d(v[size_t(j)]) == kth;
    return std::pair<int64_t, int64_t>(e, krem);
  };
  CHECK(ties(3, 5000, 1) == std::pair<int64_t, int64_t>(4, 4));
  CHECK(ties(4, 65000, 2) == std::pair<int64_t, int64_t>(4, 2));
  struct Case { int64_t rows, n; int ppr; int64_t slices; };
  std::vector<Case> cases = {{2, 5000, 2, 2}, {3, 5000, 3, 3}, {2, 5001, 3, 3}, {1, 65000, 32, 32}};
  if (!slow) cases.push_back({1, 523000, 256, 256}), cases.push_back({1, 525000, 1000, 129});
  unsigned seed = 500;
  for (const Case& c : cases) {
    CAPTURE(c.rows, c.n, c.ppr);
    REQUIRE(slices(c.rows, c.n, 2048, 4, c.ppr) == c.slices);
    REQUIRE(slices(c.rows, c.n, 2048, 2, c.ppr) == c.slices);
    for (int mode : {0, 1, 2, 3, 4}) {
      check_topk<float>(c.rows, c.n, 2048, true, mode, c.ppr, seed++);
      check_topk<bf16>(c.rows, c.n, 2048, true, mode, c.ppr, seed++);
    }
  }
  for (int mode : {3, 4}) check_topk<f16>(2, 5000, 2048, true, mode, 2, seed++);
  check_topk<bf16>(2, 5000, 2048, false, 1, 2, seed++);
  // One program per row on the cooperative path (PS 1): the plan's own choice when the rows fill
  // the machine and the matrix is 4 MB or more.
  if (!slow) {
    const int64_t units = default_backend() == Backend::CPU ? std::max(1u, std::thread::hardware_concurrency()) : 600;
    const int64_t rows = std::max<int64_t>(units, 27), n = 40000;
    CAPTURE(rows, n);
    if (slices(rows, n, 2048, 4, 0) == 1)
      for (int mode : {1, 3}) check_topk<float>(rows, n, 2048, true, mode, 0, seed++);
    else
      WARN("the plan takes another path for " << rows << " rows of " << n);
  }
}

TEST_CASE("errors: tle::ops::topk refuses k outside 1..n at the caller's line", "[errors][ops-library]") {
  Buf<float> x(100), v(200);
  Buf<int32_t> i(200);
  int line = 0;
  errtest::expect_user_error([&] { line = __LINE__; ops::topk(x.data(), 1, 100, 101, v.data(), i.data()); },
                             {"k = 101 is outside 1..n = 100"}, "test_ops_library.cpp", line);
  errtest::expect_user_error([&] { line = __LINE__; ops::topk(x.data(), 1, 100, 0, v.data(), i.data()); },
                             {"k = 0 is outside 1..n"}, "test_ops_library.cpp", line);
  errtest::expect_user_error([&] { line = __LINE__; ops::topk(x.data(), 1, 0, 1, v.data(), i.data()); },
                             {"n = 0 is outside 1..2^30"}, "test_ops_library.cpp", line);
  errtest::expect_user_error(
      [&] { line = __LINE__; ops::topk(x.data(), 1, 100, 5, v.data(), static_cast<int32_t*>(nullptr)); },
      {"indices pointer is null"}, "test_ops_library.cpp", line);
  Buf<float> big(10000), bv(9000);
  Buf<int32_t> bi(9000);
  errtest::expect_user_error([&] { line = __LINE__; ops::topk(big.data(), 1, 10000, 9000, bv.data(), bi.data()); },
                             {"k = 9000 is larger than 8192"}, "test_ops_library.cpp", line);
  for (int warps : {3, 64, -4}) {
    ops::TopkOptions o;
    o.num_warps = warps;
    errtest::expect_user_error([&] { line = __LINE__; ops::topk(x.data(), 1, 100, 5, v.data(), i.data(), o); },
                               {"num_warps = " + std::to_string(warps) + " is not 0", "power of two from 1 to 32"},
                               "test_ops_library.cpp", line);
  }
  // The cooperative path's workspace holds u64 codes: a 4-byte aligned one is refused before any
  // launch (and the output is untouched).
  {
    Buf<float> cx(4 * 8192), cv(4 * 64);
    Buf<int32_t> ci(4 * 64, -1);
    ops::TopkOptions o;
    o.programs_per_row = 2;
    o.backend = Backend::CPU;
    const size_t wsn = ops::topk_workspace_size<float>(4, 8192, 64, o);
    REQUIRE(wsn > 0);
    Buf<int32_t> ws(wsn + 2);
    o.workspace = ws.data() + 1;  // Buf is 64-byte aligned
    errtest::expect_user_error([&] { line = __LINE__; ops::topk(cx.data(), 4, 8192, 64, cv.data(), ci.data(), o); },
                               {"TopkOptions::workspace is not 8-byte aligned"}, "test_ops_library.cpp", line);
    CHECK(ci[0] == -1);
  }
}

TEST_CASE("ops library: topk on DLPack tensors", "[ops][ops-library]") {
  const int64_t rows = 3, n = 5000, k = 40;
  Buf<bf16> x = topk_data<bf16>(size_t(rows * n), 77, 0);
  Buf<bf16> v(size_t(rows * k));
  Buf<int32_t> idx(size_t(rows * k));
  int64_t xs[2] = {rows, n}, os[2] = {rows, k};
  const DLDevice dev{gpu_mode() ? kDLCUDAManaged : kDLCPU, 0};
  DLTensor tx{x.data(), dev, 2, DLDataType{kDLBfloat, 16, 1}, xs, nullptr, 0};
  DLTensor tv{v.data(), dev, 2, DLDataType{kDLBfloat, 16, 1}, os, nullptr, 0};
  DLTensor ti{idx.data(), dev, 2, DLDataType{kDLInt, 32, 1}, os, nullptr, 0};
  ops::topk(&tx, k, &tv, &ti);
  std::vector<bf16> want_v;
  std::vector<int32_t> want_i;
  ref_topk(x, rows, n, k, true, want_v, want_i);
  CHECK(diffs(idx, want_i) == "");
  CHECK(bit_diffs(v, want_v) == "");
}

TEST_CASE("errors: tle::ops::topk on DLPack tensors of the wrong dtype or shape", "[errors][ops-library]") {
  Buf<float> x(100), v(10);
  Buf<int32_t> idx(10);
  int64_t xs[2] = {2, 50}, os[2] = {2, 5}, bad[2] = {2, 4};
  const DLDevice dev{kDLCPU, 0};
  DLTensor tx{x.data(), dev, 2, DLDataType{kDLFloat, 32, 1}, xs, nullptr, 0};
  DLTensor tv{v.data(), dev, 2, DLDataType{kDLFloat, 32, 1}, os, nullptr, 0};
  DLTensor ti{idx.data(), dev, 2, DLDataType{kDLInt, 64, 1}, os, nullptr, 0};
  int line = 0;
  errtest::expect_user_error([&] { line = __LINE__; ops::topk(&tx, 5, &tv, &ti, {.backend = Backend::CPU}); },
                             {"indices tensor must be int32"}, "test_ops_library.cpp", line);
  ti.dtype.bits = 32;
  ti.shape = bad;
  errtest::expect_user_error([&] { line = __LINE__; ops::topk(&tx, 5, &tv, &ti, {.backend = Backend::CPU}); },
                             {"values and indices must be [2, 5]"}, "test_ops_library.cpp", line);
}

// ---------------------------------------------------------------- MoE routing

namespace {

/// vLLM's contract as a plain loop: entries of one expert in increasing flat index.
struct MoeRef {
  std::vector<int32_t> sorted, experts, counts;
  int32_t post = 0;
};
MoeRef ref_moe(const Buf<int32_t>& ids, int64_t numel, int64_t E, int64_t BS) {
  const ops::MoeAlignSizes s = ops::moe_align_sizes(numel, 1, E, BS);
  MoeRef r;
  r.counts.assign(size_t(E), 0);
  for (int64_t i = 0; i < numel; ++i) r.counts[size_t(ids[i])]++;
  r.sorted.assign(size_t(s.sorted_token_ids), int32_t(numel));
  r.experts.assign(size_t(s.expert_ids), -1);
  int64_t start = 0;
  for (int64_t e = 0; e < E; ++e) {
    int64_t pos = start;
    for (int64_t i = 0; i < numel; ++i)
      if (ids[i] == e) r.sorted[size_t(pos++)] = int32_t(i);
    const int64_t padded = (r.counts[size_t(e)] + BS - 1) / BS * BS;
    for (int64_t b = start / BS; b < (start + padded) / BS; ++b) r.experts[size_t(b)] = int32_t(e);
    start += padded;
  }
  r.post = int32_t(start);
  return r;
}

/// mode 0 uniform experts, 1 every entry on expert E-1, 2 only even experts (odd ones empty).
void check_moe(int64_t tokens, int64_t topk, int64_t E, int64_t BS, int mode, unsigned seed, int warps = 0) {
  INFO("tokens " << tokens << " topk " << topk << " experts " << E << " block_size " << BS << " mode " << mode
                 << " num_warps " << warps);
  std::mt19937 g(seed);
  const ops::MoeAlignSizes s = ops::moe_align_sizes(tokens, topk, E, BS);
  Buf<int32_t> ids(size_t(std::max<int64_t>(s.numel, 1)));
  for (int64_t i = 0; i < s.numel; ++i)
    ids[i] = mode == 0 ? int32_t(g() % E) : mode == 1 ? int32_t(E - 1) : int32_t((g() % ((E + 1) / 2)) * 2);
  Buf<int32_t> sorted(size_t(s.sorted_token_ids), -7), experts(size_t(s.expert_ids), -7), post(1, -7);
  Buf<int32_t> ws(size_t(s.workspace), 999), counts(size_t(E), -7);
  ops::MoeAlignOptions o;
  o.workspace = ws.data();
  o.num_warps = warps;
  ops::moe_align_block_size(ids.data(), tokens, topk, E, BS, sorted.data(), experts.data(), post.data(), o);
  ops::expert_count(ids.data(), tokens, topk, E, counts.data(), o);
  MoeRef r = ref_moe(ids, s.numel, E, BS);
  CHECK(post[0] == r.post);
  CHECK(diffs(sorted, r.sorted) == "");
  CHECK(diffs(experts, r.experts) == "");
  CHECK(diffs(counts, r.counts) == "");
}

}  // namespace

TEST_CASE("ops library: moe_align_block_size and expert_count against a plain loop", "[ops][ops-library]") {
  unsigned seed = 1;
  const bool slow = interp_mode();
  for (int mode : {0, 1, 2}) {
    check_moe(1, 8, 256, 64, mode, seed++);
    check_moe(17, 2, 8, 16, mode, seed++);
    check_moe(256, 8, 256, 128, mode, seed++);
    check_moe(1001, 3, 7, 5, mode, seed++);
    check_moe(4096, 2, 8, 64, mode, seed++);  // 8192 entries: the last one-kernel size
    check_moe(3001, 3, 7, 5, mode, seed++);   // 9003 entries: the counting kernel, then 9 programs
    if (!slow) check_moe(16384, 8, 256, 64, mode, seed++);
    if (!slow) check_moe(40000, 8, 512, 16, mode, seed++);  // 320000 entries: 313 chunks, 8 prefix programs
    check_moe(4096, 2, 3, 2000, mode, seed++);  // one kernel, 8 programs for 3 experts, blocks over 1024 slots
  }
  check_moe(3, 1, 1, 1, 0, seed++);
}

TEST_CASE("ops library: moe_align_block_size and expert_count at every num_warps", "[ops][ops-library]") {
  // MoeAlignOptions::num_warps changes every kernel's warps (the CPU backend ignores it; the
  // mirrored GPU run checks each): the one-kernel path, and the three kernels.
  unsigned seed = 300;
  for (int warps : {1, 2, 8, 16, 32}) {
    check_moe(256, 8, 256, 64, 0, seed++, warps);
    check_moe(1, 8, 256, 128, 0, seed++, warps);
    check_moe(3001, 3, 7, 5, 2, seed++, warps);
  }
}

TEST_CASE("ops library: moe_align_block_size with no tokens writes the empty result", "[ops][ops-library]") {
  for (int64_t bs : {1, 16, 64}) {
    const ops::MoeAlignSizes s = ops::moe_align_sizes(0, 8, 32, bs);
    Buf<int32_t> sorted(size_t(std::max<int64_t>(s.sorted_token_ids, 1)), -7), experts(size_t(s.expert_ids + 1), -7);
    Buf<int32_t> post(1, -7), counts(32, -7);
    ops::moe_align_block_size(static_cast<const int32_t*>(nullptr), 0, 8, 32, bs, sorted.data(), experts.data(),
                              post.data());
    ops::expert_count(static_cast<const int32_t*>(nullptr), 0, 8, 32, counts.data());
    CHECK(post[0] == 0);
    for (int64_t i = 0; i < s.sorted_token_ids; ++i) CHECK(sorted[i] == 0);
    for (int64_t b = 0; b < s.expert_ids; ++b) CHECK(experts[b] == -1);
    CHECK(experts[s.expert_ids] == -7);  // nothing written past the end
    for (int e = 0; e < 32; ++e) CHECK(counts[e] == 0);
  }
}

TEST_CASE("errors: tle::ops::moe_align_block_size refuses bad ids and sizes at the caller's line",
          "[errors][ops-library]") {
  Buf<int32_t> ids{0, 3, 8, 1}, sorted(100), experts(100), post(1), counts(8);
  int line = 0;
  errtest::expect_user_error(
      [&] {
        line = __LINE__; ops::moe_align_block_size(ids.data(), 2, 2, 8, 4, sorted.data(), experts.data(), post.data());
      },
      {"topk_ids[2] = 8 is not an expert id in 0..7"}, "test_ops_library.cpp", line);
  ids[2] = -1;
  errtest::expect_user_error([&] { line = __LINE__; ops::expert_count(ids.data(), 4, 1, 8, counts.data()); },
                             {"topk_ids[2] = -1 is not an expert id"}, "test_ops_library.cpp", line);
  errtest::expect_user_error([&] { line = __LINE__; (void)ops::moe_align_sizes(10, 0, 8, 4); },
                             {"topk = 0 must be at least 1"}, "test_ops_library.cpp", line);
  errtest::expect_user_error([&] { line = __LINE__; (void)ops::moe_align_sizes(10, 2, 0, 4); },
                             {"num_experts = 0 is outside 1..4096"}, "test_ops_library.cpp", line);
  ids[2] = 2;
  for (int warps : {3, 64, -4}) {
    ops::MoeAlignOptions o;
    o.num_warps = warps;
    const std::string want = "num_warps = " + std::to_string(warps) + " is not 0";
    errtest::expect_user_error(
        [&] {
          line = __LINE__; ops::moe_align_block_size(ids.data(), 2, 2, 8, 4, sorted.data(), experts.data(), post.data(), o);
        },
        {"moe_align_block_size: " + want, "power of two from 1 to 32"}, "test_ops_library.cpp", line);
    errtest::expect_user_error([&] { line = __LINE__; ops::expert_count(ids.data(), 4, 1, 8, counts.data(), o); },
                               {"expert_count: " + want}, "test_ops_library.cpp", line);
  }
  // On the GPU the placing kernel keeps a counter per expert for each warp in shared memory: 32
  // warps for 4096 experts do not fit sm_90's 227 KB (refused before any launch or allocation, so
  // this runs without a GPU too).
  {
    ops::MoeAlignOptions o;
    o.num_warps = 32;
    o.backend = Backend::GPU;
    errtest::expect_user_error(
        [&] {
          line = __LINE__; ops::moe_align_block_size(ids.data(), 2, 2, 4096, 4, sorted.data(), experts.data(), post.data(), o);
        },
        {"num_warps = 32 needs 565248 bytes of shared memory per program for 4096 experts", "use at most 8 warps"},
        "test_ops_library.cpp", line);
  }
}

TEST_CASE("ptx: moe_align's placing kernel compiles within shared memory wherever its warps are admitted",
          "[ptx][ops-library]") {
  // checked_warps admits (num_warps, num_experts) by align_smem's estimate of the placing kernel's
  // shared memory; an estimate below what the GPU lowering plans would let a launch fail. At each
  // warp count and path the largest expert count the estimate admits for sm_90 (227 KB; at most
  // 4096), and a ragged one, compile for sm_90a (the one-kernel path once took LLVM minutes there).
  namespace mk = ops::detail_moe;
  alignas(256) static int32_t ii[64];
  const int64_t limit = ops::detail::program_smem_limit(Backend::CPU);  // sm_90's, whatever GPU is here
  REQUIRE(limit == 232448);
  int below_max = 0;
  for (int warps : {4, 8, 16, 32}) {
    for (bool fused : {false, true}) {
      int most = 4096;
      while (most > 1 && mk::align_smem(most, warps, fused) > limit) --most;
      below_max += most < 4096;
      for (int E : {1000, most}) {
        CAPTURE(E, warps, fused);
        REQUIRE(mk::align_smem(E, warps, fused) <= limit);
        const int numel = fused ? 8192 : 131072, chunk = fused ? 1024 : 2048, chunks = numel / chunk;
        const int slots = numel + E * 63, blocks = (slots + 63) / 64;
        CHECK_NOTHROW(mk::align_kernel().ptx(90, warps, ii, ii, ii, ii, ii, numel, chunk, chunks, blocks,
                                             (blocks + chunks - 1) / chunks, slots, E, 64, fused));
      }
    }
  }
  CHECK(below_max >= 3);  // 16 and 32 warps are limited by shared memory below 4096 experts
}

// ---------------------------------------------------------------- GPU: device memory and a stream

TEST_CASE("gpu: tle::ops::topk and moe_align_block_size on DeviceBuffers and a stream", "[.gpu]") {
  REQUIRE(default_backend() == Backend::GPU);
  Stream stream(/*non_blocking=*/true);
  for (int ppr : {0, 1, 4}) {
    const int64_t rows = 3, n = 40000, k = 300;
    Buf<float> host = topk_data<float>(size_t(rows * n), 7 + ppr, 1);
    std::vector<float> hx(host.begin(), host.end());
    DeviceBuffer<float> x(hx), v(size_t(rows * k));
    DeviceBuffer<int32_t> i(size_t(rows * k));
    ops::TopkOptions o;
    o.stream = stream.handle();
    o.programs_per_row = ppr;
    const size_t wsn = ops::topk_workspace_size<float>(rows, n, k, o);
    DeviceBuffer<int32_t> ws(std::max<size_t>(wsn, 1));
    if (wsn) o.workspace = ws.data();
    ops::topk(x, rows, n, k, v, i, o);
    stream.synchronize();
    std::vector<float> want_v;
    std::vector<int32_t> want_i;
    ref_topk(host, rows, n, k, true, want_v, want_i);
    CHECK(i.to_host() == want_i);
    auto got_v = v.to_host();
    CHECK(std::memcmp(got_v.data(), want_v.data(), want_v.size() * sizeof(float)) == 0);
  }
  // Routing on raw device pointers; an out-of-range id is ignored on the GPU.
  const int64_t tokens = 1000, topk = 4, E = 64, bs = 16;
  std::mt19937 g(5);
  Buf<int32_t> ids(size_t(tokens * topk));
  for (auto& v : ids) v = int32_t(g() % E);
  const ops::MoeAlignSizes s = ops::moe_align_sizes(tokens, topk, E, bs);
  MoeRef r = ref_moe(ids, s.numel, E, bs);
  std::vector<int32_t> with_bad(ids.begin(), ids.end());
  DeviceBuffer<int32_t> d_ids(with_bad), sorted(size_t(s.sorted_token_ids)), experts(size_t(s.expert_ids)), post(1);
  ops::MoeAlignOptions o;
  o.stream = stream.handle();
  ops::moe_align_block_size(d_ids.data(), tokens, topk, E, bs, sorted.data(), experts.data(), post.data(), o);
  stream.synchronize();
  CHECK(post.to_host()[0] == r.post);
  CHECK(sorted.to_host() == r.sorted);
  CHECK(experts.to_host() == r.experts);
  // Entry 5 moved out of range: not counted, not placed.
  with_bad[5] = int32_t(E + 3);
  d_ids.copy_from_host(with_bad);
  DeviceBuffer<int32_t> counts(static_cast<size_t>(E));
  ops::expert_count(d_ids.data(), tokens, topk, E, counts.data(), o);
  stream.synchronize();
  std::vector<int32_t> want_counts(size_t(E), 0);
  for (int64_t j = 0; j < s.numel; ++j)
    if (j != 5) want_counts[size_t(ids[j])]++;
  CHECK(counts.to_host() == want_counts);
}

TEST_CASE("ops library: topk's own choice of programs per row (cooperative path)", "[ops-library]") {
  // A power of two, within the machine's units shared by the rows, one program per 4096
  // elements of a row and 256 (tuner sweep on an H100: 4 per row beat 5 on 64 x 131072, 32 beat
  // 16 on one row of 131072); the slices cover the row.
  namespace tk = ops::detail_topk;
  const int64_t units = std::max(1u, std::thread::hardware_concurrency());
  for (int64_t rows : {1, 2, 3, 7, 64})
    for (int64_t n : {70000, 131072, 1 << 20}) {
      CAPTURE(rows, n, units);
      const tk::Plan p = tk::plan(rows, n, 2048, 4, 0, Backend::CPU);
      if (p.mode != tk::Plan::Coop) continue;  // small matrices take the one-kernel path
      // The choice is a power of two; whole 2048-element tiles per slice can leave fewer slices
      // (one row of 70000 on 16 units: slices of 6144, 12 of them, not 16).
      const int64_t want = tk::auto_programs_per_row(rows, n, units);
      CHECK((want & (want - 1)) == 0);
      CHECK(p.ppr <= want);
      CHECK(p.ppr <= std::max<int64_t>(1, units / rows));
      CHECK(p.ppr <= std::max<int64_t>(1, n / 4096));
      CHECK(p.slice * p.ppr >= n);
      CHECK(p.slice * (p.ppr - 1) < n);
    }
  // On 264 units (two programs per SM of an H100): one row of 131072 takes 32 programs, 64 rows of
  // 131072 or 129280 take 4 each, 3 rows of 70000 16 (17 would be one per 4096 elements).
  CHECK(tk::auto_programs_per_row(1, 131072, 264) == 32);
  CHECK(tk::auto_programs_per_row(64, 131072, 264) == 4);
  CHECK(tk::auto_programs_per_row(64, 129280, 264) == 4);
  CHECK(tk::auto_programs_per_row(3, 70000, 264) == 16);
  CHECK(tk::auto_programs_per_row(300, 131072, 264) == 1);
  // At most 256 programs per row (the tail reads every slice's candidates in one tile), asked for
  // or chosen.
  CHECK(tk::auto_programs_per_row(1, int64_t(1) << 24, 4096) == 256);
  for (int requested : {256, 257, 1000}) {
    CAPTURE(requested);
    const tk::Plan p = tk::plan(1, int64_t(1) << 21, 2048, 4, requested, Backend::CPU);
    CHECK(p.mode == tk::Plan::Coop);
    CHECK(p.ppr == 256);
    CHECK(p.slice == 8192);
  }
}

TEST_CASE("ptx: topk's resident kernel at 16 warps fits 64 registers with no spill where two programs share an SM",
          "[ptx][ops-library]") {
  // resident_maxnreg caps the registers where two programs' shared memory fits an SM (else one
  // program runs per SM: 4096 rows of 8192 ran 1.3x slower); the cap must not spill.
  namespace tk = ops::detail_topk;
  CHECK(tk::resident_maxnreg(8192, 8, 4, 16, Backend::CPU) == 64);
  CHECK(tk::resident_maxnreg(8192, 8, 4, 8, Backend::CPU) == 0);          // other warps: no cap
  CHECK(tk::resident_maxnreg(32768, 2048, 4, 16, Backend::CPU) == 0);     // one program per SM by shared memory anyway
  alignas(256) static float f[64];
  alignas(256) static f16 h[64];
  alignas(256) static int32_t ii[64];
  auto check = [&](const std::string& what, int n, int k, int eb, auto&& ptx_of) {
    CAPTURE(what, n, k);
    REQUIRE(tk::resident_fits(n, k, eb, Backend::CPU));
    const int cap = tk::resident_maxnreg(n, k, eb, 16, Backend::CPU);
    REQUIRE(cap == 64);
    Grid g(1);
    g.with_warps(16).with_maxnreg(cap);
    const std::string p = ptx_of(g, static_cast<int>(tk::resident_capacity(n)), tk::resident_chunk(n));
    CHECK(ptxtest::count_of(p, ".maxnreg 64") == 1);
    CHECK(ptxtest::spill_store_bytes(what, p) <= 0);  // -1: no ptxas on this machine
  };
  for (auto [n, k] : {std::pair{8192, 8}, std::pair{4096, 128}, std::pair{8192, 256}, std::pair{1000, 17},
                       std::pair{8192, 2048}, std::pair{16384, 512}})
    check("resident f32", n, k, 4, [&](const Grid& g, int cap, int ch) {
      return tk::resident_kernel<float>().ptx(90, g, f, f, ii, n, cap, ch, k, true);
    });
  for (auto [n, k] : {std::pair{1024, 32}, std::pair{8192, 128}, std::pair{32768, 256}})
    check("resident f16", n, k, 2, [&](const Grid& g, int cap, int ch) {
      return tk::resident_kernel<f16>().ptx(90, g, h, h, ii, n, cap, ch, k, true);
    });
}

TEST_CASE("ptx: topk's resident kernel compiles for sm_90a wherever the plan picks it", "[ptx][ops-library]") {
  // resident_fits must bound the kernel's shared memory (the row, the survivors, the sort's
  // staging of the survivors padded to a power of two, the histograms and scans): near the bound
  // every (n, k) it admits compiles, and the largest rows with k past 4096 are refused. (The CPU
  // backend's limit is sm_90's 227 KB, whatever GPU this machine has.)
  namespace tk = ops::detail_topk;
  alignas(256) static float f[64];
  alignas(256) static bf16 h[64];
  alignas(256) static int32_t ii[64];
  int admitted = 0, refused = 0;
  for (int64_t n : {4100, 30721, 32768})
    for (int64_t k : {2048, 4096, 4097, 4480, 4500, 4800, 8192}) {
      if (k > n) continue;
      CAPTURE(n, k);
      if (!tk::resident_fits(n, k, 4, Backend::CPU)) {
        ++refused;
        continue;
      }
      ++admitted;
      const int cap = static_cast<int>(tk::resident_capacity(n)), ch = tk::resident_chunk(n);
      CHECK_NOTHROW(tk::resident_kernel<float>().ptx(90, tk::kResidentWarps, f, f, ii, static_cast<int>(n), cap, ch,
                                                     static_cast<int>(k), true));
    }
  for (int64_t k : {4096, 4500}) {
    CAPTURE(k);
    const int64_t n = 65536;
    if (!tk::resident_fits(n, k, 2, Backend::CPU)) {
      ++refused;
      continue;
    }
    ++admitted;
    CHECK_NOTHROW(tk::resident_kernel<bf16>().ptx(90, tk::kResidentWarps, h, h, ii, static_cast<int>(n),
                                                  static_cast<int>(tk::resident_capacity(n)), tk::resident_chunk(n),
                                                  static_cast<int>(k), true));
  }
  // The largest admitted rows at 16 and 32 warps (TopkOptions::num_warps): the scans' scratch
  // grows with the warps and must stay within resident_fits' allowance.
  for (int warps : {16, 32}) {
    CAPTURE(warps);
    for (int64_t k : {2048, 4096}) {
      const int64_t n = 32768;
      REQUIRE(tk::resident_fits(n, k, 4, Backend::CPU));
      CHECK_NOTHROW(tk::resident_kernel<float>().ptx(90, warps, f, f, ii, static_cast<int>(n),
                                                     static_cast<int>(tk::resident_capacity(n)), tk::resident_chunk(n),
                                                     static_cast<int>(k), true));
    }
  }
  CHECK(admitted >= 8);
  CHECK(refused >= 4);
  CHECK_FALSE(tk::resident_fits(32768, 4500, 4, Backend::CPU));
}
