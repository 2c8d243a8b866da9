// src/runtime/mesh.cpp - tle/mesh.hpp's host side: mesh creation, symmetric memory, Mesh::run.
//
// Symmetric memory is one address range of size() x stride bytes: rank r's copies of all
// symmetric buffers at [base + r * stride, base + (r + 1) * stride), each buffer at the same
// offset in every rank's part, so that remote(p, q) = p + (q - me) * stride (tle/mesh.hpp). The
// first allocation of every mesh is its scratch (distributed_barrier's counters). GPU: the range
// is reserved with cuMemAddressReserve; an allocation creates one physical allocation per rank on
// that rank's device (cuMemCreate), maps it into the rank's part (cuMemMap) and grants every device
// of the mesh read / write access to it (cuMemSetAccess): CUDA Programming Guide, "Virtual Memory
// Management". CPU: the range is reserved PROT_NONE with mmap and allocations are mapped over it.
#include "runtime/mesh.hpp"

#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "runtime/cuda/driver.hpp"
#include "tle/mesh.hpp"

namespace tle::detail {

using cuda::check;

struct MeshState {
  Backend backend = Backend::CPU;
  std::vector<int> devices;            // per rank (-1 on the CPU)
  std::vector<CUcontext> contexts;     // per rank: its device's primary context (GPU)
  std::vector<int> distinct;           // the distinct devices (GPU)
  uint64_t stride = 0;
  uint64_t granularity = 0;
  char* base = nullptr;
  int64_t timeout_ns = 0;
  uint64_t scratch = 0;                // offset of the scratch
  std::mutex mu;
  std::map<uint64_t, uint64_t> free_ranges;                                 // offset -> bytes
  std::map<uint64_t, std::pair<uint64_t, std::vector<CUmemGenericAllocationHandle>>> live;  // offset -> (bytes, handles)

