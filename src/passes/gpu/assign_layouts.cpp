// src/passes/gpu/assign_layouts.cpp - GPU register-layout assignment (gpu_passes.hpp).
//
// The approach follows Triton's coalescing + layout propagation (Coalesce.cpp,
// RemoveLayoutConversions.cpp); the code is ours:
//  0. every tile dimension must be a power of two (pad_shapes.cpp makes them so; InternalError);
//  1. axis info (axis_info.hpp) for every integer / pointer value;
//  2. anchors: gpu::set_layout results take the program's blocked layout first (hard); a dot that
//     can run on tensor cores (layout_rules.hpp: mma_v3_plan on targets with
//     wgmma, else mma_v2_plan) offers the wgmma or mma.sync accumulator layout to its result and
//     acc first, and it spreads before the memory anchors are placed (so a loop-carried
//     accumulator, its zero init, the loop results and the elementwise epilogue on them carry it,
//     and the conversion lands at the store, after a narrowing cast); a
//     wgmma dot's b, and its a when a is a load of the dot's block, get no layout from it (the
//     lowering reads them from shared memory, whatever their layout); any other a is offered, then
//     converted to, wgmma's register-A layout; then each load / store / atomic on a pointer
//     tile gets a coalesced blocked layout from its pointer's contiguity (or the set_layout of its
//     pointer or of its value's only use; accesses of the program's shared buffers are anchored
//     after propagation, in the layout their value got); its result takes it,
//     its operands are offered it;
//  3. propagation: a worklist spreads layouts along the per-op relations (layout_rules.hpp), both
//     from operands to results and back, first come first served; then such dots offer the mma
//     operand layouts to their a and b (taken only by values nothing else reached); values still
//     without one get a default blocked layout (which propagates as well);
//  4. fix-up, in program order: where an operand's layout is not what its user needs, the operand
//     is rematerialized in the needed layout when it is a cheap pure computation (constants,
//     aranges, shape and integer elementwise ops, up to kRematBudget ops), else converted with a
//     convert_layout op right before the user; reduce results take slice(operand), loop results
//     their region argument's layout; a dot whose result has its plan's accumulator layout gets
//     a and b in the plan's operand layouts (usually convert_layout of loaded blocked tiles);
//  5. `vec` / `mask_vec` attributes on memory ops; dce removes what rematerialization made dead.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <map>
#include <numeric>
#include <set>
#include <unordered_map>

#include "layout/ir_layout.hpp"
#include "layout/named_layouts.hpp"
#include "passes/gpu/axis_info.hpp"
#include "passes/gpu/gpu_passes.hpp"
#include "passes/gpu/layout_rules.hpp"
#include "passes/pass.hpp"
#include "passes/pointer_origin.hpp"

