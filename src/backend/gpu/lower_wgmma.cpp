// src/backend/gpu/lower_wgmma.cpp - dot on Hopper tensor cores: wgmma.mma_async.sync.aligned.
// m64nNk16.f32.{bf16,f16} and m64nNk32.f32.{e4m3,e5m2}.{e4m3,e5m2} with both operands in shared
// memory (PTX ISA 9.7.15), entry point Lowerer::lower_dot_wgmma. fp8 operands are always K-major
// (8-bit types have no transpose bits) and never in registers; an fp8 tile is laid out byte for
// byte as a 16-bit one (SwizzledTile::esize), so a k32 step moves the descriptor by the same 32
// bytes as a k16 step of 16-bit elements.
//
// The layout pass (passes/gpu/assign_layouts.cpp, layout_rules.hpp mma_v3_plan) gives such a
// dot's result and acc the wgmma accumulator layout of {gm, gn} warpgroups; a and b keep any
// layout, since wgmma reads them from shared memory through 64-bit matrix descriptors - except an
// a in the plan's register-A layout (gpu_rules::wgmma_a_in_registers: attention's q and p), which
// wgmma reads from registers: per instruction the 4 b32 registers of the warp's m16 x k16 A
// fragment (PTX ISA Figure 148). An operand in shared memory is either
//   - the current stage buffer of a `wgmma` pipelined load (lower_pipeline.cpp: cp.async copies
//     into SwizzledTile::make_wgmma buffers), possibly seen through a 2-D transpose, or
//   - the program's own buffer (TLE-Struct), when the operand is a load of offsets that are a
//     make_wgmma tile's from an aligned base (plan_buffer_reads: a buffer view with the 128-byte
//     swizzle and rows of 64 16-bit elements is a K- or MN-major 128-byte-swizzled tile), read in
//     place: the load is not lowered, and generic writes are fenced (proxy_fence_barriers_), or
//   - its registers, written here into a K-major make_wgmma tile above the pipeline buffers,
//     then fence.proxy.async.shared::cta and a barrier (generic-proxy writes read by the async
//     proxy).
// A tile contiguous along K is "K-major" (transpose bit 0); one contiguous along M (for a) or N
// (for b) is "MN-major" (transpose bit 1; f16/bf16 only). Per warpgroup (warps 4g .. 4g+3, which
// own rows 64 * (g % gm) + 64 * gm * i and the N / gn columns of block g / gm), the dot is, for
// every k16 step and every 64 x instr_n block of its accumulator, one wgmma whose descriptors
// point at the block's first element (start address = the tile's unswizzled offset of that
// element; the hardware applies the swizzle to the address bits):
//   wgmma.fence; wgmma x (K/16 * blocks); wgmma.commit_group; wgmma.wait_group 0
// The fence takes every register the wgmmas read (accumulators, A fragments) as an in-out operand,
// so all of them are written before it (ptxas would otherwise wait for the earlier wgmmas where
// one is written between them); the wait takes every accumulator register as an in-out operand,
// so nothing reads them before the asynchronous instructions have written them. A dot whose
// operands are not staged is not waited for here but where its result is first read
// (wgmma_flush, below: the wait and copies of the accumulators after it in one asm). A fragments of
// f32 values rounded to bf16 / f16 are packed two by two with cvt.rn.{bf16x2,f16x2}.f32.
// Accumulator registers are found through the layout (reg-part coordinates of fragment element
// d_i, as lower_mma.cpp does for mma.sync).
#include <fmt/format.h>
#include <llvm/IR/InlineAsm.h>

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "backend/gpu/lower.hpp"
#include "backend/gpu/mma_fragments.hpp"
#include "passes/gpu/axis_info.hpp"
#include "passes/gpu/layout_rules.hpp"
#include "passes/pointer_origin.hpp"

