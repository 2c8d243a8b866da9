// src/runtime/raw/cuda_compile.cpp - NVRTC compiles, nvJitLink links, protocol checks and caches
// for TLE-Raw (see cuda_compile.hpp; the protocol is docs/raw.md).
#include "runtime/raw/cuda_compile.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include "runtime/cuda/nvrtc.hpp"
#include "ir/cuda_call.hpp"
#include "runtime/disk_cache.hpp"

namespace tle::detail {
extern const char kBuildId[];  // generated: cmake/source_hash.cmake
}
#ifndef TLE_VERSION
#define TLE_VERSION "unknown"
#endif

namespace tle::raw {

namespace {

// The protocol header (docs/raw.md, "tle_raw.h"). Keep the TileRef layout in step with the GPU
// lowering of cuda_call (src/backend/gpu/lower_cuda.cpp): {ptr, i32, [4 x i32], [4 x i32]}, 48
// bytes, 8-byte aligned.
const char kHeader[] = R"(// tle_raw.h - prepended by tle to every CUDA source it compiles (docs/raw.md).
namespace tle {
/// IEEE binary16 and bfloat16 elements as their bits (include cuda_fp16.h / cuda_bf16.h yourself
/// and reinterpret if you need arithmetic on them).
struct f16 { unsigned short bits; };
struct bf16 { unsigned short bits; };
/// A tile passed by tle::cuda_function: the whole CTA wrote it to shared memory before the call
/// and reads it back after it (for tle::inout arguments). Row-major and contiguous.
template <class T> struct TileRef {
  T* data;         // shared memory (a generic address)
  int rank;        // 1..4
  int shape[4];    // shape[d] for d < rank, 1 beyond
  int strides[4];  // element strides, row-major; 0 beyond rank
  __device__ int numel() const { int n = 1; for (int d = 0; d < rank; ++d) n *= shape[d]; return n; }
  __device__ T& operator[](int i) const { return data[i]; }
  __device__ T& at(int i0, int i1 = 0, int i2 = 0, int i3 = 0) const {
    return data[i0 * strides[0] + i1 * strides[1] + i2 * strides[2] + i3 * strides[3]];
  }
};
/// This thread's index in the CTA and the CTA's thread count (32 * num_warps, x only).
__device__ inline int cta_thread() { return (int)threadIdx.x; }
__device__ inline int cta_threads() { return (int)blockDim.x; }
}  // namespace tle
)";

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t e = s.find('\n', pos);
    if (e == std::string::npos) e = s.size();
    out.push_back(s.substr(pos, e - pos));
    pos = e + 1;
  }
  return out;
}

/// NVRTC's log with, after each line that points into the snippet ("file(N): ..."), the snippet's
/// line N quoted.
std::string annotate_log(const std::string& log, const std::string& file, const std::string& source) {
  const auto src = split_lines(source);
  std::string out;
  for (const std::string& line : split_lines(log)) {
    if (line.empty()) continue;
    out += line + "\n";
    const std::string prefix = file + "(";
    if (!starts_with(line, prefix.c_str())) continue;
    size_t close = line.find(')', prefix.size());
    if (close == std::string::npos) continue;
    std::string num = line.substr(prefix.size(), close - prefix.size());
    if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos) continue;
    const size_t n = std::stoul(num);
    if (n >= 1 && n <= src.size()) out += fmt::format("    {:>4} | {}\n", n, src[n - 1]);
  }
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::string nvrtc_error_string(const cuda::Nvrtc& n, nvrtcResult r) {
  const char* s = n.nvrtcGetErrorString(r);
  return s ? s : fmt::format("nvrtcResult {}", int(r));
}

