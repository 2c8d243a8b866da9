// src/backend/gpu/lower.cpp - GPU lowering driver: kernel entry, layout coordinates, shared
// memory, elementwise and shape ops, convert_layout, device loops and ifs (see lower.hpp).
#include "backend/gpu/lower.hpp"

#include <fmt/format.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/Intrinsics.h>

#include <algorithm>
#include <map>

#include "layout/ir_layout.hpp"

namespace tle::gpu::detail {

using layout::LinearLayout;
using llvm::Value;

Lowerer::Lowerer(const ir::Function& f, llvm::Module& m, int nw, int mr, bool wg, bool ws)
    : ScalarEmitter(m), fn_ir(f), num_warps(nw), maxnreg(mr), wgmma(wg), warp_specialize(ws) {}

void Lowerer::fail(const ir::Op& op, const std::string& msg) const {
  std::string where;
  if (op.loc.known()) where = fmt::format(" (traced at {}:{})", op.loc.file, op.loc.line);
  throw RuntimeError("tle::gpu::lower",
                     fmt::format("kernel '{}': op '{}': {}{}", fn_ir.name, ir::op_mnemonic(op.kind), msg, where));
}

// ---------------------------------------------------------------------------------------------
// target hooks

Value* Lowerer::call_libm(const char* f32name, const char* f64name, std::vector<Value*> args) {
  // libdevice names: __nv_ + the C math name (expf -> __nv_expf, exp -> __nv_exp).
  llvm::Type* t = args[0]->getType();
  std::string name = std::string("__nv_") + (t->isDoubleTy() ? f64name : f32name);
  std::vector<llvm::Type*> ps(args.size(), t);
  llvm::FunctionCallee callee = mod.getOrInsertFunction(name, llvm::FunctionType::get(t, ps, false));
  auto* call = B.CreateCall(callee, args);
  call->setDoesNotAccessMemory();
  return call;
}

// PTX ISA 9.7.3.11 (max) / 9.7.3.10 (min): .NaN propagates NaN (sm_80+); LLVM's NVPTX back end
// selects max.NaN.f32 for llvm.maximum.f32, whose LangRef semantics are tle's rule (docs/semantics.md
// E02: NaN propagates, -0 < +0), so the one instruction replaces the compare-and-select sequence.
// `E02 signed zeros in max/min` checks it on the device ([ops], TLE_TEST_BACKEND=gpu).
Value* Lowerer::float_max_min(bool is_max, Value* a, Value* b) {
  if (!a->getType()->isFloatTy()) return ScalarEmitter::float_max_min(is_max, a, b);
  return B.CreateBinaryIntrinsic(is_max ? llvm::Intrinsic::maximum : llvm::Intrinsic::minimum, a, b);
}

// cvt.rn.bf16.f32 (PTX ISA 9.7.9.21, sm_80+): round to nearest even; a NaN becomes the canonical
// NaN 0x7FFF (the CPU keeps the payload; both are NaN). Written as (pure) inline asm on 16-bit
// registers rather than fptrunc to LLVM's bfloat: with a bfloat value in the DAG, a tle bitcast of
// the bf16 bits to f16 (i16 -> i16 in tle's IR) folds into "f16 = bitcast bf16", which LLVM 19's
// NVPTX back end cannot select (it aborted the process; fuzzer seed 805, `--gpu-compile --portable`).
Value* Lowerer::f32_to_bf16(Value* f) {
  auto* fty = llvm::FunctionType::get(B.getInt16Ty(), {B.getFloatTy()}, false);
  return B.CreateCall(fty, llvm::InlineAsm::get(fty, kF32ToBf16Asm, "=h,f", /*hasSideEffects=*/false), {f});
}

// fp8 on sm_89+ (PTX ISA 9.7.9.21 cvt, PTX 7.8): `cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 d, a, b`
// rounds to nearest even and saturates to the max finite value (infinities included), packing a
// into the upper and b into the lower byte of a .b16; `cvt.rn.f16x2.{e4m3x2,e5m2x2} d, a` widens
// the two bytes of a .b16 into an f16x2 (low byte -> low half), exactly, and f16 -> f32 is exact.
// A NaN is made sign | 0x7F (fp8) or sign | 0x7FC00000 (f32) here, so that the bits equal the CPU
// backend's and the interpreter's (ScalarEmitter's integer code, which earlier targets use).
Value* Lowerer::f32_to_fp8(Value* f, DType d) {
  if (!fp8_cvt) return ScalarEmitter::f32_to_fp8(f, d);
  const std::string text = fmt::format("cvt.rn.satfinite.{}x2.f32 $0, $1, $1;", d == DType::f8e4m3 ? "e4m3" : "e5m2");
  auto* fty = llvm::FunctionType::get(B.getInt16Ty(), {B.getFloatTy()}, false);
  Value* pair = B.CreateCall(fty, llvm::InlineAsm::get(fty, text, "=h,f", /*hasSideEffects=*/false), {f});
  Value* r = B.CreateTrunc(pair, B.getInt8Ty());
  Value* sign = B.CreateTrunc(B.CreateLShr(B.CreateBitCast(f, B.getInt32Ty()), 24), B.getInt8Ty());
  Value* nan = B.CreateOr(B.CreateAnd(sign, B.getInt8(0x80)), B.getInt8(0x7F));
  return B.CreateSelect(B.CreateFCmpUNO(f, f), nan, r);
}

Value* Lowerer::fp8_to_f32(Value* b, DType d) {
  if (!fp8_cvt) return ScalarEmitter::fp8_to_f32(b, d);
  const std::string text = fmt::format("cvt.rn.f16x2.{}x2 $0, $1;", d == DType::f8e4m3 ? "e4m3" : "e5m2");
  auto* fty = llvm::FunctionType::get(B.getInt32Ty(), {B.getInt16Ty()}, false);
  Value* pair = B.CreateCall(fty, llvm::InlineAsm::get(fty, text, "=r,h", /*hasSideEffects=*/false),
                             {B.CreateZExt(b, B.getInt16Ty())});
  Value* h = B.CreateBitCast(B.CreateTrunc(pair, B.getInt16Ty()), B.getHalfTy());
  Value* x = B.CreateFPExt(h, B.getFloatTy());
  Value* sign = B.CreateShl(B.CreateZExt(B.CreateAnd(b, B.getInt8(0x80)), B.getInt32Ty()), 24);
  Value* nan = B.CreateBitCast(B.CreateOr(sign, B.getInt32(0x7FC00000)), B.getFloatTy());
  return B.CreateSelect(B.CreateFCmpUNO(h, h), nan, x);
}

Value* Lowerer::int64_to_bf16(Value* v, bool is_signed) {
  // Integer code: normalize |v|, keep 8 significant bits, round to nearest even with the rest.
  llvm::Type* i64 = B.getInt64Ty();
  Value* neg = is_signed ? B.CreateICmpSLT(v, B.getInt64(0)) : B.getFalse();
  Value* mag = is_signed ? B.CreateSelect(neg, B.CreateNeg(v), v) : v;  // |INT64_MIN| as u64 is fine
  Value* zero = B.CreateICmpEQ(mag, B.getInt64(0));
  llvm::Function* ctlz = llvm::Intrinsic::getDeclaration(&mod, llvm::Intrinsic::ctlz, {i64});
  Value* lz = B.CreateCall(ctlz, {mag, B.getTrue()});
  Value* m = B.CreateShl(mag, lz);                                   // top bit at 63
  Value* kept = B.CreateLShr(m, B.getInt64(56));                     // 8 bits incl. the leading one
  Value* rest = B.CreateAnd(m, B.getInt64((uint64_t(1) << 56) - 1));
  Value* half = B.getInt64(uint64_t(1) << 55);
  Value* up = B.CreateOr(B.CreateICmpUGT(rest, half),
                         B.CreateAnd(B.CreateICmpEQ(rest, half), B.CreateICmpNE(B.CreateAnd(kept, B.getInt64(1)), B.getInt64(0))));
  kept = B.CreateAdd(kept, B.CreateZExt(up, i64));
  Value* e = B.CreateSub(B.getInt64(63), lz);
  Value* carry = B.CreateICmpEQ(kept, B.getInt64(256));
  kept = B.CreateSelect(carry, B.getInt64(128), kept);
  e = B.CreateSelect(carry, B.CreateAdd(e, B.getInt64(1)), e);
  Value* bits = B.CreateOr(B.CreateShl(B.CreateAdd(e, B.getInt64(127)), B.getInt64(7)),
                           B.CreateAnd(kept, B.getInt64(0x7F)));
  bits = B.CreateOr(bits, B.CreateShl(B.CreateZExt(neg, i64), B.getInt64(15)));
  bits = B.CreateSelect(zero, B.getInt64(0), bits);
  return B.CreateTrunc(bits, B.getInt16Ty());
}

// ---------------------------------------------------------------------------------------------
// layouts and registers

const LinearLayout* Lowerer::layout_of(const ir::Value* v) { return v->type.layout ? &v->type.layout->ll : nullptr; }

int Lowerer::num_regs(const ir::Value* v) const {
  const LinearLayout* l = layout_of(v);
  return l ? l->num_regs() : 1;
}

std::vector<Value*>& Lowerer::get(const ir::Value* v) {
  auto it = regs.find(v);
  if (it == regs.end()) throw InternalError(fmt::format("gpu backend: kernel '{}' uses a {} value before its definition",
                                                        fn_ir.name, v->type.str()));
  for (const PendingWgmma& p : pending_wgmma_)
    if (p.result == v)
      throw InternalError(fmt::format("gpu backend: kernel '{}' reads a wgmma dot's result before waiting for it",
                                      fn_ir.name));
  return it->second;
}

Value* Lowerer::reg(const ir::Value* v, int i) {
  auto& r = get(v);
  return r.size() == 1 ? r[0] : r.at(static_cast<size_t>(i));
}

std::vector<int32_t> Lowerer::reg_coords(const LinearLayout& l, int r) {
  std::vector<int32_t> in(static_cast<size_t>(l.num_in_dims()), 0);
  auto names = l.in_dim_names();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == layout::kReg) in[i] = r;
  return l.apply(in);
}

