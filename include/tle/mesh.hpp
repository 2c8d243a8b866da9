// tle/mesh.hpp - a device mesh: several ranks (GPUs, or simulated ranks on the CPU) running one
// kernel each, with symmetric memory they all address and flags to order their accesses
// (FlagTree TLE-Lite's device_mesh / shard_id / remote / signal / signal_wait /
// distributed_barrier, notes 2.6; NVSHMEM's symmetric heap and signal operations). docs/mesh.md.
//
//   tle::Mesh mesh = tle::Mesh::gpus({0, 1});                 // or Mesh::cpu(4): simulated ranks
//   auto x = mesh.alloc_symmetric<float>(ranks * n);            // a copy on every rank, zero-filled
//   auto flags = mesh.alloc_symmetric<uint64_t>(ranks);
//   auto gather = tle::jit("gather", [](tle::Ptr<float> x, tle::Ptr<uint64_t> flags, tle::Tile<int> n) {
//     Tile<int32_t> me = tle::shard_id();
//     Tile<int32_t> offs = arange(0, 1024);
//     Tile<float> mine = load(x + me * n + offs, offs < n);
//     for (auto q : range(0, tle::num_shards())) {
//       store(tle::remote(x, q) + me * n + offs, mine, offs < n);  // into rank q's copy
//       tle::signal(flags + me, 1, q);                              // after the store, on rank q
//     }
//     for (auto q : range(0, tle::num_shards())) tle::signal_wait(flags + q, 1);
//   });
//   mesh.run([&](tle::Rank& r) {                                  // one thread per rank
//     gather(tle::Grid(1), r.local(x), r.local(flags), n);        // on the rank's device and stream
//   });
//
// Symmetric memory: every rank's copy of every symmetric buffer lives in one address range, rank
// r's copies at a fixed distance (the mesh's stride) from rank 0's, mapped into every rank's
// device (CUDA virtual memory management: cuMemCreate per rank, cuMemMap, cuMemSetAccess for
// all the mesh's devices; host memory for Mesh::cpu). So `remote(p, q)` is p moved by (q - me)
// strides: it works for any pointer into a symmetric buffer (element offsets included) and for
// no other pointer. The kernel learns its rank, the rank count and the stride from hidden
// arguments tle adds and fills at each launch (docs/ir.md, "Mesh arguments"); a kernel that uses
// a mesh primitive must be launched inside Mesh::run (UserError otherwise).
//
// Ordering: a program's signal happens after every memory access the program made before it and
// is seen on the target rank with release semantics at system scope; a signal_wait that returns
// has acquire semantics, so the program's later accesses see what the signaller wrote before
// signalling (PTX ISA 8.4 memory consistency model: fence.acq_rel.sys, ld.acquire.sys; the CPU:
// C++ release/acquire atomics). Plain loads and stores to remote memory are not atomic and not
// ordered among themselves: order them with signals.
//
// Waits that can never complete (a rank that is not launched, died, or waits itself) end after the
// mesh's timeout (MeshOptions::timeout_s): on the CPU the program stops and the launch throws
// RuntimeError naming the flag; on the GPU the program executes `trap`, the launch's context
// fails (CUDA_ERROR_LAUNCH_FAILED or ILLEGAL_INSTRUCTION) and Mesh::run throws RuntimeError.
//
// Programs: on the GPU the ranks' programs run concurrently; a program may wait only for programs
// that are resident at the same time (keep grids within one wave when programs wait for each
// other, as with any persistent kernel). On the CPU each rank runs its programs one after another,
// in program-id order, on its own thread (not the thread pool, whose launches are serialized), so
// a program may wait for the same or a lower program id of another rank.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <source_location>
#include <utility>
#include <vector>

#include "tle/device.hpp"
#include "tle/kernel.hpp"
#include "tle/tile.hpp"

