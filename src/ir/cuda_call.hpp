// src/ir/cuda_call.hpp - the argument protocol of `cuda_call` ops (docs/raw.md, docs/ir.md),
// shared by the tracer (tle::cuda_function), the verifier and the GPU lowering.
//
// Operand kinds (attribute "kinds", one per operand):
//   0 value   a scalar passed by value: i32, u32, i64, u64, f32, f64, or a pointer (as T*)
//   1 tile    a tile of rank 1..4 (any non-pointer dtype) staged in shared memory, passed as a
//             tle::TileRef<T>; the callee may read it (writes are not read back)
//   2 inout   as 1, and read back after the call into a new result
// Results: the return value first when "ret" is 1 (a scalar of a value dtype other than a
// pointer), then one result per inout operand, of the operand's type.
#pragma once
#include <string>

#include "ir/ir.hpp"

namespace tle::ir {

enum CudaArgKind : int64_t { kCudaValue = 0, kCudaTile = 1, kCudaInOut = 2 };

/// Bytes of tle::TileRef<T> in tle_raw.h ({T*, int, int[4], int[4]}, 8-byte aligned).
constexpr int kTileRefBytes = 48;

/// "" when an operand of type `t` may be passed as `kind`, else why not (a sentence to show the user).
std::string check_cuda_operand(const Type& t, int64_t kind);
/// "" when `d` may be a device function's return type, else why not.
std::string check_cuda_return(DType d);

}  // namespace tle::ir
