// tests/test_mma_ptx.cpp - dot on tensor cores without a GPU: f16/bf16 matmul kernels
// (tests/gpu_kernels.hpp) compiled with Kernel::ptx must contain mma.sync.aligned.m16n8k16 (as many
// per K-loop iteration as the warp tiles need) and assemble with ptxas for sm_89 and sm_80; dots
// that do not qualify (f32, i8) must not use it. Also simulates, on the CPU, the warp-level
// products that the register choice of mma_v2_steps (backend/gpu/mma_fragments.hpp) feeds to
// mma.sync, with the fragment tables of the PTX ISA (9.7.14.5.8), against a plain matmul. Tag [ptx]; assembling is skipped with a warning
// when ptxas is absent ($TLE_PTXAS, /usr/local/cuda/bin/ptxas, PATH). GPU results: tests/test_gpu.cpp.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "backend/gpu/mma_fragments.hpp"
#include "gpu_kernels.hpp"
#include "ptxas_util.hpp"
#include "layout/named_layouts.hpp"

using ptxtest::count_of;

using namespace tle;
namespace fs = std::filesystem;

namespace {

template <class T> T* fake_ptr() { return reinterpret_cast<T*>(uintptr_t{0x20000}); }  // 16-byte aligned

/// Compiles the matmul kernel for T with tiles BM x BN x BK and `warps` warps for sm_89 and sm_80;
/// checks the mma.sync count per loop iteration (a multiple of `per_iter`, LLVM may unroll) and
/// assembles.
template <class T> void check_mma_matmul(const char* dtype, int bm, int bn, int bk, int warps, size_t per_iter) {
  auto k = gk::matmul<T>();
  const std::string what = std::string("matmul ") + dtype + " " + std::to_string(bm) + "x" + std::to_string(bn) + "x" +
                           std::to_string(bk) + " w" + std::to_string(warps);
  const std::string instr = std::string("mma.sync.aligned.m16n8k16.row.col.f32.") + dtype + "." + dtype + ".f32";
  for (int sm : {89, 80}) {  // mma.sync targets (sm_90a runs these dots on wgmma: test_wgmma.cpp)
    const std::string arch = "sm_" + std::to_string(sm);
    INFO(what << " for " << arch);
    std::string ptx;
    REQUIRE_NOTHROW(ptx = k.ptx(sm, warps, fake_ptr<T>(), fake_ptr<T>(), fake_ptr<float>(), 1000, 1000, 1000, bm, bn, bk));
    CHECK(ptx.find(".target " + arch) != std::string::npos);
    const size_t n = count_of(ptx, "mma.sync.aligned.m16n8k16");
    CHECK(n >= per_iter);
    CHECK(n % per_iter == 0);
    CHECK(count_of(ptx, instr) == n);
    ptxtest::assemble(what, ptx, arch);
  }
}

}  // namespace

TEST_CASE("mma ptx: bf16 and f16 matmuls use mma.sync m16n8k16", "[ptx]") {
  // 64x64 over 4 warps: warps {2, 2}, each warp 2 x 4 tiles of 16x8, K 32 = 2 k16 steps: 16 per iteration.
  check_mma_matmul<bf16>("bf16", 64, 64, 32, 4, 16);
  check_mma_matmul<f16>("f16", 64, 64, 32, 4, 16);
  // 128x128 over 8 warps: warps {2, 4}, each warp 4 x 4 tiles, 2 k16 steps: 32 per iteration.
  check_mma_matmul<bf16>("bf16", 128, 128, 32, 8, 32);
  check_mma_matmul<f16>("f16", 128, 128, 32, 8, 32);
  // 32x16 over 2 warps: warps {2, 1}, each warp 1 x 2 tiles, 1 k16 step: 2 per iteration.
  check_mma_matmul<bf16>("bf16", 32, 16, 16, 2, 2);
}

TEST_CASE("mma ptx: f32 and i8 dots do not use mma.sync", "[ptx]") {
  auto kf = gk::matmul<float>();
  std::string ptx = kf.ptx(90, 4, fake_ptr<float>(), fake_ptr<float>(), fake_ptr<float>(), 1000, 1000, 1000, 64, 64, 32);
  CHECK(ptx.find("mma.sync") == std::string::npos);
  auto ki = gk::matmul<int8_t>();
  ptx = ki.ptx(90, 4, fake_ptr<int8_t>(), fake_ptr<int8_t>(), fake_ptr<int32_t>(), 1000, 1000, 1000, 64, 64, 32);
  CHECK(ptx.find("mma.sync") == std::string::npos);
  // bf16 with a K tile of 8: no k16 step, the shared-memory path.
  auto kb = gk::matmul<bf16>();
  ptx = kb.ptx(90, 4, fake_ptr<bf16>(), fake_ptr<bf16>(), fake_ptr<float>(), 1000, 1000, 1000, 64, 64, 8);
  CHECK(ptx.find("mma.sync") == std::string::npos);
}

