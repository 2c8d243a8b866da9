// tests/test_edge_cases.cpp - edge cases E11-E27 of /work/shared/cases/edge-cases.md, through the
// public API only (tle::jit kernels launched on Buf / Vec data). Each TEST_CASE names its case; the
// rules they check are written in docs/semantics.md. They run on the CPU backend, and on the GPU
// with TLE_TEST_BACKEND=gpu (tests/ops_util.hpp), ragged tile shapes included (the GPU pads them,
// src/passes/gpu/pad_shapes.cpp); there E27 has no guard page (GuardedBuffer says what replaces it).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "../examples/kernels.hpp"
#include "ops_util.hpp"
#include "tle/tle.hpp"

using namespace tle;
using opstest::Buf;
using opstest::Vec;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr double kInfD = std::numeric_limits<double>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const double kNaND = std::numeric_limits<double>::quiet_NaN();

template <class T> T make(double v) {
  if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) return T(v);
  else return static_cast<T>(v);
}
template <class T> double as_double(T v) {
  if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) return double(float(v));
  else return static_cast<double>(v);
}
template <class T> const char* type_label() {
  if constexpr (std::is_same_v<T, f16>) return "f16";
  else if constexpr (std::is_same_v<T, bf16>) return "bf16";
  else if constexpr (std::is_same_v<T, float>) return "f32";
  else if constexpr (std::is_same_v<T, double>) return "f64";
  else if constexpr (std::is_same_v<T, int8_t>) return "i8";
  else if constexpr (std::is_same_v<T, int32_t>) return "i32";
  else if constexpr (std::is_same_v<T, int64_t>) return "i64";
  else if constexpr (std::is_same_v<T, uint8_t>) return "u8";
  else return "?";
}
uint64_t bits_of(double v) { return std::bit_cast<uint64_t>(v); }

/// `bytes` bytes that end exactly where a PROT_NONE page begins: reading or writing one byte past
/// the end faults. In gpu mode (TLE_TEST_BACKEND=gpu) there is no guard page: the bytes are managed
/// memory followed by kCanary canary bytes, and the destructor checks that none was written (a store
/// past the tail); an over-read is not observable there (the gather case below makes a used
/// over-read fault another way).
class GuardedBuffer {
 public:
  static constexpr size_t kCanary = 256;
  explicit GuardedBuffer(size_t bytes) : bytes_(bytes) {
    if (opstest::gpu_mode()) {
      base_ = opstest::test_alloc(bytes + kCanary);
      data_ = static_cast<char*>(base_);
      std::memset(data_ + bytes, 0xA5, kCanary);
      return;
    }
    size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    size_t data_pages = (bytes + page - 1) / page + 1;
    len_ = (data_pages + 1) * page;
    base_ = mmap(nullptr, len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(base_ != MAP_FAILED);
    char* guard = static_cast<char*>(base_) + data_pages * page;
    REQUIRE(mprotect(guard, page, PROT_NONE) == 0);
    data_ = guard - bytes;
  }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  ~GuardedBuffer() {
    if (opstest::gpu_mode()) {
      size_t written = 0;
      for (size_t i = 0; i < kCanary; ++i) written += static_cast<unsigned char>(data_[bytes_ + i]) != 0xA5;
      CHECK(written == 0);  // canary bytes past the tail that a kernel wrote
      opstest::test_free(base_);
    } else {
      munmap(base_, len_);
    }
  }
  template <class T> T* as() { return reinterpret_cast<T*>(data_); }

 private:
  size_t bytes_ = 0;
  void* base_ = nullptr;
  size_t len_ = 0;
  char* data_ = nullptr;
};

}  // namespace

// ===================================================================================== E11

TEST_CASE("E11 masked load with a zero fill sums to 136", "[edge]") {
  // MODE: 0 no fill (rule E01), 1 fill `0`, 2 fill `0.0f`, 3 fill `-0.0f`, 4 fill = runtime scalar.
  auto k = jit("e11_masked_sum", [](Ptr<float> x, Ptr<float> out, Tile<int32_t> n, Tile<float> fill,
                                    Constexpr<int> BLOCK, Constexpr<int> MODE) {
    Tile<int32_t> offs = arange(0, BLOCK);
    Tile<bool> mask = offs < n;
    Tile<float> v;
    if (MODE == 0) v = load(x + offs, mask);
    else if (MODE == 1) v = load(x + offs, mask, 0);
    else if (MODE == 2) v = load(x + offs, mask, 0.0f);
    else if (MODE == 3) v = load(x + offs, mask, -0.0f);
    else v = load(x + offs, mask, fill);
    store(out, sum(v, 0));
  });
  // 16 values 1..16, then NaN: a masked-off lane that is read (or filled with garbage) shows.
  Vec<float> x(256, kNaN);
  for (int i = 0; i < 16; ++i) x[i] = float(i + 1);
  for (int mode = 0; mode <= 4; ++mode) {
    for (float fill : {0.0f, -0.0f}) {
      INFO("mode " << mode << " runtime fill " << fill);
      Buf<float> out(1, -1.0f);
      k(Grid(1), x.data(), out.data(), 16, fill, 256, mode);
      CHECK(out[0] == 136.0f);
    }
  }
  // A non-zero runtime fill is honoured: 136 + 240 * 1.5.
  Buf<float> out(1, -1.0f);
  k(Grid(1), x.data(), out.data(), 16, 1.5f, 256, 4);
  CHECK(out[0] == 136.0f + 240 * 1.5f);
}

// ===================================================================================== E12, E13

namespace {
// The matmul example's kernel (examples/kernels.hpp): f32 accumulator and C.
template <class T> auto make_gemm() { return ex::make_matmul<T>(); }

/// Runs C = A @ B with small integers in [-3, 3] and NaN right past the end of A and B; C must be
/// the exact integer product (and the untouched sentinel past its end).
template <class T, class G>
void check_gemm(const G& gemm, int M, int N, int K, int BM, int BN, int BK) {
  const int pad = 4096;
  const T nan = make<T>(kNaND);
  Vec<T> a(size_t(M) * K + pad, nan), b(size_t(K) * N + pad, nan);
  Vec<int> ai(size_t(M) * K), bi(size_t(K) * N);
  for (int i = 0; i < M; ++i)
    for (int k = 0; k < K; ++k) {
      int v = int((unsigned(i) * 7u + unsigned(k) * 3u + 1u) % 7u) - 3;
      ai[size_t(i) * K + k] = v;
      a[size_t(i) * K + k] = make<T>(v);
    }
  for (int k = 0; k < K; ++k)
    for (int j = 0; j < N; ++j) {
      int v = int((unsigned(k) * 5u + unsigned(j) * 11u + 2u) % 7u) - 3;
      bi[size_t(k) * N + j] = v;
      b[size_t(k) * N + j] = make<T>(v);
    }
  Vec<float> c(size_t(M) * N + 1, -12345.0f);
  gemm(Grid(cdiv(M, BM), cdiv(N, BN)), a.data(), b.data(), c.data(), M, N, K, BM, BN, BK);
  size_t bad = 0, first = 0;
  float got_first = 0, want_first = 0;
  Vec<long> row(N);
  for (int i = 0; i < M; ++i) {
    std::fill(row.begin(), row.end(), 0);
    for (int k = 0; k < K; ++k) {
      long av = ai[size_t(i) * K + k];
      const int* brow = &bi[size_t(k) * N];
      for (int j = 0; j < N; ++j) row[j] += av * brow[j];
    }
    for (int j = 0; j < N; ++j) {
      float got = c[size_t(i) * N + j];
      if (!(got == float(row[j]))) {
        if (!bad) first = size_t(i) * N + j, got_first = got, want_first = float(row[j]);
        ++bad;
      }
    }
  }
  INFO(type_label<T>() << " M=" << M << " N=" << N << " K=" << K << " BM=" << BM << " BN=" << BN << " BK=" << BK
                       << ": first wrong element " << first << " got " << got_first << " want " << want_first);
  CHECK(bad == 0);
  CHECK(c[size_t(M) * N] == -12345.0f);
}

template <class T> void gemm_sweep(int bk) {
  // One tile shape (16 x 16, BK) for every size, so each BK compiles few specializations (integer
  // arguments equal to 1 are specialized, so M, N or K == 1 add some).
  auto gemm = make_gemm<T>();
  const int small[] = {1, 15, 16, 17, 31, 33};
  for (int M : small)
    for (int N : small)
      for (int K : small) check_gemm<T>(gemm, M, N, K, 16, 16, bk);
  // The large sizes: every size of the sweep appears as M, as N and as K, next to small and large ones.
  const int large[][3] = {{999, 1, 1},    {1, 1001, 1},   {1, 1, 999},    {1001, 17, 33}, {33, 999, 17},
                          {17, 31, 1001}, {999, 1001, 1}, {1, 999, 1001}, {1001, 15, 999}, {16, 1001, 999},
                          {999, 16, 16}};
  for (auto& s : large) check_gemm<T>(gemm, s[0], s[1], s[2], 16, 16, bk);
}
}  // namespace

TEST_CASE("E12 GEMM with a ragged K is exact - f32 BK16", "[edge]") { gemm_sweep<float>(16); }
TEST_CASE("E12 GEMM with a ragged K is exact - f32 BK32", "[edge]") { gemm_sweep<float>(32); }
TEST_CASE("E12 GEMM with a ragged K is exact - f32 BK64", "[edge]") { gemm_sweep<float>(64); }
TEST_CASE("E12 GEMM with a ragged K is exact - f16 BK16", "[edge]") { gemm_sweep<f16>(16); }
TEST_CASE("E12 GEMM with a ragged K is exact - f16 BK32", "[edge]") { gemm_sweep<f16>(32); }
TEST_CASE("E12 GEMM with a ragged K is exact - f16 BK64", "[edge]") { gemm_sweep<f16>(64); }

