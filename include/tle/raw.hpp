// tle/raw.hpp - TLE-Raw: CUDA C++ inside tle, compiled in-process by NVRTC (docs/raw.md).
//
// Two forms (the third, elementwise inline PTX, is tle::inline_asm in tle/tile.hpp):
//
// 1. Whole CUDA kernels, launched through tle's runtime like tile kernels (same Grid, stream,
//    argument checks for device pointers / DeviceBuffer / DLPack, same caches):
//
//      auto saxpy = tle::raw_kernel<void(float, const float*, float*, int)>("saxpy", R"(
//        extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
//          int i = blockIdx.x * blockDim.x + threadIdx.x;
//          if (i < n) y[i] = a * x[i] + y[i];
//        })");
//      saxpy(tle::Grid(tle::cdiv(n, 256)), tle::Block(256), 2.0f, x, y, n);   // or
//      saxpy[tle::Grid(tle::cdiv(n, 128)).on(stream)](2.0f, x, y, n);       // 32 * num_warps threads
//
//    The signature template argument lists the kernel's parameters as C++ types (T* pointers,
//    arithmetic scalars, tle::f16 / tle::bf16); each launch checks its arguments against it as a
//    tile kernel launch does. `name` is the __global__ function's name expression: a plain name
//    for extern "C" kernels, or a C++ one ("ns::kernel<float>", lowered with
//    nvrtcGetLoweredName).
//
// 2. CUDA device functions called from tile code, collectively by the whole CTA:
//
//      static const tle::CudaSource src(R"(
//        extern "C" __device__ void sort_tile(tle::TileRef<float> t) { ... every thread ... })");
//      ... inside a tle::jit lambda:
//      Tile<float> x = load(p + arange(0, 256));
//      tle::cuda_function(src, "sort_tile", tle::inout(x));   // x now holds the sorted tile
//      Tile<float> s = tle::cuda_function<float>(src, "sum_tile", x, n);
//
//    Protocol (docs/raw.md): scalars by value (32/64-bit integers, float, double), Ptr<T> as T*,
//    tiles (rank 1..4) as tle::TileRef<T> {T* data; int rank; int shape[4]; int strides[4];}
//    pointing at a row-major copy in shared memory that the whole CTA wrote before the call; every
//    thread calls the function (after a barrier), so CTA-wide routines with __syncthreads() work;
//    tle::inout tiles are read back after a barrier; a returned value is thread 0's, given to all.
//    The function must be extern "C" __device__. tle prepends tle_raw.h (TileRef, tle::f16/bf16,
//    tle::cta_thread()/cta_threads()) to the source.
//
// Both compile with NVRTC for the device's architecture (sm_90a on an H200), --std=c++17 and no
// include path by default (pass "-I..." and other NVRTC options yourself). NVRTC errors are
// UserErrors at the line that gave the source (raw_kernel / CudaSource, or the cuda_function call),
// holding NVRTC's log with each referenced snippet line quoted. GPU backend only: a launch or a
// compile for the CPU backend is a UserError naming the raw kernel / cuda_function. NVRTC and
// nvJitLink are loaded with dlopen (TLE_LIBNVRTC, TLE_LIBNVJITLINK override the libraries).
#pragma once
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tle/kernel.hpp"

namespace tle {

// ============================================================== device functions

/// CUDA C++ source holding extern "C" __device__ functions for tle::cuda_function, with its
/// NVRTC options. `file_name` is the name NVRTC's messages use for the snippet. Cheap to copy;
/// compiled (and cached by text and options) when a kernel calling into it is compiled for the GPU.
class CudaSource {
 public:
  explicit CudaSource(std::string source, std::vector<std::string> options = {},
                      std::string file_name = "cuda_source.cu", loc_t l = loc_t::current())
      : source_(std::move(source)), options_(std::move(options)), file_(std::move(file_name)), loc_(l) {}
  const std::string& source() const { return source_; }
  const std::vector<std::string>& options() const { return options_; }
  const std::string& file_name() const { return file_; }
  const SrcLoc& loc() const { return loc_; }

