// tests/test_struct_copy.cpp - TLE-Struct asynchronous copies and mbarriers (issue #13 items 2
// and 3: gpu::copy from pointers and from tensor descriptors (TMA), gpu::commit_group,
// gpu::wait_group, gpu::alloc_mbarriers, arrive, arrive_expect_tx, wait; docs/struct.md, "Copies"): numerical tests against plain C++
// references on ragged shapes ([ops][struct]: CPU backend in CI, mirrored on the interpreter and
// the GPU), the interpreter's in-flight check and user errors at the call's line ([errors]), the
// barriers the GPU passes place around copies ([struct-pass]), PTX assembled by ptxas ([ptx]) and
// the kernels at 1, 4 and 8 warps on the GPU ([.gpu]).
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "error_util.hpp"
#include "ops_util.hpp"
#include "passes/gpu/gpu_passes.hpp"
#include "passes/pass.hpp"
#include "ptxas_util.hpp"
#include "struct_util.hpp"
#include "trace_util.hpp"

using namespace tle;
using namespace opstest;
using namespace structtest;

namespace {


/// out[N] = column sums of x [R, N], BR rows at a time through an S-stage buffer that gpu::copy
/// fills S - 1 blocks ahead (the cp.async pipeline written by hand): rows past R are masked
/// (zero-filled), N need not be a power of two.
auto pipe_kernel = [](Ptr<float> x, Ptr<float> out, Tile<int32_t> R, Constexpr<int> N, Constexpr<int> BR,
                      Constexpr<int> S) {
  auto buf = gpu::alloc<float>({S, BR, N});
  Tile<int32_t> r = expand_dims(arange(0, BR), 1), c = expand_dims(arange(0, N), 0);
  for (int s = 0; s < S - 1; ++s) {  // prologue: blocks 0 .. S - 2
    Tile<int32_t> row = s * BR + r;
    gpu::copy(x + row * N + c, buf[s], row < R);
    gpu::commit_group();
  }
  Tile<float> acc = zeros<float>({BR, N});
  for (auto b : range(0, (R + BR - 1) / BR)) {
    gpu::wait_group(S - 2);  // block b has landed
    Tile<int32_t> row = (b + S - 1) * BR + r;
    gpu::copy(x + row * N + c, buf[(b + S - 1) % S], row < R);
    gpu::commit_group();
    acc = acc + buf[b % S].load();
  }
  store(out + arange(0, N), sum(acc, 0));
};

/// out[N] = column sums of x [R, N] moved by TMA (gpu::copy from a TensorDescriptor) in blocks of
/// [BR, BN] (BN >= N: the columns past N arrive as zeros) through S stages, each completing on
/// its own mbarrier; SWZ: the buffer has the 128-byte swizzle (rows of BN * sizeof(T) = 128 bytes).
template <class T> auto tma_pipe_kernel() {
  return [](TensorDescriptor<T, 2> xd, Ptr<float> out, Tile<int32_t> R, Constexpr<int> N, Constexpr<int> BR,
            Constexpr<int> BN, Constexpr<int> S, Constexpr<int> SWZ) {
    const int64_t row = BN * int64_t(sizeof(T));
    auto lay = SWZ ? gpu::SharedLayout::swizzled(16 / int64_t(sizeof(T)), 128 / row, row / 16) : gpu::SharedLayout::row_major();
    auto buf = gpu::alloc<T>({S, BR, BN}, gpu::scope::shared, lay);
    auto bars = gpu::alloc_mbarriers(S);
    const int64_t bytes = BR * row;
    Tile<int32_t> blocks = (R + BR - 1) / BR;
    auto issue = [&](Tile<int32_t> nb) {  // block nb into stage nb % S, announced on its mbarrier
      if_(nb < blocks, [&] {
        Tile<int32_t> ns = nb % S;
        gpu::arrive_expect_tx(bars[ns], bytes);
        gpu::copy(xd, {nb * BR, 0}, buf[ns], bars[ns]);
      });
    };
    for (int s = 0; s < S - 1; ++s) issue(full<int32_t>({}, s));
    Tile<float> acc = zeros<float>({BR, BN});
    for (auto b : range(0, blocks)) {
      gpu::wait(bars[b % S], b / S);  // use b / S of stage b % S has landed
      issue(b + (S - 1));
      acc = acc + cast<float>(buf[b % S].load());
    }
    Tile<int32_t> c = arange(0, BN);
    store(out + c, sum(acc, 0), c < N);
  };
}

/// c [M, N] = a [M, K] @ b [K, N] (bf16, f32 accumulate), one program per BM x BN tile, both
/// operands staged by gpu::copy in S-stage buffers (masked at the ragged edges).
auto gemm_kernel = [](Ptr<bf16> a, Ptr<bf16> b, Ptr<float> c, Tile<int32_t> M, Tile<int32_t> N, Tile<int32_t> K,
                      Constexpr<int> BM, Constexpr<int> BN, Constexpr<int> BK, Constexpr<int> S) {
  auto sa = gpu::alloc<bf16>({S, BM, BK});
  auto sb = gpu::alloc<bf16>({S, BK, BN});
  Tile<int32_t> rm = expand_dims(program_id(0) * BM + arange(0, BM), 1);
  Tile<int32_t> rn = expand_dims(program_id(1) * BN + arange(0, BN), 0);
  Tile<int32_t> ka = expand_dims(arange(0, BK), 0), kb = expand_dims(arange(0, BK), 1);
  auto issue = [&](Tile<int32_t> kt, gpu::Buffer<bf16> da, gpu::Buffer<bf16> db) {
    Tile<int32_t> k0 = kt * BK;
    gpu::copy(a + rm * K + (k0 + ka), da, (rm < M) & (k0 + ka < K));
    gpu::copy(b + (k0 + kb) * N + rn, db, (k0 + kb < K) & (rn < N));
    gpu::commit_group();
  };
  for (int s = 0; s < S - 1; ++s) issue(full<int32_t>({}, s), sa[s], sb[s]);
  Tile<float> acc = zeros<float>({BM, BN});
  for (auto kt : range(0, (K + BK - 1) / BK)) {
    gpu::wait_group(S - 2);
    issue(kt + (S - 1), sa[(kt + (S - 1)) % S], sb[(kt + (S - 1)) % S]);
    acc = dot(sa[kt % S].load(), sb[kt % S].load(), acc);
  }
  store(c + rm * N + rn, acc, (rm < M) & (rn < N));
};


/// x [n] through a buffer of BN elements of T in one copy (masked past n: zero-filled), waited
/// for, then read back reversed: out[i] = i < BN - n ? 0 : x[BN - 1 - i].
template <class T> auto roundtrip_kernel() {
  return [](Ptr<T> x, Ptr<T> out, Tile<int32_t> n, Constexpr<int> BN) {
    auto buf = gpu::alloc<T>({BN});
    Tile<int32_t> i = arange(0, BN);
    gpu::copy(x + i, buf, i < n);
    gpu::commit_group();
    gpu::wait_group(0);
    store(out + i, load(gpu::local_ptr(buf, {(BN - 1) - i})));
  };
}
template <class T> void check_roundtrip(const char* name) {
  auto k = jit(name, roundtrip_kernel<T>());
  for (auto [n, BN] : {std::pair{17, 17}, std::pair{1, 1}, std::pair{5, 64}, std::pair{1001, 1001}, std::pair{300, 1024}}) {
    INFO(name << " n " << n << " BN " << BN);
    Buf<T> x(static_cast<size_t>(BN)), out(static_cast<size_t>(BN));
    for (size_t i = 0; i < x.size(); ++i) x[i] = T(float(int(i % 97) - 40));
    k(Grid(1), x.data(), out.data(), n, BN);
    std::vector<T> want(static_cast<size_t>(BN));
    for (int i = 0; i < BN; ++i) want[size_t(i)] = BN - 1 - i < n ? x[size_t(BN - 1 - i)] : T(0.0f);
    CHECK(diffs(all(out), want) == "");
  }
}

}  // namespace

