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
// A desc_load with `pipelined` (passes/gpu/pipeline_loads.cpp) moves by TMA instead: one thread
// (thread 0; in a warp-specialized loop the first producer thread) announces the iteration's bytes
// on full[slot] (mbarrier.arrive.expect_tx) and issues one cp.async.bulk.tensor per atom-wide
// column block, box {atom, rows} at column offset + a * atom, into the buffer's atom blocks: the
// tensor map's 128/64/32-byte swizzle writes exactly SwizzledTile::make_wgmma's layout (chunk c of
// row r at c ^ (r / per_phase) % max_phase: address bits 4.. ^= bits 7..), which wgmma reads.
// The compute threads wait on full[k % S] with the parity of k / S (no cp.async.wait_group, and
// no proxy fence per iteration: TMA and wgmma are both the async proxy; one before the loop orders
// earlier generic uses of that shared memory before the first boxes); the buffer is refilled after the
// bar.sync that the ldmatrix/wgmma path has anyway (or, warp-specialized, after empty[slot]).
// The maps' swizzle and box width go to the runtime (Lowerer::tma_swizzled, Artifact). A loop with
// only TMA loads gives the producer warpgroup 40 registers and returns all but one thread.
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
#include "passes/fold.hpp"

namespace tle::gpu::detail {

using layout::LinearLayout;
using llvm::Value;

namespace {

struct PipeLoad {
  const ir::Op* load = nullptr;
  bool own = false;  // read back in its own layout (pipe_vec), else with ldmatrix or wgmma from `tile`
  bool wgmma = false;  // read by wgmma through matrix descriptors
  bool tma = false;    // a desc_load: moved by cp.async.bulk.tensor, one box per atom column block
  SwizzledTile tile;
  int vec = 1;
  int64_t base = 0;         // byte offset of buffer 0; buffer b at base + b * stage_bytes
  int64_t stage_bytes = 0;  // one buffer
};

/// The pipelined loads of `loop` with their buffers, or empty when one of them cannot be lowered
/// as planned (then the whole loop is lowered without pipelining). `bytes`: buffer bytes in all;
/// with `barriers` (a warp-specialized loop) also 2 mbarriers per stage after the buffers, at
/// `*mbar_at` (full[s] at + 16 s, empty[s] at + 16 s + 8).
std::vector<PipeLoad> plan_loop(const ir::Op& loop, int num_warps, int64_t& bytes, bool barriers = false,
                                int64_t* mbar_at = nullptr) {
  bytes = 0;
  std::vector<PipeLoad> out;
  if (!loop.has_attr("num_stages")) return out;
  const int64_t S = loop.int_attr("num_stages");
  if (S < 2) return out;
  const ir::Block& body = loop.region(0).body();
  bool tma = false;
  for (const auto& opp : body.ops) {
    const ir::Op& ld = *opp;
    if (ld.kind == ir::OpKind::DescLoad && ld.has_attr("pipelined")) {
      const ir::Shape& sh = ld.result()->type.shape;
      PipeLoad p;
      p.load = &ld;
      p.wgmma = p.tma = tma = true;
      p.tile = SwizzledTile::make_wgmma(sh[0], sh[1], 1, ld.int_attr("wgmma"),
                                        static_cast<int>(byte_size(ld.result()->type.dtype)));
      bytes = (bytes + 1023) / 1024 * 1024;
      p.base = bytes;
      p.stage_bytes = p.tile.bytes();
      bytes += S * p.stage_bytes;
      out.push_back(p);
      continue;
    }
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
    const int esize = static_cast<int>(byte_size(r->type.dtype));
    const int c = layout::cp_async_dim(*l, r->type.shape, vec, esize);  // the pass's rule
    if (c < 0) return {};
    const ir::Shape& sh = r->type.shape;
    PipeLoad p;
    p.load = &ld;
    p.wgmma = atom > 0;
    p.tile = atom ? SwizzledTile::make_wgmma(sh[1 - c], sh[c], c, atom, esize) : SwizzledTile::make(sh[1 - c], sh[c], c);
    p.vec = vec;
    if (atom) bytes = (bytes + 1023) / 1024 * 1024;  // wgmma's 128-byte swizzle repeats every 1024 bytes
    p.base = bytes;
    p.stage_bytes = p.tile.bytes();
    bytes += S * p.stage_bytes;
    out.push_back(p);
  }
  if ((barriers || tma) && !out.empty()) {
    bytes = (bytes + 7) / 8 * 8;
    if (mbar_at) *mbar_at = bytes;
    bytes += 16 * S;
  }
  return out;
}

/// The ops of `loop`'s body that compute its pipelined loads' operands (pointer, mask, other),
/// transitively, in program order; `need` gets every value they read (the loads' operands, the
/// induction variable, values defined before the loop). InternalError when one cannot be
/// recomputed for a later iteration (the pipelining pass checked that it can).
std::vector<const ir::Op*> copy_slice(const ir::Op& loop, const std::vector<PipeLoad>& loads,
                                      std::unordered_set<const ir::Value*>& need) {
  const ir::Block& rb = loop.region(0).body();
  for (const PipeLoad& p : loads)
    for (const ir::Value* x : p.load->operands) need.insert(x);
  std::vector<const ir::Op*> slice;
  for (auto it = rb.ops.rbegin(); it != rb.ops.rend(); ++it) {
    const ir::Op& o = **it;
    bool needed = false;
    for (const auto& res : o.results) needed = needed || need.count(res.get());
    if (!needed) continue;
    if (!o.regions.empty() || !o.is_pure() || o.kind == ir::OpKind::Load || o.kind == ir::OpKind::ConvertLayout)
      throw InternalError(fmt::format("gpu backend: a pipelined load's operand comes from '{}'", ir::op_mnemonic(o.kind)));
    slice.push_back(&o);
    for (const ir::Value* x : o.operands) need.insert(x);
  }
  std::reverse(slice.begin(), slice.end());
  for (const ir::Value* v : need)
    if (v->owner == &rb && v->index > 0)
      throw InternalError("gpu backend: a pipelined load depends on a loop-carried value");
  return slice;
}

/// Ops the producer warps of a warp-specialized loop may compute again for each compute warp:
/// register-wise, no shared memory or barrier (a convert_layout, reduction... would wait for the
/// compute warps), no memory writes; loads are allowed.
bool producer_recomputable(const ir::Op& o) {
  if (!o.regions.empty() || o.has_attr("real_in")) return false;  // a remapping reshape uses shared memory
  switch (o.kind) {
    case ir::OpKind::Constant: case ir::OpKind::Arange: case ir::OpKind::ProgramId: case ir::OpKind::NumPrograms:
    case ir::OpKind::Broadcast: case ir::OpKind::ExpandDims: case ir::OpKind::Reshape: case ir::OpKind::Permute:
    case ir::OpKind::Binary: case ir::OpKind::Compare: case ir::OpKind::Unary: case ir::OpKind::Fma:
    case ir::OpKind::Select: case ir::OpKind::Cast: case ir::OpKind::Bitcast: case ir::OpKind::AddPtr:
    case ir::OpKind::Hint: case ir::OpKind::SetLayout: case ir::OpKind::Load:
      return true;
    default: return false;
  }
}

}  // namespace

int64_t Lowerer::pipeline_smem_bytes() const {
  int64_t most = 0;
  ir::walk(fn_ir.entry(), [&](const ir::Op& op) {
    if (op.kind != ir::OpKind::For) return;
    int64_t b = 0;
    if (!plan_loop(op, num_warps, b, &op == ws_loop_).empty()) most = std::max(most, b);  // b is partial when the plan fails
  });
  return most;
}

const ir::Op* Lowerer::find_ws_loop() const {
  if (!wgmma || (num_warps != 4 && num_warps != 8)) return nullptr;
  const ir::Block& entry = fn_ir.entry();
  for (const auto& opp : entry.ops) {
    const ir::Op& op = *opp;
    // A TMA access of lower_tma.cpp is issued by thread 0 between CTA-wide barriers: not in a
    // loop whose producer and compute warps part ways (pipelined TMA loads are the producers').
    bool tma = false;
    if (op.kind == ir::OpKind::For)
      ir::walk(op.region().body(), [&](const ir::Op& o) {
        tma = tma || o.kind == ir::OpKind::DescStore || (o.kind == ir::OpKind::DescLoad && !o.has_attr("pipelined"));
      });
    if (op.kind == ir::OpKind::For && op.has_attr("num_stages") && !tma) {
      int64_t bytes = 0;
      std::vector<PipeLoad> loads = plan_loop(op, num_warps, bytes, true);
      const bool all_wgmma =
          !loads.empty() && std::all_of(loads.begin(), loads.end(), [](const PipeLoad& p) { return p.wgmma; });
      // With 8 compute warps the producers' registers come out of the compute warps' (168 each at
      // entry, 208 after setmaxnreg): enough for a GEMM's accumulator (its dot in flight), not for
      // attention's two dots and softmax, which spill there; with 4, each thread keeps up to 255.
      // (Next to a TMA producer thread they get 232, but ptxas still spilled TMA attention's
      // 128x128 blocks, 200 bytes, and on the H200 the best 8-warp attention config ran 3-6 %
      // slower warp-specialized than not: 2026-12-02, benchmarks/RESULTS.md.)
      if (all_wgmma && (num_warps == 4 || in_flight_dot(op))) {
        std::unordered_set<const ir::Value*> need;
        copy_slice(op, loads, need);
        return outer_cone(op, need) ? &op : nullptr;
      }
    }
    // The producer warps run everything before the loop: it must not write memory.
    bool writes = false;
    auto check = [&](const ir::Op& o) {
      writes = writes || (!o.is_pure() && o.kind != ir::OpKind::Load && o.kind != ir::OpKind::DescLoad &&
                          o.kind != ir::OpKind::For && o.kind != ir::OpKind::If && o.kind != ir::OpKind::Yield &&
                          o.kind != ir::OpKind::LocalAlloc && o.kind != ir::OpKind::Barrier);
    };
    check(op);
    for (const auto& r : op.regions) ir::walk(r->body(), check);
    if (writes) return nullptr;
  }
  return nullptr;
}

bool Lowerer::lower_for_pipelined(const ir::Op& op) {
  int64_t bytes = 0, mbar_at = 0;
  const bool ws = &op == ws_loop_;
  std::vector<PipeLoad> loads = plan_loop(op, num_warps, bytes, ws, &mbar_at);
  if (loads.empty()) return false;
  if (bytes > smem_reserved_)
    throw InternalError(fmt::format("gpu backend: kernel '{}': a pipelined loop needs {} bytes of buffers, {} reserved",
                                    fn_ir.name, bytes, smem_reserved_));
  const int S = static_cast<int>(op.int_attr("num_stages"));
  const ir::Block& rb = op.region(0).body();
  const ir::Op* async_dot = S >= 3 ? in_flight_dot(op) : nullptr;
  // Carried dots in flight into the next iteration (carried_dots) read their buffers until that
  // iteration waits for them, after its refill: then, as with async_dot, S - 2 ahead - only from
  // 4 stages on (with 3, one iteration ahead would be left: attention's best plain configuration).
  const std::set<size_t> in_flight = S >= 4 && !async_dot ? carried_dots(op) : std::set<size_t>{};
  const int P = async_dot || !in_flight.empty() ? S - 2 : S - 1;  // iterations copied ahead

  // The body ops the copies need (pointer, mask, other and what they are computed from), in order.
  std::unordered_set<const ir::Value*> need;
  std::vector<const ir::Op*> slice = copy_slice(op, loads, need);

  const DType d = op.operands[0]->type.dtype;
  auto [trips, lo, step] = trip_count(reg(op.operands[0], 0), reg(op.operands[1], 0), reg(op.operands[2], 0), d);
  llvm::Type* ity = elem_ty(d);
  llvm::Type* i64 = B.getInt64Ty();
  llvm::Type* gptr = llvm::PointerType::get(ctx, 1);
  auto intr = [&](llvm::Intrinsic::ID id) { return llvm::Intrinsic::getDeclaration(&mod, id); };
  llvm::Function* commit = intr(llvm::Intrinsic::nvvm_cp_async_commit_group);
  llvm::Function* wait = intr(llvm::Intrinsic::nvvm_cp_async_wait_group);

  // TMA loads: one thread (thread 0, or the first producer thread) issues an iteration's boxes
  // after announcing their bytes on full[slot]. Without cp.async loads (or outside warp
  // specialization, where those complete through wait_group) that announcement is the barrier's
  // only arrival; in a warp-specialized loop with both, the 128 producer threads' cp.async
  // arrivals complete it and the announcement adds only the bytes (mbarrier.expect_tx).
  int64_t tma_bytes = 0;
  bool copies = false;
  for (const PipeLoad& p : loads) {
    if (p.tma) tma_bytes += p.stage_bytes;
    else copies = true;
  }
  const bool tma = tma_bytes > 0;
  auto full = [&](Value* slot) { return smem_addr32(B.CreateAdd(i32c(mbar_at), B.CreateMul(slot, i32c(16)))); };
  for (const PipeLoad& p : loads)  // the kernel argument holding the map (pipeline_loads checked)
    if (p.tma) tma_swizzled[static_cast<int>(p.load->operands.at(0)->index)] = static_cast<int>(p.tile.atom);
  const std::string announce = ws && copies ? fmt::format("mbarrier.expect_tx.shared::cta.b64 [$0], {};", tma_bytes)
                                            : fmt::format("mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], {};", tma_bytes);
  auto issue_tma = [&](Value* live, Value* slot) {
    Value* me = B.CreateICmpEQ(tid, i32c(ws ? 32 * num_warps : 0));
    when(B.CreateAnd(live, me), [&] {
      Value* bar = full(slot);
      asm_stmt(announce, {bar});
      for (const PipeLoad& p : loads) {
        if (!p.tma) continue;
        const ir::Op& ld = *p.load;
        Value* map = B.CreatePtrToInt(reg(ld.operands.at(0), 0), B.getInt64Ty());
        Value* row = reg(ld.operands.at(6), 0), *col = reg(ld.operands.at(7), 0);  // offsets (rank 2)
        Value* buf = B.CreateAdd(i32c(p.base), B.CreateMul(slot, i32c(p.stage_bytes)));
        for (int64_t a = 0; a < p.tile.cols / p.tile.atom; ++a)  // atom column block a: box {atom, rows}
          tma_load_box(smem_addr32(B.CreateAdd(buf, i32c(a * p.tile.rows * p.tile.atom * p.tile.esize))), map,
                       {B.CreateAdd(col, i32c(a * p.tile.atom)), row}, bar);
      }
    });
  };

  // Copies of iteration kk (i64) into buffer `slot` (i32), committed as one group unless `ws`;
  // with `with_tma` also the TMA loads.
  auto issue = [&](Value* kk, Value* slot, bool with_tma) {
    Value* live = B.CreateICmpULT(kk, trips);
    regs[rb.arg(0)] = {B.CreateTrunc(B.CreateAdd(lo, B.CreateMul(kk, step)), ity, "iv.ahead")};
    for (const ir::Op* o : slice) lower_op(*o);
    if (with_tma && tma) issue_tma(live, slot);
    for (const PipeLoad& p : loads) {
      if (p.tma) continue;
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
        copy(g, smem_abs_ptr(B.CreateAdd(buf, B.CreateMul(swizzled_offset(p.tile, cc[s], cc[c]), i32c(p.tile.esize)))));
      }
    }
    if (!ws && copies) B.CreateCall(commit, {});
  };
  auto bind_reads = [&](Value* slot) {  // the loads read buffer `slot` in this iteration
    for (const PipeLoad& p : loads)
      pipe_reads[p.load] = PipeRead{p.tile, B.CreateAdd(i32c(p.base), B.CreateMul(slot, i32c(p.stage_bytes))),
                                    p.own ? p.vec : 0, p.wgmma};
  };
  auto next_slot = [&](Value* v) {
    Value* n = B.CreateAdd(v, i32c(1));
    return B.CreateSelect(B.CreateICmpEQ(n, i32c(S)), i32c(0), n);
  };
  // TMA writes the buffers through the async proxy: the generic accesses of earlier users of that
  // shared memory are ordered before it (PTX ISA 9.7.13.4.20), then the barrier below.
  if (tma) fence_proxy_async();
  if (ws) {
    lower_warp_specialized(op, Trips{trips, lo, step}, S, mbar_at, bytes, need, issue, bind_reads, next_slot,
                           !copies);
    return true;
  }

