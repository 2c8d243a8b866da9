// tle/device.hpp - which backend runs kernels, GPU facts, streams and device memory.
//
//   if (tle::default_backend() == tle::Backend::GPU) {
//     tle::DeviceBuffer<float> x(n);          // n floats of device memory, freed by the destructor
//     x.copy_from_host(host.data(), n);       // sizes must match, or UserError at this line
//     ...launch...
//     tle::synchronize();                     // an earlier asynchronous failure surfaces here
//     x.copy_to_host(host.data(), n);
//   }
//
// libtle loads the CUDA driver (libcuda.so.1) at run time with dlopen and never links it, so a
// program using tle runs on machines without a driver or a GPU; there, default_backend() is CPU
// and DeviceBuffer and Stream throw RuntimeError when used (ManagedBuffer falls back to host
// memory). Environment:
//   TLE_BACKEND=cpu|gpu|interp  force a backend (gpu without a usable driver and device: RuntimeError;
//                        interp: the reference interpreter, for debugging)
//   TLE_LIBCUDA=<path>   load this file instead of libcuda.so.1
//   TLE_LAUNCH_BLOCKING=1  every GPU launch waits for its kernel (as CUDA_LAUNCH_BLOCKING=1 does):
//                        a fault is a RuntimeError at that launch, naming the kernel and its line
//
// ManagedBuffer<T> (managed memory, one address for host and GPU; host memory on a machine without
// a driver) lets the same host code run a kernel on either backend and on any machine: fill it on
// the host, launch, synchronize, read it on the host.
//
// Contexts: tle uses the CUDA context current on the calling thread if there is one (an engine's
// own), otherwise device 0's primary context, the one the CUDA runtime also uses. So device
// pointers from cudaMalloc and streams from cudaStreamCreate can be passed to tle directly.
//
// This header does not include cuda.h: CUDA handles cross it as void* (CUstream) and device
// addresses as pointers or uint64_t (CUdeviceptr).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <source_location>
#include <string>
#include <type_traits>
#include <vector>

#include "tle/error.hpp"

namespace tle {

/// Where kernels run.
enum class Backend {
  CPU,  ///< LLVM ORC JIT on the host, programs spread over a thread pool
  GPU,  ///< PTX through the CUDA Driver API
  /// The reference interpreter of the tile IR (src/interp/interp.hpp), on the host: evaluates the
  /// traced kernel element by element with docs/semantics.md's rules, running the programs one
  /// after another (synchronous, host memory, like the CPU). Slow; for debugging a kernel or tle
  /// (as Triton's interpreter mode): it shares no code with the optimizer or either code generator.
  Interp,
};

/// "cpu", "gpu" or "interp".
const char* backend_name(Backend b);

/// The backend kernels use by default: GPU when the CUDA driver loads and reports a device,
/// else CPU. TLE_BACKEND=cpu, gpu or interp (any case) overrides the choice; TLE_BACKEND=gpu
/// with no usable driver or device throws RuntimeError saying why, and any other non-empty value
/// throws UserError. The environment is read at every call; the driver is probed once.
Backend default_backend();

/// Facts about one GPU, read with cuDeviceGetAttribute.
struct DeviceInfo {
  std::string name;                       ///< e.g. "NVIDIA H200"
  int ordinal = 0;                        ///< CUDA device ordinal
  int cc_major = 0, cc_minor = 0;         ///< compute capability
  int sm = 0;                             ///< cc_major * 10 + cc_minor (90 for H100/H200)
  int num_sms = 0;                        ///< streaming multiprocessors
  size_t shared_mem_per_block = 0;        ///< without opt-in (48 KB)
  size_t shared_mem_per_block_optin = 0;  ///< with opt-in, for dynamic shared memory (227 KB on sm_90)
  size_t shared_mem_per_sm = 0;
  int regs_per_block = 0;                 ///< 32-bit registers per block
  int max_threads_per_block = 0;
  int warp_size = 0;
  size_t l2_cache_bytes = 0;
  size_t total_memory_bytes = 0;
  bool cluster_launch = false;            ///< thread block clusters supported (sm_90+)
  int driver_version = 0;                 ///< cuDriverGetVersion, e.g. 13000
};

/// Facts about CUDA device `ordinal`, or nullopt when there is no usable driver or no such
/// device. Throws RuntimeError only if the driver fails a query.
std::optional<DeviceInfo> gpu_info(int ordinal = 0);

/// Waits for all work in tle's CUDA context to finish and reports an earlier asynchronous failure
/// (a faulting kernel, say) as RuntimeError naming cuCtxSynchronize. Does nothing when no CUDA
/// context is in use (no driver, or nothing ran on the GPU yet).
void synchronize();

/// A CUDA stream. Either owned (created by the constructor, destroyed by the destructor) or
/// borrowed from the caller with Stream::wrap (never destroyed by tle). Move-only.
class Stream {
 public:
  /// Creates a stream in tle's context. By default the stream synchronizes with the legacy
  /// default stream (CU_STREAM_DEFAULT), so DeviceBuffer's synchronous copies are ordered after
  /// work queued on it; non_blocking = true creates a CU_STREAM_NON_BLOCKING stream, whose work
  /// must be waited for (synchronize()) before copying its results. Throws RuntimeError when
  /// there is no driver or creation fails.
  explicit Stream(bool non_blocking = false);
  /// Refers to a CUstream the caller owns (cuStreamCreate/cudaStreamCreate; null is the legacy
  /// default stream). tle never destroys it; it must outlive this object's use.
  static Stream wrap(void* cu_stream) noexcept;

