// src/ir/verifier.cpp - structural and typing checks of the tile IR (rules: docs/ir.md).
//
// verify() walks the function once, keeping the set of values visible at each point (block
// arguments of the current and enclosing blocks, and results of ops earlier in them), and checks
// every op against its kind's operand/attribute/result/region rules. The first violation throws
// InternalError naming the op as the printer shows it (mnemonic, printed line, result number),
// followed by the printed function.
#include <fmt/format.h>

#include <cstdint>
#include <algorithm>
#include <unordered_set>

#include "ir/cuda_call.hpp"
#include "ir/inline_asm.hpp"
#include "ir/subtile.hpp"
#include "ir/printer.hpp"

namespace tle::ir {
namespace {

struct Failure {
  const Op* op;  // null: a function-level problem
  std::string message;
};

[[noreturn]] void fail(const Op* op, std::string message) { throw Failure{op, std::move(message)}; }

std::string ts(const Type& t) { return t.str(); }

class Verifier {
 public:
  void run(const Function& f) {
    const Block& entry = f.entry();
    if (entry.parent != &f.body) fail(nullptr, "function body block has a wrong parent region");
    if (f.body.parent) fail(nullptr, "function body region has a parent op");
    if (!f.arg_info.empty() && f.arg_info.size() != entry.args.size())
      fail(nullptr, fmt::format("arg_info has {} entries for {} arguments", f.arg_info.size(), entry.args.size()));
    for (size_t i = 0; i < entry.args.size(); ++i) check_arg(nullptr, entry, i);
    for (auto& a : entry.args) visible_.insert(a.get());
    if (Op* t = entry.terminator()) fail(t, "the function body must not end in yield");
    verify_block(entry);
  }

 private:
  std::unordered_set<const Value*> visible_;

  void check_type(const Op* op, const Type& t, const std::string& what) {
    for (auto d : t.shape)
      if (d <= 0) fail(op, fmt::format("{} has type {} with a dimension <= 0", what, ts(t)));
    if (t.dtype == DType::ptr && t.pointee == DType::ptr) fail(op, fmt::format("{} is a pointer to pointer", what));
  }

  void check_arg(const Op* op, const Block& b, size_t i) {
    const Value* a = b.args[i].get();
    if (!a) fail(op, "null block argument");
    if (a->def || a->owner != &b || a->index != i)
      fail(op, fmt::format("block argument {} has inconsistent owner/index", i));
    check_type(op, a->type, fmt::format("block argument {}", i));
  }

  void verify_block(const Block& b) {
    std::vector<const Value*> added;  // values made visible here, removed on exit (scoping)
    for (auto& a : b.args)
      if (visible_.insert(a.get()).second) added.push_back(a.get());
    for (auto it = b.ops.begin(); it != b.ops.end(); ++it) {
      const Op& op = **it;
      if (op.parent != &b) fail(&op, "op's parent pointer is not its block");
      if (op.kind == OpKind::Yield && std::next(it) != b.ops.end()) fail(&op, "yield is not the last op of its block");
      for (size_t i = 0; i < op.operands.size(); ++i) {
        const Value* v = op.operands[i];
        if (!v) fail(&op, fmt::format("operand {} is null", i));
        if (!visible_.count(v))
          fail(&op, fmt::format("operand {} does not dominate its use (defined later, in a nested region, "
                                "or not in this function)", i));
      }
      for (size_t i = 0; i < op.results.size(); ++i) {
        const Value* r = op.results[i].get();
        if (!r || r->def != &op || r->owner || r->index != i)
          fail(&op, fmt::format("result {} has inconsistent def/index", i));
        check_type(&op, r->type, fmt::format("result {}", i));
      }
      for (size_t i = 0; i < op.operands.size(); ++i) check_type(&op, op.operands[i]->type, fmt::format("operand {}", i));
      for (size_t r = 0; r < op.regions.size(); ++r) {
        const Region* reg = op.regions[r].get();
        if (!reg || !reg->block) fail(&op, fmt::format("region {} is empty", r));
        if (reg->parent != &op || reg->block->parent != reg) fail(&op, fmt::format("region {} has wrong parents", r));
        const Block& body = reg->body();
        for (size_t i = 0; i < body.args.size(); ++i) check_arg(&op, body, i);
        if (!body.terminator()) fail(&op, fmt::format("region {} does not end in yield", r));
      }
      check_op(op);
      for (auto& reg : op.regions) verify_block(reg->body());
      for (auto& r : op.results)
        if (visible_.insert(r.get()).second) added.push_back(r.get());
    }
    for (auto* v : added) visible_.erase(v);
  }

