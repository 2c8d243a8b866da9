// src/runtime/cuda/module.cpp - PTX/cubin loading with JIT logs and failure dumps; launching.
#include "runtime/cuda/module.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "runtime/cuda/driver.hpp"
#include "tle/error.hpp"

namespace tle::cuda {

// ---- failure dumps

std::string write_dump(const std::vector<DumpFile>& files, std::string* error) {
  static std::atomic<unsigned> counter{0};
  std::string base;
  if (const char* d = std::getenv("TLE_DUMP_DIR"); d && *d) {
    base = d;
    if (::mkdir(d, 0755) != 0 && errno != EEXIST) {
      if (error) *error = fmt::format("cannot create TLE_DUMP_DIR {}: {}", base, std::strerror(errno));
      return {};
    }
  } else if (const char* t = std::getenv("TMPDIR"); t && *t) {
    base = t;
  } else {
    base = "/tmp";
  }
  std::string dir;
  for (int attempt = 0;; ++attempt) {
    dir = fmt::format("{}/tle-dump-{}-{}", base, ::getpid(), counter.fetch_add(1));
    if (::mkdir(dir.c_str(), 0755) == 0) break;
    if (errno != EEXIST || attempt > 1000) {  // EEXIST: left by an earlier process with our pid
      if (error) *error = fmt::format("cannot create {}: {}", dir, std::strerror(errno));
      return {};
    }
  }
  for (const DumpFile& f : files) {
    std::string name = f.name;
    for (char& c : name)
      if (c == '/') c = '_';
    std::ofstream out(dir + "/" + name, std::ios::binary);
    out.write(f.contents.data(), static_cast<std::streamsize>(f.contents.size()));
    if (!out) {
      if (error) *error = fmt::format("cannot write {}/{}", dir, name);
      return {};
    }
  }
  return dir;
}

// ---- GpuModule

namespace {
constexpr size_t kLogBytes = 64 * 1024;

std::string log_text(const std::vector<char>& buf, void* used) {
  // The driver stores the number of bytes it wrote (including the NUL) back into the size option.
  size_t n = std::min(reinterpret_cast<uintptr_t>(used), static_cast<uintptr_t>(buf.size()));
  std::string s(buf.data(), strnlen(buf.data(), n));
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}
}  // namespace

std::shared_ptr<GpuModule> GpuModule::load(const void* image, bool is_ptx, std::string_view bytes,
                                           const std::vector<DumpFile>& extra) {
  const Driver& d = require_driver("cuModuleLoadDataEx");
  ensure_context();
  std::vector<char> info(kLogBytes, '\0'), err(kLogBytes, '\0');
  CUjit_option opts[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
                         CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_LOG_VERBOSE};
  void* vals[] = {info.data(), reinterpret_cast<void*>(uintptr_t(kLogBytes)), err.data(),
                  reinterpret_cast<void*>(uintptr_t(kLogBytes)), reinterpret_cast<void*>(uintptr_t(1))};
  CUmodule m = nullptr;
  CUresult r = d.cuModuleLoadDataEx(&m, image, 5, opts, vals);
  std::string info_log = log_text(info, vals[1]);
  if (r == CUDA_SUCCESS) return std::shared_ptr<GpuModule>(new GpuModule(m, std::move(info_log)));

  std::string error_log = log_text(err, vals[3]);
  std::string log = error_log;
  if (!info_log.empty()) log += (log.empty() ? "" : "\n") + info_log;
  std::vector<DumpFile> files;
  files.push_back({is_ptx ? "kernel.ptx" : "kernel.cubin", std::string(bytes)});
  files.push_back({"jit.log", log + "\n"});
  files.insert(files.end(), extra.begin(), extra.end());
  std::string why;
  std::string dir = write_dump(files, &why);
  std::string where = dir.empty() ? fmt::format("no dump written ({})", why) : fmt::format("dumped to {}", dir);
  throw RuntimeError("cuModuleLoadDataEx",
                     fmt::format("{}: {}; loading {} failed, {}", error_name(r), error_string(r),
                                 is_ptx ? "PTX" : "a cubin", where),
                     log);
}

std::shared_ptr<GpuModule> GpuModule::load_ptx(std::string_view ptx, const std::vector<DumpFile>& extra) {
  std::string text(ptx);  // the driver reads PTX up to a NUL
  return load(text.c_str(), true, ptx, extra);
}

std::shared_ptr<GpuModule> GpuModule::load_cubin(std::string_view cubin, const std::vector<DumpFile>& extra) {
  std::string image(cubin);  // an aligned, owned copy of the ELF image
  return load(image.data(), false, cubin, extra);
}

GpuModule::~GpuModule() {
  if (const Driver* d = driver(); d && module_) {
    try {
      ensure_context();
      d->cuModuleUnload(module_);
    } catch (...) {
      // the context is gone, and the module with it
    }
  }
}

CUfunction GpuModule::function(const std::string& name) const {
  const Driver& d = require_driver("cuModuleGetFunction");
  CUfunction f = nullptr;
  CUresult r = d.cuModuleGetFunction(&f, module_, name.c_str());
  if (r != CUDA_SUCCESS)
    throw RuntimeError("cuModuleGetFunction",
                       fmt::format("{}: {} (kernel '{}')", error_name(r), error_string(r), name));
  return f;
}

// ---- GpuKernel

GpuKernel::GpuKernel(std::shared_ptr<GpuModule> module, const std::string& name)
    : module_(std::move(module)), name_(name), smem_allowed_(std::make_shared<std::atomic<size_t>>(48 * 1024)) {
  if (!module_) throw InternalError("GpuKernel made from a null module");
  function_ = module_->function(name);
}

GpuKernel GpuKernel::from_ptx(std::string_view ptx, const std::string& name, const std::vector<DumpFile>& extra) {
  return GpuKernel(GpuModule::load_ptx(ptx, extra), name);
}

int GpuKernel::attribute(CUfunction_attribute a) const {
  const Driver& d = require_driver("cuFuncGetAttribute");
  int v = 0;
  check(d.cuFuncGetAttribute(&v, a, function_), "cuFuncGetAttribute");
  return v;
}

void GpuKernel::set_max_dynamic_shared_memory(size_t bytes) const {
  const Driver& d = require_driver("cuFuncSetAttribute");
  ensure_context();
  CUresult r = d.cuFuncSetAttribute(function_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                    static_cast<int>(std::min<size_t>(bytes, INT32_MAX)));
  if (r != CUDA_SUCCESS)
    throw RuntimeError("cuFuncSetAttribute",
                       fmt::format("{}: {} (kernel '{}' asks for {} bytes of dynamic shared memory; static: {})",
                                   error_name(r), error_string(r), name_, bytes,
                                   attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)));
  size_t cur = smem_allowed_->load();
  while (bytes > cur && !smem_allowed_->compare_exchange_weak(cur, bytes)) {
  }
}

void GpuKernel::launch(Dim3 grid, Dim3 block, size_t shared_bytes, CUstream stream, void** params) const {
  const Driver& d = require_driver("cuLaunchKernel");
  ensure_context();
  if (shared_bytes > smem_allowed_->load()) set_max_dynamic_shared_memory(shared_bytes);
  CUresult r = d.cuLaunchKernel(function_, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                                static_cast<unsigned>(shared_bytes), stream, params, nullptr);
  if (r != CUDA_SUCCESS)
    throw RuntimeError("cuLaunchKernel",
                       fmt::format("{}: {} (kernel '{}', grid {}x{}x{}, block {}x{}x{}, {} bytes of dynamic shared memory)",
                                   error_name(r), error_string(r), name_, grid.x, grid.y, grid.z, block.x, block.y,
                                   block.z, shared_bytes));
}

}  // namespace tle::cuda
