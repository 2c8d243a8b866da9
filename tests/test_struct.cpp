// tests/test_struct.cpp - TLE-Struct shared buffers (issue #13 items 1 and 3: gpu::alloc,
// Buffer views, gpu::local_ptr, gpu::sync; docs/struct.md): numerical tests against plain C++
// references on ragged shapes ([ops][struct]: the CPU backend in CI, mirrored on the interpreter
// and, by scripts/device-run.sh, on the GPU), user errors at the call's line ([errors]), the GPU
// passes that place the buffers and order their accesses ([struct-pass]), PTX assembled by ptxas
// ([ptx]) and the kernels at 1, 4 and 8 warps on the GPU ([.gpu]).
#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "error_util.hpp"
#include "frontend/trace.hpp"
#include "ir/printer.hpp"
#include "ops_util.hpp"
#include "layout/ir_layout.hpp"
#include "layout/named_layouts.hpp"
#include "passes/gpu/gpu_passes.hpp"
#include "passes/pass.hpp"
#include "ptxas_util.hpp"
#include "trace_util.hpp"

using namespace tle;
using namespace opstest;

namespace {

template <class T> T* fake(uintptr_t a = 0x10000) { return reinterpret_cast<T*>(a); }
template <class T> std::vector<T> all(const Buf<T>& b) { return std::vector<T>(b.begin(), b.end()); }

/// x [M, N] row-major through a shared buffer: stored whole, read back transposed (out [N, M]).
/// LAYOUT 0: row-major, 1: padded by 1, 2: swizzled (vec 4, per_phase 1, max_phase 8).
auto transpose_kernel = [](Ptr<float> x, Ptr<float> out, Constexpr<int> M, Constexpr<int> N, Constexpr<int> LAYOUT) {
  gpu::SharedLayout lay = LAYOUT == 1   ? gpu::SharedLayout::padded(1)
                          : LAYOUT == 2 ? gpu::SharedLayout::swizzled(4, 1, 8)
                                        : gpu::SharedLayout::row_major();
  auto buf = gpu::alloc<float>({M, N}, gpu::scope::shared, lay);
  Tile<int32_t> r = expand_dims(arange(0, M), 1), c = expand_dims(arange(0, N), 0);
  buf.store(load(x + r * N + c));
  Tile<int32_t> i = expand_dims(arange(0, N), 1), j = expand_dims(arange(0, M), 0);  // out [N, M]
  store(out + i * M + j, load(gpu::local_ptr(buf, {j, i})));
};

/// c^T = (a [M, K] @ b [K, N])^T, one program: a bf16 K loop (on sm_90a a wgmma loop the compiler
/// warp-specializes) whose f32 result goes through a padded shared buffer allocated before the
/// loop and is read back transposed (out [N, M]).
auto ws_kernel = [](Ptr<bf16> a, Ptr<bf16> b, Ptr<float> out, Constexpr<int> M, Constexpr<int> N, Constexpr<int> K) {
  auto t = gpu::alloc<float>({M, N}, gpu::scope::shared, gpu::SharedLayout::padded(1));
  Tile<int32_t> rm = arange(0, M), rn = arange(0, N);
  Tile<float> acc = zeros<float>({M, N});
  for (auto k0 : range(0, K, 64)) {
    Tile<int32_t> rk = k0 + arange(0, 64);
    acc = dot(load(a + expand_dims(rm, 1) * K + expand_dims(rk, 0)), load(b + expand_dims(rk, 1) * N + expand_dims(rn, 0)),
              acc);
  }
  t.store(acc);
  store(out + expand_dims(rn, 1) * M + expand_dims(rm, 0), load(gpu::local_ptr(t, {expand_dims(rm, 0), expand_dims(rn, 1)})));
};

/// Small integers in bf16 (exact products and sums in f32 in any order) and the reference c^T.
void ws_data(int M, int N, int K, Buf<bf16>& a, Buf<bf16>& b, std::vector<float>& want) {
  for (size_t i = 0; i < a.size(); ++i) a[i] = bf16(float(int(i * 7 % 5) - 2));
  for (size_t i = 0; i < b.size(); ++i) b[i] = bf16(float(int(i * 3 % 7) - 3));
  want.assign(size_t(M) * N, 0.0f);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      float s = 0;
      for (int k = 0; k < K; ++k) s += float(a[size_t(m) * K + k]) * float(b[size_t(k) * N + n]);
      want[size_t(n) * M + m] = s;
    }
}

}  // namespace

TEST_CASE("ops: a K loop's result through a shared buffer allocated before the loop", "[ops][struct]") {
  auto k = jit("struct_ws", ws_kernel);
  for (auto [M, N, K] : {std::tuple{64, 64, 256}, std::tuple{64, 128, 64}}) {
    INFO(M << "x" << N << "x" << K);
    Buf<bf16> a(size_t(M) * K), b(size_t(K) * N);
    Buf<float> out(size_t(M) * N);
    std::vector<float> want;
    ws_data(M, N, K, a, b, want);
    k(Grid(1), a.data(), b.data(), out.data(), M, N, K);
    CHECK(diffs(all(out), want) == "");
  }
}

TEST_CASE("ops: a tile through a shared buffer, read back transposed, in each layout", "[ops][struct]") {
  auto k = jit("struct_transpose", transpose_kernel);
  for (auto [M, N] : {std::pair{17, 33}, std::pair{1, 1}, std::pair{32, 64}, std::pair{5, 1001}}) {
    for (int lay : {0, 1, 2}) {
      if (lay == 2 && N % 32 != 0) continue;  // swizzled: the innermost dim a multiple of vec * max_phase
      INFO("[" << M << ", " << N << "] layout " << lay);
      Buf<float> x = random_buf<float>(size_t(M) * N, 7), out(size_t(M) * N);
      k(Grid(1), x.data(), out.data(), M, N, lay);
      std::vector<float> want(size_t(M) * N);
      for (int a = 0; a < M; ++a)
        for (int b = 0; b < N; ++b) want[size_t(b) * M + a] = x[size_t(a) * N + b];
      CHECK(diffs(all(out), want) == "");
    }
  }
}

