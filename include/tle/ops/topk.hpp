// tle/ops/topk.hpp - top-k of each row of a matrix, written in tle itself (header only).
//
//   tle::ops::topk(x, rows, n, k, values, indices);                     // k largest of each row
//   tle::ops::topk(x, rows, n, k, values, indices, {.largest = false, .stream = s});
//   tle::ops::topk(x_dl, k, values_dl, indices_dl);                     // DLPack tensors
//
// x is a row-major [rows, n] matrix of float, tle::f16 or tle::bf16; values [rows, k] (x's dtype)
// and indices [rows, k] (int32, the column in x) receive, for each row, the k largest (or, with
// largest = false, smallest) elements, in torch.topk(sorted=True)'s order and tle's sort order
// (docs/semantics.md, "Sorting and gathering"):
//   - sorted: descending for the largest, ascending for the smallest;
//   - ties broken by the lower index (the element with the lower column comes first, and is the
//     one kept when only some of the tied elements fit in k);
//   - every NaN is larger than +inf (so NaNs come first with largest = true and are taken last with
//     largest = false); -0.0 and +0.0 are equal (a tie); values are copied, keeping their bits.
// The result equals the first k elements of tle::sort_with_indices(row, 0, largest), i.e. of a
// stable sort, on every backend.
//
// Memory: on the GPU backend x, values, indices (and the workspace) are device memory (raw device
// pointers from cudaMalloc / DeviceBuffer::data() / ManagedBuffer, or the DeviceBuffer overload),
// and the kernels are queued on TopkOptions::stream (asynchronous, as every tle GPU launch; no host
// round trip); on the CPU backend and the interpreter they are host memory and the call returns
// when the result is written. The backend is TopkOptions::backend, else tle::default_backend().
//
// Algorithm (radix select, as in RAFT's AIR top-k and FlagTree's radix-select example):
//   1. each element's order-preserving integer image (the key: the float's bits with the sign bit
//      flipped for positives and all bits flipped for negatives; every NaN made the largest key,
//      -0.0 made +0.0; all bits inverted for largest = false) so that the k wanted elements are
//      those with the k largest keys, ties by lower index;
//   2. the key of the k-th element, found digit by digit from the most significant end: per pass
//      a histogram of one 11-bit digit (the 32-bit keys of f32 take 3 passes of 11, 11 and 10
//      bits, the 16-bit keys of f16/bf16 2 passes of 11 and 5) over the elements whose higher
//      digits equal the digits found so far (tle::histogram), and a reverse cumsum that picks the
//      digit holding the k-th element;
//   3. a gather of the survivors into `indices`: every element whose key is larger than the k-th
//      key, plus the lowest-index elements equal to it until there are k (in-tile cumsums give
//      the output positions);
//   4. a sort of the k survivors per row by (key descending, index ascending) (tle::argsort over a
//      [k] tile) that writes values and indices.
// Launches (how a shape runs, TopkOptions::programs_per_row):
//   - n <= 256: one kernel, the whole row in one tile (tle::topk on the tile);
//   - one program per row, the row held in shared memory (programs_per_row = 1, or 0 - the
//     default - whenever the row is at most 128 KB and fits beside the survivors in a program's
//     shared memory): one kernel of 16 warps copies the row in (cp.async, all of it in flight at
//     once), runs steps 1-3 over it there, places the survivors in a shared table of (key,
//     ~index) u64s - unique, so a descending sort of them is the result's order - sorts it and
//     writes values and indices: one launch, one read of the row;
//   - one program per row, longer rows (programs_per_row = 1, or 0 when a batch fills the
//     machine alone and the matrix is under 4 MB): steps 1-3 in one kernel that reads its row once
//     per pass and once more for the gather, then the sort kernel: two launches;
//   - cooperative (several programs per row, or one per row on larger matrices): each program
//     takes a slice of its row and the programs of a row meet in global memory (the workspace).
//     A kernel zeroes the counters and histograms; pass 0 histograms the first digit (each
//     program adds its slice's to the row's with atomic_add); pass 1 reads the row a second and
//     last time: the elements whose first digit is at or above the k-th's (at most k - 1 above
//     it, and those with it, the candidates: for random data a few n / 2048 per row) go, as
//     (key, ~index) u64 codes in index order, to the slice's part of the workspace (one 8-byte
//     store each), and the candidates are then histogrammed by the second digit. Then one program
//     per row (the tail, 16 warps) reads only those codes, those of all slices at once (one tile
//     of 2048 spans up to 256 slices): f32's third pass, then the survivors into a shared table of
//     codes as above - those above the k-th key, and those equal to it (all of them where they fit,
//     else the lowest-index ones, ranked in a second pass over the codes) - sorted, and values and
//     indices written. Every program recomputes the digits found so far from the row's
//     histograms. Four launches (zero, pass 0, pass 1, tail), for every dtype; at most 256
//     programs per row.
//
// Workspace: the cooperative path needs topk_workspace_size(rows, n, k, options) int32 elements
// (at most rows * (2n + 4400)), 8-byte aligned, on the backend's memory. Pass it as
// TopkOptions::workspace; without it, topk allocates one for the call (on the GPU a DeviceBuffer,
// and the call then waits for its stream before freeing it, so it is synchronous). Its contents
// need not be initialized.
//
// Errors (tle::UserError at the caller's line): k < 1, k > n, k > 8192, n < 1 or n > 2^30,
// rows < 0, a null pointer while rows > 0, programs_per_row < 0, num_warps not 0 or a power of
// two up to 32, a DeviceBuffer smaller than the matrix it should hold, a workspace not 8-byte
// aligned. Launch errors (a host pointer on the GPU backend, misalignment) are UserErrors at the
// caller's line too.
#pragma once
#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "tle/device.hpp"
#include "tle/dlpack.hpp"
#include "tle/kernel.hpp"
#include "tle/ops/limits.hpp"
#include "tle/struct.hpp"

