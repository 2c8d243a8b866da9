// src/runtime/kernel.cpp - kernel objects: argument checking and packing, specialization keys,
// the in-memory cache of compiled specializations, and launch on the CPU or the GPU.
//
// Specialization (Triton's rules, with 2, 4 and 8 besides 16): constexpr values, the power of two
// up to 16 that each pointer and integer scalar is a multiple of, and which integer scalars equal 1
// select a specialization (JitOptions::do_not_specialize drops a pointer or integer parameter from
// it); each is traced and compiled once. The in-memory
// key adds the backend and, on the GPU, num_warps, num_stages, maxnreg and the CUDA context (a module belongs to one).
// A UserError thrown while tracing or compiling at an op's line gets a note naming the launch.
//
// CPU path of a miss: trace -> generic pass pipeline -> disk cache lookup keyed on the printed IR,
// the host target and the tle and LLVM versions -> on a disk miss cpu::compile_object, stored ->
// cpu::load into the JIT.
// GPU path of a miss: trace -> generic pass pipeline -> disk cache lookup keyed on the printed IR,
// the target (sm_90a, ...), num_warps, num_stages, maxnreg, the tle, LLVM and driver versions -> on a disk miss
// gpu::compile (GPU passes, NVPTX) and store the PTX -> cuModuleLoadDataEx (GpuKernel::from_ptx,
// whose failure dump also holds the tile IR and, after a fresh compile, the LLVM IR). A launch
// checks that every pointer is device memory (cuPointerGetAttribute), then cuLaunchKernel with
// block = 32 * num_warps threads, the artifact's dynamic shared memory, the Grid's stream, and
// params pointing at the same 8-byte slots the CPU path uses (little endian, so each typed kernel
// parameter reads its value from the slot's first bytes). The launch is asynchronous, unless
// TLE_LAUNCH_BLOCKING=1 makes it wait for the kernel's stream and report a failure at the launch.
#include <fmt/format.h>
#include <llvm/Config/llvm-config.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <set>
#include <optional>
#include <shared_mutex>
#include <sstream>
#include <unordered_map>
#include <utility>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/gpu/gpu_backend.hpp"
#include "frontend/trace.hpp"
#include "interp/interp.hpp"
#include "ir/builder.hpp"
#include "ir/ir.hpp"
#include "passes/pass.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/cuda/module.hpp"
#include "runtime/disk_cache.hpp"
#include "runtime/launch.hpp"
#include "runtime/mesh.hpp"
#include "runtime/raw/cuda_compile.hpp"
#include "runtime/tensor_descriptor.hpp"
#include "support/half.hpp"
#include "tle/detail/trace_api.hpp"
#include "tle/device.hpp"

namespace tle::detail {
extern const char kBuildId[];  // generated: cmake/source_hash.cmake
}
#ifndef TLE_VERSION
#define TLE_VERSION "unknown"
#endif

