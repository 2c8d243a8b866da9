// tests/test_ptx.cpp - the GPU backend without a GPU: every representative kernel of
// tests/gpu_kernels.hpp is compiled to PTX with Kernel::ptx for sm_90a and sm_80, and the PTX is
// assembled with ptxas for that architecture; both must succeed. Runs in CI ([ptx]); skipped with
// a warning when ptxas is not found ($TLE_PTXAS, /usr/local/cuda/bin/ptxas, or ptxas on PATH).
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "gpu_kernels.hpp"
#include "ptxas_util.hpp"

using namespace tle;
namespace fs = std::filesystem;

namespace {

/// A 16-byte aligned fake address (Kernel::ptx only looks at the alignment).
template <class T> T* fake(uintptr_t a = 0x10000) { return reinterpret_cast<T*>(a); }

/// Compiles with `make(sm)` for sm_90a and sm_80 and assembles each with ptxas. A compile or
/// assembly failure is a failed check naming the kernel and the architecture, and the other
/// architecture is still tried.
void check_ptx(const std::string& name, const std::function<std::string(int sm)>& make) {
  for (int sm : {90, 80}) {
    const std::string arch = sm == 90 ? "sm_90a" : "sm_" + std::to_string(sm);
    INFO("kernel " << name << " for " << arch);
    std::string ptx;
    try {
      ptx = make(sm);
    } catch (const std::exception& e) {
      FAIL_CHECK("compiling " << name << " for " << arch << " threw: " << e.what());
      continue;
    }
    CHECK(ptx.find(".target " + arch) != std::string::npos);
    CHECK(ptx.find(".entry") != std::string::npos);
    ptxtest::assemble(name, ptx, arch);
  }
}

}  // namespace

TEST_CASE("ptx: vector add", "[ptx]") {
  auto k = gk::vector_add();
  check_ptx("vector_add", [&](int sm) { return k.ptx(sm, 4, fake<float>(), fake<float>(), fake<float>(), 1000, 1024); });
  // Unaligned pointers, other warp counts, and n == 1 (specialized to the constant).
  check_ptx("vector_add unaligned", [&](int sm) {
    return k.ptx(sm, 4, fake<float>(0x10004), fake<float>(), fake<float>(0x10008), 1000, 256);
  });
  for (int w : {1, 2, 8, 16, 32})
    check_ptx("vector_add warps=" + std::to_string(w),
              [&](int sm) { return k.ptx(sm, w, fake<float>(), fake<float>(), fake<float>(), 1 << 20, 4096); });
  check_ptx("vector_add n=1", [&](int sm) { return k.ptx(sm, 4, fake<float>(), fake<float>(), fake<float>(), 1, 128); });
}

TEST_CASE("ptx: num_warps is checked", "[ptx]") {
  auto k = gk::vector_add();
  CHECK_THROWS_AS(k.ptx(90, 3, fake<float>(), fake<float>(), fake<float>(), 1000, 1024), UserError);
  CHECK_THROWS_AS(k.ptx(90, 64, fake<float>(), fake<float>(), fake<float>(), 1000, 1024), UserError);
  CHECK_THROWS_AS(k.ptx(90, 0, fake<float>(), fake<float>(), fake<float>(), 1000, 1024), UserError);
  // Targets before sm_80 are refused (the lowering uses sm_80 instructions).
  CHECK_THROWS_WITH(k.ptx(75, 4, fake<float>(), fake<float>(), fake<float>(), 1000, 1024),
                    Catch::Contains("needs sm_80 or newer"));
}

TEST_CASE("ptx: softmax", "[ptx]") {
  auto k = gk::softmax();
  check_ptx("softmax 1024", [&](int sm) { return k.ptx(sm, 4, fake<float>(), fake<float>(), 1000, 1024); });
  check_ptx("softmax 8192 w16", [&](int sm) { return k.ptx(sm, 16, fake<float>(), fake<float>(), 8192, 8192); });
}