namespace tle {

struct MeshOptions;
class Rank;
namespace detail {
struct MeshState;  // src/runtime/mesh.cpp
/// The counters of distributed_barrier in each rank's mesh scratch: two per program id, so a
/// kernel that calls it may launch at most this many programs (UserError at the launch).
inline constexpr int64_t kMeshBarrierPrograms = 65536;

// Kernel side (src/frontend/trace_mesh.cpp).
V mesh_arg(ir::MeshArg which, const SrcLoc& loc);
void mesh_note_remote(V p, const SrcLoc& loc);
void mesh_signal(V flag, V value, ir::SignalOp op, const SrcLoc& loc);
void mesh_signal_wait(V flag, V value, ir::WaitCmp cmp, const SrcLoc& loc);

// Host side (src/runtime/mesh.cpp).
std::shared_ptr<MeshState> mesh_create(Backend backend, const std::vector<int>& devices, const MeshOptions& options,
                                       const SrcLoc& loc);
int mesh_size(const MeshState& m) noexcept;
Backend mesh_backend(const MeshState& m) noexcept;
int mesh_device(const MeshState& m, int rank) noexcept;
uint64_t mesh_stride(const MeshState& m) noexcept;
/// A zero-filled range of `bytes` at the same offset in every rank's copy; UserError at loc when
/// the mesh's symmetric address space is full.
uint64_t mesh_alloc(MeshState& m, uint64_t bytes, const SrcLoc& loc);
void mesh_free(MeshState& m, uint64_t offset, uint64_t bytes) noexcept;
/// Rank `rank`'s copy of the range at `offset`.
void* mesh_address(const MeshState& m, int rank, uint64_t offset) noexcept;
/// Synchronous copy between host memory and a rank's copy (either direction).
void mesh_copy(const MeshState& m, int rank, void* dst, const void* src, uint64_t bytes);
void mesh_run(const std::shared_ptr<MeshState>& m, const std::function<void(Rank&)>& fn, const SrcLoc& loc);
// Rank's stream-ordered operations (GPU: on `stream`; CPU: at once).
void mesh_put_signal(const MeshState& m, void* stream, void* dst, const void* src, uint64_t bytes, uint64_t* flag,
                     uint64_t value);
void mesh_wait_signal(const MeshState& m, const uint64_t* flag, uint64_t value);  // CPU meshes
void mesh_order(const MeshState& m, void* earlier, void* later);
}  // namespace detail

// ================================================================= kernel side

/// This program's rank in the mesh that launched it: 0 .. num_shards() - 1 (an i32 scalar).
/// FlagTree's shard_id(mesh, "device"). The kernel must be launched inside Mesh::run.
inline Tile<int32_t> shard_id(loc_t l = loc_t::current()) {
  return Tile<int32_t>(detail::mesh_arg(ir::MeshArg::ShardId, l));
}
/// The number of ranks in the mesh (an i32 scalar).
inline Tile<int32_t> num_shards(loc_t l = loc_t::current()) {
  return Tile<int32_t>(detail::mesh_arg(ir::MeshArg::NumShards, l));
}

/// The pointers p (into symmetric buffers of this rank, from Rank::local) moved to rank `rank`'s
/// copies: loads, stores and atomics through them reach that rank's memory (NVLink or PCIe peer
/// access on the GPU). Same shape as p; rank is a scalar (or a tile of p's shape), 0 ..
/// num_shards() - 1 - a rank outside it addresses memory that is no rank's (a fault, or another
/// symmetric buffer). The kernel arguments p derives from must point into the launching rank's
/// symmetric memory (Rank::local of a SymmetricBuffer): the launch checks them, a loop-carried
/// pointer with every argument the loop assigns to it (UserError naming this line otherwise); a
/// pointer derived from a gpu::alloc buffer, or of an origin tle cannot follow, is a UserError at
/// this line when the trace ends. FlagTree's remote(t, shard_id, space="device").
template <class T> Ptr<T> remote(const Ptr<T>& p, Operand<int32_t> rank, loc_t l = loc_t::current()) {
  detail::require_value(p.value(), l);
  detail::mesh_note_remote(p.value(), l);  // the launch checks the pointer arguments it derives from
  Tile<int64_t> stride(detail::mesh_arg(ir::MeshArg::Stride, l));
  Tile<int64_t> ranks = cast<int64_t>(Tile<int32_t>(rank.v), l) - cast<int64_t>(shard_id(l), l);
  return p + ranks * (stride / int64_t{byte_size(detail::dtype_of<T>::value)});
}

/// Signals rank `rank`: sets its copy of *flag to value (SignalOp::Set) or adds value to it
/// (SignalOp::Add, atomically), after every memory access this program made before (release at
/// system scope). flag is one pointer (scalar) into a symmetric buffer of uint64_t. One access per
/// program, not per element; not inside a combine function or a warp_specialize role (UserError).
/// NVSHMEM's nvshmemx_signal_op; FlagTree's signal.
inline void signal(const Ptr<uint64_t>& flag, Operand<uint64_t> value, Operand<int32_t> rank,
                   ir::SignalOp op = ir::SignalOp::Set, loc_t l = loc_t::current()) {
  detail::require_value(flag.value(), l);
  detail::mesh_signal(remote(flag, rank, l).value(), value.v, op, l);
}

/// Waits until this rank's *flag >= value (WaitCmp::Ge) or == value (WaitCmp::Eq); the program's
/// later accesses then see everything the signallers wrote before their signals (acquire at
/// system scope). flag is one pointer into a symmetric buffer of uint64_t. A wait longer than the
/// mesh's timeout stops the program with an error (see the top of this file). Same restrictions
/// as signal. NVSHMEM's nvshmem_signal_wait_until; FlagTree's signal_wait.
inline void signal_wait(const Ptr<uint64_t>& flag, Operand<uint64_t> value, ir::WaitCmp cmp = ir::WaitCmp::Ge,
                        loc_t l = loc_t::current()) {
  detail::require_value(flag.value(), l);
  detail::mesh_signal_wait(flag.value(), value.v, cmp, l);
}

/// A barrier of the programs with this program's id on every rank: none continues until all of
/// them arrived, and each then sees what the others wrote before arriving. Every rank must launch
/// the kernel with the same grid and each program call it the same number of times (a mismatch
/// waits until the timeout). At most detail::kMeshBarrierPrograms programs per launch. Written in
/// tle: per program id, a generation count and an arrival counter in the mesh scratch; each
/// program adds 1 to every rank's arrival counter and waits for generation x ranks arrivals.
inline void distributed_barrier(loc_t l = loc_t::current()) {
  Ptr<uint64_t> scratch(detail::mesh_arg(ir::MeshArg::Scratch, l));
  Tile<int64_t> pid = cast<int64_t>(program_id(0, l), l) +
                      cast<int64_t>(num_programs(0, l), l) *
                          (cast<int64_t>(program_id(1, l), l) +
                           cast<int64_t>(num_programs(1, l), l) * cast<int64_t>(program_id(2, l), l));
  Ptr<uint64_t> generation = scratch + pid * int64_t{2};
  Ptr<uint64_t> arrived = generation + 1;
  Tile<uint64_t> g = load(generation, l) + uint64_t{1};
  store(generation, g, l);
  Tile<int32_t> ranks = num_shards(l);
  for (auto q : range(0, ranks, 1, l)) signal(arrived, uint64_t{1}, q, ir::SignalOp::Add, l);
  signal_wait(arrived, g * cast<uint64_t>(ranks, l), ir::WaitCmp::Ge, l);
}

// ================================================================= host side

/// Options of a Mesh.
struct MeshOptions {
  /// Address space each rank reserves for its copies of symmetric buffers, in bytes (a multiple
  /// of the allocation granularity: 2 MiB on the GPU, 64 KiB on the CPU; rounded up). Only what
  /// is allocated is backed by memory. 0: 64 GiB on the GPU, 4 GiB on the CPU.
  uint64_t symmetric_bytes = 0;
  /// How long one signal_wait may wait before its program stops with an error, in seconds.
  /// 0: $TLE_MESH_TIMEOUT (seconds) if set, else 100.
  double timeout_s = 0;
};

/// Rank r's copy of a symmetric buffer of n elements of T (zero-filled when allocated). Move-only;
/// freed (on every rank) by the destructor, which must not run while a kernel uses it.
template <class T> class SymmetricBuffer {
 public:
  SymmetricBuffer() = default;
  SymmetricBuffer(SymmetricBuffer&& o) noexcept { *this = std::move(o); }
  SymmetricBuffer& operator=(SymmetricBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      mesh_ = std::move(o.mesh_), offset_ = o.offset_, size_ = o.size_;
      o.size_ = 0;
    }
    return *this;
  }
  SymmetricBuffer(const SymmetricBuffer&) = delete;
  SymmetricBuffer& operator=(const SymmetricBuffer&) = delete;
  ~SymmetricBuffer() { reset(); }

