// tests/test_struct_ws.cpp - TLE-Struct warp specialization (issue #13 item 4: gpu::warp_specialize,
// gpu::Role; docs/struct.md, "Warp specialization"): producer / consumer kernels against plain C++
// references on ragged shapes ([ops][struct]: CPU backend in CI, which runs them on the
// interpreter with the roles interleaved; mirrored on the interpreter and the GPU), user errors
// at the user's line and the interpreter's deadlock report ([errors]), what the GPU passes make
// of roles ([struct-pass]), PTX assembled by ptxas ([ptx]) and the kernels on the GPU ([.gpu]),
// setmaxnreg included.
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "../examples/kernels.hpp"
#include "error_util.hpp"
#include "layout/ir_layout.hpp"
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


/// out[N] = column sums of x [R, N]: a producer role of one warp copies blocks of BR rows with
/// gpu::copy (cp.async, rows past R zero-filled) into a ring of S stages; a consumer role of CW
/// warps adds them up. full[s] says stage s holds a block, empty[s] that the consumer is done
/// with it (the producer's first round waits for the parity before phase 0, which passes).
auto ring_kernel = [](Ptr<float> x, Ptr<float> out, Tile<int32_t> R, Constexpr<int> N, Constexpr<int> BR,
                      Constexpr<int> S, Constexpr<int> CW) {
  auto buf = gpu::alloc<float>({S, BR, N});
  auto full = gpu::alloc_mbarriers(S), empty = gpu::alloc_mbarriers(S);
  Tile<int32_t> blocks = (R + BR - 1) / BR;
  gpu::warp_specialize({
      gpu::Role(1, [&] {
        Tile<int32_t> r = expand_dims(arange(0, BR), 1), c = expand_dims(arange(0, N), 0);
        for (auto b : range(0, blocks)) {
          gpu::wait(empty[b % S], b / S + 1);
          Tile<int32_t> row = b * BR + r;
          gpu::copy(x + row * N + c, buf[b % S], row < R);
          gpu::commit_group();
          gpu::wait_group(0);
          gpu::arrive(full[b % S]);
        }
      }),
      gpu::Role(CW, [&] {
        Tile<float> acc = zeros<float>({BR, N});
        for (auto b : range(0, blocks)) {
          gpu::wait(full[b % S], b / S);
          acc = acc + buf[b % S].load();
          gpu::arrive(empty[b % S]);
        }
        store(out + arange(0, N), sum(acc, 0));
      }),
  });
};

/// The same with TMA: the producer announces each block's bytes on full[s] and copies it from a
/// descriptor ([BR, BN] blocks; BN >= N, columns past N arrive as zeros); SWZ: bf16 stages with
/// the swizzle of BN * 2-byte rows.
template <class T> auto tma_ring_kernel() {
  return [](TensorDescriptor<T, 2> xd, Ptr<float> out, Tile<int32_t> R, Constexpr<int> N, Constexpr<int> BR,
            Constexpr<int> BN, Constexpr<int> S, Constexpr<int> SWZ, Constexpr<int> CW) {
    const int64_t row = BN * int64_t(sizeof(T));
    auto lay = SWZ ? gpu::SharedLayout::swizzled(16 / int64_t(sizeof(T)), 128 / row, row / 16) : gpu::SharedLayout::row_major();
    auto buf = gpu::alloc<T>({S, BR, BN}, gpu::scope::shared, lay);
    auto full = gpu::alloc_mbarriers(S), empty = gpu::alloc_mbarriers(S);
    Tile<int32_t> blocks = (R + BR - 1) / BR;
    gpu::warp_specialize({
        gpu::Role(1, [&] {
          for (auto b : range(0, blocks)) {
            gpu::wait(empty[b % S], b / S + 1);
            gpu::arrive_expect_tx(full[b % S], BR * row);
            gpu::copy(xd, {b * BR, 0}, buf[b % S], full[b % S]);
          }
        }),
        gpu::Role(CW, [&] {
          Tile<float> acc = zeros<float>({BR, BN});
          for (auto b : range(0, blocks)) {
            gpu::wait(full[b % S], b / S);
            acc = acc + cast<float>(buf[b % S].load());
            gpu::arrive(empty[b % S]);
          }
          Tile<int32_t> c = arange(0, BN);
          store(out + c, sum(acc, 0), c < N);
        }),
    });
  };
}

/// c [M, N] = a [M, K] @ b [K, N] (bf16, f32 accumulate) warp-specialized: a TMA producer of PW
/// warps (setmaxnreg PR when > 0) fills S stages of [BM, 64] and [64, BN] tiles (128-byte
/// swizzle), a consumer of CW warps (setmaxnreg CR) runs the dots and stores its tile of c, masked.
auto ws_gemm_kernel = [](TensorDescriptor<bf16, 2> ad, TensorDescriptor<bf16, 2> bd, Ptr<float> c, Tile<int32_t> M,
                         Tile<int32_t> N, Tile<int32_t> K, Constexpr<int> BM, Constexpr<int> BN, Constexpr<int> S,
                         Constexpr<int> PW, Constexpr<int> PR, Constexpr<int> CW, Constexpr<int> CR) {
  constexpr int BK = 64;
  auto sw = gpu::SharedLayout::swizzled(8, 1, 8);
  auto as = gpu::alloc<bf16>({S, BM, BK}, gpu::scope::shared, sw);
  auto bs = gpu::alloc<bf16>({S, BK, BN}, gpu::scope::shared, BN == 64 ? sw : gpu::SharedLayout::row_major());
  auto full = gpu::alloc_mbarriers(S), empty = gpu::alloc_mbarriers(S);
  Tile<int32_t> m0 = program_id(0) * BM, n0 = program_id(1) * BN, steps = (K + BK - 1) / BK;
  gpu::warp_specialize({
      gpu::Role(PW, PR, [&] {
        for (auto k : range(0, steps)) {
          gpu::wait(empty[k % S], k / S + 1);
          gpu::arrive_expect_tx(full[k % S], (BM + BN) * BK * 2);
          gpu::copy(ad, {m0, k * BK}, as[k % S], full[k % S]);
          gpu::copy(bd, {k * BK, n0}, bs[k % S], full[k % S]);
        }
      }),
      gpu::Role(CW, CR, [&] {
        Tile<float> acc = zeros<float>({BM, BN});
        for (auto k : range(0, steps)) {
          gpu::wait(full[k % S], k / S);
          acc = dot(as[k % S].load(), bs[k % S].load(), acc);
          gpu::arrive(empty[k % S]);
        }
        Tile<int32_t> r = m0 + expand_dims(arange(0, BM), 1), cc = n0 + expand_dims(arange(0, BN), 0);
        store(c + r * N + cc, acc, (r < M) & (cc < N));
      }),
  });
};

