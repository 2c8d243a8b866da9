// src/backend/gpu/lower_ldmatrix.cpp - convert_layout to tensor-core operand layouts through an
// XOR-swizzled shared-memory tile and ldmatrix (PTX ISA 9.7.14.5.15, ldmatrix.sync.aligned.m8n8).
//
// ldmatrix.m8n8.x4.b16 reads four 8x8 matrices of 16-bit elements: lanes 8j..8j+7 give the
// addresses of the 8 rows (16 contiguous bytes each) of matrix j, and thread T receives, in its
// 32-bit result register j, the elements (T / 4, 2 (T % 4)) and (T / 4, 2 (T % 4) + 1) of matrix j
// (low half first); with .trans it receives (2 (T % 4), T / 4) and (2 (T % 4) + 1, T / 4), i.e. the
// matrix is transposed on the way. That is the mma.sync m16n8k16 A / B fragment for 16-bit types
// (PTX ISA 9.7.14.5.8) when the matrix rows in memory run along M (A) / N (B) (no .trans) or along K
// (.trans). Which register of the destination gets which element is read from the destination's
// linear layout (ldmatrix_plan): register pair (2m, 2m+1) is matrix m, whose origin for a warp is
// the reg part of register 2m XOR the warp part, as mma_v2_steps finds fragments by coordinates.
//
// Shared memory: the tile is row-major along its contiguous dim (for a pipelined load the global
// contiguous dim, so cp.async writes 16-byte chunks; for a register source the source's fastest
// dim, so the writes are vectors), swizzled per SwizzledTile (lower.hpp), so both the 16-byte
// writes and ldmatrix's eight 16-byte row reads are free of bank conflicts.
#include <fmt/format.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

#include <algorithm>

#include "backend/gpu/lower.hpp"