  /// Number of elements of each rank's copy.
  size_t size() const noexcept { return size_; }
  /// Rank `rank`'s copy (an address every rank's kernels may use; on the GPU a device address).
  /// UserError at the caller's line for a rank outside the mesh.
  T* local(int rank, loc_t l = loc_t::current()) const {
    check_rank(rank, l);
    return static_cast<T*>(detail::mesh_address(*mesh_, rank, offset_));
  }
  /// Copies n elements (n must equal size()) from host memory into rank `rank`'s copy. Synchronous.
  void copy_from_host(int rank, const T* src, size_t n, loc_t l = loc_t::current()) {
    check(rank, n, "copy_from_host", l);
    detail::mesh_copy(*mesh_, rank, local(rank, l), src, n * sizeof(T));
  }
  /// Copies rank `rank`'s copy (n elements, n == size()) into host memory. Synchronous: in the
  /// rank's device context, ordered after the work on its legacy default stream only - not after
  /// the rank's own (non-blocking) stream, which Mesh::run synchronizes before it returns; inside
  /// run, synchronize r.stream() first.
  void copy_to_host(int rank, T* dst, size_t n, loc_t l = loc_t::current()) const {
    check(rank, n, "copy_to_host", l);
    detail::mesh_copy(*mesh_, rank, dst, local(rank, l), n * sizeof(T));
  }

