// src/passes/gpu/pipeline_loads.cpp - which loads of which `for` loops the GPU backend
// software-pipelines (gpu_passes.hpp, pipeline_loads; docs/ir.md "GPU passes").
//
// The model is CUTLASS's sm80 "multistage" main loop and Triton's loop pipeliner: with S stages,
// the loads of iterations k+1 .. k+S-1 are in flight (cp.async into S shared-memory buffers)
// while iteration k computes. This pass only decides and records; the lowering
// (backend/gpu/lower_pipeline.cpp) emits the prologue, the cp.async copies, the waits and the
// ldmatrix reads. A load of a `for` body qualifies when
//   - its result (16-bit elements, rank 2) has exactly one use: a convert_layout in the same body
//     whose result is used only as operand a (or b) of tensor-core dots whose mma_v2_plan operand
//     layout it is (the conversion the lowering turns into ldmatrix reads of the buffer);
//   - its pointer, mask and other operands are computed in the body only by pure, region-free
//     ops (no loads, no convert_layout, no inline asm) from the induction variable and values
//     defined outside the loop - not from loop-carried values - so the lowering can recompute
//     them for iteration k + S - 1;
//   - other is absent or the constant +0 (cp.async fills masked-off vectors with zero bytes);
//   - its `vec` attribute (assign_layouts) gives vectors of 4, 8 or 16 bytes along a dim of at
//     least 8 elements, the layout's registers 0..vec-1 are consecutive along that dim
//     (layout::cp_async_dim, which the lowering applies too), and the mask is uniform over each
//     vector (mask_vec >= vec).
//   - it is not volatile and has no .cv cache modifier.
// On a target with wgmma (sm_90a), a 16-bit or fp8 rank-2 load whose only use is operand a or b of a dot
// that runs on wgmma (its result carries the mma_v3_plan accumulator layout), directly or through
// a 2-D permute whose only use that is, qualifies under the same operand and vector conditions,
// with no conversion: the lowering lays its buffers out as wgmma's matrix descriptors read them
// (backend/gpu/lower_wgmma.cpp) and the dot reads the current buffer. It gets `wgmma` = the atom
// width of that layout (gpu_rules::wgmma_atom); an fp8 load only when it is contiguous along K
// (wgmma reads 8-bit operands K-major only), and any wgmma load only with rows of 32 bytes or more.
// With TMA (sm_90a, descriptor accesses kept by expand_descriptors), a desc_load of 16-bit or fp8
// elements (fp8 contiguous along K), rank 2, at most 256 rows, directly in the body, whose offsets are computable for any
// iteration and whose only use is operand a or b of a wgmma dot (directly or through a 2-D
// permute), qualifies as well: the lowering moves it with cp.async.bulk.tensor, one box of
// {atom, rows} per atom-wide column block, into the same wgmma buffers (the tensor map's 128/64/32-
// byte swizzle is the buffer's), completing on an mbarrier. The tensor map of a descriptor is
// encoded once per launch, so every desc_load of that descriptor must qualify with the same atom;
// otherwise none of them does (they keep the unswizzled synchronous path of lower_tma.cpp). Such a
// load gets `pipelined = 1` and `wgmma` = the atom, as a pointer load does.
// A loop whose body holds a signal_wait is never pipelined, hinted or not (its loads must not
// run ahead of the wait's acquire).
// Only innermost loops whose bodies write no memory (no store, atomic, impure inline asm or other
// op with side effects: the copies run ahead of them) are pipelined. A loop with at least one such
// load gets `num_stages = S`; each such load `pipelined = 1`.
//
// A load the program marked async (load(..., {.is_async = true}): attribute `async`) directly in the
// body of an innermost loop qualifies as a hinted loop's loads below do (pipe_vec), also when the
// loop is not hinted; such a loop is pipelined max(num_stages, 2) deep if its body writes no memory
// (the hint does not assert what the loop hint does), and not at all otherwise.
// A loop the program hinted (tle::range(..., {.num_stages = S}): attribute `stages`) is pipelined
// S deep whatever the launch's num_stages, even if its body writes memory (the hint asserts that
// no iteration stores what a later one loads; loads after a write of their own iteration are left
// alone). Besides the loads above, any load of its body qualifies whose operands are computable
// for any iteration as above, with any other (the lowering selects it where the mask is off), not
// volatile or .cv, of a dtype other than i1, whose vectors (layout::access_vec of its `vec`) are
// 4, 8 or 16 bytes with a mask uniform over each: each thread copies its own registers' vectors
// and reads them back itself (no conversion, no barrier). Such a load gets `pipe_vec` = its vector length besides `pipelined = 1`.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "passes/fold.hpp"
#include "passes/gpu/gpu_passes.hpp"
#include "passes/gpu/layout_rules.hpp"
#include "passes/pass.hpp"
#include "passes/pointer_origin.hpp"