TEST_CASE("ops: a two-stage buffer indexed by the loop, written and read in different layouts", "[ops][struct]") {
  // Each iteration writes row block r of x into stage r % 2 and reads the stage back reversed
  // along its columns, adding it to the accumulator; the previous stage's read and this write
  // never conflict, but the write and the read of one stage do (and on the GPU the read of
  // iteration r and the write of iteration r + 2, to the same stage).
  auto k = jit("struct_stages", [](Ptr<float> x, Ptr<float> out, Tile<int32_t> rows, Constexpr<int> R,
                                   Constexpr<int> N) {
    auto buf = gpu::alloc<float>({2, R, N});
    Tile<int32_t> r = expand_dims(arange(0, R), 1), c = expand_dims(arange(0, N), 0);
    Tile<float> acc = zeros<float>({R, N});
    for (auto b : range(0, rows)) {
      auto st = buf[b % 2];
      st.store(load(x + (b * R + r) * N + c));
      acc = acc + load(gpu::local_ptr(st, {r, (N - 1) - c}));
    }
    store(out + r * N + c, acc);
  });
  for (auto [B, R, N] : {std::tuple{5, 4, 17}, std::tuple{1, 1, 1}, std::tuple{3, 8, 64}, std::tuple{4, 2, 1001}}) {
    INFO("blocks " << B << " [" << R << ", " << N << "]");
    Buf<float> x = random_buf<float>(size_t(B) * R * N, 11), out(size_t(R) * N);
    k(Grid(1), x.data(), out.data(), B, R, N);
    std::vector<float> want(size_t(R) * N, 0.0f);
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < R; ++i)
        for (int j = 0; j < N; ++j) want[size_t(i) * N + j] += x[(size_t(b) * R + i) * N + (N - 1 - j)];
    CHECK(diffs(all(out), want, 1e-5, 1e-5) == "");
  }
}

TEST_CASE("ops: a histogram in shared memory with atomics, per program", "[ops][struct]") {
  // Each program counts its chunk of x into BINS shared counters (atomic_add through local_ptr),
  // in a loop over blocks of BLOCK, then writes its counts: FlagTree's moe_align pattern.
  auto k = jit("struct_hist", [](Ptr<int32_t> x, Ptr<int32_t> out, Tile<int32_t> n, Tile<int32_t> per_prog,
                                 Constexpr<int> BINS, Constexpr<int> BLOCK) {
    auto counts = gpu::alloc<int32_t>({BINS});
    Tile<int32_t> bins = arange(0, BINS);
    store(gpu::local_ptr(counts, {bins}), 0);
    Tile<int32_t> start = program_id(0) * per_prog;
    for (auto b : range(0, per_prog, BLOCK)) {
      Tile<int32_t> i = start + b + arange(0, BLOCK);
      Tile<bool> m = (i < n) & (i < start + per_prog);
      Tile<int32_t> v = load(x + i, m, 0);
      atomic_add(gpu::local_ptr(counts, {v % BINS}), 1, m);
    }
    store(out + program_id(0) * BINS + bins, counts.load());
  });
  for (auto [N, BINS, BLOCK, P] : {std::tuple{1001, 17, 64, 3}, std::tuple{1, 1, 1, 1}, std::tuple{4100, 128, 256, 4}}) {
    INFO("n " << N << " bins " << BINS << " block " << BLOCK << " programs " << P);
    Buf<int32_t> x = random_buf<int32_t>(size_t(N), 13, 0, 100000), out(size_t(P) * BINS, -1);
    const int per = (N + P - 1) / P;
    k(Grid(P), x.data(), out.data(), N, per, BINS, BLOCK);
    std::vector<int32_t> want(size_t(P) * BINS, 0);
    for (int i = 0; i < N; ++i) ++want[size_t(i / per) * BINS + x[size_t(i)] % BINS];
    CHECK(diffs(all(out), want) == "");
  }
}

TEST_CASE("ops: buffers with disjoint lifetimes, scalar accesses and gpu::sync", "[ops][struct]") {
  // a is used only before b is allocated (the GPU places them on the same bytes); a scalar
  // element is written and read back; sync() is accepted anywhere.
  auto k = jit("struct_reuse", [](Ptr<float> x, Ptr<float> out, Constexpr<int> N) {
    Tile<int32_t> o = arange(0, N);
    auto a = gpu::alloc<float>({N});
    store(gpu::local_ptr(a, {o}), load(x + o) * 2.0f);
    Tile<float> t = load(gpu::local_ptr(a, {(N - 1) - o}));
    gpu::sync();
    auto b = gpu::alloc<float>({1, N});
    b[0].store(t + 1.0f);
    store(gpu::local_ptr(b, {0, N / 2}), -5.0f);
    store(out + o, b[0].load());
    store(out + N, load(gpu::local_ptr(b, {0, N / 2})));
  });
  for (int N : {17, 1, 1001, 64}) {
    INFO("N " << N);
    Buf<float> x = random_buf<float>(size_t(N), 17), out(size_t(N) + 1);
    k(Grid(1), x.data(), out.data(), N);
    std::vector<float> want(size_t(N) + 1);
    for (int i = 0; i < N; ++i) want[size_t(i)] = x[size_t(N - 1 - i)] * 2.0f + 1.0f;
    want[size_t(N / 2)] = -5.0f;
    want[size_t(N)] = -5.0f;
    CHECK(diffs(all(out), want) == "");
  }
}

