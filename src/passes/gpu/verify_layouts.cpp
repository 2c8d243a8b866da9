// src/passes/gpu/verify_layouts.cpp - checks the invariants of assign_layouts (gpu_passes.hpp).
#include <fmt/format.h>

#include "layout/ir_layout.hpp"
#include "layout/named_layouts.hpp"
#include "passes/gpu/gpu_passes.hpp"
#include "passes/gpu/layout_rules.hpp"

namespace tle::passes {
namespace {

using namespace gpu_rules;
using ir::Block;
using ir::Op;
using ir::OpKind;
using ir::Value;

struct Bad {
  const Op* op;
  std::string message;
};
[[noreturn]] void bad(const Op* op, std::string m) { throw Bad{op, std::move(m)}; }

class LayoutVerifier {
 public:
  explicit LayoutVerifier(int num_warps) : nw_(num_warps) {}

  void block(const Block& b, const Op* owner) {
    for (size_t i = 0; i < b.args.size(); ++i) value(owner, *b.args[i], fmt::format("block argument {}", i));
    for (auto& op : b.ops) {
      for (size_t i = 0; i < op->results.size(); ++i) value(op.get(), *op->results[i], fmt::format("result {}", i));
      relations(*op);
      if (op->kind == OpKind::WarpSpecialize) {  // each role's tiles span the role's warps
        const int outer = nw_;
        for (size_t r = 0; r < op->regions.size(); ++r) {
          nw_ = static_cast<int>(op->ints_attr("warps")[r]);
          block(op->regions[r]->body(), op.get());
        }
        nw_ = outer;
        continue;
      }
      for (auto& r : op->regions) block(r->body(), op.get());
    }
  }

 private:
  int nw_;

  void value(const Op* op, const Value& v, const std::string& what) {
    const ir::Type& t = v.type;
    if (t.is_scalar()) {
      if (t.layout) bad(op, what + " is a scalar with a layout");
      return;
    }
    if (!t.layout) bad(op, fmt::format("{} ({}) has no layout", what, t.str()));
    const LL& l = t.layout->ll;
    std::vector<std::string> ins = l.in_dim_names();
    if (ins != std::vector<std::string>{layout::kReg, layout::kLane, layout::kWarp, layout::kBlock})
      bad(op, fmt::format("{}: layout inputs must be reg, lane, warp, block:\n{}", what, l.str()));
    if (l.num_lanes() != layout::kWarpSize || l.num_blocks() != 1)
      bad(op, fmt::format("{}: layout must have 32 lanes and 1 block:\n{}", what, l.str()));
    if (nw_ <= 0) nw_ = l.num_warps();
    if (l.num_warps() != nw_) bad(op, fmt::format("{}: layout has {} warps, expected {}", what, l.num_warps(), nw_));
    const auto& outs = l.out_dims();
    bool ok = static_cast<int>(outs.size()) == t.rank();
    for (int d = 0; ok && d < t.rank(); ++d) ok = outs[d].name == layout::dim_name(d) && outs[d].size == t.shape[d];
    if (!ok) bad(op, fmt::format("{}: layout outputs do not match the shape {}:\n{}", what, t.str(), l.str()));
  }

  static const LL* lay(const Value* v) { return v->type.layout ? &v->type.layout->ll : nullptr; }

  static void same(const Op& op, const Value* x, const LL* want, const std::string& what) {
    if (x->type.is_scalar() || !want) return;
    if (!lay(x) || *lay(x) != *want)
      bad(&op, fmt::format("{} has layout\n{}\nbut needs\n{}", what, lay(x) ? lay(x)->str() : "(none)", want->str()));
  }