  int size() const { return static_cast<int>(devices.size()); }
  ~MeshState();
  uint64_t allocate(uint64_t bytes, const SrcLoc& loc);
  void release(uint64_t offset) noexcept {
    std::lock_guard<std::mutex> lk(mu);
    release_locked(offset);
  }
  void release_locked(uint64_t offset) noexcept;
};

namespace {

thread_local const MeshRankContext* t_rank = nullptr;

/// Makes ctx current on this thread for the guard's life (GPU meshes).
struct CtxGuard {
  const cuda::Driver* d = nullptr;
  CUcontext prev = nullptr;
  explicit CtxGuard(CUcontext ctx) {
    if (!ctx) return;
    d = &cuda::require_driver("cuCtxSetCurrent");
    check(d->cuCtxGetCurrent(&prev), "cuCtxGetCurrent");
    check(d->cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  }
  ~CtxGuard() {
    if (d) d->cuCtxSetCurrent(prev);
  }
};

const cuda::Driver& vmm_driver() {
  const cuda::Driver& d = cuda::require_driver("cuMemCreate");
  if (!d.cuMemAddressReserve || !d.cuMemCreate || !d.cuMemMap || !d.cuMemSetAccess || !d.cuMemUnmap ||
      !d.cuMemRelease || !d.cuMemAddressFree || !d.cuMemGetAllocationGranularity || !d.cuDeviceCanAccessPeer)
    throw RuntimeError("cuMemCreate", "the CUDA driver lacks the virtual memory management API that symmetric "
                                      "memory needs (cuMemCreate / cuMemMap / cuMemSetAccess, CUDA 10.2 and newer)");
  return d;
}

CUmemAllocationProp device_prop(int device) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = device;
  return p;
}

int64_t timeout_ns(const MeshOptions& o, const SrcLoc& loc) {
  double s = o.timeout_s;
  if (s == 0) {
    const char* e = std::getenv("TLE_MESH_TIMEOUT");
    s = 100;
    if (e && *e) {
      char* end = nullptr;
      s = std::strtod(e, &end);
      if (end == e || *end || !(s > 0))
        throw UserError(loc, fmt::format("TLE_MESH_TIMEOUT='{}' is not a positive number of seconds", e));
    }
  }
  if (!(s > 0) || s > 1e9)
    throw UserError(loc, fmt::format("MeshOptions::timeout_s = {} is not a number of seconds from 0 (the default) to "
                                     "1e9",
                                     s));
  return static_cast<int64_t>(s * 1e9);
}

}  // namespace

const MeshRankContext* current_mesh_rank() noexcept { return t_rank; }

MeshState::~MeshState() {
  // Kernels still running on the ranks (a run that ended in an error) must not see their memory
  // unmapped under them.
  if (const cuda::Driver* d = backend == Backend::GPU ? cuda::driver() : nullptr)
    for (CUcontext c : contexts) {
      CUcontext prev = nullptr;
      d->cuCtxGetCurrent(&prev);
      d->cuCtxSetCurrent(c);
      d->cuCtxSynchronize();
      d->cuCtxSetCurrent(prev);
    }
  while (!live.empty()) release_locked(live.begin()->first);
  if (!base) return;
  if (backend == Backend::CPU) {
    munmap(base, stride * devices.size());
    return;
  }
  const cuda::Driver* d = cuda::driver();
  if (!d) return;
  d->cuMemAddressFree(reinterpret_cast<CUdeviceptr>(base), stride * devices.size());
  // The primary contexts stay retained for the process's life (as ensure_context's): modules
  // loaded in them are cached per context, and a released context could come back destroyed
  // under the same handle.
}

uint64_t MeshState::allocate(uint64_t bytes, const SrcLoc& loc) {
  const uint64_t span = (bytes + granularity - 1) / granularity * granularity;
  std::lock_guard<std::mutex> lk(mu);
  auto it = std::find_if(free_ranges.begin(), free_ranges.end(), [&](auto& r) { return r.second >= span; });
  if (it == free_ranges.end()) {
    uint64_t free_bytes = 0;
    for (auto& [o, b] : free_ranges) free_bytes += b;
    throw UserError(loc, fmt::format("alloc_symmetric: {} bytes do not fit in the mesh's symmetric address space "
                                     "({} bytes per rank, {} free in pieces); create the mesh with a larger "
                                     "MeshOptions::symmetric_bytes",
                                     bytes, stride, free_bytes));
  }
  const uint64_t offset = it->first;
  const uint64_t rest = it->second - span;
  free_ranges.erase(it);
  if (rest) free_ranges[offset + span] = rest;
  std::vector<CUmemGenericAllocationHandle> handles;
  try {
    if (backend == Backend::CPU) {
      for (int r = 0; r < size(); ++r)
        if (mmap(base + r * stride + offset, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
                 0) == MAP_FAILED)
          throw RuntimeError("mmap", fmt::format("mapping {} bytes of symmetric memory failed: {}", span,
                                                 std::strerror(errno)));
    } else {
      const cuda::Driver& d = vmm_driver();
      std::vector<CUmemAccessDesc> access;
      for (int dev : distinct) {
        CUmemAccessDesc a{};
        a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        a.location.id = dev;
        a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        access.push_back(a);
      }
      for (int r = 0; r < size(); ++r) {
        CUmemAllocationProp prop = device_prop(devices[r]);
        CUmemGenericAllocationHandle h = 0;
        check(d.cuMemCreate(&h, span, &prop, 0), "cuMemCreate");
        handles.push_back(h);
        const CUdeviceptr at = reinterpret_cast<CUdeviceptr>(base + r * stride + offset);
        check(d.cuMemMap(at, span, 0, h, 0), "cuMemMap");
        check(d.cuMemSetAccess(at, span, access.data(), access.size()), "cuMemSetAccess");
        // Zero-fill on a private stream: a context-wide synchronize would wait for the mesh's
        // kernels (an allocation inside Mesh::run while they spin).
        CtxGuard g(contexts[r]);
        CUstream s = nullptr;
        check(d.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
        CUresult e = d.cuMemsetD8Async(at, 0, span, s);
        if (e == CUDA_SUCCESS) e = d.cuStreamSynchronize(s);
        d.cuStreamDestroy(s);
        check(e, "cuMemsetD8Async");
      }
    }
  } catch (...) {
    live[offset] = {span, std::move(handles)};
    release_locked(offset);
    throw;
  }
  live[offset] = {span, std::move(handles)};
  return offset;
}

void MeshState::release_locked(uint64_t offset) noexcept {
  auto it = live.find(offset);
  if (it == live.end()) return;
  const uint64_t span = it->second.first;
  if (backend == Backend::CPU) {
    for (int r = 0; r < this->size(); ++r)
      mmap(base + r * stride + offset, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  } else if (const cuda::Driver* d = cuda::driver()) {
    for (size_t r = 0; r < it->second.second.size(); ++r) {
      d->cuMemUnmap(reinterpret_cast<CUdeviceptr>(base + r * stride + offset), span);
      d->cuMemRelease(it->second.second[r]);
    }
  }
  live.erase(it);
  // Give the range back, merged with free neighbours.
  auto [at, inserted] = free_ranges.emplace(offset, span);
  if (auto next = std::next(at); next != free_ranges.end() && at->first + at->second == next->first) {
    at->second += next->second;
    free_ranges.erase(next);
  }
  if (at != free_ranges.begin()) {
    auto prev = std::prev(at);
    if (prev->first + prev->second == at->first) {
      prev->second += at->second;
      free_ranges.erase(at);
    }
  }
}

std::shared_ptr<MeshState> mesh_create(Backend backend, const std::vector<int>& devices, const MeshOptions& options,
                                       const SrcLoc& loc) {
  auto m = std::make_shared<MeshState>();
  m->backend = backend;
  m->devices = devices;
  m->timeout_ns = timeout_ns(options, loc);
  if (devices.empty() || devices.size() > 64)
    throw UserError(loc, fmt::format("Mesh::gpus: a mesh has 1 to 64 ranks, {} device ordinals given", devices.size()));
  const uint64_t n = devices.size();
  if (backend == Backend::CPU) {
    m->granularity = 64 * 1024;
  } else {
    const cuda::Driver& d = vmm_driver();
    for (int dev : devices) {
      if (dev < 0 || dev >= d.device_count)
        throw UserError(loc, fmt::format("Mesh::gpus: {} is not a CUDA device ordinal (this machine has {} device{})",
                                         dev, d.device_count, d.device_count == 1 ? "" : "s"));
      if (std::find(m->distinct.begin(), m->distinct.end(), dev) == m->distinct.end()) m->distinct.push_back(dev);
    }
    auto device = [&](int ordinal) {
      CUdevice h = 0;
      check(d.cuDeviceGet(&h, ordinal), "cuDeviceGet");
      return h;
    };
    for (int a : m->distinct)
      for (int b : m->distinct) {
        if (a == b) continue;
        int can = 0, atomics = 0;
        check(d.cuDeviceCanAccessPeer(&can, device(a), device(b)), "cuDeviceCanAccessPeer");
        if (!can)
          throw RuntimeError("cuDeviceCanAccessPeer", fmt::format("devices {} and {} of the mesh cannot access each "
                                                                  "other's memory (no NVLink or PCIe peer path), so "
                                                                  "they cannot share symmetric memory",
                                                                  a, b));
        // signal's adds and atomics through remote() must be atomic on the peer's memory.
        if (d.cuDeviceGetP2PAttribute)
          check(d.cuDeviceGetP2PAttribute(&atomics, CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, device(a),
                                          device(b)),
                "cuDeviceGetP2PAttribute");
        if (d.cuDeviceGetP2PAttribute && !atomics)
          throw RuntimeError("cuDeviceGetP2PAttribute", fmt::format("devices {} and {} of the mesh have no native "
                                                                    "atomics on each other's memory (a PCIe path "
                                                                    "without them), which signal's adds and remote "
                                                                    "atomics need",
                                                                    a, b));
      }
    for (int dev : m->distinct) {
      CUmemAllocationProp prop = device_prop(dev);
      size_t g = 0;
      check(d.cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
            "cuMemGetAllocationGranularity");
      m->granularity = std::max<uint64_t>(m->granularity, g);
    }
    std::map<int, CUcontext> ctx;
    for (int dev : m->distinct) {
      CUcontext c = nullptr;
      check(d.cuDevicePrimaryCtxRetain(&c, device(dev)), "cuDevicePrimaryCtxRetain");
      ctx[dev] = c;
    }
    for (int dev : devices) m->contexts.push_back(ctx[dev]);
  }
  const uint64_t want = options.symmetric_bytes ? options.symmetric_bytes
                        : backend == Backend::CPU ? uint64_t(4) << 30
                                                  : uint64_t(64) << 30;
  m->stride = (want + m->granularity - 1) / m->granularity * m->granularity;
  if (m->stride > (uint64_t(1) << 46) / n)
    throw UserError(loc, fmt::format("MeshOptions::symmetric_bytes = {} is too large for {} ranks", want, n));
  if (backend == Backend::CPU) {
    void* p = mmap(nullptr, m->stride * n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
      throw RuntimeError("mmap", fmt::format("reserving {} bytes of address space for symmetric memory failed: {}",
                                             m->stride * n, std::strerror(errno)));
    m->base = static_cast<char*>(p);
  } else {
    const cuda::Driver& d = vmm_driver();
    CtxGuard g(m->contexts.front());
    CUdeviceptr p = 0;
    check(d.cuMemAddressReserve(&p, m->stride * n, m->granularity, 0, 0), "cuMemAddressReserve");
    m->base = reinterpret_cast<char*>(p);
  }
  m->free_ranges[0] = m->stride;
  m->scratch = m->allocate(2 * sizeof(uint64_t) * kMeshBarrierPrograms, loc);
  return m;
}

int mesh_size(const MeshState& m) noexcept { return m.size(); }
Backend mesh_backend(const MeshState& m) noexcept { return m.backend; }
int mesh_device(const MeshState& m, int rank) noexcept {
  return rank >= 0 && rank < m.size() ? m.devices[static_cast<size_t>(rank)] : -1;
}
uint64_t mesh_stride(const MeshState& m) noexcept { return m.stride; }
uint64_t mesh_alloc(MeshState& m, uint64_t bytes, const SrcLoc& loc) { return m.allocate(bytes, loc); }
void mesh_free(MeshState& m, uint64_t offset, uint64_t) noexcept { m.release(offset); }
void* mesh_address(const MeshState& m, int rank, uint64_t offset) noexcept {
  return m.base + static_cast<uint64_t>(rank) * m.stride + offset;
}

void mesh_copy(const MeshState& m, int rank, void* dst, const void* src, uint64_t bytes) {
  if (!bytes) return;
  if (m.backend == Backend::CPU) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const cuda::Driver& d = cuda::require_driver("cuMemcpy");
  CtxGuard g(m.contexts[static_cast<size_t>(rank)]);
  check(d.cuMemcpy(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), bytes), "cuMemcpy");
}

void mesh_put_signal(const MeshState& m, void* stream, void* dst, const void* src, uint64_t bytes, uint64_t* flag,
                     uint64_t value) {
  if (m.backend == Backend::CPU) {
    if (bytes) std::memcpy(dst, src, bytes);
    std::atomic_ref<uint64_t>(*flag).store(value);
    return;
  }
  const cuda::Driver& d = cuda::require_driver("cuStreamWriteValue64");
  if (!d.cuStreamWriteValue64 || !d.cuMemcpyAsync)
    throw RuntimeError("cuStreamWriteValue64", "the CUDA driver lacks cuStreamWriteValue64 / cuMemcpyAsync");
  auto s = static_cast<CUstream>(stream);
  if (bytes)
    check(d.cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), bytes, s),
          "cuMemcpyAsync");
  check(d.cuStreamWriteValue64(s, reinterpret_cast<CUdeviceptr>(flag), value, CU_STREAM_WRITE_VALUE_DEFAULT),
        "cuStreamWriteValue64");
}

void mesh_wait_signal(const MeshState& m, const uint64_t* flag, uint64_t value) {
  std::atomic_ref<uint64_t> f(*const_cast<uint64_t*>(flag));
  const auto start = std::chrono::steady_clock::now();
  while (f.load(std::memory_order_acquire) < value) {
    std::this_thread::yield();
    if (std::chrono::steady_clock::now() - start > std::chrono::nanoseconds(m.timeout_ns))
      throw RuntimeError("Rank::wait_signal", fmt::format("timed out after {} s: the flag at {} holds {}, waiting "
                                                          "for >= {}",
                                                          static_cast<double>(m.timeout_ns) * 1e-9,
                                                          static_cast<const void*>(flag), f.load(), value));
  }
}

void mesh_order(const MeshState& m, void* earlier, void* later) {
  if (m.backend == Backend::CPU || earlier == later) return;
  const cuda::Driver& d = cuda::require_driver("cuEventRecord");
  if (!d.cuStreamWaitEvent) throw RuntimeError("cuStreamWaitEvent", "the CUDA driver lacks cuStreamWaitEvent");
  CUevent e = nullptr;
  check(d.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  CUresult r = d.cuEventRecord(e, static_cast<CUstream>(earlier));
  if (r == CUDA_SUCCESS) r = d.cuStreamWaitEvent(static_cast<CUstream>(later), e, 0);
  d.cuEventDestroy(e);  // released once the wait no longer needs it
  check(r, "cuStreamWaitEvent");
}

void mesh_run(const std::shared_ptr<MeshState>& m, const std::function<void(Rank&)>& fn, const SrcLoc& loc) {
  if (t_rank)
    throw UserError(loc, "Mesh::run inside Mesh::run: a rank's thread cannot run another mesh; call run from "
                              "the host thread that owns the mesh");
  const int n = m->size();
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        std::optional<CtxGuard> g;
        if (m->backend == Backend::GPU) g.emplace(m->contexts[static_cast<size_t>(r)]);
        Stream stream = m->backend == Backend::GPU ? Stream(/*non_blocking=*/true) : Stream::wrap(nullptr);
        MeshRankContext ctx;
        ctx.rank = r, ctx.size = n, ctx.stride = m->stride;
        ctx.scratch = mesh_address(*m, r, m->scratch);
        ctx.local_base = static_cast<const char*>(mesh_address(*m, r, 0));
        ctx.timeout_ns = m->timeout_ns;
        ctx.barrier_programs = kMeshBarrierPrograms;
        ctx.backend = m->backend;
        ctx.stream = stream.handle();
        Rank rank(m.get(), r, n, m->devices[static_cast<size_t>(r)], &stream);
        struct Scope {
          explicit Scope(const MeshRankContext* c) { t_rank = c; }
          ~Scope() { t_rank = nullptr; }
        } scope(&ctx);
        fn(rank);
        if (m->backend == Backend::GPU) stream.synchronize();
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
        // Kernels this rank queued may still run: wait for them (or their timeout) before the
        // caller can free what they use. Their error, if any, is already the one reported.
        if (m->backend == Backend::GPU)
          if (const cuda::Driver* d = cuda::driver()) d->cuCtxSynchronize();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (std::any_of(errors.begin(), errors.end(), [](auto& e) { return bool(e); })) {
    // A rank that failed left distributed_barrier's counters out of step with the others' (a
    // later barrier would wait forever on some ranks and pass early on others): start them over.
    // (A GPU context lost to a trap refuses the memset; every later launch there fails anyway.)
    for (int r = 0; r < n; ++r) {
      void* s = mesh_address(*m, r, m->scratch);
      if (m->backend == Backend::CPU) {
        std::memset(s, 0, 2 * sizeof(uint64_t) * kMeshBarrierPrograms);
      } else if (const cuda::Driver* d = cuda::driver()) {
        CUcontext prev = nullptr;
        d->cuCtxGetCurrent(&prev);
        d->cuCtxSetCurrent(m->contexts[static_cast<size_t>(r)]);
        if (d->cuMemsetD8(reinterpret_cast<CUdeviceptr>(s), 0, 2 * sizeof(uint64_t) * kMeshBarrierPrograms) ==
            CUDA_SUCCESS)
          d->cuCtxSynchronize();
        d->cuCtxSetCurrent(prev);
      }
    }
  }
  for (std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace tle::detail