TEST_CASE("ops: set_layout keeps the values, on ragged tiles, through a reduction and a loop", "[ops][struct]") {
  // x [M, N]: laid out [1, 4] per thread, 4 x 8 threads, 4 warps down the rows (the launch's
  // default 4 warps); its row sums (a reduction in that layout) and a loop-carried copy of it.
  auto k = jit("struct_set_layout", [](Ptr<float> x, Ptr<float> out, Ptr<float> sums, Tile<int32_t> n,
                                       Constexpr<int> M, Constexpr<int> N) {
    Tile<int32_t> r = expand_dims(arange(0, M), 1), c = expand_dims(arange(0, N), 0);
    Tile<float> v = gpu::set_layout(load(x + r * N + c),
                                    {.size_per_thread = {1, 4}, .threads_per_warp = {4, 8}, .warps_per_cta = {4, 1}, .order = {1, 0}});
    Tile<float> acc = zeros<float>({M, N});
    for (auto i : range(0, n)) acc = acc + v;
    store(out + r * N + c, acc);
    store(sums + arange(0, M), sum(v, 1));
  });
  for (auto [M, N] : {std::pair{17, 33}, std::pair{64, 64}, std::pair{1, 1}}) {
    INFO("[" << M << ", " << N << "]");
    Buf<float> x = random_buf<float>(size_t(M) * N, 5), out(size_t(M) * N), sums(static_cast<size_t>(M));
    for (auto& e : x) e = float(int(e * 8));  // small integers: sums exact in any order
    k(Grid(1), x.data(), out.data(), sums.data(), 3, M, N);
    std::vector<float> want(size_t(M) * N), want_s(size_t(M), 0.0f);
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) want[size_t(i) * N + j] = 3 * x[size_t(i) * N + j], want_s[size_t(i)] += x[size_t(i) * N + j];
    CHECK(diffs(all(out), want) == "");
    CHECK(diffs(all(sums), want_s) == "");
  }
}

// ============================================================================ errors

namespace {
int line = 0;
std::vector<float> fbuf(4096, 1.0f);
template <class F> void expect_error(F&& f, const std::vector<std::string>& phrases) {
  errtest::expect_user_error(f, phrases, "test_struct.cpp", line);
}
}  // namespace