  // Other shared-memory users before the loop are done (each ends with a barrier; one more keeps
  // that independent of them); inside the loop they work above the buffers.
  barrier();
  if (tma) {  // full[s]: thread 0's arrive.expect_tx and the boxes' bytes complete a phase
    when(B.CreateICmpEQ(tid, i32c(0)), [&] {
      for (int st = 0; st < S; ++st) mbarrier_init(full(i32c(st)), 1);
      asm_stmt("fence.mbarrier_init.release.cluster;");
    });
    barrier();
  }
  const int64_t outer_base = smem_base_;
  const bool wgmma_reads = std::any_of(loads.begin(), loads.end(), [](const PipeLoad& p) { return p.wgmma; });
  const bool wgmma_copies =
      std::any_of(loads.begin(), loads.end(), [](const PipeLoad& p) { return p.wgmma && !p.tma; });
  smem_base_ = wgmma_reads ? (bytes + 1023) / 1024 * 1024 : bytes;  // wgmma operands staged above stay aligned
  if (bytes > smem_bytes_) smem_bytes_ = bytes, smem_op = &op;
  // prologue: iterations 0 .. P-1 into buffers 0 .. P-1
  for (int st = 0; st < P; ++st) issue(B.getInt64(static_cast<uint64_t>(st)), i32c(st), true);