namespace tle::passes {
namespace {

using ir::Block;
using ir::Op;
using ir::OpKind;
using ir::Value;

/// Ops the lowering may re-run for a later iteration: pure, no regions, no memory, cheap.
bool recomputable(const Op& op) {
  if (!op.regions.empty() || !op.is_pure() || gpu_rules::is_remap(op)) return false;  // a remap uses shared memory
  switch (op.kind) {
    case OpKind::Constant: case OpKind::Arange: case OpKind::ProgramId: case OpKind::NumPrograms:
    case OpKind::Broadcast: case OpKind::ExpandDims: case OpKind::Reshape: case OpKind::Permute:
    case OpKind::Binary: case OpKind::Compare: case OpKind::Unary: case OpKind::Fma: case OpKind::Select:
    case OpKind::Cast: case OpKind::Bitcast: case OpKind::AddPtr: case OpKind::Hint: case OpKind::SetLayout:
      return true;
    default: return false;
  }
}

class Pipeliner {
 public:
  Pipeliner(ir::Function& f, int num_warps, int num_stages, bool wgmma)
      : f_(f), nw_(num_warps), stages_(num_stages), wgmma_(wgmma), locals_(has_local_alloc(f)) {}

  void run() {
    ir::walk(f_.entry(), [&](Op& op) {
      for (unsigned i = 0; i < op.operands.size(); ++i) uses_[op.operands[i]].push_back({&op, i});
    });
    std::vector<Op*> loops;
    ir::walk(f_.entry(), [&](Op& op) {
      if (op.kind == OpKind::For) loops.push_back(&op);
    });
    if (wgmma_) tma_candidates();
    for (Op* loop : loops) mark(*loop);
    if (!tma_atom_.empty()) tma_agree(loops);
  }

 private:
  ir::Function& f_;
  int nw_, stages_;
  bool wgmma_;
  bool locals_;  // the kernel has shared buffers (local_alloc)
  std::unordered_map<const Value*, std::vector<std::pair<Op*, unsigned>>> uses_;

  /// A load that may read a shared buffer: cp.async copies from global memory only.
  bool may_read_shared(const Op& ld) const { return locals_ && pointer_origin(ld.operands.at(0)).shared(); }
  /// A store or atomic that writes only the program's shared buffers: a global load of a later
  /// iteration cannot observe it.
  bool writes_only_shared(const Op& op) const {
    if (!locals_ || (op.kind != OpKind::Store && op.kind != OpKind::AtomicRMW && op.kind != OpKind::AtomicCas))
      return false;
    PointerOrigin o = pointer_origin(op.operands.at(0));
    return !o.global && !o.unknown;
  }
  std::unordered_map<Op*, int64_t> tma_atom_;  // desc_loads that may be pipelined: their atom

  /// The atom of a desc_load that can be pipelined into wgmma buffers by TMA, 0 if it cannot
  /// (the map-wide agreement is checked by tma_candidates).
  int64_t tma_qualifies(const Op& ld) {
    const Op* loop = ld.parent ? ld.parent->parent_op() : nullptr;
    if (!loop || loop->kind != OpKind::For || ld.results.size() != 1) return 0;
    const Value* r = ld.result();
    if (r->type.rank() != 2 || (byte_size(r->type.dtype) != 2 && !is_fp8(r->type.dtype)) || !r->type.layout) return 0;
    // The map must be a kernel argument: the runtime encodes that argument's tensor map swizzled.
    const Value* map = ld.operands.at(0);
    if (map->def || map->owner != &f_.entry()) return 0;
    const int64_t rows = r->type.shape[0], cols = r->type.shape[1];
    if (rows < 8 || rows > 256 || cols < 16) return 0;
    std::unordered_map<const Value*, bool> memo;
    for (const Value* x : ld.operands)
      if (!iteration_computable(x, *loop, memo)) return 0;
    std::optional<WgmmaUse> wg = wgmma_use(r, loop->region().body());
    if (!wg) return 0;
    const int64_t atom = std::min(cols, gpu_rules::wgmma_atom(*wg->dot, wg->idx, wg->permuted ? 0 : 1, nw_));
    if (atom == 0 || cols * byte_size(r->type.dtype) < 32) return 0;  // an MN-major fp8 operand; rows under 32 bytes
    return cols % atom == 0 ? atom : 0;
  }