TEST_CASE("errors: shared buffers: scope, size, indices, layouts", "[errors][struct]") {
  auto in_loop = jit("struct_err_loop", [](Ptr<float> x) {
    for (auto i : range(0, 4)) {
      line = __LINE__; auto b = gpu::alloc<float>({16});
      store(gpu::local_ptr(b, {i}), 1.0f);
    }
  });
  expect_error([&] { in_loop(Grid(1), fbuf.data()); }, {"gpu::alloc must be called in the kernel's body", "before the loop"});

  auto too_big = jit("struct_err_big", [](Ptr<float> x) {
    auto a = gpu::alloc<float>({128, 256});  // 128 KiB
    line = __LINE__; auto b = gpu::alloc<float>({2, 64, 256});
    store(x, load(gpu::local_ptr(a, {0, 0})) + load(gpu::local_ptr(b, {0, 0, 0})));
  });
  expect_error([&] { too_big(Grid(1), fbuf.data()); },
               {"brings the program's shared buffers to 262144 bytes", "more than the 232448 bytes",
                "test_struct.cpp:", "(131072 bytes)"});

  auto n_idx = jit("struct_err_nidx", [](Ptr<float> x) {
    auto a = gpu::alloc<float>({4, 8});
    line = __LINE__; store(x, load(gpu::local_ptr(a, {1})));
  });
  expect_error([&] { n_idx(Grid(1), fbuf.data()); }, {"1 indices for a view of rank 2", "one index per dim"});

  auto stage = jit("struct_err_stage", [](Ptr<float> x) {
    auto a = gpu::alloc<float>({3, 8});
    line = __LINE__; auto s = a[3];
    store(x, load(gpu::local_ptr(s, {0})));
  });
  expect_error([&] { stage(Grid(1), fbuf.data()); }, {"index 3 is outside the leading dim of size 3"});

  auto rank0 = jit("struct_err_rank0", [](Ptr<float> x) {
    auto a = gpu::alloc<float>({8});
    line = __LINE__; auto s = a[1];
    (void)s;
  });
  expect_error([&] { rank0(Grid(1), fbuf.data()); }, {"no dimension left", "gpu::local_ptr(buf, {i})"});

  auto swz = jit("struct_err_swizzle", [](Ptr<float> x) {
    line = __LINE__; auto a = gpu::alloc<float>({8, 24}, gpu::scope::shared, gpu::SharedLayout::swizzled(4, 1, 8));
    store(x, load(gpu::local_ptr(a, {0, 0})));
  });
  expect_error([&] { swz(Grid(1), fbuf.data()); }, {"innermost dim (24) must be a multiple of vec * max_phase (32)"});

  auto lay_threads = jit("struct_err_threads", [](Ptr<float> x) {
    Tile<float> v = load(x + arange(0, 64));
    line = __LINE__; store(x + arange(0, 64), gpu::set_layout(v, {{1}, {16}, {4}, {0}}));
  });
  expect_error([&] { lay_threads(Grid(1), fbuf.data()); }, {"threads_per_warp [16] makes 16 threads; a warp has 32"});
  auto lay_rank = jit("struct_err_lrank", [](Ptr<float> x) {
    Tile<float> v = load(x + arange(0, 64));
    line = __LINE__; store(x + arange(0, 64), gpu::set_layout(v, {{1, 1}, {32}, {4}, {0}}));
  });
  expect_error([&] { lay_rank(Grid(1), fbuf.data()); }, {"size_per_thread has 2 entries for a tile of rank 1"});
  auto lay_order = jit("struct_err_order", [](Ptr<float> x) {
    Tile<float> v = load(x + expand_dims(arange(0, 8), 1) * 8 + expand_dims(arange(0, 8), 0));
    line = __LINE__; store(x, sum(sum(gpu::set_layout(v, {{1, 1}, {4, 8}, {1, 4}, {1, 1}}), 1), 0));
  });
  expect_error([&] { lay_order(Grid(1), fbuf.data()); }, {"order [1, 1] is not a permutation of the dims 0..1"});
  auto lay_pow2 = jit("struct_err_pow2", [](Ptr<float> x) {
    Tile<float> v = load(x + arange(0, 64));
    line = __LINE__; store(x + arange(0, 64), gpu::set_layout(v, {{3}, {32}, {4}, {0}}));
  });
  expect_error([&] { lay_pow2(Grid(1), fbuf.data()); }, {"size_per_thread [3] has an entry that is not a power of two"});
  // the warps are checked when compiled for the GPU (the launch's num_warps)
  auto lay_warps = jit("struct_err_warps", [](Ptr<float> x) {
    Tile<float> v = load(x + arange(0, 64));
    line = __LINE__; store(x + arange(0, 64), gpu::set_layout(v, {{1}, {32}, {2}, {0}}));
  });
  expect_error([&] { (void)lay_warps.ptx(90, 4, fake<float>()); },
               {"warps_per_cta [2] spreads the tile over 2 warps, but the kernel is compiled for 4"});

  auto combine_load = jit("struct_err_combine", [](Ptr<float> x) {
    auto a = gpu::alloc<float>({8});
    store(gpu::local_ptr(a, {arange(0, 8)}), 1.0f);
    Tile<float> v = load(x + arange(0, 8));
    store(x, reduce(v, 0, [&](Tile<float> p, Tile<float> q) {
      line = __LINE__; return p + q * load(gpu::local_ptr(a, {0}));
    }));
  });
  expect_error([&] { combine_load(Grid(1), fbuf.data()); }, {"an access to a gpu::alloc buffer inside a combine function"});
  auto combine_sync = jit("struct_err_combine_sync", [](Ptr<float> x) {
    Tile<float> v = load(x + arange(0, 8));
    store(x, reduce(v, 0, [&](Tile<float> p, Tile<float> q) {
      line = __LINE__; gpu::sync();
      return p + q;
    }));
  });
  expect_error([&] { combine_sync(Grid(1), fbuf.data()); }, {"gpu::sync() inside a combine function"});
  auto huge = jit("struct_err_huge", [](Ptr<float> x) {
    line = __LINE__; auto a = gpu::alloc<float>({int64_t(1) << 40, 4});
    store(x, load(gpu::local_ptr(a, {0, 0})));
  });
  expect_error([&] { huge(Grid(1), fbuf.data()); }, {"every dim of a buffer must be from 1 to 2^31 - 1"});
  auto overflow = jit("struct_err_overflow", [](Ptr<float> x) {
    line = __LINE__; auto a = gpu::alloc<float>({int64_t(1) << 30, int64_t(1) << 30});
    store(x, load(gpu::local_ptr(a, {0, 0})));
  });
  expect_error([&] { overflow(Grid(1), fbuf.data()); }, {"far larger than any GPU's shared memory"});
  auto swz_big = jit("struct_err_swizzle_big", [](Ptr<float> x) {
    line = __LINE__; auto a = gpu::alloc<float>({8, 64}, gpu::scope::shared, gpu::SharedLayout::swizzled(int64_t(1) << 32, 1, int64_t(1) << 32));
    store(x, load(gpu::local_ptr(a, {0, 0})));
  });
  expect_error([&] { swz_big(Grid(1), fbuf.data()); }, {"powers of two below 65536"});
  auto ustage = jit("struct_err_ustage", [](Ptr<float> x) {
    auto a = gpu::alloc<float>({3, 8});
    line = __LINE__; auto s = a[size_t(-1)];
    store(x, load(gpu::local_ptr(s, {0})));
  });
  expect_error([&] { ustage(Grid(1), fbuf.data()); }, {"index out of range is outside the leading dim of size 3"});
  // 160 KiB of buffers: allowed on every backend (<= 227 KB), too much for an sm_86 block (99 KB)
  auto sm86 = jit("struct_err_sm86", [](Ptr<float> x) {
    auto a = gpu::alloc<float>({64, 256});
    line = __LINE__; auto b = gpu::alloc<float>({96, 256});
    store(x, load(gpu::local_ptr(a, {0, 0})) + load(gpu::local_ptr(b, {0, 0})));
  });
  expect_error([&] { (void)sm86.ptx(86, 4, fake<float>()); },
               {"gpu::alloc buffers take 163840 bytes", "more than the 101376 bytes an sm_86 block", "(98304 bytes)"});

  auto bcast = jit("struct_err_bcast", [](Ptr<float> x) {
    auto a = gpu::alloc<float>({8, 8});
    line = __LINE__; store(x + arange(0, 3), load(gpu::local_ptr(a, {arange(0, 3), arange(0, 4)})));
  });
  expect_error([&] { bcast(Grid(1), fbuf.data()); }, {"broadcast"});
}

