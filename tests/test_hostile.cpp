// tests/test_hostile.cpp - hostile host input (issue #12 item 7), tag [hostile]: a seeded fuzz
// driver that throws thousands of random launches at tle's host boundary - the dynamic launch API
// every tle::Kernel goes through (detail::kernel_launch / kernel_ir / kernel_stats / kernel_ptx
// with arrays of HostArg: wrong argument counts and kinds, every dtype, values that do not fit,
// null, misaligned and unmapped pointers, DeviceBuffer flags, DLPack tensors with bad dtype,
// lanes, device, ndim, shape, strides and data), absurd grids (0, negative, 2^31, 2^63) and launch
// options, huge and invalid constexprs, and raw CUDA kernels whose source NVRTC rejects or whose
// target is absurd. Every case must end in success (and then the numbers are checked), a
// tle::UserError naming this file (the user's), or a tle::RuntimeError naming its call; nothing
// may abort the process. Each case also has an expected outcome from the generator (a bad argument
// must be a UserError; an all-good launch must succeed), so the checks themselves are checked.
//
// TLE_HOSTILE_SEED (default 1), TLE_HOSTILE_COUNT (default 3000) and TLE_HOSTILE_VERBOSE=1 (print
// each case before running it: the last line before a crash is the culprit) reproduce a run.
#include <catch2/catch.hpp>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <source_location>
#include <string>
#include <typeinfo>
#include <vector>

#include <fmt/format.h>

#include "helper_process.hpp"
#include "tle/tle.hpp"

using namespace tle;
namespace d = tle::detail;