/// Two roles at once, each reducing its own rows of x [R, N] across its warps (the compiler's
/// shared scratch: each role needs its own) into out[R]; role 1 also runs an if_ around a loop.
auto two_reducers_kernel = [](Ptr<float> x, Ptr<float> out, Tile<int32_t> R, Constexpr<int> N, Constexpr<int> BR) {
  gpu::warp_specialize({
      gpu::Role(4, [&] {
        for (auto b : range(0, (R + 2 * BR - 1) / (2 * BR))) {
          Tile<int32_t> r = expand_dims(2 * b * BR + arange(0, BR), 1), c = expand_dims(arange(0, N), 0);
          store(out + reshape(r, {BR}), sum(load(x + r * N + c, (r < R) & (c < N)), 1), reshape(r, {BR}) < R);
        }
      }),
      gpu::Role(8, [&] {
        if_(R > BR, [&] {
          for (auto b : range(0, (R + BR - 1) / (2 * BR))) {
            Tile<int32_t> r = expand_dims((2 * b + 1) * BR + arange(0, BR), 1), c = expand_dims(arange(0, N), 0);
            store(out + reshape(r, {BR}), max(load(x + r * N + c, (r < R) & (c < N), -1e30f), 1), reshape(r, {BR}) < R);
          }
        });
      }),
  });
};

/// c [M, N] = a [M, 64] @ b [64, N] through swizzled buffers the program stores itself: on
/// sm_90a the dot's wgmma reads them in place, after the barrier that orders the stores, which
/// then carries the proxy fence (generic writes read by the async proxy).
/// `overwrite`: a is loaded, then its buffer overwritten before the dot (which must use the
/// loaded values: that read cannot be left to the wgmma).
auto stored_dot_kernel = [](Ptr<bf16> a, Ptr<bf16> b, Ptr<float> c, Constexpr<int> M, Constexpr<int> N,
                            Constexpr<int> overwrite) {
  constexpr int K = 64;
  const auto sw = gpu::SharedLayout::swizzled(8, 1, 8);
  auto as = gpu::alloc<bf16>({M, K}, gpu::scope::shared, sw);
  auto bs = gpu::alloc<bf16>({K, N}, gpu::scope::shared, sw);
  Tile<int32_t> m = expand_dims(arange(0, M), 1), k = expand_dims(arange(0, K), 0);
  Tile<int32_t> kr = expand_dims(arange(0, K), 1), n = expand_dims(arange(0, N), 0);
  as.store(load(a + m * K + k));
  bs.store(load(b + kr * N + n));
  Tile<bf16> ta = as.load();
  if (overwrite) as.store(0.0f);
  store(c + m * N + n, dot(ta, bs.load(), zeros<float>({M, N})));
};

}  // namespace

TEST_CASE("ops: warp_specialize: a cp.async producer role and a consumer role through a ring of stages",
          "[ops][struct]") {
  auto k = jit("struct_ws_ring", ring_kernel);
  for (auto [R, N, BR, S, CW] : {std::tuple{37, 17, 4, 3, 4}, std::tuple{1, 1, 1, 2, 1}, std::tuple{100, 64, 8, 2, 2},
                                 std::tuple{9, 1001, 2, 4, 8}, std::tuple{0, 8, 2, 3, 4}}) {
    INFO("R " << R << " N " << N << " BR " << BR << " stages " << S << " consumer warps " << CW);
    Buf<float> x = random_buf<float>(size_t(std::max(R, 1)) * N, 5), out(static_cast<size_t>(N));
    k(Grid(1), x.data(), out.data(), R, N, BR, S, CW);
    CHECK(diffs(all(out), column_sums_of(x, R, N), 1e-5, 1e-5) == "");
  }
}

std::vector<float> two_reducers_ref(const Buf<float>& x, int R, int N, int BR) {
  std::vector<float> want(static_cast<size_t>(R));
  for (int i = 0; i < R; ++i) {
    const bool sum_row = (i / BR) % 2 == 0;
    float acc = sum_row ? 0.0f : -1e30f;
    for (int j = 0; j < N; ++j) acc = sum_row ? acc + x[size_t(i) * N + j] : std::max(acc, x[size_t(i) * N + j]);
    want[size_t(i)] = acc;
  }
  return want;
}

TEST_CASE("ops: warp_specialize: two roles reducing at once, each over its own warps", "[ops][struct]") {
  auto k = jit("struct_ws_reducers", two_reducers_kernel);
  for (auto [R, N, BR] : {std::tuple{100, 17, 8}, std::tuple{1, 1000, 4}, std::tuple{64, 64, 32}}) {
    INFO("R " << R << " N " << N << " BR " << BR);
    Buf<float> x = random_buf<float>(size_t(R) * N, 3), out(static_cast<size_t>(R));
    k(Grid(1), x.data(), out.data(), R, N, BR);
    CHECK(diffs(all(out), two_reducers_ref(x, R, N, BR), 1e-5, 1e-5) == "");
  }
}

TEST_CASE("ops: a dot of two swizzled buffers the program stored itself", "[ops][struct]") {
  auto k = jit("struct_stored_dot", stored_dot_kernel);
  for (auto [M, overwrite] : {std::pair{64, 0}, std::pair{128, 0}, std::pair{64, 1}}) {
    INFO("M " << M << " overwrite " << overwrite);
    const int N = 64, K = 64;
    Buf<bf16> a(size_t(M) * K), b(size_t(K) * N);
    Buf<float> c(size_t(M) * N);
    gemm_data(a, b);
    std::vector<float> want;
    gemm_ref(M, N, K, a, b, want);
    k(Grid(1), a.data(), b.data(), c.data(), M, N, overwrite);
    CHECK(diffs(all(c), want) == "");
  }
}