std::vector<Value*> Lowerer::hw_coords(const LinearLayout& l) {
  std::vector<Value*> c(static_cast<size_t>(l.num_out_dims()), B.getInt32(0));
  auto add = [&](const std::string& in, Value* idx) {
    if (!l.has_in_dim(in)) return;
    const auto& bases = l.bases(in);
    for (size_t b = 0; b < bases.size(); ++b) {
      Value* bit = B.CreateAnd(B.CreateLShr(idx, static_cast<uint64_t>(b)), 1);
      for (size_t d = 0; d < c.size(); ++d)
        if (bases[b][d]) c[d] = B.CreateXor(c[d], B.CreateMul(bit, i32c(bases[b][d])));
    }
  };
  add(layout::kLane, lane);
  add(layout::kWarp, warp);
  return c;
}

std::vector<Value*> Lowerer::coords(const LinearLayout& l, const std::vector<Value*>& hw, int r) {
  auto rc = reg_coords(l, r);
  std::vector<Value*> c(hw.size());
  for (size_t d = 0; d < hw.size(); ++d) c[d] = rc[d] ? B.CreateXor(hw[d], i32c(rc[d])) : hw[d];
  return c;
}

Value* Lowerer::linear(const std::vector<Value*>& c, const ir::Shape& shape) {
  Value* idx = B.getInt32(0);
  int64_t stride = 1;
  for (size_t d = c.size(); d-- > 0;) {
    idx = B.CreateAdd(idx, B.CreateMul(c[d], i32c(stride)));
    stride *= shape[d];
  }
  return idx;
}

// A (register, lane, warp) holds the canonical copy of its element when none of its *free* bits
// is set (LinearLayout::free_variable_masks: bits whose basis is a combination of earlier
// bases): those inputs map one to one onto the tile. For named layouts the free bits are exactly
// the zero bases; a linear layout in general can also repeat a non-zero basis, whose copies a
// zero-basis test would take for distinct elements.
bool Lowerer::duplicate_reg(const LinearLayout& l, int r) {
  return (static_cast<uint32_t>(r) & l.free_variable_mask(layout::kReg)) != 0;
}

Value* Lowerer::owner(const LinearLayout* l) {
  if (!l) return B.CreateICmpEQ(tid, B.getInt32(0));
  Value* ok = B.getTrue();
  // Before a warp-specialized loop the producer warpgroup (warps num_warps .. +3) runs the same
  // code, its warp index aliasing the compute warps' in every layout: it holds copies, never the
  // owner's (an atomic or a histogram before the loop counted twice: fuzzer seed 1596).
  if (ws_loop_ && !consumers_only_) ok = B.CreateICmpULT(tid, i32c(32 * num_warps));
  if (uint32_t m = l->free_variable_mask(layout::kLane))
    ok = B.CreateAnd(ok, B.CreateICmpEQ(B.CreateAnd(lane, m), B.getInt32(0)));
  if (uint32_t m = l->free_variable_mask(layout::kWarp))
    ok = B.CreateAnd(ok, B.CreateICmpEQ(B.CreateAnd(warp, m), B.getInt32(0)));
  return ok;
}

// ---------------------------------------------------------------------------------------------
// shared memory

Value* Lowerer::smem_ptr(Value* off) {
  if (smem_base_) off = B.CreateAdd(off, i32c(smem_base_));
  return B.CreateInBoundsGEP(B.getInt8Ty(), smem, {off});
}

Value* Lowerer::smem_abs_ptr(Value* off) { return B.CreateInBoundsGEP(B.getInt8Ty(), smem, {off}); }