  Stream(Stream&& o) noexcept;
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();

  /// The CUstream, as void*. Null for the legacy default stream and for a moved-from Stream.
  void* handle() const noexcept { return stream_; }
  /// Whether this object destroys the stream.
  bool owned() const noexcept { return owned_; }
  /// Waits for the stream's work; an asynchronous failure is reported as RuntimeError.
  void synchronize() const;

 private:
  struct Borrow {};
  Stream(Borrow, void* s) noexcept : stream_(s), owned_(false) {}
  void release() noexcept;
  void* stream_ = nullptr;
  bool owned_ = false;
};

/// How strictly a stream capture (CudaGraph::capture) treats "unsafe" driver calls made while it
/// runs: the CUstreamCaptureMode values (CUDA Driver API, cuStreamBeginCapture).
enum class CaptureMode {
  Global,       ///< unsafe calls from any thread fail while the capture runs (PyTorch's default)
  ThreadLocal,  ///< unsafe calls from the capturing thread fail
  Relaxed,      ///< no call is refused (module loads during the capture work)
};

/// A CUDA graph made by capturing the work queued on a stream (CUDA Programming Guide, "CUDA
/// Graphs", stream capture; Driver API cuStreamBeginCapture / cuStreamEndCapture /
/// cuGraphInstantiate / cuGraphLaunch). An inference engine captures its decode step once and
/// replays it. Move-only; owns the graph and its executable.
///
/// tle launches are capturable: a launch of a kernel already compiled for these arguments' key
/// only queues cuLaunchKernel (TLE_LAUNCH_BLOCKING's wait is skipped while its stream captures).
/// A first launch compiles and loads a module during the capture, which the driver allows in
/// Relaxed mode; in Global or ThreadLocal mode, if the driver refuses the load, the launch throws
/// RuntimeError saying to launch the kernel once before capturing (and the capture is invalid).
/// Pointer arguments are baked into the graph: replay reads and writes the same buffers.
class CudaGraph {
 public:
  /// Captures what `fn` queues on `stream` (which must not be the legacy default stream, null:
  /// UserError) and instantiates it. Rethrows what `fn` throws, after ending the capture. Throws
  /// RuntimeError naming the driver call when capture or instantiation fails.
  template <class F>
  static CudaGraph capture(const Stream& stream, F&& fn, CaptureMode mode = CaptureMode::Global,
                           std::source_location loc = std::source_location::current()) {
    CudaGraph g;
    g.begin(stream, mode, loc);
    try {
      fn();
    } catch (...) {
      g.abandon(stream);
      throw;
    }
    g.end(stream);
    return g;
  }
  CudaGraph(CudaGraph&& o) noexcept : graph_(o.graph_), exec_(o.exec_) { o.graph_ = o.exec_ = nullptr; }
  CudaGraph& operator=(CudaGraph&& o) noexcept;
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  ~CudaGraph();

  /// Queues one replay of the graph on `stream` (cuGraphLaunch; asynchronous). RuntimeError on failure.
  void launch(const Stream& stream) const;