  /// Fills tma_atom_: the desc_loads of descriptors all of whose accesses qualify with one atom.
  void tma_candidates() {
    std::unordered_map<const Value*, std::vector<Op*>> by_map;
    ir::walk(f_.entry(), [&](Op& op) {
      if (op.kind == OpKind::DescLoad || op.kind == OpKind::DescStore) by_map[op.operands.at(0)].push_back(&op);
    });
    for (auto& [map, ops] : by_map) {
      int64_t atom = -1;
      for (Op* o : ops) {
        const int64_t a = o->kind == OpKind::DescLoad ? tma_qualifies(*o) : 0;
        atom = (a == 0 || (atom >= 0 && a != atom)) ? 0 : a;
        if (atom == 0) break;
      }
      if (atom > 0)
        for (Op* o : ops) tma_atom_[o] = atom;
    }
  }

  /// A descriptor's loads are pipelined all or none (its tensor map has one swizzle): where mark()
  /// left one of them alone (its loop is not pipelined, or it follows a write), the others are
  /// unmarked too, and a loop left without pipelined loads loses num_stages.
  void tma_agree(const std::vector<Op*>& loops) {
    std::unordered_map<const Value*, bool> all;
    for (auto& [op, atom] : tma_atom_) {
      const Value* map = op->operands.at(0);
      const bool marked = op->has_attr("pipelined");
      all[map] = all.count(map) ? all[map] && marked : marked;
    }
    for (auto& [op, atom] : tma_atom_) {
      if (all[op->operands.at(0)]) continue;
      op->attrs.erase("pipelined");
      op->attrs.erase("wgmma");
    }
    for (Op* loop : loops) {
      if (!loop->has_attr("num_stages")) continue;
      bool any = false;
      for (auto& op : loop->region().body().ops) any = any || op->has_attr("pipelined");
      if (!any) loop->attrs.erase("num_stages");
    }
  }

  /// v can be recomputed for any iteration: defined outside `loop`, the induction variable, or a
  /// recomputable op of the body whose operands can.
  bool iteration_computable(const Value* v, const Op& loop, std::unordered_map<const Value*, bool>& memo) {
    const Block& body = loop.region().body();
    if (v == body.arg(0)) return true;
    if (!defined_inside(v, loop)) return true;
    if (!v->def || v->def->parent != &body) return false;  // a carried value or a nested region's value
    auto it = memo.find(v);
    if (it != memo.end()) return it->second;
    memo[v] = false;
    bool ok = recomputable(*v->def);
    for (const Value* x : v->def->operands) ok = ok && iteration_computable(x, loop, memo);
    memo[v] = ok;
    return ok;
  }

  /// The convert_layout's result feeds only tensor-core dots, as the plan's operand a or b.
  bool feeds_mma_operand(const Value* conv) {
    auto it = uses_.find(conv);
    if (it == uses_.end() || it->second.empty()) return false;
    for (auto& [user, idx] : it->second) {
      if (user->kind != OpKind::Dot || idx > 1) return false;
      auto plan = gpu_rules::mma_v2_plan(*user, nw_);
      if (!plan || !conv->type.layout) return false;
      if (conv->type.layout->ll != (idx == 0 ? plan->a : plan->b)) return false;
      // The dot itself must run on tensor cores (its result took the accumulator layout).
      if (!user->result()->type.layout || user->result()->type.layout->ll != plan->acc) return false;
    }
    return true;
  }

  /// What every pipelined load needs: directly in the body, a tile pointer, a layout, not volatile
  /// or .cv (those are read when the program says), other absent or +0 (cp.async zero-fills) unless
  /// `any_other` (a load read back in its own layout: the lowering selects other into the masked-off
  /// registers), and operands computable for any iteration.
  bool movable(const Op& ld, const Op& loop, std::unordered_map<const Value*, bool>& memo, bool any_other = false) {
    const Block& body = loop.region().body();
    if (ld.kind != OpKind::Load || ld.parent != &body || ld.results.size() != 1) return false;
    if (may_read_shared(ld)) return false;
    if (!ld.result()->type.layout || ld.operands.at(0)->type.is_scalar()) return false;
    if (ld.is_volatile()) return false;
    if (ld.has_attr("cache") && ld.str_attr("cache") == ".cv") return false;
    if (ld.operands.size() > 2 && !any_other && !is_positive_zero(ld.operands[2])) return false;
    for (const Value* x : ld.operands)
      if (!iteration_computable(x, loop, memo)) return false;
    return true;
  }

