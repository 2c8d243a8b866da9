// src/runtime/cuda/nvrtc.cpp - loading NVRTC and nvJitLink with dlopen (see nvrtc.hpp).
#include "runtime/cuda/nvrtc.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <memory>

#include "tle/error.hpp"

namespace tle::cuda {

namespace {

std::vector<std::string> candidates(const char* env, const char* so_major, const char* so) {
  if (const char* e = std::getenv(env); e && *e) return {e};
  return {so_major, so, std::string("/usr/local/cuda/lib64/") + so_major, std::string("/usr/local/cuda/lib64/") + so};
}

/// dlopens the first candidate that opens; fills `lib`/`path` or returns the reasons.
bool open_first(const std::vector<std::string>& names, void*& lib, std::string& path, std::string& error) {
  std::string why;
  for (const auto& n : names) {
    dlerror();
    lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      path = n;
      return true;
    }
    const char* e = dlerror();
    why += fmt::format("{}{}: {}", why.empty() ? "" : "; ", n, e ? e : "cannot open");
  }
  error = why;
  return false;
}


}  // namespace

std::vector<std::string> nvrtc_candidates() { return candidates("TLE_LIBNVRTC", "libnvrtc.so.13", "libnvrtc.so"); }
std::vector<std::string> nvjitlink_candidates() {
  return candidates("TLE_LIBNVJITLINK", "libnvJitLink.so.13", "libnvJitLink.so");
}

namespace {
struct NvrtcGlobal {
  std::unique_ptr<Nvrtc> t;
  std::string error;
};
struct JitLinkGlobal {
  std::unique_ptr<NvJitLink> t;
  std::string error;
};

NvrtcGlobal& nvrtc_global() {
  static NvrtcGlobal* g = [] {  // leaked on purpose, like the driver table
    auto* g = new NvrtcGlobal;
    auto t = std::make_unique<Nvrtc>();
    std::string err;
    if (!open_first(nvrtc_candidates(), t->library, t->path, err)) {
      g->error = "cannot open NVRTC (" + err + "; set TLE_LIBNVRTC to libnvrtc's path)";
      return g;
    }
    std::string missing;
#define TLE_NVRTC_FN(name)                                                       \
  t->name = reinterpret_cast<decltype(t->name)>(dlsym(t->library, #name));       \
  if (!t->name) missing += missing.empty() ? #name : ", " #name;
#include "runtime/cuda/nvrtc_functions.def"
#undef TLE_NVRTC_FN
    if (!missing.empty()) {
      g->error = fmt::format("{} lacks NVRTC entry points: {}", t->path, missing);
      return g;
    }
    if (t->nvrtcVersion(&t->major, &t->minor) != NVRTC_SUCCESS) {
      g->error = fmt::format("nvrtcVersion failed in {}", t->path);
      return g;
    }
    g->t = std::move(t);
    return g;
  }();
  return *g;
}

JitLinkGlobal& jitlink_global() {
  static JitLinkGlobal* g = [] {
    auto* g = new JitLinkGlobal;
    auto t = std::make_unique<NvJitLink>();
    std::string err;
    if (!open_first(nvjitlink_candidates(), t->library, t->path, err)) {
      g->error = "cannot open nvJitLink (" + err + "; set TLE_LIBNVJITLINK to libnvJitLink's path)";
      return g;
    }
    std::string missing;
#define TLE_NVJITLINK_FN(name)                                                   \
  t->name = reinterpret_cast<decltype(t->name)>(dlsym(t->library, #name));       \
  if (!t->name) missing += missing.empty() ? #name : ", " #name;
#include "runtime/cuda/nvjitlink_functions.def"
#undef TLE_NVJITLINK_FN
    if (!missing.empty()) {
      g->error = fmt::format("{} lacks nvJitLink entry points: {}", t->path, missing);
      return g;
    }
    if (t->nvJitLinkVersion(&t->major, &t->minor) != NVJITLINK_SUCCESS) {
      g->error = fmt::format("nvJitLinkVersion failed in {}", t->path);
      return g;
    }
    g->t = std::move(t);
    return g;
  }();
  return *g;
}
}  // namespace

const Nvrtc* nvrtc() { return nvrtc_global().t.get(); }
const std::string& nvrtc_error() { return nvrtc_global().error; }
const NvJitLink* nvjitlink() { return jitlink_global().t.get(); }
const std::string& nvjitlink_error() { return jitlink_global().error; }

const Nvrtc& require_nvrtc(const char* call) {
  if (const Nvrtc* n = nvrtc()) return *n;
  throw RuntimeError(call, "NVRTC is not available: " + nvrtc_error());
}

const NvJitLink& require_nvjitlink(const char* call) {
  if (const NvJitLink* n = nvjitlink()) return *n;
  throw RuntimeError(call, "nvJitLink is not available: " + nvjitlink_error());
}

}  // namespace tle::cuda
