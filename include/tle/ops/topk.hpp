// tle/ops/topk.hpp - top-k of each row of a matrix, written in tle itself (header only).
//
//   tle::ops::topk(x, rows, n, k, values, indices);                     // k largest of each row
//   tle::ops::topk(x, rows, n, k, values, indices, {.largest = false, .stream = s});
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
// Launches: a row of n <= 2048 is one kernel (the whole row in one tile, tle::topk). Otherwise,
// with one program per row (batches that fill the machine: rows >= 2 * number of SMs on the GPU),
// steps 1-3 are one kernel that reads the row once per pass plus once for the gather, then the sort
// kernel: two launches. With several programs per row (small batches, e.g. 1 x 131072), each
// program takes a slice of the row and the programs cooperate through counters in global memory:
// a kernel zeroing the workspace, one kernel per pass (each program adds its slice's histogram to
// the row's with atomic_add and stores it for step 3, and recomputes the digits found so far from
// the previous passes' histograms), the gather kernel (an atomic counter reserves the positions of
// the larger elements; the equal ones take positions after those of the lower slices, read from
// the stored per-slice histograms), then the sort kernel: f32 six launches, f16/bf16 five.
//
// Workspace: only the cooperative path (programs_per_row > 1) needs one:
// topk_workspace_size(rows, n, k, options) int32 elements, on the backend's memory. Pass it as
// TopkOptions::workspace; without it, topk allocates one for the call (on the GPU a DeviceBuffer,
// and the call then waits for its stream before freeing it, so it is synchronous).
//
// Errors (tle::UserError at the caller's line): k < 1, k > n, k > 8192, n < 1 or n >= 2^31,
// rows < 0, a null pointer while rows > 0, programs_per_row < 0, a DeviceBuffer smaller than the
// matrix it should hold. Launch errors (a host pointer on the GPU backend, misalignment) are
// UserErrors at the caller's line too.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "tle/device.hpp"
#include "tle/kernel.hpp"