TEST_CASE("E13 matmul with K = 1", "[edge]") {
  auto gemm = make_gemm<f16>();
  // M = 1, K = 1, N = 128: a = 2, b[j] = j / 8, C[0, j] = j / 4; with 16 x 16 tiles (8 programs)
  // and with one 32 x 256 x 16 tile, larger than every dimension.
  for (auto [bm, bn] : {std::pair{16, 16}, std::pair{32, 256}}) {
    Vec<f16> a = {f16(2.0), f16(kNaND)};
    Vec<f16> b(129, f16(kNaND));
    for (int j = 0; j < 128; ++j) b[j] = f16(j / 8.0);
    Vec<float> c(129, -1.0f);
    gemm(Grid(1, cdiv(128, bn)), a.data(), b.data(), c.data(), 1, 128, 1, bm, bn, 16);
    for (int j = 0; j < 128; ++j) {
      INFO("BM " << bm << " BN " << bn << " j " << j);
      CHECK(c[j] == j / 4.0f);
    }
    CHECK(c[128] == -1.0f);
  }
  // K = 1 with M, N in {1, 16, 17, 128}.
  for (int M : {1, 16, 17, 128})
    for (int N : {1, 16, 17, 128}) check_gemm<f16>(gemm, M, N, 1, 16, 16, 16);
  // Tiles larger than every dimension (a 32 x 256 x 16 tile; few sizes: each big tile compiles slowly).
  for (auto [M, N] : {std::pair{1, 128}, std::pair{17, 128}, std::pair{16, 17}})
    check_gemm<f16>(gemm, M, N, 1, 32, 256, 16);
}

// ===================================================================================== E14

TEST_CASE("E14 32-bit products reach 64 bits by the documented rule", "[edge]") {
  auto k = jit("e14_products", [](Ptr<int64_t> out, Tile<int32_t> i, Tile<int64_t> stride64, Tile<int32_t> stride32) {
    store(out + 0, i * stride64);                       // i32 * i64 promotes to i64: exact
    store(out + 1, i.to<int64_t>() * stride32);         // explicit widening: exact
    store(out + 2, i * stride32);                       // i32 * i32 wraps (documented), then widens
    store(out + 3, (i * stride32).to<int64_t>());
  });
  Vec<int64_t> out(4, 7);
  k(Grid(1), out.data(), 16384, int64_t(131072), 131072);
  CHECK(out[0] == 2147483648LL);
  CHECK(out[1] == 2147483648LL);
  CHECK(out[2] == -2147483648LL);
  CHECK(out[3] == -2147483648LL);
}

TEST_CASE("E14 pid x BLOCK + lane with pid = 2^21, BLOCK = 1024", "[edge]") {
  // As runtime scalars: pid is i32 like program_id.
  auto k = jit("e14_pid_scalar", [](Ptr<int64_t> wide, Ptr<int64_t> wrapped, Tile<int32_t> pid, Constexpr<int> BLOCK) {
    Tile<int32_t> lane = arange(0, BLOCK);
    store(wide + lane, pid.to<int64_t>() * BLOCK + lane);
    store(wrapped + lane, pid * BLOCK + lane);
  });
  Vec<int64_t> wide(1024), wrapped(1024);
  k(Grid(1), wide.data(), wrapped.data(), 1 << 21, 1024);
  for (int l = 0; l < 1024; ++l) {
    INFO("lane " << l);
    CHECK(wide[l] == 2147483648LL + l);
    CHECK(wrapped[l] == int64_t(int32_t(uint32_t(2147483648u) + uint32_t(l))));
  }

  // With program_id on a grid of 2^21 + 1 programs; only program 2^21 does the work.
  auto g = jit("e14_pid_grid", [](Ptr<int64_t> wide, Ptr<int64_t> wrapped, Ptr<int32_t> count, Constexpr<int> BLOCK) {
    Tile<int32_t> pid = program_id(0);
    atomic_add(count, 1);
    if_(pid == (1 << 21), [&] {
      Tile<int32_t> lane = arange(0, BLOCK);
      store(wide + lane, pid.to<int64_t>() * BLOCK + lane);
      store(wrapped + lane, pid * BLOCK + lane);
    });
  });
  std::fill(wide.begin(), wide.end(), 0);
  std::fill(wrapped.begin(), wrapped.end(), 0);
  Buf<int32_t> count(1, 0);
  g(Grid((1 << 21) + 1), wide.data(), wrapped.data(), count.data(), 1024);
  CHECK(count[0] == (1 << 21) + 1);
  for (int l = 0; l < 1024; ++l) {
    INFO("lane " << l);
    CHECK(wide[l] == 2147483648LL + l);
    CHECK(wrapped[l] == int64_t(int32_t(uint32_t(2147483648u) + uint32_t(l))));
  }
}

TEST_CASE("E14 a real access past 2^31 bytes", "[edge]") {
  const size_t size = (size_t(1) << 31) + 4096;
  // Pages of zeros reserved on the CPU; 2 GiB of managed memory on the GPU (only a few bytes touched).
  const bool gpu = opstest::gpu_mode();
  void* mem = gpu ? opstest::test_alloc(size)
                  : mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  REQUIRE(mem != MAP_FAILED);
  auto* buf = static_cast<uint8_t*>(mem);
  const size_t target = (size_t(1) << 31) + 5;
  for (size_t i = target - 2; i <= target + 3; ++i) buf[i] = 0;
  // The offset is built from i32 values: row * stride + col with row = 65536, stride = 32768;
  // widened explicitly (docs/semantics.md: products that can exceed 2^31 use to<int64_t>()).
  auto w = jit("e14_write_far", [](Ptr<uint8_t> p, Tile<int32_t> row, Tile<int32_t> stride, Tile<int32_t> col,
                                   Tile<uint8_t> v) { store(p + (row.to<int64_t>() * stride + col), v); });
  auto r = jit("e14_read_far", [](Ptr<uint8_t> p, Ptr<uint8_t> out, Tile<int64_t> off) {
    Tile<int64_t> o = off + (arange(0, 4) - 1);  // bytes off-1 .. off+2
    store(out + arange(0, 4), load(p + o));
  });
  w(Grid(1), buf, 65536, 32768, 5, 0xAB);
  CHECK(buf[target] == 0xAB);
  CHECK(buf[target - 1] == 0);
  CHECK(buf[target + 1] == 0);
  buf[target + 1] = 0x5C;
  Buf<uint8_t> out(4, 1);
  r(Grid(1), buf, out.data(), int64_t(target));
  CHECK(out[0] == 0);
  CHECK(out[1] == 0xAB);
  CHECK(out[2] == 0x5C);
  CHECK(out[3] == 0);
  if (gpu) opstest::test_free(mem);
  else munmap(mem, size);
}

// ===================================================================================== E15

namespace {
template <class T> auto make_extremes() {
  return jit("e15_extremes", [](Ptr<T> x, Ptr<float> vals, Ptr<int32_t> idxs, Constexpr<int> W) {
    Tile<T> v = load(x + arange(0, W));
    store(vals + 0, max(v, 0));
    store(vals + 1, min(v, 0));
    store(idxs + 0, argmax(v, 0));
    store(idxs + 1, argmin(v, 0));
  });
}

struct Extremes {
  float max, min;
  int32_t argmax, argmin;
};

template <class T, class K> Extremes run_extremes(const K& k, const Vec<double>& row) {
  Vec<T> x(row.size());
  for (size_t i = 0; i < row.size(); ++i) x[i] = make<T>(row[i]);
  Buf<float> vals(2, -7.0f);
  Buf<int32_t> idxs(2, -7);
  k(Grid(1), x.data(), vals.data(), idxs.data(), int(row.size()));
  return {vals[0], vals[1], idxs[0], idxs[1]};
}

template <class T> void extremes_cases() {
  auto k = make_extremes<T>();
  for (int W : {1, 2, 63, 64, 65, 1024}) {
    INFO(type_label<T>() << " width " << W);
    {  // one NaN, the rest +inf: NaN, its index (max and min alike)
      int at = W / 2;
      Vec<double> row(W, kInfD);
      row[at] = kNaND;
      Extremes e = run_extremes<T>(k, row);
      CHECK(std::isnan(e.max));
      CHECK(e.argmax == at);
      CHECK(std::isnan(e.min));
      CHECK(e.argmin == at);
    }
    {  // all -inf: -inf at index 0
      Extremes e = run_extremes<T>(k, Vec<double>(W, -kInfD));
      CHECK(e.max == -kInf);
      CHECK(e.argmax == 0);
      CHECK(e.min == -kInf);
      CHECK(e.argmin == 0);
    }
    if (W > 7) {  // +inf at lanes 3 and 7, the rest finite: +inf at 3; -inf at 4 and 6 for min: index 4
      Vec<double> row(W);
      for (int i = 0; i < W; ++i) row[i] = (i % 13) - 6;
      row[3] = row[7] = kInfD;
      row[4] = row[6] = -kInfD;
      Extremes e = run_extremes<T>(k, row);
      CHECK(e.max == kInf);
      CHECK(e.argmax == 3);
      CHECK(e.min == -kInf);
      CHECK(e.argmin == 4);
    }
    {  // NaN only in the last lane
      Vec<double> row(W);
      for (int i = 0; i < W; ++i) row[i] = (i % 5) - 2;
      row[W - 1] = kNaND;
      Extremes e = run_extremes<T>(k, row);
      CHECK(std::isnan(e.max));
      CHECK(e.argmax == W - 1);
      CHECK(std::isnan(e.min));
      CHECK(e.argmin == W - 1);
    }
    if (W >= 2) {  // two NaNs: the first one wins
      Vec<double> row(W, 1.0);
      row[W - 1] = kNaND;
      row[W / 3 == W - 1 ? 0 : W / 3] = kNaND;
      int first = W / 3 == W - 1 ? 0 : W / 3;
      Extremes e = run_extremes<T>(k, row);
      CHECK(e.argmax == first);
      CHECK(e.argmin == first);
    }
  }
}
}  // namespace

TEST_CASE("E15 NaN and infinities in max/min/argmax/argmin - f32", "[edge]") { extremes_cases<float>(); }
TEST_CASE("E15 NaN and infinities in max/min/argmax/argmin - f16", "[edge]") { extremes_cases<f16>(); }
TEST_CASE("E15 NaN and infinities in max/min/argmax/argmin - bf16", "[edge]") { extremes_cases<bf16>(); }

// ===================================================================================== E02 zeros

