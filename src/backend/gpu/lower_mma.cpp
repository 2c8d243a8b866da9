// src/backend/gpu/lower_mma.cpp - dot on tensor cores: mma.sync.aligned.m16n8k16.row.col with
// f16 or bf16 inputs and f32 accumulators (PTX ISA 9.7.14.5.8), entry point Lowerer::lower_dot_mma.
//
// The layout pass (passes/gpu/assign_layouts.cpp, layout_rules.hpp mma_v2_plan) gives such a dot's
// result and acc the mma_v2_accumulator layout and a, b the mma_v2_operand layouts of one warp
// grid {wm, wn}. In those layouts one warp holds, in registers, whole instruction fragments: for
// every 16x8 accumulator tile (mt, nt) of the warp and every k16 step kt, the 4 accumulator
// elements, the 8 A elements of rows tile mt / cols kt and the 4 B elements of rows kt / cols nt,
// each at the position the PTX fragment table gives to its lane. So the dot is, per warp, one
// mma.sync per (kt, mt, nt) on registers the thread already has; no shared memory.
//
// Which register holds which fragment element is read from the layouts, not assumed: the register
// part of a linear layout does not depend on lane or warp (coordinates = reg part XOR lane part
// XOR warp part), so a map from reg-part coordinates to register index per operand finds, for the
// fragment element (row, col) of lane 0 / warp 0 of tile (mt, nt, kt), the register whose reg-part
// coordinates are the tile origin + the fragment offset (mma_v2_steps, mma_fragments.hpp). Since
// the layouts equal the named mma layouts (checked first), lane L / warp W's register of that
// index holds that fragment element of lane L, as mma.sync expects. A missing lookup is an
// InternalError naming the operand.
#include <fmt/format.h>
#include <llvm/IR/InlineAsm.h>

#include <map>
#include <utility>

#include "backend/gpu/lower.hpp"
#include "backend/gpu/mma_fragments.hpp"
#include "passes/gpu/layout_rules.hpp"