namespace tle::ops {

/// Options of tle::ops::topk.
struct TopkOptions {
  /// true: the k largest, sorted descending; false: the k smallest, sorted ascending.
  bool largest = true;
  /// GPU: the CUstream the kernels are queued on (null: the legacy default stream). Ignored on the CPU.
  void* stream = nullptr;
  /// Programs cooperating on one row: 0 chooses from the shape (the largest power of two within
  /// two programs per SM on the GPU or one per core on the CPU, shared by the rows, and one per
  /// 4096 elements of a row; rows of n <= 256 in one tile, rows that fit in shared memory one
  /// program each); 1 forces one program per row (the row in shared memory where it fits, else
  /// streamed); more takes the cooperative path with that many slices per row (capped at one
  /// slice per 2048 elements and at 256 slices). Results do not depend on it.
  int programs_per_row = 0;
  /// GPU: warps of each program (1, 2, 4, 8, 16 or 32; 0: the kernels' own - 16 for one program
  /// per row and the cooperative path's tail, 8 for its programs on slices, 4 for rows of
  /// n <= 256). More warps hide more of the row passes' shared-memory and atomic latency per
  /// program; a tuner's knob beside programs_per_row (it sets every kernel's warps). Results do
  /// not depend on it.
  int num_warps = 0;
  /// Workspace of the cooperative path: topk_workspace_size(...) int32 elements, 8-byte aligned
  /// (or null).
  int32_t* workspace = nullptr;
  /// The backend to run on (unset: tle::default_backend()).
  std::optional<Backend> backend;
};

namespace detail_topk {

constexpr int kRadixBits = 11;
constexpr int kBlock = 2048;        // elements per tile in the row loops
constexpr int64_t kDirectMaxN = 256;  // rows up to this length: one kernel, the whole row in one tile (sorted)
constexpr int64_t kMaxK = 8192;     // the sort of the survivors must fit a GPU program's shared memory
constexpr int kCounterSlots = 16;   // workspace row: [16 unused][pass 0, 1 histograms][per-slice parts]
constexpr int64_t kResidentRowBytes = 128 << 10;  // rows up to this size may be held in shared memory
constexpr int kResidentChunk = 2048;               // elements a step in the resident kernel's loops
constexpr int kResidentWarps = 16;                 // its warps (and the one-program-per-row kernels')
constexpr int kLoopStages = 3;  // the row loops over global memory: loads pipelined this deep (cp.async)
// Slices of a row on the cooperative path at most: the tail kernel reads the candidates of every
// slice in one tile of kBlock elements, at least 8 columns of each.
constexpr int64_t kMaxProgramsPerRow = 256;

constexpr int key_bits(int elem_bytes) { return elem_bytes * 8; }
constexpr int num_passes(int kb) { return (kb + kRadixBits - 1) / kRadixBits; }
constexpr int pass_shift(int kb, int p) { return kb - kRadixBits * (p + 1) < 0 ? 0 : kb - kRadixBits * (p + 1); }
constexpr int pass_bits(int kb, int p) { return kb - kRadixBits * p - pass_shift(kb, p); }
/// Offset of pass p's histogram in a workspace row.
constexpr int hist_offset(int kb, int p) {
  int off = kCounterSlots;
  for (int q = 0; q < p; ++q) off += 1 << pass_bits(kb, q);
  return off;
}

/// The order-preserving key of each element (u32; 16-bit types use the low 16 bits): the wanted
/// elements are those of the largest keys. NaN -> all ones, -0.0 -> +0.0's key, inverted for the
/// smallest.
template <class T> Tile<uint32_t> radix_key(const Tile<T>& x, bool largest) {
  constexpr int kb = key_bits(sizeof(T));
  Tile<uint32_t> b;
  if constexpr (sizeof(T) == 4) b = bitcast<uint32_t>(x);
  else b = bitcast<uint16_t>(x).template to<uint32_t>();
  const uint32_t sign = 1u << (kb - 1);
  const uint32_t all = kb == 32 ? 0xFFFFFFFFu : 0xFFFFu;
  Tile<uint32_t> key = where((b & sign) != 0u, b ^ all, b | sign);
  key = where(x == 0, sign, key);
  key = where(x != x, all, key);
  if (!largest) key = key ^ all;
  return key;
}

/// The histogram of pass `pass`'s digit over the elements of the steps i of range(lo, hi, step)
/// whose higher digits equal `prefix`, step i's keys from keys_at(i, m) (which sets m, the mask of
/// the step's elements): counted with atomic adds into a shared-memory table (no barrier per step),
/// read once at the end; the loop's loads pipelined `stages` deep (0: not hinted - keys_at reads
/// shared memory). In the kernel's body only (it allocates the table).
template <int kb, class KeysAt>
Tile<int32_t> digit_hist_steps(KeysAt keys_at, const Tile<int32_t>& lo, const Tile<int32_t>& hi, int step,
                               const Tile<uint32_t>& prefix, int pass, int stages) {
  const int w = pass_bits(kb, pass), sh = pass_shift(kb, pass);
  auto table = gpu::alloc<int32_t>({int64_t(1) << w}, gpu::scope::shared);
  table.store(0);
  for (auto i : range(lo, hi, step, {.num_stages = stages})) {
    Tile<bool> m;
    Tile<uint32_t> key = keys_at(i, m);
    if (pass > 0) m = m & ((key >> pass_shift(kb, pass - 1)) == prefix);
    Tile<int32_t> d = ((key >> sh) & ((1u << w) - 1u)).template to<int32_t>();
    atomic_add(gpu::local_ptr(table, {d}), 1, m);
  }
  return table.load();
}

/// digit_hist_steps over the elements [lo, hi), `block` a step, each element's key from
/// key_at(offsets, mask).
template <int kb, class KeyAt>
Tile<int32_t> digit_hist(KeyAt key_at, const Tile<int32_t>& lo, const Tile<int32_t>& hi, const Tile<uint32_t>& prefix,
                         int pass, int block, int stages) {
  auto keys_at = [&](const Tile<int32_t>& i, Tile<bool>& m) {
    Tile<int32_t> offs = i + arange(0, block);
    m = offs < hi;
    return key_at(offs, m);
  };
  return digit_hist_steps<kb>(keys_at, lo, hi, block, prefix, pass, stages);
}

/// digit_hist over the elements [lo, hi) of a row in global memory.
template <class T>
Tile<int32_t> hist_pass(const Ptr<T>& xrow, const Tile<int32_t>& lo, const Tile<int32_t>& hi,
                        const Tile<uint32_t>& prefix, int pass, bool largest) {
  auto key_at = [&](const Tile<int32_t>& offs, const Tile<bool>& m) { return radix_key(load(xrow + offs, m), largest); };
  return digit_hist<key_bits(sizeof(T))>(key_at, lo, hi, prefix, pass, kBlock, kLoopStages);
}

/// A survivor as one u64: its key above its inverted index. The codes of a row are unique and a
/// descending sort of them is the result's order (key descending, then index ascending).
inline Tile<uint64_t> survivor_code(const Tile<uint32_t>& key, const Tile<int32_t>& index) {
  return (key.to<uint64_t>() << 32) | (~index.to<uint32_t>()).to<uint64_t>();
}
/// The key of a survivor code.
inline Tile<uint32_t> code_key(const Tile<uint64_t>& code) { return (code >> 32).to<uint32_t>(); }
/// The index of a survivor code.
inline Tile<int32_t> code_index(const Tile<uint64_t>& code) { return (~code.to<uint32_t>()).to<int32_t>(); }
/// The indices of survivor codes in the result's order: sorted descending, the low halves inverted.
inline Tile<int32_t> sorted_indices(const Tile<uint64_t>& codes) {
  return code_index(sort(codes, 0, /*descending=*/true));
}

/// From a pass's histogram h (2^w bins) and the rank krem (1-based, counted from the largest) of
/// the wanted element among the elements it counts: appends the digit holding it to `prefix` and
/// makes krem its rank among the elements with that digit.
inline void select_digit(const Tile<int32_t>& h, int w, Tile<int32_t>& krem, Tile<uint32_t>& prefix) {
  Tile<int32_t> at_or_above = cumsum(h, 0, /*reverse=*/true);
  Tile<int32_t> d = sum((at_or_above >= krem).to<int32_t>(), 0) - 1;
  Tile<int32_t> above = sum(where(arange(0, int64_t(1) << w) > d, h, 0), 0);
  krem = krem - above;
  prefix = (prefix << w) | d.to<uint32_t>();
}

/// Step 3 over a whole row (one program per row): indices of keys > kth to irow[their rank among
/// them], of keys == kth to irow[base_eq + their rank] while that is < k.
template <class T>
void gather_survivors(const Ptr<T>& xrow, const Tile<int32_t>& n, const Tile<uint32_t>& kth, Tile<int32_t> base_eq,
                      const Tile<int32_t>& k, const Ptr<int32_t>& irow, bool largest) {
  Tile<int32_t> base_gt = 0;
  for (auto i : range(0, n, kBlock, {.num_stages = kLoopStages})) {
    Tile<int32_t> offs = i + arange(0, kBlock);
    Tile<bool> m = offs < n;
    Tile<uint32_t> key = radix_key(load(xrow + offs, m), largest);
    Tile<int32_t> gt = (m & (key > kth)).to<int32_t>();
    Tile<int32_t> eq = (m & (key == kth)).to<int32_t>();
    store(irow + (base_gt + cumsum(gt, 0) - 1), offs, gt != 0);
    Tile<int32_t> pe = base_eq + cumsum(eq, 0) - 1;
    store(irow + pe, offs, (eq != 0) & (pe < k));
    base_eq = base_eq + sum(eq, 0);
    base_gt = base_gt + sum(gt, 0);
  }
}

/// The digits of the k-th key found by the passes before `passes` (their histograms complete in
/// the workspace row), and the rank of the wanted element among the elements with those digits.
template <class T>
void digits_from_workspace(const Ptr<int32_t>& wrow, int passes, const Tile<int32_t>& k, Tile<int32_t>& krem,
                           Tile<uint32_t>& prefix) {
  constexpr int kb = key_bits(sizeof(T));
  krem = k;
  prefix = Tile<uint32_t>(0u);
  for (int q = 0; q < passes; ++q) {
    const int w = pass_bits(kb, q);
    Tile<int32_t> h = load(wrow + hist_offset(kb, q) + arange(0, int64_t(1) << w));
    select_digit(h, w, krem, prefix);
  }
}

template <class T> const auto& direct_kernel() {
  static const auto k = jit("tle_ops_topk_direct", [](Ptr<T> x, Ptr<T> vals, Ptr<int32_t> ind, Tile<int32_t> n,
                                                     Constexpr<int> N, Constexpr<int> K, Constexpr<bool> LARGEST) {
    Tile<int64_t> row = program_id(0).to<int64_t>();
    Tile<int32_t> a = arange(0, N);
    // Padding that sorts after every real element (ties with real -inf / NaN keep the lower index first).
    const double pad = LARGEST ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
    Tile<T> v = load(x + row * n + a, a < n, pad);
    auto [tv, ti] = topk(v, K, 0, LARGEST);
    Tile<int32_t> o = arange(0, K);
    store(vals + row * int(K) + o, tv);
    store(ind + row * int(K) + o, ti);
  });
  return k;
}

template <class T> const auto& select_kernel() {
  static const auto k = jit("tle_ops_topk_select", [](Ptr<T> x, Ptr<int32_t> ind, Tile<int32_t> n, Tile<int32_t> kk,
                                                     Constexpr<bool> LARGEST) {
    constexpr int kb = key_bits(sizeof(T));
    Tile<int64_t> row = program_id(0).to<int64_t>();
    Ptr<T> xrow = x + row * n;
    Tile<int32_t> zero = 0;
    Tile<uint32_t> prefix = 0u;
    Tile<int32_t> krem = kk;
    for (int p = 0; p < num_passes(kb); ++p)
      select_digit(hist_pass(xrow, zero, n, prefix, p, LARGEST), pass_bits(kb, p), krem, prefix);
    gather_survivors(xrow, n, prefix, kk - krem, kk, ind + row * kk, LARGEST);
  });
  return k;
}

/// One program per row with the row held in shared memory (resident_fits): the row is copied in
/// once (cp.async, every chunk of CH elements in flight together), the digit passes and the
/// gather read it there, and the k survivors go to a shared [K] table as (key, ~index) u64s -
/// unique, so a descending sort of them is the result's order - sorted in place: one launch and
/// one read of the row from global memory.
template <class T> const auto& resident_kernel() {
  static const auto k = jit("tle_ops_topk_resident", [](Ptr<T> x, Ptr<T> vals, Ptr<int32_t> ind, Tile<int32_t> n,
                                                       Constexpr<int> CAP, Constexpr<int> CH, Constexpr<int> K,
                                                       Constexpr<bool> LARGEST) {
    constexpr int kb = key_bits(sizeof(T));
    const int ch = CH, kk = K;
    Tile<int64_t> row = program_id(0).to<int64_t>();
    Ptr<T> xrow = x + row * n;
    auto buf = gpu::alloc<T>({int64_t(CAP)}, gpu::scope::shared);
    for (auto i : range(0, n, ch)) {
      Tile<int32_t> offs = i + arange(0, ch);
      gpu::copy(xrow + offs, gpu::local_ptr(buf, {offs}), offs < n);
    }
    gpu::commit_group();
    gpu::wait_group(0);
    auto key_at = [&](const Tile<int32_t>& offs, const Tile<bool>& m) {
      return radix_key(load(gpu::local_ptr(buf, {offs}), m), LARGEST);
    };
    Tile<int32_t> zero = 0, krem = kk;
    Tile<uint32_t> kth = 0u;
    for (int p = 0; p < num_passes(kb); ++p)
      select_digit(digit_hist<kb>(key_at, zero, n, kth, p, ch, 0), pass_bits(kb, p), krem, kth);
    // The survivors: keys above the k-th at [0, K - krem), then keys equal to it while within K
    // (in index order: the lowest indices are kept). One scan counts both (above in the low 16
    // bits, equal in the high; a chunk has at most kResidentChunk elements).
    auto surv = gpu::alloc<uint64_t>({int64_t(kk)}, gpu::scope::shared);
    Tile<int32_t> base_gt = 0, base_eq = kk - krem;
    for (auto i : range(0, n, ch)) {
      Tile<int32_t> offs = i + arange(0, ch);
      Tile<bool> m = offs < n;
      Tile<uint32_t> key = key_at(offs, m);
      Tile<bool> gt = m & (key > kth), eq = m & (key == kth);
      Tile<int32_t> both = gt.to<int32_t>() + (eq.to<int32_t>() << 16);
      Tile<int32_t> inc = cumsum(both, 0);
      Tile<int32_t> pos = where(gt, base_gt + (inc & 0xFFFF) - 1, base_eq + (inc >> 16) - 1);
      store(gpu::local_ptr(surv, {pos}), survivor_code(key, offs), gt | (eq & (pos < kk)));
      Tile<int32_t> total = sum(both, 0);
      base_gt = base_gt + (total & 0xFFFF);
      base_eq = base_eq + (total >> 16);
    }
    Tile<int32_t> idx = sorted_indices(surv.load());
    Tile<int32_t> o = arange(0, kk);
    store(ind + row * kk + o, idx);
    store(vals + row * kk + o, load(gpu::local_ptr(buf, {idx})));
  });
  return k;
}

/// Passes whose row histograms the cooperative path keeps in the workspace (the first two; the
/// tail counts f32's third digit itself, over the candidates).
constexpr int kCoopWsPasses = 2;
/// int32 elements at the front of a cooperative workspace row that the zero kernel clears: the
/// counters and the row histograms of passes 0 and 1.
constexpr int coop_header(int kb) { return hist_offset(kb, kCoopWsPasses); }
/// int32 elements at the end of a cooperative workspace row that only the tail's loads read (they
/// round a slice's code count up to a multiple of 2: one code past the last slice's).
constexpr int kWsPad = 16;
/// The u64 offset of a workspace row's candidate codes (ws_row a multiple of 16: ws_row_size).
inline Tile<int64_t> codes_offset(int kb, const Tile<int32_t>& row, const Tile<int32_t>& ws_row) {
  return (row.to<int64_t>() * ws_row + (coop_header(kb) + kMaxProgramsPerRow)) / 2;
}

/// The cooperative path's view of one workspace row (row `row`, slice `s` of `ppr`): trace-time
/// offsets of the counters and pass histograms, run-time offsets of the per-slice parts.
/// Layout: [0, 16) counters (unused, zeroed); the row histograms of passes 0 and 1; the per-slice
/// candidate counts [kMaxProgramsPerRow] (the first ppr used); the candidates' survivor codes, u64
/// [n] (slice s's at s * slice; 8-byte aligned: every offset before it and ws_row are even);
/// kWsPad int32 the tail's loads may read past the last slice's candidates. The kernels take the
/// workspace twice, as int32 (ws) and as u64 (wc, the same address).
template <class T> struct CoopRow {
  static constexpr int kb = key_bits(sizeof(T));
  Tile<int32_t> row, s, lo, hi;
  Ptr<int32_t> wrow, counts;
  Ptr<uint64_t> codes;
  CoopRow(const Ptr<int32_t>& ws, const Ptr<uint64_t>& wc, const Tile<int32_t>& n, const Tile<int32_t>& ppr,
          const Tile<int32_t>& slice, const Tile<int32_t>& ws_row) {
    Tile<int32_t> pid = program_id(0);
    row = pid / ppr;
    s = pid % ppr;
    lo = s * slice;
    hi = minimum(lo + slice, n);
    wrow = ws + row.to<int64_t>() * ws_row;
    counts = wrow + coop_header(kb);
    codes = wc + codes_offset(kb, row, ws_row) + lo;
  }
};

/// Adds a slice's histogram of pass `pass` to the row's (atomically).
template <class T> void publish_hist(const CoopRow<T>& c, const Tile<int32_t>& h, int pass) {
  constexpr int kb = key_bits(sizeof(T));
  Tile<int32_t> bins = arange(0, int64_t(1) << pass_bits(kb, pass));
  atomic_add(c.wrow + hist_offset(kb, pass) + bins, h, h != 0);
}

/// The histogram of pass `pass`'s digit (pass >= 1) over the slice's candidates [0, count) in the
/// workspace whose higher digits equal `prefix`. Its steps are kBlock / 2 codes: a tile shape of
/// its own, so that its 16-byte (2-code) loads do not make the row loops' [kBlock] tiles (loaded
/// 4 elements a thread) 2 a thread (the layout pass gives the memory accesses of one shape one
/// layout).
template <class T>
Tile<int32_t> candidate_hist(const CoopRow<T>& c, const Tile<int32_t>& count, const Tile<uint32_t>& prefix, int pass) {
  auto key_at = [&](const Tile<int32_t>& offs, const Tile<bool>& m) { return code_key(load(c.codes + offs, m)); };
  return digit_hist<key_bits(sizeof(T))>(key_at, Tile<int32_t>(0), count, prefix, pass, kBlock / 2,
                                         kLoopStages);
}

/// Cooperative pass 0: the slice's histogram of the first digit.
template <class T> const auto& coop_hist0_kernel() {
  static const auto k = jit("tle_ops_topk_hist0", [](Ptr<T> x, Ptr<int32_t> ws, Ptr<uint64_t> wc, Tile<int32_t> n,
                                                    Tile<int32_t> ppr, Tile<int32_t> slice, Tile<int32_t> ws_row,
                                                    Constexpr<bool> LARGEST) {
    CoopRow<T> c(ws, wc, n, ppr, slice, ws_row);
    Ptr<T> xrow = x + c.row.template to<int64_t>() * n;
    publish_hist(c, hist_pass(xrow, c.lo, c.hi, Tile<uint32_t>(0u), 0, LARGEST), 0);
  });
  return k;
}

/// Cooperative pass 1, the last read of the row: the elements whose first digit is at or above
/// the k-th key's - those above it are in the result, those with it the candidates - go as survivor
/// codes, in index order, to the slice's part of the workspace (one compaction, one 8-byte store
/// each; at most k - 1 of a row are above, and the tail places them with the candidates above the
/// k-th key), and the candidates are counted by the second digit.
template <class T> const auto& coop_filter_kernel() {
  static const auto k = jit("tle_ops_topk_filter", [](Ptr<T> x, Ptr<int32_t> ws, Ptr<uint64_t> wc, Tile<int32_t> n,
                                                     Tile<int32_t> kk, Tile<int32_t> ppr, Tile<int32_t> slice,
                                                     Tile<int32_t> ws_row, Constexpr<bool> LARGEST) {
    constexpr int kb = key_bits(sizeof(T));
    CoopRow<T> c(ws, wc, n, ppr, slice, ws_row);
    Ptr<T> xrow = x + c.row.template to<int64_t>() * n;
    Tile<int32_t> krem;
    Tile<uint32_t> d0;
    digits_from_workspace<T>(c.wrow, 1, kk, krem, d0);
    Tile<int32_t> count = 0;
    for (auto i : range(c.lo, c.hi, kBlock, {.num_stages = kLoopStages})) {
      Tile<int32_t> offs = i + arange(0, kBlock);
      Tile<bool> m = offs < c.hi;
      Tile<uint32_t> key = radix_key(load(xrow + offs, m), LARGEST);
      Tile<bool> keep = m & ((key >> pass_shift(kb, 0)) >= d0);
      Tile<int32_t> one = keep.to<int32_t>();
      store(c.codes + (count + cumsum(one, 0) - 1), survivor_code(key, offs), keep);
      count = count + sum(one, 0);
    }
    store(c.counts + c.s, count);
    gpu::sync();  // the stores above are seen by every thread of the program
    // The candidates' histogram of the second digit (their first digit is d0; those above it fail
    // the prefix test).
    publish_hist(c, candidate_hist(c, count, d0, 1), 1);
  });
  return k;
}

/// The cooperative tail, one program per row (after the filter: the row histograms of passes 0
/// and 1 complete, each slice's survivor codes - its elements at or above the k-th key's first
/// digit - in the workspace): the remaining pass (f32's third digit) over the codes of every slice
/// at once, the survivors placed into a shared [K] table of codes - unique, so a descending sort of
/// them is the result's order - sorted, and the row's indices and values written.
/// The codes of all slices are read as one [PS, kBlock / PS] tile a step: PS (a power of two
/// >= ppr, at most kMaxProgramsPerRow) slices of kBlock / PS columns, the next columns of every
/// slice a step further. That loses the order across slices, which matters only for the elements
/// equal to the k-th key: when all E of them survive (E == krem) they are placed in that same loop;
/// when only the lowest-index krem of them do, a second loop over the same tiles places them by
/// their rank in index order (the equal ones of the lower slices, counted by the first loop, then
/// those before them in their slice) and keeps those within K. The loads' masks are rounded up to
/// whole 2-code (16-byte) vectors (a load reads up to one code past a slice's; the workspace row
/// has room after the last one) so the loops can be pipelined with 16-byte copies; the codes past
/// the count are masked off after the load.
template <class T> const auto& coop_tail_kernel() {
  static const auto k = jit("tle_ops_topk_tail", [](Ptr<T> x, Ptr<T> vals, Ptr<int32_t> ind, Ptr<int32_t> ws,
                                                   Ptr<uint64_t> wc, Tile<int32_t> n, Tile<int32_t> ppr,
                                                   Tile<int32_t> slice, Tile<int32_t> ws_row, Constexpr<int> K,
                                                   Constexpr<int> PS, Constexpr<bool> LARGEST) {
    constexpr int kb = key_bits(sizeof(T));
    constexpr int passes = num_passes(kb), wl = pass_bits(kb, passes - 1);
    const int kk = K, ps = PS, cb = kBlock / ps;
    Tile<int32_t> row32 = program_id(0);
    Tile<int64_t> row = row32.to<int64_t>();
    Ptr<T> xrow = x + row * n;
    Ptr<int32_t> wrow = ws + row * ws_row;
    Ptr<int32_t> counts = wrow + coop_header(kb);
    Ptr<uint64_t> codes = wc + codes_offset(kb, row32, ws_row);
    auto up2 = [](const Tile<int32_t>& c) { return multiple_of((c + 1) & ~1, 2); };
    // The row's histograms of passes 0 and 1 and the slices' code counts, loaded together before
    // the first reduction (its barriers keep later loads from being issued earlier): one wait for
    // the three, not three in a row.
    Tile<int32_t> ws_hist[kCoopWsPasses];
    for (int p = 0; p < kCoopWsPasses && p < passes; ++p)
      ws_hist[p] = load(wrow + hist_offset(kb, p) + arange(0, int64_t(1) << pass_bits(kb, p)));
    // The [PS, CB] tile: slice sl (its codes at codes + start), column j + col at step j.
    Tile<int32_t> sl = arange(0, ps), col = expand_dims(arange(0, cb), 0);
    Tile<int32_t> cnt1 = load(counts + sl, sl < ppr, 0);  // each slice's codes (0 past ppr)
    Tile<int32_t> maxc = max(cnt1, 0);
    Tile<int32_t> cnt = expand_dims(cnt1, 1), cnt2 = up2(cnt);
    Tile<int32_t> start = expand_dims(where(sl < ppr, sl * slice, 0), 1);
    // Step j's codes and their mask, m.
    auto cand = [&](const Tile<int32_t>& j, Tile<bool>& m) {
      Tile<int32_t> c = j + col;
      m = c < cnt;
      return load(codes + (start + c), c < cnt2);
    };
    auto cand_keys = [&](const Tile<int32_t>& j, Tile<bool>& m) { return code_key(cand(j, m)); };
    // The digits of the k-th key: passes 0 and 1 from the row's histograms, the rest over the
    // codes. E (eq_total): the elements equal to the k-th key, its bin of the last histogram.
    Tile<int32_t> krem = kk, hl;
    Tile<uint32_t> kth = 0u;
    for (int p = 0; p < passes; ++p) {
      const int w = pass_bits(kb, p);
      Tile<int32_t> h;
      if (p < kCoopWsPasses) h = ws_hist[p];
      else h = digit_hist_steps<kb>(cand_keys, Tile<int32_t>(0), maxc, cb, kth, p, kLoopStages);
      select_digit(h, w, krem, kth);
      hl = h;
    }
    Tile<int32_t> dl = (kth & ((1u << wl) - 1u)).template to<int32_t>();
    Tile<int32_t> eq_total = sum(where(arange(0, int64_t(1) << wl) == dl, hl, 0), 0);
    Tile<bool> all_eq = eq_total == krem;
    auto surv = gpu::alloc<uint64_t>({int64_t(kk)}, gpu::scope::shared);
    // The survivors above the k-th key at [0, K - krem), and, when all of them survive, those
    // equal to it at [K - krem, K). One scan counts both (above in the low 16 bits, equal in the
    // high): along each slice's columns, then over the slices' totals. eq_seen: each slice's
    // elements equal to the k-th key.
    Tile<int32_t> base_gt = 0, base_eq = kk - krem, eq_seen = zeros<int32_t>({ps});
    for (auto j : range(0, maxc, cb, {.num_stages = kLoopStages})) {
      Tile<bool> m;
      Tile<uint64_t> code = cand(j, m);
      Tile<uint32_t> key = code_key(code);
      Tile<bool> gt = m & (key > kth), eq = m & (key == kth);
      Tile<int32_t> both = gt.to<int32_t>() + (eq.to<int32_t>() << 16);
      // (Each scan before the sum of the same tile: the GPU lowering reuses the scan's totals.)
      Tile<int32_t> in_slice = cumsum(both, 1);
      Tile<int32_t> per_slice = sum(both, 1);
      Tile<int32_t> inc = in_slice + expand_dims(cumsum(per_slice, 0) - per_slice, 1);
      Tile<int32_t> pos = where(gt, base_gt + (inc & 0xFFFF) - 1, base_eq + (inc >> 16) - 1);
      store(gpu::local_ptr(surv, {pos}), code, gt | (eq & all_eq & (pos < kk)));
      Tile<int32_t> total = sum(per_slice, 0);
      base_gt = base_gt + (total & 0xFFFF);
      base_eq = base_eq + (total >> 16);
      eq_seen = eq_seen + (per_slice >> 16);
    }
    // Ties across the boundary (E > krem): the lowest-index krem of the elements equal to the k-th
    // key. A slice's codes are in index order and the slices are, so an equal element's position
    // is (K - krem) + the equal ones of the lower slices + those before it in its slice; those
    // below K are kept. Every slice at once again, the loop only run when needed.
    Tile<int32_t> eq_base = (kk - krem) + cumsum(eq_seen, 0) - eq_seen;
    for (auto j : range(0, where(all_eq, 0, maxc), cb, {.num_stages = kLoopStages})) {
      Tile<bool> m;
      Tile<uint64_t> code = cand(j, m);
      Tile<int32_t> eq = (m & (code_key(code) == kth)).to<int32_t>();
      Tile<int32_t> pos = expand_dims(eq_base, 1) + cumsum(eq, 1) - 1;
      store(gpu::local_ptr(surv, {pos}), code, (eq != 0) & (pos < kk));
      eq_base = eq_base + sum(eq, 1);
    }
    Tile<int32_t> idx = sorted_indices(surv.load());
    Tile<int32_t> o = arange(0, kk);
    store(ind + row * kk + o, idx);
    store(vals + row * kk + o, load(xrow + idx));
  });
  return k;
}

template <class T> const auto& sort_kernel() {
  static const auto k = jit("tle_ops_topk_sort", [](Ptr<T> x, Ptr<T> vals, Ptr<int32_t> ind, Tile<int32_t> n,
                                                   Constexpr<int> K, Constexpr<bool> LARGEST) {
    Tile<int64_t> row = program_id(0).to<int64_t>();
    Tile<int32_t> a = arange(0, K);
    Tile<int32_t> idx = load(ind + row * int(K) + a);
    Tile<T> v = load(x + row * n + idx);
    // Key descending, then index ascending (survivor_code); the value comes back from x.
    Tile<int32_t> sorted_idx = sorted_indices(survivor_code(radix_key(v, LARGEST), idx));
    store(ind + row * int(K) + a, sorted_idx);
    store(vals + row * int(K) + a, load(x + row * n + sorted_idx));
  });
  return k;
}

/// Zeroes the first `header` int32 of each workspace row (counters and pass histograms).
inline const auto& zero_kernel() {
  static const auto k = jit("tle_ops_topk_zero", [](Ptr<int32_t> ws, Tile<int32_t> header, Tile<int32_t> ws_row) {
    Ptr<int32_t> wrow = ws + program_id(0).to<int64_t>() * ws_row;
    for (auto i : range(0, header, 1024)) {
      Tile<int32_t> offs = i + arange(0, 1024);
      store(wrow + offs, 0, offs < header);
    }
  });
  return k;
}

/// How a shape runs: one kernel (Direct), one program per row (Select: steps 1-3 in one kernel),
/// or the cooperative kernels (Coop) with `ppr` programs per row, each on `slice` elements.
struct Plan {
  enum Mode { Direct, Resident, Select, Coop } mode = Direct;
  int64_t ppr = 1, slice = 0;
};

/// resident_kernel's chunk (elements a step) and row capacity (n rounded up to whole chunks).
inline int resident_chunk(int64_t n) { return static_cast<int>(std::min<int64_t>(kResidentChunk, next_power_of_2(n))); }
inline int64_t resident_capacity(int64_t n) {
  const int64_t ch = resident_chunk(n);
  return (n + ch - 1) / ch * ch;
}
using detail::program_smem_limit;  // tle/ops/limits.hpp
/// resident_kernel's shared memory (a bound): its buffers (the row and the survivors, each rounded
/// up to 1 KB) and, after them, the sort's staging (the keys of the survivors padded to a power of
/// two: 8 bytes each), with 32 KB for the three pass histograms (20 KB) and the scans' scratch.
inline int64_t resident_smem(int64_t n, int64_t k, int elem_bytes) {
  auto kb1 = [](int64_t bytes) { return (bytes + 1023) / 1024 * 1024; };
  return kb1(resident_capacity(n) * elem_bytes) + kb1(8 * k) + 8 * next_power_of_2(k) + (32 << 10);
}
/// Whether resident_kernel fits: a row of at most kResidentRowBytes, and its shared memory within
/// the program's limit.
inline bool resident_fits(int64_t n, int64_t k, int elem_bytes, Backend backend) {
  return resident_capacity(n) * elem_bytes <= kResidentRowBytes &&
         resident_smem(n, k, elem_bytes) <= program_smem_limit(backend);
}
/// The register limit of resident_kernel at `warps` warps: where two programs of 16 warps fit in
/// an SM's shared memory (taken as one program's limit, program_smem_limit: 227 KB on sm_90), 64
/// registers a thread, so that their registers fit too (65536 an SM).
/// Left free the kernel takes 73-80 (ptxas, f32 rows of 8192, k = 8) and one program runs per SM:
/// 4096 rows of 8192, 297 -> 392 us on the H100 (2026-12-07). With the limit ptxas fits it in 64
/// with no spill (checked for the suite's resident shapes, f32/f16/bf16). 0: no limit.
inline int resident_maxnreg(int64_t n, int64_t k, int elem_bytes, int warps, Backend backend) {
  return warps == 16 && 2 * resident_smem(n, k, elem_bytes) <= program_smem_limit(backend) ? 64 : 0;
}

/// The cooperative path's own programs per row for `units` programs in flight on the machine:
/// the largest power of two within units / rows, one program per two tiles (4096 elements) of a
/// row and kMaxProgramsPerRow. (H100, 2026-12-07, the tuner's sweep: 4 programs per row beat 5 -
/// rounding units / rows up - by 10-13 % on 64 rows of 129280-131072, and 32 beat 16 - one per
/// 8192 elements - by 9 % on one row of 131072.)
inline int64_t auto_programs_per_row(int64_t rows, int64_t n, int64_t units) {
  const int64_t want =
      std::clamp<int64_t>(units / std::max<int64_t>(rows, 1), 1,
                          std::clamp<int64_t>(n / (2 * kBlock), 1, kMaxProgramsPerRow));
  return int64_t(std::bit_floor(uint64_t(want)));
}

inline Plan plan(int64_t rows, int64_t n, int64_t k, int elem_bytes, int requested, Backend backend) {
  Plan p;
  if (n <= kDirectMaxN && requested == 0) return p;
  const int64_t max_ppr = std::clamp<int64_t>((n + kBlock - 1) / kBlock, 1, kMaxProgramsPerRow);
  // A row that fits in shared memory: one program per row holding it, forced (1) or chosen (0:
  // one launch and one read of x beat the cooperative path's four even when the rows do not fill
  // the GPU).
  if (requested <= 1 && resident_fits(n, k, elem_bytes, backend)) {
    p.mode = Plan::Resident;
    return p;
  }
  if (requested == 1) {
    p.mode = Plan::Select;
    return p;
  }
  if (requested > 1) {
    p.ppr = std::min<int64_t>(requested, max_ppr);
  } else {
    int64_t units = 1;
    if (backend == Backend::GPU) {
      static const int sms = [] {
        auto info = gpu_info(0);
        return info ? info->num_sms : 1;
      }();
      units = 2 * int64_t(sms);
    } else if (backend == Backend::CPU) {
      units = std::max(1u, std::thread::hardware_concurrency());
    }
    p.ppr = auto_programs_per_row(rows, n, units);
    // One program per row on a small matrix: one kernel re-reading its row (from cache) beats the
    // cooperative path's extra launches.
    if (p.ppr == 1 && rows * n * elem_bytes < (int64_t(4) << 20)) {
      p.mode = Plan::Select;
      return p;
    }
  }
  p.mode = Plan::Coop;
  p.slice = ((n + p.ppr - 1) / p.ppr + kBlock - 1) / kBlock * kBlock;
  p.ppr = (n + p.slice - 1) / p.slice;
  return p;
}

/// int32 elements of one workspace row of the cooperative path (CoopRow's layout), a multiple of
/// 16 (64-byte rows: the codes' 16-byte loads stay aligned, and the kernels, specialized on it,
/// know).
inline int64_t ws_row_size(int elem_bytes, int64_t n) {
  return (coop_header(key_bits(elem_bytes)) + kMaxProgramsPerRow + 2 * n + kWsPad + 15) / 16 * 16;
}

inline void check_shape(int64_t rows, int64_t n, int64_t k, const TopkOptions& o, const SrcLoc& l) {
  if (rows < 0) throw UserError(l, "tle::ops::topk: rows = " + std::to_string(rows) + " is negative");
  if (n < 1 || n > (int64_t(1) << 30))
    throw UserError(l, "tle::ops::topk: n = " + std::to_string(n) + " is outside 1..2^30 (the row length)");
  if (k < 1 || k > n)
    throw UserError(l, "tle::ops::topk: k = " + std::to_string(k) + " is outside 1..n = " + std::to_string(n) +
                           "; ask for at most n elements per row");
  if (k > kMaxK)
    throw UserError(l, "tle::ops::topk: k = " + std::to_string(k) + " is larger than " + std::to_string(kMaxK) +
                           " (the survivors of a row are sorted in one program, which must fit the GPU's "
                           "shared memory); split the selection or use a full sort");
  if (o.programs_per_row < 0)
    throw UserError(l, "tle::ops::topk: programs_per_row = " + std::to_string(o.programs_per_row) + " is negative");
  detail::check_num_warps(o.num_warps, "topk", l);
}

}  // namespace detail_topk

/// The number of int32 elements of workspace that topk needs for this shape and these options:
/// 0 when it needs none (one program per row: rows of n <= 256, rows that fit in shared memory,
/// programs_per_row = 1), else at most rows * (2n + 4400)
/// (the cooperative path's candidates, counters and histograms). Same errors as topk.
template <class T>
size_t topk_workspace_size(int64_t rows, int64_t n, int64_t k, const TopkOptions& o = {}, loc_t l = loc_t::current()) {
  using namespace detail_topk;
  check_shape(rows, n, k, o, l);
  const Plan p = plan(rows, n, k, sizeof(T), o.programs_per_row, o.backend ? *o.backend : default_backend());
  if (p.mode != Plan::Coop) return 0;
  return static_cast<size_t>(rows * ws_row_size(sizeof(T), n));
}

/// The k largest (smallest) elements of each row of the row-major [rows, n] matrix x and their
/// column indices, sorted (see the top of this file for order, memory, algorithm and errors).
/// T is float, tle::f16 or tle::bf16; values is [rows, k] of T, indices [rows, k] of int32.
template <class T>
void topk(const T* x, int64_t rows, int64_t n, int64_t k, T* values, int32_t* indices, const TopkOptions& o = {},
          loc_t l = loc_t::current()) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, f16> || std::is_same_v<T, bf16>,
                "tle::ops::topk takes float, tle::f16 or tle::bf16 matrices");
  using namespace detail_topk;
  check_shape(rows, n, k, o, l);
  if (rows == 0) return;
  if (!x || !values || !indices)
    throw UserError(l, std::string("tle::ops::topk: the ") + (!x ? "input" : !values ? "values" : "indices") +
                           " pointer is null");
  const Backend b = o.backend ? *o.backend : default_backend();
  auto grid = [&](int64_t programs, int warps) {
    Grid g(programs, 1, 1, l);
    g.on_stream(o.stream).backend(b).with_warps(o.num_warps ? o.num_warps : warps);
    return g;
  };
  const int N32 = static_cast<int>(n), K = static_cast<int>(k);
  const Plan p = plan(rows, n, k, sizeof(T), o.programs_per_row, b);
  if (p.mode == Plan::Direct) {
    direct_kernel<T>()(grid(rows, 4), x, values, indices, N32, static_cast<int>(next_power_of_2(n)), K, o.largest);
    return;
  }
  if (p.mode == Plan::Resident) {
    Grid g = grid(rows, kResidentWarps);
    g.with_maxnreg(resident_maxnreg(n, k, sizeof(T), g.num_warps, b));
    resident_kernel<T>()(g, x, values, indices, N32, static_cast<int>(resident_capacity(n)), resident_chunk(n), K,
                         o.largest);
    return;
  }
  if (p.mode == Plan::Select) {
    select_kernel<T>()(grid(rows, kResidentWarps), x, indices, N32, K, o.largest);
    sort_kernel<T>()(grid(rows, kResidentWarps), x, values, indices, N32, K, o.largest);
    return;
  }
  const int64_t row_ws = ws_row_size(sizeof(T), n), total = rows * row_ws;
  if (rows * p.ppr > std::numeric_limits<int32_t>::max() || row_ws > std::numeric_limits<int32_t>::max())
    throw UserError(l, "tle::ops::topk: rows * programs_per_row or the workspace row is too large; use fewer "
                       "programs per row or shorter rows");
  std::vector<int32_t> host_ws;
  DeviceBuffer<int32_t> dev_ws;
  int32_t* ws = o.workspace;
  if (reinterpret_cast<uintptr_t>(ws) % 8 != 0)
    throw UserError(l, "tle::ops::topk: TopkOptions::workspace is not 8-byte aligned (it holds u64 codes); pass "
                       "an 8-byte aligned allocation, e.g. a DeviceBuffer's data()");
  if (!ws) {
    if (b == Backend::GPU) {
      dev_ws = DeviceBuffer<int32_t>(static_cast<size_t>(total), l);
      ws = dev_ws.data();
    } else {
      host_ws.resize(static_cast<size_t>(total));
      ws = host_ws.data();
    }
  }
  constexpr int kb = key_bits(sizeof(T));
  const int P = static_cast<int>(p.ppr), S = static_cast<int>(p.slice), R = static_cast<int>(row_ws);
  const int64_t programs = rows * p.ppr;
  zero_kernel()(grid(rows, 4), ws, coop_header(kb), R);
  uint64_t* wc = reinterpret_cast<uint64_t*>(ws);  // the same memory, as u64 (the candidates' codes)
  coop_hist0_kernel<T>()(grid(programs, 8), x, ws, wc, N32, P, S, R, o.largest);
  coop_filter_kernel<T>()(grid(programs, 8), x, ws, wc, N32, K, P, S, R, o.largest);
  coop_tail_kernel<T>()(grid(rows, kResidentWarps), x, values, indices, ws, wc, N32, P, S, R, K,
                        static_cast<int>(std::bit_ceil(uint64_t(p.ppr))), o.largest);
  if (!dev_ws.empty()) Stream::wrap(o.stream).synchronize();
}