void Lowerer::barrier() {
  ++barriers;
  // generic writes to shared and global memory before the barrier are seen by TMA copies after it
  if (proxy_fence_barriers_) asm_stmt("fence.proxy.async;");
  if (role_barrier_)  // a warp_specialize role: its warps only
    B.CreateCall(llvm::Intrinsic::getDeclaration(&mod, llvm::Intrinsic::nvvm_barrier_sync_cnt),
                 {i32c(role_barrier_), i32c(32 * num_warps)});
  else if (consumers_only_)  // the producer warps of a warp-specialized loop have exited
    B.CreateCall(llvm::Intrinsic::getDeclaration(&mod, llvm::Intrinsic::nvvm_barrier_sync_cnt),
                 {i32c(1), i32c(32 * num_warps)});
  else
    B.CreateCall(llvm::Intrinsic::getDeclaration(&mod, llvm::Intrinsic::nvvm_barrier0));
}

void Lowerer::smem_store(DType d, int64_t base, Value* idx, Value* v) {
  llvm::Type* mt = mem_ty(d);
  if (d == DType::i1) v = B.CreateZExt(v, mt);
  int64_t sz = byte_size(d);
  Value* off = B.CreateAdd(i32c(base), B.CreateMul(idx, i32c(sz)));
  B.CreateAlignedStore(v, smem_ptr(off), llvm::Align(static_cast<uint64_t>(sz)));
}

Value* Lowerer::smem_load(DType d, int64_t base, Value* idx) {
  llvm::Type* mt = mem_ty(d);
  int64_t sz = byte_size(d);
  Value* off = B.CreateAdd(i32c(base), B.CreateMul(idx, i32c(sz)));
  Value* v = B.CreateAlignedLoad(mt, smem_ptr(off), llvm::Align(static_cast<uint64_t>(sz)));
  return d == DType::i1 ? B.CreateTrunc(v, B.getInt1Ty()) : v;
}

std::vector<int64_t> Lowerer::smem_strides(const ir::Shape& shape, DType d, bool padded, int fast) {
  // Row-major over the dims in order, except that `fast` (default: the last dim) is innermost.
  const int n = static_cast<int>(shape.size());
  if (fast < 0 || fast >= n) fast = n - 1;
  std::vector<int> order;  // outermost first
  for (int i = 0; i < n; ++i)
    if (i != fast) order.push_back(i);
  if (n) order.push_back(fast);
  std::vector<int64_t> st(shape.size(), 1);
  const int64_t sz = byte_size(d);
  int64_t stride = 1;
  for (int k = n; k-- > 0;) {
    const int dim = order[static_cast<size_t>(k)];
    st[static_cast<size_t>(dim)] = stride;
    stride *= shape[static_cast<size_t>(dim)];
    // Pad each row by 16 bytes once it spans 64 bytes or more, so that a walk across rows (a
    // transposing conversion, an mma fragment read) spreads over the shared-memory banks.
    if (padded && k == n - 1 && shape[static_cast<size_t>(dim)] * sz >= 64) stride += 16 / sz;
  }
  return st;
}

int64_t Lowerer::smem_size(const ir::Shape& shape, DType d, bool padded, int fast) {
  if (shape.empty()) return byte_size(d);
  auto st = smem_strides(shape, d, padded, fast);
  int64_t end = 1;  // one past the largest index
  for (size_t i = 0; i < shape.size(); ++i) end += (shape[i] - 1) * st[i];
  return end * byte_size(d);
}

int Lowerer::smem_run(const LinearLayout& l, const ir::Shape& shape, DType d, int fast) {
  // Registers 0..run-1 hold consecutive elements of the fast dim, and the thread-dependent part
  // of that dim's coordinate is a multiple of run (so a run starts aligned).
  if (shape.empty() || d == DType::i1) return 1;
  const size_t last = fast >= 0 && fast < static_cast<int>(shape.size()) ? static_cast<size_t>(fast) : shape.size() - 1;
  const int max_run = static_cast<int>(16 / byte_size(d));
  int run = 1 << std::min(layout::consecutive_reg_bits(l, static_cast<int>(last)), layout::log2_exact(max_run));
  for (const char* hw : {layout::kLane, layout::kWarp})
    if (l.has_in_dim(hw))
      for (const auto& basis : l.bases(hw))
        while (run > 1 && basis[last] % run != 0) run /= 2;
  return run;
}

void Lowerer::stage(const ir::Value* v, int64_t base, bool padded, int fast) {
  const LinearLayout* l = layout_of(v);
  DType d = v->type.dtype;
  need_smem(base + smem_size(v->type.shape, d, padded, fast));
  if (!l) {  // a scalar: thread 0 writes it
    llvm::BasicBlock* wr = llvm::BasicBlock::Create(ctx, "stage.w", kernel);
    llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "stage.d", kernel);
    B.CreateCondBr(owner(nullptr), wr, done);
    B.SetInsertPoint(wr);
    smem_store(d, base, B.getInt32(0), reg(v, 0));
    B.CreateBr(done);
    B.SetInsertPoint(done);
    return;
  }
  auto hw = hw_coords(*l);
  auto st = smem_strides(v->type.shape, d, padded, fast);
  const int run = smem_run(*l, v->type.shape, d, fast);
  for (int r = 0; r < l->num_regs(); r += run) {
    if (duplicate_reg(*l, r)) continue;
    Value* idx = smem_index(coords(*l, hw, r), st);
    if (run == 1) {
      smem_store(d, base, idx, reg(v, r));
      continue;
    }
    llvm::Type* vt = llvm::FixedVectorType::get(mem_ty(d), static_cast<unsigned>(run));
    Value* vec = llvm::PoisonValue::get(vt);
    for (int k = 0; k < run; ++k) vec = B.CreateInsertElement(vec, reg(v, r + k), static_cast<uint64_t>(k));
    Value* off = B.CreateAdd(i32c(base), B.CreateMul(idx, i32c(byte_size(d))));
    B.CreateAlignedStore(vec, smem_ptr(off), llvm::Align(static_cast<uint64_t>(run * byte_size(d))));
  }
}

std::vector<Value*> Lowerer::unstage(const LinearLayout* l, const ir::Shape& shape, DType d, int64_t base,
                                     bool padded, int fast) {
  if (!l) return {smem_load(d, base, B.getInt32(0))};
  auto hw = hw_coords(*l);
  auto st = smem_strides(shape, d, padded, fast);
  const int run = smem_run(*l, shape, d, fast);
  std::vector<Value*> out;
  for (int r = 0; r < l->num_regs(); r += run) {
    Value* idx = smem_index(coords(*l, hw, r), st);
    if (run == 1) {
      out.push_back(smem_load(d, base, idx));
      continue;
    }
    llvm::Type* vt = llvm::FixedVectorType::get(mem_ty(d), static_cast<unsigned>(run));
    Value* off = B.CreateAdd(i32c(base), B.CreateMul(idx, i32c(byte_size(d))));
    Value* vec = B.CreateAlignedLoad(vt, smem_ptr(off), llvm::Align(static_cast<uint64_t>(run * byte_size(d))));
    for (int k = 0; k < run; ++k) out.push_back(B.CreateExtractElement(vec, static_cast<uint64_t>(k)));
  }
  return out;
}