namespace {
template <class T> bool negative_zero(T v) {
  if constexpr (std::is_floating_point_v<T>) return v == 0 && std::signbit(v);
  else return (v.bits & 0x7FFF) == 0 && (v.bits & 0x8000) != 0;
}
template <class T> bool positive_zero(T v) {
  if constexpr (std::is_floating_point_v<T>) return v == 0 && !std::signbit(v);
  else return v.bits == 0;
}

/// Rule E02 for zeros: maximum/minimum, max/min reductions, f32 atomic max/min and constant
/// folding order -0 < +0; argmax/argmin compare with <, so equal zeros keep the first index.
template <class T> void signed_zero_cases() {
  auto k = jit("e02_signed_zeros", [](Ptr<T> a, Ptr<T> b, Ptr<T> out, Ptr<int32_t> idx) {
    Tile<int32_t> o = arange(0, 4), o2 = arange(0, 2);
    Tile<T> x = load(a + o), y = load(b + o);
    store(out + o, maximum(x, y));
    store(out + 4 + o, minimum(x, y));
    Tile<T> ra = load(a + o2), rb = load(b + o2);  // [-0, +0] and [+0, -0]
    store(out + 8, max(ra, 0));
    store(out + 9, max(rb, 0));
    store(out + 10, min(ra, 0));
    store(out + 11, min(rb, 0));
    store(out + 12, maximum(Tile<T>(-0.0), Tile<T>(0.0)));  // folded at trace time
    store(out + 13, minimum(Tile<T>(0.0), Tile<T>(-0.0)));
    store(idx + 0, argmax(ra, 0));
    store(idx + 1, argmin(rb, 0));
  });
  Vec<T> a = {make<T>(-0.0), make<T>(0.0), make<T>(-0.0), make<T>(0.0)};
  Vec<T> b = {make<T>(0.0), make<T>(-0.0), make<T>(-0.0), make<T>(0.0)};
  Vec<T> out(14, make<T>(7.0));
  Vec<int32_t> idx(2, -1);
  k(Grid(1), a.data(), b.data(), out.data(), idx.data());
  INFO(type_label<T>());
  CHECK(positive_zero(out[0]));  // maximum(-0, +0)
  CHECK(positive_zero(out[1]));  // maximum(+0, -0)
  CHECK(negative_zero(out[2]));
  CHECK(positive_zero(out[3]));
  CHECK(negative_zero(out[4]));  // minimum(-0, +0)
  CHECK(negative_zero(out[5]));  // minimum(+0, -0)
  CHECK(negative_zero(out[6]));
  CHECK(positive_zero(out[7]));
  CHECK(positive_zero(out[8]));  // max([-0, +0])
  CHECK(positive_zero(out[9]));  // max([+0, -0])
  CHECK(negative_zero(out[10]));
  CHECK(negative_zero(out[11]));
  CHECK(positive_zero(out[12]));
  CHECK(negative_zero(out[13]));
  CHECK(idx[0] == 0);
  CHECK(idx[1] == 0);
  if constexpr (std::is_same_v<T, float>) {
    auto ka = jit("e02_atomic_zeros", [](Ptr<float> cell) {
      atomic_max(cell, 0.0f);
      atomic_min(cell + 1, -0.0f);
    });
    Vec<float> cell = {-0.0f, 0.0f};
    ka(Grid(1), cell.data());
    CHECK(positive_zero(cell[0]));
    CHECK(negative_zero(cell[1]));
  }
}
}  // namespace

TEST_CASE("E02 signed zeros in max/min - f32", "[edge]") { signed_zero_cases<float>(); }
TEST_CASE("E02 signed zeros in max/min - f64", "[edge]") { signed_zero_cases<double>(); }
TEST_CASE("E02 signed zeros in max/min - f16", "[edge]") { signed_zero_cases<f16>(); }
TEST_CASE("E02 signed zeros in max/min - bf16", "[edge]") { signed_zero_cases<bf16>(); }

TEST_CASE("E15 top-k by repeated argmax equals a sort-based top-k", "[edge]") {
  auto topk = jit("e15_topk", [](Ptr<float> x, Ptr<float> vals, Ptr<int32_t> idxs, Constexpr<int> W, Constexpr<int> K) {
    Tile<int32_t> lanes = arange(0, W);
    Tile<float> v = load(x + lanes);
    for (int j = 0; j < K; ++j) {  // a trace-time loop: K argmax rounds
      Tile<int32_t> i = argmax(v, 0);
      store(idxs + j, i);
      store(vals + j, max(v, 0));
      v = where(lanes == i, -kInf, v);
    }
  });
  const int W = 64, K = 10;
  Vec<float> row(W, 0.0f);
  for (int i : {41, 9, 2, 63}) row[i] = kInf;
  row[20] = -1.0f;
  row[30] = -kInf;
  Vec<int> order(W);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return row[a] > row[b]; });
  Vec<float> vals(K, -7);
  Vec<int32_t> idxs(K, -7);
  topk(Grid(1), row.data(), vals.data(), idxs.data(), W, K);
  for (int j = 0; j < K; ++j) {
    INFO("rank " << j);
    CHECK(idxs[j] == order[j]);
    CHECK(vals[j] == row[order[j]]);
  }
  CHECK(idxs[0] == 2);
  CHECK(idxs[3] == 63);
  CHECK(idxs[4] == 0);
  // E23: top-k with k = 0 stores nothing.
  std::fill(vals.begin(), vals.end(), -7.0f);
  std::fill(idxs.begin(), idxs.end(), -7);
  topk(Grid(1), row.data(), vals.data(), idxs.data(), W, 0);
  for (int j = 0; j < K; ++j) CHECK((vals[j] == -7.0f && idxs[j] == -7));
}

// ===================================================================================== E16

TEST_CASE("E16 argmax over all-equal rows and ties", "[edge]") {
  auto k = jit("e16_ties", [](Ptr<float> x, Ptr<int32_t> amax, Ptr<int32_t> amin, Ptr<int32_t> hot, Constexpr<int> R,
                              Constexpr<int> W) {
    Tile<int32_t> rows = arange(0, R), cols = arange(0, W);
    Tile<float> v = load(x + expand_dims(rows, 1) * W + expand_dims(cols, 0));
    Tile<int32_t> a = argmax(v, 1);
    Tile<bool> onehot = expand_dims(cols, 0) == expand_dims(a, 1);
    store(amax + rows, a);
    store(amin + rows, argmin(v, 1));
    store(hot + rows, sum(onehot.to<int32_t>(), 1));
  });
  const int R = 3;
  for (int W : {2, 4, 8, 32, 64, 128}) {
    INFO("width " << W);
    Vec<float> x(size_t(R) * W, 7.0f);
    int lo = std::min(2, W - 2), hi = std::min(5, W - 1);
    // row 1: two tied maxima at lanes hi and lo (5 and 2 when wide enough), the rest smaller;
    // row 2: two tied minima at the same lanes, the rest larger.
    for (int i = 0; i < W; ++i) x[W + i] = 1.0f, x[2 * W + i] = 9.0f;
    x[W + hi] = x[W + lo] = 3.0f;
    x[2 * W + hi] = x[2 * W + lo] = -3.0f;
    Vec<int32_t> amax(R, -1), amin(R, -1), hot(R, -1);
    k(Grid(1), x.data(), amax.data(), amin.data(), hot.data(), R, W);
    CHECK(amax[0] == 0);
    CHECK(amin[0] == 0);
    CHECK(hot[0] == 1);
    CHECK(amax[1] == lo);
    CHECK(hot[1] == 1);
    CHECK(amin[2] == lo);
    CHECK(hot[2] == 1);
  }
}

// ===================================================================================== E17

namespace {
template <class T> void scan_cases() {
  auto k = jit("e17_scan", [](Ptr<T> in, Ptr<T> out, Tile<int32_t> n, Constexpr<int> BLOCK, Constexpr<bool> LOOP) {
    if (LOOP) {
      Tile<T> total = 0;
      for (auto c0 : range(0, n, BLOCK)) {
        Tile<int32_t> offs = c0 + arange(0, BLOCK);
        Tile<bool> m = offs < n;
        Tile<T> x = load(in + offs, m);
        store(out + offs, cumsum(x, 0) + total, m);
        total = total + sum(x, 0);
      }
    } else {
      Tile<int32_t> offs = arange(0, BLOCK);
      Tile<bool> m = offs < n;
      store(out + offs, cumsum(load(in + offs, m), 0), m);
    }
  });
  struct Case {
    int n, block;
    bool loop;
  };
  std::vector<Case> cases;
  for (int n : {8, 32, 100})
    for (int b : {8, 32}) cases.push_back({n, b, true});
  // one, two and three trips; no loop
  for (Case c : {Case{8, 8, true}, Case{16, 8, true}, Case{24, 8, true}, Case{33, 32, true}, Case{96, 32, true},
                 Case{8, 8, false}, Case{5, 8, false}, Case{32, 32, false}, Case{100, 128, false}})
    cases.push_back(c);
  for (Case c : cases) {
    INFO(type_label<T>() << " N " << c.n << " BLOCK " << c.block << " loop " << c.loop);
    Vec<T> in(c.n, T(1)), out(c.n + 1, T(-5));
    k(Grid(1), in.data(), out.data(), c.n, c.block, c.loop);
    for (int i = 0; i < c.n; ++i) {
      INFO("i " << i);
      CHECK(out[i] == T(i + 1));
    }
    CHECK(out[c.n] == T(-5));
  }
}
}  // namespace

TEST_CASE("E17 cumsum in a device loop carrying the total - i32", "[edge]") { scan_cases<int32_t>(); }
TEST_CASE("E17 cumsum in a device loop carrying the total - i64", "[edge]") { scan_cases<int64_t>(); }

// ===================================================================================== E18

