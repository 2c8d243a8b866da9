// src/backend/gpu/lower_reduce.cpp - reduce, scan, dot and histogram on the GPU.
//
// reduce: registers of one thread first (in axis order), then lanes with butterfly shuffles (the
// lane holding the lower coordinate is the left operand, so an associative combine need not be
// commutative), then warps through shared memory, combined in warp order. argmax/argmin carry
// (value, index) and break ties by the smaller index (E02, E03). scan, dot and histogram stage
// their operands in shared memory (a first, correct version; shuffle scans later); dots in the
// mma layouts go to lower_mma.cpp instead.
#include <fmt/format.h>
#include <llvm/IR/Intrinsics.h>

#include <algorithm>
#include <map>

#include "backend/gpu/lower.hpp"

namespace tle::gpu::detail {

using layout::LinearLayout;
using llvm::Value;

namespace {

/// The running state of a reduction or scan and its combine step.
struct Accum {
  Lowerer& L;
  const ir::Op& op;
  ir::ReduceKind kind;
  DType d;         // element dtype
  DType cd;        // state value dtype in shared memory (f32 for f16/bf16 sums and extremes)
  bool has_index;  // argmax/argmin

  Accum(Lowerer& l, const ir::Op& o, ir::ReduceKind k, DType dt) : L(l), op(o), kind(k), d(dt) {
    has_index = k == ir::ReduceKind::Argmax || k == ir::ReduceKind::Argmin;
    cd = (k != ir::ReduceKind::Combine && (d == DType::f16 || d == DType::bf16)) ? DType::f32 : d;
  }
  std::vector<DType> dtypes() const { return has_index ? std::vector<DType>{cd, DType::i32} : std::vector<DType>{cd}; }
  std::vector<Value*> init(Value* v, Value* idx) {
    Value* x = cd != d ? L.to_compute(v, d) : v;
    if (has_index) return {x, idx};
    return {x};
  }
  std::vector<Value*> combine(const std::vector<Value*>& a, const std::vector<Value*>& b) {
    auto& B = L.B;
    using K = ir::ReduceKind;
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
      case K::Combine: return L.inline_region(op.region(0), {a[0], b[0]});
    }
    throw InternalError("gpu backend: bad reduce kind");
  }
  Value* final(const std::vector<Value*>& s) {
    if (has_index) return s[1];
    return cd != d ? L.from_compute(s[0], d) : s[0];
  }
};

}  // namespace

