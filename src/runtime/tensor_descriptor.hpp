// src/runtime/tensor_descriptor.hpp - tensor descriptors at launch (tle/tensor_descriptor.hpp).
// Internal to libtle.
#pragma once
#include "tle/detail/trace_api.hpp"

namespace tle::detail {

/// Whether TMA has a data type for elements of dtype (all but bool and pointers).
bool tensor_map_dtype_ok(DType d);
/// Fills out128 with the CUtensorMap of descriptor argument `a` (kind TensorDesc): tiled, no
/// swizzle, no interleave, out-of-bound elements read as zero. RuntimeError when the driver lacks
/// cuTensorMapEncodeTiled or refuses the arguments.
void encode_tensor_map(const HostArg& a, void* out128);

}  // namespace tle::detail