TEST_CASE("E18 scalar arguments of every host type", "[edge]") {
  auto k = jit("e18_args", [](Ptr<double> of, Ptr<int64_t> oi, Tile<f16> a, Tile<bf16> b, Tile<float> c, Tile<double> d,
                              Tile<int8_t> e, Tile<int16_t> f, Tile<uint32_t> g, Tile<int64_t> h, Tile<bool> z) {
    store(of + 0, a);
    store(of + 1, b);
    store(of + 2, c);
    store(of + 3, d);
    store(of + 4, a + c + d);
    store(oi + 0, e);
    store(oi + 1, f);
    store(oi + 2, g);
    store(oi + 3, h);
    store(oi + 4, z);
  });
  Buf<double> of(5);
  Buf<int64_t> oi(5);
  auto run = [&](auto a, auto b, auto c, auto d, auto e, auto f, auto g, auto h, auto z) {
    std::fill(of.begin(), of.end(), -777.0);
    std::fill(oi.begin(), oi.end(), -777);
    k(Grid(1), of.data(), oi.data(), a, b, c, d, e, f, g, h, z);
  };
  // Each host type for its own parameter.
  run(f16(42.0), bf16(42.0), 42.0f, 42.0, int8_t(42), int16_t(42), uint32_t(42), int64_t(42), true);
  CHECK(of[0] == 42.0);
  CHECK(of[1] == 42.0);
  CHECK(of[2] == 42.0);
  CHECK(of[3] == 42.0);
  CHECK(of[4] == 126.0);
  CHECK(oi[0] == 42);
  CHECK(oi[1] == 42);
  CHECK(oi[2] == 42);
  CHECK(oi[3] == 42);
  CHECK(oi[4] == 1);

  run(f16(1.5), bf16(1.0078125), 1.5f, 1.5, int8_t(-128), int16_t(-32768), uint32_t(4294967295u),
      int64_t(INT64_MIN), false);
  CHECK(of[0] == 1.5);
  CHECK(of[1] == 1.0078125);
  CHECK(of[2] == 1.5);
  CHECK(of[3] == 1.5);
  CHECK(oi[0] == -128);
  CHECK(oi[1] == -32768);
  CHECK(oi[2] == 4294967295LL);
  CHECK(oi[3] == INT64_MIN);
  CHECK(oi[4] == 0);

  // 65500 is 65504 in f16; bf16 rounds it to 65536.
  run(f16(65500.0), bf16(65500.0), 65500.0f, 65500.0, int8_t(127), int16_t(32767), uint32_t(0), int64_t(INT64_MAX), true);
  CHECK(of[0] == 65504.0);
  CHECK(of[1] == 65536.0);
  CHECK(of[2] == 65500.0);
  CHECK(of[3] == 65500.0);
  CHECK(oi[0] == 127);
  CHECK(oi[1] == 32767);
  CHECK(oi[2] == 0);
  CHECK(oi[3] == INT64_MAX);

  // -0.0 keeps its sign bit through every float parameter.
  run(f16(-0.0), bf16(-0.0), -0.0f, -0.0, int8_t(0), int16_t(0), uint32_t(0), int64_t(0), false);
  for (int i = 0; i < 4; ++i) {
    INFO("float parameter " << i);
    CHECK(bits_of(of[i]) == bits_of(-0.0));
  }

  // 2^-24: the smallest f16 subnormal.
  run(f16(0x1p-24), bf16(0x1p-24), 0x1p-24f, 0x1p-24, int8_t(1), int16_t(1), uint32_t(1), int64_t(1), true);
  CHECK(of[0] == 0x1p-24);
  CHECK(of[1] == 0x1p-24);
  CHECK(of[2] == 0x1p-24);
  CHECK(of[3] == 0x1p-24);
  CHECK(oi[0] == 1);

  // 1 (f16) + 1 (f32) + 1 (f64) = 3
  run(f16(1.0), bf16(1.0), 1.0f, 1.0, int8_t(0), int16_t(0), uint32_t(0), int64_t(0), false);
  CHECK(of[4] == 3.0);

  // Other host types for the float parameters are converted (rounding once) on the host.
  run(42.0, 42.0f, 42, 42.0f, 42, 42, 42u, 42, true);
  CHECK(of[0] == 42.0);
  CHECK(of[1] == 42.0);
  CHECK(of[2] == 42.0);
  CHECK(of[3] == 42.0);
  run(65500.0f, 1.0078125, f16(1.5), bf16(1.0078125), 1, 2, 3, 4, false);
  CHECK(of[0] == 65504.0);
  CHECK(of[1] == 1.0078125);
  CHECK(of[2] == 1.5);
  CHECK(of[3] == 1.0078125);
}

// ===================================================================================== E19

namespace {
template <class T> void division_cases() {
  const T lo = std::numeric_limits<T>::min();
  // Pairs: a = -8..8 by b in {-3, -2, 2, 3}; division by zero; MIN / -1.
  Vec<T> as, bs;
  for (int a = -8; a <= 8; ++a)
    for (int b : {-3, -2, 2, 3}) as.push_back(T(a)), bs.push_back(T(b));
  for (T a : {T(7), T(-7), T(0), lo, std::numeric_limits<T>::max()}) as.push_back(a), bs.push_back(T(0));
  as.push_back(lo), bs.push_back(T(-1));
  as.push_back(lo), bs.push_back(T(1));
  as.push_back(lo + 1), bs.push_back(T(-1));
  const int n = int(as.size());
  // The rule (docs/semantics.md): C++ truncation, x / 0 == 0, x % 0 == x, MIN / -1 == MIN, MIN % -1 == 0.
  auto want_q = [&](T a, T b) -> T {
    if (b == 0) return 0;
    if (b == -1) return T(0 - static_cast<std::make_unsigned_t<T>>(a));
    return T(a / b);
  };
  auto want_r = [&](T a, T b) -> T {
    if (b == 0) return a;
    if (b == -1) return 0;
    return T(a % b);
  };

  // Runtime: operands loaded from memory. Unfused: q and r by two kernels; fused: one kernel.
  // NP = n (the tile's length; lanes past n masked off).
  auto kq = jit("e19_div", [](Ptr<T> a, Ptr<T> b, Ptr<T> q, Tile<int32_t> n, Constexpr<int> NP) {
    Tile<int32_t> o = arange(0, NP);
    store(q + o, load(a + o, o < n) / load(b + o, o < n), o < n);
  });
  auto kr = jit("e19_rem", [](Ptr<T> a, Ptr<T> b, Ptr<T> r, Tile<int32_t> n, Constexpr<int> NP) {
    Tile<int32_t> o = arange(0, NP);
    store(r + o, load(a + o, o < n) % load(b + o, o < n), o < n);
  });
  auto kf = jit("e19_fused", [](Ptr<T> a, Ptr<T> b, Ptr<T> q, Ptr<T> r, Ptr<T> back, Tile<int32_t> n, Constexpr<int> NP) {
    Tile<int32_t> o = arange(0, NP);
    Tile<bool> m = o < n;
    Tile<T> x = load(a + o, m), y = load(b + o, m);
    Tile<T> qq = x / y, rr = x % y;
    store(q + o, qq, m);
    store(r + o, rr, m);
    store(back + o, qq * y + rr, m);  // == a in wrapping arithmetic, for every pair including b == 0
  });
  const int np = n;
  Vec<T> q1(n), r1(n), q2(n), r2(n), back(n);
  kq(Grid(1), as.data(), bs.data(), q1.data(), n, np);
  kr(Grid(1), as.data(), bs.data(), r1.data(), n, np);
  kf(Grid(1), as.data(), bs.data(), q2.data(), r2.data(), back.data(), n, np);

  // Constant-folded: the operands are C++ values inside the kernel.
  Vec<T> q3(n), r3(n);
  // Kernel lambdas capture nothing: the trace reads the operands from static copies.
  static Vec<T> cas, cbs;
  cas = as, cbs = bs;
  auto kc = jit("e19_const", [](Ptr<T> q, Ptr<T> r) {
    for (size_t i = 0; i < cas.size(); ++i) {
      store(q + int(i), Tile<T>(cas[i]) / Tile<T>(cbs[i]));
      store(r + int(i), Tile<T>(cas[i]) % Tile<T>(cbs[i]));
    }
  });
  kc(Grid(1), q3.data(), r3.data());

  // Mixed: a loaded, b a C++ literal (a divisor known at trace time must not become a shift).
  Vec<T> a17(17);
  for (int a = -8; a <= 8; ++a) a17[a + 8] = T(a);
  Vec<T> qm(17 * 4), rm(17 * 4);
  auto km = jit("e19_literal_divisor", [](Ptr<T> a, Ptr<T> q, Ptr<T> r, Constexpr<int> NP) {
    Tile<int32_t> o = arange(0, NP);  // 17 lanes
    Tile<bool> m = o < 17;
    Tile<T> x = load(a + o, m);
    int j = 0;
    for (int b : {-3, -2, 2, 3}) {
      store(q + j * 17 + o, x / b, m);
      store(r + j * 17 + o, x % b, m);
      ++j;
    }
  });
  km(Grid(1), a17.data(), qm.data(), rm.data(), 17);

  for (int i = 0; i < n; ++i) {
    INFO(type_label<T>() << " a " << int64_t(as[i]) << " b " << int64_t(bs[i]));
    T wq = want_q(as[i], bs[i]), wr = want_r(as[i], bs[i]);
    CHECK(int64_t(q1[i]) == int64_t(wq));
    CHECK(int64_t(r1[i]) == int64_t(wr));
    CHECK(int64_t(q2[i]) == int64_t(wq));
    CHECK(int64_t(r2[i]) == int64_t(wr));
    CHECK(int64_t(q3[i]) == int64_t(wq));
    CHECK(int64_t(r3[i]) == int64_t(wr));
    CHECK(int64_t(back[i]) == int64_t(as[i]));
  }
  int j = 0;
  for (int b : {-3, -2, 2, 3}) {
    for (int a = -8; a <= 8; ++a) {
      INFO(type_label<T>() << " a " << a << " literal b " << b);
      CHECK(int64_t(qm[j * 17 + a + 8]) == a / b);
      CHECK(int64_t(rm[j * 17 + a + 8]) == a % b);
    }
    ++j;
  }
}
}  // namespace

TEST_CASE("E19 integer division and modulo - i32", "[edge]") { division_cases<int32_t>(); }
TEST_CASE("E19 integer division and modulo - i64", "[edge]") { division_cases<int64_t>(); }
TEST_CASE("E19 integer division and modulo - i8", "[edge]") { division_cases<int8_t>(); }

