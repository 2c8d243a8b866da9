// src/backend/gpu/lower_sort.cpp - sort and gather through shared memory.
//
// sort: every thread writes the elements it holds to three shared-memory arrays in the operand's
// row-major order - the sort key (ScalarEmitter::sort_key, bits flipped when descending, so that
// ascending unsigned order is the wanted one), the element's index along the axis, and the
// element itself (with pad_shapes' mask operand, a pad lane's key is the largest, so pads sort
// last). A bitonic sorting network (Batcher 1968; the line length n is a power of two on
// the GPU) then sorts each line's (key, index) pairs, the CTA's threads sharing the n/2
// compare-exchanges of every line in each step, with a barrier between steps (the steps at
// distances below a small segment run in registers, and those within a warp's segments by
// shuffles, barrier-free). Comparing the pair
// and not the key alone makes the order total, so the network's result is the stable order, as
// the CPU's merge sort gives. Each result register then reads its index at its sorted position
// (positions 0..k-1 for topk) and the element from the copy of x at that index. An integer sort
// whose indices are unused stages and moves its keys alone and rebuilds each element from its key.
// gather: x is written to shared memory; each result register reads x at its coordinates with the
// axis coordinate replaced by the index register (the index has the result's layout), 0 when the
// index is outside [0, dim).
#include <fmt/format.h>

#include "backend/gpu/lower.hpp"
#include "layout/named_layouts.hpp"