TEST_CASE("ops: warp_specialize: a TMA producer role, stages completing on mbarriers, ragged rows", "[ops][struct]") {
  auto kf = jit("struct_ws_tma_f32", tma_ring_kernel<float>());
  for (auto [R, N, S] : {std::tuple{1000, 100, 3}, std::tuple{1, 4, 2}, std::tuple{37, 128, 4}}) {
    INFO("f32 R " << R << " N " << N << " stages " << S);
    Buf<float> x(size_t(R) * N), out(static_cast<size_t>(128));
    for (size_t i = 0; i < x.size(); ++i) x[i] = hashed(i);
    TensorDescriptor<float, 2> xd(x.data(), {R, N}, {N, 1}, {8, 128});
    kf(Grid(1), xd, out.data(), R, N, 8, 128, S, 0, 4);
    CHECK(diffs(std::vector<float>(out.begin(), out.begin() + N), column_sums_of(x, R, N)) == "");
  }
  auto kb = jit("struct_ws_tma_bf16", tma_ring_kernel<bf16>());
  for (auto [R, N, BN] : {std::tuple{1000, 40, 64}, std::tuple{33, 16, 16}}) {
    INFO("bf16 R " << R << " N " << N << " BN " << BN);
    Buf<bf16> x(size_t(R) * N);
    Buf<float> out(static_cast<size_t>(64));
    for (size_t i = 0; i < x.size(); ++i) x[i] = bf16(hashed(i));
    TensorDescriptor<bf16, 2> xd(x.data(), {R, N}, {N, 1}, {8, BN});
    kb(Grid(1), xd, out.data(), R, N, 8, BN, 3, 1, 4);
    CHECK(diffs(std::vector<float>(out.begin(), out.begin() + N), column_sums_of(x, R, N)) == "");
  }
}

TEST_CASE("ops: warp_specialize: a bf16 GEMM with a TMA producer and a dot consumer, ragged M, N and K",
          "[ops][struct]") {
  auto k = jit("struct_ws_gemm", ws_gemm_kernel);
  for (auto [M, N, K] : {std::tuple{100, 40, 200}, std::tuple{1, 8, 8}, std::tuple{64, 64, 64}}) {
    INFO(M << "x" << N << "x" << K);
    Buf<bf16> a(size_t(M) * K), b(size_t(K) * N);
    Buf<float> c(size_t(M) * N);
    gemm_data(a, b);
    std::vector<float> want;
    gemm_ref(M, N, K, a, b, want);
    TensorDescriptor<bf16, 2> ad(a.data(), {M, K}, {K, 1}, {64, 64}), bd(b.data(), {K, N}, {N, 1}, {64, 64});
    k(Grid((M + 63) / 64, (N + 63) / 64), ad, bd, c.data(), M, N, K, 64, 64, 2, 1, 0, 4, 0);
    CHECK(diffs(all(c), want) == "");
  }
}

namespace {
/// examples/kernels.hpp make_attention_ws on [BH, S, D] bf16 inputs (descriptors over the
/// [BH * S, D] rows, blocks {64, 64} and {BN, 64}), every output row against the double reference.
std::string attention_ws_diffs(int BH, int S, int D, int BN, bool causal, int stages, bool pingpong, bool overlap = false) {
  const size_t n = size_t(BH) * S * D;
  Buf<bf16> q(n), k(n), v(n), o(n);
  for (size_t i = 0; i < n; ++i) {  // in [-1, 1)
    q[i] = bf16(hashed(i) / 32);
    k[i] = bf16(hashed(i + n) / 32);
    v[i] = bf16(hashed(i + 2 * n) / 32);
  }
  const double sm_scale = 1.0 / std::sqrt(double(D));
  const int64_t rows = int64_t(BH) * S;
  TensorDescriptor<bf16, 2> qd(q.data(), {rows, D}, {D, 1}, {64, 64}), kd(k.data(), {rows, D}, {D, 1}, {BN, 64}),
      vd(v.data(), {rows, D}, {D, 1}, {BN, 64});
  const Grid grid((S + 127) / 128, BH);
  const float qk_scale = float(sm_scale * 1.4426950408889634);
  if (overlap) ex::make_attention_ws<bf16, true>()(grid, qd, kd, vd, o.data(), S, qk_scale, D, causal, stages, pingpong);
  else ex::make_attention_ws<bf16>()(grid, qd, kd, vd, o.data(), S, qk_scale, D, causal, stages, pingpong);
  synchronize();
  std::vector<float> got, want;
  ex::attention_rows(q.data(), k.data(), v.data(), o.data(), BH, S, D, causal, sm_scale, false, got, want);
  return diffs(got, want, 2e-2, 2e-2);
}
}  // namespace

TEST_CASE("ops: attention written with TLE-Struct (examples' make_attention_ws), ragged S, causal and not",
          "[ops][struct]") {
  for (auto [BH, S, D, BN, stages, pingpong] :
       {std::tuple{2, 77, 64, 128, 2, true}, std::tuple{1, 300, 128, 128, 2, true}, std::tuple{3, 129, 64, 64, 3, false}}) {
    for (bool causal : {false, true}) {
      INFO("BH " << BH << " S " << S << " D " << D << " BN " << BN << " stages " << stages << (causal ? " causal" : "")
                 << (pingpong ? " ping-pong" : ""));
      CHECK(attention_ws_diffs(BH, S, D, BN, causal, stages, pingpong) == "");
    }
  }
}

TEST_CASE("ops: TLE-Struct attention with the next block's scores issued before the softmax (make_attention_ws<T, "
          "true>), and in FlashAttention-3's ping-pong schedule, ragged S, causal and not",
          "[ops][struct]") {
  // One key block (S 77), a partial last block, several blocks with masked ones after the
  // unmasked (causal), BN 64 and 128. PINGPONG: one turn per key block, s_j and acc += p_{j-1}
  // v_{j-1} issued together, block j's softmax after.
  for (auto [BH, S, D, BN, stages] : {std::tuple{2, 77, 64, 128, 2}, std::tuple{1, 300, 128, 128, 2},
                                      std::tuple{3, 129, 64, 64, 3}, std::tuple{1, 700, 64, 64, 2}}) {
    for (bool causal : {false, true})
      for (bool pingpong : {false, true}) {
        INFO("BH " << BH << " S " << S << " D " << D << " BN " << BN << " stages " << stages << (causal ? " causal" : "")
                   << (pingpong ? " ping-pong" : ""));
        CHECK(attention_ws_diffs(BH, S, D, BN, causal, stages, pingpong, true) == "");
      }
  }
}