TEST_CASE("E19 unsigned division by zero", "[edge]") {
  auto k = jit("e19_unsigned", [](Ptr<uint32_t> a, Ptr<uint32_t> b, Ptr<uint32_t> q, Ptr<uint32_t> r, Ptr<uint32_t> qc,
                                  Ptr<uint32_t> rc) {
    Tile<int32_t> o = arange(0, 4);
    Tile<uint32_t> x = load(a + o), y = load(b + o);
    store(q + o, x / y);
    store(r + o, x % y);
    store(qc, Tile<uint32_t>(4000000000u) / Tile<uint32_t>(0u));
    store(rc, Tile<uint32_t>(4000000000u) % Tile<uint32_t>(0u));
  });
  Buf<uint32_t> a{7, 4000000000u, 0, 9}, b{0, 0, 0, 4}, q(4), r(4), qcb(1, 1), rcb(1, 1);
  k(Grid(1), a.data(), b.data(), q.data(), r.data(), qcb.data(), rcb.data());
  const uint32_t qc = qcb[0], rc = rcb[0];
  CHECK(q[0] == 0);
  CHECK(q[1] == 0);
  CHECK(q[2] == 0);
  CHECK(q[3] == 2);
  CHECK(r[0] == 7);
  CHECK(r[1] == 4000000000u);
  CHECK(r[2] == 0);
  CHECK(r[3] == 1);
  CHECK(qc == 0);
  CHECK(rc == 4000000000u);
}

TEST_CASE("E19 cdiv on the host, on runtime tiles and on constants", "[edge]") {
  STATIC_REQUIRE(tle::cdiv(-36, 5) == -7);
  STATIC_REQUIRE(tle::cdiv(36, 5) == 8);
  STATIC_REQUIRE(tle::cdiv(35, 5) == 7);
  STATIC_REQUIRE(tle::cdiv(0, 5) == 0);
  STATIC_REQUIRE(tle::cdiv(36, -5) == -7);
  STATIC_REQUIRE(tle::cdiv(-36, -5) == 8);
  auto k = jit("e19_cdiv", [](Ptr<int32_t> a, Ptr<int32_t> b, Ptr<int32_t> out, Ptr<int32_t> outc) {
    Tile<int32_t> o = arange(0, 8);  // 6 pairs, 8 lanes (the GPU needs a power of two)
    Tile<bool> m = o < 6;
    store(out + o, cdiv(load(a + o, m), load(b + o, m, 1)), m);
    store(outc + 0, cdiv(Tile<int32_t>(-36), 5));
    store(outc + 1, cdiv(Tile<int32_t>(36), 5));
    store(outc + 2 + o, cdiv(load(a + o, m), 5), m);
  });
  Buf<int32_t> a{-36, 36, 35, 0, 36, -36}, b{5, 5, 5, 5, -5, -5}, out(6), outc(8);
  k(Grid(1), a.data(), b.data(), out.data(), outc.data());
  const int32_t want[6] = {-7, 8, 7, 0, -7, 8};
  for (int i = 0; i < 6; ++i) {
    INFO("cdiv(" << a[i] << ", " << b[i] << ")");
    CHECK(out[i] == want[i]);
    CHECK(out[i] == tle::cdiv(a[i], b[i]));
  }
  CHECK(outc[0] == -7);
  CHECK(outc[1] == 8);
  const int32_t want5[6] = {-7, 8, 7, 0, 8, -7};
  for (int i = 0; i < 6; ++i) CHECK(outc[2 + i] == want5[i]);
}

// ===================================================================================== E20

TEST_CASE("E20 launch grids beyond the limits are UserErrors, a 0 axis is a no-op", "[edge]") {
  auto k = jit("e20_count", [](Ptr<int32_t> count) { atomic_add(count, 1); });
  Buf<int32_t> count(1, 0);
  struct Bad {
    int64_t x, y, z;
    const char* axis;
    const char* size;
    const char* limit;
  };
  for (Bad b : {Bad{1, 65536, 1, "axis y", "65536", "65535"}, Bad{1, 1, 65536, "axis z", "65536", "65535"},
                Bad{int64_t(1) << 31, 1, 1, "axis x", "2147483648", "2147483647"},
                Bad{-1, 1, 1, "axis x", "-1", "2147483647"}}) {
    INFO("grid " << b.x << " " << b.y << " " << b.z);
    try {
      k(Grid(b.x, b.y, b.z), count.data());
      FAIL("no error");
    } catch (const UserError& e) {
      std::string m = e.message();
      CHECK_THAT(m, Catch::Contains(b.axis));
      CHECK_THAT(m, Catch::Contains(b.size));
      CHECK_THAT(m, Catch::Contains(b.limit));
    }
    CHECK(count[0] == 0);
    // The next launch works.
    k(Grid(1), count.data());
    CHECK(count[0] == 1);
    count[0] = 0;
  }
  // The largest grid on y is accepted and runs every program.
  k(Grid(1, 65535, 1), count.data());
  CHECK(count[0] == 65535);
  count[0] = 0;
  k(Grid(2, 3, 4), count.data());
  CHECK(count[0] == 24);
  // Rule E08: a 0 axis launches nothing and leaves outputs untouched.
  count[0] = 123;
  k(Grid(0, 1, 1), count.data());
  k(Grid(1, 0, 1), count.data());
  k(Grid(1, 1, 0), count.data());
  k(Grid(0, 0, 0), count.data());
  CHECK(count[0] == 123);
}

// ===================================================================================== E21

TEST_CASE("E21 histograms", "[edge]") {
  auto h8 = jit("e21_hist", [](Ptr<int32_t> x, Ptr<int32_t> out, Constexpr<int> N, Constexpr<int> BINS) {
    store(out + arange(0, BINS), histogram(load(x + arange(0, N)), BINS));
  });
  {
    Buf<int32_t> x{0, 1, 2, 3, 4, 4, 5, -1}, out(4, 9);
    h8(Grid(1), x.data(), out.data(), 8, 4);
    for (int i = 0; i < 4; ++i) CHECK(out[i] == 1);
  }
  {
    Buf<int32_t> x{8, 9, 100, 4, INT32_MAX, 8, 1 << 20, 64}, out(8);
    h8(Grid(1), x.data(), out.data(), 8, 8);
    for (int i = 0; i < 8; ++i) {
      INFO("bin " << i);
      CHECK(out[i] == (i == 4 ? 1 : 0));
    }
  }
  // i8 input, 300 copies of one value (plus negative i8 values that are out of range): count 300 in i32.
  auto hi8 = jit("e21_hist_i8", [](Ptr<int8_t> x, Ptr<int32_t> out, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> o = arange(0, BLOCK);
    Tile<bool> m = o < n;
    store(out + arange(0, 8), histogram(load(x + o, m), 8, m));
  });
  {
    Vec<int8_t> x(512, int8_t(-3));
    std::fill(x.begin(), x.begin() + 300, int8_t(5));
    x[300] = 2;  // past n when n == 300
    Buf<int32_t> out(8);
    hi8(Grid(1), x.data(), out.data(), 300, 512);
    for (int i = 0; i < 8; ++i) {
      INFO("bin " << i);
      CHECK(out[i] == (i == 5 ? 300 : 0));
    }
    hi8(Grid(1), x.data(), out.data(), 512, 512);  // 211 values of -3 are ignored, one 2 counts
    CHECK(out[5] == 300);
    CHECK(out[2] == 1);
  }
  // Expert counting: 4096 tokens, 64 experts, all routed to expert 7.
  Vec<int32_t> ids(4096, 7);
  {
    Vec<int32_t> counts(64, -1);
    auto one = jit("e21_experts", [](Ptr<int32_t> ids, Ptr<int32_t> counts) {
      store(counts + arange(0, 64), histogram(load(ids + arange(0, 4096)), 64));
    });
    one(Grid(1), ids.data(), counts.data());
    for (int e = 0; e < 64; ++e) CHECK(counts[e] == (e == 7 ? 4096 : 0));
  }
  // Across many programs with atomics: per-block histograms added atomically, and per-token
  // atomic increments (all lanes of a tile hitting the same counter).
  auto blocks = jit("e21_experts_atomic", [](Ptr<int32_t> ids, Ptr<int32_t> counts, Ptr<int32_t> counts2,
                                             Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> o = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> m = o < n;
    Tile<int32_t> x = load(ids + o, m);
    atomic_add(counts + arange(0, 64), histogram(x, 64, m));
    atomic_add(counts2 + x, 1, m & (x >= 0) & (x < 64));  // out-of-range ids must not be touched
  });
  for (int n : {4096, 4000, 1}) {
    for (int block : {64, 128, 1024}) {
      INFO("n " << n << " BLOCK " << block);
      Vec<int32_t> counts(64, 0), counts2(64, 0);
      blocks(Grid(cdiv(n, block)), ids.data(), counts.data(), counts2.data(), n, block);
      for (int e = 0; e < 64; ++e) {
        CHECK(counts[e] == (e == 7 ? n : 0));
        CHECK(counts2[e] == (e == 7 ? n : 0));
      }
    }
  }
  // A spread of experts, including out-of-range ids, against a host count.
  Vec<int32_t> mixed(4096);
  for (int i = 0; i < 4096; ++i) mixed[i] = int32_t((uint32_t(i) * 2654435761u) % 80u) - 8;
  Vec<int32_t> want(64, 0), counts(64, 0), counts2(64, 0);
  for (int v : mixed)
    if (v >= 0 && v < 64) ++want[v];
  blocks(Grid(32), mixed.data(), counts.data(), counts2.data(), 4096, 128);
  CHECK(counts == want);
  CHECK(counts2 == want);
}

// ===================================================================================== E21b

namespace {
/// histogram_ranks' rule (E06b) on the host: the counted equal elements before each one, -1 for the others.
std::vector<int32_t> host_ranks(const std::vector<int64_t>& x, int64_t n, int64_t bins) {
  std::vector<int32_t> seen(static_cast<size_t>(bins), 0), out;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = x[static_cast<size_t>(i)];
    out.push_back(v >= 0 && v < bins ? seen[static_cast<size_t>(v)]++ : -1);
  }
  return out;
}
}  // namespace