TEST_CASE("ptx: layernorm", "[ptx]") {
  auto k = gk::layernorm<float>();
  check_ptx("layernorm f32", [&](int sm) {
    return k.ptx(sm, 8, fake<float>(), fake<float>(), fake<float>(), fake<float>(), 1000, 4096, 1e-5f, 4096);
  });
  auto kb = gk::layernorm<bf16>();
  check_ptx("layernorm bf16", [&](int sm) {
    return kb.ptx(sm, 8, fake<bf16>(), fake<bf16>(), fake<float>(), fake<float>(), 1000, 4096, 1e-5f, 4096);
  });
}

TEST_CASE("ptx: Grid::with_maxnreg caps the registers per thread (.maxnreg)", "[ptx]") {
  // The bf16 layernorm at 8 warps keeps w and b and the row being normalized in registers: ptxas
  // gives it more than 64 without a cap (about 90 with ptxas 13.0).
  auto k = gk::layernorm<bf16>();
  auto ptx = [&](int sm, int maxnreg) {
    return k.ptx(sm, Grid(1).with_warps(8).with_maxnreg(maxnreg), fake<bf16>(), fake<bf16>(), fake<float>(),
                 fake<float>(), 16384, 4096, 1e-5f, 4096);
  };
  const std::string free = ptx(90, 0);
  CHECK(free.find(".maxnreg") == std::string::npos);
  const int used = ptxtest::registers("layernorm, no cap", free);
  if (used >= 0) CHECK(used > 64);
  for (int cap : {64, 40}) {
    INFO("maxnreg " << cap);
    for (int sm : {90, 80}) {
      const std::string p = ptx(sm, cap);
      CHECK(p.find(".maxnreg " + std::to_string(cap)) != std::string::npos);
      const int n = ptxtest::registers("layernorm, capped", p, sm == 90 ? "sm_90a" : "sm_80");
      if (n >= 0) CHECK((n > 0 && n <= cap));
    }
  }
}

TEST_CASE("ptx: matmul with a K loop", "[ptx]") {
  auto kf = gk::matmul<float>();
  check_ptx("matmul f32 64x64x32", [&](int sm) {
    return kf.ptx(sm, 4, fake<float>(), fake<float>(), fake<float>(), 1000, 1000, 1000, 64, 64, 32);
  });
  auto kb = gk::matmul<bf16>();
  check_ptx("matmul bf16 128x128x64 w8", [&](int sm) {
    return kb.ptx(sm, 8, fake<bf16>(), fake<bf16>(), fake<float>(), 8192, 8192, 8192, 128, 128, 64);
  });
  auto kh = gk::matmul<f16>();
  check_ptx("matmul f16 64x64x32", [&](int sm) {
    return kh.ptx(sm, 4, fake<f16>(), fake<f16>(), fake<float>(), 1000, 1000, 1000, 64, 64, 32);
  });
  auto ki = gk::matmul<int8_t>();
  check_ptx("matmul i8 64x64x32", [&](int sm) {
    return ki.ptx(sm, 4, fake<int8_t>(), fake<int8_t>(), fake<int32_t>(), 1000, 1000, 1000, 64, 64, 32);
  });
}

TEST_CASE("ptx: reductions of every kind", "[ptx]") {
  for (int axis : {0, 1}) {
    auto kf = gk::reductions<float>();
    check_ptx("reductions f32 axis " + std::to_string(axis),
              [&](int sm) { return kf.ptx(sm, 4, fake<float>(), fake<float>(), fake<int32_t>(), 32, 64, axis); });
    auto ki = gk::reductions<int32_t>();
    check_ptx("reductions i32 axis " + std::to_string(axis),
              [&](int sm) { return ki.ptx(sm, 4, fake<int32_t>(), fake<int32_t>(), fake<int32_t>(), 16, 128, axis); });
    auto kh = gk::reductions<f16>();
    check_ptx("reductions f16 axis " + std::to_string(axis),
              [&](int sm) { return kh.ptx(sm, 4, fake<f16>(), fake<f16>(), fake<int32_t>(), 8, 32, axis); });
  }
}