namespace tle::passes {
namespace {

using namespace gpu_rules;
using ir::Block;
using ir::Op;
using ir::OpKind;
using ir::Value;

constexpr int kRematBudget = 16;

std::string shape_str(const ir::Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

// ---------------------------------------------------------------- step 0: power-of-two shapes
void check_type_pow2(const ir::Type& t, const Op& op) {
  for (auto d : t.shape)
    if (!layout::is_pow2(d))
      throw InternalError(fmt::format("assign_layouts: {} has tile shape {}, a dimension that is not a power of two "
                                      "(pad_shapes runs first and pads it)",
                                      op_mnemonic(op.kind), shape_str(t.shape)));
}
void check_pow2(Block& b) {
  for (auto& op : b.ops) {
    for (auto& r : op->results) check_type_pow2(r->type, *op);
    for (auto& reg : op->regions) {
      for (auto& a : reg->body().args) check_type_pow2(a->type, *op);
      check_pow2(reg->body());
    }
  }
}

int64_t pow2_floor(int64_t v) {
  int64_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}

/// A blocked layout for `shape`: size_per_thread `spt`, threads then warps filling the dims in
/// `order` (fastest first); the slowest dim takes the remaining lanes and warps.
LL blocked_for(const ir::Shape& shape, const std::vector<int32_t>& spt, const std::vector<int32_t>& order,
               int num_warps) {
  const int rank = static_cast<int>(shape.size());
  std::vector<int32_t> tpw(rank, 1), wpc(rank, 1);
  int64_t lanes_left = layout::kWarpSize, warps_left = num_warps, threads_left = int64_t{layout::kWarpSize} * num_warps;
  int64_t lanes_used = 1, warps_used = 1;
  for (int i = 0; i + 1 < rank; ++i) {
    int d = order[i];
    int64_t fit = std::max<int64_t>(1, shape[d] / spt[d]);           // threads this dim can use
    int64_t threads = std::clamp<int64_t>(threads_left, 1, fit);
    tpw[d] = static_cast<int32_t>(std::clamp<int64_t>(threads, 1, lanes_left));
    wpc[d] = static_cast<int32_t>(std::clamp<int64_t>(threads / tpw[d], 1, warps_left));
    lanes_left /= tpw[d];
    warps_left /= wpc[d];
    threads_left /= threads;
    lanes_used *= tpw[d];
    warps_used *= wpc[d];
  }
  tpw[order[rank - 1]] = static_cast<int32_t>(layout::kWarpSize / lanes_used);
  wpc[order[rank - 1]] = static_cast<int32_t>(num_warps / warps_used);
  return layout::blocked(shape, spt, tpw, wpc, order);
}

LL default_layout(const ir::Shape& shape, int num_warps) {
  return blocked_for(shape, std::vector<int32_t>(shape.size(), 1), layout::default_order(static_cast<int>(shape.size())),
                     num_warps);
}

struct Anchor {
  LL layout;
  axis::Info ptr;                   // facts of the pointer operand
  std::optional<axis::Info> mask;   // facts of the mask operand, if any
  // async_copy: facts of the destination pointers and of pad_shapes' "active" operand (taken
  // before the fix-up may replace the operands by conversions)
  std::optional<axis::Info> dst, active;
};

int mask_index(const Op& op) {
  switch (op.kind) {
    case OpKind::Load: return op.operands.size() > 1 ? 1 : -1;
    case OpKind::Store:
    case OpKind::AsyncCopy:
    case OpKind::AtomicRMW: return op.operands.size() > 2 ? 2 : -1;
    case OpKind::AtomicCas: return op.operands.size() > 3 ? 3 : -1;
    default: return -1;
  }
}

/// Vector width of a memory access in layout `l` with pointer facts `p`: the run of registers of
/// one thread along one dim d (reg bases 1, 2, 4, ... along d) that the pointer's contiguity and
/// alignment allow, at most 16 bytes. Also returns the mask's uniformity over that run.
std::pair<int64_t, int64_t> vector_width(const LL& l, const axis::Info& p, const std::optional<axis::Info>& mask,
                                         int elem_bytes) {
  if (!l.has_in_dim(layout::kReg) || l.num_regs() == 1) return {1, 1};
  const auto& regs = l.bases(layout::kReg);
  const int rank = l.num_out_dims();
  int d = -1;
  for (int k = 0; k < rank; ++k)
    if (regs[0][k] == 1) d = k;
  if (d < 0) return {1, 1};
  int bits = 0;
  for (size_t i = 0; i < regs.size(); ++i) {
    bool unit = true;
    for (int k = 0; k < rank; ++k) unit &= regs[i][k] == (k == d ? (1 << i) : 0);
    if (!unit) break;
    bits = static_cast<int>(i) + 1;
  }
  // Every other basis must move along d by multiples of the run, so runs start aligned.
  auto aligned = [&](int b) {
    int64_t mask_bits = (int64_t{1} << b) - 1;
    for (const std::string& in : l.in_dim_names())
      for (size_t i = 0; i < l.bases(in).size(); ++i) {
        if (in == layout::kReg && static_cast<int>(i) < b) continue;
        if (l.bases(in)[i][d] & mask_bits) return false;
      }
    return true;
  };
  while (bits > 0 && !aligned(bits)) --bits;
  int64_t vec = int64_t{1} << bits;
  vec = std::min(vec, pow2_floor(p.contig[d]));
  vec = std::min(vec, std::max<int64_t>(1, p.div[d] / elem_bytes));
  vec = std::min<int64_t>(vec, std::max(1, 16 / elem_bytes));
  vec = std::max<int64_t>(vec, 1);
  int64_t mvec = vec;
  if (mask) mvec = std::min(vec, pow2_floor(mask->cst[d]));
  return {vec, mvec};
}

class Assigner {
 public:
  /// Lays out the tiles under `root` (the function body, or one warp_specialize role) over
  /// num_warps warps.
  Assigner(ir::Function& f, Block& root, int num_warps, bool wgmma) : f_(f), root_(root), nw_(num_warps), wgmma_(wgmma) {}

  void run() {
    check_pow2(root_);
    info_ = axis::analyze(f_);
    collect_uses(root_);
    seed_set_layouts(root_);  // first: a set_layout used as a dot's acc keeps its layout (converted)
    seed_dots(root_);
    drain();  // accumulator and set_layout layouts reach their neighbours before the memory anchors
    seed_anchors(root_);
    drain();
    for (auto& [op, plan] : mma_plans_) {
      offer(op->operands[0], plan.a);
      offer(op->operands[1], plan.b);
    }
    for (auto& [op, plan] : wgmma_plans_)
      if (wgmma_a_in_registers(*op)) offer(op->operands[0], plan.a_regs);
    drain();
    defaults(root_);
    anchor_late_accesses();
    fix_block(root_);
    set_vec_attrs();
  }

  /// The convert_layout ops this root would need without the elimination above: forward layout
  /// inference only (anchors and dots give their results layouts, every other op takes its
  /// operands', values reached by nothing the default blocked layout), no layout offered back to
  /// operands, no rematerialization, no narrowing-cast sinking. Counts each (value, layout) pair
  /// once; changes nothing (the caller restores the layouts it sets).
  int count_forward_only() {
    forward_only_ = true;
    check_pow2(root_);
    info_ = axis::analyze(f_);
    collect_uses(root_);
    seed_set_layouts(root_);
    seed_dots(root_);
    seed_anchors(root_);
    infer_forward(root_);
    anchor_late_accesses();
    fix_block(root_);
    return static_cast<int>(dry_conversions_.size());
  }

 private:
  ir::Function& f_;
  Block& root_;
  int nw_;
  bool wgmma_;
  std::unordered_map<const Value*, axis::Info> info_;
  std::unordered_map<const Value*, std::vector<std::pair<Op*, unsigned>>> uses_;
  std::unordered_map<const Op*, Anchor> anchors_;
  std::vector<std::pair<Op*, MmaV2Plan>> mma_plans_;  // dots that may run on tensor cores, program order
  std::unordered_map<const Op*, size_t> mma_index_;    // dot -> its entry in mma_plans_
  std::unordered_map<const Op*, MmaV3Plan> wgmma_plans_;  // dots that may run on wgmma
  std::unordered_map<const Op*, LL> set_layouts_;         // gpu::set_layout ops and their layouts
  std::vector<Op*> late_accesses_;                        // anchored after propagation (anchor_late_accesses)
  std::deque<Value*> queue_;
  struct Cached {
    Value* value;
    Block* block;
  };
  std::unordered_map<const Value*, std::vector<Cached>> converted_;
  bool forward_only_ = false;  // count_forward_only: no propagation back, nothing inserted
  std::set<std::pair<const Value*, std::string>> dry_conversions_;

  static bool has(const Value* v) { return v->type.layout != nullptr; }
  static const LL& lay(const Value* v) { return v->type.layout->ll; }
  static void set(Value* v, const LL& l) { v->type.layout = ir::make_layout(l); }

  void offer(Value* v, const LL& l) {
    if (v->type.is_scalar() || has(v)) return;
    set(v, l);
    if (!forward_only_) queue_.push_back(v);
  }

  void collect_uses(Block& b) {
    for (auto& op : b.ops) {
      for (unsigned i = 0; i < op->operands.size(); ++i) uses_[op->operands[i]].push_back({op.get(), i});
      for (auto& r : op->regions) collect_uses(r->body());
    }
  }

  // ---------------------------------------------------------------- step 2: anchors
  LL coalesced(const Op& op, const axis::Info& p) {
    const ir::Type& pt = op.operands[0]->type;
    const int rank = pt.rank();
    std::vector<int32_t> order(rank);
    for (int i = 0; i < rank; ++i) order[i] = rank - 1 - i;
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p.contig[a] > p.contig[b]; });
    int eb = std::max(1, byte_size(pt.pointee));
    int64_t per_thread = std::max<int64_t>(1, pt.numel() / (int64_t{layout::kWarpSize} * nw_));
    int64_t fast = std::min({pow2_floor(p.contig[order[0]]), std::max<int64_t>(1, 16 / eb), per_thread});
    fast = std::min(fast, pt.shape[order[0]]);
    std::vector<int32_t> spt(rank, 1);
    spt[order[0]] = static_cast<int32_t>(fast);
    return blocked_for(pt.shape, spt, order, nw_);
  }