namespace {

/// A kernel created through the dynamic API (as a binding would), with the typed lambda's thunk.
template <class F> struct Dyn {
  using Args = typename d::signature<F>::args;
  static constexpr size_t N = std::tuple_size_v<Args>;
  F fn;
  d::KernelState* k = nullptr;
  std::vector<d::ParamSpec> specs;
  explicit Dyn(const char* name, F f, std::source_location l = std::source_location::current()) : fn(f) {
    add(std::make_index_sequence<N>());
    k = d::kernel_create(name, specs, &thunk, SrcLoc(l));
  }
  ~Dyn() { d::kernel_destroy(k); }
  template <size_t... I> void add(std::index_sequence<I...>) {
    (specs.push_back(d::param_spec<std::tuple_element_t<I, Args>>::get()), ...);
  }
  template <size_t... I> static void call(const F& f, const d::TraceParam* p, std::index_sequence<I...>) {
    f(d::make_param<std::tuple_element_t<I, Args>>::get(p[I])...);
  }
  static void thunk(const void* fn, const d::TraceParam* p) { call(*static_cast<const F*>(fn), p, std::make_index_sequence<N>()); }
};

// y[i] = 2 * x[i] for i < n, B elements per program.
auto vec_fn = [](Ptr<float> x, Ptr<float> y, Tile<int32_t> n, Constexpr<int> B) {
  Tile<int32_t> i = program_id(0) * B + arange(0, B);
  Tile<bool> m = i < n;
  store(y + i, load(x + i, m) * 2.0f, m);
};
// out[0..15] of program 0 = a + (int64)d + (flag ? 1 : 0) + s (as int64), elementwise per lane.
auto mixed_fn = [](Ptr<int64_t> out, Ptr<tle::f16> h, Tile<uint8_t> a, Tile<double> dv, Constexpr<bool> flag,
                   Constexpr<double> s) {
  Tile<int32_t> i = arange(0, 16);
  const double sv = s;  // a host value while tracing: converted only when it fits
  const int64_t si = std::isfinite(sv) && std::fabs(sv) < 1e18 ? static_cast<int64_t>(sv) : 0;
  Tile<int64_t> v = cast<int64_t>(a) + cast<int64_t>(dv) + int64_t(flag ? 1 : 0) + si;
  store(out + i, v + cast<int64_t>(load(h + i)), program_id(0) == 0);
};

/// Memory no access may reach: a PROT_NONE mapping (a pointer into it faults on any access).
const char* guard_page() {
  static void* p = ::mmap(nullptr, 1 << 16, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return static_cast<const char*>(p) + (1 << 15);
}

/// Expected outcomes, weakest claim last: a bad argument (UserError) is found before anything runs,
/// so it outranks a pointer that may fault.
enum class Want { Ok, MaybeFault, UserError, AnyError };
Want worse(Want a, Want b) { return static_cast<int>(a) > static_cast<int>(b) ? a : b; }

/// One generated argument: the HostArg, what it should lead to, and what it is (for messages).
struct Arg {
  d::HostArg h{};
  Want want = Want::Ok;
  std::string what;
  bool real = false;  // points at the case's own buffer (results are checked)
};

d::HostArg int_arg(int64_t v) {
  d::HostArg h{};
  h.kind = d::HostArg::Int, h.i = v, h.type_name = "signed integer";
  return h;
}
d::HostArg uint_arg(uint64_t v) {
  d::HostArg h{};
  h.kind = d::HostArg::UInt, h.u = v, h.type_name = "unsigned integer";
  return h;
}
d::HostArg float_arg(double v) {
  d::HostArg h{};
  h.kind = d::HostArg::Float, h.f = v, h.type_name = "double";
  return h;
}
d::HostArg ptr_arg(const void* p, DType t, bool untyped = false) {
  d::HostArg h{};
  h.kind = d::HostArg::Pointer, h.p = p, h.pointee = t, h.untyped_pointer = untyped, h.type_name = "pointer";
  return h;
}

const DType kDTypes[] = {DType::i1,  DType::i8,  DType::i16, DType::i32, DType::i64, DType::u8,  DType::u16,
                         DType::u32, DType::u64, DType::f16, DType::bf16, DType::f32, DType::f64};

struct Gen {
  std::mt19937_64 rng;
  std::vector<std::vector<char>>& keep;  // buffers and DLPack pieces alive for the case
  std::vector<DLTensor>& tensors;
  std::vector<std::vector<int64_t>>& dims;
  uint64_t u(uint64_t n) { return n ? rng() % n : 0; }
  bool p(double prob) { return std::uniform_real_distribution<double>(0, 1)(rng) < prob; }
  template <class T> T pick(std::initializer_list<T> l) { return *(l.begin() + u(l.size())); }

  int64_t wild_int() {
    return pick<int64_t>({0, 1, -1, 2, 3, 7, 16, 255, 256, 65535, 65536, INT32_MAX, int64_t(INT32_MAX) + 1, INT32_MIN,
                          int64_t(INT32_MIN) - 1, INT64_MAX, INT64_MIN, int64_t(1) << 40, -(int64_t(1) << 40)});
  }
  double wild_float() {
    return pick<double>({0.0, -0.0, 1.5, -2.25, 1e308, -1e308, 5e-324, std::numeric_limits<double>::infinity(),
                         -std::numeric_limits<double>::infinity(), std::nan(""), 65504.0, 3.4e38, 1e39});
  }

  /// An argument of a random kind (mostly wrong for any given parameter).
  Arg wild(size_t buf_bytes) {
    Arg a;
    switch (u(9)) {
      case 0: a.h = int_arg(wild_int()), a.what = "int " + std::to_string(a.h.i); break;
      case 1: a.h = uint_arg(static_cast<uint64_t>(wild_int())), a.what = "uint " + std::to_string(a.h.u); break;
      case 2: a.h = float_arg(wild_float()), a.what = "float"; break;
      case 3: a.h = {}, a.h.kind = d::HostArg::Bool, a.h.b = p(0.5), a.h.type_name = "bool", a.what = "bool"; break;
      case 4: a.h = {}, a.h.kind = d::HostArg::Half, a.h.h = static_cast<uint16_t>(rng()), a.h.type_name = "tle::f16", a.what = "f16"; break;
      case 5: a.h = {}, a.h.kind = d::HostArg::BFloat, a.h.h = static_cast<uint16_t>(rng()), a.h.type_name = "tle::bf16", a.what = "bf16"; break;
      case 6: a.h = ptr_arg(buffer(buf_bytes), kDTypes[u(13)], p(0.2)), a.what = "pointer of a random type"; break;
      case 7: a.h = ptr_arg(nullptr, DType::f32, true), a.h.type_name = "nullptr", a.what = "nullptr"; break;
      default: a = dlpack(kDTypes[u(13)], buf_bytes); break;
    }
    a.want = Want::AnyError;  // decided by the caller against the parameter
    return a;
  }

  const char* buffer(size_t bytes) {
    keep.emplace_back(bytes + 64, '\0');
    char* b = keep.back().data();
    return b + (16 - reinterpret_cast<uintptr_t>(b) % 16) % 16;  // 16-byte aligned, 48 bytes of slack
  }

  /// A DLPack tensor for a parameter of element type `t`, good or broken in one random way.
  Arg dlpack(DType t, size_t bytes) {
    Arg a;
    DLTensor dl{};
    const char* data = buffer(bytes);
    dl.data = const_cast<char*>(data);
    dl.device = {kDLCPU, 0};
    const int bits = t == DType::i1 ? 8 : bit_width(t);
    uint8_t code = t == DType::i1    ? 6
                   : t == DType::bf16 ? kDLBfloat
                   : is_float(t)      ? kDLFloat
                   : is_signed_int(t) ? kDLInt
                                      : kDLUInt;
    dl.dtype = {code, static_cast<uint8_t>(bits), 1};
    dims.push_back({int64_t(bytes / byte_size(t)), 1, 1, 1});
    dl.ndim = 1;
    dl.shape = dims.back().data();
    a.what = "DLTensor";
    a.want = Want::Ok;
    a.real = true;
    switch (u(14)) {
      case 0: dl.dtype.code = static_cast<uint8_t>(pick<int>({0, 1, 2, 3, 4, 5, 6, 7, 255})); break;
      case 1: dl.dtype.bits = static_cast<uint8_t>(pick<int>({0, 1, 4, 8, 16, 32, 64, 128, 255})); break;
      case 2: dl.dtype.lanes = static_cast<uint16_t>(pick<int>({0, 2, 4, 65535})); break;
      case 3: {  // written as bits: 999 and -1 are not values of the enum DLDeviceType
        const int32_t dev = pick<int32_t>({0, 2, 4, 7, 8, 10, 13, 14, 999, -1});
        std::memcpy(&dl.device.device_type, &dev, sizeof dev);
        break;
      }
      case 4: dl.device = {kDLCUDAHost, static_cast<int32_t>(wild_int())}; break;  // readable by the CPU
      case 5: dl.ndim = static_cast<int32_t>(pick<int64_t>({0, -1, -1000, INT32_MIN})); break;
      case 6: dims.back() = {int64_t(bytes / byte_size(t)), 0, -5, 3}, dl.ndim = 4; break;
      case 7: {
        dims.push_back({1, -1, INT64_MAX, INT64_MIN});
        dl.strides = dims.back().data();
        break;
      }
      case 8: dl.byte_offset = pick<uint64_t>({1, 2, 3, 6}); break;   // misaligned for most dtypes
      case 9: dl.byte_offset = 16; break;                              // aligned, within the slack
      case 10: dl.data = nullptr; break;                               // null data, elements in the shape
      case 11: dl.data = nullptr, dims.back()[0] = 0; break;           // null data, empty: a null pointer
      case 12: {
        tensors.push_back(dl);
        a.h = d::dlpack_host_arg(nullptr, "DLTensor*");              // the DLTensor* itself null
        a.want = Want::UserError, a.real = false, a.what = "null DLTensor*";
        return a;
      }
      default: break;  // a good tensor
    }
    tensors.push_back(dl);
    a.h = d::dlpack_host_arg(&tensors.back(), "DLTensor*");
    // The expected outcome, from DLPack's rules (tle/dlpack.hpp).
    const bool dtype_ok = dl.dtype.code == code && dl.dtype.bits == bits && dl.dtype.lanes == 1;
    int32_t dev;  // its bits: an unlisted device is not a valid DLDeviceType value to load
    std::memcpy(&dev, &dl.device.device_type, sizeof dev);
    const bool device_ok = dev == kDLCPU || dev == kDLCUDAHost;
    bool empty = false;
    for (int i = 0; i < dl.ndim; ++i) empty = empty || dl.shape[i] == 0;
    if (!dtype_ok || !device_ok || (dl.data == nullptr && !empty) ||
        (dl.data != nullptr && (reinterpret_cast<uintptr_t>(dl.data) + dl.byte_offset) % byte_size(t) != 0)) {
      a.want = Want::UserError, a.real = false;
    } else if (dl.data == nullptr) {
      a.want = Want::MaybeFault, a.real = false;
    } else if (dl.byte_offset != 0) {
      a.real = false;  // fine, but the buffer is not where the check reads
    }
    return a;
  }

  /// A pointer argument for a Ptr<t> parameter over a buffer of `bytes`: right, or wrong in one way.
  Arg pointer(DType t, size_t bytes) {
    if (p(0.15)) return dlpack(t, bytes);
    Arg a;
    a.h = ptr_arg(buffer(bytes), t);
    a.what = "pointer";
    a.real = true;
    switch (u(12)) {
      case 0: {
        DType o = kDTypes[u(13)];
        a.h.pointee = o;
        if (o != t) a.want = Want::UserError, a.real = false, a.what = "pointer to the wrong dtype";
        break;
      }
      case 1:
        if (byte_size(t) > 1) a.h.p = static_cast<const char*>(a.h.p) + 1, a.want = Want::UserError, a.real = false, a.what = "misaligned pointer";
        break;
      case 2: a.h.p = nullptr, a.want = Want::MaybeFault, a.real = false, a.what = "null pointer"; break;
      case 3: a.h.p = guard_page(), a.want = Want::MaybeFault, a.real = false, a.what = "unmapped pointer"; break;
      case 4: a.h.untyped_pointer = true, a.what = "untyped pointer"; break;  // void* at run time: unchecked type
      case 5: a.h.device_buffer = true, a.want = Want::UserError, a.real = false, a.what = "DeviceBuffer on the CPU"; break;
      case 6: a = wild(bytes); a.want = a.h.kind == d::HostArg::Pointer ? Want::AnyError : Want::UserError; break;
      default: break;
    }
    return a;
  }
};

std::string describe(const std::vector<Arg>& args) {
  std::string s;
  for (auto& a : args) s += (s.empty() ? "" : ", ") + a.what;
  return s;
}

struct Outcome {
  int ok = 0, user = 0, runtime = 0;
};

/// Runs `f` and classifies its outcome; FAILs on anything but success, UserError naming this file,
/// or RuntimeError naming its call; and when the outcome contradicts `want`.
template <class F> void expect(Want want, const std::string& what, Outcome& out, F&& f) {
  INFO(what);
  try {
    f();
    ++out.ok;
    CHECK((want == Want::Ok || want == Want::MaybeFault || want == Want::AnyError));
  } catch (const UserError& e) {
    ++out.user;
    INFO(e.what());
    CHECK(std::string(e.file()).find("test_hostile.cpp") != std::string::npos);  // the user's file:line
    CHECK(e.line() > 0);
    CHECK(want != Want::Ok);
    CHECK(want != Want::MaybeFault);
  } catch (const RuntimeError& e) {
    ++out.runtime;
    INFO(e.what());
    CHECK(!e.call().empty());
    CHECK((want == Want::MaybeFault || want == Want::AnyError));
  } catch (const std::exception& e) {
    FAIL("neither UserError nor RuntimeError: " << typeid(e).name() << ": " << e.what());
  } catch (...) {
    FAIL("a non-std exception");
  }
}

uint64_t env_u64(const char* name, uint64_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : dflt;
}

}  // namespace

TEST_CASE("hostile: thousands of random launches end in success, UserError or RuntimeError", "[hostile]") {
  const uint64_t seed = env_u64("TLE_HOSTILE_SEED", 1), count = env_u64("TLE_HOSTILE_COUNT", 3000);
  const bool verbose = env_u64("TLE_HOSTILE_VERBOSE", 0) != 0;
  static Dyn vec("hostile_vec", vec_fn);
  static Dyn mixed("hostile_mixed", mixed_fn);
  Outcome out;
  int checked_results = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t c = 0; c < count; ++c) {
    std::vector<std::vector<char>> keep;
    std::vector<DLTensor> tensors;
    std::vector<std::vector<int64_t>> dims;
    keep.reserve(64), tensors.reserve(64), dims.reserve(64);  // pointers into them stay valid
    Gen g{std::mt19937_64(seed * 0x9e3779b97f4a7c15ull + c), keep, tensors, dims};
    std::vector<Arg> args;
    Want want = Want::Ok;

    // Grid and options: mostly sane, sometimes absurd.
    int64_t grid[3] = {int64_t(g.u(4)), 1, 1};
    if (g.p(0.15)) grid[g.u(3)] = g.wild_int();
    int64_t total = 1;
    bool grid_ok = true;
    for (int i = 0; i < 3; ++i) {
      const int64_t lim = i == 0 ? INT32_MAX : 65535;
      grid_ok = grid_ok && grid[i] >= 0 && grid[i] <= lim;
    }
    if (grid_ok) {
      for (int i = 0; i < 3; ++i) total = grid[i] == 0 ? 0 : (total > 64 ? total : total * grid[i]);
      if (total > 8) grid[2] = 0, total = 0;  // a valid but huge grid: made empty (rule E08), not run for hours
    } else {
      want = Want::UserError;
    }
    d::LaunchOptions opts;
    opts.backend = g.p(0.05) ? static_cast<int>(Backend::Interp) : static_cast<int>(Backend::CPU);
    if (g.p(0.05)) {
      opts.num_warps = static_cast<int>(g.pick<int64_t>({0, -4, 3, 64, 1, 8, 32}));
      if (opts.num_warps < 1 || opts.num_warps > 32 || (opts.num_warps & (opts.num_warps - 1))) want = Want::UserError;
    }
    if (g.p(0.03)) {
      opts.num_stages = static_cast<int>(g.pick<int64_t>({0, 9, -1, 1, 8}));
      if (opts.num_stages < 1 || opts.num_stages > 8) want = Want::UserError;
    }
    if (g.p(0.03)) {
      opts.maxnreg = static_cast<int>(g.pick<int64_t>({0, 23, 24, 255, 256, -1}));
      if (opts.maxnreg != 0 && (opts.maxnreg < 24 || opts.maxnreg > 255)) want = Want::UserError;
    }
    const auto here = std::source_location::current();
    const SrcLoc loc(here);

    const Want want_launch_only = want;  // grid and options: a launch checks them, Kernel::ir does not
    want = Want::Ok;
    if (g.p(0.7)) {
      // vec: (Ptr<float> x, Ptr<float> y, Tile<int32_t> n, Constexpr<int> B)
      int64_t B = g.p(0.85) ? g.pick<int64_t>({1, 2, 3, 16, 64, 100, 256}) : g.wild_int();
      if (g.p(0.002)) B = int64_t(1) << 20;  // the largest tile the language allows
      const bool interp = opts.backend == static_cast<int>(Backend::Interp);
      if (interp && B > 256 && B <= (int64_t(1) << 20)) B = 64;  // the interpreter is slow on huge tiles
      const int64_t progs = std::max<int64_t>(grid[0], 1);
      const size_t elems = size_t(std::clamp<int64_t>(B, 1, int64_t(1) << 20)) * size_t(std::min<int64_t>(progs, 4));
      Arg x = g.pointer(DType::f32, elems * 4), y = g.pointer(DType::f32, elems * 4);
      if (x.real) {
        float* xf = reinterpret_cast<float*>(const_cast<void*>(x.h.p));
        for (size_t i = 0; i < elems; ++i) xf[i] = static_cast<float>(i % 1000) - 3.5f;
      }
      Arg n;
      n.h = int_arg(int64_t(g.u(elems + 1))), n.what = "n";
      if (g.p(0.1)) {
        n = g.wild(16);
        const bool fits = (n.h.kind == d::HostArg::Int && n.h.i >= INT32_MIN && n.h.i <= INT32_MAX) ||
                          (n.h.kind == d::HostArg::UInt && n.h.u <= uint64_t(INT32_MAX)) || n.h.kind == d::HostArg::Bool;
        n.want = fits ? Want::Ok : Want::UserError;
        // A fitting n larger than the buffer would let the kernel run past it: keep it in range.
        if (fits && n.h.kind == d::HostArg::Int && (n.h.i < 0 || size_t(n.h.i) > elems)) n.h.i = int64_t(elems) / 2;
        if (fits && n.h.kind == d::HostArg::UInt && n.h.u > elems) n.h.u = elems / 2;
      }
      Arg b;
      b.h = int_arg(B), b.what = "B " + std::to_string(B);
      // B must fit an int (checked when the arguments are packed), and be from 1 to 2^20 (E07 and
      // the tile size limit, checked when the kernel is traced: not at all for an empty grid).
      bool b_trace_error = false;
      if (B < INT32_MIN || B > INT32_MAX) b.want = Want::UserError;
      else if (B <= 0 || B > (int64_t(1) << 20)) b_trace_error = true;
      if (g.p(0.05)) {
        b = g.wild(16);
        b.want = Want::UserError;  // floats, halves, pointers: not an integer
        b_trace_error = false;
        if (b.h.kind == d::HostArg::Bool) b.want = Want::Ok, b_trace_error = !b.h.b;
        if (b.h.kind == d::HostArg::Int && b.h.i > 256) b.h.i = -b.h.i;  // keep it fast
        if (b.h.kind == d::HostArg::Int && b.h.i >= INT32_MIN && b.h.i <= 256) b.want = Want::Ok, b_trace_error = b.h.i < 1;
        if (b.h.kind == d::HostArg::UInt && b.h.u > 256) b.h.u = uint64_t(INT64_MAX) + 7;  // does not fit
        if (b.h.kind == d::HostArg::UInt && b.h.u <= 256) b.want = Want::Ok, b_trace_error = b.h.u < 1;
      }
      // A trace error is a UserError whenever the kernel is traced: a non-empty launch, ir, stats.
      if (b_trace_error && (total > 0 || !grid_ok || want_launch_only != Want::Ok)) b.want = Want::UserError;
      const bool b_trace_error_any = b_trace_error;
      args = {x, y, n, b};
      // Wrong argument counts.
      if (g.p(0.04)) {
        if (g.p(0.5) && !args.empty()) args.pop_back();
        else args.push_back(g.wild(16));
        for (auto& a : args) a.want = Want::Ok;
        want = Want::UserError;
      }
      for (auto& a : args) want = worse(want, a.want);
      const Want want_args = want;
      want = worse(want, want_launch_only);
      const std::string what = fmt::format("case {} (seed {}): vec grid {}x{}x{} warps {} stages {} maxnreg {} backend {} args: {}",
                                           c, seed, grid[0], grid[1], grid[2], opts.num_warps, opts.num_stages,
                                           opts.maxnreg, opts.backend, describe(args));
      if (verbose) std::fprintf(stderr, "%s\n", what.c_str());
      std::vector<d::HostArg> h;
      for (auto& a : args) h.push_back(a.h);
      const int kind = static_cast<int>(g.u(20));
      if (kind == 0) {
        // Kernel::ir checks the arguments but no device (DeviceBuffer, DLPack device), grid or option.
        expect((want_args == Want::Ok || want_args == Want::MaybeFault) && !b_trace_error_any ? Want::Ok : Want::AnyError,
               what + " [ir]", out, [&] {
          d::kernel_ir(vec.k, &vec.fn, h.data(), h.size(), g.p(0.5), loc);
        });
      } else if (kind == 1) {
        // Kernel::stats compiles for a 1x1x1 grid (the grid is not checked) and runs nothing.
        Want ws = b_trace_error_any ? Want::UserError : want == Want::MaybeFault ? Want::Ok : want;
        expect(grid_ok ? ws : Want::AnyError, what + " [stats]", out, [&] {
          d::kernel_stats(vec.k, &vec.fn, opts, h.data(), h.size(), loc);
        });
      } else {
        float* yf = y.real ? reinterpret_cast<float*>(const_cast<void*>(y.h.p)) : nullptr;
        if (yf) std::fill(yf, yf + elems, -7.0f);
        bool ran = false;
        expect(want, what, out, [&] {
          d::kernel_launch(vec.k, &vec.fn, d::Grid3{grid[0], grid[1], grid[2]}, opts, h.data(), h.size(), loc);
          ran = true;
        });
        // Results of a good launch: y = 2x on the first min(n, programs * B) elements, untouched after.
        if (ran && want == Want::Ok && x.real && yf && args.size() == 4 && n.h.kind == d::HostArg::Int &&
            b.h.kind == d::HostArg::Int && total > 0) {
          const float* xf = reinterpret_cast<const float*>(x.h.p);
          const size_t done = std::min<size_t>(size_t(n.h.i), size_t(total * b.h.i));
          bool right = true;
          for (size_t i = 0; i < elems && right; ++i)
            right = yf[i] == (i < done ? 2.0f * xf[i] : -7.0f);
          CHECK(right);
          ++checked_results;
        }
      }
    } else {
      // mixed: (Ptr<int64_t> out, Ptr<f16> h, Tile<uint8_t> a, Tile<double> dv, Constexpr<bool> flag, Constexpr<double> s)
      Arg o = g.pointer(DType::i64, 16 * 8), hh = g.pointer(DType::f16, 16 * 2);
      Arg a = g.p(0.8) ? Arg{int_arg(int64_t(g.u(256))), Want::Ok, "a"} : g.wild(16);
      if (a.want == Want::AnyError) {
        const bool fits = (a.h.kind == d::HostArg::Int && a.h.i >= 0 && a.h.i <= 255) ||
                          (a.h.kind == d::HostArg::UInt && a.h.u <= 255) || a.h.kind == d::HostArg::Bool;
        a.want = fits ? Want::Ok : Want::UserError;
      }
      Arg dv = g.p(0.8) ? Arg{float_arg(double(g.u(100))), Want::Ok, "dv"} : g.wild(16);
      if (dv.want == Want::AnyError) {
        const bool number = dv.h.kind == d::HostArg::Int || dv.h.kind == d::HostArg::UInt ||
                            dv.h.kind == d::HostArg::Float || dv.h.kind == d::HostArg::Half ||
                            dv.h.kind == d::HostArg::BFloat;
        dv.want = number ? Want::Ok : Want::UserError;
      }
      Arg flag = g.p(0.8) ? Arg{int_arg(int64_t(g.u(2))), Want::Ok, "flag"} : g.wild(16);
      if (flag.want == Want::AnyError) {
        const bool ok = (flag.h.kind == d::HostArg::Int && (flag.h.i == 0 || flag.h.i == 1)) ||
                        (flag.h.kind == d::HostArg::UInt && flag.h.u <= 1) || flag.h.kind == d::HostArg::Bool;
        flag.want = ok ? Want::Ok : Want::UserError;
      }
      Arg s = g.p(0.7) ? Arg{float_arg(double(g.u(1000))), Want::Ok, "s"} : g.wild(16);
      if (s.want == Want::AnyError) {
        const bool number = s.h.kind == d::HostArg::Int || s.h.kind == d::HostArg::UInt || s.h.kind == d::HostArg::Float;
        s.want = number ? Want::Ok : Want::UserError;
      }
      args = {o, hh, a, dv, flag, s};
      for (auto& x : args) want = worse(want, x.want);
      want = worse(want, want_launch_only);
      // Only 16 elements are touched, so a huge valid grid is not huge work; keep it at most 8 programs.
      const std::string what = fmt::format("case {} (seed {}): mixed grid {}x{}x{} args: {}", c, seed, grid[0], grid[1],
                                           grid[2], describe(args));
      if (verbose) std::fprintf(stderr, "%s\n", what.c_str());
      std::vector<d::HostArg> h;
      for (auto& x : args) h.push_back(x.h);
      expect(want, what, out, [&] {
        d::kernel_launch(mixed.k, &mixed.fn, d::Grid3{grid[0], grid[1], grid[2]}, opts, h.data(), h.size(), loc);
      });
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  WARN(count << " hostile cases in " << secs << " s: " << out.ok << " ran, " << out.user << " UserErrors, "
             << out.runtime << " RuntimeErrors; " << checked_results << " results checked; " << vec.specs.size()
             << "/" << mixed.specs.size() << " params");
  CHECK(out.ok > int(count) / 10);  // the generator makes good launches too ...
  CHECK(out.user > int(count) / 10);  // ... and bad ones
  CHECK(out.runtime > 0);             // and faults (null and unmapped pointers that are read)
  CHECK(checked_results > int(count) / 20);
}

TEST_CASE("hostile: Kernel::ptx with absurd targets and options", "[hostile]") {
  static Dyn vec("hostile_vec_ptx", vec_fn);
  std::vector<float> x(64), y(64);
  Outcome out;
  const auto here = std::source_location::current();
  for (int sm : {0, -1, 52, 75, 80, 90, 1000, INT32_MAX}) {
    for (int w : {4, 3}) {
      d::LaunchOptions o;
      o.num_warps = w;
      d::HostArg h[] = {ptr_arg(x.data(), DType::f32), ptr_arg(y.data(), DType::f32), int_arg(64), int_arg(64)};
      const Want want = (sm < 80 || w == 3) ? Want::UserError : Want::Ok;
      expect(want, fmt::format("ptx sm {} warps {}", sm, w), out,
             [&] { d::kernel_ptx(vec.k, &vec.fn, sm, o, h, 4, SrcLoc(here)); });
    }
  }
  CHECK(out.ok == 4);  // sm_80, sm_90, and newer ones (1000, INT32_MAX: compiled as sm_90, as documented)
}

TEST_CASE("hostile: raw CUDA kernels whose source or target is bad are clean tle errors", "[hostile]") {
  // NVRTC may be missing (then RuntimeError naming it) or present (then a bad source is a
  // UserError at raw_kernel's line, holding NVRTC's log); raw kernels never run on the CPU.
  const std::string good = R"(extern "C" __global__ void k(float* y, int n) { if (threadIdx.x < n) y[threadIdx.x] = 1.0f; })";
  struct Src {
    const char* name;
    std::string source;
    std::vector<std::string> options;
    bool bad;
  };
  // NVRTC takes about a second per compile here, so the list is short and only the good source
  // is compiled for the absurd targets.
  static const char kNulInside[] = "extern \"C\" __global__ void k(float* y, int n) { y[0] = 1; }\0garbage";
  const std::vector<Src> sources = {
      {"k", good, {}, false},
      {"k", "extern \"C\" __global__ void k(float* y, int n) { y[0] = ; }", {}, true},
      {"k", "", {}, true},
      {"k", "#error planted\n" + good, {}, true},
      {"not_there", good, {}, true},
      {"", good, {}, true},
      {"k", good, {"--definitely-not-an-option"}, true},
      {"k", std::string(kNulInside, sizeof kNulInside - 1), {}, false},  // NVRTC reads up to the NUL
      {"k", "\xff\xfe binary junk \x80\x81", {}, true},
  };
  Outcome out;
  int nvrtc_missing = 0;
  const auto here = std::source_location::current();
  std::vector<float> y(8);
  for (size_t i = 0; i < sources.size(); ++i) {
    const Src& s = sources[i];
    d::RawKernelState* k = nullptr;
    expect(Want::AnyError, fmt::format("raw source {} create", i), out, [&] {
      k = d::raw_kernel_create(s.name, s.source, s.options,
                               {{d::ParamSpec::Pointer, DType::f32}, {d::ParamSpec::Scalar, DType::i32}}, SrcLoc(here));
    });
    if (!k) continue;
    for (int sm : i == 0 ? std::vector<int>{90, 80, 0, -7, 12345} : std::vector<int>{90}) {
      std::string what = fmt::format("raw source {} ptx sm {}", i, sm);
      try {
        (void)d::raw_kernel_ptx(k, sm);
        ++out.ok;
        CHECK(!s.bad);  // a source NVRTC must reject was accepted
        CHECK(sm >= 50);
      } catch (const UserError& e) {
        ++out.user;
        INFO(what << ": " << e.what());
        CHECK(std::string(e.file()).find("test_hostile.cpp") != std::string::npos);
      } catch (const RuntimeError& e) {
        ++out.runtime;
        INFO(what << ": " << e.what());
        CHECK(!e.call().empty());
        nvrtc_missing += std::string(e.what()).find("NVRTC is not available") != std::string::npos;
      } catch (const std::exception& e) {
        FAIL(what << ": neither UserError nor RuntimeError: " << e.what());
      }
    }
    // A launch on the CPU backend: always a UserError (CUDA code does not run on the CPU).
    d::LaunchOptions o;
    o.backend = static_cast<int>(Backend::CPU);
    d::HostArg h[] = {ptr_arg(y.data(), DType::f32), int_arg(8)};
    expect(Want::UserError, fmt::format("raw source {} CPU launch", i), out,
           [&] { d::raw_kernel_launch(k, d::Grid3{1, 1, 1}, 32, 1, 1, 0, o, h, 2, SrcLoc(here)); });
    d::raw_kernel_destroy(k);
  }
  if (nvrtc_missing) WARN(nvrtc_missing << " raw compiles found no NVRTC (a RuntimeError each)");
  CHECK(out.user > 0);
}

TEST_CASE("hostile: a raw kernel compile without NVRTC is a RuntimeError naming NVRTC, not a crash", "[hostile]") {
  // A fresh process (NVRTC is loaded once per process): tle_cache_helper raw-ptx with
  // TLE_LIBNVRTC naming a missing library.
  proctest::Child child({"raw-ptx"}, {{"TLE_CACHE", "0"}, {"TLE_LIBNVRTC", "/nonexistent/libnvrtc.so.13"}});
  const int status = child.finish();
  const std::string& out = child.output();
  INFO(out);
  CHECK(status == 3);  // a RuntimeError, caught (not a signal: those read 128 + signal)
  CHECK(out.find("RuntimeError call=nvrtc") != std::string::npos);
  CHECK(out.find("/nonexistent/libnvrtc.so.13") != std::string::npos);
}
