// src/runtime/launch.hpp - the launch checks shared by tile kernels (kernel.cpp) and raw CUDA
// kernels (src/runtime/raw/raw_kernel.cpp): argument packing against the parameter specs, DLPack
// devices, device pointers, grid limits. Internal to libtle.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tle/detail/trace_api.hpp"
#include "tle/device.hpp"

namespace tle::detail {

/// The checked arguments of one launch.
struct PreparedLaunch {
  std::vector<uint64_t> slots;  ///< one 8-byte slot per runtime argument (constexprs skipped)
  std::vector<uint64_t> key;    ///< specialization facts (tile kernels)
  std::vector<TraceParam> constexprs;  ///< constexpr values per parameter (tile kernels)
  std::vector<size_t> arg_slots;  ///< first slot of each kernel argument (tensor descriptors take several)
  std::vector<std::pair<size_t, size_t>> tensor_maps;  ///< (parameter, first slot) of each 128-byte tensor map
  Backend backend = Backend::CPU;  ///< the backend the launch runs on
  bool on_gpu = false;          ///< backend == Backend::GPU
  bool empty = false;           ///< a grid axis is 0: nothing to run (rule E08)
};

/// Packs and checks `args` against k's parameters (UserError at loc, as kernel_launch does),
/// picks the backend (opts.backend, else default_backend()), checks DLPack devices, that
/// pointers are device memory on the GPU and no DeviceBuffer goes to the CPU, and checks the grid
/// against CUDA's limits. The first half of kernel_launch; does not check num_warps.
PreparedLaunch prepare_launch(KernelState* k, const Grid3& grid, const LaunchOptions& opts, const HostArg* args,
                              size_t nargs, const SrcLoc& loc);

/// The GPU compiler's environment switches as they apply to the next compile ("ws 1 reorder 1 tma
/// 1": TLE_WARP_SPECIALIZE, TLE_REORDER_LOADS, TLE_TMA), for cache keys of things that depend on the
/// generated code (the autotuner's: a config tuned with TMA off is not the one with TMA on).
std::string gpu_compiler_switches();

/// Whether `stream` is being captured into a CUDA graph (cuStreamIsCapturing; false without a driver).
bool stream_capturing(void* stream);

/// TLE_LAUNCH_BLOCKING=1 (like CUDA_LAUNCH_BLOCKING; read once per process): synchronizes
/// `stream` after a GPU launch and throws RuntimeError("cuStreamSynchronize") with the CUDA error
/// and `what()` (the kernel, its launch line and shape) if the kernel or earlier work on the
/// stream failed. Does nothing when the variable is unset or "0", or while `stream` is being
/// captured into a CUDA graph (it runs nothing yet; a wait would invalidate the capture).
void sync_if_launch_blocking(void* stream, const std::function<std::string()>& what);

/// The autotuner's probe (src/runtime/autotune): while one is set on a thread, that thread's
/// tile-kernel launches run nothing. In Trace mode each launch checks its arguments, traces and
/// appends "<kernel signature>\n<traced IR>" to `ir` (what the tuning cache key hashes); in
/// Compile mode each launch compiles its specialization (cached as a launch would) and appends
/// its facts to `stats`. Launch errors throw as they would at a launch. Raw kernels
/// (tle::raw_kernel) are not probed: they run.
struct LaunchProbe {
  enum Mode { Trace, Compile } mode = Trace;
  std::string ir;
  std::vector<KernelStatsData> stats;
};
/// Sets this thread's probe (null: none); returns the previous one.
LaunchProbe* set_launch_probe(LaunchProbe* p) noexcept;

/// The disk-cache keys (src/runtime/disk_cache.hpp): the full text whose SHA-256 names an entry,
/// holding everything that determines the artifact. Both start with the artifact kind and the tle
/// version and build id (tle_build_version(): the release and a hash of libtle's sources) and the
/// LLVM version, so an entry written by another tle or LLVM is never read; the CPU key adds the host
/// target (triple, CPU, features), the GPU key the driver version, target, PTX ISA and compile
/// options. The printed tile IR comes last.
std::string tle_build_version();
std::string cpu_cache_key(const std::string& ir_text);
std::string gpu_cache_key(const std::string& ir_text, const std::string& target_cpu, int ptx_version,
                          int driver_version, int num_warps, int num_stages, int maxnreg, bool warp_specialize,
                          bool tma, bool reorder_loads);

/// Makes k's messages name parameters as C-like types ("f32*", "i32") and the kernel a
/// "raw kernel" (for tle::raw_kernel, whose parameters are not tiles).
void kernel_set_raw_names(KernelState* k);

}  // namespace tle::detail
