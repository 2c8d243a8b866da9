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
#include "tle/tensor_descriptor.hpp"

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

namespace tle {

/// A TensorDescriptor of a DLPack tensor (tle/tensor_descriptor.hpp): base = data + byte_offset,
/// shape and strides from the tensor (null strides: row-major), blocks of `block` elements.
/// Throws tle::UserError at the caller's line when the tensor is null, its ndim is not Rank, its
/// dtype is not T's (the table at the top of this file), or the descriptor's own checks fail
/// (alignment, innermost stride 1, ...). A kDLCUDA tensor is device memory: a launch on the CPU
/// backend or the interpreter refuses it.
template <class T, int Rank>
TensorDescriptor<T, Rank> make_tensor_descriptor(const DLTensor* t, const std::array<int64_t, Rank>& block,
                                                 loc_t l = loc_t::current()) {
  static_assert(Rank >= 1 && Rank <= 5, "make_tensor_descriptor: Rank must be 1 to 5");
  if (!t) throw UserError(l, "make_tensor_descriptor: the DLTensor* is null");
  if (t->ndim != Rank)
    throw UserError(l, "make_tensor_descriptor: the tensor has " + std::to_string(t->ndim) +
                           " dimensions, but the descriptor's Rank is " + std::to_string(Rank));
  constexpr DType d = detail::dtype_of<T>::value;
  const uint8_t code = d == DType::i1 ? uint8_t(6)  // kDLBool (absent from older dlpack.h)
                       : d == DType::bf16 ? uint8_t(kDLBfloat)
                       : is_float(d)      ? uint8_t(kDLFloat)
                       : is_signed_int(d) ? uint8_t(kDLInt)
                                          : uint8_t(kDLUInt);
  const uint8_t bits = d == DType::i1 ? 8 : static_cast<uint8_t>(bit_width(d));
  if (t->dtype.code != code || t->dtype.bits != bits || t->dtype.lanes != 1)
    throw UserError(l, "make_tensor_descriptor: the tensor's DLDataType {code " + std::to_string(t->dtype.code) +
                           ", bits " + std::to_string(t->dtype.bits) + ", lanes " + std::to_string(t->dtype.lanes) +
                           "} is not " + std::string(dtype_name(d)) + "'s {code " + std::to_string(code) + ", bits " +
                           std::to_string(bits) + ", lanes 1}");
  std::array<int64_t, Rank> shape{}, strides{};
  int64_t run = 1;
  for (int i = Rank - 1; i >= 0; --i) {
    shape[i] = t->shape[i];
    strides[i] = t->strides ? t->strides[i] : run;
    run *= t->shape[i];
  }
  const T* base = t->data ? reinterpret_cast<const T*>(static_cast<const char*>(t->data) + t->byte_offset) : nullptr;
  TensorDescriptor<T, Rank> desc(base, shape, strides, block, l);
  int32_t device_type = 0;
  std::memcpy(&device_type, &t->device.device_type, sizeof device_type);
  desc.set_device_memory(device_type == kDLCUDA);
  return desc;
}
template <class T, int Rank>
TensorDescriptor<T, Rank> make_tensor_descriptor(const DLManagedTensor* t, const std::array<int64_t, Rank>& block,
                                                 loc_t l = loc_t::current()) {
  return make_tensor_descriptor<T, Rank>(t ? &t->dl_tensor : nullptr, block, l);
}

}  // namespace tle
