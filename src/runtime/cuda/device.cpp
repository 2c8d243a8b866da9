// src/runtime/cuda/device.cpp - tle/device.hpp: backend choice, device facts, streams, memory.
#include <fmt/format.h>

#include <cstdlib>
#include <new>

#include "runtime/cuda/driver.hpp"
#include "tle/device.hpp"

namespace tle {

using cuda::check;
using cuda::require_driver;

const char* backend_name(Backend b) { return b == Backend::GPU ? "gpu" : b == Backend::Interp ? "interp" : "cpu"; }

Backend default_backend() {
  return cuda::select_backend(std::getenv("TLE_BACKEND"), cuda::driver() != nullptr, cuda::driver_error());
}

std::optional<DeviceInfo> gpu_info(int ordinal) {
  const cuda::Driver* d = cuda::driver();
  if (!d || ordinal < 0 || ordinal >= d->device_count) return std::nullopt;
  CUdevice dev = 0;
  check(d->cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    check(d->cuDeviceGetAttribute(&v, a, dev), "cuDeviceGetAttribute");
    return v;
  };
  DeviceInfo info;
  char name[256] = {};
  check(d->cuDeviceGetName(name, sizeof name - 1, dev), "cuDeviceGetName");
  info.name = name;
  info.ordinal = ordinal;
  info.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  info.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info.sm = info.cc_major * 10 + info.cc_minor;
  info.num_sms = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info.shared_mem_per_block = static_cast<size_t>(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK));
  info.shared_mem_per_block_optin = static_cast<size_t>(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
  info.shared_mem_per_sm = static_cast<size_t>(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR));
  info.regs_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
  info.max_threads_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  info.warp_size = attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  info.l2_cache_bytes = static_cast<size_t>(attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE));
  info.cluster_launch = attr(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH) != 0;
  size_t total = 0;
  check(d->cuDeviceTotalMem(&total, dev), "cuDeviceTotalMem");
  info.total_memory_bytes = total;
  info.driver_version = d->version;
  return info;
}

void synchronize() {
  const cuda::Driver* d = cuda::driver();
  if (!d) return;
  CUcontext cur = nullptr;
  check(d->cuCtxGetCurrent(&cur), "cuCtxGetCurrent");
  if (!cur) {
    // Nothing of tle's can be pending unless it has set up the primary context (on some thread).
    if (!cuda::retained_primary_context()) return;
    cuda::ensure_context();
  }
  check(d->cuCtxSynchronize(), "cuCtxSynchronize");
}

// ---- Stream

Stream::Stream(bool non_blocking) : owned_(true) {
  const cuda::Driver& d = require_driver("cuStreamCreate");
  cuda::ensure_context();
  CUstream s = nullptr;
  check(d.cuStreamCreate(&s, non_blocking ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT), "cuStreamCreate");
  stream_ = s;
}

Stream Stream::wrap(void* cu_stream) noexcept { return Stream(Borrow{}, cu_stream); }

Stream::Stream(Stream&& o) noexcept : stream_(o.stream_), owned_(o.owned_) {
  o.stream_ = nullptr;
  o.owned_ = false;
}

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    release();
    stream_ = o.stream_, owned_ = o.owned_;
    o.stream_ = nullptr, o.owned_ = false;
  }
  return *this;
}

Stream::~Stream() { release(); }

void Stream::release() noexcept {
  // Destroying a stream with queued work is allowed: the driver frees it once the work is done.
  if (owned_ && stream_)
    if (const cuda::Driver* d = cuda::driver()) d->cuStreamDestroy(static_cast<CUstream>(stream_));
  stream_ = nullptr;
  owned_ = false;
}

void Stream::synchronize() const {
  const cuda::Driver& d = require_driver("cuStreamSynchronize");
  cuda::ensure_context();
  check(d.cuStreamSynchronize(static_cast<CUstream>(stream_)), "cuStreamSynchronize");
}

// ---- CUDA graphs

void CudaGraph::begin(const Stream& stream, CaptureMode mode, const std::source_location& loc) {
  if (!stream.handle())
    throw UserError(loc, "CudaGraph::capture: the legacy default stream (null) cannot be captured; capture a "
                         "tle::Stream you created (or one wrapped with Stream::wrap)");
  const cuda::Driver& d = require_driver("cuStreamBeginCapture");
  cuda::ensure_context();
  const CUstreamCaptureMode m = mode == CaptureMode::Global        ? CU_STREAM_CAPTURE_MODE_GLOBAL
                                : mode == CaptureMode::ThreadLocal ? CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
                                                                   : CU_STREAM_CAPTURE_MODE_RELAXED;
  check(d.cuStreamBeginCapture(static_cast<CUstream>(stream.handle()), m), "cuStreamBeginCapture");
}

void CudaGraph::end(const Stream& stream) {
  const cuda::Driver& d = require_driver("cuStreamEndCapture");
  CUgraph graph = nullptr;
  check(d.cuStreamEndCapture(static_cast<CUstream>(stream.handle()), &graph), "cuStreamEndCapture");
  graph_ = graph;
  CUgraphExec exec = nullptr;
  check(d.cuGraphInstantiate(&exec, graph, 0), "cuGraphInstantiate");
  exec_ = exec;
}

