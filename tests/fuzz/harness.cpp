// tests/fuzz/harness.cpp - memory, runs, comparison and the differential check (harness.hpp).
#include "fuzz/harness.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <new>
#include <random>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/gpu/gpu_backend.hpp"
#include "interp/interp.hpp"
#include "passes/fold.hpp"
#include "passes/pass.hpp"
#include "support/half.hpp"

namespace fuzz {
namespace {

namespace ir = tle::ir;

/// One element of a Special fill: an edge value of the dtype with probability `edge` (in 1/64),
/// else an ordinary one.
ir::Attr special_value(DType d, int edge, std::mt19937_64& g) {
  auto pickn = [&](int n) { return static_cast<int>(g() % static_cast<uint64_t>(n)); };
  const bool special = pickn(64) < edge;
  if (tle::is_fp8(d) && !special && pickn(2)) {
    // any finite fp8 code (subnormals, -0, the largest values); edge codes come from the switch below
    for (;;) {
      ir::Attr a = tle::passes::constant_from_bits(d, g() & 0xFF);
      if (std::isfinite(std::get<double>(a))) return a;
    }
  }
  if (tle::is_float(d)) {
    double v;
    const double inf = std::numeric_limits<double>::infinity();
    double maxf = d == DType::f16 ? 65504.0 : d == DType::bf16 ? 3.3895313892515355e38 : d == DType::f32 ? 3.4028234663852886e38 : 1.7976931348623157e308;
    double mins = d == DType::f16 ? 5.960464477539063e-08 : d == DType::bf16 ? 9.183549615799121e-41
                        : d == DType::f32 ? 1.401298464324817e-45 : 4.9406564584124654e-324;
    double minn = d == DType::f16 ? 6.103515625e-05 : d == DType::f64 ? 2.2250738585072014e-308 : 1.1754943508222875e-38;
    if (tle::is_fp8(d)) {  // OCP FP8 E4M3 / E5M2: max finite, smallest normal, smallest subnormal
      maxf = d == DType::f8e4m3 ? 448.0 : 57344.0;
      minn = std::ldexp(1.0, d == DType::f8e4m3 ? -6 : -14);
      mins = std::ldexp(1.0, d == DType::f8e4m3 ? -9 : -16);
    }
    switch (special ? pickn(13) : 9 + pickn(15)) {
      case 0: v = 0.0; break;
      case 1: v = -0.0; break;
      case 2: v = inf; break;
      case 3: v = -inf; break;
      case 4: v = std::numeric_limits<double>::quiet_NaN(); break;
      case 5: v = pickn(2) ? maxf : -maxf; break;
      case 6: v = (pickn(2) ? 1 : -1) * mins * (1 + pickn(4)); break;  // denormals
      case 7: v = (pickn(2) ? 1 : -1) * minn; break;
      case 8: v = (pickn(2) ? 1 : -1) * (minn - mins); break;  // the largest denormal
      case 9: case 10: v = static_cast<double>(pickn(17) - 8); break;
      case 11: v = (pickn(33) - 16) + 0.5; break;  // ties for casts to integers
      case 12: {
        // halfway between two f16/bf16 values (from f32/f64), or just off it: rounding cases
        double base = std::ldexp(1.0 + pickn(1024) / 1024.0, pickn(20) - 10);
        v = base + std::ldexp(1.0, -11 + (d == DType::bf16 ? 3 : 0)) * (pickn(2) ? 1 : -1) * std::ldexp(1.0, pickn(20) - 10);
        break;
      }
      default: {
        std::uniform_real_distribution<double> u(-1, 1);
        v = std::ldexp(u(g), pickn(40) - 20);
      }
    }
    switch (d) {
      case DType::f16: v = tle::f16_bits_to_f64(tle::f64_to_f16_bits(v)); break;
      case DType::bf16: v = tle::bf16_bits_to_f64(tle::f64_to_bf16_bits(v)); break;
      case DType::f32: v = static_cast<double>(static_cast<float>(v)); break;
      default: break;
    }
    return ir::Attr(v);
  }
  if (d == DType::i1) return ir::Attr(int64_t(g() & 1));
  const int w = tle::bit_width(d);
  const bool sgn = tle::is_signed_int(d);
  uint64_t bits;
  switch (special ? pickn(6) : 6 + pickn(6)) {
    case 0: bits = sgn ? uint64_t(1) << (w - 1) : 0; break;                                   // MIN
    case 1: bits = sgn ? (uint64_t(1) << (w - 1)) - 1 : ~uint64_t(0); break;                   // MAX
    case 2: bits = 0; break;
    case 3: bits = 1; break;
    case 4: bits = ~uint64_t(0); break;                                                      // -1 / MAX
    case 5: bits = (uint64_t(1) << (w - 1)) + 1; break;                                       // MIN + 1
    case 6: case 7: case 8: bits = static_cast<uint64_t>(static_cast<int64_t>(pickn(33) - 16)); break;
    default: bits = g();
  }
  return *tle::passes::normalize_constant(d, ir::Attr(static_cast<int64_t>(bits)));
}

void fill(const Program& p, int index, void* mem) {
  const Buffer& b = p.buffers.at(static_cast<size_t>(index));
  const size_t es = static_cast<size_t>(tle::byte_size(b.dtype));
  if (b.fill == Buffer::Sentinel) {
    std::memset(mem, 0xA5, es * static_cast<size_t>(b.size));
    return;
  }
  std::mt19937_64 g(p.seed * 1000003ull + static_cast<uint64_t>(index) * 7919ull + 17);
  // How often edge values (NaN, inf, -0, denormals, MIN, MAX, ...) appear: never, now and then,
  // or often. Too many NaNs would make most reductions NaN, which hides differences.
  static const int kEdge[] = {0, 3, 3, 12, 24};
  const int edge = kEdge[g() % 5];
  for (int64_t i = 0; i < b.size; ++i) {
    ir::Attr v;
    if (b.fill == Buffer::Index) {
      uint64_t span = static_cast<uint64_t>(b.hi - b.lo) + 1;
      const int64_t x = b.lo + static_cast<int64_t>(g() % span);
      v = tle::is_float(b.dtype) ? ir::Attr(static_cast<double>(x)) : ir::Attr(x);
    } else {
      v = special_value(b.dtype, edge, g);
    }
    uint64_t bits = *tle::passes::constant_bits(b.dtype, v);
    std::memcpy(static_cast<char*>(mem) + static_cast<size_t>(i) * es, &bits, es);
  }
}

ir::Attr literal_attr(DType d, const Literal& l) {
  if (tle::is_float(d)) return ir::Attr(l.is_float ? l.f : static_cast<double>(l.i));
  return *tle::passes::normalize_constant(d, ir::Attr(l.i));
}

std::string show(DType d, uint64_t bits) {
  ir::Attr a = tle::passes::constant_from_bits(d, bits);
  if (auto* x = std::get_if<double>(&a)) return fmt::format("{} (bits {:#x})", *x, bits);
  return fmt::format("{}", std::get<int64_t>(a));
}

}  // namespace

Memory::Memory(const Program& p, bool managed) : managed_(managed) {
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    Buf b;
    b.bytes = static_cast<size_t>(p.buffers[i].size) * static_cast<size_t>(tle::byte_size(p.buffers[i].dtype));
    b.p = managed ? tle::detail::managed_alloc(b.bytes ? b.bytes : 1)
                  : ::operator new(b.bytes ? b.bytes : 1, std::align_val_t(64));
    bufs_.push_back(b);
    fill(p, static_cast<int>(i), b.p);
  }
}

