// tle/ops/gemm_reduce_scatter.hpp - C = reduce_scatter(A @ B) over a device mesh, the exchange
// overlapped with the GEMM (tensor-parallel row-parallel layers, the mirror of all_gather_gemm;
// issue #17 item 4), written in tle itself.
//
//   tle::ops::GemmReduceScatter<tle::bf16> rs(mesh, m, n, k);  // output shards of m x n
//   mesh.run([&](tle::Rank& r) {
//     rs(r, a[r], b[r], c[r]);   // a: [ranks * m, k], b: [k, n] (this rank's K slice), c: [m, n]
//   });
//
// Rank r holds A_r [ranks * m, k] and B_r [k, n] (its slice of the contraction: row-major, device
// memory on the GPU, host memory on a CPU mesh) and gets rows [r * m, (r + 1) * m) of
// sum_q A_q @ B_q: C_r [m, n]. Partial products are f32 and summed in f32 in rank order, then
// rounded once to T.
//
// How: one persistent GEMM kernel per rank computes its partial product tile by tile, the row
// blocks of rank me + 1 first, then me + 2, ..., its own last, and stores each f32 tile straight
// into the owner's staging buffer (symmetric memory, slot me: remote stores over NVLink while the
// next tiles compute), then adds 1 to the owner's arrival counter for it (signal, Add). A second
// kernel on each rank sums its staging slots into C once every rank's tiles for it arrived; the
// stream waits for the counters (Rank::wait_signal: a one-warp kernel, so one warp spins, not a
// grid: two ranks' kernels can share one GPU). Calls are numbered (epochs: the
// counters reach epoch x tiles); before writing into rank q's slot again a rank's stream waits
// until q's previous reduction signalled that it read it.
// Every rank must make the same calls in the same order with the same m, n, k.
//
// Not the peak form yet: the pointer-based K loop (wgmma on sm_90a), BM 128, BN 128, BK 64, 8 warps.
#pragma once
#include <cstdint>
#include <vector>

#include "tle/ops/all_gather_gemm.hpp"

