// src/passes/expand_descriptors.cpp - rewrites tensor-descriptor accesses (desc_load,
// desc_store) into ordinary masked pointer loads and stores.
//
// A desc_load of block B at offsets o from a tensor with base p, shape S and strides T becomes
//   idx_d  = o_d + arange(0, B_d)                               (i64, per dimension)
//   in_d   = idx_d >= 0 && idx_d < S_d
//   ptr    = p + sum_d idx_d * T_d       (each term broadcast to B)
//   load(ptr, and_d in_d, other = 0)
// and a desc_store the matching masked store: elements outside the tensor read as zero and are
// not written, as TMA does (docs/ir.md, "Tensor descriptors"). The CPU backend and the
// interpreter's reference (which evaluates the ops itself) agree element by element.
//
// A tma_copy (gpu::copy from a descriptor into a buffer view, TLE-Struct) becomes the same masked
// load, a store through the view's pointer tile and an mbarrier_tx completing the block's bytes;
// with keep_tma it stays (the GPU pipeline, gpu_final, checks its alignment and drops the pointer
// tile: keep_tma_copy).
//
// Entry point (pass.hpp): expand_descriptors(f, keep_tma): every descriptor op, except, when
// keep_tma is set (GPU targets with TMA, sm_90), those whose block TMA takes (tma_block_ok) on a
// descriptor whose innermost extent is known to be a whole number of 16-byte chunks (the shape
// argument's divisibility, part of the launch's specialization): TMA stores write whole 16-byte
// chunks, so on a shorter last chunk they would overwrite what lies past the shape (measured on
// the H200: a row of 17 f32 written up to element 19), and whose innermost offset is known to be a
// multiple of 16 bytes (axis_info's divisibility: a box starting at f32 column -5 stopped the H200
// with an illegal instruction, at -4 it ran). In the GPU pipeline's final run (gpu_final) a
// desc_load outside every loop is expanded too when its descriptor is also loaded directly in a
// loop's body as a dot's operand (and never stored, nor loaded deeper in a loop): pipeline_loads
// pipelines a descriptor's loads all or none (its tensor map has one swizzle), so a peeled first
// iteration through TMA would keep the loop's loads from being pipelined.
#include <fmt/format.h>

#include <unordered_map>
#include <unordered_set>


#include "ir/builder.hpp"
#include "passes/gpu/axis_info.hpp"
#include "passes/pass.hpp"

namespace tle::passes {

namespace {
/// The largest block moved by TMA (its shared-memory buffer); larger ones use plain accesses,
/// which need no shared memory.
constexpr int64_t kMaxTmaBlockBytes = 64 * 1024;
}  // namespace

bool tma_block_ok(DType d, const std::vector<int64_t>& block) {
  if (block.empty() || block.size() > 5 || d == DType::i1 || d == DType::ptr) return false;
  for (int64_t b : block)
    if (b < 1 || b > 256 || (b & (b - 1)) != 0) return false;
  // cuTensorMapEncodeTiled: the innermost box dimension times the element size must be a
  // multiple of 16 bytes. The block is staged in shared memory: at most kMaxTmaBlockBytes.
  int64_t n = 1;
  for (int64_t b : block) n *= b;
  return (block.back() * byte_size(d)) % 16 == 0 && n * byte_size(d) <= kMaxTmaBlockBytes;
}

namespace {

using ir::Block;
using ir::Op;
using ir::OpKind;
using ir::Type;
using ir::Value;
using OpIter = std::list<std::unique_ptr<Op>>::iterator;

/// Creates ops right before a position of a block.
struct At {
  Block* blk;
  OpIter pos;
  SrcLoc loc;