namespace tle::detail {

namespace {

struct KeyHash {
  size_t operator()(const std::vector<uint64_t>& k) const noexcept {
    uint64_t h = 1469598103934665603ull;
    for (auto x : k) h = (h ^ x) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

// ---- DLPack tensors (tle/dlpack.hpp). DLPack's codes, spelled out so that this file needs no
// <dlpack/dlpack.h> (kDLBool is newer than Debian's DLPack 0.6).
enum : int { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLBool = 6 };
enum : int { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13 };

/// The DLPack {code, bits} of a tle element type; code -1 for ptr (DLPack has no pointer dtype),
/// -2 for fp8: the DLPack header tle builds against (/usr/include/dlpack/dlpack.h, Debian's 0.6)
/// has no fp8 type codes (DLPack 1.1 added kDLFloat8_e4m3fn and kDLFloat8_e5m2), so a tensor
/// cannot say it holds fp8.
std::pair<int, int> dl_dtype_of(DType t) {
  if (t == DType::i1) return {kDLBool, 8};
  if (t == DType::bf16) return {kDLBfloat, 16};
  if (t == DType::ptr) return {-1, 64};
  if (is_fp8(t)) return {-2, 8};
  return {is_float(t) ? kDLFloat : is_signed_int(t) ? kDLInt : kDLUInt, bit_width(t)};
}

/// "float32", "bfloat16", "int8", "bool", "uint64", "float32x4", "code 9 bits 32".
std::string dl_dtype_str(int code, int bits, int lanes) {
  std::string s;
  switch (code) {
    case kDLInt: s = fmt::format("int{}", bits); break;
    case kDLUInt: s = fmt::format("uint{}", bits); break;
    case kDLFloat: s = fmt::format("float{}", bits); break;
    case kDLBfloat: s = fmt::format("bfloat{}", bits); break;
    case kDLBool: s = bits == 8 ? "bool" : fmt::format("bool{}", bits); break;
    case 3: s = fmt::format("opaque handle of {} bits", bits); break;
    case 5: s = fmt::format("complex{}", bits); break;
    default: s = fmt::format("code {} bits {}", code, bits);
  }
  if (lanes != 1) s += fmt::format("x{}", lanes);
  return s;
}

const char* dl_code_name(int code) {
  switch (code) {
    case kDLInt: return "kDLInt";
    case kDLUInt: return "kDLUInt";
    case kDLFloat: return "kDLFloat";
    case kDLBfloat: return "kDLBfloat";
    case kDLBool: return "kDLBool";
    default: return "?";
  }
}

std::string dl_device_str(int type, int id) {
  switch (type) {
    case kDLCPU: return "kDLCPU";
    case kDLCUDA: return fmt::format("kDLCUDA (device {})", id);
    case kDLCUDAHost: return "kDLCUDAHost";
    case 4: return "kDLOpenCL";
    case 7: return "kDLVulkan";
    case 8: return "kDLMetal";
    case 9: return "kDLVPI";
    case 10: return fmt::format("kDLROCM (device {})", id);
    case 11: return "kDLROCMHost";
    case 12: return "kDLExtDev";
    case kDLCUDAManaged: return "kDLCUDAManaged";
    case 14: return "kDLOneAPI";
    case 15: return "kDLWebGPU";
    case 16: return "kDLHexagon";
    default: return fmt::format("device type {}", type);
  }
}

/// The checks that need no backend: a tensor, its dtype against the parameter's element type `t`,
/// its data pointer and alignment. `bad(why)` makes the UserError.
template <class Bad> void check_dlpack(const HostArg& a, DType t, const Bad& bad) {
  const auto& dl = a.dl;
  if (dl.null_tensor) throw bad(fmt::format("got a null {}; pass a tensor", a.type_name));
  auto [code, bits] = dl_dtype_of(t);
  if (code == -1)
    throw bad(fmt::format("got a {}, but DLPack has no pointer dtype; pass a raw pointer to the pointers",
                          a.type_name));
  if (code == -2)
    throw bad(fmt::format("got a {} for a {} parameter, but the DLPack version tle is built with has no fp8 type "
                          "codes; pass the tensor's data pointer as a tle::{} pointer (e.g. "
                          "reinterpret_cast<tle::{}*>(t->data) + byte_offset), or a DeviceBuffer<tle::{}>",
                          a.type_name, dtype_name(t), dtype_name(t), dtype_name(t), dtype_name(t)));
  if (dl.lanes != 1)
    throw bad(fmt::format("got a {} of vector dtype {} (lanes {}); tle pointers address scalars, so pass a tensor "
                          "of {} with lanes 1 (view the vector tensor as {} times as many scalars)",
                          a.type_name, dl_dtype_str(dl.code, dl.bits, dl.lanes), dl.lanes,
                          dl_dtype_str(code, bits, 1), dl.lanes));
  if (dl.code != code || dl.bits != bits)
    throw bad(fmt::format("got a {} of dtype {} (code {}, bits {}); pass a tensor of {} (DLDataType {{{}, {}, 1}})",
                          a.type_name, dl_dtype_str(dl.code, dl.bits, 1), dl.code, dl.bits,
                          dl_dtype_str(code, bits, 1), dl_code_name(code), bits));
  if (dl.null_data)
    throw bad(fmt::format("got a {} whose data is null but whose shape holds elements; pass allocated memory",
                          a.type_name));
  const int size = byte_size(t);
  const uintptr_t addr = reinterpret_cast<uintptr_t>(a.p);
  if (addr % size != 0)
    throw bad(fmt::format("the {}'s data + byte_offset is {}, not aligned to the {}-byte size of {}; make data "
                          "and byte_offset multiples of {}",
                          a.type_name, a.p, size, dtype_name(t), size));
}

std::string param_str(const ParamSpec& p, bool raw = false) {
  if (raw) return p.kind == ParamSpec::Pointer ? fmt::format("{}*", dtype_name(p.dtype)) : std::string(dtype_name(p.dtype));
  switch (p.kind) {
    case ParamSpec::Pointer: return fmt::format("Ptr<{}>", dtype_name(p.dtype));
    case ParamSpec::Scalar: return fmt::format("Tile<{}>", dtype_name(p.dtype));
    case ParamSpec::ConstexprInt: return "Constexpr<integer>";
    case ParamSpec::ConstexprFloat: return "Constexpr<floating-point>";
    case ParamSpec::ConstexprBool: return "Constexpr<bool>";
    case ParamSpec::TensorDesc: return fmt::format("TensorDescriptor<{}, {}>", dtype_name(p.dtype), p.rank);
  }
  return "?";
}

bool is_constexpr(const ParamSpec& p) {
  return p.kind == ParamSpec::ConstexprInt || p.kind == ParamSpec::ConstexprFloat || p.kind == ParamSpec::ConstexprBool;
}

/// The specialization key entry of a descriptor's block shape: 9 bits per dimension (1..256).
uint64_t block_key(const HostArg::DescInfo& d) {
  uint64_t k = 0;
  for (int i = 0; i < d.rank; ++i) k |= static_cast<uint64_t>(d.block[i]) << (9 * i);
  return k;
}

/// The largest power of two, at most 16, that divides v (16 for v = 0).
uint64_t pow2_divisor(uint64_t v) {
  uint64_t d = 1;
  while (d < 16 && v % (2 * d) == 0) d *= 2;
  return d;
}

/// An argument after checking: its 8-byte slot as the compiled code reads it, and the facts the
/// specialization key uses.
struct Packed {
  std::vector<uint64_t> slots;       // runtime arguments, in parameter order (constexprs skipped)
  std::vector<TraceParam> constexprs;  // per parameter (only constexpr entries used)
  std::vector<uint64_t> key;
  /// The first slot of each kernel argument (a tensor descriptor is several arguments, its tensor
  /// map 16 slots), and the (parameter, first slot) of each tensor map.
  std::vector<size_t> arg_slots;
  std::vector<std::pair<size_t, size_t>> tensor_maps;
  /// One pointer per kernel argument, into slots (what the CPU entry point and cuLaunchKernel read).
  std::vector<void*> arg_pointers() {
    std::vector<void*> p(arg_slots.size());
    for (size_t i = 0; i < p.size(); ++i) p[i] = &slots[arg_slots[i]];
    return p;
  }
};

bool int_fits(DType d, int64_t v) {
  if (d == DType::i1) return v == 0 || v == 1;
  int w = bit_width(d);
  if (is_signed_int(d)) return w == 64 || (v >= -(int64_t(1) << (w - 1)) && v < (int64_t(1) << (w - 1)));
  return v >= 0 && (w == 64 || v < (int64_t(1) << w));
}
bool uint_fits(DType d, uint64_t v) {
  if (d == DType::u64) return true;
  if (v > uint64_t(std::numeric_limits<int64_t>::max())) return false;
  return int_fits(d, static_cast<int64_t>(v));
}

/// Stores a float value rounded once into dtype d's memory format.
uint64_t float_slot(DType d, double v) {
  uint64_t s = 0;
  switch (d) {
    case DType::f64: std::memcpy(&s, &v, 8); break;
    case DType::f32: { float f = static_cast<float>(v); std::memcpy(&s, &f, 4); break; }
    case DType::f16: s = f64_to_f16_bits(v); break;
    case DType::bf16: s = f64_to_bf16_bits(v); break;
    case DType::f8e4m3: case DType::f8e5m2: s = f64_to_fp8_bits(v, d); break;
    default: break;
  }
  return s;
}

/// The launch options every path checks (launch, Kernel::ptx): num_warps a power of two from 1
/// to 32; the software-pipelining depth (Grid::with_stages) from 1 (off) to 8; maxnreg 0 (no
/// limit) or 24 to 255 (ptxas's bounds for `.maxnreg`: it raises less to 24 and ignores more).
void check_options(const LaunchOptions& o, const SrcLoc& loc) {
  constexpr int kMaxStages = 8;
  if (o.num_warps < 1 || o.num_warps > 32 || (o.num_warps & (o.num_warps - 1)) != 0)
    throw UserError(loc,
                    fmt::format("num_warps {} (Grid::with_warps): must be a power of two from 1 to 32", o.num_warps));
  if (o.num_stages < 1 || o.num_stages > kMaxStages)
    throw UserError(loc, fmt::format("num_stages {} (Grid::with_stages): must be from 1 (no pipelining) to {}",
                                     o.num_stages, kMaxStages));
  if (o.maxnreg != 0 && (o.maxnreg < 24 || o.maxnreg > 255))
    throw UserError(loc, fmt::format("maxnreg {} (Grid::with_maxnreg): must be 0 (no limit) or a register count "
                                     "from 24 to 255",
                                     o.maxnreg));
}

/// A compiler switch that is on unless the environment sets it to "0" (TLE_WARP_SPECIALIZE, ...).
bool env_switch_on(const char* name) {
  const char* e = std::getenv(name);
  return !(e && std::strcmp(e, "0") == 0);
}

/// The GPU compile options of a launch's options.
gpu::Options gpu_options(const LaunchOptions& o) {
  gpu::Options g;
  g.num_warps = o.num_warps;
  g.num_stages = o.num_stages;
  g.maxnreg = o.maxnreg;
  static const bool ws = env_switch_on("TLE_WARP_SPECIALIZE"), reorder = env_switch_on("TLE_REORDER_LOADS");
  g.warp_specialize = ws;
  g.reorder_loads = reorder;
  return g;
}

/// `opt` with gpu::Options::tma: on unless TLE_TMA=0, read at each GPU compile (not per launch;
/// part of the cache key), for comparisons with the masked-access lowering (docs/semantics.md,
/// "Tensor descriptors").
gpu::Options with_tma(gpu::Options opt) {
  opt.tma = env_switch_on("TLE_TMA");
  return opt;
}

}  // namespace

std::string gpu_compiler_switches() {
  const gpu::Options o = with_tma(gpu_options(LaunchOptions{}));
  return fmt::format("ws {} reorder {} tma {}", int(o.warp_specialize), int(o.reorder_loads), int(o.tma));
}

namespace {

/// The GPU target for compute capability `sm`. sm_90 compiles for sm_90a (wgmma, setmaxnreg).
/// LLVM 19's NVPTX back end knows nothing newer than sm_90, so a newer device gets sm_90 PTX,
/// which its driver JIT-compiles forward.
gpu::Target target_for(int sm) {
  gpu::Target t;
  t.sm = sm > 90 ? 90 : sm;
  t.arch_specific = sm == 90;
  return t;
}

/// A disk-cache artifact: a magic line, one line per header field, then the body (PTX, object
/// code). Fields hold no newline.
std::string join_artifact(const char* magic, const std::vector<std::string>& fields, const std::string& body) {
  return fmt::format("{}\n{}\n", magic, fmt::join(fields, "\n")) + body;
}
/// The `n` header fields and the body of an artifact with this magic; nullopt when the magic
/// differs or a line is missing.
std::optional<std::pair<std::vector<std::string>, std::string>> split_artifact(const std::string& s, const char* magic,
                                                                               size_t n) {
  size_t pos = 0;
  std::string line;
  if (!next_line(s, pos, line) || line != magic) return std::nullopt;
  std::vector<std::string> fields(n);
  for (auto& f : fields)
    if (!next_line(s, pos, f)) return std::nullopt;
  return std::make_pair(std::move(fields), s.substr(pos));
}

/// GPU artifact: "TLEGPU4", entry, shared_bytes, num_warps, the swizzled tensor maps ("arg:width"
/// separated by spaces), the compile stats (gpu::CompileStats' six numbers, in order), then the PTX.
std::string serialize_artifact(const gpu::Artifact& a) {
  std::string maps;
  for (auto [arg, width] : a.tma_swizzled) maps += fmt::format("{}{}:{}", maps.empty() ? "" : " ", arg, width);
  const gpu::CompileStats& st = a.stats;
  const std::string stats =
      fmt::format("{} {} {} {} {} {}", st.conversions, st.conversions_without_elimination, st.conversions_through_shared,
                  st.conversion_shared_bytes, st.barriers, st.loads_reordered);
  return join_artifact("TLEGPU4", {a.entry, std::to_string(a.shared_bytes), std::to_string(a.num_warps), maps, stats},
                       a.ptx);
}
std::optional<gpu::Artifact> parse_artifact(const std::string& s) {
  auto parts = split_artifact(s, "TLEGPU4", 5);
  if (!parts || parts->first[0].empty()) return std::nullopt;
  gpu::Artifact a;
  try {
    a.shared_bytes = std::stoi(parts->first[1]);
    a.num_warps = std::stoi(parts->first[2]);
    std::istringstream maps(parts->first[3]);
    for (std::string m; maps >> m;) {
      const size_t colon = m.find(':');
      if (colon == std::string::npos) return std::nullopt;
      const int arg = std::stoi(m.substr(0, colon)), width = std::stoi(m.substr(colon + 1));
      // box widths of swizzled maps: 32, 64 or 128 bytes of 1- to 8-byte elements
      if (arg < 0 || width < 4 || width > 128 || (width & (width - 1)) != 0) return std::nullopt;
      a.tma_swizzled.emplace_back(arg, width);
    }
    std::istringstream stats(parts->first[4]);
    gpu::CompileStats& st = a.stats;
    if (!(stats >> st.conversions >> st.conversions_without_elimination >> st.conversions_through_shared >>
          st.conversion_shared_bytes >> st.barriers >> st.loads_reordered))
      return std::nullopt;
  } catch (...) {
    return std::nullopt;
  }
  a.entry = parts->first[0];
  a.ptx = std::move(parts->second);
  return a;
}

/// CPU artifact: "TLECPU1", symbol, scratch_bytes, then the object code.
std::string serialize_object(const cpu::Object& o) {
  return join_artifact("TLECPU1", {o.symbol, std::to_string(o.scratch_bytes)}, o.bytes);
}
std::optional<cpu::Object> parse_object(const std::string& s) {
  auto parts = split_artifact(s, "TLECPU1", 2);
  if (!parts || parts->first[0].empty()) return std::nullopt;
  cpu::Object o;
  try {
    o.scratch_bytes = std::stoull(parts->first[1]);
  } catch (...) {
    return std::nullopt;
  }
  // Per-thread scratch of a real kernel is far below this (tiles hold at most 2^20 elements); a
  // larger value is a forged or damaged entry, which would make every launch fail to allocate.
  if (o.scratch_bytes > (uint64_t(1) << 36)) return std::nullopt;
  o.symbol = parts->first[0];
  o.bytes = std::move(parts->second);
  return o;
}

}  // namespace

std::string tle_build_version() { return fmt::format("{} {}", TLE_VERSION, kBuildId); }

std::string cpu_cache_key(const std::string& ir_text) {
  return fmt::format("tle-cpu-object\ntle {}\nllvm {}\nhost {}\n{}", tle_build_version(), LLVM_VERSION_STRING,
                     cpu::host_target(), ir_text);
}

std::string gpu_cache_key(const std::string& ir_text, const std::string& target_cpu, int ptx_version,
                          int driver_version, int num_warps, int num_stages, int maxnreg, bool warp_specialize,
                          bool tma, bool reorder_loads) {
  return fmt::format("tle-gpu-ptx\ntle {}\nllvm {}\ndriver {}\ntarget {} ptx{}\nnum_warps {}\nnum_stages {}\n"
                     "maxnreg {}\nwarp_specialize {}\ntma {}\nreorder_loads {}\n{}",
                     tle_build_version(), LLVM_VERSION_STRING, driver_version, target_cpu, ptx_version, num_warps,
                     num_stages, maxnreg, warp_specialize ? 1 : 0, tma ? 1 : 0, reorder_loads ? 1 : 0, ir_text);
}

namespace {

/// The CPU kernel of an optimized function, through the disk cache (as PTX is): the key is the
/// printed IR, the host target (triple, CPU, features) and the tle and LLVM versions.
std::shared_ptr<cpu::CompiledKernel> compile_cpu(const ir::Function& f) {
  const std::string key = cpu_cache_key(ir::print(f));
  DiskCache& disk = DiskCache::global();
  if (auto bytes = disk.get(key))
    if (auto o = parse_object(*bytes)) {
      try {
        return cpu::load(*o, f.name);
      } catch (const RuntimeError&) {
        // An entry that does not link (it passed the checksum, so written by an odd build):
        // compile afresh and replace it.
      }
    }
  cpu::Object o = cpu::compile_object(f);
  disk.put(key, serialize_object(o));
  return cpu::load(o, f.name);
}

}  // namespace

/// One compiled specialization: a CPU kernel, a loaded GPU kernel with its launch facts, or (for
/// the interpreter) the traced function.
struct Compiled {
  std::shared_ptr<cpu::CompiledKernel> cpu;
  std::unique_ptr<ir::Function> traced;  // Backend::Interp, and warp-specialized kernels on the CPU: the traced IR, before any pass
  std::optional<cuda::GpuKernel> gpu;
  int num_warps = 4;
  size_t shared_bytes = 0;
  int registers = 0, local_bytes = 0;  // GPU: per thread
  bool tma = false;                    // GPU: compiled with TMA (tensor maps encoded at each launch)
  std::vector<std::pair<int, int>> tma_swizzled;  // GPU: gpu::Artifact::tma_swizzled
  gpu::CompileStats compile_stats;                // GPU: gpu::Artifact::stats
  int mesh_args = -1;         // index of the first hidden mesh argument (ir::mesh_args_begin), -1: none
  bool mesh_barrier = false;  // traced a distributed_barrier (ir::Function::mesh_barrier)
  std::vector<std::pair<unsigned, SrcLoc>> mesh_remote_args;  // ir::Function::mesh_remote_args
};

class KernelState;
thread_local const KernelState* g_tracing = nullptr;  // the kernel this thread is tracing, if any

class KernelState {
 public:
  std::string name;
  std::vector<ParamSpec> params;
  TraceThunk thunk;
  SrcLoc loc;
  bool raw = false;  // a tle::raw_kernel (src/runtime/raw): messages use CUDA C++ parameter types

