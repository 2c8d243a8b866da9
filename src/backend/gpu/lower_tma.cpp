// src/backend/gpu/lower_tma.cpp - tensor-descriptor loads and stores on sm_90a through the
// tensor memory accelerator (docs/ir.md, "Tensor descriptors"; PTX ISA 9.7.9.25
// cp.async.bulk.tensor, 9.7.13.15 mbarrier).
//
// The descriptor's tensor map is a 128-byte kernel parameter (byval, 64-byte aligned, marked
// grid_constant so that its generic address, cvta.param, reaches the instruction instead of a
// local copy). The block is staged in shared memory row-major (the box layout TMA writes and
// reads: innermost dimension contiguous, no swizzle), 128-byte aligned, after an 8-byte mbarrier.
//
// desc_load:  all threads: fence.proxy.async (earlier generic accesses, of the buffer and of
//             global memory, are ordered before the async proxy's), barrier; thread 0: mbarrier.init (count 1),
//             fence.mbarrier_init; barrier; thread 0: mbarrier.arrive.expect_tx (the block's
//             bytes) and cp.async.bulk.tensor.Nd.shared::cluster.global.mbarrier::complete_tx::bytes;
//             all threads: mbarrier.try_wait.parity 0 loop, then read their registers from the
//             buffer (unstage); barrier; thread 0: mbarrier.inval.
//             Out-of-bound elements arrive as zeros (the tensor map's OOB fill is NONE).
// desc_store: barrier; all threads write their registers to the buffer (stage);
//             fence.proxy.async.shared::cta; barrier; thread 0: cp.async.bulk.tensor.Nd.global.
//             shared::cta.bulk_group, commit_group, wait_group 0, fence.proxy.async; barrier.
//             TMA does not write out-of-bound elements.
// Coordinates are the offsets, innermost dimension first (TMA's order).
#include <fmt/format.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

#include "backend/gpu/lower.hpp"
#include "passes/pointer_origin.hpp"