namespace {
// q [RM = 64, D] and k [BN = 64, D] moved by TMA into 128-byte-swizzled buffers of D / 64 column
// blocks, then q read from its buffer once into registers (a plain load through local_ptr):
// MODE 0 stores q as read; MODE 1 stores s = q k^T accumulated over two loop iterations, q held in
// registers (wgmma's A from registers, converted once before the loop), k read in place. ROLES:
// the same in a consumer role of a warp_specialize whose producer issues the copies. (The
// q-in-registers form of make_attention_ws gave wrong results on the GPU.)
auto q_held_kernel() {
  return [](TensorDescriptor<bf16, 2> qd, TensorDescriptor<bf16, 2> kd, Ptr<float> out, Constexpr<int> D,
            Constexpr<int> MODE, Constexpr<bool> ROLES) {
    constexpr int RM = 64, BN = 64;
    const int H = D / 64;
    const auto sw = gpu::SharedLayout::swizzled(8, 1, 8);
    auto qs = gpu::alloc<bf16>({H, RM, 64}, gpu::scope::shared, sw);
    auto ks = gpu::alloc<bf16>({H, BN, 64}, gpu::scope::shared, sw);
    auto ready = gpu::alloc_mbarriers(1);
    auto produce = [&] {
      gpu::arrive_expect_tx(ready[0], (RM + BN) * D * 2);
      for (int h = 0; h < H; ++h) {
        gpu::copy(qd, {Tile<int32_t>(0), Tile<int32_t>(h * 64)}, qs[h], ready[0]);
        gpu::copy(kd, {Tile<int32_t>(0), Tile<int32_t>(h * 64)}, ks[h], ready[0]);
      }
    };
    auto consume = [&] {
      gpu::wait(ready[0], 0);
      Tile<int32_t> rows = expand_dims(arange(0, RM), 1), cols = expand_dims(arange(0, D), 0);
      Tile<bf16> q = load(gpu::local_ptr(qs, {cols / 64, rows, cols % 64}));
      if (MODE == 0) {
        store(out + rows * D + cols, cast<float>(q));
        return;
      }
      Tile<int32_t> kk = expand_dims(arange(0, D), 1), kn = expand_dims(arange(0, BN), 0);
      Tile<float> acc = zeros<float>({RM, BN});
      for (auto j : range(0, 2)) {
        (void)j;
        acc = dot(q, load(gpu::local_ptr(ks, {kk / 64, kn, kk % 64})), acc);
      }
      store(out + rows * BN + kn, acc);
    };
    if (ROLES) {
      gpu::warp_specialize({gpu::Role(4, 24, produce), gpu::Role(4, 240, consume)});
    } else {
      produce();
      consume();
    }
  };
}
}  // namespace

TEST_CASE("ops: q read once from a swizzled TMA buffer into registers, then s = q k^T", "[ops][struct]") {
  auto k = jit("q_held", q_held_kernel());
  for (int D : {64, 128})
    for (int mode : {0, 1})
      for (bool roles : {false, true}) {
        INFO("D " << D << " mode " << mode << (roles ? " roles" : ""));
        Buf<bf16> q(size_t(64) * D), kv(size_t(64) * D);
        for (size_t i = 0; i < q.size(); ++i) q[i] = bf16(float(int(i * 7 % 5) - 2)), kv[i] = bf16(float(int(i * 3 % 7) - 3));
        TensorDescriptor<bf16, 2> qd(q.data(), {64, D}, {D, 1}, {64, 64}), kd(kv.data(), {64, D}, {D, 1}, {64, 64});
        Buf<float> out(size_t(64) * (mode == 0 ? D : 64));
        k(Grid(1), qd, kd, out.data(), D, mode, roles);
        std::vector<float> want(out.size());
        for (int m = 0; m < 64; ++m)
          for (int n = 0; n < (mode == 0 ? D : 64); ++n) {
            if (mode == 0) {
              want[size_t(m) * D + n] = float(q[size_t(m) * D + n]);
              continue;
            }
            float s = 0;
            for (int c = 0; c < D; ++c) s += float(q[size_t(m) * D + c]) * float(kv[size_t(n) * D + c]);
            want[size_t(m) * 64 + n] = 2 * s;
          }
        CHECK(diffs(all(out), want) == "");
      }
}

// ============================================================================ errors

namespace {
int line = 0;
std::vector<float> fbuf(4096, 1.0f);
template <class F> void expect_error(F&& f, const std::vector<std::string>& phrases) {
  errtest::expect_user_error(f, phrases, "test_struct_ws.cpp", line);
}
}  // namespace