CudaOutput compile_uncached(const CudaCompile& c) {
  const cuda::Nvrtc& n = cuda::require_nvrtc("nvrtcCompileProgram");
  bool has_std = false;
  for (const std::string& o : c.options) {
    if (starts_with(o, "-arch") || starts_with(o, "--gpu-architecture") || starts_with(o, "-gpu-architecture") ||
        starts_with(o, "--gpu-name"))
      throw UserError(c.loc, fmt::format("{}: the NVRTC option '{}' sets the GPU architecture, which tle chooses "
                                         "(the device's, {} here); remove it",
                                         c.what, o, arch_name(c.sm)));
    if (starts_with(o, "-std") || starts_with(o, "--std")) has_std = true;
  }
  const std::string text =
      "#line 1 \"tle_raw.h\"\n" + std::string(kHeader) + "#line 1 \"" + c.file_name + "\"\n" + c.source + "\n";
  nvrtcProgram prog = nullptr;
  nvrtcResult r = n.nvrtcCreateProgram(&prog, text.c_str(), c.file_name.c_str(), 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) throw RuntimeError("nvrtcCreateProgram", nvrtc_error_string(n, r));
  struct Destroy {
    const cuda::Nvrtc& n;
    nvrtcProgram* p;
    ~Destroy() { n.nvrtcDestroyProgram(p); }
  } destroy{n, &prog};
  for (const std::string& e : c.name_expressions) {
    r = n.nvrtcAddNameExpression(prog, e.c_str());
    if (r != NVRTC_SUCCESS) throw RuntimeError("nvrtcAddNameExpression", nvrtc_error_string(n, r));
  }
  std::vector<std::string> opts = {"--gpu-architecture=" + arch_name(c.sm)};
  if (c.relocatable) opts.push_back("--relocatable-device-code=true");
  if (!has_std) opts.push_back("--std=c++17");
  opts.insert(opts.end(), c.options.begin(), c.options.end());
  std::vector<const char*> argv;
  for (auto& o : opts) argv.push_back(o.c_str());
  r = n.nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  size_t log_size = 0;
  std::string log;
  if (n.nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    log.resize(log_size);
    if (n.nvrtcGetProgramLog(prog, log.data()) != NVRTC_SUCCESS) log.clear();
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  }
  if (r == NVRTC_ERROR_COMPILATION || r == NVRTC_ERROR_INVALID_OPTION || r == NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID) {
    std::string why = r == NVRTC_ERROR_INVALID_OPTION ? fmt::format(" (options: {})", fmt::join(opts, " ")) : "";
    throw UserError(c.loc, fmt::format("{}: NVRTC {}.{} could not compile the CUDA source{}:\n{}", c.what, n.major,
                                       n.minor, why,
                                       log.empty() ? nvrtc_error_string(n, r) : annotate_log(log, c.file_name, c.source)));
  }
  if (r != NVRTC_SUCCESS) throw RuntimeError("nvrtcCompileProgram", nvrtc_error_string(n, r), log);
  CudaOutput out;
  out.log = log;
  size_t size = 0;
  if (c.cubin) {
    r = n.nvrtcGetCUBINSize(prog, &size);
    if (r != NVRTC_SUCCESS) throw RuntimeError("nvrtcGetCUBINSize", nvrtc_error_string(n, r));
    out.image.resize(size);
    r = n.nvrtcGetCUBIN(prog, out.image.data());
    if (r != NVRTC_SUCCESS) throw RuntimeError("nvrtcGetCUBIN", nvrtc_error_string(n, r));
  } else {
    r = n.nvrtcGetPTXSize(prog, &size);
    if (r != NVRTC_SUCCESS) throw RuntimeError("nvrtcGetPTXSize", nvrtc_error_string(n, r));
    out.image.resize(size);
    r = n.nvrtcGetPTX(prog, out.image.data());
    if (r != NVRTC_SUCCESS) throw RuntimeError("nvrtcGetPTX", nvrtc_error_string(n, r));
    while (!out.image.empty() && out.image.back() == '\0') out.image.pop_back();
  }
  for (const std::string& e : c.name_expressions) {
    const char* lowered = nullptr;
    r = n.nvrtcGetLoweredName(prog, e.c_str(), &lowered);
    if (r != NVRTC_SUCCESS || !lowered)
      throw UserError(c.loc, fmt::format("{}: NVRTC finds no __global__ function '{}' in the CUDA source", c.what, e));
    out.lowered_names.push_back(lowered);
  }
  return out;
}

std::string compile_key(const CudaCompile& c, const cuda::Nvrtc& n) {
  return fmt::format("tle-raw-nvrtc\ntle {} {}\nnvrtc {}.{}\narch {}\nrdc {}\ncubin {}\nfile {}\nnames {}\noptions {}\n\n{}",
                     TLE_VERSION, detail::kBuildId, n.major, n.minor, arch_name(c.sm), c.relocatable, c.cubin,
                     c.file_name, fmt::join(c.name_expressions, "\x1f"), fmt::join(c.options, "\x1f"), c.source);
}

std::string serialize(const CudaOutput& o) {
  std::string s = fmt::format("TLERAW1\n{}\n", o.lowered_names.size());
  for (auto& n : o.lowered_names) s += n + "\n";
  s += fmt::format("{}\n", o.log.size()) + o.log;
  return s + o.image;
}

