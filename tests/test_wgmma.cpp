// tests/test_wgmma.cpp - dot on Hopper tensor cores (wgmma) without a GPU:
//  - layout::wgmma_accumulator against the PTX ISA fragment table (9.7.15.5.1.1, Figure 149);
//  - the shared-memory operand tiles (SwizzledTile::make_wgmma) and their matrix descriptors
//    (wgmma_desc_bits): for every instruction the lowering issues, every element of the
//    instruction's A and B, the address the hardware computes from the descriptor (PTX ISA
//    9.7.15.5.1.2: the canonical layouts in CuTe notation, then Swizzle<b, 4, 3> on the byte
//    address) is the address the tile stores that element at;
//  - the descriptor bits against hand-computed values (fast.cu's constant for a 128-byte swizzled
//    K-major bf16 tile);
//  - mma_v3_plan's warpgroup split; which loads the pipelining pass marks for wgmma;
//  - PTX of f16/bf16 matmuls for sm_90a (wgmma.mma_async, fence, commit, wait; no mma.sync)
//    assembled by ptxas, and the same kernels for sm_80 on mma.sync.
// GPU results: tests/test_gpu.cpp (the matmul cases run on wgmma on the H200).
#include <catch2/catch.hpp>

#include <tle/tle.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "backend/gpu/lower.hpp"
#include "ir/builder.hpp"
#include "gpu_kernels.hpp"
#include "ir/ir.hpp"
#include "ops_util.hpp"
#include "layout/named_layouts.hpp"
#include "passes/gpu/gpu_passes.hpp"
#include "passes/gpu/layout_rules.hpp"
#include "passes/pass.hpp"
#include "ptxas_util.hpp"
#include "trace_util.hpp"

using ptxtest::count_of;

using namespace tle;
using gpu::detail::SwizzledTile;

namespace {

template <class T> T* fake_ptr() { return reinterpret_cast<T*>(uintptr_t{0x20000}); }

/// What the hardware reads: the byte address of element (mn, k) of an instruction operand whose
/// descriptor is `desc` (start address in bits 0-13), for elements of `esize` bytes (T = 16 / esize
/// per 16 bytes: 8 of 16 bits, 16 of 8 bits).
/// PTX ISA 9.7.15.5.1.2.1.3, canonical layouts with S = swizzle bytes / 16:
///   K-major:  ((8, m), (T, 2k)) : ((S*T, SBO), (1, T))
///   MN-major: ((T, S, m), (8, k)) : ((1, T, LBO), (S*T, SBO))
/// then Swizzle<log2 S, 4, 3> on the byte address (bits 4.. ^= bits 7..).
int64_t hw_address(uint64_t desc, bool k_major, int64_t mn, int64_t k, int esize = 2) {
  const int64_t start = int64_t(desc & 0x3FFF) << 4;
  const int64_t lbo = int64_t((desc >> 16) & 0x3FFF) << 4, sbo = int64_t((desc >> 32) & 0x3FFF) << 4;
  const int mode = int(desc >> 62);
  REQUIRE(mode >= 1);
  const int64_t S = mode == 1 ? 8 : mode == 2 ? 4 : 2, T = 16 / esize;
  int64_t el;  // element offset, with LBO/SBO converted from bytes
  if (k_major) el = (mn % 8) * S * T + (mn / 8) * (sbo / esize) + (k % T) + (k / T) * T;
  else el = (mn % T) + ((mn / T) % S) * T + (mn / (S * T)) * (lbo / esize) + (k % 8) * S * T + (k / 8) * (sbo / esize);
  int64_t addr = start + esize * el;
  return addr ^ (((addr >> 7) & (S - 1)) << 4);
}

/// The descriptor the lowering builds for the element at tile coordinates (row, col) of a tile at
/// byte `base`: its unswizzled offset as start address.
uint64_t descriptor(const SwizzledTile& t, bool k_major, int64_t base, int64_t row, int64_t col) {
  const uint64_t addr = uint64_t(base + t.esize * t.plain_offset(row, col));
  return ((addr & 0x3FFFF) >> 4) | gpu::detail::wgmma_desc_bits(t, k_major);
}

}  // namespace

