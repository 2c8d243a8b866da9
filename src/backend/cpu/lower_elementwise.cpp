// src/backend/cpu/lower_elementwise.cpp - elementwise ops as loops over tile elements; each
// element is emitted by backend::ScalarEmitter (src/backend/common), shared with the GPU backend.
#include <fmt/format.h>
#include <llvm/IR/Intrinsics.h>

#include "backend/cpu/lower.hpp"
#include "support/half.hpp"

namespace tle::cpu::detail {

using llvm::Value;

Value* Lowerer::int64_to_bf16(Value* v, bool is_signed) {
  llvm::FunctionCallee fn = mod.getOrInsertFunction(is_signed ? kI64ToBf16 : kU64ToBf16,
                                                    llvm::FunctionType::get(B.getInt16Ty(), {B.getInt64Ty()}, false));
  if (auto* f = llvm::dyn_cast<llvm::Function>(fn.getCallee())) {
    f->addFnAttr(llvm::Attribute::NoUnwind);
    f->setMemoryEffects(llvm::MemoryEffects::none());
  }
  return B.CreateCall(fn, {v});
}

void Lowerer::lower_elementwise(const ir::Op& op) {
  using K = ir::OpKind;
  const ir::Value* r = op.result();
  const DType rd = r->type.dtype;
  if (op.kind == K::Constant) {
    tiles[r] = Tile{nullptr, constant(rd, op.attrs.at("value"), op)};
    return;
  }
  // Element function over the operands' elements.
  std::function<Value*(const std::vector<Value*>&)> f;
  const DType d0 = op.operands.at(0)->type.dtype;
  switch (op.kind) {
    case K::Binary: {
      auto bop = op.enum_attr<ir::BinaryOp>("op");
      if (op.operands.size() != 2) fail(op, "needs two operands");
      f = [this, bop, d0, &op](const std::vector<Value*>& v) { return binary(bop, d0, v[0], v[1], &op); };
      break;
    }
    case K::Compare: {
      auto p = op.enum_attr<ir::CmpPred>("pred");
      f = [this, p, d0](const std::vector<Value*>& v) { return compare(p, d0, v[0], v[1]); };
      break;
    }
    case K::Unary: {
      auto uop = op.enum_attr<ir::UnaryOp>("op");
      f = [this, uop, d0, &op](const std::vector<Value*>& v) { return unary(uop, d0, v[0], op); };
      break;
    }
    case K::Fma: {
      if (!is_float(rd)) fail(op, "fma is float only");
      f = [this, rd](const std::vector<Value*>& v) { return fma(rd, v); };
      break;
    }
    case K::Select:
      f = [this](const std::vector<Value*>& v) { return B.CreateSelect(v[0], v[1], v[2]); };
      break;
    case K::Cast:
      f = [this, d0, rd](const std::vector<Value*>& v) { return convert(v[0], d0, rd); };
      break;
    case K::Bitcast: {
      if (bit_width(d0) != bit_width(rd) || d0 == DType::i1) fail(op, "bit widths differ");
      f = [this, d0, rd](const std::vector<Value*>& v) { return bitcast(v[0], d0, rd); };
      break;
    }
    default: fail(op, "not an elementwise op");
  }
  // All-splat operands: compute once.
  std::vector<const Tile*> ts;
  bool all_splat = true;
  for (auto* o : op.operands) {
    ts.push_back(&tile(o));
    all_splat = all_splat && ts.back()->splat;
  }
  if (all_splat) {
    std::vector<Value*> vs;
    for (auto* t : ts) vs.push_back(t->splat);
    tiles[r] = Tile{nullptr, f(vs)};
    return;
  }
  produce(r, [&](Value* i) {
    std::vector<Value*> vs;
    for (auto* o : op.operands) vs.push_back(elem(o, i));
    return f(vs);
  });
}

}  // namespace tle::cpu::detail
