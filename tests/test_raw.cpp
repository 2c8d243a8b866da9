// tests/test_raw.cpp - TLE-Raw beyond inline PTX (tle/raw.hpp, docs/raw.md): whole CUDA kernels and
// CUDA device functions called from tile code, compiled in-process by NVRTC and linked by
// nvJitLink (both loaded with dlopen; neither needs a GPU).
//
// [raw] (CI, no GPU): NVRTC output assembles with ptxas (sm_90a); NVRTC errors are UserErrors at
// the caller's line holding the log and the snippet line; a tile kernel's PTX calling a device
// function links with the NVRTC PTX into an sm_90a ELF cubin (nvJitLink); protocol errors
// (argument types, dtypes, missing functions, parameter sizes) are UserErrors; the CPU backend
// refuses raw kernels and cuda_function; NVRTC results are cached on disk (hit and miss).
// [.gpu][raw_gpu]: the examples' raw kernels against references; raw and tile kernels interleaved
// on one stream.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../examples/kernels.hpp"
#include "../examples/raw_kernels.hpp"
#include "error_util.hpp"
#include "ptxas_util.hpp"
#include "runtime/cuda/nvrtc.hpp"
#include "runtime/disk_cache.hpp"
#include "runtime/raw/cuda_compile.hpp"
#include "tle/tle.hpp"

using namespace tle;
namespace fs = std::filesystem;

namespace {

template <class T> T* fake(uintptr_t a = 0x10000) { return reinterpret_cast<T*>(a); }

/// Runs f, which must throw UserError whose message contains every phrase, at this file and `line`.
template <class F> void expect_error(F&& f, const std::vector<std::string>& phrases, const int& line) {
  errtest::expect_user_error(f, phrases, "test_raw.cpp", line);
}

const char* kSaxpy = R"(extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
})";

/// A device function taking a pointer, a tile and two scalars: out[i] = a * t[i] for i < n.
const tle::CudaSource& axpy_source() {
  static const tle::CudaSource s(R"(
extern "C" __device__ void tle_scale_store(float* out, tle::TileRef<float> t, float a, int n) {
  for (int i = tle::cta_thread(); i < n && i < t.numel(); i += tle::cta_threads()) out[i] = a * t[i];
}
)",
                                 {}, "scale.cu");
  return s;
}

auto scale_kernel() {
  return jit("scale_via_cuda", [](Ptr<float> x, Ptr<float> y, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> o = arange(0, BLOCK);
    Tile<float> v = load(x + o, o < n, 0.0f);
    cuda_function(axpy_source(), "tle_scale_store", y, v, 2.5f, n);
  });
}

/// n deterministic values in [lo, hi).
std::vector<float> random_vector(size_t n, unsigned seed, float lo = -1.f, float hi = 1.f) {
  std::vector<float> v(n);
  uint64_t z = 0x9e3779b97f4a7c15ull * (seed + 1);
  for (auto& x : v) {
    z ^= z << 13, z ^= z >> 7, z ^= z << 17;
    x = lo + (hi - lo) * float(double(z >> 40) * 0x1.0p-24);
  }
  return v;
}

/// Device functions over other dtypes and ranks: a rank-2 i32 tile, an f16 tile (as bits), a
/// u8 tile, an i64 return and a double scalar.
const tle::CudaSource& protocol_source() {
  static const tle::CudaSource s(R"(
extern "C" __device__ long long tle_mix(tle::TileRef<int> a, tle::TileRef<tle::f16> h, tle::TileRef<unsigned char> b,
                                        double scale) {
  // a[i][j] += 1000 * i + j (checking shape/strides), h = -h (sign bit), b = 255 - b.
  for (int k = tle::cta_thread(); k < a.numel(); k += tle::cta_threads()) {
    const int i = k / a.shape[1], j = k % a.shape[1];
    a.at(i, j) += 1000 * i + j;
  }
  for (int k = tle::cta_thread(); k < h.numel(); k += tle::cta_threads()) h[k].bits ^= 0x8000;
  for (int k = tle::cta_thread(); k < b.numel(); k += tle::cta_threads()) b[k] = (unsigned char)(255 - b[k]);
  __syncthreads();
  long long r = 0;
  if (tle::cta_thread() == 0) r = (long long)(scale * (a.rank * 100 + a.shape[0] * 10 + a.strides[0] + h.rank + b.shape[0]));
  return r;  // thread 0's value is the call's
}
)",
                                 {}, "mix.cu");
  return s;
}