TEST_CASE("errors: the tracer's warning for a shared buffer read before anything writes it", "[errors][struct]") {
  using tracetest::trace_div16;
  auto warnings = [](const ir::Function& f) { return frontend::unwritten_buffer_reads(f); };
  // Never written.
  auto never = trace_div16("struct_warn_never", [](Ptr<float> x) {
    auto b = gpu::alloc<float>({32});
    line = __LINE__; store(x + arange(0, 32), b.load());
  });
  auto w = warnings(*never);
  REQUIRE(w.size() == 1);
  CHECK(int(w[0].loc.line) == line);
  CHECK(w[0].message.find("which no statement of the kernel writes") != std::string::npos);
  CHECK(w[0].message.find("test_struct.cpp:") != std::string::npos);  // the allocation's line
  // Read, then written (in program order), once per buffer however many reads.
  auto early = trace_div16("struct_warn_early", [](Ptr<float> x) {
    auto b = gpu::alloc<float>({32});
    line = __LINE__; Tile<float> t = b.load();
    Tile<float> u = b.load();
    b.store(t + u);
    store(x + arange(0, 32), b.load());
  });
  w = warnings(*early);
  REQUIRE(w.size() == 1);
  CHECK(int(w[0].loc.line) == line);
  CHECK(w[0].message.find("before any copy or store into it") != std::string::npos);
  // The first iteration of a loop reads what the loop writes later, nothing before it.
  auto loop = trace_div16("struct_warn_loop", [](Ptr<float> x, Tile<int32_t> n) {
    auto b = gpu::alloc<float>({32});
    Tile<float> acc = zeros<float>({32});
    for (auto i : range(0, n)) {
      line = __LINE__; acc = acc + b.load();
      b.store(load(x + i * 32 + arange(0, 32)));
    }
    store(x + arange(0, 32), acc);
  });
  w = warnings(*loop);
  REQUIRE(w.size() == 1);
  CHECK(int(w[0].loc.line) == line);
  // Not reported: written first (before the loop, or by a copy); read under an if_; read in a
  // role while another role writes it (ordered by mbarriers).
  auto fine = trace_div16("struct_warn_fine", [](Ptr<float> x, Tile<int32_t> n) {
    auto a = gpu::alloc<float>({32}), b = gpu::alloc<float>({32}), c = gpu::alloc<float>({32});
    auto d = gpu::alloc<float>({32}), e = gpu::alloc<float>({32});
    d.store(zeros<float>({32}));
    Ptr<float> cur = d.data(), next = e.data();  // double buffering: reads d first, writes e
    for (auto i : range(0, n)) {
      Tile<float> t = load(cur + arange(0, 32));
      store(next + arange(0, 32), t + 1.0f);
      std::swap(cur, next);
    }
    a.store(zeros<float>({32}));
    gpu::copy(x + arange(0, 32), b);
    gpu::commit_group();
    gpu::wait_group(0);
    Tile<float> acc = zeros<float>({32});
    for (auto i : range(0, n)) {
      acc = acc + a.load() + b.load();
      if_(i > 0, [&] { acc = acc + c.load(); });
      a.store(acc);
      c.store(acc);
    }
    store(x + arange(0, 32), acc);
  });
  CHECK(warnings(*fine).empty());
  auto roles = trace_div16("struct_warn_roles", [](Ptr<float> x) {
    auto b = gpu::alloc<float>({32}), own = gpu::alloc<float>({32});
    auto full = gpu::alloc_mbarriers(1);
    gpu::warp_specialize({
        gpu::Role(1, [&] {  // consumer first: the producer's store still comes first (its arrive)
          gpu::wait(full[0], 0);
          line = __LINE__; store(x + arange(0, 32), b.load() + own.load());
          own.store(zeros<float>({32}));
        }),
        gpu::Role(1, [&] {
          b.store(load(x + arange(0, 32)));
          gpu::arrive(full[0]);
        }),
    });
  });
  w = warnings(*roles);
  REQUIRE(w.size() == 1);  // `own`: written by its role only, after the read
  CHECK(int(w[0].loc.line) == line);
  CHECK(w[0].message.find("before any copy or store") != std::string::npos);
}

// ============================================================================ GPU passes