TEST_CASE("ops: a hand-written cp.async pipeline: gpu::copy S - 1 blocks ahead, ragged rows and columns",
          "[ops][struct]") {
  auto k = jit("struct_copy_pipe", pipe_kernel);
  for (auto [R, N, BR, S] : {std::tuple{37, 17, 4, 3}, std::tuple{1, 1, 1, 2}, std::tuple{100, 64, 8, 4},
                             std::tuple{9, 1001, 2, 2}, std::tuple{3, 33, 4, 4}, std::tuple{0, 8, 2, 3}}) {
    INFO("R " << R << " N " << N << " BR " << BR << " stages " << S);
    Buf<float> x = random_buf<float>(size_t(std::max(R, 1)) * N, 5), out(static_cast<size_t>(N));
    k(Grid(1), x.data(), out.data(), R, N, BR, S);
    CHECK(diffs(all(out), column_sums_of(x, R, N), 1e-5, 1e-5) == "");
  }
}

TEST_CASE("ops: a bf16 GEMM whose operands gpu::copy stages, ragged M, N and K", "[ops][struct]") {
  auto k = jit("struct_copy_gemm", gemm_kernel);
  for (auto [M, N, K, S] : {std::tuple{64, 64, 64, 2}, std::tuple{33, 17, 100, 3}, std::tuple{1, 1, 1, 2},
                            std::tuple{100, 70, 129, 4}}) {
    INFO(M << "x" << N << "x" << K << " stages " << S);
    const int BM = 32, BN = 32, BK = 32;
    Buf<bf16> a(size_t(M) * K), b(size_t(K) * N);
    Buf<float> c(size_t(M) * N);
    gemm_data(a, b);
    std::vector<float> want;
    gemm_ref(M, N, K, a, b, want);
    k(Grid((M + BM - 1) / BM, (N + BN - 1) / BN), a.data(), b.data(), c.data(), M, N, K, BM, BN, BK, S);
    CHECK(diffs(all(c), want) == "");
  }
}

TEST_CASE("ops: a TMA pipeline: gpu::copy from a descriptor into stages completing on mbarriers", "[ops][struct]") {
  // f32 into row-major stages (N a multiple of 4: 16-byte rows of the tensor, as TMA needs), and
  // bf16 into stages with the 128-byte swizzle read back through the same layout.
  auto kf = jit("struct_tma_pipe_f32", tma_pipe_kernel<float>());
  for (auto [R, N, S] : {std::tuple{1000, 100, 3}, std::tuple{1, 4, 2}, std::tuple{37, 128, 4}, std::tuple{16, 8, 2}}) {
    INFO("f32 R " << R << " N " << N << " stages " << S);
    Buf<float> x(size_t(R) * N), out(static_cast<size_t>(128));
    for (size_t i = 0; i < x.size(); ++i) x[i] = hashed(i);
    TensorDescriptor<float, 2> xd(x.data(), {R, N}, {N, 1}, {8, 128});
    kf(Grid(1), xd, out.data(), R, N, 8, 128, S, 0);
    CHECK(diffs(std::vector<float>(out.begin(), out.begin() + N), column_sums_of(x, R, N)) == "");
  }
  // (the 128-, 64- and 32-byte swizzles: rows of 64, 32 and 16 bf16)
  auto kb = jit("struct_tma_pipe_bf16", tma_pipe_kernel<bf16>());
  for (auto [R, N, BN, S] : {std::tuple{1000, 40, 64, 3}, std::tuple{9, 64, 64, 2}, std::tuple{100, 24, 32, 3},
                             std::tuple{33, 16, 16, 2}}) {
    INFO("bf16 R " << R << " N " << N << " BN " << BN << " stages " << S);
    Buf<bf16> x(size_t(R) * N);
    Buf<float> out(static_cast<size_t>(64));
    for (size_t i = 0; i < x.size(); ++i) x[i] = bf16(hashed(i));
    TensorDescriptor<bf16, 2> xd(x.data(), {R, N}, {N, 1}, {8, BN});
    kb(Grid(1), xd, out.data(), R, N, 8, BN, S, 1);
    CHECK(diffs(std::vector<float>(out.begin(), out.begin() + N), column_sums_of(x, R, N)) == "");
  }
}

