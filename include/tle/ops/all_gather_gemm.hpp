// tle/ops/all_gather_gemm.hpp - C = all_gather(A) @ B over a device mesh, the gather overlapped
// with the GEMM (tensor-parallel column-parallel layers; issue #17 item 4), written in tle itself.
//
//   tle::Mesh mesh = tle::Mesh::gpus({0, 1});
//   tle::ops::AllGatherGemm<tle::bf16> ag(mesh, m, n, k);   // workspace for A shards of m x k
//   mesh.run([&](tle::Rank& r) {
//     ag(r, a[r], b[r], c[r]);    // a: this rank's [m, k] shard, b: [k, n], c: [ranks * m, n]
//   });
//
// Every rank holds a row shard A_r [m, k] and its own B [k, n] (row-major, device memory on the
// GPU, host memory on a CPU mesh) and gets C [ranks * m, n] = [A_0; A_1; ...] @ B, rows of shard q at
// q * m. C's elements are f32-accumulated dot products rounded once to T.
//
// How (the structure of FlagTree's and Triton-distributed's AG-GEMM, notes 5.3):
//   - the gather is the copy engine's: each rank pushes its shard into every rank's gather buffer
//     (symmetric memory, shard q at rows q * m), itself first, then rank + 1, rank + 2, ..., each
//     copy followed by a flag (Rank::put_signal: cuMemcpyAsync + cuStreamWriteValue64), on a copy
//     stream of the rank's that waits for the work queued before the call on the rank's stream
//     (whatever produced A_r);
//   - the GEMM is one persistent kernel on the rank's stream: its programs walk C's tiles shard by
//     shard in arrival order (own shard, rank - 1, rank - 2, ...) and, before a tile, wait for its
//     shard's flag (signal_wait), so the GEMM of the shards that arrived overlaps the copies of
//     the others; inside a shard tiles go in grouped order;
//   - a call's flags carry the call's number (an epoch; flags count up, never reset), and before
//     pushing into rank p's gather buffer a rank waits (on its copy stream) until p's GEMM of the
//     previous call is done with it (p signals every rank after its kernel);
//   - the GEMM starts once every rank's copy stream reached the call (a `ready` flag from each),
//     so its spinning programs wait only for copy-engine work, never for a kernel another rank
//     sharing the GPU queued before; the rank's stream then waits for its own pushes, so later
//     work may overwrite a.
// A call that failed on one rank leaves the ranks' epochs out of step: later calls on that object
// time out; make a new one.
// Every rank must make the same calls in the same order with the same m, n, k (the flags of a call
// nobody answers time out: MeshOptions::timeout_s).
//
// Not the peak form yet: the GEMM is the pointer-based persistent K loop (no TMA, no warp
// specialization; on sm_90a its dots run on wgmma), one configuration (BM 128, BN 128, BK 64, 8
// warps, 3 stages on the GPU).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <mutex>
#include <vector>

#include "tle/kernel.hpp"
#include "tle/mesh.hpp"