Value* Lowerer::smem_index(const std::vector<Value*>& c, const std::vector<int64_t>& strides) {
  Value* idx = B.getInt32(0);
  for (size_t d = 0; d < c.size(); ++d) idx = B.CreateAdd(idx, B.CreateMul(c[d], i32c(strides[d])));
  return idx;
}

Value* Lowerer::shuffle_xor(Value* v, int mask) {
  llvm::Function* shfl = llvm::Intrinsic::getDeclaration(&mod, llvm::Intrinsic::nvvm_shfl_sync_bfly_i32);
  auto one = [&](Value* x32) { return B.CreateCall(shfl, {B.getInt32(0xFFFFFFFFu), x32, B.getInt32(static_cast<uint32_t>(mask)), B.getInt32(0x1F)}); };
  llvm::Type* t = v->getType();
  unsigned bits = t->isPointerTy() ? 64 : t->getPrimitiveSizeInBits().getFixedValue();
  llvm::Type* it = B.getIntNTy(bits);
  Value* x = t->isPointerTy() ? B.CreatePtrToInt(v, it) : (t->isIntegerTy() ? v : B.CreateBitCast(v, it));
  Value* r;
  if (bits <= 32) {
    r = B.CreateTrunc(one(B.CreateZExt(x, B.getInt32Ty())), it);
  } else {
    Value* lo = one(B.CreateTrunc(x, B.getInt32Ty()));
    Value* hi = one(B.CreateTrunc(B.CreateLShr(x, 32), B.getInt32Ty()));
    r = B.CreateOr(B.CreateZExt(lo, it), B.CreateShl(B.CreateZExt(hi, it), 32));
  }
  if (t->isPointerTy()) return B.CreateIntToPtr(r, t);
  return t->isIntegerTy() ? r : B.CreateBitCast(r, t);
}

void Lowerer::when(Value* cond, const std::function<void()>& body) {
  auto* on = llvm::BasicBlock::Create(ctx, "when", kernel);
  auto* next = llvm::BasicBlock::Create(ctx, "when.next", kernel);
  B.CreateCondBr(cond, on, next);
  B.SetInsertPoint(on);
  body();
  B.CreateBr(next);
  B.SetInsertPoint(next);
}

void Lowerer::for_each_item(int64_t count, const std::function<void(Value* item)>& body) {
  const int64_t nthreads = 32 * num_warps;
  // The threads past num_warps (the producer warps, which run the code before a warp-specialized
  // loop too) take no item: theirs would be a consumer's item of the next round, done twice and
  // concurrently (a race for a sort's compare-exchange steps).
  Value* extra = launch_warps() > num_warps ? B.CreateICmpULT(tid, i32c(nthreads)) : nullptr;
  counted_loop(i32c((count + nthreads - 1) / nthreads), {}, [&](Value* round, const std::vector<Value*>&) {
    Value* item = B.CreateAdd(tid, B.CreateMul(round, i32c(nthreads)));
    Value* in = B.CreateICmpULT(item, i32c(count));
    when(extra ? B.CreateAnd(in, extra) : in, [&] { body(item); });
    return std::vector<Value*>{};
  });
}

std::vector<Value*> Lowerer::counted_loop(
    Value* n, std::vector<Value*> init,
    const std::function<std::vector<Value*>(Value*, const std::vector<Value*>&)>& body) {
  llvm::BasicBlock* pre = B.GetInsertBlock();
  auto* head = llvm::BasicBlock::Create(ctx, "loop.head", kernel);
  auto* bodybb = llvm::BasicBlock::Create(ctx, "loop.body", kernel);
  auto* exit = llvm::BasicBlock::Create(ctx, "loop.exit", kernel);
  B.CreateBr(head);
  B.SetInsertPoint(head);
  auto* k = B.CreatePHI(n->getType(), 2, "k");
  k->addIncoming(llvm::ConstantInt::get(n->getType(), 0), pre);
  std::vector<llvm::PHINode*> phis;
  std::vector<Value*> cur;
  for (Value* v : init) {
    auto* p = B.CreatePHI(v->getType(), 2);
    p->addIncoming(v, pre);
    phis.push_back(p);
    cur.push_back(p);
  }
  B.CreateCondBr(B.CreateICmpULT(k, n), bodybb, exit);
  B.SetInsertPoint(bodybb);
  std::vector<Value*> next = body(k, cur);
  k->addIncoming(B.CreateAdd(k, llvm::ConstantInt::get(n->getType(), 1)), B.GetInsertBlock());
  for (size_t i = 0; i < phis.size(); ++i) phis[i]->addIncoming(next.at(i), B.GetInsertBlock());
  B.CreateBr(head);
  B.SetInsertPoint(exit);
  return cur;
}

// ---------------------------------------------------------------------------------------------
// entry and dispatch