TEST_CASE("ops: mbarrier phases: two arrivals per phase, waited for by parity in a loop", "[ops][struct]") {
  // Each iteration stores a row, arrives twice (the phase's count) and waits for that phase before
  // reading the row back reversed: on the GPU a miscount hangs or lets the read run early.
  auto k = jit("struct_mbar_phases", [](Ptr<float> x, Ptr<float> out, Tile<int32_t> n, Constexpr<int> N) {
    auto bars = gpu::alloc_mbarriers(2, 2);
    auto row = gpu::alloc<float>({N});
    Tile<int32_t> c = arange(0, N);
    Tile<float> acc = zeros<float>({N});
    for (auto i : range(0, n)) {
      row.store(load(x + i * N + c));
      gpu::arrive(bars[i % 2]);
      gpu::arrive(bars[i % 2]);
      gpu::wait(bars[i % 2], i / 2);
      acc = acc + load(gpu::local_ptr(row, {(N - 1) - c}));
    }
    store(out + c, acc);
  });
  for (auto [n, N] : {std::pair{5, 64}, std::pair{1, 17}, std::pair{8, 1000}}) {
    INFO("n " << n << " N " << N);
    Buf<float> x(size_t(n) * N), out(static_cast<size_t>(N));
    for (size_t i = 0; i < x.size(); ++i) x[i] = hashed(i);
    k(Grid(1), x.data(), out.data(), n, N);
    std::vector<float> want(size_t(N), 0.0f);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < N; ++j) want[size_t(j)] += x[size_t(i) * N + (N - 1 - j)];
    CHECK(diffs(all(out), want) == "");
  }
}

TEST_CASE("ops: gpu::copy of 1-, 2-, 4- and 8-byte elements, masked elements zero-filled", "[ops][struct]") {
  check_roundtrip<int8_t>("struct_copy_i8");
  check_roundtrip<f16>("struct_copy_f16");
  check_roundtrip<int32_t>("struct_copy_i32");
  check_roundtrip<double>("struct_copy_f64");
}

// ============================================================================ errors

namespace {
int line = 0;
std::vector<float> fbuf(4096, 1.0f);
template <class F> void expect_error(F&& f, const std::vector<std::string>& phrases) {
  errtest::expect_user_error(f, phrases, "test_struct_copy.cpp", line);
}
/// The message of the RuntimeError f throws ("" and a failure when it throws none).
template <class F> std::string interp_error(F&& f) {
  try {
    f();
  } catch (const RuntimeError& e) {
    return e.what();
  }
  FAIL_CHECK("no error");
  return "";
}
}  // namespace

TEST_CASE("errors: gpu::copy: sources, destinations, shapes, group counts", "[errors][struct]") {
  auto from_buf = jit("struct_copy_err_src", [](Ptr<float> x) {
    auto a = gpu::alloc<float>({16});
    auto b = gpu::alloc<float>({16});
    line = __LINE__; gpu::copy(gpu::local_ptr(a), b);
    store(x + arange(0, 16), b.load());
  });
  expect_error([&] { from_buf(Grid(1), fbuf.data()); }, {"the source points into a gpu::alloc buffer"});

  auto to_global = jit("struct_copy_err_dst", [](Ptr<float> x) {
    Tile<int32_t> i = arange(0, 16);
    line = __LINE__; gpu::copy(x + i, x + 16 + i);
  });
  expect_error([&] { to_global(Grid(1), fbuf.data()); }, {"the destination must point into a gpu::alloc buffer"});

  auto shape = jit("struct_copy_err_shape", [](Ptr<float> x) {
    auto a = gpu::alloc<float>({2, 16});
    line = __LINE__; gpu::copy(x + arange(0, 8), a[0]);
  });
  expect_error([&] { shape(Grid(1), fbuf.data()); }, {"the source pointers have shape [8] and the destination's [16]"});

  auto mask = jit("struct_copy_err_mask", [](Ptr<float> x) {
    auto a = gpu::alloc<float>({16});
    line = __LINE__; gpu::copy(x + arange(0, 16), a, arange(0, 4) < 2);
  });
  expect_error([&] { mask(Grid(1), fbuf.data()); }, {"broadcast"});

  auto wait = jit("struct_copy_err_wait", [](Ptr<float> x) {
    line = __LINE__; gpu::wait_group(256);
  });
  expect_error([&] { wait(Grid(1), fbuf.data()); }, {"gpu::wait_group(256)", "from 0 to 255"});
}

