// tle/tensor_descriptor.hpp - tensor descriptors: a strided tensor in global memory plus a block
// shape, moved block by block inside a kernel (Triton's tensor descriptors; on sm_90 the tensor
// memory accelerator, TMA).
//
//   // host: a row-major M x K matrix of bf16, moved in 64 x 32 blocks
//   tle::TensorDescriptor<tle::bf16, 2> a(a_ptr, {M, K}, {K, 1}, {64, 32});
//   auto k = tle::jit("k", [](tle::TensorDescriptor<tle::bf16, 2> a, tle::Ptr<float> out, ...) {
//     tle::Tile<tle::bf16> t = a.load({tle::program_id(0) * 64, 0});   // [64, 32]
//     a.store({tle::program_id(0) * 64, 32}, t);
//   });
//   k(tle::Grid(...), a, out, ...);
//
// Host side. A descriptor holds a base pointer to T (a T*, a tle::DeviceBuffer<T>, or a DLPack
// tensor through tle::make_tensor_descriptor in tle/dlpack.hpp), the global shape and strides, in
// elements, outermost dimension first (C order), and the block shape. The constructor checks, and
// throws tle::UserError at the line that builds the descriptor, naming what to change, when:
//   - the rank is not 1 to 5 (TMA's limit, CUDA Driver API cuTensorMapEncodeTiled);
//   - T is not one of i8, u8, i16, u16, i32, u32, i64, u64, f16, bf16, f32, f64 (bool and
//     pointers have no TMA data type);
//   - the base pointer is null or not 16-byte aligned;
//   - a shape dimension is < 1 or > 2^32;
//   - the innermost stride is not 1, or another stride is < 1, not a multiple of 16 bytes, or
//     at least 2^40 bytes;
//   - a block dimension is < 1 or > 256 (TMA's box limit), or the block has more than 2^20
//     elements (a tile's limit).
// The descriptor copies nothing: the memory must stay alive until the launch that uses it has
// finished (on the GPU, launches are asynchronous).
//
// Kernel side. A kernel parameter declared `tle::TensorDescriptor<T, Rank>` takes such a
// descriptor. The block shape is a compile-time fact (part of the specialization key, like a
// Constexpr); shape and strides are runtime values.
//   desc.load({o0, ..., oR-1})        -> Tile<T> of the block shape: element (i0, ..., iR-1) is
//                                        global element (o0 + i0, ..., oR-1 + iR-1), or 0 where
//                                        that index is outside [0, shape) in any dimension
//   desc.store({o0, ..., oR-1}, tile)    writes the tile (cast to T, broadcast to the block shape)
//                                        to the same positions; elements outside the tensor are
//                                        not written
// Offsets are in elements, 32-bit integers (TMA's coordinates): any integer tile scalar or C++
// integer; they may be negative or past the end (those elements are out of bounds). This is the
// meaning of Triton's tensor descriptors and of TMA (PTX ISA 9.7.9.25, cp.async.bulk.tensor:
// out-of-bound elements of a load are filled with zeros, of a store not written).
//
// Lowering: the accesses are ordinary masked loads and stores on every backend and target but
// sm_90a. There (unless TLE_TMA=0; docs/semantics.md), a block TMA can take (power-of-two dims, an
// innermost row of at least 16 bytes, at most 64 KiB) of a descriptor whose innermost extent is a
// multiple of 16 bytes, at an innermost offset known to be one, is loaded by cp.async.bulk.tensor into shared memory completing on an
// mbarrier (pipelined into wgmma's swizzled buffers in a K loop that feeds a dot) and stored by
// one cp.async.bulk.tensor from shared memory; the descriptor also reaches the kernel as a
// CUtensorMap (cuTensorMapEncodeTiled, a 128-byte parameter), encoded at each launch on sm_90.
#pragma once
#include <array>
#include <cstdint>

#include "tle/kernel.hpp"