  std::shared_mutex mu;
  std::unordered_map<std::vector<uint64_t>, std::shared_ptr<Compiled>, KeyHash> cache;
  std::mutex compile_mu;

  /// UserError at loc when this thread is tracing a kernel: a kernel's lambda runs on the host,
  /// once per specialization, to record tile operations; a launch inside it would run (or, for
  /// the kernel being traced, wait for its own compile lock) at trace time, never on the device.
  void check_not_tracing(const char* what, const SrcLoc& loc) const {
    const frontend::TraceContext* c = frontend::TraceContext::current();
    if (!c) return;
    const bool self = g_tracing == this;
    throw UserError(loc, fmt::format("kernel {} is {} inside the lambda of kernel '{}' while it is traced{}; a "
                                     "kernel's lambda only records tile operations and cannot launch kernels: "
                                     "launch {} from host code, before or after launching '{}'",
                                     signature(), what, c->fn.name, self ? " (a kernel launching itself)" : "",
                                     name, c->fn.name));
  }

  std::string signature() const {
    std::vector<std::string> ps;
    for (auto& p : params) ps.push_back(param_str(p, raw));
    return fmt::format("{}{}({})", raw ? "raw " : "", name, fmt::join(ps, ", "));
  }

  Packed pack(const HostArg* args, size_t n, const SrcLoc& loc) const {
    if (n != params.size())
      throw UserError(loc, fmt::format("kernel {} takes {} argument{}, but {} were passed", signature(), params.size(),
                                       params.size() == 1 ? "" : "s", n));
    Packed pk;
    pk.constexprs.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const ParamSpec& p = params[i];
      const HostArg& a = args[i];
      auto bad = [&](const std::string& why) {
        return UserError(loc, fmt::format("argument {} of kernel {}: parameter is {}, {}", i + 1, signature(),
                                          param_str(p, raw), why));
      };
      switch (p.kind) {
        case ParamSpec::Pointer: {
          if (a.kind != HostArg::Pointer) throw bad(fmt::format("pass a pointer, not a {}", a.type_name));
          if (a.dl.present) check_dlpack(a, p.dtype, bad);
          else if (!a.untyped_pointer && a.pointee != p.dtype)
            throw bad(fmt::format("got a pointer to {}; pass a {}* (or cast the pointer explicitly)",
                                  dtype_name(a.pointee), dtype_name(p.dtype)));
          // Every element access assumes natural alignment (vector loads on the CPU, ld/st on the
          // GPU): a misaligned address would read the wrong bytes or fault.
          else if (const int size = byte_size(p.dtype); reinterpret_cast<uintptr_t>(a.p) % size != 0)
            throw bad(fmt::format("the {} {} is not aligned to the {}-byte size of {}; pass the address of an "
                                  "element (a byte offset that is a multiple of {})",
                                  a.type_name, a.p, size, dtype_name(p.dtype), size));
          uint64_t s = reinterpret_cast<uintptr_t>(a.p);
          pk.arg_slots.push_back(pk.slots.size());
          pk.slots.push_back(s);
          pk.key.push_back(p.specialize ? pow2_divisor(s) : 1);
          break;
        }
        case ParamSpec::Scalar: {
          DType d = p.dtype;
          uint64_t s = 0;
          bool one = false;
          if (is_int(d)) {
            int64_t v;
            if (a.kind == HostArg::Int) {
              if (!int_fits(d, a.i)) throw bad(fmt::format("the value {} does not fit in {}", a.i, dtype_name(d)));
              v = a.i;
            } else if (a.kind == HostArg::UInt) {
              if (!uint_fits(d, a.u)) throw bad(fmt::format("the value {} does not fit in {}", a.u, dtype_name(d)));
              v = static_cast<int64_t>(a.u);
            } else if (a.kind == HostArg::Bool) {
              v = a.b ? 1 : 0;
            } else {
              throw bad(fmt::format("got a {}; pass an integer (convert explicitly if truncation is meant)",
                                    a.type_name));
            }
            s = static_cast<uint64_t>(v);
            if (bit_width(d) < 64) s &= (uint64_t(1) << (d == DType::i1 ? 8 : bit_width(d))) - 1;
            one = v == 1 && d != DType::i1;
          } else {
            double v;
            if (a.kind == HostArg::Float) v = a.f;
            else if (a.kind == HostArg::Int) v = static_cast<double>(a.i);
            else if (a.kind == HostArg::UInt) v = static_cast<double>(a.u);
            else if (a.kind == HostArg::Half) v = f16_bits_to_f64(a.h);
            else if (a.kind == HostArg::BFloat) v = bf16_bits_to_f64(a.h);
            else throw bad(fmt::format("got a {}; pass a number", a.type_name));
            s = float_slot(d, v);
          }
          pk.arg_slots.push_back(pk.slots.size());
          pk.slots.push_back(s);
          // Integer specializations: equal to 1 (a constant in the kernel), or a multiple of 2, 4,
          // 8 or 16 (Triton: 16 only; the GPU passes may then vectorize accesses whose offsets it
          // scales). Key: 0 for the value 1, else the power of two (1: odd, zero, not an integer,
          // or a parameter JitOptions::do_not_specialize names).
          const bool divisible = is_int(d) && d != DType::i1 && s != 0;
          pk.key.push_back(!p.specialize ? 1 : one ? 0 : divisible ? pow2_divisor(s) : 1);
          break;
        }
        case ParamSpec::ConstexprInt:
        case ParamSpec::ConstexprBool: {
          int64_t v;
          if (a.kind == HostArg::Int) v = a.i;
          else if (a.kind == HostArg::UInt && a.u <= uint64_t(std::numeric_limits<int64_t>::max())) v = int64_t(a.u);
          else if (a.kind == HostArg::Bool) v = a.b;
          else throw bad(fmt::format("got a {}; pass an integer value", a.type_name));
          if (p.kind == ParamSpec::ConstexprBool && v != 0 && v != 1) throw bad("pass true or false");
          // The constexpr's C++ type must hold the value (a Constexpr<uint8_t> given 300 would wrap).
          if (p.kind == ParamSpec::ConstexprInt && !int_fits(p.dtype, v))
            throw bad(fmt::format("the value {} does not fit in {}", v, dtype_name(p.dtype)));
          pk.constexprs[i].i = v;
          pk.key.push_back(static_cast<uint64_t>(v));
          break;
        }
        case ParamSpec::TensorDesc: {
          if (a.kind != HostArg::TensorDesc) throw bad(fmt::format("pass a tle::TensorDescriptor, not a {}", a.type_name));
          if (a.pointee != p.dtype || a.desc.rank != p.rank)
            throw bad(fmt::format("got a TensorDescriptor<{}, {}>; build the descriptor with the parameter's element "
                                  "type and rank",
                                  dtype_name(a.pointee), a.desc.rank));
          // Arguments: the tensor map (128 bytes, encoded at a GPU launch that uses TMA, else
          // zeros), the base, the shape, the strides but the innermost (which is 1).
          pk.tensor_maps.emplace_back(i, pk.slots.size());
          pk.arg_slots.push_back(pk.slots.size());
          pk.slots.resize(pk.slots.size() + 16, 0);
          pk.arg_slots.push_back(pk.slots.size());
          pk.slots.push_back(reinterpret_cast<uintptr_t>(a.p));
          for (int d = 0; d < p.rank; ++d) {
            pk.arg_slots.push_back(pk.slots.size());
            pk.slots.push_back(static_cast<uint64_t>(a.desc.shape[d]));
          }
          for (int d = 0; d + 1 < p.rank; ++d) {
            pk.arg_slots.push_back(pk.slots.size());
            pk.slots.push_back(static_cast<uint64_t>(a.desc.strides[d]));
          }
          pk.constexprs[i].block.assign(a.desc.block, a.desc.block + p.rank);
          // Whether the innermost extent is a whole number of 16-byte chunks: only then may TMA
          // move this descriptor's blocks (a TMA store writes whole 16-byte chunks, past the
          // shape into the row's padding otherwise; passes/expand_descriptors.cpp).
          const bool inner16 = (a.desc.shape[p.rank - 1] * byte_size(p.dtype)) % 16 == 0;
          pk.constexprs[i].i = inner16 ? 1 : 0;
          pk.key.push_back(block_key(a.desc) | (inner16 ? uint64_t(1) << 62 : 0));
          break;
        }
        case ParamSpec::ConstexprFloat: {
          double v;
          if (a.kind == HostArg::Float) v = a.f;
          else if (a.kind == HostArg::Int) v = static_cast<double>(a.i);
          else if (a.kind == HostArg::UInt) v = static_cast<double>(a.u);
          else throw bad(fmt::format("got a {}; pass a number", a.type_name));
          pk.constexprs[i].f = v;
          uint64_t bits;
          std::memcpy(&bits, &v, 8);
          pk.key.push_back(bits);
          break;
        }
      }
    }
    return pk;
  }