Memory::~Memory() {
  for (auto& b : bufs_) {
    if (managed_) tle::detail::managed_free(b.p);
    else ::operator delete(b.p, std::align_val_t(64));
  }
}

bool Memory::contains(uintptr_t addr, size_t n) const {
  for (auto& b : bufs_) {
    uintptr_t lo = reinterpret_cast<uintptr_t>(b.p);
    if (addr >= lo && addr + n <= lo + b.bytes && addr + n >= addr) return true;
  }
  return false;
}

std::vector<void*> Memory::args(const Program& p) {
  slots_.assign(p.params.size(), 0);
  std::vector<void*> ptrs;
  for (size_t i = 0; i < p.params.size(); ++i) {
    const Param& pa = p.params[i];
    if (pa.buffer >= 0) {
      slots_[i] = reinterpret_cast<uintptr_t>(data(pa.buffer));
    } else {
      DType d = p.vars.at(static_cast<size_t>(pa.var)).dtype;
      slots_[i] = *tle::passes::constant_bits(d, literal_attr(d, pa.value));
    }
  }
  for (auto& s : slots_) ptrs.push_back(&s);
  return ptrs;
}

int64_t ulp_distance(DType d, uint64_t a, uint64_t b) {
  const int w = tle::bit_width(d);
  auto isnan = [&](uint64_t x) { return std::isnan(std::get<double>(tle::passes::constant_from_bits(d, x))); };
  const bool na = isnan(a), nb = isnan(b);
  if (na || nb) return na && nb ? 0 : -1;
  // Sign-magnitude bits -> a monotonic integer line: +x at its magnitude, -x at minus it (so
  // +0.0 and -0.0 meet at 0, and the infinities sit next to the largest finite values).
  const uint64_t sign = uint64_t(1) << (w - 1), mag_mask = sign - 1;
  auto line = [&](uint64_t x) {
    const int64_t m = static_cast<int64_t>(x & mag_mask);
    return (x & sign) ? -m : m;
  };
  const __int128 dist = static_cast<__int128>(line(a)) - line(b);
  const __int128 mag = dist < 0 ? -dist : dist;
  return mag > std::numeric_limits<int64_t>::max() ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(mag);
}

