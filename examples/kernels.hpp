// examples/kernels.hpp - the kernels of the examples, shared with the benchmarks so that what is
// timed is exactly what the examples check. Each returns a tle::Kernel (traced at first launch).
#pragma once
#include <tle/tle.hpp>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>
#include <vector>

namespace ex {

/// out[i] = x[i] + y[i] for i < n; one program per BLOCK elements.
inline auto make_vector_add() {
  using namespace tle;
  return jit("vector_add", [](Ptr<float> x, Ptr<float> y, Ptr<float> out, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> mask = offs < n;
    store(out + offs, load(x + offs, mask) + load(y + offs, mask), mask);
  });
}

/// Row softmax of a [rows, ncols] f32 matrix: one program per row, the row in one tile of BLOCK
/// (>= ncols; a power of two on the GPU).
inline auto make_softmax() {
  using namespace tle;
  return jit("softmax", [](Ptr<float> x, Ptr<float> y, Tile<int32_t> ncols, Constexpr<int> BLOCK) {
    Tile<int64_t> row = program_id(0).to<int64_t>();
    Tile<int32_t> cols = arange(0, BLOCK);
    Tile<bool> mask = cols < ncols;
    Tile<float> v = load(x + row * ncols + cols, mask, -INFINITY);
    Tile<float> e = exp(v - max(v, 0));
    store(y + row * ncols + cols, e / sum(e, 0), mask);
  });
}

/// Warps per program for a kernel that holds a whole row of `block` elements in one tile: more for
/// longer rows (Triton's tutorials use 8 for softmax and block/256 clamped to 1..8 for layernorm).
/// The examples use it; gpu_bench sweeps around it.
inline int row_warps(int block) { return block >= 32768 ? 32 : block >= 8192 ? 16 : block >= 2048 ? 8 : 4; }

/// The reference for make_softmax (and the TLE-Raw softmax): out[c] = exp(x[c] - max) / sum of
/// exp(x[j] - max) over the `cols` elements of one row, accumulated in double.
inline void softmax_row_reference(const float* x, float* out, int cols) {
  float m = -INFINITY;
  for (int c = 0; c < cols; ++c) m = std::max(m, x[c]);
  double s = 0;
  for (int c = 0; c < cols; ++c) s += std::exp(double(x[c]) - m);
  for (int c = 0; c < cols; ++c) out[c] = float(std::exp(double(x[c]) - m) / s);
}

/// Softmax of rows longer than a tile holds (LLM vocabularies: 128256 columns, 501 KiB of f32 per
/// row), as a user writes it: one program per row walks the row twice in chunks of BLOCK (a power
/// of two on the GPU; any ncols >= 1). The first pass keeps, per tile element, a running maximum m
/// and the sum s of exp(x - m), rescaled by exp(m_old - m_new) when the maximum grows (the online
/// softmax, Milakov and Gimelshein 2018, "Online normalizer calculation for softmax"): no
/// reduction inside the loop; after it one max and one sum over the tile give the row's maximum M
/// and normalizer S. The second pass writes exp(x - M) / S; its reads of x come from L2 when the
/// row stayed there. Both loops carry the range hint num_stages = STAGES, so on the GPU their
/// chunks are copied ahead by cp.async and several are in flight. A row of -inf only gives NaN,
/// as torch.softmax does. Launch as Grid(rows); x and y are [rows, ncols] row-major f32.
template <int STAGES = 3> auto make_softmax_looped() {
  using namespace tle;
  return jit("softmax_looped", [](Ptr<float> x, Ptr<float> y, Tile<int32_t> ncols, Constexpr<int> BLOCK) {
    Tile<int64_t> row = program_id(0).to<int64_t>() * ncols;
    Tile<int32_t> cols = arange(0, BLOCK);
    // -FLT_MAX, not -inf: exp(m - m_new) stays exp(0) = 1 while a lane has seen only masked -inf
    Tile<float> m = full<float>({BLOCK}, -3.402823466e38f), s = zeros<float>({BLOCK});
    for (auto c0 : range(0, ncols, BLOCK, {.num_stages = STAGES})) {
      Tile<int32_t> c = c0 + cols;
      Tile<float> v = load(x + row + c, c < ncols, -INFINITY);
      Tile<float> m_new = maximum(m, v);
      s = s * exp(m - m_new) + exp(v - m_new);
      m = m_new;
    }
    Tile<float> M = max(m, 0);
    Tile<float> S = sum(s * exp(m - M), 0);
    for (auto c0 : range(0, ncols, BLOCK, {.num_stages = STAGES})) {
      Tile<int32_t> c = c0 + cols;
      Tile<bool> mask = c < ncols;
      store(y + row + c, exp(load(x + row + c, mask, -INFINITY) - M) / S, mask);
    }
  });
}

/// LayerNorm forward of the rows of a [nrows, ncols] matrix of T (statistics in f32):
/// y = (x - mean) / sqrt(var + eps) * w + b, one row per tile of BLOCK >= ncols (a power of two
/// on the GPU). Persistent: program p handles rows p, p + P, p + 2P, ... (P = the grid size, any
/// 1..nrows). On the GPU the row loop is software-pipelined STAGES deep (tle::LoopOptions): the
/// rows of the next STAGES-1 iterations are copied into shared memory by cp.async while this one
/// is normalized, so their latency is hidden without holding them in registers (each program
/// writes only its own rows of y, which it never reads: the hint's condition holds). w and b are
/// loaded once per program and kept in L1 (evict_last); y is written with evict_first, and x,
/// touched once too, is copied by cp.async.cg (L2 only; its evict_first hint applies only where
/// the load is not pipelined, e.g. 2-byte vectors of ragged bf16 rows).
template <class T, int STAGES = 3> auto make_layernorm() {
  using namespace tle;
  return jit("layernorm", [](Ptr<T> x, Ptr<T> y, Ptr<float> w, Ptr<float> b, Tile<int32_t> nrows,
                             Tile<int32_t> ncols, Tile<float> eps, Constexpr<int> BLOCK) {
    const MemHints once{"", "evict_first", false}, keep{"", "evict_last", false};
    Tile<int32_t> cols = arange(0, BLOCK);
    Tile<bool> mask = cols < ncols;
    Tile<float> wv = load(w + cols, mask, 0.0f, keep), bv = load(b + cols, mask, 0.0f, keep);
    Tile<float> n = ncols.to<float>();
    for (auto r : range(program_id(0), nrows, num_programs(0), {.num_stages = STAGES})) {
      Tile<int64_t> row = r.to<int64_t>() * ncols;
      Tile<float> v = cast<float>(load(x + row + cols, mask, 0, once));
      Tile<float> mean = sum(v, 0) / n;
      Tile<float> d = where(mask, v - mean, 0.0f);
      Tile<float> rstd = rsqrt(sum(d * d, 0) / n + eps);
      store(y + row + cols, cast<T>(d * rstd * wv + bv), mask, once);
    }
  });
}

/// LayerNorm of one row per program as Triton's tutorial writes it (same result as make_layernorm
/// for eps, without its persistence and pipelining): x and y are [rows, ncols] of T, w and b f32
/// [ncols]; launch as Grid(rows), BLOCK >= ncols (a power of two on the GPU). w and b are loaded
/// where the program uses them, after the row's two reductions; on the GPU the load-reordering
/// pass (passes/gpu/reorder_loads.cpp) issues them before the reductions, so their latency
/// overlaps the row's (benchmarks: group "reorder").
template <class T> auto make_layernorm_row() {
  using namespace tle;
  return jit("layernorm_row", [](Ptr<T> x, Ptr<T> y, Ptr<float> w, Ptr<float> b, Tile<int32_t> ncols, Tile<float> eps,
                                 Constexpr<int> BLOCK) {
    Tile<int64_t> row = program_id(0).to<int64_t>() * ncols;
    Tile<int32_t> cols = arange(0, BLOCK);
    Tile<bool> mask = cols < ncols;
    Tile<float> v = cast<float>(load(x + row + cols, mask, 0));
    Tile<float> n = ncols.to<float>();
    Tile<float> mean = sum(v, 0) / n;
    Tile<float> d = where(mask, v - mean, 0.0f);
    Tile<float> rstd = rsqrt(sum(d * d, 0) / n + eps);
    Tile<float> wv = load(w + cols, mask, 0.0f), bv = load(b + cols, mask, 0.0f);
    store(y + row + cols, cast<T>(d * rstd * wv + bv), mask);
  });
}

/// Cross-entropy loss per row of f32 logits x [rows, ncols] with int32 class targets [rows]:
/// loss[r] = logsumexp(x[r, :]) - x[r, target[r]], and 0 where target[r] < 0 (PyTorch's
/// ignore_index, -100 by default, gives 0 with reduction='none'); targets must be < ncols. One
/// program per row (Grid(rows)), BLOCK >= ncols (a power of two on the GPU). The target and its
/// logit are read after the row's max and sum, as the formula reads; on the GPU the load-reordering
/// pass issues both before them (the logit's load right after the target's).
inline auto make_cross_entropy() {
  using namespace tle;
  return jit("cross_entropy", [](Ptr<float> x, Ptr<int32_t> target, Ptr<float> loss, Tile<int32_t> ncols,
                                 Constexpr<int> BLOCK) {
    Tile<int32_t> r = program_id(0);
    Tile<int64_t> row = r.to<int64_t>() * ncols;
    Tile<int32_t> cols = arange(0, BLOCK);
    Tile<float> v = load(x + row + cols, cols < ncols, -INFINITY);
    Tile<float> m = max(v, 0);
    Tile<float> lse = log(sum(exp(v - m), 0)) + m;
    Tile<int32_t> t = load(target + r);
    Tile<bool> valid = t >= 0;
    Tile<float> xt = load(x + row + t, valid, 0.0f);
    store(loss + r, where(valid, lse - xt, 0.0f));
  });
}

/// Cosine similarity of the rows of a and b ([rows, ncols] of T): out[r] = a.b / max(|a| |b|, eps)
/// in f32 (torch.nn.functional.cosine_similarity along dim 1 up to where eps applies). One program
/// per row (Grid(rows)), BLOCK >= ncols (a power of two on the GPU). Written in the order a user
/// thinks it - a and its norm, then b and its norm, then the dot - so b is loaded after a's
/// reduction; on the GPU the load-reordering pass issues it with a's.
template <class T> auto make_cosine_rows() {
  using namespace tle;
  return jit("cosine_rows", [](Ptr<T> a, Ptr<T> b, Ptr<float> out, Tile<int32_t> ncols, Tile<float> eps,
                               Constexpr<int> BLOCK) {
    Tile<int32_t> r = program_id(0);
    Tile<int64_t> row = r.to<int64_t>() * ncols;
    Tile<int32_t> cols = arange(0, BLOCK);
    Tile<bool> mask = cols < ncols;
    Tile<float> va = cast<float>(load(a + row + cols, mask, 0));
    Tile<float> na = sqrt(sum(va * va, 0));
    Tile<float> vb = cast<float>(load(b + row + cols, mask, 0));
    Tile<float> nb = sqrt(sum(vb * vb, 0));
    store(out + r, sum(va * vb, 0) / maximum(na * nb, eps));
  });
}

/// The BM x BN block of A[M,K] @ B[K,N] (row-major) at rows rm, columns rn, accumulated in
/// tle::dot_acc_t<T> over a device K loop of BK-wide steps with masked tails (rows >= M, columns
/// >= N and k >= K read as 0). Traced inside a kernel (make_matmul, the tests' variants).
template <class T>
tle::Tile<tle::dot_acc_t<T>> matmul_block(tle::Ptr<T> a, tle::Ptr<T> b, tle::Tile<int32_t> rm, tle::Tile<int32_t> rn,
                                          tle::Tile<int32_t> M, tle::Tile<int32_t> N, tle::Tile<int32_t> K, int BM,
                                          int BN, int BK) {
  using namespace tle;
  Tile<int32_t> rk = arange(0, BK);
  Tile<dot_acc_t<T>> acc = zeros<dot_acc_t<T>>({BM, BN});
  for (auto k0 : range(0, K, BK)) {
    Tile<int32_t> kk = k0 + rk;
    Tile<bool> ma = expand_dims(rm < M, 1) & expand_dims(kk < K, 0);
    Tile<bool> mb = expand_dims(kk < K, 1) & expand_dims(rn < N, 0);
    Tile<T> ta = load(a + expand_dims(rm, 1) * K + expand_dims(kk, 0), ma);
    Tile<T> tb = load(b + expand_dims(kk, 1) * N + expand_dims(rn, 0), mb);
    acc = dot(ta, tb, acc);
  }
  return acc;
}

/// The (row block, column block) of tile t (0 <= t < npm * npn) of an npm x npn grid of C's
/// blocks, in grouped order (Triton's matmul tutorial, GROUP_SIZE_M): tiles walk down a group of
/// GM row blocks before the next column block, so the rows of A and columns of B that the
/// programs resident at one time read are shared through L2 (8192^3 bf16 on the H200, side by side
/// with 128x128x32 blocks and 4 stages: 369 -> 430 TFLOP/s with GM = 16). A bijection of
/// [0, npm * npn) onto the blocks (npm * npn < 2^31).
inline std::pair<tle::Tile<int32_t>, tle::Tile<int32_t>> grouped_tile(tle::Tile<int32_t> t, tle::Tile<int32_t> npm,
                                                                      tle::Tile<int32_t> npn, int GM) {
  using namespace tle;
  Tile<int32_t> per_group = npn * GM;
  Tile<int32_t> first_m = (t / per_group) * GM;
  Tile<int32_t> group_rows = minimum(npm - first_m, GM);
  Tile<int32_t> in_group = t % per_group;
  return {first_m + in_group % group_rows, in_group / group_rows};
}

/// The block of C this program computes: its linear index in the launched grid (num_programs(0)
/// x num_programs(1), axis 0 fastest) in grouped order (grouped_tile).
inline std::pair<tle::Tile<int32_t>, tle::Tile<int32_t>> grouped_block_ids(int GM) {
  using namespace tle;
  Tile<int32_t> npm = num_programs(0), npn = num_programs(1);
  return grouped_tile(program_id(0) + program_id(1) * npm, npm, npn, GM);
}

/// C[M,N] (stored as TO) = A[M,K] @ B[K,N], row-major, accumulated in tle::dot_acc_t<T> (f32
/// for float inputs, i32 for integer ones); one program per BM x BN block of C (matmul_block),
/// launched as Grid(cdiv(M, BM), cdiv(N, BN)); blocks in grouped order (grouped_block_ids, GM
/// row blocks per group).
template <class T, class TO = tle::dot_acc_t<T>, int GM = 16> auto make_matmul() {
  using namespace tle;
  return jit("matmul", [](Ptr<T> a, Ptr<T> b, Ptr<TO> c, Tile<int32_t> M, Tile<int32_t> N, Tile<int32_t> K,
                          Constexpr<int> BM, Constexpr<int> BN, Constexpr<int> BK) {
    auto [pm, pn] = grouped_block_ids(GM);
    Tile<int32_t> rm = pm * BM + arange(0, BM);
    Tile<int32_t> rn = pn * BN + arange(0, BN);
    Tile<dot_acc_t<T>> acc = matmul_block<T>(a, b, rm, rn, M, N, K, BM, BN, BK);
    store(c + expand_dims(rm, 1) * N + expand_dims(rn, 0), cast<TO>(acc),
          expand_dims(rm < M, 1) & expand_dims(rn < N, 0));
  });
}

/// The persistent form of make_matmul (same arguments, same C): launch Grid(P) with P programs,
/// typically the GPU's streaming-multiprocessor count (DeviceInfo::num_sms) times the programs
/// that fit on one, or fewer when C has fewer blocks. Program p computes C's blocks p, p + P,
/// p + 2P, ... (in grouped order, grouped_tile): one launch wave, no tail of idle SMs between
/// waves, and each program's next block starts while other programs are still in their epilogue.
/// The K loop inside is the same device loop as make_matmul's, pipelined the same way.
template <class T, class TO = tle::dot_acc_t<T>, int GM = 16> auto make_matmul_persistent() {
  using namespace tle;
  return jit("matmul_persistent", [](Ptr<T> a, Ptr<T> b, Ptr<TO> c, Tile<int32_t> M, Tile<int32_t> N,
                                     Tile<int32_t> K, Constexpr<int> BM, Constexpr<int> BN, Constexpr<int> BK) {
    Tile<int32_t> npm = (M + (BM - 1)) / BM, npn = (N + (BN - 1)) / BN;
    for (auto t : range(program_id(0), npm * npn, num_programs(0))) {
      auto [pm, pn] = grouped_tile(t, npm, npn, GM);
      Tile<int32_t> rm = pm * BM + arange(0, BM);
      Tile<int32_t> rn = pn * BN + arange(0, BN);
      Tile<dot_acc_t<T>> acc = matmul_block<T>(a, b, rm, rn, M, N, K, BM, BN, BK);
      store(c + expand_dims(rm, 1) * N + expand_dims(rn, 0), cast<TO>(acc),
            expand_dims(rm < M, 1) & expand_dims(rn < N, 0));
    }
  });
}

/// The BM x BN block of A @ B at (m0, n0), A and B read through tensor descriptors (Triton's
/// tensor-descriptor matmul): a describes A[M, K] with block {BM, BK}, b describes B[K, N] with
/// block {BK, BN}; K's tail and the edges read zeros, as TMA does. On sm_90a the K
/// loop's blocks move by TMA into wgmma's swizzled buffers, one thread issuing them
/// (docs/semantics.md, "Tensor descriptors"); elsewhere they are masked loads pipelined with
/// cp.async, as in matmul_block.
template <class T>
tle::Tile<tle::dot_acc_t<T>> matmul_block_tma(const tle::TensorDescriptor<T, 2>& a, const tle::TensorDescriptor<T, 2>& b,
                                              tle::Tile<int32_t> m0, tle::Tile<int32_t> n0, tle::Tile<int32_t> K) {
  using namespace tle;
  const int32_t BM = int32_t(a.block_shape()[0]), BK = int32_t(a.block_shape()[1]), BN = int32_t(b.block_shape()[1]);
  Tile<dot_acc_t<T>> acc = zeros<dot_acc_t<T>>({BM, BN});
  for (auto k : range(0, K, BK)) acc = dot(a.load({m0, k}), b.load({k, n0}), acc);
  return acc;
}

/// make_matmul on tensor descriptors (matmul_block_tma; C through a pointer, as make_matmul's):
/// launch as Grid(cdiv(M, BM), cdiv(N, BN)), the block sizes being the descriptors' blocks.
template <class T, class TO = tle::dot_acc_t<T>, int GM = 16> auto make_matmul_tma() {
  using namespace tle;
  return jit("matmul_tma", [](TensorDescriptor<T, 2> a, TensorDescriptor<T, 2> b, Ptr<TO> c, Tile<int32_t> M,
                              Tile<int32_t> N, Tile<int32_t> K) {
    const int32_t BM = int32_t(a.block_shape()[0]), BN = int32_t(b.block_shape()[1]);
    auto [pm, pn] = grouped_block_ids(GM);
    Tile<int32_t> rm = pm * BM + arange(0, BM), rn = pn * BN + arange(0, BN);
    store(c + expand_dims(rm, 1) * N + expand_dims(rn, 0), cast<TO>(matmul_block_tma<T>(a, b, pm * BM, pn * BN, K)),
          expand_dims(rm < M, 1) & expand_dims(rn < N, 0));
  });
}

/// The persistent form of make_matmul_tma (as make_matmul_persistent is of make_matmul): Grid(P)
/// programs walk C's blocks in grouped order.
template <class T, class TO = tle::dot_acc_t<T>, int GM = 16> auto make_matmul_tma_persistent() {
  using namespace tle;
  return jit("matmul_tma_persistent", [](TensorDescriptor<T, 2> a, TensorDescriptor<T, 2> b, Ptr<TO> c,
                                         Tile<int32_t> M, Tile<int32_t> N, Tile<int32_t> K) {
    const int32_t BM = int32_t(a.block_shape()[0]), BN = int32_t(b.block_shape()[1]);
    Tile<int32_t> npm = (M + (BM - 1)) / BM, npn = (N + (BN - 1)) / BN;
    for (auto t : range(program_id(0), npm * npn, num_programs(0))) {
      auto [pm, pn] = grouped_tile(t, npm, npn, GM);
      Tile<int32_t> rm = pm * BM + arange(0, BM), rn = pn * BN + arange(0, BN);
      store(c + expand_dims(rm, 1) * N + expand_dims(rn, 0), cast<TO>(matmul_block_tma<T>(a, b, pm * BM, pn * BN, K)),
            expand_dims(rm < M, 1) & expand_dims(rn < N, 0));
    }
  });
}

/// Calls block(pm, pn) for the C blocks (BM x BN) this program computes, in grouped order
/// (grouped_tile, GM row blocks per group): PERSISTENT: blocks p, p + P, p + 2P, ... of a
/// Grid(P) launch; else the program's own block of a Grid(cdiv(M, BM), cdiv(N, BN)) launch.
template <bool PERSISTENT, class F>
void for_each_block(tle::Tile<int32_t> M, tle::Tile<int32_t> N, int32_t BM, int32_t BN, int GM, F&& block) {
  using namespace tle;
  if constexpr (PERSISTENT) {
    Tile<int32_t> npm = (M + (BM - 1)) / BM, npn = (N + (BN - 1)) / BN;
    for (auto t : range(program_id(0), npm * npn, num_programs(0))) {
      auto [pm, pn] = grouped_tile(t, npm, npn, GM);
      block(pm, pn);
    }
  } else {
    auto [pm, pn] = grouped_block_ids(GM);
    block(pm, pn);
  }
}

/// The BM x BN block at (m0, n0) of (A @ B) * scale, fp8 A [M, K] and B given as bt [N, K] through
/// descriptors with blocks {BM, BK} and {BN, BK}, f32 accumulation (make_scaled_mm_fp8).
template <class T>
tle::Tile<float> scaled_mm_block_fp8(const tle::TensorDescriptor<T, 2>& a, const tle::TensorDescriptor<T, 2>& bt,
                                     tle::Tile<int32_t> m0, tle::Tile<int32_t> n0, tle::Tile<int32_t> K,
                                     tle::Tile<float> scale) {
  using namespace tle;
  const int32_t BM = int32_t(a.block_shape()[0]), BK = int32_t(a.block_shape()[1]), BN = int32_t(bt.block_shape()[0]);
  Tile<float> acc = zeros<float>({BM, BN});
  for (auto k : range(0, K, BK)) acc = dot(a.load({m0, k}), trans(bt.load({n0, k})), acc);
  return acc * scale;
}

/// The FP8 GEMM of FP8 checkpoints (DeepSeek-V3, Llama FP8) with torch._scaled_mm's contract:
/// C [M, N] (bf16) = (A [M, K] @ B [K, N]) * scale_a * scale_b, A and B fp8 (T: f8e4m3 or f8e5m2),
/// f32 accumulation. ROWWISE = false: per-tensor f32 scales (Tile<float> arguments); true: scales
/// per row of A (scale_a f32 [M]) and column of B (scale_b f32 [N], Ptr<float> arguments: the
/// "rowwise" form, Llama FP8's per-token activation and per-channel weight scales), applied to the
/// f32 accumulator in the epilogue. B is given as its transpose `bt` [N, K] (row-major, i.e. B
/// column-major, as _scaled_mm and cuBLASLt want it): wgmma reads fp8 operands K-major only (PTX
/// ISA 9.7.15.5.1), and A [M, K] and bt [N, K] both are, so on sm_90a each K step's blocks move by
/// TMA into 128-byte-swizzled buffers that `wgmma.m64nNk32` reads in place. `a` has block
/// {BM, BK}, `bt` block {BN, BK} (BK a multiple of 32; rows of A and bt whole 16-byte chunks: K a
/// multiple of 16). PERSISTENT: launch Grid(P) (e.g. the SM count), programs walk C's blocks in
/// grouped order; else Grid(cdiv(M, BM), cdiv(N, BN)), one block per program, whose K loop (directly
/// in the kernel) is warp-specialized on sm_90a (a TMA producer warpgroup beside the launch's warps).
/// Hopper's fp8 tensor cores add each k32 step's products at reduced precision before the f32
/// accumulator (docs/semantics.md, "fp8"); cuBLAS's fp8 GEMM does the same.
template <class T = tle::f8e4m3, bool PERSISTENT = true, bool ROWWISE = false, int GM = 8> auto make_scaled_mm_fp8() {
  using namespace tle;
  using Scale = std::conditional_t<ROWWISE, Ptr<float>, Tile<float>>;
  const char* name = ROWWISE ? (PERSISTENT ? "scaled_mm_fp8_rowwise_persistent" : "scaled_mm_fp8_rowwise")
                             : (PERSISTENT ? "scaled_mm_fp8_persistent" : "scaled_mm_fp8");
  return jit(name, [](TensorDescriptor<T, 2> a, TensorDescriptor<T, 2> bt, Ptr<bf16> c, Scale scale_a, Scale scale_b,
                      Tile<int32_t> M, Tile<int32_t> N, Tile<int32_t> K) {
    const int32_t BM = int32_t(a.block_shape()[0]), BN = int32_t(bt.block_shape()[0]);
    auto block = [&](Tile<int32_t> pm, Tile<int32_t> pn) {
      Tile<int32_t> rm = pm * BM + arange(0, BM), rn = pn * BN + arange(0, BN);
      Tile<float> acc;
      if constexpr (ROWWISE) {
        acc = scaled_mm_block_fp8<T>(a, bt, pm * BM, pn * BN, K, 1.0f);
        acc = acc * expand_dims(load(scale_a + rm, rm < M), 1) * expand_dims(load(scale_b + rn, rn < N), 0);
      } else {
        acc = scaled_mm_block_fp8<T>(a, bt, pm * BM, pn * BN, K, scale_a * scale_b);
      }
      store(c + expand_dims(rm, 1) * N + expand_dims(rn, 0), cast<bf16>(acc),
            expand_dims(rm < M, 1) & expand_dims(rn < N, 0));
    };
    for_each_block<PERSISTENT>(M, N, BM, BN, GM, block);
  });
}

/// make_scaled_mm_fp8 with row-wise scales (ROWWISE = true).
template <class T = tle::f8e4m3, bool PERSISTENT = true, int GM = 8> auto make_scaled_mm_fp8_rowwise() {
  return make_scaled_mm_fp8<T, PERSISTENT, true, GM>();
}

/// C [M, N] (stored as TO) = A [M, K] @ B [K, N], bf16 inputs, f32 accumulation, written with
/// TLE-Struct warp specialization (docs/struct.md, "Warp specialization"; CUTLASS's and
/// ThunderKittens' producer / consumer GEMM): persistent programs walk C's 128 x 256 blocks in
/// grouped order. A producer warpgroup (setmaxnreg 40) moves each K step's [128, 64] block of A
/// and four [64, 64] blocks of B by TMA into a slot of an S-slot tle::pipe (128-byte swizzle),
/// announcing the bytes in its commit; two consumer warpgroups (setmaxnreg 232) wait for the slot,
/// run the step's dot on wgmma straight from it (B read as one [64, 256] tile of the four blocks)
/// and release it; the ring's iteration count runs on across the blocks, and each block's
/// epilogue stores C while the producer already fills the next block's slots. `ad` has block {128, 64}, `bd` block {64, 64} (rows of
/// A and B whole 16-byte chunks: K and N multiples of 8); S stages (3 fit beside the epilogue's
/// staging in 227 KB).
template <class TO = tle::bf16, int GM = 8> auto make_gemm_ws() {
  using namespace tle;
  return jit("gemm_ws", [](TensorDescriptor<bf16, 2> ad, TensorDescriptor<bf16, 2> bd, Ptr<TO> c, Tile<int32_t> M,
                           Tile<int32_t> N, Tile<int32_t> K, Constexpr<int> S) {
    constexpr int BM = 128, BN = 256, BK = 64, NB = BN / 64;
    const auto sw = gpu::SharedLayout::swizzled(8, 1, 8);  // 64 bf16 per row: the 128-byte swizzle
    auto as = gpu::alloc<bf16>({S, BM, BK}, gpu::scope::shared, sw);
    auto bs = gpu::alloc<bf16>({S, NB, BK, 64}, gpu::scope::shared, sw);
    auto ring = pipe(S, std::tuple{as, bs});  // slot s: stage s of A's and of B's blocks
    Tile<int32_t> npm = (M + (BM - 1)) / BM, npn = (N + (BN - 1)) / BN, steps = (K + (BK - 1)) / BK;
    gpu::warp_specialize({
        gpu::Role(4, 40, [&] {  // producer
          auto w = ring.writer();
          Tile<int32_t> used = zeros<int32_t>({});  // K steps filled so far: the ring's iteration count
          for (auto t : range(program_id(0), npm * npn, num_programs(0))) {
            auto [pm, pn] = grouped_tile(t, npm, npn, GM);
            for (auto k : range(0, steps)) {
              Tile<int32_t> i = used + k;
              auto slot = w.acquire(i);  // the consumers are done with the slot's last use
              w.commit(i, ring.slot_bytes());
              gpu::copy(ad, {pm * BM, k * BK}, slot.get<0>(), slot.ready);
              for (int j = 0; j < NB; ++j) gpu::copy(bd, {k * BK, pn * BN + j * 64}, slot.get<1>()[j], slot.ready);
            }
            used = used + steps;
          }
        }),
        gpu::Role(8, 232, [&] {  // consumers
          auto r = ring.reader();
          Tile<int32_t> used = zeros<int32_t>({});
          Tile<int32_t> kk = expand_dims(arange(0, BK), 1), nn = expand_dims(arange(0, BN), 0);
          for (auto t : range(program_id(0), npm * npn, num_programs(0))) {
            auto [pm, pn] = grouped_tile(t, npm, npn, GM);
            Tile<float> acc = zeros<float>({BM, BN});
            for (auto k : range(0, steps)) {
              Tile<int32_t> i = used + k;
              auto slot = r.wait(i);
              acc = dot(slot.get<0>().load(), load(gpu::local_ptr(slot.get<1>(), {nn / 64, kk, nn % 64})), acc);
              r.release(i);
            }
            used = used + steps;
            Tile<int32_t> rm = pm * BM + arange(0, BM), rn = pn * BN + arange(0, BN);
            store(c + expand_dims(rm, 1) * N + expand_dims(rn, 0), cast<TO>(acc),
                  expand_dims(rm < M, 1) & expand_dims(rn < N, 0));
          }
        }),
    });
  });
}

/// The softmax half of attention_block (below): masks s as it does, updates m_i and l_i, sets alpha
/// (2^(m_old - m_new), the factor acc must be scaled by) and returns p = 2^(s * qk_scale - m_new)
/// in T, the left operand of the block's dot(p, v).
template <class T>
tle::Tile<T> attention_softmax(tle::Tile<float> s, tle::Tile<float> qk_scale, tle::Tile<int32_t> rm,
                               tle::Tile<int32_t> rn, tle::Tile<int32_t> S, bool causal, tle::Tile<float>& m_i,
                               tle::Tile<float>& l_i, tle::Tile<float>& alpha, bool masked = true) {
  using namespace tle;
  if (masked) {
    Tile<bool> keep = expand_dims(rn < S, 0);
    if (causal) keep = keep & (expand_dims(rm, 1) >= expand_dims(rn, 0));
    s = where(keep, s, -INFINITY);
  }
  Tile<float> m_new = maximum(m_i, max(s, 1) * qk_scale);
  alpha = exp2(m_i - m_new);
  Tile<float> p = exp2(fma(s, qk_scale, -expand_dims(m_new, 1)));
  l_i = l_i * alpha + sum(p, 1);
  m_i = m_new;
  return cast<T>(p);
}

/// One key block of the attention loop (make_attention, make_attention_tma, make_attention_ws):
/// the scores s [BM, BN] (q k^T, unscaled) of the keys at rn are masked to the keys below S (and,
/// when causal, at or before each query row rm) unless `masked` is false (a block known to need
/// no mask), then folded into the running row maximum m_i (of the scaled scores), row sum l_i and
/// output acc with the value block load_v() returns ([BN, D] T; loaded where this step needs it):
/// m_new = max(m, rowmax s * qk_scale); alpha = 2^(m - m_new); p = 2^(s * qk_scale - m_new) (one
/// fma per score); l = l * alpha + rowsum p; acc = dot(p, v, acc * alpha).
template <class T, class LoadV>
void attention_block(tle::Tile<float> s, tle::Tile<float> qk_scale, tle::Tile<int32_t> rm, tle::Tile<int32_t> rn,
                     tle::Tile<int32_t> S, bool causal, tle::Tile<float>& m_i, tle::Tile<float>& l_i,
                     tle::Tile<float>& acc, LoadV load_v, bool masked = true) {
  using namespace tle;
  Tile<float> alpha;
  Tile<T> pt = attention_softmax<T>(s, qk_scale, rm, rn, S, causal, m_i, l_i, alpha, masked);
  Tile<float> scaled = acc * expand_dims(alpha, 1);
  acc = dot(pt, load_v(), scaled);  // (load_v may wait: the math above runs before it)
}

/// Attention forward, FlashAttention-2 structure (Dao 2023, Algorithm 1) as a user writes it in
/// plain tle: O = softmax(Q K^T * sm_scale) V for q, k, v, o of shape [batch * heads, S, D] (rows of
/// D contiguous T), causal or not. Program (i, bh) computes BM query rows of head bh: it walks the
/// keys in blocks of BN (up to its own last row when causal) with the online softmax in base 2
/// (qk_scale = sm_scale * log2(e) > 0): s = dot(q, trans(k)), masked; m_new = max(m, rowmax s *
/// qk_scale); alpha = 2^(m - m_new); p = 2^(s * qk_scale - m_new); l = l * alpha + rowsum p; acc =
/// dot(p, v, acc * alpha); finally O = acc / l (attention_block). Launch as Grid(cdiv(S, BM),
/// batch * heads). D a power of two; S any.
template <class T> auto make_attention() {
  using namespace tle;
  return jit("attention", [](Ptr<T> q, Ptr<T> k, Ptr<T> v, Ptr<T> o, Tile<int32_t> S, Tile<float> qk_scale,
                             Constexpr<int> BM, Constexpr<int> BN, Constexpr<int> D, Constexpr<bool> CAUSAL) {
    Tile<int32_t> start_m = program_id(0) * BM;
    Tile<int64_t> head = program_id(1).to<int64_t>() * S * D;  // this (batch, head)'s [S, D] block
    Tile<int32_t> rm = start_m + arange(0, BM), rd = arange(0, D);
    Tile<bool> row_ok = rm < S;
    Tile<T> tq = load(q + head + expand_dims(rm, 1) * D + expand_dims(rd, 0), expand_dims(row_ok, 1));
    Tile<float> m_i = full<float>({BM}, -INFINITY), l_i = zeros<float>({BM});
    Tile<float> acc = zeros<float>({BM, D});
    Tile<int32_t> hi = CAUSAL ? minimum(start_m + BM, S) : S;
    for (auto n0 : range(0, hi, BN)) {
      Tile<int32_t> rn = n0 + arange(0, BN);
      Tile<bool> col_ok = rn < S;
      Tile<int64_t> kv = head + expand_dims(rn, 1) * D + expand_dims(rd, 0);
      Tile<T> tk = load(k + kv, expand_dims(col_ok, 1));
      attention_block<T>(dot(tq, trans(tk)), qk_scale, rm, rn, S, CAUSAL, m_i, l_i, acc,
                         [&] { return load(v + kv, expand_dims(col_ok, 1)); });
    }
    store(o + head + expand_dims(rm, 1) * D + expand_dims(rd, 0), cast<T>(acc / expand_dims(l_i, 1)),
          expand_dims(row_ok, 1));
  });
}

/// make_attention with q, k and v read through tensor descriptors (on sm_90a: TMA, the K loop's k
/// and v blocks pipelined into wgmma's buffers): each describes the [batch * heads * S, D] rows
/// (D contiguous T, a multiple of 8 for bf16/f16), q with block {BM, D}, k and v with block {BN, D}.
/// A block that runs past its head's S rows reads the next head's rows (zeros after the last):
/// their scores are masked to -inf and their p to 0, as make_attention's masked loads give, so O
/// is the same. o is [batch * heads, S, D] as in make_attention. Launch as Grid(cdiv(S, BM),
/// batch * heads).
/// Overlap = true: FlashAttention-3's intra-warpgroup overlap (Shah et al. 2024, section 3.2)
/// written as a user would: each iteration first issues the next key block's scores, s_next =
/// dot(q, k_{j+1}^T), then runs the softmax of block j and dot(p, v_j) - on sm_90a the dot's
/// wgmma is waited for only at the end of the iteration (where s_next is carried), so the softmax
/// runs under it; from 4 stages dot(p, v_j) also stays in flight until the next iteration scales
/// acc. The last iteration's s_next reads the rows past the program's last block (zeros, or the
/// next head's) and is never used.
template <class T, bool Overlap = false> auto make_attention_tma() {
  using namespace tle;
  return jit(Overlap ? "attention_tma_overlap" : "attention_tma", [](TensorDescriptor<T, 2> q, TensorDescriptor<T, 2> k,
                                                                      TensorDescriptor<T, 2> v, Ptr<T> o, Tile<int32_t> S,
                                                                      Tile<float> qk_scale, Constexpr<bool> CAUSAL) {
    const int32_t BM = int32_t(q.block_shape()[0]), D = int32_t(q.block_shape()[1]), BN = int32_t(k.block_shape()[0]);
    // Row blocks count down along x: when causal, the longest rows start first.
    Tile<int32_t> start_m = (num_programs(0) - 1 - program_id(0)) * BM;
    Tile<int32_t> row0 = program_id(1) * S;  // this (batch, head)'s first row
    Tile<int32_t> rm = start_m + arange(0, BM), rd = arange(0, D);
    Tile<T> tq = q.load({row0 + start_m, 0});
    Tile<float> m_i = full<float>({BM}, -INFINITY), l_i = zeros<float>({BM});
    Tile<float> acc = zeros<float>({BM, D});
    // Key blocks below `unmasked_hi` need no mask (left of the causal diagonal, or wholly inside
    // S); the rest, up to `hi`, are masked in a loop of their own (as Triton's fused-attention
    // tutorial splits its loop).
    Tile<int32_t> hi = CAUSAL ? minimum(start_m + BM, S) : S;
    Tile<int32_t> unmasked_hi = CAUSAL ? start_m - start_m % BN : S - S % BN;
    if constexpr (Overlap) {
      Tile<float> s = dot(tq, trans(k.load({row0, 0})));  // key block 0
      for (int masked = 0; masked < 2; ++masked)
        for (auto n0 : range(masked ? unmasked_hi : Tile<int32_t>(0), masked ? hi : unmasked_hi, BN)) {
          Tile<float> s_next = dot(tq, trans(k.load({row0 + n0 + BN, 0})));
          attention_block<T>(s, qk_scale, rm, n0 + arange(0, BN), S, CAUSAL, m_i, l_i, acc,
                             [&] { return v.load({row0 + n0, 0}); }, masked);
          s = s_next;
        }
    } else {
      for (int masked = 0; masked < 2; ++masked)
        for (auto n0 : range(masked ? unmasked_hi : Tile<int32_t>(0), masked ? hi : unmasked_hi, BN)) {
          Tile<int32_t> rn = n0 + arange(0, BN);
          attention_block<T>(dot(tq, trans(k.load({row0 + n0, 0}))), qk_scale, rm, rn, S, CAUSAL, m_i, l_i, acc,
                             [&] { return v.load({row0 + n0, 0}); }, masked);
        }
    }
    Tile<int64_t> head = program_id(1).to<int64_t>() * S * D;
    store(o + head + expand_dims(rm, 1) * D + expand_dims(rd, 0), cast<T>(acc / expand_dims(l_i, 1)),
          expand_dims(rm < S, 1));
  });
}

/// Attention forward written with TLE-Struct (FlashAttention-3's structure, Shah et al. 2024,
/// without its intra-warpgroup overlap): O = softmax(Q K^T * sm_scale) V, causal or not, for q, k,
/// v described by 2-D tensor descriptors over the [batch * heads * S, D] rows (D contiguous T,
/// bf16 or f16; D 64 or 128) with blocks {64, 64} for q and {BN, 64} for k and v (BN = 64 or 128):
/// row blocks move as D / 64 boxes of 64 columns (128 bytes, the 128-byte swizzle). o is
/// [batch * heads, S, D] T; qk_scale = sm_scale * log2(e) > 0. A program computes 128 query rows:
/// launch as Grid(cdiv(S, 128), batch * heads), as make_attention: the programs of one head run
/// side by side and share its keys and values in L2 (with the head along x, each wave of
/// programs streamed a different head's whole K and V from DRAM: 8 GB a forward at 4x32x4096x128);
/// within a head the row block counts down along x (the longest causal rows start first).
/// A producer warpgroup (24 registers) copies q once and the key and value blocks through two
/// tle::pipe rings of ST slots each (2 at D = 128, BN = 128: 32 KB per block) read by both
/// consumers (readers = 2), so a key slot is released as soon as q k^T is done.
/// Two consumer warpgroups (240 registers), one role each, own 64 query rows each: they read q and
/// the key block in place for s = q k^T (wgmma, both operands in shared memory), run the online
/// softmax (attention_block; masking only the blocks at the causal diagonal or past S, in a loop
/// of their own) and read the value block in place for acc = dot(p, v, acc * alpha) with p from
/// registers. PINGPONG: the two take turns at the tensor cores, one dot each (an mbarrier per
/// consumer, FlashAttention-3's ping-pong schedule), so one's softmax runs under the other's
/// dots. Key blocks past a head's S rows read the next head's rows (zeros past the last) and are
/// masked, as in make_attention_tma. (q is read in place by every s = q k^T: a variant holding it
/// in registers, loaded once from its buffer, gave wrong results on the GPU and was taken out.)
/// Overlap = true adds FlashAttention-3's intra-warpgroup overlap (section 3.2 of the paper): a
/// consumer issues the next key block's s = q k^T before the softmax of the current block, and
/// on sm_90a that wgmma is waited for only at the end of the iteration (where the value slot is
/// released), so the softmax runs under it. Overlap with PINGPONG: FlashAttention-3's schedule
/// with one turn per key block: a consumer issues s_j = q k_j^T and acc += p_{j-1} v_{j-1} in its
/// turn, then runs block j's softmax while the other consumer's two dots run.
template <class T, bool Overlap = false> auto make_attention_ws() {
  using namespace tle;
  return jit(Overlap ? "attention_ws_overlap" : "attention_ws", [](TensorDescriptor<T, 2> qd, TensorDescriptor<T, 2> kd,
                                                                    TensorDescriptor<T, 2> vd, Ptr<T> o, Tile<int32_t> S,
                                                                    Tile<float> qk_scale, Constexpr<int> D,
                                                                    Constexpr<bool> CAUSAL, Constexpr<int> ST,
                                                                    Constexpr<bool> PINGPONG) {
    constexpr int RM = 64, BM = 2 * RM;  // rows per consumer warpgroup, per program
    const int32_t BN = int32_t(kd.block_shape()[0]), H = D / 64, bytes = int32_t(sizeof(T));
    const auto sw = gpu::SharedLayout::swizzled(8, 1, 8);  // 64 16-bit elements per row: the 128-byte swizzle
    auto qs = gpu::alloc<T>({2, H, RM, 64}, gpu::scope::shared, sw);
    auto ks = gpu::alloc<T>({ST, H, BN, 64}, gpu::scope::shared, sw);
    auto vs = gpu::alloc<T>({ST, H, BN, 64}, gpu::scope::shared, sw);
    auto q_ready = gpu::alloc_mbarriers(1);
    auto kp = pipe(ST, ks, {.readers = 2}), vp = pipe(ST, vs, {.readers = 2});  // both consumers read each block
    auto turn = gpu::alloc_mbarriers(2);  // PINGPONG: turn[w] completes a phase when consumer w may issue a dot
    Tile<int32_t> start_m = (num_programs(0) - 1 - program_id(0)) * BM, row0 = program_id(1) * S;
    Tile<int32_t> blocks = ((CAUSAL ? minimum(start_m + BM, S) : S) + (BN - 1)) / BN;
    // The blocks before `unmasked` hold only keys below S (and, when causal, at or before every row).
    Tile<int32_t> unmasked = minimum(blocks, CAUSAL ? minimum(S / BN, (start_m + 1) / BN) : S / BN);
    auto producer = [&] {
      gpu::arrive_expect_tx(q_ready[0], BM * D * bytes);
      for (int w = 0; w < 2; ++w)
        for (int h = 0; h < H; ++h) gpu::copy(qd, {row0 + start_m + w * RM, h * 64}, qs[w][h], q_ready[0]);
      auto kw = kp.writer(), vw = vp.writer();
      for (auto j : range(0, blocks)) {
        auto k_slot = kw.acquire(j);  // both consumers are done with the slot's last key block
        kw.commit(j, kp.slot_bytes());
        for (int h = 0; h < H; ++h) gpu::copy(kd, {row0 + j * BN, h * 64}, k_slot.buffer()[h], k_slot.ready);
        auto v_slot = vw.acquire(j);
        vw.commit(j, vp.slot_bytes());
        for (int h = 0; h < H; ++h) gpu::copy(vd, {row0 + j * BN, h * 64}, v_slot.buffer()[h], v_slot.ready);
      }
    };
    auto consumer = [&](int w) {
      return [&, w] {
        Tile<int32_t> rm = start_m + w * RM + arange(0, RM);
        Tile<int32_t> rows = expand_dims(arange(0, RM), 1), cols = expand_dims(arange(0, D), 0);  // q: [RM, D]
        Tile<int32_t> kk = expand_dims(arange(0, D), 1), kn = expand_dims(arange(0, BN), 0);      // k^T: [D, BN]
        Tile<int32_t> vn = expand_dims(arange(0, BN), 1);                                        // v: [BN, D]
        Tile<float> m_i = full<float>({RM}, -INFINITY), l_i = zeros<float>({RM}), acc = zeros<float>({RM, D});
        // Turn t of consumer w (two per block: one per dot); consumer 0's first passes at once.
        auto my_turn = [&](const Tile<int32_t>& t) {
          if (PINGPONG) gpu::wait(turn[w], w == 0 ? t + 1 : t);
        };
        auto pass_turn = [&] {
          if (PINGPONG) gpu::arrive(turn[1 - w]);
        };
        gpu::wait(q_ready[0], 0);
        auto q_tile = [&] { return load(gpu::local_ptr(qs[w], {cols / 64, rows, cols % 64})); };  // read in place
        auto kr = kp.reader(), vr = vp.reader();
        auto step = [&](const Tile<int32_t>& j, bool masked) {
          auto k_slot = kr.wait(j);
          my_turn(2 * j);
          Tile<float> sc = dot(q_tile(), load(gpu::local_ptr(k_slot.buffer(), {kk / 64, kn, kk % 64})));
          pass_turn();
          kr.release(j);
          attention_block<T>(sc, qk_scale, rm, j * BN + arange(0, BN), S, CAUSAL, m_i, l_i, acc, [&] {
            auto v_slot = vr.wait(j);
            my_turn(2 * j + 1);
            return load(gpu::local_ptr(v_slot.buffer(), {cols / 64, vn, cols % 64}));
          }, masked);
          pass_turn();
          vr.release(j);
        };
        auto scores = [&](const Tile<int32_t>& j) {  // s of key block j (in flight until first read)
          auto k_slot = kr.wait(j);
          return dot(q_tile(), load(gpu::local_ptr(k_slot.buffer(), {kk / 64, kn, kk % 64})));
        };
        if (Overlap && PINGPONG) {
          // FlashAttention-3's schedule (Shah et al. 2024, Algorithm 2 with the ping-pong of
          // section 3.1): in its turn a consumer issues s_j = q k_j^T and acc += p_{j-1} v_{j-1}
          // back to back, passes the turn once they are done, and runs block j's softmax while the
          // other consumer's two dots run; acc is then scaled by block j's alpha (acc_j = (acc_{j-1}
          // + p_{j-1} v_{j-1}) alpha_j: the same sums as attention_block's order).
          auto value = [&](const Tile<int32_t>& j) {
            auto v_slot = vr.wait(j);
            return load(gpu::local_ptr(v_slot.buffer(), {cols / 64, vn, cols % 64}));
          };
          Tile<int32_t> last = blocks - 1, first_masked = maximum(unmasked, Tile<int32_t>(1));
          my_turn(0);
          Tile<float> s0 = scores(0);
          pass_turn();
          Tile<float> alpha0;
          Tile<T> p = attention_softmax<T>(s0, qk_scale, rm, arange(0, BN), S, CAUSAL, m_i, l_i, alpha0);  // (acc is 0)
          kr.release(0);
          for (int masked = 0; masked < 2; ++masked)
            for (auto j : range(masked ? first_masked : Tile<int32_t>(1), masked ? blocks : first_masked)) {
              my_turn(j);
              Tile<float> sc = scores(j);
              acc = dot(p, value(j - 1), acc);
              pass_turn();  // (the arrival waits for both dots: the other consumer's run next)
              Tile<float> alpha;
              p = attention_softmax<T>(sc, qk_scale, rm, j * BN + arange(0, BN), S, CAUSAL, m_i, l_i, alpha, masked);
              kr.release(j);
              vr.release(j - 1);
              acc = acc * expand_dims(alpha, 1);
            }
          my_turn(blocks);
          acc = dot(p, value(last), acc);
          pass_turn();
          vr.release(last);
        } else if constexpr (Overlap) {
          auto block = [&](const Tile<int32_t>& j, const Tile<float>& sc, bool masked) {
            attention_block<T>(sc, qk_scale, rm, j * BN + arange(0, BN), S, CAUSAL, m_i, l_i, acc, [&] {
              auto v_slot = vr.wait(j);
              return load(gpu::local_ptr(v_slot.buffer(), {cols / 64, vn, cols % 64}));
            }, masked);
          };
          Tile<float> sc = scores(0);
          Tile<int32_t> last = blocks - 1, split = minimum(unmasked, last);
          auto overlapped = [&](const Tile<int32_t>& j, bool masked) {
            kr.release(j);  // s of block j was waited for at the end of the last iteration
            Tile<float> s_next = scores(j + 1);
            block(j, sc, masked);
            vr.release(j);  // (after waiting for both dots: an arrival waits for every pending wgmma)
            sc = s_next;
          };
          for (auto j : range(0, split)) overlapped(j, false);
          for (auto j : range(split, last)) overlapped(j, true);
          kr.release(last);
          block(last, sc, true);
          vr.release(last);
        } else {
          for (auto j : range(0, unmasked)) step(j, false);
          for (auto j : range(unmasked, blocks)) step(j, true);
        }
        Tile<int64_t> head = program_id(1).to<int64_t>() * S * D;
        store(o + head + expand_dims(rm, 1) * D + cols, cast<T>(acc / expand_dims(l_i, 1)), expand_dims(rm < S, 1));
      };
    };
    gpu::warp_specialize({gpu::Role(4, 24, producer), gpu::Role(4, 240, consumer(0)), gpu::Role(4, 240, consumer(1))});
  });
}

/// The reference for make_attention: row `i` of head `bh` (q, k, v as there, [*, S, D]), in double,
/// into out[0 .. D).
template <class T>
void attention_row_reference(const T* q, const T* k, const T* v, int S, int D, int bh, int i, bool causal,
                             double sm_scale, double* out) {
  const size_t base = size_t(bh) * S * D;
  const int n = causal ? i + 1 : S;
  std::vector<double> s(static_cast<size_t>(n));
  double m = -INFINITY;
  for (int j = 0; j < n; ++j) {
    double d = 0;
    for (int c = 0; c < D; ++c) d += double(float(q[base + size_t(i) * D + c])) * double(float(k[base + size_t(j) * D + c]));
    s[size_t(j)] = d * sm_scale;
    m = std::max(m, s[size_t(j)]);
  }
  double l = 0;
  for (int j = 0; j < n; ++j) l += (s[size_t(j)] = std::exp(s[size_t(j)] - m));
  for (int c = 0; c < D; ++c) {
    double a = 0;
    for (int j = 0; j < n; ++j) a += s[size_t(j)] * double(float(v[base + size_t(j) * D + c]));
    out[c] = a / l;
  }
}

/// What an attention example compares: output rows of o ([BH, S, D], as make_attention's) in
/// `got` and attention_row_reference's in `want`, for every (head, row) or, when `sampled`, 512
/// (head, row) pairs spread over the heads and rows.
template <class T>
void attention_rows(const T* q, const T* k, const T* v, const T* o, int BH, int S, int D, bool causal,
                    double sm_scale, bool sampled, std::vector<float>& got, std::vector<float>& want) {
  std::vector<std::pair<int, int>> rows;
  if (sampled) {
    for (size_t s = 0; s < 512; ++s) rows.push_back({int((s * 2654435761ull) % BH), int((s * 40503ull + 7) % S)});
  } else {
    for (int h = 0; h < BH; ++h)
      for (int i = 0; i < S; ++i) rows.push_back({h, i});
  }
  got.clear();
  want.clear();
  std::vector<double> ref(static_cast<size_t>(D));
  for (auto [h, i] : rows) {
    attention_row_reference(q, k, v, S, D, h, i, causal, sm_scale, ref.data());
    for (int c = 0; c < D; ++c) {
      got.push_back(float(o[(size_t(h) * S + i) * D + c]));
      want.push_back(float(ref[size_t(c)]));
    }
  }
}

}  // namespace ex