namespace tle::ops {

namespace detail {
/// The partial-product kernel (see the top of the file).
template <class T> auto& gemm_rs_partial_kernel() {
  static auto k = jit("gemm_rs_partial", [](Ptr<T> a, Ptr<T> b, Ptr<float> staging, Ptr<uint64_t> arrived,
                                            Tile<int32_t> m, Tile<int32_t> n, Tile<int32_t> k, Constexpr<int> BM,
                                            Constexpr<int> BN, Constexpr<int> BK) {
    Tile<int32_t> ranks = num_shards(), me = shard_id();
    Tile<int32_t> npm = (m + (BM - 1)) / BM, npn = (n + (BN - 1)) / BN;
    Tile<int32_t> per_shard = npm * npn;
    for (auto t : range(program_id(0), ranks * per_shard, num_programs(0))) {
      Tile<int32_t> owner = (me + 1 + t / per_shard) % ranks;  // me + 1, me + 2, ..., me
      auto [pm, pn] = ag_grouped_tile(t % per_shard, npm, npn, 8);
      Tile<int32_t> lm = pm * BM + arange(0, BM);  // rows within the owner's shard
      Tile<int32_t> rn = pn * BN + arange(0, BN);
      Tile<int32_t> rm = owner * m + lm;
      Tile<float> acc = shard_tile_product(a, b, rm, lm, rn, m, n, k, BK);
      // The owner's slot `me`: staging [ranks, m, n] f32.
      store(remote(staging, owner) + (me * m + expand_dims(lm, 1)) * n + expand_dims(rn, 0), acc,
            expand_dims(lm < m, 1) & expand_dims(rn < n, 0));
      signal(arrived + me, uint64_t{1}, owner, ir::SignalOp::Add);
    }
  });
  return k;
}

/// c [m, n] = sum over the slots of staging [ranks, m, n], in slot order, rounded to T.
template <class T> auto& gemm_rs_reduce_kernel() {
  static auto k = jit("gemm_rs_reduce", [](Ptr<float> staging, Ptr<T> c, Tile<int64_t> numel, Tile<int32_t> ranks,
                                           Constexpr<int> BLOCK) {
    Tile<int64_t> offs = cast<int64_t>(program_id(0)) * BLOCK + cast<int64_t>(arange(0, BLOCK));
    Tile<bool> mask = offs < numel;
    Tile<float> s = zeros<float>({BLOCK});
    for (auto q : range(0, ranks)) s = s + load(staging + cast<int64_t>(q) * numel + offs, mask, 0.0f);
    store(c + offs, cast<T>(s), mask);
  });
  return k;
}
}  // namespace detail

/// The workspace and state of C = reduce_scatter(A @ B) on one mesh for output shards of m x n
/// and contraction slices of k (see the top of the file). T: tle::bf16, tle::f16 or float.
/// Construct it on the host thread (symmetric memory: a staging buffer of ranks * m * n floats,
/// two flag arrays); call it on every rank's thread inside Mesh::run. UserError at the caller's
/// line for m, n or k < 1.
template <class T> class GemmReduceScatter {
 public:
  GemmReduceScatter(Mesh& mesh, int64_t m, int64_t n, int64_t k, loc_t l = loc_t::current())
      : mesh_(mesh), m_(m), n_(n), k_(k) {
    detail::check_mesh_gemm_shape("GemmReduceScatter", mesh.size(), m, n, k, SrcLoc(l));
    staging_ = mesh.alloc_symmetric<float>(static_cast<size_t>(mesh.size() * m * n), l);
    arrived_ = mesh.alloc_symmetric<uint64_t>(static_cast<size_t>(mesh.size()), l);
    done_ = mesh.alloc_symmetric<uint64_t>(static_cast<size_t>(mesh.size()), l);
    epochs_.assign(static_cast<size_t>(mesh.size()), 0);
  }

  /// On rank r's thread: c [m, n] = rows [r m, (r + 1) m) of sum over ranks of a [ranks m, k] @ b
  /// [k, n], queued on r's stream (GPU; at once on the CPU).
  void operator()(Rank& r, const T* a, const T* b, T* c, loc_t l = loc_t::current()) {
    detail::check_mesh_gemm_call("GemmReduceScatter", mesh_, r, a, b, c, SrcLoc(l));
    const int ranks = r.size(), me = r.id();
    const uint64_t epoch = ++epochs_[static_cast<size_t>(me)];
    const int64_t tiles = ((m_ + 127) / 128) * ((n_ + 127) / 128);  // per owner
    // Every owner's previous reduction read this rank's slot in it.
    if (epoch > 1)
      for (int q = 0; q < ranks; ++q) r.wait_signal(done_.local(me, l) + q, epoch - 1);
    int64_t programs = 1;  // a CPU rank runs its programs in order: one program walks every tile
    if (mesh_.backend() == Backend::GPU) {
      programs = ranks * tiles;
      if (auto info = gpu_info(r.device())) programs = std::min<int64_t>(programs, info->num_sms);
    }
    detail::gemm_rs_partial_kernel<T>()(Grid(programs, 1, 1, l).with_warps(8).on(r.stream()), a, b,
                                        staging_.local(me, l), arrived_.local(me, l), static_cast<int32_t>(m_),
                                        static_cast<int32_t>(n_), static_cast<int32_t>(k_), 128, 128, 64);
    for (int q = 0; q < ranks; ++q) r.wait_signal(arrived_.local(me, l) + q, epoch * static_cast<uint64_t>(tiles));
    const int64_t numel = m_ * n_, block = 1024;
    detail::gemm_rs_reduce_kernel<T>()(Grid((numel + block - 1) / block, 1, 1, l).on(r.stream()),
                                       staging_.local(me, l), c, numel, ranks, static_cast<int>(block));
    for (int q = 0; q < ranks; ++q) r.signal(done_.local(q, l) + me, epoch);  // this rank read q's slot
  }

 private:
  Mesh mesh_;
  int64_t m_, n_, k_;
  SymmetricBuffer<float> staging_;
  SymmetricBuffer<uint64_t> arrived_, done_;
  std::vector<uint64_t> epochs_;
};

}  // namespace tle::ops
