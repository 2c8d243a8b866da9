// src/runtime/cuda/driver.cpp - loading the Driver API with dlopen, error checking, contexts.
#include "runtime/cuda/driver.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <mutex>

#include "tle/error.hpp"

// Stringize after macro expansion: TLE_CU_SYMBOL(cuMemAlloc) is "cuMemAlloc_v2" with cuda.h.
#define TLE_CU_SYMBOL2(x) #x
#define TLE_CU_SYMBOL(x) TLE_CU_SYMBOL2(x)

namespace tle::cuda {

namespace {

/// Older symbols with the same signature, tried when the versioned one is missing (drivers older
/// than the headers). Only pairs whose signatures are identical belong here.
const char* fallback_symbol(const char* symbol) {
  std::string_view s = symbol;
  if (s == "cuEventElapsedTime_v2") return "cuEventElapsedTime";
  return nullptr;
}

std::string dl_error() {
  const char* e = dlerror();
  return e ? e : "unknown dlopen error";
}

}  // namespace

DriverLoad load_driver(const std::string& path) {
  DriverLoad out;
  dlerror();
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    out.error = fmt::format("cannot open {}: {}", path, dl_error());
    return out;
  }
  auto d = std::make_unique<Driver>();
  d->library = lib;
  std::string missing;
  auto resolve = [&](void*& slot, const char* symbol) {
    slot = dlsym(lib, symbol);
    if (!slot)
      if (const char* alt = fallback_symbol(symbol)) slot = dlsym(lib, alt);
    if (!slot) missing += missing.empty() ? symbol : fmt::format(", {}", symbol);
  };
#define TLE_CU_FN(name) resolve(reinterpret_cast<void*&>(d->name), TLE_CU_SYMBOL(name));
#include "runtime/cuda/driver_functions.def"
#undef TLE_CU_FN
  // Optional entry points: a driver without them still loads; their users check for null.
#define TLE_CU_FN(name) d->name = reinterpret_cast<decltype(d->name)>(dlsym(lib, TLE_CU_SYMBOL(name)));
#include "runtime/cuda/driver_optional_functions.def"
#undef TLE_CU_FN
  // The library stays open on every path: dlclose of a driver that may have started threads is
  // not safe, and dlopen reference-counts repeated loads.
  if (!missing.empty()) {
    out.error = fmt::format("{} lacks Driver API entry points: {} (driver too old?)", path, missing);
    return out;
  }
  auto describe = [&](CUresult r) {
    const char* name = nullptr;
    const char* text = nullptr;
    if (d->cuGetErrorName(r, &name) != CUDA_SUCCESS) name = nullptr;
    if (d->cuGetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
    return fmt::format("{} ({})", name ? name : fmt::format("CUresult {}", int(r)), text ? text : "no description");
  };
  if (CUresult r = d->cuInit(0); r != CUDA_SUCCESS) {
    out.error = fmt::format("cuInit failed: {}", describe(r));
    return out;
  }
  if (CUresult r = d->cuDriverGetVersion(&d->version); r != CUDA_SUCCESS) {
    out.error = fmt::format("cuDriverGetVersion failed: {}", describe(r));
    return out;
  }
  if (CUresult r = d->cuDeviceGetCount(&d->device_count); r != CUDA_SUCCESS) {
    out.error = fmt::format("cuDeviceGetCount failed: {}", describe(r));
    return out;
  }
  if (d->device_count <= 0) {
    out.error = "the CUDA driver reports no device";
    return out;
  }
  out.driver = std::move(d);
  return out;
}

std::string libcuda_path() {
  const char* env = std::getenv("TLE_LIBCUDA");
  return env && *env ? std::string(env) : std::string("libcuda.so.1");
}

namespace {
struct GlobalDriver {
  std::unique_ptr<Driver> driver;
  std::string error;
};
GlobalDriver& global_driver() {
  // Leaked on purpose: the table must outlive static destructors that may still free memory.
  static GlobalDriver* g = [] {
    auto* g = new GlobalDriver;
    DriverLoad l = load_driver(libcuda_path());
    g->driver = std::move(l.driver);
    g->error = std::move(l.error);
    return g;
  }();
  return *g;
}
}  // namespace

const Driver* driver() { return global_driver().driver.get(); }

const std::string& driver_error() { return global_driver().error; }

std::string error_name(CUresult r) {
  const char* s = nullptr;
  if (const Driver* d = driver(); d && d->cuGetErrorName(r, &s) == CUDA_SUCCESS && s) return s;
  return fmt::format("CUresult {}", int(r));
}

std::string error_string(CUresult r) {
  const char* s = nullptr;
  if (const Driver* d = driver(); d && d->cuGetErrorString(r, &s) == CUDA_SUCCESS && s) return s;
  return "unknown CUDA error";
}

void check(CUresult r, const char* call) {
  if (r == CUDA_SUCCESS) return;
  throw RuntimeError(call, fmt::format("{}: {}", error_name(r), error_string(r)));
}

const Driver& require_driver(const char* call) {
  const Driver* d = driver();
  if (!d) throw RuntimeError(call, fmt::format("no CUDA driver: {}", driver_error()));
  return *d;
}

namespace {
std::atomic<CUcontext> g_primary{nullptr};
}  // namespace

CUcontext ensure_context() {
  const Driver& d = require_driver("cuCtxGetCurrent");
  CUcontext cur = nullptr;
  check(d.cuCtxGetCurrent(&cur), "cuCtxGetCurrent");
  if (cur) return cur;
  // Device 0's primary context, retained once and never released (it lives as long as the
  // process, like the CUDA runtime's).
  static CUcontext primary = [&] {
    CUdevice dev = 0;
    check(d.cuDeviceGet(&dev, 0), "cuDeviceGet");
    CUcontext ctx = nullptr;
    check(d.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    g_primary.store(ctx);
    return ctx;
  }();
  check(d.cuCtxSetCurrent(primary), "cuCtxSetCurrent");
  return primary;
}

CUcontext retained_primary_context() { return g_primary.load(); }

CUdevice current_device() {
  const Driver& d = require_driver("cuCtxGetDevice");
  ensure_context();
  CUdevice dev = 0;
  check(d.cuCtxGetDevice(&dev), "cuCtxGetDevice");
  return dev;
}

Backend select_backend(const char* env, bool have_gpu, const std::string& why_no_gpu) {
  std::string v = env ? env : "";
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (v.empty()) return have_gpu ? Backend::GPU : Backend::CPU;
  if (v == "cpu") return Backend::CPU;
  if (v == "interp") return Backend::Interp;
  if (v == "gpu") {
    if (have_gpu) return Backend::GPU;
    throw RuntimeError("TLE_BACKEND", fmt::format("TLE_BACKEND=gpu, but no GPU can be used: {}", why_no_gpu));
  }
  throw UserError(SrcLoc{}, fmt::format("TLE_BACKEND='{}' is not a backend; use cpu, gpu or interp", env));
}

}  // namespace tle::cuda