std::string compare(const Program& p, const Memory& a, const Memory& b, bool ulp_bounds) {
  std::string out;
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const Buffer& buf = p.buffers[i];
    const DType d = buf.dtype;
    const size_t es = static_cast<size_t>(tle::byte_size(d));
    const int64_t ulp = ulp_bounds && tle::is_float(d) ? buf.ulp : 0;
    int64_t bad = 0, first = -1;
    uint64_t fa = 0, fb = 0;
    for (int64_t k = 0; k < buf.size; ++k) {
      uint64_t x = 0, y = 0;
      std::memcpy(&x, static_cast<const char*>(a.data(static_cast<int>(i))) + static_cast<size_t>(k) * es, es);
      std::memcpy(&y, static_cast<const char*>(b.data(static_cast<int>(i))) + static_cast<size_t>(k) * es, es);
      if (x == y) continue;
      if (tle::is_float(d)) {  // (the sentinel 0xA5.. is no NaN in any float format)
        const int64_t dist = ulp_distance(d, x, y);
        if (dist == 0 && std::isnan(std::get<double>(tle::passes::constant_from_bits(d, x)))) continue;  // NaN, NaN
        if (ulp > 0 && dist >= 0 && dist <= ulp) continue;
      }
      if (bad++ == 0) first = k, fa = x, fb = y;
    }
    if (bad)
      out += fmt::format("buffer {} ({} {}{}): {} of {} elements differ; first [{}]: {} vs {}{}\n", i,
                         buf.role == Buffer::Out ? "out" : buf.role == Buffer::InOut ? "inout" : "in",
                         tle::dtype_name(d), ulp ? fmt::format(", math results within {} ulp", ulp) : "", bad,
                         buf.size, first, show(d, fa), show(d, fb),
                         ulp ? fmt::format(" ({} ulp apart)", ulp_distance(d, fa, fb)) : "");
  }
  return out;
}

void run_interp(const Program& p, const ir::Function& f, Memory& m) {
  tle::interp::Options o;
  o.check_access = [&m](uintptr_t addr, size_t n, bool) { return m.contains(addr, n); };
  o.detect_program_races = true;  // the generator promises none (generate.cpp's header)
  auto args = m.args(p);
  tle::interp::run(f, args.data(), p.grid, o);
}