 private:
  friend class Mesh;
  SymmetricBuffer(std::shared_ptr<detail::MeshState> m, uint64_t offset, size_t n)
      : mesh_(std::move(m)), offset_(offset), size_(n) {}
  void reset() noexcept {
    if (mesh_ && size_) detail::mesh_free(*mesh_, offset_, size_ * sizeof(T));
    mesh_.reset();
    size_ = 0;
  }
  void check_rank(int rank, loc_t l) const {
    if (!mesh_) throw UserError(SrcLoc(l), "SymmetricBuffer: the buffer is empty (moved from, or default-constructed)");
    if (rank < 0 || rank >= detail::mesh_size(*mesh_))
      throw UserError(SrcLoc(l), "SymmetricBuffer: rank " + std::to_string(rank) + " is not in the mesh of " +
                                             std::to_string(detail::mesh_size(*mesh_)) + " ranks");
  }
  void check(int rank, size_t n, const char* what, loc_t l) const {
    check_rank(rank, l);
    if (n != size_)
      throw UserError(SrcLoc(l), std::string("SymmetricBuffer::") + what + ": " + std::to_string(n) +
                                             " elements given for a buffer of " + std::to_string(size_));
  }
  std::shared_ptr<detail::MeshState> mesh_;
  uint64_t offset_ = 0;
  size_t size_ = 0;
};

/// The ranks of a mesh and their symmetric memory. Cheap to copy (copies share the mesh).
class Mesh {
 public:
  /// `ranks` simulated ranks on the CPU backend, in this process (1 to 64): symmetric memory is
  /// host memory, each rank runs on its own thread. For tests and for the semantics without GPUs.
  static Mesh cpu(int ranks, MeshOptions options = {}, loc_t l = loc_t::current()) {
    if (ranks < 1 || ranks > 64)
      throw UserError(SrcLoc(l), "Mesh::cpu: a mesh has 1 to 64 ranks, not " + std::to_string(ranks));
    return Mesh(detail::mesh_create(Backend::CPU, std::vector<int>(static_cast<size_t>(ranks), -1), options, SrcLoc(l)));
  }
  /// One rank per entry of `devices` (CUDA device ordinals), driven by this process with a thread
  /// per rank in each device's primary context. An ordinal may repeat (several ranks on one GPU,
  /// each with its own stream: for tests on one GPU). Throws UserError for an empty list or an
  /// ordinal that is not a device, RuntimeError when there is no driver or two devices cannot
  /// access each other's memory (cuDeviceCanAccessPeer) or lack native atomics on it
  /// (cuDeviceGetP2PAttribute), naming them.
  static Mesh gpus(const std::vector<int>& devices, MeshOptions options = {}, loc_t l = loc_t::current()) {
    return Mesh(detail::mesh_create(Backend::GPU, devices, options, SrcLoc(l)));
  }

  /// Number of ranks.
  int size() const noexcept { return detail::mesh_size(*s_); }
  /// Backend::CPU for Mesh::cpu, Backend::GPU for Mesh::gpus.
  Backend backend() const noexcept { return detail::mesh_backend(*s_); }
  /// The CUDA device of rank `rank` (-1 on the CPU).
  int device(int rank) const noexcept { return detail::mesh_device(*s_, rank); }
  /// Bytes from a rank's copy of a symmetric buffer to the next rank's (remote()'s step).
  uint64_t stride() const noexcept { return detail::mesh_stride(*s_); }

  /// n elements of T on every rank, zero-filled, at the same offset in each rank's symmetric
  /// memory. UserError at the caller's line when the mesh's address space
  /// (MeshOptions::symmetric_bytes) cannot hold it; RuntimeError when the driver fails.
  template <class T> SymmetricBuffer<T> alloc_symmetric(size_t n, loc_t l = loc_t::current()) {
    if (n > (uint64_t(1) << 62) / sizeof(T))
      throw UserError(SrcLoc(l), "alloc_symmetric: " + std::to_string(n) + " elements is too large");
    return SymmetricBuffer<T>(s_, n ? detail::mesh_alloc(*s_, n * sizeof(T), SrcLoc(l)) : 0, n);
  }

