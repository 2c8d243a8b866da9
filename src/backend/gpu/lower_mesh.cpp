// src/backend/gpu/lower_mesh.cpp - signal and signal_wait (tle/mesh.hpp) as inline PTX.
//
// Both are one access of the whole program. signal: bar.sync (every thread's earlier accesses are
// done at CTA scope), then thread 0 makes them visible system-wide with fence.acq_rel.sys and
// updates the flag with a relaxed system-scope st / red: the release pattern of the PTX ISA's
// memory consistency model (section 8; NVSHMEM's signal ops do the same: __syncthreads,
// __threadfence_system, atomic). signal_wait: thread 0 spins on ld.acquire.sys (nanosleep between
// reads) until the flag compares, then bar.sync hands the acquire on to the program's other
// threads. A wait longer than the timeout operand (nanoseconds, %globaltimer) executes `trap`.
// Generic addressing throughout: the flags are symmetric memory mapped by cuMemMap, global memory
// of this or a peer device.
#include <fmt/format.h>
#include <llvm/IR/InlineAsm.h>

#include "backend/gpu/lower.hpp"

namespace tle::gpu::detail {

using llvm::Value;

void Lowerer::lower_signal(const ir::Op& op) {
  const bool wait = op.kind == ir::OpKind::SignalWait;
  llvm::Type* i64 = B.getInt64Ty();
  Value* flag = B.CreatePtrToInt(reg(op.operands[0], 0), i64);
  Value* value = reg(op.operands[1], 0);
  if (!wait) {
    barrier();
    const bool add = op.enum_attr<ir::SignalOp>("op") == ir::SignalOp::Add;
    const std::string text = add ? "fence.acq_rel.sys;\n\tred.relaxed.sys.add.u64 [$0], $1;"
                                 : "fence.acq_rel.sys;\n\tst.relaxed.sys.u64 [$0], $1;";
    auto* fty = llvm::FunctionType::get(B.getVoidTy(), {i64, i64}, false);
    when(B.CreateICmpEQ(tid, B.getInt32(0)), [&] {
      B.CreateCall(fty, llvm::InlineAsm::get(fty, text, "l,l,~{memory}", /*hasSideEffects=*/true), {flag, value});
    });
    return;
  }
  const bool eq = op.enum_attr<ir::WaitCmp>("cmp") == ir::WaitCmp::Eq;
  Value* timeout = reg(op.operands[2], 0);
  const std::string text = fmt::format(
      "{{\n\t.reg .pred sw_p;\n\t.reg .u64 sw_v, sw_t0, sw_t1;\n\tmov.u64 sw_t0, %globaltimer;\n"
      "sw_wait:\n\tld.acquire.sys.u64 sw_v, [$0];\n\tsetp.{}.u64 sw_p, sw_v, $1;\n\t@sw_p bra.uni sw_done;\n"
      "\tnanosleep.u32 64;\n\tmov.u64 sw_t1, %globaltimer;\n\tsub.u64 sw_t1, sw_t1, sw_t0;\n"
      "\tsetp.gt.s64 sw_p, sw_t1, $2;\n\t@sw_p trap;\n\tbra.uni sw_wait;\nsw_done:\n\t}}",
      eq ? "eq" : "ge");
  auto* fty = llvm::FunctionType::get(B.getVoidTy(), {i64, i64, i64}, false);
  when(B.CreateICmpEQ(tid, B.getInt32(0)), [&] {
    B.CreateCall(fty, llvm::InlineAsm::get(fty, text, "l,l,l,~{memory}", /*hasSideEffects=*/true),
                 {flag, value, timeout});
  });
  barrier();
}

}  // namespace tle::gpu::detail