  /// Traces the specialization described by `pk` into a fresh function (no passes run).
  std::unique_ptr<ir::Function> trace(const void* fn, const Packed& pk) {
    auto f = std::make_unique<ir::Function>();
    f->name = name;
    f->loc = loc;
    std::vector<TraceParam> tp = pk.constexprs;
    ir::Builder b(&f->entry());
    for (size_t i = 0; i < params.size(); ++i) {
      const ParamSpec& p = params[i];
      if (is_constexpr(p)) continue;
      if (p.kind == ParamSpec::TensorDesc) {
        // The descriptor's arguments (docs/ir.md, "Tensor descriptors"): tensor map, base, shape,
        // strides; the innermost stride is the constant 1 (checked when it was built). The base
        // is 16-byte aligned and the strides multiples of 16 bytes.
        auto add = [&](ir::Type t, const std::string& n, int32_t div, bool map = false) {
          ir::ArgInfo info;
          info.name = fmt::format("arg{}.{}", i, n);
          info.divisibility = div;
          info.tensor_map = map;
          f->arg_info.push_back(info);
          return f->entry().add_arg(t);
        };
        std::vector<ir::Value*>& vs = tp[i].values;
        vs.push_back(add(ir::scalar_type(DType::ptr, DType::u8), "map", 16, true));
        vs.push_back(add(ir::scalar_type(DType::ptr, p.dtype), "base", 16));
        // The innermost extent's divisibility says whether TMA may move its blocks (16 bytes).
        const int32_t inner_div =
            tp[i].i ? static_cast<int32_t>(std::max<int64_t>(1, 16 / byte_size(p.dtype))) : 1;
        for (int d = 0; d < p.rank; ++d)
          vs.push_back(add(ir::scalar_type(DType::i64), fmt::format("shape{}", d), d == p.rank - 1 ? inner_div : 1));
        const int32_t sdiv = static_cast<int32_t>(std::max<int64_t>(1, 16 / byte_size(p.dtype)));
        for (int d = 0; d + 1 < p.rank; ++d)
          vs.push_back(add(ir::scalar_type(DType::i64), fmt::format("stride{}", d), sdiv));
        vs.push_back(b.constant(ir::scalar_type(DType::i64), int64_t(1), loc));
        continue;
      }
      ir::Value* v;
      ir::ArgInfo info;
      info.name = fmt::format("arg{}", i);
      if (p.kind == ParamSpec::Pointer) {
        v = f->entry().add_arg(ir::scalar_type(DType::ptr, p.dtype));
      } else {
        v = f->entry().add_arg(ir::scalar_type(p.dtype));
      }
      info.divisibility = pk.key[i] == 0 ? 1 : static_cast<int32_t>(pk.key[i]);
      f->arg_info.push_back(info);
      // Integer scalars equal to 1 are specialized: the kernel sees the constant.
      if (p.kind == ParamSpec::Scalar && is_int(p.dtype) && pk.key[i] == 0)
        v = b.constant(ir::scalar_type(p.dtype), int64_t(1), loc);
      tp[i].value = v;
    }
    struct Tracing {  // which kernel this thread traces (check_not_tracing)
      const KernelState* prev = g_tracing;
      explicit Tracing(const KernelState* k) { g_tracing = k; }
      ~Tracing() { g_tracing = prev; }
    } tracing(this);
    frontend::trace_into(*f, thunk, fn, tp.data());
    static const bool quiet = [] {
      const char* q = std::getenv("TLE_QUIET");
      return q && std::strcmp(q, "1") == 0;
    }();
    if (!quiet) {
      // Once per process and place: a kernel is traced again for every specialization, num_warps
      // and num_stages, and for Kernel::ir / ptx.
      static std::mutex m;
      static std::set<std::string> printed;
      for (const frontend::BufferReadWarning& w : frontend::unwritten_buffer_reads(*f)) {
        std::string text = fmt::format("{}:{}: tle: warning: {} (TLE_QUIET=1 silences this)\n", w.loc.file, w.loc.line,
                                       w.message);
        std::lock_guard<std::mutex> lock(m);
        if (printed.insert(text).second) std::fputs(text.c_str(), stderr);
      }
    }
    return f;
  }