namespace tle::gpu::detail {

using layout::LinearLayout;
using llvm::Value;

namespace {
int log2i(int64_t v) {
  int b = 0;
  while ((int64_t{1} << (b + 1)) <= v) ++b;
  return b;
}
}  // namespace

SwizzledTile SwizzledTile::make(int64_t rows, int64_t cols, int cdim, int esize) {
  if ((esize != 1 && esize != 2) || rows < 8 || cols * esize < 16 || !layout::is_pow2(rows) || !layout::is_pow2(cols) ||
      (cdim != 0 && cdim != 1))
    throw InternalError(fmt::format("SwizzledTile: bad tile {}x{} of {}-byte elements (cdim {})", rows, cols, esize, cdim));
  SwizzledTile t;
  t.rows = rows, t.cols = cols, t.cdim = cdim, t.atom = cols, t.esize = esize;
  const int64_t chunks = cols / t.chunk();
  t.per_phase = static_cast<int32_t>(std::max<int64_t>(1, 8 / chunks));
  t.max_phase = static_cast<int32_t>(std::min<int64_t>(chunks, 8 / t.per_phase));
  return t;
}

SwizzledTile SwizzledTile::make_wgmma(int64_t rows, int64_t cols, int cdim, int64_t max_atom, int esize) {
  if (max_atom == 0 && (esize == 1 || esize == 2)) max_atom = 128 / esize;
  const int64_t atom_bytes = max_atom * esize;
  if (cols * esize < 32 || (atom_bytes != 32 && atom_bytes != 64 && atom_bytes != 128))
    throw InternalError(fmt::format("SwizzledTile: bad wgmma tile {}x{} of {}-byte elements (atoms of at most {})", rows,
                                    cols, esize, max_atom));
  const int64_t atom = std::min(cols, max_atom);
  SwizzledTile t = make(rows, atom, cdim, esize);  // one atom's swizzle
  t.cols = cols;
  return t;
}

int64_t SwizzledTile::offset(int64_t row, int64_t col) const {
  const int64_t phase = (row / per_phase) % max_phase;
  const int64_t c = col % atom, e = chunk();
  return (col / atom) * rows * atom + row * atom + (((c / e) ^ phase) * e) + c % e;
}

Value* Lowerer::swizzled_offset(const SwizzledTile& t, Value* row, Value* col) {
  const uint64_t le = static_cast<uint64_t>(log2i(t.chunk()));
  Value* phase = B.CreateAnd(B.CreateLShr(row, static_cast<uint64_t>(log2i(t.per_phase))), t.max_phase - 1);
  Value* c = t.atom == t.cols ? col : B.CreateAnd(col, i32c(t.atom - 1));
  Value* chunk = B.CreateXor(B.CreateLShr(c, le), phase);
  Value* off = B.CreateAdd(B.CreateAdd(B.CreateMul(row, i32c(t.atom)), B.CreateShl(chunk, le)),
                           B.CreateAnd(c, static_cast<uint64_t>(t.chunk() - 1)));
  if (t.atom == t.cols) return off;
  return B.CreateAdd(off, B.CreateMul(B.CreateLShr(col, static_cast<uint64_t>(log2i(t.atom))), i32c(t.rows * t.atom)));
}

std::optional<LdmatrixPlan> ldmatrix_plan(const LinearLayout& l) {
  using layout::kLane;
  using layout::kReg;
  using layout::kWarp;
  if (l.num_out_dims() != 2 || !l.has_in_dim(kReg) || !l.has_in_dim(kLane) || l.num_lanes() != 32) return std::nullopt;
  if (l.num_blocks() != 1) return std::nullopt;
  for (const auto& in : l.in_dim_names())
    if (in != kReg && in != kLane && in != kWarp && in != layout::kBlock) return std::nullopt;
  const auto& rb = l.bases(kReg);
  const auto& lb = l.bases(kLane);
  if (rb.empty() || lb.size() != 5) return std::nullopt;
  auto unit = [](const LinearLayout::Basis& b, int d, int32_t v) { return b[d] == v && b[1 - d] == 0; };
  int kd = unit(rb[0], 0, 1) ? 0 : unit(rb[0], 1, 1) ? 1 : -1;
  if (kd < 0) return std::nullopt;
  const int od = 1 - kd;
  if (!unit(lb[0], kd, 2) || !unit(lb[1], kd, 4) || !unit(lb[2], od, 1) || !unit(lb[3], od, 2) || !unit(lb[4], od, 4))
    return std::nullopt;
  for (size_t i = 1; i < rb.size(); ++i)
    if ((rb[i][0] & 7) || (rb[i][1] & 7) || (rb[i][0] == 0 && rb[i][1] == 0)) return std::nullopt;
  if (l.has_in_dim(kWarp))
    for (const auto& b : l.bases(kWarp))
      if ((b[0] & 7) || (b[1] & 7)) return std::nullopt;
  LdmatrixPlan p;
  p.kd = kd;
  p.matrices = l.num_regs() / 2;
  p.per_instr = p.matrices >= 4 ? 4 : p.matrices >= 2 ? 2 : 1;
  return p;
}

LdmatrixReads Lowerer::ldmatrix_setup(const ir::Value* r, const LdmatrixPlan& p, const SwizzledTile& t, Value* base) {
  const LinearLayout& l = *layout_of(r);
  LdmatrixReads m;
  m.plan = p;
  m.tile = t;
  m.base = base;
  m.done.assign(static_cast<size_t>((p.matrices + p.per_instr - 1) / p.per_instr), nullptr);
  const int c = t.cdim, s = 1 - c;
  const auto& rb = l.bases(layout::kReg);
  const LinearLayout::Basis zero{0, 0};
  const LinearLayout::Basis& rb1 = p.per_instr >= 2 ? rb.at(1) : zero;
  const LinearLayout::Basis& rb2 = p.per_instr >= 4 ? rb.at(2) : zero;
  // This lane's part of the address, the same for every instruction: matrix j = lane / 8 of the
  // instruction (origin + j's register-bit-1/2 bases), row lane % 8, and the warp's offset.
  m.row_in = B.CreateAnd(lane, 7);
  Value* b3 = B.CreateAnd(B.CreateLShr(lane, 3), 1);
  Value* b4 = B.CreateAnd(B.CreateLShr(lane, 4), 1);
  for (int d = 0; d < 2; ++d) {
    m.lc[d] = B.CreateXor(B.CreateMul(b3, i32c(rb1[d])), B.CreateMul(b4, i32c(rb2[d])));
    m.lmask[d] = rb1[d] | rb2[d];
  }
  if (l.has_in_dim(layout::kWarp)) {
    const auto& wb = l.bases(layout::kWarp);
    for (size_t b = 0; b < wb.size(); ++b) {
      Value* bit = B.CreateAnd(B.CreateLShr(warp, static_cast<uint64_t>(b)), 1);
      for (int d = 0; d < 2; ++d)
        if (wb[b][d]) {
          m.lc[d] = B.CreateXor(m.lc[d], B.CreateMul(bit, i32c(wb[b][d])));
          m.lmask[d] |= wb[b][d];
        }
    }
  }
  // Row lc[s] + i (lc[s] is a multiple of 8), phase from i alone (per_phase * max_phase <= 8).
  Value* phase = B.CreateAnd(B.CreateLShr(m.row_in, static_cast<uint64_t>(log2i(t.per_phase))), t.max_phase - 1);
  Value* row = B.CreateOr(m.lc[s], m.row_in);
  Value* lane_off = B.CreateAdd(B.CreateMul(row, i32c(t.cols)),
                                B.CreateShl(B.CreateXor(B.CreateLShr(m.lc[c], 3), phase), 3));  // elements
  m.lane_base = B.CreateAdd(base, B.CreateShl(lane_off, 1));                                      // bytes
  return m;
}

Value* Lowerer::ldmatrix_instr(const ir::Value* r, LdmatrixReads& m, int q) {
  Value*& res = m.done.at(static_cast<size_t>(q));
  if (res) return res;
  const LinearLayout& l = *layout_of(r);
  const LdmatrixPlan& p = m.plan;
  const SwizzledTile& t = m.tile;
  const int c = t.cdim, s = 1 - c;
  const bool trans = c != p.kd;
  const int per = p.per_instr;
  using ID = llvm::Intrinsic::ID;
  const ID id = per == 4 ? (trans ? llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x4_trans_b16
                                  : llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x4_b16)
                : per == 2 ? (trans ? llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x2_trans_b16
                                    : llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x2_b16)
                           : (trans ? llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x1_trans_b16
                                    : llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x1_b16);
  llvm::Type* sptr = llvm::PointerType::get(ctx, 3);
  llvm::Function* fn = llvm::Intrinsic::isOverloaded(id) ? llvm::Intrinsic::getDeclaration(&mod, id, {sptr})
                                                         : llvm::Intrinsic::getDeclaration(&mod, id);
  const int chunk_mask = (m.lmask[c] >> 3) | (t.max_phase - 1);
  const int r0 = 2 * per * q;
  const auto R = reg_coords(l, r0);
  Value* addr;
  if ((R[s] & m.lmask[s]) == 0 && ((R[c] >> 3) & chunk_mask) == 0) {
    // The constant part shares no bit with the lane part: a plain displacement.
    addr = B.CreateAdd(m.lane_base, i32c(2 * (int64_t{R[s]} * t.cols + (R[c] >> 3) * 8)));
  } else {
    Value* xs = B.CreateOr(B.CreateXor(m.lc[s], i32c(R[s])), m.row_in);
    Value* xc = B.CreateXor(m.lc[c], i32c(R[c]));
    addr = B.CreateAdd(m.base, B.CreateShl(swizzled_offset(t, xs, xc), 1));
  }
  res = B.CreateCall(fn, {smem_abs_ptr(addr)});
  auto& packs = packed32[r];
  for (int j = 0; j < per; ++j) {
    Value* v = !res->getType()->isStructTy() ? res : B.CreateExtractValue(res, {static_cast<unsigned>(j)});
    packs[{r0 + 2 * j, r0 + 2 * j + 1}] = v;
  }
  return res;
}

std::vector<Value*> Lowerer::ldmatrix_read(const ir::Value* r, LdmatrixReads& m) {
  const LinearLayout& l = *layout_of(r);
  llvm::Type* et = elem_ty(r->type.dtype);
  std::vector<Value*> out(static_cast<size_t>(l.num_regs()));
  for (int q = 0; q < static_cast<int>(m.done.size()); ++q) {
    ldmatrix_instr(r, m, q);
    const int r0 = 2 * m.plan.per_instr * q;
    for (int j = 0; j < m.plan.per_instr; ++j) {
      const int lo = r0 + 2 * j, hi = lo + 1;
      Value* v = packed32[r].at({lo, hi});
      out[static_cast<size_t>(lo)] = B.CreateBitCast(B.CreateTrunc(v, B.getInt16Ty()), et);
      out[static_cast<size_t>(hi)] = B.CreateBitCast(B.CreateTrunc(B.CreateLShr(v, 16), B.getInt16Ty()), et);
    }
  }
  return out;
}

bool Lowerer::lower_convert_ldmatrix(const ir::Op& op) {
  const ir::Value* x = op.operands.at(0);
  const ir::Value* r = op.result();
  const LinearLayout* src = layout_of(x);
  const LinearLayout* dst = layout_of(r);
  if (!src || !dst || r->type.rank() != 2 || byte_size(r->type.dtype) != 2 || r->type.dtype == DType::i1) return false;
  auto plan = ldmatrix_plan(*dst);
  if (!plan) return false;
  if (const PipeRead* pr = ldmatrix_source(x)) {
    LdmatrixReads m = ldmatrix_setup(r, *plan, pr->tile, pr->base);
    regs[r] = ldmatrix_read(r, m);
    return true;
  }
  // The tile is row-major along the source's fastest dim (that of its first register basis, else
  // of its first lane basis), so each thread writes its runs as vectors.
  int cdim = 1;
  bool found = false;
  for (const char* in : {layout::kReg, layout::kLane}) {
    if (found || !src->has_in_dim(in)) continue;
    for (const auto& b : src->bases(in)) {
      if (b[0] || b[1]) {
        cdim = b[1] ? 1 : 0;
        found = true;
        break;
      }
    }
  }
  const ir::Shape& shape = r->type.shape;
  const SwizzledTile t = SwizzledTile::make(shape[1 - cdim], shape[cdim], cdim);
  ++conversions_through_shared;
  conversion_shared_bytes += r->type.numel() * byte_size(r->type.dtype);
  store_swizzled(x, t, 0);
  barrier();
  LdmatrixReads m = ldmatrix_setup(r, *plan, t, i32c(smem_base_));  // absolute offset of the tile
  regs[r] = ldmatrix_read(r, m);
  barrier();
  return true;
}

void Lowerer::store_swizzled(const ir::Value* x, const SwizzledTile& t, int64_t base) {
  const LinearLayout* src = layout_of(x);
  const int cdim = t.cdim;
  need_smem(base + t.bytes());
  // Runs of registers consecutive along cdim (register basis b = 2^b along it), at most one
  // 16-byte chunk, and aligned (every other basis moves along cdim by multiples of the run).
  const int max_bits = t.esize == 1 ? 4 : 3;  // 16 bytes
  int bits = std::min(layout::consecutive_reg_bits(*src, cdim), max_bits);
  auto aligned = [&](int nb) {
    for (const std::string& in : src->in_dim_names())
      for (size_t k = 0; k < src->bases(in).size(); ++k) {
        if (in == layout::kReg && static_cast<int>(k) < nb) continue;
        if (src->bases(in)[k][cdim] & ((1 << nb) - 1)) return false;
      }
    return true;
  };
  while (bits > 0 && !aligned(bits)) --bits;
  const int run = 1 << bits;
  auto hw = hw_coords(*src);
  const int s = 1 - cdim;
  for (int q = 0; q < src->num_regs(); q += run) {
    if (duplicate_reg(*src, q)) continue;
    auto cc = coords(*src, hw, q);
    Value* off = B.CreateAdd(B.CreateMul(swizzled_offset(t, cc[s], cc[cdim]), i32c(t.esize)), i32c(base));
    llvm::Type* et = B.getIntNTy(static_cast<unsigned>(8 * t.esize));
    if (run == 1) {
      B.CreateAlignedStore(B.CreateBitCast(reg(x, q), et), smem_ptr(off), llvm::Align(static_cast<uint64_t>(t.esize)));
      continue;
    }
    llvm::Type* vt = llvm::FixedVectorType::get(et, static_cast<unsigned>(run));
    Value* v = llvm::PoisonValue::get(vt);
    for (int k = 0; k < run; ++k)
      v = B.CreateInsertElement(v, B.CreateBitCast(reg(x, q + k), et), static_cast<uint64_t>(k));
    B.CreateAlignedStore(v, smem_ptr(off), llvm::Align(static_cast<uint64_t>(t.esize * run)));
  }
}

}  // namespace tle::gpu::detail