TEST_CASE("errors: the interpreter stops a read of a buffer a copy is still filling", "[errors][struct]") {
  // Not waited for at all; waited for before it was committed; a wait that leaves it in flight.
  static int copy_line = 0;
  for (int variant : {0, 1, 2}) {
    INFO("variant " << variant);
    auto k = jit("struct_copy_err_inflight", [](Ptr<float> x, Ptr<float> out, Constexpr<int> variant) {
      auto a = gpu::alloc<float>({2, 16});
      Tile<int32_t> i = arange(0, 16);
      copy_line = __LINE__; gpu::copy(x + i, a[0]);
      if (variant == 1) gpu::wait_group(0);  // not committed: still in flight
      gpu::commit_group();
      if (variant == 2) {
        gpu::copy(x + 16 + i, a[1]);
        gpu::commit_group();
        gpu::wait_group(1);  // the first group landed, the second not
        store(out + i, a[0].load());
        store(out + i, a[1].load());
      }
      store(out + i, a[0].load() * 2.0f);
    });
    std::vector<float> out(32, 0.0f);
    const std::string msg = interp_error([&] { k(Grid(1).backend(Backend::Interp), fbuf.data(), out.data(), variant); });
    CHECK_THAT(msg, Catch::Contains("still copying") && Catch::Contains("gpu::wait_group") &&
                        Catch::Contains("test_struct_copy.cpp:" + std::to_string(variant == 2 ? copy_line + 4 : copy_line)));
    if (variant == 2) CHECK(out[0] == 1.0f);  // a[0] was read after its group landed
  }
  // A store into an element in flight, a copy past the buffer's end.
  auto st = jit("struct_copy_err_store", [](Ptr<float> x, Ptr<float> out) {
    auto a = gpu::alloc<float>({16});
    Tile<int32_t> i = arange(0, 16);
    gpu::copy(x + i, a);
    gpu::commit_group();
    a.store(1.0f);
    gpu::wait_group(0);
    store(out + i, a.load());
  });
  std::vector<float> o16(16, 0.0f);
  CHECK_THAT(interp_error([&] { st(Grid(1).backend(Backend::Interp), fbuf.data(), o16.data()); }),
             Catch::Contains("lane 0 writes a buffer element that the gpu::copy traced at"));
  auto past = jit("struct_copy_err_past", [](Ptr<float> x) {
    auto a = gpu::alloc<float>({16});
    Tile<int32_t> i = arange(0, 16);
    gpu::copy(x + i, gpu::local_ptr(a, {i + 4000}));
    gpu::commit_group();
    gpu::wait_group(0);
  });
  CHECK_THAT(interp_error([&] { past(Grid(1).backend(Backend::Interp), fbuf.data()); }),
             Catch::Contains("outside the program's shared buffers"));
  // Waited for, the same kernel runs.
  auto ok = jit("struct_copy_ok", [](Ptr<float> x, Ptr<float> out) {
    auto a = gpu::alloc<float>({16});
    Tile<int32_t> i = arange(0, 16);
    gpu::copy(x + i, a);
    gpu::commit_group();
    gpu::wait_group(0);
    store(out + i, a.load() * 2.0f);
  });
  std::vector<float> out(16, 0.0f);
  ok(Grid(1).backend(Backend::Interp), fbuf.data(), out.data());
  CHECK(out[15] == 2.0f);
}