bool parse(const std::string& s, CudaOutput& o) {
  size_t pos = 0;
  auto line = [&](std::string& out) { return detail::next_line(s, pos, out); };
  std::string magic, count, loglen;
  if (!line(magic) || magic != "TLERAW1" || !line(count)) return false;
  try {
    size_t k = std::stoul(count);
    for (size_t i = 0; i < k; ++i) {
      std::string n;
      if (!line(n)) return false;
      o.lowered_names.push_back(n);
    }
    if (!line(loglen)) return false;
    size_t ll = std::stoul(loglen);
    if (pos + ll > s.size()) return false;
    o.log = s.substr(pos, ll);
    o.image = s.substr(pos + ll);
  } catch (...) {
    return false;
  }
  return !o.image.empty();
}

std::mutex g_mu;
std::unordered_map<std::string, CudaOutput>& memory_cache() {
  static auto* m = new std::unordered_map<std::string, CudaOutput>();  // leaked: outlives static dtors
  return *m;
}

/// Walks every op of a block and its regions.
template <class F> void walk(const ir::Block& b, const F& f) {
  for (const auto& op : b.ops) {
    f(*op);
    for (const auto& r : op->regions) walk(r->body(), f);
  }
}

/// Byte size of a type token (".b32" -> 4), 0 if it is not one.
int type_bytes(const std::string& tok) {
  if (tok.size() < 3 || tok[0] != '.') return 0;
  const std::string bits = tok.substr(2);
  if (bits == "8") return 1;
  if (bits == "16") return 2;
  if (bits == "32") return 4;
  if (bits == "64") return 8;
  return 0;
}

/// Size of one ".param ..." declaration.
int param_bytes(const std::string& decl) {
  size_t lb = decl.find('['), rb = decl.find(']');
  int elem = 0;
  size_t pos = 0;
  while (pos < decl.size()) {
    while (pos < decl.size() && std::isspace(static_cast<unsigned char>(decl[pos]))) ++pos;
    size_t e = pos;
    while (e < decl.size() && !std::isspace(static_cast<unsigned char>(decl[e])) && decl[e] != '[') ++e;
    std::string tok = decl.substr(pos, e - pos);
    if (int b = type_bytes(tok); b && tok != ".param") elem = b;
    pos = e == pos ? e + 1 : e;
  }
  if (lb != std::string::npos && rb != std::string::npos && rb > lb) {
    try {
      return elem * std::stoi(decl.substr(lb + 1, rb - lb - 1));
    } catch (...) {
      return -1;
    }
  }
  return elem;
}

std::string sizes_str(const std::vector<int>& v) {
  std::vector<std::string> s;
  for (int b : v) s.push_back(fmt::format("{}", b));
  return s.empty() ? "none" : fmt::format("{} bytes", fmt::join(s, ", "));
}

/// Names of the functions and kernels a PTX module defines strongly for the linker (".visible
/// .func", ".visible .entry"). ".weak" definitions (inline functions and template instances NVRTC
/// emits with -rdc, e.g. a shared header's helper in two sources) are merged by the linker, so
/// they are not clashes.
std::vector<std::string> defined_symbols(const std::string& ptx) {
  std::vector<std::string> out;
  for (const char* kw : {".func", ".entry"}) {
    const size_t kl = std::strlen(kw);
    for (size_t pos = ptx.find(kw); pos != std::string::npos; pos = ptx.find(kw, pos + kl)) {
      size_t ls = ptx.rfind('\n', pos);
      ls = ls == std::string::npos ? 0 : ls + 1;
      const std::string head = ptx.substr(ls, pos - ls);
      if (head.find(".visible") == std::string::npos || head.find(".weak") != std::string::npos) continue;
      if (head.find("//") != std::string::npos) continue;
      size_t p = pos + kl;
      while (p < ptx.size() && std::isspace(static_cast<unsigned char>(ptx[p]))) ++p;
      if (p < ptx.size() && ptx[p] == '(') {  // a return value
        size_t close = ptx.find(')', p);
        if (close == std::string::npos) break;
        p = close + 1;
        while (p < ptx.size() && std::isspace(static_cast<unsigned char>(ptx[p]))) ++p;
      }
      size_t e = p;
      while (e < ptx.size() && (std::isalnum(static_cast<unsigned char>(ptx[e])) || ptx[e] == '_' || ptx[e] == '$')) ++e;
      if (e > p) out.push_back(ptx.substr(p, e - p));
    }
  }
  return out;
}

}  // namespace