  Op* op(OpKind k, std::vector<Value*> operands, std::vector<Type> results,
         std::map<std::string, ir::Attr> attrs = {}) const {
    ir::Builder b(blk);
    Op* o = b.create(k, std::move(operands), std::move(results), std::move(attrs), loc);
    blk->ops.splice(pos, blk->ops, std::prev(blk->ops.end()));
    return o;
  }
  Value* v(OpKind k, std::vector<Value*> operands, Type t, std::map<std::string, ir::Attr> attrs = {}) const {
    return op(k, std::move(operands), {std::move(t)}, std::move(attrs))->result();
  }
  Value* constant(Type t, ir::Attr value) const { return v(OpKind::Constant, {}, t, {{"value", value}}); }
  Value* binary(ir::BinaryOp o, Value* a, Value* b) const { return v(OpKind::Binary, {a, b}, a->type, {{"op", int64_t(o)}}); }
  Value* cmp(ir::CmpPred p, Value* a, Value* b) const {
    return v(OpKind::Compare, {a, b}, a->type.with_dtype(DType::i1), {{"pred", int64_t(p)}});
  }
  Value* cast(Value* x, DType d) const { return x->type.dtype == d ? x : v(OpKind::Cast, {x}, x->type.with_dtype(d)); }
  /// x (scalar or of rank r with the dims of `shape` or 1) reshaped to `like` rank and broadcast to shape.
  Value* reshape(Value* x, const ir::Shape& s) const {
    return x->type.shape == s ? x : v(OpKind::Reshape, {x}, x->type.with_shape(s));
  }
  Value* broadcast(Value* x, const ir::Shape& s) const {
    return x->type.shape == s ? x : v(OpKind::Broadcast, {x}, x->type.with_shape(s));
  }
  /// A scalar splat to shape s.
  Value* splat(Value* x, const ir::Shape& s) const { return broadcast(reshape(x, ir::Shape(s.size(), 1)), s); }
};

void expand(Block& blk, OpIter it) {
  Op& op = **it;
  At at{&blk, it, op.loc};
  const int64_t r = op.int_attr("rank");
  const bool store = op.kind == OpKind::DescStore;
  const bool tma_copy = op.kind == OpKind::TmaCopy;
  Value* base = op.operands[1];
  Type block_t = store ? op.operands[2 + 3 * r]->type : tma_copy ? op.operands.back()->type : op.result()->type;
  if (tma_copy) block_t = block_t.with_dtype(base->type.pointee);
  const ir::Shape& B = block_t.shape;
  Value* offset = nullptr;  // i64 [B]
  Value* mask = nullptr;    // i1 [B]
  for (int64_t d = 0; d < r; ++d) {
    const ir::Shape line = {B[d]};
    ir::Shape lifted(r, 1);
    lifted[d] = B[d];
    Value* idx = at.cast(at.v(OpKind::Arange, {}, ir::scalar_type(DType::i32).with_shape(line),
                              {{"start", int64_t(0)}, {"end", B[d]}}),
                         DType::i64);
    idx = at.binary(ir::BinaryOp::Add, idx, at.splat(at.cast(op.operands[2 + 2 * r + d], DType::i64), line));
    Value* lo = at.cmp(ir::CmpPred::Ge, idx, at.constant(ir::scalar_type(DType::i64).with_shape(line), int64_t(0)));
    Value* hi = at.cmp(ir::CmpPred::Lt, idx, at.splat(op.operands[2 + d], line));
    Value* in = at.binary(ir::BinaryOp::And, lo, hi);
    Value* term = at.binary(ir::BinaryOp::Mul, idx, at.splat(op.operands[2 + r + d], line));
    term = at.broadcast(at.reshape(term, lifted), B);
    in = at.broadcast(at.reshape(in, lifted), B);
    offset = offset ? at.binary(ir::BinaryOp::Add, offset, term) : term;
    mask = mask ? at.binary(ir::BinaryOp::And, mask, in) : in;
  }
  Value* ptr = at.v(OpKind::AddPtr, {at.splat(base, B), offset}, base->type.with_shape(B));
  if (store) {
    at.op(OpKind::Store, {ptr, op.operands[2 + 3 * r], mask}, {});
  } else {
    const DType d = block_t.dtype;
    Value* zero = at.constant(block_t, is_float(d) ? ir::Attr(0.0) : ir::Attr(int64_t(0)));
    Value* loaded = at.v(OpKind::Load, {ptr, mask, zero}, block_t);
    if (tma_copy) {  // into the view's element pointers, then the block's bytes complete on the mbarrier
      at.op(OpKind::Store, {op.operands.back(), loaded}, {});
      at.op(OpKind::MBarrierTx, {op.operands[3 + 3 * r]}, {},
            {{"bytes", block_t.numel() * byte_size(block_t.dtype)}});
    } else {
      ir::replace_all_uses(*op.parent, op.result(), loaded);
    }
  }
  blk.ops.erase(it);
}

/// A tma_copy kept for TMA on the GPU: its view pointer tile is dropped (the TMA lowering needs
/// only the view's start), after checking what TMA needs and the tracer could not know: the
/// view's start aligned to 128 bytes (8 swizzled rows when swizzled) and the innermost offset a multiple of
/// 16 bytes, both as axis_info proves them (UserError at the copy's line otherwise).
void keep_tma_copy(Op& op, const std::unordered_map<const Value*, axis::Info>& info) {
  const int64_t r = op.int_attr("rank");
  const DType d = op.operands[1]->type.pointee;
  // a swizzle runs over the address bits of 8 rows: its base must start a period (1024, 512 or 256)
  const int64_t align = op.int_attr("swizzle") ? 8 * op.int_attr("swizzle") : 128;
  auto it = info.find(op.operands.at(static_cast<size_t>(2 + 3 * r)));
  if (it == info.end() || it->second.div.empty() || it->second.div[0] % align != 0)
    throw UserError(op.loc, fmt::format("gpu::copy from a TensorDescriptor: TMA writes to shared memory aligned to {} "
                                        "bytes, and this view's start is not known to be (a stage of a buffer whose "
                                        "stages are a multiple of {} bytes apart)",
                                        align, align));
  auto o = info.find(op.operands.at(static_cast<size_t>(2 + 2 * r + r - 1)));
  if (o == info.end() || (o->second.div.at(0) * byte_size(d)) % 16 != 0)
    throw UserError(op.loc, fmt::format("gpu::copy from a TensorDescriptor: the innermost offset must be known to be a "
                                        "multiple of 16 bytes ({} elements; tle::multiple_of states it), as TMA needs",
                                        16 / byte_size(d)));
  if (op.operands.size() == static_cast<size_t>(5 + 3 * r)) op.operands.pop_back();
}

/// The descriptor of `op` has an innermost extent that is a multiple of 16 bytes (its shape
/// argument's divisibility says so).
bool inner_extent_16(const ir::Function& f, const Op& op, DType d) {
  const int64_t r = op.int_attr("rank");
  const Value* inner = op.operands.at(static_cast<size_t>(2 + r - 1));
  if (inner->def || inner->owner != &f.body.body() || inner->index >= f.arg_info.size()) return false;
  return (int64_t{f.arg_info[inner->index].divisibility} * byte_size(d)) % 16 == 0;
}

/// The innermost offset of `op` is a multiple of 16 bytes.
bool inner_offset_16(const std::unordered_map<const Value*, axis::Info>& info, const Op& op, DType d) {
  const int64_t r = op.int_attr("rank");
  auto it = info.find(op.operands.at(static_cast<size_t>(2 + 2 * r + r - 1)));
  return it != info.end() && (it->second.div.at(0) * byte_size(d)) % 16 == 0;
}

/// What expand_block needs besides the block.
struct Expansion {
  const std::unordered_map<const Value*, axis::Info>* info;  // null: expand every descriptor op
  bool gpu_final;
  std::unordered_set<const Value*> looped;  // (gpu_final) maps whose loop loads may be pipelined
};

bool expand_block(ir::Function& f, Block& blk, const Expansion& x, bool in_loop) {
  const auto* info = x.info;
  const bool gpu_final = x.gpu_final;
  bool changed = false;
  for (auto it = blk.ops.begin(); it != blk.ops.end();) {
    Op& op = **it;
    auto next = std::next(it);
    for (auto& reg : op.regions) changed |= expand_block(f, reg->body(), x, in_loop || op.kind == OpKind::For);
    if (op.kind == OpKind::TmaCopy) {
      if (!info) {
        expand(blk, it);
        changed = true;
      } else if (gpu_final) {
        keep_tma_copy(op, *info);
      }
      it = next;
      continue;
    }
    if (op.kind == OpKind::DescLoad || op.kind == OpKind::DescStore) {
      const int64_t r = op.int_attr("rank");
      const Type& t = op.kind == OpKind::DescStore ? op.operands[2 + 3 * r]->type : op.result()->type;
      // A desc_load before or after the loops of a descriptor also loaded in one (a peeled first
      // iteration) reads through pointers: the loop's loads may be pipelined into wgmma's
      // swizzled buffers, and the descriptor has one tensor map (pipeline_loads: all or none).
      const bool outside_loop = gpu_final && op.kind == OpKind::DescLoad && !in_loop && x.looped.count(op.operands[0]);
      if (outside_loop || !(info && tma_block_ok(t.dtype, t.shape) && inner_extent_16(f, op, t.dtype) &&
                            inner_offset_16(*info, op, t.dtype))) {
        expand(blk, it);
        changed = true;
      }
    }
    it = next;
  }
  return changed;
}

}  // namespace

bool expand_descriptors(ir::Function& f, bool keep_tma, bool gpu_final) {
  std::unordered_map<const Value*, axis::Info> info;
  if (keep_tma) info = axis::analyze(f);
  Expansion x{keep_tma ? &info : nullptr, gpu_final, {}};
  if (keep_tma && gpu_final) {
    // The descriptors pipeline_loads may pipeline once the outside loads are gone: loaded only
    // outside every loop or directly in a loop's body, never stored, and at least one loop load a
    // dot's operand (directly or transposed).
    std::unordered_map<const Value*, std::vector<const Op*>> users;
    std::unordered_map<const Value*, int> state;  // map -> 0 unknown, 1 candidate, -1 not
    ir::walk(f.entry(), [&](const Op& op) {
      for (const Value* v : op.operands) users[v].push_back(&op);
    });
    auto in_loop = [](const Op& op) {
      for (const Op* p = op.parent ? op.parent->parent_op() : nullptr; p; p = p->parent ? p->parent->parent_op() : nullptr)
        if (p->kind == OpKind::For) return true;
      return false;
    };
    auto dot_operand = [&](const Value* v) {
      for (const Op* u : users[v])
        if (u->kind == OpKind::Dot && (u->operands[0] == v || u->operands[1] == v)) return true;
      return false;
    };
    auto feeds_dot = [&](const Value* v) {  // directly or transposed
      if (dot_operand(v)) return true;
      for (const Op* u : users[v])
        if (u->kind == OpKind::Permute && dot_operand(u->result())) return true;
      return false;
    };
    ir::walk(f.entry(), [&](const Op& op) {
      if (op.kind != OpKind::DescLoad && op.kind != OpKind::DescStore) return;
      int& st = state[op.operands[0]];
      const bool direct = op.parent && op.parent->parent_op() && op.parent->parent_op()->kind == OpKind::For;
      if (op.kind == OpKind::DescStore || (in_loop(op) && !direct)) st = -1;
      else if (direct && st == 0 && feeds_dot(op.result())) st = 1;
    });
    for (auto& [map, st] : state)
      if (st == 1) x.looped.insert(map);
  }
  return expand_block(f, f.entry(), x, false);
}

}  // namespace tle::passes