TEST_CASE("errors: mbarriers and TMA copies", "[errors][struct]") {
  auto in_loop = jit("struct_mbar_err_loop", [](Ptr<float> x) {
    for (auto i : range(0, 2)) {
      line = __LINE__; auto b = gpu::alloc_mbarriers(1);
      gpu::arrive(b[0]);
    }
  });
  expect_error([&] { in_loop(Grid(1), fbuf.data()); }, {"must be called in the kernel's body"});
  auto none = jit("struct_mbar_err_none", [](Ptr<float> x) {
    line = __LINE__; auto b = gpu::alloc_mbarriers(0);
  });
  expect_error([&] { none(Grid(1), fbuf.data()); }, {"0 mbarriers; allocate 1 to 1024"});
  auto idx = jit("struct_mbar_err_idx", [](Ptr<float> x) {
    auto b = gpu::alloc_mbarriers(2);
    line = __LINE__; gpu::arrive(b[2]);
  });
  expect_error([&] { idx(Grid(1), fbuf.data()); }, {"index 2 is outside the 2 mbarriers"});
  auto tx = jit("struct_mbar_err_tx", [](Ptr<float> x) {
    auto b = gpu::alloc_mbarriers(2);
    line = __LINE__; gpu::arrive_expect_tx(b[0], int64_t(1) << 20);
  });
  expect_error([&] { tx(Grid(1), fbuf.data()); }, {"1048576 bytes; a phase expects 0 to 2^20 - 1"});

  std::vector<float> host(64 * 64, 1.0f);
  TensorDescriptor<float, 2> d(host.data(), {64, 64}, {64, 1}, {8, 32});
  auto shape = jit("struct_tma_err_shape", [](TensorDescriptor<float, 2> xd) {
    auto buf = gpu::alloc<float>({2, 8, 64});
    auto bars = gpu::alloc_mbarriers(2);
    line = __LINE__; gpu::copy(xd, {0, 0}, buf[0], bars[0]);
  });
  expect_error([&] { shape(Grid(1), d); }, {"the descriptor's block is [8, 32] but the destination view is [8, 64]"});
  auto padded = jit("struct_tma_err_padded", [](TensorDescriptor<float, 2> xd) {
    auto buf = gpu::alloc<float>({8, 32}, gpu::scope::shared, gpu::SharedLayout::padded(1));
    auto bars = gpu::alloc_mbarriers(1);
    line = __LINE__; gpu::copy(xd, {0, 0}, buf, bars[0]);
  });
  expect_error([&] { padded(Grid(1), d); }, {"TMA writes rows without padding"});
  auto swz = jit("struct_tma_err_swizzle", [](TensorDescriptor<float, 2> xd) {
    auto buf = gpu::alloc<float>({8, 32}, gpu::scope::shared, gpu::SharedLayout::swizzled(4, 2, 4));
    auto bars = gpu::alloc_mbarriers(1);
    line = __LINE__; gpu::copy(xd, {0, 0}, buf, bars[0]);
  });
  expect_error([&] { swz(Grid(1), d); }, {"SharedLayout::swizzled(16 / sizeof(T), 128 / row bytes, row bytes / 16)"});
  TensorDescriptor<float, 2> d3(host.data(), {64, 64}, {64, 1}, {3, 32});
  auto odd = jit("struct_tma_err_block", [](TensorDescriptor<float, 2> xd) {
    auto buf = gpu::alloc<float>({3, 32});
    auto bars = gpu::alloc_mbarriers(1);
    line = __LINE__; gpu::copy(xd, {0, 0}, buf, bars[0]);
  });
  expect_error([&] { odd(Grid(1), d3); }, {"TMA cannot move a [3, 32] block of f32"});
  // Without TMA (sm_80): refused at the copy.
  auto ok = jit("struct_tma_err_sm80", [](TensorDescriptor<float, 2> xd) {
    auto buf = gpu::alloc<float>({8, 32});
    auto bars = gpu::alloc_mbarriers(1);
    gpu::arrive_expect_tx(bars[0], 8 * 32 * 4);
    line = __LINE__; gpu::copy(xd, {0, 0}, buf, bars[0]);
    gpu::wait(bars[0], 0);
  });
  expect_error([&] { (void)ok.ptx(80, 4, d); }, {"needs the tensor memory accelerator"});
  // Swizzled stages 512 bytes apart: a runtime stage's start is not known to be 1024-byte aligned
  // (the swizzle's period): refused when compiled for TMA.
  std::vector<bf16> hb(64 * 64);
  TensorDescriptor<bf16, 2> bd(hb.data(), {64, 64}, {64, 1}, {4, 64});
  auto unaligned = jit("struct_tma_err_align", [](TensorDescriptor<bf16, 2> xd, Tile<int32_t> s) {
    auto buf = gpu::alloc<bf16>({3, 4, 64}, gpu::scope::shared, gpu::SharedLayout::swizzled(8, 1, 8));
    auto bars = gpu::alloc_mbarriers(1);
    gpu::arrive_expect_tx(bars[0], 4 * 64 * 2);
    line = __LINE__; gpu::copy(xd, {0, 0}, buf[s], bars[0]);
    gpu::wait(bars[0], 0);
  });
  expect_error([&] { (void)unaligned.ptx(90, 4, bd, 1); }, {"aligned to 1024 bytes", "not known to be"});
  // A rank-3 swizzled view whose rows are not whole periods of 8: TMA would swizzle differently.
  std::vector<bf16> h3(4 * 64 * 64);
  TensorDescriptor<bf16, 3> d3b(h3.data(), {4, 64, 64}, {64 * 64, 64, 1}, {2, 4, 64});
  auto rank3 = jit("struct_tma_err_rank3", [](TensorDescriptor<bf16, 3> xd) {
    auto buf = gpu::alloc<bf16>({2, 4, 64}, gpu::scope::shared, gpu::SharedLayout::swizzled(8, 1, 8));
    auto bars = gpu::alloc_mbarriers(1);
    line = __LINE__; gpu::copy(xd, {0, 0, 0}, buf, bars[0]);
  });
  expect_error([&] { rank3(Grid(1), d3b); }, {"a next-to-last dim that is a multiple of 8 rows"});
  // One descriptor moved into a swizzled buffer and loaded plainly: refused at the second use.
  TensorDescriptor<bf16, 2> b64(hb.data(), {64, 64}, {64, 1}, {8, 64});
  auto mixed = jit("struct_tma_err_mixed", [](TensorDescriptor<bf16, 2> xd, Ptr<bf16> y) {
    auto buf = gpu::alloc<bf16>({8, 64}, gpu::scope::shared, gpu::SharedLayout::swizzled(8, 1, 8));
    auto bars = gpu::alloc_mbarriers(1);
    gpu::arrive_expect_tx(bars[0], 8 * 64 * 2);
    gpu::copy(xd, {0, 0}, buf, bars[0]);
    gpu::wait(bars[0], 0);
    Tile<int32_t> r = expand_dims(arange(0, 8), 1), c = expand_dims(arange(0, 64), 0);
    line = __LINE__; store(y + r * 64 + c, buf.load() + xd.load({8, 0}));
  });
  expect_error([&] { (void)mixed.ptx(90, 4, b64, fake<bf16>()); }, {"with no swizzle here and with the 128-byte swizzle"});
  // Arrivals times the program's warps (each arrives once) past an mbarrier's count.
  auto many = jit("struct_mbar_err_count", [](Ptr<float> x) {
    line = __LINE__; auto b = gpu::alloc_mbarriers(1, 131072);
    gpu::arrive(b[0]);
  });
  expect_error([&] { (void)many.ptx(90, 8, fake<float>()); }, {"131072 arrivals per phase of 8 warps"});
}