 private:
  CudaGraph() = default;
  void begin(const Stream& stream, CaptureMode mode, const std::source_location& loc);
  void end(const Stream& stream);
  void abandon(const Stream& stream) noexcept;
  void* graph_ = nullptr;  // CUgraph
  void* exec_ = nullptr;   // CUgraphExec
};

namespace detail {
// Device memory primitives behind DeviceBuffer (src/runtime/cuda/device.cpp). Addresses are
// CUdeviceptr values. Each throws RuntimeError naming the driver call on failure (or saying that
// there is no driver). Copies and memsets are synchronous.
uint64_t device_alloc(size_t bytes);
void device_free(uint64_t ptr) noexcept;
void copy_htod(uint64_t dst, const void* src, size_t bytes);
void copy_dtoh(void* dst, uint64_t src, size_t bytes);
void copy_dtod(uint64_t dst, uint64_t src, size_t bytes);
void memset_zero(uint64_t dst, size_t bytes);
/// cuMemAllocManaged(bytes, CU_MEM_ATTACH_GLOBAL): an address valid on the host and the GPU.
void* managed_alloc(size_t bytes);
/// cuMemFree of a managed_alloc address (null: nothing).
void managed_free(void* ptr) noexcept;
/// Whether a usable CUDA driver with a device is present (probed once), i.e. whether
/// managed_alloc can succeed.
bool has_gpu_driver() noexcept;
/// ManagedBuffer's memory: managed memory when has_gpu_driver(), else host memory aligned to 256
/// bytes (as cuMemAlloc's); `*on_host` says which. Freed by buffer_free with that flag.
void* buffer_alloc(size_t bytes, bool* on_host);
void buffer_free(void* ptr, bool on_host) noexcept;
/// UserError at loc: "DeviceBuffer::<op>: <given> elements given, but the buffer holds <size>".
[[noreturn]] void buffer_size_error(const std::source_location& loc, const char* op, size_t given, size_t size);
/// UserError at loc with this message.
[[noreturn]] void buffer_error(const std::source_location& loc, const char* message);
}  // namespace detail

/// An RAII allocation of `size()` elements of T in device memory (cuMemAlloc), freed by the
/// destructor. Move-only. data() is the device address as T*, for kernel arguments; it must not
/// be dereferenced on the host. Copies are synchronous and ordered with the legacy default stream.
/// Driver failures throw RuntimeError; a host size that differs from size() throws UserError at
/// the caller's line.
template <class T> class DeviceBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "DeviceBuffer<T> needs a trivially copyable T");

 public:
  using loc_t = std::source_location;

  /// An empty buffer (no allocation).
  DeviceBuffer() noexcept = default;
  /// Allocates n elements (uninitialized; n = 0 allocates nothing).
  explicit DeviceBuffer(size_t n, loc_t loc = loc_t::current()) : size_(n) {
    if (n > SIZE_MAX / sizeof(T)) detail::buffer_error(loc, "DeviceBuffer: element count too large");
    if (n) ptr_ = detail::device_alloc(n * sizeof(T));
  }
  /// Allocates host.size() elements and copies `host` in.
  explicit DeviceBuffer(const std::vector<T>& host, loc_t loc = loc_t::current()) : DeviceBuffer(host.size(), loc) {
    copy_from_host(host.data(), host.size(), loc);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), size_(o.size_) { o.ptr_ = 0, o.size_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = o.ptr_, size_ = o.size_;
      o.ptr_ = 0, o.size_ = 0;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }

  /// Frees the allocation; the buffer becomes empty.
  void reset() noexcept {
    if (ptr_) detail::device_free(ptr_);
    ptr_ = 0, size_ = 0;
  }

  /// Number of elements.
  size_t size() const noexcept { return size_; }
  size_t bytes() const noexcept { return size_ * sizeof(T); }
  bool empty() const noexcept { return size_ == 0; }
  /// The device address as T* (null when empty).
  T* data() const noexcept { return reinterpret_cast<T*>(static_cast<uintptr_t>(ptr_)); }
  /// The device address as a CUdeviceptr value.
  uint64_t device_ptr() const noexcept { return ptr_; }

  /// Copies n elements from host memory into the buffer; n must equal size().
  void copy_from_host(const T* src, size_t n, loc_t loc = loc_t::current()) {
    check_size("copy_from_host", n, loc);
    if (n && !src) detail::buffer_error(loc, "DeviceBuffer::copy_from_host: null host pointer");
    if (n) detail::copy_htod(ptr_, src, n * sizeof(T));
  }
  void copy_from_host(const std::vector<T>& src, loc_t loc = loc_t::current()) { copy_from_host(src.data(), src.size(), loc); }

  /// Copies the buffer into n elements of host memory; n must equal size().
  void copy_to_host(T* dst, size_t n, loc_t loc = loc_t::current()) const {
    check_size("copy_to_host", n, loc);
    if (n && !dst) detail::buffer_error(loc, "DeviceBuffer::copy_to_host: null host pointer");
    if (n) detail::copy_dtoh(dst, ptr_, n * sizeof(T));
  }
  /// The buffer's contents as a vector.
  std::vector<T> to_host() const {
    std::vector<T> v(size_);
    if (size_) detail::copy_dtoh(v.data(), ptr_, bytes());
    return v;
  }

  /// Copies another buffer of the same size (device to device).
  void copy_from(const DeviceBuffer& src, loc_t loc = loc_t::current()) {
    check_size("copy_from", src.size(), loc);
    if (size_) detail::copy_dtod(ptr_, src.ptr_, bytes());
  }

  /// Sets every byte to zero.
  void fill_zero() {
    if (size_) detail::memset_zero(ptr_, bytes());
  }

 private:
  void check_size(const char* op, size_t n, const loc_t& loc) const {
    if (n != size_) detail::buffer_size_error(loc, op, n, size_);
  }
  uint64_t ptr_ = 0;
  size_t size_ = 0;
};