  LoopHooks hooks;
  hooks.extra_init = {i32c(0), i32c(P)};  // buffers read (k % S) and written ((k + P) % S)
  const bool shared_reads = std::any_of(loads.begin(), loads.end(), [](const PipeLoad& p) { return !p.own; });
  hooks.begin = [&](Value* k, const std::vector<Value*>& slots) {
    if (copies) B.CreateCall(wait, {B.getInt32(static_cast<uint32_t>(P - 1))});
    if (tma)  // iteration k is use k / S of its buffer
      mbarrier_wait(full(slots[0]), mbarrier_parity(B.CreateUDiv(k, llvm::ConstantInt::get(i64, static_cast<uint64_t>(S)))));
    if (wgmma_copies) fence_proxy_async();  // the copies (generic proxy) are read by wgmma (async proxy)
    if (shared_reads) barrier();  // ldmatrix and wgmma read other threads' copies; TMA refills a read buffer
    issue(B.CreateAdd(k, llvm::ConstantInt::get(i64, static_cast<uint64_t>(P))), slots[1], true);
    bind_reads(slots[0]);
  };
  hooks.end = [&](const std::vector<Value*>& slots) {
    pipe_reads.clear();
    return std::vector<Value*>{next_slot(slots[0]), next_slot(slots[1])};
  };
  hooks.in_flight = in_flight;
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
  if (copies) B.CreateCall(wait, {B.getInt32(0)});
  barrier();
  if (tma) {  // every box issued was waited for; the barriers' memory may be reused
    when(B.CreateICmpEQ(tid, i32c(0)), [&] {
      for (int st = 0; st < S; ++st) asm_stmt("mbarrier.inval.shared::cta.b64 [$0];", {full(i32c(st))});
    });
    barrier();
  }
  smem_base_ = outer_base;
  return true;
}