void Lowerer::lower_reduce(const ir::Op& op) {
  const ir::Value* x = op.operands.at(0);
  const ir::Value* r = op.result();
  const int axis = static_cast<int>(op.int_attr("axis"));
  const LinearLayout* l = layout_of(x);
  if (!l) fail(op, "a tile has no layout (the GPU layout pass did not run)");
  Accum acc(*this, op, op.enum_attr<ir::ReduceKind>("kind"), x->type.dtype);
  auto hw = hw_coords(*l);

  // 1. registers of this thread, grouped by their coordinates without the axis, in axis order.
  struct Group {
    std::vector<int32_t> key;
    std::vector<std::pair<int32_t, int>> members;  // (axis coordinate of the reg part, reg)
    std::vector<Value*> state;
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
    for (auto& [a, i] : g.members) {
      Value* idx = acc.has_index ? coords(*l, hw, i)[static_cast<size_t>(axis)] : nullptr;
      auto s = acc.init(reg(x, i), idx);
      g.state = g.state.empty() ? s : acc.combine(g.state, s);
    }
  }
  // 2. lanes: butterfly over lane bits that move along the axis only.
  const auto& lb = l->bases(layout::kLane);
  for (size_t b = 0; b < lb.size(); ++b) {
    const auto& basis = lb[b];
    if (basis[static_cast<size_t>(axis)] == 0) continue;
    for (size_t dd = 0; dd < basis.size(); ++dd)
      if (dd != static_cast<size_t>(axis) && basis[dd]) fail(op, "lane basis mixes the reduced dim with others");
    Value* upper = B.CreateICmpNE(B.CreateAnd(lane, 1u << b), B.getInt32(0));
    for (auto& [k, g] : groups) {
      std::vector<Value*> other;
      for (Value* v : g.state) other.push_back(shuffle_xor(v, 1 << b));
      std::vector<Value*> lo, hi;
      for (size_t c = 0; c < g.state.size(); ++c) {
        lo.push_back(B.CreateSelect(upper, other[c], g.state[c]));
        hi.push_back(B.CreateSelect(upper, g.state[c], other[c]));
      }
      g.state = acc.combine(lo, hi);
    }
  }
  // 3. warps: through shared memory, one slot per (warp position along the axis, result element).
  const auto& wb = l->bases(layout::kWarp);
  std::vector<std::pair<int32_t, int>> axis_warp_bits;  // (basis value, bit)
  for (size_t b = 0; b < wb.size(); ++b) {
    const auto& basis = wb[b];
    if (basis[static_cast<size_t>(axis)] == 0) continue;
    for (size_t dd = 0; dd < basis.size(); ++dd)
      if (dd != static_cast<size_t>(axis) && basis[dd]) fail(op, "warp basis mixes the reduced dim with others");
    axis_warp_bits.push_back({basis[static_cast<size_t>(axis)], static_cast<int>(b)});
  }
  ir::Shape rshape = x->type.shape;
  rshape.erase(rshape.begin() + axis);
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
    auto dts = acc.dtypes();
    std::vector<int64_t> base(dts.size());
    int64_t off = 0;
    for (size_t c = 0; c < dts.size(); ++c) {
      base[c] = off;
      off += (nslots * rnumel * byte_size(dts[c]) + 15) / 16 * 16;
    }
    need_smem(off);
    for (auto& [k, g] : groups) {
      Value* slot = B.CreateAdd(B.CreateMul(wpos, i32c(rnumel)), key_index(g.key));
      for (size_t c = 0; c < dts.size(); ++c) smem_store(dts[c], base[c], slot, g.state[c]);
    }
    barrier();
    for (auto& [k, g] : groups) {
      Value* ki = key_index(g.key);
      std::vector<Value*> st;
      for (int64_t w = 0; w < nslots; ++w) {
        Value* slot = B.CreateAdd(i32c(w * rnumel), ki);
        std::vector<Value*> s;
        for (size_t c = 0; c < dts.size(); ++c) s.push_back(smem_load(dts[c], base[c], slot));
        st = st.empty() ? s : acc.combine(st, s);
      }
      g.state = st;
    }
    barrier();
  }
  // 4. result registers.
  const LinearLayout* rl = layout_of(r);
  if (!rl) {
    if (groups.size() != 1) fail(op, "a reduction to a scalar left several partial results");
    regs[r] = {acc.final(groups.begin()->second.state)};
    return;
  }
  std::vector<Value*> out;
  for (int q = 0; q < rl->num_regs(); ++q) {
    auto key = reg_coords(*rl, q);
    auto it = groups.find(key);
    if (it == groups.end()) fail(op, "the result layout is not the slice of the operand's (layout invariant broken)");
    out.push_back(acc.final(it->second.state));
  }
  regs[r] = out;
}