namespace tle {

namespace detail {
/// Checks a descriptor's arguments (the list above); UserError at loc. libtle.
void check_tensor_descriptor(DType dtype, int rank, const void* base, const int64_t* shape, const int64_t* strides,
                             const int64_t* block, const SrcLoc& loc);
/// The traced ops (src/frontend/trace.cpp). `values`: the descriptor's IR arguments (tensor map,
/// base, shape[rank], strides[rank]); `offsets`: rank integer scalars.
V desc_load(const std::vector<V>& values, const std::vector<int64_t>& block, const std::vector<V>& offsets,
            const SrcLoc& loc);
void desc_store(const std::vector<V>& values, const std::vector<int64_t>& block, const std::vector<V>& offsets,
                V value, const SrcLoc& loc);
}  // namespace detail

template <class T, int Rank> class TensorDescriptor {
 public:
  using element_type = T;
  static constexpr int rank = Rank;
  using Dims = std::array<int64_t, (Rank > 0 ? Rank : 0)>;

  /// A descriptor of the tensor at `base` (host or device memory, by the backend the launch runs
  /// on) with `shape` and `strides` in elements and blocks of `block` elements.
  TensorDescriptor(const T* base, const Dims& shape, const Dims& strides, const Dims& block,
                   loc_t l = loc_t::current())
      : base_(base), shape_(shape), strides_(strides), block_(block) {
    detail::check_tensor_descriptor(detail::dtype_of<T>::value, Rank, base, shape.data(), strides.data(),
                                    block.data(), l);
  }
  /// A descriptor of device memory (GPU launches only, as a DeviceBuffer argument).
  TensorDescriptor(const DeviceBuffer<T>& buf, const Dims& shape, const Dims& strides, const Dims& block,
                   loc_t l = loc_t::current())
      : TensorDescriptor(buf.data(), shape, strides, block, l) {
    device_buffer_ = true;
  }

  const T* base() const { return base_; }
  const Dims& shape() const { return shape_; }
  const Dims& strides() const { return strides_; }
  const Dims& block_shape() const { return block_; }
  /// Whether the base is device memory only (a DeviceBuffer, a kDLCUDA tensor): host-backend
  /// launches refuse it.
  bool device_buffer() const { return device_buffer_; }
  void set_device_memory(bool device_only) { device_buffer_ = device_only; }

  /// Kernel side: the block at `offsets` (elements), zeros outside the tensor.
  Tile<T> load(const std::array<Offset, (Rank > 0 ? Rank : 0)>& offsets, loc_t l = loc_t::current()) const {
    return Tile<T>(detail::desc_load(values_, block_vec(), offset_values(offsets), l));
  }
  /// Kernel side: writes `value` (cast to T, broadcast to the block shape) at `offsets`; elements
  /// outside the tensor are not written.
  void store(const std::array<Offset, (Rank > 0 ? Rank : 0)>& offsets, std::type_identity_t<Operand<T>> value,
             loc_t l = loc_t::current()) const {
    detail::desc_store(values_, block_vec(), offset_values(offsets), value.v, l);
  }

  /// Kernel side: the descriptor's IR values (tensor map, base, shape, strides) and the offsets'
  /// (for library code such as gpu::copy).
  const std::vector<detail::V>& traced_values() const { return values_; }
  static std::vector<detail::V> offsets_of(const std::array<Offset, (Rank > 0 ? Rank : 0)>& o) { return offset_values(o); }

  /// Used by tle::jit: the traced parameter.
  static TensorDescriptor traced(const detail::TraceParam& p) {
    TensorDescriptor d;
    d.values_ = p.values;
    for (int i = 0; i < Rank; ++i) d.block_[i] = p.block.at(i);
    return d;
  }

 private:
  TensorDescriptor() = default;
  std::vector<int64_t> block_vec() const { return std::vector<int64_t>(block_.begin(), block_.end()); }
  static std::vector<detail::V> offset_values(const std::array<Offset, (Rank > 0 ? Rank : 0)>& o) {
    std::vector<detail::V> v;
    for (auto& x : o) v.push_back(x.v);
    return v;
  }
  const T* base_ = nullptr;
  Dims shape_{}, strides_{}, block_{};
  bool device_buffer_ = false;
  std::vector<detail::V> values_;  // kernel side
};

namespace detail {
template <class T, int R> struct param_spec<TensorDescriptor<T, R>> {
  static ParamSpec get() {
    ParamSpec s{ParamSpec::TensorDesc, dtype_of<T>::value};
    s.rank = R;
    return s;
  }
};
template <class T, int R> struct make_param<TensorDescriptor<T, R>> {
  static TensorDescriptor<T, R> get(const TraceParam& p) { return TensorDescriptor<T, R>::traced(p); }
};
template <class T, int R> struct host_arg_ext<TensorDescriptor<T, R>> {
  static constexpr bool enabled = true;
  static HostArg get(const TensorDescriptor<T, R>& d) {
    HostArg h{};
    h.kind = HostArg::TensorDesc;
    h.p = d.base();
    h.pointee = dtype_of<T>::value;
    h.device_buffer = d.device_buffer();
    h.type_name = "tle::TensorDescriptor";
    h.desc.rank = R;
    for (int i = 0; i < R && i < 5; ++i) {
      h.desc.shape[i] = d.shape()[i];
      h.desc.strides[i] = d.strides()[i];
      h.desc.block[i] = d.block_shape()[i];
    }
    return h;
  }
};
}  // namespace detail

}  // namespace tle