namespace tle::ops {

/// Options of tle::ops::topk.
struct TopkOptions {
  /// true: the k largest, sorted descending; false: the k smallest, sorted ascending.
  bool largest = true;
  /// GPU: the CUstream the kernels are queued on (null: the legacy default stream). Ignored on the CPU.
  void* stream = nullptr;
  /// Programs cooperating on one row: 0 chooses from the shape (1 when the batch alone fills the
  /// machine); 1 forces one program per row; more splits each row into that many slices (capped at
  /// one slice per 2048 elements). Rows of n <= 2048 always take the one-kernel path unless this is >= 2.
  int programs_per_row = 0;
  /// Workspace of the cooperative path: topk_workspace_size(...) int32 elements (or null).
  int32_t* workspace = nullptr;
  /// The backend to run on (unset: tle::default_backend()).
  std::optional<Backend> backend;
};

namespace detail_topk {

constexpr int kRadixBits = 11;
constexpr int kBlock = 2048;        // elements per tile in the row loops
constexpr int64_t kDirectMaxN = 2048;  // rows up to this length: one kernel, the whole row in one tile
constexpr int64_t kMaxK = 8192;     // the sort of the survivors must fit a GPU program's shared memory
constexpr int kCounterSlots = 16;   // workspace row: [counter, pad..][pass histograms][per-slice last histograms]

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

/// The histogram of pass `pass`'s digit over the elements [lo, hi) of a row whose higher digits
/// equal `prefix`.
template <class T>
Tile<int32_t> hist_pass(const Ptr<T>& xrow, const Tile<int32_t>& lo, const Tile<int32_t>& hi,
                        const Tile<uint32_t>& prefix, int pass, bool largest) {
  constexpr int kb = key_bits(sizeof(T));
  const int w = pass_bits(kb, pass), sh = pass_shift(kb, pass);
  Tile<int32_t> h = zeros<int32_t>({int64_t(1) << w});
  for (auto i : range(lo, hi, kBlock)) {
    Tile<int32_t> offs = i + arange(0, kBlock);
    Tile<bool> m = offs < hi;
    Tile<uint32_t> key = radix_key(load(xrow + offs, m), largest);
    if (pass > 0) m = m & ((key >> pass_shift(kb, pass - 1)) == prefix);
    Tile<int32_t> d = ((key >> sh) & ((1u << w) - 1u)).template to<int32_t>();
    h = h + histogram(d, int64_t(1) << w, m);
  }
  return h;
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

/// Step 3 over the elements [lo, hi) of a row: indices of keys > kth to irow[gt positions], of keys
/// == kth to irow[base_eq + their rank] while that is < k. The gt positions come from
/// `counter` (atomic, several programs per row) or from a running count (one program per row).
template <class T>
void gather_survivors(const Ptr<T>& xrow, const Tile<int32_t>& lo, const Tile<int32_t>& hi, const Tile<uint32_t>& kth,
                      Tile<int32_t> base_eq, const Tile<int32_t>& k, const Ptr<int32_t>& irow,
                      const Ptr<int32_t>* counter, bool largest) {
  Tile<int32_t> base_gt = 0;
  for (auto i : range(lo, hi, kBlock)) {
    Tile<int32_t> offs = i + arange(0, kBlock);
    Tile<bool> m = offs < hi;
    Tile<uint32_t> key = radix_key(load(xrow + offs, m), largest);
    Tile<int32_t> gt = (m & (key > kth)).to<int32_t>();
    Tile<int32_t> eq = (m & (key == kth)).to<int32_t>();
    Tile<int32_t> first = counter ? atomic_add(*counter, sum(gt, 0)) : base_gt;
    store(irow + (first + cumsum(gt, 0) - 1), offs, gt != 0);
    Tile<int32_t> pe = base_eq + cumsum(eq, 0) - 1;
    store(irow + pe, offs, (eq != 0) & (pe < k));
    base_eq = base_eq + sum(eq, 0);
    if (!counter) base_gt = base_gt + sum(gt, 0);
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
    gather_survivors(xrow, zero, n, prefix, kk - krem, kk, ind + row * kk, nullptr, LARGEST);
  });
  return k;
}

template <class T> const auto& hist_kernel() {
  static const auto k = jit("tle_ops_topk_hist", [](Ptr<T> x, Ptr<int32_t> ws, Tile<int32_t> n, Tile<int32_t> kk,
                                                   Tile<int32_t> ppr, Tile<int32_t> slice, Tile<int32_t> ws_row,
                                                   Constexpr<int> PASS, Constexpr<bool> LARGEST) {
    constexpr int kb = key_bits(sizeof(T));
    Tile<int32_t> pid = program_id(0);
    Tile<int32_t> row = pid / ppr, s = pid % ppr;
    Ptr<T> xrow = x + row.to<int64_t>() * n;
    Ptr<int32_t> wrow = ws + row.to<int64_t>() * ws_row;
    Tile<int32_t> krem;
    Tile<uint32_t> prefix;
    digits_from_workspace<T>(wrow, PASS, kk, krem, prefix);
    Tile<int32_t> lo = s * slice;
    Tile<int32_t> hi = minimum(lo + slice, n);
    const int w = pass_bits(kb, PASS);
    Tile<int32_t> h = hist_pass(xrow, lo, hi, prefix, PASS, LARGEST);
    Tile<int32_t> bins = arange(0, int64_t(1) << w);
    atomic_add(wrow + hist_offset(kb, PASS) + bins, h, h != 0);
    if (PASS == num_passes(kb) - 1) store(wrow + hist_offset(kb, PASS + 1) + s * (1 << w) + bins, h);
  });
  return k;
}

template <class T> const auto& gather_kernel() {
  static const auto k = jit("tle_ops_topk_gather", [](Ptr<T> x, Ptr<int32_t> ind, Ptr<int32_t> ws, Tile<int32_t> n,
                                                     Tile<int32_t> kk, Tile<int32_t> ppr, Tile<int32_t> slice,
                                                     Tile<int32_t> ws_row, Constexpr<bool> LARGEST) {
    constexpr int kb = key_bits(sizeof(T));
    constexpr int last = num_passes(kb) - 1;
    Tile<int32_t> pid = program_id(0);
    Tile<int32_t> row = pid / ppr, s = pid % ppr;
    Ptr<T> xrow = x + row.to<int64_t>() * n;
    Ptr<int32_t> wrow = ws + row.to<int64_t>() * ws_row;
    Tile<int32_t> krem;
    Tile<uint32_t> kth;
    digits_from_workspace<T>(wrow, last + 1, kk, krem, kth);
    // Elements equal to the k-th key in the lower slices: their last digit's bin in the stored
    // per-slice histograms of the last pass.
    const int w = pass_bits(kb, last);
    Tile<int32_t> dl = (kth & ((1u << w) - 1u)).to<int32_t>();
    Tile<int32_t> eq_before = 0;
    for (auto q : range(0, s)) eq_before = eq_before + load(wrow + hist_offset(kb, last + 1) + q * (1 << w) + dl);
    Tile<int32_t> lo = s * slice;
    Tile<int32_t> hi = minimum(lo + slice, n);
    Ptr<int32_t> counter = wrow;
    gather_survivors(xrow, lo, hi, kth, kk - krem + eq_before, kk, ind + row.to<int64_t>() * kk, &counter, LARGEST);
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
    // Key descending, then index ascending: one u64 per survivor, sorted descending.
    Tile<uint64_t> comp = (radix_key(v, LARGEST).template to<uint64_t>() << 32) | (~idx.to<uint32_t>()).to<uint64_t>();
    Tile<int32_t> order = argsort(comp, 0, /*descending=*/true);
    store(ind + row * int(K) + a, gather(idx, order, 0));
    store(vals + row * int(K) + a, gather(v, order, 0));
  });
  return k;
}

inline const auto& zero_kernel() {
  static const auto k = jit("tle_ops_zero_i32", [](Ptr<int32_t> p, Tile<int64_t> count, Constexpr<int> B) {
    Tile<int64_t> offs = program_id(0).to<int64_t>() * int(B) + arange(0, B);
    store(p + offs, 0, offs < count);
  });
  return k;
}

/// Programs per row and slice length (a multiple of kBlock) for the shape.
inline void plan(int64_t rows, int64_t n, int requested, Backend backend, int64_t& ppr, int64_t& slice) {
  const int64_t max_ppr = std::max<int64_t>(1, (n + kBlock - 1) / kBlock);
  if (requested > 0) {
    ppr = std::min<int64_t>(requested, max_ppr);
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
    ppr = std::clamp<int64_t>((units + rows - 1) / std::max<int64_t>(rows, 1), 1, std::max<int64_t>(1, n / 8192));
  }
  slice = ((n + ppr - 1) / ppr + kBlock - 1) / kBlock * kBlock;
  ppr = (n + slice - 1) / slice;
}

inline int64_t ws_row_size(int elem_bytes, int64_t ppr) {
  const int kb = key_bits(elem_bytes), last = num_passes(kb) - 1;
  return hist_offset(kb, last + 1) + ppr * (int64_t(1) << pass_bits(kb, last));
}

inline void check_shape(int64_t rows, int64_t n, int64_t k, const TopkOptions& o, const SrcLoc& l) {
  if (rows < 0) throw UserError(l, "tle::ops::topk: rows = " + std::to_string(rows) + " is negative");
  if (n < 1 || n > std::numeric_limits<int32_t>::max())
    throw UserError(l, "tle::ops::topk: n = " + std::to_string(n) + " is outside 1..2^31-1 (the row length)");
  if (k < 1 || k > n)
    throw UserError(l, "tle::ops::topk: k = " + std::to_string(k) + " is outside 1..n = " + std::to_string(n) +
                           "; ask for at most n elements per row");
  if (k > kMaxK)
    throw UserError(l, "tle::ops::topk: k = " + std::to_string(k) + " is larger than " + std::to_string(kMaxK) +
                           " (the survivors of a row are sorted in one program, which must fit the GPU's "
                           "shared memory); split the selection or use a full sort");
  if (o.programs_per_row < 0)
    throw UserError(l, "tle::ops::topk: programs_per_row = " + std::to_string(o.programs_per_row) + " is negative");
}

}  // namespace detail_topk

/// The number of int32 elements of workspace that topk needs for this shape and these options
/// (0 when it needs none: rows of n <= 2048, or one program per row). Same errors as topk.
template <class T>
size_t topk_workspace_size(int64_t rows, int64_t n, int64_t k, const TopkOptions& o = {}, loc_t l = loc_t::current()) {
  using namespace detail_topk;
  check_shape(rows, n, k, o, l);
  const Backend b = o.backend ? *o.backend : default_backend();
  if (n <= kDirectMaxN && o.programs_per_row < 2) return 0;
  int64_t ppr, slice;
  plan(rows, n, o.programs_per_row, b, ppr, slice);
  if (ppr <= 1) return 0;
  return static_cast<size_t>(rows * ws_row_size(sizeof(T), ppr));
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
    g.on_stream(o.stream).backend(b).with_warps(warps);
    return g;
  };
  const int N32 = static_cast<int>(n), K = static_cast<int>(k);
  if (n <= kDirectMaxN && o.programs_per_row < 2) {
    const int np2 = static_cast<int>(next_power_of_2(n));
    direct_kernel<T>()(grid(rows, 4), x, values, indices, N32, np2, K, o.largest);
    return;
  }
  int64_t ppr, slice;
  plan(rows, n, o.programs_per_row, b, ppr, slice);
  if (ppr <= 1) {
    select_kernel<T>()(grid(rows, 8), x, indices, N32, K, o.largest);
  } else {
    const int64_t row_ws = ws_row_size(sizeof(T), ppr), total = rows * row_ws;
    if (rows * ppr > std::numeric_limits<int32_t>::max() || total > std::numeric_limits<int32_t>::max() * int64_t(64))
      throw UserError(l, "tle::ops::topk: rows * programs_per_row is too large; use fewer programs per row");
    std::vector<int32_t> host_ws;
    DeviceBuffer<int32_t> dev_ws;
    int32_t* ws = o.workspace;
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
    zero_kernel()(grid((total + 1023) / 1024, 4), ws, total, 1024);
    const int P = static_cast<int>(ppr), S = static_cast<int>(slice), R = static_cast<int>(row_ws);
    for (int p = 0; p < num_passes(kb); ++p)
      hist_kernel<T>()(grid(rows * ppr, 8), x, ws, N32, K, P, S, R, p, o.largest);
    gather_kernel<T>()(grid(rows * ppr, 8), x, indices, ws, N32, K, P, S, R, o.largest);
    sort_kernel<T>()(grid(rows, 8), x, values, indices, N32, K, o.largest);
    if (!dev_ws.empty()) Stream::wrap(o.stream).synchronize();
    return;
  }
  sort_kernel<T>()(grid(rows, 8), x, values, indices, N32, K, o.largest);
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

}  // namespace tle::ops
