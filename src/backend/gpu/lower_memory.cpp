// src/backend/gpu/lower_memory.cpp - addptr, load, store and atomics on the GPU.
//
// Loads and stores move `vec` consecutive registers (layout pass attribute) as one vector access
// when the whole group is unmasked; a partly masked group falls back to per-element accesses
// (llvm.masked.load/store, which NVPTX scalarizes into predicated accesses), so a masked-off lane
// never touches memory. Cache operators and eviction priorities (MemHints) make the accesses
// inline PTX ld/st with those modifiers; volatile ones are LLVM volatile accesses. Stores and atomics are done by one holder of each element only
// (replicated lanes, warps and registers skip), so an atomic counts once per element.
#include <fmt/format.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

#include "backend/gpu/lower.hpp"
#include "passes/pointer_origin.hpp"

namespace tle::gpu::detail {

using layout::LinearLayout;
using llvm::Value;

namespace {

/// The vector width of an access in layout `l` (layout::access_vec; 1 without a layout).
int usable_vec(const LinearLayout* l, int vec) { return l ? static_cast<int>(layout::access_vec(*l, vec)) : 1; }

/// The PTX modifiers of a load/store's hints (attributes "cache", "evict", "volatile"; the tracer
/// allows a cache operator or an eviction priority, not both, as ld/st do): "" when there are
/// none, else e.g. ".cs" or ".L1::evict_last" (PTX ISA 9.7.9.8 ld, 9.7.9.10 st). Volatile
/// accesses are plain LLVM volatile loads/stores (ld.volatile / st.volatile) and take no other hint.
std::string hint_modifiers(const ir::Op& op, bool has_buffers) {
  if (op.is_volatile()) return "";
  // Cache operators and L1 priorities are global-memory hints: an access that may reach a shared
  // buffer is a plain one (a generic ld/st works on both spaces).
  if (has_buffers && passes::pointer_origin(op.operands.at(0)).shared()) return "";
  std::string m;
  if (op.has_attr("cache")) m += op.str_attr("cache");
  if (op.has_attr("evict")) m += ".L1::" + op.str_attr("evict");
  return m;
}

/// One global access of `bytes` (1, 2, 4, 8 or 16) as inline PTX with modifiers `mods`: the PTX
/// type and vector count that move those bytes (.b8/.b16 in a 16-bit register, .b32 x 1/2/4).
struct AsmAccess {
  int count;         // registers
  int bits;          // bits per register (16 or 32)
  const char* type;  // PTX type
};
AsmAccess asm_access(int64_t bytes) {
  switch (bytes) {
    case 1: return {1, 16, "b8"};
    case 2: return {1, 16, "b16"};
    case 4: return {1, 32, "b32"};
    case 8: return {2, 32, "b32"};
    case 16: return {4, 32, "b32"};
    default: throw InternalError(fmt::format("gpu backend: no hinted global access of {} bytes", bytes));
  }
}

std::string vec_prefix(int count) { return count == 1 ? "" : fmt::format(".v{}", count); }

}  // namespace

Value* Lowerer::hinted_load(llvm::Type* t, Value* ptr, const std::string& mods) {
  const int64_t bytes = static_cast<int64_t>(mod.getDataLayout().getTypeStoreSize(t));
  const AsmAccess a = asm_access(bytes);
  llvm::Type* rt = B.getIntNTy(static_cast<unsigned>(a.bits));
  std::vector<llvm::Type*> outs(static_cast<size_t>(a.count), rt);
  llvm::Type* ret = a.count == 1 ? rt : static_cast<llvm::Type*>(llvm::StructType::get(ctx, outs));
  std::string regs_s, cons;
  for (int i = 0; i < a.count; ++i) {
    regs_s += fmt::format("{}${}", i ? ", " : "", i);
    cons += a.bits == 16 ? "=h," : "=r,";
  }
  std::string text = fmt::format("ld.global{}{}.{} {}{}{}, [${}];", mods, vec_prefix(a.count), a.type,
                                 a.count > 1 ? "{" : "", regs_s, a.count > 1 ? "}" : "", a.count);
  auto* fty = llvm::FunctionType::get(ret, {ptr->getType()}, false);
  // Side effects keep it ordered with the kernel's stores, as a plain load is.
  Value* v = B.CreateCall(fty, llvm::InlineAsm::get(fty, text, cons + "l,~{memory}", /*hasSideEffects=*/true), {ptr});
  Value* bitsv;
  if (a.count == 1) {
    bitsv = v;
  } else {
    bitsv = llvm::PoisonValue::get(llvm::FixedVectorType::get(rt, static_cast<unsigned>(a.count)));
    for (int i = 0; i < a.count; ++i)
      bitsv = B.CreateInsertElement(bitsv, B.CreateExtractValue(v, {static_cast<unsigned>(i)}), static_cast<uint64_t>(i));
  }
  if (bytes == 1) bitsv = B.CreateTrunc(bitsv, B.getInt8Ty());
  return B.CreateBitCast(bitsv, t);
}

void Lowerer::hinted_store(Value* val, Value* ptr, const std::string& mods) {
  const int64_t bytes = static_cast<int64_t>(mod.getDataLayout().getTypeStoreSize(val->getType()));
  const AsmAccess a = asm_access(bytes);
  llvm::Type* rt = B.getIntNTy(static_cast<unsigned>(a.bits));
  Value* bitsv;
  if (bytes == 1) {
    bitsv = B.CreateZExt(B.CreateBitCast(val, B.getInt8Ty()), rt);
  } else if (a.count == 1) {
    bitsv = B.CreateBitCast(val, rt);
  } else {
    bitsv = B.CreateBitCast(val, llvm::FixedVectorType::get(rt, static_cast<unsigned>(a.count)));
  }
  std::vector<Value*> args = {ptr};
  std::vector<llvm::Type*> tys = {ptr->getType()};
  std::string regs_s, cons = "l";
  for (int i = 0; i < a.count; ++i) {
    args.push_back(a.count == 1 ? bitsv : B.CreateExtractElement(bitsv, static_cast<uint64_t>(i)));
    tys.push_back(rt);
    regs_s += fmt::format("{}${}", i ? ", " : "", i + 1);
    cons += a.bits == 16 ? ",h" : ",r";
  }
  std::string text = fmt::format("st.global{}{}.{} [$0], {}{}{};", mods, vec_prefix(a.count), a.type,
                                 a.count > 1 ? "{" : "", regs_s, a.count > 1 ? "}" : "");
  auto* fty = llvm::FunctionType::get(B.getVoidTy(), tys, false);
  B.CreateCall(fty, llvm::InlineAsm::get(fty, text, cons + ",~{memory}", /*hasSideEffects=*/true), args);
}

void Lowerer::lower_addptr(const ir::Op& op) {
  const ir::Value* p = op.operands.at(0);
  const ir::Value* off = op.operands.at(1);
  llvm::Type* pt = mem_ty(p->type.pointee);
  const bool sgn = is_signed_int(off->type.dtype);
  const int n = num_regs(op.result());
  std::vector<Value*> out;
  for (int i = 0; i < n; ++i) {
    Value* o = reg(off, i);
    o = sgn ? B.CreateSExt(o, B.getInt64Ty()) : B.CreateZExt(o, B.getInt64Ty());
    out.push_back(B.CreateGEP(pt, reg(p, i), o));
  }
  regs[op.result()] = out;
}

void Lowerer::lower_load(const ir::Op& op) {
  const ir::Value* p = op.operands.at(0);
  const ir::Value* mask = op.operands.size() > 1 ? op.operands[1] : nullptr;
  const ir::Value* other = op.operands.size() > 2 ? op.operands[2] : nullptr;
  const ir::Value* r = op.result();
  const DType d = r->type.dtype;
  llvm::Type* mt = mem_ty(d);
  const llvm::Align elem_align(static_cast<uint64_t>(byte_size(d)));
  const LinearLayout* l = layout_of(r);
  const int n = num_regs(r);
  const int vec = usable_vec(l, op.has_attr("vec") ? static_cast<int>(op.int_attr("vec")) : 1);
  // The layout pass proved the mask constant over each vector (mask_vec >= vec): then a group is
  // loaded whole or not at all, with no per-element fallback (fewer branches and registers).
  const bool uniform_mask = op.has_attr("mask_vec") && op.int_attr("mask_vec") >= vec;
  const std::string mods = hint_modifiers(op, user_smem_ > 0);
  const bool is_volatile = op.is_volatile();
  auto from_mem = [&](Value* v) { return d == DType::i1 ? B.CreateICmpNE(v, B.getInt8(0)) : v; };
  auto fill = [&](int i) -> Value* {
    if (other) {
      Value* o = reg(other, i);
      return d == DType::i1 ? B.CreateZExt(o, B.getInt8Ty()) : o;
    }
    return llvm::Constant::getNullValue(mt);
  };
  std::vector<Value*> out(static_cast<size_t>(n));
  for (int g = 0; g < n; g += vec) {
    llvm::Type* vt = llvm::FixedVectorType::get(mt, static_cast<unsigned>(vec));
    Value* base = reg(p, g);
    const llvm::Align va(static_cast<uint64_t>(byte_size(d) * vec));
    auto vector_load = [&]() -> Value* {
      if (!mods.empty()) return hinted_load(vec == 1 ? mt : vt, base, mods);
      if (vec == 1) return B.CreateAlignedLoad(mt, base, elem_align, is_volatile);
      return B.CreateAlignedLoad(vt, base, va, is_volatile);
    };
    Value* loaded;
    if (!mask) {
      loaded = vector_load();
    } else {
      // all lanes on -> one vector access; else per-element masked accesses
      Value* all = B.getTrue();
      std::vector<Value*> ms, fills;
      for (int k = 0; k < vec; ++k) {
        ms.push_back(reg(mask, g + k));
        fills.push_back(fill(g + k));
        all = B.CreateAnd(all, ms.back());
      }
      if (uniform_mask) all = ms[0];
      auto* fast = llvm::BasicBlock::Create(ctx, "ld.all", kernel);
      auto* slow = llvm::BasicBlock::Create(ctx, "ld.some", kernel);
      auto* join = llvm::BasicBlock::Create(ctx, "ld.join", kernel);
      B.CreateCondBr(all, fast, slow);
      B.SetInsertPoint(fast);
      Value* fv = vector_load();
      llvm::BasicBlock* fast_end = B.GetInsertBlock();
      B.CreateBr(join);
      B.SetInsertPoint(slow);
      Value* sv;
      if (uniform_mask) {  // the whole group is masked off: the fill values
        sv = fills[0];
        if (vec > 1) {
          sv = llvm::PoisonValue::get(vt);
          for (int k = 0; k < vec; ++k) sv = B.CreateInsertElement(sv, fills[k], static_cast<uint64_t>(k));
        }
      } else if (vec == 1) {
        auto* on = llvm::BasicBlock::Create(ctx, "ld.on", kernel);
        auto* off = llvm::BasicBlock::Create(ctx, "ld.off", kernel);
        B.CreateCondBr(ms[0], on, off);
        B.SetInsertPoint(on);
        Value* lv = mods.empty() ? B.CreateAlignedLoad(mt, base, elem_align, is_volatile) : hinted_load(mt, base, mods);
        B.CreateBr(off);
        B.SetInsertPoint(off);
        auto* phi = B.CreatePHI(mt, 2);
        phi->addIncoming(lv, on);
        phi->addIncoming(fills[0], slow);
        sv = phi;
      } else if (!mods.empty() || is_volatile) {  // hints: one hinted access per element that is on
        sv = llvm::PoisonValue::get(vt);
        for (int k = 0; k < vec; ++k) {
          auto* on = llvm::BasicBlock::Create(ctx, "ld.on", kernel);
          auto* off = llvm::BasicBlock::Create(ctx, "ld.off", kernel);
          llvm::BasicBlock* from = B.GetInsertBlock();
          B.CreateCondBr(ms[k], on, off);
          B.SetInsertPoint(on);
          Value* ek = B.CreateGEP(mt, base, B.getInt64(static_cast<uint64_t>(k)));
          Value* lv = mods.empty() ? B.CreateAlignedLoad(mt, ek, elem_align, true) : hinted_load(mt, ek, mods);
          B.CreateBr(off);
          B.SetInsertPoint(off);
          auto* phi = B.CreatePHI(mt, 2);
          phi->addIncoming(lv, on);
          phi->addIncoming(fills[k], from);
          sv = B.CreateInsertElement(sv, phi, static_cast<uint64_t>(k));
        }
      } else {
        Value* mv = llvm::PoisonValue::get(llvm::FixedVectorType::get(B.getInt1Ty(), static_cast<unsigned>(vec)));
        Value* pv = llvm::PoisonValue::get(vt);
        for (int k = 0; k < vec; ++k) {
          mv = B.CreateInsertElement(mv, ms[k], static_cast<uint64_t>(k));
          pv = B.CreateInsertElement(pv, fills[k], static_cast<uint64_t>(k));
        }
        sv = B.CreateMaskedLoad(vt, base, elem_align, mv, pv);
      }
      llvm::BasicBlock* slow_end = B.GetInsertBlock();
      B.CreateBr(join);
      B.SetInsertPoint(join);
      auto* phi = B.CreatePHI(fv->getType(), 2);
      phi->addIncoming(fv, fast_end);
      phi->addIncoming(sv, slow_end);
      loaded = phi;
    }
    for (int k = 0; k < vec; ++k)
      out[static_cast<size_t>(g + k)] = from_mem(vec == 1 ? loaded : B.CreateExtractElement(loaded, static_cast<uint64_t>(k)));
  }
  regs[r] = out;
}

void Lowerer::lower_store(const ir::Op& op) {
  const ir::Value* p = op.operands.at(0);
  const ir::Value* v = op.operands.at(1);
  const ir::Value* mask = op.operands.size() > 2 ? op.operands[2] : nullptr;
  const DType d = v->type.dtype;
  llvm::Type* mt = mem_ty(d);
  const llvm::Align elem_align(static_cast<uint64_t>(byte_size(d)));
  const LinearLayout* l = layout_of(p);
  const int n = num_regs(p);
  const int vec = usable_vec(l, op.has_attr("vec") ? static_cast<int>(op.int_attr("vec")) : 1);
  const bool uniform_mask = op.has_attr("mask_vec") && op.int_attr("mask_vec") >= vec;  // as in lower_load
  const std::string mods = hint_modifiers(op, user_smem_ > 0);
  const bool is_volatile = op.is_volatile();
  auto to_mem = [&](Value* x) { return d == DType::i1 ? B.CreateZExt(x, B.getInt8Ty()) : x; };
  Value* own = owner(l);
  for (int g = 0; g < n; g += vec) {
    if (l && duplicate_reg(*l, g)) continue;  // the duplicates of a vector group start at its first register
    Value* base = reg(p, g);
    std::vector<Value*> ms;
    Value* all = own;
    for (int k = 0; k < vec; ++k) {
      Value* m = mask ? B.CreateAnd(own, reg(mask, g + k)) : own;
      ms.push_back(m);
      all = B.CreateAnd(all, m);
    }
    if (uniform_mask) all = ms[0];
    llvm::Type* vt = llvm::FixedVectorType::get(mt, static_cast<unsigned>(vec));
    Value* val = nullptr;
    if (vec == 1) {
      val = to_mem(reg(v, g));
    } else {
      val = llvm::PoisonValue::get(vt);
      for (int k = 0; k < vec; ++k) val = B.CreateInsertElement(val, to_mem(reg(v, g + k)), static_cast<uint64_t>(k));
    }
    auto* fast = llvm::BasicBlock::Create(ctx, "st.all", kernel);
    auto* slow = llvm::BasicBlock::Create(ctx, "st.some", kernel);
    auto* join = llvm::BasicBlock::Create(ctx, "st.join", kernel);
    B.CreateCondBr(all, fast, slow);
    B.SetInsertPoint(fast);
    if (!mods.empty())
      hinted_store(val, base, mods);
    else
      B.CreateAlignedStore(val, base, vec == 1 ? elem_align : llvm::Align(static_cast<uint64_t>(byte_size(d) * vec)),
                           is_volatile);
    B.CreateBr(join);
    B.SetInsertPoint(slow);
    if (vec > 1 && !uniform_mask && (!mods.empty() || is_volatile)) {  // hints: one access per element that is on
      for (int k = 0; k < vec; ++k) {
        auto* on = llvm::BasicBlock::Create(ctx, "st.on", kernel);
        auto* off = llvm::BasicBlock::Create(ctx, "st.off", kernel);
        B.CreateCondBr(ms[k], on, off);
        B.SetInsertPoint(on);
        Value* ek = B.CreateGEP(mt, base, B.getInt64(static_cast<uint64_t>(k)));
        Value* vk = B.CreateExtractElement(val, static_cast<uint64_t>(k));
        if (mods.empty()) B.CreateAlignedStore(vk, ek, elem_align, true);
        else hinted_store(vk, ek, mods);
        B.CreateBr(off);
        B.SetInsertPoint(off);
      }
    } else if (vec > 1 && !uniform_mask) {
      Value* mv = llvm::PoisonValue::get(llvm::FixedVectorType::get(B.getInt1Ty(), static_cast<unsigned>(vec)));
      for (int k = 0; k < vec; ++k) mv = B.CreateInsertElement(mv, ms[k], static_cast<uint64_t>(k));
      B.CreateMaskedStore(val, base, elem_align, mv);
    }
    B.CreateBr(join);
    B.SetInsertPoint(join);
  }
}

std::vector<Value*> Lowerer::share_from_owners(const ir::Value* v, const std::vector<Value*>& vals) {
  // Owners write their results at the element's index; every holder reads it back.
  const LinearLayout* l = layout_of(v);
  const DType d = v->type.dtype;
  need_smem(v->type.numel() * byte_size(d));
  Value* own = owner(l);
  std::vector<Value*> idx;
  auto hw = l ? hw_coords(*l) : std::vector<Value*>{};
  for (size_t i = 0; i < vals.size(); ++i) idx.push_back(l ? linear(coords(*l, hw, static_cast<int>(i)), v->type.shape) : B.getInt32(0));
  auto* wr = llvm::BasicBlock::Create(ctx, "share.w", kernel);
  auto* done = llvm::BasicBlock::Create(ctx, "share.d", kernel);
  B.CreateCondBr(own, wr, done);
  B.SetInsertPoint(wr);
  for (size_t i = 0; i < vals.size(); ++i)
    if (!l || !duplicate_reg(*l, static_cast<int>(i))) smem_store(d, 0, idx[i], vals[i]);
  B.CreateBr(done);
  B.SetInsertPoint(done);
  barrier();
  std::vector<Value*> out;
  for (size_t i = 0; i < vals.size(); ++i) out.push_back(smem_load(d, 0, idx[i]));
  barrier();
  return out;
}

void Lowerer::lower_atomic(const ir::Op& op) {
  const ir::Value* p = op.operands.at(0);
  const ir::Value* r = op.result();
  const DType pd = p->type.pointee;
  const LinearLayout* l = layout_of(p);
  const int n = num_regs(r);
  const bool rmw = op.kind == ir::OpKind::AtomicRMW;
  const size_t mask_at = rmw ? 2 : 3;  // atomic_cas: the mask pad_shapes adds
  const ir::Value* mask = op.operands.size() > mask_at ? op.operands[mask_at] : nullptr;
  Value* own = owner(l);
  llvm::Type* et = elem_ty(pd);
  std::vector<Value*> out;
  for (int i = 0; i < n; ++i) {
    if (l && duplicate_reg(*l, i)) {
      out.push_back(llvm::Constant::getNullValue(et));
      continue;
    }
    Value* m = mask ? B.CreateAnd(own, reg(mask, i)) : own;
    auto* on = llvm::BasicBlock::Create(ctx, "atom.on", kernel);
    auto* join = llvm::BasicBlock::Create(ctx, "atom.join", kernel);
    llvm::BasicBlock* from = B.GetInsertBlock();
    B.CreateCondBr(m, on, join);
    B.SetInsertPoint(on);
    Value* old = rmw ? atomic_rmw(op.enum_attr<ir::AtomicOp>("op"), pd, reg(p, i), reg(op.operands[1], i), op)
                     : atomic_cas(pd, reg(p, i), reg(op.operands[1], i), reg(op.operands[2], i));
    llvm::BasicBlock* on_end = B.GetInsertBlock();
    B.CreateBr(join);
    B.SetInsertPoint(join);
    auto* phi = B.CreatePHI(et, 2);
    phi->addIncoming(old, on_end);
    phi->addIncoming(llvm::Constant::getNullValue(et), from);
    out.push_back(phi);
  }
  // Old values reach every holder of an element (masked-off elements read 0): through shared memory
  // where an element has holders besides its owner (replicated lanes, warps or registers, a scalar,
  // the producer warps before a warp-specialized loop), else each owner has them already. Unused
  // old values (an atomic statement) need neither.
  bool single_holder = l && !l->free_variable_mask(layout::kLane) && !l->free_variable_mask(layout::kWarp) &&
                       !(ws_loop_ && !consumers_only_);
  for (int i = 0; single_holder && i < n; ++i) single_holder = !duplicate_reg(*l, i);
  const auto u = uses_.find(r);
  regs[r] = single_holder || u == uses_.end() || u->second == 0 ? out : share_from_owners(r, out);
}


void Lowerer::lower_async_copy(const ir::Op& op) {
  // gpu::copy: each owner thread copies its registers' elements with cp.async (PTX ISA
  // 9.7.9.25.3), a group of `vec` consecutive registers (the layout pass's width for both pointer
  // tiles, at most the mask's uniform run) per instruction of 4, 8 or 16 bytes, src-size 0 where
  // masked (the destination is zero-filled). Elements that make less than 4 bytes a group are
  // loaded and stored at once instead (landed before the wait, which is allowed).
  const ir::Value* src = op.operands.at(0);
  const ir::Value* dst = op.operands.at(1);
  const ir::Value* mask = op.operands.size() > 2 ? op.operands[2] : nullptr;
  const ir::Value* active = op.operands.size() > 3 ? op.operands[3] : nullptr;  // pad_shapes: real lanes
  const DType d = src->type.pointee;
  const int eb = byte_size(d);
  const LinearLayout* l = layout_of(src);
  const int n = num_regs(src);
  int vec = usable_vec(l, op.has_attr("vec") ? static_cast<int>(op.int_attr("vec")) : 1);
  if (mask) vec = std::min(vec, std::max(1, static_cast<int>(op.has_attr("mask_vec") ? op.int_attr("mask_vec") : 1)));
  const int bytes = vec * eb;
  llvm::Type* gptr = llvm::PointerType::get(ctx, 1);
  llvm::Type* sptr = llvm::PointerType::get(ctx, 3);
  Value* own = owner(l);
  for (int g = 0; g < n; g += vec) {
    if (l && duplicate_reg(*l, g)) continue;
    Value* on = mask ? reg(mask, g) : B.getTrue();
    Value* go = active ? B.CreateAnd(own, reg(active, g)) : own;  // uniform over the vector (mask_vec)
    if (bytes == 4 || bytes == 8 || bytes == 16) {
      const llvm::Intrinsic::ID id = bytes == 16 ? llvm::Intrinsic::nvvm_cp_async_cg_shared_global_16_s
                                     : bytes == 8 ? llvm::Intrinsic::nvvm_cp_async_ca_shared_global_8_s
                                                  : llvm::Intrinsic::nvvm_cp_async_ca_shared_global_4_s;
      when(go, [&] {
        Value* size = B.CreateSelect(on, B.getInt32(static_cast<uint32_t>(bytes)), B.getInt32(0));
        B.CreateCall(llvm::Intrinsic::getDeclaration(&mod, id),
                     {B.CreateAddrSpaceCast(reg(dst, g), sptr), B.CreateAddrSpaceCast(reg(src, g), gptr), size});
      });
      continue;
    }
    llvm::Type* mt = mem_ty(d);
    const llvm::Align al(static_cast<uint64_t>(eb));
    for (int k = 0; k < vec; ++k) {
      Value* mk = mask ? reg(mask, g + k) : B.getTrue();
      when(active ? B.CreateAnd(own, reg(active, g + k)) : own, [&] {
        auto* ld = llvm::BasicBlock::Create(ctx, "copy.ld", kernel);
        auto* st = llvm::BasicBlock::Create(ctx, "copy.st", kernel);
        llvm::BasicBlock* from = B.GetInsertBlock();
        B.CreateCondBr(mk, ld, st);
        B.SetInsertPoint(ld);
        Value* v = B.CreateAlignedLoad(mt, B.CreateAddrSpaceCast(reg(src, g + k), gptr), al);
        B.CreateBr(st);
        B.SetInsertPoint(st);
        auto* phi = B.CreatePHI(mt, 2);
        phi->addIncoming(v, ld);
        phi->addIncoming(llvm::Constant::getNullValue(mt), from);
        B.CreateAlignedStore(phi, B.CreateAddrSpaceCast(reg(dst, g + k), sptr), al);
      });
    }
  }
}

}  // namespace tle::gpu::detail