/// An RAII allocation of `size()` elements of T that kernels on either backend and the host all
/// use: the portable buffer. With a usable CUDA driver and device it is CUDA managed (unified)
/// memory (cuMemAllocManaged with CU_MEM_ATTACH_GLOBAL; CUDA Driver API, "Unified Addressing"),
/// valid on the host and on the GPU, the driver migrating pages on demand; on a machine without
/// one it is plain host memory (256-byte aligned), which is all the CPU backend needs, so the same
/// host code runs on both kinds of machine. Freed by the destructor. Move-only. The host reads and
/// writes elements directly (operator[], begin/end), and data() (or the buffer itself) is a
/// pointer argument for launches. Elements are set to T() unless an initial value is given.
///
/// The host must not touch the memory while a GPU kernel that may use it runs (undefined on
/// devices without concurrent managed access, a data race on the others): wait with
/// tle::synchronize() or Stream::synchronize() first (a no-op without a driver), or set
/// TLE_LAUNCH_BLOCKING=1 so that every GPU launch waits for its kernel. Driver failures throw
/// RuntimeError.
template <class T> class ManagedBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "ManagedBuffer<T> needs a trivially copyable T");

 public:
  using loc_t = std::source_location;

  /// An empty buffer (no allocation).
  ManagedBuffer() noexcept = default;
  /// Allocates n elements, each set to `init` (n = 0 allocates nothing).
  explicit ManagedBuffer(size_t n, T init = T(), loc_t loc = loc_t::current()) : size_(n) {
    if (n > SIZE_MAX / sizeof(T)) detail::buffer_error(loc, "ManagedBuffer: element count too large");
    if (n) ptr_ = static_cast<T*>(detail::buffer_alloc(n * sizeof(T), &on_host_));
    for (size_t i = 0; i < n; ++i) ptr_[i] = init;
  }
  ManagedBuffer(ManagedBuffer&& o) noexcept : ptr_(o.ptr_), size_(o.size_), on_host_(o.on_host_) {
    o.ptr_ = nullptr, o.size_ = 0;
  }
  ManagedBuffer& operator=(ManagedBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = o.ptr_, size_ = o.size_, on_host_ = o.on_host_;
      o.ptr_ = nullptr, o.size_ = 0;
    }
    return *this;
  }
  ManagedBuffer(const ManagedBuffer&) = delete;
  ManagedBuffer& operator=(const ManagedBuffer&) = delete;
  ~ManagedBuffer() { reset(); }

  /// Frees the allocation; the buffer becomes empty.
  void reset() noexcept {
    if (ptr_) detail::buffer_free(ptr_, on_host_);
    ptr_ = nullptr, size_ = 0;
  }
  /// True for CUDA managed memory (GPU launches take it), false for the host memory of a machine
  /// without a driver (CPU launches only). Meaningless for an empty buffer.
  bool managed() const noexcept { return !on_host_; }

  size_t size() const noexcept { return size_; }
  size_t bytes() const noexcept { return size_ * sizeof(T); }
  bool empty() const noexcept { return size_ == 0; }
  /// The address, valid on the host and the GPU (null when empty).
  T* data() const noexcept { return ptr_; }
  T& operator[](size_t i) const noexcept { return ptr_[i]; }
  T* begin() const noexcept { return ptr_; }
  T* end() const noexcept { return ptr_ + size_; }

 private:
  T* ptr_ = nullptr;
  size_t size_ = 0;
  bool on_host_ = false;
};

}  // namespace tle