TEST_CASE("struct passes: buffers placed with reuse, barriers where accesses conflict", "[struct-pass]") {
  // store a; load a (barrier 1); b allocated after a's last use takes a's bytes; store b
  // (barrier 2: a's reads of those bytes); load b twice (barrier 3 before the first only: reads
  // do not conflict with reads).
  auto f = tracetest::trace_div16("struct_pass_reuse", [](Ptr<float> x) {
    Tile<int32_t> o = arange(0, 64);
    auto a = gpu::alloc<float>({64});
    store(gpu::local_ptr(a, {o}), load(x + o));
    Tile<float> t = load(gpu::local_ptr(a, {63 - o}));
    auto b = gpu::alloc<float>({64});
    store(gpu::local_ptr(b, {o}), t);
    Tile<float> u = load(gpu::local_ptr(b, {63 - o})) + load(gpu::local_ptr(b, {o}));
    store(x + o, u);
  });
  tracetest::gpu_passes_sm90(*f);
  auto allocs = tracetest::ops_of(*f, ir::OpKind::LocalAlloc);
  REQUIRE(allocs.size() == 2);
  CHECK(allocs[0]->int_attr("offset") == 0);
  CHECK(allocs[1]->int_attr("offset") == 0);  // a is dead when b is allocated
  CHECK(tracetest::count_ops(*f, ir::OpKind::Barrier) == 3);

  // Both live at once: disjoint bytes, 128-byte aligned; two atomics in a row whose old values are
  // not used need no barrier.
  auto g = tracetest::trace_div16("struct_pass_live", [](Ptr<int32_t> x) {
    Tile<int32_t> o = arange(0, 16);
    auto a = gpu::alloc<int32_t>({10});
    auto b = gpu::alloc<int32_t>({16});
    atomic_add(gpu::local_ptr(a, {o % 10}), 1);
    atomic_add(gpu::local_ptr(a, {o % 3}), 1);
    store(gpu::local_ptr(b, {o}), o);
    store(x + o, load(gpu::local_ptr(b, {o})) + load(gpu::local_ptr(a, {o % 10})));
  });
  tracetest::gpu_passes_sm90(*g);
  auto ga = tracetest::ops_of(*g, ir::OpKind::LocalAlloc);
  REQUIRE(ga.size() == 2);
  CHECK(ga[0]->int_attr("offset") == 0);
  CHECK(ga[1]->int_attr("offset") == 128);
  // one barrier: before the loads (b's store, a's atomics); the store to b does not conflict with a
  CHECK(tracetest::count_ops(*g, ir::OpKind::Barrier) == 1);
  // An atomic whose old values are stored must see the earlier atomic's updates: a barrier.
  auto g2 = tracetest::trace_div16("struct_pass_atomic_old", [](Ptr<int32_t> x) {
    Tile<int32_t> o = arange(0, 16);
    auto a = gpu::alloc<int32_t>({16});
    atomic_add(gpu::local_ptr(a, {o}), 1);
    store(x + o, atomic_add(gpu::local_ptr(a, {15 - o}), 1));
  });
  tracetest::gpu_passes_sm90(*g2);
  CHECK(tracetest::count_ops(*g2, ir::OpKind::Barrier) == 1);
  // Updates of different kinds, exchanges and float adds depend on their order: a barrier each;
  // integer adds (and float max) commute exactly: none.
  auto mixed = [](int kind) {
    return tracetest::trace_div16("struct_pass_atomic_kinds", [kind](Ptr<float> x, Ptr<int32_t> y) {
      Tile<int32_t> o = arange(0, 16);
      auto a = gpu::alloc<int32_t>({16});
      auto f = gpu::alloc<float>({16});
      if (kind == 0) atomic_xchg(gpu::local_ptr(a, {o}), 5), atomic_add(gpu::local_ptr(a, {15 - o}), 1);
      if (kind == 1) atomic_add(gpu::local_ptr(a, {o}), 2), atomic_add(gpu::local_ptr(a, {15 - o}), 1);
      if (kind == 2) atomic_add(gpu::local_ptr(f, {o}), 0.5f), atomic_add(gpu::local_ptr(f, {15 - o}), 0.25f);
      if (kind == 3) atomic_max(gpu::local_ptr(f, {o}), 0.5f), atomic_max(gpu::local_ptr(f, {15 - o}), 0.25f);
      if (kind == 4) atomic_add(gpu::local_ptr(a, {o}), 2), atomic_max(gpu::local_ptr(a, {15 - o}), 1);
      store(y + o, load(gpu::local_ptr(a, {o})));
      store(x + o, load(gpu::local_ptr(f, {o})));
    });
  };
  for (auto [kind, between] : {std::pair{0, 1}, std::pair{1, 0}, std::pair{2, 1}, std::pair{3, 0}, std::pair{4, 1}}) {
    INFO("atomic pair " << kind);
    auto m = mixed(kind);
    tracetest::gpu_passes_sm90(*m);
    CHECK(tracetest::count_ops(*m, ir::OpKind::Barrier) == between + 1);  // + 1: before the loads
  }
  // Inline asm without pointer operands names no buffer: no barrier around it (one before the load).
  auto asm_k = tracetest::trace_div16("struct_pass_asm", [](Ptr<int32_t> x) {
    Tile<int32_t> o = arange(0, 32);
    auto a = gpu::alloc<int32_t>({32});
    store(gpu::local_ptr(a, {o}), o);
    Tile<int32_t> v = inline_asm<int32_t>("add.s32 $0, $1, 1;", "=r,r", {o}, /*pure=*/false);
    store(x + o, load(gpu::local_ptr(a, {31 - o})) + v);
  });
  tracetest::gpu_passes_sm90(*asm_k);
  CHECK(tracetest::count_ops(*asm_k, ir::OpKind::Barrier) == 1);
  // A loop that only reads what was stored before it: one barrier before the loop, none inside.
  auto before = tracetest::trace_div16("struct_pass_before_loop", [](Ptr<float> x, Tile<int32_t> n) {
    Tile<int32_t> o = arange(0, 32);
    auto a = gpu::alloc<float>({32});
    store(gpu::local_ptr(a, {o}), load(x + o));
    Tile<float> acc = zeros<float>({32});
    for (auto i : range(0, n)) acc = acc + load(gpu::local_ptr(a, {(o + i) % 32}));
    store(x + o, acc);
  });
  tracetest::gpu_passes_sm90(*before);
  auto bl = tracetest::ops_of(*before, ir::OpKind::For);
  REQUIRE(bl.size() == 1);
  CHECK(tracetest::count_ops(*before, ir::OpKind::Barrier) == 1);
  int barrier_in_loop = 0;
  for (auto& op : bl[0]->region().body().ops) barrier_in_loop += op->kind == ir::OpKind::Barrier;
  CHECK(barrier_in_loop == 0);

  // A loop: the store of iteration i + 1 conflicts with the load of iteration i (back edge) and
  // the load with the store before it: two barriers in the body. A program's sync() right before
  // the load stands for the second one.
  for (bool sync : {false, true}) {
    INFO("sync " << sync);
    auto h = tracetest::trace_div16("struct_pass_loop", [sync](Ptr<float> x, Tile<int32_t> n) {
      Tile<int32_t> o = arange(0, 32);
      auto a = gpu::alloc<float>({32});
      Tile<float> acc = zeros<float>({32});
      for (auto i : range(0, n)) {
        store(gpu::local_ptr(a, {o}), load(x + i * 32 + o));
        if (sync) gpu::sync();
        acc = acc + load(gpu::local_ptr(a, {31 - o}));
      }
      store(x + o, acc);
    });
    tracetest::gpu_passes_sm90(*h);
    auto loops = tracetest::ops_of(*h, ir::OpKind::For);
    REQUIRE(loops.size() == 1);
    int in_body = 0;
    for (auto& op : loops[0]->region().body().ops) in_body += op->kind == ir::OpKind::Barrier;
    CHECK(in_body == 2);
    CHECK(tracetest::count_ops(*h, ir::OpKind::Barrier) == 2);
  }

  // A kernel without buffers gets no barrier op, and its global loads still pipeline.
  auto p = tracetest::trace_div16("struct_pass_none", [](Ptr<float> x) {
    Tile<int32_t> o = arange(0, 32);
    store(x + o, load(x + o) + 1.0f);
  });
  tracetest::gpu_passes_sm90(*p);
  CHECK(tracetest::count_ops(*p, ir::OpKind::Barrier) == 0);
}

TEST_CASE("struct passes: shared-buffer accesses take their neighbours' layouts (a transpose converts nothing)",
          "[struct-pass]") {
  // The tile is stored into the buffer in the layout its global load has, and read back
  // transposed in the layout its global store wants: no convert_layout anywhere.
  for (int lay : {0, 1, 2}) {
    INFO("layout " << lay);
    auto f = tracetest::trace("struct_pass_transpose", transpose_kernel, {32, 64, lay}, true, true);
    tracetest::gpu_passes_sm90(*f);
    CHECK(tracetest::count_ops(*f, ir::OpKind::ConvertLayout) == 0);
    CHECK(tracetest::count_ops(*f, ir::OpKind::Barrier) == 1);
  }
}