TEST_CASE("errors: the interpreter stops a wait no arrival can complete", "[errors][struct]") {
  static int alloc_line = 0;
  auto k = jit("struct_mbar_err_deadlock", [](Ptr<float> x, Constexpr<int> variant) {
    alloc_line = __LINE__; auto b = gpu::alloc_mbarriers(2, 2);
    gpu::arrive(b[0]);
    if (variant == 1) gpu::arrive(b[0]);  // phase 0 completes: waiting for parity 0 passes, 1 does not
    gpu::wait(b[0], variant == 1 ? 1 : 0);
  });
  for (int variant : {0, 1}) {
    INFO("variant " << variant);
    const std::string msg = interp_error([&] { k(Grid(1).backend(Backend::Interp), fbuf.data(), variant); });
    CHECK_THAT(msg, Catch::Contains("would wait forever") &&
                        Catch::Contains("test_struct_copy.cpp:" + std::to_string(alloc_line)) &&
                        Catch::Contains(variant == 0 ? "1 of 2 arrivals" : "2 of 2 arrivals"));
  }
  // Transaction bytes announced that no copy completes: the same.
  auto tx = jit("struct_mbar_err_txdead", [](Ptr<float> x) {
    auto b = gpu::alloc_mbarriers(1);
    gpu::arrive_expect_tx(b[0], 64);
    gpu::wait(b[0], 0);
  });
  CHECK_THAT(interp_error([&] { tx(Grid(1).backend(Backend::Interp), fbuf.data()); }),
             Catch::Contains("64 transaction bytes still to come"));
  // A TMA copy's view read before the wait on its phase (the bytes are complete: no deadlock).
  static int tma_line = 0;
  std::vector<float> h(8 * 32, 2.0f), o(8 * 32, 0.0f);
  TensorDescriptor<float, 2> d(h.data(), {8, 32}, {32, 1}, {8, 32});
  auto early = jit("struct_tma_err_early", [](TensorDescriptor<float, 2> xd, Ptr<float> out, Constexpr<int> wait_first) {
    auto buf = gpu::alloc<float>({8, 32});
    auto bars = gpu::alloc_mbarriers(1);
    gpu::arrive_expect_tx(bars[0], 8 * 32 * 4);
    tma_line = __LINE__; gpu::copy(xd, {0, 0}, buf, bars[0]);
    if (wait_first) gpu::wait(bars[0], 0);
    Tile<int32_t> r = expand_dims(arange(0, 8), 1), c = expand_dims(arange(0, 32), 0);
    store(out + r * 32 + c, buf.load());
  });
  const std::string early_msg = interp_error([&] { early(Grid(1).backend(Backend::Interp), d, o.data(), 0); });
  CHECK_THAT(early_msg, Catch::Contains("still copying") && Catch::Contains("wait for its mbarrier phase") &&
                            Catch::Contains("test_struct_copy.cpp:" + std::to_string(tma_line)));
  early(Grid(1).backend(Backend::Interp), d, o.data(), 1);
  CHECK(o[255] == 2.0f);
  // One arrive too many in a phase waiting for its bytes; a program ending with bytes announced.
  auto extra = jit("struct_mbar_err_extra", [](Ptr<float> x) {
    auto b = gpu::alloc_mbarriers(1);
    gpu::arrive_expect_tx(b[0], 64);
    gpu::arrive(b[0]);
  });
  CHECK_THAT(interp_error([&] { extra(Grid(1).backend(Backend::Interp), fbuf.data()); }),
             Catch::Contains("one arrive too many per phase"));
  auto ends = jit("struct_mbar_err_end", [](Ptr<float> x) {
    auto b = gpu::alloc_mbarriers(1);
    gpu::arrive_expect_tx(b[0], 64);
  });
  CHECK_THAT(interp_error([&] { ends(Grid(1).backend(Backend::Interp), fbuf.data()); }),
             Catch::Contains("ends with 64 transaction bytes"));
}

// ============================================================================ GPU passes

namespace {
/// The kinds of the ops of a loop body, in order, as mnemonics joined by spaces (memory and
/// barrier ops only).
std::string sync_shape(const ir::Block& b) {
  std::string s;
  for (auto& op : b.ops)
    switch (op->kind) {
      case ir::OpKind::Barrier: case ir::OpKind::AsyncCopy: case ir::OpKind::AsyncCommit: case ir::OpKind::AsyncWait:
      case ir::OpKind::Load: case ir::OpKind::Store:
        s += std::string(s.empty() ? "" : " ") + ir::op_mnemonic(op->kind);
        break;
      default: break;
    }
  return s;
}
}  // namespace

