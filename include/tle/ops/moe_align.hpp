// tle/ops/moe_align.hpp - MoE routing kernels, written in tle itself (header only):
// moe_align_block_size (vLLM's contract) and expert_count.
//
//   auto sz = tle::ops::moe_align_sizes(num_tokens, topk, num_experts, block_size);
//   // sorted_token_ids: sz.sorted_token_ids int32, expert_ids: sz.expert_ids int32, post_pad: 1 int32
//   tle::ops::moe_align_block_size(topk_ids, num_tokens, topk, num_experts, block_size,
//                                  sorted_token_ids, expert_ids, post_pad, {.stream = s});
//
// topk_ids is the router's [num_tokens, topk] int32 matrix (row-major): entry i = t * topk + j is
// the j-th expert chosen for token t. Outputs, as vLLM's moe_align_block_size
// (vllm/model_executor/layers/fused_moe/moe_align_block_size.py and csrc/moe/moe_align_sum_kernels.cu):
//   - num_tokens_post_padded[0] = sum over experts e of round_up(count[e], block_size), where
//     count[e] is the number of entries equal to e;
//   - sorted_token_ids [numel + num_experts * (block_size - 1)] (numel = num_tokens * topk): expert
//     e's entries occupy [start[e], start[e] + count[e]) with start[e] = the sum of the padded counts of
//     the experts before e, each slot holding the flat index i of an entry; every other slot (the
//     padding of each expert up to a multiple of block_size, and the tail after
//     num_tokens_post_padded) holds the sentinel numel. Unlike vLLM's atomics, the entries of one
//     expert are in increasing order of i (the output is deterministic);
//   - expert_ids [cdiv(numel + num_experts * (block_size - 1), block_size)]: block b (slots
//     [b * block_size, (b + 1) * block_size)) belongs to expert expert_ids[b]; blocks at or after
//     num_tokens_post_padded / block_size hold -1 (vLLM's inactive expert id).
// expert_count writes count[e] for every expert (num_experts int32).
//
// Expert ids outside [0, num_experts): on the CPU backend and the interpreter a UserError at the
// caller's line naming the first such entry (checked on the host before launching); on the GPU
// (no host round trip) the entry is ignored: not counted, not placed, as vLLM ignores ids >=
// num_experts.
//
// Kernels (no host round trip): the entries are split into C chunks, one program each (up to 8192
// entries C <= 64 chunks of a multiple of 256; else about 512 chunks of a multiple of 1024, enough
// programs to fill the GPU several times over).
//   - Up to 8192 entries: one kernel. Each program counts all entries itself (atomic adds into a
//     shared-memory table of 2 * num_experts counters: the entries before its chunk, the rest), so
//     it knows every expert's total and the entries of each expert in the chunks before its own;
//     it computes the padded starts (cumsum), writes its share of
//     expert_ids (block b's expert: the last expert whose start is <= b * block_size, found by a
//     binary search over the starts in a shared-memory table (tle::gpu::alloc); -1 past the end)
//     and, program 0, num_tokens_post_padded; writes the sentinel into the padding slots of
//     the experts e with e % C == its index and into its share of the tail; and places its chunk
//     in tiles of 1024: tle::histogram_ranks gives each entry's rank among the tile's earlier
//     entries of its expert, and its slot is start + (entries of its expert in earlier chunks and
//     tiles) + that rank. No slot is written twice.
//   - More entries: three kernels. The first histograms each chunk into row c of the workspace and
//     fills its share of sorted_token_ids with the sentinel; the second turns the [C, E] rows into
//     exclusive prefix sums over the chunks (a cumsum down the rows, one [C, EB] tile of at most
//     2048 elements per program) and writes each expert's total into row C; the third reads its
//     row and the totals and does the rest as above, its token slots overwriting the sentinel.
// expert_count is the counting kernel without the fill, then the prefix kernel writing the totals
// into counts.
//
// Memory and streams as tle::ops::topk (tle/ops/topk.hpp): device memory and asynchronous on the
// GPU, host memory and synchronous on the CPU backend and the interpreter. Both take a workspace of
// moe_align_sizes(...).workspace int32 elements (MoeAlignOptions::workspace; without one the call
// allocates it when it needs one - expert_count always, moe_align_block_size above 8192 entries -
// and on the GPU then waits for its stream before freeing it).
//
// num_tokens = 0 writes the empty result (num_tokens_post_padded = 0, every slot the sentinel 0,
// every block -1). Errors (UserError at the caller's line): num_tokens < 0, topk < 1, num_experts
// outside 1..4096, block_size < 1, numel + num_experts * (block_size - 1) >= 2^31, a null pointer,
// MoeAlignOptions::num_warps not 0 or a power of two up to 32.
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tle/device.hpp"
#include "tle/kernel.hpp"
#include "tle/ops/limits.hpp"
#include "tle/struct.hpp"