  /// Tensor-core dots claim their result and accumulator before the memory anchors.
  void seed_dots(Block& b) {
    for (auto& opp : b.ops) {
      Op& op = *opp;
      std::optional<MmaV3Plan> v3 = wgmma_ && op.kind == OpKind::Dot ? mma_v3_plan(op, nw_) : std::nullopt;
      if (v3) {
        offer(op.result(), v3->acc);
        if (!forward_only_) offer(op.operands[2], v3->acc);
        wgmma_plans_.emplace(&op, std::move(*v3));
      } else if (op.kind == OpKind::Dot)
        if (auto plan = mma_v2_plan(op, nw_)) {
          offer(op.result(), plan->acc);
          if (!forward_only_) offer(op.operands[2], plan->acc);
          mma_index_.emplace(&op, mma_plans_.size());
          mma_plans_.emplace_back(&op, std::move(*plan));
        }
      for (auto& r : op.regions) seed_dots(r->body());
    }
  }

  /// gpu::set_layout (TLE-Struct): the layout it asks for (blocked, mma accumulator, dot operand
  /// or a slice of one: gpu_rules::requested_layout) on the result, offered before anything else,
  /// so it spreads first and nothing overrides it; a mismatch with a neighbour's layout becomes a
  /// convert_layout in the fix-up. Its warps must be the launch's, its shape one the layout tiles
  /// (UserError at the call otherwise).
  void seed_set_layouts(Block& b) {
    for (auto& opp : b.ops) {
      Op& op = *opp;
      if (op.kind == OpKind::SetLayout && !op.result()->type.is_scalar()) {
        LL l = requested_layout(op, nw_, wgmma_);
        set_layouts_.emplace(&op, l);
        offer(op.result(), l);
      }
      for (auto& r : op.regions) seed_set_layouts(r->body());
    }
  }
  /// The layout a set_layout asks of memory op `op`'s access: its pointer is a set_layout's result,
  /// or its result's only use is one.
  const LL* requested_access(const Op& op) const {
    if (const Op* d = op.operands[0]->def; d && d->kind == OpKind::SetLayout) return &set_layouts_.at(d);
    if (op.results.size() == 1) {
      auto u = uses_.find(op.result());
      if (u != uses_.end() && u->second.size() == 1 && u->second[0].first->kind == OpKind::SetLayout)
        return &set_layouts_.at(u->second[0].first);
    }
    return nullptr;
  }