TEST_CASE("wgmma accumulator layout: the PTX fragment table, per warpgroup split", "[wgmma][layout]") {
  for (auto [M, N, gm, gn] : std::vector<std::tuple<int64_t, int64_t, int32_t, int32_t>>{
           {64, 8, 1, 1}, {64, 256, 1, 1}, {128, 128, 2, 1}, {128, 256, 1, 1}, {64, 128, 1, 2}, {256, 64, 2, 2},
           {128, 512, 2, 1}}) {
    INFO(M << "x" << N << " warpgroups " << gm << "x" << gn);
    auto l = layout::wgmma_accumulator({M, N}, {gm, gn});
    REQUIRE(l.in_dim_size(layout::kWarp) == 4 * gm * gn);
    const int64_t wn = N / gn, per_instr = std::min<int64_t>(wn, 256) / 2;
    std::vector<int> seen(static_cast<size_t>(M * N), 0);
    for (int32_t w = 0; w < 4 * gm * gn; ++w)
      for (int32_t lane = 0; lane < 32; ++lane)
        for (int32_t r = 0; r < l.num_regs(); ++r) {
          auto c = l.apply({r, lane, w, 0});
          ++seen[static_cast<size_t>(c[0] * N + c[1])];
          // Register r = block q's fragment element i (registers of one block are consecutive
          // when a warpgroup's N fits one instruction).
          if (wn > 256) continue;
          const int32_t i = r % per_instr, q = r / per_instr, g = w / 4, ww = w % 4;
          const int64_t row = 64 * (g % gm) + 64 * gm * q + 16 * ww + lane / 4 + 8 * ((i >> 1) & 1);
          const int64_t col = wn * (g / gm) + 8 * (i >> 2) + 2 * (lane % 4) + (i & 1);
          CHECK(c[0] == row);
          CHECK(c[1] == col);
        }
    for (int s : seen) REQUIRE(s == 1);  // a bijection: no copies, nothing missing
  }
}

TEST_CASE("wgmma plan: warpgroups along M first, then N, what does not qualify", "[wgmma]") {
  auto plan_for = [](int64_t M, int64_t N, int64_t K, int warps, DType d = DType::bf16) {
    ir::Function f;
    ir::Builder b(&f.entry());
    auto tile = [](DType t, int64_t r, int64_t c) {
      ir::Type ty = ir::scalar_type(t);
      ty.shape = {r, c};
      return ty;
    };
    ir::Value* a = f.entry().add_arg(tile(d, M, K));
    ir::Value* bb = f.entry().add_arg(tile(d, K, N));
    ir::Value* c = f.entry().add_arg(tile(DType::f32, M, N));
    ir::Op* dot = b.create(ir::OpKind::Dot, {a, bb, c}, {tile(DType::f32, M, N)});
    return passes::gpu_rules::mma_v3_plan(*dot, warps);
  };
  auto p = plan_for(128, 256, 64, 8);
  REQUIRE(p);
  CHECK(p->warpgroups == std::vector<int32_t>{2, 1});
  CHECK(p->instr_n == 256);
  p = plan_for(64, 256, 64, 8);
  REQUIRE(p);
  CHECK(p->warpgroups == std::vector<int32_t>{1, 2});
  CHECK(p->instr_n == 128);
  p = plan_for(128, 512, 32, 4);
  REQUIRE(p);
  CHECK(p->instr_n == 256);
  CHECK(plan_for(128, 128, 64, 4, DType::f16));
  CHECK_FALSE(plan_for(32, 128, 64, 4));                 // M below one warpgroup's 64 rows
  CHECK_FALSE(plan_for(128, 128, 8, 4));                 // K below 16
  CHECK_FALSE(plan_for(128, 128, 64, 2));                // not a warpgroup
  CHECK_FALSE(plan_for(64, 16, 64, 8));                  // 8 columns per warpgroup
  CHECK_FALSE(plan_for(128, 128, 64, 4, DType::f32));    // f32 inputs: not yet
  // fp8: k32 instructions, so K a multiple of 32
  p = plan_for(128, 256, 128, 8, DType::f8e4m3);
  REQUIRE(p);
  CHECK(p->warpgroups == std::vector<int32_t>{2, 1});
  CHECK(plan_for(64, 64, 32, 4, DType::f8e5m2));
  CHECK_FALSE(plan_for(64, 64, 16, 4, DType::f8e4m3));
}