TEST_CASE("ptx: scans", "[ptx]") {
  auto ki = gk::scans<int32_t>();
  check_ptx("scans i32 256", [&](int sm) { return ki.ptx(sm, 4, fake<int32_t>(), fake<int32_t>(), 256); });
  auto kf = gk::scans<float>();
  check_ptx("scans f32 1024", [&](int sm) { return kf.ptx(sm, 4, fake<float>(), fake<float>(), 1024); });
  auto kl = gk::scans<int64_t>();
  check_ptx("scans i64 64", [&](int sm) { return kl.ptx(sm, 2, fake<int64_t>(), fake<int64_t>(), 64); });
}

TEST_CASE("ptx: atomics", "[ptx]") {
  auto ki = gk::atomics_int();
  check_ptx("atomics i32", [&](int sm) { return ki.ptx(sm, 4, fake<int32_t>(), fake<int32_t>(), fake<int32_t>(), 1000, 256); });
  auto kf = gk::atomics_float();
  check_ptx("atomics f32", [&](int sm) { return kf.ptx(sm, 4, fake<float>(), fake<float>(), 1000, 256); });
}

TEST_CASE("ptx: device for and if", "[ptx]") {
  auto k = gk::control_flow();
  check_ptx("control_flow", [&](int sm) { return k.ptx(sm, 4, fake<int32_t>(), fake<int32_t>(), 0, 10, 3, 128); });
}

TEST_CASE("ptx: loads and stores of every dtype", "[ptx]") {
  auto run = [](auto tag, const char* name) {
    using T = decltype(tag);
    auto k = gk::copy<T>();
    check_ptx(std::string("copy ") + name, [&](int sm) { return k.ptx(sm, 4, fake<T>(), fake<T>(), 1000, 512); });
  };
  run(double{}, "f64");
  run(float{}, "f32");
  run(f16{}, "f16");
  run(bf16{}, "bf16");
  run(int8_t{}, "i8");
  run(int16_t{}, "i16");
  run(int32_t{}, "i32");
  run(int64_t{}, "i64");
  run(uint8_t{}, "u8");
  run(uint16_t{}, "u16");
  run(uint32_t{}, "u32");
  run(uint64_t{}, "u64");
  run(bool{}, "bool");
}

TEST_CASE("ptx: cache and eviction hints become ld/st modifiers", "[ptx]") {
  // Every dtype width (1, 2, 4, 8 bytes; vectors up to 16 bytes), masked and unmasked; the PTX
  // must carry the modifiers and assemble.
  auto run = [](auto tag, const char* name) {
    using T = decltype(tag);
    auto k = jit("hints", [](Ptr<T> x, Ptr<T> y, Tile<int32_t> n, Constexpr<int> BLOCK) {
      Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
      Tile<int32_t> offs1 = offs + n, offs2 = offs + 2 * n;
      Tile<bool> m = offs < n;
      constexpr auto zero = [] {
        if constexpr (std::is_same_v<T, bool>) return false;
        else return 0;
      }();
      Tile<T> a = load(x + offs, m, zero, MemHints{"", "evict_last", false});
      Tile<T> b = load(x + offs1, m, zero, MemHints{".cs", "", false});
      Tile<T> c = load(x + offs2, m, zero, MemHints{"", "", true});
      store(y + offs, a, m, MemHints{"", "evict_first", false});
      store(y + offs1, b, m, MemHints{".wt", "", false});
      store(y + offs2, c, m, MemHints{"", "", true});
    });
    for (int n : {1000, 1024, 17}) {  // vectors whole (1024: the mask is uniform), partly masked
      check_ptx(std::string("hints ") + name + " n=" + std::to_string(n), [&](int sm) {
        std::string ptx = k.ptx(sm, 4, fake<T>(), fake<T>(), n, 512);
        CHECK(ptx.find("ld.global.L1::evict_last") != std::string::npos);
        CHECK(ptx.find("ld.global.cs") != std::string::npos);
        CHECK(ptx.find("ld.volatile.global") != std::string::npos);
        CHECK(ptx.find("st.global.L1::evict_first") != std::string::npos);
        CHECK(ptx.find("st.global.wt") != std::string::npos);
        CHECK(ptx.find("st.volatile.global") != std::string::npos);
        return ptx;
      });
    }
  };
  run(float{}, "f32");
  run(bf16{}, "bf16");
  run(double{}, "f64");
  run(int8_t{}, "i8");
  run(bool{}, "bool");
}

