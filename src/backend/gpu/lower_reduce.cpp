// src/backend/gpu/lower_reduce.cpp - reduce, scan, dot, histogram and histogram_ranks on the GPU.
//
// reduce: registers of one thread first (in axis order), then lanes with butterfly shuffles over the
// lane bits in ascending axis order (the lane holding the lower coordinate is the left operand),
// then warps through shared memory, combined in warp order. argmax/argmin carry (value, index) and
// break ties by the smaller index (E02, E03). A user combine need not be commutative, so it is
// combined in index order: that holds when the layout's axis bits are reg bits below the lane bits,
// lane bits below the warp bits, and reg bits above them all (kept as separate partial states
// until the end); for other layouts the reduction goes through the staged scan below and reads
// the last element of each line. A reduce or scan with a combine may have several operands (one
// state component and one result each). scan runs in registers, shuffles and one shared-memory
// exchange per warp bit (bitwise_scan) on layouts whose bases each move along the axis by one
// bit or not at all, else through shared memory (staged_scan); dot and histogram stage their
// operands in shared memory; dots in the mma layouts go to lower_mma.cpp instead.
#include <fmt/format.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

#include <algorithm>
#include <map>

#include "backend/gpu/lower.hpp"

namespace tle::gpu::detail {

using layout::LinearLayout;
using llvm::Value;

namespace {

using Values = std::vector<Value*>;

/// The running state of a reduction or scan and its combine step.
struct Accum {
  Lowerer& L;
  const ir::Op& op;
  ir::ReduceKind kind;
  DType d;                // dtype of operand 0
  std::vector<DType> ds;  // state component dtypes (f32 for f16/bf16 sums and extremes; + i32 index)
  bool has_index;         // argmax/argmin