void run_cpu(const Program& p, const ir::Function& f, Memory& m, int opt_level) {
  auto k = tle::cpu::compile(f, opt_level);
  auto args = m.args(p);
  tle::cpu::launch(*k, args.data(), p.grid);
}

namespace {

Outcome failed(const std::string& stage, const std::string& detail) { return Outcome{false, stage, detail, {}}; }

/// Runs `body`, turning an exception into a failed outcome of `stage`.
template <class F> std::optional<Outcome> guard(const std::string& stage, F&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    return failed(stage, e.what());
  }
  return std::nullopt;
}

std::unique_ptr<ir::Function> optimized(const Program& p) {
  auto f = trace(p);
  tle::passes::run_pipeline(*f);
  return f;
}

}  // namespace

Program failing_program(const Program& p, const Outcome& o) {
  if (o.stage == "swap") return swap_commutative(p);
  if (o.stage == "dead-branch") return add_dead_branch(p, p.seed);
  if (o.stage == "opaque") return opaque_constants(p);
  if (o.stage.find(" roles ") != std::string::npos)
    if (std::optional<Program> q = in_roles(p, p.seed)) return *q;
  return p;
}

/// The reference run of p: traces and verifies it into f0 and runs it on the interpreter into
/// ref. The failing stage ("trace" or "interp") if either throws.
static std::optional<Outcome> reference(const Program& p, std::unique_ptr<ir::Function>& f0, Memory& ref) {
  if (auto e = guard("trace", [&] {
        f0 = trace(p);
        ir::verify(*f0);
      }))
    return e;
  if (auto e = guard("interp", [&] { run_interp(p, *f0, ref); })) return e;
  return std::nullopt;
}

Outcome check(const Program& p, const CheckOptions& opt) {
  std::unique_ptr<ir::Function> f0, f1;
  Memory ref(p);
  if (auto e = reference(p, f0, ref)) return *e;

  auto against_ref = [&](const std::string& stage, const Program& q, const ir::Function& f, bool interp,
                         int opt_level = 3) -> std::optional<Outcome> {
    Memory m(q);
    if (auto e = guard(stage, [&] { interp ? run_interp(q, f, m) : run_cpu(q, f, m, opt_level); })) return e;
    std::string d = compare(p, ref, m);
    if (!d.empty()) return failed(stage, d);
    return std::nullopt;
  };
  if (auto e = guard("passes", [&] { f1 = optimized(p); })) return *e;
  if (auto e = against_ref("passes", p, *f1, true)) return *e;
  if (auto e = against_ref("cpu", p, *f1, false)) return *e;
  static const char* const kExtras[] = {"cpu-O0", "swap", "dead-branch", "opaque"};
  auto wanted = [&](int i) { return !opt.one_extra || static_cast<uint64_t>(i) == p.seed % 4; };
  if (opt.unoptimized_cpu && wanted(0))
    if (auto e = against_ref("cpu-O0", p, *f0, false, 0)) return *e;
  if (opt.variants) {
    for (int i = 1; i < 4; ++i) {
      if (!wanted(i)) continue;
      const char* stage = kExtras[i];
      Outcome o{false, stage, {}, {}};
      Program q = failing_program(p, o);
      std::unique_ptr<ir::Function> fq;
      if (auto e = guard(stage, [&] { fq = optimized(q); })) return *e;
      if (auto e = against_ref(stage, q, *fq, false)) {
        // Which side is wrong: the interpreter on the variant tells a bad variant from a bad backend.
        std::unique_ptr<ir::Function> fqi = trace(q);
        if (auto ei = against_ref(stage, q, *fqi, true))
          e->detail = "the variant itself differs on the interpreter (a variant or interpreter bug): " + ei->detail;
        return *e;
      }
    }
  }
  return {};
}