/// As above on DeviceBuffers (GPU backend): x holds at least rows * n elements, values and indices
/// at least rows * k (UserError at the caller's line otherwise).
template <class T>
void topk(const DeviceBuffer<T>& x, int64_t rows, int64_t n, int64_t k, DeviceBuffer<T>& values,
          DeviceBuffer<int32_t>& indices, TopkOptions o = {}, loc_t l = loc_t::current()) {
  detail_topk::check_shape(rows, n, k, o, l);
  auto need = [&](size_t have, int64_t want, const char* what) {
    if (static_cast<int64_t>(have) < want)
      throw UserError(l, std::string("tle::ops::topk: the ") + what + " DeviceBuffer holds " + std::to_string(have) +
                             " elements, fewer than the " + std::to_string(want) + " of the matrix");
  };
  need(x.size(), rows * n, "input");
  need(values.size(), rows * k, "values");
  need(indices.size(), rows * k, "indices");
  if (!o.backend) o.backend = Backend::GPU;
  topk(x.data(), rows, n, k, values.data(), indices.data(), o, l);
}

namespace detail_topk {
/// The element count of a row-major contiguous DLPack tensor of rank 1 or 2 as (rows, cols), or a
/// UserError naming `what`.
inline void dl_matrix(const DLTensor* t, const char* what, int64_t& rows, int64_t& cols, const SrcLoc& l) {
  auto bad = [&](const std::string& why) {
    throw UserError(l, std::string("tle::ops::topk: the ") + what + " DLPack tensor " + why);
  };
  if (!t) bad("is null");
  if (t->ndim != 1 && t->ndim != 2)
    bad("has rank " + std::to_string(t->ndim) + "; pass a [rows, n] matrix or a [n] row");
  if (t->dtype.lanes != 1) bad("has vector lanes; view it as scalars");
  rows = t->ndim == 2 ? t->shape[0] : 1;
  cols = t->shape[t->ndim - 1];
  if (t->strides) {
    const bool ok = t->strides[t->ndim - 1] == 1 || cols == 1;
    const bool ok_rows = t->ndim == 1 || rows == 1 || t->strides[0] == cols;
    if (!ok || !ok_rows) bad("is not contiguous row-major; make it contiguous first");
  }
}
inline bool dl_device_fits(const DLTensor* t, Backend b) {
  const int d = static_cast<int>(t->device.device_type);
  if (b == Backend::GPU) return d == kDLCUDA || d == kDLCUDAManaged || d == kDLCUDAHost;
  return d == kDLCPU || d == kDLCUDAHost;
}
}  // namespace detail_topk