TEST_CASE("struct passes: accesses of swizzled buffers are vectorized over a swizzle group", "[struct-pass]") {
  // The swizzled offset ((c >> 3) ^ phase) << 3 | (c & 7) keeps runs of 8 consecutive columns
  // (axis_info: and with a low mask, or of disjoint bits, xor): 16-byte bf16 accesses, on the
  // store into the buffer and on the read back.
  auto f = tracetest::trace_div16("struct_pass_swizzle_vec", [](Ptr<bf16> x) {
    auto buf = gpu::alloc<bf16>({2, 16, 64}, gpu::scope::shared, gpu::SharedLayout::swizzled(8, 1, 8));
    Tile<int32_t> r = expand_dims(arange(0, 16), 1), c = expand_dims(arange(0, 64), 0);
    buf[1].store(load(x + r * 64 + c));
    store(x + r * 64 + c, buf[1].load() * 2.0f);
  });
  tracetest::gpu_passes_sm90(*f);
  int shared_vec8 = 0;
  ir::walk(f->entry(), [&](const ir::Op& op) {
    if ((op.kind == ir::OpKind::Load || op.kind == ir::OpKind::Store) && op.has_attr("vec"))
      shared_vec8 += op.int_attr("vec") == 8;
  });
  CHECK(shared_vec8 == 4);  // the global load and store, and both buffer accesses
}

TEST_CASE("struct passes: set_layout pins its value's layout and the access of a load it wraps", "[struct-pass]") {
  // A [64, 64] f32 tile would be loaded 4-wide along the rows; the program asks for a column-major
  // blocked layout (4 rows per thread, lanes down the columns): the load takes it (no conversion
  // after it), the elementwise op keeps it, the store converts back to its own coalesced layout.
  auto f = tracetest::trace_div16("struct_pass_setl", [](Ptr<float> x) {
    Tile<int32_t> o = expand_dims(arange(0, 64), 1) * 64 + expand_dims(arange(0, 64), 0);
    Tile<float> v = gpu::set_layout(load(x + o),
                                    {.size_per_thread = {4, 1}, .threads_per_warp = {8, 4}, .warps_per_cta = {1, 4}, .order = {0, 1}});
    store(x + o, v * 2.0f);
  });
  tracetest::gpu_passes_sm90(*f);
  const layout::LinearLayout want = layout::blocked({64, 64}, {4, 1}, {8, 4}, {1, 4}, {0, 1});
  auto sets = tracetest::ops_of(*f, ir::OpKind::SetLayout);
  REQUIRE(sets.size() == 1);
  REQUIRE(sets[0]->result()->type.layout);
  CHECK(sets[0]->result()->type.layout->ll == want);
  const ir::Value* loaded = sets[0]->operands[0];
  REQUIRE(loaded->def);
  CHECK(loaded->def->kind == ir::OpKind::Load);  // no convert_layout between the load and the anchor
  CHECK(loaded->type.layout->ll == want);
  CHECK(loaded->def->int_attr("vec") == 1);  // 4 rows per thread: no vector along a row
  CHECK(tracetest::count_ops(*f, ir::OpKind::ConvertLayout) == 1);  // before the store (coalesced along rows)

  // Used as a dot's accumulator, a set_layout keeps its layout (the dot's operand is converted).
  auto d = tracetest::trace_div16("struct_pass_setl_acc", [](Ptr<bf16> a, Ptr<float> c) {
    Tile<int32_t> r = expand_dims(arange(0, 64), 1), k = expand_dims(arange(0, 64), 0);
    Tile<bf16> t = load(a + r * 64 + k);
    Tile<float> acc = gpu::set_layout(zeros<float>({64, 64}), {{1, 4}, {4, 8}, {4, 1}, {1, 0}});
    store(c + r * 64 + k, dot(t, t, acc));
  });
  tracetest::gpu_passes_sm90(*d);
  auto ds = tracetest::ops_of(*d, ir::OpKind::SetLayout);
  REQUIRE(ds.size() == 1);
  CHECK(ds[0]->result()->type.layout->ll == layout::blocked({64, 64}, {1, 4}, {4, 8}, {4, 1}, {1, 0}));
  auto dots = tracetest::ops_of(*d, ir::OpKind::Dot);
  REQUIRE(dots.size() == 1);
  CHECK(dots[0]->operands[2]->def->kind == ir::OpKind::ConvertLayout);

  // A global pointer through set_layout stays global: no barrier around its load beside a buffer.
  auto g = tracetest::trace_div16("struct_pass_setl_ptr", [](Ptr<float> x) {
    Tile<int32_t> o = arange(0, 128);
    auto b = gpu::alloc<float>({128});
    store(gpu::local_ptr(b, {o}), 1.0f);
    Tile<float> v = load(gpu::set_layout(x + o, {{1}, {32}, {4}, {0}}));
    store(x + o, v);
  });
  tracetest::gpu_passes_sm90(*g);
  CHECK(tracetest::count_ops(*g, ir::OpKind::Barrier) == 0);
}

