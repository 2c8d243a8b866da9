// tle/dlpack.hpp - DLPack tensors as kernel arguments (libdlpack-dev, <dlpack/dlpack.h>).
//
//   #include <tle/dlpack.hpp>            // tle/tle.hpp includes it too
//   DLTensor* x = ...;                   // from PyTorch, CuPy, JAX, TVM, ... or built by hand
//   add(tle::Grid(tle::cdiv(n, 1024)), x, y, out, n, 1024);
//
// A `DLTensor*`, `const DLTensor*` or `DLManagedTensor*` (const or not) may be passed wherever the
// kernel takes a `Ptr<T>`. The kernel receives `(char*)data + byte_offset` as a T*. The launch
// checks, and throws tle::UserError at the Grid's file:line naming the argument, when:
//   - the dtype is not T's: DLDataType {code, bits, lanes} must be
//       float / double / tle::f16    kDLFloat 32 / 64 / 16       tle::bf16  kDLBfloat 16
//       int8_t ... int64_t           kDLInt 8 / 16 / 32 / 64     bool       kDLBool (6) 8
//       uint8_t ... uint64_t         kDLUInt 8 / 16 / 32 / 64
//     with lanes 1 (vector dtypes are rejected: view them as scalars). Ptr<Ptr<T>> parameters
//     take raw pointers only (DLPack has no pointer dtype);
//   - the device does not suit the backend the launch runs on: kDLCPU or kDLCUDAHost on the CPU
//     backend; kDLCUDA, kDLCUDAManaged or kDLCUDAHost on the GPU backend (a kDLCUDA tensor must be on
//     the device of tle's CUDA context). Kernel::ptx and Kernel::ir check no device;
//   - data + byte_offset is not aligned to the element size;
//   - data is null while the tensor holds elements (a null data pointer with a zero-sized shape
//     passes a null pointer), or the DLTensor* itself is null.
//
// Shape and strides are not checked and not passed: a tle kernel takes a flat pointer and indexes
// memory itself, so a tensor of any shape and any strides (row-padded, transposed, negative
// strides ...) is accepted; pass the sizes and strides the kernel needs as scalar arguments. The
// kernel may touch only the memory the tensor's shape and strides cover.
//
// Ownership: tle never calls a DLManagedTensor's deleter; the caller keeps the tensor alive until
// the launch has finished (on the GPU launches are asynchronous: until a synchronize).
#pragma once
#include <dlpack/dlpack.h>

#include <cstdint>
#include <cstring>

#include "tle/kernel.hpp"

namespace tle::detail {

/// The HostArg for a DLPack tensor (null allowed: reported when the launch packs its arguments).
inline HostArg dlpack_host_arg(const DLTensor* t, const char* type_name) {
  HostArg h{};
  h.kind = HostArg::Pointer;
  h.untyped_pointer = true;  // the element type is checked from h.dl, not h.pointee
  h.type_name = type_name;
  h.p = nullptr;
  h.dl.present = true;
  if (!t) {
    h.dl.null_tensor = true;
    return h;
  }
  h.dl.code = t->dtype.code;
  h.dl.bits = t->dtype.bits;
  h.dl.lanes = t->dtype.lanes;
  // device_type is read as its bits: a producer may send a device this DLPack header does not
  // list, and loading such a value as the enum DLDeviceType would be undefined behaviour (UBSan's
  // -fsanitize=enum reports it); the launch then reports the unknown device.
  static_assert(sizeof(t->device.device_type) == sizeof(int32_t), "DLDeviceType is 32 bits wide");
  std::memcpy(&h.dl.device_type, &t->device.device_type, sizeof(int32_t));
  h.dl.device_id = t->device.device_id;
  if (t->data) {
    h.p = static_cast<const char*>(t->data) + t->byte_offset;
  } else {
    bool empty = false;
    for (int d = 0; t->shape && d < t->ndim; ++d) empty = empty || t->shape[d] == 0;
    h.dl.null_data = !empty;
  }
  return h;
}

template <> struct host_arg_ext<DLTensor*> {
  static constexpr bool enabled = true;
  static HostArg get(const DLTensor* t) { return dlpack_host_arg(t, "DLTensor*"); }
};
template <> struct host_arg_ext<const DLTensor*> : host_arg_ext<DLTensor*> {};
template <> struct host_arg_ext<DLManagedTensor*> {
  static constexpr bool enabled = true;
  static HostArg get(const DLManagedTensor* t) {
    return dlpack_host_arg(t ? &t->dl_tensor : nullptr, "DLManagedTensor*");
  }
};
template <> struct host_arg_ext<const DLManagedTensor*> : host_arg_ext<DLManagedTensor*> {};

}  // namespace tle::detail