  void seed_anchors(Block& b) {
    std::vector<Op*> mem, requested;
    collect_memory_ops(b, mem);
    // Accesses of the program's shared buffers only are anchored last (anchor_late_accesses).
    // So is a store of a reduction's result (sum(x, 1), its mean, its cast): its value comes in a
    // slice layout, whose elements few threads hold; the pointers and mask are recomputed in it
    // (cheap), where a coalesced anchor would move the values through shared memory and a barrier
    // for a store of a few hundred bytes. Not in the elimination-off count (forward inference).
    std::erase_if(mem, [&](Op* op) {
      const PointerOrigin o = pointer_origin(op->operands[0]);
      const bool shared_only = !o.allocs.empty() && !o.global && !o.unknown && !requested_access(*op);
      const bool reduction_store = !forward_only_ && op->kind == OpKind::Store && !requested_access(*op) &&
                                   from_reduction(op->operands[1]);
      if (shared_only || reduction_store) late_accesses_.push_back(op);
      return shared_only || reduction_store;
    });
    for (Op* op : mem) {
      Anchor a{LL(), info_.at(op->operands[0]), std::nullopt};
      int mi = mask_index(*op);
      if (mi >= 0) a.mask = info_.at(op->operands[mi]);
      if (op->kind == OpKind::AsyncCopy) {
        a.dst = info_.at(op->operands[1]);
        if (op->operands.size() > 3) a.active = info_.at(op->operands[3]);
      }
      a.layout = coalesced(*op, a.ptr);
      // An access the program gave a layout (gpu::set_layout on its pointer or value) uses it.
      if (const LL* l = requested_access(*op)) a.layout = *l, requested.push_back(op);
      anchors_.emplace(op, std::move(a));
    }
    std::erase_if(mem, [&](Op* op) { return std::find(requested.begin(), requested.end(), op) != requested.end(); });
    // Memory ops on tiles of one shape share one layout: the one with the shortest contiguous run
    // per thread (e.g. a bf16 row loaded 8-wide and f32 weights loaded 4-wide both use 4), so the
    // values they exchange need no convert_layout (a shared-memory round trip) on the hot path.
    // Only anchors contiguous along the same dim are merged (a transpose keeps both coalesced).
    using Key = std::pair<ir::Shape, int>;
    auto key = [&](Op* op) { return Key(op->operands[0]->type.shape, fastest_dim(anchors_.at(op).layout)); };
    // A scattered access (its pointers not contiguous along that dim: a compaction's store at
    // cumsum positions, a gather) is served as well by any layout, so it votes only where no
    // contiguous access of that shape does (otherwise it would make a row's loads one element
    // per thread: 4-byte accesses, and for 16-bit types no cp.async pipelining).
    // (A tile of one element, whose layout moves along no dim, is not scattered.)
    auto scattered = [&](Op* op) {
      const Anchor& a = anchors_.at(op);
      const int fd = fastest_dim(a.layout);
      return fd >= 0 && a.ptr.contig[static_cast<size_t>(fd)] <= 1;
    };
    std::set<Key> has_contiguous;
    for (Op* op : mem)
      if (!scattered(op)) has_contiguous.insert(key(op));
    std::map<Key, const LL*> shortest;
    for (Op* op : mem) {
      if (scattered(op) && has_contiguous.count(key(op))) continue;
      const LL& l = anchors_.at(op).layout;
      auto [it, fresh] = shortest.emplace(key(op), &l);
      if (!fresh && contiguous_run(l) < contiguous_run(*it->second)) it->second = &l;
    }
    std::map<Key, LL> chosen;
    for (auto& [k, l] : shortest) chosen.emplace(k, *l);
    for (Op* op : mem) anchors_.at(op).layout = chosen.at(key(op));
    mem.insert(mem.end(), requested.begin(), requested.end());
    for (Op* op : mem) {
      const Anchor& a = anchors_.at(op);
      for (auto& r : op->results) offer(r.get(), a.layout);
      if (!forward_only_)
        for (Value* x : op->operands) offer(x, a.layout);
    }
  }

  /// count_forward_only's inference, in program order: a value nothing gave a layout takes one
  /// from its op's first tile operand that has one (elementwise and memory ops, scans: the same;
  /// shape ops: the derived layout; reduce: the slice; dot: its accumulator's; a loop's argument
  /// and result: its initial value's; an if's result: its first branch's), else the default.
  void infer_forward(Block& b) {
    auto give = [&](Value* v, const LL& l) {
      if (!v->type.is_scalar() && !has(v)) set(v, l);
    };
    auto give_default = [&](Value* v) {
      if (!v->type.is_scalar() && !has(v)) set(v, default_layout(v->type.shape, nw_));
    };
    for (auto& opp : b.ops) {
      Op& op = *opp;
      if (op.kind == OpKind::For)
        for (size_t i = 0; i + 3 < op.operands.size(); ++i)
          if (Value* x = op.operands[3 + i]; !x->type.is_scalar()) {
            give(op.region().body().arg(1 + static_cast<unsigned>(i)), lay(x));
            give(op.result(static_cast<unsigned>(i)), lay(x));
          }
      for (auto& reg : op.regions) {
        for (auto& a : reg->body().args) give_default(a.get());
        infer_forward(reg->body());
      }
      if (op.kind == OpKind::If)
        for (size_t i = 0; i < op.results.size() && !op.regions.empty(); ++i)
          if (Value* y = op.regions[0]->body().terminator()->operands[i]; !y->type.is_scalar())
            give(op.result(static_cast<unsigned>(i)), lay(y));
      Value* x = nullptr;
      for (Value* o : op.operands)
        if (!x && !o->type.is_scalar() && has(o)) x = o;
      if (x && !op.results.empty()) infer_result(op, x, give);
      for (auto& r : op.results) give_default(r.get());
    }
  }

  template <class Give> void infer_result(Op& op, Value* x, Give give) {
    const LL& l = lay(x);
    if (is_elementwise(op.kind) || is_memory(op.kind) || op.kind == OpKind::Scan ||
        op.kind == OpKind::HistogramRanks) {
      for (auto& r : op.results) give(r.get(), l);
      return;
    }
    if (auto fl = forward_layout(op, l)) {  // shape ops, reductions
      for (auto& res : op.results) give(res.get(), *fl);
      return;
    }
    Value* r = op.result();
    switch (op.kind) {
      case OpKind::Gather:
        if (x == op.operands[1]) give(r, l);
        break;
      case OpKind::InsertTile:
        if (x == op.operands[0]) give(r, l);
        break;
      case OpKind::Dot: give(r, lay(op.operands[2])); break;  // the accumulator has one: it precedes the dot
      default: break;
    }
  }