auto mix_kernel() {
  return jit("protocol_mix", [](Ptr<int32_t> pa, Ptr<f16> ph, Ptr<uint8_t> pb, Ptr<int64_t> pr) {
    Tile<int32_t> r = expand_dims(arange(0, 16), 1) * 32 + expand_dims(arange(0, 32), 0);  // [16, 32]
    Tile<int32_t> a = load(pa + r);
    Tile<f16> h = load(ph + arange(0, 64));
    Tile<uint8_t> b = load(pb + arange(0, 128));
    Tile<int64_t> got = cuda_function<int64_t>(protocol_source(), "tle_mix", inout(a), inout(h), inout(b), 2.0);
    store(pa + r, a);
    store(ph + arange(0, 64), h);
    store(pb + arange(0, 128), b);
    store(pr, got);
  });
}

bool nvjitlink_available() { return cuda::nvjitlink() != nullptr; }

}  // namespace

// ============================================================================ NVRTC, CI

TEST_CASE("raw: NVRTC and nvJitLink load with dlopen", "[raw]") {
  INFO("NVRTC: " << cuda::nvrtc_error() << "; nvJitLink: " << cuda::nvjitlink_error());
  REQUIRE(cuda::nvrtc() != nullptr);
  REQUIRE(cuda::nvjitlink() != nullptr);
  CHECK(cuda::nvrtc()->major >= 12);
  CHECK(raw::nvrtc_version().rfind("nvrtc ", 0) == 0);
}

TEST_CASE("raw: a raw kernel compiles with NVRTC to sm_90a PTX that ptxas assembles", "[raw]") {
  auto k = raw_kernel<void(float, const float*, float*, int)>("saxpy", kSaxpy);
  std::string ptx = k.ptx(90);
  CHECK_THAT(ptx, Catch::Contains(".target sm_90a"));
  CHECK_THAT(ptx, Catch::Contains(".entry saxpy"));
  ptxtest::assemble("raw kernel saxpy", ptx);
  CHECK(k.num_compiled() == 0);  // ptx() loads nothing
}

TEST_CASE("raw: a C++ (templated) raw kernel is found by its name expression", "[raw]") {
  auto k = raw_kernel<void(float*, int)>("ns::fill<float>", R"(
namespace ns {
template <class T> __global__ void fill(T* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = T(7);
}
template __global__ void fill<float>(float*, int);
})");
  std::string ptx = k.ptx(90);
  CHECK_THAT(ptx, Catch::Contains(".entry _ZN2ns4fillIfEEvPT_i"));
  ptxtest::assemble("raw kernel ns::fill<float>", ptx);
}

TEST_CASE("raw: NVRTC errors are UserErrors at the raw_kernel line with the log and the snippet line", "[raw][errors]") {
  int line = 0;
  expect_error(
      [&] {
        line = __LINE__ + 1;
        auto k = raw_kernel<void(float*)>("broken", R"(extern "C" __global__ void broken(float* y) {
  y[threadIdx.x] = undefined_name * 2.0f;
})");
        (void)k.ptx(90);
      },
      {"raw kernel 'broken'", "NVRTC", "broken.cu(2): error", "identifier \"undefined_name\" is undefined",
       "2 |   y[threadIdx.x] = undefined_name * 2.0f;"},
      line);
}

