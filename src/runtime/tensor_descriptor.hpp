// src/runtime/tensor_descriptor.hpp - tensor descriptors at launch (tle/tensor_descriptor.hpp).
// Internal to libtle.
#pragma once
#include "tle/detail/trace_api.hpp"

namespace tle::detail {

/// Whether TMA has a data type for elements of dtype (all but bool and pointers).
bool tensor_map_dtype_ok(DType d);
/// Fills out128 with the CUtensorMap of descriptor argument `a` (kind TensorDesc): tiled, no
/// interleave, out-of-bound elements read as zero; with swizzle_width 0 the box is the
/// descriptor's block, unswizzled; otherwise (16, 32 or 64 elements of 2 bytes) the box's innermost
/// dimension is swizzle_width and the swizzle is its byte width (32, 64 or 128 bytes: the
/// buffers of pipelined TMA loads into wgmma, PTX ISA 5.5.6 "Tensor swizzling modes").
/// RuntimeError when the driver lacks cuTensorMapEncodeTiled or refuses the arguments.
void encode_tensor_map(const HostArg& a, void* out128, int swizzle_width = 0);

}  // namespace tle::detail