TEST_CASE("struct passes: a load from a shared buffer is never a cp.async copy, stores into one do not stop "
          "global loads from pipelining",
          "[struct-pass]") {
  auto f = tracetest::trace_div16("struct_pass_pipe", [](Ptr<float> x, Tile<int32_t> n) {
    Tile<int32_t> o = arange(0, 128);
    auto a = gpu::alloc<float>({128});
    Tile<float> acc = zeros<float>({128});
    for (auto i : range(0, n, 1, {.num_stages = 3})) {
      Tile<float> v = load(x + i * 128 + o, MemHints{.is_async = true});
      store(gpu::local_ptr(a, {o}), v);
      acc = acc + load(gpu::local_ptr(a, {127 - o}), MemHints{.is_async = true});
    }
    store(x + o, acc);
  });
  tracetest::gpu_passes_sm90(*f);
  auto loads = tracetest::ops_of(*f, ir::OpKind::Load);
  int global_pipelined = 0, shared_pipelined = 0;
  for (const ir::Op* ld : loads) {
    const bool p = ld->has_attr("pipelined");
    if (ld->operands[0]->def && ld->operands[0]->def->kind == ir::OpKind::AddPtr &&
        ld->operands[0]->def->operands[0]->def && ld->operands[0]->def->operands[0]->def->kind == ir::OpKind::LocalAlloc)
      shared_pipelined += p;
    else
      global_pipelined += p;
  }
  CHECK(shared_pipelined == 0);
  CHECK(global_pipelined == 1);
}

// ============================================================================ PTX

TEST_CASE("ptx: shared buffers are shared-memory accesses with bar.sync between conflicting ones", "[ptx][struct]") {
  auto k = jit("struct_ptx_transpose", transpose_kernel);
  for (int lay : {0, 1, 2})
    for (int sm : {90, 80}) {
      const std::string arch = sm == 90 ? "sm_90a" : "sm_80";
      INFO(arch << " layout " << lay);
      const std::string ptx = k.ptx(sm, 4, fake<float>(), fake<float>(), 32, 64, lay);
      CHECK(ptx.find("st.shared") != std::string::npos);
      CHECK(ptx.find("ld.shared") != std::string::npos);
      CHECK(ptx.find("bar.sync") != std::string::npos);
      ptxtest::assemble("transpose through a shared buffer", ptx, arch);
    }
  // The histogram: shared atomics (atom.shared / red.shared), ragged shapes padded.
  auto h = jit("struct_ptx_hist", [](Ptr<int32_t> x, Ptr<int32_t> out, Tile<int32_t> n) {
    auto counts = gpu::alloc<int32_t>({17});
    Tile<int32_t> bins = arange(0, 17);
    store(gpu::local_ptr(counts, {bins}), 0);
    for (auto b : range(0, n, 1001)) {
      Tile<int32_t> i = b + arange(0, 1001);
      Tile<int32_t> v = load(x + i, i < n, 0);
      atomic_add(gpu::local_ptr(counts, {v % 17}), 1, i < n);
    }
    store(out + bins, counts.load());
  });
  const std::string hp = h.ptx(90, 4, fake<int32_t>(), fake<int32_t>(), 0);
  CHECK((hp.find("atom.shared") != std::string::npos || hp.find("red.shared") != std::string::npos));
  ptxtest::assemble("shared histogram", hp);
}

TEST_CASE("ptx: a shared buffer beside a warp-specialized wgmma loop", "[ptx][struct]") {
  // The buffer allocated before the loop does not stop warp specialization (4 compute warps + a
  // producer warpgroup); after the loop the barrier between the buffer's store and load is the
  // compute warps' named barrier (the producers have exited).
  auto k = jit("struct_ptx_ws", ws_kernel);
  Grid g(1);
  g.with_warps(4).with_stages(3);
  const std::string ptx = k.ptx(90, g, fake<bf16>(), fake<bf16>(), fake<float>(), 64, 64, 256);
  CHECK(ptx.find(".reqntid 256, 1, 1") != std::string::npos);
  CHECK(ptx.find("mbarrier.try_wait.parity") != std::string::npos);
  CHECK(ptx.find("wgmma.mma_async") != std::string::npos);
  CHECK(ptx.find("barrier.sync \t1, 128;") != std::string::npos);
  CHECK(ptx.find("st.shared.f32") != std::string::npos);
  ptxtest::assemble("shared buffer beside a warp-specialized loop", ptx);
}

// ============================================================================ GPU

TEST_CASE("gpu: shared-buffer kernels at 1, 4 and 8 warps", "[.gpu][struct]") {
  if (!gpu_info()) {
    WARN("no usable GPU: [.gpu] case skipped");
    return;
  }
  auto k = jit("struct_gpu_transpose", transpose_kernel);
  for (int w : {1, 4, 8})
    for (auto [M, N] : {std::pair{17, 33}, std::pair{64, 128}, std::pair{3, 1001}})
      for (int lay : {0, 1, 2}) {
        if (lay == 2 && N % 32 != 0) continue;
        INFO("warps " << w << " [" << M << ", " << N << "] layout " << lay);
        ManagedBuffer<float> x(size_t(M) * N), out(size_t(M) * N);
        for (size_t i = 0; i < x.size(); ++i) x.data()[i] = float(i % 1013) - 500.0f;
        k(Grid(1).with_warps(w).backend(Backend::GPU), x.data(), out.data(), M, N, lay);
        synchronize();
        int bad = 0;
        for (int a = 0; a < M; ++a)
          for (int b = 0; b < N; ++b) bad += out.data()[size_t(b) * M + a] != x.data()[size_t(a) * N + b];
        CHECK(bad == 0);
      }
  // The K loop (warp-specialized on sm_90a) with a buffer, at 4 and 8 compute warps.
  auto w = jit("struct_gpu_ws", ws_kernel);
  for (int warps : {4, 8}) {
    const int M = 64, N = 128, K = 320;
    INFO("warps " << warps);
    ManagedBuffer<bf16> a(size_t(M) * K), b(size_t(K) * N);
    ManagedBuffer<float> out(size_t(M) * N);
    Buf<bf16> ha(a.size()), hb(b.size());
    std::vector<float> want;
    ws_data(M, N, K, ha, hb, want);
    std::copy(ha.begin(), ha.end(), a.data());
    std::copy(hb.begin(), hb.end(), b.data());
    w(Grid(1).with_warps(warps).backend(Backend::GPU), a.data(), b.data(), out.data(), M, N, K);
    synchronize();
    CHECK(diffs(std::vector<float>(out.data(), out.data() + out.size()), want) == "");
  }
}