TEST_CASE("raw: options that set the architecture, bad options and unknown kernels are UserErrors", "[raw][errors]") {
  int line = 0;
  expect_error(
      [&] {
        line = __LINE__ + 1;
        auto k = raw_kernel<void(float, const float*, float*, int)>("saxpy", kSaxpy, {"--gpu-architecture=sm_80"});
        (void)k.ptx(90);
      },
      {"sets the GPU architecture", "sm_90a"}, line);
  expect_error(
      [&] {
        line = __LINE__ + 1;
        auto k = raw_kernel<void(float, const float*, float*, int)>("saxpy", kSaxpy, {"--no-such-option"});
        (void)k.ptx(90);
      },
      {"raw kernel 'saxpy'", "--no-such-option"}, line);
  expect_error(
      [&] {
        line = __LINE__ + 1;
        auto k = raw_kernel<void(float, const float*, float*, int)>("not_there", kSaxpy);
        (void)k.ptx(90);
      },
      {"raw kernel 'not_there'"}, line);
}

TEST_CASE("raw: NVRTC options reach the compiler", "[raw]") {
  const char* src = R"(extern "C" __global__ void k(int* y) {
#ifdef TLE_TEST_VALUE
  y[threadIdx.x] = TLE_TEST_VALUE;
#endif
})";
  auto with = raw_kernel<void(int32_t*)>("k", src, {"-DTLE_TEST_VALUE=1234567"});
  auto without = raw_kernel<void(int32_t*)>("k", src);
  CHECK_THAT(with.ptx(90), Catch::Contains("1234567"));
  CHECK_THAT(without.ptx(90), !Catch::Contains("1234567"));
}

TEST_CASE("raw: NVRTC results are cached on disk (miss, then hit in a fresh process cache)", "[raw]") {
  // compile_cuda's in-process cache sits on top of the global disk cache (TLE_CACHE_DIR); a
  // source unique to this process makes the first compile a disk miss.
  raw::CudaCompile c;
  c.source = "extern \"C\" __global__ void cached_k(int* y) { y[0] = " + std::to_string(::getpid()) + "; }";
  c.file_name = "cached.cu";
  c.what = "test";
  c.sm = 90;
  c.cubin = true;
  c.name_expressions = {"cached_k"};
  const auto before = detail::DiskCache::global().stats();
  raw::CudaOutput a = raw::compile_cuda(c);
  const auto mid = detail::DiskCache::global().stats();
  raw::CudaOutput b = raw::compile_cuda(c);  // the in-memory cache: no disk access
  const auto after = detail::DiskCache::global().stats();
  CHECK(a.image == b.image);
  CHECK(a.image.compare(0, 4, "\x7f" "ELF") == 0);
  CHECK(a.lowered_names == std::vector<std::string>{"cached_k"});
  if (detail::DiskCache::global().enabled()) {
    CHECK(mid.misses == before.misses + 1);  // a new source: a disk miss, then a write
    CHECK(mid.writes == before.writes + 1);
    CHECK(after.hits == mid.hits);
    CHECK(after.misses == mid.misses);
    // The entry is on disk: another process (a DiskCache of its own on the directory) would hit it.
    detail::DiskCache other(detail::DiskCache::global().directory());
    bool found = false;
    for (auto& e : fs::directory_iterator(other.directory())) found = found || e.path().extension() == ".tlec";
    CHECK(found);
    auto bytes = other.get(raw::compile_cache_key(c));
    REQUIRE(bytes.has_value());
    CHECK(other.stats().hits == 1);
    CHECK(bytes->find(a.image) != std::string::npos);  // the artifact holds the cubin
  } else {
    WARN("the global disk cache is disabled (TLE_CACHE=0?): only the in-memory cache was checked");
  }
  // A different option is a different key.
  c.options = {"-DX=1"};
  raw::CudaOutput d = raw::compile_cuda(c);
  const auto last = detail::DiskCache::global().stats();
  if (detail::DiskCache::global().enabled()) CHECK(last.misses == after.misses + 1);
  CHECK(!d.image.empty());
}

TEST_CASE("raw: the raw softmax's inline ex2.approx.ftz.f32 compiles to PTX that assembles", "[raw][ptx]") {
  auto k = ex::make_raw_softmax();
  std::string ptx = k.ptx(90, 8, fake<float>(), fake<float>(), 4096, 4096);
  CHECK_THAT(ptx, Catch::Contains("ex2.approx.ftz.f32"));
  ptxtest::assemble("raw softmax", ptx);
}

