// src/backend/gpu/lower_pipeline.cpp - software pipelining of a `for` loop's loads with cp.async
// (PTX ISA 9.7.9.25, cp.async / cp.async.commit_group / cp.async.wait_group), entry point
// Lowerer::lower_for_pipelined. Which loops and loads: passes/gpu/pipeline_loads.cpp (attributes
// `num_stages` on the loop, `pipelined` on the loads). The schedule is CUTLASS's sm80 multistage
// main loop (and Triton's pipeliner) with S = num_stages buffers per load:
//
//   prologue:  for s in 0 .. S-2: copy iteration s into buffer s; commit_group
//   iteration k (buffer k % S):
//              cp.async.wait_group S-2     -- this thread's copies of iteration k have landed
//              bar.sync                    -- everyone's have, and iteration k-1's reads are done
//              copy iteration k+S-1 into buffer (k+S-1) % S (the one read in iteration k-1); commit
//              the body, where each pipelined load's convert_layout reads buffer k % S with ldmatrix
//   after:     cp.async.wait_group 0; bar.sync
//
// A copy of iteration j recomputes the load's pointer and mask ops (pure, from the induction
// variable and values defined outside the loop; the pass checked that) with iv = lo + j * step.
// Every vector of `vec` elements (4, 8 or 16 bytes) is one cp.async (16 bytes: .cg, else .ca)
// whose src-size is 0 (the destination is zero-filled and global memory is not read) when the
// vector is masked off or j is past the trip count, so the prologue and the last iterations need
// no branches. Buffers are SwizzledTile layouts (lower.hpp) along the load's contiguous dim, at the
// start of the dynamic shared memory ([0, smem_reserved_)); inside the loop other shared-memory
// users work above them, outside it (after the drain) they may reuse the space.
//
// A load with `wgmma` (an operand of a dot on wgmma, directly or through a transpose) has buffers
// in wgmma's swizzled layout (SwizzledTile::make_wgmma with the attribute's atom width), each
// 1024-byte aligned; the dot builds matrix descriptors on the current buffer
// (lower_wgmma.cpp). cp.async writes through the generic proxy and wgmma reads through the async
// proxy, so each thread runs fence.proxy.async.shared::cta after its wait_group, before the
// bar.sync (PTX ISA 9.7.13.4.20, membar/fence: proxy fences).
//
// A wgmma dot that accumulates into a loop-carried value and reads only such buffers stays in
// flight across iterations (CUTLASS's and Triton's Hopper main loops): it ends with
// wgmma.wait_group 1 (the previous iteration's group is done, this one runs on), and the loop is
// followed by wait_group 0 on its result. The buffer a copy refills may then still be read by the
// previous iteration's wgmma until the next barrier, so such a loop copies S-2 iterations ahead,
// not S-1 (S >= 3; with 2 stages the dot waits for itself):
//
//   iteration k:  cp.async.wait_group S-3; fence.proxy.async; bar.sync   -- every warpgroup's
//                 wgmma of k-2 is done; copy iteration k+S-2 into buffer (k+S-2) % S = (k-2) % S;
//                 wgmma on buffer k % S; commit; wgmma.wait_group 1
//
// A load with `pipe_vec` (a hinted loop's load read in its own layout) needs no conversion: each
// thread copies the vectors of its own registers, vector q of thread t at byte
// (q * threads + t) * vector bytes of the buffer (a warp's copies and reads of one q are 512
// contiguous bytes for 16-byte vectors), and the load reads them back from there; a thread reads
// only what it copied itself, so a loop with only such loads needs no bar.sync (the wait_group
// makes a thread's own copies visible to it, and it refills a buffer only after it read it).
#include <fmt/format.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

#include <algorithm>
#include <unordered_set>

#include "backend/gpu/lower.hpp"
#include "layout/ir_layout.hpp"

