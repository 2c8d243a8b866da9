// src/passes/fold.hpp - constant folding of scalar values, shared by canonicalize and the front end.
//
// A constant of dtype d is an ir::Attr in canonical form:
//  - integers (i1 and all iN/uN): int64_t holding the value wrapped to d's width, sign-extended
//    for signed types, zero-extended for unsigned ones (u64 keeps its bit pattern), i1 is 0 or 1;
//  - floats: double holding a value exactly representable in d.
// Every fold function takes canonical (or at least well-kinded) inputs, computes exactly what the
// runtime computes (docs/ir.md, "Arithmetic rules") and returns a canonical result, or nullopt
// when the operation is not defined for the dtype (e.g. `and` on floats, ptr values) or when the
// folded result could not be guaranteed to be bit-identical to the runtime's (bitcast of a NaN).
#pragma once
#include <optional>

#include "ir/ir.hpp"

namespace tle::passes {

/// Canonical form of `v` as a constant of dtype `d` (ints wrapped, floats rounded once to d);
/// nullopt if `v` has the wrong kind (double for an int dtype, int for a float one) or d is ptr.
std::optional<ir::Attr> normalize_constant(DType d, const ir::Attr& v);

/// `a op b` for operands and result of dtype d.
std::optional<ir::Attr> fold_binary(ir::BinaryOp op, DType d, const ir::Attr& a, const ir::Attr& b);
/// `op x` for operand and result of dtype d.
std::optional<ir::Attr> fold_unary(ir::UnaryOp op, DType d, const ir::Attr& x);
/// `a pred b` for operands of dtype d; the result is an i1 constant (int64 0 or 1).
std::optional<ir::Attr> fold_compare(ir::CmpPred pred, DType d, const ir::Attr& a, const ir::Attr& b);
/// a*b+c rounded once (f16/bf16: the exact value rounded to odd in f64, then once to the dtype).
std::optional<ir::Attr> fold_fma(DType d, const ir::Attr& a, const ir::Attr& b, const ir::Attr& c);
/// Value conversion `x` from dtype `from` to dtype `to` (cast op).
std::optional<ir::Attr> fold_cast(DType from, DType to, const ir::Attr& x);
/// Bit reinterpretation (bitcast op); equal bit widths, no i1, no NaN (payloads are not tracked).
std::optional<ir::Attr> fold_bitcast(DType from, DType to, const ir::Attr& x);

/// The memory format of a constant of dtype d, as the low byte_size(d) bytes of the result
/// (little endian): an integer's bits wrapped to d's width, i1 as the byte 0 or 1, a float's
/// IEEE bits (f16/bf16: their 16 bits), a ptr's address (an int64 value). A NaN gives a quiet
/// NaN of its sign (f32/f64 keep what payload the double carries; f16/bf16 the canonical one):
/// NaN payloads are not specified (docs/semantics.md). nullopt for a value of the wrong kind.
std::optional<uint64_t> constant_bits(DType d, const ir::Attr& v);
/// The canonical constant of dtype d stored as `bits` (the low byte_size(d) bytes); i1: any
/// non-zero byte is true (what a load of a bool reads); ptr: the address as int64.
ir::Attr constant_from_bits(DType d, uint64_t bits);

/// "Is this value a known constant?": the canonical splat value of `v` when it is the result of a
/// constant op, else nullopt.
std::optional<ir::Attr> constant_value(const ir::Value* v);
/// The same, as an integer (integer dtypes only; u64 as its bit pattern).
std::optional<int64_t> constant_int(const ir::Value* v);
/// The same, as a double (float dtypes only).
std::optional<double> constant_float(const ir::Value* v);
/// Whether v is the constant +0 (integer 0, or +0.0 and not -0.0): what cp.async leaves in the
/// masked-off bytes of a copy.
bool is_positive_zero(const ir::Value* v);

}  // namespace tle::passes