const std::string& protocol_header() {
  static const std::string h = kHeader;
  return h;
}

std::string arch_name(int sm) { return fmt::format("sm_{}{}", sm, sm == 90 ? "a" : ""); }

std::string nvrtc_version() {
  const cuda::Nvrtc& n = cuda::require_nvrtc("nvrtcVersion");
  return fmt::format("nvrtc {}.{}", n.major, n.minor);
}

std::string compile_cache_key(const CudaCompile& c) {
  return compile_key(c, cuda::require_nvrtc("nvrtcVersion"));
}

CudaOutput compile_cuda(const CudaCompile& c) {
  const cuda::Nvrtc& n = cuda::require_nvrtc("nvrtcCompileProgram");
  const std::string key = compile_key(c, n);
  {
    std::lock_guard lk(g_mu);
    auto it = memory_cache().find(key);
    if (it != memory_cache().end()) return it->second;
  }
  detail::DiskCache& disk = detail::DiskCache::global();
  CudaOutput out;
  bool hit = false;
  if (auto bytes = disk.get(key)) hit = parse(*bytes, out);
  if (!hit) {
    out = compile_uncached(c);
    disk.put(key, serialize(out));
  }
  std::lock_guard lk(g_mu);
  memory_cache().emplace(key, out);
  return out;
}

std::string link_cubin(const std::vector<LinkInput>& inputs, int sm) {
  const cuda::NvJitLink& j = cuda::require_nvjitlink("nvJitLinkCreate");
  std::string key = fmt::format("tle-raw-link\ntle {} {}\nnvjitlink {}.{}\narch {}\n", TLE_VERSION, detail::kBuildId,
                                j.major, j.minor, arch_name(sm));
  for (const auto& in : inputs) key += fmt::format("{} {} {}\n", in.name, in.ptx ? "ptx" : "cubin", in.data.size()) + in.data;
  detail::DiskCache& disk = detail::DiskCache::global();
  if (auto bytes = disk.get(key); bytes && !bytes->empty()) return *bytes;

  const std::string arch = "-arch=" + arch_name(sm);
  const char* opts[] = {arch.c_str()};
  nvJitLinkHandle h = nullptr;
  nvJitLinkResult r = j.nvJitLinkCreate(&h, 1, opts);
  if (r != NVJITLINK_SUCCESS) throw RuntimeError("nvJitLinkCreate", fmt::format("nvJitLinkResult {} ({})", int(r), arch));
  struct Destroy {
    const cuda::NvJitLink& j;
    nvJitLinkHandle* h;
    ~Destroy() { j.nvJitLinkDestroy(h); }
  } destroy{j, &h};
  auto logs = [&] {
    std::string log;
    size_t n = 0;
    if (j.nvJitLinkGetErrorLogSize(h, &n) == NVJITLINK_SUCCESS && n > 1) {
      std::string e(n, '\0');
      if (j.nvJitLinkGetErrorLog(h, e.data()) == NVJITLINK_SUCCESS) log += e.c_str();
    }
    if (j.nvJitLinkGetInfoLogSize(h, &n) == NVJITLINK_SUCCESS && n > 1) {
      std::string i(n, '\0');
      if (j.nvJitLinkGetInfoLog(h, i.data()) == NVJITLINK_SUCCESS) log += (log.empty() ? "" : "\n") + std::string(i.c_str());
    }
    return log;
  };
  for (const auto& in : inputs) {
    std::string data = in.data;
    if (in.ptx) data.push_back('\0');  // PTX is read up to a NUL
    r = j.nvJitLinkAddData(h, in.ptx ? NVJITLINK_INPUT_PTX : NVJITLINK_INPUT_CUBIN, data.data(), data.size(),
                           in.name.c_str());
    if (r != NVJITLINK_SUCCESS)
      throw RuntimeError("nvJitLinkAddData",
                         fmt::format("nvJitLinkResult {} adding {} for {}", int(r), in.name, arch_name(sm)), logs());
  }
  r = j.nvJitLinkComplete(h);
  if (r != NVJITLINK_SUCCESS) {
    std::vector<std::string> names;
    for (const auto& in : inputs) names.push_back(in.name);
    throw RuntimeError("nvJitLinkComplete",
                       fmt::format("nvJitLinkResult {}: linking {} for {} failed (nvJitLink {}.{})", int(r),
                                   fmt::join(names, " + "), arch_name(sm), j.major, j.minor),
                       logs());
  }
  size_t size = 0;
  if (j.nvJitLinkGetLinkedCubinSize(h, &size) != NVJITLINK_SUCCESS || size == 0)
    throw RuntimeError("nvJitLinkGetLinkedCubinSize", "no linked cubin", logs());
  std::string cubin(size, '\0');
  if (j.nvJitLinkGetLinkedCubin(h, cubin.data()) != NVJITLINK_SUCCESS)
    throw RuntimeError("nvJitLinkGetLinkedCubin", "cannot read the linked cubin", logs());
  disk.put(key, cubin);
  return cubin;
}