TEST_CASE("errors: gpu::warp_specialize: where it is called, its roles, what a role may touch", "[errors][struct]") {
  // A tile made before the roles (they split the warps it would be spread over).
  auto tile_before = jit("struct_ws_err_tile", [](Ptr<float> x) {
    line = __LINE__; Tile<float> t = load(x + arange(0, 32));
    gpu::warp_specialize({gpu::Role(1, [&] { store(x + arange(0, 32), 1.0f); })});
  });
  expect_error([&] { tile_before(Grid(1), fbuf.data()); }, {"makes its tiles inside the roles"});
  // A statement after it.
  auto after = jit("struct_ws_err_after", [](Ptr<float> x) {
    gpu::warp_specialize({gpu::Role(1, [] {})});
    line = __LINE__; store(x, 1.0f);
  });
  expect_error([&] { after(Grid(1), fbuf.data()); }, {"follows the gpu::warp_specialize", "make it part of a role"});
  // Inside a loop, twice, nested.
  auto in_loop = jit("struct_ws_err_loop", [](Ptr<float> x) {
    for (auto i : range(0, 2)) {
      (void)i;
      line = __LINE__; gpu::warp_specialize({gpu::Role(1, [] {})});
    }
  });
  expect_error([&] { in_loop(Grid(1), fbuf.data()); }, {"must be called in the kernel's body"});
  auto nested = jit("struct_ws_err_nested", [](Ptr<float> x) {
    gpu::warp_specialize({gpu::Role(1, [&] { line = __LINE__; gpu::warp_specialize({gpu::Role(1, [] {})}); })});
  });
  expect_error([&] { nested(Grid(1), fbuf.data()); }, {"must be called in the kernel's body", "other roles"});
  // Roles: warps not a power of two, max_regs for less than a warpgroup or out of range, too many warps.
  auto bad_role = jit("struct_ws_err_role", [](Ptr<float> x, Constexpr<int> v) {
    if (v == 0) { line = __LINE__; gpu::warp_specialize({gpu::Role(3, [] {})}); }
    if (v == 1) { line = __LINE__; gpu::warp_specialize({gpu::Role(2, 40, [] {})}); }
    if (v == 2) { line = __LINE__; gpu::warp_specialize({gpu::Role(4, 300, [] {})}); }
    if (v == 3) { line = __LINE__; gpu::warp_specialize({gpu::Role(1, [] {}), gpu::Role(32, [] {})}); }
  });
  expect_error([&] { bad_role(Grid(1), fbuf.data(), 0); }, {"3 warps", "power of two"});
  expect_error([&] { bad_role(Grid(1), fbuf.data(), 1); }, {"whole warpgroups", "2 warps"});
  expect_error([&] { bad_role(Grid(1), fbuf.data(), 2); }, {"max_regs 300"});
  expect_error([&] { bad_role(Grid(1), fbuf.data(), 3); }, {"take 36 warps", "first warps: 0, 4", "at most 32"});
  // A buffer allocated in a role; a Tile declared outside assigned in one.
  auto alloc_in = jit("struct_ws_err_alloc", [](Ptr<float> x) {
    gpu::warp_specialize({gpu::Role(1, [&] { line = __LINE__; auto b = gpu::alloc<float>({32}); (void)b; })});
  });
  expect_error([&] { alloc_in(Grid(1), fbuf.data()); }, {"warp_specialize roles", "before the loop or the roles"});
  // A tile made in a loop before the roles; a cuda_function in a role.
  auto loop_tile = jit("struct_ws_err_loop_tile", [](Ptr<float> x) {
    for (auto i : range(0, 2)) {
      line = __LINE__; store(x + i * 32 + arange(0, 32), 1.0f);
    }
    gpu::warp_specialize({gpu::Role(1, [] {})});
  });
  expect_error([&] { loop_tile(Grid(1), fbuf.data()); }, {"makes its tiles inside the roles"});
  auto cuda_in = jit("struct_ws_err_cuda", [](Ptr<float> x) {
    gpu::warp_specialize({gpu::Role(4, [&] {
      line = __LINE__; (void)cuda_function<float>(CudaSource("extern \"C\" __device__ float f(float v) { return v; }"), "f", load(x));
    })});
  });
  expect_error([&] { cuda_in(Grid(1), fbuf.data()); }, {"cuda_function 'f' inside a gpu::warp_specialize role"});
  auto assign = jit("struct_ws_err_assign", [](Ptr<float> x) {
    Tile<float> s = load(x);  // a scalar: allowed before the roles
    gpu::Role reader(1, [&] { store(x + 1, s); });
    line = __LINE__; gpu::Role writer(1, [&] { s = s + 1.0f; });
    gpu::warp_specialize({reader, writer});
  });
  expect_error([&] { assign(Grid(1), fbuf.data()); }, {"assigns a Tile declared outside it"});
}

TEST_CASE("errors: what the tracer proves about a warp-specialized kernel's mbarriers", "[errors][struct]") {
  // A wait on mbarriers nothing arrives on.
  auto lonely = jit("struct_ws_err_lonely", [](Ptr<float> x) {
    auto a = gpu::alloc_mbarriers(1), b = gpu::alloc_mbarriers(1);
    gpu::warp_specialize({
        gpu::Role(1, [&] { gpu::arrive(a[0]); }),
        gpu::Role(1, [&] { line = __LINE__; gpu::wait(b[0], 0); }),
    });
  });
  expect_error([&] { lonely(Grid(1), fbuf.data()); }, {"no statement of the kernel arrives", "wait forever"});
  // Announced bytes that are not the copies' (4 too many), in one block; variant 1 is right.
  std::vector<float> h(8 * 32, 1.0f);
  TensorDescriptor<float, 2> d(h.data(), {8, 32}, {32, 1}, {8, 32});
  auto bytes = jit("struct_ws_err_bytes", [](TensorDescriptor<float, 2> xd, Ptr<float> out, Constexpr<int> extra) {
    auto buf = gpu::alloc<float>({8, 32});
    auto full = gpu::alloc_mbarriers(1);
    gpu::warp_specialize({gpu::Role(1, [&] {
      line = __LINE__; gpu::arrive_expect_tx(full[0], 8 * 32 * 4 + extra);
      gpu::copy(xd, {0, 0}, buf, full[0]);
      gpu::wait(full[0], 0);
      store(out + arange(0, 32), sum(buf.load(), 0));
    })});
  });
  expect_error([&] { bytes(Grid(1), d, fbuf.data(), 4); }, {"announces 1028 bytes", "move 1024"});
  bytes(Grid(1), d, fbuf.data(), 0);
  CHECK(fbuf[0] == 8.0f);
  fbuf.assign(fbuf.size(), 1.0f);
}

TEST_CASE("errors: the interpreter reports roles that wait for each other forever", "[errors][struct]") {
  // The consumer waits for a full stage the producer never fills: the producer waits for the
  // consumer's release first (both arrays are arrived on, so the tracer cannot tell); variant 1
  // waits for the parity before phase 0, and runs.
  static int prod_line = 0, cons_line = 0;
  auto k = jit("struct_ws_err_deadlock", [](Ptr<float> x, Constexpr<int> variant) {
    auto full = gpu::alloc_mbarriers(1), empty = gpu::alloc_mbarriers(1);
    gpu::warp_specialize({
        gpu::Role(1, [&] {
          prod_line = __LINE__; gpu::wait(empty[0], variant == 1 ? 1 : 0);
          store(x, 2.0f);
          gpu::arrive(full[0]);
        }),
        gpu::Role(4, [&] {
          cons_line = __LINE__; gpu::wait(full[0], 0);
          store(x + 1, load(x) + 1.0f);
          gpu::arrive(empty[0]);
        }),
    });
  });
  std::vector<float> buf(2, 0.0f);
  bool thrown = false;
  try {
    k(Grid(1).backend(Backend::Interp), buf.data(), 0);
  } catch (const RuntimeError& e) {
    thrown = true;
    const std::string msg = e.what();
    CHECK_THAT(msg, Catch::Contains("wait for each other forever") &&
                        Catch::Contains("role 0 waits at " + std::string(__FILE__) + ":" + std::to_string(prod_line)) &&
                        Catch::Contains("role 1 waits at " + std::string(__FILE__) + ":" + std::to_string(cons_line)));
  }
  CHECK(thrown);
  k(Grid(1), buf.data(), 1);  // the CPU backend: on the interpreter too
  CHECK(buf[0] == 2.0f);
  CHECK(buf[1] == 3.0f);
  // A phase completed by another role's TMA copy is progress: role 0 announces the bytes and
  // waits, role 1 copies them and waits for role 0 (no deadlock).
  std::vector<float> h(8 * 32), o(8 * 32, 0.0f);
  for (size_t i = 0; i < h.size(); ++i) h[i] = float(i);
  TensorDescriptor<float, 2> d(h.data(), {8, 32}, {32, 1}, {8, 32});
  auto split = jit("struct_ws_tma_split", [](TensorDescriptor<float, 2> xd, Ptr<float> out) {
    auto tile = gpu::alloc<float>({8, 32});
    auto full = gpu::alloc_mbarriers(1), done = gpu::alloc_mbarriers(1);
    gpu::warp_specialize({
        gpu::Role(1, [&] {
          gpu::arrive_expect_tx(full[0], 8 * 32 * 4);
          gpu::wait(full[0], 0);
          Tile<int32_t> r = expand_dims(arange(0, 8), 1), c = expand_dims(arange(0, 32), 0);
          store(out + r * 32 + c, tile.load() * 2.0f);
          gpu::arrive(done[0]);
        }),
        gpu::Role(1, [&] {
          gpu::copy(xd, {0, 0}, tile, full[0]);
          gpu::wait(done[0], 0);
        }),
    });
  });
  split(Grid(1).backend(Backend::Interp), d, o.data());
  for (size_t i = 0; i < o.size(); ++i) CHECK(o[i] == 2.0f * h[i]);
}