namespace tle::gpu::detail {

using layout::LinearLayout;
using llvm::Value;

uint64_t wgmma_desc_bits(const SwizzledTile& t, bool k_major) {
  const int64_t row_bytes = t.atom * t.esize;  // one row of an atom: 32, 64 or 128 bytes
  const uint64_t swizzle = row_bytes == 128 ? 1 : row_bytes == 64 ? 2 : row_bytes == 32 ? 3 : 0;
  if (!swizzle || t.rows % 8)
    throw InternalError(fmt::format("wgmma_desc_bits: tile {}x{} with atoms of {} columns has no wgmma swizzle mode",
                                    t.rows, t.cols, t.atom));
  const uint64_t sbo = static_cast<uint64_t>(8 * row_bytes) >> 4;                        // the next 8 rows
  const uint64_t lbo = k_major ? 1 : static_cast<uint64_t>(t.rows * row_bytes) >> 4;   // K-major: unused
  if (lbo >= (1u << 14) || sbo >= (1u << 14))
    throw InternalError(fmt::format("wgmma_desc_bits: tile {}x{} is too large for a descriptor", t.rows, t.cols));
  return (lbo << 16) | (sbo << 32) | (swizzle << 62);
}

const Lowerer::PipeRead* Lowerer::wgmma_source(const ir::Value* x, bool* transposed) const {
  bool t = false;
  if (x->def && x->def->kind == ir::OpKind::Permute && x->type.rank() == 2) {
    t = x->def->ints_attr("order").at(0) == 1;
    x = x->def->operands.at(0);
  }
  if (!x->def) return nullptr;
  auto it = pipe_reads.find(x->def);
  if (it == pipe_reads.end() || !it->second.wgmma) return nullptr;
  if (transposed) *transposed = t;
  return &it->second;
}

namespace {
/// The elements of integer tile v (row-major) when they follow at compile time from aranges and
/// constants through shape ops, layout conversions and integer arithmetic; nullopt otherwise.
using Elems = std::vector<int64_t>;
std::optional<Elems> evaluate(const ir::Value* v, std::map<const ir::Value*, std::optional<Elems>>& memo) {
  if (auto it = memo.find(v); it != memo.end()) return it->second;
  std::optional<Elems> out;
  const ir::Op* op = v->def;
  const int64_t n = v->type.numel();
  // i32 / i64 offsets whose every value stays in [0, 2^31) (nothing wraps, no product overflows)
  if (op && (v->type.dtype == DType::i32 || v->type.dtype == DType::i64)) {
    using K = ir::OpKind;
    switch (op->kind) {
      case K::Constant:
        if (auto* c = std::get_if<int64_t>(&op->attrs.at("value")); c && *c >= 0 && *c < (int64_t(1) << 31))
          out = Elems(static_cast<size_t>(n), *c);
        break;
      case K::Arange: {
        if (op->int_attr("start") < 0 || op->int_attr("start") + n >= (int64_t(1) << 31)) break;
        Elems e(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) e[static_cast<size_t>(i)] = op->int_attr("start") + i;
        out = std::move(e);
        break;
      }
      case K::Reshape: case K::ConvertLayout: case K::ExpandDims:
        if (auto x = evaluate(op->operands[0], memo); x && static_cast<int64_t>(x->size()) == n) out = x;
        break;
      case K::Broadcast: {
        const ir::Value* x = op->operands[0];
        auto xs = evaluate(x, memo);
        const ir::Shape &from = x->type.shape, &to = v->type.shape;
        if (!xs || from.size() != to.size()) break;
        Elems e(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {  // the source index of element i: broadcast dims at 0
          int64_t rest = i, src = 0, stride = 1;
          for (size_t d = to.size(); d-- > 0;) {
            const int64_t c = rest % to[d];
            rest /= to[d];
            src += (from[d] == 1 ? 0 : c) * stride;
            stride *= from[d];
          }
          e[static_cast<size_t>(i)] = (*xs)[static_cast<size_t>(src)];
        }
        out = std::move(e);
        break;
      }
      case K::Binary: {
        auto a = evaluate(op->operands[0], memo), b = evaluate(op->operands[1], memo);
        if (!a || !b || a->size() != static_cast<size_t>(n) || b->size() != static_cast<size_t>(n)) break;
        using BO = ir::BinaryOp;
        const BO bo = op->enum_attr<BO>("op");
        Elems e(static_cast<size_t>(n));
        bool ok = true;
        for (size_t i = 0; i < e.size() && ok; ++i) {
          const int64_t x = (*a)[i], y = (*b)[i];
          switch (bo) {
            case BO::Add: e[i] = x + y; break;
            case BO::Sub: e[i] = x - y; break;
            case BO::Mul: e[i] = x * y; break;
            case BO::Div: ok = x >= 0 && y > 0; if (ok) e[i] = x / y; break;
            case BO::Rem: ok = x >= 0 && y > 0; if (ok) e[i] = x % y; break;
            case BO::And: e[i] = x & y; break;
            case BO::Or: e[i] = x | y; break;
            case BO::Xor: e[i] = x ^ y; break;
            case BO::Shl: ok = x >= 0 && y >= 0 && y < 31; if (ok) e[i] = x << y; break;
            case BO::Shr: ok = x >= 0 && y >= 0 && y < 31; if (ok) e[i] = x >> y; break;
            default: ok = false;
          }
          ok = ok && e[i] >= 0 && e[i] < (int64_t(1) << 31);
        }
        if (ok) out = std::move(e);
        break;
      }
      default: break;
    }
  }
  memo[v] = out;
  return out;
}

/// The scalar pointer a pointer tile broadcasts (through reshape / broadcast / layout
/// conversions), or null.
const ir::Value* broadcast_base(const ir::Value* p) {
  while (p && !p->type.is_scalar()) {
    const ir::Op* op = p->def;
    if (!op || (op->kind != ir::OpKind::Broadcast && op->kind != ir::OpKind::Reshape &&
                op->kind != ir::OpKind::ConvertLayout && op->kind != ir::OpKind::ExpandDims))
      return nullptr;
    p = op->operands[0];
  }
  return p;
}

/// mma_v3_plan's plan for `dot` at nw warps where lower_dot_wgmma takes it (its accumulator and
/// result carry the plan's accumulator layout); nullopt otherwise.
std::optional<passes::gpu_rules::MmaV3Plan> wgmma_plan(const ir::Op& dot, int nw) {
  auto plan = passes::gpu_rules::mma_v3_plan(dot, nw);
  const LinearLayout *lc = Lowerer::layout_of(dot.operands[2]), *lr = Lowerer::layout_of(dot.result());
  if (!plan || !lc || !lr || *lc != plan->acc || *lr != plan->acc) return std::nullopt;
  return plan;
}
}  // namespace

void Lowerer::plan_buffer_reads() {
  if (!wgmma) return;
  std::map<const ir::Op*, int> uses;  // of each op's result
  ir::walk(fn_ir.entry(), [&](const ir::Op& o) {
    for (const ir::Value* x : o.operands)
      if (x->def) ++uses[x->def];
  });
  std::unordered_map<const ir::Value*, passes::axis::Info> info;
  std::map<const ir::Value*, std::optional<Elems>> memo;
  ir::walk(fn_ir.entry(), [&](const ir::Op& dot) {
    if (dot.kind != ir::OpKind::Dot) return;
    const int nw = ir::role_warps(dot) ? ir::role_warps(dot) : num_warps;
    if (!wgmma_plan(dot, nw)) return;  // not on wgmma
    for (int idx = 0; idx < 2; ++idx) {
      const ir::Value* x = dot.operands[static_cast<size_t>(idx)];
      const ir::Op* ld = x->def;
      if (!ld || ld->kind != ir::OpKind::Load || ld->operands.size() != 1 || uses[ld] != 1 ||
          byte_size(x->type.dtype) != 2 || x->type.rank() != 2 || ld->parent != dot.parent)
        continue;
      // The wgmma reads the buffer where the dot is: nothing between the load and the dot may
      // write memory, order it or release the buffer (pure ops and other loads only).
      bool quiet = false;
      for (auto it = ld->parent->ops.begin(); it != ld->parent->ops.end(); ++it)
        if (it->get() == ld) {
          quiet = true;
          for (++it; it != ld->parent->ops.end() && it->get() != &dot; ++it)
            quiet &= (*it)->regions.empty() && ((*it)->is_pure() || (*it)->kind == ir::OpKind::Load);
          break;
        }
      if (!quiet) continue;
      const ir::Op* add = ld->operands[0]->def;
      if (!add || add->kind != ir::OpKind::AddPtr) continue;
      const ir::Value* base = broadcast_base(add->operands[0]);
      if (!base || !passes::pointer_origin(base).shared() || passes::pointer_origin(base).global ||
          passes::pointer_origin(base).unknown)
        continue;
      auto off = evaluate(add->operands[1], memo);
      if (!off) continue;
      const ir::Shape& sh = x->type.shape;
      const int kdim = idx == 0 ? 1 : 0;
      for (int cdim : {kdim, 1 - kdim}) {  // K-major, then MN-major
        const int64_t rows = sh[static_cast<size_t>(1 - cdim)], cols = sh[static_cast<size_t>(cdim)];
        if (rows < 8 || cols < 16) continue;
        // (an MN-major b's atoms are no wider than one instruction's N: gpu_rules::wgmma_atom)
        const int64_t atom = passes::gpu_rules::wgmma_atom(dot, static_cast<unsigned>(idx), cdim, nw);
        if (atom == 0) continue;  // a layout wgmma cannot read (an MN-major fp8 operand)
        const SwizzledTile t = SwizzledTile::make_wgmma(rows, cols, cdim, atom, static_cast<int>(byte_size(x->type.dtype)));
        bool same = true;
        for (int64_t i = 0; i < sh[0] && same; ++i)
          for (int64_t j = 0; j < sh[1] && same; ++j)
            same = (*off)[static_cast<size_t>(i * sh[1] + j)] == (cdim == 1 ? t.offset(i, j) : t.offset(j, i));
        if (!same) continue;
        // The swizzle repeats every 8 rows of an atom: the base must start such a period.
        if (info.empty()) info = passes::axis::analyze(fn_ir);
        auto it = info.find(base);
        if (it == info.end() || it->second.div.empty() || it->second.div[0] % (8 * t.atom * t.esize) != 0) break;
        buffer_reads_.emplace(ld, BufferRead{t, base});
        break;
      }
    }
  });
  // Generic-proxy writes of those buffers (st.shared by any thread, cp.async) are fenced before
  // the async proxy reads them: before every barrier, and before every mbarrier arrive (another
  // role's wgmma may read what this one wrote). Buffers only TMA writes need neither.
  if (buffer_reads_.empty()) return;
  std::set<const ir::Op*> read;
  for (const auto& [ld, br] : buffer_reads_) {
    const passes::PointerOrigin o = passes::pointer_origin(br.base);
    read.insert(o.allocs.begin(), o.allocs.end());
  }
  ir::walk(fn_ir.entry(), [&](const ir::Op& op) {
    if (op.kind == ir::OpKind::TmaCopy) return;  // the async proxy's own writes
    for (const ir::Value* p : passes::written_pointers(op)) {
      const passes::PointerOrigin o = passes::pointer_origin(p);
      bool hit = o.unknown;
      for (const ir::Op* a : o.allocs) hit |= read.count(a) != 0;
      fence_arrives_ |= hit;
    }
  });
  proxy_fence_barriers_ |= fence_arrives_;
}

Value* Lowerer::smem_addr32(Value* off) {
  return B.CreateAdd(B.CreatePtrToInt(smem, B.getInt32Ty()), off);
}

namespace {
llvm::CallInst* asm_call(llvm::IRBuilder<>& B, const std::string& text, const std::string& cons,
                         std::vector<Value*> args, llvm::Type* ret = nullptr) {
  std::vector<llvm::Type*> tys;
  for (Value* a : args) tys.push_back(a->getType());
  auto* fty = llvm::FunctionType::get(ret ? ret : B.getVoidTy(), tys, false);
  llvm::CallInst* c = B.CreateCall(fty, llvm::InlineAsm::get(fty, text, cons, /*hasSideEffects=*/true), args);
  c->addFnAttr(llvm::Attribute::Convergent);
  return c;
}
}  // namespace

void Lowerer::asm_stmt(const std::string& text, const std::vector<Value*>& args) {
  std::string cons;
  for (size_t i = 0; i < args.size(); ++i) cons += "r,";
  asm_call(B, text, cons + "~{memory}", args);
}

void Lowerer::mbarrier_init(Value* addr, int count) {
  asm_stmt(fmt::format("mbarrier.init.shared::cta.b64 [$0], {};", count), {addr});
}

void Lowerer::mbarrier_wait(Value* addr, Value* parity) {
  // try_wait (sm_90) suspends the thread for a while before it returns false; test_wait (sm_80)
  // returns at once. Loop until the phase is done.
  llvm::BasicBlock* loop = llvm::BasicBlock::Create(ctx, "mbar.wait", kernel);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "mbar.done", kernel);
  B.CreateBr(loop);
  B.SetInsertPoint(loop);
  const char* test = wgmma ? "mbarrier.try_wait.parity.shared::cta.b64" : "mbarrier.test_wait.parity.shared::cta.b64";
  Value* ok = asm_call(B, fmt::format("{{\n.reg .pred p;\n{} p, [$1], $2;\nselp.u32 $0, 1, 0, p;\n}}", test),
                       "=r,r,r,~{memory}", {addr, parity}, B.getInt32Ty());
  B.CreateCondBr(B.CreateICmpNE(ok, i32c(0)), done, loop);
  B.SetInsertPoint(done);
}

Value* Lowerer::mbarrier_parity(Value* use) {
  return B.CreateTrunc(B.CreateAnd(use, llvm::ConstantInt::get(use->getType(), 1)), B.getInt32Ty());
}

void Lowerer::mbarrier_arrive(Value* addr) {
  asm_stmt("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [$0];\n}", {addr});
}

void Lowerer::cp_async_arrive(Value* addr) { asm_stmt("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [$0];", {addr}); }

void Lowerer::fence_proxy_async() { asm_stmt("fence.proxy.async.shared::cta;"); }

namespace {

/// One operand as wgmma reads it.
struct SmemOperand {
  SwizzledTile tile;
  Value* base = nullptr;    // i32 absolute byte offset of the tile in shared memory
  bool transposed = false;  // the tile holds the operand's transpose (dims swapped)
  bool k_major = true;
  uint64_t desc_bits = 0;
  bool stage = false;  // a pipelined load's stage buffer (its descriptors change with the iteration)
};

}  // namespace

void Lowerer::plan_resident_operands() {
  if (!wgmma || ws_loop_ || ws_op_) return;
  const ir::Block& entry = fn_ir.entry();
  // operand -> the operand index (0: a, 1: b) of its dot uses, or -1 once some use is not one
  std::map<const ir::Value*, int> as;
  std::set<const ir::Value*> in_loop;
  ir::walk(entry, [&](const ir::Op& o) {
    const bool dot = o.kind == ir::OpKind::Dot && !ir::role_warps(o) && wgmma_plan(o, num_warps);
    for (size_t i = 0; i < o.operands.size(); ++i) {
      const ir::Value* x = o.operands[i];
      if (!x->def || x->def->parent != &entry) continue;
      // A only for dots with N >= 128: a wgmma reading A from shared memory reads as many bytes of
      // A as of B per instruction at N = 64, and with both operands there narrow dots lost time
      // (H200, attention at BN = 64 with the next block's q k^T overlapped: 5-11 % slower causal,
      // though 32 registers lighter); B is read from shared memory either way.
      const bool operand = dot && (i == 1 || (i == 0 && o.operands[1]->type.shape.at(1) >= 128));
      const int idx = operand ? static_cast<int>(i) : -1;
      auto [it, fresh] = as.emplace(x, idx);
      if (!fresh && it->second != idx) it->second = -1;
      if (idx >= 0)
        for (const ir::Op* up = o.parent->parent_op(); up; up = up->parent->parent_op())
          if (up->kind == ir::OpKind::For) in_loop.insert(x);
    }
  });
  int64_t at = 0;
  for (const auto& opp : entry.ops)  // in program order: the offsets do not depend on pointer values
    for (const auto& xp : opp->results) {
      const ir::Value* x = xp.get();
      auto it = as.find(x);
      if (it == as.end() || it->second < 0 || !in_loop.count(x) || x->type.rank() != 2 || !layout_of(x)) continue;
      const int kdim = it->second == 0 ? 1 : 0;  // K is dim 1 of a, dim 0 of b
      const ir::Shape& sh = x->type.shape;
      const int esize = static_cast<int>(byte_size(x->type.dtype));
      const SwizzledTile t = SwizzledTile::make_wgmma(sh[1 - kdim], sh[kdim], kdim, 0, esize);  // K-major
      resident_.emplace(x, Resident{t, at});
      at += (t.bytes() + 1023) / 1024 * 1024;
    }
  resident_bytes_ = at;
  for (auto& [x, r] : resident_) r.offset -= resident_bytes_;  // from `smem`, which lies just above them
}

void Lowerer::stage_resident(const ir::Op& op) {
  bool any = false;
  for (const auto& xp : op.results)
    if (auto it = resident_.find(xp.get()); it != resident_.end()) {
      const ir::Value* x = xp.get();
      if (!pending_wgmma_.empty()) wgmma_flush();  // (x itself may be a dot's result)
      store_swizzled(x, it->second.tile, it->second.offset - smem_base_);
      any = true;
    }
  if (!any) return;
  fence_proxy_async();  // generic-proxy writes read by the async proxy (PTX ISA 9.7.13.4.20)
  barrier();
}

bool Lowerer::lower_dot_wgmma(const ir::Op& op) {
  if (!wgmma) return false;
  auto plan = wgmma_plan(op, num_warps);
  if (!plan) return false;
  const ir::Value* a = op.operands.at(0);
  const ir::Value* b = op.operands.at(1);
  const ir::Value* c = op.operands.at(2);
  const ir::Value* r = op.result();
  const LinearLayout* lr = layout_of(r);
  const int64_t M = a->type.shape[0], K = a->type.shape[1], N = b->type.shape[1];
  const int32_t gm = plan->warpgroups[0], gn = plan->warpgroups[1], instr_n = plan->instr_n;
  const int64_t wn = N / gn;
  // A pipelined operand is read from its stage buffer whatever its register layout (a desc_load's
  // result may carry the register-A layout, having no layout of its own to keep).
  const bool fp8 = is_fp8(a->type.dtype);  // mma_v3_plan: then b is fp8 too, and K a multiple of 32
  const int64_t kstep = fp8 ? 32 : 16;     // K of one instruction
  const bool a_regs = !fp8 && !wgmma_source(a) && !(a->def && buffer_reads_.count(a->def)) && !resident_.count(a) &&
                      layout_of(a) && *layout_of(a) == plan->a_regs;

  // ---- operands in shared memory
  int64_t staged_end = (smem_base_ + 1023) / 1024 * 1024;  // absolute byte offset
  bool staged = false;
  auto operand = [&](const ir::Value* v, int idx) {
    SmemOperand o;
    const int kdim = idx == 0 ? 1 : 0;  // K is dim 1 of a, dim 0 of b
    if (const PipeRead* pr = wgmma_source(v, &o.transposed)) {
      o.tile = pr->tile;
      o.base = pr->base;
      o.stage = true;
    } else if (auto br = v->def ? buffer_reads_.find(v->def) : buffer_reads_.end(); br != buffer_reads_.end()) {
      o.tile = br->second.tile;  // the program's buffer, read in place
      Value* p = B.CreateAddrSpaceCast(reg(br->second.base, 0), llvm::PointerType::get(ctx, 3));
      o.base = B.CreateSub(B.CreatePtrToInt(p, B.getInt32Ty()), B.CreatePtrToInt(smem, B.getInt32Ty()));
    } else if (auto rs = resident_.find(v); rs != resident_.end()) {
      o.tile = rs->second.tile;  // written once where v is defined (stage_resident)
      o.base = i32c(rs->second.offset);
    } else {
      const ir::Shape& sh = v->type.shape;
      if (!layout_of(v)) fail(op, "a wgmma operand has no layout");
      o.tile = SwizzledTile::make_wgmma(sh[1 - kdim], sh[kdim], kdim, 0, static_cast<int>(byte_size(v->type.dtype)));  // K-major
      store_swizzled(v, o.tile, staged_end - smem_base_);
      o.base = i32c(staged_end);
      staged_end += (o.tile.bytes() + 1023) / 1024 * 1024;
      staged = true;
    }
    o.k_major = o.tile.cdim == (o.transposed ? 1 - kdim : kdim);
    if (fp8 && !o.k_major) fail(op, "an fp8 wgmma operand is not K-major in shared memory");
    o.desc_bits = wgmma_desc_bits(o.tile, o.k_major);
    return o;
  };
  const SmemOperand oa = a_regs ? SmemOperand{} : operand(a, 0), ob = operand(b, 1);
  if (staged) {
    fence_proxy_async();
    barrier();
  }

  // ---- descriptors: the start address of operand element (d0, d1), i.e. its unswizzled offset
  llvm::Type* i32 = B.getInt32Ty();
  llvm::Type* i64 = B.getInt64Ty();
  Value* smem_addr = B.CreatePtrToInt(smem, i32);
  auto descriptor = [&](const SmemOperand& o, Value* d0, Value* d1) {
    Value* lc0 = o.transposed ? d1 : d0;
    Value* lc1 = o.transposed ? d0 : d1;
    Value* row = o.tile.cdim == 1 ? lc0 : lc1;
    Value* col = o.tile.cdim == 1 ? lc1 : lc0;
    const uint64_t lg = static_cast<uint64_t>(layout::log2_exact(o.tile.atom));
    Value* elems = B.CreateAdd(B.CreateMul(B.CreateLShr(col, lg), i32c(o.tile.rows * o.tile.atom)),
                               B.CreateAdd(B.CreateShl(row, lg), B.CreateAnd(col, i32c(o.tile.atom - 1))));
    Value* addr = B.CreateAdd(B.CreateAdd(smem_addr, o.base), B.CreateMul(elems, i32c(o.tile.esize)));
    Value* start = B.CreateZExt(B.CreateLShr(B.CreateAnd(addr, i32c(0x3FFFF)), 4), i64);
    return B.CreateOr(start, llvm::ConstantInt::get(i64, o.desc_bits));
  };
  // The descriptor of K step k_el (elements along K) of the block at `mn`: the one at K = 0 plus
  // the step's constant offset (a tile's element offset is a sum of a row and a column part; the
  // start address field holds address / 16 and a shared address stays below 2^18, so the fields
  // above it never carry). For an operand not in a stage buffer (resident, a program buffer,
  // staged at the dot) the add is opaque (inline asm): otherwise LLVM hoists every K step's
  // descriptor of a loop-invariant operand (attention's q) out of the loop, 2 registers each for
  // the whole loop (plain attention BN = 128: 234 -> 206 registers).
  auto descriptor_k = [&](const SmemOperand& o, bool is_a, Value* mn, int64_t k_el) -> Value* {
    Value* d = is_a ? descriptor(o, mn, i32c(0)) : descriptor(o, i32c(0), mn);  // (one per block after CSE)
    const int kdim = is_a ? 1 : 0;  // K is dim 1 of a, dim 0 of b
    int64_t lc[2] = {0, 0};
    lc[o.transposed ? 1 - kdim : kdim] = k_el;
    const int64_t row = o.tile.cdim == 1 ? lc[0] : lc[1], col = o.tile.cdim == 1 ? lc[1] : lc[0];
    const int64_t delta = o.tile.plain_offset(row, col) * o.tile.esize / 16;
    if (delta == 0) return d;
    if (o.stage) return B.CreateAdd(d, llvm::ConstantInt::get(i64, static_cast<uint64_t>(delta)));
    auto* fty = llvm::FunctionType::get(i64, {i64}, false);
    return B.CreateCall(fty, llvm::InlineAsm::get(fty, fmt::format("add.s64 $0, $1, {};", delta), "=l,l", true), {d});
  };

  // ---- the warpgroup's blocks and their accumulator registers
  Value* wg = B.CreateLShr(warp, 2);
  Value* wg_m = B.CreateAnd(wg, i32c(gm - 1));
  Value* wg_n = B.CreateLShr(wg, static_cast<uint64_t>(layout::log2_exact(gm)));
  Value* row0 = B.CreateMul(wg_m, i32c(64));
  Value* col0 = B.CreateMul(wg_n, i32c(wn));
  const int64_t blocks_m = M / (64 * gm), blocks_n = wn / instr_n;
  const RegMap cm = regs_by_coords(*lr);
  const RegMap a_regs_map = a_regs ? regs_by_coords(*layout_of(a)) : RegMap{};
  struct AccBlock {
    int64_t m, n;           // register-part origin
    std::vector<int> regs;  // d_0 .. d_{instr_n/2 - 1}
  };
  std::vector<AccBlock> blocks;
  for (int64_t mb = 0; mb < blocks_m; ++mb)
    for (int64_t nb = 0; nb < blocks_n; ++nb) {
      AccBlock blk{mb * 64 * gm, nb * instr_n, {}};
      for (int i = 0; i < instr_n / 2; ++i) {
        // d_i: row 8 * ((i >> 1) & 1), col 8 * (i >> 2) + (i & 1) of lane 0 / warp 0's block
        auto it = cm.find({static_cast<int32_t>(blk.m + 8 * ((i >> 1) & 1)),
                           static_cast<int32_t>(blk.n + 8 * (i >> 2) + (i & 1))});
        if (it == cm.end())
          throw InternalError(fmt::format("kernel '{}': wgmma lowering of dot: no accumulator register holds d_{} of "
                                          "block ({}, {}):\n{}",
                                          fn_ir.name, i, blk.m, blk.n, lr->str()));
        blk.regs.push_back(it->second);
      }
      blocks.push_back(std::move(blk));
    }

  // A in registers: per 64-row block and k16 step, the fragment's 4 b32 registers (a_{2j}, a_{2j+1}
  // packed low, high), a_i at row 8 * ((i >> 1) & 1), col (i & 1) + 8 * (i >= 4) of the block.
  std::map<std::pair<int64_t, int64_t>, std::array<Value*, 4>> a_frag;
  auto a_fragment = [&](int64_t m, int64_t k) -> const std::array<Value*, 4>& {
    auto [it, fresh] = a_frag.try_emplace({m, k});
    if (!fresh) return it->second;
    const RegMap& am = a_regs_map;
    auto packed = packed32.find(a);
    for (int j = 0; j < 4; ++j) {
      int q[2];
      for (int h = 0; h < 2; ++h) {
        const int i = 2 * j + h;
        auto r = am.find({static_cast<int32_t>(m + 8 * ((i >> 1) & 1)), static_cast<int32_t>(k + (i & 1) + 8 * (i >= 4))});
        if (r == am.end())
          throw InternalError(fmt::format("kernel '{}': wgmma lowering of dot: no register of a holds a_{} of block "
                                          "({}, {}):\n{}",
                                          fn_ir.name, i, m, k, layout_of(a)->str()));
        q[h] = r->second;
      }
      Value* p = nullptr;
      if (packed != packed32.end())  // registers that arrived packed (ldmatrix) are used as they are
        if (auto pq = packed->second.find({q[0], q[1]}); pq != packed->second.end()) p = pq->second;
      if (!p) p = pack16x2(reg(a, q[0]), reg(a, q[1]));
      it->second[static_cast<size_t>(j)] = p;
    }
    return it->second;
  };

  // ---- the instructions
  const int nacc = instr_n / 2;
  llvm::Type* f32 = B.getFloatTy();
  std::vector<llvm::Type*> outs(static_cast<size_t>(nacc), f32);
  auto* ret_ty = llvm::StructType::get(ctx, outs);
  std::vector<llvm::Type*> ins;
  if (a_regs) ins = {i32, i32, i32, i32, i64, i32};
  else ins = {i64, i64, i32};
  const int nin = static_cast<int>(ins.size());
  ins.insert(ins.end(), outs.begin(), outs.end());
  auto* mma_ty = llvm::FunctionType::get(ret_ty, ins, false);
  std::string regs_list, cons;
  for (int i = 0; i < nacc; ++i) {
    regs_list += fmt::format("{}${}", i ? ", " : "", i);
    cons += "=f,";
  }
  cons += a_regs ? "r,r,r,r,l,r" : "l,l,r";
  for (int i = 0; i < nacc; ++i) cons += fmt::format(",{}", i);
  auto type_name = [](DType d) {
    return d == DType::bf16 ? "bf16" : d == DType::f16 ? "f16" : d == DType::f8e4m3 ? "e4m3" : "e5m2";
  };
  const std::string types = fmt::format("{}.{}", type_name(a->type.dtype), type_name(b->type.dtype));
  const std::string a_arg = a_regs ? fmt::format("{{${}, ${}, ${}, ${}}}", nacc, nacc + 1, nacc + 2, nacc + 3)
                                   : fmt::format("${}", nacc);
  // imm-trans-a / imm-trans-b exist for 16-bit types only (fp8 operands are K-major)
  const std::string trans = fp8      ? ""
                            : a_regs ? fmt::format(", {}", ob.k_major ? 0 : 1)
                                     : fmt::format(", {}, {}", oa.k_major ? 0 : 1, ob.k_major ? 0 : 1);
  auto* mma = llvm::InlineAsm::get(
      mma_ty,
      fmt::format("{{\n.reg .pred p;\nsetp.ne.b32 p, ${2}, 0;\n"
                  "wgmma.mma_async.sync.aligned.m64n{0}k{7}.f32.{1} {{{3}}}, {4}, ${5}, p, 1, 1{6};\n}}",
                  instr_n, types, nacc + nin - 1, regs_list, a_arg, nacc + nin - 2, trans, kstep),
      cons, /*hasSideEffects=*/true);

  // Every register the wgmmas read (the accumulators, A's fragments) passes through the fence as an
  // in-out operand, so all of them are written before it: a register written between the fence and
  // a wgmma reading it makes ptxas inject another warpgroup.arrive there (C7519), which waits for
  // the earlier wgmmas of the group.
  std::vector<Value*> fenced(static_cast<size_t>(lr->num_regs()));
  for (int q = 0; q < lr->num_regs(); ++q) fenced[static_cast<size_t>(q)] = reg(c, q);
  if (a_regs)
    for (int64_t kk = 0; kk < K / kstep; ++kk)
      for (const AccBlock& blk : blocks) a_fragment(blk.m, kk * kstep);
  for (auto& [mk, frag] : a_frag) fenced.insert(fenced.end(), frag.begin(), frag.end());
  // Deferred (wgmma_flush_for): every operand read in place, and not the in-flight dot of a
  // pipelined loop, which keeps its own wait_group 1. Any other dot waits for the pending ones.
  const bool defer = !staged && &op != async_wgmma_;
  if (!defer) wgmma_flush();
  fenced = wgmma_fence(fenced);
  std::vector<Value*> acc(fenced.begin(), fenced.begin() + lr->num_regs());
  for (size_t at = acc.size(); auto& [mk, frag] : a_frag)  // in the order pushed above
    for (Value*& v : frag) v = fenced[at++];
  for (int64_t kk = 0; kk < K / kstep; ++kk)
    for (const AccBlock& blk : blocks) {
      Value* m0 = B.CreateAdd(row0, i32c(blk.m));
      Value* n0 = B.CreateAdd(col0, i32c(blk.n));
      std::vector<Value*> args;
      if (a_regs) {
        const auto& fa = a_fragment(blk.m, kk * kstep);
        args = {fa[0], fa[1], fa[2], fa[3], descriptor_k(ob, false, n0, kk * kstep), i32c(1)};
      } else {
        args = {descriptor_k(oa, true, m0, kk * kstep), descriptor_k(ob, false, n0, kk * kstep), i32c(1)};
      }
      for (int q : blk.regs) args.push_back(acc[static_cast<size_t>(q)]);
      llvm::CallInst* call = B.CreateCall(mma_ty, mma, args);
      call->addFnAttr(llvm::Attribute::Convergent);  // the whole warpgroup issues it together
      for (int i = 0; i < nacc; ++i)
        acc[static_cast<size_t>(blk.regs[static_cast<size_t>(i)])] = B.CreateExtractValue(call, {static_cast<unsigned>(i)});
    }
  asm_stmt("wgmma.commit_group.sync.aligned;");
  if (defer) {  // waited for where its result is first read (wgmma_flush_for)
    regs[r] = acc;
    pending_wgmma_.push_back({r, std::move(acc)});
    return true;
  }
  // In a pipelined loop the dot may stay in flight until the next iteration's (in_flight_dot).
  regs[r] = wgmma_wait(&op == async_wgmma_ ? 1 : 0, acc);
  if (staged) barrier();  // every warpgroup has read the staged tiles before shared memory is reused
  return true;
}

// Deferred waits. A wgmma dot whose operands are read in place (a pipelined stage buffer, a
// program buffer, A in registers) is not waited for at once: the code after it runs while the
// tensor cores work, and wgmma.wait_group comes before the first op that reads its result, with
// the count of the groups committed after it (PTX ISA 9.7.15.5.3, wgmma.wait_group: the groups
// complete in order). This is FlashAttention-3's overlap of the softmax with the next block's
// q k^T (Shah et al. 2024, section 3.2) when the kernel issues that dot before the softmax.
// What may run under a pending wgmma: ops that only compute registers or read memory, and ops
// whose shared-memory writes land in the scratch above the program's and the pipelined loop's
// buffers (conversions, reductions and scans without a combine function; lower.hpp), which no
// deferred dot reads. Everything
// else (stores, atomics, copies, barrier arrivals that hand a buffer back, regions, inline asm)
// waits for every pending dot first, and so does the end of every block.
void Lowerer::wgmma_flush(const ir::Value* upto) {
  if (pending_wgmma_.empty()) return;
  size_t last = pending_wgmma_.size() - 1;
  if (upto)
    for (size_t i = 0; i < pending_wgmma_.size(); ++i)
      if (pending_wgmma_[i].result == upto) last = i;
  // A dot of the previous iteration is waited for with wait_group 0: ptxas does not follow the
  // groups' order across the back-edge, and with later groups left in flight it takes the read
  // of its registers for one inside their pipeline stage (C7514, every wgmma serialized).
  if (pending_wgmma_[last].across) last = pending_wgmma_.size() - 1;
  std::vector<Value*> all;
  bool copies = flush_copies_;
  for (size_t i = 0; i <= last; ++i) {
    all.insert(all.end(), pending_wgmma_[i].acc.begin(), pending_wgmma_[i].acc.end());
    copies = copies || pending_wgmma_[i].across;
  }
  const int later = static_cast<int>(pending_wgmma_.size() - 1 - last);
  auto bind = [&] {
    size_t at = 0;
    for (size_t i = 0; i <= last; ++i) {
      std::vector<Value*>& out = regs[pending_wgmma_[i].result];
      for (Value*& v : out) v = all[at++];
    }
    pending_wgmma_.erase(pending_wgmma_.begin(), pending_wgmma_.begin() + static_cast<std::ptrdiff_t>(last + 1));
  };
  if (!copies) {  // wgmma_wait's tied operands: the waited values keep the raw registers
    all = wgmma_wait(later, all);
    bind();
    return;
  }
  // Where the waited value cannot take the register of the raw one (a loop-carried score tile
  // whose last value is still read while the next one is in flight, a value carried across the
  // back-edge), tied operands make LLVM copy the raw registers before the asm: a read of the
  // accumulators before the wait, and ptxas serializes every wgmma of the kernel (C7514). Here
  // the copies are in the asm, after the wait; the outputs are early-clobber (copy i writes its
  // output before later copies read theirs). A kernel with such a dot copies at every wait
  // (flush_copies_): mixing the forms gave ptxas's allocation spills (the TLE-Struct overlapped
  // attention, 320 bytes), whereas kernels without one keep their registers (tied waits).
  std::string text = fmt::format("wgmma.wait_group.sync.aligned {};", later), cons;
  std::vector<llvm::Type*> tys;
  for (size_t i = 0; i < all.size(); ++i) {
    text += fmt::format("\nmov.b32 ${}, ${};", i, all.size() + i);
    cons += all[i]->getType()->isFloatTy() ? "=&f," : "=&r,";
    tys.push_back(all[i]->getType());
  }
  for (size_t i = 0; i < all.size(); ++i) cons += all[i]->getType()->isFloatTy() ? "f," : "r,";
  cons += "~{memory}";
  auto* ty = llvm::FunctionType::get(llvm::StructType::get(ctx, tys), tys, false);
  llvm::CallInst* w = B.CreateCall(ty, llvm::InlineAsm::get(ty, text, cons, /*hasSideEffects=*/true), all);
  w->addFnAttr(llvm::Attribute::Convergent);
  for (size_t i = 0; i < all.size(); ++i) all[i] = B.CreateExtractValue(w, {static_cast<unsigned>(i)});
  bind();
}

namespace {
/// Whether op, or an op nested in its regions, reads v.
bool reads(const ir::Op& op, const ir::Value* v) {
  bool r = false;
  auto check = [&](const ir::Op& x) { r = r || std::find(x.operands.begin(), x.operands.end(), v) != x.operands.end(); };
  check(op);
  for (const auto& reg : op.regions) ir::walk(reg->body(), check);
  return r;
}

/// The ops of dot's block from dot on (dot included), in order.
std::vector<const ir::Op*> from_dot(const ir::Op& dot) {
  std::vector<const ir::Op*> out;
  bool on = false;
  for (const auto& o : dot.parent->ops)
    if (on = on || o.get() == &dot; on) out.push_back(o.get());
  return out;
}
}  // namespace

bool Lowerer::yield_interferes(const ir::Op& dot) const {
  const ir::Block* body = dot.parent;
  const ir::Op* loop = body ? body->parent_op() : nullptr;
  if (!loop || loop->kind != ir::OpKind::For) return false;
  const ir::Op* y = body->terminator();
  const std::vector<const ir::Op*> later = from_dot(dot);
  for (size_t j = 0; j < y->operands.size(); ++j) {
    if (y->operands[j] != dot.result()) continue;
    const ir::Value* arg = body->arg(static_cast<unsigned>(j + 1));
    for (size_t i = 1; i < later.size(); ++i)
      if (reads(*later[i], arg)) return true;
  }
  return false;
}

namespace {
/// Whether op may be lowered while a deferred wgmma is pending (the list above); a desc_load only
/// when `pipelined_read` (a pipelined one emits nothing).
bool runs_under_wgmma(const ir::Op& op, bool pipelined_read) {
  using K = ir::OpKind;
  switch (op.kind) {
    case K::Constant: case K::Binary: case K::Compare: case K::Unary: case K::Fma: case K::Select: case K::Cast:
    case K::Bitcast: case K::Arange: case K::ProgramId: case K::NumPrograms: case K::Permute: case K::Reshape:
    case K::Broadcast: case K::ExpandDims: case K::Hint: case K::SetLayout: case K::ConvertLayout: case K::AddPtr:
    case K::Load: case K::Dot: case K::MBarrierWait:
      return true;
    // (a combine function is lowered as a block of its own, inside the reduction's loops and
    // branches: its end must not be where the wait goes)
    case K::Reduce: case K::Scan: return op.regions.empty();
    case K::DescLoad: return pipelined_read;
    default: return false;
  }
}
}  // namespace

void Lowerer::wgmma_flush_for(const ir::Op& op) {
  if (!runs_under_wgmma(op, pipe_reads.count(&op) > 0)) {
    wgmma_flush();
    return;
  }
  const ir::Value* upto = nullptr;  // the latest pending dot op reads
  for (const PendingWgmma& p : pending_wgmma_)
    for (const ir::Value* x : op.operands)
      if (x == p.result) upto = x;
  if (upto) wgmma_flush(upto);
}

std::set<size_t> Lowerer::carried_dots(const ir::Op& loop) const {
  std::set<size_t> out;
  if (!wgmma) return out;
  const ir::Block& body = loop.region(0).body();
  const ir::Op* y = body.terminator();
  for (size_t j = 0; j < y->operands.size(); ++j) {
    const ir::Value* v = y->operands[j];
    const ir::Op* dot = v->def;
    if (!dot || dot->kind != ir::OpKind::Dot || dot->parent != &body) continue;
    if (auto u = uses_.find(v); u == uses_.end() || u->second != 1) continue;  // the yield only
    // from the dot on, nothing reads the block argument (the dot itself included: a K loop's
    // accumulator is in_flight_dot's) and nothing waits for every pending dot (a store, an
    // arrival handing its buffer back)
    const ir::Value* arg = body.arg(static_cast<unsigned>(j + 1));
    bool ok = true;
    for (const ir::Op* o : from_dot(*dot))
      ok = ok && !reads(*o, arg) &&
           (o == dot || o->kind == ir::OpKind::Yield || runs_under_wgmma(*o, o->has_attr("pipelined")));
    if (ok) out.insert(j);
  }
  return out;
}

namespace {
/// The f32 that 16-bit value v (an i16 register) rounds, and whether to bf16 (f32_to_bf16's
/// cvt.rn.bf16.f32) or to f16 (fptrunc to half, seen through the bitcast to i16); null for
/// anything else.
Value* rounded_f32(Value* v, bool* bf16) {
  Value* h = v;
  if (auto* bc = llvm::dyn_cast<llvm::BitCastInst>(h)) h = bc->getOperand(0);
  if (auto* t = llvm::dyn_cast<llvm::FPTruncInst>(h); t && t->getSrcTy()->isFloatTy() && t->getDestTy()->isHalfTy()) {
    *bf16 = false;
    return t->getOperand(0);
  }
  auto* c = llvm::dyn_cast<llvm::CallInst>(v);
  auto* ia = c ? llvm::dyn_cast<llvm::InlineAsm>(c->getCalledOperand()) : nullptr;
  if (!ia || ia->getAsmString() != Lowerer::kF32ToBf16Asm) return nullptr;
  *bf16 = true;
  return c->getArgOperand(0);
}
}  // namespace

Value* Lowerer::pack16x2(Value* lo, Value* hi) {
  bool bl = false, bh = false;
  Value* fl = rounded_f32(lo, &bl);
  Value* fh = rounded_f32(hi, &bh);
  if (fl && fh && bl == bh) {
    // cvt.rn.{bf16x2,f16x2}.f32 d, a, b: a to the upper half, b to the lower (PTX ISA 9.7.9.21),
    // the same rounding (and canonical NaN) as the two conversions it replaces
    auto* fty = llvm::FunctionType::get(B.getInt32Ty(), {B.getFloatTy(), B.getFloatTy()}, false);
    const std::string text = std::string("cvt.rn.") + (bl ? "bf16x2" : "f16x2") + ".f32 $0, $1, $2;";
    return B.CreateCall(fty, llvm::InlineAsm::get(fty, text, "=r,f,f", /*hasSideEffects=*/false), {fh, fl});
  }
  llvm::Type* i32 = B.getInt32Ty();
  return B.CreateOr(B.CreateZExt(B.CreateBitCast(lo, B.getInt16Ty()), i32),
                    B.CreateShl(B.CreateZExt(B.CreateBitCast(hi, B.getInt16Ty()), i32), 16));
}

std::vector<Value*> Lowerer::wgmma_fence(const std::vector<Value*>& live) {
  std::vector<llvm::Type*> tys;
  std::string outs, ins;
  for (size_t i = 0; i < live.size(); ++i) {
    tys.push_back(live[i]->getType());
    outs += live[i]->getType()->isFloatTy() ? "=f," : "=r,";
    ins += fmt::format("{}{}", i ? "," : "", i);
  }
  if (live.empty()) {
    asm_stmt("wgmma.fence.sync.aligned;");
    return {};
  }
  auto* ty = llvm::FunctionType::get(llvm::StructType::get(ctx, tys), tys, false);
  llvm::CallInst* f = B.CreateCall(
      ty, llvm::InlineAsm::get(ty, "wgmma.fence.sync.aligned;", outs + ins + ",~{memory}", /*hasSideEffects=*/true),
      live);
  f->addFnAttr(llvm::Attribute::Convergent);
  std::vector<Value*> out(live.size());
  for (size_t i = 0; i < live.size(); ++i) out[i] = B.CreateExtractValue(f, {static_cast<unsigned>(i)});
  return out;
}

std::vector<Value*> Lowerer::wgmma_wait(int n, const std::vector<Value*>& acc) {
  llvm::Type* f32 = B.getFloatTy();
  std::vector<llvm::Type*> all(acc.size(), f32);
  std::string cons;
  for (size_t i = 0; i < acc.size(); ++i) cons += "=f,";
  for (size_t i = 0; i < acc.size(); ++i) cons += fmt::format("{}{}", i ? "," : "", i);
  if (acc.empty()) cons = "~{memory}";
  auto* ty = llvm::FunctionType::get(acc.empty() ? B.getVoidTy() : llvm::StructType::get(ctx, all), all, false);
  llvm::CallInst* w = B.CreateCall(
      ty, llvm::InlineAsm::get(ty, fmt::format("wgmma.wait_group.sync.aligned {};", n), cons, /*hasSideEffects=*/true),
      acc);
  w->addFnAttr(llvm::Attribute::Convergent);
  std::vector<Value*> out(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) out[i] = B.CreateExtractValue(w, {static_cast<unsigned>(i)});
  return out;
}

const ir::Op* Lowerer::in_flight_dot(const ir::Op& loop) const {
  if (!wgmma) return nullptr;
  const ir::Block& body = loop.region(0).body();
  const ir::Op* dot = nullptr;
  int dots = 0;
  std::map<const ir::Value*, int> uses;
  ir::walk(body, [&](const ir::Op& o) {
    if (o.kind == ir::OpKind::Dot) ++dots, dot = &o;
    for (const ir::Value* x : o.operands) ++uses[x];
  });
  if (dots != 1 || dot->parent != &body) return nullptr;
  if (!wgmma_plan(*dot, num_warps)) return nullptr;
  // a and b: pipelined for wgmma (the stage buffers are not rewritten before the next barrier)
  for (int i = 0; i < 2; ++i) {
    const ir::Value* x = dot->operands[static_cast<size_t>(i)];
    if (x->def && x->def->kind == ir::OpKind::Permute) x = x->def->operands.at(0);
    if (!x->def || (x->def->kind != ir::OpKind::Load && x->def->kind != ir::OpKind::DescLoad) ||
        x->def->parent != &body || !x->def->has_attr("wgmma"))
      return nullptr;
  }
  // acc: a carried value used only here; the result: only yielded back into it
  const ir::Value* acc = dot->operands[2];
  if (acc->owner != &body || acc->index == 0 || uses[acc] != 1 || uses[dot->result()] != 1) return nullptr;
  const ir::Op* y = body.terminator();
  if (acc->index - 1 >= y->operands.size() || y->operands[acc->index - 1] != dot->result()) return nullptr;
  return dot;
}

}  // namespace tle::gpu::detail