  /// Runs f (a trace, the passes, a compile) and adds to a UserError it throws at another line (an
  /// op in the lambda) a note naming the launch at `loc` and its constexpr arguments: the values
  /// that made the op invalid (BLOCK = 0, say) come from that launch.
  template <class F> auto noting_launch(const Packed& pk, const SrcLoc& loc, F&& f) const {
    try {
      return f();
    } catch (const UserError& e) {
      if (!loc.known() || (e.line() == loc.line && e.file() == loc.file)) throw;
      std::vector<std::string> cs;
      for (size_t i = 0; i < params.size(); ++i) {
        const TraceParam& t = pk.constexprs[i];
        switch (params[i].kind) {
          case ParamSpec::ConstexprInt: cs.push_back(fmt::format("argument {} = {}", i + 1, t.i)); break;
          case ParamSpec::ConstexprBool: cs.push_back(fmt::format("argument {} = {}", i + 1, t.i != 0)); break;
          case ParamSpec::ConstexprFloat: cs.push_back(fmt::format("argument {} = {}", i + 1, t.f)); break;
          default: break;
        }
      }
      const std::string note =
          fmt::format("\n{}:{}: note: kernel {} was traced for this launch{}{}", loc.file, loc.line, signature(),
                      cs.empty() ? "" : ", constexpr ", fmt::join(cs, ", "));
      std::string file = e.file();
      SrcLoc at;
      at.file = file.c_str();
      at.line = e.line();
      throw UserError(at, e.message() + note);
    }
  }

  /// The compiled specialization for `key` (pk.key extended with the backend facts), compiling
  /// it on a miss; `loc` is the launch's (noting_launch). The interpreter gets the traced
  /// function, unoptimized: it is the reference for the pass pipeline as much as for the code
  /// generators.
  std::shared_ptr<Compiled> get(const void* fn, const Packed& pk, const std::vector<uint64_t>& key, Backend backend,
                                const gpu::Options& opt, const SrcLoc& loc) {
    {
      std::shared_lock lk(mu);
      auto it = cache.find(key);
      if (it != cache.end()) return it->second;
    }
    std::lock_guard compile_lock(compile_mu);
    {
      std::shared_lock lk(mu);
      auto it = cache.find(key);
      if (it != cache.end()) return it->second;
    }
    auto compiled = std::make_shared<Compiled>();
    noting_launch(pk, loc, [&] {
      if (backend != Backend::GPU) check_gpu_compile(fn, pk, opt);
      auto f = trace(fn, pk);
      compiled->mesh_args = ir::mesh_args_begin(*f);
      compiled->mesh_barrier = f->mesh_barrier;
      compiled->mesh_remote_args = f->mesh_remote_args;
      // A warp-specialized kernel's roles run at once and wait for each other: on the host the
      // interpreter runs them (interleaved at their waits); the CPU backend runs programs' statements in order.
      if (backend == Backend::Interp || (backend != Backend::GPU && ir::find_warp_specialize(*f))) {
        ir::verify(*f);
        compiled->traced = std::move(f);
        return;
      }
      passes::run_pipeline(*f, /*keep_tma_descriptors=*/backend == Backend::GPU);
      if (backend == Backend::GPU) compile_gpu(*f, opt, *compiled);
      else compiled->cpu = compile_cpu(*f);
    });
    std::unique_lock lk(mu);
    cache.emplace(key, compiled);
    return compiled;
  }

  /// Whether a loaded GPU kernel spills registers. Local memory alone does not say so (a stack
  /// frame, e.g. of a libdevice call, is local memory too): ptxas's "N bytes spill stores" does,
  /// when the driver JIT compiled the PTX now; when it did not (its log is empty: the driver's own
  /// JIT cache had the module), local memory with the registers at their cap for this many warps
  /// (255, or the 65536-register file split over the program's threads) counts as spilling.
  static bool spills(const std::string& jit_log, int local_bytes, int registers, int num_warps) {
    if (local_bytes <= 0) return false;
    if (!jit_log.empty()) {
      for (size_t at = jit_log.find(" bytes spill stores"); at != std::string::npos;
           at = jit_log.find(" bytes spill stores", at + 1)) {
        size_t b = at;
        while (b > 0 && std::isdigit(static_cast<unsigned char>(jit_log[b - 1]))) --b;
        if (b < at && std::stol(jit_log.substr(b, at - b)) > 0) return true;
      }
      return false;
    }
    const int cap = std::min(255, 65536 / (32 * std::max(1, num_warps)) / 8 * 8);
    return registers >= cap - 8;
  }

  /// TLE_STATS (docs/ARCHITECTURE.md, "Compile stats"): "1" prints one line per GPU compile
  /// (a launch's, Kernel::ptx's, TLE_CHECK_GPU's) to stderr; any other value but "0" is a file
  /// that receives one JSON object per line (appended, one write per line, so that several
  /// processes may share it; `ptx_hash` tells specializations apart). A file that cannot be
  /// written is a warning, once: the stats are diagnostics, never a reason for a launch to fail.
  void report_stats(const gpu::CompileStats& st, int shared_bytes, const gpu::Options& opt, const std::string& ptx) const {
    static const std::string mode = [] {
      const char* e = std::getenv("TLE_STATS");
      return std::string(e && std::strcmp(e, "0") != 0 ? e : "");
    }();
    if (mode.empty()) return;
    if (mode == "1") {
      // removed < 0 when the elimination's propagation placed a conversion forward inference would not
      const int removed = st.conversions_without_elimination > 0
                              ? static_cast<int>(std::lround(100.0 * (st.conversions_without_elimination - st.conversions) /
                                                             st.conversions_without_elimination))
                              : 0;
      std::string line = fmt::format(
          "tle: stats: {} (num_warps {}, num_stages {}): {} convert_layout ({} without elimination, {}% removed), {} "
          "through shared memory ({} bytes), {} barriers, {} bytes of shared memory, {} loads reordered\n",
          signature(), opt.num_warps, opt.num_stages, st.conversions, st.conversions_without_elimination, removed,
          st.conversions_through_shared, st.conversion_shared_bytes, st.barriers, shared_bytes, st.loads_reordered);
      std::fputs(line.c_str(), stderr);
      return;
    }
    auto json = [](const std::string& text) {
      std::string out;
      for (char c : text) {
        if (c == '"' || c == '\\') out += '\\';
        if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", static_cast<int>(c));
        else out += c;
      }
      return out;
    };
    const std::string line = fmt::format(
        "{{\"kernel\": \"{}\", \"file\": \"{}\", \"line\": {}, \"ptx_hash\": \"{:016x}\", \"num_warps\": {}, "
        "\"num_stages\": {}, \"conversions\": {}, \"conversions_without_elimination\": {}, "
        "\"conversions_through_shared\": {}, \"conversion_shared_bytes\": {}, \"barriers\": {}, \"shared_bytes\": {}, "
        "\"loads_reordered\": {}}}\n",
        json(signature()), json(loc.file ? loc.file : ""), loc.line, std::hash<std::string>{}(ptx), opt.num_warps,
        opt.num_stages, st.conversions, st.conversions_without_elimination, st.conversions_through_shared,
        st.conversion_shared_bytes, st.barriers, shared_bytes, st.loads_reordered);
    static std::mutex mu;
    static bool warned = false;
    std::lock_guard lk(mu);
    std::FILE* out = std::fopen(mode.c_str(), "ab");
    bool ok = out && std::fwrite(line.data(), 1, line.size(), out) == line.size();
    if (out) ok = std::fclose(out) == 0 && ok;
    if (!ok && !warned) {
      warned = true;
      std::fprintf(stderr, "tle: warning: TLE_STATS: cannot append to %s: %s; no stats are written\n", mode.c_str(),
                   std::strerror(errno));
    }
  }