TEST_CASE("wgmma fp8: loads contiguous along K are pipelined with 128-column atoms, an N-major b is not, no mma.sync "
          "plan",
          "[wgmma][pipeline][fp8]") {
  // a [BM, BK] K-major; b either loaded [BN, BK] and transposed (K-major) or [BK, BN] (N-major)
  auto k = [](Ptr<f8e4m3> a, Ptr<f8e4m3> b, Ptr<float> c, Tile<int32_t> K, Constexpr<int> BM, Constexpr<int> BN,
              Constexpr<int> BK, Constexpr<bool> BT) {
    Tile<float> acc = zeros<float>({BM, BN});
    for (auto k0 : range(0, K, BK)) {
      Tile<f8e4m3> ta = load(a + expand_dims(arange(0, BM), 1) * K + expand_dims(k0 + arange(0, BK), 0));
      Tile<f8e4m3> tb = BT ? trans(load(b + expand_dims(arange(0, BN), 1) * K + expand_dims(k0 + arange(0, BK), 0)))
                           : load(b + expand_dims(k0 + arange(0, BK), 1) * BN + expand_dims(arange(0, BN), 0));
      acc = dot(ta, tb, acc);
    }
    store(c + expand_dims(arange(0, BM), 1) * BN + expand_dims(arange(0, BN), 0), acc);
  };
  for (bool bt : {true, false}) {
    INFO((bt ? "b K-major" : "b N-major"));
    auto f = tracetest::trace("k", k, {128, 128, 128, int(bt)}, /*ptrs_div16=*/true, /*ints_div16=*/true);
    passes::run_gpu_pipeline(*f, 4, 3, /*wgmma=*/true);
    auto dots = tracetest::ops_of(*f, ir::OpKind::Dot);
    REQUIRE(dots.size() == 1);
    const ir::Op* la = dots[0]->operands[0]->def;
    const ir::Op* lb = dots[0]->operands[1]->def;
    if (lb && lb->kind == ir::OpKind::Permute) lb = lb->operands[0]->def;
    REQUIRE(la);
    REQUIRE(lb);
    REQUIRE(la->kind == ir::OpKind::Load);
    REQUIRE(lb->kind == ir::OpKind::Load);
    REQUIRE(la->has_attr("wgmma"));
    CHECK(la->int_attr("wgmma") == 128);  // 128 fp8 = 128 bytes: the 128-byte swizzle
    if (bt) {
      REQUIRE(lb->has_attr("wgmma"));
      CHECK(lb->int_attr("wgmma") == 128);
    } else {
      CHECK_FALSE(lb->has_attr("wgmma"));  // wgmma cannot read it: staged from registers
    }
    CHECK_FALSE(passes::gpu_rules::mma_v2_plan(*dots[0], 4));  // 8-bit fragments: no mma.sync path
  }
}

TEST_CASE("wgmma descriptors: fast.cu's 128-byte swizzle constant, LBO/SBO per major-ness", "[wgmma]") {
  // A 128x64 bf16 tile contiguous along K: 128-byte rows, SBO = 1024 bytes, LBO unused (1),
  // swizzle mode 1 (fast.cu: 0x4000004000000000 | 1 << 16 | addr >> 4).
  SwizzledTile a = SwizzledTile::make_wgmma(128, 64, 1);
  CHECK(gpu::detail::wgmma_desc_bits(a, true) == 0x4000004000010000ull);
  // B [64, 256] contiguous along N (MN-major), atoms of 64 columns: LBO = 64 rows * 128 bytes.
  SwizzledTile b = SwizzledTile::make_wgmma(64, 256, 1);
  CHECK(gpu::detail::wgmma_desc_bits(b, false) == ((1ull << 62) | (64ull << 32) | (512ull << 16)));
  // 64-byte swizzle (atoms of 32): SBO = 512 bytes, mode 2; 32-byte: SBO 256, mode 3.
  CHECK(gpu::detail::wgmma_desc_bits(SwizzledTile::make_wgmma(64, 32, 1), true) == ((2ull << 62) | (32ull << 32) | (1ull << 16)));
  CHECK(gpu::detail::wgmma_desc_bits(SwizzledTile::make_wgmma(64, 16, 1), true) == ((3ull << 62) | (16ull << 32) | (1ull << 16)));
  // fp8: a 128x128 K-major tile has the same 128-byte rows, hence the same bits as 128x64 bf16;
  // 64 fp8 columns are the 64-byte swizzle.
  CHECK(gpu::detail::wgmma_desc_bits(SwizzledTile::make_wgmma(128, 128, 1, 0, 1), true) == 0x4000004000010000ull);
  CHECK(gpu::detail::wgmma_desc_bits(SwizzledTile::make_wgmma(64, 64, 1, 0, 1), true) == ((2ull << 62) | (32ull << 32) | (1ull << 16)));
}