  void collect_memory_ops(Block& b, std::vector<Op*>& out) {
    for (auto& opp : b.ops) {
      if (is_memory(opp->kind) && !opp->operands[0]->type.is_scalar()) out.push_back(opp.get());
      for (auto& r : opp->regions) collect_memory_ops(r->body(), out);
    }
  }

  /// The dim a layout is contiguous along: that of the first register basis, else of the first
  /// lane basis; -1 if neither moves.
  static int fastest_dim(const LL& l) {
    for (const char* in : {layout::kReg, layout::kLane})
      for (const auto& b : l.bases(in))
        for (size_t d = 0; d < b.size(); ++d)
          if (b[d]) return static_cast<int>(d);
    return -1;
  }

  /// Elements of one thread that are consecutive along one dim from register 0 (1, 2, 4, ...).
  static int contiguous_run(const LL& l) {
    const auto& rb = l.bases(layout::kReg);
    int run = 1;
    for (size_t b = 0; b < rb.size(); ++b) {
      int nonzero = 0;
      bool unit = false;
      for (int32_t c : rb[b]) {
        nonzero += c != 0;
        unit = unit || c == run;
      }
      if (nonzero != 1 || !unit) break;
      run *= 2;
    }
    return run;
  }

  // ---------------------------------------------------------------- step 3: propagation
  void drain() {
    while (!queue_.empty()) {
      Value* v = queue_.front();
      queue_.pop_front();
      const LL& l = lay(v);
      if (v->def) from_result(*v->def, v, l);
      else from_block_arg(v, l);
      auto it = uses_.find(v);
      if (it != uses_.end())
        for (auto& [user, idx] : it->second) from_operand(*user, idx, l);
    }
  }

  void from_block_arg(Value* v, const LL& l) {
    Op* p = v->owner->parent_op();
    if (!p || p->kind != OpKind::For || v->index == 0) return;
    unsigned i = v->index - 1;
    offer(p->operands[3 + i], l);
    offer(p->result(i), l);
    offer(p->region().body().terminator()->operands[i], l);
  }

  void from_result(Op& op, Value* v, const LL& l) {
    if (is_elementwise(op.kind) || is_memory(op.kind)) {
      for (Value* x : op.operands) offer(x, l);
      return;
    }
    switch (op.kind) {
      case OpKind::Broadcast: case OpKind::ExpandDims: case OpKind::Reshape: case OpKind::Permute:
        if (!op.operands[0]->type.is_scalar() && !is_remap(op)) offer(op.operands[0], shape_op_operand_layout(op, l));
        break;
      case OpKind::Scan:  // all operands and results of a scan (of histogram_ranks) share one layout
      case OpKind::HistogramRanks:
        for (Value* x : op.operands) offer(x, l);
        for (auto& r : op.results) offer(r.get(), l);
        break;
      case OpKind::Gather: offer(op.operands[1], l); break;
      case OpKind::InsertTile:  // the result is x with a sub-tile replaced: one layout
        offer(op.operands[0], l);
        if (auto sl = subtile_layout(l, op.operands[1]->type.shape)) offer(op.operands[1], *sl);
        break;
      case OpKind::Dot: offer(op.operands[2], l); break;
      case OpKind::For: {
        unsigned i = v->index;
        offer(op.operands[3 + i], l);
        offer(op.region().body().arg(1 + i), l);
        offer(op.region().body().terminator()->operands[i], l);
        break;
      }
      case OpKind::If:
        for (auto& r : op.regions) offer(r->body().terminator()->operands[v->index], l);
        break;
      default: break;  // reduce (slice is not invertible), histogram, constant, arange, convert
    }
  }

  /// The layout an expand_dims, reshape, permute or reduce result takes from its operand's `l`
  /// (layout_rules' forward relations: insert_dim, reshape_tile, transpose_tile, slice); nullopt
  /// for other ops, a scalar result or a remapping reshape.
  static std::optional<LL> forward_layout(const Op& op, const LL& l) {
    if (op.results.empty() || op.result()->type.is_scalar()) return std::nullopt;
    switch (op.kind) {
      case OpKind::ExpandDims: return insert_dim(l, static_cast<int>(op.int_attr("axis")));
      case OpKind::Reshape:
        if (is_remap(op)) return std::nullopt;
        return layout::reshape_tile(l, op.result()->type.shape);
      case OpKind::Permute: {
        std::vector<int32_t> order;
        for (auto o : op.ints_attr("order")) order.push_back(static_cast<int32_t>(o));
        return layout::transpose_tile(l, order);
      }
      case OpKind::Reduce: return layout::slice(l, static_cast<int>(op.int_attr("axis")));
      default: return std::nullopt;
    }
  }