TEST_CASE("ptx: casts", "[ptx]") {
  auto run = [](auto from, auto to, const std::string& name) {
    using T = decltype(from);
    using U = decltype(to);
    auto k = gk::convert<T, U>();
    check_ptx("convert " + name, [&](int sm) { return k.ptx(sm, 4, fake<T>(), fake<U>(), 1000, 256); });
  };
  run(float{}, f16{}, "f32->f16");
  run(float{}, bf16{}, "f32->bf16");
  run(f16{}, float{}, "f16->f32");
  run(bf16{}, float{}, "bf16->f32");
  run(float{}, int32_t{}, "f32->i32");
  run(int32_t{}, float{}, "i32->f32");
  run(double{}, float{}, "f64->f32");
  run(int8_t{}, float{}, "i8->f32");
  run(uint32_t{}, double{}, "u32->f64");
  run(float{}, uint8_t{}, "f32->u8");
  run(int64_t{}, int16_t{}, "i64->i16");
  run(bool{}, int32_t{}, "bool->i32");
  run(int32_t{}, bool{}, "i32->bool");
  run(f16{}, bf16{}, "f16->bf16");
  run(double{}, bf16{}, "f64->bf16");
}

TEST_CASE("ptx: math functions", "[ptx]") {
  auto kf = gk::math<float>();
  check_ptx("math f32", [&](int sm) { return kf.ptx(sm, 4, fake<float>(), fake<float>(), 1000, 256); });
  auto kd = gk::math<double>();
  check_ptx("math f64", [&](int sm) { return kd.ptx(sm, 4, fake<double>(), fake<double>(), 1000, 256); });
  auto kh = gk::math<f16>();
  check_ptx("math f16", [&](int sm) { return kh.ptx(sm, 4, fake<f16>(), fake<f16>(), 1000, 256); });
  auto kb = gk::math<bf16>();
  check_ptx("math bf16", [&](int sm) { return kb.ptx(sm, 4, fake<bf16>(), fake<bf16>(), 1000, 256); });
}

TEST_CASE("ptx: integer division and histograms", "[ptx]") {
  auto k32 = gk::divmod<int32_t>();
  check_ptx("divmod i32", [&](int sm) { return k32.ptx(sm, 4, fake<int32_t>(), fake<int32_t>(), fake<int32_t>(), fake<int32_t>(), 100, 128); });
  auto k8 = gk::divmod<int8_t>();
  check_ptx("divmod i8", [&](int sm) { return k8.ptx(sm, 4, fake<int8_t>(), fake<int8_t>(), fake<int8_t>(), fake<int8_t>(), 100, 128); });
  auto ku = gk::divmod<uint64_t>();
  check_ptx("divmod u64", [&](int sm) { return ku.ptx(sm, 4, fake<uint64_t>(), fake<uint64_t>(), fake<uint64_t>(), fake<uint64_t>(), 100, 128); });
  auto kh = gk::histogram_kernel();
  check_ptx("histogram", [&](int sm) { return kh.ptx(sm, 4, fake<int32_t>(), fake<int32_t>(), 1000, 1024, 64); });
  // histogram_ranks: match.any.sync and the warp barriers around the per-warp counters.
  auto kr = jit("ptx_histogram_ranks", [](Ptr<int32_t> x, Ptr<int32_t> out, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> o = arange(0, BLOCK);
    store(out + o, histogram_ranks(load(x + o, o < n), 300, o < n), o < n);
  });
  for (int block : {1000, 64})
    check_ptx("histogram_ranks BLOCK " + std::to_string(block), [&](int sm) {
      std::string ptx = kr.ptx(sm, 4, fake<int32_t>(), fake<int32_t>(), 1000, block);
      CHECK(ptx.find("match.any.sync.b32") != std::string::npos);
      CHECK(ptx.find("bar.warp.sync") != std::string::npos);
      return ptx;
    });
}
