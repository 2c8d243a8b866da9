// src/ir/inline_asm.hpp - the operand rules of `inline_asm` ops (docs/ir.md), shared by the
// tracer (UserError at the user's line), the verifier and the GPU lowering.
//
// One asm invocation handles `pack` elements of every value (1, 2 or 4). A value of dtype d with
// w = bit_width(d) bits per element passes them in registers of elems_per_reg elements each:
// elems_per_reg = min(32 / w, pack) for w < 32, else 1 (Triton's packing: two f16 in one 32-bit
// register, four i8 in one). So a value takes pack / elems_per_reg registers of
// elems_per_reg * w bits per invocation; element k of a register sits in bits [k*w, (k+1)*w).
// Register constraint letters (LLVM NVPTX): 'h' 16-bit, 'r' 32-bit, 'l' 64-bit, 'f' f32, 'd' f64.
#pragma once
#include <string>
#include <vector>

#include "tle/dtype.hpp"

namespace tle::ir {

/// How one value (operand or result) of an inline_asm op is passed per invocation.
struct AsmValueRegs {
  int elems_per_reg = 1;  ///< elements in one register
  int regs = 1;           ///< registers per invocation (pack / elems_per_reg)
  int reg_bits = 32;      ///< bits of one register
};
/// Registers of one value of dtype d for `pack`; only meaningful when asm_dtype_error(d) is empty.
AsmValueRegs asm_value_regs(DType d, int pack);

/// One entry of a constraint string.
struct AsmConstraint {
  std::string text;     ///< without surrounding whitespace ("=r", "f", "~{memory}")
  bool output = false;  ///< starts with '='
  bool clobber = false; ///< starts with '~'
  char letter = 0;      ///< register letter (outputs: after '=' and an optional '&')
};
/// Splits on ',' and trims whitespace (no validation).
std::vector<AsmConstraint> parse_asm_constraints(const std::string& constraints);

/// The constraint string handed to LLVM: entries trimmed and joined with ','.
std::string normalized_asm_constraints(const std::string& constraints);

/// Checks an inline_asm signature: asm text not blank, pack in {1, 2, 4}, supported dtypes, the
/// constraint count (results' then operands' registers, then optional '~{...}' clobbers), every
/// letter against its value's register, and `$n` references below the number of registers.
/// Returns "" when fine, else a message for the user (no location).
std::string check_inline_asm(const std::string& asm_text, const std::string& constraints, DType result,
                             const std::vector<DType>& operands, int64_t pack);

}  // namespace tle::ir