namespace tle::ops {

namespace detail {
/// The tile (row block, column block) of t in grouped order over an npm x npn grid (Triton's
/// matmul tutorial, GROUP_SIZE_M = gm).
inline std::pair<Tile<int32_t>, Tile<int32_t>> ag_grouped_tile(Tile<int32_t> t, Tile<int32_t> npm, Tile<int32_t> npn,
                                                               int gm) {
  Tile<int32_t> per_group = npn * gm;
  Tile<int32_t> first_m = (t / per_group) * gm;
  Tile<int32_t> rows = minimum(npm - first_m, gm);
  Tile<int32_t> in_group = t % per_group;
  return {first_m + in_group % rows, in_group / rows};
}

/// The f32 product of rows rm of a [*, k] (those whose row within the shard, lm, is below m) and
/// columns rn of b [k, n]: the K loop of both mesh GEMMs (masked tails read 0).
template <class T>
Tile<float> shard_tile_product(Ptr<T> a, Ptr<T> b, Tile<int32_t> rm, Tile<int32_t> lm, Tile<int32_t> rn,
                               Tile<int32_t> m, Tile<int32_t> n, Tile<int32_t> k, int BK) {
  Tile<int32_t> rk = arange(0, BK);
  Tile<float> acc = zeros<float>({rm.shape()[0], rn.shape()[0]});
  for (auto k0 : range(0, k, BK)) {
    Tile<int32_t> kk = k0 + rk;
    Tile<T> ta = load(a + expand_dims(rm, 1) * k + expand_dims(kk, 0), expand_dims(lm < m, 1) & expand_dims(kk < k, 0));
    Tile<T> tb = load(b + expand_dims(kk, 1) * n + expand_dims(rn, 0), expand_dims(kk < k, 1) & expand_dims(rn < n, 0));
    acc = dot(ta, tb, acc);
  }
  return acc;
}

/// UserError at loc unless 1 <= m, n, k and the elements of every matrix (ranks x m x k,
/// ranks x m x n, k x n) fit the kernels' 32-bit index arithmetic (both mesh GEMMs).
inline void check_mesh_gemm_shape(const char* op, int ranks, int64_t m, int64_t n, int64_t k, const SrcLoc& loc) {
  const int64_t limit = int64_t(1) << 31;
  const bool small = m < limit && n < limit && k < limit && ranks * m < limit && ranks * m * k < limit &&
                     ranks * m * n < limit && k * n < limit;
  if (m < 1 || n < 1 || k < 1 || !small)
    throw UserError(loc, std::string(op) + ": m, n and k must be from 1, with ranks x m x k, ranks x m x n and k x n "
                             "below 2^31 elements, got m " + std::to_string(m) + ", n " + std::to_string(n) + ", k " +
                             std::to_string(k) + " on " + std::to_string(ranks) + " ranks");
}
/// UserError at loc unless r is a rank of `mesh` and no pointer is null.
inline void check_mesh_gemm_call(const char* op, const Mesh& mesh, const Rank& r, const void* a, const void* b,
                                 const void* c, const SrcLoc& loc) {
  if (!mesh.owns(r)) throw UserError(loc, std::string(op) + ": the rank is not one of this mesh's");
  if (!a || !b || !c) throw UserError(loc, std::string(op) + ": a null pointer");
}

/// The persistent GEMM over the gathered A [ranks * m, k] (see the top of the file).
template <class T> auto& all_gather_gemm_kernel() {
  // `epoch` (argument 7) changes every call: not specialized, or calls 1, 2, 4, 8, 16 would compile.
  static auto k = jit("all_gather_gemm", [](Ptr<T> a, Ptr<T> b, Ptr<T> c, Ptr<uint64_t> flags, Tile<int32_t> m,
                                            Tile<int32_t> n, Tile<int32_t> k, Tile<uint64_t> epoch,
                                            Constexpr<int> BM, Constexpr<int> BN, Constexpr<int> BK) {
    Tile<int32_t> ranks = num_shards(), me = shard_id();
    Tile<int32_t> npm = (m + (BM - 1)) / BM, npn = (n + (BN - 1)) / BN;
    Tile<int32_t> per_shard = npm * npn;
    for (auto t : range(program_id(0), ranks * per_shard, num_programs(0))) {
      Tile<int32_t> shard = (me - t / per_shard + ranks) % ranks;  // arrival order: me, me - 1, ...
      auto [pm, pn] = ag_grouped_tile(t % per_shard, npm, npn, 8);
      signal_wait(flags + shard, epoch);
      Tile<int32_t> lm = pm * BM + arange(0, BM);  // rows within the shard
      Tile<int32_t> rm = shard * m + lm;
      Tile<int32_t> rn = pn * BN + arange(0, BN);
      Tile<float> acc = shard_tile_product(a, b, rm, lm, rn, m, n, k, BK);
      store(c + expand_dims(rm, 1) * n + expand_dims(rn, 0), cast<T>(acc),
            expand_dims(lm < m, 1) & expand_dims(rn < n, 0));
    }
  }, {.do_not_specialize = {7}});
  return k;
}
}  // namespace detail

/// The workspace and state of C = all_gather(A) @ B on one mesh for shards of m x k (see the top
/// of the file). T: tle::bf16, tle::f16 or float. Construct it on the host thread (it allocates
/// symmetric memory: a gather buffer of ranks * m * k elements, two flag arrays); call it on every
/// rank's thread inside Mesh::run. Throws UserError at the caller's line for m, n or k < 1 or a
/// rank of another mesh.
template <class T> class AllGatherGemm {
 public:
  AllGatherGemm(Mesh& mesh, int64_t m, int64_t n, int64_t k, loc_t l = loc_t::current())
      : mesh_(mesh), m_(m), n_(n), k_(k) {
    detail::check_mesh_gemm_shape("AllGatherGemm", mesh.size(), m, n, k, SrcLoc(l));
    gathered_ = mesh.alloc_symmetric<T>(static_cast<size_t>(m * mesh.size() * k), l);
    arrived_ = mesh.alloc_symmetric<uint64_t>(static_cast<size_t>(mesh.size()), l);
    done_ = mesh.alloc_symmetric<uint64_t>(static_cast<size_t>(mesh.size()), l);
    ready_ = mesh.alloc_symmetric<uint64_t>(static_cast<size_t>(mesh.size()), l);
    ranks_.resize(static_cast<size_t>(mesh.size()));
  }

  /// On rank r's thread: c [ranks * m, n] = all_gather(a [m, k]) @ b [k, n], queued on r's stream
  /// (GPU; at once on the CPU). a, b, c: this rank's memory (device memory on the GPU).
  void operator()(Rank& r, const T* a, const T* b, T* c, loc_t l = loc_t::current()) {
    detail::check_mesh_gemm_call("AllGatherGemm", mesh_, r, a, b, c, SrcLoc(l));
    PerRank& st = ranks_[static_cast<size_t>(r.id())];
    if (!st.copy && mesh_.backend() == Backend::GPU) st.copy = std::make_unique<Stream>(/*non_blocking=*/true);
    const Stream* copy = st.copy ? st.copy.get() : &r.stream();
    const uint64_t epoch = ++st.epoch;
    const int ranks = r.size(), me = r.id();
    const uint64_t shard_bytes = static_cast<uint64_t>(m_ * k_) * sizeof(T);
    // Pushes into rank p's buffer only once p's GEMM of the previous call is done with it (done[p]
    // on this rank). The waits are one-warp kernels: on the rank's stream, before the copy stream
    // takes over, so that the copy stream holds copy-engine work alone (a wait kernel there could
    // find every SM taken by another rank's spinning GEMM on a shared GPU).
    if (epoch > 1)
      for (int p = 0; p < ranks; ++p) r.wait_signal(done_.local(me, l) + p, epoch - 1);
    // The copies wait for what produced a (and for those waits) on the rank's stream.
    if (st.copy) r.order(r.stream(), *copy);
    // Every rank's copy stream tells every rank it got here (ready): the GEMM starts only once all
    // have, so its programs, which spin on the shards' flags, wait for copy-engine work alone -
    // never for kernels that another rank sharing the GPU queued before this call.
    for (int p = 0; p < ranks; ++p) r.signal(ready_.local(p, l) + me, epoch, copy);
    for (int q = 0; q < ranks; ++q) r.wait_signal(ready_.local(me, l) + q, epoch);
    for (int j = 0; j < ranks; ++j) {
      const int p = (me + j) % ranks;
      r.put_signal(gathered_.local(p, l) + static_cast<size_t>(me * m_ * k_), a, shard_bytes,
                   arrived_.local(p, l) + me, epoch, copy);
    }
    auto& kernel = detail::all_gather_gemm_kernel<T>();
    const int64_t tiles = ranks * ((m_ + 127) / 128) * ((n_ + 127) / 128);
    int64_t programs = tiles;
    if (mesh_.backend() == Backend::GPU) {
      // Ranks sharing this GPU split its SMs, leaving some free: a copy within one device may run
      // as a kernel (not on a copy engine), and it must find an SM while the GEMMs spin.
      int share = 0;
      for (int q = 0; q < ranks; ++q) share += mesh_.device(q) == r.device();
      if (auto info = gpu_info(r.device()))
        programs = std::min<int64_t>(tiles, std::max(1, info->num_sms / share - (share > 1 ? 2 : 0)));
    } else {
      programs = 1;  // a CPU rank runs its programs in order: one program walks every tile
    }
    kernel(Grid(programs, 1, 1, l).with_warps(8).on(r.stream()), gathered_.local(me, l), b, c, arrived_.local(me, l),
           static_cast<int32_t>(m_), static_cast<int32_t>(n_), static_cast<int32_t>(k_), epoch, 128, 128, 64);
    for (int q = 0; q < ranks; ++q) r.signal(done_.local(q, l) + me, epoch);  // this rank is done with its buffer
    // Later work on the rank's stream (reusing a) waits until a has been pushed to every rank.
    if (st.copy) r.order(*copy, r.stream());
  }

 private:
  struct PerRank {
    std::unique_ptr<Stream> copy;
    uint64_t epoch = 0;
  };
  Mesh mesh_;
  int64_t m_, n_, k_;
  SymmetricBuffer<T> gathered_;
  SymmetricBuffer<uint64_t> arrived_, done_, ready_;
  std::vector<PerRank> ranks_;
};

}  // namespace tle::ops