std::optional<std::vector<const ir::Op*>> Lowerer::outer_cone(const ir::Op& loop,
                                                               std::unordered_set<const ir::Value*> need) const {
  const ir::Block& entry = fn_ir.entry();
  std::vector<const ir::Op*> cone;
  bool before = false;
  for (auto it = entry.ops.rbegin(); it != entry.ops.rend(); ++it) {
    const ir::Op& o = **it;
    if (&o == &loop) {
      before = true;
      continue;
    }
    if (!before) continue;
    bool needed = false;
    for (const auto& r : o.results) needed = needed || need.count(r.get());
    if (!needed) continue;
    if (!producer_recomputable(o)) return std::nullopt;
    cone.push_back(&o);
    for (const ir::Value* x : o.operands) need.insert(x);
  }
  std::reverse(cone.begin(), cone.end());
  return cone;
}

void Lowerer::lower_warp_specialized(const ir::Op& op, const Trips& t, int S, int64_t mbar_at, int64_t bytes,
                                     const std::unordered_set<const ir::Value*>& need,
                                     const std::function<void(Value*, Value*, bool)>& issue,
                                     const std::function<void(Value*)>& bind_reads,
                                     const std::function<Value*(Value*)>& next_slot, bool tma_only) {
  // With a dot in flight across iterations, iteration k's end releases k - 1's buffer; with only
  // dots that wait for themselves (attention's two), k's own.
  const ir::Op* dot = in_flight_dot(op);
  llvm::Type* i64 = B.getInt64Ty();
  const int threads = 32 * num_warps;  // compute threads; the producers are one warpgroup (128)
  auto full = [&](Value* slot) { return smem_addr32(B.CreateAdd(i32c(mbar_at), B.CreateMul(slot, i32c(16)))); };
  auto empty = [&](Value* slot) { return B.CreateAdd(full(slot), i32c(8)); };
  auto if_then = [&](Value* cond, const std::function<void()>& body) {
    llvm::BasicBlock* then = llvm::BasicBlock::Create(ctx, "ws.then", kernel);
    llvm::BasicBlock* join = llvm::BasicBlock::Create(ctx, "ws.join", kernel);
    B.CreateCondBr(cond, then, join);
    B.SetInsertPoint(then);
    body();
    B.CreateBr(join);
    B.SetInsertPoint(join);
  };

  // Everyone: earlier shared-memory users are done; thread 0 initializes the barriers.
  barrier();
  if_then(B.CreateICmpEQ(tid, i32c(0)), [&] {
    for (int s = 0; s < S; ++s) {
      // one cp.async.mbarrier.arrive per producer thread, or the TMA thread's arrive.expect_tx
      mbarrier_init(full(i32c(s)), tma_only ? 1 : 128);
      mbarrier_init(empty(i32c(s)), threads);  // one arrive per compute thread
    }
    asm_stmt("fence.mbarrier_init.release.cluster;");
  });
  barrier();
  const int64_t outer_base = smem_base_;
  smem_base_ = (bytes + 1023) / 1024 * 1024;
  if (bytes > smem_bytes_) smem_bytes_ = bytes, smem_op = &op;
  // Register budgets (setmaxnreg, warpgroup-wide; PTX ISA 9.7.17.1): the producers need few, the
  // accumulators of the compute warps many (CUTLASS's warp-specialized kernels: 40 and 232).
  // Only when the even split caps the compute warps (more than 256 threads in all).
  const int even = 65536 / (32 * launch_warps()) / 8 * 8;
  const bool realloc = even < 248;
  // A TMA producer is one thread issuing boxes: CUTLASS's 40 registers are plenty.
  const int producer_regs = tma_only ? 40 : 88, consumer_regs = std::min(248, (65536 - 128 * producer_regs) / threads / 8 * 8);
  auto setmaxnreg = [&](bool inc, int n) {
    asm_stmt(fmt::format("setmaxnreg.{}.sync.aligned.u32 {};", inc ? "inc" : "dec", n));
  };

  llvm::BasicBlock* producer = llvm::BasicBlock::Create(ctx, "ws.producer", kernel);
  llvm::BasicBlock* consumer = llvm::BasicBlock::Create(ctx, "ws.consumer", kernel);
  B.CreateCondBr(B.CreateICmpUGE(warp, i32c(num_warps)), producer, consumer);

  // ---- the producer warpgroup (warps num_warps .. num_warps + 3): producer warp p makes the copies
  // of compute warps p, p + 4, ... (the copies' addresses, and the values before the loop they
  // come from, are computed again for each of these warps: `warp` stands for it meanwhile).
  // Iteration j waits until the compute warps released the buffer's previous use (iteration
  // j - S), copies, and arrives on full[slot] when its copies have landed; then the warps exit.
  B.SetInsertPoint(producer);
  if (realloc) setmaxnreg(false, producer_regs);
  if (tma_only) {  // one thread issues the boxes; the rest of the warpgroup is done
    llvm::BasicBlock* tma_thread = llvm::BasicBlock::Create(ctx, "ws.tma", kernel);
    llvm::BasicBlock* idle = llvm::BasicBlock::Create(ctx, "ws.idle", kernel);
    B.CreateCondBr(B.CreateICmpEQ(tid, i32c(32 * num_warps)), tma_thread, idle);
    B.SetInsertPoint(idle);
    B.CreateRetVoid();
    B.SetInsertPoint(tma_thread);
  }
  Value* const real_warp = warp;
  const std::vector<const ir::Op*> cone = outer_cone(op, need).value();
  std::unordered_map<const ir::Value*, std::vector<Value*>> saved;
  for (const ir::Op* o : cone)
    for (const auto& r : o->results)
      if (auto it = regs.find(r.get()); it != regs.end()) saved[r.get()] = it->second;
  const int virtual_warps = tma_only ? 1 : num_warps / 4;
  std::vector<std::unordered_map<const ir::Value*, std::vector<Value*>>> per_warp(static_cast<size_t>(virtual_warps));
  std::vector<Value*> vwarp(static_cast<size_t>(virtual_warps));
  for (int v = 0; v < virtual_warps; ++v) {
    warp = vwarp[static_cast<size_t>(v)] = B.CreateAdd(B.CreateSub(real_warp, i32c(num_warps)), i32c(4 * v));
    for (const ir::Op* o : cone) {
      lower_op(*o);
      for (const auto& r : o->results) per_warp[static_cast<size_t>(v)][r.get()] = get(r.get());
    }
  }
  counted_loop(t.trips, {i32c(0)}, [&](Value* j, const std::vector<Value*>& cur) {
    Value* slot = cur[0];
    Value* use = B.CreateUDiv(j, llvm::ConstantInt::get(i64, static_cast<uint64_t>(S)));
    if_then(B.CreateICmpUGE(j, llvm::ConstantInt::get(i64, static_cast<uint64_t>(S))),
            [&] { mbarrier_wait(empty(slot), mbarrier_parity(B.CreateSub(use, llvm::ConstantInt::get(i64, 1)))); });
    for (int v = 0; v < virtual_warps; ++v) {
      warp = vwarp[static_cast<size_t>(v)];
      for (auto& [val, rs] : per_warp[static_cast<size_t>(v)]) regs[val] = rs;
      issue(j, slot, v == 0);
    }
    if (!tma_only) cp_async_arrive(full(slot));
    return std::vector<Value*>{next_slot(slot)};
  });
  B.CreateRetVoid();
  warp = real_warp;
  for (const ir::Op* o : cone)
    for (const auto& r : o->results) {
      auto it = saved.find(r.get());
      if (it != saved.end()) regs[r.get()] = it->second;
      else regs.erase(r.get());
    }

  // ---- compute warps (0 .. num_warps - 1): iteration k waits for full[k % S], reads it through
  // the proxy fence, runs the body (a dot in flight ends with wait_group 1, so the dot of k - 1 is
  // done) and releases k - 1's buffer (k's, without a dot in flight). From here on only these
  // warps run.
  B.SetInsertPoint(consumer);
  if (realloc) setmaxnreg(true, consumer_regs);
  consumers_only_ = true;
  LoopHooks hooks;
  hooks.extra_init = {i32c(0), i32c(-1)};  // buffer read in this iteration, buffer read in the last (-1: none)
  hooks.begin = [&](Value* k, const std::vector<Value*>& slots) {
    mbarrier_wait(full(slots[0]), mbarrier_parity(B.CreateUDiv(k, llvm::ConstantInt::get(i64, static_cast<uint64_t>(S)))));
    if (!tma_only) fence_proxy_async();  // the copies (generic proxy) are read by wgmma (async proxy)
    bind_reads(slots[0]);
  };
  hooks.end = [&](const std::vector<Value*>& slots) {
    pipe_reads.clear();
    if (dot) if_then(B.CreateICmpSGE(slots[1], i32c(0)), [&] { mbarrier_arrive(empty(slots[1])); });
    else mbarrier_arrive(empty(slots[0]));
    return std::vector<Value*>{next_slot(slots[0]), slots[0]};
  };
  async_wgmma_ = dot;
  lower_for_body(op, t, hooks);
  async_wgmma_ = nullptr;
  if (dot) {  // the last iteration's wgmma is still in flight
    const ir::Value* acc = dot->operands.at(2);
    const ir::Value* res = op.result(acc->index - 1);
    regs[res] = wgmma_wait(0, get(res));
  }
  // Before the buffers and barriers are reused: every compute warp is done with them.
  barrier();
  if_then(B.CreateICmpEQ(tid, i32c(0)), [&] {
    for (int s = 0; s < S; ++s)
      for (Value* a : {full(i32c(s)), empty(i32c(s))})
        asm_stmt("mbarrier.inval.shared::cta.b64 [$0];", {a});
  });
  barrier();
  smem_base_ = outer_base;
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
  // cp.async zero-filled the masked-off vectors; a load with another `other` (softmax's -inf)
  // takes it there (pipeline_loads lets any other through for loads read in their own layout).
  if (ld.operands.size() > 2 && !passes::is_positive_zero(ld.operands[2]))
    for (int i = 0; i < n; ++i)
      out[static_cast<size_t>(i)] = B.CreateSelect(reg(ld.operands[1], i), out[static_cast<size_t>(i)], reg(ld.operands[2], i));
  regs[r] = out;
}

}  // namespace tle::gpu::detail
