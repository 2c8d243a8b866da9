// src/backend/cpu/lower_reduce.cpp - reduce, scan, dot, histogram.
//
// Reduce/scan view x as [outer, n, inner] around the axis and keep one accumulator state per
// (outer, inner) in frame arrays; the loop nest is (outer, k, inner), so the innermost loop runs
// over independent lanes and vectorizes (and a single-lane state becomes registers after SROA).
// Elements are combined strictly in order k = 0, 1, ... (n-1 ... 0 for a reverse scan), the state
// the left operand of a user combine. A reduce/scan with a combine may have several operands: the
// state has one component per operand, and so do the results.
#include <fmt/format.h>
#include <llvm/IR/Intrinsics.h>

#include "backend/cpu/lower.hpp"

namespace tle::cpu::detail {

using llvm::Value;

namespace {

/// An accumulator: state components (types), init from the first elements (one per operand),
/// combine with the k-th elements, and the final values in the results' dtypes.
using Values = std::vector<Value*>;
struct Accum {
  std::vector<llvm::Type*> types;
  std::function<Values(const Values& x, Value* k)> init;
  std::function<Values(const Values& s, const Values& x, Value* k)> combine;
  std::function<Values(const Values& s)> final;
};

}  // namespace

static Accum make_accum(Lowerer& L, const ir::Op& op, int kind_sum_max_min_arg, const ir::Region* region) {
  const DType d = op.operands.at(0)->type.dtype;
  // kind_sum_max_min_arg: 0 sum, 1 max, 2 min, 3 argmax, 4 argmin, 5 combine.
  auto& B = L.B;
  Accum a;
  switch (kind_sum_max_min_arg) {
    case 0: case 1: case 2: {
      a.types = {L.compute_ty(d)};
      a.init = [&L, d](const Values& x, Value*) { return Values{L.to_compute(x[0], d)}; };
      int kind = kind_sum_max_min_arg;
      a.combine = [&L, &B, d, kind](const Values& s, const Values& x, Value*) {
        Value* v = L.to_compute(x[0], d);
        Value* r;
        if (kind == 0) r = is_float(d) ? B.CreateFAdd(s[0], v) : B.CreateAdd(s[0], v);
        else if (is_float(d)) r = L.float_max_min(kind == 1, s[0], v);
        else {
          bool sgn = is_signed_int(d);
          auto id = kind == 1 ? (sgn ? llvm::Intrinsic::smax : llvm::Intrinsic::umax) : (sgn ? llvm::Intrinsic::smin : llvm::Intrinsic::umin);
          r = B.CreateBinaryIntrinsic(id, s[0], v);
        }
        return Values{r};
      };
      a.final = [&L, d](const Values& s) { return Values{L.from_compute(s[0], d)}; };
      return a;
    }
    case 3: case 4: {
      bool is_max = kind_sum_max_min_arg == 3;
      a.types = {L.compute_ty(d), B.getInt32Ty()};
      a.init = [&L, &B, d](const Values& x, Value*) { return Values{L.to_compute(x[0], d), B.getInt32(0)}; };
      a.combine = [&L, &B, d, is_max](const Values& s, const Values& x, Value* k) {
        Value* v = L.to_compute(x[0], d);
        Value* take;
        if (is_float(d)) {
          // The first NaN wins; else a strictly better value (ties keep the first index).
          Value* better = is_max ? B.CreateFCmpOGT(v, s[0]) : B.CreateFCmpOLT(v, s[0]);
          Value* s_not_nan = B.CreateFCmpORD(s[0], s[0]);
          take = B.CreateAnd(s_not_nan, B.CreateOr(B.CreateFCmpUNO(v, v), better));
        } else {
          bool sgn = is_signed_int(d);
          take = is_max ? (sgn ? B.CreateICmpSGT(v, s[0]) : B.CreateICmpUGT(v, s[0]))
                        : (sgn ? B.CreateICmpSLT(v, s[0]) : B.CreateICmpULT(v, s[0]));
        }
        Value* k32 = B.CreateTrunc(k, B.getInt32Ty());
        return Values{B.CreateSelect(take, v, s[0]), B.CreateSelect(take, k32, s[1])};
      };
      a.final = [](const Values& s) { return Values{s[1]}; };
      return a;
    }
    default: {
      if (!region) L.fail(op, "combine kind without a region");
      for (const ir::Value* x : op.operands) a.types.push_back(L.elem_ty(x->type.dtype));
      a.init = [](const Values& x, Value*) { return x; };
      a.combine = [&L, region](const Values& s, const Values& x, Value*) {
        Values args = s;
        args.insert(args.end(), x.begin(), x.end());
        return L.inline_region(*region, args);
      };
      a.final = [](const Values& s) { return s; };
      return a;
    }
  }
}

/// Element `at` of every operand of op (what a multi-operand combine takes, in operand order).
static Values operand_elems(Lowerer& L, const ir::Op& op, Value* at) {
  Values v;
  for (const ir::Value* x : op.operands) v.push_back(L.elem(x, at));
  return v;
}

void Lowerer::lower_reduce(const ir::Op& op) {
  const ir::Value* x = op.operands.at(0);
  const size_t nr = op.results.size();
  const int64_t axis = op.int_attr("axis");
  if (axis < 0 || axis >= x->type.rank()) fail(op, fmt::format("axis {} out of range", axis));
  auto kind = op.enum_attr<ir::ReduceKind>("kind");
  Accum acc = make_accum(*this, op, static_cast<int>(kind), op.regions.empty() ? nullptr : &op.region(0));
  ir::AxisSplit sp = ir::split_at_axis(x->type.shape, static_cast<int>(axis));
  const Tile xt = tile(x);
  if (xt.splat && kind != ir::ReduceKind::Combine && kind != ir::ReduceKind::Sum) {
    // max/min of a splat is the splat; argmax/argmin is index 0.
    Value* v = kind == ir::ReduceKind::Argmax || kind == ir::ReduceKind::Argmin ? B.getInt32(0) : xt.splat;
    tiles[op.result()] = Tile{nullptr, v};
    return;
  }
  auto xs = [&](Value* at) { return operand_elems(*this, op, at); };
  std::vector<Value*> state;
  for (auto* t : acc.types) state.push_back(alloc(t, sp.inner, "acc"));
  auto load_state = [&](Value* i) {
    Values s;
    for (size_t c = 0; c < state.size(); ++c) s.push_back(elem(Tile{state[c], nullptr}, acc.types[c], i));
    return s;
  };
  const int64_t rn = op.result()->type.numel();
  std::vector<llvm::Type*> rty;
  std::vector<Value*> out(nr, nullptr), result_splat(nr, nullptr);
  for (size_t c = 0; c < nr; ++c) {
    rty.push_back(elem_ty(op.result(static_cast<unsigned>(c))->type.dtype));
    if (rn != 1) out[c] = alloc(rty[c], rn, op.result(static_cast<unsigned>(c))->name_hint);
  }
  loop(sp.outer, [&](Value* o) {
    auto xidx = [&](Value* k, Value* i) {
      return B.CreateAdd(B.CreateMul(B.CreateAdd(B.CreateMul(o, i64c(sp.n)), k), i64c(sp.inner)), i);
    };
    loop(sp.inner, [&](Value* i) {
      auto s = acc.init(xs(xidx(i64c(0), i)), i64c(0));
      for (size_t c = 0; c < s.size(); ++c) store_elem(state[c], acc.types[c], i, s[c]);
    }, "i0");
    loop(i64c(1), i64c(sp.n), [&](Value* k) {
      loop(sp.inner, [&](Value* i) {
        auto ns = acc.combine(load_state(i), xs(xidx(k, i)), k);
        for (size_t c = 0; c < ns.size(); ++c) store_elem(state[c], acc.types[c], i, ns[c]);
      }, "i");
    }, "k");
    loop(sp.inner, [&](Value* i) {
      Values v = acc.final(load_state(i));
      for (size_t c = 0; c < nr; ++c) {
        if (out[c]) store_elem(out[c], rty[c], B.CreateAdd(B.CreateMul(o, i64c(sp.inner)), i), v[c]);
        else result_splat[c] = v[c];
      }
    }, "i1");
  }, "o");
  for (size_t c = 0; c < nr; ++c)
    tiles[op.result(static_cast<unsigned>(c))] = out[c] ? Tile{out[c], nullptr} : Tile{nullptr, result_splat[c]};
}

void Lowerer::lower_scan(const ir::Op& op) {
  const ir::Value* x = op.operands.at(0);
  const size_t nx = op.operands.size();
  const int64_t axis = op.int_attr("axis");
  if (axis < 0 || axis >= x->type.rank()) fail(op, fmt::format("axis {} out of range", axis));
  const bool reverse = op.has_attr("reverse") && op.int_attr("reverse") != 0;
  auto kind = op.enum_attr<ir::ScanKind>("kind");
  Accum acc = make_accum(*this, op, kind == ir::ScanKind::Cumsum ? 0 : 5, op.regions.empty() ? nullptr : &op.region(0));
  ir::AxisSplit sp = ir::split_at_axis(x->type.shape, static_cast<int>(axis));
  auto xs = [&](Value* at) { return operand_elems(*this, op, at); };
  const int64_t rn = x->type.numel();
  if (rn == 1) {
    Values v = acc.final(acc.init(xs(i64c(0)), i64c(0)));
    for (size_t c = 0; c < nx; ++c) tiles[op.result(static_cast<unsigned>(c))] = Tile{nullptr, v[c]};
    return;
  }
  std::vector<Value*> state;
  for (auto* t : acc.types) state.push_back(alloc(t, sp.inner, "acc"));
  std::vector<llvm::Type*> rty;
  std::vector<Value*> out;
  for (size_t c = 0; c < nx; ++c) {
    const ir::Value* r = op.result(static_cast<unsigned>(c));
    rty.push_back(elem_ty(r->type.dtype));
    out.push_back(alloc(rty[c], rn, r->name_hint));
  }
  auto store_out = [&](Value* at, const Values& v) {
    for (size_t c = 0; c < nx; ++c) store_elem(out[c], rty[c], at, v[c]);
  };
  loop(sp.outer, [&](Value* o) {
    auto idx = [&](Value* k, Value* i) {
      return B.CreateAdd(B.CreateMul(B.CreateAdd(B.CreateMul(o, i64c(sp.n)), k), i64c(sp.inner)), i);
    };
    auto pos = [&](Value* kk) { return reverse ? B.CreateSub(i64c(sp.n - 1), kk) : kk; };
    Value* k0 = pos(i64c(0));
    loop(sp.inner, [&](Value* i) {
      Value* at = idx(k0, i);
      auto s = acc.init(xs(at), k0);
      for (size_t c = 0; c < s.size(); ++c) store_elem(state[c], acc.types[c], i, s[c]);
      store_out(at, acc.final(s));
    }, "i0");
    loop(i64c(1), i64c(sp.n), [&](Value* kk) {
      Value* k = pos(kk);
      loop(sp.inner, [&](Value* i) {
        Value* at = idx(k, i);
        Values s;
        for (size_t c = 0; c < state.size(); ++c) s.push_back(elem(Tile{state[c], nullptr}, acc.types[c], i));
        auto ns = acc.combine(s, xs(at), k);
        for (size_t c = 0; c < ns.size(); ++c) store_elem(state[c], acc.types[c], i, ns[c]);
        store_out(at, acc.final(ns));
      }, "i");
    }, "k");
  }, "o");
  for (size_t c = 0; c < nx; ++c) tiles[op.result(static_cast<unsigned>(c))] = Tile{out[c], nullptr};
}

void Lowerer::lower_dot(const ir::Op& op) {
  const ir::Value* a = op.operands.at(0);
  const ir::Value* b = op.operands.at(1);
  const ir::Value* c = op.operands.at(2);
  const ir::Value* r = op.result();
  if (a->type.rank() != 2 || b->type.rank() != 2 || c->type.rank() != 2) fail(op, "operands must be 2-D");
  const int64_t M = a->type.shape[0], K = a->type.shape[1], N = b->type.shape[1];
  if (b->type.shape[0] != K || c->type.shape[0] != M || c->type.shape[1] != N) fail(op, "shapes do not match [M,K]x[K,N]+[M,N]");
  const DType ad = a->type.dtype, bd = b->type.dtype, cd = c->type.dtype, rd = r->type.dtype;
  const bool flt = is_float(ad);
  if (flt != is_float(bd) || flt != is_float(rd)) fail(op, "mixed float and integer operands");
  // Compute dtype: f32 (f64 if anything is f64) for floats; the accumulator's integer type.
  DType kd;
  if (flt) kd = (ad == DType::f64 || bd == DType::f64 || cd == DType::f64 || rd == DType::f64) ? DType::f64 : DType::f32;
  else kd = rd;
  llvm::Type* kt = elem_ty(kd);
  auto prec = op.has_attr("precision") ? op.enum_attr<ir::Precision>("precision") : ir::Precision::IEEE;
  const bool tf32 = prec == ir::Precision::TF32 && kd == DType::f32;
  auto input = [&](Value* v, DType d) {
    Value* x = convert(v, d, kd);
    return tf32 ? round_tf32(x) : x;
  };
  const int64_t rn = M * N;
  // Accumulator in the compute dtype; it becomes the result storage when the dtypes agree.
  Value* accum = alloc(kt, rn, "dotacc");
  loop(rn, [&](Value* i) { store_elem(accum, kt, i, convert(elem(c, i), cd, kd)); }, "init");
  loop(M, [&](Value* m) {
    loop(K, [&](Value* k) {
      Value* av = input(elem(a, B.CreateAdd(B.CreateMul(m, i64c(K)), k)), ad);
      loop(N, [&](Value* n) {
        Value* bv = input(elem(b, B.CreateAdd(B.CreateMul(k, i64c(N)), n)), bd);
        Value* at = B.CreateAdd(B.CreateMul(m, i64c(N)), n);
        Value* s = elem(Tile{accum, nullptr}, kt, at);
        Value* nv = flt ? B.CreateFAdd(s, B.CreateFMul(av, bv)) : B.CreateAdd(s, B.CreateMul(av, bv));
        store_elem(accum, kt, at, nv);
      }, "n");
    }, "k");
  }, "m");
  if (rn == 1) {
    tiles[r] = Tile{nullptr, convert(B.CreateLoad(kt, accum), kd, rd)};
  } else if (kd == rd) {
    tiles[r] = Tile{accum, nullptr};
  } else {
    Tile acc_t{accum, nullptr};
    produce(r, [&](Value* i) { return convert(elem(acc_t, kt, i), kd, rd); });
  }
}

void Lowerer::lower_histogram(const ir::Op& op) {
  const ir::Value* x = op.operands.at(0);
  const ir::Value* mask = op.operands.size() > 1 ? op.operands[1] : nullptr;
  const ir::Value* r = op.result();
  const int64_t bins = op.int_attr("bins");
  if (bins < 1 || r->type.numel() != bins) fail(op, "bad bin count");
  const DType d = x->type.dtype;
  if (!is_int(d)) fail(op, "values must be integers");
  llvm::Type* i32 = B.getInt32Ty();
  Value* counts = alloc(i32, bins, "hist");
  loop(bins, [&](Value* i) { store_elem(counts, i32, i, B.getInt32(0)); }, "zero");
  loop(x->type.numel(), [&](Value* i) {
    Value* v = elem(x, i);
    Value* v64 = is_signed_int(d) ? B.CreateSExt(v, B.getInt64Ty()) : B.CreateZExt(v, B.getInt64Ty());
    Value* ok = B.CreateICmpULT(v64, i64c(bins));  // also rejects negatives
    if (mask) ok = B.CreateAnd(ok, elem(mask, i));
    auto* on = llvm::BasicBlock::Create(ctx, "hist.in", body);
    auto* join = llvm::BasicBlock::Create(ctx, "hist.next", body);
    B.CreateCondBr(ok, on, join);
    B.SetInsertPoint(on);
    Value* slot = B.CreateInBoundsGEP(i32, counts, v64);
    B.CreateStore(B.CreateAdd(B.CreateLoad(i32, slot), B.getInt32(1)), slot);
    B.CreateBr(join);
    B.SetInsertPoint(join);
  }, "h");
  tiles[r] = bins == 1 ? Tile{nullptr, B.CreateLoad(i32, counts)} : Tile{counts, nullptr};
}

void Lowerer::lower_histogram_ranks(const ir::Op& op) {
  const ir::Value* x = op.operands.at(0);
  const ir::Value* mask = op.operands.size() > 1 ? op.operands[1] : nullptr;
  const ir::Value* r = op.result();
  const int64_t bins = op.int_attr("bins"), n = x->type.numel();
  if (bins < 1) fail(op, "bad bin count");
  const DType d = x->type.dtype;
  if (!is_int(d)) fail(op, "values must be integers");
  llvm::Type* i32 = B.getInt32Ty();
  Value* seen = alloc(i32, bins, "seen");
  Value* ranks = alloc(i32, n, "ranks");
  loop(bins, [&](Value* i) { store_elem(seen, i32, i, B.getInt32(0)); }, "zero");
  loop(n, [&](Value* i) {
    Value* v = elem(x, i);
    Value* v64 = is_signed_int(d) ? B.CreateSExt(v, B.getInt64Ty()) : B.CreateZExt(v, B.getInt64Ty());
    Value* ok = B.CreateICmpULT(v64, i64c(bins));  // also rejects negatives
    if (mask) ok = B.CreateAnd(ok, elem(mask, i));
    store_elem(ranks, i32, i, B.getInt32(static_cast<uint32_t>(-1)));
    auto* on = llvm::BasicBlock::Create(ctx, "hrank.in", body);
    auto* join = llvm::BasicBlock::Create(ctx, "hrank.next", body);
    B.CreateCondBr(ok, on, join);
    B.SetInsertPoint(on);
    Value* slot = B.CreateInBoundsGEP(i32, seen, v64);
    Value* before = B.CreateLoad(i32, slot);
    store_elem(ranks, i32, i, before);
    B.CreateStore(B.CreateAdd(before, B.getInt32(1)), slot);
    B.CreateBr(join);
    B.SetInsertPoint(join);
  }, "hr");
  tiles[r] = n == 1 ? Tile{nullptr, B.CreateLoad(i32, ranks)} : Tile{ranks, nullptr};
}

}  // namespace tle::cpu::detail