llvm::Function* Lowerer::run(const std::string& name) {
  std::vector<llvm::Type*> params;
  for (auto& a : fn_ir.entry().args) {
    DType d = a->type.dtype;
    params.push_back(d == DType::i1 ? B.getInt8Ty() : elem_ty(d));
  }
  kernel = llvm::Function::Create(llvm::FunctionType::get(B.getVoidTy(), params, false),
                                  llvm::Function::ExternalLinkage, name, mod);
  // A tensor descriptor's CUtensorMap (ir::ArgInfo::tensor_map): a 128-byte .param, 64-byte
  // aligned, passed by value; grid_constant (1-based parameter numbers) lets TMA instructions
  // take its generic address instead of a local copy's (lower_tma.cpp).
  std::vector<llvm::Metadata*> grid_constants;
  for (size_t k = 0; k < fn_ir.arg_info.size() && k < params.size(); ++k) {
    if (!fn_ir.arg_info[k].tensor_map) continue;
    llvm::Argument* arg = kernel->getArg(static_cast<unsigned>(k));
    arg->addAttr(llvm::Attribute::getWithByValType(ctx, llvm::ArrayType::get(B.getInt8Ty(), 128)));
    arg->addAttr(llvm::Attribute::getWithAlignment(ctx, llvm::Align(64)));
    grid_constants.push_back(llvm::ValueAsMetadata::get(B.getInt32(static_cast<uint32_t>(k + 1))));
  }
  kernel->setCallingConv(llvm::CallingConv::PTX_Kernel);
  auto* md = mod.getOrInsertNamedMetadata("nvvm.annotations");
  auto annotate = [&](const char* key, int v) {
    md->addOperand(llvm::MDNode::get(ctx, {llvm::ValueAsMetadata::get(kernel), llvm::MDString::get(ctx, key),
                                           llvm::ValueAsMetadata::get(B.getInt32(static_cast<uint32_t>(v)))}));
  };
  ws_op_ = ir::find_warp_specialize(fn_ir);
  if (ws_op_) {
    ws_launch_ = static_cast<int>(ir::role_first_warps(*ws_op_).back());
    for (int64_t r : ws_op_->ints_attr("regs"))
      if (r && wgmma) entry_regs_ = (maxnreg > 0 ? maxnreg : std::min(255, 65536 / (32 * ws_launch_))) / 8 * 8;
  }
  ws_loop_ = warp_specialize && maxnreg == 0 && !ws_op_ ? find_ws_loop() : nullptr;
  annotate("kernel", 1);
  if (!grid_constants.empty())
    md->addOperand(llvm::MDNode::get(ctx, {llvm::ValueAsMetadata::get(kernel), llvm::MDString::get(ctx, "grid_constant"),
                                           llvm::MDNode::get(ctx, grid_constants)}));
  annotate("reqntidx", 32 * launch_warps());
  if (maxnreg > 0) annotate("maxnreg", maxnreg);  // NVPTX prints `.maxnreg N`
  // setmaxnreg (the warp-specialized loop) needs a register cap at entry: the registers divided
  // evenly among the CTA's threads (PTX ISA 9.7.17.1).
  else if (ws_loop_) annotate("maxnreg", std::min(255, 65536 / (32 * launch_warps()) / 8 * 8));
  else if (entry_regs_) annotate("maxnreg", entry_regs_);
  smem_var = new llvm::GlobalVariable(mod, llvm::ArrayType::get(B.getInt8Ty(), 0), false,
                                      llvm::GlobalValue::ExternalLinkage, nullptr, "tle_smem", nullptr,
                                      llvm::GlobalVariable::NotThreadLocal, 3);
  smem_var->setAlignment(llvm::Align(1024));  // wgmma's 128-byte swizzle repeats every 1024 bytes
  for (const auto& op : fn_ir.entry().ops)
    if (op->kind == ir::OpKind::LocalAlloc) {
      if (!op->has_attr("offset")) fail(*op, "a shared buffer without an offset (passes::plan_shared_buffers)");
      user_smem_ = std::max(user_smem_, op->int_attr("offset") + ir::local_alloc_bytes(*op));
    }
  user_smem_ = (user_smem_ + 1023) / 1024 * 1024;  // the compiler's own buffers stay 1024-aligned
  if (resident_operands) plan_resident_operands();
  const int64_t below = user_smem_ + resident_bytes_;
  smem = below ? llvm::ConstantExpr::getInBoundsGetElementPtr(B.getInt8Ty(), smem_var, B.getInt32(static_cast<uint32_t>(below)))
               : static_cast<llvm::Constant*>(smem_var);

  B.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", kernel));
  tid = B.CreateCall(llvm::Intrinsic::getDeclaration(&mod, llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x), {}, "tid");
  lane = B.CreateAnd(tid, 31, "lane");
  warp = B.CreateLShr(tid, 5, "warp");
  size_t i = 0;
  for (auto& a : fn_ir.entry().args) {
    Value* p = kernel->getArg(static_cast<unsigned>(i));
    if (a->type.dtype == DType::i1) p = B.CreateTrunc(p, B.getInt1Ty());
    regs[a.get()] = {p};
    ++i;
  }
  ir::walk(fn_ir.entry(), [&](const ir::Op& op) { proxy_fence_barriers_ |= op.kind == ir::OpKind::TmaCopy; });
  uses_ = ir::count_uses(fn_ir.entry());
  plan_buffer_reads();
  smem_reserved_ = pipeline_smem_bytes();
  if (wgmma)
    ir::walk(fn_ir.entry(), [&](const ir::Op& o) {
      flush_copies_ = flush_copies_ || (o.kind == ir::OpKind::Dot && yield_interferes(o));
    });
  lower_block(fn_ir.entry());
  B.CreateRetVoid();
  return kernel;
}

void Lowerer::lower_block(const ir::Block& b, const std::unordered_set<const ir::Value*>* keep) {
  // A block lowered again (a copy of it) must not reuse a previous copy's scan totals.
  std::erase_if(scan_totals, [&](const auto& e) { return e.second.block == &b; });
  for (auto& op : b.ops)
    if (op->kind != ir::OpKind::Yield) {
      lower_op(*op);
      if (!resident_.empty()) stage_resident(*op);
    }
  // the block's results (yields, a role's end) are read after it
  const ir::Value* upto = nullptr;  // the newest pending dot not kept
  for (const PendingWgmma& p : pending_wgmma_)
    if (!keep || !keep->count(p.result)) upto = p.result;
  if (upto) wgmma_flush(upto);
}

void Lowerer::lower_op(const ir::Op& op) {
  using K = ir::OpKind;
  const ir::Op* outer = cur_op;
  cur_op = &op;
  struct Restore {
    const ir::Op*& slot;
    const ir::Op* value;
    ~Restore() { slot = value; }
  } restore{cur_op, outer};
  if (!pending_wgmma_.empty()) wgmma_flush_for(op);
  switch (op.kind) {
    case K::Constant: case K::Binary: case K::Compare: case K::Unary: case K::Fma: case K::Select:
    case K::Cast: case K::Bitcast:
      lower_elementwise(op);
      return;
    case K::Arange: {
      const LinearLayout* l = layout_of(op.result());
      if (!l) fail(op, "a tile has no layout (the GPU layout pass did not run)");
      auto hw = hw_coords(*l);
      std::vector<Value*> out;
      int64_t start = op.int_attr("start");
      for (int r = 0; r < l->num_regs(); ++r) out.push_back(B.CreateAdd(coords(*l, hw, r)[0], i32c(start)));
      regs[op.result()] = out;
      return;
    }
    case K::ProgramId: case K::NumPrograms: {
      static const llvm::Intrinsic::ID ids[2][3] = {
          {llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x, llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_y,
           llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_z},
          {llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_x, llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_y,
           llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_z}};
      int64_t axis = op.int_attr("axis");
      if (axis < 0 || axis > 2) fail(op, "axis must be 0, 1 or 2");
      regs[op.result()] = {B.CreateCall(llvm::Intrinsic::getDeclaration(&mod, ids[op.kind == K::NumPrograms][axis]))};
      return;
    }
    case K::Permute:
      if (wgmma_source(op.result())) return;  // a pipelined load's transpose: the wgmma dot reads its buffer
      lower_shape(op);
      return;
    case K::Reshape:
      if (op.has_attr("real_in")) lower_remap(op);
      else lower_shape(op);
      return;
    case K::Broadcast: case K::ExpandDims: case K::Hint: case K::SetLayout:
      lower_shape(op);
      return;
    case K::ConvertLayout: lower_convert(op); return;
    case K::AddPtr: lower_addptr(op); return;
    case K::Load:
      if (buffer_reads_.count(&op)) return;  // the dot's wgmma reads the buffer itself
      if (auto it = pipe_reads.find(&op); it == pipe_reads.end()) lower_load(op);
      else if (it->second.own_vec > 0) read_own_stage(op, it->second);  // this thread's copies
      // else: read from its stage buffer by the convert_layout that uses it (ldmatrix) or the dot (wgmma)
      return;
    case K::Store: lower_store(op); return;
    case K::DescLoad: case K::DescStore:
      // Only TMA's blocks on sm_90a reach the lowering (passes::expand_descriptors).
      if (!wgmma) fail(op, "a tensor-descriptor access was not expanded for a target without TMA");
      if (pipe_reads.count(&op)) return;  // a pipelined TMA load: the wgmma dot reads its stage buffer
      lower_desc_tma(op);
      return;
    case K::AtomicRMW: case K::AtomicCas: lower_atomic(op); return;
    case K::Reduce: lower_reduce(op); return;
    case K::Scan: lower_scan(op); return;
    case K::Dot: lower_dot(op); return;
    case K::Histogram: lower_histogram(op); return;
    case K::HistogramRanks: lower_histogram_ranks(op); return;
    case K::LocalAlloc: {
      // a generic pointer into the buffer's bytes (LLVM's InferAddressSpaces turns the accesses
      // through it into ld/st/atom.shared where it can follow the address)
      Value* p = B.CreateInBoundsGEP(B.getInt8Ty(), smem_var, {i32c(op.int_attr("offset"))});
      regs[op.result()] = {B.CreateAddrSpaceCast(p, llvm::PointerType::get(ctx, 0))};
      return;
    }
    case K::Barrier: barrier(); return;
    case K::Signal: case K::SignalWait: lower_signal(op); return;
    case K::AsyncCopy: lower_async_copy(op); return;
    case K::MBarrierInit: case K::MBarrierArrive: case K::MBarrierWait: case K::TmaCopy: lower_mbarrier(op); return;
    case K::MBarrierTx: fail(op, "an mbarrier_tx reached the GPU lowering (a tma_copy expanded without TMA)");
    case K::AsyncCommit:
      B.CreateCall(llvm::Intrinsic::getDeclaration(&mod, llvm::Intrinsic::nvvm_cp_async_commit_group));
      return;
    case K::AsyncWait:
      B.CreateCall(llvm::Intrinsic::getDeclaration(&mod, llvm::Intrinsic::nvvm_cp_async_wait_group),
                   {i32c(op.int_attr("pending"))});
      return;
    case K::Sort: lower_sort(op); return;
    case K::Gather: lower_gather(op); return;
    case K::ExtractTile: case K::InsertTile: lower_subtile(op); return;
    case K::InlineAsm: lower_inline_asm(op); return;
    case K::CudaCall: lower_cuda_call(op); return;
    case K::For: lower_for(op); return;
    case K::If: lower_if(op); return;
    case K::WarpSpecialize: lower_roles(op); return;
    case K::Yield: return;
  }
  fail(op, "unknown op kind");
}