// ============================================================================ device functions, CI

TEST_CASE("raw: cuda_function traces to a cuda_call op with kinds and results", "[raw][ir]") {
  auto k = ex::make_sort_rows();
  std::string ir = k.ir(false, fake<float>(), fake<float>(), fake<float>(), 1000, 1024);
  CHECK_THAT(ir, Catch::Contains("cuda_call"));
  CHECK_THAT(ir, Catch::Contains("tle_bitonic_sort_f32"));
  CHECK_THAT(ir, Catch::Contains("tle_sum_squares"));
  // Impure: both calls survive the pipeline, though the sort's result feeds only a store.
  std::string opt = k.ir(true, fake<float>(), fake<float>(), fake<float>(), 1000, 1024);
  size_t n = 0;
  for (size_t p = opt.find("cuda_call"); p != std::string::npos; p = opt.find("cuda_call", p + 1)) ++n;
  CHECK(n == 2);
}

TEST_CASE("raw: a tile kernel calling CUDA device functions links with nvJitLink into an sm_90a cubin", "[raw][ptx]") {
  if (!nvjitlink_available()) FAIL("nvJitLink is not available: " << cuda::nvjitlink_error());
  auto k = ex::make_sort_rows();
  std::string ptx = k.ptx(90, 8, fake<float>(), fake<float>(), fake<float>(), 1000, 1024);
  CHECK_THAT(ptx, Catch::Contains(".extern .func"));
  CHECK_THAT(ptx, Catch::Contains("tle_bitonic_sort_f32"));
  CHECK_THAT(ptx, Catch::Contains(".param .align 8 .b8"));  // a TileRef by value
  // The device functions alone: relocatable PTX from NVRTC that ptxas assembles (-c).
  raw::CudaCompile c;
  c.source = ex::device_functions().source();
  c.file_name = "device_functions.cu";
  c.what = "test";
  c.relocatable = true;
  std::string dev = raw::compile_cuda(c).image;
  raw::PtxPrototype proto;
  REQUIRE(raw::find_ptx_function(dev, "tle_bitonic_sort_f32", &proto));
  CHECK(proto.param_bytes == std::vector<int>{48});
  CHECK(proto.ret_bytes == 0);
  REQUIRE(raw::find_ptx_function(dev, "tle_sum_squares", &proto));
  CHECK(proto.param_bytes == std::vector<int>{48});
  CHECK(proto.ret_bytes == 4);
  CHECK(!raw::find_ptx_function(dev, "no_such_function", nullptr));
  // The call sites as the kernel's IR gives them, linked with the tile PTX.
  raw::CallSite sort{ex::device_functions().source(), "device_functions.cu", "tle_bitonic_sort_f32", {}, {48}, 0, {}};
  raw::CallSite sumsq{ex::device_functions().source(), "device_functions.cu", "tle_sum_squares", {}, {48}, 4, {}};
  std::string cubin = raw::link_call_sites(ptx, {sumsq, sort}, 90);
  REQUIRE(cubin.size() > 64);
  CHECK(cubin.compare(0, 4, "\x7f" "ELF") == 0);
  CHECK(cubin.find("tle_sort_rows") != std::string::npos);        // the kernel's symbol
  CHECK(cubin.find("tle_bitonic_sort_f32") != std::string::npos);  // the linked device function
  // cuobjdump, when present and able to read this cubin (an older toolkit's may not be), lists the
  // kernel and the linked device function in its symbol table.
  if (::access("/usr/local/cuda/bin/cuobjdump", X_OK) == 0) {
    const std::string base = (fs::temp_directory_path() / ("tle-raw-" + std::to_string(::getpid()))).string();
    std::ofstream(base + ".cubin", std::ios::binary).write(cubin.data(), std::streamsize(cubin.size()));
    const std::string cmd = "/usr/local/cuda/bin/cuobjdump -elf " + base + ".cubin > " + base + ".txt 2>&1";
    const int rc = std::system(cmd.c_str());
    std::ifstream in(base + ".txt");
    std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (rc == 0) {
      CHECK_THAT(out, Catch::Contains("tle_sort_rows"));
      CHECK_THAT(out, Catch::Contains("tle_bitonic_sort_f32"));
    } else {
      WARN("cuobjdump cannot read the cubin (status " << rc << "): " << out.substr(0, 300));
    }
    fs::remove(base + ".cubin");
    fs::remove(base + ".txt");
  }
}