TEST_CASE("mma fragments: simulated mma.sync steps compute the matmul", "[ptx]") {
  struct Case {
    int64_t m, n, k;
    int32_t wm, wn;
  };
  for (Case cs : {Case{64, 64, 32, 2, 2}, Case{128, 128, 32, 2, 4}, Case{16, 64, 16, 1, 4}, Case{64, 16, 64, 4, 1},
                  Case{32, 16, 16, 2, 1}, Case{16, 8, 16, 1, 1}, Case{128, 64, 16, 8, 1}}) {
    INFO("M " << cs.m << " N " << cs.n << " K " << cs.k << " warps {" << cs.wm << ", " << cs.wn << "}");
    const std::vector<int32_t> w = {cs.wm, cs.wn};
    const int warps = cs.wm * cs.wn;
    const auto la = layout::mma_v2_operand(0, {cs.m, cs.k}, w, 16);
    const auto lb = layout::mma_v2_operand(1, {cs.k, cs.n}, w, 16);
    const auto lc = layout::mma_v2_accumulator({cs.m, cs.n}, w);
    const auto steps = gpu::detail::mma_v2_steps(la, lb, lc, w);
    CHECK(steps.size() == size_t(cs.m / (16 * cs.wm) * (cs.n / (8 * cs.wn)) * (cs.k / 16)));
    // Hashed small integers (no period a wrong row or column could hide behind): sums are exact.
    auto hash = [](int64_t i, int64_t j, uint32_t salt) {
      uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ (static_cast<uint32_t>(j) * 40503u + salt);
      h ^= h >> 13;
      h *= 0x5bd1e995u;
      h ^= h >> 15;
      return float(int(h % 9) - 4);
    };
    auto A = [&](int64_t i, int64_t j) { return hash(i, j, 1); };
    auto Bm = [&](int64_t i, int64_t j) { return hash(i, j, 2); };
    auto C = [&](int64_t i, int64_t j) { return hash(i, j, 3); };
    // Registers of every thread: register r of (warp, lane) holds the element at l(r, lane, warp).
    auto fill = [&](const layout::LinearLayout& l, auto value) {
      std::vector<std::vector<std::vector<float>>> regs(warps, std::vector<std::vector<float>>(32));
      for (int wi = 0; wi < warps; ++wi)
        for (int lane = 0; lane < 32; ++lane)
          for (int r = 0; r < l.num_regs(); ++r) {
            auto c = l.apply({r, lane, wi, 0});
            regs[wi][lane].push_back(value(c[0], c[1]));
          }
      return regs;
    };
    auto ra = fill(la, A), rb = fill(lb, Bm), rc = fill(lc, C);
    for (const auto& s : steps)
      for (int wi = 0; wi < warps; ++wi) {
        // Gather the warp's 16x16 A, 16x8 B and 16x8 C from the fragments (PTX ISA tables).
        float ta[16][16] = {}, tb[16][8] = {}, tc[16][8] = {};
        for (int lane = 0; lane < 32; ++lane) {
          const int g = lane >> 2, t = lane & 3;
          for (int i = 0; i < 8; ++i) ta[g + 8 * ((i >> 1) & 1)][2 * t + (i & 1) + 8 * (i >= 4)] = ra[wi][lane][s.a[i]];
          for (int i = 0; i < 4; ++i) tb[2 * t + (i & 1) + 8 * (i >= 2)][g] = rb[wi][lane][s.b[i]];
          for (int i = 0; i < 4; ++i) tc[g + 8 * (i >> 1)][2 * t + (i & 1)] = rc[wi][lane][s.c[i]];
        }
        for (int lane = 0; lane < 32; ++lane) {
          const int g = lane >> 2, t = lane & 3;
          for (int i = 0; i < 4; ++i) {
            const int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
            float d = tc[row][col];
            for (int kk = 0; kk < 16; ++kk) d += ta[row][kk] * tb[kk][col];
            rc[wi][lane][s.c[i]] = d;
          }
        }
      }
    int bad = 0;
    for (int wi = 0; wi < warps; ++wi)
      for (int lane = 0; lane < 32; ++lane)
        for (int r = 0; r < lc.num_regs(); ++r) {
          auto c = lc.apply({r, lane, wi, 0});
          float want = C(c[0], c[1]);
          for (int64_t kk = 0; kk < cs.k; ++kk) want += A(c[0], kk) * Bm(kk, c[1]);
          if (rc[wi][lane][r] != want && bad++ < 5)
            FAIL_CHECK("warp " << wi << " lane " << lane << " reg " << r << " (" << c[0] << ", " << c[1] << "): "
                               << rc[wi][lane][r] << " != " << want);
        }
    CHECK(bad == 0);
  }
  // A layout that is not the fragment layout: a clear internal error.
  const std::vector<int32_t> w = {2, 2};
  CHECK_THROWS_AS(gpu::detail::mma_v2_steps(layout::mma_v2_operand(0, {64, 32}, w, 16),
                                            layout::mma_v2_operand(1, {32, 64}, w, 16),
                                            layout::blocked({64, 64}, {1, 4}, {8, 4}, {2, 2}, {1, 0}), w),
                  InternalError);
}