TEST_CASE("struct passes: barriers around async copies, no compiler pipelining beside them", "[struct-pass]") {
  // The hand-written pipeline: one barrier per iteration, between the wait and the copy into the
  // stage read in the previous iteration (the read of the current stage after the copy is not
  // ordered against the copy in flight: another stage); one barrier after the prologue is not
  // needed (nothing was read yet).
  auto f = tracetest::trace("struct_copy_pass_pipe", pipe_kernel, {64, 8, 3}, true, true);  // N, BR, S
  tracetest::gpu_passes_sm90(*f);
  auto loops = tracetest::ops_of(*f, ir::OpKind::For);
  REQUIRE(loops.size() == 1);
  CHECK(sync_shape(loops[0]->region().body()) == "async_wait barrier async_copy async_commit load");
  CHECK(tracetest::count_ops(*f, ir::OpKind::Barrier) == 1);

  // A bf16 K loop the compiler would pipeline (its loads feed a dot) is left alone in a kernel
  // that copies: its cp.async groups are the kernel's.
  for (bool copies : {false, true}) {
    INFO("with gpu::copy " << copies);
    auto d = tracetest::trace_div16("struct_copy_pass_nopipe", [copies](Ptr<bf16> a, Ptr<bf16> b, Ptr<float> c, Tile<int32_t> K) {
      Tile<int32_t> r = arange(0, 64);
      Tile<float> acc = zeros<float>({64, 64});
      auto buf = gpu::alloc<float>({64});
      if (copies) {
        gpu::copy(c + r, buf);
        gpu::commit_group();
        gpu::wait_group(0);
      }
      for (auto k : range(0, K, 32)) {
        Tile<int32_t> kk = k + arange(0, 32);
        acc = dot(load(a + expand_dims(r, 1) * K + expand_dims(kk, 0)), load(b + expand_dims(kk, 1) * 64 + expand_dims(r, 0)),
                  acc);
      }
      store(c + expand_dims(r, 1) * 64 + expand_dims(r, 0), acc + expand_dims(buf.load(), 0));
    });
    tracetest::gpu_passes_sm90(*d);
    int pipelined = 0;
    ir::walk(d->entry(), [&](const ir::Op& op) { pipelined += op.has_attr("pipelined"); });
    CHECK((pipelined > 0) == !copies);
  }

  // Two groups waited for one at a time (a pipeline's drain): a barrier after each wait, before
  // the read of what it completed, though a barrier came between the waits.
  auto drain = tracetest::trace_div16("struct_copy_pass_drain", [](Ptr<float> x) {
    Tile<int32_t> i = arange(0, 64);
    auto a = gpu::alloc<float>({2, 64});
    gpu::copy(x + i, a[0]);
    gpu::commit_group();
    gpu::copy(x + 64 + i, a[1]);
    gpu::commit_group();
    gpu::wait_group(1);
    Tile<float> t = load(gpu::local_ptr(a[0], {63 - i}));
    gpu::wait_group(0);
    store(x + i, t + load(gpu::local_ptr(a[1], {63 - i})));
  });
  tracetest::gpu_passes_sm90(*drain);
  CHECK(sync_shape(drain->entry()) ==
        "async_copy async_commit async_copy async_commit async_wait barrier load async_wait barrier load store");

  // Straight-line: copy, commit, wait, read: the barrier between the wait and the read; a copy
  // into a buffer read before it: a barrier before the copy (the reads must be done).
  auto g = tracetest::trace_div16("struct_copy_pass_line", [](Ptr<float> x) {
    Tile<int32_t> i = arange(0, 64);
    auto a = gpu::alloc<float>({64});
    gpu::copy(x + i, a);
    gpu::commit_group();
    gpu::wait_group(0);
    Tile<float> t = load(gpu::local_ptr(a, {63 - i}));
    gpu::copy(x + 64 + i, a);
    gpu::commit_group();
    gpu::wait_group(0);
    store(x + i, t + load(gpu::local_ptr(a, {63 - i})));
  });
  tracetest::gpu_passes_sm90(*g);
  CHECK(sync_shape(g->entry()) ==
        "async_copy async_commit async_wait barrier load barrier async_copy async_commit async_wait barrier load store");
  // The copy's destination stays live to the end: a buffer allocated after its last use does not
  // take its bytes.
  auto h = tracetest::trace_div16("struct_copy_pass_live", [](Ptr<float> x) {
    Tile<int32_t> i = arange(0, 64);
    auto a = gpu::alloc<float>({64});
    gpu::copy(x + i, a);
    auto b = gpu::alloc<float>({64});
    store(gpu::local_ptr(b, {i}), 1.0f);
    store(x + i, load(gpu::local_ptr(b, {63 - i})));
  });
  tracetest::gpu_passes_sm90(*h);
  auto allocs = tracetest::ops_of(*h, ir::OpKind::LocalAlloc);
  REQUIRE(allocs.size() == 2);
  CHECK(allocs[1]->int_attr("offset") == 256);
}

// ============================================================================ PTX

TEST_CASE("ptx: gpu::copy is cp.async with commit and wait groups", "[ptx][struct]") {
  auto k = jit("struct_copy_ptx_pipe", pipe_kernel);
  for (int sm : {90, 80}) {
    const std::string arch = sm == 90 ? "sm_90a" : "sm_80";
    INFO(arch);
    const std::string ptx = k.ptx(sm, 4, fake<float>(), fake<float>(), 0, 64, 8, 3);
    CHECK(ptx.find("cp.async.cg.shared.global") != std::string::npos);  // 16-byte vectors
    CHECK(ptx.find("cp.async.commit_group") != std::string::npos);
    CHECK(ptx.find("cp.async.wait_group 1") != std::string::npos);
    ptxtest::assemble("hand-written cp.async pipeline", ptx, arch);
    // Ragged columns (padded to 32; pad lanes copy nothing): rows of 17 floats, 4-byte copies.
    const std::string rp = k.ptx(sm, 4, fake<float>(), fake<float>(), 0, 17, 4, 2);
    CHECK(rp.find("cp.async.ca.shared.global") != std::string::npos);
    ptxtest::assemble("cp.async pipeline, ragged columns", rp, arch);
  }
  auto g = jit("struct_copy_ptx_gemm", gemm_kernel);
  // (the destination pointers are converted to the source's layout: their facts are kept)
  for (auto [B, BK, S] : {std::tuple{64, 32, 3}, std::tuple{32, 32, 2}, std::tuple{64, 64, 2}}) {
    INFO("gemm tiles " << B << " x " << B << " x " << BK << " stages " << S);
    // (M, N, K multiples of 16, as the launch specializes them: 16-byte rows)
    const std::string gp = g.ptx(90, 4, fake<bf16>(), fake<bf16>(), fake<float>(), 64, 64, 64, B, B, BK, S);
    // 16-byte copies where the operand tiles have their own shape; 8 where they share the f32
    // result's (one layout per shape: 4 elements per thread)
    CHECK(gp.find(B != BK ? "cp.async.cg.shared.global" : "cp.async.ca.shared.global") != std::string::npos);
    ptxtest::assemble("gemm staged by gpu::copy", gp);
  }
  // TMA: cp.async.bulk.tensor completing on the stage's mbarrier, announced by expect_tx; the
  // swizzled bf16 stages too.
  std::vector<float> hf(64 * 128, 0.0f);
  std::vector<bf16> hb(64 * 64);
  TensorDescriptor<float, 2> fd(hf.data(), {64, 128}, {128, 1}, {8, 128});
  TensorDescriptor<bf16, 2> bd(hb.data(), {64, 64}, {64, 1}, {8, 64});
  auto tf = jit("struct_tma_ptx_f32", tma_pipe_kernel<float>());
  auto tb = jit("struct_tma_ptx_bf16", tma_pipe_kernel<bf16>());
  for (const std::string& tp : {tf.ptx(90, 4, fd, fake<float>(), 64, 128, 8, 128, 3, 0),
                                tb.ptx(90, 4, bd, fake<float>(), 64, 64, 8, 64, 3, 1)}) {
    CHECK(tp.find("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes") != std::string::npos);
    CHECK(tp.find("mbarrier.arrive.expect_tx") != std::string::npos);
    CHECK(tp.find("mbarrier.try_wait.parity") != std::string::npos);
    CHECK(tp.find("mbarrier.init") != std::string::npos);
    CHECK(tp.find("fence.proxy.async") != std::string::npos);
    ptxtest::assemble("TMA pipeline", tp);
  }
  // mbarriers without transaction counts also compile for sm_80 (test_wait).
  auto mb = jit("struct_mbar_ptx_sm80", [](Ptr<float> x) {
    auto b = gpu::alloc_mbarriers(1);
    Tile<int32_t> i = arange(0, 128);
    store(x + i, load(x + i) + 1.0f);
    gpu::arrive(b[0]);
    gpu::wait(b[0], 0);
    store(x + i, load(x + i) * 2.0f);
  });
  for (int sm : {80, 90}) {
    const std::string mp = mb.ptx(sm, 4, fake<float>());
    CHECK(mp.find(sm == 80 ? "mbarrier.test_wait.parity" : "mbarrier.try_wait.parity") != std::string::npos);
    ptxtest::assemble("mbarrier arrive and wait", mp, sm == 80 ? "sm_80" : "sm_90a");
  }
  auto i8 = jit("struct_copy_ptx_i8", roundtrip_kernel<int8_t>());
  ptxtest::assemble("1-byte copy", i8.ptx(90, 4, fake<int8_t>(), fake<int8_t>(), 0, 1001));
}

