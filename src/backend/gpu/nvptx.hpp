// src/backend/gpu/nvptx.hpp - LLVM IR for nvptx64 -> PTX: libdevice linking, optimization and
// PTX emission through LLVM's NVPTX back end.
#pragma once
#include <string>

#include <llvm/IR/Module.h>

namespace tle::gpu {

/// The GPU a kernel is compiled for.
struct Target {
  int sm = 90;            // compute capability major*10 + minor
  bool arch_specific = true;  // sm_90a (wgmma, setmaxnreg) when sm == 90
  int ptx_version = 85;   // PTX ISA version LLVM 19 emits at most (8.5)
  std::string cpu() const { return "sm_" + std::to_string(sm) + (arch_specific && sm >= 90 ? "a" : ""); }
};

/// Data layout and triple for nvptx64 (sets them on `m`).
void configure_module(llvm::Module& m, const Target& t);

/// Links the parts of libdevice that `m` calls (__nv_* functions), internalizes everything but the
/// kernels, runs LLVM's O3 pipeline with the NVPTX target's passes (NVVMReflect included), and
/// emits PTX text. Throws RuntimeError naming the step on failure.
std::string emit_ptx(llvm::Module& m, const Target& t);

}  // namespace tle::gpu