TEST_CASE("wgmma operand tiles: every element is where the descriptor makes the hardware read it", "[wgmma]") {
  // Tiles as the lowering lays them out (a: [M, K], b: [K, N]), each at a 1024-aligned base, and
  // every instruction it issues: a block of 64 rows at m0 and k16 step k0; b at k0 and instr_n
  // columns at n0.
  struct Case {
    int64_t M, N, K, instr_n;
    bool a_kmajor, b_kmajor;
    int64_t b_atom;
    int esize = 2;  // 1: fp8 (k32 instructions, K-major only)
  };
  const std::vector<Case> cases = {{128, 256, 64, 256, true, false, 64}, {64, 128, 32, 128, true, false, 64},
                                   {128, 128, 64, 128, true, true, 64},  {64, 64, 128, 64, false, false, 64},
                                   {64, 32, 16, 32, true, false, 32},    {128, 16, 64, 16, true, false, 16},
                                   {64, 64, 16, 32, false, true, 64},    {256, 128, 128, 128, false, true, 64},
                                   {128, 256, 128, 256, true, true, 0, 1}, {64, 64, 64, 64, true, true, 0, 1},
                                   {64, 32, 32, 32, true, true, 0, 1},   {128, 128, 256, 128, true, true, 0, 1}};
  for (const Case& c : cases) {
    INFO("a " << c.M << "x" << c.K << (c.a_kmajor ? " K-major" : " M-major") << ", b " << c.K << "x" << c.N
              << (c.b_kmajor ? " K-major" : " N-major") << ", instr n " << c.instr_n << ", " << c.esize << "-byte elements");
    // Tile coordinates: a K-major [M rows, K cols]; M-major [K rows, M cols]; b K-major [N rows,
    // K cols]; N-major [K rows, N cols] with atoms no wider than an instruction.
    const int e = c.esize;
    const SwizzledTile ta =
        c.a_kmajor ? SwizzledTile::make_wgmma(c.M, c.K, 1, 0, e) : SwizzledTile::make_wgmma(c.K, c.M, 1, 0, e);
    const SwizzledTile tb =
        c.b_kmajor ? SwizzledTile::make_wgmma(c.N, c.K, 1, 0, e) : SwizzledTile::make_wgmma(c.K, c.N, 1, c.b_atom, e);
    const int64_t ks = 32 / e;  // K of one instruction: k16 (16-bit), k32 (8-bit)
    const int64_t base_a = 3 * 1024, base_b = base_a + (ta.bytes() + 1023) / 1024 * 1024;
    auto at_a = [&](int64_t m, int64_t k) { return c.a_kmajor ? std::pair{m, k} : std::pair{k, m}; };
    auto at_b = [&](int64_t k, int64_t n) { return c.b_kmajor ? std::pair{n, k} : std::pair{k, n}; };
    for (int64_t k0 = 0; k0 < c.K; k0 += ks) {
      for (int64_t m0 = 0; m0 < c.M; m0 += 64) {
        auto [r, col] = at_a(m0, k0);
        const uint64_t d = descriptor(ta, c.a_kmajor, base_a, r, col);
        for (int64_t m = 0; m < 64; ++m)
          for (int64_t k = 0; k < ks; ++k) {
            auto [er, ec] = at_a(m0 + m, k0 + k);
            REQUIRE(hw_address(d, c.a_kmajor, m, k, e) == base_a + e * ta.offset(er, ec));
          }
      }
      for (int64_t n0 = 0; n0 < c.N; n0 += c.instr_n) {
        auto [r, col] = at_b(k0, n0);
        const uint64_t d = descriptor(tb, c.b_kmajor, base_b, r, col);
        for (int64_t n = 0; n < c.instr_n; ++n)
          for (int64_t k = 0; k < ks; ++k) {
            auto [er, ec] = at_b(k0 + k, n0 + n);
            REQUIRE(hw_address(d, c.b_kmajor, n, k, e) == base_b + e * tb.offset(er, ec));
          }
      }
    }
  }
}