void CudaGraph::abandon(const Stream& stream) noexcept {
  if (const cuda::Driver* d = cuda::driver()) {
    CUgraph graph = nullptr;
    if (d->cuStreamEndCapture(static_cast<CUstream>(stream.handle()), &graph) == CUDA_SUCCESS && graph)
      d->cuGraphDestroy(graph);
  }
}

void CudaGraph::launch(const Stream& stream) const {
  const cuda::Driver& d = require_driver("cuGraphLaunch");
  if (!exec_) throw RuntimeError("cuGraphLaunch", "the CudaGraph was moved from");
  check(d.cuGraphLaunch(static_cast<CUgraphExec>(exec_), static_cast<CUstream>(stream.handle())), "cuGraphLaunch");
}

CudaGraph& CudaGraph::operator=(CudaGraph&& o) noexcept {
  if (this != &o) {
    this->~CudaGraph();
    graph_ = o.graph_, exec_ = o.exec_;
    o.graph_ = o.exec_ = nullptr;
  }
  return *this;
}

CudaGraph::~CudaGraph() {
  if (const cuda::Driver* d = cuda::driver()) {
    if (exec_) d->cuGraphExecDestroy(static_cast<CUgraphExec>(exec_));
    if (graph_) d->cuGraphDestroy(static_cast<CUgraph>(graph_));
  }
  graph_ = exec_ = nullptr;
}

// ---- device memory

namespace detail {

uint64_t device_alloc(size_t bytes) {
  const cuda::Driver& d = require_driver("cuMemAlloc");
  cuda::ensure_context();
  CUdeviceptr p = 0;
  CUresult r = d.cuMemAlloc(&p, bytes);
  if (r != CUDA_SUCCESS)
    throw RuntimeError("cuMemAlloc", fmt::format("{}: {} (allocating {} bytes)", cuda::error_name(r),
                                                 cuda::error_string(r), bytes));
  return static_cast<uint64_t>(p);
}

void device_free(uint64_t ptr) noexcept {
  const cuda::Driver* d = cuda::driver();
  if (!d || !ptr) return;
  try {
    cuda::ensure_context();
  } catch (...) {
    return;  // no context can be made current: the allocation went with its context
  }
  d->cuMemFree(static_cast<CUdeviceptr>(ptr));  // a failure here (context torn down) is not reportable
}

void* managed_alloc(size_t bytes) {
  const cuda::Driver& d = require_driver("cuMemAllocManaged");
  cuda::ensure_context();
  CUdeviceptr p = 0;
  CUresult r = d.cuMemAllocManaged(&p, bytes, CU_MEM_ATTACH_GLOBAL);
  if (r != CUDA_SUCCESS)
    throw RuntimeError("cuMemAllocManaged", fmt::format("{}: {} (allocating {} bytes of managed memory)",
                                                        cuda::error_name(r), cuda::error_string(r), bytes));
  return reinterpret_cast<void*>(static_cast<uintptr_t>(p));
}

void managed_free(void* ptr) noexcept { device_free(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(ptr))); }

bool has_gpu_driver() noexcept { return cuda::driver() != nullptr; }

constexpr std::align_val_t kHostBufferAlign{256};  // cuMemAlloc's alignment

void* buffer_alloc(size_t bytes, bool* on_host) {
  *on_host = !has_gpu_driver();
  if (!*on_host) return managed_alloc(bytes);
  return ::operator new(bytes, kHostBufferAlign);
}

void buffer_free(void* ptr, bool on_host) noexcept {
  if (!ptr) return;
  if (on_host) ::operator delete(ptr, kHostBufferAlign);
  else managed_free(ptr);
}

void copy_htod(uint64_t dst, const void* src, size_t bytes) {
  const cuda::Driver& d = require_driver("cuMemcpyHtoD");
  cuda::ensure_context();
  check(d.cuMemcpyHtoD(static_cast<CUdeviceptr>(dst), src, bytes), "cuMemcpyHtoD");
}

void copy_dtoh(void* dst, uint64_t src, size_t bytes) {
  const cuda::Driver& d = require_driver("cuMemcpyDtoH");
  cuda::ensure_context();
  check(d.cuMemcpyDtoH(dst, static_cast<CUdeviceptr>(src), bytes), "cuMemcpyDtoH");
}

void copy_dtod(uint64_t dst, uint64_t src, size_t bytes) {
  const cuda::Driver& d = require_driver("cuMemcpyDtoD");
  cuda::ensure_context();
  check(d.cuMemcpyDtoD(static_cast<CUdeviceptr>(dst), static_cast<CUdeviceptr>(src), bytes), "cuMemcpyDtoD");
}

void memset_zero(uint64_t dst, size_t bytes) {
  const cuda::Driver& d = require_driver("cuMemsetD8");
  cuda::ensure_context();
  if (dst % 4 == 0 && bytes % 4 == 0)  // 32-bit stores when the range allows (allocations are 256-aligned)
    check(d.cuMemsetD32(static_cast<CUdeviceptr>(dst), 0, bytes / 4), "cuMemsetD32");
  else
    check(d.cuMemsetD8(static_cast<CUdeviceptr>(dst), 0, bytes), "cuMemsetD8");
}

void buffer_size_error(const std::source_location& loc, const char* op, size_t given, size_t size) {
  throw UserError(loc, fmt::format("DeviceBuffer::{}: {} elements given, but the buffer holds {}; the sizes must match",
                                   op, given, size));
}

void buffer_error(const std::source_location& loc, const char* message) { throw UserError(loc, message); }

}  // namespace detail
}  // namespace tle