  /// TLE_CHECK_GPU (docs/testing.md, "Portability"): with it set, a CPU or interpreter
  /// specialization is also compiled for the GPU (sm_90a PTX, the launch's options), so a kernel
  /// written on a machine without a GPU fails at its first launch where the GPU backend would
  /// refuse it. "1": compile only; any other value is a directory that receives the PTX, one file
  /// per specialization (<kernel>.<hash of the PTX>.ptx), for ptxas to assemble.
  void check_gpu_compile(const void* fn, const Packed& pk, const gpu::Options& opt) {
    static const std::string mode = [] {
      const char* e = std::getenv("TLE_CHECK_GPU");
      return std::string(e && std::strcmp(e, "0") != 0 ? e : "");
    }();
    if (mode.empty()) return;
    auto f = trace(fn, pk);
    passes::run_pipeline(*f, /*keep_tma_descriptors=*/true);
    gpu::Artifact art = gpu::compile(*f, target_for(90), with_tma(opt), false);
    report_stats(art.stats, art.shared_bytes, opt, art.ptx);
    if (mode == "1") return;
    const std::string path = fmt::format("{}/{}.{:016x}.ptx", mode, name, std::hash<std::string>{}(art.ptx));
    std::FILE* out = std::fopen(path.c_str(), "wb");
    bool ok = out && std::fwrite(art.ptx.data(), 1, art.ptx.size(), out) == art.ptx.size();
    if (out) ok = std::fclose(out) == 0 && ok;
    if (!ok) throw RuntimeError("TLE_CHECK_GPU", fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  }

  /// GPU compile of an optimized function for the current context's device, through the disk
  /// cache, and module load.
  void compile_gpu(ir::Function& f, const gpu::Options& launch_opt, Compiled& out) {
    const gpu::Options opt = with_tma(launch_opt);
    const cuda::Driver& d = cuda::require_driver("cuModuleLoadDataEx");
    CUdevice dev = cuda::current_device();
    int major = 0, minor = 0;
    cuda::check(d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute");
    cuda::check(d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cuDeviceGetAttribute");
    if (major < 8)
      throw RuntimeError("tle::launch", fmt::format("the current device is sm_{}{}; tle's GPU backend needs sm_80 or "
                                                    "newer: launch with Grid::backend(Backend::CPU) or TLE_BACKEND=cpu",
                                                    major, minor));
    gpu::Target target = target_for(major * 10 + minor);
    out.tma = opt.tma && target.sm == 90 && target.arch_specific;
    std::string ir_text = ir::print(f);
    // kBuildId (a hash of libtle's sources) makes PTX cached by a different build of tle a miss.
    std::string key = gpu_cache_key(ir_text, target.cpu(), target.ptx_version, d.version, opt.num_warps,
                                    opt.num_stages, opt.maxnreg, opt.warp_specialize, opt.tma, opt.reorder_loads);
    DiskCache& disk = DiskCache::global();
    std::optional<gpu::Artifact> art;
    if (auto bytes = disk.get(key)) art = parse_artifact(*bytes);
    std::vector<cuda::DumpFile> extra = {{name + ".tir", ir_text}};
    if (!art) {
      art = gpu::compile(f, target, opt, /*keep_llvm_ir=*/true);
      if (!art->llvm_ir.empty()) extra.push_back({name + ".ll", art->llvm_ir});
      art->llvm_ir.clear();
      disk.put(key, serialize_artifact(*art));
    }
    // A kernel calling CUDA device functions (tle::cuda_function) is linked with their NVRTC
    // code by nvJitLink into a cubin (src/runtime/raw/cuda_compile.hpp).
    if (raw::has_cuda_calls(f)) out.gpu.emplace(raw::link_and_load(f, art->ptx, art->entry, target.sm, extra));
    else out.gpu.emplace(cuda::GpuKernel::from_ptx(art->ptx, art->entry, extra));
    out.num_warps = art->num_warps > 0 ? art->num_warps : opt.num_warps;
    out.shared_bytes = static_cast<size_t>(std::max(0, art->shared_bytes));
    out.tma_swizzled = art->tma_swizzled;
    out.compile_stats = art->stats;
    report_stats(art->stats, art->shared_bytes, opt, art->ptx);
    out.registers = out.gpu->attribute(CU_FUNC_ATTRIBUTE_NUM_REGS);
    out.local_bytes = out.gpu->attribute(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
    // A kernel that spills is slow in a way nothing else shows (issue: a config 22x slower than
    // its best): say so once, when it is compiled.
    static const bool quiet = [] {
      const char* q = std::getenv("TLE_QUIET");
      return q && std::strcmp(q, "1") == 0;
    }();
    if (spills(out.gpu->module()->info_log(), out.local_bytes, out.registers, out.num_warps) && !quiet)
      std::fprintf(stderr,
                   "tle: warning: kernel %s (num_warps %d, num_stages %d) spills: %d bytes of local memory per thread "
                   "beside %d registers; smaller tiles, more warps or fewer stages usually avoid it (TLE_QUIET=1 "
                   "silences this)\n",
                   signature().c_str(), opt.num_warps, opt.num_stages, out.local_bytes, out.registers);
  }

  /// UserError at `loc` unless every DLPack tensor argument is on a device this backend reads:
  /// kDLCPU or kDLCUDAHost on the CPU (and the interpreter); kDLCUDA (on the context's device),
  /// kDLCUDAManaged or kDLCUDAHost on the GPU.
  void check_dlpack_devices(const HostArg* args, size_t n, Backend backend, const SrcLoc& loc) const {
    const bool on_gpu = backend == Backend::GPU;
    const char* host_backend_name = backend == Backend::Interp ? "interp" : "CPU";
    for (size_t i = 0; i < n; ++i) {
      const HostArg& a = args[i];
      if (params[i].kind != ParamSpec::Pointer || !a.dl.present) continue;
      const int type = a.dl.device_type;
      const std::string where = dl_device_str(type, a.dl.device_id);
      if (!on_gpu) {
        if (type == kDLCPU || type == kDLCUDAHost) continue;
        throw UserError(loc, fmt::format("argument {} of kernel {}: the {} is on {}, but this launch runs on the "
                                         "{} backend, which reads kDLCPU or kDLCUDAHost tensors; pass a host tensor{}",
                                         i + 1, signature(), a.type_name, where, host_backend_name,
                                         type == kDLCUDA || type == kDLCUDAManaged
                                             ? ", or run on the GPU (Grid(...).backend(tle::Backend::GPU))"
                                             : ""));
      }
      if (type == kDLCUDAManaged || type == kDLCUDAHost) continue;
      if (type == kDLCUDA) {
        const cuda::Driver& d = cuda::require_driver("cuDeviceGet");
        CUdevice cur = cuda::current_device(), want = -1;
        if (d.cuDeviceGet(&want, a.dl.device_id) == CUDA_SUCCESS && want == cur) continue;
        int ordinal = static_cast<int>(cur);  // CUdevice handles are the ordinals
        throw UserError(loc, fmt::format("argument {} of kernel {}: the {} is on {}, but tle's CUDA context is on "
                                         "device {}; make that device's context current before launching, or "
                                         "move the tensor to device {}",
                                         i + 1, signature(), a.type_name, where, ordinal, ordinal));
      }
      throw UserError(loc, fmt::format("argument {} of kernel {}: the {} is on {}, but this launch runs on the GPU, "
                                       "which reads kDLCUDA, kDLCUDAManaged or kDLCUDAHost tensors; pass a CUDA "
                                       "tensor{}",
                                       i + 1, signature(), a.type_name, where,
                                       type == kDLCPU ? ", or run on the CPU (TLE_BACKEND=cpu or "
                                                        "Grid(...).backend(tle::Backend::CPU))"
                                                      : ""));
    }
  }

  /// UserError at `loc` unless every pointer argument is memory the GPU can address (device,
  /// managed, or registered/pinned host memory). DeviceBuffers and null pointers pass unchecked.
  void check_device_pointers(const HostArg* args, size_t n, const SrcLoc& loc) const {
    const cuda::Driver* d = nullptr;
    for (size_t i = 0; i < n; ++i) {
      const HostArg& a = args[i];
      const bool addr = params[i].kind == ParamSpec::Pointer || params[i].kind == ParamSpec::TensorDesc;
      if (!addr || a.device_buffer || a.p == nullptr) continue;
      if (!d) d = &cuda::require_driver("cuPointerGetAttribute");
      unsigned int type = 0;
      CUresult r = d->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                            static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(a.p)));
      if (r == CUDA_SUCCESS && (type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_HOST || type == CU_MEMORYTYPE_UNIFIED))
        continue;
      throw UserError(loc, fmt::format("argument {} of kernel {}: the pointer {} is host memory the GPU cannot "
                                       "address, but this launch runs on the GPU; pass device memory (a "
                                       "tle::DeviceBuffer<T>, or memory from cudaMalloc/cuMemAlloc), or run on "
                                       "the CPU (TLE_BACKEND=cpu or Grid(...).backend(tle::Backend::CPU))",
                                       i + 1, signature(), a.p));
    }
  }
};

KernelState* kernel_create(const char* name, const std::vector<ParamSpec>& params, TraceThunk thunk,
                           const SrcLoc& loc, const std::vector<int>& do_not_specialize) {
  auto k = std::make_unique<KernelState>();
  k->name = name ? name : "kernel";
  k->params = params;
  for (int i : do_not_specialize) {
    if (i < 0 || i >= static_cast<int>(params.size()))
      throw UserError(loc, fmt::format("do_not_specialize: {} is not a parameter index of kernel {} ({})", i,
                                       k->signature(),
                                       params.empty() ? "it has none" : fmt::format("0 to {}", params.size() - 1)));
    ParamSpec& p = k->params[i];
    const bool integer = p.kind == ParamSpec::Scalar && is_int(p.dtype) && p.dtype != DType::i1;
    if (!integer && p.kind != ParamSpec::Pointer)
      throw UserError(loc, fmt::format("do_not_specialize: parameter {} of kernel {} is a {}, which has no "
                                       "specialization to turn off (only integer Tile<T> scalars and Ptr<T> "
                                       "pointers do{})",
                                       i, k->signature(), param_str(p),
                                       is_constexpr(p) ? "; a Constexpr is the specialization itself" : ""));
    p.specialize = false;
  }
  k->thunk = thunk;
  k->loc = loc;
  return k.release();
}

void kernel_destroy(KernelState* k) noexcept { delete k; }

namespace {
/// The compiled specialization of a prepared launch (its packed arguments in `pk`).
std::shared_ptr<Compiled> specialization(KernelState* k, const void* fn, const LaunchOptions& opts,
                                         PreparedLaunch&& p, Packed& pk, const SrcLoc& loc) {
  pk = Packed{std::move(p.slots), std::move(p.constexprs), std::move(p.key), std::move(p.arg_slots),
              std::move(p.tensor_maps)};
  std::vector<uint64_t> key = pk.key;
  if (p.on_gpu) {
    CUcontext ctx = cuda::ensure_context();
    key.push_back(1);
    key.push_back(static_cast<uint64_t>(opts.num_warps));
    key.push_back(static_cast<uint64_t>(opts.num_stages));
    key.push_back(static_cast<uint64_t>(opts.maxnreg));
    key.push_back(reinterpret_cast<uintptr_t>(ctx));
  } else {
    key.push_back(p.backend == Backend::Interp ? 2 : 0);
  }
  return k->get(fn, pk, key, p.backend, gpu_options(opts), loc);
}
}  // namespace

namespace {
thread_local LaunchProbe* t_probe = nullptr;
}  // namespace

LaunchProbe* set_launch_probe(LaunchProbe* p) noexcept { return std::exchange(t_probe, p); }

namespace {
void launch_prepared(KernelState* k, const void* fn, const Grid3& grid, const LaunchOptions& opts,
                     const HostArg* args, size_t nargs, const SrcLoc& loc, const MeshRankContext* rank);
}  // namespace

void kernel_launch(KernelState* k, const void* fn, const Grid3& grid, const LaunchOptions& opts,
                   const HostArg* args, size_t nargs, const SrcLoc& loc) {
  if (LaunchProbe* probe = t_probe) {  // the autotuner's probe: trace or compile, run nothing
    if (probe->mode == LaunchProbe::Trace) {
      check_options(opts, loc);
      probe->ir += k->signature() + "\n" + kernel_ir(k, fn, args, nargs, false, loc);
    } else {
      probe->stats.push_back(kernel_stats(k, fn, opts, args, nargs, loc));
    }
    return;
  }
  // Inside Mesh::run the rank's backend and stream are the defaults (tle/mesh.hpp).
  const MeshRankContext* rank = current_mesh_rank();
  LaunchOptions ranked;
  if (rank) {
    ranked = opts;
    // A host mesh runs on the host backend chosen (the interpreter under TLE_BACKEND=interp).
    if (ranked.backend < 0)
      ranked.backend = static_cast<int>(rank->backend == Backend::GPU        ? Backend::GPU
                                        : default_backend() == Backend::Interp ? Backend::Interp
                                                                               : Backend::CPU);
    if (!ranked.stream && ranked.backend == static_cast<int>(Backend::GPU)) ranked.stream = rank->stream;
  }
  const LaunchOptions& o = rank ? ranked : opts;
  launch_prepared(k, fn, grid, o, args, nargs, loc, rank);
}

namespace {
/// The hidden mesh arguments of a launch of `c` (none when it uses no mesh primitive): UserError
/// at loc outside Mesh::run, on a backend of the other kind than the mesh's, or with more
/// programs than distributed_barrier has counters.
void add_mesh_args(const KernelState& k, const Compiled& c, const MeshRankContext* rank, bool on_gpu,
                   const int64_t g[3], Packed& pk, const SrcLoc& loc) {
  if (c.mesh_args < 0) return;
  if (!rank)
    throw UserError(loc, fmt::format("kernel {} uses the device mesh (shard_id, num_shards, remote, signal, "
                                     "signal_wait or distributed_barrier) but is launched outside a mesh; launch it "
                                     "inside tle::Mesh::run (tle/mesh.hpp), which says which rank each launch is",
                                     k.signature()));
  if (on_gpu != (rank->backend == Backend::GPU))
    throw UserError(loc, fmt::format("kernel {} runs on the {} backend inside a mesh of {} ranks, whose symmetric "
                                     "memory is {}; launch it on the mesh's backend (leave Grid::backend unset)",
                                     k.signature(), on_gpu ? "gpu" : "host", backend_name(rank->backend),
                                     rank->backend == Backend::GPU ? "device memory" : "host memory"));
  if (c.mesh_barrier && g[0] * g[1] * g[2] > rank->barrier_programs)
    throw UserError(loc, fmt::format("kernel {} calls distributed_barrier with a grid of {}x{}x{} programs; the "
                                     "barrier has counters for {} programs per launch: launch fewer (loop inside "
                                     "the programs)",
                                     k.signature(), g[0], g[1], g[2], rank->barrier_programs));
  for (const auto& [arg, at] : c.mesh_remote_args) {
    const uint64_t p = pk.slots.at(pk.arg_slots.at(arg));
    const uint64_t lo = reinterpret_cast<uintptr_t>(rank->local_base);
    if (p != 0 && (p < lo || p >= lo + rank->stride))  // null: an optional pointer (masked off)
      throw UserError(loc, fmt::format("kernel {}: remote() at {}:{} moves pointers derived from the pointer {:#x} "
                                       "passed to this launch, which is not in rank {}'s symmetric memory; pass "
                                       "Rank::local of a SymmetricBuffer (mesh.alloc_symmetric) of the launching rank",
                                       k.signature(), at.file, at.line, p, rank->rank));
  }
  const uint64_t values[] = {static_cast<uint32_t>(rank->rank), static_cast<uint32_t>(rank->size), rank->stride,
                             reinterpret_cast<uintptr_t>(rank->scratch), static_cast<uint64_t>(rank->timeout_ns)};
  static_assert(std::size(values) == static_cast<size_t>(ir::MeshArg::Count));
  for (uint64_t v : values) {
    pk.arg_slots.push_back(pk.slots.size());
    pk.slots.push_back(v);
  }
}

void launch_prepared(KernelState* k, const void* fn, const Grid3& grid, const LaunchOptions& opts,
                     const HostArg* args, size_t nargs, const SrcLoc& loc, const MeshRankContext* rank) {
  check_options(opts, loc);
  PreparedLaunch p = prepare_launch(k, grid, opts, args, nargs, loc);
  if (p.empty) return;  // rule E08: nothing to run, outputs untouched
  const bool on_gpu = p.on_gpu;
  const int64_t g[3] = {grid.x, grid.y, grid.z};
  Packed pk;
  std::shared_ptr<Compiled> compiled;
  try {
    compiled = specialization(k, fn, opts, std::move(p), pk, loc);
  } catch (const RuntimeError& e) {
    // A first launch inside a stream capture compiles and loads a module; a Global or
    // ThreadLocal capture may refuse the load (and is invalid after it).
    if (!on_gpu || !stream_capturing(opts.stream)) throw;
    throw RuntimeError(e.call(),
                       fmt::format("{} (kernel {} launched at {}:{} for the first time with these argument kinds "
                                   "while its stream is being captured into a CUDA graph: the driver refused to "
                                   "load its module during the capture. Launch it once before capturing (a warm-up "
                                   "launch compiles and loads it), or capture with CaptureMode::Relaxed)",
                                   e.message(), k->signature(), loc.file, loc.line),
                       e.log());
  }
  // A GPU kernel compiled with TMA reads the descriptors' CUtensorMaps (encoded per launch: the
  // base and shape change between launches of one specialization).
  if (on_gpu && compiled->tma)
    for (auto [param, slot] : pk.tensor_maps) {
      if (!passes::tma_block_ok(args[param].pointee, pk.constexprs[param].block)) continue;
      int width = 0;  // a swizzled box for the map of this kernel argument (IR argument index)
      for (auto [arg, w] : compiled->tma_swizzled)
        if (static_cast<size_t>(arg) < pk.arg_slots.size() && pk.arg_slots[static_cast<size_t>(arg)] == slot) width = w;
      encode_tensor_map(args[param], &pk.slots[slot], width);
    }
  add_mesh_args(*k, *compiled, rank, on_gpu, g, pk, loc);
  std::vector<void*> ptrs = pk.arg_pointers();
  if (compiled->traced) {
    // A fault of an access (an unmapped pointer) is a RuntimeError naming the op (interp.cpp).
    interp::run(*compiled->traced, ptrs.data(), g);
    return;
  }
  if (!on_gpu) {
    // A mesh kernel's programs may wait for other ranks' (signal_wait): each rank runs its own
    // in order on its thread, not on the thread pool, whose launches run one at a time.
    cpu::launch(*compiled->cpu, ptrs.data(), g, loc, /*in_order=*/compiled->mesh_args >= 0);
    return;
  }
  // cuLaunchKernel copies the parameter values before it returns, so the slots may die after it.
  compiled->gpu->launch(cuda::Dim3{unsigned(g[0]), unsigned(g[1]), unsigned(g[2])},
                        cuda::Dim3{unsigned(32 * compiled->num_warps), 1, 1}, compiled->shared_bytes,
                        static_cast<CUstream>(opts.stream), ptrs.empty() ? nullptr : ptrs.data());
  // TLE_LAUNCH_BLOCKING=1: wait for the kernel, so that a fault is reported here, naming it, and
  // its results are visible when the launch returns.
  sync_if_launch_blocking(opts.stream, [&] {
    return fmt::format("kernel {} launched at {}:{}, grid {}x{}x{}, {} warps", k->signature(), loc.file, loc.line, g[0],
                       g[1], g[2], compiled->num_warps);
  });
}

}  // namespace

bool stream_capturing(void* stream) {
  const cuda::Driver* d = cuda::driver();
  if (!d) return false;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (d->cuStreamIsCapturing(static_cast<CUstream>(stream), &status) != CUDA_SUCCESS) return false;
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

void sync_if_launch_blocking(void* stream, const std::function<std::string()>& what) {
  static const bool blocking = [] {
    const char* lb = std::getenv("TLE_LAUNCH_BLOCKING");
    return lb && *lb && std::strcmp(lb, "0") != 0;
  }();
  if (!blocking) return;
  // A stream being captured into a CUDA graph runs nothing yet, and waiting on it would
  // invalidate the capture: the launch is only recorded.
  if (stream_capturing(stream)) return;
  const cuda::Driver& d = cuda::require_driver("cuStreamSynchronize");
  CUresult r = d.cuStreamSynchronize(static_cast<CUstream>(stream));
  if (r != CUDA_SUCCESS)
    throw RuntimeError("cuStreamSynchronize",
                       fmt::format("{}: {} (TLE_LAUNCH_BLOCKING: {}; it failed while running, or earlier work on its "
                                   "stream did)",
                                   cuda::error_name(r), cuda::error_string(r), what()));
}

std::string kernel_ptx(KernelState* k, const void* fn, int sm, const LaunchOptions& opts, const HostArg* args,
                       size_t nargs, const SrcLoc& loc) {
  k->check_not_tracing("compiled to PTX (Kernel::ptx)", loc);
  Packed pk = k->pack(args, nargs, loc);
  if (sm < 80)
    throw UserError(loc, fmt::format("target sm_{}: the GPU backend needs sm_80 or newer (mma.sync bf16, cp.async, "
                                     "max.NaN, cvt.rn.bf16); ask for 80, 86, 89 or 90",
                                     sm));
  check_options(opts, loc);
  return k->noting_launch(pk, loc, [&] {
    auto f = k->trace(fn, pk);
    passes::run_pipeline(*f, /*keep_tma_descriptors=*/true);
    const gpu::Options o = with_tma(gpu_options(opts));
    gpu::Artifact art = gpu::compile(*f, target_for(sm), o, false);
    k->report_stats(art.stats, art.shared_bytes, o, art.ptx);
    return std::move(art.ptx);
  });
}

std::string kernel_ir(KernelState* k, const void* fn, const HostArg* args, size_t nargs, bool optimized,
                      const SrcLoc& loc) {
  k->check_not_tracing("traced (Kernel::ir)", loc);
  Packed pk = k->pack(args, nargs, loc);
  return k->noting_launch(pk, loc, [&] {
    auto f = k->trace(fn, pk);
    if (optimized) passes::run_pipeline(*f);
    return ir::print(*f);
  });
}

KernelStatsData kernel_stats(KernelState* k, const void* fn, const LaunchOptions& opts, const HostArg* args,
                             size_t nargs, const SrcLoc& loc) {
  check_options(opts, loc);
  PreparedLaunch p = prepare_launch(k, Grid3{1, 1, 1}, opts, args, nargs, loc);
  const bool on_gpu = p.on_gpu;
  const Backend backend = p.backend;
  Packed pk;
  auto c = specialization(k, fn, opts, std::move(p), pk, loc);
  KernelStatsData s;
  s.backend = static_cast<int>(backend);
  if (on_gpu) {
    s.num_warps = c->num_warps;
    s.registers = c->registers;
    s.local_bytes = c->local_bytes;
    s.shared_bytes = static_cast<int>(c->shared_bytes);
    s.jit_log = c->gpu->module()->info_log();
    const gpu::CompileStats& st = c->compile_stats;
    s.conversions = st.conversions;
    s.conversions_without_elimination = st.conversions_without_elimination;
    s.conversions_through_shared = st.conversions_through_shared;
    s.conversion_shared_bytes = st.conversion_shared_bytes;
    s.barriers = st.barriers;
    s.loads_reordered = st.loads_reordered;
  }
  return s;
}

size_t kernel_num_compiled(const KernelState* k) noexcept {
  auto* m = const_cast<KernelState*>(k);
  std::shared_lock lk(m->mu);
  return m->cache.size();
}

// ---- raw CUDA kernels (src/runtime/raw/raw_kernel.cpp) share the argument checks

PreparedLaunch prepare_launch(KernelState* k, const Grid3& grid, const LaunchOptions& opts, const HostArg* args,
                              size_t nargs, const SrcLoc& loc) {
  k->check_not_tracing("launched", loc);
  Packed pk = k->pack(args, nargs, loc);
  PreparedLaunch out;
  const Backend backend = opts.backend < 0 ? default_backend() : static_cast<Backend>(opts.backend);
  out.backend = backend;
  out.on_gpu = backend == Backend::GPU;
  k->check_dlpack_devices(args, nargs, backend, loc);
  if (out.on_gpu) k->check_device_pointers(args, nargs, loc);
  else
    for (size_t i = 0; i < nargs; ++i)
      if (args[i].device_buffer)
        throw UserError(loc, fmt::format("argument {} is {} (GPU memory), but this launch runs on the {} backend; "
                                         "pass host memory, or launch on the GPU",
                                         i + 1,
                                         args[i].kind == HostArg::TensorDesc
                                             ? "a tle::TensorDescriptor of a DeviceBuffer or kDLCUDA tensor"
                                             : "a tle::DeviceBuffer",
                                         backend == Backend::Interp ? "interp" : "CPU"));
  const int64_t g[3] = {grid.x, grid.y, grid.z};
  const int64_t limit[3] = {(int64_t(1) << 31) - 1, 65535, 65535};
  const char* axis[3] = {"x", "y", "z"};
  for (int i = 0; i < 3; ++i)
    if (g[i] < 0 || g[i] > limit[i])
      throw UserError(loc, fmt::format("launch grid axis {} is {}, outside the limit 0..{}; split the work over "
                                       "another axis or loop inside the kernel",
                                       axis[i], g[i], limit[i]));
  out.empty = g[0] == 0 || g[1] == 0 || g[2] == 0;  // rule E08
  out.slots = std::move(pk.slots);
  out.key = std::move(pk.key);
  out.constexprs = std::move(pk.constexprs);
  out.arg_slots = std::move(pk.arg_slots);
  out.tensor_maps = std::move(pk.tensor_maps);
  return out;
}

void kernel_set_raw_names(KernelState* k) { k->raw = true; }

}  // namespace tle::detail
