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
// coordinates are the tile origin + the fragment offset. Since the layouts equal the named mma
// layouts (checked first), lane L / warp W's register of that index holds that fragment element of
// lane L, as mma.sync expects. A missing lookup is an InternalError naming the operand.
#include <fmt/format.h>
#include <llvm/IR/InlineAsm.h>

#include <map>
#include <utility>

#include "backend/gpu/lower.hpp"
#include "passes/gpu/layout_rules.hpp"

namespace tle::gpu::detail {

using layout::LinearLayout;
using llvm::Value;

namespace {

/// Register index by reg-part coordinates (row, col) of a 2-D register layout.
std::map<std::pair<int32_t, int32_t>, int> regs_by_coords(const LinearLayout& l) {
  std::map<std::pair<int32_t, int32_t>, int> m;
  for (int r = 0; r < l.num_regs(); ++r) {
    auto rc = Lowerer::reg_coords(l, r);
    m.emplace(std::make_pair(rc.at(0), rc.at(1)), r);  // first holder (mma layouts have no copies)
  }
  return m;
}

}  // namespace

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

  const int64_t M = a->type.shape[0], K = a->type.shape[1], N = b->type.shape[1];
  const int32_t wm = plan->warps[0], wn = plan->warps[1];
  const int64_t tiles_m = M / (16 * wm), tiles_n = N / (8 * wn), steps_k = K / 16;
  const char* ty = a->type.dtype == DType::bf16 ? "bf16" : "f16";

  const auto a_regs = regs_by_coords(*la), b_regs = regs_by_coords(*lb), c_regs = regs_by_coords(*lr);
  auto find = [&](const std::map<std::pair<int32_t, int32_t>, int>& m, const LinearLayout& l, const char* what,
                  int64_t row, int64_t col) {
    auto it = m.find({static_cast<int32_t>(row), static_cast<int32_t>(col)});
    if (it == m.end()) {
      std::string where = op.loc.known() ? fmt::format(" (traced at {}:{})", op.loc.file, op.loc.line) : "";
      throw InternalError(fmt::format(
          "gpu backend: kernel '{}': dot{}: mma.sync lowering: no register of {} holds fragment element "
          "({}, {}) of lane 0 / warp 0 (the layout is not the mma fragment layout it claims to be):\n{}",
          fn_ir.name, where, what, row, col, l.str()));
    }
    return it->second;
  };

  // Two 16-bit registers (their bit patterns, i16) -> one .b32 operand, the first in the low half.
  auto pack = [&](Value* lo, Value* hi) {
    Value* l32 = B.CreateZExt(lo, B.getInt32Ty());
    Value* h32 = B.CreateShl(B.CreateZExt(hi, B.getInt32Ty()), 16);
    return B.CreateOr(l32, h32);
  };
  // A fragment of tile (mt, kt): a0..a7 at rows g + 8 * ((i >> 1) & 1), cols 2t + (i & 1) + 8 * (i >= 4).
  auto a_frag = [&](int64_t mt, int64_t kt) {
    std::vector<Value*> v;
    for (int i = 0; i < 8; i += 2) {
      int64_t row = mt * 16 * wm + 8 * ((i >> 1) & 1), col = kt * 16 + 8 * (i >= 4);
      v.push_back(pack(reg(a, find(a_regs, *la, "a", row, col)), reg(a, find(a_regs, *la, "a", row, col + 1))));
    }
    return v;
  };
  // B fragment of tile (kt, nt): b0..b3 at rows 2t + (i & 1) + 8 * (i >= 2), col g.
  auto b_frag = [&](int64_t kt, int64_t nt) {
    std::vector<Value*> v;
    for (int i = 0; i < 4; i += 2) {
      int64_t row = kt * 16 + 8 * (i >= 2), col = nt * 8 * wn;
      v.push_back(pack(reg(b, find(b_regs, *lb, "b", row, col)), reg(b, find(b_regs, *lb, "b", row + 1, col))));
    }
    return v;
  };

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

  // Accumulator registers: c_i of tile (mt, nt) at row g + 8 * (i >> 1), col 2t + (i & 1).
  std::vector<Value*> out(static_cast<size_t>(lr->num_regs()), nullptr);
  std::vector<std::vector<int>> c_idx(static_cast<size_t>(tiles_m * tiles_n));
  for (int64_t mt = 0; mt < tiles_m; ++mt)
    for (int64_t nt = 0; nt < tiles_n; ++nt)
      for (int i = 0; i < 4; ++i) {
        int q = find(c_regs, *lr, "the accumulator", mt * 16 * wm + 8 * (i >> 1), nt * 8 * wn + (i & 1));
        c_idx[static_cast<size_t>(mt * tiles_n + nt)].push_back(q);
        out[static_cast<size_t>(q)] = reg(c, q);
      }
  for (size_t q = 0; q < out.size(); ++q)
    if (!out[q])
      throw InternalError(fmt::format("gpu backend: kernel '{}': dot: mma.sync lowering: accumulator register {} "
                                      "is in no 16x8 tile:\n{}",
                                      fn_ir.name, q, lr->str()));

  for (int64_t kt = 0; kt < steps_k; ++kt) {
    std::vector<std::vector<Value*>> bf;
    for (int64_t nt = 0; nt < tiles_n; ++nt) bf.push_back(b_frag(kt, nt));
    for (int64_t mt = 0; mt < tiles_m; ++mt) {
      auto af = a_frag(mt, kt);
      for (int64_t nt = 0; nt < tiles_n; ++nt) {
        const auto& qs = c_idx[static_cast<size_t>(mt * tiles_n + nt)];
        const auto& bv = bf[static_cast<size_t>(nt)];
        std::vector<Value*> args = {af[0], af[1], af[2], af[3], bv[0], bv[1]};
        for (int q : qs) args.push_back(out[static_cast<size_t>(q)]);
        llvm::CallInst* call = B.CreateCall(fn_ty, mma, args);
        call->addFnAttr(llvm::Attribute::Convergent);  // the whole warp executes it together
        for (unsigned i = 0; i < 4; ++i) out[static_cast<size_t>(qs[i])] = B.CreateExtractValue(call, {i});
      }
    }
  }
  regs[r] = out;
  return true;
}

}  // namespace tle::gpu::detail
