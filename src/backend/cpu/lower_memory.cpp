// src/backend/cpu/lower_memory.cpp - addptr, load, store, atomic_rmw, atomic_cas, async_copy.
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
      bool vol = op.is_volatile();
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
    case K::AsyncCopy: {
      // gpu::copy: synchronous here (the program's statements run in order on one thread), so
      // its data is in place before the wait that the GPU needs.
      const ir::Value* dst = ops.at(1);
      const ir::Value* mask = ops.size() > 2 ? ops[2] : nullptr;
      if (ops.size() > 3) fail(op, "an 'active' operand (the GPU's pad lanes) on the CPU");
      loop(n, [&](Value* i) {
        Value* v = guarded(
            mask, i, [&]() -> Value* { return B.CreateAlignedLoad(mt, elem(p, i), natural(pd)); },
            [&]() -> Value* { return llvm::Constant::getNullValue(mt); });
        B.CreateAlignedStore(v, elem(dst, i), natural(pd));
      });
      return;
    }
    case K::AtomicRMW: {
      const ir::Value* v = ops.at(1);
      const ir::Value* mask = ops.size() > 2 ? ops[2] : nullptr;
      auto aop = op.enum_attr<ir::AtomicOp>("op");
      produce(op.result(), [&](Value* i) {
        Value* ptr = elem(p, i);
        Value* val = elem(v, i);
        return guarded(
            mask, i, [&]() -> Value* { return atomic_rmw(aop, pd, ptr, val, op); },
            [&]() -> Value* { return llvm::Constant::getNullValue(et); });
      });
      return;
    }
    case K::AtomicCas: {
      const ir::Value* cmp = ops.at(1);
      const ir::Value* v = ops.at(2);
      produce(op.result(), [&](Value* i) { return atomic_cas(pd, elem(p, i), elem(cmp, i), elem(v, i)); });
      return;
    }
    default: fail(op, "not a memory op");
  }
}

}  // namespace tle::cpu::detail