  /// The only use of v, or null.
  const std::pair<Op*, unsigned>* only_use(const Value* v) const {
    auto it = uses_.find(v);
    return it == uses_.end() || it->second.size() != 1 ? nullptr : &it->second[0];
  }

  /// How a load feeds a wgmma dot: the dot, the operand index (0: a, 1: b), whether a 2-D permute
  /// sits between them.
  struct WgmmaUse {
    const Op* dot = nullptr;
    unsigned idx = 0;
    bool permuted = false;
  };
  /// v (or, when v's only use is a 2-D permute in the body, the permute's result) is used only as
  /// operand a or b of a dot in the body that runs on wgmma.
  std::optional<WgmmaUse> wgmma_use(const Value* v, const Block& body) const {
    WgmmaUse w;
    const auto* u = only_use(v);
    if (u && u->first->kind == OpKind::Permute && u->first->parent == &body && v->type.rank() == 2) {
      w.permuted = true;
      u = only_use(u->first->result());
    }
    if (!u || u->first->kind != OpKind::Dot || u->second > 1 || u->first->parent != &body) return std::nullopt;
    const Op& dot = *u->first;
    auto plan = gpu_rules::mma_v3_plan(dot, nw_);
    if (!plan || !dot.result()->type.layout || dot.result()->type.layout->ll != plan->acc) return std::nullopt;
    w.dot = &dot;
    w.idx = u->second;
    return w;
  }

  /// A load feeding tensor-core dots: through a convert_layout (read back with ldmatrix): returns
  /// 1; on wgmma, directly: returns the atom width of its buffers (16, 32 or 64 columns,
  /// gpu_rules::wgmma_atom); 0 when it does not qualify.
  int64_t qualifies(const Op& ld, const Op& loop, std::unordered_map<const Value*, bool>& memo) {
    if (!movable(ld, loop, memo)) return 0;
    const Block& body = loop.region().body();
    const Value* r = ld.result();
    if (r->type.rank() != 2 || (byte_size(r->type.dtype) != 2 && !is_fp8(r->type.dtype))) return 0;
    // one use: a convert_layout in the body feeding mma operands, or a wgmma dot
    const auto* use = only_use(r);
    if (!use) return 0;
    const Op* conv = use->first;
    std::optional<WgmmaUse> wg = wgmma_ ? wgmma_use(r, body) : std::nullopt;
    if (!wg && is_fp8(r->type.dtype)) return 0;  // ldmatrix reads 16-bit elements
    if (!wg && (conv->kind != OpKind::ConvertLayout || conv->parent != &body || !feeds_mma_operand(conv->result())))
      return 0;
    // vectors of 4, 8 or 16 bytes with a uniform mask (layout::cp_async_dim)
    if (!ld.has_attr("vec") || !ld.has_attr("mask_vec")) return 0;
    const int64_t vec = ld.int_attr("vec");
    if (ld.int_attr("mask_vec") < vec) return 0;
    const int esize = static_cast<int>(byte_size(r->type.dtype));
    const int c = layout::cp_async_dim(r->type.layout->ll, r->type.shape, vec, esize);
    if (c < 0) return 0;
    if (!wg) return 1;
    if (r->type.shape[static_cast<size_t>(c)] * esize < 32) return 0;  // wgmma tiles: rows of 32 bytes or more
    const int operand_cdim = wg->permuted ? 1 - c : c;
    return gpu_rules::wgmma_atom(*wg->dot, wg->idx, operand_cdim, nw_);  // 0: an MN-major fp8 operand
  }

  /// In a hinted loop: a load each thread copies and reads back in its own layout. Returns its
  /// vector length (elements per cp.async), 0 when it does not qualify.
  int64_t own_vec(const Op& ld, const Op& loop, std::unordered_map<const Value*, bool>& memo) {
    if (!movable(ld, loop, memo, /*any_other=*/true)) return 0;
    const Value* r = ld.result();
    if (r->type.dtype == DType::i1) return 0;
    const int64_t vec = layout::access_vec(r->type.layout->ll, ld.has_attr("vec") ? ld.int_attr("vec") : 1);
    const int64_t bytes = vec * byte_size(r->type.dtype);
    if (bytes != 4 && bytes != 8 && bytes != 16) return 0;
    if (ld.operands.size() > 1 && (!ld.has_attr("mask_vec") || ld.int_attr("mask_vec") < vec)) return 0;
    return vec;
  }