namespace tle::gpu::detail {

using layout::LinearLayout;
using llvm::Value;

namespace {

struct PipeLoad {
  const ir::Op* load = nullptr;
  bool own = false;  // read back in its own layout (pipe_vec), else with ldmatrix or wgmma from `tile`
  bool wgmma = false;  // read by wgmma through matrix descriptors
  SwizzledTile tile;
  int vec = 1;
  int64_t base = 0;         // byte offset of buffer 0; buffer b at base + b * stage_bytes
  int64_t stage_bytes = 0;  // one buffer
};

/// The pipelined loads of `loop` with their buffers, or empty when one of them cannot be lowered
/// as planned (then the whole loop is lowered without pipelining). `bytes`: buffer bytes in all.
std::vector<PipeLoad> plan_loop(const ir::Op& loop, int num_warps, int64_t& bytes) {
  bytes = 0;
  std::vector<PipeLoad> out;
  if (!loop.has_attr("num_stages")) return out;
  const int64_t S = loop.int_attr("num_stages");
  if (S < 2) return out;
  const ir::Block& body = loop.region(0).body();
  for (const auto& opp : body.ops) {
    const ir::Op& ld = *opp;
    if (ld.kind != ir::OpKind::Load || !ld.has_attr("pipelined") || ld.int_attr("pipelined") == 0) continue;
    const ir::Value* r = ld.result();
    if (ld.has_attr("pipe_vec")) {
      PipeLoad p;
      p.load = &ld;
      p.own = true;
      p.vec = static_cast<int>(ld.int_attr("pipe_vec"));
      const LinearLayout* l = r->type.layout ? &r->type.layout->ll : nullptr;
      if (!l || l->num_regs() % p.vec != 0) return {};
      p.base = bytes;
      p.stage_bytes = int64_t{l->num_regs()} * 32 * num_warps * byte_size(r->type.dtype);
      bytes += S * p.stage_bytes;
      out.push_back(p);
      continue;
    }
    const LinearLayout* l = r->type.layout ? &r->type.layout->ll : nullptr;
    const int64_t atom = ld.has_attr("wgmma") ? ld.int_attr("wgmma") : 0;
    if (!l || r->type.rank() != 2) return {};
    if (!atom) {
      const ir::Op* conv = nullptr;
      for (const auto& u : body.ops)
        if (u->kind == ir::OpKind::ConvertLayout && u->operands.at(0) == r) conv = u.get();
      if (!conv || !conv->result()->type.layout || !ldmatrix_plan(conv->result()->type.layout->ll)) return {};
    }
    const int vec = static_cast<int>(ld.int_attr("vec"));
    const int c = layout::cp_async_dim(*l, r->type.shape, vec, 2);  // the pass's rule
    if (c < 0) return {};
    const ir::Shape& sh = r->type.shape;
    PipeLoad p;
    p.load = &ld;
    p.wgmma = atom > 0;
    p.tile = atom ? SwizzledTile::make_wgmma(sh[1 - c], sh[c], c, atom) : SwizzledTile::make(sh[1 - c], sh[c], c);
    p.vec = vec;
    if (atom) bytes = (bytes + 1023) / 1024 * 1024;  // wgmma's 128-byte swizzle repeats every 1024 bytes
    p.base = bytes;
    p.stage_bytes = p.tile.bytes();
    bytes += S * p.stage_bytes;
    out.push_back(p);
  }
  return out;
}

}  // namespace

int64_t Lowerer::pipeline_smem_bytes() const {
  int64_t most = 0;
  ir::walk(fn_ir.entry(), [&](const ir::Op& op) {
    if (op.kind != ir::OpKind::For) return;
    int64_t b = 0;
    if (!plan_loop(op, num_warps, b).empty()) most = std::max(most, b);  // b is partial when the plan fails
  });
  return most;
}

bool Lowerer::lower_for_pipelined(const ir::Op& op) {
  int64_t bytes = 0;
  std::vector<PipeLoad> loads = plan_loop(op, num_warps, bytes);
  if (loads.empty()) return false;
  if (bytes > smem_reserved_)
    throw InternalError(fmt::format("gpu backend: kernel '{}': a pipelined loop needs {} bytes of buffers, {} reserved",
                                    fn_ir.name, bytes, smem_reserved_));
  const int S = static_cast<int>(op.int_attr("num_stages"));
  const ir::Block& rb = op.region(0).body();
  const ir::Op* async_dot = S >= 3 ? in_flight_dot(op) : nullptr;
  const int P = async_dot ? S - 2 : S - 1;  // iterations copied ahead

  // The body ops the copies need (pointer, mask, other and what they are computed from), in order.
  std::unordered_set<const ir::Value*> need;
  std::unordered_set<const ir::Op*> is_pipelined;
  for (const PipeLoad& p : loads) {
    is_pipelined.insert(p.load);
    for (const ir::Value* x : p.load->operands) need.insert(x);
  }
  std::vector<const ir::Op*> slice;
  for (auto it = rb.ops.rbegin(); it != rb.ops.rend(); ++it) {
    const ir::Op& o = **it;
    bool needed = false;
    for (const auto& res : o.results) needed = needed || need.count(res.get());
    if (!needed) continue;
    if (!o.regions.empty() || !o.is_pure() || o.kind == ir::OpKind::Load || o.kind == ir::OpKind::ConvertLayout)
      throw InternalError(fmt::format("gpu backend: kernel '{}': a pipelined load's operand comes from '{}'",
                                      fn_ir.name, ir::op_mnemonic(o.kind)));
    slice.push_back(&o);
    for (const ir::Value* x : o.operands) need.insert(x);
  }
  std::reverse(slice.begin(), slice.end());
  for (const ir::Value* v : need)
    if (v->owner == &rb && v->index > 0)
      throw InternalError(fmt::format("gpu backend: kernel '{}': a pipelined load depends on a loop-carried value",
                                      fn_ir.name));

  const DType d = op.operands[0]->type.dtype;
  auto [trips, lo, step] = trip_count(reg(op.operands[0], 0), reg(op.operands[1], 0), reg(op.operands[2], 0), d);
  llvm::Type* ity = elem_ty(d);
  llvm::Type* i64 = B.getInt64Ty();
  llvm::Type* gptr = llvm::PointerType::get(ctx, 1);
  auto intr = [&](llvm::Intrinsic::ID id) { return llvm::Intrinsic::getDeclaration(&mod, id); };
  llvm::Function* commit = intr(llvm::Intrinsic::nvvm_cp_async_commit_group);
  llvm::Function* wait = intr(llvm::Intrinsic::nvvm_cp_async_wait_group);

  // Copies of iteration kk (i64) into buffer `slot` (i32).
  auto issue = [&](Value* kk, Value* slot) {
    Value* live = B.CreateICmpULT(kk, trips);
    regs[rb.arg(0)] = {B.CreateTrunc(B.CreateAdd(lo, B.CreateMul(kk, step)), ity, "iv.ahead")};
    for (const ir::Op* o : slice) lower_op(*o);
    for (const PipeLoad& p : loads) {
      const ir::Op& ld = *p.load;
      const ir::Value* ptr = ld.operands.at(0);
      const ir::Value* mask = ld.operands.size() > 1 ? ld.operands[1] : nullptr;
      const LinearLayout& l = *layout_of(ld.result());
      const int vbytes = static_cast<int>(byte_size(ld.result()->type.dtype)) * p.vec;
      const llvm::Intrinsic::ID id = vbytes == 16 ? llvm::Intrinsic::nvvm_cp_async_cg_shared_global_16_s
                                     : vbytes == 8 ? llvm::Intrinsic::nvvm_cp_async_ca_shared_global_8_s
                                                   : llvm::Intrinsic::nvvm_cp_async_ca_shared_global_4_s;
      llvm::Function* cp = intr(id);
      Value* buf = B.CreateAdd(i32c(p.base), B.CreateMul(slot, i32c(p.stage_bytes)));
      auto copy = [&](int g, Value* dst) {
        Value* src = B.CreateAddrSpaceCast(reg(ptr, g), gptr);
        Value* on = live;
        if (mask) on = B.CreateAnd(on, reg(mask, g));  // uniform over the vector (mask_vec >= vec)
        Value* size = B.CreateSelect(on, B.getInt32(static_cast<uint32_t>(vbytes)), B.getInt32(0));
        B.CreateCall(cp, {dst, src, size});
      };
      if (p.own) {
        for (int g = 0; g < l.num_regs(); g += p.vec) copy(g, own_slot(buf, g / p.vec, vbytes));
        continue;
      }
      auto hw = hw_coords(l);
      const int c = p.tile.cdim, s = 1 - c;
      for (int g = 0; g < l.num_regs(); g += p.vec) {
        if (duplicate_reg(l, g)) continue;
        auto cc = coords(l, hw, g);
        copy(g, smem_abs_ptr(B.CreateAdd(buf, B.CreateShl(swizzled_offset(p.tile, cc[s], cc[c]), 1))));
      }
    }
    B.CreateCall(commit, {});
  };

  // Other shared-memory users before the loop are done (each ends with a barrier; one more keeps
  // that independent of them); inside the loop they work above the buffers.
  barrier();
  const int64_t outer_base = smem_base_;
  const bool wgmma_reads = std::any_of(loads.begin(), loads.end(), [](const PipeLoad& p) { return p.wgmma; });
  smem_base_ = wgmma_reads ? (bytes + 1023) / 1024 * 1024 : bytes;  // wgmma operands staged above stay aligned
  if (bytes > smem_bytes_) smem_bytes_ = bytes, smem_op = &op;
  // prologue: iterations 0 .. S-2 into buffers 0 .. S-2
  for (int st = 0; st < P; ++st) issue(B.getInt64(static_cast<uint64_t>(st)), i32c(st));

  auto next_slot = [&](Value* v) {
    Value* n = B.CreateAdd(v, i32c(1));
    return B.CreateSelect(B.CreateICmpEQ(n, i32c(S)), i32c(0), n);
  };
  LoopHooks hooks;
  hooks.extra_init = {i32c(0), i32c(P)};  // buffers read (k % S) and written ((k + P) % S)
  const bool shared_reads = std::any_of(loads.begin(), loads.end(), [](const PipeLoad& p) { return !p.own; });
  hooks.begin = [&](Value* k, const std::vector<Value*>& slots) {
    B.CreateCall(wait, {B.getInt32(static_cast<uint32_t>(P - 1))});
    if (wgmma_reads) fence_proxy_async();  // the copies (generic proxy) are read by wgmma (async proxy)
    if (shared_reads) barrier();  // ldmatrix and wgmma read other threads' copies
    issue(B.CreateAdd(k, llvm::ConstantInt::get(i64, static_cast<uint64_t>(P))), slots[1]);
    for (const PipeLoad& p : loads)
      pipe_reads[p.load] = PipeRead{p.tile, B.CreateAdd(i32c(p.base), B.CreateMul(slots[0], i32c(p.stage_bytes))),
                                    p.own ? p.vec : 0, p.wgmma};
  };
  hooks.end = [&](const std::vector<Value*>& slots) {
    pipe_reads.clear();
    return std::vector<Value*>{next_slot(slots[0]), next_slot(slots[1])};
  };
  async_wgmma_ = async_dot;
  lower_for_body(op, Trips{trips, lo, step}, hooks);
  async_wgmma_ = nullptr;
  if (async_dot) {  // the last iteration's wgmma is still in flight: wait for it on the loop's result
    const ir::Value* acc = async_dot->operands.at(2);  // the carried block argument
    const ir::Value* res = op.result(acc->index - 1);
    regs[res] = wgmma_wait(0, get(res));
  }
  // Drain (only empty groups, or copies past the trip count, can be in flight) before the buffers
  // are reused by another pipelined loop.
  B.CreateCall(wait, {B.getInt32(0)});
  barrier();
  smem_base_ = outer_base;
  return true;
}

Value* Lowerer::own_slot(Value* stage, int q, int vbytes) {
  Value* mine = B.CreateAdd(stage, B.CreateMul(tid, i32c(vbytes)));
  return smem_abs_ptr(B.CreateAdd(mine, i32c(int64_t{q} * 32 * num_warps * vbytes)));
}

void Lowerer::read_own_stage(const ir::Op& ld, const PipeRead& pr) {
  const ir::Value* r = ld.result();
  llvm::Type* mt = mem_ty(r->type.dtype);
  const int n = num_regs(r), vec = pr.own_vec;
  const int vbytes = static_cast<int>(byte_size(r->type.dtype)) * vec;
  llvm::Type* vt = llvm::FixedVectorType::get(mt, static_cast<unsigned>(vec));
  std::vector<Value*> out(static_cast<size_t>(n));
  for (int g = 0; g < n; g += vec) {
    Value* v = B.CreateAlignedLoad(vt, own_slot(pr.base, g / vec, vbytes), llvm::Align(static_cast<uint64_t>(vbytes)));
    for (int k = 0; k < vec; ++k) out[static_cast<size_t>(g + k)] = B.CreateExtractElement(v, static_cast<uint64_t>(k));
  }
  regs[r] = out;
}

}  // namespace tle::gpu::detail
