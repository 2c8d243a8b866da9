// src/runtime/raw/cuda_compile.hpp - TLE-Raw's toolchain steps: CUDA C++ -> PTX/cubin with NVRTC,
// PTX + PTX -> cubin with nvJitLink, the argument protocol's checks against the compiled code,
// and the caches (in memory and on disk, src/runtime/disk_cache.hpp).
//
// Every source gets the protocol header tle_raw.h (protocol_header()) prepended as text, with
// #line directives so that NVRTC's log names the user's snippet lines ("<file>(3): error: ...").
// NVRTC compiles with --std=c++17 (unless the options give -std) and no include path: code that
// needs CUDA headers passes "-I<dir>" itself. The architecture is tle's: --gpu-architecture=sm_<sm>
// (sm_90a for sm 90); an option that sets it is a UserError.
//
// Caches: compile_cuda() results live in memory for the process and on disk under a key of the
// source text, options, architecture, relocatable/cubin flags, name expressions, the NVRTC version
// and tle's version and build id; linked cubins likewise under the inputs, the architecture and
// the nvJitLink version. A cached artifact is never a different source's: the disk cache stores
// and compares the whole key.
#pragma once
#include <string>
#include <vector>

#include "ir/ir.hpp"
#include "runtime/cuda/module.hpp"
#include "tle/error.hpp"

namespace tle::raw {

/// The text of tle_raw.h, the protocol header prepended to every CUDA source (docs/raw.md).
const std::string& protocol_header();

/// "sm_90a" for 90, else "sm_<sm>".
std::string arch_name(int sm);

/// One NVRTC compilation.
struct CudaCompile {
  std::string source;                 ///< the user's CUDA C++
  std::vector<std::string> options;   ///< the user's NVRTC options
  std::string file_name = "cuda_source.cu";  ///< the name NVRTC's log uses for the snippet
  std::string what;                   ///< for messages: "raw kernel 'saxpy'", "cuda_function 'sort'"
  SrcLoc loc;                         ///< where the user gave the source (UserErrors point here)
  int sm = 90;                        ///< compute capability (90 compiles for sm_90a)
  bool relocatable = false;           ///< -rdc=true (device functions to be linked)
  bool cubin = false;                 ///< produce a cubin (else PTX)
  std::vector<std::string> name_expressions;  ///< __global__ names to lower (nvrtcGetLoweredName)
};

struct CudaOutput {
  std::string image;                       ///< PTX text or cubin bytes
  std::vector<std::string> lowered_names;  ///< one per name expression
  std::string log;                         ///< NVRTC's log (warnings), may be empty
};

/// Compiles with NVRTC through the caches. Throws UserError at c.loc when NVRTC rejects the
/// source or the options (the message holds NVRTC's log with each referenced snippet line
/// quoted), RuntimeError when NVRTC cannot be loaded or fails otherwise.
CudaOutput compile_cuda(const CudaCompile& c);
/// The disk-cache key of compile_cuda(c) (RuntimeError without NVRTC). For tests.
std::string compile_cache_key(const CudaCompile& c);

/// One input of a link.
struct LinkInput {
  std::string name;   ///< for the log, e.g. "tile_kernel.ptx"
  std::string data;   ///< PTX text or cubin bytes
  bool ptx = true;
};

/// Links with nvJitLink for sm_<sm> (sm_90a for 90) into a cubin (an ELF image), through the
/// caches. Non-LTO: LLVM's PTX is not NVVM IR, so the inputs are compiled by ptxas separately
/// and then linked. Throws RuntimeError("nvJitLinkComplete", ..., log) on failure.
std::string link_cubin(const std::vector<LinkInput>& inputs, int sm);

/// A parameter list as the PTX declares it: byte size of each parameter, and of the return value
/// (0 for none).
struct PtxPrototype {
  std::vector<int> param_bytes;
  int ret_bytes = 0;
};
/// The prototype of `.visible .func name` in `ptx`; false when there is none.
bool find_ptx_function(const std::string& ptx, const std::string& name, PtxPrototype* out);

/// Whether f calls CUDA device functions (cuda_call ops, anywhere in its regions).
bool has_cuda_calls(const ir::Function& f);

/// The GPU path of a kernel with cuda_call ops: compiles every distinct (source, options) of its
/// calls with NVRTC (-rdc, PTX, sm), checks each callee exists with the protocol's parameter and
/// return sizes (UserError at the call's op otherwise), links them with the kernel's PTX into a
/// cubin and loads it. `extra` goes into a failure dump.
cuda::GpuKernel link_and_load(const ir::Function& f, const std::string& tile_ptx, const std::string& entry, int sm,
                              std::vector<cuda::DumpFile> extra);

/// One cuda_call as the link sees it.
struct CallSite {
  std::string source, file, name;
  std::vector<std::string> options;
  std::vector<int> param_bytes;  ///< what the call passes (protocol sizes, ir/cuda_call.hpp)
  int ret_bytes = 0;             ///< 0: void
  SrcLoc loc;                    ///< the call (UserErrors point here)
};
/// The call sites of f's cuda_call ops, in program order.
std::vector<CallSite> call_sites(const ir::Function& f);
/// Compiles the call sites' sources (NVRTC, -rdc, PTX), checks each callee's prototype against
/// the call, and links everything with the kernel's PTX into a cubin. Needs no GPU.
std::string link_call_sites(const std::string& tile_ptx, const std::vector<CallSite>& calls, int sm);
/// link_call_sites(tile_ptx, call_sites(f), sm): what link_and_load loads.
std::string link_tile_kernel(const ir::Function& f, const std::string& tile_ptx, int sm);

/// Versions that key the caches: "nvrtc 13.0" (RuntimeError without NVRTC).
std::string nvrtc_version();

}  // namespace tle::raw
