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
template <class T> struct Loaded {
  std::unique_ptr<T> t;  // null when loading failed
  std::string error;     // why
};

/// Opens the first library of `names` into a new T (library, path), binds its entry points with
/// `bind` (returns the names it did not find) and asks its version with `version` (true when that
/// worked). `what` names the library in errors, `hint` says how to point tle at it. Leaked on
/// purpose by the callers, like the driver table.
template <class T, class Bind, class Version>
Loaded<T>* load_table(const std::vector<std::string>& names, const char* what, const char* hint, Bind bind,
                      Version version) {
  auto* g = new Loaded<T>;
  auto t = std::make_unique<T>();
  std::string err;
  if (!open_first(names, t->library, t->path, err)) {
    g->error = fmt::format("cannot open {} ({}; {})", what, err, hint);
    return g;
  }
  if (std::string missing = bind(*t); !missing.empty()) {
    g->error = fmt::format("{} lacks {} entry points: {}", t->path, what, missing);
    return g;
  }
  if (!version(*t)) {
    g->error = fmt::format("the version query of {} failed in {}", what, t->path);
    return g;
  }
  g->t = std::move(t);
  return g;
}

/// Binds entry point `name` of `lib` into `slot`; appends the name to `missing` when absent.
template <class F> void resolve(void* lib, F& slot, const char* name, std::string& missing) {
  slot = reinterpret_cast<F>(dlsym(lib, name));
  if (!slot) missing += missing.empty() ? std::string(name) : fmt::format(", {}", name);
}

Loaded<Nvrtc>& nvrtc_global() {
  static Loaded<Nvrtc>* g = load_table<Nvrtc>(
      nvrtc_candidates(), "NVRTC", "set TLE_LIBNVRTC to libnvrtc's path",
      [](Nvrtc& t) {
        std::string missing;
#define TLE_NVRTC_FN(name) resolve(t.library, t.name, #name, missing);
#include "runtime/cuda/nvrtc_functions.def"
#undef TLE_NVRTC_FN
        return missing;
      },
      [](Nvrtc& t) { return t.nvrtcVersion(&t.major, &t.minor) == NVRTC_SUCCESS; });
  return *g;
}

Loaded<NvJitLink>& jitlink_global() {
  static Loaded<NvJitLink>* g = load_table<NvJitLink>(
      nvjitlink_candidates(), "nvJitLink", "set TLE_LIBNVJITLINK to libnvJitLink's path",
      [](NvJitLink& t) {
        std::string missing;
#define TLE_NVJITLINK_FN(name) resolve(t.library, t.name, #name, missing);
#include "runtime/cuda/nvjitlink_functions.def"
#undef TLE_NVJITLINK_FN
        return missing;
      },
      [](NvJitLink& t) { return t.nvJitLinkVersion(&t.major, &t.minor) == NVJITLINK_SUCCESS; });
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
