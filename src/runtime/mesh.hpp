// src/runtime/mesh.hpp - what a kernel launch needs from the device mesh (tle/mesh.hpp): the rank
// the launching thread runs as inside Mesh::run. Internal to libtle.
#pragma once
#include <cstdint>

#include "tle/device.hpp"

namespace tle::detail {

/// The rank a thread runs as inside Mesh::run: the values of a mesh kernel's hidden arguments
/// (ir::MeshArg) and the launch defaults (backend, stream).
struct MeshRankContext {
  int rank = 0;
  int size = 1;
  uint64_t stride = 0;        ///< bytes between two ranks' copies of a symmetric buffer
  void* scratch = nullptr;    ///< this rank's mesh scratch (distributed_barrier's counters)
  const char* local_base = nullptr;  ///< this rank's symmetric memory: [local_base, local_base + stride)
  int64_t timeout_ns = 0;     ///< signal_wait's limit
  int64_t barrier_programs = 0;  ///< programs distributed_barrier has counters for (kMeshBarrierPrograms)
  Backend backend = Backend::CPU;
  void* stream = nullptr;     ///< GPU: the rank's CUstream
};

/// The calling thread's rank, or null outside Mesh::run.
const MeshRankContext* current_mesh_rank() noexcept;

}  // namespace tle::detail
