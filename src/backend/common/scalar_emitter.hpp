// src/backend/common/scalar_emitter.hpp - LLVM IR for one element of every elementwise op, shared
// by the CPU and GPU backends so that both follow docs/ir.md's arithmetic rules with the same code.
//
// Value representation: i1 stays i1; f16/bf16 travel as their i16 bit patterns (no FP move can
// quiet a signaling NaN); f32/f64 as float/double; pointers as `ptr`. A backend derives from
// ScalarEmitter and overrides the hooks that differ per target: calls to math functions (libm on
// the CPU, libdevice on the GPU), the exact i64 -> bf16 conversion, and the two operations a
// target has single instructions for (float max/min, f32 -> bf16).
#pragma once
#include <string>
#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include "ir/ir.hpp"

namespace tle::backend {

class ScalarEmitter {
 public:
  explicit ScalarEmitter(llvm::Module& m);
  virtual ~ScalarEmitter() = default;

  llvm::Module& mod;
  llvm::LLVMContext& ctx;
  llvm::IRBuilder<> B;

  /// Throws RuntimeError naming the op (and its traced position).
  [[noreturn]] virtual void fail(const ir::Op& op, const std::string& msg) const;

  /// Element type in registers (i1 stays i1; f16/bf16 are their i16 bits, fp8 its i8 bits).
  llvm::Type* elem_ty(DType d) const;
  /// Element type in memory (i1 is a byte).
  llvm::Type* mem_ty(DType d) const;
  /// f32 for f16/bf16/fp8, else elem_ty.
  llvm::Type* compute_ty(DType d) const;
  /// f16/bf16/fp8 bits -> f32 (exact); other types unchanged.
  llvm::Value* to_compute(llvm::Value* v, DType d);
  /// f32 or f64 value -> dtype d (f16/bf16/f32/fp8 rounded once to nearest even, fp8 saturating);
  /// others unchanged.
  llvm::Value* from_compute(llvm::Value* v, DType d);
  /// The constant of a `constant` op's value attribute in dtype d.
  llvm::Constant* constant(DType d, const ir::Attr& value, const ir::Op& op);

  /// One element of each elementwise op kind (operands already of dtype d's register type).
  llvm::Value* binary(ir::BinaryOp op, DType d, llvm::Value* a, llvm::Value* b, const ir::Op* where);
  llvm::Value* compare(ir::CmpPred p, DType d, llvm::Value* a, llvm::Value* b);
  llvm::Value* unary(ir::UnaryOp op, DType d, llvm::Value* a, const ir::Op& where);
  llvm::Value* fma(DType d, const std::vector<llvm::Value*>& abc);
  llvm::Value* convert(llvm::Value* v, DType from, DType to);
  llvm::Value* bitcast(llvm::Value* v, DType from, DType to);
  /// NaN-propagating max/min of two floats of the same type, ordering -0 < +0 (rule E02, IEEE
  /// 754-2019 maximum/minimum); a target overrides it only with an operation of these semantics.
  virtual llvm::Value* float_max_min(bool is_max, llvm::Value* a, llvm::Value* b);

  /// One atomic read-modify-write on global memory at `ptr` (an element of pointee dtype pd);
  /// returns the old value. Plain atomicrmw where LLVM has the exact operation; float max/min
  /// (NaN-propagating) and f16/bf16 add, max, min and xchg are compare-exchange loops. seq_cst.
  llvm::Value* atomic_rmw(ir::AtomicOp op, DType pd, llvm::Value* ptr, llvm::Value* val, const ir::Op& where);
  /// One atomic compare-and-swap; returns the old value.
  llvm::Value* atomic_cas(DType pd, llvm::Value* ptr, llvm::Value* cmp, llvm::Value* val);

  /// The sort key of an element of dtype d (docs/ir.md `sort`): an unsigned integer (i32 for dtypes
  /// of up to 32 bits, i64 for 64-bit ones) whose unsigned order is the sort order. Integers:
  /// signed ones with the sign bit flipped, unsigned and bool zero-extended; floats: -0.0 made +0.0,
  /// negatives with every bit flipped, others with the sign bit set, every NaN all ones (above +inf).
  llvm::Value* sort_key(llvm::Value* v, DType d);
  /// The type sort_key returns for dtype d.
  llvm::Type* sort_key_ty(DType d) const;

  /// Rounds an f32 value to tf32 (10 mantissa bits, nearest even); inf and NaN unchanged.
  llvm::Value* round_tf32(llvm::Value* f32);

  /// Trip count (i64, unsigned) of a device loop over scalar bounds of integer dtype d, computed
  /// without overflow (docs/ir.md `for`): step > 0: lo < hi ? (hi-lo-1)/step + 1 : 0; step < 0
  /// symmetric; step == 0: 0. Also returns lo and step widened to i64 (iv = lo + k * step).
  struct Trips {
    llvm::Value* trips;
    llvm::Value* lo64;
    llvm::Value* step64;
  };
  Trips trip_count(llvm::Value* lo, llvm::Value* hi, llvm::Value* step, DType d);

  // ---- target hooks
  /// A call of the named math function on f32 (f32name) or f64 (f64name) arguments. CPU: libm.
  virtual llvm::Value* call_libm(const char* f32name, const char* f64name, std::vector<llvm::Value*> args);
  /// exp, exp2, log, log2, sin, cos of an f32/f64 value (default: call_libm).
  virtual llvm::Value* transcendental(ir::UnaryOp op, llvm::Value* x);
  /// Exact (round-once) conversion of a 64-bit integer to bf16 bits.
  virtual llvm::Value* int64_to_bf16(llvm::Value* v, bool is_signed) = 0;
  /// f32 -> bf16 bits, round to nearest even, NaN stays NaN (default: integer code that keeps
  /// the NaN's payload, quieted).
  virtual llvm::Value* f32_to_bf16(llvm::Value* f);
  /// f32 -> fp8 bits of dtype d (is_fp8): round to nearest even, saturating to +-max finite
  /// (infinities too), NaN -> sign | 0x7F (dtype.hpp). Default: integer code.
  virtual llvm::Value* f32_to_fp8(llvm::Value* f, DType d);
  /// fp8 bits (i8) of dtype d -> f32, exact; a NaN code gives sign | 0x7FC00000, E5M2's infinity
  /// codes +-inf. Default: integer code.
  virtual llvm::Value* fp8_to_f32(llvm::Value* b, DType d);
};

}  // namespace tle::backend