/// As above on DLPack tensors: x a contiguous row-major [rows, n] (or [n]) tensor of float32,
/// float16 or bfloat16; values of x's dtype and indices of int32, both contiguous [rows, k] (or [k]).
/// The backend is options.backend, else tle::default_backend(); the tensors' device must suit it
/// (kDLCPU or kDLCUDAHost on the CPU backend and the interpreter; kDLCUDA, kDLCUDAManaged or
/// kDLCUDAHost on the GPU). UserError at the caller's line for another rank or dtype, a
/// non-contiguous tensor, shapes that do not match, a device that does not suit the backend,
/// and topk's own errors.
inline void topk(const DLTensor* x, int64_t k, DLTensor* values, DLTensor* indices, TopkOptions o = {},
                 loc_t l = loc_t::current()) {
  using namespace detail_topk;
  int64_t rows, n, vr, vk, ir, ik;
  dl_matrix(x, "input", rows, n, l);
  dl_matrix(values, "values", vr, vk, l);
  dl_matrix(indices, "indices", ir, ik, l);
  if (vr != rows || vk != k || ir != rows || ik != k)
    throw UserError(l, "tle::ops::topk: values and indices must be [" + std::to_string(rows) + ", " +
                           std::to_string(k) + "] for an input of " + std::to_string(rows) + " rows and k = " +
                           std::to_string(k));
  if (values->dtype.code != x->dtype.code || values->dtype.bits != x->dtype.bits)
    throw UserError(l, "tle::ops::topk: the values tensor's dtype differs from the input's");
  if (indices->dtype.code != kDLInt || indices->dtype.bits != 32)
    throw UserError(l, "tle::ops::topk: the indices tensor must be int32 (DLPack kDLInt, 32 bits)");
  if (!o.backend) o.backend = default_backend();
  for (const DLTensor* t : {x, static_cast<const DLTensor*>(values), static_cast<const DLTensor*>(indices)})
    if (!dl_device_fits(t, *o.backend))
      throw UserError(l, std::string("tle::ops::topk: a DLPack tensor's device does not suit the ") +
                             backend_name(*o.backend) + " backend");
  auto at = [](const DLTensor* t) { return static_cast<char*>(t->data) + t->byte_offset; };
  int32_t* iptr = reinterpret_cast<int32_t*>(at(indices));
  const int code = x->dtype.code, bits = x->dtype.bits;
  if (code == kDLFloat && bits == 32)
    topk(reinterpret_cast<const float*>(at(x)), rows, n, k, reinterpret_cast<float*>(at(values)), iptr, o, l);
  else if (code == kDLFloat && bits == 16)
    topk(reinterpret_cast<const f16*>(at(x)), rows, n, k, reinterpret_cast<f16*>(at(values)), iptr, o, l);
  else if (code == kDLBfloat && bits == 16)
    topk(reinterpret_cast<const bf16*>(at(x)), rows, n, k, reinterpret_cast<bf16*>(at(values)), iptr, o, l);
  else
    throw UserError(l, "tle::ops::topk: the input's DLPack dtype (code " + std::to_string(code) + ", " +
                           std::to_string(bits) + " bits) is not float32, float16 or bfloat16");
}

}  // namespace tle::ops