TEST_CASE("raw: an in-out cuda_function inside a device loop is loop-carried and links", "[raw][ptx]") {
  if (!nvjitlink_available()) FAIL("nvJitLink is not available: " << cuda::nvjitlink_error());
  auto k = jit("sort_in_loop", [](Ptr<float> x, Ptr<float> y, Tile<int32_t> reps) {
    Tile<int32_t> o = arange(0, 256);
    Tile<float> v = load(x + o);
    for (auto i : range(0, reps, 1)) {
      (void)i;
      v = v * -1.0f;
      cuda_function(ex::device_functions(), "tle_bitonic_sort_f32", inout(v));
    }
    store(y + o, v);
  });
  std::string ir = k.ir(true, fake<float>(), fake<float>(), 3);
  CHECK_THAT(ir, Catch::Contains("for"));
  CHECK_THAT(ir, Catch::Contains("cuda_call"));
  std::string ptx = k.ptx(90, 4, fake<float>(), fake<float>(), 3);
  raw::CallSite sort{ex::device_functions().source(), "device_functions.cu", "tle_bitonic_sort_f32", {}, {48}, 0, {}};
  std::string cubin = raw::link_call_sites(ptx, {sort}, 90);
  CHECK(cubin.compare(0, 4, "\x7f" "ELF") == 0);
}

TEST_CASE("raw: pointer, tile and scalar arguments link, the protocol's sizes are checked", "[raw][ptx]") {
  if (!nvjitlink_available()) FAIL("nvJitLink is not available: " << cuda::nvjitlink_error());
  auto k = scale_kernel();
  std::string ptx = k.ptx(90, 4, fake<float>(), fake<float>(), 100, 128);
  raw::CallSite ok{axpy_source().source(), "scale.cu", "tle_scale_store", {}, {8, 48, 4, 4}, 0, {}};
  std::string cubin = raw::link_call_sites(ptx, {ok}, 90);
  CHECK(cubin.compare(0, 4, "\x7f" "ELF") == 0);
  // A call passing a double where the function takes a float: UserError at the call's position.
  raw::CallSite wrong = ok;
  wrong.param_bytes = {8, 48, 8, 4};
  wrong.loc = SrcLoc(std::source_location::current());
  const int line = __LINE__ - 1;
  expect_error([&] { raw::link_call_sites(ptx, {wrong}, 90); },
               {"cuda_function 'tle_scale_store'", "takes 4 parameters (8, 48, 4, 4 bytes)", "8, 48, 8, 4 bytes"}, line);
  raw::CallSite missing = ok;
  missing.name = "tle_scale_stor";
  missing.loc = SrcLoc(std::source_location::current());
  const int line2 = __LINE__ - 1;
  expect_error([&] { raw::link_call_sites(ptx, {missing}, 90); }, {"defines no device function 'tle_scale_stor'"},
               line2);
}

TEST_CASE("raw: rank-2, f16 and u8 in-out tiles, a double scalar and an i64 return link", "[raw][ptx]") {
  if (!nvjitlink_available()) FAIL("nvJitLink is not available: " << cuda::nvjitlink_error());
  auto k = mix_kernel();
  std::string ptx = k.ptx(90, 4, fake<int32_t>(), fake<f16>(), fake<uint8_t>(), fake<int64_t>());
  raw::CallSite cs{protocol_source().source(), "mix.cu", "tle_mix", {}, {48, 48, 48, 8}, 8, {}};
  std::string cubin = raw::link_call_sites(ptx, {cs}, 90);
  CHECK(cubin.compare(0, 4, "\x7f" "ELF") == 0);
}