void Lowerer::lower_elementwise(const ir::Op& op) {
  using K = ir::OpKind;
  const ir::Value* r = op.result();
  const DType rd = r->type.dtype;
  const int n = num_regs(r);
  if (op.kind == K::Constant) {
    regs[r] = std::vector<Value*>(static_cast<size_t>(n), constant(rd, op.attrs.at("value"), op));
    return;
  }
  const DType d0 = op.operands.at(0)->type.dtype;
  for (auto* o : op.operands)
    if (num_regs(o) != n && num_regs(o) != 1) fail(op, "operand and result registers differ (layout invariant broken)");
  std::vector<Value*> out;
  for (int i = 0; i < n; ++i) {
    std::vector<Value*> v;
    for (auto* o : op.operands) v.push_back(reg(o, i));
    switch (op.kind) {
      case K::Binary: out.push_back(binary(op.enum_attr<ir::BinaryOp>("op"), d0, v[0], v[1], &op)); break;
      case K::Compare: out.push_back(compare(op.enum_attr<ir::CmpPred>("pred"), d0, v[0], v[1])); break;
      case K::Unary: out.push_back(unary(op.enum_attr<ir::UnaryOp>("op"), d0, v[0], op)); break;
      case K::Fma: out.push_back(fma(rd, v)); break;
      case K::Select: out.push_back(B.CreateSelect(v[0], v[1], v[2])); break;
      case K::Cast: out.push_back(convert(v[0], d0, rd)); break;
      case K::Bitcast: out.push_back(bitcast(v[0], d0, rd)); break;
      default: fail(op, "not an elementwise op");
    }
  }
  regs[r] = out;
}

void Lowerer::lower_shape(const ir::Op& op) {
  // The layout pass gives operand and result the same (lane, warp) bases (verify_layouts), so a
  // result register holds the operand register at the same register coordinates: register i of
  // the operand when both have as many (reshape, permute, expand_dims), else the one whose
  // coordinates are the result register's with the broadcast dims zeroed (a broadcast operand
  // has no register that only repeats another, gpu_rules::project). A scalar fills every register.
  const ir::Value* x = op.operands.at(0);
  const ir::Value* r = op.result();
  const int n = num_regs(r);
  std::vector<Value*> out;
  if (num_regs(x) == n || num_regs(x) == 1) {
    for (int i = 0; i < n; ++i) out.push_back(reg(x, i));
    regs[r] = out;
    return;
  }
  const LinearLayout* lx = layout_of(x);
  const LinearLayout* lr = layout_of(r);
  if (op.kind != ir::OpKind::Broadcast || !lx || !lr)
    fail(op, "operand and result registers differ (layout invariant broken)");
  // The invariant this relies on: x's lane, warp and block bases are r's with the broadcast dims zeroed.
  const ir::Shape& xs = x->type.shape;
  for (const char* hw : {layout::kLane, layout::kWarp, layout::kBlock}) {
    if (lx->has_in_dim(hw) != lr->has_in_dim(hw)) fail(op, "operand and result threads differ (layout invariant broken)");
    if (!lr->has_in_dim(hw)) continue;
    std::vector<LinearLayout::Basis> want = lr->bases(hw);
    for (auto& b : want)
      for (size_t d = 0; d < b.size() && d < xs.size(); ++d)
        if (xs[d] == 1) b[d] = 0;
    if (want != lx->bases(hw)) fail(op, "operand and result threads differ (layout invariant broken)");
  }
  auto reg_coords = [](const LinearLayout& l, int q) {
    std::vector<int32_t> in(l.in_dim_names().size(), 0);
    const auto names = l.in_dim_names();
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == layout::kReg) in[i] = q;
    return l.apply(in);
  };
  std::map<std::vector<int32_t>, int> of_coords;
  for (int p = 0; p < num_regs(x); ++p) of_coords.emplace(reg_coords(*lx, p), p);
  for (int q = 0; q < n; ++q) {
    std::vector<int32_t> c = reg_coords(*lr, q);
    for (size_t d = 0; d < c.size() && d < xs.size(); ++d)
      if (xs[d] == 1) c[d] = 0;
    auto it = of_coords.find(c);
    if (it == of_coords.end()) fail(op, "a result register has no operand register (layout invariant broken)");
    out.push_back(reg(x, it->second));
  }
  regs[r] = out;
}