namespace tle::gpu::detail {

using layout::LinearLayout;
using llvm::Value;

namespace {
int64_t align16(int64_t bytes) { return (bytes + 15) / 16 * 16; }
}  // namespace

void Lowerer::lower_sort(const ir::Op& op) {
  const ir::Value* x = op.operands.at(0);
  const int axis = static_cast<int>(op.int_attr("axis"));
  const bool descending = op.int_attr("descending") != 0;
  const ir::Shape& shape = x->type.shape;
  if (axis < 0 || axis >= x->type.rank()) fail(op, fmt::format("axis {} out of range", axis));
  const int64_t n = shape[static_cast<size_t>(axis)];
  if (!layout::is_pow2(n)) fail(op, "the sorted dimension is not a power of two");
  int64_t inner = 1;
  for (size_t dd = static_cast<size_t>(axis) + 1; dd < shape.size(); ++dd) inner *= shape[dd];
  const int64_t numel = x->type.numel();
  const DType d = x->type.dtype;
  const DType kd = sort_key_ty(d)->getIntegerBitWidth() == 64 ? DType::u64 : DType::u32;
  // Keys only: an integer sort whose indices are unused. Equal keys are equal elements there, so
  // their order does not show, and an element is its key (the transform undone): the network
  // moves keys alone (a third of the shared-memory traffic of the (key, index) pairs).
  const auto iu = uses_.find(op.result(1));
  const bool keys_only = (is_int(d) || d == DType::i1) && (iu == uses_.end() || iu->second == 0);
  const int64_t key_at = 0, idx_at = align16(numel * byte_size(kd)), x_at = idx_at + align16(numel * 4);
  need_smem(keys_only ? numel * byte_size(kd) : x_at + numel * byte_size(d));

  // 1. stage keys, indices and elements.
  const LinearLayout* l = layout_of(x);
  if (!l) fail(op, "a tile has no layout (the GPU layout pass did not run)");
  auto hw = hw_coords(*l);
  for (int q = 0; q < l->num_regs(); ++q) {
    if (duplicate_reg(*l, q)) continue;
    auto c = coords(*l, hw, q);
    Value* at = linear(c, shape);
    Value* key = sort_key(reg(x, q), d);
    if (descending) key = B.CreateNot(key);
    // A masked-off element (pad_shapes' mask: a pad lane, at the end of its line) gets the largest
    // key: it sorts after every real element, which wins a tie on the key by its lower index.
    if (op.operands.size() > 1) key = B.CreateSelect(reg(op.operands[1], q), key, llvm::ConstantInt::getAllOnesValue(key->getType()));
    smem_store(kd, key_at, at, key);
    if (keys_only) continue;
    smem_store(DType::i32, idx_at, at, c[static_cast<size_t>(axis)]);
    smem_store(d, x_at, at, reg(x, q));
  }
  barrier();

  // 2. the bitonic network: for stage size 2^(s+1), s = 0..log2(n)-1, and distance 2^(s-t),
  // t = 0..s, position i (bit log2(distance) clear) and i + distance are exchanged when out of
  // order: ascending where bit s+1 of i is clear, descending where it is set. Exchanges at a
  // distance below `seg` stay inside an aligned segment of seg positions, and those below
  // seg * lanes (up to 32 segments of a line side by side in a warp's lanes, where every thread
  // holds the same number of segments) inside a warp: one thread loads its segments into
  // registers and does all such steps of a stage (all of the first stages at once), the ones
  // across segments by warp shuffles, without a barrier; each larger distance is one step shared
  // by the CTA's threads through shared memory, with a barrier after it (2048 elements at 16
  // warps: 14 barriers, not 54).
  if (n > 1) {
    int logn = 0;
    while ((int64_t(1) << logn) < n) ++logn;
    const int64_t half = n / 2, pairs = numel / 2, nthreads = 32 * num_warps;
    int g = 1;  // seg = 2^g: about numel / nthreads, at most 16 and at most n
    while (g < 4 && (int64_t(1) << (g + 1)) <= n && (numel >> (g + 1)) >= nthreads) ++g;
    const int64_t seg = int64_t(1) << g, segs = numel / seg;
    auto line_base = [&](Value* line) {
      return B.CreateAdd(B.CreateMul(B.CreateUDiv(line, i32c(inner)), i32c(n * inner)), B.CreateURem(line, i32c(inner)));
    };
    // The compare-exchange of positions i < j of a line (keys k, indices x): ascending unless bit
    // `size` of i is set. Returns whether they swap.
    auto out_of_order = [&](Value* klo, Value* khi, Value* ilo, Value* ihi, Value* i, Value* size) {
      Value* gt = keys_only ? B.CreateICmpUGT(klo, khi)
                            : B.CreateOr(B.CreateICmpUGT(klo, khi), B.CreateAnd(B.CreateICmpEQ(klo, khi), B.CreateICmpSGT(ilo, ihi)));
      return B.CreateXor(gt, B.CreateICmpNE(B.CreateAnd(i, size), i32c(0)));
    };
    // Segments a warp's lanes hold side by side in one line: where every thread holds the same
    // number of segments (segs a multiple of the CTA's threads), segment p is thread p mod nthreads's,
    // so the segment at p ^ m (m < 32, m < the line's segments) is lane ^ m's, in the same register:
    // distances from seg to seg * lanes - 1 are exchanged by shuffles, without shared memory or a
    // barrier. Else lanes = 1 (distances below seg only).
    int lg = 0;  // log2(lanes)
    if (segs % nthreads == 0)
      while (lg < 5 && (seg << (lg + 1)) <= n) ++lg;
    const int G = g + lg;  // distances below 2^G stay in registers
    // In registers, on each thread's segments: stages 0 .. whole-1 entirely (s_runtime null), or
    // stage s_runtime's distances 2^(G-1) .. 1.
    auto local = [&](int whole, Value* s_runtime) {
      for_each_item(segs, [&](Value* p) {
        Value* line = B.CreateUDiv(p, i32c(n / seg));
        Value* off = B.CreateMul(B.CreateURem(p, i32c(n / seg)), i32c(seg));
        Value* base = line_base(line);
        std::vector<Value*> at(static_cast<size_t>(seg)), k(at.size()), x(at.size()), pos(at.size());
        for (int64_t e = 0; e < seg; ++e) {
          pos[e] = B.CreateAdd(off, i32c(e));
          at[e] = B.CreateAdd(base, B.CreateMul(pos[e], i32c(inner)));
          k[e] = smem_load(kd, key_at, at[e]);
          x[e] = keys_only ? i32c(0) : smem_load(DType::i32, idx_at, at[e]);
        }
        auto stage = [&](Value* size, int top) {  // distances 2^top .. 1
          for (int jb = top; jb >= 0; --jb) {
            const int64_t dist = int64_t(1) << jb;
            if (dist >= seg) {
              // The partner element is lane ^ (dist / seg)'s register e; both threads decide the
              // same swap, each keeps its side.
              Value* lower = B.CreateICmpEQ(B.CreateAnd(off, i32c(dist)), i32c(0));
              for (int64_t e = 0; e < seg; ++e) {
                Value* pk = shuffle_xor(k[e], static_cast<int>(dist / seg));
                Value* px = keys_only ? i32c(0) : shuffle_xor(x[e], static_cast<int>(dist / seg));
                Value* klo = B.CreateSelect(lower, k[e], pk), *khi = B.CreateSelect(lower, pk, k[e]);
                Value* ilo = B.CreateSelect(lower, x[e], px), *ihi = B.CreateSelect(lower, px, x[e]);
                Value* i = B.CreateAnd(pos[e], i32c(~dist));
                Value* swap = out_of_order(klo, khi, ilo, ihi, i, size);
                k[e] = B.CreateSelect(swap, pk, k[e]);
                x[e] = B.CreateSelect(swap, px, x[e]);
              }
              continue;
            }
            for (int64_t e = 0; e < seg; ++e) {
              const int64_t f = e + dist;
              if (e & dist) continue;
              Value* swap = out_of_order(k[e], k[f], x[e], x[f], pos[e], size);
              Value* ke = B.CreateSelect(swap, k[f], k[e]), *kf = B.CreateSelect(swap, k[e], k[f]);
              Value* xe = B.CreateSelect(swap, x[f], x[e]), *xf = B.CreateSelect(swap, x[e], x[f]);
              k[e] = ke, k[f] = kf, x[e] = xe, x[f] = xf;
            }
          }
        };
        if (s_runtime) stage(B.CreateShl(i32c(2), s_runtime), G - 1);
        else
          for (int st = 0; st < whole; ++st) stage(i32c(int64_t(2) << st), st);
        for (int64_t e = 0; e < seg; ++e) {
          smem_store(kd, key_at, at[e], k[e]);
          if (!keys_only) smem_store(DType::i32, idx_at, at[e], x[e]);
        }
      });
      barrier();
    };
    local(G, nullptr);
    if (logn > G)
      counted_loop(i32c(logn - G), {}, [&](Value* s_off, const std::vector<Value*>&) {
        Value* s = B.CreateAdd(s_off, i32c(G));
        Value* size = B.CreateShl(i32c(2), s);
        // distances 2^s .. 2^G: t = 0 .. s - G, one CTA-wide step each
        counted_loop(B.CreateAdd(s_off, i32c(1)), {}, [&](Value* t, const std::vector<Value*>&) {
          Value* jb = B.CreateSub(s, t);
          Value* dist = B.CreateShl(i32c(1), jb);
          for_each_item(pairs, [&](Value* p) {
            Value* line = B.CreateUDiv(p, i32c(half));
            Value* qq = B.CreateURem(p, i32c(half));
            Value* i = B.CreateOr(B.CreateShl(B.CreateLShr(qq, jb), B.CreateAdd(jb, i32c(1))),
                                  B.CreateAnd(qq, B.CreateSub(dist, i32c(1))));
            Value* lo = B.CreateAdd(line_base(line), B.CreateMul(i, i32c(inner)));
            Value* hi = B.CreateAdd(lo, B.CreateMul(dist, i32c(inner)));
            Value* klo = smem_load(kd, key_at, lo);
            Value* khi = smem_load(kd, key_at, hi);
            Value* ilo = keys_only ? i32c(0) : smem_load(DType::i32, idx_at, lo);
            Value* ihi = keys_only ? i32c(0) : smem_load(DType::i32, idx_at, hi);
            Value* swap = out_of_order(klo, khi, ilo, ihi, i, size);
            smem_store(kd, key_at, lo, B.CreateSelect(swap, khi, klo));
            smem_store(kd, key_at, hi, B.CreateSelect(swap, klo, khi));
            if (!keys_only) {
              smem_store(DType::i32, idx_at, lo, B.CreateSelect(swap, ihi, ilo));
              smem_store(DType::i32, idx_at, hi, B.CreateSelect(swap, ilo, ihi));
            }
          });
          barrier();
          return std::vector<Value*>{};
        });
        local(0, s);
        return std::vector<Value*>{};
      });
  }

  // 3. results: positions 0..k-1 of each line.
  const ir::Shape before(shape.begin(), shape.begin() + axis), after(shape.begin() + axis + 1, shape.end());
  for (unsigned res = 0; res < 2; ++res) {
    const ir::Value* r = op.result(res);
    const LinearLayout* rl = layout_of(r);
    if (!rl) fail(op, "a result has no layout (the GPU layout pass did not run)");
    auto rhw = hw_coords(*rl);
    std::vector<Value*> out;
    for (int q = 0; q < rl->num_regs(); ++q) {
      auto c = coords(*rl, rhw, q);
      std::vector<Value*> cb(c.begin(), c.begin() + axis), ca(c.begin() + axis + 1, c.end());
      Value* o = cb.empty() ? i32c(0) : linear(cb, before);
      Value* in = ca.empty() ? i32c(0) : linear(ca, after);
      auto at = [&](Value* pos) {
        return B.CreateAdd(B.CreateMul(B.CreateAdd(B.CreateMul(o, i32c(n)), pos), i32c(inner)), in);
      };
      if (keys_only) {  // the element from its key: sort_key undone
        if (res == 1) {
          out.push_back(i32c(0));  // unused
          continue;
        }
        Value* key = smem_load(kd, key_at, at(c[static_cast<size_t>(axis)]));
        if (descending) key = B.CreateNot(key);
        llvm::Type* et = elem_ty(d);
        Value* v = B.CreateTrunc(key, B.getIntNTy(static_cast<unsigned>(bit_width(d))));
        if (is_signed_int(d)) v = B.CreateXor(v, B.getInt(llvm::APInt::getSignMask(static_cast<unsigned>(bit_width(d)))));
        out.push_back(v->getType() == et ? v : B.CreateTrunc(v, et));
        continue;
      }
      Value* idx = smem_load(DType::i32, idx_at, at(c[static_cast<size_t>(axis)]));
      out.push_back(res == 1 ? idx : smem_load(d, x_at, at(idx)));
    }
    regs[r] = out;
  }
  barrier();
}

void Lowerer::lower_gather(const ir::Op& op) {
  const ir::Value* x = op.operands.at(0);
  const ir::Value* index = op.operands.at(1);
  const ir::Value* r = op.result();
  const int axis = static_cast<int>(op.int_attr("axis"));
  const ir::Shape& xs = x->type.shape;
  const DType d = x->type.dtype, id = index->type.dtype;
  const LinearLayout* l = layout_of(x);
  const LinearLayout* rl = layout_of(r);
  if (!l || !rl) fail(op, "a tile has no layout (the GPU layout pass did not run)");
  if (!layout_of(index) || *layout_of(index) != *rl) fail(op, "the index does not have the result's layout");
  need_smem(x->type.numel() * byte_size(d));
  auto hw = hw_coords(*l);
  for (int q = 0; q < l->num_regs(); ++q)
    if (!duplicate_reg(*l, q)) smem_store(d, 0, linear(coords(*l, hw, q), xs), reg(x, q));
  barrier();
  auto rhw = hw_coords(*rl);
  std::vector<Value*> out;
  for (int q = 0; q < rl->num_regs(); ++q) {
    auto c = coords(*rl, rhw, q);
    // An index outside [0, dim) - negative ones are huge as unsigned - reads element 0 and gives 0.
    // dim: the real one where pad_shapes padded the axis (attribute real_dim), so a pad is out of range.
    const int64_t dim = op.has_attr("real_dim") ? op.int_attr("real_dim") : xs[static_cast<size_t>(axis)];
    Value* v = B.CreateIntCast(reg(index, q), B.getInt64Ty(), is_signed_int(id));
    Value* ok = B.CreateICmpULT(v, B.getInt64(static_cast<uint64_t>(dim)));
    c[static_cast<size_t>(axis)] = B.CreateTrunc(B.CreateSelect(ok, v, B.getInt64(0)), B.getInt32Ty());
    out.push_back(B.CreateSelect(ok, smem_load(d, 0, linear(c, xs)), llvm::Constant::getNullValue(elem_ty(d))));
  }
  barrier();
  regs[r] = out;
}

}  // namespace tle::gpu::detail