TEST_CASE("E21b histogram_ranks: stable ranks among equal values and a counting sort", "[edge]") {
  // ranks of the first n elements (the rest masked off), and a stable counting sort of them: the
  // index of every counted element at cumsum(h)[x] - h[x] + rank.
  auto k = jit("e21b_ranks", [](Ptr<int32_t> x, Ptr<int32_t> ranks, Ptr<int32_t> sorted, Tile<int32_t> n,
                                Constexpr<int> BLOCK, Constexpr<int> BINS) {
    Tile<int32_t> o = arange(0, BLOCK);
    Tile<bool> m = o < n;
    Tile<int32_t> v = load(x + o, m, -1);
    Tile<int32_t> r = histogram_ranks(v, BINS, m);
    store(ranks + o, r, m);
    Tile<int32_t> h = histogram(v, BINS, m);
    Tile<int32_t> start = cumsum(h, 0) - h;
    store(sorted + (gather(start, v, 0) + r), o, r >= 0);
  });
  for (int block : {1, 17, 32, 1001, 1024}) {
    for (int bins : {1, 7, 64, 300}) {
      for (int warps : {1, 4, 8}) {
        for (int pattern = 0; pattern < 3; ++pattern) {
          const int n = pattern == 2 ? std::max(1, block - 3) : block;
          INFO("BLOCK " << block << " bins " << bins << " warps " << warps << " pattern " << pattern << " n " << n);
          Vec<int32_t> x(block);
          std::vector<int64_t> xs(block);
          for (int i = 0; i < block; ++i) {
            // 0: spread with out-of-range values (negatives, >= bins); 1: all equal; 2: few values, ragged n
            const int v = pattern == 0 ? int((uint32_t(i) * 2654435761u) % uint32_t(bins + 6)) - 3
                          : pattern == 1 ? bins / 2
                                         : int((uint32_t(i) * 40503u) % 3u);
            x[i] = v;
            xs[i] = v;
          }
          const auto want = host_ranks(xs, n, bins);
          Vec<int32_t> ranks(block, -7), sorted(block, -7);
          k(Grid(1).with_warps(warps), x.data(), ranks.data(), sorted.data(), n, block, bins);
          for (int i = 0; i < n; ++i) REQUIRE(ranks[i] == want[i]);
          // The counting sort: counted elements by value, equal values in index order.
          std::vector<int32_t> order;
          for (int b = 0; b < bins; ++b)
            for (int i = 0; i < n; ++i)
              if (xs[i] == b) order.push_back(i);
          for (size_t j = 0; j < order.size(); ++j) REQUIRE(sorted[j] == order[j]);
          for (size_t j = order.size(); j < size_t(block); ++j) REQUIRE(sorted[j] == -7);
        }
      }
    }
  }
  // An i8 tile with negative values, no mask: the 200 copies of 5 are ranked 0..199.
  auto k8 = jit("e21b_ranks_i8", [](Ptr<int8_t> x, Ptr<int32_t> ranks) {
    Tile<int32_t> o = arange(0, 512);
    store(ranks + o, histogram_ranks(load(x + o), 8));
  });
  Vec<int8_t> x8(512, int8_t(-2));
  for (int i = 0; i < 200; ++i) x8[i * 2] = 5;
  Vec<int32_t> r8(512, 99);
  k8(Grid(1), x8.data(), r8.data());
  for (int i = 0; i < 512; ++i) {
    INFO("element " << i);
    CHECK(r8[i] == (i % 2 == 0 && i < 400 ? i / 2 : -1));
  }
}

// ===================================================================================== E22

TEST_CASE("E22 f32 dot is IEEE by default, tf32 only on request", "[edge]") {
  auto k = jit("e22_dot", [](Ptr<float> p, Ptr<float> v, Ptr<float> out, Constexpr<int> PREC) {
    Tile<float> P = load(p + expand_dims(arange(0, 16), 1) * 32 + expand_dims(arange(0, 32), 0));
    Tile<float> V = load(v + expand_dims(arange(0, 32), 1) * 16 + expand_dims(arange(0, 16), 0));
    Tile<float> r = PREC == 0 ? dot(P, V) : PREC == 1 ? dot(P, V, Precision::IEEE) : dot(P, V, Precision::TF32);
    store(out + expand_dims(arange(0, 16), 1) * 16 + expand_dims(arange(0, 16), 0), r);
  });
  Vec<float> P(16 * 32, 1.0f), V(32 * 16, 1.0f + 0x1p-12f), out(256);
  for (int prec : {0, 1, 2}) {
    std::fill(out.begin(), out.end(), -1.0f);
    k(Grid(1), P.data(), V.data(), out.data(), prec);
    float want = prec == 2 ? 32.0f : 32.0078125f;
    INFO("precision " << prec);
    for (float x : out) CHECK(x == want);
  }
}

// ===================================================================================== E23

TEST_CASE("E23 empty inputs: grid cdiv(0, B) is a no-op, masked-all tiles give identities", "[edge]") {
  auto copy = jit("e23_copy", [](Ptr<float> x, Ptr<float> y, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> o = program_id(0) * BLOCK + arange(0, BLOCK);
    store(y + o, load(x + o, o < n), o < n);
  });
  Buf<float> x{1, 2, 3, 4}, y(4, -1.0f);
  copy(Grid(cdiv(0, 128)), x.data(), y.data(), 0, 128);
  for (float v : y) CHECK(v == -1);
  copy(Grid(1), x.data(), y.data(), 0, 128);  // one program, every lane masked off
  for (float v : y) CHECK(v == -1);

  auto red = jit("e23_reductions", [](Ptr<float> x, Ptr<int32_t> xi, Ptr<float> outf, Ptr<int32_t> outi,
                                      Ptr<float> scan, Tile<int32_t> n) {
    Tile<int32_t> o = arange(0, 64);
    Tile<bool> m = o < n;
    store(outf + 0, sum(load(x + o, m), 0));
    store(outf + 1, max(load(x + o, m, -kInf), 0));
    store(outf + 2, min(load(x + o, m, kInf), 0));
    store(outi + 0, sum(load(xi + o, m), 0));
    store(outi + 1, argmax(load(x + o, m, -kInf), 0));
    store(outi + 2, max(load(xi + o, m, INT32_MIN), 0));
    store(outi + 3 + arange(0, 4), histogram(load(xi + o, m), 4, m));
    store(scan + o, cumsum(load(x + o, m), 0), m);
  });
  Vec<float> xf(64, 5.0f), scan(64, -2.0f);
  Vec<int32_t> xi(64, 2);
  Buf<float> outf(3, -1.0f);
  Buf<int32_t> outi(7, -1);
  red(Grid(1), xf.data(), xi.data(), outf.data(), outi.data(), scan.data(), 0);
  CHECK(outf[0] == 0.0f);
  CHECK(outf[1] == -kInf);
  CHECK(outf[2] == kInf);
  CHECK(outi[0] == 0);
  CHECK(outi[1] == 0);
  CHECK(outi[2] == INT32_MIN);
  for (int i = 3; i < 7; ++i) CHECK(outi[i] == 0);
  for (float v : scan) CHECK(v == -2.0f);

  // matmul: K = 0 gives zeros; M = 0 or N = 0 launches nothing.
  auto gemm = make_gemm<float>();
  Vec<float> a(16, 1.0f), b(16, 1.0f), c(256, -3.0f);
  gemm(Grid(1, 1), a.data(), b.data(), c.data(), 16, 16, 0, 16, 16, 16);
  for (float v : c) CHECK(v == 0.0f);
  std::fill(c.begin(), c.end(), -3.0f);
  gemm(Grid(cdiv(0, 16), 1), a.data(), b.data(), c.data(), 0, 16, 16, 16, 16, 16);
  gemm(Grid(1, cdiv(0, 16)), a.data(), b.data(), c.data(), 16, 0, 16, 16, 16, 16);
  for (float v : c) CHECK(v == -3.0f);

  // A device loop over n = 0 elements runs no trips (cumsum carrying a total: nothing stored).
  auto k = jit("e23_loop", [](Ptr<float> x, Ptr<float> y, Ptr<float> total, Tile<int32_t> n) {
    Tile<float> t = 0.0f;
    for (auto c0 : range(0, n, 16)) {
      Tile<int32_t> o = c0 + arange(0, 16);
      Tile<float> v = load(x + o, o < n);
      store(y + o, cumsum(v, 0) + t, o < n);
      t = t + sum(v, 0);
    }
    store(total, t);
  });
  Buf<float> tot(1, -1.0f);
  k(Grid(1), x.data(), y.data(), tot.data(), 0);
  CHECK(tot[0] == 0.0f);
  for (float v : y) CHECK(v == -1);
}

// ===================================================================================== E24

namespace {
struct LoopResult {
  int64_t trips, sum, mod_sum;
  Vec<int64_t> visited;  // first 16 induction values
};
LoopResult host_loop(int64_t lo, int64_t hi, int64_t step) {
  LoopResult r{0, 0, 0, {}};
  if (step > 0)
    for (int64_t i = lo; i < hi; i += step) {
      if (r.trips < 16) r.visited.push_back(i);
      ++r.trips, r.sum += i, r.mod_sum += i % 128;
      if (hi - i <= step) break;  // no overflow of i on the host either
    }
  else if (step < 0)
    for (int64_t i = lo; i > hi; i += step) {
      if (r.trips < 16) r.visited.push_back(i);
      ++r.trips, r.sum += i, r.mod_sum += i % 128;
      if (i - hi <= -step) break;
    }
  return r;
}
template <class I> auto make_loop_runtime() {
  return jit("e24_loop", [](Ptr<int64_t> out, Tile<I> lo, Tile<I> hi, Tile<I> step) {
    Tile<int32_t> cnt = 0;
    Tile<int64_t> s = 0, m = 0;
    for (auto i : range(lo, hi, step)) {
      store(out + 3 + cnt, i, cnt < 16);
      cnt = cnt + 1;
      s = s + i;
      m = m + i % 128;
    }
    store(out + 0, cnt);
    store(out + 1, s);
    store(out + 2, m);
  });
}
template <class K, class... A> LoopResult run_loop(const K& k, A... args) {
  Vec<int64_t> out(3 + 16, -999);
  k(Grid(1), out.data(), args...);
  LoopResult r{out[0], out[1], out[2], {}};
  for (int64_t i = 0; i < std::min<int64_t>(r.trips, 16); ++i) r.visited.push_back(out[3 + i]);
  if (r.trips >= 0 && r.trips < 16) CHECK(out[3 + r.trips] == -999);  // nothing stored past the last trip
  return r;
}
void check_loop(const LoopResult& got, const LoopResult& want) {
  CHECK(got.trips == want.trips);
  CHECK(got.sum == want.sum);
  CHECK(got.mod_sum == want.mod_sum);
  CHECK(got.visited == want.visited);
}
}  // namespace