  /// Runs fn(rank) once per rank, each on its own thread, and waits for all. On a rank's thread,
  /// tile-kernel launches run as that rank: mesh primitives read its rank, a launch with no
  /// backend chosen runs on the mesh's backend, and a GPU launch with no stream goes on the rank's
  /// stream (Rank::stream) in its device's context. After fn returns, the rank's stream is
  /// synchronized. If ranks throw, the other ranks still finish (or time out) and run rethrows the
  /// lowest rank's exception.
  /// Calling run on a rank's thread (inside another run) is a UserError at the caller's line.
  void run(const std::function<void(Rank&)>& fn, loc_t l = loc_t::current()) const {
    detail::mesh_run(s_, fn, SrcLoc(l));
  }
  /// Whether r is a rank of this mesh (of a copy of this Mesh object).
  bool owns(const Rank& r) const noexcept;

 private:
  explicit Mesh(std::shared_ptr<detail::MeshState> s) : s_(std::move(s)) {}
  std::shared_ptr<detail::MeshState> s_;
};

/// One rank inside Mesh::run.
class Rank {
 public:
  /// This rank's index, 0 .. size() - 1 (what shard_id() returns in its kernels).
  int id() const noexcept { return id_; }
  /// Number of ranks.
  int size() const noexcept { return size_; }
  /// The rank's CUDA device (-1 on the CPU).
  int device() const noexcept { return device_; }
  /// The rank's stream (GPU: a non-blocking stream of its own, where launches without .on() go;
  /// the CPU: the null stream, which CPU launches ignore).
  const Stream& stream() const noexcept { return *stream_; }
  /// This rank's copy of a symmetric buffer.
  template <class T> T* local(const SymmetricBuffer<T>& b, loc_t l = loc_t::current()) const { return b.local(id_, l); }

  // Stream-ordered operations for host code (NVSHMEM's *_on_stream): on the GPU they are queued on
  // `stream` (null: this rank's stream) and return; on the CPU they happen before returning.
  // Pointers may be any rank's symmetric memory (SymmetricBuffer::local of another rank).

  /// Copies `bytes` from src to dst, then sets *flag = value once the copy has landed (the copy
  /// engine: cuMemcpyAsync, then cuStreamWriteValue64, whose default form fences the copy's
  /// writes before the flag's). NVSHMEM's nvshmemx_putmem_signal_on_stream. A kernel waiting on
  /// the flag with signal_wait then reads the data.
  void put_signal(void* dst, const void* src, uint64_t bytes, uint64_t* flag, uint64_t value,
                  const Stream* stream = nullptr) const {
    detail::mesh_put_signal(*mesh_, handle(stream), dst, src, bytes, flag, value);
  }
  /// Sets *flag = value after the work queued before on the stream (cuStreamWriteValue64).
  void signal(uint64_t* flag, uint64_t value, const Stream* stream = nullptr) const {
    detail::mesh_put_signal(*mesh_, handle(stream), nullptr, nullptr, 0, flag, value);
  }
  /// Work queued later on the stream starts once *flag >= value. GPU: a one-warp kernel that
  /// waits with signal_wait (so the mesh's timeout applies: a stream memop wait,
  /// cuStreamWaitValue64, would wait forever for a rank that failed). CPU: waits here, until the
  /// timeout (then RuntimeError naming the flag).
  void wait_signal(const uint64_t* flag, uint64_t value, const Stream* stream = nullptr) const {
    if (device_ < 0) {
      detail::mesh_wait_signal(*mesh_, flag, value);
      return;
    }
    static auto wait = jit("mesh_wait_signal", [](Ptr<uint64_t> f, Tile<uint64_t> v) { tle::signal_wait(f, v); },
                           {.do_not_specialize = {0, 1}});
    wait(Grid(1).with_warps(1).on_stream(handle(stream)), const_cast<uint64_t*>(flag), value);
  }
  /// Work queued later on `later` starts after the work queued so far on `earlier` (an event).
  void order(const Stream& earlier, const Stream& later) const {
    detail::mesh_order(*mesh_, earlier.handle(), later.handle());
  }

  Rank(const detail::MeshState* mesh, int id, int size, int device, const Stream* stream)
      : mesh_(mesh), id_(id), size_(size), device_(device), stream_(stream) {}

 private:
  friend class Mesh;
  void* handle(const Stream* s) const noexcept { return (s ? s : stream_)->handle(); }
  const detail::MeshState* mesh_;
  int id_, size_, device_;
  const Stream* stream_;
};

inline bool Mesh::owns(const Rank& r) const noexcept { return r.mesh_ == s_.get(); }

}  // namespace tle