  void mark(Op& loop) {
    const bool hinted = loop.has_attr("stages");
    Block& body = loop.region().body();
    // Loads the program marked load(..., {.is_async = true}) ask for cp.async: in a loop that
    // writes no memory they are pipelined like a hinted loop's, at least 2 deep.
    auto is_async = [](const Op& op) { return op.kind == OpKind::Load && op.has_attr("async") && op.int_attr("async"); };
    bool async = false;
    for (auto& op : body.ops) async = async || is_async(*op);
    int64_t S = hinted ? loop.int_attr("stages") : stages_;
    if (!hinted && async) S = std::max<int64_t>(S, 2);
    if (S < 2) return;
    // Innermost loops only: the buffers of one pipelined loop live in one shared-memory region.
    bool nested = false;
    ir::walk(body, [&](Op& op) { nested = nested || op.kind == OpKind::For; });
    if (nested) return;
    // A signal_wait (device mesh) orders the loads after it behind another rank's writes: loads
    // issued iterations early would run ahead of it. Not even the hint allows that.
    bool waits = false;
    ir::walk(body, [&](Op& op) { waits = waits || op.kind == OpKind::SignalWait; });
    if (waits) return;
    // Loads move earlier by up to S-1 iterations: nothing in the body may write memory (a store,
    // an atomic, impure inline asm...) that a later iteration's load could read. With the hint the
    // program asserts that; still, a load after a write of its own iteration stays where it is.
    // (Stores into the program's shared buffers do not count: loads moved earlier read global memory.)
    auto writes_memory = [&](const Op& op) {
      return !op.is_pure() && op.kind != OpKind::Load && op.kind != OpKind::DescLoad && op.kind != OpKind::If &&
             op.kind != OpKind::Yield && op.kind != OpKind::Barrier && op.kind != OpKind::LocalAlloc &&
             !writes_only_shared(op);
    };
    bool writes = false;
    ir::walk(body, [&](Op& op) { writes = writes || writes_memory(op); });
    if (writes && !hinted) return;
    std::unordered_map<const Value*, bool> memo;
    int n = 0;
    bool written = false;  // a write came earlier in this iteration
    for (auto& op : body.ops) {
      if (written) break;
      if (auto t = tma_atom_.find(op.get()); t != tma_atom_.end()) {
        op->attrs["pipelined"] = int64_t{1};
        op->attrs["wgmma"] = t->second;
        ++n;
      } else if (int64_t q = qualifies(*op, loop, memo)) {
        op->attrs["pipelined"] = int64_t{1};
        if (q > 1) op->attrs["wgmma"] = q;
        ++n;
      } else if (int64_t v = hinted || is_async(*op) ? own_vec(*op, loop, memo) : 0) {
        op->attrs["pipelined"] = int64_t{1};
        op->attrs["pipe_vec"] = v;
        ++n;
      }
      written = writes_memory(*op);
      for (auto& r : op->regions) ir::walk(r->body(), [&](Op& o) { written = written || writes_memory(o); });
    }
    if (n) loop.attrs["num_stages"] = S;
  }
};

}  // namespace

void pipeline_loads(ir::Function& f, int num_warps, int num_stages, bool wgmma) {
  if (num_stages < 0) throw InternalError(fmt::format("pipeline_loads: num_stages {} < 0", num_stages));
  if (num_stages == 0) return;  // no cp.async on the target: not even hinted loops
  // A kernel that issues its own copies (gpu::copy) counts its own cp.async groups (the
  // pipeliner's commits and waits would shift them) and mbarrier phases: it pipelines itself. So
  // does a warp-specialized one (its roles would share the pipeliner's buffers).
  bool own_copies = false;
  ir::walk(f.entry(), [&](const ir::Op& op) {
    own_copies |= op.kind == OpKind::AsyncCopy || op.kind == OpKind::TmaCopy || op.kind == OpKind::MBarrierInit ||
                  op.kind == OpKind::WarpSpecialize;
  });
  if (own_copies) return;
  Pipeliner(f, num_warps, num_stages, wgmma).run();
}

}  // namespace tle::passes
