// tle/detail/enums.hpp - operation codes shared by the front end and the IR (attributes of
// binary/unary/cmp/atomic/reduce/scan/dot ops). Semantics: docs/ir.md.
#pragma once
#include <cstdint>

namespace tle::ir {
enum class BinaryOp : uint8_t { Add, Sub, Mul, Div, Rem, And, Or, Xor, Shl, Shr, Min, Max, Pow, Atan2 };
enum class UnaryOp : uint8_t { Neg, Not, Exp, Exp2, Log, Log2, Sqrt, Rsqrt, Abs, Floor, Ceil, Sin, Cos, Tanh, Erf, Round, Rint };
enum class CmpPred : uint8_t { Eq, Ne, Lt, Le, Gt, Ge };
enum class AtomicOp : uint8_t { Add, Max, Min, Xchg, And, Or, Xor };
enum class ReduceKind : uint8_t { Sum, Max, Min, Argmax, Argmin, Combine };
enum class ScanKind : uint8_t { Cumsum, Combine };
enum class Precision : uint8_t { IEEE, TF32, TF32x3 };
}  // namespace tle::ir
