// src/layout/named_layouts.cpp - the named GPU layouts as LinearLayouts. See named_layouts.hpp for
// the definition and source of each one.
#include "layout/named_layouts.hpp"

#include <algorithm>
#include <string>

#include "tle/error.hpp"

namespace tle::layout {

namespace {

using Basis = LinearLayout::Basis;

[[noreturn]] void fail(const std::string& fn, const std::string& msg) {
  throw InternalError("layout::" + fn + ": " + msg);
}

template <class T>
std::string list(const std::vector<T>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  s += ']';
  return s;
}

template <class T>
void check_pow2(const std::string& fn, const char* what, const std::vector<T>& v) {
  for (T x : v)
    if (!is_pow2(static_cast<int64_t>(x)) || static_cast<int64_t>(x) > (int64_t{1} << 30))
      fail(fn, std::string(what) + " " + list(v) + " has " + std::to_string(x) +
                   ", which is not a power of two (<= 2^30)");
}

void check_order(const std::string& fn, const std::vector<int32_t>& order, size_t rank) {
  std::vector<int32_t> s = order;
  std::sort(s.begin(), s.end());
  bool ok = s.size() == rank;
  for (size_t i = 0; ok && i < s.size(); ++i) ok = s[i] == static_cast<int32_t>(i);
  if (!ok) fail(fn, "order " + list(order) + " is not a permutation of [0, " + std::to_string(rank) + ")");
}

void check_dims(const std::string& fn, const LinearLayout& l, size_t rank) {
  bool ok = static_cast<size_t>(l.num_out_dims()) == rank;
  for (size_t k = 0; ok && k < rank; ++k) ok = l.out_dims()[k].name == dim_name(static_cast<int>(k));
  if (!ok) fail(fn, "expected a layout with outputs dim0..dim" + std::to_string(rank - 1) + ", got\n" + l.str());
}

/// in -> the dimensions of `sizes` in `order` (order[0] fastest): Triton's identityStandardND.
LinearLayout identity_nd(const char* in, const std::vector<int32_t>& sizes,
                         const std::vector<int32_t>& order) {
  LinearLayout l;
  for (int32_t d : order) l *= LinearLayout::identity_1d(sizes[d], in, dim_name(d));
  return l;
}

std::vector<std::string> dim_names(size_t rank) {
  std::vector<std::string> r;
  for (size_t k = 0; k < rank; ++k) r.push_back(dim_name(static_cast<int>(k)));
  return r;
}

/// The 2-D CTA tile of an mma layout from its per-warp bases; warps run along M first.
LinearLayout mma_cta(std::vector<Basis> reg, std::vector<Basis> lane, int32_t tile_m, int32_t tile_n,
                     const std::vector<int32_t>& warps, bool warps_m, bool warps_n) {
  std::vector<Basis> warp;
  for (int32_t i = 1; i < warps[0]; i *= 2) warp.push_back({warps_m ? tile_m * i : 0, 0});
  for (int32_t i = 1; i < warps[1]; i *= 2) warp.push_back({0, warps_n ? tile_n * i : 0});
  int32_t size_m = warps_m ? tile_m * warps[0] : tile_m, size_n = warps_n ? tile_n * warps[1] : tile_n;
  return LinearLayout({{kReg, std::move(reg)}, {kLane, std::move(lane)}, {kWarp, std::move(warp)}, {kBlock, {}}},
                      {{dim_name(0), size_m}, {dim_name(1), size_n}});
}

}  // namespace

std::vector<int32_t> default_order(int rank) {
  std::vector<int32_t> o;
  for (int d = rank - 1; d >= 0; --d) o.push_back(d);
  return o;
}

LinearLayout tile_to_shape(const LinearLayout& cta_in, const std::vector<int64_t>& shape,
                           const std::vector<int32_t>& order) {
  const std::string fn = "tile_to_shape";
  const size_t rank = shape.size();
  check_pow2(fn, "shape", shape);
  check_order(fn, order, rank);
  check_dims(fn, cta_in, rank);
  LinearLayout cta = cta_in;
  for (const std::string& n : cta.in_dim_names())
    if (n != kReg && n != kLane && n != kWarp && n != kBlock)
      fail(fn, "input dimension '" + n + "' is not reg/lane/warp/block in\n" + cta.str());
  for (const char* n : {kReg, kLane, kWarp, kBlock}) cta = cta.with_in_dim(n);
  cta = cta.transpose_ins({kReg, kLane, kWarp, kBlock});
  std::vector<LinearLayout::InDim> ins;
  std::vector<int64_t> covered(rank);
  for (size_t d = 0; d < rank; ++d) covered[d] = std::min<int64_t>(shape[d], cta.out_dims()[d].size);
  for (const char* n : {kReg, kLane, kWarp, kBlock}) {
    LinearLayout::InDim in{n, {}};
    for (Basis b : cta.bases(n)) {
      bool zero = true;
      for (size_t d = 0; d < rank; ++d) {
        b[d] &= static_cast<int32_t>(shape[d] - 1);  // coordinates past the tile wrap: replication
        zero = zero && b[d] == 0;
      }
      if (zero && std::string(n) == kReg) continue;  // a register holding a copy: drop it
      in.bases.push_back(std::move(b));
    }
    ins.push_back(std::move(in));
  }
  for (int32_t d : order)  // the CTA tile repeats in registers, minor dimension first
    for (int64_t v = covered[d]; v < shape[d]; v *= 2) {
      Basis b(rank, 0);
      b[d] = static_cast<int32_t>(v);
      ins[0].bases.push_back(std::move(b));
    }
  std::vector<DimSize> outs;
  for (size_t d = 0; d < rank; ++d) outs.push_back({dim_name(static_cast<int>(d)), static_cast<int32_t>(shape[d])});
  return LinearLayout(std::move(ins), std::move(outs));
}

LinearLayout blocked(const std::vector<int64_t>& shape, const std::vector<int32_t>& size_per_thread,
                     const std::vector<int32_t>& threads_per_warp,
                     const std::vector<int32_t>& warps_per_cta, const std::vector<int32_t>& order) {
  const std::string fn = "blocked";
  const size_t rank = shape.size();
  if (rank == 0) fail(fn, "rank-0 shape");
  if (size_per_thread.size() != rank || threads_per_warp.size() != rank ||
      warps_per_cta.size() != rank || order.size() != rank)
    fail(fn, "shape " + list(shape) + ", size_per_thread " + list(size_per_thread) +
                 ", threads_per_warp " + list(threads_per_warp) + ", warps_per_cta " +
                 list(warps_per_cta) + " and order " + list(order) + " must have the same rank");
  check_pow2(fn, "shape", shape);
  check_pow2(fn, "size_per_thread", size_per_thread);
  check_pow2(fn, "threads_per_warp", threads_per_warp);
  check_pow2(fn, "warps_per_cta", warps_per_cta);
  check_order(fn, order, rank);
  int64_t lanes = 1;
  for (int32_t t : threads_per_warp) lanes *= t;
  if (lanes != kWarpSize)
    fail(fn, "threads_per_warp " + list(threads_per_warp) + " has " + std::to_string(lanes) +
                 " threads, not " + std::to_string(kWarpSize));
  LinearLayout cta = identity_nd(kReg, size_per_thread, order) *
                     identity_nd(kLane, threads_per_warp, order) *
                     identity_nd(kWarp, warps_per_cta, order);
  return tile_to_shape(cta.transpose_outs(dim_names(rank)), shape, order);
}

LinearLayout slice(const LinearLayout& parent, int dim) {
  const std::string fn = "slice";
  const int rank = parent.num_out_dims();
  check_dims(fn, parent, static_cast<size_t>(rank));
  if (dim < 0 || dim >= rank)
    fail(fn, "dimension " + std::to_string(dim) + " out of range for rank " + std::to_string(rank));
  std::vector<std::string> keep;
  for (int d = 0; d < rank; ++d)
    if (d != dim) keep.push_back(dim_name(d));
  LinearLayout s = parent.sublayout(parent.in_dim_names(), keep);
  if (s.has_in_dim(kReg)) {
    std::vector<Basis> regs;
    for (const Basis& b : s.bases(kReg))
      if (std::any_of(b.begin(), b.end(), [](int32_t v) { return v != 0; })) regs.push_back(b);
    s = s.with_bases(kReg, std::move(regs));
  }
  return s.rename_outs(dim_names(keep.size()));
}

LinearLayout mma_v2_accumulator(const std::vector<int64_t>& shape,
                                const std::vector<int32_t>& warps_per_cta) {
  const std::string fn = "mma_v2_accumulator";
  if (shape.size() != 2 || warps_per_cta.size() != 2)
    fail(fn, "expected a 2-D shape and warps_per_cta, got " + list(shape) + " and " + list(warps_per_cta));
  check_pow2(fn, "shape", shape);
  check_pow2(fn, "warps_per_cta", warps_per_cta);
  if (shape[0] < 16 || shape[1] < 8)
    fail(fn, "shape " + list(shape) + " is smaller than one 16x8 mma tile");
  // c0..c3: bit 0 of the register -> col + 1, bit 1 -> row + 8; lane = groupID * 4 + tid_in_group.
  LinearLayout cta = mma_cta({{0, 1}, {8, 0}}, {{0, 2}, {0, 4}, {1, 0}, {2, 0}, {4, 0}}, 16, 8,
                             warps_per_cta, true, true);
  return tile_to_shape(cta, shape, {1, 0});
}

LinearLayout wgmma_accumulator(const std::vector<int64_t>& shape, const std::vector<int32_t>& warpgroups) {
  const std::string fn = "wgmma_accumulator";
  if (shape.size() != 2 || warpgroups.size() != 2)
    fail(fn, "expected a 2-D shape and warpgroups, got " + list(shape) + " and " + list(warpgroups));
  check_pow2(fn, "shape", shape);
  check_pow2(fn, "warpgroups", warpgroups);
  const int32_t gm = warpgroups[0], gn = warpgroups[1];
  if (shape[0] % (64 * int64_t{gm}) != 0 || shape[1] / gn < 8)
    fail(fn, "shape " + list(shape) + " does not split into " + list(warpgroups) + " warpgroup tiles of 64 x >= 8");
  const int32_t wn = static_cast<int32_t>(shape[1] / gn);  // the columns of one warpgroup
  std::vector<Basis> reg = {{0, 1}, {8, 0}};
  for (int32_t c = 8; c < wn; c *= 2) reg.push_back({0, c});
  std::vector<Basis> lane = {{0, 2}, {0, 4}, {1, 0}, {2, 0}, {4, 0}};
  std::vector<Basis> warp = {{16, 0}, {32, 0}};
  for (int32_t i = 1; i < gm; i *= 2) warp.push_back({64 * i, 0});
  for (int32_t i = 1; i < gn; i *= 2) warp.push_back({0, wn * i});
  LinearLayout cta({{kReg, std::move(reg)}, {kLane, std::move(lane)}, {kWarp, std::move(warp)}, {kBlock, {}}},
                   {{dim_name(0), 64 * gm}, {dim_name(1), static_cast<int32_t>(shape[1])}});
  return tile_to_shape(cta, shape, {1, 0});
}

LinearLayout mma_v2_operand(int op_idx, const std::vector<int64_t>& shape,
                            const std::vector<int32_t>& warps_per_cta, int bitwidth) {
  const std::string fn = "mma_v2_operand";
  if (op_idx != 0 && op_idx != 1) fail(fn, "op_idx must be 0 (A) or 1 (B), got " + std::to_string(op_idx));
  if (bitwidth != 8 && bitwidth != 16 && bitwidth != 32)
    fail(fn, "bitwidth must be 8, 16 or 32, got " + std::to_string(bitwidth));
  if (shape.size() != 2 || warps_per_cta.size() != 2)
    fail(fn, "expected a 2-D shape and warps_per_cta, got " + list(shape) + " and " + list(warps_per_cta));
  check_pow2(fn, "shape", shape);
  check_pow2(fn, "warps_per_cta", warps_per_cta);
  const int32_t v = 32 / bitwidth, kk = 8 * v;
  std::vector<Basis> reg, lane;
  if (op_idx == 0) {
    if (shape[0] < 16 || shape[1] < kk)
      fail(fn, "A shape " + list(shape) + " is smaller than one 16x" + std::to_string(kk) + " mma tile");
    for (int32_t i = 1; i < v; i *= 2) reg.push_back({0, i});  // elements of one 32-bit register
    reg.push_back({8, 0});
    reg.push_back({0, 4 * v});
    lane = {{0, v}, {0, 2 * v}, {1, 0}, {2, 0}, {4, 0}};
    return tile_to_shape(mma_cta(reg, lane, 16, kk, warps_per_cta, true, false), shape, {1, 0});
  }
  if (shape[0] < kk || shape[1] < 8)
    fail(fn, "B shape " + list(shape) + " is smaller than one " + std::to_string(kk) + "x8 mma tile");
  for (int32_t i = 1; i < v; i *= 2) reg.push_back({i, 0});
  reg.push_back({4 * v, 0});
  lane = {{v, 0}, {2 * v, 0}, {0, 1}, {0, 2}, {0, 4}};
  return tile_to_shape(mma_cta(reg, lane, kk, 8, warps_per_cta, false, true), shape, {0, 1});
}

LinearLayout shared_swizzled(const std::vector<int64_t>& shape, int32_t vec, int32_t per_phase,
                             int32_t max_phase, const std::vector<int32_t>& order) {
  const std::string fn = "shared_swizzled";
  const size_t rank = shape.size();
  if (rank == 0) fail(fn, "rank-0 shape");
  check_pow2(fn, "shape", shape);
  check_pow2(fn, "vec/per_phase/max_phase", std::vector<int32_t>{vec, per_phase, max_phase});
  check_order(fn, order, rank);
  int64_t total = 1;
  for (int64_t s : shape) total *= s;
  if (total > (int64_t{1} << 30)) fail(fn, "shape " + list(shape) + " is too large");
  std::vector<int64_t> stride(rank);
  int64_t st = 1;
  for (int32_t d : order) {
    stride[d] = st;
    st *= shape[d];
  }
  const int64_t cols = shape[order[0]];
  std::vector<LinearLayout::InDim> ins;
  for (size_t d = 0; d < rank; ++d) {
    LinearLayout::InDim in{dim_name(static_cast<int>(d)), {}};
    for (int64_t v = 1; v < shape[d]; v *= 2) {
      int64_t off = v * stride[d];
      if (rank >= 2 && static_cast<int32_t>(d) == order[1]) {
        int64_t phase = (v / per_phase) % max_phase;  // a single bit of the row: one phase bit
        off ^= (phase * vec) % cols;                  // XOR into the vec-group index of the column
      }
      in.bases.push_back({static_cast<int32_t>(off)});
    }
    ins.push_back(std::move(in));
  }
  return LinearLayout(std::move(ins), {{kOffset, static_cast<int32_t>(total)}});
}

LinearLayout transpose_tile(const LinearLayout& l, const std::vector<int32_t>& perm) {
  const size_t rank = static_cast<size_t>(l.num_out_dims());
  check_dims("transpose_tile", l, rank);
  check_order("transpose_tile", perm, rank);
  std::vector<std::string> order;
  for (int32_t p : perm) order.push_back(dim_name(p));
  return l.transpose_outs(order).rename_outs(dim_names(rank));
}

LinearLayout reshape_tile(const LinearLayout& l, const std::vector<int64_t>& shape) {
  check_dims("reshape_tile", l, static_cast<size_t>(l.num_out_dims()));
  check_pow2("reshape_tile", "shape", shape);
  std::vector<DimSize> outs;
  for (size_t d = 0; d < shape.size(); ++d)
    outs.push_back({dim_name(static_cast<int>(d)), static_cast<int32_t>(shape[d])});
  return l.reshape_outs(outs);
}

}  // namespace tle::layout
