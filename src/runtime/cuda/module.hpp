// src/runtime/cuda/module.hpp - loading PTX or cubin into a CUmodule, and launching its kernels.
//
// PTX is JIT-compiled by the driver (cuModuleLoadDataEx) with its info and error logs captured.
// When loading fails, tle writes a dump directory holding the PTX, the JIT log and whatever other
// texts the caller passed (tile IR, LLVM IR), and the RuntimeError names that directory:
//   $TLE_DUMP_DIR/tle-dump-<pid>-<n>   (if TLE_DUMP_DIR is set)
//   $TMPDIR/tle-dump-<pid>-<n>         (else; /tmp when TMPDIR is unset)
#pragma once
#include <cuda.h>

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tle::cuda {

/// A file for a failure dump: its name inside the dump directory and its contents.
struct DumpFile {
  std::string name;      ///< e.g. "kernel.ttir", "kernel.ll"; a plain file name, no '/'
  std::string contents;
};

/// Creates a fresh dump directory (see the top of this file) and writes `files` into it.
/// Returns the directory's path; on failure returns an empty string and sets *error. Never throws.
std::string write_dump(const std::vector<DumpFile>& files, std::string* error);

/// A loaded CUmodule, unloaded (cuModuleUnload) by the destructor. Shared by the GpuKernels made
/// from it, so it lives as long as any of them.
class GpuModule {
 public:
  /// JIT-compiles PTX text for the current context's device (ensure_context()). On failure throws
  /// RuntimeError with call "cuModuleLoadDataEx", a message naming the error and the dump
  /// directory, and the JIT error log (followed by the info log) as log(). `extra` are written to
  /// the dump directory next to kernel.ptx and jit.log.
  static std::shared_ptr<GpuModule> load_ptx(std::string_view ptx, const std::vector<DumpFile>& extra = {});
  /// Loads a cubin (an ELF image for the current device); failures as for load_ptx (the dump
  /// holds kernel.cubin).
  static std::shared_ptr<GpuModule> load_cubin(std::string_view cubin, const std::vector<DumpFile>& extra = {});

  ~GpuModule();
  GpuModule(const GpuModule&) = delete;
  GpuModule& operator=(const GpuModule&) = delete;

  CUmodule handle() const { return module_; }
  /// The JIT's info log (with CU_JIT_LOG_VERBOSE: ptxas's register and spill report); empty for
  /// a cubin.
  const std::string& info_log() const { return info_log_; }
  /// The kernel `name` (its .entry name in PTX). Throws RuntimeError naming cuModuleGetFunction.
  CUfunction function(const std::string& name) const;

 private:
  GpuModule(CUmodule m, std::string info_log) : module_(m), info_log_(std::move(info_log)) {}
  static std::shared_ptr<GpuModule> load(const void* image, bool is_ptx, std::string_view bytes,
                                         const std::vector<DumpFile>& extra);
  CUmodule module_;
  std::string info_log_;
};

/// Launch dimensions (grid in blocks, block in threads).
struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

/// One kernel of a loaded module: the CUfunction together with the module that owns it, so the
/// function can never outlive its module. Launching is thread-safe.
class GpuKernel {
 public:
  /// Looks up kernel `name` in `module` (RuntimeError if it is not there).
  GpuKernel(std::shared_ptr<GpuModule> module, const std::string& name);
  /// load_ptx(ptx, extra), then the kernel `name`.
  static GpuKernel from_ptx(std::string_view ptx, const std::string& name, const std::vector<DumpFile>& extra = {});

  CUfunction function() const { return function_; }
  const std::string& name() const { return name_; }
  const std::shared_ptr<GpuModule>& module() const { return module_; }

  /// cuFuncGetAttribute (registers, static shared memory, max threads per block, ...).
  int attribute(CUfunction_attribute a) const;
  /// Allows launches with up to `bytes` of dynamic shared memory. Above 48 KB the driver needs
  /// this opt-in (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES); launch() calls it itself
  /// when asked for more than has been allowed. Throws RuntimeError beyond the device's limit.
  /// (const: it changes the driver's state of the function, not this handle.)
  void set_max_dynamic_shared_memory(size_t bytes) const;

  /// cuLaunchKernel(grid, block, shared_bytes of dynamic shared memory, stream, params), where
  /// params[i] points at the value of the kernel's i-th parameter. Asynchronous: a fault while
  /// the kernel runs is reported by a later synchronize. Throws RuntimeError (naming the kernel
  /// and the dimensions) when the driver rejects the launch.
  void launch(Dim3 grid, Dim3 block, size_t shared_bytes, CUstream stream, void** params) const;

 private:
  std::shared_ptr<GpuModule> module_;
  CUfunction function_ = nullptr;
  std::string name_;
  // Dynamic shared memory allowed so far (48 KB needs no opt-in). Shared between copies of a
  // kernel; an opt-in applies to the function in its context, so a stale value only costs a
  // redundant cuFuncSetAttribute.
  std::shared_ptr<std::atomic<size_t>> smem_allowed_;
};

}  // namespace tle::cuda