bool find_ptx_function(const std::string& ptx, const std::string& name, PtxPrototype* out) {
  size_t pos = 0;
  while ((pos = ptx.find(".func", pos)) != std::string::npos) {
    // Only definitions visible to the linker: ".visible .func" (or ".weak .func").
    size_t line_start = ptx.rfind('\n', pos);
    line_start = line_start == std::string::npos ? 0 : line_start + 1;
    const std::string head = ptx.substr(line_start, pos - line_start);
    size_t p = pos + 5;
    if (head.find(".visible") == std::string::npos && head.find(".weak") == std::string::npos) {
      pos = p;
      continue;
    }
    auto skip_ws = [&] {
      while (p < ptx.size() && std::isspace(static_cast<unsigned char>(ptx[p]))) ++p;
    };
    auto group = [&](std::vector<std::string>& decls) {  // at '(': the comma-separated declarations
      size_t close = ptx.find(')', p);
      if (close == std::string::npos) return false;
      std::string inner = ptx.substr(p + 1, close - p - 1);
      size_t s = 0;
      while (s <= inner.size()) {
        size_t e = inner.find(',', s);
        if (e == std::string::npos) e = inner.size();
        std::string d = inner.substr(s, e - s);
        if (d.find(".param") != std::string::npos) decls.push_back(d);
        s = e + 1;
      }
      p = close + 1;
      return true;
    };
    PtxPrototype proto;
    skip_ws();
    if (p < ptx.size() && ptx[p] == '(') {
      std::vector<std::string> ret;
      if (!group(ret)) return false;
      proto.ret_bytes = ret.empty() ? 0 : param_bytes(ret[0]);
      skip_ws();
    }
    size_t e = p;
    while (e < ptx.size() && (std::isalnum(static_cast<unsigned char>(ptx[e])) || ptx[e] == '_' || ptx[e] == '$')) ++e;
    std::string fn = ptx.substr(p, e - p);
    p = e;
    if (fn != name) {
      pos = p;
      continue;
    }
    skip_ws();
    if (p < ptx.size() && ptx[p] == '(') {
      std::vector<std::string> params;
      if (!group(params)) return false;
      for (auto& d : params) proto.param_bytes.push_back(param_bytes(d));
    }
    if (out) *out = proto;
    return true;
  }
  return false;
}

bool has_cuda_calls(const ir::Function& f) {
  bool any = false;
  walk(f.entry(), [&](const ir::Op& op) { any = any || op.kind == ir::OpKind::CudaCall; });
  return any;
}