  // ---- per-kind rules
  static void n_operands(const Op& op, size_t lo, size_t hi) {
    if (op.operands.size() < lo || op.operands.size() > hi) {
      if (lo == hi) fail(&op, fmt::format("expects {} operands, has {}", lo, op.operands.size()));
      fail(&op, fmt::format("expects {} to {} operands, has {}", lo, hi, op.operands.size()));
    }
  }
  static void n_results(const Op& op, size_t n) {
    if (op.results.size() != n) fail(&op, fmt::format("expects {} results, has {}", n, op.results.size()));
  }
  static void n_regions(const Op& op, size_t n) {
    if (op.regions.size() != n) fail(&op, fmt::format("expects {} regions, has {}", n, op.regions.size()));
  }
  static const Type& in(const Op& op, size_t i) { return op.operands[i]->type; }
  static const Type& out(const Op& op, size_t i = 0) { return op.results[i]->type; }
  static int64_t int_attr(const Op& op, const char* k) {
    auto it = op.attrs.find(k);
    if (it == op.attrs.end() || !std::holds_alternative<int64_t>(it->second))
      fail(&op, fmt::format("missing integer attribute '{}'", k));
    return std::get<int64_t>(it->second);
  }
  static const std::vector<int64_t>& ints_attr(const Op& op, const char* k) {
    auto it = op.attrs.find(k);
    if (it == op.attrs.end() || !std::holds_alternative<std::vector<int64_t>>(it->second))
      fail(&op, fmt::format("missing int-list attribute '{}'", k));
    return std::get<std::vector<int64_t>>(it->second);
  }
  static void opt_int_attr(const Op& op, const char* k) {
    auto it = op.attrs.find(k);
    if (it != op.attrs.end() && !std::holds_alternative<int64_t>(it->second))
      fail(&op, fmt::format("attribute '{}' must be an integer", k));
  }
  static void opt_str_attr(const Op& op, const char* k) {
    auto it = op.attrs.find(k);
    if (it != op.attrs.end() && !std::holds_alternative<std::string>(it->second))
      fail(&op, fmt::format("attribute '{}' must be a string", k));
  }
  static int64_t enum_attr(const Op& op, const char* k, int64_t count) {
    int64_t v = int_attr(op, k);
    if (v < 0 || v >= count) fail(&op, fmt::format("attribute '{}' = {} is not a valid enumerator", k, v));
    return v;
  }
  static void same_type(const Op& op, const Type& a, const Type& b, const std::string& what) {
    if (a != b) fail(&op, fmt::format("{}: {} vs {}", what, ts(a), ts(b)));
  }
  // The type without its layout: shape ops and reductions change the layout with the shape (GPU
  // path; the relations are checked by passes::verify_layouts).
  static Type bare(Type t) {
    t.layout.reset();
    return t;
  }
  static void same_shape(const Op& op, const Type& a, const Type& b, const std::string& what) {
    if (a.shape != b.shape) fail(&op, fmt::format("{}: shapes {} vs {}", what, ts(a), ts(b)));
  }
  static void is_mask(const Op& op, size_t i, const Type& like) {
    if (in(op, i).dtype != DType::i1) fail(&op, fmt::format("mask operand {} must be i1, is {}", i, ts(in(op, i))));
    same_shape(op, in(op, i), like, "mask shape differs from the pointer shape");
  }
  static void is_ptr(const Op& op, size_t i) {
    if (in(op, i).dtype != DType::ptr) fail(&op, fmt::format("operand {} must be a pointer, is {}", i, ts(in(op, i))));
  }
  // The value type addressed by pointer tile `p`: its pointee with p's shape.
  static Type pointee_type(const Type& p) {
    Type t = p;
    t.dtype = p.pointee;
    return t;
  }
  static void yields(const Op& op, size_t r, const std::vector<Type>& want) {
    const Op* y = op.regions[r]->body().terminator();
    if (y->operands.size() != want.size())
      fail(&op, fmt::format("region {} yields {} values, expected {}", r, y->operands.size(), want.size()));
    for (size_t i = 0; i < want.size(); ++i)
      if (y->operands[i]->type != want[i])
        fail(&op, fmt::format("region {} yield value {} has type {}, expected {}", r, i, ts(y->operands[i]->type),
                              ts(want[i])));
    if (!y->results.empty() || !y->attrs.empty() || !y->regions.empty()) fail(y, "yield has results, attributes or regions");
  }
  // A combine body: block args (acc, next), scalars of dtype d, yielding one scalar of dtype d.
  /// A combine region of a reduce/scan over n operands: 2n scalar args (the left values a_0..a_{n-1},
  /// then the right values b_0..b_{n-1}, of the operands' dtypes), yielding n scalars of those dtypes.
  static void combine_region(const Op& op) {
    n_regions(op, 1);
    const Block& b = op.regions[0]->body();
    const size_t n = op.operands.size();
    std::vector<Type> want;
    for (size_t i = 0; i < n; ++i) {
      Type s;
      s.dtype = in(op, i).dtype;
      want.push_back(s);
    }
    bool ok = b.args.size() == 2 * n;
    for (size_t i = 0; ok && i < 2 * n; ++i) ok = b.args[i]->type == want[i % n];
    if (!ok)
      fail(&op, fmt::format("combine region must take {} scalars (left then right values of the operands' dtypes)",
                            2 * n));
    yields(op, 0, want);
  }
  /// Operands and results of a reduce/scan: one operand unless kind is combine (1 or more, one
  /// result each, all operands of one shape).
  static void reduce_operands(const Op& op, bool combine) {
    n_operands(op, 1, combine ? SIZE_MAX : 1);
    n_results(op, op.operands.size());
    for (size_t i = 0; i < op.operands.size(); ++i) {
      if (i > 0) same_shape(op, in(op, 0), in(op, i), fmt::format("operand {}", i));
      if (in(op, i).dtype == DType::ptr) fail(&op, "reduction or scan of pointers");
    }
  }

  /// fp8 is a storage type (docs/ir.md "Element types"): only data movement and casts take it.
  static void no_fp8(const Op& op, DType d, const char* what) {
    if (is_fp8(d)) fail(&op, fmt::format("{} on {} (fp8 is a storage type: cast first)", what, dtype_name(d)));
  }

