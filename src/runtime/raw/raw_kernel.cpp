// src/runtime/raw/raw_kernel.cpp - tle::raw_kernel: whole CUDA kernels compiled by NVRTC (cubin
// for the device's architecture, through the caches of cuda_compile.hpp), loaded once per CUDA
// context as a GpuModule and launched with the argument checks of tile kernels
// (src/runtime/launch.hpp) on the Grid's stream.
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "runtime/cuda/driver.hpp"
#include "runtime/cuda/module.hpp"
#include "runtime/launch.hpp"
#include "runtime/raw/cuda_compile.hpp"
#include "tle/raw.hpp"

namespace tle::detail {

class RawKernelState {
 public:
  std::string name, source;
  std::vector<std::string> options;
  SrcLoc loc;
  KernelState* args = nullptr;  // parameter specs and argument checks, shared with tile kernels
  std::mutex mu;
  std::map<CUcontext, std::shared_ptr<cuda::GpuKernel>> loaded;

  ~RawKernelState() { kernel_destroy(args); }

  raw::CudaCompile request(int sm, bool cubin) const {
    raw::CudaCompile c;
    c.source = source;
    c.options = options;
    c.file_name = name + ".cu";
    c.what = fmt::format("raw kernel '{}'", name);
    c.loc = loc;
    c.sm = sm;
    c.cubin = cubin;
    c.name_expressions = {name};
    return c;
  }

  std::shared_ptr<cuda::GpuKernel> get(CUcontext ctx) {
    std::lock_guard lk(mu);
    auto it = loaded.find(ctx);
    if (it != loaded.end()) return it->second;
    const cuda::Driver& d = cuda::require_driver("cuDeviceGetAttribute");
    CUdevice dev = cuda::current_device();
    int major = 0, minor = 0;
    cuda::check(d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute");
    cuda::check(d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cuDeviceGetAttribute");
    raw::CudaOutput out = raw::compile_cuda(request(major * 10 + minor, /*cubin=*/true));
    auto module = cuda::GpuModule::load_cubin(out.image, {{name + ".cu", source}});
    auto k = std::make_shared<cuda::GpuKernel>(module, out.lowered_names.at(0));
    loaded.emplace(ctx, k);
    return k;
  }
};

RawKernelState* raw_kernel_create(const char* name, const std::string& source, const std::vector<std::string>& options,
                                  const std::vector<ParamSpec>& params, const SrcLoc& loc) {
  auto k = std::make_unique<RawKernelState>();
  k->name = name ? name : "";
  if (k->name.empty()) throw UserError(loc, "raw_kernel: the kernel name is empty; pass the __global__ function's name");
  if (source.find_first_not_of(" \t\r\n") == std::string::npos)
    throw UserError(loc, fmt::format("raw_kernel '{}': the CUDA source is empty", k->name));
  k->source = source;
  k->options = options;
  k->loc = loc;
  k->args = kernel_create(k->name.c_str(), params, nullptr, loc);
  kernel_set_raw_names(k->args);
  return k.release();
}

void raw_kernel_destroy(RawKernelState* k) noexcept { delete k; }

void raw_kernel_launch(RawKernelState* k, const Grid3& grid, unsigned bx, unsigned by, unsigned bz, size_t smem,
                       const LaunchOptions& opts, const HostArg* args, size_t nargs, const SrcLoc& loc) {
  if (opts.maxnreg != 0)
    throw UserError(loc, fmt::format("raw kernel '{}': Grid::with_maxnreg({}) applies to tile kernels; a raw kernel's "
                                     "registers are set in its CUDA source (__launch_bounds__, __maxnreg__) or by "
                                     "the NVRTC option -maxrregcount",
                                     k->name, opts.maxnreg));
  PreparedLaunch pl = prepare_launch(k->args, grid, opts, args, nargs, loc);
  if (!pl.on_gpu)
    throw UserError(loc, fmt::format("raw kernel '{}' is CUDA C++ and runs on the GPU backend only, but this launch "
                                     "runs on the {} backend (no usable GPU, TLE_BACKEND={} or .backend({})); "
                                     "launch it on the GPU",
                                     k->name, pl.backend == Backend::Interp ? "interp" : "CPU",
                                     backend_name(pl.backend), pl.backend == Backend::Interp ? "Interp" : "CPU"));
  if (bx == 0) {
    if (opts.num_warps < 1 || opts.num_warps > 32)
      throw UserError(loc, fmt::format("with_warps({}): a raw kernel block holds 1 to 32 warps", opts.num_warps));
    bx = static_cast<unsigned>(32 * opts.num_warps);
  }
  const uint64_t threads = uint64_t(bx) * by * bz;
  if (bx == 0 || by == 0 || bz == 0 || threads > 1024 || bz > 64)
    throw UserError(loc, fmt::format("raw kernel '{}': block {}x{}x{} is outside CUDA's limits (each axis at least 1, "
                                     "z at most 64, at most 1024 threads)",
                                     k->name, bx, by, bz));
  if (pl.empty) return;
  CUcontext ctx = cuda::ensure_context();
  std::shared_ptr<cuda::GpuKernel> kern = k->get(ctx);
  std::vector<void*> ptrs(pl.slots.size());
  for (size_t i = 0; i < ptrs.size(); ++i) ptrs[i] = &pl.slots[i];
  kern->launch(cuda::Dim3{unsigned(grid.x), unsigned(grid.y), unsigned(grid.z)}, cuda::Dim3{bx, by, bz}, smem,
               static_cast<CUstream>(opts.stream), ptrs.empty() ? nullptr : ptrs.data());
  // TLE_LAUNCH_BLOCKING=1, as for tile kernels: wait, and report a fault here, naming the kernel.
  sync_if_launch_blocking(opts.stream, [&] {
    return fmt::format("raw kernel '{}' launched at {}:{}, grid {}x{}x{}, block {}x{}x{}", k->name, loc.file, loc.line,
                       grid.x, grid.y, grid.z, bx, by, bz);
  });
}

std::string raw_kernel_ptx(RawKernelState* k, int sm) { return raw::compile_cuda(k->request(sm, false)).image; }

size_t raw_kernel_num_compiled(const RawKernelState* k) noexcept {
  auto* m = const_cast<RawKernelState*>(k);
  std::lock_guard lk(m->mu);
  return m->loaded.size();
}

}  // namespace tle::detail