 private:
  std::string source_;
  std::vector<std::string> options_;
  std::string file_;
  SrcLoc loc_;
};

/// Marks a tile argument of tle::cuda_function as in-out: after the call the handle holds the tile
/// the CUDA function left in shared memory.
template <class T> struct InOut {
  Tile<T>* tile;
};
template <class T> InOut<T> inout(Tile<T>& t) { return InOut<T>{&t}; }

/// The device function's name, with the position of the tle::cuda_function call.
struct CudaFunctionName {
  std::string name;
  SrcLoc loc;
  CudaFunctionName(const char* n, loc_t l = loc_t::current()) : name(n ? n : ""), loc(l) {}
  CudaFunctionName(std::string n, loc_t l = loc_t::current()) : name(std::move(n)), loc(l) {}
};

namespace detail {
/// One argument of a cuda_call (kinds: src/ir/cuda_call.hpp: 0 value, 1 tile, 2 in-out tile).
struct CudaCallArg {
  V v = nullptr;
  int64_t kind = 1;
};
/// Traces a cuda_call op (src/frontend/trace_raw.cpp); ret_dtype < 0 for void. Returns the op's
/// results: the return value first (if any), then one per in-out argument.
std::vector<V> cuda_call(const std::string& source, const std::vector<std::string>& options, const std::string& file,
                         const std::string& name, int ret_dtype, const std::vector<CudaCallArg>& args,
                         const SrcLoc& loc);

template <class A> struct cuda_arg;
template <class T> struct cuda_arg<Tile<T>> {
  static CudaCallArg get(const Tile<T>& t, const SrcLoc&) { return {value_of(t), 1}; }
};
template <class T> struct cuda_arg<InOut<T>> {
  static CudaCallArg get(const InOut<T>& t, const SrcLoc&) { return {value_of(*t.tile), 2}; }
};
template <class A>
  requires(std::is_arithmetic_v<A> && !std::is_same_v<A, bool>)
struct cuda_arg<A> {
  static CudaCallArg get(A a, const SrcLoc& loc) { return {host_constant<A>(a, loc), 0}; }
};
template <class A> void assign_inout(const A&, std::vector<V>::const_iterator&) {}
template <class T> void assign_inout(const InOut<T>& a, std::vector<V>::const_iterator& it) { *a.tile = Tile<T>(*it++); }
}  // namespace detail

/// Calls the extern "C" __device__ function `name` of `src` from every thread of the CTA (see the
/// top of this file and docs/raw.md for the protocol). Arguments: Tile<T> scalars (by value:
/// int32_t, uint32_t, int64_t, uint64_t, float, double), Ptr<T> scalars (as T*), C++ arithmetic
/// values of those types, tiles of rank 1..4 (as tle::TileRef<T>, read only) and tle::inout(tile)
/// (read back). R is the return type (void, or one of the scalar types): the result is thread 0's
/// return value. UserError at this call for an argument the protocol cannot pass; when the kernel
/// is compiled for the GPU, for a source NVRTC rejects, a missing function, or one whose parameter
/// sizes differ from the call's; on the CPU backend, since CUDA code cannot run there.
template <class R = void, class... A>
std::conditional_t<std::is_void_v<R>, void, Tile<R>> cuda_function(const CudaSource& src, CudaFunctionName name,
                                                                   A&&... args) {
  std::vector<detail::CudaCallArg> as{detail::cuda_arg<std::decay_t<A>>::get(args, name.loc)...};
  int ret = -1;
  if constexpr (!std::is_void_v<R>) ret = static_cast<int>(detail::dtype_of<R>::value);
  std::vector<detail::V> rs = detail::cuda_call(src.source(), src.options(), src.file_name(), name.name, ret, as, name.loc);
  auto it = rs.cbegin();
  if constexpr (std::is_void_v<R>) {
    (detail::assign_inout(args, it), ...);
  } else {
    Tile<R> result(*it++);
    (detail::assign_inout(args, it), ...);
    return result;
  }
}

// ============================================================== whole kernels

/// Threads per block of a raw kernel launch, and its dynamic shared memory in bytes.
struct Block {
  unsigned x = 1, y = 1, z = 1;
  size_t shared_bytes = 0;
  explicit Block(unsigned bx, unsigned by = 1, unsigned bz = 1, size_t dynamic_shared_bytes = 0)
      : x(bx), y(by), z(bz), shared_bytes(dynamic_shared_bytes) {}
};

namespace detail {
class RawKernelState;
RawKernelState* raw_kernel_create(const char* name, const std::string& source, const std::vector<std::string>& options,
                                  const std::vector<ParamSpec>& params, const SrcLoc& loc);
void raw_kernel_destroy(RawKernelState* k) noexcept;
/// Checks and launches (src/runtime/raw/raw_kernel.cpp); block.x == 0 means 32 * grid num_warps.
void raw_kernel_launch(RawKernelState* k, const Grid3& grid, unsigned bx, unsigned by, unsigned bz, size_t smem,
                       const LaunchOptions& opts, const HostArg* args, size_t nargs, const SrcLoc& loc);
std::string raw_kernel_ptx(RawKernelState* k, int sm);
size_t raw_kernel_num_compiled(const RawKernelState* k) noexcept;

template <class P> struct raw_param_spec {
  static ParamSpec get() {
    if constexpr (std::is_pointer_v<P>) {
      using E = std::remove_cv_t<std::remove_pointer_t<P>>;
      static_assert(Element<E> && !is_ptr<E>::value, "raw kernel pointer parameters are T* of a tle element type");
      return {ParamSpec::Pointer, dtype_of<E>::value};
    } else {
      static_assert(ScalarElement<P>, "raw kernel parameters are T* pointers, arithmetic types, tle::f16 or tle::bf16");
      return {ParamSpec::Scalar, dtype_of<P>::value};
    }
  }
};
}  // namespace detail

template <class Sig> class RawKernel;

/// A CUDA C++ kernel compiled by NVRTC (see the top of this file). Thread-safe; not copyable.
template <class... P> class RawKernel<void(P...)> {
 public:
  RawKernel(const char* name, const std::string& source, const std::vector<std::string>& options, const SrcLoc& loc)
      : state_(detail::raw_kernel_create(name, source, options, {detail::raw_param_spec<P>::get()...}, loc)) {}
  RawKernel(const RawKernel&) = delete;
  RawKernel& operator=(const RawKernel&) = delete;
  ~RawKernel() { detail::raw_kernel_destroy(state_); }

  /// Launches with 32 * grid.num_warps threads per block and no dynamic shared memory, on the
  /// grid's stream (asynchronous, like tile kernels). Compiles for the device on first use.
  /// UserError at the Grid's line for wrong arguments, host pointers, a CPU-backend launch, or
  /// (at raw_kernel's line) a source NVRTC rejects; RuntimeError for driver failures.
  template <class... A> void operator()(const Grid& grid, const A&... args) const {
    launch(grid, 0, 1, 1, 0, args...);
  }
  /// Launches with `block` threads and its dynamic shared memory.
  template <class... A> void operator()(const Grid& grid, const Block& block, const A&... args) const {
    launch(grid, block.x, block.y, block.z, block.shared_bytes, args...);
  }
  /// k[grid](args...): the same launch as k(grid, args...).
  struct Bound {
    const RawKernel* k;
    Grid grid;
    template <class... A> void operator()(const A&... args) const { k->launch(grid, 0, 1, 1, 0, args...); }
  };
  Bound operator[](const Grid& grid) const { return Bound{this, grid}; }

  /// The PTX NVRTC makes of the source for sm_<sm> (90: sm_90a); needs no GPU. For tests and
  /// inspection; throws UserError for a source NVRTC rejects.
  std::string ptx(int sm = 90) const { return detail::raw_kernel_ptx(state_, sm); }
  /// How many CUDA contexts the kernel has been loaded into.
  size_t num_compiled() const { return detail::raw_kernel_num_compiled(state_); }

 private:
  template <class... A>
  void launch(const Grid& grid, unsigned bx, unsigned by, unsigned bz, size_t smem, const A&... args) const {
    (void)detail::kernel_call<std::tuple<P...>, std::tuple<A...>>::ok;  // compile-time argument checks
    std::array<detail::HostArg, sizeof...(A)> h{detail::host_arg(args)...};
    detail::raw_kernel_launch(state_, detail::Grid3{grid.x, grid.y, grid.z}, bx, by, bz, smem,
                              detail::launch_options(grid), h.data(), h.size(), grid.loc);
  }
  detail::RawKernelState* state_;
};

/// Makes a raw kernel from CUDA C++ source. `Sig` is the kernel's signature, void(P...). Nothing is
/// compiled until the first launch (or ptx()).
template <class Sig>
RawKernel<Sig> raw_kernel(const char* name, const std::string& source, const std::vector<std::string>& options = {},
                          loc_t l = loc_t::current()) {
  return RawKernel<Sig>(name, source, options, l);
}

}  // namespace tle