TEST_CASE("E24 device loops with negative, odd and extreme steps", "[edge]") {
  struct B {
    int64_t lo, hi, step;
  };
  const std::vector<B> i32_cases = {{10, 0, -1},  {0, 10, 3},   {10, 10, 1},  {0, 10, -1},           {INT_MAX - 2, INT_MAX, 4},
                                    {-5, 5, 2},   {5, -5, -2},  {0, 10, 0},   {INT_MIN + 2, INT_MIN, -4}, {300, -300, -7},
                                    {-300, 300, 7}, {0, 1, INT_MAX}, {INT_MIN, INT_MAX, INT_MAX}, {INT_MAX, INT_MIN, INT_MIN},
                                    {0, 1000, 1}, {7, 8, 1}};
  auto k32 = make_loop_runtime<int32_t>();
  for (B b : i32_cases) {
    INFO("i32 range(" << b.lo << ", " << b.hi << ", " << b.step << ")");
    check_loop(run_loop(k32, int32_t(b.lo), int32_t(b.hi), int32_t(b.step)), host_loop(b.lo, b.hi, b.step));
  }
  // Spot values from the case list.
  CHECK(host_loop(10, 0, -1).trips == 10);
  CHECK(host_loop(10, 0, -1).sum == 55);
  CHECK(host_loop(0, 10, 3).visited == Vec<int64_t>{0, 3, 6, 9});
  CHECK(host_loop(INT_MAX - 2, INT_MAX, 4).trips == 1);

  auto k64 = make_loop_runtime<int64_t>();
  const std::vector<B> i64_cases = {{10, 0, -1},
                                    {0, int64_t(1) << 40, int64_t(1) << 38},
                                    {INT64_MAX - 2, INT64_MAX, 4},
                                    {INT64_MIN + 2, INT64_MIN, -4},
                                    {int64_t(1) << 33, (int64_t(1) << 33) - 10, -3},
                                    {5, 5, -1}};
  for (B b : i64_cases) {
    INFO("i64 range(" << b.lo << ", " << b.hi << ", " << b.step << ")");
    check_loop(run_loop(k64, b.lo, b.hi, b.step), host_loop(b.lo, b.hi, b.step));
  }

  // Bounds known at trace time (Constexpr), with a constant or a runtime step.
  auto kc = jit("e24_loop_const", [](Ptr<int64_t> out, Tile<int32_t> rstep, Constexpr<int> LO, Constexpr<int> HI,
                                     Constexpr<int> STEP, Constexpr<bool> RUNTIME_STEP) {
    Tile<int32_t> cnt = 0;
    Tile<int64_t> s = 0, m = 0;
    auto body = [&](const Tile<int32_t>& i) {
      store(out + 3 + cnt, i, cnt < 16);
      cnt = cnt + 1;
      s = s + i;
      m = m + i % 128;
    };
    if (RUNTIME_STEP)
      for (auto i : range(LO, HI, rstep)) body(i);
    else
      for (auto i : range(LO, HI, STEP)) body(i);
    store(out + 0, cnt);
    store(out + 1, s);
    store(out + 2, m);
  });
  for (B b : i32_cases) {
    for (bool rt : {false, true}) {
      INFO("constant range(" << b.lo << ", " << b.hi << ", " << b.step << ") runtime step " << rt);
      check_loop(run_loop(kc, int32_t(rt ? b.step : 1), int(b.lo), int(b.hi), int(b.step), rt),
                 host_loop(b.lo, b.hi, b.step));
    }
  }
}

// ===================================================================================== E25

TEST_CASE("E25 (a < b) && (b < c) at run time", "[edge]") {
  // That `a < b < c` does not compile is checked by the CTest test e25_chained_comparison_*.
  auto k = jit("e25_chain", [](Ptr<float> a, Ptr<float> b, Ptr<float> c, Ptr<bool> out, Ptr<bool> out2,
                               Ptr<int32_t> ia, Ptr<bool> out3, Constexpr<int> N) {
    Tile<int32_t> o = arange(0, N);
    Tile<float> x = load(a + o), y = load(b + o), z = load(c + o);
    store(out + o, (x < y) && (y < z));
    store(out2 + o, ((x <= y) && (y < 2.0f)) || !(z > x));
    Tile<int32_t> i = load(ia + o);
    store(out3 + o, (0 < i) && (i < 3));
  });
  const int N = 8;
  Buf<float> a{1, 1, 3, 1, kNaN, 1, 0, 2}, b{2, 2, 2, 1, 1, kNaN, 1, 2}, c{3, 1, 1, 2, 2, 2, kInf, 2};
  Buf<int32_t> ia{-1, 0, 1, 2, 3, 4, INT_MIN, INT_MAX};
  Buf<bool> out(N), out2(N), out3(N);
  k(Grid(1), a.data(), b.data(), c.data(), out.data(), out2.data(), ia.data(), out3.data(), N);
  for (int i = 0; i < N; ++i) {
    INFO("i " << i);
    CHECK(out[i] == ((a[i] < b[i]) && (b[i] < c[i])));
    CHECK(out2[i] == (((a[i] <= b[i]) && (b[i] < 2.0f)) || !(c[i] > a[i])));
    CHECK(out3[i] == ((0 < ia[i]) && (ia[i] < 3)));
  }
}

// ===================================================================================== E26

namespace {
uint16_t h_bits(double v) { return f16(v).bits; }
uint16_t b_bits(double v) { return bf16(v).bits; }
}  // namespace

TEST_CASE("E26 host-side f16/bf16 conversions round once", "[edge]") {
  CHECK(float(f16(1025.49995)) == 1025.0f);
  CHECK(float(f16(1.0 + 0x1p-11 + 0x1p-30)) == 1.0009765625f);
  CHECK(float(bf16(1.0 + 0x1p-8 + 0x1p-30)) == 1.0078125f);
  CHECK(float(f16(2049.0f)) == 2048.0f);
  CHECK(float(f16(2051.0f)) == 2052.0f);
  CHECK(h_bits(65520.0) == 0x7C00);
  CHECK(h_bits(-65520.0) == 0xFC00);
  CHECK(h_bits(65519.99) == 0x7BFF);
  CHECK(float(f16(0x1.8p-24)) == 0x1p-23f);
  CHECK(h_bits(0x1p-25) == 0);
  CHECK(float(f16(0x1.000002p-25)) == 0x1p-24f);
  CHECK((h_bits(kNaND) & 0x7C00) == 0x7C00);
  CHECK((h_bits(kNaND) & 0x03FF) != 0);
}

TEST_CASE("E26 narrowing conversions round once: trace-time constants", "[edge]") {
  auto k = jit("e26_const", [](Ptr<f16> oh, Ptr<bf16> ob, Ptr<float> of, Ptr<int32_t> oi, Ptr<uint8_t> ou,
                               Ptr<int64_t> ol) {
    store(oh + 0, Tile<f16>(1025.49995));
    store(oh + 1, Tile<double>(1025.49995).to<f16>());
    store(oh + 2, Tile<f16>(1.0 + 0x1p-11 + 0x1p-30));
    store(oh + 3, Tile<double>(1.0 + 0x1p-11 + 0x1p-30).to<f16>());
    store(oh + 4, Tile<float>(2049.0f).to<f16>());
    store(oh + 5, Tile<float>(2051.0f).to<f16>());
    store(oh + 6, Tile<float>(65520.0f).to<f16>());
    store(oh + 7, Tile<float>(0x1.8p-24f).to<f16>());
    store(oh + 8, Tile<float>(0x1p-25f).to<f16>());
    store(oh + 9, Tile<double>(-65520.0).to<f16>());
    store(ob + 0, Tile<bf16>(1.0 + 0x1p-8 + 0x1p-30));
    store(ob + 1, Tile<double>(1.0 + 0x1p-8 + 0x1p-30).to<bf16>());
    store(of + 0, Tile<double>(1.0 + 0x1p-24 + 0x1p-50).to<float>());
    store(of + 1, Tile<float>(1.0 + 0x1p-24 + 0x1p-50));
    // float -> int saturates, NaN -> 0, truncation toward zero
    store(oi + 0, Tile<float>(kNaN).to<int32_t>());
    store(oi + 1, Tile<float>(1e10f).to<int32_t>());
    store(oi + 2, Tile<float>(-1e10f).to<int32_t>());
    store(oi + 3, Tile<float>(-3.9f).to<int32_t>());
    store(oi + 4, Tile<double>(kInfD).to<int32_t>());
    store(ou + 0, Tile<float>(-1.0f).to<uint8_t>());
    store(ou + 1, Tile<float>(300.0f).to<uint8_t>());
    store(ou + 2, Tile<float>(255.9f).to<uint8_t>());
    store(ol + 0, Tile<double>(1e19).to<int64_t>());
    store(ol + 1, Tile<double>(-1e19).to<int64_t>());
    store(ol + 2, Tile<double>(kNaND).to<int64_t>());
  });
  Buf<f16> oh(10);
  Buf<bf16> ob(2);
  Buf<float> of(2);
  Buf<int32_t> oi(5);
  Buf<uint8_t> ou(3);
  Buf<int64_t> ol(3);
  k(Grid(1), oh.data(), ob.data(), of.data(), oi.data(), ou.data(), ol.data());
  CHECK(float(oh[0]) == 1025.0f);
  CHECK(float(oh[1]) == 1025.0f);
  CHECK(float(oh[2]) == 1.0009765625f);
  CHECK(float(oh[3]) == 1.0009765625f);
  CHECK(float(oh[4]) == 2048.0f);
  CHECK(float(oh[5]) == 2052.0f);
  CHECK(oh[6].bits == 0x7C00);
  CHECK(float(oh[7]) == 0x1p-23f);
  CHECK(oh[8].bits == 0);
  CHECK(oh[9].bits == 0xFC00);
  CHECK(float(ob[0]) == 1.0078125f);
  CHECK(float(ob[1]) == 1.0078125f);
  CHECK(of[0] == 1.0f + 0x1p-23f);
  CHECK(of[1] == 1.0f + 0x1p-23f);
  CHECK(oi[0] == 0);
  CHECK(oi[1] == INT32_MAX);
  CHECK(oi[2] == INT32_MIN);
  CHECK(oi[3] == -3);
  CHECK(oi[4] == INT32_MAX);
  CHECK(ou[0] == 0);
  CHECK(ou[1] == 255);
  CHECK(ou[2] == 255);
  CHECK(ol[0] == INT64_MAX);
  CHECK(ol[1] == INT64_MIN);
  CHECK(ol[2] == 0);
}

