// src/backend/cpu/lower.cpp - lowering driver: the body and entry functions, tile storage, op
// dispatch, shape ops and structured control flow (for, if). See lower.hpp for the model.
#include "backend/cpu/lower.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "ir/subtile.hpp"

namespace tle::cpu::detail {

using llvm::Value;

Lowerer::Lowerer(const ir::Function& f, llvm::Module& m) : ScalarEmitter(m), fn_ir(f) {}

void Lowerer::fail(const ir::Op& op, const std::string& msg) const {
  std::string where;
  if (op.loc.known()) where = fmt::format(" (traced at {}:{})", op.loc.file, op.loc.line);
  throw RuntimeError("tle::cpu::lower", fmt::format("kernel '{}': op '{}': {}{}", fn_ir.name, ir::op_mnemonic(op.kind), msg, where));
}

Value* Lowerer::alloc(llvm::Type* elem, int64_t n, const llvm::Twine& name, uint64_t align) {
  llvm::IRBuilder<> ab(alloca_bb, alloca_bb->begin());
  auto* a = ab.CreateAlloca(llvm::ArrayType::get(elem, static_cast<uint64_t>(n)), nullptr, name);
  a->setAlignment(llvm::Align(align));
  return a;
}

const Tile& Lowerer::tile(const ir::Value* v) const {
  auto it = tiles.find(v);
  if (it == tiles.end()) {
    throw InternalError(fmt::format("cpu backend: kernel '{}' uses a value of type {} before its definition",
                                    fn_ir.name, v->type.str()));
  }
  return it->second;
}

Value* Lowerer::elem(const Tile& t, llvm::Type* ty, Value* idx) {
  if (t.splat) return t.splat;
  return B.CreateLoad(ty, B.CreateInBoundsGEP(ty, t.ptr, idx));
}

Value* Lowerer::elem(const ir::Value* v, Value* idx) { return elem(tile(v), elem_ty(v->type.dtype), idx); }

void Lowerer::store_elem(Value* arr, llvm::Type* ty, Value* idx, Value* v) {
  B.CreateStore(v, B.CreateInBoundsGEP(ty, arr, idx));
}

void Lowerer::loop(Value* begin, Value* end, const std::function<void(Value*)>& fn, const llvm::Twine& name) {
  llvm::BasicBlock* pre = B.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(ctx, name + ".head", body);
  auto* bodybb = llvm::BasicBlock::Create(ctx, name + ".body", body);
  auto* exit = llvm::BasicBlock::Create(ctx, name + ".exit", body);
  B.CreateBr(header);
  B.SetInsertPoint(header);
  auto* i = B.CreatePHI(B.getInt64Ty(), 2, name);
  i->addIncoming(begin, pre);
  B.CreateCondBr(B.CreateICmpSLT(i, end), bodybb, exit);
  B.SetInsertPoint(bodybb);
  fn(i);
  Value* next = B.CreateAdd(i, i64c(1), name + ".next", /*NUW=*/true, /*NSW=*/true);
  i->addIncoming(next, B.GetInsertBlock());
  B.CreateBr(header);
  B.SetInsertPoint(exit);
}

void Lowerer::loop(int64_t n, const std::function<void(Value*)>& fn, const llvm::Twine& name) {
  if (n <= 0) return;
  if (n == 1) {
    fn(i64c(0));
    return;
  }
  loop(i64c(0), i64c(n), fn, name);
}

void Lowerer::produce(const ir::Value* v, const ElemFn& f) {
  int64_t n = v->type.numel();
  if (n == 1) {
    tiles[v] = Tile{nullptr, f(i64c(0))};
    return;
  }
  llvm::Type* ty = elem_ty(v->type.dtype);
  Value* arr = alloc(ty, n, v->name_hint);
  loop(n, [&](Value* i) { store_elem(arr, ty, i, f(i)); });
  tiles[v] = Tile{arr, nullptr};
}

void Lowerer::copy_into(Value* dst, llvm::Type* ty, const Tile& src, int64_t n) {
  if (src.ptr == dst) return;
  loop(n, [&](Value* i) { store_elem(dst, ty, i, elem(src, ty, i)); });
}

// ---------------------------------------------------------------------------------------------
// dispatch

void Lowerer::lower_block(const ir::Block& b) {
  for (auto& op : b.ops)
    if (op->kind != ir::OpKind::Yield) lower_op(*op);
}

void Lowerer::lower_op(const ir::Op& op) {
  using K = ir::OpKind;
  switch (op.kind) {
    case K::Constant: case K::Binary: case K::Compare: case K::Unary: case K::Fma: case K::Select:
    case K::Cast: case K::Bitcast:
      lower_elementwise(op);
      return;
    case K::Arange: {
      int64_t start = op.int_attr("start");
      produce(op.result(), [&](Value* i) { return B.CreateTrunc(B.CreateAdd(i, i64c(start)), B.getInt32Ty()); });
      return;
    }
    case K::ProgramId: case K::NumPrograms: {
      int64_t axis = op.int_attr("axis");
      if (axis < 0 || axis > 2) fail(op, fmt::format("axis {} is not 0, 1 or 2", axis));
      tiles[op.result()] = Tile{nullptr, op.kind == K::ProgramId ? pid[axis] : nprog[axis]};
      return;
    }
    case K::Broadcast: case K::ExpandDims: case K::Reshape: case K::Permute: case K::Hint: case K::ConvertLayout:
    case K::SetLayout:
      lower_shape(op);
      return;
    case K::AddPtr: case K::Load: case K::Store: case K::AtomicRMW: case K::AtomicCas: case K::AsyncCopy:
      lower_memory(op);
      return;
    case K::Reduce: lower_reduce(op); return;
    case K::Scan: lower_scan(op); return;
    case K::Dot: lower_dot(op); return;
    case K::LocalAlloc: {
      // The program's buffer: stack storage of the function that runs one program, aligned as
      // asked; its contents are undefined until written, as shared memory is.
      tiles[op.result()] = Tile{nullptr, alloc(B.getInt8Ty(), ir::local_alloc_bytes(op), "local",
                                               static_cast<uint64_t>(op.int_attr("align")))};
      return;
    }
    case K::Barrier: return;  // one thread runs the program's statements in order
    case K::Signal: {
      // One thread runs the program: a sequentially consistent store / add orders every earlier
      // access of the program before it (release) on x86 and AArch64 alike.
      Value* p = elem(op.operands[0], i64c(0));
      Value* v = elem(op.operands[1], i64c(0));
      const llvm::Align al(8);
      if (op.enum_attr<ir::SignalOp>("op") == ir::SignalOp::Add)
        B.CreateAtomicRMW(llvm::AtomicRMWInst::Add, p, v, al, llvm::AtomicOrdering::SequentiallyConsistent);
      else
        B.CreateAlignedStore(v, p, al)->setAtomic(llvm::AtomicOrdering::SequentiallyConsistent);
      return;
    }
    case K::SignalWait: {
      llvm::Type* i64 = B.getInt64Ty();
      llvm::FunctionCallee fn = mod.getOrInsertFunction(
          "tle_cpu_signal_wait", llvm::FunctionType::get(B.getVoidTy(), {B.getPtrTy(), i64, B.getInt32Ty(), i64}, false));
      B.CreateCall(fn, {elem(op.operands[0], i64c(0)), elem(op.operands[1], i64c(0)),
                        B.getInt32(static_cast<uint32_t>(op.int_attr("cmp"))), elem(op.operands[2], i64c(0))});
      return;
    }
    case K::AsyncCommit: case K::AsyncWait: return;  // the CPU's copies land when issued
    // mbarriers order nothing on one thread running the statements in order (the interpreter
    // counts their phases)
    case K::MBarrierInit: case K::MBarrierArrive: case K::MBarrierWait: case K::MBarrierTx: return;
    case K::TmaCopy:
      fail(op, "a tma_copy reached the CPU lowering (passes::expand_descriptors runs first)");
      return;
    case K::Histogram: lower_histogram(op); return;
    case K::HistogramRanks: lower_histogram_ranks(op); return;
    case K::Sort: lower_sort(op); return;
    case K::Gather: lower_gather(op); return;
    case K::ExtractTile: case K::InsertTile: lower_subtile(op); return;
    case K::For: lower_for(op); return;
    case K::If: lower_if(op); return;
    case K::InlineAsm: case K::CudaCall:
      ir::refuse_gpu_only_op(op, fn_ir.name, "was compiled for the CPU backend");
    case K::DescLoad: case K::DescStore:
      fail(op, "a tensor-descriptor access reached the CPU lowering (passes::expand_descriptors runs first)");
      return;
    case K::Yield: fail(op, "yield outside of a region");
  }
  fail(op, "unknown op kind");
}

// ---------------------------------------------------------------------------------------------
// shape ops

void Lowerer::lower_shape(const ir::Op& op) {
  const ir::Value* x = op.operands.at(0);
  const ir::Value* r = op.result();
  const Tile& xt = tile(x);
  // Same row-major element order: share the storage (values are immutable).
  if (op.kind == ir::OpKind::ExpandDims || op.kind == ir::OpKind::Reshape || op.kind == ir::OpKind::Hint || op.kind == ir::OpKind::ConvertLayout ||
      op.kind == ir::OpKind::SetLayout || xt.splat) {
    if (x->type.numel() != r->type.numel() && !xt.splat) fail(op, "element count changes");
    tiles[r] = xt;
    return;
  }
  const ir::Shape& xs = x->type.shape;
  const ir::Shape& rs = r->type.shape;
  const int rank = r->type.rank();
  if (x->type.rank() != rank) fail(op, "operand and result ranks differ");
  std::vector<int64_t> xstride(rank, 1);
  for (int d = rank - 2; d >= 0; --d) xstride[d] = xstride[d + 1] * xs[d + 1];
  // src_stride[d]: step in x's storage when result index d advances by one.
  std::vector<int64_t> src_stride(rank);
  if (op.kind == ir::OpKind::Broadcast) {
    for (int d = 0; d < rank; ++d) {
      if (xs[d] != rs[d] && xs[d] != 1) fail(op, "dimension is neither 1 nor equal to the result's");
      src_stride[d] = xs[d] == 1 ? 0 : xstride[d];
    }
  } else {  // Permute
    const auto& order = op.ints_attr("order");
    if (static_cast<int>(order.size()) != rank) fail(op, "order length differs from the rank");
    for (int d = 0; d < rank; ++d) {
      if (order[d] < 0 || order[d] >= rank || xs[order[d]] != rs[d]) fail(op, "bad order");
      src_stride[d] = xstride[order[d]];
    }
  }
  llvm::Type* ty = elem_ty(r->type.dtype);
  int64_t n = r->type.numel();
  Value* dst = n == 1 ? alloc(ty, 1) : alloc(ty, n, r->name_hint);
  // Nested loops over the result's dims; dst offset = row-major linear index.
  std::function<void(int, Value*, Value*)> rec = [&](int d, Value* dst_off, Value* src_off) {
    if (d == rank) {
      store_elem(dst, ty, dst_off, elem(xt, ty, src_off));
      return;
    }
    loop(rs[d], [&](Value* i) {
      Value* dd = B.CreateAdd(B.CreateMul(dst_off, i64c(rs[d])), i, "", true, true);
      Value* ss = B.CreateAdd(src_off, B.CreateMul(i, i64c(src_stride[d])), "", true, true);
      rec(d + 1, dd, ss);
    }, "d" + llvm::Twine(d));
  };
  rec(0, i64c(0), i64c(0));
  if (n == 1) tiles[r] = Tile{nullptr, B.CreateLoad(ty, dst)};
  else tiles[r] = Tile{dst, nullptr};
}

/// extract_tile / insert_tile (docs/ir.md): element by element, the sub-tile's start per dim
/// computed once (ir/subtile.hpp; a dynamic id wraps as unsigned 32-bit).
void Lowerer::lower_subtile(const ir::Op& op) {
  const ir::SubTileGrid g = ir::subtile_grid(op);
  if (!g.valid) fail(op, "the sub-tile shape does not divide the tile's");
  const bool ins = op.kind == ir::OpKind::InsertTile;
  const size_t nfixed = ins ? 2 : 1;
  const size_t rank = g.x.size();
  std::vector<Value*> off(rank);
  if (op.operands.size() > nfixed) {
    Value* id = B.CreateZExt(elem(op.operands[nfixed], i64c(0)), B.getInt64Ty());
    for (size_t d = 0; d < rank; ++d)
      off[d] = B.CreateMul(B.CreateURem(B.CreateUDiv(id, i64c(g.stride[d])), i64c(g.grid[d])), i64c(g.sub[d]));
  } else {
    const std::vector<int64_t> o = ir::subtile_offsets(g, static_cast<uint32_t>(op.int_attr("index")));
    for (size_t d = 0; d < rank; ++d) off[d] = i64c(o[d]);
  }
  std::vector<int64_t> xst(rank, 1), sst(rank, 1);
  for (size_t d = rank - 1; d > 0; --d) xst[d - 1] = xst[d] * g.x[d], sst[d - 1] = sst[d] * g.sub[d];
  const ir::Value* x = op.operands[0];
  const ir::Value* r = op.result();
  if (!ins) {
    produce(r, [&](Value* l) {
      Value* at = i64c(0);
      for (size_t d = 0; d < rank; ++d) {
        Value* c = B.CreateURem(B.CreateUDiv(l, i64c(sst[d])), i64c(g.sub[d]));
        at = B.CreateAdd(at, B.CreateMul(B.CreateAdd(off[d], c), i64c(xst[d])));
      }
      return elem(x, at);
    });
    return;
  }
  const ir::Value* sub = op.operands[1];
  produce(r, [&](Value* l) {
    Value* inside = B.getTrue();
    Value* at = i64c(0);
    for (size_t d = 0; d < rank; ++d) {
      Value* rel = B.CreateSub(B.CreateURem(B.CreateUDiv(l, i64c(xst[d])), i64c(g.x[d])), off[d]);
      inside = B.CreateAnd(inside, B.CreateICmpULT(rel, i64c(g.sub[d])));
      at = B.CreateAdd(at, B.CreateMul(rel, i64c(sst[d])));
    }
    Value* from_sub = elem(sub, B.CreateSelect(inside, at, i64c(0)));
    return B.CreateSelect(inside, from_sub, elem(x, l));
  });
}

// ---------------------------------------------------------------------------------------------
// structured control flow

namespace {
/// Storage of a carried value / if result: one scalar slot or an array.
struct Slot {
  Value* ptr;
  llvm::Type* ty;
  int64_t n;
};
}  // namespace

std::vector<Value*> Lowerer::inline_region(const ir::Region& r, const std::vector<Value*>& args) {
  const ir::Block& b = r.body();
  if (b.args.size() != args.size()) throw InternalError("cpu backend: region argument count mismatch");
  for (size_t i = 0; i < args.size(); ++i) tiles[b.arg(i)] = Tile{nullptr, args[i]};
  lower_block(b);
  const ir::Op* y = b.terminator();
  if (!y) throw InternalError("cpu backend: region without yield");
  std::vector<Value*> out;
  for (auto* v : y->operands) {
    const Tile& t = tile(v);
    out.push_back(t.splat ? t.splat : B.CreateLoad(elem_ty(v->type.dtype), t.ptr));
  }
  return out;
}

void Lowerer::lower_for(const ir::Op& op) {
  if (op.operands.size() < 3) fail(op, "needs lo, hi, step");
  const ir::Block& rb = op.region(0).body();
  const size_t ncarried = op.operands.size() - 3;
  if (rb.args.size() != ncarried + 1 || op.results.size() != ncarried) fail(op, "carried value count mismatch");
  const DType d = op.operands[0]->type.dtype;
  if (!is_int(d)) fail(op, "bounds must be integers");
  auto scalar = [&](const ir::Value* v) { return elem(v, i64c(0)); };
  auto [trips, lo, step] = trip_count(scalar(op.operands[0]), scalar(op.operands[1]), scalar(op.operands[2]), d);

  // Carried storage, initialized from the inits.
  std::vector<Slot> slots;
  for (size_t j = 0; j < ncarried; ++j) {
    const ir::Value* init = op.operands[3 + j];
    llvm::Type* ty = elem_ty(init->type.dtype);
    int64_t n = init->type.numel();
    Slot s{alloc(ty, n, "carried"), ty, n};
    copy_into(s.ptr, ty, tile(init), n);
    slots.push_back(s);
  }
  llvm::Type* ity = elem_ty(d);
  // Trip loop: k in [0, trips) unsigned.
  llvm::BasicBlock* pre = B.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(ctx, "for.head", body);
  auto* bodybb = llvm::BasicBlock::Create(ctx, "for.body", body);
  auto* exit = llvm::BasicBlock::Create(ctx, "for.exit", body);
  B.CreateBr(header);
  B.SetInsertPoint(header);
  auto* k = B.CreatePHI(B.getInt64Ty(), 2, "k");
  k->addIncoming(i64c(0), pre);
  B.CreateCondBr(B.CreateICmpULT(k, trips), bodybb, exit);
  B.SetInsertPoint(bodybb);
  Value* iv = B.CreateTrunc(B.CreateAdd(lo, B.CreateMul(k, step)), ity, "iv");
  tiles[rb.arg(0)] = Tile{nullptr, iv};
  for (size_t j = 0; j < ncarried; ++j) {
    const Slot& s = slots[j];
    tiles[rb.arg(j + 1)] = s.n == 1 ? Tile{nullptr, B.CreateLoad(s.ty, s.ptr)} : Tile{s.ptr, nullptr};
  }
  lower_block(rb);
  const ir::Op* y = rb.terminator();
  if (!y || y->operands.size() != ncarried) fail(op, "body must yield every carried value");
  // Copy the yields into the carried slots. A yielded tile may share storage with another carried
  // slot (e.g. a swap); those are staged through temporaries first.
  std::set<Value*> slot_ptrs;
  for (auto& s : slots) slot_ptrs.insert(s.ptr);
  std::vector<Tile> srcs;
  for (size_t j = 0; j < ncarried; ++j) {
    Tile t = tile(y->operands[j]);
    if (t.ptr && t.ptr != slots[j].ptr && slot_ptrs.count(t.ptr)) {
      Value* tmp = alloc(slots[j].ty, slots[j].n, "stage");
      copy_into(tmp, slots[j].ty, t, slots[j].n);
      t = Tile{tmp, nullptr};
    }
    srcs.push_back(t);
  }
  for (size_t j = 0; j < ncarried; ++j) copy_into(slots[j].ptr, slots[j].ty, srcs[j], slots[j].n);
  k->addIncoming(B.CreateAdd(k, i64c(1), "", true, true), B.GetInsertBlock());
  B.CreateBr(header);
  B.SetInsertPoint(exit);
  for (size_t j = 0; j < ncarried; ++j) {
    const Slot& s = slots[j];
    tiles[op.result(j)] = s.n == 1 ? Tile{nullptr, B.CreateLoad(s.ty, s.ptr)} : Tile{s.ptr, nullptr};
  }
}

void Lowerer::lower_if(const ir::Op& op) {
  if (op.operands.size() != 1 || op.regions.size() != 2) fail(op, "needs one condition and two regions");
  Value* cond = elem(op.operands[0], i64c(0));
  std::vector<Slot> slots;
  for (auto& r : op.results) {
    llvm::Type* ty = elem_ty(r->type.dtype);
    int64_t n = r->type.numel();
    slots.push_back(Slot{alloc(ty, n, "ifres"), ty, n});
  }
  auto* thenbb = llvm::BasicBlock::Create(ctx, "if.then", body);
  auto* elsebb = llvm::BasicBlock::Create(ctx, "if.else", body);
  auto* merge = llvm::BasicBlock::Create(ctx, "if.end", body);
  B.CreateCondBr(cond, thenbb, elsebb);
  for (int side = 0; side < 2; ++side) {
    B.SetInsertPoint(side == 0 ? thenbb : elsebb);
    const ir::Block& rb = op.region(side).body();
    lower_block(rb);
    const ir::Op* y = rb.terminator();
    if (!y || y->operands.size() != slots.size()) fail(op, "each branch must yield every result");
    for (size_t j = 0; j < slots.size(); ++j) copy_into(slots[j].ptr, slots[j].ty, tile(y->operands[j]), slots[j].n);
    B.CreateBr(merge);
  }
  B.SetInsertPoint(merge);
  for (size_t j = 0; j < slots.size(); ++j) {
    const Slot& s = slots[j];
    tiles[op.result(j)] = s.n == 1 ? Tile{nullptr, B.CreateLoad(s.ty, s.ptr)} : Tile{s.ptr, nullptr};
  }
}

// ---------------------------------------------------------------------------------------------
// functions

llvm::Function* Lowerer::run(const std::string& symbol) {
  const ir::Block& entry = fn_ir.entry();
  auto* i32 = B.getInt32Ty();
  auto* i64 = B.getInt64Ty();
  auto* ptr = B.getPtrTy();

  // Body: (kernel args..., x, y, z, gx, gy, gz, scratch).
  std::vector<llvm::Type*> params;
  for (auto& a : entry.args) {
    if (!a->type.is_scalar()) throw RuntimeError("tle::cpu::lower", fmt::format("kernel '{}': argument {} is not a scalar", fn_ir.name, a->index));
    params.push_back(elem_ty(a->type.dtype));
  }
  for (int i = 0; i < 6; ++i) params.push_back(i32);
  params.push_back(ptr);
  body = llvm::Function::Create(llvm::FunctionType::get(B.getVoidTy(), params, false), llvm::Function::InternalLinkage,
                                symbol + ".body", mod);
  body->addFnAttr(llvm::Attribute::NoUnwind);
  alloca_bb = llvm::BasicBlock::Create(ctx, "allocas", body);
  auto* start = llvm::BasicBlock::Create(ctx, "start", body);
  B.SetInsertPoint(start);
  size_t na = entry.args.size();
  for (size_t i = 0; i < na; ++i) tiles[entry.arg(i)] = Tile{nullptr, body->getArg(static_cast<unsigned>(i))};
  for (int i = 0; i < 3; ++i) {
    pid[i] = body->getArg(static_cast<unsigned>(na + i));
    nprog[i] = body->getArg(static_cast<unsigned>(na + 3 + i));
  }
  lower_block(entry);
  B.CreateRetVoid();
  llvm::IRBuilder<>(alloca_bb).CreateBr(start);
  move_large_arrays_to_scratch(body->getArg(static_cast<unsigned>(na + 6)));

  // Entry: (void* const* args, const int64_t* grid, int64_t begin, int64_t end, void* scratch,
  // volatile int64_t* current_pid).
  auto* efn = llvm::Function::Create(llvm::FunctionType::get(B.getVoidTy(), {ptr, ptr, i64, i64, ptr, ptr}, false),
                                     llvm::Function::ExternalLinkage, symbol, mod);
  efn->addFnAttr(llvm::Attribute::NoUnwind);
  // Frames stay within kStackArrayBudget plus scalars, but probing every page of a large one makes
  // a stack overflow fault on the guard page (reported by the launcher) instead of writing past it.
  for (llvm::Function* fn : {body, efn}) fn->addFnAttr("probe-stack", "inline-asm");
  auto* ebb = llvm::BasicBlock::Create(ctx, "entry", efn);
  B.SetInsertPoint(ebb);
  std::vector<Value*> call_args;
  for (size_t i = 0; i < na; ++i) {
    DType d = entry.arg(i)->type.dtype;
    Value* slot = B.CreateLoad(ptr, B.CreateConstInBoundsGEP1_64(ptr, efn->getArg(0), i));
    Value* v = B.CreateLoad(mem_ty(d), slot, entry.arg(i)->name_hint);
    if (d == DType::i1) v = B.CreateICmpNE(v, B.getInt8(0));
    call_args.push_back(v);
  }
  Value* g[3];
  for (int i = 0; i < 3; ++i) g[i] = B.CreateLoad(i64, B.CreateConstInBoundsGEP1_64(i64, efn->getArg(1), i));
  // The per-program loop; the body gets inlined here by the optimizer.
  Value* begin = efn->getArg(2);
  Value* end = efn->getArg(3);
  auto* head = llvm::BasicBlock::Create(ctx, "pid.head", efn);
  auto* lbody = llvm::BasicBlock::Create(ctx, "pid.body", efn);
  auto* done = llvm::BasicBlock::Create(ctx, "pid.done", efn);
  B.CreateBr(head);
  B.SetInsertPoint(head);
  auto* p = B.CreatePHI(i64, 2, "pid");
  p->addIncoming(begin, ebb);
  B.CreateCondBr(B.CreateICmpSLT(p, end), lbody, done);
  B.SetInsertPoint(lbody);
  // The launcher names this program if it faults (a volatile store: it must happen before the body).
  B.CreateStore(p, efn->getArg(5), /*isVolatile=*/true);
  Value* x = B.CreateURem(p, g[0]);
  Value* t = B.CreateUDiv(p, g[0]);
  Value* y = B.CreateURem(t, g[1]);
  Value* z = B.CreateUDiv(t, g[1]);
  std::vector<Value*> ca = call_args;
  for (Value* v : {x, y, z, g[0], g[1], g[2]}) ca.push_back(B.CreateTrunc(v, i32));
  ca.push_back(efn->getArg(4));
  B.CreateCall(body, ca);
  p->addIncoming(B.CreateAdd(p, B.getInt64(1)), lbody);
  B.CreateBr(head);
  B.SetInsertPoint(done);
  B.CreateRetVoid();
  return efn;
}

void Lowerer::move_large_arrays_to_scratch(Value* scratch) {
  std::vector<llvm::AllocaInst*> arrays;
  const llvm::DataLayout& dl = mod.getDataLayout();
  auto size_of = [&](llvm::AllocaInst* a) { return a->getAllocationSize(dl)->getFixedValue(); };
  uint64_t total = 0;
  for (llvm::Instruction& inst : *alloca_bb)
    if (auto* a = llvm::dyn_cast<llvm::AllocaInst>(&inst)) {
      arrays.push_back(a);
      total += size_of(a);
    }
  // The largest arrays go first: fewest moved, and the small ones (which SROA turns into
  // registers) stay in the frame.
  std::stable_sort(arrays.begin(), arrays.end(),
                   [&](llvm::AllocaInst* a, llvm::AllocaInst* b) { return size_of(a) > size_of(b); });
  llvm::IRBuilder<> ab(alloca_bb->getTerminator());  // the allocas' block dominates every use
  for (llvm::AllocaInst* a : arrays) {
    if (total <= kStackArrayBudget) break;
    const uint64_t size = size_of(a);
    Value* at = ab.CreateConstInBoundsGEP1_64(B.getInt8Ty(), scratch, scratch_bytes, a->getName() + ".scratch");
    a->replaceAllUsesWith(at);
    a->eraseFromParent();
    scratch_bytes += (size + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
    total -= size;
  }
  if (scratch_bytes > 0) {
    auto* arg = llvm::cast<llvm::Argument>(scratch);
    arg->addAttr(llvm::Attribute::NoAlias);
    arg->addAttr(llvm::Attribute::getWithAlignment(ctx, llvm::Align(kScratchAlign)));
  }
}

Lowered lower_function(const ir::Function& f, llvm::Module& m, const std::string& symbol) {
  Lowerer l(f, m);
  llvm::Function* entry = l.run(symbol);
  return Lowered{entry, l.scratch_bytes};
}

}  // namespace tle::cpu::detail
