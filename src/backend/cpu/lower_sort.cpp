// src/backend/cpu/lower_sort.cpp - sort and gather.
//
// sort: every element's sort key (ScalarEmitter::sort_key, bits flipped when descending, so that
// ascending unsigned order is the wanted order) goes to a frame array; the runtime helper
// tle_cpu_sort_lines (runtime_helpers.cpp) stable-sorts the indices of each line [outer, n, inner]
// by key with a merge sort and writes the first k; the values are then read from x at those
// indices. gather: one loop over the result, the index checked against the axis' size.
#include <fmt/format.h>

#include "backend/cpu/lower.hpp"

namespace tle::cpu::detail {

using llvm::Value;

void Lowerer::lower_sort(const ir::Op& op) {
  const ir::Value* x = op.operands.at(0);
  const int64_t axis = op.int_attr("axis"), k = op.int_attr("k");
  const bool descending = op.int_attr("descending") != 0;
  if (axis < 0 || axis >= x->type.rank()) fail(op, fmt::format("axis {} out of range", axis));
  const ir::AxisSplit sp = ir::split_at_axis(x->type.shape, axis);
  if (k < 1 || k > sp.n) fail(op, fmt::format("k = {} out of range", k));
  const DType d = x->type.dtype;
  const Tile xt = tile(x);
  llvm::Type* xty = elem_ty(d);
  llvm::Type* kty = sort_key_ty(d);
  llvm::Type* i32 = B.getInt32Ty();
  const int64_t numel = x->type.numel(), rn = sp.outer * k * sp.inner;
  Value* keys = alloc(kty, numel, "sort.keys");
  loop(numel, [&](Value* l) {
    Value* key = sort_key(elem(xt, xty, l), d);
    store_elem(keys, kty, l, descending ? B.CreateNot(key) : key);
  }, "sk");
  Value* perm = alloc(i32, rn, "sort.idx");
  Value* scratch = alloc(i32, 2 * sp.n, "sort.tmp");
  llvm::Type* ptr = B.getPtrTy();
  llvm::Type* i64 = B.getInt64Ty();
  llvm::FunctionCallee fn = mod.getOrInsertFunction(
      kSortLines, llvm::FunctionType::get(B.getVoidTy(), {ptr, i32, i64, i64, i64, i64, ptr, ptr}, false));
  if (auto* f = llvm::dyn_cast<llvm::Function>(fn.getCallee())) f->addFnAttr(llvm::Attribute::NoUnwind);
  B.CreateCall(fn, {keys, B.getInt32(static_cast<uint32_t>(kty->getIntegerBitWidth())), i64c(sp.outer), i64c(sp.n),
                    i64c(sp.inner), i64c(k), perm, scratch});
  produce(op.result(0), [&](Value* l) {
    Value* o = B.CreateUDiv(l, i64c(k * sp.inner));
    Value* i = B.CreateURem(l, i64c(sp.inner));
    Value* j = B.CreateSExt(elem(Tile{perm, nullptr}, i32, l), i64);
    return elem(xt, xty, B.CreateAdd(B.CreateMul(B.CreateAdd(B.CreateMul(o, i64c(sp.n)), j), i64c(sp.inner)), i));
  });
  if (rn == 1) tiles[op.result(1)] = Tile{nullptr, B.CreateLoad(i32, perm)};
  else tiles[op.result(1)] = Tile{perm, nullptr};
}

void Lowerer::lower_gather(const ir::Op& op) {
  const ir::Value* x = op.operands.at(0);
  const ir::Value* index = op.operands.at(1);
  const ir::Value* r = op.result();
  const int64_t axis = op.int_attr("axis");
  const int rank = x->type.rank();
  if (axis < 0 || axis >= rank || index->type.rank() != rank) fail(op, "bad axis or rank");
  const ir::Shape& xs = x->type.shape;
  const ir::Shape& rs = r->type.shape;
  std::vector<int64_t> xst(rank, 1), rst(rank, 1);
  for (int dd = rank - 2; dd >= 0; --dd) xst[dd] = xst[dd + 1] * xs[dd + 1], rst[dd] = rst[dd + 1] * rs[dd + 1];
  const DType d = x->type.dtype, id = index->type.dtype;
  llvm::Type* xty = elem_ty(d);
  const Tile xt = tile(x);
  produce(r, [&](Value* l) {
    // An index outside [0, dim) - negative ones are huge as unsigned - reads element 0 and gives 0.
    Value* v = B.CreateIntCast(elem(index, l), B.getInt64Ty(), is_signed_int(id));
    Value* ok = B.CreateICmpULT(v, i64c(xs[axis]));
    v = B.CreateSelect(ok, v, i64c(0));
    Value* at = i64c(0);
    for (int dd = 0; dd < rank; ++dd) {
      Value* c = dd == axis ? v : B.CreateURem(B.CreateUDiv(l, i64c(rst[dd])), i64c(rs[dd]));
      at = B.CreateAdd(at, B.CreateMul(c, i64c(xst[dd])));
    }
    return B.CreateSelect(ok, elem(xt, xty, at), llvm::Constant::getNullValue(xty));
  });
}

}  // namespace tle::cpu::detail