std::string link_call_sites(const std::string& tile_ptx, const std::vector<CallSite>& calls, int sm) {
  // One NVRTC compile per distinct (source, options, file name), in order of first use.
  std::map<std::tuple<std::string, std::vector<std::string>, std::string>, size_t> index;
  std::vector<std::string> modules;
  std::vector<LinkInput> inputs = {{"tile_kernel.ptx", tile_ptx, true}};
  for (const CallSite& cs : calls) {
    auto k = std::make_tuple(cs.source, cs.options, cs.file);
    auto it = index.find(k);
    if (it == index.end()) {
      CudaCompile c;
      c.source = cs.source;
      c.options = cs.options;
      c.file_name = cs.file;
      c.what = fmt::format("cuda_function '{}'", cs.name);
      c.loc = cs.loc;
      c.sm = sm;
      c.relocatable = true;
      it = index.emplace(k, modules.size()).first;
      modules.push_back(compile_cuda(c).image);
      inputs.push_back({fmt::format("{}.{}.ptx", cs.file, modules.size()), modules.back(), true});
    }
    const std::string& ptx = modules[it->second];
    PtxPrototype got;
    if (!find_ptx_function(ptx, cs.name, &got)) {
      const bool mangled = ptx.find(fmt::format("{}{}", cs.name.size(), cs.name)) != std::string::npos;
      throw UserError(cs.loc, fmt::format("cuda_function: the CUDA source ({}) defines no device function '{}'{}",
                                          cs.file, cs.name,
                                          mangled ? "; it has a C++ (mangled) function of that name: declare it "
                                                    "extern \"C\" __device__"
                                                  : "; define it as extern \"C\" __device__"));
    }
    if (got.param_bytes != cs.param_bytes || got.ret_bytes != cs.ret_bytes)
      throw UserError(cs.loc,
                      fmt::format("cuda_function '{}': the CUDA function takes {} parameter{} ({}) and returns {}, but "
                                  "this call passes {} ({}) and expects {}; by the protocol (docs/raw.md) a scalar "
                                  "is passed by value, a Ptr<T> as T*, a tile as tle::TileRef<T> (48 bytes)",
                                  cs.name, got.param_bytes.size(), got.param_bytes.size() == 1 ? "" : "s",
                                  sizes_str(got.param_bytes),
                                  got.ret_bytes ? fmt::format("{} bytes", got.ret_bytes) : std::string("void"),
                                  cs.param_bytes.size(), sizes_str(cs.param_bytes),
                                  cs.ret_bytes ? fmt::format("{} bytes", cs.ret_bytes) : std::string("void")));
  }
  // nvJitLink (13.0) reports a symbol defined twice only on stderr and still "succeeds", so
  // clashes are found here: a device function named like the tile kernel's entry, or defined by
  // two of the sources.
  std::map<std::string, std::string> owner;  // symbol -> input name
  for (const LinkInput& in : inputs) {
    for (const std::string& sym : defined_symbols(in.data)) {
      auto [it, fresh] = owner.emplace(sym, in.name);
      if (fresh || it->second == in.name) continue;
      const SrcLoc loc = calls.empty() ? SrcLoc{} : calls.front().loc;
      if (it->second == "tile_kernel.ptx")
        throw UserError(loc, fmt::format("cuda_function: the CUDA source ({}) defines '{}', which is also the tile "
                                         "kernel's own symbol (tle_<kernel name>); rename the device function",
                                         in.name, sym));
      throw UserError(loc, fmt::format("cuda_function: '{}' is defined by two CUDA sources ({} and {}) called from "
                                       "this kernel; define each device function once",
                                       sym, it->second, in.name));
    }
  }
  std::string cubin = link_cubin(inputs, sm);
  // A cheap guard, not proof: a called function's name must appear in the cubin (its symbol
  // table). Unused functions may be dropped.
  for (const CallSite& cs : calls)
    if (cubin.find(cs.name) == std::string::npos)
      throw RuntimeError("nvJitLinkComplete", fmt::format("the linked cubin lacks the called function '{}'", cs.name));
  return cubin;
}

std::vector<CallSite> call_sites(const ir::Function& f) {
  std::vector<CallSite> out;
  walk(f.entry(), [&](const ir::Op& op) {
    if (op.kind != ir::OpKind::CudaCall) return;
    CallSite cs;
    cs.source = op.str_attr("source");
    if (const std::string& o = op.str_attr("options"); !o.empty()) cs.options = split_lines(o);
    cs.file = op.str_attr("file");
    cs.name = op.str_attr("name");
    cs.loc = op.loc;
    // The protocol's sizes: a scalar its dtype's bytes, a pointer 8, a tile a 48-byte TileRef.
    const auto& kinds = op.ints_attr("kinds");
    for (size_t i = 0; i < op.operands.size(); ++i)
      cs.param_bytes.push_back(kinds[i] == ir::kCudaValue ? byte_size(op.operands[i]->type.dtype) : ir::kTileRefBytes);
    cs.ret_bytes = op.int_attr("ret") ? byte_size(op.result(0)->type.dtype) : 0;
    out.push_back(std::move(cs));
  });
  return out;
}

std::string link_tile_kernel(const ir::Function& f, const std::string& tile_ptx, int sm) {
  return link_call_sites(tile_ptx, call_sites(f), sm);
}

cuda::GpuKernel link_and_load(const ir::Function& f, const std::string& tile_ptx, const std::string& entry, int sm,
                              std::vector<cuda::DumpFile> extra) {
  std::string cubin = link_tile_kernel(f, tile_ptx, sm);
  extra.push_back({"tile_kernel.ptx", tile_ptx});
  return cuda::GpuKernel(cuda::GpuModule::load_cubin(cubin, extra), entry);
}

}  // namespace tle::raw