  void from_operand(Op& op, unsigned idx, const LL& l) {
    if (is_elementwise(op.kind) || is_memory(op.kind)) {
      for (auto& r : op.results) offer(r.get(), l);
      for (Value* x : op.operands) offer(x, l);
      return;
    }
    Value* r = op.results.empty() ? nullptr : op.result();
    switch (op.kind) {
      case OpKind::ExpandDims: case OpKind::Reshape: case OpKind::Permute:
        if (auto fl = forward_layout(op, l)) offer(r, *fl);
        break;
      case OpKind::Reduce:  // the operands share one layout, the results its slice
        for (Value* x : op.operands) offer(x, l);
        if (auto fl = forward_layout(op, l))
          for (auto& res : op.results) offer(res.get(), *fl);
        break;
      case OpKind::Scan:
      case OpKind::HistogramRanks:
        for (Value* x : op.operands) offer(x, l);
        for (auto& res : op.results) offer(res.get(), l);
        break;
      case OpKind::Gather:
        if (idx == 1) offer(r, l);
        break;
      case OpKind::ExtractTile:  // the sub-tile in x's registers, when x's layout allows it
        if (idx == 0)
          if (auto sl = subtile_layout(l, r->type.shape)) offer(r, *sl);
        break;
      case OpKind::InsertTile:
        if (idx == 0) {
          offer(r, l);
          if (auto sl = subtile_layout(l, op.operands[1]->type.shape)) offer(op.operands[1], *sl);
        }
        break;
      case OpKind::Dot:
        if (idx == 2) offer(r, l);
        break;
      case OpKind::Histogram:
        for (Value* x : op.operands) offer(x, l);
        break;
      case OpKind::For:
        if (idx >= 3) {
          unsigned i = idx - 3;
          offer(op.result(i), l);
          offer(op.region().body().arg(1 + i), l);
          offer(op.region().body().terminator()->operands[i], l);
        }
        break;
      case OpKind::Yield: {
        Op* p = op.parent->parent_op();
        if (!p) break;
        if (p->kind == OpKind::For) {
          offer(p->result(idx), l);
          offer(p->region().body().arg(1 + idx), l);
          offer(p->operands[3 + idx], l);
        } else if (p->kind == OpKind::If) {
          offer(p->result(idx), l);
          for (auto& reg : p->regions) offer(reg->body().terminator()->operands[idx], l);
        }
        break;
      }
      default: break;  // broadcast (not invertible), convert_layout
    }
  }

  void default_value(Value* v) {
    if (v->type.is_scalar() || has(v)) return;
    offer(v, default_layout(v->type.shape, nw_));
    drain();
  }
  void defaults(Block& b) {
    for (auto& a : b.args) default_value(a.get());
    for (auto& op : b.ops) {
      for (auto& r : op->results) default_value(r.get());
      for (auto& reg : op->regions) defaults(reg->body());
    }
  }

  /// A tile of rank >= 1 computed from a reduction's result by elementwise ops whose other operands
  /// are constants or broadcasts of one element (sum(x, 1) / n, cast<bf16>(max(x, 1))): it comes
  /// in the reduction's slice layout.
  static bool from_reduction(const Value* v) {
    if (v->type.is_scalar()) return false;
    for (int depth = 0; depth < 8 && v->def; ++depth) {
      const Op& d = *v->def;
      if (d.kind == OpKind::Reduce) return true;
      if (d.kind != OpKind::Cast && d.kind != OpKind::Unary && d.kind != OpKind::Binary && d.kind != OpKind::Select &&
          d.kind != OpKind::Fma)
        return false;
      const Value* next = nullptr;
      for (const Value* o : d.operands) {
        const Op* od = o->def;
        if (od && (od->kind == OpKind::Constant ||
                   (od->kind == OpKind::Broadcast && od->operands[0]->type.numel() == 1)))
          continue;
        if (next) return false;  // two tile operands
        next = o;
      }
      if (!next) return false;
      v = next;
    }
    return false;
  }

  /// Loads, stores and atomics of the program's shared buffers (TLE-Struct) seek no coalescing:
  /// shared memory is banked, not fetched in lines, and a buffer's layout (padding, swizzle) is
  /// the program's. They take the layout propagation gave their value - the user of a load (a
  /// transposed read keeps the layout its global store wants: no conversion after it), the
  /// producer of a stored tile - and vectorize as far as that layout and the address allow.
  /// Stores of a reduction's result (seed_anchors) are anchored here the same way.
  void anchor_late_accesses() {
    for (Op* op : late_accesses_) {
      Anchor a{LL(), info_.at(op->operands[0]), std::nullopt};
      const int mi = mask_index(*op);
      if (mi >= 0) a.mask = info_.at(op->operands[mi]);
      const Value* v = op->kind == OpKind::Store ? op->operands[1] : op->result();
      a.layout = has(v) ? lay(v) : lay(op->operands[0]);
      anchors_.emplace(op, std::move(a));
    }
  }

  // ---------------------------------------------------------------- step 4: fix-up
  static bool visible_from(const Block* def_block, const Block* at) {
    for (const Block* b = at; b;) {
      if (b == def_block) return true;
      const Op* p = b->parent_op();
      b = p ? p->parent : nullptr;
    }
    return false;
  }

  static bool cheap(const Op& op) {
    if (op.results.size() != 1 || !op.regions.empty() || is_remap(op)) return false;
    switch (op.kind) {
      case OpKind::Constant: case OpKind::Arange: case OpKind::Broadcast: case OpKind::ExpandDims:
      case OpKind::Reshape: case OpKind::Permute: case OpKind::Compare: case OpKind::Select:
      case OpKind::Cast: case OpKind::Bitcast: case OpKind::AddPtr: case OpKind::Hint:
        return true;
      case OpKind::Binary:
        return is_int(op.result()->type.dtype);
      default: return false;
    }
  }

  Value* insert_op(OpKind kind, std::vector<Value*> operands, ir::Type result, std::map<std::string, ir::Attr> attrs,
                   SrcLoc loc, Block& b, std::list<std::unique_ptr<Op>>::iterator pos) {
    auto op = std::make_unique<Op>();
    op->kind = kind;
    op->operands = std::move(operands);
    op->attrs = std::move(attrs);
    op->loc = loc;
    op->parent = &b;
    auto v = std::make_unique<Value>();
    v->type = std::move(result);
    v->def = op.get();
    v->index = 0;
    op->results.push_back(std::move(v));
    Value* r = op->result();
    b.ops.insert(pos, std::move(op));
    return r;
  }