TEST_CASE("wgmma ptx: bf16 and f16 matmuls on sm_90a use wgmma, on sm_80 mma.sync, both assemble", "[ptx][wgmma]") {
  struct Cfg {
    int bm, bn, bk, warps, stages;
    size_t per_iter;  // wgmma per K-loop iteration: K/16 * (M / 64 / gm) * (N / gn / instr_n)
  };
  for (const Cfg& cfg : std::vector<Cfg>{{128, 128, 64, 4, 3, 8}, {128, 256, 64, 8, 3, 4}, {64, 128, 32, 4, 1, 2},
                                         {64, 256, 64, 8, 4, 4}, {256, 128, 64, 8, 3, 8}}) {
    for (bool half : {false, true}) {
      const std::string dt = half ? "f16" : "bf16";
      INFO(dt << " " << cfg.bm << "x" << cfg.bn << "x" << cfg.bk << " warps " << cfg.warps << " stages " << cfg.stages);
      std::string p90, p80;
      Grid g(1, 1);
      g.with_warps(cfg.warps).with_stages(cfg.stages);
      auto run = [&](auto tag, int sm) {
        using T = decltype(tag);
        auto k = gk::matmul<T>();
        return k.ptx(sm, g, fake_ptr<T>(), fake_ptr<T>(), fake_ptr<float>(), 1000, 1000, 1000, cfg.bm, cfg.bn, cfg.bk);
      };
      if (half) p90 = run(f16{}, 90), p80 = run(f16{}, 80);
      else p90 = run(bf16{}, 90), p80 = run(bf16{}, 80);
      const size_t n = count_of(p90, "wgmma.mma_async.sync.aligned.m64n");
      CHECK(n >= cfg.per_iter);
      CHECK(n % cfg.per_iter == 0);
      CHECK(count_of(p90, ".f32." + dt + "." + dt) == n);
      CHECK(count_of(p90, "wgmma.fence.sync.aligned") >= 1);
      CHECK(count_of(p90, "wgmma.commit_group.sync.aligned") >= 1);
      CHECK(count_of(p90, "wgmma.wait_group.sync.aligned 0") >= 1);
      CHECK(p90.find("mma.sync") == std::string::npos);
      CHECK(p90.find("ldmatrix") == std::string::npos);
      if (cfg.stages > 1) CHECK(count_of(p90, "fence.proxy.async.shared::cta") >= 1);
      CHECK(p80.find("wgmma") == std::string::npos);
      CHECK(p80.find("mma.sync.aligned.m16n8k16") != std::string::npos);
      ptxtest::assemble(dt + " wgmma matmul", p90, "sm_90a");
      ptxtest::assemble(dt + " mma.sync matmul", p80, "sm_80");
    }
  }
}

TEST_CASE("wgmma pipelining: the operand loads of a K loop are marked with their atom width", "[wgmma][pipeline]") {
  auto k = [](Ptr<bf16> a, Ptr<bf16> b, Ptr<float> c, Tile<int32_t> M, Tile<int32_t> N, Tile<int32_t> K,
              Constexpr<int> BM, Constexpr<int> BN, Constexpr<int> BK) {
    store(c + expand_dims(arange(0, BM), 1) * N + expand_dims(arange(0, BN), 0),
          ex::matmul_block<bf16>(a, b, arange(0, BM), arange(0, BN), M, N, K, BM, BN, BK));
  };
  for (auto [bn, warps, atom_b] : std::vector<std::tuple<int, int, int64_t>>{{128, 4, 64}, {32, 4, 32}, {64, 8, 32}}) {
    INFO("BN " << bn << " warps " << warps);
    auto f = tracetest::trace("k", k, {64, bn, 64}, /*ptrs_div16=*/true, /*ints_div16=*/true);
    passes::run_gpu_pipeline(*f, warps, 3, /*wgmma=*/true);
    auto loads = tracetest::ops_of(*f, ir::OpKind::Load);
    REQUIRE(loads.size() == 2);
    for (const ir::Op* ld : loads) REQUIRE(ld->has_attr("wgmma"));
    CHECK(loads[0]->int_attr("wgmma") == 64);      // a: K-major, 128-byte swizzle
    CHECK(loads[1]->int_attr("wgmma") == atom_b);  // b: N-major, no wider than one instruction
    CHECK(tracetest::ops_of(*f, ir::OpKind::ConvertLayout).size() <= 1);  // at most the epilogue's
  }
  // Without wgmma the same loads feed ldmatrix conversions.
  auto f = tracetest::trace("k", k, {64, 128, 64}, true, true);
  passes::run_gpu_pipeline(*f, 4, 3);
  for (const ir::Op* ld : tracetest::ops_of(*f, ir::OpKind::Load)) CHECK_FALSE(ld->has_attr("wgmma"));
}

TEST_CASE("wgmma ptx: operands staged from registers (no pipelining, a loaded row sum) assemble", "[ptx][wgmma]") {
  // One stage: nothing is pipelined, both operands are written to K-major tiles (proxy fence,
  // barrier) before the wgmma.
  auto k = gk::matmul<bf16>();
  Grid one(1);
  one.with_warps(4).with_stages(1);
  std::string ptx = k.ptx(90, one, fake_ptr<bf16>(), fake_ptr<bf16>(), fake_ptr<float>(), 4096, 4096, 4096, 64, 64, 32);
  CHECK(count_of(ptx, "cp.async") == 0);
  CHECK(count_of(ptx, "wgmma.mma_async.sync.aligned.m64n64k16") > 0);
  CHECK(count_of(ptx, "fence.proxy.async.shared::cta") > 0);
  ptxtest::assemble("wgmma matmul, 1 stage", ptx, "sm_90a");
  // K = 1001: the K-tail mask is not uniform over 8 elements, so nothing is pipelined.
  ptx = k.ptx(90, 4, fake_ptr<bf16>(), fake_ptr<bf16>(), fake_ptr<float>(), 1001, 1001, 1001, 64, 64, 32);
  CHECK(count_of(ptx, "cp.async") == 0);
  CHECK(count_of(ptx, "wgmma.mma_async") > 0);
  ptxtest::assemble("wgmma matmul, ragged", ptx, "sm_90a");
  // A read in its own layout (it also feeds a row sum) and B pipelined for wgmma in one loop.
  ptx = gk::matmul_rowsum<bf16, 3>().ptx(90, 4, fake_ptr<bf16>(), fake_ptr<bf16>(), fake_ptr<float>(),
                                          fake_ptr<float>(), 4096, 4096, 4096, 64, 64, 32);
  CHECK(count_of(ptx, "cp.async.cg.shared.global") > 0);
  CHECK(count_of(ptx, "wgmma.mma_async") > 0);
  ptxtest::assemble("wgmma matmul with a row sum", ptx, "sm_90a");
}