// ============================================================================ passes and PTX

TEST_CASE("struct passes: each role's tiles are laid out over its own warps, barriers of its own", "[struct-pass]") {
  auto f = tracetest::trace_div16("ws_layouts", [](Ptr<float> x, Ptr<float> out) {
    auto buf = gpu::alloc<float>({64, 64});
    auto bar = gpu::alloc_mbarriers(1);
    gpu::warp_specialize({
        gpu::Role(1, [&] {
          Tile<int32_t> i = arange(0, 64);
          buf.store(load(x + expand_dims(i, 1) * 64 + expand_dims(i, 0)));
          gpu::arrive(bar[0]);
        }),
        gpu::Role(8, [&] {
          gpu::wait(bar[0], 0);
          Tile<float> t = load(gpu::local_ptr(buf, {expand_dims(arange(0, 64), 0), expand_dims(arange(0, 64), 1)}));
          store(out + arange(0, 64), sum(t, 1));
        }),
    });
  });
  tracetest::gpu_passes_sm90(*f);
  const ir::Op* ws = ir::find_warp_specialize(*f);
  REQUIRE(ws);
  CHECK(ir::role_first_warps(*ws) == std::vector<int64_t>{0, 4, 12});
  for (unsigned r = 0; r < 2; ++r) {
    int tiles = 0;
    ir::walk(ws->region(r).body(), [&](const ir::Op& op) {
      for (auto& v : op.results)
        if (v->type.layout) {
          ++tiles;
          CHECK(v->type.layout->ll.num_warps() == (r == 0 ? 1 : 8));
        }
    });
    CHECK(tiles > 0);
  }
  // The producer's store and the consumer's transposed read are ordered by the mbarrier, not by a
  // barrier; the consumer's reduction needs none of the program's buffers.
  CHECK(tracetest::count_ops(*f, ir::OpKind::Barrier) == 0);
}

namespace {
/// Shared-memory loads of anything but f32 in `ptx`: a wgmma operand read from a buffer through
/// registers (ld.shared.u32 / .u16 / .v4.u32 ...), where the in-place read has none (the f32
/// ones are the epilogue's layout conversion).
int operand_shared_loads(const std::string& ptx) {
  int n = 0;
  for (size_t at = ptx.find("ld.shared"); at != std::string::npos; at = ptx.find("ld.shared", at + 1)) {
    const size_t end = ptx.find_first_of(" \t", at);
    const std::string op = ptx.substr(at, end - at);
    n += op.size() < 4 || op.compare(op.size() - 4, 4, ".f32") != 0;
  }
  return n;
}
}  // namespace

