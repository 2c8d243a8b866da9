// src/backend/cpu/lower_memory.cpp - addptr, load, store, atomic_rmw, atomic_cas.
//
// Every lane is its own access at its own pointer. A lane whose mask is false branches around the
// access, so it never touches memory (inputs may end right before an unmapped page). i1 is a byte
// in memory. Atomics are seq_cst; float max/min (NaN-propagating) and f16/bf16 add are
// compare-exchange loops.
#include <fmt/format.h>
#include <llvm/IR/Intrinsics.h>

#include "backend/cpu/lower.hpp"

namespace tle::cpu::detail {

using llvm::Value;

namespace {
llvm::Align natural(DType d) { return llvm::Align(static_cast<uint64_t>(byte_size(d))); }
}  // namespace

void Lowerer::lower_memory(const ir::Op& op) {
  using K = ir::OpKind;
  const auto& ops = op.operands;
  if (op.kind == K::AddPtr) {
    const ir::Value* p = ops.at(0);
    const ir::Value* off = ops.at(1);
    llvm::Type* pt = mem_ty(p->type.pointee);
    bool sgn = is_signed_int(off->type.dtype);
    auto f = [&, pt, sgn](Value* pv, Value* ov) {
      Value* o = sgn ? B.CreateSExt(ov, B.getInt64Ty()) : B.CreateZExt(ov, B.getInt64Ty());
      return B.CreateGEP(pt, pv, o);
    };
    const Tile &tp = tile(p), &to = tile(off);
    if (tp.splat && to.splat) {
      tiles[op.result()] = Tile{nullptr, f(tp.splat, to.splat)};
      return;
    }
    produce(op.result(), [&](Value* i) { return f(elem(p, i), elem(off, i)); });
    return;
  }

  const ir::Value* p = ops.at(0);
  if (p->type.dtype != DType::ptr) fail(op, "operand 0 is not a pointer");
  const DType pd = p->type.pointee;
  llvm::Type* mt = mem_ty(pd);
  llvm::Type* et = elem_ty(pd);
  const int64_t n = p->type.numel();
  // Runs `access(i)` for lane i only when its mask is true; returns the phi of its result with
  // `off` (or no value when access returns null).
  auto guarded = [&](const ir::Value* mask, Value* i, const std::function<Value*()>& access,
                     const std::function<Value*()>& off) -> Value* {
    if (!mask) return access();
    Value* m = elem(mask, i);
    if (auto* c = llvm::dyn_cast<llvm::ConstantInt>(m)) {
      if (c->isOne()) return access();
      return off ? off() : nullptr;
    }
    Value* other = off ? off() : nullptr;
    llvm::BasicBlock* from = B.GetInsertBlock();
    auto* on = llvm::BasicBlock::Create(ctx, "lane.on", body);
    auto* join = llvm::BasicBlock::Create(ctx, "lane.join", body);
    B.CreateCondBr(m, on, join);
    B.SetInsertPoint(on);
    Value* v = access();
    llvm::BasicBlock* on_end = B.GetInsertBlock();
    B.CreateBr(join);
    B.SetInsertPoint(join);
    if (!v) return nullptr;
    auto* phi = B.CreatePHI(v->getType(), 2);
    phi->addIncoming(v, on_end);
    phi->addIncoming(other, from);
    return phi;
  };
  auto to_mem = [&](Value* v) { return pd == DType::i1 ? B.CreateZExt(v, B.getInt8Ty()) : v; };
  auto from_mem = [&](Value* v) { return pd == DType::i1 ? B.CreateICmpNE(v, B.getInt8(0)) : v; };

  switch (op.kind) {
    case K::Load: {
      const ir::Value* mask = ops.size() > 1 ? ops[1] : nullptr;
      const ir::Value* other = ops.size() > 2 ? ops[2] : nullptr;
      bool vol = op.has_attr("volatile") && op.int_attr("volatile") != 0;
      produce(op.result(), [&](Value* i) {
        Value* ptr = elem(p, i);
        return guarded(
            mask, i,
            [&]() -> Value* {
              auto* ld = B.CreateAlignedLoad(mt, ptr, natural(pd), vol);
              return from_mem(ld);
            },
            [&]() -> Value* { return other ? elem(other, i) : llvm::Constant::getNullValue(et); });
      });
      return;
    }
    case K::Store: {
      const ir::Value* v = ops.at(1);
      const ir::Value* mask = ops.size() > 2 ? ops[2] : nullptr;
      loop(n, [&](Value* i) {
        Value* ptr = elem(p, i);
        Value* val = elem(v, i);
        guarded(mask, i, [&]() -> Value* {
          B.CreateAlignedStore(to_mem(val), ptr, natural(pd));
          return nullptr;
        }, nullptr);
      });
      return;
    }
    case K::AtomicRMW: {
      const ir::Value* v = ops.at(1);
      const ir::Value* mask = ops.size() > 2 ? ops[2] : nullptr;
      auto aop = op.enum_attr<ir::AtomicOp>("op");
      using A = ir::AtomicOp;
      using R = llvm::AtomicRMWInst;
      const bool flt = is_float(pd);
      const bool sgn = is_signed_int(pd);
      // Plain atomicrmw where LLVM has the exact operation; else a cmpxchg loop over `combine`.
      std::optional<R::BinOp> bin;
      std::function<Value*(Value*, Value*)> combine;
      switch (aop) {
        case A::Add:
          if (pd == DType::f32 || pd == DType::f64) bin = R::FAdd;
          else if (flt) combine = [&](Value* o, Value* x) { return from_compute(B.CreateFAdd(to_compute(o, pd), to_compute(x, pd)), pd); };
          else bin = pd == DType::i1 ? R::Or : R::Add;
          break;
        case A::Max: case A::Min:
          if (flt) combine = [&, aop](Value* o, Value* x) {
            return from_compute(float_max_min(aop == A::Max, to_compute(o, pd), to_compute(x, pd)), pd);
          };
          else if (aop == A::Max) bin = sgn ? R::Max : R::UMax;
          else bin = sgn ? R::Min : R::UMin;
          break;
        case A::Xchg: bin = R::Xchg; break;
        case A::And: case A::Or: case A::Xor:
          if (flt) fail(op, fmt::format("atomic '{}' is not defined on {}", ir::name(aop), dtype_name(pd)));
          bin = aop == A::And ? R::And : aop == A::Or ? R::Or : R::Xor;
          break;
      }
      produce(op.result(), [&](Value* i) {
        Value* ptr = elem(p, i);
        Value* val = elem(v, i);
        return guarded(
            mask, i,
            [&]() -> Value* {
              if (bin) {
                Value* mv = to_mem(val);
                return from_mem(B.CreateAtomicRMW(*bin, ptr, mv, natural(pd), llvm::AtomicOrdering::SequentiallyConsistent));
              }
              // cmpxchg loop on the integer bits.
              llvm::Type* it = B.getIntNTy(static_cast<unsigned>(bit_width(pd)));
              Value* first = B.CreateAlignedLoad(it, ptr, natural(pd));
              llvm::cast<llvm::LoadInst>(first)->setAtomic(llvm::AtomicOrdering::Monotonic);
              llvm::BasicBlock* pre = B.GetInsertBlock();
              auto* retry = llvm::BasicBlock::Create(ctx, "cas.retry", body);
              auto* done = llvm::BasicBlock::Create(ctx, "cas.done", body);
              B.CreateBr(retry);
              B.SetInsertPoint(retry);
              auto* old = B.CreatePHI(it, 2);
              old->addIncoming(first, pre);
              Value* nv = B.CreateBitCast(combine(B.CreateBitCast(old, et), val), it);
              auto* cx = B.CreateAtomicCmpXchg(ptr, old, nv, natural(pd), llvm::AtomicOrdering::SequentiallyConsistent,
                                               llvm::AtomicOrdering::SequentiallyConsistent);
              Value* seen = B.CreateExtractValue(cx, 0);
              Value* ok = B.CreateExtractValue(cx, 1);
              old->addIncoming(seen, retry);
              B.CreateCondBr(ok, done, retry);
              B.SetInsertPoint(done);
              return B.CreateBitCast(old, et);
            },
            [&]() -> Value* { return llvm::Constant::getNullValue(et); });
      });
      return;
    }
    case K::AtomicCas: {
      const ir::Value* cmp = ops.at(1);
      const ir::Value* v = ops.at(2);
      llvm::Type* it = pd == DType::ptr ? mt : B.getIntNTy(static_cast<unsigned>(byte_size(pd) * 8));
      produce(op.result(), [&](Value* i) {
        Value* ptr = elem(p, i);
        Value* c = to_mem(elem(cmp, i));
        Value* nv = to_mem(elem(v, i));
        if (c->getType() != it) {
          c = B.CreateBitCast(c, it);
          nv = B.CreateBitCast(nv, it);
        }
        auto* cx = B.CreateAtomicCmpXchg(ptr, c, nv, natural(pd), llvm::AtomicOrdering::SequentiallyConsistent,
                                         llvm::AtomicOrdering::SequentiallyConsistent);
        Value* old = B.CreateExtractValue(cx, 0);
        if (old->getType() != mt) old = B.CreateBitCast(old, mt);
        return from_mem(old);
      });
      return;
    }
    default: fail(op, "not a memory op");
  }
}

}  // namespace tle::cpu::detail