TEST_CASE("raw: device functions clashing with the kernel's symbol or with each other are UserErrors", "[raw][errors]") {
  // The kernel "protocol_mix" has the PTX entry tle_protocol_mix.
  auto k = mix_kernel();
  std::string ptx = k.ptx(90, 4, fake<int32_t>(), fake<f16>(), fake<uint8_t>(), fake<int64_t>());
  raw::CallSite clash{"extern \"C\" __device__ void tle_protocol_mix(int x) {}", "clash.cu", "tle_protocol_mix", {},
                      {4}, 0, SrcLoc(std::source_location::current())};
  int line = __LINE__ - 1;
  expect_error([&] { raw::link_call_sites(ptx, {clash}, 90); }, {"also the tile kernel's own symbol"}, line);
  raw::CallSite one{"extern \"C\" __device__ void twice(int x) {}", "one.cu", "twice", {}, {4}, 0,
                    SrcLoc(std::source_location::current())};
  line = __LINE__ - 1;
  raw::CallSite two = one;
  two.source += "\n// another source";
  two.file = "two.cu";
  expect_error([&] { raw::link_call_sites(ptx, {one, two}, 90); }, {"'twice' is defined by two CUDA sources"}, line);
}

TEST_CASE("raw: a C++-mangled device function is reported with a hint to declare it extern \"C\"", "[raw][errors]") {
  raw::CallSite cs{"__device__ void mangled_fn(int n) {}", "m.cu", "mangled_fn", {}, {4}, 0,
                   SrcLoc(std::source_location::current())};
  const int line = __LINE__ - 1;
  expect_error([&] { raw::link_call_sites("", {cs}, 90); }, {"extern \"C\" __device__", "mangled"}, line);
}

TEST_CASE("raw: cuda_function protocol errors are UserErrors at the call", "[raw][errors]") {
  const CudaSource src("extern \"C\" __device__ void f(int x) {}");
  // Kernel lambdas capture nothing: each case's body reaches the kernel through this hook.
  static std::function<void(Ptr<float>, Tile<int32_t>)> hook;
  auto run = [&](auto body) {
    hook = body;
    auto k = jit("proto", [](Ptr<float> x, Tile<int32_t> n) { hook(x, n); });
    (void)k.ir(false, fake<float>(), 5);
  };
  int line = 0;
  expect_error([&] { run([&](Ptr<float>, Tile<int32_t> n) { line = __LINE__; cuda_function(src, "f", n.to<int8_t>()); }); },
               {"cuda_function 'f'", "argument 1", "i8 scalar cannot be passed by value"}, line);
  expect_error([&] { run([&](Ptr<float>, Tile<int32_t>) { Tile<bool> b = arange(0, 4) < 2; line = __LINE__; cuda_function(src, "f", expand_dims(expand_dims(expand_dims(expand_dims(b, 0), 0), 0), 0)); }); },
               {"rank 5"}, line);
  expect_error([&] { run([&](Ptr<float> x, Tile<int32_t>) { line = __LINE__; cuda_function(src, "f", x + arange(0, 8)); }); },
               {"tile of pointers"}, line);
  expect_error([&] { run([&](Ptr<float>, Tile<int32_t> n) { line = __LINE__; cuda_function(src, "f(", n); }); },
               {"not a C identifier"}, line);
  expect_error([&] { run([&](Ptr<float>, Tile<int32_t> n) { line = __LINE__; (void)cuda_function<int16_t>(src, "f", n); }); },
               {"returns void, a 32- or 64-bit integer, float or double, not i16"}, line);
  const CudaSource empty("  \n");
  expect_error([&] { run([&](Ptr<float>, Tile<int32_t> n) { line = __LINE__; cuda_function(empty, "f", n); }); },
               {"the CUDA source is empty"}, line);
}