Outcome check_gpu_compile(const Program& p, int num_warps, const std::string& ptxas) {
  std::string ptx;
  if (auto e = guard("gpu-compile", [&] {
        auto f = optimized(p);
        tle::gpu::Target t;  // sm_90a
        tle::gpu::Options o;
        o.num_warps = num_warps;
        ptx = tle::gpu::compile(*f, t, o).ptx;
      }))
    return *e;
  if (ptxas.empty()) return {};
  namespace fs = std::filesystem;
  std::string dir = (fs::temp_directory_path() / "tle-fuzz-ptx-XXXXXX").string();
  if (!::mkdtemp(dir.data())) return failed("ptxas", "mkdtemp failed");
  std::ofstream(fs::path(dir) / "k.ptx") << ptx;
  const std::string cmd = ptxas + " -arch=sm_90a " + dir + "/k.ptx -o " + dir + "/k.cubin > " + dir + "/log 2>&1";
  const int status = std::system(cmd.c_str());
  std::ifstream in(fs::path(dir) / "log");
  std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (status != 0) return failed("ptxas", fmt::format("num_warps {}: {}", num_warps, log.substr(0, 2000)));
  return {};
}

std::string backends_agree(const Program& p, const std::function<void(tle::Backend, Memory&)>& launch) {
  Memory a(p), b(p);
  launch(tle::Backend::Interp, a);
  launch(tle::Backend::CPU, b);
  return compare(p, a, b);
}

std::string printed_matches(const Program& p, const std::function<void(tle::Backend, Memory&)>& launch) {
  Memory printed(p), traced(p);
  launch(tle::Backend::Interp, printed);
  run_interp(p, *trace(p), traced);
  return compare(p, traced, printed);
}

}  // namespace fuzz