  Accum(Lowerer& l, const ir::Op& o, ir::ReduceKind k) : L(l), op(o), kind(k), d(o.operands.at(0)->type.dtype) {
    has_index = k == ir::ReduceKind::Argmax || k == ir::ReduceKind::Argmin;
    if (k == ir::ReduceKind::Combine) {
      for (const ir::Value* x : op.operands) ds.push_back(x->type.dtype);
    } else {
      ds.push_back(d == DType::f16 || d == DType::bf16 ? DType::f32 : d);
      if (has_index) ds.push_back(DType::i32);
    }
  }
  /// The state of the elements x (one per operand) at axis index idx (argmax/argmin only).
  Values init(const Values& x, Value* idx) {
    if (kind == ir::ReduceKind::Combine) return x;
    Value* v = ds[0] != d ? L.to_compute(x[0], d) : x[0];
    if (has_index) return {v, idx};
    return {v};
  }
  /// a o b, a holding the lower indices.
  Values combine(const Values& a, const Values& b) {
    auto& B = L.B;
    using K = ir::ReduceKind;
    const DType cd = ds[0];
    switch (kind) {
      case K::Sum: return {is_float(cd) ? B.CreateFAdd(a[0], b[0]) : B.CreateAdd(a[0], b[0])};
      case K::Max: case K::Min:
        if (is_float(cd)) return {L.float_max_min(kind == K::Max, a[0], b[0])};
        return {L.binary(kind == K::Max ? ir::BinaryOp::Max : ir::BinaryOp::Min, cd, a[0], b[0], &op)};
      case K::Argmax: case K::Argmin: {
        if (a.size() < 2 || b.size() < 2) throw InternalError("gpu backend: argmax state without index");
        bool mx = kind == K::Argmax;
        Value* better;
        Value* tie = B.CreateICmpSLT(b[1], a[1]);
        if (is_float(cd)) {
          Value* anan = B.CreateFCmpUNO(a[0], a[0]);
          Value* bnan = B.CreateFCmpUNO(b[0], b[0]);
          Value* gt = mx ? B.CreateFCmpOGT(b[0], a[0]) : B.CreateFCmpOLT(b[0], a[0]);
          Value* eq = B.CreateFCmpOEQ(b[0], a[0]);
          Value* plain = B.CreateOr(gt, B.CreateAnd(eq, tie));
          // NaN wins; two NaNs: the smaller index
          better = B.CreateSelect(anan, B.CreateAnd(bnan, tie), B.CreateOr(bnan, plain));
        } else {
          Value* gt = L.compare(mx ? ir::CmpPred::Gt : ir::CmpPred::Lt, cd, b[0], a[0]);
          Value* eq = B.CreateICmpEQ(b[0], a[0]);
          better = B.CreateOr(gt, B.CreateAnd(eq, tie));
        }
        return {B.CreateSelect(better, b[0], a[0]), B.CreateSelect(better, b[1], a[1])};
      }
      case K::Combine: {
        Values args = a;
        args.insert(args.end(), b.begin(), b.end());
        return L.inline_region(op.region(0), args);
      }
    }
    throw InternalError("gpu backend: bad reduce kind");
  }
  /// The result values (one per result) of a final state.
  Values final(const Values& s) {
    if (kind == ir::ReduceKind::Combine) return s;
    if (has_index) return {s[1]};
    return {ds[0] != d ? L.from_compute(s[0], d) : s[0]};
  }
};

/// Byte offsets in shared memory of one [count] array per dtype (16-byte aligned); the total last.
std::vector<int64_t> smem_bases(const std::vector<DType>& ds, int64_t count) {
  std::vector<int64_t> base;
  int64_t off = 0;
  for (DType dt : ds) {
    base.push_back(off);
    off += (count * byte_size(dt) + 15) / 16 * 16;
  }
  base.push_back(off);
  return base;
}

/// The parallel part of staged_scan (see there): `tpl` threads per line, chunks of ceil(len / tpl)
/// elements. The state arrays at `base` hold the staged elements; the chunk totals use two more
/// arrays after base.back(). Ends with a barrier.
void chunked_scan(Lowerer& L, Accum& acc, const std::vector<int64_t>& base, int64_t len, int64_t inner,
                  int64_t nlines, int64_t tpl, bool reverse) {
  auto& B = L.B;
  const size_t ns = acc.ds.size();
  const int64_t chunk = (len + tpl - 1) / tpl;
  const int64_t nch = (len + chunk - 1) / chunk;  // chunks that hold elements (<= tpl)
  std::vector<int64_t> tot[2] = {smem_bases(acc.ds, nlines * nch), {}};
  for (auto& b : tot[0]) b += base.back();
  tot[1] = smem_bases(acc.ds, nlines * nch);
  for (auto& b : tot[1]) b += tot[0].back();
  L.need_smem(tot[1].back());

  Value* line = B.CreateUDiv(L.tid, L.i32c(tpl));
  Value* t = B.CreateURem(L.tid, L.i32c(tpl));
  Value* active = B.CreateAnd(B.CreateICmpULT(line, L.i32c(nlines)), B.CreateICmpULT(t, L.i32c(nch)));
  Value* outer = B.CreateUDiv(line, L.i32c(inner));
  Value* in = B.CreateURem(line, L.i32c(inner));
  Value* start = B.CreateAdd(B.CreateMul(outer, L.i32c(len * inner)), in);
  auto at = [&](Value* k) {  // element k of the line in scan order
    Value* pos = reverse ? B.CreateSub(L.i32c(len - 1), k) : k;
    return B.CreateAdd(start, B.CreateMul(pos, L.i32c(inner)));
  };
  auto load = [&](const std::vector<int64_t>& b, Value* idx) {
    Values v;
    for (size_t c = 0; c < ns; ++c) v.push_back(L.smem_load(acc.ds[c], b[c], idx));
    return v;
  };
  auto store = [&](const std::vector<int64_t>& b, Value* idx, const Values& v) {
    for (size_t c = 0; c < ns; ++c) L.smem_store(acc.ds[c], b[c], idx, v[c]);
  };
  Value* k0 = B.CreateMul(t, L.i32c(chunk));
  Value* left = B.CreateSub(L.i32c(len), k0);
  Value* cnt = B.CreateSelect(B.CreateICmpSLT(left, L.i32c(chunk)), left, L.i32c(chunk));
  Value* slot = B.CreateAdd(B.CreateMul(line, L.i32c(nch)), t);
  // 1. each chunk scanned sequentially; its total into tot[0]
  L.when(active, [&] {
    Values last = L.counted_loop(B.CreateSub(cnt, L.i32c(1)), load(base, at(k0)), [&](Value* j, const Values& cur) {
      Value* idx = at(B.CreateAdd(k0, B.CreateAdd(j, L.i32c(1))));
      Values s = acc.combine(cur, load(base, idx));
      store(base, idx, s);
      return s;
    });
    store(tot[0], slot, last);
  });
  L.barrier();
  // 2. inclusive scan of the chunk totals, Hillis-Steele, ping-ponging between tot[0] and tot[1]
  int cur = 0;
  for (int64_t d = 1; d < nch; d *= 2, cur ^= 1) {
    L.when(active, [&] {  // chunk t >= d: total[t - d] o total[t]; else total[t] as it is
      auto* comb = llvm::BasicBlock::Create(L.ctx, "scan.tot", L.kernel);
      auto* copy = llvm::BasicBlock::Create(L.ctx, "scan.tot.copy", L.kernel);
      auto* done = llvm::BasicBlock::Create(L.ctx, "scan.tot.next", L.kernel);
      B.CreateCondBr(B.CreateICmpUGE(t, L.i32c(d)), comb, copy);
      B.SetInsertPoint(comb);
      store(tot[cur ^ 1], slot, acc.combine(load(tot[cur], B.CreateSub(slot, L.i32c(d))), load(tot[cur], slot)));
      B.CreateBr(done);
      B.SetInsertPoint(copy);
      store(tot[cur ^ 1], slot, load(tot[cur], slot));
      B.CreateBr(done);
      B.SetInsertPoint(done);
    });
    L.barrier();
  }
  // 3. the total of the chunks before each chunk combined into its elements
  L.when(B.CreateAnd(active, B.CreateICmpUGT(t, L.i32c(0))), [&] {
    Values pre = load(tot[cur], B.CreateSub(slot, L.i32c(1)));
    L.counted_loop(cnt, {}, [&](Value* j, const Values&) {
      Value* idx = at(B.CreateAdd(k0, j));
      store(base, idx, acc.combine(pre, load(base, idx)));
      return Values{};
    });
  });
  L.barrier();
}

/// Stages the operands of `op` (a scan, or a reduce with a combine) in shared memory as state
/// arrays of the tile's shape (row-major) and scans each line along `axis` in place (from the end
/// when `reverse`; the accumulated state is always the left operand, so a non-commutative combine
/// sees its operands in index order). With at least as many lines as threads, each thread scans
/// whole lines sequentially. With fewer (a 1-D cumsum of a 2048-element tile, say), each line gets
/// a power-of-two group of threads and is scanned in three phases (a blocked scan, as in Blelloch,
/// "Prefix sums and their applications", 1990, section 1.4): every thread scans one contiguous
/// chunk sequentially, the chunk totals are scanned by Hillis-Steele steps (log2 rounds, double
/// buffered in shared memory), and every chunk but the first combines the total before it into
/// its elements. Returns the arrays' byte offsets. Ends with a barrier: every thread may read the
/// arrays.
std::vector<int64_t> staged_scan(Lowerer& L, const ir::Op& op, Accum& acc, int axis, bool reverse) {
  auto& B = L.B;
  const ir::Value* x = op.operands.at(0);
  const auto& shape = x->type.shape;
  const int64_t len = shape[static_cast<size_t>(axis)];
  int64_t inner = 1;
  for (size_t dd = static_cast<size_t>(axis) + 1; dd < shape.size(); ++dd) inner *= shape[dd];
  const int64_t numel = x->type.numel();
  const int64_t nlines = numel / len;
  auto base = smem_bases(acc.ds, numel);
  L.need_smem(base.back());
  const size_t ns = acc.ds.size();
  const LinearLayout* l = L.layout_of(x);
  if (!l) L.fail(op, "a tile has no layout (the GPU layout pass did not run)");
  auto hw = L.hw_coords(*l);
  for (int i = 0; i < l->num_regs(); ++i) {
    if (Lowerer::duplicate_reg(*l, i)) continue;
    Values xs;
    for (const ir::Value* v : op.operands) xs.push_back(L.reg(v, i));
    Values s = acc.init(xs, nullptr);
    Value* at = L.linear(L.coords(*l, hw, i), shape);
    for (size_t c = 0; c < ns; ++c) L.smem_store(acc.ds[c], base[c], at, s[c]);
  }
  L.barrier();
  const int64_t nthreads = 32 * L.num_warps;
  int64_t tpl = 1;  // threads per line (a power of two; every line in one round)
  while (tpl * 2 * nlines <= nthreads && tpl * 2 <= len) tpl *= 2;
  if (tpl >= 4) {
    chunked_scan(L, acc, base, len, inner, nlines, tpl, reverse);
    return base;
  }
  // One thread a line (the compute threads only: a line scanned in place by two threads at once
  // would read partly scanned values).
  L.for_each_item(nlines, [&](Value* line) {
    Value* outer = B.CreateUDiv(line, L.i32c(inner));
    Value* in = B.CreateURem(line, L.i32c(inner));
    Value* start = B.CreateAdd(B.CreateMul(outer, L.i32c(len * inner)), in);
    auto at = [&](Value* k) {
      Value* pos = reverse ? B.CreateSub(L.i32c(len - 1), k) : k;
      return B.CreateAdd(start, B.CreateMul(pos, L.i32c(inner)));
    };
    auto load = [&](Value* idx) {
      Values s;
      for (size_t c = 0; c < ns; ++c) s.push_back(L.smem_load(acc.ds[c], base[c], idx));
      return s;
    };
    L.counted_loop(L.i32c(len - 1), load(at(B.getInt32(0))), [&](Value* k1, const Values& cur) {
      Value* idx = at(B.CreateAdd(k1, B.getInt32(1)));
      Values s = acc.combine(cur, load(idx));
      for (size_t c = 0; c < ns; ++c) L.smem_store(acc.ds[c], base[c], idx, s[c]);
      return s;
    });
  });
  L.barrier();
  return base;
}

/// Whether an in-register, shuffle and warp-order reduction along `axis` of layout l combines in
/// index order (see the top of the file); sets `high` to the reg axis bits above every lane and
/// warp axis bit, ascending.
bool ordered_reduction(const LinearLayout& l, int axis, std::vector<int32_t>& high) {
  // Each basis moving along the axis moves by one bit; lane and warp ones along the axis only.
  auto axis_bits = [&](const char* dim, bool hw_dim, std::vector<int32_t>& out) {
    for (const auto& basis : l.bases(dim)) {
      int32_t a = basis[static_cast<size_t>(axis)];
      if (a == 0) continue;
      if ((a & (a - 1)) != 0) return false;
      for (size_t d = 0; d < basis.size(); ++d)
        if (hw_dim && d != static_cast<size_t>(axis) && basis[d] != 0) return false;
      out.push_back(a);
    }
    return true;
  };
  std::vector<int32_t> regs, lanes, warps;
  if (!axis_bits(layout::kReg, false, regs) || !axis_bits(layout::kLane, true, lanes) ||
      !axis_bits(layout::kWarp, true, warps))
    return false;
  for (int32_t w : warps)
    for (int32_t ln : lanes)
      if (ln > w) return false;
  std::vector<int32_t> hw = lanes;
  hw.insert(hw.end(), warps.begin(), warps.end());
  high.clear();
  if (hw.empty()) return true;
  const int32_t lo = *std::min_element(hw.begin(), hw.end()), hi = *std::max_element(hw.begin(), hw.end());
  for (int32_t r : regs) {
    if (r > lo && r < hi) return false;
    if (r > hi) high.push_back(r);
  }
  std::sort(high.begin(), high.end());
  return true;
}

/// Scan along `axis` in registers when every basis of x's layout moves along the axis by one bit
/// alone or not at all, and the moving ones are exactly the bits 1, 2, .., len / 2 (blocked
/// layouts and their slices): a bit-by-bit up-sweep (the "scan by dimension" of a hypercube, as in
/// Blelloch 1990, section 1.3). Every register keeps its inclusive value within the aligned block of
/// positions its lower axis bits span and that block's total; one step per axis bit, in ascending
/// value, doubles the blocks: the partner element (that bit flipped) holds the other half's
/// total - in another register for a reg bit, a shuffle away for a lane bit, in shared memory
/// (one barrier, double buffered) for a warp bit - and the element of the half that comes second
/// in scan order (the higher coordinates, or the lower for a reverse scan) puts it in front of
/// its inclusive value. Registers sharing a block share its total, exchanged once. Fills `out`
/// (one Values per result, x's registers) and returns true; false when the layout does not
/// qualify (staged_scan then). Ends with a barrier when it used shared memory.
bool bitwise_scan(Lowerer& L, const ir::Op& op, Accum& acc, int axis, bool reverse, std::vector<Values>& out) {
  auto& B = L.B;
  const ir::Value* x = op.operands.at(0);
  const LinearLayout* l = L.layout_of(x);
  if (!l) L.fail(op, "a tile has no layout (the GPU layout pass did not run)");
  const int64_t len = x->type.shape[static_cast<size_t>(axis)];
  struct Bit {
    int32_t value;  // the axis coordinate it moves by
    int kind;       // 0 reg, 1 lane, 2 warp
    int bit;
  };
  std::vector<Bit> bits;
  const char* dims[3] = {layout::kReg, layout::kLane, layout::kWarp};
  for (int k = 0; k < 3; ++k) {
    const auto& bs = l->bases(dims[k]);
    for (size_t b = 0; b < bs.size(); ++b) {
      const int32_t a = bs[b][static_cast<size_t>(axis)];
      if (a == 0) continue;
      if ((a & (a - 1)) != 0) return false;
      for (size_t d = 0; d < bs[b].size(); ++d)
        if (d != static_cast<size_t>(axis) && bs[b][d] != 0) return false;
      bits.push_back({a, k, static_cast<int>(b)});
    }
  }
  std::sort(bits.begin(), bits.end(), [](const Bit& a, const Bit& b) { return a.value < b.value; });
  for (size_t j = 0; j < bits.size(); ++j)
    if (bits[j].value != int32_t(1) << j) return false;
  if ((int64_t(1) << bits.size()) != len) return false;

  const int nregs = l->num_regs();
  std::vector<Values> incl(static_cast<size_t>(nregs)), tot(incl.size());
  for (int i = 0; i < nregs; ++i) {
    Values xs;
    for (const ir::Value* v : op.operands) xs.push_back(L.reg(v, i));
    incl[static_cast<size_t>(i)] = tot[static_cast<size_t>(i)] = acc.init(xs, nullptr);
  }
  const size_t ns = acc.ds.size();
  auto select = [&](Value* c, const Values& a, const Values& b) {
    Values r;
    for (size_t k = 0; k < a.size(); ++k) r.push_back(B.CreateSelect(c, a[k], b[k]));
    return r;
  };
  std::vector<int64_t> buf[2];  // warp steps: a slot per (warp, lane, distinct total) and state component, twice
  int64_t per_thread = 0;
  int parity = 0;
  // Integer sums (exact: associative and commutative): a lane or warp step adds the partner
  // block's total to each register of the upper block. Instead, over a run of lane and warp steps,
  // each group of registers sharing a block total keeps one pending offset, added to its registers
  // when the run ends (before a register step, or at the end): two instructions a step, not two
  // per register (8 elements a thread at 8 warps, 2 groups: 8 steps x 8 registers x (select + add)
  // become 8 x 2 x 2 + 8).
  const bool deferred = acc.kind == ir::ReduceKind::Sum && !is_float(acc.ds[0]);
  bool grouped = false;  // deferred, in a run: mine / id hold the run's groups, pend their offsets
  std::vector<Values> mine, pend;
  std::vector<size_t> id(tot.size());
  auto end_run = [&] {
    if (!grouped) return;
    for (size_t i = 0; i < incl.size(); ++i) {
      if (!pend[id[i]].empty()) incl[i] = acc.combine(pend[id[i]], incl[i]);
      tot[i] = mine[id[i]];
    }
    grouped = false;
  };
  for (const Bit& bt : bits) {
    if (bt.kind == 0) {
      end_run();
      const int m = 1 << bt.bit;
      std::map<std::pair<Values, Values>, Values> joined;  // one new total per pair of blocks (emitted in register order)
      for (int i = 0; i < nregs; ++i) {
        if (i & m) continue;
        const size_t first = static_cast<size_t>(reverse ? i | m : i), second = static_cast<size_t>(reverse ? i : i | m);
        auto key = std::make_pair(tot[first], tot[second]);
        auto it = joined.find(key);
        if (it == joined.end()) it = joined.emplace(key, acc.combine(tot[first], tot[second])).first;
        incl[second] = acc.combine(tot[first], incl[second]);
        tot[first] = tot[second] = it->second;
      }
      continue;
    }
    // The distinct block totals of this thread (in register order: the code is deterministic),
    // and the partner's total for each.
    if (!grouped) {
      mine.clear();
      for (size_t i = 0; i < tot.size(); ++i) {
        id[i] = static_cast<size_t>(std::find(mine.begin(), mine.end(), tot[i]) - mine.begin());
        if (id[i] == mine.size()) mine.push_back(tot[i]);
      }
      if (deferred) {
        grouped = true;
        pend.assign(mine.size(), {});
      }
    }
    std::vector<Values> other(mine.size());
    Value* upper;
    if (bt.kind == 1) {
      upper = B.CreateICmpNE(B.CreateAnd(L.lane, 1u << bt.bit), B.getInt32(0));
      for (size_t u = 0; u < mine.size(); ++u)
        for (Value* v : mine[u]) other[u].push_back(L.shuffle_xor(v, 1 << bt.bit));
    } else {
      // Warps past the layout's (the producer warps before a warp-specialized loop run this code
      // too) store nothing and read as the warp they mirror (warp mod num_warps), so that every
      // access stays inside the buffers and no slot has two writers.
      const int64_t nw = l->num_warps();
      Value* in_layout = B.CreateICmpULT(L.warp, L.i32c(nw));
      Value* w = B.CreateAnd(L.warp, L.i32c(nw - 1));
      upper = B.CreateICmpNE(B.CreateAnd(w, 1u << bt.bit), B.getInt32(0));
      if (buf[0].empty()) {
        // Slots for the most distinct totals a thread can have at a warp step: at this first one,
        // registers differ in every reg bit but the axis bits already swept.
        int swept = 0;
        for (const Bit& o : bits)
          if (o.kind == 0 && o.value < bt.value) ++swept;
        per_thread = nregs >> swept;
        const int64_t slots = nw * 32 * per_thread;
        buf[0] = smem_bases(acc.ds, slots);
        buf[1] = smem_bases(acc.ds, slots);
        for (auto& b : buf[1]) b += buf[0].back();
        L.need_smem(buf[1].back());
      }
      const auto& at = buf[parity];
      parity ^= 1;
      auto slot = [&](Value* w, size_t u) {
        return B.CreateAdd(B.CreateMul(B.CreateAdd(B.CreateMul(w, L.i32c(32)), L.lane), L.i32c(per_thread)),
                           L.i32c(static_cast<int64_t>(u)));
      };
      if (static_cast<int64_t>(mine.size()) > per_thread)
        L.fail(op, "bitwise scan: more distinct totals than slots (layout invariant broken)");
      L.when(in_layout, [&] {
        for (size_t u = 0; u < mine.size(); ++u)
          for (size_t c = 0; c < ns; ++c) L.smem_store(acc.ds[c], at[c], slot(w, u), mine[u][c]);
      });
      L.barrier();
      Value* partner = B.CreateXor(w, L.i32c(int64_t(1) << bt.bit));
      for (size_t u = 0; u < mine.size(); ++u)
        for (size_t c = 0; c < ns; ++c) other[u].push_back(L.smem_load(acc.ds[c], at[c], slot(partner, u)));
    }
    // This thread's block comes second in scan order: it holds the higher coordinates (the lower
    // ones for a reverse scan).
    Value* second = reverse ? B.CreateNot(upper) : upper;
    if (deferred) {
      for (size_t u = 0; u < mine.size(); ++u) {
        Values add;
        for (Value* o : other[u]) add.push_back(B.CreateSelect(second, o, llvm::Constant::getNullValue(o->getType())));
        pend[u] = pend[u].empty() ? add : acc.combine(add, pend[u]);
        mine[u] = acc.combine(mine[u], other[u]);
      }
      continue;
    }
    std::vector<Values> next;
    for (size_t u = 0; u < mine.size(); ++u)
      next.push_back(acc.combine(select(second, other[u], mine[u]), select(second, mine[u], other[u])));
    for (size_t i = 0; i < tot.size(); ++i) {
      incl[i] = select(second, acc.combine(other[id[i]], incl[i]), incl[i]);
      tot[i] = next[id[i]];
    }
  }
  if (!buf[0].empty()) L.barrier();
  end_run();
  // Every register's block is now its whole line: an integer sum of x along the axis may reuse
  // the totals.
  if (deferred && op.operands.size() == 1 && acc.ds[0] == acc.d) {
    Lowerer::ScanTotals& st = L.scan_totals[x];
    st = {op.parent, axis, {}};
    for (const Values& t : tot) st.per_reg.push_back(t[0]);
  }
  out.assign(op.results.size(), {});
  for (const Values& s : incl) {
    Values v = acc.final(s);
    for (size_t c = 0; c < out.size(); ++c) out[c].push_back(v[c]);
  }
  return true;
}

}  // namespace

void Lowerer::lower_reduce(const ir::Op& op) {
  const ir::Value* x = op.operands.at(0);
  const int axis = static_cast<int>(op.int_attr("axis"));
  const LinearLayout* l = layout_of(x);
  if (!l) fail(op, "a tile has no layout (the GPU layout pass did not run)");
  Accum acc(*this, op, op.enum_attr<ir::ReduceKind>("kind"));
  const size_t nr = op.results.size();
  ir::Shape rshape = x->type.shape;
  rshape.erase(rshape.begin() + axis);
  const LinearLayout* rl = rshape.empty() ? nullptr : layout_of(op.result());
  if (!rshape.empty() && !rl) fail(op, "a tile has no layout (the GPU layout pass did not run)");
  // The integer sum of a tile cumsum'ed along this axis earlier in this block: the scan's line
  // totals (exact, so the same values), no second pass over the lanes and warps. Result register
  // q is the line of the operand's registers with its coordinates (the result's layout is the
  // slice of the operand's).
  if (auto t = scan_totals.find(x); t != scan_totals.end() && t->second.block == op.parent && t->second.axis == axis &&
                                    acc.kind == ir::ReduceKind::Sum && nr == 1 && op.operands.size() == 1 &&
                                    op.result()->type.dtype == acc.ds[0]) {
    const auto& per_reg = t->second.per_reg;
    if (!rl) {
      regs[op.result()] = {per_reg.at(0)};
      return;
    }
    std::map<std::vector<int32_t>, int> line_reg;
    for (int i = 0; i < l->num_regs(); ++i) {
      auto rc = reg_coords(*l, i);
      rc.erase(rc.begin() + axis);
      line_reg.emplace(rc, i);
    }
    std::vector<Value*> out;
    for (int q = 0; q < rl->num_regs(); ++q) {
      auto it = line_reg.find(reg_coords(*rl, q));
      if (it == line_reg.end()) break;
      out.push_back(per_reg.at(static_cast<size_t>(it->second)));
    }
    if (static_cast<int>(out.size()) == rl->num_regs()) {
      regs[op.result()] = out;
      return;
    }
  }

  // A user combine on a layout whose order the tree would not keep: the staged scan's last elements.
  std::vector<int32_t> high;  // reg axis bits combined last (separate partial states until then)
  if (acc.kind == ir::ReduceKind::Combine && !ordered_reduction(*l, axis, high)) {
    auto base = staged_scan(*this, op, acc, axis, false);
    const int64_t len = x->type.shape[static_cast<size_t>(axis)];
    auto last = [&](std::vector<Value*> c) {
      c.insert(c.begin() + axis, i32c(len - 1));
      Values s;
      for (size_t k = 0; k < acc.ds.size(); ++k) s.push_back(smem_load(acc.ds[k], base[k], linear(c, x->type.shape)));
      return acc.final(s);
    };
    std::vector<Values> out(nr);
    if (!rl) {
      Values v = last({});
      for (size_t k = 0; k < nr; ++k) out[k] = {v[k]};
    } else {
      auto rhw = hw_coords(*rl);
      for (int q = 0; q < rl->num_regs(); ++q) {
        Values v = last(coords(*rl, rhw, q));
        for (size_t k = 0; k < nr; ++k) out[k].push_back(v[k]);
      }
    }
    barrier();
    for (size_t k = 0; k < nr; ++k) regs[op.result(static_cast<unsigned>(k))] = out[k];
    return;
  }
  auto hw = hw_coords(*l);
  // The partial state a register belongs to: its high reg axis bits, compressed.
  const int nparts = 1 << high.size();
  auto part_of = [&](int32_t a) {
    int p = 0;
    for (size_t j = 0; j < high.size(); ++j)
      if (a & high[j]) p |= 1 << j;
    return p;
  };

  // 1. registers of this thread, grouped by their coordinates without the axis, in axis order.
  struct Group {
    std::vector<int32_t> key;
    std::vector<std::pair<int32_t, int>> members;  // (axis coordinate of the reg part, reg)
    std::vector<Values> parts;                     // partial states, by part_of
  };
  std::map<std::vector<int32_t>, Group> groups;
  for (int i = 0; i < l->num_regs(); ++i) {
    if (duplicate_reg(*l, i)) continue;
    auto rc = reg_coords(*l, i);
    int32_t a = rc[static_cast<size_t>(axis)];
    rc.erase(rc.begin() + axis);
    auto& g = groups[rc];
    g.key = rc;
    g.members.push_back({a, i});
  }
  for (auto& [k, g] : groups) {
    std::sort(g.members.begin(), g.members.end());
    g.parts.assign(static_cast<size_t>(nparts), {});
    for (auto& [a, i] : g.members) {
      Value* idx = acc.has_index ? coords(*l, hw, i)[static_cast<size_t>(axis)] : nullptr;
      Values xs;
      for (const ir::Value* v : op.operands) xs.push_back(reg(v, i));
      auto s = acc.init(xs, idx);
      Values& st = g.parts[static_cast<size_t>(part_of(a))];
      st = st.empty() ? s : acc.combine(st, s);
    }
    for (auto& st : g.parts)
      if (st.empty()) fail(op, "a partial reduction state without registers (layout invariant broken)");
  }
  // 2. lanes: butterfly over lane bits that move along the axis only, in ascending axis order.
  const auto& lb = l->bases(layout::kLane);
  std::vector<std::pair<int32_t, int>> axis_lane_bits;  // (basis value, bit)
  for (size_t b = 0; b < lb.size(); ++b) {
    const auto& basis = lb[b];
    if (basis[static_cast<size_t>(axis)] == 0) continue;
    for (size_t dd = 0; dd < basis.size(); ++dd)
      if (dd != static_cast<size_t>(axis) && basis[dd]) fail(op, "lane basis mixes the reduced dim with others");
    axis_lane_bits.push_back({basis[static_cast<size_t>(axis)], static_cast<int>(b)});
  }
  std::sort(axis_lane_bits.begin(), axis_lane_bits.end());
  for (auto [value, b] : axis_lane_bits) {
    Value* upper = B.CreateICmpNE(B.CreateAnd(lane, 1u << b), B.getInt32(0));
    for (auto& [k, g] : groups)
      for (auto& st : g.parts) {
        Values lo, hi;
        for (Value* v : st) {
          Value* other = shuffle_xor(v, 1 << b);
          lo.push_back(B.CreateSelect(upper, other, v));
          hi.push_back(B.CreateSelect(upper, v, other));
        }
        st = acc.combine(lo, hi);
      }
  }
  // 3. warps: through shared memory, one slot per (part, warp position along the axis, result
  // element).
  const auto& wb = l->bases(layout::kWarp);
  std::vector<std::pair<int32_t, int>> axis_warp_bits;  // (basis value, bit)
  for (size_t b = 0; b < wb.size(); ++b) {
    const auto& basis = wb[b];
    if (basis[static_cast<size_t>(axis)] == 0) continue;
    for (size_t dd = 0; dd < basis.size(); ++dd)
      if (dd != static_cast<size_t>(axis) && basis[dd]) fail(op, "warp basis mixes the reduced dim with others");
    axis_warp_bits.push_back({basis[static_cast<size_t>(axis)], static_cast<int>(b)});
  }
  int64_t rnumel = 1;
  for (auto s : rshape) rnumel *= s;
  // The result coordinate of each group (reg part XOR hw part, axis removed).
  auto hw_noaxis = hw;
  hw_noaxis.erase(hw_noaxis.begin() + axis);
  auto key_index = [&](const std::vector<int32_t>& key) {
    std::vector<Value*> c;
    for (size_t dd = 0; dd < key.size(); ++dd) c.push_back(key[dd] ? B.CreateXor(hw_noaxis[dd], i32c(key[dd])) : hw_noaxis[dd]);
    return c.empty() ? B.getInt32(0) : linear(c, rshape);
  };
  if (!axis_warp_bits.empty()) {
    std::sort(axis_warp_bits.begin(), axis_warp_bits.end());
    const int64_t nslots = int64_t(1) << axis_warp_bits.size();
    Value* wpos = B.getInt32(0);
    for (size_t j = 0; j < axis_warp_bits.size(); ++j) {
      Value* bit = B.CreateAnd(B.CreateLShr(warp, static_cast<uint64_t>(axis_warp_bits[j].second)), 1);
      wpos = B.CreateOr(wpos, B.CreateShl(bit, static_cast<uint64_t>(j)));
    }
    auto base = smem_bases(acc.ds, nparts * nslots * rnumel);
    need_smem(base.back());
    for (auto& [k, g] : groups)
      for (int p = 0; p < nparts; ++p) {
        Value* slot = B.CreateAdd(B.CreateMul(B.CreateAdd(wpos, i32c(p * nslots)), i32c(rnumel)), key_index(g.key));
        for (size_t c = 0; c < acc.ds.size(); ++c)
          smem_store(acc.ds[c], base[c], slot, g.parts[static_cast<size_t>(p)][c]);
      }
    barrier();
    for (auto& [k, g] : groups) {
      Value* ki = key_index(g.key);
      for (int p = 0; p < nparts; ++p) {
        Values st;
        for (int64_t w = 0; w < nslots; ++w) {
          Value* slot = B.CreateAdd(i32c((p * nslots + w) * rnumel), ki);
          Values s;
          for (size_t c = 0; c < acc.ds.size(); ++c) s.push_back(smem_load(acc.ds[c], base[c], slot));
          st = st.empty() ? s : acc.combine(st, s);
        }
        g.parts[static_cast<size_t>(p)] = st;
      }
    }
    barrier();
  }
  // 4. the parts in order, then the result registers.
  for (auto& [k, g] : groups)
    for (int p = 1; p < nparts; ++p) g.parts[0] = acc.combine(g.parts[0], g.parts[static_cast<size_t>(p)]);
  std::vector<Values> out(nr);
  if (!rl) {
    if (groups.size() != 1) fail(op, "a reduction to a scalar left several partial results");
    Values v = acc.final(groups.begin()->second.parts[0]);
    for (size_t c = 0; c < nr; ++c) out[c] = {v[c]};
  } else {
    for (int q = 0; q < rl->num_regs(); ++q) {
      auto key = reg_coords(*rl, q);
      auto it = groups.find(key);
      if (it == groups.end()) fail(op, "the result layout is not the slice of the operand's (layout invariant broken)");
      Values v = acc.final(it->second.parts[0]);
      for (size_t c = 0; c < nr; ++c) out[c].push_back(v[c]);
    }
  }
  for (size_t c = 0; c < nr; ++c) regs[op.result(static_cast<unsigned>(c))] = out[c];
}

void Lowerer::lower_scan(const ir::Op& op) {
  const ir::Value* x = op.operands.at(0);
  const int axis = static_cast<int>(op.int_attr("axis"));
  const bool reverse = op.has_attr("reverse") && op.int_attr("reverse") != 0;
  auto kind = op.enum_attr<ir::ScanKind>("kind");
  Accum acc(*this, op, kind == ir::ScanKind::Cumsum ? ir::ReduceKind::Sum : ir::ReduceKind::Combine);
  std::vector<Values> fast;
  if (bitwise_scan(*this, op, acc, axis, reverse, fast)) {
    for (size_t c = 0; c < fast.size(); ++c) regs[op.result(static_cast<unsigned>(c))] = fast[c];
    return;
  }
  auto base = staged_scan(*this, op, acc, axis, reverse);
  const LinearLayout* l = layout_of(x);
  auto hw = hw_coords(*l);
  std::vector<Values> out(op.results.size());
  for (int i = 0; i < l->num_regs(); ++i) {
    Value* at = linear(coords(*l, hw, i), x->type.shape);
    Values s;
    for (size_t c = 0; c < acc.ds.size(); ++c) s.push_back(smem_load(acc.ds[c], base[c], at));
    Values v = acc.final(s);
    for (size_t c = 0; c < out.size(); ++c) out[c].push_back(v[c]);
  }
  barrier();
  for (size_t c = 0; c < out.size(); ++c) regs[op.result(static_cast<unsigned>(c))] = out[c];
}

void Lowerer::lower_dot(const ir::Op& op) {
  if (lower_dot_wgmma(op)) return;  // sm_90a, wgmma accumulator layout (lower_wgmma.cpp)
  if (lower_dot_mma(op)) return;    // f16/bf16 in the mma layouts: tensor cores (lower_mma.cpp)
  const ir::Value* a = op.operands.at(0);
  const ir::Value* b = op.operands.at(1);
  const ir::Value* c = op.operands.at(2);
  const ir::Value* r = op.result();
  const int64_t M = a->type.shape[0], K = a->type.shape[1], N = b->type.shape[1];
  const DType ad = a->type.dtype, bd = b->type.dtype, rd = r->type.dtype;
  const DType kd = ad == DType::f64 || rd == DType::f64 ? DType::f64 : is_float(ad) ? DType::f32 : DType::i32;
  const bool tf32 = op.has_attr("precision") && op.enum_attr<ir::Precision>("precision") == ir::Precision::TF32 &&
                    ad == DType::f32;
  const int64_t boff = (M * K * byte_size(ad) + 15) / 16 * 16;
  stage(a, 0);
  stage(b, boff);
  barrier();
  const LinearLayout* rl = layout_of(r);
  if (!rl) fail(op, "a tile has no layout (the GPU layout pass did not run)");
  auto hw = hw_coords(*rl);
  std::vector<Value*> ms, ns, init;
  for (int q = 0; q < rl->num_regs(); ++q) {
    auto cc = coords(*rl, hw, q);
    ms.push_back(B.CreateMul(cc[0], i32c(K)));
    ns.push_back(cc[1]);
    init.push_back(convert(reg(c, q), c->type.dtype, kd));
  }
  auto input = [&](Value* v, DType dt) {
    Value* xv = convert(v, dt, kd);
    return tf32 ? round_tf32(xv) : xv;
  };
  auto acc = counted_loop(i32c(K), init, [&](Value* k, const std::vector<Value*>& cur) {
    std::vector<Value*> next;
    Value* krow = B.CreateMul(k, i32c(N));
    for (size_t q = 0; q < cur.size(); ++q) {
      Value* av = input(smem_load(ad, 0, B.CreateAdd(ms[q], k)), ad);
      Value* bv = input(smem_load(bd, boff, B.CreateAdd(krow, ns[q])), bd);
      next.push_back(is_float(kd) ? B.CreateFAdd(cur[q], B.CreateFMul(av, bv)) : B.CreateAdd(cur[q], B.CreateMul(av, bv)));
    }
    return next;
  });
  barrier();
  std::vector<Value*> out;
  for (auto* v : acc) out.push_back(convert(v, kd, rd));
  regs[r] = out;
}

Value* Lowerer::counted_bin(const ir::Op& op, int q) {
  const ir::Value* x = op.operands[0];
  Value* v = B.CreateIntCast(reg(x, q), B.getInt64Ty(), is_signed_int(x->type.dtype));
  // Sign-extended, a negative value is huge as unsigned: out of range (E06).
  Value* ok = B.CreateICmpULT(v, B.getInt64(static_cast<uint64_t>(op.int_attr("bins"))));
  if (op.operands.size() > 1) ok = B.CreateAnd(ok, reg(op.operands[1], q));
  return B.CreateSelect(ok, B.CreateTrunc(v, B.getInt32Ty()), i32c(-1));
}

void Lowerer::lower_histogram(const ir::Op& op) {
  const ir::Value* x = op.operands.at(0);
  const ir::Value* r = op.result();
  const int64_t bins = op.int_attr("bins");
  need_smem(bins * 4);
  for_each_item(bins, [&](Value* i) { smem_store(DType::i32, 0, i, B.getInt32(0)); });  // zero the counters
  barrier();
  const LinearLayout* l = layout_of(x);
  Value* own = owner(l);
  for (int i = 0; i < num_regs(x); ++i) {
    if (l && duplicate_reg(*l, i)) continue;
    Value* bin = counted_bin(op, i);
    auto* on = llvm::BasicBlock::Create(ctx, "hist.add", kernel);
    auto* next = llvm::BasicBlock::Create(ctx, "hist.next", kernel);
    B.CreateCondBr(B.CreateAnd(own, B.CreateICmpSGE(bin, i32c(0))), on, next);
    B.SetInsertPoint(on);
    Value* p = smem_ptr(B.CreateMul(bin, B.getInt32(4)));
    B.CreateAtomicRMW(llvm::AtomicRMWInst::Add, p, B.getInt32(1), llvm::Align(4), llvm::AtomicOrdering::Monotonic);
    B.CreateBr(next);
    B.SetInsertPoint(next);
  }
  barrier();
  regs[r] = unstage(layout_of(r), r->type.shape, DType::i32, 0);
  barrier();
}

// histogram_ranks (a stable counting rank, as CUB's warp-match ranking): 1. every element's bin
// (-1 when not counted) goes to shared memory in row-major order and the per-warp counters
// cnt[W][bins] are zeroed; 2. warp w takes the elements [w * seg, (w + 1) * seg) in order, 32 at a
// time: match.any.sync gives each lane the lanes holding its bin (PTX ISA, "Parallel
// Synchronization and Communication Instructions: match.sync"), its rank in
// the round is the number of them below it (popc of the mask and %lanemask_lt), its rank in the
// warp's part that plus cnt[w][bin], and the lowest of those lanes then adds the round's count to
// cnt[w][bin]; 3. each result register adds the counts of its bin in the warps before the one that
// ranked it. Three CTA barriers, whatever the tile size.
void Lowerer::lower_histogram_ranks(const ir::Op& op) {
  const ir::Value* x = op.operands.at(0);
  const ir::Value* r = op.result();
  const int64_t bins = op.int_attr("bins"), n = x->type.numel(), nw = num_warps;
  const int64_t seg = (n + nw - 1) / nw, rounds = (seg + 31) / 32;
  const int64_t val_at = 0, rank_at = (n * 4 + 15) / 16 * 16, cnt_at = 2 * rank_at;
  need_smem(cnt_at + nw * bins * 4);
  const LinearLayout* l = layout_of(x);
  const LinearLayout* rl = layout_of(r);
  if (!l || !rl) fail(op, "a tile has no layout (the GPU layout pass did not run)");
  auto call = [&](llvm::Intrinsic::ID id, std::vector<Value*> args) {
    return B.CreateCall(llvm::Intrinsic::getDeclaration(&mod, id), args);
  };
  auto popc = [&](Value* v) { return B.CreateCall(llvm::Intrinsic::getDeclaration(&mod, llvm::Intrinsic::ctpop, {B.getInt32Ty()}), {v}); };
  Value* all = i32c(-1);

  // 1. bins (or -1) in row-major order; counters zeroed.
  for_each_item(nw * bins, [&](Value* i) { smem_store(DType::i32, cnt_at, i, i32c(0)); });
  auto hw = hw_coords(*l);
  for (int q = 0; q < l->num_regs(); ++q)
    if (!duplicate_reg(*l, q)) smem_store(DType::i32, val_at, linear(coords(*l, hw, q), x->type.shape), counted_bin(op, q));
  barrier();

  // 2. each warp ranks its part, 32 elements a round.
  Value* lo = B.CreateMul(warp, i32c(seg));
  Value* hi = B.CreateSelect(B.CreateICmpULT(B.CreateAdd(lo, i32c(seg)), i32c(n)), B.CreateAdd(lo, i32c(seg)), i32c(n));
  Value* lt = call(llvm::Intrinsic::nvvm_read_ptx_sreg_lanemask_lt, {});
  // Warps past num_warps (the producer warps before a warp-specialized loop run this code too) have
  // no elements; they read warp 0's counters so that their loads stay inside the table.
  Value* wcnt = B.CreateMul(B.CreateSelect(B.CreateICmpULT(warp, i32c(nw)), warp, i32c(0)), i32c(bins));
  counted_loop(i32c(rounds), {}, [&](Value* k, const std::vector<Value*>&) {
    Value* idx = B.CreateAdd(lo, B.CreateAdd(B.CreateMul(k, i32c(32)), lane));
    Value* in = B.CreateICmpULT(idx, hi);
    Value* v = B.CreateSelect(in, smem_load(DType::i32, val_at, B.CreateSelect(in, idx, i32c(0))), all);
    Value* peers = call(llvm::Intrinsic::nvvm_match_any_sync_i32, {all, v});
    Value* below = popc(B.CreateAnd(peers, lt));
    Value* valid = B.CreateICmpSGE(v, i32c(0));
    Value* slot = B.CreateAdd(wcnt, B.CreateSelect(valid, v, i32c(0)));
    Value* base = smem_load(DType::i32, cnt_at, slot);
    call(llvm::Intrinsic::nvvm_bar_warp_sync, {all});
    when(B.CreateAnd(valid, B.CreateICmpEQ(below, i32c(0))),
         [&] { smem_store(DType::i32, cnt_at, slot, B.CreateAdd(base, popc(peers))); });
    call(llvm::Intrinsic::nvvm_bar_warp_sync, {all});
    when(in, [&] { smem_store(DType::i32, rank_at, idx, B.CreateSelect(valid, B.CreateAdd(base, below), all)); });
    return std::vector<Value*>{};
  });
  barrier();

  // 3. the result registers: the rank in the warp's part plus the bin's counts in earlier warps.
  auto rhw = hw_coords(*rl);
  std::vector<Value*> out;
  for (int q = 0; q < rl->num_regs(); ++q) {
    Value* at = linear(coords(*rl, rhw, q), r->type.shape);
    Value* v = smem_load(DType::i32, val_at, at);
    Value* valid = B.CreateICmpSGE(v, i32c(0));
    Value* vc = B.CreateSelect(valid, v, i32c(0));
    Value* w = B.CreateUDiv(at, i32c(seg));
    Value* rank = smem_load(DType::i32, rank_at, at);
    for (int64_t e = 0; e + 1 < nw; ++e)
      rank = B.CreateAdd(rank, B.CreateSelect(B.CreateICmpULT(i32c(e), w),
                                              smem_load(DType::i32, cnt_at, B.CreateAdd(i32c(e * bins), vc)), i32c(0)));
    out.push_back(B.CreateSelect(valid, rank, all));
  }
  barrier();
  regs[r] = out;
}

}  // namespace tle::gpu::detail