void Lowerer::lower_remap(const ir::Op& op) {
  // A reshape of padded tiles whose real elements change padded positions (pad_shapes.cpp): every
  // thread writes its real elements to shared memory at their row-major index in the real operand
  // shape (pad elements to one spare slot after them), then reads each result element at its
  // index in the real result shape (pad elements read the spare slot: values nothing observes).
  const ir::Value* x = op.operands.at(0);
  const ir::Value* r = op.result();
  const LinearLayout* lx = layout_of(x);
  const LinearLayout* lr = layout_of(r);
  if (!lx || !lr) fail(op, "a remapping reshape needs tile operand and result");
  const ir::Shape rin = op.ints_attr("real_in"), rout = op.ints_attr("real_out");
  const DType d = x->type.dtype;
  int64_t n = 1;
  for (auto e : rin) n *= e;
  need_smem((n + 1) * byte_size(d));
  auto index = [&](const LinearLayout& l, const std::vector<Value*>& hw, int q, const ir::Shape& real) {
    std::vector<Value*> c = coords(l, hw, q);
    Value* ok = B.getTrue();
    for (size_t k = 0; k < c.size(); ++k) ok = B.CreateAnd(ok, B.CreateICmpULT(c[k], i32c(real[k])));
    return B.CreateSelect(ok, linear(c, real), i32c(n));
  };
  auto hx = hw_coords(*lx);
  for (int q = 0; q < num_regs(x); ++q)
    if (!duplicate_reg(*lx, q)) smem_store(d, 0, index(*lx, hx, q, rin), reg(x, q));
  barrier();
  auto hr = hw_coords(*lr);
  std::vector<Value*> out;
  for (int q = 0; q < num_regs(r); ++q) out.push_back(smem_load(d, 0, index(*lr, hr, q, rout)));
  barrier();
  regs[r] = out;
}

void Lowerer::lower_convert(const ir::Op& op) {
  const ir::Value* x = op.operands.at(0);
  const ir::Value* r = op.result();
  const LinearLayout* src = layout_of(x);
  const LinearLayout* dst = layout_of(r);
  if (!src || !dst) {  // scalar <-> tile: every thread holds the scalar
    std::vector<Value*> out(static_cast<size_t>(num_regs(r)), reg(x, 0));
    regs[r] = out;
    return;
  }
  if (ldmatrix_source(x)) {  // the source is a pipelined load's stage buffer, read with ldmatrix
    if (!lower_convert_ldmatrix(op)) fail(op, "a pipelined load's conversion cannot be read with ldmatrix");
    return;
  }
  auto plan = layout::plan_conversion(*src, *dst);
  auto names = plan.dst_to_src.in_dim_names();
  auto onames = plan.dst_to_src.out_dim_names();
  size_t ri = 0;
  for (size_t i = 0; i < onames.size(); ++i)
    if (onames[i] == layout::kReg) ri = i;
  // A register permutation is done at compile time only when the source register does not depend
  // on the thread (no lane or warp basis of dst_to_src moves the source register); else the
  // elements go through shared memory.
  bool static_regs = true;
  for (const char* hwdim : {layout::kLane, layout::kWarp})
    if (plan.dst_to_src.has_in_dim(hwdim))
      for (const auto& b : plan.dst_to_src.bases(hwdim)) static_regs = static_regs && b[ri] == 0;
  if ((plan.kind == layout::ConversionKind::Identity || plan.kind == layout::ConversionKind::RegisterPermute) &&
      static_regs) {
    std::vector<Value*> out;
    for (int q = 0; q < dst->num_regs(); ++q) {
      std::vector<int32_t> in(names.size(), 0);
      for (size_t i = 0; i < names.size(); ++i)
        if (names[i] == layout::kReg) in[i] = q;
      out.push_back(reg(x, plan.dst_to_src.apply(in)[ri]));
    }
    regs[r] = out;
    return;
  }
  // Tensor-core operands: a swizzled tile read with ldmatrix (lower_ldmatrix.cpp).
  if (lower_convert_ldmatrix(op)) return;
  // Shared memory is ordered so that the destination's register runs are contiguous (vector
  // reads): its innermost dim is the one the destination's first register basis moves along.
  int fast = -1;
  const auto& rb = dst->bases(layout::kReg);
  if (!rb.empty())
    for (size_t k = 0; k < rb[0].size(); ++k)
      if (rb[0][k]) fast = static_cast<int>(k);
  ++conversions_through_shared;
  conversion_shared_bytes += r->type.numel() * byte_size(r->type.dtype);
  stage(x, 0, /*padded=*/true, fast);
  barrier();
  regs[r] = unstage(dst, r->type.shape, r->type.dtype, 0, /*padded=*/true, fast);
  barrier();
}

// ---------------------------------------------------------------------------------------------
// control flow

void Lowerer::lower_for(const ir::Op& op) {
  if (op.has_attr("num_stages") && lower_for_pipelined(op)) return;
  const DType d = op.operands[0]->type.dtype;
  LoopHooks hooks;
  hooks.in_flight = carried_dots(op);
  lower_for_body(op, trip_count(reg(op.operands[0], 0), reg(op.operands[1], 0), reg(op.operands[2], 0), d), hooks);
}

void Lowerer::lower_for_body(const ir::Op& op, const Trips& t, const LoopHooks& hooks) {
  const ir::Block& rb = op.region(0).body();
  const size_t ncarried = op.operands.size() - 3;
  // Flatten the carried values' registers into one list of loop-carried LLVM values.
  std::vector<Value*> init;
  std::vector<size_t> start;
  for (size_t j = 0; j < ncarried; ++j) {
    start.push_back(init.size());
    const ir::Value* v = op.operands[3 + j];
    for (int i = 0; i < num_regs(rb.arg(static_cast<unsigned>(j + 1))); ++i) init.push_back(reg(v, i));
  }
  start.push_back(init.size());
  const size_t nregs = init.size();
  init.insert(init.end(), hooks.extra_init.begin(), hooks.extra_init.end());
  llvm::Type* ity = elem_ty(op.operands[0]->type.dtype);
  // A dot kept in flight across the back-edge (hooks.in_flight) leaves its raw registers in the
  // carried slot: the next iteration's block argument is pending from its start (on the first
  // iteration the wait finds nothing to wait for), and the loop's result is waited for after it.
  const ir::Op* y = rb.terminator();
  std::unordered_set<const ir::Value*> keep;
  for (size_t j : hooks.in_flight) keep.insert(y->operands.at(j));
  auto out = counted_loop(t.trips, init, [&](Value* k, const std::vector<Value*>& cur) {
    const std::vector<Value*> extra(cur.begin() + static_cast<std::ptrdiff_t>(nregs), cur.end());
    if (hooks.begin) hooks.begin(k, extra);
    regs[rb.arg(0)] = {B.CreateTrunc(B.CreateAdd(t.lo64, B.CreateMul(k, t.step64)), ity, "iv")};
    for (size_t j = 0; j < ncarried; ++j)
      regs[rb.arg(static_cast<unsigned>(j + 1))] = std::vector<Value*>(cur.begin() + start[j], cur.begin() + start[j + 1]);
    for (size_t j : hooks.in_flight)
      pending_wgmma_.push_back({rb.arg(static_cast<unsigned>(j + 1)), regs[rb.arg(static_cast<unsigned>(j + 1))], true});
    lower_block(rb, &keep);
    // (the kept dots' raw registers go round the back-edge as they are)
    std::erase_if(pending_wgmma_, [&](const PendingWgmma& p) { return keep.count(p.result) > 0; });
    std::vector<Value*> next;
    for (size_t j = 0; j < ncarried; ++j) {
      int n = static_cast<int>(start[j + 1] - start[j]);
      for (int i = 0; i < n; ++i) next.push_back(reg(y->operands[j], i));
    }
    if (hooks.end)
      for (Value* v : hooks.end(extra)) next.push_back(v);
    return next;
  });
  for (size_t j = 0; j < ncarried; ++j)
    regs[op.result(static_cast<unsigned>(j))] = std::vector<Value*>(out.begin() + start[j], out.begin() + start[j + 1]);
  for (size_t j : hooks.in_flight)
    pending_wgmma_.push_back({op.result(static_cast<unsigned>(j)), regs[op.result(static_cast<unsigned>(j))]});
  wgmma_flush();  // (before a pipelined loop's drain lets other code reuse its buffers)
}