void Lowerer::lower_scan(const ir::Op& op) {
  const ir::Value* x = op.operands.at(0);
  const ir::Value* r = op.result();
  const int axis = static_cast<int>(op.int_attr("axis"));
  const bool reverse = op.has_attr("reverse") && op.int_attr("reverse") != 0;
  auto kind = op.enum_attr<ir::ScanKind>("kind");
  Accum acc(*this, op, kind == ir::ScanKind::Cumsum ? ir::ReduceKind::Sum : ir::ReduceKind::Combine, x->type.dtype);
  const DType cd = acc.cd;
  const auto& shape = x->type.shape;
  const int64_t len = shape[static_cast<size_t>(axis)];
  int64_t inner = 1;
  for (size_t dd = static_cast<size_t>(axis) + 1; dd < shape.size(); ++dd) inner *= shape[dd];
  const int64_t numel = x->type.numel();
  const int64_t nlines = numel / len;
  need_smem(numel * byte_size(cd));
  // stage in the state dtype
  const LinearLayout* l = layout_of(x);
  auto hw = hw_coords(*l);
  for (int i = 0; i < l->num_regs(); ++i) {
    if (duplicate_reg(*l, i)) continue;
    smem_store(cd, 0, linear(coords(*l, hw, i), shape), acc.init(reg(x, i), nullptr)[0]);
  }
  barrier();
  // one thread per line, sequentially along the axis
  const int64_t nthreads = 32 * num_warps;
  const int64_t rounds = (nlines + nthreads - 1) / nthreads;
  counted_loop(B.getInt32(static_cast<uint32_t>(rounds)), {}, [&](Value* j, const std::vector<Value*>&) {
    Value* line = B.CreateAdd(tid, B.CreateMul(j, i32c(nthreads)));
    auto* work = llvm::BasicBlock::Create(ctx, "scan.line", kernel);
    auto* next = llvm::BasicBlock::Create(ctx, "scan.next", kernel);
    B.CreateCondBr(B.CreateICmpULT(line, i32c(nlines)), work, next);
    B.SetInsertPoint(work);
    Value* outer = B.CreateUDiv(line, i32c(inner));
    Value* in = B.CreateURem(line, i32c(inner));
    Value* base = B.CreateAdd(B.CreateMul(outer, i32c(len * inner)), in);
    auto at = [&](Value* k) {
      Value* pos = reverse ? B.CreateSub(i32c(len - 1), k) : k;
      return B.CreateAdd(base, B.CreateMul(pos, i32c(inner)));
    };
    Value* first = smem_load(cd, 0, at(B.getInt32(0)));
    counted_loop(i32c(len - 1), {first}, [&](Value* k1, const std::vector<Value*>& cur) {
      Value* idx = at(B.CreateAdd(k1, B.getInt32(1)));
      auto s = acc.combine({cur[0]}, {smem_load(cd, 0, idx)});
      smem_store(cd, 0, idx, s[0]);
      return s;
    });
    B.CreateBr(next);
    B.SetInsertPoint(next);
    return std::vector<Value*>{};
  });
  barrier();
  std::vector<Value*> out;
  for (int i = 0; i < l->num_regs(); ++i) out.push_back(acc.final({smem_load(cd, 0, linear(coords(*l, hw, i), shape))}));
  barrier();
  regs[r] = out;
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

void Lowerer::lower_histogram(const ir::Op& op) {
  const ir::Value* x = op.operands.at(0);
  const ir::Value* mask = op.operands.size() > 1 ? op.operands[1] : nullptr;
  const ir::Value* r = op.result();
  const int64_t bins = op.int_attr("bins");
  const DType xd = x->type.dtype;
  need_smem(bins * 4);
  const int64_t nthreads = 32 * num_warps;
  // zero the counters
  counted_loop(i32c((bins + nthreads - 1) / nthreads), {}, [&](Value* j, const std::vector<Value*>&) {
    Value* i = B.CreateAdd(tid, B.CreateMul(j, i32c(nthreads)));
    auto* on = llvm::BasicBlock::Create(ctx, "hist.z", kernel);
    auto* next = llvm::BasicBlock::Create(ctx, "hist.zn", kernel);
    B.CreateCondBr(B.CreateICmpULT(i, i32c(bins)), on, next);
    B.SetInsertPoint(on);
    smem_store(DType::i32, 0, i, B.getInt32(0));
    B.CreateBr(next);
    B.SetInsertPoint(next);
    return std::vector<Value*>{};
  });
  barrier();
  const LinearLayout* l = layout_of(x);
  Value* own = owner(l);
  for (int i = 0; i < num_regs(x); ++i) {
    if (l && duplicate_reg(*l, i)) continue;
    Value* v = B.CreateIntCast(reg(x, i), B.getInt64Ty(), is_signed_int(xd));
    Value* ok = B.CreateAnd(own, is_signed_int(xd) ? B.CreateAnd(B.CreateICmpSGE(v, B.getInt64(0)), B.CreateICmpSLT(v, B.getInt64(static_cast<uint64_t>(bins))))
                                                   : B.CreateICmpULT(v, B.getInt64(static_cast<uint64_t>(bins))));
    if (mask) ok = B.CreateAnd(ok, reg(mask, i));
    auto* on = llvm::BasicBlock::Create(ctx, "hist.add", kernel);
    auto* next = llvm::BasicBlock::Create(ctx, "hist.next", kernel);
    B.CreateCondBr(ok, on, next);
    B.SetInsertPoint(on);
    Value* p = smem_ptr(B.CreateMul(B.CreateTrunc(v, B.getInt32Ty()), B.getInt32(4)));
    B.CreateAtomicRMW(llvm::AtomicRMWInst::Add, p, B.getInt32(1), llvm::Align(4), llvm::AtomicOrdering::Monotonic);
    B.CreateBr(next);
    B.SetInsertPoint(next);
  }
  barrier();
  regs[r] = unstage(layout_of(r), r->type.shape, DType::i32, 0);
  barrier();
}

}  // namespace tle::gpu::detail