TEST_CASE("raw: the CPU backend refuses cuda_function and raw kernels, naming them", "[raw][errors]") {
  std::vector<float> x(8, 1.f), y(8, 0.f);
  auto k = scale_kernel();
  int line = 0;
  // The error is raised when the kernel is compiled for the CPU: at the cuda_function op's line.
  try {
    k(Grid(1).backend(Backend::CPU), x.data(), y.data(), 8, 8);
    FAIL("no error");
  } catch (const UserError& e) {
    CHECK_THAT(e.message(), Catch::Contains("cuda_function 'tle_scale_store'"));
    CHECK_THAT(e.message(), Catch::Contains("GPU backend only"));
    CHECK(errtest::ends_with(e.file(), "test_raw.cpp"));
  }
  auto raw = raw_kernel<void(float, const float*, float*, int)>("saxpy", kSaxpy);
  expect_error(
      [&] {
        line = __LINE__ + 1;
        raw(Grid(1).backend(Backend::CPU), 2.0f, x.data(), y.data(), 8);
      },
      {"raw kernel 'saxpy'", "GPU backend only"}, line);
  // Argument checks come first and name C++ types.
  expect_error(
      [&] {
        line = __LINE__ + 1;
        raw(Grid(1).backend(Backend::CPU), 2.0f, x.data(), 3, 8);
      },
      {"argument 3 of kernel raw saxpy(f32, f32*, f32*, i32)", "pass a pointer"}, line);
  // A wrong argument count does not compile (tests/compile_fail/launch_checks.cpp, case 3).
  // Grid::with_maxnreg is for tile kernels; a raw kernel says its registers in its source.
  expect_error(
      [&] {
        line = __LINE__ + 1;
        raw(Grid(1).with_maxnreg(64), 2.0f, x.data(), y.data(), 8);
      },
      {"raw kernel 'saxpy'", "Grid::with_maxnreg(64) applies to tile kernels", "__launch_bounds__"}, line);
}

// ============================================================================ GPU

namespace {
bool have_gpu() { return default_backend() == Backend::GPU; }
}  // namespace

TEST_CASE("gpu: raw softmax (inline ex2.approx.ftz) matches the reference", "[.gpu][raw_gpu]") {
  REQUIRE(have_gpu());
  auto k = ex::make_raw_softmax();
  const int rows = 64, cols = 1000, BLOCK = 1024;
  auto x = random_vector(size_t(rows) * cols, 11, -6.f, 6.f);
  DeviceBuffer<float> dx(x), dy(x.size());
  k(Grid(rows).with_warps(4), dx, dy, cols, BLOCK);
  auto y = dy.to_host();
  double worst = 0;
  for (int r = 0; r < rows; ++r) {
    const float* xr = &x[size_t(r) * cols];
    double m = *std::max_element(xr, xr + cols), s = 0;
    for (int c = 0; c < cols; ++c) s += std::exp(xr[c] - m);
    for (int c = 0; c < cols; ++c) {
      double want = std::exp(xr[c] - m) / s;
      worst = std::max(worst, std::fabs(y[size_t(r) * cols + c] - want) / want);
    }
  }
  INFO("max relative error " << worst);
  CHECK(worst < 2e-5);
}

TEST_CASE("gpu: tile code calling CUDA device functions (bitonic sort, warp reduction) matches the reference",
          "[.gpu][raw_gpu]") {
  REQUIRE(have_gpu());
  auto k = ex::make_sort_rows();
  const int rows = 33, cols = 777, BLOCK = 1024;
  auto x = random_vector(size_t(rows) * cols, 12, -50.f, 50.f);
  DeviceBuffer<float> dx(x), dy(x.size()), dss(rows);
  for (int warps : {4, 8}) {
    dy.fill_zero();
    k(Grid(rows).with_warps(warps), dx, dy, dss, cols, BLOCK);
    auto y = dy.to_host();
    auto ss = dss.to_host();
    for (int r = 0; r < rows; ++r) {
      std::vector<float> want(x.begin() + ptrdiff_t(r) * cols, x.begin() + ptrdiff_t(r + 1) * cols);
      double s = 0;
      for (float v : want) s += double(v) * v;
      std::sort(want.begin(), want.end());
      INFO("row " << r << ", " << warps << " warps");
      CHECK(std::equal(want.begin(), want.end(), y.begin() + ptrdiff_t(r) * cols));
      CHECK(std::fabs(ss[r] - s) <= 1e-5 * s);
    }
  }
  // Pointer, tile and scalar arguments together.
  auto sk = scale_kernel();
  std::vector<float> hx(100);
  for (int i = 0; i < 100; ++i) hx[i] = float(i) - 40.f;
  DeviceBuffer<float> sx(hx), sy(128);
  sy.fill_zero();
  sk(Grid(1), sx, sy, 100, 128);
  auto got = sy.to_host();
  for (int i = 0; i < 128; ++i) CHECK(got[i] == (i < 100 ? 2.5f * hx[i] : 0.f));
}