namespace tle::gpu::detail {

using layout::LinearLayout;
using llvm::Value;

namespace {

int find_reg(const RegMap& m, const LinearLayout& l, const char* what, int64_t row, int64_t col) {
  auto it = m.find({static_cast<int32_t>(row), static_cast<int32_t>(col)});
  if (it == m.end())
    throw InternalError(fmt::format("gpu backend: mma.sync lowering of dot: no register of {} holds fragment element "
                                    "({}, {}) of lane 0 / warp 0 (the layout is not the mma fragment layout):\n{}",
                                    what, row, col, l.str()));
  return it->second;
}

}  // namespace

RegMap regs_by_coords(const LinearLayout& l) {
  RegMap m;
  for (int r = 0; r < l.num_regs(); ++r) {
    auto rc = Lowerer::reg_coords(l, r);
    m.emplace(std::make_pair(rc.at(0), rc.at(1)), r);  // the first holder
  }
  return m;
}

std::vector<MmaStep> mma_v2_steps(const LinearLayout& a, const LinearLayout& b, const LinearLayout& acc,
                                  const std::vector<int32_t>& warps) {
  if (warps.size() != 2 || a.num_out_dims() != 2 || b.num_out_dims() != 2 || acc.num_out_dims() != 2)
    throw InternalError("gpu backend: mma_v2_steps: expects 2-D layouts and a {wm, wn} warp grid");
  const int64_t wm = warps[0], wn = warps[1];
  const int64_t M = acc.out_dims()[0].size, N = acc.out_dims()[1].size, K = a.out_dims()[1].size;
  if (a.out_dims()[0].size != M || b.out_dims()[0].size != K || b.out_dims()[1].size != N || M % (16 * wm) ||
      N % (8 * wn) || K % 16)
    throw InternalError(fmt::format("gpu backend: mma_v2_steps: shapes a {}x{}, b {}x{}, acc {}x{} do not fit warps "
                                    "{{{}, {}}} and m16n8k16",
                                    a.out_dims()[0].size, K, b.out_dims()[0].size, b.out_dims()[1].size, M, N, wm, wn));
  const int64_t tiles_m = M / (16 * wm), tiles_n = N / (8 * wn), steps_k = K / 16;
  const RegMap am = regs_by_coords(a), bm = regs_by_coords(b), cm = regs_by_coords(acc);
  std::vector<int> seen(static_cast<size_t>(acc.num_regs()), 0);
  std::vector<MmaStep> steps;
  for (int64_t kt = 0; kt < steps_k; ++kt)
    for (int64_t mt = 0; mt < tiles_m; ++mt)
      for (int64_t nt = 0; nt < tiles_n; ++nt) {
        MmaStep s;
        s.mt = mt, s.nt = nt, s.kt = kt;
        const int64_t m0 = mt * 16 * wm, n0 = nt * 8 * wn, k0 = kt * 16;
        // a_i: row g + 8 * ((i >> 1) & 1), col 2t + (i & 1) + 8 * (i >= 4)
        for (int i = 0; i < 8; ++i) s.a[i] = find_reg(am, a, "a", m0 + 8 * ((i >> 1) & 1), k0 + (i & 1) + 8 * (i >= 4));
        // b_i: row 2t + (i & 1) + 8 * (i >= 2), col g
        for (int i = 0; i < 4; ++i) s.b[i] = find_reg(bm, b, "b", k0 + (i & 1) + 8 * (i >= 2), n0);
        // c_i: row g + 8 * (i >> 1), col 2t + (i & 1)
        for (int i = 0; i < 4; ++i) {
          s.c[i] = find_reg(cm, acc, "the accumulator", m0 + 8 * (i >> 1), n0 + (i & 1));
          if (kt == 0) ++seen[static_cast<size_t>(s.c[i])];
        }
        steps.push_back(s);
      }
  for (size_t q = 0; q < seen.size(); ++q)
    if (seen[q] != 1)
      throw InternalError(fmt::format("gpu backend: mma_v2_steps: accumulator register {} is in {} 16x8 tiles, not 1:\n{}",
                                      q, seen[q], acc.str()));
  return steps;
}

bool Lowerer::lower_dot_mma(const ir::Op& op) {
  auto plan = passes::gpu_rules::mma_v2_plan(op, num_warps);
  if (!plan) return false;
  const ir::Value* a = op.operands.at(0);
  const ir::Value* b = op.operands.at(1);
  const ir::Value* c = op.operands.at(2);
  const ir::Value* r = op.result();
  const LinearLayout *la = layout_of(a), *lb = layout_of(b), *lc = layout_of(c), *lr = layout_of(r);
  if (!la || !lb || !lc || !lr) return false;
  if (*lr != plan->acc || *lc != plan->acc || *la != plan->a || *lb != plan->b) return false;
  std::vector<MmaStep> steps;
  try {
    steps = mma_v2_steps(*la, *lb, *lr, plan->warps);
  } catch (const InternalError& e) {
    std::string where = op.loc.known() ? fmt::format(" (traced at {}:{})", op.loc.file, op.loc.line) : "";
    throw InternalError(fmt::format("kernel '{}', dot{}: {}", fn_ir.name, where, e.what()));
  }

  const char* ty = a->type.dtype == DType::bf16 ? "bf16" : "f16";
  llvm::Type* f32 = B.getFloatTy();
  llvm::Type* i32 = B.getInt32Ty();
  auto* ret_ty = llvm::StructType::get(ctx, {f32, f32, f32, f32});
  auto* fn_ty = llvm::FunctionType::get(ret_ty, {i32, i32, i32, i32, i32, i32, f32, f32, f32, f32}, false);
  auto* mma = llvm::InlineAsm::get(
      fn_ty,
      fmt::format("mma.sync.aligned.m16n8k16.row.col.f32.{0}.{0}.f32 {{$0, $1, $2, $3}}, {{$4, $5, $6, $7}}, "
                  "{{$8, $9}}, {{$10, $11, $12, $13}};",
                  ty),
      "=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f", /*hasSideEffects=*/false);

  // Two 16-bit registers (their bit patterns, i16) -> one .b32 operand, the first in the low half.
  std::map<std::pair<const ir::Value*, std::pair<int, int>>, Value*> packed;
  auto pack = [&](const ir::Value* v, int lo, int hi) {
    Value*& p = packed[{v, {lo, hi}}];
    if (!p) {  // registers that arrived packed (ldmatrix) are used as they are
      auto pv = packed32.find(v);
      if (pv != packed32.end()) {
        auto q = pv->second.find({lo, hi});
        if (q != pv->second.end()) return p = q->second;
      }
    }
    if (!p) {
      Value* l32 = B.CreateZExt(reg(v, lo), i32);
      Value* h32 = B.CreateShl(B.CreateZExt(reg(v, hi), i32), 16);
      p = B.CreateOr(l32, h32);
    }
    return p;
  };
  std::vector<Value*> out(static_cast<size_t>(lr->num_regs()));
  for (int q = 0; q < lr->num_regs(); ++q) out[static_cast<size_t>(q)] = reg(c, q);
  for (const MmaStep& s : steps) {
    std::vector<Value*> args = {pack(a, s.a[0], s.a[1]), pack(a, s.a[2], s.a[3]), pack(a, s.a[4], s.a[5]),
                                pack(a, s.a[6], s.a[7]), pack(b, s.b[0], s.b[1]), pack(b, s.b[2], s.b[3])};
    for (int q : s.c) args.push_back(out[static_cast<size_t>(q)]);
    llvm::CallInst* call = B.CreateCall(fn_ty, mma, args);
    call->addFnAttr(llvm::Attribute::Convergent);  // the whole warp executes it together
    for (unsigned i = 0; i < 4; ++i) out[static_cast<size_t>(s.c[i])] = B.CreateExtractValue(call, {i});
  }
  regs[r] = out;
  return true;
}

}  // namespace tle::gpu::detail
