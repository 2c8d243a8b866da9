// tle/detail/enums.hpp - operation codes shared by the front end and the IR (attributes of
// binary/unary/cmp/atomic/reduce/scan/dot/signal ops, hidden mesh arguments). Semantics: docs/ir.md.
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
/// signal's update of the flag, signal_wait's comparison (tle/mesh.hpp).
enum class SignalOp : uint8_t { Set, Add };
enum class WaitCmp : uint8_t { Ge, Eq };
/// The hidden arguments of a kernel that uses the device mesh, in order (ir::ArgInfo::mesh;
/// src/frontend/trace_mesh.cpp adds them all at a kernel's first mesh primitive): the rank (i32),
/// the number of ranks (i32), the bytes from one rank's copy of a symmetric buffer to the next
/// rank's (i64), this rank's mesh scratch in symmetric memory (ptr<u64>: the distributed
/// barrier's counters) and the signal_wait timeout in nanoseconds (i64).
enum class MeshArg : uint8_t { ShardId, NumShards, Stride, Scratch, TimeoutNs, Count };
}  // namespace tle::ir
