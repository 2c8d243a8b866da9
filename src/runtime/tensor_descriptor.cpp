// src/runtime/tensor_descriptor.cpp - the argument checks of tle::TensorDescriptor
// (tle/tensor_descriptor.hpp lists them) and the CUtensorMap a GPU launch passes for one.
#include "runtime/tensor_descriptor.hpp"

#include <fmt/format.h>

#include <cstring>

#include "runtime/cuda/driver.hpp"

namespace tle::detail {

namespace {
std::string dims_str(const int64_t* d, int rank) {
  std::string s = "{";
  for (int i = 0; i < rank; ++i) s += fmt::format("{}{}", i ? ", " : "", d[i]);
  return s + "}";
}
}  // namespace

bool tensor_map_dtype_ok(DType d) { return d != DType::i1 && d != DType::ptr; }

void check_tensor_descriptor(DType dtype, int rank, const void* base, const int64_t* shape, const int64_t* strides,
                             const int64_t* block, const SrcLoc& loc) {
  const std::string what = fmt::format("TensorDescriptor<{}, {}>", dtype_name(dtype), rank);
  if (rank < 1 || rank > 5)
    throw UserError(loc, fmt::format("{}: rank {} is outside 1..5 (the tensor memory accelerator moves blocks of 1 "
                                     "to 5 dimensions); reshape the tensor to at most 5 dimensions",
                                     what, rank));
  if (!tensor_map_dtype_ok(dtype))
    throw UserError(loc, fmt::format("{}: element type {} is not supported by tensor descriptors (supported: i8, u8, "
                                     "i16, u16, i32, u32, i64, u64, f16, bf16, f32, f64); store bool as u8",
                                     what, dtype_name(dtype)));
  const int64_t esize = byte_size(dtype);
  if (!base) throw UserError(loc, fmt::format("{}: the base pointer is null; pass the tensor's address", what));
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0)
    throw UserError(loc, fmt::format("{}: the base pointer {} is not 16-byte aligned (TMA needs a 16-byte aligned "
                                     "global address); allocate the tensor 16-byte aligned or describe a view "
                                     "that starts at an aligned element",
                                     what, base));
  for (int d = 0; d < rank; ++d)
    if (shape[d] < 1 || shape[d] > (int64_t(1) << 32))
      throw UserError(loc, fmt::format("{}: shape {} has dimension {} = {}, outside 1..2^32; describe a non-empty "
                                       "tensor (an empty one needs no launch)",
                                       what, dims_str(shape, rank), d, shape[d]));
  if (strides[rank - 1] != 1)
    throw UserError(loc, fmt::format("{}: strides {}: the innermost stride (dimension {}) is {}, but must be 1 "
                                     "(TMA reads contiguous rows); transpose the block in the kernel instead",
                                     what, dims_str(strides, rank), rank - 1, strides[rank - 1]));
  for (int d = 0; d + 1 < rank; ++d) {
    const int64_t s = strides[d];
    if (s < 1 || (s * esize) % 16 != 0 || s >= (int64_t(1) << 40) / esize)
      throw UserError(loc, fmt::format("{}: strides {}: stride {} of dimension {} is {} bytes; every stride but "
                                       "the innermost must be positive, a multiple of 16 bytes ({} elements of "
                                       "{}) and below 2^40 bytes; pad the rows to a multiple of {} elements",
                                       what, dims_str(strides, rank), s, d, s * esize, 16 / esize, dtype_name(dtype),
                                       16 / esize));
  }
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) {
    if (block[d] < 1 || block[d] > 256)
      throw UserError(loc, fmt::format("{}: block shape {} has dimension {} = {}, outside 1..256 (TMA's largest box "
                                       "dimension); use smaller blocks",
                                       what, dims_str(block, rank), d, block[d]));
    n *= block[d];
  }
  if (n > (int64_t(1) << 20))
    throw UserError(loc, fmt::format("{}: block shape {} has {} elements, more than a tile's 2^20; use smaller blocks",
                                     what, dims_str(block, rank), n));
}

void encode_tensor_map(const HostArg& a, void* out128, int swizzle_width) {
  const cuda::Driver& d = cuda::require_driver("cuTensorMapEncodeTiled");
  if (!d.cuTensorMapEncodeTiled)
    throw RuntimeError("cuTensorMapEncodeTiled",
                       fmt::format("the CUDA driver (version {}) has no cuTensorMapEncodeTiled (CUDA 12.0 or newer "
                                   "has it); a TensorDescriptor on an sm_90 device needs it",
                                   d.version));
  CUtensorMapDataType t;
  switch (a.pointee) {
    case DType::i8: case DType::u8: case DType::f8e4m3: case DType::f8e5m2: t = CU_TENSOR_MAP_DATA_TYPE_UINT8; break;
    case DType::i16: case DType::u16: t = CU_TENSOR_MAP_DATA_TYPE_UINT16; break;
    case DType::i32: t = CU_TENSOR_MAP_DATA_TYPE_INT32; break;
    case DType::u32: t = CU_TENSOR_MAP_DATA_TYPE_UINT32; break;
    case DType::i64: t = CU_TENSOR_MAP_DATA_TYPE_INT64; break;
    case DType::u64: t = CU_TENSOR_MAP_DATA_TYPE_UINT64; break;
    case DType::f16: t = CU_TENSOR_MAP_DATA_TYPE_FLOAT16; break;
    case DType::bf16: t = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16; break;
    case DType::f32: t = CU_TENSOR_MAP_DATA_TYPE_FLOAT32; break;
    case DType::f64: t = CU_TENSOR_MAP_DATA_TYPE_FLOAT64; break;
    default: throw InternalError("encode_tensor_map: unsupported dtype");
  }
  const int r = a.desc.rank;
  const int64_t esize = byte_size(a.pointee);
  // cuTensorMapEncodeTiled takes dimensions innermost first; globalStrides holds the byte strides
  // of dimensions 1..r-1 in that order (dimension 0's stride is the element size).
  cuuint64_t dims[5], strides[5];
  cuuint32_t box[5], estr[5];
  for (int i = 0; i < r; ++i) {
    const int d = r - 1 - i;
    dims[i] = static_cast<cuuint64_t>(a.desc.shape[d]);
    box[i] = static_cast<cuuint32_t>(a.desc.block[d]);
    estr[i] = 1;
    if (i > 0) strides[i - 1] = static_cast<cuuint64_t>(a.desc.strides[d] * esize);
  }
  CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
  if (swizzle_width > 0) {
    const int64_t span = swizzle_width * esize;
    if (span != 128 && span != 64 && span != 32)
      throw InternalError(fmt::format("encode_tensor_map: a swizzled box of {} bytes", span));
    box[0] = static_cast<cuuint32_t>(swizzle_width);
    swizzle = span == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : span == 64 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_32B;
  }
  CUtensorMap map;
  std::memset(&map, 0, sizeof map);
  cuda::check(d.cuTensorMapEncodeTiled(&map, t, static_cast<cuuint32_t>(r), const_cast<void*>(a.p), dims, strides,
                                       box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                                       CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
              "cuTensorMapEncodeTiled");
  static_assert(sizeof(CUtensorMap) == 128, "CUtensorMap is 128 bytes");
  std::memcpy(out128, &map, 128);
}

}  // namespace tle::detail