TEST_CASE("E26 narrowing conversions round once: run time", "[edge]") {
  auto k = jit("e26_runtime", [](Ptr<double> xd, Ptr<float> xf, Ptr<f16> hd, Ptr<f16> hf, Ptr<bf16> bd, Ptr<bf16> bfo,
                                 Ptr<float> fd, Ptr<int32_t> id, Ptr<int32_t> ifo, Ptr<uint8_t> uf, Ptr<int64_t> ld,
                                 Tile<int32_t> n, Constexpr<int> NP) {
    Tile<int32_t> o = arange(0, NP);  // n values; NP = n
    Tile<bool> m = o < n;
    Tile<double> d = load(xd + o, m);
    Tile<float> f = load(xf + o, m);
    store(hd + o, d.to<f16>(), m);
    store(hf + o, f.to<f16>(), m);
    store(bd + o, d.to<bf16>(), m);
    store(bfo + o, f.to<bf16>(), m);
    store(fd + o, d.to<float>(), m);
    store(id + o, d.to<int32_t>(), m);
    store(ifo + o, f.to<int32_t>(), m);
    store(uf + o, f.to<uint8_t>(), m);
    store(ld + o, d.to<int64_t>(), m);
  });
  const Vec<double> xs = {1025.49995, 1.0 + 0x1p-11 + 0x1p-30, 1.0 + 0x1p-8 + 0x1p-30, 2049.0, 2051.0,
                                  65520.0,    -65520.0,               65519.0,                0x1.8p-24, 0x1p-25,
                                  0x1.2p-25,  0x1.ff8p-15,            -0x1p-24,               kNaND,     kInfD,
                                  -kInfD,     1e10,                   -1e10,                  -3.9,      300.0,
                                  -1.0,       1e19,                   -0.0,                   1.0 + 0x1p-24 + 0x1p-50};
  const int N = int(xs.size());
  Vec<float> xf(N);
  for (int i = 0; i < N; ++i) xf[i] = float(xs[i]);
  Vec<f16> hd(N), hf(N);
  Vec<bf16> bd(N), bfo(N);
  Vec<float> fd(N);
  Vec<int32_t> id(N), ifo(N);
  Vec<uint8_t> uf(N);
  Vec<int64_t> ld(N);
  k(Grid(1), xs.data(), xf.data(), hd.data(), hf.data(), bd.data(), bfo.data(), fd.data(), id.data(), ifo.data(),
    uf.data(), ld.data(), N, N);
  auto sat = [](double v, double lo, double hi) -> double {
    if (std::isnan(v)) return 0;
    if (v <= lo) return lo;
    if (v >= hi) return hi;
    return std::trunc(v);
  };
  for (int i = 0; i < N; ++i) {
    INFO("x = " << xs[i] << " (index " << i << ")");
    // Rounded once from the source value; tle::f16/bf16's host conversion is checked above.
    if (std::isnan(xs[i])) {
      CHECK((hd[i].bits & 0x7FFF) > 0x7C00);
      CHECK((hf[i].bits & 0x7FFF) > 0x7C00);
      CHECK((bd[i].bits & 0x7FFF) > 0x7F80);
      CHECK(std::isnan(fd[i]));
    } else {
      CHECK(hd[i].bits == h_bits(xs[i]));
      CHECK(hf[i].bits == h_bits(double(xf[i])));
      CHECK(bd[i].bits == b_bits(xs[i]));
      CHECK(bfo[i].bits == b_bits(double(xf[i])));
      CHECK(std::bit_cast<uint32_t>(fd[i]) == std::bit_cast<uint32_t>(float(xs[i])));
    }
    CHECK(double(id[i]) == sat(xs[i], INT32_MIN, INT32_MAX));
    CHECK(double(ifo[i]) == sat(double(xf[i]), INT32_MIN, INT32_MAX));
    CHECK(double(uf[i]) == sat(double(xf[i]), 0, 255));
    if (std::isnan(xs[i])) CHECK(ld[i] == 0);
    else if (xs[i] >= 0x1p63) CHECK(ld[i] == INT64_MAX);
    else if (xs[i] <= -0x1p63) CHECK(ld[i] == INT64_MIN);
    else CHECK(ld[i] == int64_t(xs[i]));
  }
  // The named values of the case.
  CHECK(float(hd[0]) == 1025.0f);
  CHECK(float(hd[1]) == 1.0009765625f);
  CHECK(float(bd[2]) == 1.0078125f);
  CHECK(float(hf[3]) == 2048.0f);
  CHECK(float(hf[4]) == 2052.0f);
  CHECK(hf[5].bits == 0x7C00);
  CHECK(hd[6].bits == 0xFC00);
  CHECK(float(hd[8]) == 0x1p-23f);
  CHECK(hd[9].bits == 0);
  CHECK(float(hd[10]) == 0x1p-24f);
  CHECK(float(hd[11]) == 0x1.ff8p-15f);
  CHECK(hd[22].bits == 0x8000);
}

TEST_CASE("E26 narrowing conversions round once: host argument conversion", "[edge]") {
  auto k = jit("e26_args", [](Ptr<f16> oh, Ptr<bf16> ob, Ptr<float> of, Tile<f16> h, Tile<bf16> b, Tile<float> f) {
    store(oh, h);
    store(ob, b);
    store(of, f);
  });
  struct C {
    double in;
    uint16_t h;
    uint16_t b;
  };
  for (C c : {C{1025.49995, h_bits(1025.0), b_bits(1025.49995)}, C{1.0 + 0x1p-11 + 0x1p-30, h_bits(1.0009765625), 0x3F80},
              C{1.0 + 0x1p-8 + 0x1p-30, h_bits(1.00390625), 0x3F81}, C{65520.0, 0x7C00, b_bits(65520.0)},
              C{0x1.8p-24, h_bits(0x1p-23), b_bits(0x1.8p-24)}}) {
    INFO("double argument " << c.in);
    Buf<f16> oh(1);
    Buf<bf16> ob(1);
    Buf<float> of(1);
    k(Grid(1), oh.data(), ob.data(), of.data(), c.in, c.in, c.in);
    CHECK(oh[0].bits == c.h);
    CHECK(ob[0].bits == c.b);
    CHECK(of[0] == float(c.in));
  }
  CHECK(b_bits(1.0 + 0x1p-8 + 0x1p-30) == 0x3F81);
  // float arguments: ties to even
  for (float in : {2049.0f, 2051.0f, 65520.0f}) {
    Buf<f16> oh(1);
    Buf<bf16> ob(1);
    Buf<float> of(1);
    k(Grid(1), oh.data(), ob.data(), of.data(), in, in, in);
    CHECK(oh[0].bits == h_bits(in));
  }
  Buf<f16> oh(1);
  Buf<bf16> ob(1);
  Buf<float> of(1);
  k(Grid(1), oh.data(), ob.data(), of.data(), 2049.0f, 1.0, 1.0);
  CHECK(float(oh[0]) == 2048.0f);
  k(Grid(1), oh.data(), ob.data(), of.data(), 2051.0f, 1.0, 1.0);
  CHECK(float(oh[0]) == 2052.0f);
}

// ===================================================================================== E27

namespace {
template <class T> void guarded_copy_cases() {
  auto grid_copy = jit("e27_copy", [](Ptr<T> in, Ptr<T> out, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> o = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> m = o < n;
    store(out + o, load(in + o, m), m);
  });
  auto loop_copy = jit("e27_copy_loop", [](Ptr<T> in, Ptr<T> out, Tile<int32_t> n, Constexpr<int> BLOCK) {
    for (auto c0 : range(0, n, BLOCK)) {
      Tile<int32_t> o = c0 + arange(0, BLOCK);
      Tile<bool> m = o < n;
      Tile<T> staged = load(in + o, m);
      store(out + o, staged, m);
    }
  });
  for (int n : {1, 3, 7, 9, 15, 17})
    for (int block : {4, 8, 16})
      for (int loop : {0, 1}) {
        INFO(type_label<T>() << " N " << n << " BLOCK " << block << " loop " << loop);
        GuardedBuffer ib(n * sizeof(T)), ob(n * sizeof(T));
        T* in = ib.as<T>();
        T* out = ob.as<T>();
        for (int i = 0; i < n; ++i) in[i] = make<T>(i * 3 + 1), out[i] = make<T>(0);
        if (loop) loop_copy(Grid(1), in, out, n, block);
        else grid_copy(Grid(cdiv(n, block)), in, out, n, block);
        for (int i = 0; i < n; ++i) CHECK(as_double(out[i]) == as_double(in[i]));
      }
}
}  // namespace

TEST_CASE("E27 tails do not over-read: copies next to a guard page", "[edge]") {
  guarded_copy_cases<float>();
  guarded_copy_cases<uint8_t>();
  guarded_copy_cases<double>();
  guarded_copy_cases<f16>();
}

TEST_CASE("E27 tails do not over-read: gather through a masked index load", "[edge]") {
  // Masked-off index lanes are filled with D (one past the end of data: the guard page), so a gather
  // that touched a masked-off lane faults.
  auto k = jit("e27_gather", [](Ptr<int32_t> idx, Ptr<float> data, Ptr<float> out, Tile<int32_t> n, Tile<int32_t> d,
                                Constexpr<int> BLOCK) {
    Tile<int32_t> o = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> m = o < n;
    Tile<int32_t> j = load(idx + o, m, d);
    store(out + o, load(data + j, m), m);
  });
  const int D = 5;
  // The fill index: D on the CPU (the guard page); on the GPU (no guard page) 2^30, 4 GiB past
  // data, so that a gather through a masked-off lane faults there too.
  const int32_t fill = opstest::gpu_mode() ? (1 << 30) : D;
  GuardedBuffer db(D * sizeof(float));
  float* data = db.as<float>();
  for (int i = 0; i < D; ++i) data[i] = 10.0f + i;
  for (int n : {1, 3, 7, 9, 15, 17})
    for (int block : {4, 8, 16}) {
      INFO("N " << n << " BLOCK " << block);
      GuardedBuffer ib(n * sizeof(int32_t)), ob(n * sizeof(float));
      int32_t* idx = ib.as<int32_t>();
      float* out = ob.as<float>();
      for (int i = 0; i < n; ++i) idx[i] = (i * 3) % D, out[i] = -1;
      k(Grid(cdiv(n, block)), idx, data, out, n, fill, block);
      for (int i = 0; i < n; ++i) CHECK(out[i] == data[(i * 3) % D]);
    }
}