  /// Recomputes x in layout `want` right before `pos` from values that already have the layouts
  /// they need; null if that takes a non-cheap op or more than the budget.
  Value* remat(Value* x, const LL& want, Block& b, std::list<std::unique_ptr<Op>>::iterator pos, int& budget) {
    if (x->type.is_scalar() || (has(x) && lay(x) == want)) return x;
    if (Value* c = lookup(x, want, b)) return c;
    if (!x->def || !cheap(*x->def) || --budget < 0) return nullptr;
    const Op& op = *x->def;
    std::vector<Value*> ops = op.operands;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i]->type.is_scalar()) continue;
      LL need = is_elementwise(op.kind) ? want : shape_op_operand_layout(op, want);
      ops[i] = remat(ops[i], need, b, pos, budget);
      if (!ops[i]) return nullptr;
    }
    ir::Type t = x->type;
    t.layout = ir::make_layout(want);
    Value* r = insert_op(op.kind, std::move(ops), std::move(t), op.attrs, op.loc, b, pos);
    converted_[x].push_back({r, &b});
    return r;
  }

  Value* lookup(Value* x, const LL& want, Block& b) {
    auto it = converted_.find(x);
    if (it == converted_.end()) return nullptr;
    for (auto& c : it->second)
      if (lay(c.value) == want && visible_from(c.block, &b)) return c.value;
    return nullptr;
  }

  /// x in layout `want`, usable right before `pos`.
  Value* materialize(Value* x, const LL& want, Block& b, std::list<std::unique_ptr<Op>>::iterator pos, SrcLoc loc) {
    if (x->type.is_scalar() || (has(x) && lay(x) == want)) return x;
    if (forward_only_) {
      dry_conversions_.emplace(x, ir::layout_str(*ir::make_layout(want)));
      return x;
    }
    if (Value* c = lookup(x, want, b)) return c;
    int budget = kRematBudget;
    if (Value* r = remat(x, want, b, pos, budget)) return r;
    ir::Type t = x->type;
    t.layout = ir::make_layout(want);
    Value* r = insert_op(OpKind::ConvertLayout, {x}, std::move(t), {}, loc, b, pos);
    converted_[x].push_back({r, &b});
    return r;
  }

  /// A cast to a narrower type whose operand has another layout than its result (e.g. the f32
  /// accumulator of a dot stored as bf16) casts in the operand's layout and converts the narrow
  /// result instead: the conversion moves half (or a quarter) of the bytes through shared memory.
  /// Rewrites `op` (at `pos` in `b`) and returns true when it applies.
  bool narrowing_cast_to_convert(Op& op, Block& b, std::list<std::unique_ptr<Op>>::iterator pos) {
    if (op.kind != OpKind::Cast || op.result()->type.is_scalar()) return false;
    Value* x = op.operands[0];
    Value* r = op.result();
    if (x->type.is_scalar() || !has(x) || !has(r) || lay(x) == lay(r)) return false;
    if (byte_size(r->type.dtype) >= byte_size(x->type.dtype) || r->type.dtype == DType::i1) return false;
    const LL want = lay(r);
    set(r, lay(x));
    ir::Type t = r->type;
    t.layout = ir::make_layout(want);
    Value* c = insert_op(OpKind::ConvertLayout, {r}, std::move(t), {}, op.loc, b, std::next(pos));
    ir::replace_all_uses(f_.entry(), r, c);
    c->def->operands[0] = r;
    converted_[r].push_back({c, &b});
    return true;
  }

  void fix_block(Block& b) {
    for (auto it = b.ops.begin(); it != b.ops.end(); ++it) {
      Op& op = **it;
      auto conv = [&](size_t i, const LL& want) {
        Value* x = op.operands[i];
        if (!x->type.is_scalar()) op.operands[i] = materialize(x, want, b, it, op.loc);
      };
      const bool tile_result = op.results.size() == 1 && !op.result()->type.is_scalar();
      if (!forward_only_ && narrowing_cast_to_convert(op, b, it)) {
        // the cast now runs in its operand's layout; a convert_layout after it carries the result
      } else if (is_elementwise(op.kind)) {
        if (tile_result)
          for (size_t i = 0; i < op.operands.size(); ++i) conv(i, lay(op.result()));
      } else if (is_memory(op.kind)) {
        auto a = anchors_.find(&op);
        if (a != anchors_.end()) {
          for (auto& r : op.results) set(r.get(), a->second.layout);
          for (size_t i = 0; i < op.operands.size(); ++i) conv(i, a->second.layout);
        }
      } else {
        switch (op.kind) {
          case OpKind::Broadcast: case OpKind::ExpandDims: case OpKind::Reshape: case OpKind::Permute:
            if (tile_result && !op.operands[0]->type.is_scalar() && !is_remap(op))
              conv(0, shape_op_operand_layout(op, lay(op.result())));
            break;
          case OpKind::Reduce:
            for (size_t i = 1; i < op.operands.size(); ++i) conv(i, lay(op.operands[0]));
            if (!op.result()->type.is_scalar()) {
              const LL sl = layout::slice(lay(op.operands[0]), static_cast<int>(op.int_attr("axis")));
              for (auto& r : op.results) set(r.get(), sl);
            }
            break;
          case OpKind::Scan:
          case OpKind::HistogramRanks:
            for (size_t i = 0; i < op.operands.size(); ++i) conv(i, lay(op.result()));
            for (auto& r : op.results) set(r.get(), lay(op.result()));
            break;
          case OpKind::Gather: conv(1, lay(op.result())); break;
          case OpKind::InsertTile: conv(0, lay(op.result())); break;  // the sub-tile: any layout
          case OpKind::Dot: {
            conv(2, lay(op.result()));
            if (auto w = wgmma_plans_.find(&op); w != wgmma_plans_.end()) {
              // b (and a loaded in this block): any layout, read from shared memory
              if (lay(op.result()) == w->second.acc && wgmma_a_in_registers(op)) conv(0, w->second.a_regs);
              break;
            }
            auto p = mma_index_.find(&op);
            if (p != mma_index_.end() && lay(op.result()) == mma_plans_[p->second].second.acc) {
              const MmaV2Plan& plan = mma_plans_[p->second].second;
              conv(0, plan.a);
              conv(1, plan.b);
            }
            break;
          }
          case OpKind::Histogram:
          case OpKind::Sort:  // the mask (pad_shapes) is read register by register with x
            if (op.operands.size() > 1) conv(1, lay(op.operands[0]));
            break;
          case OpKind::For:
            for (size_t i = 0; i < op.results.size(); ++i) {
              Value* arg = op.region().body().arg(1 + static_cast<unsigned>(i));
              if (arg->type.is_scalar()) continue;
              set(op.result(static_cast<unsigned>(i)), lay(arg));
              conv(3 + i, lay(arg));
            }
            break;
          case OpKind::Yield: {
            Op* p = b.parent_op();
            if (p && p->kind == OpKind::For) {
              for (size_t i = 0; i < op.operands.size(); ++i) {
                Value* arg = p->region().body().arg(1 + static_cast<unsigned>(i));
                if (!arg->type.is_scalar()) conv(i, lay(arg));
              }
            } else if (p && p->kind == OpKind::If) {
              for (size_t i = 0; i < op.operands.size(); ++i) {
                Value* r = p->result(static_cast<unsigned>(i));
                if (!r->type.is_scalar()) conv(i, lay(r));
              }
            }
            break;
          }
          default: break;
        }
      }
      for (auto& r : op.regions) fix_block(r->body());
    }
  }

  // ---------------------------------------------------------------- step 5: vector widths
  void set_vec_attrs() {
    ir::walk(root_, [&](Op& op) {
      if (!is_memory(op.kind)) return;
      int64_t vec = 1, mvec = 1;
      auto a = anchors_.find(&op);
      if (a != anchors_.end()) {
        int eb = std::max(1, byte_size(op.operands[0]->type.pointee));
        std::tie(vec, mvec) = vector_width(a->second.layout, a->second.ptr, a->second.mask, eb);
        if (a->second.dst) {  // an async_copy: one cp.async moves a vector of both pointer tiles
          const auto dst = vector_width(a->second.layout, *a->second.dst, a->second.mask, eb);
          vec = std::min(vec, dst.first), mvec = std::min(mvec, dst.second);
        }
        if (a->second.active)  // pad_shapes' "active" lanes: uniform over a vector too
          mvec = std::min(mvec, vector_width(a->second.layout, a->second.ptr, a->second.active, eb).second);
      }
      op.attrs["vec"] = vec;
      op.attrs["mask_vec"] = mvec;
    });
  }
};

}  // namespace

