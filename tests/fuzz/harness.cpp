// tests/fuzz/harness.cpp - memory, runs, comparison and the differential check (harness.hpp).
#include "fuzz/harness.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
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
  if (tle::is_float(d)) {
    double v;
    const double inf = std::numeric_limits<double>::infinity();
    const double maxf = d == DType::f16 ? 65504.0 : d == DType::bf16 ? 3.3895313892515355e38 : d == DType::f32 ? 3.4028234663852886e38 : 1.7976931348623157e308;
    const double mins = d == DType::f16 ? 5.960464477539063e-08 : d == DType::bf16 ? 9.183549615799121e-41
                        : d == DType::f32 ? 1.401298464324817e-45 : 4.9406564584124654e-324;
    const double minn = d == DType::f16 ? 6.103515625e-05 : d == DType::f64 ? 2.2250738585072014e-308 : 1.1754943508222875e-38;
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
      v = ir::Attr(b.lo + static_cast<int64_t>(g() % span));
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

Memory::Memory(const Program& p) {
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    Buf b;
    b.bytes = static_cast<size_t>(p.buffers[i].size) * static_cast<size_t>(tle::byte_size(p.buffers[i].dtype));
    b.p = ::operator new(b.bytes ? b.bytes : 1, std::align_val_t(64));
    bufs_.push_back(b);
    fill(p, static_cast<int>(i), b.p);
  }
}

Memory::~Memory() {
  for (auto& b : bufs_) ::operator delete(b.p, std::align_val_t(64));
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

std::string compare(const Program& p, const Memory& a, const Memory& b) {
  std::string out;
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const Buffer& buf = p.buffers[i];
    const DType d = buf.dtype;
    const size_t es = static_cast<size_t>(tle::byte_size(d));
    int64_t bad = 0, first = -1;
    uint64_t fa = 0, fb = 0;
    for (int64_t k = 0; k < buf.size; ++k) {
      uint64_t x = 0, y = 0;
      std::memcpy(&x, static_cast<const char*>(a.data(static_cast<int>(i))) + static_cast<size_t>(k) * es, es);
      std::memcpy(&y, static_cast<const char*>(b.data(static_cast<int>(i))) + static_cast<size_t>(k) * es, es);
      if (x == y) continue;
      if (tle::is_float(d)) {  // (the sentinel 0xA5.. is no NaN in any float format)
        auto xa = tle::passes::constant_from_bits(d, x), ya = tle::passes::constant_from_bits(d, y);
        if (std::isnan(std::get<double>(xa)) && std::isnan(std::get<double>(ya))) continue;
      }
      if (bad++ == 0) first = k, fa = x, fb = y;
    }
    if (bad)
      out += fmt::format("buffer {} ({} {}): {} of {} elements differ; first [{}]: {} vs {}\n", i,
                         buf.role == Buffer::Out ? "out" : buf.role == Buffer::InOut ? "inout" : "in",
                         tle::dtype_name(d), bad, buf.size, first, show(d, fa), show(d, fb));
  }
  return out;
}

void run_interp(const Program& p, const ir::Function& f, Memory& m) {
  tle::interp::Options o;
  o.check_access = [&m](uintptr_t addr, size_t n, bool) { return m.contains(addr, n); };
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
  return p;
}

Outcome check(const Program& p, const CheckOptions& opt) {
  std::unique_ptr<ir::Function> f0, f1;
  if (auto e = guard("trace", [&] {
        f0 = trace(p);
        ir::verify(*f0);
      }))
    return *e;
  Memory ref(p);
  if (auto e = guard("interp", [&] { run_interp(p, *f0, ref); })) return *e;

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