TEST_CASE("wgmma register-A layout: the PTX fragment table (Figure 148), replicated over N warpgroups", "[wgmma][layout]") {
  for (auto [M, K, gm, gn] : std::vector<std::tuple<int64_t, int64_t, int32_t, int32_t>>{
           {64, 16, 1, 1}, {128, 64, 2, 1}, {64, 128, 1, 2}, {256, 32, 2, 2}}) {
    INFO(M << "x" << K << " warpgroups " << gm << "x" << gn);
    auto l = layout::mma_v2_operand(0, {M, K}, {4 * gm, gn}, 16);
    for (int32_t w = 0; w < 4 * gm * gn; ++w)
      for (int32_t lane = 0; lane < 32; ++lane)
        for (int32_t r = 0; r < l.num_regs(); ++r) {
          auto c = l.apply({r, lane, w, 0});
          // register r: element a_i (i = r % 8) of k16 block (r / 8) % (K / 16), 64-row block r / (8 K / 16)
          const int32_t i = r % 8, kb = (r / 8) % int32_t(K / 16), mb = r / (8 * int32_t(K / 16)), g = w / 4;
          CHECK(c[0] == 64 * (g % gm) + 64 * gm * mb + 16 * (w % 4) + lane / 4 + 8 * ((i >> 1) & 1));
          CHECK(c[1] == 16 * kb + 2 * (lane % 4) + (i & 1) + 8 * (i >= 4));
        }
  }
}

TEST_CASE("wgmma attention: q read in place at BN = 128 (from registers at BN = 64), k (transposed) and v pipelined",
          "[wgmma][pipeline][ptx]") {
  auto k = ex::make_attention<bf16>();
  for (int bn : {64, 128})
    for (bool causal : {false, true}) {
      INFO("BN " << bn << (causal ? " causal" : " full"));
      Grid g(32, 128);
      g.with_warps(8).with_stages(3);
      std::string ptx =
          k.ptx(90, g, fake_ptr<bf16>(), fake_ptr<bf16>(), fake_ptr<bf16>(), fake_ptr<bf16>(), 4096, 0.1f, 128, bn, 128, causal);
      // s = q k^T: m64n{BN}k16, q a resident operand read through descriptors at BN = 128 (the
      // instructions' N), from registers at BN = 64; o += p v: m64n128k16 with p from registers.
      size_t wgmmas = 0, regs_a = 0;
      std::istringstream lines(ptx);
      for (std::string line; std::getline(lines, line);)
        if (line.find("wgmma.mma_async.sync.aligned.m64n") != std::string::npos) {
          CHECK(line.find("k16.f32.bf16.bf16 {%f") != std::string::npos);
          ++wgmmas;
          regs_a += line.find("}, {%r") != std::string::npos;
        }
      CHECK(wgmmas > 0);
      if (bn == 128) CHECK(2 * regs_a == wgmmas);  // as many instructions for q k^T as for p v
      else CHECK(regs_a == wgmmas);
      CHECK(count_of(ptx, "cp.async.cg.shared.global") > 0);
      ptxtest::assemble("attention", ptx, "sm_90a");
      CHECK(ptxtest::spill_store_bytes("attention", ptx) <= 0);
      // BN = 128: 206 / 227 registers (full / causal) with q resident and its K steps' descriptors
      // computed in the loop while LLVM's loop strength reduction ran; since the NVPTX pipeline
      // skips it (nvptx.cpp: its search took minutes on other kernels) ptxas takes 251 / 235, still
      // one program of 8 warps per SM and no spill (checked above). q read in place is checked by
      // the instruction count above; the register count only bounds it below the 255 cap.
      const int regs = bn == 128 ? ptxtest::registers("attention", ptx) : 0;
      if (regs > 0) CHECK(regs <= (causal ? 240 : 253));
    }
}

