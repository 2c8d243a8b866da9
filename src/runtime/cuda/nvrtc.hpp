// src/runtime/cuda/nvrtc.hpp - NVRTC (CUDA C++ -> PTX/cubin) and nvJitLink (PTX/cubin -> linked
// cubin), loaded at run time with dlopen like the driver (driver.hpp): libtle never links them,
// so it runs where they are missing (TLE-Raw then throws RuntimeError saying so).
//
// Library search, first that opens wins:
//   NVRTC:     $TLE_LIBNVRTC (only it, when set), else libnvrtc.so.13, libnvrtc.so, then the same
//              names under /usr/local/cuda/lib64 (for machines whose loader path lacks the toolkit)
//   nvJitLink: $TLE_LIBNVJITLINK (only it, when set), else libnvJitLink.so.13, libnvJitLink.so,
//              then /usr/local/cuda/lib64
// nvrtc.h and nvJitLink.h are used for types and enums only. Neither needs a GPU or a driver.
#pragma once
#include <nvJitLink.h>
#include <nvrtc.h>

#include <string>
#include <vector>

namespace tle::cuda {

/// The NVRTC entry points tle uses; every pointer is non-null in a loaded table.
struct Nvrtc {
#define TLE_NVRTC_FN(name) decltype(&::name) name = nullptr;
#include "runtime/cuda/nvrtc_functions.def"
#undef TLE_NVRTC_FN
  void* library = nullptr;
  std::string path;        ///< the file that was opened
  int major = 0, minor = 0;  ///< nvrtcVersion
};

/// The nvJitLink entry points tle uses.
struct NvJitLink {
#define TLE_NVJITLINK_FN(name) decltype(&::name) name = nullptr;
#include "runtime/cuda/nvjitlink_functions.def"
#undef TLE_NVJITLINK_FN
  void* library = nullptr;
  std::string path;
  unsigned major = 0, minor = 0;  ///< nvJitLinkVersion
};

/// The library names tried in order (see the top of this file).
std::vector<std::string> nvrtc_candidates();
std::vector<std::string> nvjitlink_candidates();

/// Process-wide tables, loaded once on first call (thread-safe); null when the library cannot be
/// opened or lacks an entry point, with the reason in nvrtc_error() / nvjitlink_error().
const Nvrtc* nvrtc();
const std::string& nvrtc_error();
const NvJitLink* nvjitlink();
const std::string& nvjitlink_error();

/// The table, or RuntimeError(call, "NVRTC is not available: <why>") / likewise for nvJitLink.
const Nvrtc& require_nvrtc(const char* call);
const NvJitLink& require_nvjitlink(const char* call);

}  // namespace tle::cuda
