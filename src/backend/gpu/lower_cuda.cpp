// src/backend/gpu/lower_cuda.cpp - cuda_call: a CTA-wide call of a CUDA device function compiled
// by NVRTC and linked with the kernel (src/runtime/raw/cuda_compile.hpp; protocol: docs/raw.md).
//
// Shared memory: every tile operand gets a row-major, contiguous region (16-byte aligned) in the
// kernel's dynamic buffer, then an 8-byte slot for the return value. Sequence, every thread of
// the CTA: barrier (earlier users of the buffer are done) -> stage the tiles -> barrier -> call ->
// thread 0 stores the return value -> barrier -> in-out tiles and the return value are read back
// in their result layouts -> barrier (the buffer is free again). Scalars and pointers are passed
// by value; a tile as tle::TileRef<T> {T* data (generic address of its region), int rank,
// int shape[4], int strides[4]}, which LLVM passes as a 48-byte .param aggregate exactly like
// NVCC's ABI for the struct. The callee is declared convergent, so LLVM never moves the call
// into divergent code.
#include <fmt/format.h>

#include "backend/gpu/lower.hpp"
#include "ir/cuda_call.hpp"

namespace tle::gpu::detail {

using llvm::Value;

void Lowerer::lower_cuda_call(const ir::Op& op) {
  const auto& kinds = op.ints_attr("kinds");
  const bool has_ret = op.int_attr("ret") != 0;
  const std::string& name = op.str_attr("name");
  for (size_t i = 0; i < op.operands.size(); ++i)
    if (std::string why = ir::check_cuda_operand(op.operands[i]->type, kinds[i]); !why.empty())
      fail(op, fmt::format("operand {}: {}", i, why));

  auto align16 = [](int64_t x) { return (x + 15) / 16 * 16; };
  std::vector<int64_t> base(op.operands.size(), -1);
  int64_t end = 0;
  for (size_t i = 0; i < op.operands.size(); ++i) {
    if (kinds[i] == ir::kCudaValue) continue;
    const ir::Type& t = op.operands[i]->type;
    base[i] = align16(end);
    end = base[i] + smem_size(t.shape, t.dtype, /*padded=*/false);
  }
  const int64_t ret_off = align16(end);
  need_smem(has_ret ? ret_off + 8 : end);

  llvm::Type* i32 = B.getInt32Ty();
  llvm::Type* arr4 = llvm::ArrayType::get(i32, 4);
  llvm::Type* generic_ptr = llvm::PointerType::get(ctx, 0);
  llvm::StructType* tile_ref = llvm::StructType::get(ctx, {generic_ptr, i32, arr4, arr4});

  barrier();
  for (size_t i = 0; i < op.operands.size(); ++i)
    if (kinds[i] != ir::kCudaValue) stage(op.operands[i], base[i]);
  barrier();

  std::vector<llvm::Type*> params;
  std::vector<Value*> args;
  for (size_t i = 0; i < op.operands.size(); ++i) {
    const ir::Value* v = op.operands[i];
    if (kinds[i] == ir::kCudaValue) {
      Value* x = reg(v, 0);
      params.push_back(x->getType());
      args.push_back(x);
      continue;
    }
    const ir::Type& t = v->type;
    auto strides = smem_strides(t.shape, t.dtype, false);
    Value* ref = llvm::PoisonValue::get(tile_ref);
    Value* data = B.CreateAddrSpaceCast(smem_ptr(i32c(base[i])), generic_ptr);
    ref = B.CreateInsertValue(ref, data, {0});
    ref = B.CreateInsertValue(ref, i32c(t.rank()), {1});
    for (unsigned d = 0; d < 4; ++d) {
      const bool in_rank = d < static_cast<unsigned>(t.rank());
      ref = B.CreateInsertValue(ref, i32c(in_rank ? t.shape[d] : 1), {2, d});
      ref = B.CreateInsertValue(ref, i32c(in_rank ? strides[d] : 0), {3, d});
    }
    params.push_back(tile_ref);
    args.push_back(ref);
  }
  const ir::Value* ret = has_ret ? op.result(0) : nullptr;
  llvm::Type* ret_ty = ret ? elem_ty(ret->type.dtype) : B.getVoidTy();
  auto* fty = llvm::FunctionType::get(ret_ty, params, false);
  llvm::FunctionCallee callee = mod.getOrInsertFunction(name, fty);
  if (auto* fn = llvm::dyn_cast<llvm::Function>(callee.getCallee())) fn->addFnAttr(llvm::Attribute::Convergent);
  llvm::CallInst* call = B.CreateCall(fty, callee.getCallee(), args);
  call->setConvergent();

  if (ret) {  // thread 0's value, for every thread (a scalar is one value the whole CTA holds)
    llvm::BasicBlock* wr = llvm::BasicBlock::Create(ctx, "cuda.ret.w", kernel);
    llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "cuda.ret.d", kernel);
    B.CreateCondBr(owner(nullptr), wr, done);
    B.SetInsertPoint(wr);
    smem_store(ret->type.dtype, ret_off, B.getInt32(0), call);
    B.CreateBr(done);
    B.SetInsertPoint(done);
  }
  barrier();
  unsigned r = ret ? 1 : 0;
  if (ret) regs[ret] = {smem_load(ret->type.dtype, ret_off, B.getInt32(0))};
  for (size_t i = 0; i < op.operands.size(); ++i) {
    if (kinds[i] != ir::kCudaInOut) continue;
    const ir::Value* res = op.result(r++);
    const layout::LinearLayout* l = layout_of(res);
    if (!l) fail(op, "an in-out tile result has no layout (the GPU layout pass did not run)");
    regs[res] = unstage(l, res->type.shape, res->type.dtype, base[i]);
  }
  barrier();
}

}  // namespace tle::gpu::detail