TEST_CASE("wgmma resident operands: a loop-invariant a is written once and read in place, from registers where "
          "shared memory runs out",
          "[wgmma][ptx][ops]") {
  // acc += dot(x, b_k) over K blocks with x [BM, BK] loaded once before the loop (attention's q):
  // x's tile is written before the loop (st.shared, proxy fence) and every wgmma reads it through
  // a descriptor instead of from registers.
  auto k = jit("invariant_a", [](Ptr<bf16> x, Ptr<bf16> b, Ptr<float> c, Constexpr<int> K, Constexpr<int> BM,
                                 Constexpr<int> BN, Constexpr<int> BK) {
    Tile<int32_t> rm = arange(0, BM), rn = arange(0, BN), rk = arange(0, BK);
    Tile<bf16> tx = load(x + expand_dims(rm, 1) * BK + expand_dims(rk, 0));
    Tile<float> acc = zeros<float>({BM, BN});
    for (auto k0 : range(0, K, BK)) {
      Tile<bf16> tb = load(b + expand_dims(k0 + rk, 1) * BN + expand_dims(rn, 0));
      acc = dot(tx, tb, acc);
    }
    store(c + expand_dims(rm, 1) * BN + expand_dims(rn, 0), acc);
  });
  const int BM = 128, BN = 128, BK = 128;
  // 7 stages of b (32 KB each) leave less than x's 32 KB: the kernel is lowered again with x from
  // registers. (A register cap keeps the loop from being warp-specialized: there resident operands
  // are not used.)
  for (int stages : {3, 6, 7}) {
    INFO("stages " << stages);
    Grid g(1);
    g.with_warps(8).with_stages(stages).with_maxnreg(255);
    const std::string ptx = k.ptx(90, g, fake_ptr<bf16>(), fake_ptr<bf16>(), fake_ptr<float>(), 4096, BM, BN, BK);
    const size_t first_copy = ptx.find("cp.async.c");  // .ca or .cg
    REQUIRE(first_copy != std::string::npos);
    const size_t wgmmas = count_of(ptx, "wgmma.mma_async.sync.aligned.m64n128k16"), regs_a = count_of(ptx, "}, {%r");
    CHECK(wgmmas > 0);
    if (stages < 7) {
      CHECK(ptx.find("st.shared") < first_copy);
      CHECK(ptx.find("fence.proxy.async.shared::cta") < first_copy);
      CHECK(regs_a == 0);
    } else {
      CHECK(regs_a == wgmmas);
    }
    ptxtest::assemble("invariant a", ptx, "sm_90a");
  }
  // Values against a plain reference (K = 17 blocks; on the GPU under TLE_TEST_BACKEND=gpu).
  const int K = 17 * BK;
  opstest::Vec<bf16> xv(size_t(BM) * BK), bv(size_t(K) * BN);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = bf16(float(int(i * 7 % 13) - 6) / 8);
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = bf16(float(int(i * 5 % 11) - 5) / 8);
  opstest::Vec<float> cv(size_t(BM) * BN);
  std::vector<float> ref(size_t(BM) * BN, 0.f);
  k(Grid(1).with_warps(8).with_stages(3), xv.data(), bv.data(), cv.data(), K, BM, BN, BK);
  for (int i = 0; i < BM; ++i)
    for (int j = 0; j < BN; ++j)
      for (int kk = 0; kk < K; ++kk) ref[size_t(i) * BN + j] += float(xv[size_t(i) * BK + kk % BK]) * float(bv[size_t(kk) * BN + j]);
  for (size_t i = 0; i < ref.size(); ++i) CHECK(cv[i] == Approx(ref[i]).margin(1e-3));
}