namespace tle::ops {

/// Options of moe_align_block_size and expert_count.
struct MoeAlignOptions {
  /// GPU: the CUstream the kernels are queued on (null: the legacy default stream).
  void* stream = nullptr;
  /// moe_align_sizes(...).workspace int32 elements on the backend's memory, or null.
  int32_t* workspace = nullptr;
  /// GPU: warps of each program of every kernel (1, 2, 4, 8, 16 or 32; 0: the kernels' own, 4).
  /// Fewer registers a thread with more warps: the one-kernel path's tiles (its 1024-slot padding
  /// stores, its 1024-entry placement tiles) unroll into fewer instructions per thread. The
  /// placing kernel keeps a counter per expert for each warp in shared memory: 16 warps fit up to
  /// about 3100 experts, 32 up to about 1600 on sm_90 (more is a UserError naming the most that
  /// fit). A tuner's knob; results do not depend on it (the CPU backend ignores it).
  int num_warps = 0;
  /// The backend to run on (unset: tle::default_backend()).
  std::optional<Backend> backend;
};

/// Buffer sizes (in int32 elements) for one moe_align_block_size / expert_count call.
struct MoeAlignSizes {
  int64_t numel = 0;             ///< num_tokens * topk; also the sentinel of sorted_token_ids
  int64_t sorted_token_ids = 0;  ///< numel + num_experts * (block_size - 1)
  int64_t expert_ids = 0;        ///< cdiv(sorted_token_ids, block_size)
  int64_t workspace = 0;         ///< (chunks + 1) * num_experts
  int64_t chunks = 0, chunk = 0; ///< programs and entries per program
};

namespace detail_moe {
constexpr int kSub = 1024;       // entries per tile
constexpr int kMaxChunks = 64;   // programs of the one-kernel path (each counts every entry)
// Entries per program of the one-kernel path (a multiple of this): more programs share its padding
// fill and expert_ids (H100, 2026-12-08: 256 x 8 tokens, 256 experts 11.2 -> 9.3 us against 1024).
constexpr int kFusedChunk = 256;
constexpr int kTargetChunks = 512;  // programs of the three-kernel path (about 4 per SM of an H200)
constexpr int kPrefixTile = 2048;  // elements of the prefix kernel's [rows, experts] tile (4096 spilled at 4 warps)
constexpr int kFill = 4096;      // sentinel stores per tile

constexpr int64_t kFusedMax = 8192;  // up to this many entries: one kernel (each program counts all)
constexpr int kWarps = 4;            // warps of every program (MoeAlignOptions::num_warps = 0)

constexpr int kPadTile = 1024;        // slots per [rows, columns] tile of the one-kernel path's padding fill

inline const auto& count_kernel() {
  static const auto k = jit("tle_ops_moe_count", [](Ptr<int32_t> ids, Ptr<int32_t> partial, Ptr<int32_t> sorted,
                                                   Tile<int32_t> numel, Tile<int32_t> chunk, Tile<int32_t> slots,
                                                   Tile<int32_t> fill_share, Constexpr<int> E, Constexpr<bool> FILL) {
    Tile<int32_t> c = program_id(0);
    Tile<int32_t> lo = c * chunk;
    Tile<int32_t> hi = minimum(lo + chunk, numel);
    Tile<int32_t> h = zeros<int32_t>({int64_t(E)});
    for (auto i : range(lo, hi, kSub)) {
      Tile<int32_t> offs = i + arange(0, kSub);
      Tile<bool> m = offs < hi;
      h = h + histogram(load(ids + offs, m, -1), E, m);  // ids outside [0, E) are not counted
    }
    store(partial + c * int(E) + arange(0, E), h);
    if (FILL) {
      Tile<int32_t> flo = c * fill_share;
      Tile<int32_t> fhi = minimum(flo + fill_share, slots);
      for (auto j : range(flo, fhi, kFill)) {
        Tile<int32_t> offs = j + arange(0, kFill);
        store(sorted + offs, numel, offs < fhi);
      }
    }
  });
  return k;
}

inline const auto& align_kernel() {
  static const auto k = jit("tle_ops_moe_align", [](Ptr<int32_t> ids, Ptr<int32_t> partial, Ptr<int32_t> sorted,
                                                   Ptr<int32_t> expert_ids, Ptr<int32_t> post_pad,
                                                   Tile<int32_t> numel, Tile<int32_t> chunk, Tile<int32_t> chunks,
                                                   Tile<int32_t> num_blocks, Tile<int32_t> block_share,
                                                   Tile<int32_t> slots, Constexpr<int> E, Constexpr<int> BS,
                                                   Constexpr<bool> FUSED) {
    Tile<int32_t> c = program_id(0);
    Tile<int32_t> ae = arange(0, E);
    Tile<int32_t> total = zeros<int32_t>({int64_t(E)});
    Tile<int32_t> before = zeros<int32_t>({int64_t(E)});
    if (FUSED) {
      // Few entries: every program counts them all itself (no counting kernel, no workspace), with
      // atomic adds into a shared table: bins [0, E) the entries before its chunk, [E, 2E) the rest.
      Tile<int32_t> mine_lo = c * chunk;
      auto counts = gpu::alloc<int32_t>({2 * int64_t(E)}, gpu::scope::shared);
      counts.store(0);
      for (auto i : range(0, numel, kSub)) {
        Tile<int32_t> offs = i + arange(0, kSub);
        Tile<int32_t> v = load(ids + offs, offs < numel, -1);
        Tile<bool> valid = (offs < numel) & (v >= 0) & (v < int(E));
        atomic_add(gpu::local_ptr(counts, {v + (offs >= mine_lo).to<int32_t>() * int(E)}), 1, valid);
      }
      before = load(gpu::local_ptr(counts, {ae}));
      total = before + load(gpu::local_ptr(counts, {ae + int(E)}));
    } else {
      before = load(partial + c * int(E) + ae);       // the prefix kernel's exclusive sums
      total = load(partial + chunks * int(E) + ae);   // and totals
    }
    Tile<int32_t> padded = (total + (int(BS) - 1)) / int(BS) * int(BS);
    Tile<int32_t> start = cumsum(padded, 0) - padded;
    Tile<int32_t> total_padded = sum(padded, 0);
    // The binary search's table (allocated here, it may take the bytes of the counting table).
    auto starts = gpu::alloc<int32_t>({int64_t(E)}, gpu::scope::shared);
    starts.store(start);
    store(post_pad, total_padded, c == 0);
    if (FUSED) {
      // The sentinel in the slots no entry takes: each expert's padding (none when BS is 1; the
      // experts e = c + chunks * q by program c, RB of them a step, their starts and counts read
      // from shared memory) and the tail after total_padded (strided over the programs).
      auto totals = gpu::alloc<int32_t>({int64_t(E)}, gpu::scope::shared);
      totals.store(total);
      const int64_t bsp = std::min<int64_t>(next_power_of_2(int64_t(BS)), kPadTile);
      const int rb = static_cast<int>(kPadTile / bsp), cb = static_cast<int>(bsp);
      for (auto q : range(0, int(BS) > 1 ? (int(E) - c + chunks - 1) / chunks : Tile<int32_t>(0), rb)) {
        Tile<int32_t> e = c + chunks * (q + arange(0, rb));  // [RB]
        Tile<bool> ein = e < int(E);
        Tile<int32_t> ec = minimum(e, int(E) - 1);
        Tile<int32_t> st = load(gpu::local_ptr(starts, {ec})), tot = load(gpu::local_ptr(totals, {ec}));
        Tile<int32_t> pad = (tot + (int(BS) - 1)) / int(BS) * int(BS);
        for (auto j : range(0, int(BS), cb)) {
          Tile<int32_t> pos = expand_dims(tot, 1) + expand_dims(j + arange(0, cb), 0);  // [RB, CB]
          store(sorted + (expand_dims(st, 1) + pos), numel, expand_dims(ein, 1) & (pos < expand_dims(pad, 1)));
        }
      }
      for (auto t : range(total_padded + c * kFill, slots, chunks * kFill)) {
        Tile<int32_t> offs = t + arange(0, kFill);
        store(sorted + offs, numel, offs < slots);
      }
    }
    // expert_ids of this program's share of the blocks.
    Tile<int32_t> blo = c * block_share;
    Tile<int32_t> bhi = minimum(blo + block_share, num_blocks);
    int64_t top = 1;  // binary lifting over the starts: the largest power of two <= E first
    while (top * 2 <= E) top *= 2;
    for (auto b : range(blo, bhi, kSub)) {
      Tile<int32_t> blk = b + arange(0, kSub);
      Tile<int32_t> slot = blk * int(BS);
      // The last expert whose start is <= slot (starts never decrease; an empty expert shares its
      // start with the next one, so the last is the one the block belongs to).
      Tile<int32_t> e = zeros<int32_t>({int64_t(kSub)});
      for (int64_t step = top; step >= 1; step /= 2) {
        Tile<int32_t> cand = e + int(step);
        e = where((cand < int(E)) & (load(gpu::local_ptr(starts, {minimum(cand, int(E) - 1)})) <= slot), cand, e);
      }
      store(expert_ids + blk, where(slot < total_padded, e, -1), blk < bhi);
    }
    // Place this chunk's entries.
    Tile<int32_t> run = start + before;
    Tile<int32_t> lo = c * chunk;
    Tile<int32_t> hi = minimum(lo + chunk, numel);
    for (auto i : range(lo, hi, kSub)) {
      Tile<int32_t> offs = i + arange(0, kSub);
      Tile<bool> m = offs < hi;
      Tile<int32_t> v = load(ids + offs, m, -1);          // ids outside [0, E) are neither counted nor placed
      Tile<int32_t> rank = histogram_ranks(v, E, m);     // the expert's entries before this one in the tile
      store(sorted + (gather(run, v, 0) + rank), offs, rank >= 0);
      run = run + histogram(v, E, m);
    }
  });
  return k;
}

/// partial [chunks, E] (row c: chunk c's histogram) -> row c: the entries of each expert in the
/// chunks before c; totals[e]: all of expert e's entries. Program p takes experts
/// [p * EB, (p + 1) * EB) and walks down the rows in tiles of R (prefix_shape: one tile holds
/// every row up to 512 chunks, so the walk is one step and the programs E / EB).
inline const auto& prefix_kernel() {
  static const auto k = jit("tle_ops_moe_prefix", [](Ptr<int32_t> partial, Ptr<int32_t> totals, Tile<int32_t> chunks,
                                                    Constexpr<int> E, Constexpr<int> R, Constexpr<int> EB) {
    Tile<int32_t> ae = program_id(0) * int(EB) + arange(0, EB);  // [EB]
    Tile<bool> me = ae < int(E);
    Tile<int32_t> run = zeros<int32_t>({int64_t(EB)});
    for (auto q : range(0, chunks, int(R))) {
      Tile<int32_t> rows = q + arange(0, R);                                                 // [R]
      Tile<bool> m = expand_dims(rows < chunks, 1) & expand_dims(me, 0);                       // [R, EB]
      Ptr<int32_t> at = partial + (expand_dims(rows * int(E), 1) + expand_dims(ae, 0));
      Tile<int32_t> h = load(at, m, 0);
      Tile<int32_t> inc = cumsum(h, 0);
      store(at, expand_dims(run, 0) + inc - h, m);
      run = run + sum(h, 0);
    }
    store(totals + ae, run, me);
  });
  return k;
}

/// The prefix kernel's tile [R, EB] for `chunks` rows of `num_experts`: R = the rows rounded up to
/// a power of two (at most kPrefixTile), EB = the experts the rest of kPrefixTile holds.
struct PrefixShape {
  int R, EB;
  int64_t programs;
};
inline PrefixShape prefix_shape(int64_t chunks, int64_t num_experts) {
  const int R = static_cast<int>(std::min<int64_t>(next_power_of_2(chunks), kPrefixTile));
  const int EB = static_cast<int>(std::min<int64_t>(kPrefixTile / R, next_power_of_2(num_experts)));
  return {R, EB, (num_experts + EB - 1) / EB};
}

/// The align kernel's shared memory at `warps` warps for E experts (bytes, as the GPU backend plans
/// it): the kernel's own tables - the one-kernel path's counts (2E int32), whose bytes its starts
/// and totals (E each, every buffer 128-byte aligned) then reuse; the starts alone otherwise -
/// rounded up to 1024 bytes, then histogram_ranks' staging of a kSub tile (values and ranks) and
/// its counter per expert for each warp.
inline int64_t align_smem(int64_t E, int warps, bool fused) {
  auto up = [](int64_t b, int64_t a) { return (b + a - 1) / a * a; };
  const int64_t tables = fused ? std::max(8 * E, up(4 * E, 128) + 4 * E) : 4 * E;
  return up(tables, 1024) + 8 * int64_t(kSub) + 4 * int64_t(warps) * E;
}

/// The options' num_warps (0: kWarps), checked: a power of two up to 32, and - for the align kernel
/// (align_experts > 0) on the GPU - within the program's shared memory; else a UserError at the
/// caller's line.
inline int checked_warps(const MoeAlignOptions& o, const char* fn, Backend b, int64_t align_experts, bool fused,
                         const SrcLoc& l) {
  detail::check_num_warps(o.num_warps, fn, l);
  const int warps = o.num_warps ? o.num_warps : kWarps;
  const int64_t limit = detail::program_smem_limit(b);
  if (b == Backend::GPU && align_experts > 0 && align_smem(align_experts, warps, fused) > limit) {
    int most = warps;
    while (most > 1 && align_smem(align_experts, most, fused) > limit) most /= 2;
    throw UserError(l, std::string("tle::ops::") + fn + ": num_warps = " + std::to_string(warps) + " needs " +
                           std::to_string(align_smem(align_experts, warps, fused)) +
                           " bytes of shared memory per program for " + std::to_string(align_experts) +
                           " experts (a counter per expert for each warp), more than the GPU's " +
                           std::to_string(limit) + "; use at most " + std::to_string(most) + " warps here");
  }
  return warps;
}

/// CPU backend and interpreter: the first entry outside [0, num_experts) is a UserError.
inline void check_ids(const int32_t* ids, int64_t numel, int64_t num_experts, Backend b, const SrcLoc& l) {
  if (b == Backend::GPU) return;
  for (int64_t i = 0; i < numel; ++i)
    if (ids[i] < 0 || ids[i] >= num_experts)
      throw UserError(l, "tle::ops: topk_ids[" + std::to_string(i) + "] = " + std::to_string(ids[i]) +
                             " is not an expert id in 0.." + std::to_string(num_experts - 1) +
                             " (on the GPU such entries are ignored)");
}

/// The workspace: the caller's, or one allocated for the call (host vector or DeviceBuffer).
struct Workspace {
  int32_t* p = nullptr;
  std::vector<int32_t> host;
  DeviceBuffer<int32_t> dev;
  Workspace(int32_t* given, int64_t size, Backend b, loc_t l) : p(given) {
    if (p) return;
    if (b == Backend::GPU) {
      dev = DeviceBuffer<int32_t>(static_cast<size_t>(size), l);
      p = dev.data();
    } else {
      host.resize(static_cast<size_t>(size));
      p = host.data();
    }
  }
};
}  // namespace detail_moe

/// The sizes of moe_align_block_size's outputs and workspace. UserError at the caller's line for
/// num_tokens < 0, topk < 1, num_experts outside 1..4096, block_size < 1, or
/// num_tokens * topk + num_experts * (block_size - 1) >= 2^31.
inline MoeAlignSizes moe_align_sizes(int64_t num_tokens, int64_t topk, int64_t num_experts, int64_t block_size,
                                     loc_t l = loc_t::current()) {
  using namespace detail_moe;
  auto bad = [&](const std::string& what) { throw UserError(l, "tle::ops::moe_align_block_size: " + what); };
  if (num_tokens < 0) bad("num_tokens = " + std::to_string(num_tokens) + " is negative");
  if (topk < 1) bad("topk = " + std::to_string(topk) + " must be at least 1");
  if (num_experts < 1 || num_experts > 4096)
    bad("num_experts = " + std::to_string(num_experts) + " is outside 1..4096");
  if (block_size < 1) bad("block_size = " + std::to_string(block_size) + " must be at least 1");
  MoeAlignSizes s;
  if (num_tokens > (int64_t(1) << 31) / topk) bad("num_tokens * topk does not fit in int32");
  s.numel = num_tokens * topk;
  s.sorted_token_ids = s.numel + num_experts * (block_size - 1);
  if (s.sorted_token_ids >= (int64_t(1) << 31))
    bad("num_tokens * topk + num_experts * (block_size - 1) = " + std::to_string(s.sorted_token_ids) +
        " does not fit in int32");
  s.expert_ids = (s.sorted_token_ids + block_size - 1) / block_size;
  const bool fused = s.numel <= kFusedMax;
  const int64_t target = fused ? kMaxChunks : kTargetChunks, gran = fused ? kFusedChunk : kSub;
  const int64_t per = std::max<int64_t>(gran, (s.numel + target - 1) / target);
  s.chunk = (per + gran - 1) / gran * gran;
  s.chunks = std::max<int64_t>(1, (s.numel + s.chunk - 1) / s.chunk);
  s.workspace = (s.chunks + 1) * num_experts;
  return s;
}

/// vLLM's moe_align_block_size (see the top of this file): topk_ids [num_tokens, topk] int32 ->
/// sorted_token_ids [sizes.sorted_token_ids], expert_ids [sizes.expert_ids],
/// num_tokens_post_padded [1], all int32, sizes = moe_align_sizes(num_tokens, topk, num_experts,
/// block_size). One kernel up to 8192 entries, else three.
inline void moe_align_block_size(const int32_t* topk_ids, int64_t num_tokens, int64_t topk, int64_t num_experts,
                                 int64_t block_size, int32_t* sorted_token_ids, int32_t* expert_ids,
                                 int32_t* num_tokens_post_padded, const MoeAlignOptions& o = {},
                                 loc_t l = loc_t::current()) {
  using namespace detail_moe;
  const MoeAlignSizes s = moe_align_sizes(num_tokens, topk, num_experts, block_size, l);
  if ((!topk_ids && s.numel) || !sorted_token_ids || !expert_ids || !num_tokens_post_padded)
    throw UserError(l, "tle::ops::moe_align_block_size: a null pointer (topk_ids, sorted_token_ids, expert_ids or "
                       "num_tokens_post_padded)");
  const Backend b = o.backend ? *o.backend : default_backend();
  const int warps = checked_warps(o, "moe_align_block_size", b, num_experts, s.numel <= kFusedMax, l);
  check_ids(topk_ids, s.numel, num_experts, b, l);
  Workspace ws(o.workspace, s.numel <= kFusedMax ? 0 : s.workspace, b, l);
  auto grid = [&](int64_t programs) {
    Grid g(programs, 1, 1, l);
    g.on_stream(o.stream).backend(b).with_warps(warps);
    return g;
  };
  const int E = static_cast<int>(num_experts), BS = static_cast<int>(block_size);
  const int C = static_cast<int>(s.chunks);
  const int64_t fill_share = (s.sorted_token_ids + C - 1) / C, block_share = (s.expert_ids + C - 1) / C;
  // A null topk_ids (num_tokens = 0) is never read; pass a valid address for the launch checks.
  const int32_t* ids = topk_ids ? topk_ids : sorted_token_ids;
  const bool fused = s.numel <= kFusedMax;
  if (!fused) {
    count_kernel()(grid(C), ids, ws.p, sorted_token_ids, int32_t(s.numel), int32_t(s.chunk),
                   int32_t(s.sorted_token_ids), int32_t(fill_share), E, true);
    const PrefixShape ps = prefix_shape(C, num_experts);
    prefix_kernel()(grid(ps.programs), ws.p, ws.p + int64_t(C) * E, C, E, ps.R, ps.EB);
  }
  align_kernel()(grid(C), ids, fused ? sorted_token_ids : ws.p, sorted_token_ids, expert_ids, num_tokens_post_padded,
                 int32_t(s.numel), int32_t(s.chunk), C, int32_t(s.expert_ids), int32_t(block_share),
                 int32_t(s.sorted_token_ids), E, BS, fused);
  if (!ws.dev.empty()) Stream::wrap(o.stream).synchronize();
}

/// counts[e] = the number of entries of topk_ids [num_tokens, topk] equal to e, for e in
/// [0, num_experts) (counts: num_experts int32). Errors and ids outside [0, num_experts) as
/// moe_align_block_size (block_size plays no part). Two kernels (counting, prefix).
inline void expert_count(const int32_t* topk_ids, int64_t num_tokens, int64_t topk, int64_t num_experts,
                         int32_t* counts, const MoeAlignOptions& o = {}, loc_t l = loc_t::current()) {
  using namespace detail_moe;
  const MoeAlignSizes s = moe_align_sizes(num_tokens, topk, num_experts, 1, l);
  if ((!topk_ids && s.numel) || !counts)
    throw UserError(l, "tle::ops::expert_count: a null pointer (topk_ids or counts)");
  const Backend b = o.backend ? *o.backend : default_backend();
  const int warps = checked_warps(o, "expert_count", b, 0, false, l);
  check_ids(topk_ids, s.numel, num_experts, b, l);
  Workspace ws(o.workspace, s.workspace, b, l);
  auto grid = [&](int64_t programs) {
    Grid g(programs, 1, 1, l);
    g.on_stream(o.stream).backend(b).with_warps(warps);
    return g;
  };
  const int E = static_cast<int>(num_experts), C = static_cast<int>(s.chunks);
  const int32_t* ids = topk_ids ? topk_ids : counts;
  count_kernel()(grid(C), ids, ws.p, counts, int32_t(s.numel), int32_t(s.chunk), 0, 1, E, false);
  const PrefixShape ps = prefix_shape(C, num_experts);
  prefix_kernel()(grid(ps.programs), ws.p, counts, C, E, ps.R, ps.EB);
  if (!ws.dev.empty()) Stream::wrap(o.stream).synchronize();
}

}  // namespace tle::ops