TEST_CASE("ptx: warp_specialize branches on the warp index, named barriers per role, setmaxnreg", "[ptx][struct]") {
  std::vector<bf16> h(256 * 256);
  TensorDescriptor<bf16, 2> ad(h.data(), {256, 256}, {256, 1}, {128, 64}), bd(h.data(), {256, 256}, {256, 1}, {64, 64});
  auto k = jit("struct_ws_ptx_gemm", ws_gemm_kernel);
  // 4 producer warps at 40 registers, 8 consumer warps at 232: 12 warps, 168 at entry.
  const std::string p = k.ptx(90, 4, ad, bd, fake<float>(), 256, 256, 256, 128, 64, 3, 4, 40, 8, 232);
  CHECK(p.find(".reqntid 384") != std::string::npos);
  CHECK(p.find(".maxnreg 168") != std::string::npos);
  CHECK(p.find("setmaxnreg.dec.sync.aligned.u32 40") != std::string::npos);
  CHECK(p.find("setmaxnreg.inc.sync.aligned.u32 232") != std::string::npos);
  CHECK(p.find("wgmma.mma_async") != std::string::npos);
  CHECK(p.find("cp.async.bulk.tensor.2d") != std::string::npos);
  ptxtest::assemble("warp-specialized GEMM", p);
  // The consumer's barriers are its own (barrier 2 of its 256 threads: its epilogue and dot staging).
  CHECK(p.find("barrier.sync \t2, 256;") != std::string::npos);
  // Registers the file cannot hold: a UserError at the call, not a hang.
  static int ws_line = 0;
  auto greedy = jit("struct_ws_ptx_greedy", [](Ptr<float> x) {
    ws_line = __LINE__; gpu::warp_specialize({
        gpu::Role(4, [&] { store(x + arange(0, 128), 1.0f); }),
        gpu::Role(8, 256, [&] { store(x + arange(0, 256), 2.0f); }),
    });
  });
  errtest::expect_user_error([&] { (void)greedy.ptx(90, 4, fake<float>()); }, {"setmaxnreg.inc would wait", "role 1: 8 warps x 256"},
                             "test_struct_ws.cpp", ws_line);
  // setmaxnreg.inc only takes what the program has: 32 x 128 + 240 x 256 threads need 65536 of
  // 12 x 32 x 168 = 64512.
  auto over = jit("struct_ws_ptx_over", [](Ptr<float> x) {
    ws_line = __LINE__; gpu::warp_specialize({
        gpu::Role(4, 32, [&] { store(x + arange(0, 128), 1.0f); }),
        gpu::Role(8, 240, [&] { store(x + arange(0, 256), 2.0f); }),
    });
  });
  errtest::expect_user_error([&] { (void)over.ptx(90, 4, fake<float>()); }, {"need 65536", "holds 64512"},
                             "test_struct_ws.cpp", ws_line);
  // 8 warps: 248 at entry (255 rounded down to 8), both roles decrease.
  auto eight = jit("struct_ws_ptx_eight", [](Ptr<float> x) {
    gpu::warp_specialize({
        gpu::Role(4, 40, [&] { store(x + arange(0, 128), 1.0f); }),
        gpu::Role(4, 232, [&] { store(x + 128 + arange(0, 128), sum(load(x + arange(0, 128)), 0)); }),
    });
  });
  const std::string p8 = eight.ptx(90, 4, fake<float>());
  CHECK(p8.find(".maxnreg 248") != std::string::npos);
  CHECK(p8.find("setmaxnreg.dec.sync.aligned.u32 40") != std::string::npos);
  CHECK(p8.find("setmaxnreg.dec.sync.aligned.u32 232") != std::string::npos);
  ptxtest::assemble("8-warp roles with setmaxnreg", p8);
  // Roles that arrive on one mbarrier array with different warp counts.
  static int arrive_line = 0;
  auto mixed = jit("struct_ws_ptx_mixed", [](Ptr<float> x) {
    auto b = gpu::alloc_mbarriers(1, 2);
    gpu::warp_specialize({
        gpu::Role(1, [&] { gpu::arrive(b[0]); }),
        gpu::Role(4, [&] { arrive_line = __LINE__; gpu::arrive(b[0]); gpu::wait(b[0], 0); }),
    });
  });
  errtest::expect_user_error([&] { (void)mixed.ptx(90, 4, fake<float>()); }, {"runs on 4 warps", "on 1"},
                             "test_struct_ws.cpp", arrive_line);
  // examples/gemm_ws: the consumers' dots read A's stage and B's four blocks in place (no
  // staging of operands through registers), one m64n256k16 per warpgroup and k16 step.
  std::vector<bf16> hg(256 * 512);
  TensorDescriptor<bf16, 2> ga(hg.data(), {256, 512}, {512, 1}, {128, 64}), gb(hg.data(), {512, 256}, {256, 1}, {64, 64});
  const std::string gp = ex::make_gemm_ws<bf16>().ptx(90, 4, ga, gb, fake<bf16>(), 256, 256, 512, 3);
  CHECK(gp.find("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16") != std::string::npos);
  CHECK(ptxtest::count_of(gp, "wgmma.mma_async") == 4);  // 4 k16 steps, one m64n256k16 each
  // (with C in f32, 2 stages, the epilogue's conversion loads f32 only: no 16-bit data is loaded at all)
  CHECK(operand_shared_loads(ex::make_gemm_ws<float>().ptx(90, 4, ga, gb, fake<float>(), 256, 256, 512, 2)) == 0);
  CHECK(gp.find(".reqntid 384") != std::string::npos);
  ptxtest::assemble("examples/gemm_ws", gp);
  // examples' make_attention_ws: q and the key block read in place (K-major, two 64-column
  // blocks each), the value block too (MN-major), p from registers packed by cvt.rn.bf16x2.f32:
  // per consumer role and loop (unmasked, masked blocks), 8 k16 steps of each dot, and every
  // register the wgmmas read is written before their fence (no warpgroup.arrive injected by ptxas).
  // With f16, p is packed by cvt.rn.f16x2.f32.
  {
    std::vector<bf16> hq(size_t(512) * 128);
    TensorDescriptor<bf16, 2> qd(hq.data(), {512, 128}, {128, 1}, {64, 64}), kd(hq.data(), {512, 128}, {128, 1}, {128, 64});
    const std::string ap =
        ex::make_attention_ws<bf16>().ptx(90, Grid(4, 4), qd, kd, kd, fake<bf16>(), 512, 0.1f, 128, true, 2, true);
    CHECK(ptxtest::count_of(ap, "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16") == 64);
    CHECK(ptxtest::count_of(ap, "cvt.rn.bf16x2.f32") == 128);
    CHECK(ptxtest::count_of(ap, "ld.shared") == 16);  // the epilogues' conversions only, after the loops
    CHECK(ap.find(".reqntid 384") != std::string::npos);
    bool missing = false;
    if (auto log = ptxtest::verbose_log("examples/attention_ws", ap, "sm_90a", missing))
      CHECK(log->find("C7519") == std::string::npos);
    std::vector<f16> hh(hq.size());
    TensorDescriptor<f16, 2> hqd(hh.data(), {512, 128}, {128, 1}, {64, 64}), hkd(hh.data(), {512, 128}, {128, 1}, {128, 64});
    const std::string hp =
        ex::make_attention_ws<f16>().ptx(90, Grid(4, 4), hqd, hkd, hkd, fake<f16>(), 512, 0.1f, 128, false, 2, false);
    CHECK(ptxtest::count_of(hp, "cvt.rn.f16x2.f32") == 128);
    ptxtest::assemble("examples/attention_ws, f16", hp);
    // The overlapped consumers (make_attention_ws<T, true>): the next block's q k^T is committed
    // before the softmax's exp2s and waited for after them; ptxas keeps the wgmmas asynchronous
    // (no serialization warning, no injected arrive) and spills nothing.
    for (bool causal : {false, true}) {
      INFO("overlapped, causal " << causal);
      const std::string op =
          ex::make_attention_ws<bf16, true>().ptx(90, Grid(4, 4), qd, kd, kd, fake<bf16>(), 512, 0.1f, 128, causal, 2, false);
      size_t commits_before_ex2 = 0;  // wgmma groups committed and not yet waited for at some ex2
      for (size_t at = 0, pending = 0; at != std::string::npos;) {
        const size_t c = op.find("wgmma.commit_group", at), w = op.find("wgmma.wait_group", at),
                     e = op.find("ex2.approx", at);
        const size_t next = std::min({c, w, e});
        if (next == std::string::npos) break;
        if (next == c) ++pending;
        else if (next == w) pending = 0;
        else commits_before_ex2 = std::max(commits_before_ex2, pending);
        at = next + 1;
      }
      CHECK(commits_before_ex2 >= 1);
      bool no_ptxas = false;
      if (auto log = ptxtest::verbose_log("examples/attention_ws overlapped", op, "sm_90a", no_ptxas)) {
        CHECK(log->find("C7519") == std::string::npos);
        CHECK(log->find("C7514") == std::string::npos);  // serialized: an accumulator read before its wait
      }
      CHECK(ptxtest::spill_store_bytes("examples/attention_ws overlapped", op) <= 0);
    }
  }
  // Buffers the program stored itself: read in place too, behind a fenced barrier.
  auto sd = jit("struct_stored_dot_ptx", stored_dot_kernel);
  const std::string sp = sd.ptx(90, 4, fake<bf16>(), fake<bf16>(), fake<float>(), 64, 64, 0);
  CHECK(sp.find("wgmma.mma_async") != std::string::npos);
  CHECK(operand_shared_loads(sp) == 0);
  CHECK(sp.find("fence.proxy.async;") != std::string::npos);
  ptxtest::assemble("a dot of stored swizzled buffers", sp);
  // ... but not when the buffer is overwritten between the load and the dot: a is read through
  // registers then.
  CHECK(operand_shared_loads(sd.ptx(90, 4, fake<bf16>(), fake<bf16>(), fake<float>(), 64, 64, 1)) > 0);
  // sm_80: no setmaxnreg, named barriers all the same.
  auto ring = jit("struct_ws_ptx_ring", ring_kernel);
  const std::string r80 = ring.ptx(80, 4, fake<float>(), fake<float>(), 64, 64, 8, 3, 4);
  CHECK(r80.find("setmaxnreg") == std::string::npos);
  CHECK(r80.find(".reqntid 256") != std::string::npos);
  ptxtest::assemble("warp-specialized ring", r80, "sm_80");
  // Ragged columns: the pad predicates are built in the roles that use them.
  ptxtest::assemble("warp-specialized ring, 17 columns", ring.ptx(90, 4, fake<float>(), fake<float>(), 64, 17, 4, 3, 2));
}