  void relations(const Op& op) {
    const bool multi = op.kind == OpKind::Reduce || op.kind == OpKind::Scan;  // several results: one layout
    const Value* r = op.results.size() == 1 || (multi && !op.results.empty()) ? op.result() : nullptr;
    const LL* rl = r ? lay(r) : nullptr;
    if (is_elementwise(op.kind)) {
      for (size_t i = 0; i < op.operands.size(); ++i) same(op, op.operands[i], rl, fmt::format("operand {}", i));
      return;
    }
    if (is_memory(op.kind)) {
      const LL* g = rl ? rl : lay(op.operands[0]);
      for (size_t i = 0; i < op.operands.size(); ++i) same(op, op.operands[i], g, fmt::format("operand {}", i));
      if (!op.has_attr("vec")) bad(&op, "memory op without a 'vec' attribute");
      return;
    }
    switch (op.kind) {
      case OpKind::Broadcast: case OpKind::ExpandDims: case OpKind::Reshape: case OpKind::Permute:
        if (rl && !op.operands[0]->type.is_scalar() && !is_remap(op)) {
          LL want = shape_op_operand_layout(op, *rl);
          same(op, op.operands[0], &want, "operand 0");
        }
        break;
      case OpKind::Reduce:
        for (size_t i = 1; i < op.operands.size(); ++i)
          same(op, op.operands[i], lay(op.operands[0]), fmt::format("operand {}", i));
        if (rl) {
          LL want = layout::slice(*lay(op.operands[0]), static_cast<int>(op.int_attr("axis")));
          for (size_t i = 0; i < op.results.size(); ++i)
            same(op, op.result(static_cast<unsigned>(i)), &want, fmt::format("result {}", i));
        }
        for (auto& reg : op.regions) scalars_only(reg->body());
        break;
      case OpKind::Scan:
        for (size_t i = 0; i < op.operands.size(); ++i) {
          same(op, op.operands[i], rl, fmt::format("operand {}", i));
          same(op, op.result(static_cast<unsigned>(i)), rl, fmt::format("result {}", i));
        }
        for (auto& reg : op.regions) scalars_only(reg->body());
        break;
      case OpKind::Gather: same(op, op.operands[1], rl, "the index"); break;
      case OpKind::HistogramRanks:
        for (size_t i = 0; i < op.operands.size(); ++i) same(op, op.operands[i], rl, fmt::format("operand {}", i));
        break;
      case OpKind::InsertTile: same(op, op.operands[0], rl, "the tile"); break;  // the sub-tile: any layout
      case OpKind::Dot: same(op, op.operands[2], rl, "the accumulator"); break;
      case OpKind::Histogram:
      case OpKind::Sort:
        if (op.operands.size() > 1) same(op, op.operands[1], lay(op.operands[0]), "the mask");
        break;
      case OpKind::For: {
        const Block& body = op.region().body();
        const Op* y = body.terminator();
        for (unsigned i = 0; i < op.results.size(); ++i) {
          const LL* a = lay(body.arg(1 + i));
          same(op, op.result(i), a, fmt::format("result {}", i));
          same(op, op.operands[3 + i], a, fmt::format("init {}", i));
          same(op, y->operands[i], a, fmt::format("yielded value {}", i));
        }
        break;
      }
      case OpKind::If:
        for (unsigned i = 0; i < op.results.size(); ++i)
          for (auto& reg : op.regions)
            same(op, reg->body().terminator()->operands[i], lay(op.result(i)), fmt::format("yielded value {}", i));
        break;
      default: break;
    }
  }

  static void scalars_only(const Block& b) {
    for (auto& a : b.args)
      if (!a->type.is_scalar()) bad(b.parent_op(), "a combine region argument is not a scalar");
    for (auto& op : b.ops)
      for (auto& r : op->results)
        if (!r->type.is_scalar()) bad(op.get(), "a combine region holds a tile");
  }
};

}  // namespace

void verify_layouts(const ir::Function& f, int num_warps) {
  try {
    LayoutVerifier(num_warps).block(f.entry(), nullptr);
  } catch (const Bad& e) {
    std::string where = "function";
    if (e.op) {
      where = fmt::format("'{}'", op_mnemonic(e.op->kind));
      if (e.op->loc.known()) where += fmt::format(" [traced at {}:{}]", e.op->loc.file, e.op->loc.line);
    }
    throw InternalError(fmt::format("GPU layout verifier: @{}: {}: {}\n{}", f.name, where, e.message, ir::print(f)));
  }
}

}  // namespace tle::passes