TEST_CASE("gpu: raw and tile kernels interleave on one stream", "[.gpu][raw_gpu]") {
  REQUIRE(have_gpu());
  const int n = (1 << 20) + 17;
  auto affine = ex::make_raw_affine();
  auto add = ex::make_vector_add();
  auto v = random_vector(n, 13);
  DeviceBuffer<float> dv(v), a(n), b(n), c(n);
  Stream s(/*non_blocking=*/true);
  for (int rep = 0; rep < 3; ++rep) {  // repeated: later launches hit the caches
    affine(Grid(cdiv(n, 256)).on(s), Block(256), a, dv, 3.0f, 1.0f, n);   // a = 3v + 1
    add(Grid(cdiv(n, 1024)).on(s), a, dv, b, n, 1024);                   // b = a + v
    affine[Grid(cdiv(n, 128)).on(s)](c, b, -0.5f, 2.0f, n);              // c = -0.5b + 2
  }
  s.synchronize();
  auto got = c.to_host();
  size_t bad = 0;
  for (int i = 0; i < n; ++i) {
    float want = -0.5f * ((3.0f * v[i] + 1.0f) + v[i]) + 2.0f;
    if (std::fabs(got[i] - want) > 1e-6f + 1e-6f * std::fabs(want)) ++bad;
  }
  CHECK(bad == 0);
  CHECK(affine.num_compiled() == 1);
  // A host pointer is a UserError at the Grid's line, as for tile kernels.
  std::vector<float> host(16);
  int line = 0;
  expect_error(
      [&] {
        line = __LINE__ + 1;
        affine(Grid(1), Block(32), host.data(), dv, 1.0f, 0.0f, 16);
      },
      {"argument 1 of kernel raw raw_affine", "host memory"}, line);
}

TEST_CASE("gpu: the protocol with rank-2 i32, f16 and u8 in-out tiles, a double and an i64 return", "[.gpu][raw_gpu]") {
  REQUIRE(have_gpu());
  std::vector<int32_t> a(16 * 32);
  std::vector<f16> h(64);
  std::vector<uint8_t> b(128);
  for (size_t i = 0; i < a.size(); ++i) a[i] = int32_t(i) * 7 - 100;
  for (size_t i = 0; i < h.size(); ++i) h[i] = f16(float(i) - 20.5f);
  for (size_t i = 0; i < b.size(); ++i) b[i] = uint8_t(i * 3);
  DeviceBuffer<int32_t> da(a);
  DeviceBuffer<f16> dh(h);
  DeviceBuffer<uint8_t> db(b);
  DeviceBuffer<int64_t> dr(1);
  auto k = mix_kernel();
  for (int warps : {1, 4}) {
    da.copy_from_host(a), dh.copy_from_host(h), db.copy_from_host(b);
    k(Grid(1).with_warps(warps), da, dh, db, dr);
    auto ga = da.to_host();
    auto gh = dh.to_host();
    auto gb = db.to_host();
    INFO(warps << " warps");
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 32; ++j) CHECK(ga[size_t(i) * 32 + j] == a[size_t(i) * 32 + j] + 1000 * i + j);
    for (size_t i = 0; i < h.size(); ++i) CHECK(gh[i].bits == uint16_t(h[i].bits ^ 0x8000));
    for (size_t i = 0; i < b.size(); ++i) CHECK(gb[i] == uint8_t(255 - b[i]));
    // rank 2 * 100 + shape[0] 16 * 10 + strides[0] 32 + rank 1 + shape[0] 128 = 521, times 2.0
    CHECK(dr.to_host()[0] == 1042);
  }
}