// ============================================================================ GPU

TEST_CASE("gpu: warp_specialize kernels: cp.async and TMA rings, a GEMM with setmaxnreg", "[.gpu][struct]") {
  if (!gpu_info()) {
    WARN("no usable GPU: [.gpu] case skipped");
    return;
  }
  auto k = jit("struct_ws_gpu_ring", ring_kernel);
  for (auto [R, N, BR, S, CW] : {std::tuple{37, 17, 4, 3, 4}, std::tuple{1000, 128, 16, 4, 8},
                                 std::tuple{9, 1001, 2, 2, 1}, std::tuple{4100, 64, 8, 3, 4}}) {
    INFO("ring R " << R << " N " << N << " BR " << BR << " stages " << S << " consumer warps " << CW);
    ManagedBuffer<float> x(size_t(R) * N), out(static_cast<size_t>(N));
    Buf<float> hx(x.size());
    for (size_t i = 0; i < x.size(); ++i) x.data()[i] = hx[i] = hashed(i);
    k(Grid(1).backend(Backend::GPU), x.data(), out.data(), R, N, BR, S, CW);
    synchronize();
    CHECK(diffs(std::vector<float>(out.data(), out.data() + N), column_sums_of(hx, R, N)) == "");
  }
  auto red = jit("struct_ws_gpu_reducers", two_reducers_kernel);
  for (auto [R, N, BR] : {std::tuple{1000, 100, 16}, std::tuple{129, 1001, 4}}) {
    INFO("reducers R " << R << " N " << N << " BR " << BR);
    ManagedBuffer<float> x(size_t(R) * N), out(static_cast<size_t>(R));
    Buf<float> hx(x.size());
    for (size_t i = 0; i < x.size(); ++i) x.data()[i] = hx[i] = hashed(i);
    red(Grid(1).backend(Backend::GPU), x.data(), out.data(), R, N, BR);
    synchronize();
    CHECK(diffs(std::vector<float>(out.data(), out.data() + R), two_reducers_ref(hx, R, N, BR)) == "");
  }
  auto tb = jit("struct_ws_gpu_tma", tma_ring_kernel<bf16>());
  for (auto [R, N, BN, CW] : {std::tuple{4100, 40, 64, 4}, std::tuple{129, 16, 16, 8}}) {
    INFO("TMA ring R " << R << " N " << N << " BN " << BN);
    ManagedBuffer<bf16> x(size_t(R) * N);
    ManagedBuffer<float> out(static_cast<size_t>(64));
    Buf<bf16> hx(x.size());
    for (size_t i = 0; i < x.size(); ++i) x.data()[i] = hx[i] = bf16(hashed(i));
    TensorDescriptor<bf16, 2> xd(x.data(), {R, N}, {N, 1}, {8, BN});
    tb(Grid(1).backend(Backend::GPU), xd, out.data(), R, N, 8, BN, 3, 1, CW);
    synchronize();
    CHECK(diffs(std::vector<float>(out.data(), out.data() + N), column_sums_of(hx, R, N)) == "");
  }
  auto g = jit("struct_ws_gpu_gemm", ws_gemm_kernel);
  // (BM, PW, PR, CW, CR): one producer warp; a producer warpgroup giving registers to two
  // consumer warpgroups.
  for (auto [BM, PW, PR, CW, CR] : {std::tuple{64, 1, 0, 4, 0}, std::tuple{128, 4, 40, 8, 232}}) {
    for (auto [M, N, K] : {std::tuple{1000, 200, 136}, std::tuple{256, 256, 512}}) {
      INFO("gemm " << M << "x" << N << "x" << K << " BM " << BM << " producer " << PW << "/" << PR << " consumer " << CW
                   << "/" << CR);
      structtest::ManagedGemm d(M, N, K);
      TensorDescriptor<bf16, 2> ad(d.a.data(), {M, K}, {K, 1}, {BM, 64}), bd(d.b.data(), {K, N}, {N, 1}, {64, 64});
      g(Grid((M + BM - 1) / BM, (N + 63) / 64).backend(Backend::GPU), ad, bd, d.c.data(), M, N, K, BM, 64, 3, PW, PR, CW,
        CR);
      synchronize();
      CHECK(diffs(d.result(), d.want) == "");
    }
  }
}
