// src/ir/cuda_call.cpp - argument protocol of cuda_call ops (see cuda_call.hpp).
#include "ir/cuda_call.hpp"

#include <fmt/format.h>

namespace tle::ir {

namespace {
bool value_dtype(DType d) {
  return d == DType::i32 || d == DType::u32 || d == DType::i64 || d == DType::u64 || d == DType::f32 ||
         d == DType::f64;
}
}  // namespace

std::string check_cuda_operand(const Type& t, int64_t kind) {
  if (kind == kCudaValue) {
    if (!t.is_scalar())
      return fmt::format("a {} tile is passed by value; pass tiles as tiles (tle::TileRef<T>)", t.str());
    if (t.dtype == DType::ptr) return "";
    if (!value_dtype(t.dtype))
      return fmt::format("a {} scalar cannot be passed by value; the protocol passes 32- and 64-bit integers, float "
                         "and double scalars (cast it, e.g. to int32_t or float)",
                         dtype_name(t.dtype));
    return "";
  }
  if (kind == kCudaTile || kind == kCudaInOut) {
    if (t.dtype == DType::ptr)
      return fmt::format("a tile of pointers ({}) cannot be passed; pass a scalar Ptr<T> (as T*) or the offsets",
                         t.str());
    if (t.rank() < 1 || t.rank() > 4)
      return fmt::format("a {} tile has rank {}; tiles passed to CUDA have rank 1 to 4 (reshape it)", t.str(), t.rank());
    return "";
  }
  return fmt::format("unknown argument kind {}", kind);
}

std::string check_cuda_return(DType d) {
  if (value_dtype(d)) return "";
  return fmt::format("a CUDA device function called from tile code returns void, a 32- or 64-bit integer, float or "
                     "double, not {}",
                     dtype_name(d));
}

}  // namespace tle::ir
