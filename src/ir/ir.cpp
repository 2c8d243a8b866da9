// src/ir/ir.cpp - basic IR data-structure functions (types, attributes, use replacement).
#include "ir/ir.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ir/builder.hpp"

namespace tle {

std::string_view dtype_name(DType t) noexcept {
  switch (t) {
    case DType::i1: return "i1";
    case DType::i8: return "i8";
    case DType::i16: return "i16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
    case DType::u16: return "u16";
    case DType::u32: return "u32";
    case DType::u64: return "u64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::ptr: return "ptr";
    case DType::f8e4m3: return "f8e4m3";
    case DType::f8e5m2: return "f8e5m2";
  }
  return "?";
}

namespace ir {

int64_t Type::numel() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

bool Type::operator==(const Type& o) const {
  return dtype == o.dtype && (dtype != DType::ptr || pointee == o.pointee) && shape == o.shape &&
         layouts_equal(layout.get(), o.layout.get());
}

std::string Type::str() const {
  std::string s(dtype_name(dtype));
  if (dtype == DType::ptr) s += fmt::format("<{}>", dtype_name(pointee));
  if (!shape.empty()) s += fmt::format("[{}]", fmt::join(shape, ","));
  return s;
}

const char* op_mnemonic(OpKind k) {
  switch (k) {
#define TLE_OP(name, mnem, pure) \
  case OpKind::name: return mnem;
#include "ir/ops.def"
#undef TLE_OP
  }
  return "?";
}

bool op_is_pure(OpKind k) {
  switch (k) {
#define TLE_OP(name, mnem, pure) \
  case OpKind::name: return pure;
#include "ir/ops.def"
#undef TLE_OP
  }
  return false;
}

bool Op::is_pure() const {
  if (kind == OpKind::InlineAsm) {
    auto it = attrs.find("pure");
    return it != attrs.end() && std::holds_alternative<int64_t>(it->second) && std::get<int64_t>(it->second) != 0;
  }
  if (!op_is_pure(kind)) return false;
  // A reduce or scan whose combine function stores or updates memory has those effects too.
  for (const auto& r : regions)
    for (const auto& o : r->body().ops)
      if (o->kind != OpKind::Yield && !o->is_pure()) return false;
  return true;
}

#define TLE_NAMES(E, ...)                                   \
  const char* name(E v) {                                   \
    static const char* const n[] = {__VA_ARGS__};           \
    auto i = static_cast<size_t>(v);                        \
    return i < sizeof(n) / sizeof(n[0]) ? n[i] : "?";       \
  }
TLE_NAMES(BinaryOp, "add", "sub", "mul", "div", "rem", "and", "or", "xor", "shl", "shr", "min", "max", "pow", "atan2")
TLE_NAMES(UnaryOp, "neg", "not", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "floor", "ceil", "sin", "cos",
          "tanh", "erf", "round", "rint")
TLE_NAMES(CmpPred, "eq", "ne", "lt", "le", "gt", "ge")
TLE_NAMES(AtomicOp, "add", "max", "min", "xchg", "and", "or", "xor")
TLE_NAMES(ReduceKind, "sum", "max", "min", "argmax", "argmin", "combine")
TLE_NAMES(ScanKind, "cumsum", "combine")
TLE_NAMES(Precision, "ieee", "tf32", "tf32x3")
#undef TLE_NAMES

Block* Value::defining_block() const { return def ? def->parent : owner; }

int64_t Op::int_attr(const std::string& k) const {
  auto it = attrs.find(k);
  if (it == attrs.end() || !std::holds_alternative<int64_t>(it->second))
    throw InternalError(fmt::format("op {} has no integer attribute '{}'", op_mnemonic(kind), k));
  return std::get<int64_t>(it->second);
}
double Op::float_attr(const std::string& k) const {
  auto it = attrs.find(k);
  if (it == attrs.end() || !std::holds_alternative<double>(it->second))
    throw InternalError(fmt::format("op {} has no float attribute '{}'", op_mnemonic(kind), k));
  return std::get<double>(it->second);
}
const std::vector<int64_t>& Op::ints_attr(const std::string& k) const {
  auto it = attrs.find(k);
  if (it == attrs.end() || !std::holds_alternative<std::vector<int64_t>>(it->second))
    throw InternalError(fmt::format("op {} has no int-list attribute '{}'", op_mnemonic(kind), k));
  return std::get<std::vector<int64_t>>(it->second);
}
const std::string& Op::str_attr(const std::string& k) const {
  auto it = attrs.find(k);
  if (it == attrs.end() || !std::holds_alternative<std::string>(it->second))
    throw InternalError(fmt::format("op {} has no string attribute '{}'", op_mnemonic(kind), k));
  return std::get<std::string>(it->second);
}

Value* Block::add_arg(Type t, std::string hint) {
  auto v = std::make_unique<Value>();
  v->type = std::move(t);
  v->owner = this;
  v->index = static_cast<unsigned>(args.size());
  v->name_hint = std::move(hint);
  args.push_back(std::move(v));
  return args.back().get();
}

Op* Block::parent_op() const { return parent ? parent->parent : nullptr; }

Op* Block::terminator() const {
  if (ops.empty() || ops.back()->kind != OpKind::Yield) return nullptr;
  return ops.back().get();
}

Region::Region() : block(std::make_unique<Block>()) { block->parent = this; }

void refuse_gpu_only_op(const Op& op, const std::string& kernel, const std::string& backend) {
  if (op.kind == OpKind::InlineAsm)
    throw UserError(op.loc, fmt::format("inline_asm runs on the GPU backend only; kernel '{}' {}, which cannot run "
                                        "PTX (launch it with Grid(...).backend(Backend::GPU), or use tle operations "
                                        "instead of the asm)",
                                        kernel, backend));
  if (op.kind == OpKind::CudaCall)
    throw UserError(op.loc, fmt::format("cuda_function '{}' (a cuda_call op) runs on the GPU backend only; kernel '{}' "
                                        "{}, which cannot run CUDA device code (launch it with "
                                        "Grid(...).backend(Backend::GPU))",
                                        op.str_attr("name"), kernel, backend));
  throw InternalError(fmt::format("refuse_gpu_only_op: '{}' is not a GPU-only op", op_mnemonic(op.kind)));
}

void replace_all_uses(Block& root, Value* from, Value* to) {
  walk(root, [&](Op& op) {
    for (auto& v : op.operands)
      if (v == from) v = to;
  });
}

std::map<const Value*, int> count_uses(const Block& root) {
  std::map<const Value*, int> uses;
  walk(root, [&](const Op& op) {
    for (auto* v : op.operands) uses[v]++;
  });
  return uses;
}

// ---- Builder
Op* Builder::create(OpKind kind, std::vector<Value*> operands, std::vector<Type> results,
                    std::map<std::string, Attr> attrs, SrcLoc loc, unsigned num_regions) {
  if (!block_) throw InternalError("ir::Builder has no insertion block");
  auto op = std::make_unique<Op>();
  op->kind = kind;
  op->operands = std::move(operands);
  op->attrs = std::move(attrs);
  op->loc = loc;
  op->parent = block_;
  for (unsigned i = 0; i < results.size(); ++i) {
    auto v = std::make_unique<Value>();
    v->type = std::move(results[i]);
    v->def = op.get();
    v->index = i;
    op->results.push_back(std::move(v));
  }
  for (unsigned i = 0; i < num_regions; ++i) {
    op->regions.push_back(std::make_unique<Region>());
    op->regions.back()->parent = op.get();
  }
  block_->ops.push_back(std::move(op));
  return block_->ops.back().get();
}

Value* Builder::constant(const Type& t, Attr value, SrcLoc loc) {
  return create(OpKind::Constant, {}, {t}, {{"value", std::move(value)}}, loc)->result();
}
Value* Builder::binary(BinaryOp op, Value* a, Value* b, SrcLoc loc) {
  return create(OpKind::Binary, {a, b}, {a->type}, {{"op", int64_t(op)}}, loc)->result();
}
Value* Builder::unary(UnaryOp op, Value* x, SrcLoc loc) {
  return create(OpKind::Unary, {x}, {x->type}, {{"op", int64_t(op)}}, loc)->result();
}
Value* Builder::cmp(CmpPred p, Value* a, Value* b, SrcLoc loc) {
  return create(OpKind::Compare, {a, b}, {a->type.with_dtype(DType::i1)}, {{"pred", int64_t(p)}}, loc)->result();
}
Value* Builder::cast(Value* x, DType to, SrcLoc loc) {
  if (x->type.dtype == to) return x;
  return create(OpKind::Cast, {x}, {x->type.with_dtype(to)}, {}, loc)->result();
}
Op* Builder::yield(std::vector<Value*> values, SrcLoc loc) {
  return create(OpKind::Yield, std::move(values), {}, {}, loc);
}

std::vector<int64_t> role_first_warps(const Op& ws) {
  std::vector<int64_t> first;
  int64_t end = 0;
  for (int64_t w : ws.ints_attr("warps")) {
    const int64_t a = std::min<int64_t>(std::max<int64_t>(w, 1), 4);
    end = (end + a - 1) / a * a;
    first.push_back(end);
    end += w;
  }
  first.push_back(end);
  return first;
}

Block* enclosing_role(Block* b) {
  for (Block* x = b; x && x->parent && x->parent->parent; x = x->parent->parent->parent)
    if (x->parent->parent->kind == OpKind::WarpSpecialize) return x;
  return nullptr;
}

int role_warps(const Op& op) {
  const Block* body = enclosing_role(op.parent);
  if (!body) return 0;
  const Op* ws = body->parent->parent;
  for (size_t r = 0; r < ws->regions.size(); ++r)
    if (ws->regions[r].get() == body->parent) return static_cast<int>(ws->ints_attr("warps")[r]);
  return 0;
}

int mesh_args_begin(const Function& f) {
  for (size_t i = 0; i < f.arg_info.size(); ++i)
    if (f.arg_info[i].mesh) return static_cast<int>(i);
  return -1;
}

const Op* find_warp_specialize(const Function& f) {
  for (auto& op : f.entry().ops)
    if (op->kind == OpKind::WarpSpecialize) return op.get();
  return nullptr;
}


}  // namespace ir
}  // namespace tle
