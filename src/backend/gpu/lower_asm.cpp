// src/backend/gpu/lower_asm.cpp - inline_asm: elementwise inline PTX.
//
// The layout pass gives every operand the result's layout (inline_asm is elementwise), so
// register i of each operand holds the same element as register i of the result. Registers are
// taken in groups of `pack`; each group is one llvm::InlineAsm call whose operands are packed as
// src/ir/inline_asm.hpp says (narrow elements share a register, element k in the low bits first).
// A last group shorter than `pack` is padded with the group's first element, and the padding
// results are dropped. hasSideEffects is set for pure = 0; pure calls do not access memory, so
// LLVM may merge or delete them too.
#include <fmt/format.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/Support/Error.h>

#include "backend/gpu/lower.hpp"
#include "ir/inline_asm.hpp"

namespace tle::gpu::detail {

using llvm::Value;

namespace {

/// How one value crosses the asm boundary.
struct Slot {
  DType d;
  ir::AsmValueRegs regs;
  char letter;
  llvm::Type* reg_ty;  // type of one asm register
};

}  // namespace

void Lowerer::lower_inline_asm(const ir::Op& op) {
  const ir::Value* r = op.result();
  const int pack = static_cast<int>(op.int_attr("pack"));
  const bool pure = op.int_attr("pure") != 0;
  const std::string& text = op.str_attr("asm");
  const std::string& cstr = op.str_attr("constraints");
  std::vector<DType> ds;
  for (auto* o : op.operands) ds.push_back(o->type.dtype);
  if (std::string why = ir::check_inline_asm(text, cstr, r->type.dtype, ds, pack); !why.empty()) fail(op, why);

  // Slots: the result, then the operands; constraints in the same order.
  auto cs = ir::parse_asm_constraints(cstr);
  std::vector<Slot> slots;
  size_t k = 0;
  auto add_slot = [&](DType d) {
    Slot s{d, ir::asm_value_regs(d, pack), cs.at(k).letter, nullptr};
    switch (s.letter) {
      case 'f': s.reg_ty = B.getFloatTy(); break;
      case 'd': s.reg_ty = B.getDoubleTy(); break;
      default: s.reg_ty = B.getIntNTy(static_cast<unsigned>(s.regs.reg_bits)); break;
    }
    k += static_cast<size_t>(s.regs.regs);
    slots.push_back(s);
  };
  add_slot(r->type.dtype);
  for (DType d : ds) add_slot(d);

  const int nres = slots[0].regs.regs;
  std::vector<llvm::Type*> params;
  for (size_t i = 1; i < slots.size(); ++i)
    for (int j = 0; j < slots[i].regs.regs; ++j) params.push_back(slots[i].reg_ty);
  llvm::Type* ret = slots[0].reg_ty;
  if (nres > 1) ret = llvm::StructType::get(ctx, std::vector<llvm::Type*>(static_cast<size_t>(nres), slots[0].reg_ty));
  auto* fty = llvm::FunctionType::get(ret, params, false);
  const std::string llvm_cstr = ir::normalized_asm_constraints(cstr);
  if (llvm::Error e = llvm::InlineAsm::verify(fty, llvm_cstr))
    fail(op, fmt::format("LLVM rejects the constraints \"{}\": {}", llvm_cstr, llvm::toString(std::move(e))));
  auto* ia = llvm::InlineAsm::get(fty, text, llvm_cstr, /*hasSideEffects=*/!pure);
  const bool clobbers = cs.size() > k;

  // Element e of a group -> register (value of elem_ty) and back.
  auto to_reg = [&](const Slot& s, const std::vector<Value*>& elems, int reg) -> Value* {
    const int epr = s.regs.elems_per_reg;
    if (epr == 1) {
      Value* v = elems[static_cast<size_t>(reg)];
      return v->getType() == s.reg_ty ? v : B.CreateBitCast(v, s.reg_ty);
    }
    const int w = bit_width(s.d);
    Value* acc = llvm::ConstantInt::get(s.reg_ty, 0);
    for (int e = 0; e < epr; ++e) {
      Value* bits = B.CreateZExt(elems[static_cast<size_t>(reg * epr + e)], s.reg_ty);
      if (e) bits = B.CreateShl(bits, static_cast<uint64_t>(e * w));
      acc = B.CreateOr(acc, bits);
    }
    return acc;
  };
  auto from_reg = [&](const Slot& s, Value* v, int e) -> Value* {
    const int epr = s.regs.elems_per_reg;
    llvm::Type* et = elem_ty(s.d);
    if (epr == 1) return v->getType() == et ? v : B.CreateBitCast(v, et);
    const int w = bit_width(s.d);
    Value* sh = (e % epr) ? B.CreateLShr(v, static_cast<uint64_t>((e % epr) * w)) : v;
    return B.CreateTrunc(sh, et);
  };

  const int n = num_regs(r);
  for (auto* o : op.operands)
    if (num_regs(o) != n && num_regs(o) != 1) fail(op, "operand and result registers differ (layout invariant broken)");
  std::vector<Value*> out;
  for (int g = 0; g < n; g += pack) {
    std::vector<Value*> args;
    for (size_t i = 1; i < slots.size(); ++i) {
      std::vector<Value*> elems;
      for (int e = 0; e < pack; ++e) elems.push_back(reg(op.operands[i - 1], g + e < n ? g + e : g));
      for (int j = 0; j < slots[i].regs.regs; ++j) args.push_back(to_reg(slots[i], elems, j));
    }
    llvm::CallInst* call = B.CreateCall(fty, ia, args);
    if (pure && !clobbers) call->setDoesNotAccessMemory();
    call->setDoesNotThrow();
    for (int e = 0; e < pack && g + e < n; ++e) {
      int reg_idx = e / slots[0].regs.elems_per_reg;
      Value* rv = nres > 1 ? B.CreateExtractValue(call, {static_cast<unsigned>(reg_idx)}) : call;
      out.push_back(from_reg(slots[0], rv, e));
    }
  }
  regs[r] = out;
}

}  // namespace tle::gpu::detail