TEST_CASE("hoist_conversions: a loop-invariant operand's conversion moves before the loop, loads stay pipelined",
          "[wgmma][pipeline]") {
  // The core of attention: q loaded before the key loop, s = q k^T and o += s v in it.
  auto kern = [](Ptr<bf16> q, Ptr<bf16> k, Ptr<bf16> v, Ptr<float> o, Tile<int32_t> S, Constexpr<int> BM,
                 Constexpr<int> BN, Constexpr<int> D) {
    Tile<int32_t> rm = arange(0, BM), rd = arange(0, D);
    Tile<bf16> tq = load(q + expand_dims(rm, 1) * D + expand_dims(rd, 0));
    Tile<float> acc = zeros<float>({BM, D});
    for (auto n0 : range(0, S, BN)) {
      Tile<int32_t> kv = expand_dims(n0 + arange(0, BN), 1) * D + expand_dims(rd, 0);
      Tile<float> s = dot(tq, trans(load(k + kv)));
      acc = dot(cast<bf16>(s), load(v + kv), acc);
    }
    store(o + expand_dims(rm, 1) * D + expand_dims(rd, 0), acc);
  };
  auto f = tracetest::trace("attn_core", kern, {128, 64, 128}, true, true);
  passes::run_gpu_pipeline(*f, 8, 3, /*wgmma=*/true);
  auto loops = tracetest::ops_of(*f, ir::OpKind::For);
  REQUIRE(loops.size() == 1);
  const ir::Block& body = loops[0]->region().body();
  // q's conversion to the register-A layout is in the entry block, before the loop
  bool q_conv_before = false;
  for (const auto& op : f->entry().ops) {
    if (op.get() == loops[0]) break;
    if (op->kind == ir::OpKind::ConvertLayout && op->operands[0]->def && op->operands[0]->def->kind == ir::OpKind::Load)
      q_conv_before = true;
  }
  CHECK(q_conv_before);
  // in the loop: both loads pipelined for wgmma (k through its transpose), no conversion of q
  int wgmma_loads = 0;
  for (const auto& op : body.ops) {
    if (op->kind == ir::OpKind::Load && op->has_attr("wgmma")) ++wgmma_loads;
    if (op->kind == ir::OpKind::ConvertLayout) CHECK(op->operands[0]->def->parent == &body);  // s -> p only
  }
  CHECK(wgmma_loads == 2);
  CHECK(passes::hoist_conversions(*f) == 0);  // nothing left to move
}

TEST_CASE("warp specialization: a wgmma K loop gets a producer warpgroup, mbarriers, register budgets", "[ptx][wgmma]") {
  auto k = gk::matmul<bf16>();
  for (auto [bm, bn, warps, stages] : std::vector<std::tuple<int, int, int, int>>{{128, 256, 8, 4}, {128, 128, 4, 4},
                                                                                 {64, 128, 4, 2}}) {
    INFO(bm << "x" << bn << " warps " << warps << " stages " << stages);
    Grid g(1, 1);
    g.with_warps(warps).with_stages(stages);
    const std::string ptx =
        k.ptx(90, g, fake_ptr<bf16>(), fake_ptr<bf16>(), fake_ptr<float>(), 4096, 4096, 4096, bm, bn, 64);
    CHECK(ptx.find(".reqntid " + std::to_string(32 * (warps + 4)) + ", 1, 1") != std::string::npos);
    CHECK(count_of(ptx, "mbarrier.init.shared::cta.b64") == size_t(2 * stages));
    CHECK(count_of(ptx, "mbarrier.init.shared::cta.b64 [%r") >= 1);
    CHECK(count_of(ptx, "cp.async.mbarrier.arrive.noinc.shared::cta.b64") == 1);  // the producer's loop
    CHECK(count_of(ptx, "mbarrier.try_wait.parity.shared::cta.b64") == 2);       // empty (producer), full (compute)
    CHECK(count_of(ptx, "mbarrier.arrive.shared::cta.b64") == 1);                // the compute warps' release
    CHECK(count_of(ptx, "cp.async.wait_group") == 0);
    CHECK(count_of(ptx, "barrier.sync \t1, " + std::to_string(32 * warps) + ";") >= 1);  // compute warps only after the loop
    CHECK(count_of(ptx, "wgmma.wait_group.sync.aligned 1") == 1);
    // 8 compute warps + 4 producers = 384 threads: 168 registers each at entry, then re-split
    if (warps == 8) {
      CHECK(ptx.find(".maxnreg 168") != std::string::npos);
      CHECK(ptx.find("setmaxnreg.dec.sync.aligned.u32") != std::string::npos);
      CHECK(ptx.find("setmaxnreg.inc.sync.aligned.u32") != std::string::npos);
    } else {
      CHECK(ptx.find("setmaxnreg") == std::string::npos);
    }
    ptxtest::assemble("warp-specialized matmul", ptx, "sm_90a");
  }
  // TLE_WARP_SPECIALIZE=0 is read by the runtime; without a qualifying loop (the loop stores) or
  // with a register cap the kernel stays as before.
  Grid capped(1, 1);
  capped.with_warps(8).with_stages(4).with_maxnreg(200);
  const std::string p = k.ptx(90, capped, fake_ptr<bf16>(), fake_ptr<bf16>(), fake_ptr<float>(), 4096, 4096, 4096, 128,
                              256, 64);
  CHECK(p.find("mbarrier") == std::string::npos);
  CHECK(p.find(".reqntid 256, 1, 1") != std::string::npos);
}