  static void check_op(const Op& op) {
    if (op.kind != OpKind::Reduce && op.kind != OpKind::Scan && op.kind != OpKind::For && op.kind != OpKind::If &&
        op.kind != OpKind::WarpSpecialize)
      n_regions(op, 0);
    switch (op.kind) {
      case OpKind::Constant: {
        n_operands(op, 0, 0);
        n_results(op, 1);
        auto it = op.attrs.find("value");
        if (it == op.attrs.end()) fail(&op, "missing attribute 'value'");
        DType d = out(op).dtype;
        if (is_float(d) && !std::holds_alternative<double>(it->second))
          fail(&op, "a float constant's value must be a double attribute");
        if (!is_float(d) && !std::holds_alternative<int64_t>(it->second))
          fail(&op, "an integer or pointer constant's value must be an int64 attribute");
        break;
      }
      case OpKind::Arange: {
        n_operands(op, 0, 0);
        n_results(op, 1);
        int64_t s = int_attr(op, "start"), e = int_attr(op, "end");
        if (e <= s) fail(&op, fmt::format("end {} must exceed start {}", e, s));
        if (out(op).dtype != DType::i32 || out(op).shape != Shape{e - s})
          fail(&op, fmt::format("result must be i32[{}], is {}", e - s, ts(out(op))));
        break;
      }
      case OpKind::ProgramId:
      case OpKind::NumPrograms: {
        n_operands(op, 0, 0);
        n_results(op, 1);
        int64_t a = int_attr(op, "axis");
        if (a < 0 || a > 2) fail(&op, fmt::format("axis {} is not 0, 1 or 2", a));
        if (out(op).dtype != DType::i32 || !out(op).is_scalar()) fail(&op, "result must be an i32 scalar");
        break;
      }
      case OpKind::Broadcast: {
        n_operands(op, 1, 1);
        n_results(op, 1);
        const Type &x = in(op, 0), &r = out(op);
        same_type(op, bare(x.with_shape(r.shape)), bare(r), "result element type differs from the operand's");
        if (x.rank() != r.rank()) fail(&op, fmt::format("rank of {} differs from result {}", ts(x), ts(r)));
        for (int i = 0; i < x.rank(); ++i)
          if (x.shape[i] != 1 && x.shape[i] != r.shape[i])
            fail(&op, fmt::format("cannot broadcast {} to {} (dim {})", ts(x), ts(r), i));
        break;
      }
      case OpKind::ExpandDims: {
        n_operands(op, 1, 1);
        n_results(op, 1);
        const Type &x = in(op, 0), &r = out(op);
        int64_t a = int_attr(op, "axis");
        if (a < 0 || a > x.rank()) fail(&op, fmt::format("axis {} out of range for {}", a, ts(x)));
        Shape s = x.shape;
        s.insert(s.begin() + a, 1);
        same_type(op, bare(x.with_shape(s)), bare(r), "result type");
        break;
      }
      case OpKind::Reshape: {
        n_operands(op, 1, 1);
        n_results(op, 1);
        const Type &x = in(op, 0), &r = out(op);
        same_type(op, bare(x.with_shape(r.shape)), bare(r), "result element type differs from the operand's");
        if (op.has_attr("real_in") || op.has_attr("real_out")) {
          // A remapping reshape of padded tiles (GPU pass pad_shapes): the real shapes reshape, and
          // each type is its real shape padded to powers of two.
          const Shape &ri = ints_attr(op, "real_in"), &ro = ints_attr(op, "real_out");
          auto numel = [](const Shape& s) {
            int64_t n = 1;
            for (auto d : s) n *= d;
            return n;
          };
          auto pads_to = [](const Shape& real, const Shape& p) {
            if (real.size() != p.size()) return false;
            for (size_t i = 0; i < p.size(); ++i)
              if (real[i] < 1 || p[i] < real[i] || (p[i] & (p[i] - 1)) || p[i] >= 2 * real[i]) return false;
            return true;
          };
          if (numel(ri) != numel(ro) || !pads_to(ri, x.shape) || !pads_to(ro, r.shape))
            fail(&op, fmt::format("remapping reshape: real shapes [{}] -> [{}] do not fit {} -> {}", fmt::join(ri, ","),
                                  fmt::join(ro, ","), ts(x), ts(r)));
        } else if (x.numel() != r.numel()) {
          fail(&op, fmt::format("cannot reshape {} to {}", ts(x), ts(r)));
        }
        break;
      }
      case OpKind::Permute: {
        n_operands(op, 1, 1);
        n_results(op, 1);
        const Type &x = in(op, 0), &r = out(op);
        auto it = op.attrs.find("order");
        if (it == op.attrs.end() || !std::holds_alternative<std::vector<int64_t>>(it->second))
          fail(&op, "missing int-list attribute 'order'");
        const auto& order = std::get<std::vector<int64_t>>(it->second);
        if (static_cast<int>(order.size()) != x.rank()) fail(&op, "order length differs from the operand rank");
        std::vector<bool> seen(order.size());
        Shape s;
        for (auto o : order) {
          if (o < 0 || o >= x.rank() || seen[o]) fail(&op, "order is not a permutation");
          seen[o] = true;
          s.push_back(x.shape[o]);
        }
        same_type(op, bare(x.with_shape(s)), bare(r), "result type");
        break;
      }
      case OpKind::Binary: {
        n_operands(op, 2, 2);
        n_results(op, 1);
        auto b = static_cast<BinaryOp>(enum_attr(op, "op", 14));
        same_type(op, in(op, 0), out(op), "lhs type differs from the result");
        same_type(op, in(op, 1), out(op), "rhs type differs from the result");
        DType d = out(op).dtype;
        if (d == DType::ptr) fail(&op, "arithmetic on pointers (use addptr)");
        no_fp8(op, d, "arithmetic");
        bool bits = b == BinaryOp::And || b == BinaryOp::Or || b == BinaryOp::Xor || b == BinaryOp::Shl ||
                    b == BinaryOp::Shr;
        if (bits && !is_int(d)) fail(&op, fmt::format("{} needs integer operands, has {}", name(b), dtype_name(d)));
        if ((b == BinaryOp::Pow || b == BinaryOp::Atan2) && !is_float(d))
          fail(&op, fmt::format("{} needs float operands, has {}", name(b), dtype_name(d)));
        break;
      }
      case OpKind::Compare: {
        n_operands(op, 2, 2);
        n_results(op, 1);
        enum_attr(op, "pred", 6);
        same_type(op, in(op, 0), in(op, 1), "compared operands differ");
        no_fp8(op, in(op, 0).dtype, "comparison");
        same_type(op, in(op, 0).with_dtype(DType::i1), out(op), "result must be i1 of the operand shape");
        break;
      }
      case OpKind::Unary: {
        n_operands(op, 1, 1);
        n_results(op, 1);
        auto u = static_cast<UnaryOp>(enum_attr(op, "op", int64_t(UnaryOp::Rint) + 1));  // Rint: the last
        same_type(op, in(op, 0), out(op), "result type differs from the operand");
        DType d = out(op).dtype;
        if (d == DType::ptr) fail(&op, "arithmetic on pointers");
        no_fp8(op, d, "arithmetic");
        if (u == UnaryOp::Not && !is_int(d)) fail(&op, "not needs an integer operand");
        if (u != UnaryOp::Not && u != UnaryOp::Neg && u != UnaryOp::Abs && !is_float(d))
          fail(&op, fmt::format("{} needs a float operand, has {}", name(u), dtype_name(d)));
        break;
      }
      case OpKind::Fma: {
        n_operands(op, 3, 3);
        n_results(op, 1);
        for (size_t i = 0; i < 3; ++i) same_type(op, in(op, i), out(op), fmt::format("operand {} type differs", i));
        if (!is_float(out(op).dtype)) fail(&op, "fma needs float operands");
        no_fp8(op, out(op).dtype, "fma");
        break;
      }
      case OpKind::Select: {
        n_operands(op, 3, 3);
        n_results(op, 1);
        if (in(op, 0).dtype != DType::i1) fail(&op, fmt::format("condition must be i1, is {}", ts(in(op, 0))));
        same_shape(op, in(op, 0), out(op), "condition shape differs from the result");
        same_type(op, in(op, 1), out(op), "true value type differs from the result");
        same_type(op, in(op, 2), out(op), "false value type differs from the result");
        break;
      }
      case OpKind::Cast: {
        n_operands(op, 1, 1);
        n_results(op, 1);
        same_shape(op, in(op, 0), out(op), "cast changes the shape");
        if (in(op, 0).dtype == DType::ptr || out(op).dtype == DType::ptr) fail(&op, "cast of pointers (use bitcast)");
        break;
      }
      case OpKind::Bitcast: {
        n_operands(op, 1, 1);
        n_results(op, 1);
        same_shape(op, in(op, 0), out(op), "bitcast changes the shape");
        DType a = in(op, 0).dtype, b = out(op).dtype;
        if (a == DType::i1 || b == DType::i1 || a == DType::ptr || b == DType::ptr || bit_width(a) != bit_width(b))
          fail(&op, fmt::format("bitcast {} -> {} changes the bit width or involves i1 or ptr", dtype_name(a),
                                dtype_name(b)));
        break;
      }
      case OpKind::AddPtr: {
        n_operands(op, 2, 2);
        n_results(op, 1);
        is_ptr(op, 0);
        if (!is_int(in(op, 1).dtype) || in(op, 1).dtype == DType::i1)
          fail(&op, fmt::format("offset must be an integer, is {}", ts(in(op, 1))));
        same_shape(op, in(op, 0), in(op, 1), "offset shape differs from the pointer shape");
        same_type(op, in(op, 0), out(op), "result type differs from the pointer");
        break;
      }
      case OpKind::ConvertLayout: {
        n_operands(op, 1, 1);
        n_results(op, 1);
        if (in(op, 0).dtype != out(op).dtype || in(op, 0).shape != out(op).shape)
          fail(&op, "convert_layout changes the dtype or the shape");
        if (!out(op).layout) fail(&op, "convert_layout result has no layout");
        break;
      }
      case OpKind::CudaCall: {
        for (const char* k : {"source", "options", "file", "name"}) {
          auto it = op.attrs.find(k);
          if (it == op.attrs.end() || !std::holds_alternative<std::string>(it->second))
            fail(&op, fmt::format("missing string attribute '{}'", k));
        }
        if (op.str_attr("name").empty()) fail(&op, "empty function name");
        auto kit = op.attrs.find("kinds");
        if (kit == op.attrs.end() || !std::holds_alternative<std::vector<int64_t>>(kit->second))
          fail(&op, "missing attribute 'kinds' (one per operand)");
        const auto& kinds = std::get<std::vector<int64_t>>(kit->second);
        if (kinds.size() != op.operands.size()) fail(&op, "'kinds' has not one entry per operand");
        const int64_t ret = int_attr(op, "ret");
        if (ret != 0 && ret != 1) fail(&op, "ret must be 0 or 1");
        size_t nres = static_cast<size_t>(ret);
        for (size_t i = 0; i < kinds.size(); ++i) {
          std::string why = check_cuda_operand(in(op, i), kinds[i]);
          if (!why.empty()) fail(&op, fmt::format("operand {}: {}", i, why));
          if (kinds[i] == kCudaInOut) ++nres;
        }
        n_results(op, nres);
        if (ret) {
          if (!out(op).is_scalar()) fail(&op, "the return value must be a scalar");
          std::string why = check_cuda_return(out(op).dtype);
          if (!why.empty()) fail(&op, why);
        }
        size_t r = static_cast<size_t>(ret);
        for (size_t i = 0; i < kinds.size(); ++i)
          if (kinds[i] == kCudaInOut) {
            if (out(op, r).dtype != in(op, i).dtype || out(op, r).shape != in(op, i).shape)
              fail(&op, fmt::format("result {} differs from its inout operand {}", r, i));
            ++r;
          }
        break;
      }
      case OpKind::InlineAsm: {
        n_results(op, 1);
        if (op.operands.empty()) fail(&op, "inline_asm needs at least one operand");
        std::vector<DType> ds;
        for (size_t i = 0; i < op.operands.size(); ++i) {
          same_shape(op, in(op, i), out(op), fmt::format("operand {} shape differs from the result", i));
          ds.push_back(in(op, i).dtype);
        }
        for (const char* k : {"asm", "constraints"}) {
          auto it = op.attrs.find(k);
          if (it == op.attrs.end() || !std::holds_alternative<std::string>(it->second))
            fail(&op, fmt::format("missing string attribute '{}'", k));
        }
        int64_t pure = int_attr(op, "pure");
        if (pure != 0 && pure != 1) fail(&op, "pure must be 0 or 1");
        std::string why = check_inline_asm(op.str_attr("asm"), op.str_attr("constraints"), out(op).dtype, ds,
                                           int_attr(op, "pack"));
        if (!why.empty()) fail(&op, why);
        break;
      }
      case OpKind::Hint: {
        n_operands(op, 1, 1);
        n_results(op, 1);
        same_type(op, in(op, 0), out(op), "result type differs from the operand");
        opt_int_attr(op, "multiple_of");
        opt_int_attr(op, "max_contiguous");
        break;
      }
      case OpKind::Load: {
        n_operands(op, 1, 3);
        n_results(op, 1);
        is_ptr(op, 0);
        same_type(op, pointee_type(in(op, 0)), out(op), "result type is not the pointee type");
        if (op.operands.size() > 1) is_mask(op, 1, in(op, 0));
        if (op.operands.size() > 2) same_type(op, in(op, 2), out(op), "'other' type differs from the result");
        opt_str_attr(op, "cache");
        opt_str_attr(op, "evict");
        opt_int_attr(op, "volatile");
        break;
      }
      case OpKind::Store: {
        n_operands(op, 2, 3);
        n_results(op, 0);
        is_ptr(op, 0);
        same_type(op, in(op, 1), pointee_type(in(op, 0)), "stored value type is not the pointee type");
        if (op.operands.size() > 2) is_mask(op, 2, in(op, 0));
        opt_str_attr(op, "cache");
        opt_str_attr(op, "evict");
        break;
      }
      case OpKind::DescLoad:
      case OpKind::DescStore: {
        const int64_t r = int_attr(op, "rank");
        if (r < 1 || r > 5) fail(&op, "rank must be 1 to 5");
        const bool store = op.kind == OpKind::DescStore;
        n_operands(op, 2 + 3 * r + store, 2 + 3 * r + store);
        n_results(op, store ? 0 : 1);
        const Type& map = in(op, 0);
        if (map.dtype != DType::ptr || !map.is_scalar()) fail(&op, "operand 0 (the tensor map) must be a scalar pointer");
        is_ptr(op, 1);
        if (!in(op, 1).is_scalar()) fail(&op, "operand 1 (the base) must be a scalar pointer");
        for (int64_t i = 2; i < 2 + 2 * r; ++i)
          if (in(op, i).dtype != DType::i64 || !in(op, i).is_scalar()) fail(&op, "shape and strides must be i64 scalars");
        for (int64_t i = 2 + 2 * r; i < 2 + 3 * r; ++i)
          if (in(op, i).dtype != DType::i32 || !in(op, i).is_scalar()) fail(&op, "offsets must be i32 scalars");
        const Type& block = store ? in(op, 2 + 3 * r) : out(op);
        if (block.dtype != in(op, 1).pointee) fail(&op, "the block's dtype is not the base's pointee");
        if (block.rank() != r) fail(&op, "the block's rank is not the descriptor's");
        break;
      }
      case OpKind::AtomicRMW: {
        n_operands(op, 2, 3);
        n_results(op, 1);
        is_ptr(op, 0);
        enum_attr(op, "op", 7);
        same_type(op, in(op, 1), pointee_type(in(op, 0)), "value type is not the pointee type");
        same_type(op, out(op), in(op, 1), "result type differs from the value type");
        if (op.operands.size() > 2) is_mask(op, 2, in(op, 0));
        break;
      }
      case OpKind::AtomicCas: {
        n_operands(op, 3, 4);  // the mask: only from the GPU pass pad_shapes
        if (op.operands.size() > 3) is_mask(op, 3, in(op, 0));
        n_results(op, 1);
        is_ptr(op, 0);
        same_type(op, in(op, 1), pointee_type(in(op, 0)), "compare value type is not the pointee type");
        same_type(op, in(op, 2), pointee_type(in(op, 0)), "new value type is not the pointee type");
        same_type(op, out(op), in(op, 2), "result type differs from the value type");
        break;
      }
      case OpKind::Reduce: {
        auto k = static_cast<ReduceKind>(enum_attr(op, "kind", 6));
        reduce_operands(op, k == ReduceKind::Combine);
        const Type& x = in(op, 0);
        int64_t axis = int_attr(op, "axis");
        if (axis < 0 || axis >= x.rank()) fail(&op, fmt::format("axis {} out of range for {}", axis, ts(x)));
        Shape s = x.shape;
        s.erase(s.begin() + axis);
        const size_t n = op.operands.size();
        for (size_t i = 0; i < n; ++i) {
          DType d = (k == ReduceKind::Argmax || k == ReduceKind::Argmin) ? DType::i32 : in(op, i).dtype;
          same_type(op, bare(in(op, i).with_shape(s).with_dtype(d)), bare(out(op, i)),
                    n == 1 ? std::string("result type") : fmt::format("result {} type", i));
        }
        if (k == ReduceKind::Combine) combine_region(op);
        else n_regions(op, 0), no_fp8(op, x.dtype, "reduction");
        break;
      }
      case OpKind::Scan: {
        auto k = static_cast<ScanKind>(enum_attr(op, "kind", 2));
        reduce_operands(op, k == ScanKind::Combine);
        const Type& x = in(op, 0);
        int64_t axis = int_attr(op, "axis");
        if (axis < 0 || axis >= x.rank()) fail(&op, fmt::format("axis {} out of range for {}", axis, ts(x)));
        int64_t rev = int_attr(op, "reverse");
        if (rev != 0 && rev != 1) fail(&op, "reverse must be 0 or 1");
        for (size_t i = 0; i < op.operands.size(); ++i)
          same_type(op, in(op, i), out(op, i),
                    op.operands.size() == 1 ? std::string("result type differs from the operand")
                                            : fmt::format("result {} type differs from operand {}", i, i));
        if (k == ScanKind::Combine) combine_region(op);
        else n_regions(op, 0), no_fp8(op, x.dtype, "cumsum");
        break;
      }
      case OpKind::Dot: {
        n_operands(op, 3, 3);
        n_results(op, 1);
        const Type &a = in(op, 0), &b = in(op, 1), &c = in(op, 2);
        if (a.rank() != 2 || b.rank() != 2 || c.rank() != 2) fail(&op, "dot operands must be 2-D");
        if (a.shape[1] != b.shape[0] || c.shape[0] != a.shape[0] || c.shape[1] != b.shape[1])
          fail(&op, fmt::format("shapes {} @ {} + {} do not match", ts(a), ts(b), ts(c)));
        if (a.dtype != b.dtype) fail(&op, fmt::format("a is {}, b is {}", dtype_name(a.dtype), dtype_name(b.dtype)));
        same_type(op, c, out(op), "result type differs from the accumulator");
        if (a.dtype == DType::f16 || a.dtype == DType::bf16 || a.dtype == DType::f32 || is_fp8(a.dtype)) {
          if (c.dtype != DType::f32)
            fail(&op, fmt::format("{} inputs need an f32 accumulator, has {}", dtype_name(a.dtype), ts(c)));
        } else if (a.dtype == DType::f64) {
          if (c.dtype != DType::f64) fail(&op, fmt::format("f64 inputs need an f64 accumulator, has {}", ts(c)));
        } else if (a.dtype == DType::i8) {
          if (c.dtype != DType::i32) fail(&op, "i8 inputs need an i32 accumulator");
        } else {
          fail(&op, fmt::format("dot inputs must be f16, bf16, f8e4m3, f8e5m2, f32, f64 or i8, are {}",
                                dtype_name(a.dtype)));
        }
        auto prec = static_cast<Precision>(enum_attr(op, "precision", 3));
        if (prec != Precision::IEEE && a.dtype != DType::f32) fail(&op, "tf32 precisions need f32 inputs");
        break;
      }
      case OpKind::SetLayout: {
        n_operands(op, 1, 1);
        n_results(op, 1);
        same_type(op, bare(in(op, 0)), bare(out(op)), "result type differs from the operand's");
        opt_str_attr(op, "kind");
        const std::string kind = op.has_attr("kind") ? op.str_attr("kind") : "blocked";
        size_t r = static_cast<size_t>(in(op, 0).rank());
        if (r == 0) fail(&op, "a scalar has no layout");
        if (op.has_attr("slice_dim")) {  // a slice of a layout of rank r + 1
          const int64_t d = int_attr(op, "slice_dim");
          if (d < 0 || d > static_cast<int64_t>(r)) fail(&op, fmt::format("slice_dim {} is not a dim of rank {}", d, r + 1));
          ++r;
        }
        if (kind == "blocked") {
          for (const char* k : {"size_per_thread", "threads_per_warp", "warps_per_cta", "order"})
            if (ints_attr(op, k).size() != r) fail(&op, fmt::format("'{}' needs one entry per dim ({})", k, r));
        } else if (kind == "mma" || kind == "dot_operand") {
          if (r != 2) fail(&op, fmt::format("an {} layout has rank 2, not {}", kind, r));
          const int64_t v = int_attr(op, "version");
          if (v != 2 && v != 3) fail(&op, fmt::format("mma version {} is not 2 or 3", v));
          if (ints_attr(op, "warps_per_cta").size() != 2) fail(&op, "'warps_per_cta' needs 2 entries");
          int_attr(op, "instr_n");
          if (kind == "dot_operand") {
            const int64_t i = int_attr(op, "op_idx"), kw = int_attr(op, "k_width");
            if (i != 0 && i != 1) fail(&op, fmt::format("op_idx {} is not 0 or 1", i));
            if (v == 3 && i == 1) fail(&op, "a version 3 mma has no register layout for B");
            if (kw != 1 && kw != 2 && kw != 4) fail(&op, fmt::format("k_width {} is not 1, 2 or 4", kw));
          }
        } else {
          fail(&op, fmt::format("unknown layout kind '{}'", kind));
        }
        break;
      }
      case OpKind::LocalAlloc: {
        n_operands(op, 0, 0);
        n_results(op, 1);
        const auto& shape = ints_attr(op, "shape");
        if (op.parent && op.parent->parent_op()) fail(&op, "a shared buffer is allocated only in the function's body");
        int64_t elems = 1;
        for (int64_t d : shape) {
          if (d < 1 || d >= (int64_t(1) << 31)) fail(&op, "every dim of a shared buffer must be from 1 to 2^31 - 1");
          elems = elems >= (int64_t(1) << 31) / d ? (int64_t(1) << 31) : elems * d;
        }
        const int64_t numel = int_attr(op, "numel"), align = int_attr(op, "align");
        if (shape.empty() || numel < elems) fail(&op, fmt::format("numel {} must cover the shape's {} elements", numel, elems));
        if (align < 16 || (align & (align - 1))) fail(&op, fmt::format("align {} must be a power of two >= 16", align));
        if (out(op).dtype != DType::ptr || !out(op).is_scalar() || out(op).pointee == DType::ptr)
          fail(&op, fmt::format("result must be a scalar pointer to elements, is {}", ts(out(op))));
        break;
      }
      case OpKind::Barrier:
      case OpKind::AsyncCommit:
        n_operands(op, 0, 0);
        n_results(op, 0);
        break;
      case OpKind::AsyncWait:
        n_operands(op, 0, 0);
        n_results(op, 0);
        if (int_attr(op, "pending") < 0 || int_attr(op, "pending") > 255)
          fail(&op, fmt::format("pending {} must be from 0 to 255", int_attr(op, "pending")));
        break;
      case OpKind::Signal:
      case OpKind::SignalWait: {
        const bool wait = op.kind == OpKind::SignalWait;
        n_operands(op, wait ? 3 : 2, wait ? 3 : 2);
        n_results(op, 0);
        const Type& flag = in(op, 0);
        if (flag.dtype != DType::ptr || flag.pointee != DType::u64 || !flag.is_scalar())
          fail(&op, fmt::format("operand 0 (the flag) must be a scalar ptr<u64>, is {}", ts(flag)));
        if (in(op, 1).dtype != DType::u64 || !in(op, 1).is_scalar())
          fail(&op, fmt::format("the value must be a u64 scalar, is {}", ts(in(op, 1))));
        if (wait && (in(op, 2).dtype != DType::i64 || !in(op, 2).is_scalar()))
          fail(&op, fmt::format("the timeout must be an i64 scalar, is {}", ts(in(op, 2))));
        enum_attr(op, wait ? "cmp" : "op", 2);
        break;
      }
      case OpKind::MBarrierInit:
      case OpKind::MBarrierArrive:
      case OpKind::MBarrierTx:
      case OpKind::MBarrierWait: {
        const bool wait = op.kind == OpKind::MBarrierWait;
        n_operands(op, wait ? 2 : 1, wait ? 2 : 1);
        n_results(op, 0);
        const Type& b = in(op, 0);
        if (b.dtype != DType::ptr || b.pointee != DType::i64 || !b.is_scalar())
          fail(&op, fmt::format("operand 0 (the mbarrier) must be a scalar ptr<i64>, is {}", ts(b)));
        if (wait && (in(op, 1).dtype != DType::i32 || !in(op, 1).is_scalar()))
          fail(&op, fmt::format("the phase must be an i32 scalar, is {}", ts(in(op, 1))));
        if (op.kind == OpKind::MBarrierInit && (int_attr(op, "n") < 1 || int_attr(op, "count") < 1 ||
                                                int_attr(op, "count") >= (int64_t(1) << 20)))
          fail(&op, "n must be >= 1 and count from 1 to 2^20 - 1");
        if (op.kind == OpKind::MBarrierArrive && (int_attr(op, "tx") < 0 || int_attr(op, "tx") >= (int64_t(1) << 20)))
          fail(&op, "tx must be from 0 to 2^20 - 1 bytes");
        if (op.kind == OpKind::MBarrierTx && (int_attr(op, "bytes") < 1 || int_attr(op, "bytes") >= (int64_t(1) << 20)))
          fail(&op, "bytes must be from 1 to 2^20 - 1");
        break;
      }
      case OpKind::TmaCopy: {
        const int64_t r = int_attr(op, "rank");
        if (r < 1 || r > 5) fail(&op, "rank must be 1 to 5");
        n_operands(op, 4 + 3 * r, 5 + 3 * r);
        n_results(op, 0);
        const int64_t sw = int_attr(op, "swizzle");
        if (sw != 0 && sw != 32 && sw != 64 && sw != 128) fail(&op, "swizzle must be 0, 32, 64 or 128 bytes");
        const Type& dst = in(op, static_cast<size_t>(2 + 3 * r));
        if (dst.dtype != DType::ptr || !dst.is_scalar() || dst.pointee != in(op, 1).pointee)
          fail(&op, fmt::format("the destination must be a scalar pointer to the descriptor's elements, is {}", ts(dst)));
        const Type& bar = in(op, static_cast<size_t>(3 + 3 * r));
        if (bar.dtype != DType::ptr || bar.pointee != DType::i64 || !bar.is_scalar())
          fail(&op, fmt::format("the mbarrier must be a scalar ptr<i64>, is {}", ts(bar)));
        const Type& map = in(op, 0);
        if (map.dtype != DType::ptr || !map.is_scalar()) fail(&op, "operand 0 (the tensor map) must be a scalar pointer");
        for (int64_t i = 0; i < r; ++i) {
          const Type& sh = in(op, static_cast<size_t>(2 + i)), &st = in(op, static_cast<size_t>(2 + r + i)),
                      &o = in(op, static_cast<size_t>(2 + 2 * r + i));
          if (sh.dtype != DType::i64 || !sh.is_scalar() || st.dtype != DType::i64 || !st.is_scalar())
            fail(&op, "shapes and strides must be i64 scalars");
          if (o.dtype != DType::i32 || !o.is_scalar()) fail(&op, "offsets must be i32 scalars");
        }
        if (op.operands.size() == static_cast<size_t>(5 + 3 * r)) {
          const Type& t = in(op, static_cast<size_t>(4 + 3 * r));
          if (t.dtype != DType::ptr || t.pointee != dst.pointee || t.rank() != r)
            fail(&op, fmt::format("the destination pointer tile must be a rank-{} tile of pointers to the descriptor's "
                                  "elements, is {}",
                                  r, ts(t)));
          if (sw != 0 && t.shape.back() * byte_size(dst.pointee) != sw)
            fail(&op, fmt::format("a {}-byte swizzle needs rows of {} bytes", sw, sw));
        }
        break;
      }
      case OpKind::AsyncCopy: {
        n_operands(op, 2, 4);
        n_results(op, 0);
        is_ptr(op, 0);
        is_ptr(op, 1);
        same_type(op, bare(in(op, 1)), bare(in(op, 0)), "destination pointers differ from the source's type");
        for (size_t i = 2; i < op.operands.size(); ++i) is_mask(op, i, in(op, 0));
        break;
      }
      case OpKind::Histogram:
      case OpKind::HistogramRanks: {  // (x [N] integer [, mask]) attr bins -> i32 [bins] / i32 [N]
        n_operands(op, 1, 2);
        n_results(op, 1);
        const Type& x = in(op, 0);
        if (!is_int(x.dtype) || x.dtype == DType::i1 || x.rank() != 1)
          fail(&op, fmt::format("input must be a 1-D integer tile, is {}", ts(x)));
        if (op.operands.size() > 1) is_mask(op, 1, x);
        int64_t bins = int_attr(op, "bins");
        if (bins <= 0) fail(&op, "bins must be positive");
        const Shape want = op.kind == OpKind::Histogram ? Shape{bins} : x.shape;
        if (out(op).dtype != DType::i32 || out(op).shape != want)
          fail(&op, fmt::format("result must be {}, is {}", ts(x.with_shape(want).with_dtype(DType::i32)), ts(out(op))));
        break;
      }
      case OpKind::Sort: {
        n_operands(op, 1, 2);  // the mask: only pad_shapes makes one (masked-off elements sort last)
        n_results(op, 2);
        const Type& x = in(op, 0);
        if (op.operands.size() > 1) is_mask(op, 1, x);
        if (x.rank() < 1 || x.dtype == DType::ptr)
          fail(&op, fmt::format("input must be a non-pointer tile of rank >= 1, is {}", ts(x)));
        no_fp8(op, x.dtype, "sort");
        int64_t axis = int_attr(op, "axis");
        if (axis < 0 || axis >= x.rank()) fail(&op, fmt::format("axis {} out of range for {}", axis, ts(x)));
        int64_t desc = int_attr(op, "descending");
        if (desc != 0 && desc != 1) fail(&op, "descending must be 0 or 1");
        int64_t k = int_attr(op, "k");
        if (k < 1 || k > x.shape[axis])
          fail(&op, fmt::format("k = {} is outside 1..{} (dim {} of {})", k, x.shape[axis], axis, ts(x)));
        Shape s = x.shape;
        s[axis] = k;
        same_type(op, bare(out(op, 0)), bare(x.with_shape(s)), "values type");
        same_type(op, bare(out(op, 1)), bare(x.with_shape(s).with_dtype(DType::i32)), "indices type");
        break;
      }
      case OpKind::ExtractTile:
      case OpKind::InsertTile: {
        const bool ins = op.kind == OpKind::InsertTile;
        const unsigned nfixed = ins ? 2 : 1;
        n_operands(op, nfixed, nfixed + 1);
        n_results(op, 1);
        const Type &x = in(op, 0), &sub = ir::subtile_type(op);
        if (ins) same_type(op, bare(out(op)), bare(x), "result type differs from the tile's");
        same_type(op, bare(sub.with_shape(x.shape)), bare(x), "sub-tile element type differs from the tile's");
        auto pads_to = [](const Shape& real, const Shape& p) {
          if (real.size() != p.size()) return false;
          for (size_t i = 0; i < p.size(); ++i)
            if (real[i] < 1 || p[i] < real[i] || (p[i] & (p[i] - 1)) || p[i] >= 2 * real[i]) return false;
          return true;
        };
        const ir::SubTileGrid g = ir::subtile_grid(op);
        if (!g.valid)
          fail(&op, fmt::format("sub-tile [{}] does not divide the tile [{}]", fmt::join(g.sub, ","), fmt::join(g.x, ",")));
        if ((op.has_attr("real_x") && !pads_to(g.x, x.shape)) || (op.has_attr("real_sub") && !pads_to(g.sub, sub.shape)))
          fail(&op, fmt::format("real shapes [{}] / [{}] do not fit {} / {}", fmt::join(g.x, ","), fmt::join(g.sub, ","),
                                ts(x), ts(sub)));
        if (op.operands.size() > nfixed) {
          const Type& ix = in(op, nfixed);
          if (ix.dtype != DType::i32 || !ix.is_scalar()) fail(&op, fmt::format("index must be an i32 scalar, is {}", ts(ix)));
          if (op.has_attr("index")) fail(&op, "both an index operand and an index attribute");
        } else {
          const int64_t i = int_attr(op, "index");
          if (i < 0 || i >= g.count) fail(&op, fmt::format("index {} outside the {} sub-tiles", i, g.count));
        }
        break;
      }
      case OpKind::Gather: {
        n_operands(op, 2, 2);
        n_results(op, 1);
        const Type &x = in(op, 0), &idx = in(op, 1);
        if (x.rank() < 1 || x.dtype == DType::ptr)
          fail(&op, fmt::format("input must be a non-pointer tile of rank >= 1, is {}", ts(x)));
        if (!is_int(idx.dtype) || idx.dtype == DType::i1)
          fail(&op, fmt::format("index must be an integer tile, is {}", ts(idx)));
        if (idx.rank() != x.rank()) fail(&op, fmt::format("index {} and input {} differ in rank", ts(idx), ts(x)));
        int64_t axis = int_attr(op, "axis");
        if (axis < 0 || axis >= x.rank()) fail(&op, fmt::format("axis {} out of range for {}", axis, ts(x)));
        for (int d = 0; d < x.rank(); ++d)
          if (d != axis && idx.shape[d] != x.shape[d])
            fail(&op, fmt::format("index {} and input {} differ in dim {} (only the axis may differ)", ts(idx), ts(x),
                                  d));
        same_type(op, bare(out(op)), bare(x.with_shape(idx.shape)), "result type");
        break;
      }
      case OpKind::For: {
        if (op.operands.size() < 3) fail(&op, fmt::format("expects lo, hi, step and inits, has {} operands", op.operands.size()));
        n_regions(op, 1);
        const Type& lo = in(op, 0);
        if (!is_int(lo.dtype) || lo.dtype == DType::i1 || !lo.is_scalar())
          fail(&op, fmt::format("bounds must be integer scalars, lo is {}", ts(lo)));
        same_type(op, in(op, 1), lo, "hi type differs from lo");
        same_type(op, in(op, 2), lo, "step type differs from lo");
        size_t n = op.operands.size() - 3;
        n_results(op, n);
        const Block& body = op.regions[0]->body();
        if (body.args.size() != n + 1)
          fail(&op, fmt::format("body has {} arguments, expected {} (iv + carried)", body.args.size(), n + 1));
        same_type(op, body.args[0]->type, lo, "induction variable type differs from the bounds");
        std::vector<Type> carried;
        for (size_t i = 0; i < n; ++i) {
          same_type(op, in(op, 3 + i), out(op, i), fmt::format("init {} type differs from result {}", i, i));
          same_type(op, body.args[1 + i]->type, out(op, i), fmt::format("body argument {} type differs from result {}", 1 + i, i));
          carried.push_back(out(op, i));
        }
        yields(op, 0, carried);
        break;
      }
      case OpKind::If: {
        n_operands(op, 1, 1);
        n_regions(op, 2);
        if (in(op, 0).dtype != DType::i1 || !in(op, 0).is_scalar())
          fail(&op, fmt::format("condition must be an i1 scalar, is {}", ts(in(op, 0))));
        std::vector<Type> res;
        for (auto& r : op.results) res.push_back(r->type);
        for (size_t r = 0; r < 2; ++r) {
          if (!op.regions[r]->body().args.empty()) fail(&op, fmt::format("region {} must have no arguments", r));
          yields(op, r, res);
        }
        break;
      }
      case OpKind::WarpSpecialize: {
        n_operands(op, 0, 0);
        n_results(op, 0);
        const auto& warps = ints_attr(op, "warps");
        const auto& regs = ints_attr(op, "regs");
        if (warps.empty() || warps.size() != regs.size() || warps.size() != op.regions.size())
          fail(&op, fmt::format("{} roles' warps, {} register counts and {} regions; one of each per role", warps.size(),
                                regs.size(), op.regions.size()));
        for (size_t r = 0; r < warps.size(); ++r) {
          if (warps[r] < 1 || warps[r] > 32 || (warps[r] & (warps[r] - 1)))
            fail(&op, fmt::format("role {} has {} warps; a power of two from 1 to 32", r, warps[r]));
          if (regs[r] != 0 && (regs[r] < 24 || regs[r] > 256 || regs[r] % 8))
            fail(&op, fmt::format("role {} asks for {} registers; 0 or a multiple of 8 from 24 to 256", r, regs[r]));
          if (!op.regions[r]->body().args.empty()) fail(&op, fmt::format("region {} must have no arguments", r));
          yields(op, r, {});
        }
        const Block* b = op.parent;
        if (!b->parent || b->parent->parent || b->ops.back().get() != &op)
          fail(&op, "warp_specialize must be the last op of the function body");
        break;
      }
      case OpKind::Yield: {
        n_results(op, 0);
        const Block* b = op.parent;
        if (!b->parent || !b->parent->parent) fail(&op, "yield outside a region of an op");
        break;
      }
    }
  }
};

}  // namespace

void verify(const Function& f) {
  try {
    Verifier().run(f);
  } catch (const Failure& e) {
    PrintPositions pos;
    std::string text = print_function(f, &pos);
    std::string where;
    if (e.op) {
      auto line = pos.op_lines.find(e.op);
      where = fmt::format("'{}' at line {}", op_mnemonic(e.op->kind), line == pos.op_lines.end() ? 0u : line->second);
      if (!e.op->results.empty() && e.op->results[0]) where += fmt::format(" ({})", pos.value_name(e.op->result(0)));
      if (e.op->loc.known()) where += fmt::format(" [traced at {}:{}]", e.op->loc.file, e.op->loc.line);
    } else {
      where = "function";
    }
    throw InternalError(fmt::format("IR verifier: @{}: {}: {}\n{}", f.name, where, e.message, text));
  }
}

}  // namespace tle::ir