namespace {
/// Runs `each(root, warps)` on the function body, or on each role of a warp-specialized kernel
/// (its tiles are made in its roles, each spread over the role's warps).
template <class Each> void for_each_root(ir::Function& f, int num_warps, Each each) {
  if (num_warps < 1 || num_warps > 32 || !layout::is_pow2(num_warps))
    throw InternalError(fmt::format("assign_layouts: num_warps {} is not a power of two from 1 to 32", num_warps));
  if (const Op* ws = ir::find_warp_specialize(f)) {
    auto scalars_only = [](const Op& o) {
      for (auto& r : o.results)
        if (!r->type.is_scalar()) throw InternalError("assign_layouts: a warp-specialized kernel has a tile outside its roles");
    };
    for (auto& op : f.entry().ops) {
      if (op.get() == ws) continue;
      scalars_only(*op);
      for (auto& r : op->regions) ir::walk(static_cast<const Block&>(r->body()), scalars_only);
    }
    for (size_t r = 0; r < ws->regions.size(); ++r) each(ws->regions[r]->body(), static_cast<int>(ws->ints_attr("warps")[r]));
    return;
  }
  each(f.entry(), num_warps);
}

void values_of(Block& b, std::vector<Value*>& out) {
  for (auto& a : b.args) out.push_back(a.get());
  for (auto& op : b.ops) {
    for (auto& r : op->results) out.push_back(r.get());
    for (auto& reg : op->regions) values_of(reg->body(), out);
  }
}
}  // namespace

void assign_layouts(ir::Function& f, int num_warps, bool wgmma) {
  for_each_root(f, num_warps, [&](Block& root, int warps) { Assigner(f, root, warps, wgmma).run(); });
}

int count_conversions_without_elimination(ir::Function& f, int num_warps, bool wgmma) {
  std::vector<Value*> values;
  values_of(f.entry(), values);
  std::vector<std::shared_ptr<const ir::Layout>> saved;
  for (Value* v : values) saved.push_back(v->type.layout);
  auto restore = [&] {
    for (size_t i = 0; i < values.size(); ++i) values[i]->type.layout = saved[i];
  };
  int n = 0;
  try {
    for_each_root(f, num_warps, [&](Block& root, int warps) { n += Assigner(f, root, warps, wgmma).count_forward_only(); });
  } catch (...) {
    restore();
    throw;
  }
  restore();
  return n;
}

}  // namespace tle::passes