// ============================================================================ GPU

TEST_CASE("gpu: gpu::copy kernels (cp.async and TMA) at 1, 4 and 8 warps", "[.gpu][struct]") {
  if (!gpu_info()) {
    WARN("no usable GPU: [.gpu] case skipped");
    return;
  }
  auto k = jit("struct_copy_gpu_pipe", pipe_kernel);
  auto g = jit("struct_copy_gpu_gemm", gemm_kernel);
  auto tf = jit("struct_tma_gpu_f32", tma_pipe_kernel<float>());
  auto tb = jit("struct_tma_gpu_bf16", tma_pipe_kernel<bf16>());
  for (int w : {1, 4, 8}) {
    for (auto [R, N, BR, S] : {std::tuple{37, 17, 4, 3}, std::tuple{1000, 128, 16, 4}, std::tuple{9, 1001, 2, 2}}) {
      INFO("warps " << w << " R " << R << " N " << N << " BR " << BR << " stages " << S);
      ManagedBuffer<float> x(size_t(R) * N), out(static_cast<size_t>(N));
      Buf<float> hx(x.size());
      for (size_t i = 0; i < x.size(); ++i) x.data()[i] = hx[i] = float(int(i % 13) - 6);
      k(Grid(1).with_warps(w).backend(Backend::GPU), x.data(), out.data(), R, N, BR, S);
      synchronize();
      CHECK(diffs(std::vector<float>(out.data(), out.data() + N), column_sums_of(hx, R, N)) == "");
    }
    for (auto [R, N, S, SWZ] : {std::tuple{1000, 100, 3, 0}, std::tuple{4100, 40, 4, 64}, std::tuple{7, 64, 2, 64},
                                std::tuple{1000, 24, 3, 32}, std::tuple{129, 16, 2, 16}}) {
      INFO("warps " << w << " TMA R " << R << " N " << N << " stages " << S << " swizzled rows of " << SWZ);
      // SWZ: bf16 rows of SWZ elements, swizzled; else f32 rows of 128, row-major
      auto run = [&]<class T>(auto& kernel, int BN) {
        ManagedBuffer<T> x(size_t(R) * N);
        ManagedBuffer<float> out(static_cast<size_t>(128));
        Buf<T> hx(x.size());
        for (size_t i = 0; i < x.size(); ++i) x.data()[i] = hx[i] = T(hashed(i));
        TensorDescriptor<T, 2> xd(x.data(), {R, N}, {N, 1}, {8, BN});
        kernel(Grid(1).with_warps(w).backend(Backend::GPU), xd, out.data(), R, N, 8, BN, S, SWZ ? 1 : 0);
        synchronize();
        CHECK(diffs(std::vector<float>(out.data(), out.data() + N), column_sums_of(hx, R, N)) == "");
      };
      if (SWZ) run.template operator()<bf16>(tb, SWZ);
      else run.template operator()<float>(tf, 128);
    }
    for (auto [M, N, K, S] : {std::tuple{100, 70, 129, 3}, std::tuple{256, 256, 512, 4}}) {
      INFO("warps " << w << " gemm " << M << "x" << N << "x" << K << " stages " << S);
      const int BM = 64, BN = 64, BK = 32;
      structtest::ManagedGemm d(M, N, K);
      g(Grid((M + BM - 1) / BM, (N + BN - 1) / BN).with_warps(w).backend(Backend::GPU), d.a.data(), d.b.data(),
        d.c.data(), M, N, K, BM, BN, BK, S);
      synchronize();
      CHECK(diffs(d.result(), d.want) == "");
    }
  }
}