namespace tle::gpu::detail {

using llvm::Value;

namespace {
struct DescOperands {
  int64_t rank = 0;
  const ir::Value* block = nullptr;  // the loaded result or the stored value
};

DescOperands desc_operands(const ir::Op& op) {
  DescOperands d;
  d.rank = op.int_attr("rank");
  d.block = op.kind == ir::OpKind::DescStore ? op.operands.at(2 + 3 * d.rank) : op.result();
  return d;
}
}  // namespace

std::string Lowerer::tma_coords(const ir::Op& op, std::vector<Value*>& args, int first) {
  const int64_t r = op.int_attr("rank");
  std::string s = "{";
  for (int64_t i = 0; i < r; ++i) {
    const int64_t d = r - 1 - i;  // innermost first
    args.push_back(reg(op.operands.at(2 + 2 * r + d), 0));
    s += fmt::format("{}${}", i ? ", " : "", first + i);
  }
  return s + "}";
}

void Lowerer::tma_load_box(Value* dst, Value* map, const std::vector<Value*>& coords, Value* mbar) {
  std::vector<Value*> args = {dst, map, mbar};
  std::string cons = "r,l,r", list;
  for (size_t i = 0; i < coords.size(); ++i) {
    args.push_back(coords[i]);
    cons += ",r";
    list += fmt::format("{}${}", i ? ", " : "", 3 + i);
  }
  std::vector<llvm::Type*> tys;
  for (Value* a : args) tys.push_back(a->getType());
  auto* fty = llvm::FunctionType::get(B.getVoidTy(), tys, false);
  const std::string text = fmt::format(
      "cp.async.bulk.tensor.{}d.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1, {{{}}}], [$2];",
      coords.size(), list);
  llvm::CallInst* c = B.CreateCall(fty, llvm::InlineAsm::get(fty, text, cons + ",~{memory}", true), args);
  c->addFnAttr(llvm::Attribute::Convergent);
}

void Lowerer::lower_desc_tma(const ir::Op& op) {
  if (op.has_attr("wgmma"))  // its tensor map is swizzled for the wgmma buffers of a pipelined loop
    throw InternalError("gpu backend: a desc_load marked for pipelining was not lowered in its pipelined loop");
  const DescOperands d = desc_operands(op);
  const ir::Value* blk = d.block;
  const DType dt = blk->type.dtype;
  const int64_t bytes = blk->type.numel() * byte_size(dt);
  const bool store = op.kind == ir::OpKind::DescStore;
  if (!layout_of(blk)) fail(op, "a tile has no layout (the GPU layout pass did not run)");
  // Buffer: the mbarrier, then the block at a 128-byte aligned offset (cp.async.bulk.tensor).
  const int64_t mbar_rel = ((smem_base_ + 127) / 128) * 128 - smem_base_;
  const int64_t tile_rel = mbar_rel + 128;
  need_smem(tile_rel + bytes);
  Value* mbar = smem_addr32(i32c(smem_base_ + mbar_rel));
  Value* tile = smem_addr32(i32c(smem_base_ + tile_rel));
  Value* map = B.CreatePtrToInt(reg(op.operands.at(0), 0), B.getInt64Ty());
  auto asm_call = [&](const std::string& text, const std::string& cons, std::vector<Value*> args) {
    std::vector<llvm::Type*> tys;
    for (Value* a : args) tys.push_back(a->getType());
    auto* fty = llvm::FunctionType::get(B.getVoidTy(), tys, false);
    llvm::CallInst* c = B.CreateCall(fty, llvm::InlineAsm::get(fty, text, cons, /*hasSideEffects=*/true), args);
    c->addFnAttr(llvm::Attribute::Convergent);
  };
  const int64_t r = d.rank;
  if (!store) {
    // Generic-proxy accesses before this point (of the buffer, and of global memory the block
    // may cover: earlier stores of this kernel) are ordered before the async proxy's.
    asm_stmt("fence.proxy.async;");
    barrier();
    when(B.CreateICmpEQ(tid, i32c(0)), [&] {
      mbarrier_init(mbar, 1);
      asm_stmt("fence.mbarrier_init.release.cluster;");
    });
    barrier();
    when(B.CreateICmpEQ(tid, i32c(0)), [&] {
      asm_stmt(fmt::format("mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], {};", bytes), {mbar});
      std::vector<Value*> coords;
      for (int64_t i = 0; i < r; ++i) coords.push_back(reg(op.operands.at(2 + 2 * r + (r - 1 - i)), 0));
      tma_load_box(tile, map, coords, mbar);
    });
    mbarrier_wait(mbar, i32c(0));
    regs[op.result()] = unstage(layout_of(blk), blk->type.shape, dt, tile_rel);
    barrier();
    when(B.CreateICmpEQ(tid, i32c(0)), [&] { asm_stmt("mbarrier.inval.shared::cta.b64 [$0];", {mbar}); });
    return;
  }
  barrier();
  stage(blk, tile_rel);
  fence_proxy_async();
  barrier();
  when(B.CreateICmpEQ(tid, i32c(0)), [&] {
    std::vector<Value*> args = {map, tile};
    std::string coords = tma_coords(op, args, 2);
    std::string cons = "l,r";
    for (int64_t i = 0; i < r; ++i) cons += ",r";
    asm_call(fmt::format("cp.async.bulk.tensor.{}d.global.shared::cta.bulk_group [$0, {}], [$1];", r, coords),
             cons + ",~{memory}", args);
    asm_stmt("cp.async.bulk.commit_group;");
    asm_stmt("cp.async.bulk.wait_group 0;");
    asm_stmt("fence.proxy.async;");  // the bulk store before later generic accesses (then the barrier)
  });
  barrier();
}


int Lowerer::arriving_warps(const ir::Op& init) const {
  const ir::Op* alloc = init.operands[0]->def;
  const ir::Op* first = nullptr;
  int warps = launch_warps();
  ir::walk(fn_ir.entry(), [&](const ir::Op& op) {
    if (op.kind != ir::OpKind::MBarrierArrive) return;
    const passes::PointerOrigin o = passes::pointer_origin(op.operands[0]);
    if (!o.allocs.count(alloc)) return;
    const int w = ir::role_warps(op) ? ir::role_warps(op) : launch_warps();
    if (first && w != warps)
      throw UserError(op.loc, fmt::format("this arrive on the mbarriers allocated at {}:{} runs on {} warps, the one "
                                          "at {}:{} on {}; an mbarrier counts the arrivals of every warp, so the "
                                          "roles arriving on one array must have the same number of warps: allocate "
                                          "one array per arriving role",
                                          init.loc.file, init.loc.line, w, first->loc.file, first->loc.line, warps));
    first = first ? first : &op;
    warps = w;
  });
  return warps;
}

void Lowerer::lower_mbarrier(const ir::Op& op) {
  using K = ir::OpKind;
  // The 32-bit shared-memory address of a generic pointer into the program's buffers.
  auto shared32 = [&](const ir::Value* p) {
    return B.CreatePtrToInt(B.CreateAddrSpaceCast(reg(p, 0), llvm::PointerType::get(ctx, 3)), B.getInt32Ty());
  };
  Value* first = B.CreateICmpEQ(tid, i32c(0));
  switch (op.kind) {
    case K::MBarrierInit: {
      Value* base = shared32(op.operands[0]);
      const int64_t n = op.int_attr("n");
      // Every warp that runs an arrive statement arrives once (below): those of the program, or of
      // the warp_specialize role that arrives on these mbarriers.
      const int warps = arriving_warps(op);
      const int64_t count = op.int_attr("count") * warps;
      if (count >= (int64_t(1) << 20))
        throw UserError(op.loc, fmt::format("gpu::alloc_mbarriers: {} arrivals per phase of {} warps each make {} "
                                            "mbarrier arrivals, more than the 2^20 - 1 an mbarrier counts",
                                            op.int_attr("count"), warps, count));
      when(first, [&] {
        for (int64_t i = 0; i < n; ++i) mbarrier_init(B.CreateAdd(base, i32c(8 * i)), static_cast<int>(count));
      });
      if (wgmma) asm_stmt("fence.mbarrier_init.release.cluster;");
      barrier();
      return;
    }
    case K::MBarrierArrive: {
      Value* bar = shared32(op.operands[0]);
      // (generic writes of buffers wgmma reads in place: this thread's, before the async proxy's reads)
      if (fence_arrives_) fence_proxy_async();
      const int64_t tx = op.int_attr("tx");
      if (tx != 0 && !wgmma)
        throw UserError(op.loc, "gpu::arrive_expect_tx: transaction counts need an sm_90 mbarrier (an sm_90a target)");
      // One arrival per warp, by its lane 0 after the warp's barrier (bar.warp.sync orders the
      // lanes' earlier accesses before lane 0's arrive, whose release covers them); thread 0
      // announces the bytes with its arrival.
      B.CreateCall(llvm::Intrinsic::getDeclaration(&mod, llvm::Intrinsic::nvvm_bar_warp_sync), {i32c(-1)});
      auto* with_tx = llvm::BasicBlock::Create(ctx, "arrive.tx", kernel);
      auto* plain = llvm::BasicBlock::Create(ctx, "arrive.plain", kernel);
      auto* done = llvm::BasicBlock::Create(ctx, "arrive.done", kernel);
      Value* lane0 = B.CreateICmpEQ(B.CreateAnd(tid, i32c(31)), i32c(0));
      B.CreateCondBr(B.CreateAnd(first, B.getInt1(tx != 0)), with_tx, plain);
      B.SetInsertPoint(with_tx);
      asm_stmt(fmt::format("mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], {};", tx), {bar});
      B.CreateBr(done);
      B.SetInsertPoint(plain);
      when(lane0, [&] { mbarrier_arrive(bar); });
      B.CreateBr(done);
      B.SetInsertPoint(done);
      return;
    }
    case K::MBarrierWait:
      mbarrier_wait(shared32(op.operands[0]), B.CreateAnd(reg(op.operands[1], 0), i32c(1)));
      return;
    case K::TmaCopy: {
      const int64_t r = op.int_attr("rank");
      const ir::Value* map = op.operands[0];
      const int64_t sw = op.int_attr("swizzle");
      if (map->def || map->owner != &fn_ir.entry())
        fail(op, "the tensor map of a tma_copy is not a kernel parameter");
      const int arg = static_cast<int>(map->index);
      // (run_gpu_pipeline refused descriptors moved with two swizzles)
      if (sw > 0) tma_swizzled[arg] = static_cast<int>(sw / byte_size(op.operands[1]->type.pointee));
      Value* dst = shared32(op.operands[static_cast<size_t>(2 + 3 * r)]);
      Value* bar = shared32(op.operands[static_cast<size_t>(3 + 3 * r)]);
      std::vector<Value*> coords;
      for (int64_t i = 0; i < r; ++i) coords.push_back(reg(op.operands.at(static_cast<size_t>(2 + 2 * r + (r - 1 - i))), 0));
      Value* m = B.CreatePtrToInt(reg(map, 0), B.getInt64Ty());
      when(first, [&] { tma_load_box(dst, m, coords, bar); });
      return;
    }
    default: fail(op, "not an mbarrier op");
  }
}

}  // namespace tle::gpu::detail