void Lowerer::lower_roles(const ir::Op& op) {
  const std::vector<int64_t> first = ir::role_first_warps(op);
  const std::vector<int64_t>& warps = op.ints_attr("warps");
  const std::vector<int64_t>& want = op.ints_attr("regs");
  // setmaxnreg.inc takes registers from the CTA's pool, which holds only what the program got
  // at entry (.maxnreg each) and setmaxnreg.dec gave back (PTX ISA 9.7.17.1): the roles' counts
  // (the entry count where a role keeps it, idle warps included) must fit in it, or it waits forever.
  if (entry_regs_) {
    int64_t total = 0;
    std::string parts;
    for (size_t r = 0; r < warps.size(); ++r) {
      const int64_t n = want[r] ? want[r] : entry_regs_;
      total += 32 * warps[r] * n;
      parts += fmt::format("{}role {}: {} warps x {}", r ? ", " : "", r, warps[r], n);
    }
    int64_t idle = first.back();
    for (int64_t w : warps) idle -= w;
    total += 32 * idle * entry_regs_;
    if (idle) parts += fmt::format(", {} idle warps x {}", idle, entry_regs_);
    const int64_t pool = int64_t{32} * first.back() * entry_regs_;
    if (total > pool)
      throw UserError(op.loc, fmt::format("gpu::warp_specialize: the roles' registers ({}) need {}, but the program "
                                          "holds {} ({} threads x {} at entry, .maxnreg), and setmaxnreg.inc would wait "
                                          "for the rest forever: lower a role's max_regs (a producer needs few, e.g. "
                                          "40)",
                                          parts, total, pool, 32 * first.back(), entry_regs_));
  }
  barrier();  // the body's accesses (mbarrier inits, buffer stores) before any role's
  Value* const tid0 = tid;
  Value* const warp0 = warp;
  const int nw0 = num_warps;
  const int64_t base0 = smem_base_;
  auto* end = llvm::BasicBlock::Create(ctx, "roles.end", kernel);
  for (size_t r = 0; r < warps.size(); ++r) {
    auto* body = llvm::BasicBlock::Create(ctx, fmt::format("role{}", r), kernel);
    auto* next = llvm::BasicBlock::Create(ctx, fmt::format("role{}.not", r), kernel);
    Value* lo = i32c(first[r]);
    Value* in_role = B.CreateAnd(B.CreateICmpUGE(warp0, lo), B.CreateICmpULT(warp0, i32c(first[r] + warps[r])));
    B.CreateCondBr(in_role, body, next);
    B.SetInsertPoint(body);
    if (entry_regs_ && want[r] && want[r] != entry_regs_)
      asm_stmt(fmt::format("setmaxnreg.{}.sync.aligned.u32 {};", want[r] > entry_regs_ ? "inc" : "dec", want[r]));
    tid = B.CreateSub(tid0, i32c(32 * first[r]), "role.tid");
    warp = B.CreateSub(warp0, lo, "role.warp");
    num_warps = static_cast<int>(warps[r]);
    role_barrier_ = static_cast<int>(1 + r);
    // The role's shared scratch (conversions, reductions, ...) starts past every earlier role's.
    smem_base_ = (std::max(smem_bytes_, smem_base_) + 1023) / 1024 * 1024;
    lower_block(op.region(static_cast<unsigned>(r)).body());
    B.CreateBr(end);
    B.SetInsertPoint(next);
  }
  B.CreateBr(end);  // warps no role takes
  B.SetInsertPoint(end);
  tid = tid0, warp = warp0, num_warps = nw0, role_barrier_ = 0, smem_base_ = base0;
}

void Lowerer::lower_if(const ir::Op& op) {
  auto* thenbb = llvm::BasicBlock::Create(ctx, "if.then", kernel);
  auto* elsebb = llvm::BasicBlock::Create(ctx, "if.else", kernel);
  auto* join = llvm::BasicBlock::Create(ctx, "if.end", kernel);
  B.CreateCondBr(reg(op.operands.at(0), 0), thenbb, elsebb);
  std::vector<std::vector<Value*>> vals[2];
  llvm::BasicBlock* ends[2];
  for (int br = 0; br < 2; ++br) {
    B.SetInsertPoint(br == 0 ? thenbb : elsebb);
    const ir::Block& b = op.region(static_cast<unsigned>(br)).body();
    lower_block(b);
    const ir::Op* y = b.terminator();
    for (size_t j = 0; j < op.results.size(); ++j) {
      std::vector<Value*> v;
      for (int i = 0; i < num_regs(op.result(static_cast<unsigned>(j))); ++i) v.push_back(reg(y->operands[j], i));
      vals[br].push_back(v);
    }
    ends[br] = B.GetInsertBlock();
    B.CreateBr(join);
  }
  B.SetInsertPoint(join);
  for (size_t j = 0; j < op.results.size(); ++j) {
    std::vector<Value*> out;
    for (size_t i = 0; i < vals[0][j].size(); ++i) {
      auto* p = B.CreatePHI(vals[0][j][i]->getType(), 2);
      p->addIncoming(vals[0][j][i], ends[0]);
      p->addIncoming(vals[1][j][i], ends[1]);
      out.push_back(p);
    }
    regs[op.result(static_cast<unsigned>(j))] = out;
  }
}

std::vector<Value*> Lowerer::inline_region(const ir::Region& r, const std::vector<Value*>& args) {
  const ir::Block& b = r.body();
  for (size_t i = 0; i < args.size(); ++i) regs[b.arg(static_cast<unsigned>(i))] = {args[i]};
  lower_block(b);
  std::vector<Value*> out;
  for (auto* v : b.terminator()->operands) out.push_back(reg(v, 0));
  return out;
}

}  // namespace tle::gpu::detail
