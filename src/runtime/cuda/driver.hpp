// src/runtime/cuda/driver.hpp - the CUDA Driver API, loaded at run time.
//
// libtle never links libcuda: it opens "libcuda.so.1" (or the file named by TLE_LIBCUDA) with
// dlopen on first use and looks up one table of entry points, so the same libtle runs on machines
// with no driver (kernels then run on the CPU backend). cuda.h is used for types and enums only.
//
// Entry points are looked up under the versioned symbol names that cuda.h maps the API names to
// (cuMemAlloc -> cuMemAlloc_v2, cuStreamDestroy -> cuStreamDestroy_v2, ...): the members of Driver
// are declared with the API names, which cuda.h's macros rename consistently, and the loader
// stringizes each name after macro expansion. So `drv->cuMemAlloc(&p, n)` calls cuMemAlloc_v2 with
// the 64-bit signature, exactly as code linked against libcuda would.
//
// Contexts: tle works in the context current on the calling thread if there is one (an embedding
// engine's), otherwise in device 0's primary context, which it retains once (ensure_context()).
#pragma once
#include <cuda.h>

#include <memory>
#include <string>

#include "tle/device.hpp"

namespace tle::cuda {

/// The Driver API entry points tle uses. Every pointer is non-null in a table returned by
/// load_driver() or driver().
struct Driver {
#define TLE_CU_FN(name) decltype(&::name) name = nullptr;
#include "runtime/cuda/driver_functions.def"
#undef TLE_CU_FN
  /// Optional entry points (driver_optional_functions.def): null when the driver lacks them.
#define TLE_CU_FN(name) decltype(&::name) name = nullptr;
#include "runtime/cuda/driver_optional_functions.def"
#undef TLE_CU_FN

  void* library = nullptr;  ///< the dlopen handle (never closed: the driver does not support it)
  int version = 0;          ///< cuDriverGetVersion, e.g. 13000 for CUDA 13.0
  int device_count = 0;     ///< cuDeviceGetCount after a successful cuInit (at least 1)
};

/// Result of loading a driver library.
struct DriverLoad {
  std::unique_ptr<Driver> driver;  ///< null on failure
  std::string error;               ///< why loading failed (empty on success)
};

/// Opens `path` with dlopen, resolves every entry point, calls cuInit(0) and counts devices.
/// Never throws; not cached (each call opens the library again, which dlopen reference-counts).
/// Fails, with the reason in `error`, when the library is missing, lacks a symbol, cuInit fails,
/// or there is no device.
DriverLoad load_driver(const std::string& path);

/// The library path driver() opens: $TLE_LIBCUDA if set and non-empty, else "libcuda.so.1".
std::string libcuda_path();

/// The process-wide driver table, loaded once from libcuda_path() on first call (thread-safe).
/// Null, never an exception, when there is no usable driver or no device; driver_error() says why.
const Driver* driver();

/// Why driver() is null (empty when it is not).
const std::string& driver_error();

/// Name of a CUresult ("CUDA_ERROR_INVALID_VALUE"), from cuGetErrorName when a driver is loaded.
std::string error_name(CUresult r);
/// Description of a CUresult, from cuGetErrorString when a driver is loaded.
std::string error_string(CUresult r);

/// Throws RuntimeError(call, "<ERROR_NAME>: <description>") unless r is CUDA_SUCCESS.
void check(CUresult r, const char* call);

/// The driver table, or RuntimeError(`call`, "no CUDA driver: <why>") when there is none.
const Driver& require_driver(const char* call);

/// Makes sure the calling thread has a current context: keeps the caller's own if one is current,
/// otherwise retains device 0's primary context (once per process) and makes it current.
/// Returns the current context. Throws RuntimeError when there is no driver or a call fails.
CUcontext ensure_context();

/// Device 0's primary context if ensure_context() has retained it, else null.
CUcontext retained_primary_context();

/// The device of the current context (calls ensure_context()).
CUdevice current_device();

/// The backend for a TLE_BACKEND value `env` (null or empty: GPU if have_gpu, else CPU; "cpu",
/// "gpu" or "interp" in any case: that one). Throws RuntimeError("TLE_BACKEND", ...) quoting `why_no_gpu` for
/// "gpu" without a GPU, and UserError for any other value. default_backend() is
/// select_backend(getenv("TLE_BACKEND"), driver() != nullptr, driver_error()).
Backend select_backend(const char* env, bool have_gpu, const std::string& why_no_gpu);

}  // namespace tle::cuda