namespace fuzz {
namespace {

bool has_loop_load(const std::vector<Stmt>& b, bool in_loop) {
  for (const Stmt& s : b) {
    if (in_loop && s.kind == Kind::Load) return true;
    if (has_loop_load(s.body, in_loop || s.kind == Kind::For) || has_loop_load(s.orelse, in_loop)) return true;
  }
  return false;
}

/// The kernel's parameters as a tle::jit lambda of p declares them (Ptr<T> / Tile<T>).
std::vector<tle::detail::ParamSpec> param_specs(const Program& p) {
  std::vector<tle::detail::ParamSpec> v;
  for (const Param& pa : p.params) {
    tle::detail::ParamSpec s{};
    if (pa.buffer >= 0) s.kind = tle::detail::ParamSpec::Pointer, s.dtype = p.buffers.at(pa.buffer).dtype;
    else s.kind = tle::detail::ParamSpec::Scalar, s.dtype = p.vars.at(pa.var).dtype;
    v.push_back(s);
  }
  return v;
}

/// The launch's arguments as the C++ caller would pass them: T* for buffers, the literal as a
/// host scalar of the parameter's kind.
std::vector<tle::detail::HostArg> host_args(const Program& p, const Memory& m) {
  using tle::detail::HostArg;
  std::vector<HostArg> v;
  for (const Param& pa : p.params) {
    HostArg a{};
    if (pa.buffer >= 0) {
      a.kind = HostArg::Pointer;
      a.pointee = p.buffers.at(pa.buffer).dtype;
      a.type_name = "fuzz buffer";
      a.p = m.data(pa.buffer);
    } else {
      const DType d = p.vars.at(pa.var).dtype;
      const Literal& l = pa.value;
      if (d == DType::i1) a.kind = HostArg::Bool, a.b = l.i != 0, a.type_name = "bool";
      else if (tle::is_unsigned_int(d)) a.kind = HostArg::UInt, a.u = static_cast<uint64_t>(l.i), a.type_name = "uint64_t";
      else if (tle::is_int(d)) a.kind = HostArg::Int, a.i = l.i, a.type_name = "int64_t";
      else a.kind = HostArg::Float, a.f = l.is_float ? l.f : static_cast<double>(l.i), a.type_name = "double";
    }
    v.push_back(a);
  }
  return v;
}

/// A kernel object for p, destroyed with it.
struct Kernel {
  tle::detail::KernelState* k;
  explicit Kernel(const Program& p) {
    tle::SrcLoc loc;
    loc.file = "fuzz-program";
    loc.line = 1;
    k = tle::detail::kernel_create("fuzz", param_specs(p), &trace_thunk, loc);
  }
  ~Kernel() { tle::detail::kernel_destroy(k); }
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;
};

}  // namespace

std::vector<DeviceConfig> device_configs(const Program& p) {
  std::vector<DeviceConfig> v = {{1, 3}, {4, 3}, {8, 3}};
  if (has_loop_load(p.body, false)) v.insert(v.end(), {{4, 1}, {8, 2}});
  return v;
}

void run_launch(const Program& p, Memory& m, tle::Backend backend, const DeviceConfig& c, void* stream,
                tle::detail::KernelState* kernel) {
  std::optional<Kernel> own;
  if (!kernel) kernel = own.emplace(p).k;
  auto args = host_args(p, m);
  tle::detail::LaunchOptions o;
  o.stream = stream;
  o.num_warps = c.num_warps;
  o.num_stages = c.num_stages;
  o.backend = static_cast<int>(backend);
  tle::SrcLoc loc;
  loc.file = "fuzz-launch";
  loc.line = 1;
  const tle::detail::Grid3 grid{p.grid[0], p.grid[1], p.grid[2]};
  tle::detail::kernel_launch(kernel, &p, grid, o, args.data(), args.size(), loc);
  if (backend == tle::Backend::GPU) {
    if (stream) tle::Stream::wrap(stream).synchronize();
    else tle::synchronize();
  }
}

Outcome check_device(const Program& p, const std::vector<DeviceConfig>& configs, const DeviceCheckOptions& opt) {
  std::unique_ptr<ir::Function> f0;
  Memory ref(p);
  if (auto e = reference(p, f0, ref)) return *e;
  if (opt.cpu) {
    Memory m(p);
    if (auto e = guard("cpu", [&] { run_cpu(p, *optimized(p), m); })) return *e;
    if (std::string d = compare(p, ref, m); !d.empty()) return failed("cpu", d);
  }
  const bool gpu = opt.backend == tle::Backend::GPU;
  Kernel k(p);
  for (const DeviceConfig& c : configs) {
    const std::string stage = fmt::format("{} w{} s{}", tle::backend_name(opt.backend), c.num_warps, c.num_stages);
    Memory m(p, gpu);
    if (auto e = guard(stage, [&] { run_launch(p, m, opt.backend, c, opt.stream, k.k); })) return *e;
    if (opt.after_launch) opt.after_launch(m);
    if (std::string d = compare(p, ref, m, true); !d.empty()) return failed(stage, d);
  }
  if (opt.roles)
    if (std::optional<Program> q = in_roles(p, p.seed)) {
      const Stmt& r = q->body.back();
      const std::string stage = fmt::format("{} roles {}+{}", tle::backend_name(opt.backend), r.b, r.a);
      Memory m(*q, gpu);
      if (auto e = guard(stage, [&] { run_launch(*q, m, opt.backend, DeviceConfig{4, 3}, opt.stream, nullptr); })) return *e;
      if (opt.after_launch) opt.after_launch(m);
      if (std::string d = compare(p, ref, m, true); !d.empty()) return failed(stage, d);
    }
  return {};
}

std::string gpu_agrees(const Program& p, const std::vector<DeviceConfig>& configs,
                       const std::function<void(tle::Backend, Memory&, DeviceConfig)>& launch) {
  Memory ref(p);
  launch(tle::Backend::Interp, ref, DeviceConfig{});
  for (const DeviceConfig& c : configs) {
    Memory m(p, true);
    launch(tle::Backend::GPU, m, c);
    tle::synchronize();
    if (std::string d = compare(p, ref, m, true); !d.empty())
      return fmt::format("gpu w{} s{}: {}", c.num_warps, c.num_stages, d);
  }
  return "";
}

}  // namespace fuzz
