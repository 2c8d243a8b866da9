// tests/test_pipeline.cpp - software pipelining of K loops and ldmatrix operand reads, without a
// GPU: which loads passes::pipeline_loads marks (and which it must not), the swizzled
// shared-memory tile against layout::shared_swizzled, the ldmatrix fragment plan of the mma.sync
// operand layouts, the matmul PTX (cp.async, ldmatrix) assembled with ptxas for sm_89 and sm_80,
// Grid::with_stages checks, and loops hinted with range(..., {.num_stages = S}) (loads read back in
// their own layout). GPU results: tests/test_gpu.cpp ("gpu: pipelined matmul ...").
#include <catch2/catch.hpp>

#include <tle/tle.hpp>

#include <algorithm>
#include <memory>
#include <tuple>

#include "../examples/kernels.hpp"
#include "backend/gpu/lower.hpp"
#include "frontend/trace.hpp"
#include "gpu_kernels.hpp"
#include "ir/ir.hpp"
#include "layout/ir_layout.hpp"
#include "layout/named_layouts.hpp"
#include "passes/gpu/gpu_passes.hpp"
#include "passes/gpu/layout_rules.hpp"
#include "passes/pass.hpp"
#include "ptxas_util.hpp"
#include "trace_util.hpp"

using ptxtest::count_of;

using namespace tle;

namespace {

using tracetest::ops_of;

/// Traces `fn` (constexpr parameters from `cx`, in order) as the runtime does for arguments that
/// are all 16-byte aligned pointers and, when `div16`, integers that are multiples of 16; runs the
/// generic pipeline.
template <class F> std::unique_ptr<ir::Function> trace(F fn, std::vector<int64_t> cx, bool div16) {
  return tracetest::trace("k", fn, std::move(cx), /*ptrs_div16=*/true, div16);
}

bool pipelined(const ir::Op* ld) { return ld->has_attr("pipelined") && ld->int_attr("pipelined") == 1; }

/// The loads of the function's only loop, in program order, after the GPU passes.
std::vector<const ir::Op*> loop_loads(ir::Function& f, int warps, int stages, const ir::Op** loop) {
  passes::run_gpu_pipeline(f, warps, stages);
  auto loops = ops_of(f, ir::OpKind::For);
  REQUIRE(loops.size() == 1);
  *loop = loops[0];
  std::vector<const ir::Op*> v;
  for (auto& op : loops[0]->region().body().ops)
    if (op->kind == ir::OpKind::Load) v.push_back(op.get());
  // in the order of the kernel arguments they read (a, then b): reorder_loads may have issued b's
  // load first
  std::stable_sort(v.begin(), v.end(), [&](const ir::Op* x, const ir::Op* y) {
    return tracetest::pointer_arg(f, *x) < tracetest::pointer_arg(f, *y);
  });
  return v;
}

// The matmul of the examples (tests/gpu_kernels.hpp) as a plain lambda, with a switch for the
// variants the pass must refuse.
enum class Variant { Plain, BUsedTwice, CarriedOffset, NonzeroOther, OddMask, StoreInLoop, VolatileA };
template <Variant V>
auto matmul_fn = [](Ptr<bf16> a, Ptr<bf16> b, Ptr<float> c, Tile<int32_t> M, Tile<int32_t> N, Tile<int32_t> K,
                    Constexpr<int> BM, Constexpr<int> BN, Constexpr<int> BK) {
  Tile<int32_t> rm = program_id(0) * BM + arange(0, BM);
  Tile<int32_t> rn = program_id(1) * BN + arange(0, BN);
  Tile<int32_t> rk = arange(0, BK);
  Tile<float> acc = zeros<float>({BM, BN});
  Tile<int32_t> koff = zeros<int32_t>({});
  for (auto k0 : range(0, K, BK)) {
    Tile<int32_t> kk = k0 + rk;
    Tile<bool> ma = expand_dims(rm < M, 1) & expand_dims(kk < (V == Variant::OddMask ? K - 3 : K), 0);
    Tile<bool> mb = expand_dims(kk < K, 1) & expand_dims(rn < N, 0);
    Tile<int32_t> ka = V == Variant::CarriedOffset ? koff + rk : kk;
    MemHints vol;
    vol.is_volatile = true;
    Tile<bf16> ta = V == Variant::NonzeroOther ? load(a + expand_dims(rm, 1) * K + expand_dims(ka, 0), ma, 1.0f)
                    : V == Variant::VolatileA  ? load(a + expand_dims(rm, 1) * K + expand_dims(ka, 0), ma, 0.0f, vol)
                                               : load(a + expand_dims(rm, 1) * K + expand_dims(ka, 0), ma);
    Tile<bf16> tb = load(b + expand_dims(kk, 1) * N + expand_dims(rn, 0), mb);
    acc = dot(ta, tb, acc);
    if constexpr (V == Variant::BUsedTwice) acc = acc + cast<float>(tb);  // BK == BN == BM here
    if constexpr (V == Variant::StoreInLoop)  // a later iteration may read what this one writes
      store(c + expand_dims(rm, 1) * N + expand_dims(rn, 0), acc, expand_dims(rm < M, 1) & expand_dims(rn < N, 0));
    koff = koff + BK;
  }
  store(c + expand_dims(rm, 1) * N + expand_dims(rn, 0), acc, expand_dims(rm < M, 1) & expand_dims(rn < N, 0));
};

template <class T> T* fake_ptr() { return reinterpret_cast<T*>(uintptr_t{0x20000}); }  // 16-byte aligned

}  // namespace

TEST_CASE("pipeline pass: both matmul loads are pipelined, num_stages on the loop", "[pipeline]") {
  for (int stages : {2, 3, 4}) {
    auto f = trace(matmul_fn<Variant::Plain>, {128, 128, 32}, /*div16=*/true);
    const ir::Op* loop = nullptr;
    auto loads = loop_loads(*f, 8, stages, &loop);
    INFO(ir::print(*f));
    REQUIRE(loads.size() == 2);
    CHECK(pipelined(loads[0]));
    CHECK(pipelined(loads[1]));
    REQUIRE(loop->has_attr("num_stages"));
    CHECK(loop->int_attr("num_stages") == stages);
    // visible in dumps
    CHECK(ir::print(*f).find("pipelined=1") != std::string::npos);
  }
}

TEST_CASE("pipeline pass: nothing is pipelined with one stage", "[pipeline]") {
  auto f = trace(matmul_fn<Variant::Plain>, {128, 128, 32}, true);
  const ir::Op* loop = nullptr;
  auto loads = loop_loads(*f, 8, 1, &loop);
  for (auto* ld : loads) CHECK_FALSE(ld->has_attr("pipelined"));
  CHECK_FALSE(loop->has_attr("num_stages"));
}

TEST_CASE("pipeline pass: loads that must not be pipelined", "[pipeline]") {
  const ir::Op* loop = nullptr;
  SECTION("a load used by something else than the operand conversion") {
    auto f = trace(matmul_fn<Variant::BUsedTwice>, {32, 32, 32}, true);
    auto loads = loop_loads(*f, 4, 3, &loop);
    INFO(ir::print(*f));
    REQUIRE(loads.size() == 2);
    CHECK(pipelined(loads[0]));
    CHECK_FALSE(pipelined(loads[1]));
  }
  SECTION("an address computed from a loop-carried value") {
    auto f = trace(matmul_fn<Variant::CarriedOffset>, {64, 64, 32}, true);
    auto loads = loop_loads(*f, 4, 3, &loop);
    INFO(ir::print(*f));
    REQUIRE(loads.size() == 2);
    CHECK_FALSE(pipelined(loads[0]));
    CHECK(pipelined(loads[1]));
  }
  SECTION("a loop that stores: nothing in it is pipelined") {
    auto f = trace(matmul_fn<Variant::StoreInLoop>, {64, 64, 32}, true);
    auto loads = loop_loads(*f, 4, 3, &loop);
    INFO(ir::print(*f));
    REQUIRE(loads.size() == 2);
    for (auto* ld : loads) CHECK_FALSE(pipelined(ld));
    CHECK_FALSE(loop->has_attr("num_stages"));
  }
  SECTION("a volatile load") {
    auto f = trace(matmul_fn<Variant::VolatileA>, {64, 64, 32}, true);
    auto loads = loop_loads(*f, 4, 3, &loop);
    INFO(ir::print(*f));
    REQUIRE(loads.size() == 2);
    CHECK_FALSE(pipelined(loads[0]));
    CHECK(pipelined(loads[1]));
  }
  SECTION("a nonzero other") {
    auto f = trace(matmul_fn<Variant::NonzeroOther>, {64, 64, 32}, true);
    auto loads = loop_loads(*f, 4, 3, &loop);
    INFO(ir::print(*f));
    REQUIRE(loads.size() == 2);
    CHECK_FALSE(pipelined(loads[0]));
    CHECK(pipelined(loads[1]));
  }
  SECTION("a mask that is not uniform over a vector") {
    auto f = trace(matmul_fn<Variant::OddMask>, {64, 64, 32}, true);
    auto loads = loop_loads(*f, 4, 3, &loop);
    INFO(ir::print(*f));
    REQUIRE(loads.size() == 2);
    CHECK(loads[0]->int_attr("vec") == 8);
    CHECK(loads[0]->int_attr("mask_vec") < 8);
    CHECK_FALSE(pipelined(loads[0]));
    CHECK(pipelined(loads[1]));
  }
  SECTION("K, N not known multiples of 16: unaligned rows, masks not uniform") {
    auto f = trace(matmul_fn<Variant::Plain>, {64, 64, 32}, /*div16=*/false);
    auto loads = loop_loads(*f, 4, 3, &loop);
    INFO(ir::print(*f));
    for (auto* ld : loads) CHECK_FALSE(pipelined(ld));
    CHECK_FALSE(loop->has_attr("num_stages"));
  }
  SECTION("an f32 dot (no tensor-core operand layout)") {
    auto f = trace([](Ptr<float> a, Ptr<float> c, Tile<int32_t> K, Constexpr<int> B) {
      Tile<int32_t> r = arange(0, B);
      Tile<float> acc = zeros<float>({B, B});
      for (auto k0 : range(0, K, B)) {
        Tile<int32_t> off = expand_dims(r, 1) * K + k0 + expand_dims(r, 0);
        Tile<float> t = load(a + off);
        acc = dot(t, t, acc);
      }
      store(c + expand_dims(r, 1) * B + expand_dims(r, 0), acc);
    }, {32}, true);
    auto loads = loop_loads(*f, 4, 3, &loop);
    for (auto* ld : loads) CHECK_FALSE(pipelined(ld));
  }
}

// A persistent row loop with a store in its body, hinted with range(..., {.num_stages = S}), and
// the variants whose loads the pass must leave alone.
enum class RowVariant { Plain, CarriedRow, NonzeroOther, InIf, Volatile, StoreFirst };
template <class T, int S, RowVariant V>
auto rows_fn = [](Ptr<T> x, Ptr<T> y, Tile<int32_t> nrows, Tile<int32_t> ncols, Constexpr<int> BLOCK) {
  Tile<int32_t> cols = arange(0, BLOCK);
  Tile<bool> mask = cols < ncols;
  Tile<int64_t> carried = zeros<int64_t>({});
  for (auto r : range(program_id(0), nrows, num_programs(0), {.num_stages = S})) {
    Tile<int64_t> row = V == RowVariant::CarriedRow ? carried : r.to<int64_t>() * ncols;
    MemHints vol;
    vol.is_volatile = V == RowVariant::Volatile;
    Tile<T> v = zeros<T>({BLOCK});
    if constexpr (V == RowVariant::StoreFirst) store(x + row + cols, zeros<T>({BLOCK}), mask);  // then read back
    if constexpr (V == RowVariant::InIf) if_(r < nrows, [&] { v = load(x + row + cols, mask, 0); });
    else v = load(x + row + cols, mask, V == RowVariant::NonzeroOther ? 1 : 0, vol);
    store(y + row + cols, v + v, mask);
    carried = carried + ncols.to<int64_t>();
  }
};

/// The loads of the function's only loop, nested regions included.
std::vector<const ir::Op*> all_loop_loads(ir::Function& f, int warps, int stages, const ir::Op** loop) {
  passes::run_gpu_pipeline(f, warps, stages);
  auto loops = ops_of(f, ir::OpKind::For);
  REQUIRE(loops.size() == 1);
  *loop = loops[0];
  std::vector<const ir::Op*> v;
  ir::walk(loops[0]->region().body(), [&](ir::Op& op) {
    if (op.kind == ir::OpKind::Load) v.push_back(&op);
  });
  return v;
}

TEST_CASE("pipeline pass: a hinted loop pipelines its loads in their own layout, stores and all", "[pipeline]") {
  const ir::Op* loop = nullptr;
  SECTION("f32 rows: 16-byte vectors; the hint's depth wins over the launch's, even 1") {
    for (int launch_stages : {1, 3, 4}) {
      auto f = trace(rows_fn<float, 3, RowVariant::Plain>, {1024}, /*div16=*/true);
      auto loads = all_loop_loads(*f, 4, launch_stages, &loop);
      INFO(ir::print(*f));
      REQUIRE(loads.size() == 1);
      CHECK(pipelined(loads[0]));
      CHECK(loads[0]->int_attr("pipe_vec") == 4);
      CHECK(loop->int_attr("num_stages") == 3);
      CHECK(ir::print(*f).find("pipe_vec=4") != std::string::npos);
    }
  }
  SECTION("bf16 rows: 8 elements per copy when ncols is a multiple of 16, none when it may be odd") {
    auto f = trace(rows_fn<bf16, 2, RowVariant::Plain>, {1024}, true);
    auto loads = all_loop_loads(*f, 4, 3, &loop);
    INFO(ir::print(*f));
    REQUIRE(loads.size() == 1);
    CHECK(pipelined(loads[0]));
    CHECK(loads[0]->int_attr("pipe_vec") == 8);  // 16-byte copies
    CHECK(loop->int_attr("num_stages") == 2);
    auto g = trace(rows_fn<bf16, 2, RowVariant::Plain>, {1024}, /*div16=*/false);  // 2-byte copies: not
    loads = all_loop_loads(*g, 4, 3, &loop);
    CHECK_FALSE(pipelined(loads[0]));
    CHECK_FALSE(loop->has_attr("num_stages"));
    auto h = trace(rows_fn<float, 2, RowVariant::Plain>, {1024}, /*div16=*/false);  // 4-byte copies: yes
    loads = all_loop_loads(*h, 4, 3, &loop);
    CHECK(pipelined(loads[0]));
    CHECK(loads[0]->int_attr("pipe_vec") == 1);
  }
  SECTION("no hint, or a hint of 1: a loop that stores is not pipelined") {
    auto f = trace(rows_fn<float, 0, RowVariant::Plain>, {1024}, true);
    auto loads = all_loop_loads(*f, 4, 3, &loop);
    CHECK_FALSE(pipelined(loads[0]));
    CHECK_FALSE(loop->has_attr("num_stages"));
    auto g = trace(rows_fn<float, 1, RowVariant::Plain>, {1024}, true);
    loads = all_loop_loads(*g, 4, 3, &loop);
    CHECK_FALSE(pipelined(loads[0]));
    CHECK_FALSE(loop->has_attr("num_stages"));
  }
  SECTION("a nonzero other: moved all the same (the read-back selects it where the mask is off)") {
    auto f = trace(rows_fn<float, 3, RowVariant::NonzeroOther>, {1024}, true);
    auto loads = all_loop_loads(*f, 4, 3, &loop);
    INFO(ir::print(*f));
    REQUIRE(loads.size() == 1);
    CHECK(pipelined(loads[0]));
    CHECK(loads[0]->int_attr("pipe_vec") == 4);
  }
  SECTION("loads the hint does not move: a loop-carried address, inside an if_, volatile, after a store of the "
          "same iteration") {
    auto carried = trace(rows_fn<float, 3, RowVariant::CarriedRow>, {1024}, true);
    auto in_if = trace(rows_fn<float, 3, RowVariant::InIf>, {1024}, true);
    auto vol = trace(rows_fn<float, 3, RowVariant::Volatile>, {1024}, true);
    auto after_store = trace(rows_fn<float, 3, RowVariant::StoreFirst>, {1024}, true);
    for (auto* f : {carried.get(), in_if.get(), vol.get(), after_store.get()}) {
      auto loads = all_loop_loads(*f, 4, 3, &loop);
      INFO(ir::print(*f));
      REQUIRE(loads.size() == 1);
      CHECK_FALSE(pipelined(loads[0]));
      CHECK_FALSE(loop->has_attr("num_stages"));
    }
  }
}

TEST_CASE("pipeline pass: range(lo, hi, {.num_stages}) without a step, nothing on a target without cp.async",
          "[pipeline]") {
  auto fn = [](Ptr<float> x, Ptr<float> y, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> cols = arange(0, BLOCK);
    for (auto r : range(0, n, {.num_stages = 2})) store(y + r * BLOCK + cols, load(x + r * BLOCK + cols) * 2.0f);
  };
  const ir::Op* loop = nullptr;
  auto f = trace(fn, {256}, true);
  auto loads = all_loop_loads(*f, 2, 3, &loop);
  REQUIRE(loads.size() == 1);
  CHECK(pipelined(loads[0]));
  CHECK(loop->int_attr("num_stages") == 2);
  auto g = trace(fn, {256}, true);
  loads = all_loop_loads(*g, 2, 0, &loop);  // gpu::compile passes 0 below sm_80
  CHECK_FALSE(pipelined(loads[0]));
  CHECK_FALSE(loop->has_attr("num_stages"));
}

TEST_CASE("hinted loops: too many stages for shared memory is a UserError naming the loop's hint", "[pipeline]") {
  // 32768 f32 per row over 32 warps: 128 KB per stage; 8 stages cannot fit in 227 KB.
  auto k = gk::scale_rows<float, 8>();
  auto x = fake_ptr<float>();
  CHECK_THROWS_WITH(k.ptx(90, 32, x, x, 100, 32768, 32768),
                    Catch::Contains("cp.async buffers of a pipelined loop") &&
                        Catch::Contains("range(..., {.num_stages = S})"));
  CHECK_NOTHROW(gk::scale_rows<float, 1>().ptx(90, 32, x, x, 100, 32768, 32768));  // 1: not pipelined
}

TEST_CASE("hinted K loop PTX: a load in its own layout and one read by ldmatrix in one loop", "[ptx][pipeline]") {
  auto b = fake_ptr<bf16>();
  auto c = fake_ptr<float>();
  for (int sm : {89, 80}) {  // mma.sync targets (sm_90a: test_wgmma.cpp)
    const std::string arch = "sm_" + std::to_string(sm);
    INFO(arch);
    const std::string ptx = gk::matmul_rowsum<bf16, 3>().ptx(sm, 4, b, b, c, c, 4096, 4096, 4096, 64, 64, 32);
    CHECK(count_of(ptx, "cp.async.cg.shared.global") > 0);
    CHECK(count_of(ptx, "ldmatrix.sync.aligned") > 0);   // B from its stage buffer
    CHECK(count_of(ptx, "ld.shared.v4") > 0);             // A's own vectors (then converted)
    CHECK(count_of(ptx, "mma.sync.aligned.m16n8k16") > 0);
    ptxtest::assemble("hinted matmul with a row sum", ptx, arch);
  }
}

TEST_CASE("hinted row loop PTX: cp.async into each thread's own buffer, ld.shared reads, no barrier in the loop",
          "[ptx][pipeline]") {
  auto x = fake_ptr<float>();
  for (int sm : {90, 80}) {
    const std::string arch = sm == 90 ? "sm_90a" : "sm_80";
    INFO(arch);
    const std::string hinted = gk::scale_rows<float, 3>().ptx(sm, 4, x, x, 1000, 1024, 1024);
    const std::string plain = gk::scale_rows<float, 0>().ptx(sm, 4, x, x, 1000, 1024, 1024);
    // 1024 f32 over 128 threads: 2 vectors of 16 bytes per thread per row, copied in the prologue
    // (2 rows) and in the loop.
    CHECK(count_of(hinted, "cp.async.cg.shared.global") == 3 * 2);
    CHECK(count_of(hinted, "cp.async.commit_group") == 3);
    CHECK(count_of(hinted, "cp.async.wait_group 1") == 1);
    CHECK(count_of(hinted, "ld.shared.v4") == 2);
    CHECK(count_of(hinted, "bar.sync") == 2);  // before the prologue and after the drain only
    CHECK(count_of(plain, "cp.async") == 0);
    CHECK(count_of(plain, "ld.shared") == 0);
    ptxtest::assemble("hinted row loop", hinted, arch);
    // bf16 with a ragged tail (ncols 1000: 8-element copies stay uniform under the mask)
    const std::string b16 = gk::scale_rows<bf16, 4>().ptx(sm, 8, fake_ptr<bf16>(), fake_ptr<bf16>(), 1000, 1008, 1024);
    CHECK(count_of(b16, "cp.async") > 0);
    ptxtest::assemble("hinted bf16 row loop", b16, arch);
  }
}

TEST_CASE("hinted chunk loops PTX: the long-row softmax pipelines both passes, -inf in masked lanes", "[ptx][pipeline]") {
  // ex::make_softmax_looped loads its chunks with other = -inf: both hinted loops copy them ahead
  // (3 stages: 2 in the prologue, 1 per iteration, per loop) and select -inf into masked lanes
  // after the read-back (cp.async zero-fills them).
  auto sm = ex::make_softmax_looped();
  auto x = fake_ptr<float>();
  const std::string ptx = sm.ptx(90, 8, x, x, 128256, 2048);
  CHECK(count_of(ptx, "cp.async.commit_group") == 2 * 3);
  CHECK(count_of(ptx, "ld.shared.v4") >= 2 * 2);  // 2048 f32 over 256 threads: 2 vectors per thread and read
  CHECK(count_of(ptx, "0fFF800000") > 0);         // -inf, selected into masked-off lanes
  ptxtest::assemble("long-row softmax", ptx, "sm_90a");
}

TEST_CASE("swizzled tile: offsets equal layout::shared_swizzled and are a bijection", "[pipeline]") {
  using gpu::detail::SwizzledTile;
  for (int64_t rows : {8, 16, 64, 128})
    for (int64_t cols : {8, 16, 32, 64, 128, 256}) {
      INFO(rows << "x" << cols);
      SwizzledTile t = SwizzledTile::make(rows, cols, 1);
      auto ll = layout::shared_swizzled({rows, cols}, 8, t.per_phase, t.max_phase, {1, 0});
      std::vector<int> seen(static_cast<size_t>(rows * cols), 0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const int64_t off = t.offset(r, c);
          REQUIRE(off == ll.apply({static_cast<int32_t>(r), static_cast<int32_t>(c)})[0]);
          ++seen[static_cast<size_t>(off)];
        }
      for (int s : seen) REQUIRE(s == 1);
      // ldmatrix: 8 consecutive rows at one logical chunk hit 8 different 16-byte bank groups.
      for (int64_t r0 = 0; r0 < rows; r0 += 8)
        for (int64_t c0 = 0; c0 < cols; c0 += 8) {
          std::vector<int> group(8, 0);
          for (int64_t i = 0; i < 8; ++i) ++group[static_cast<size_t>((t.offset(r0 + i, c0) * 2 / 16) % 8)];
          for (int g : group) CHECK(g == 1);
        }
    }
}

TEST_CASE("ldmatrix plan: mma.sync operand layouts are ldmatrix fragments, blocked layouts are not", "[pipeline]") {
  using gpu::detail::ldmatrix_plan;
  for (std::vector<int32_t> warps : {std::vector<int32_t>{1, 1}, {2, 2}, {2, 4}, {4, 2}, {1, 4}}) {
    auto a = layout::mma_v2_operand(0, {128, 64}, warps, 16);
    auto b = layout::mma_v2_operand(1, {64, 128}, warps, 16);
    auto pa = ldmatrix_plan(a), pb = ldmatrix_plan(b);
    REQUIRE(pa);
    REQUIRE(pb);
    CHECK(pa->kd == 1);
    CHECK(pb->kd == 0);
    CHECK(pa->matrices * 2 == a.num_regs());
    CHECK(pa->per_instr == 4);
  }
  auto small_b = layout::mma_v2_operand(1, {16, 8}, {1, 1}, 16);  // one k16 x n8 tile: 2 matrices
  auto p = ldmatrix_plan(small_b);
  REQUIRE(p);
  CHECK(p->per_instr == 2);
  CHECK_FALSE(ldmatrix_plan(layout::blocked({64, 64}, {1, 8}, {4, 8}, {4, 1}, {1, 0})));
  CHECK_FALSE(ldmatrix_plan(layout::mma_v2_operand(0, {64, 64}, {2, 2}, 8)));  // 8-bit: 4 per register
}

TEST_CASE("pipelined matmul PTX: cp.async and ldmatrix, assembles for sm_89 and sm_80", "[ptx][pipeline]") {
  for (bool f16 : {false, true}) {
    auto kb = gk::matmul<bf16>();
    auto kh = gk::matmul<tle::f16>();
    struct Cfg {
      int bm, bn, bk, warps, stages;
    };
    for (Cfg c : {Cfg{128, 128, 32, 8, 3}, Cfg{64, 64, 32, 4, 2}, Cfg{128, 64, 64, 4, 4}, Cfg{32, 16, 16, 2, 3}}) {
      for (int sm : {89, 80}) {  // mma.sync targets (sm_90a: test_wgmma.cpp)
        const std::string arch = "sm_" + std::to_string(sm);
        INFO((f16 ? "f16 " : "bf16 ") << c.bm << "x" << c.bn << "x" << c.bk << " w" << c.warps << " s" << c.stages << " "
                                      << arch);
        Grid g(1);
        g.with_warps(c.warps).with_stages(c.stages);
        std::string ptx = f16 ? kh.ptx(sm, g, fake_ptr<tle::f16>(), fake_ptr<tle::f16>(), fake_ptr<float>(), 4096, 4096,
                                       4096, c.bm, c.bn, c.bk)
                              : kb.ptx(sm, g, fake_ptr<bf16>(), fake_ptr<bf16>(), fake_ptr<float>(), 4096, 4096, 4096,
                                       c.bm, c.bn, c.bk);
        // 16-byte copies (.cg); the 32x16 A tile shares the 4-wide layout of the f32 C stores: 8 bytes (.ca)
        CHECK(count_of(ptx, c.bm >= 64 ? "cp.async.cg.shared.global" : "cp.async.ca.shared.global") > 0);
        CHECK(count_of(ptx, "cp.async.commit_group") > 0);
        CHECK(count_of(ptx, "cp.async.wait_group") > 0);
        CHECK(count_of(ptx, "ldmatrix.sync.aligned.m8n8") > 0);
        CHECK(count_of(ptx, ".trans") > 0);  // B is N-contiguous in memory
        CHECK(count_of(ptx, "mma.sync.aligned.m16n8k16") > 0);
        ptxtest::assemble("pipelined matmul", ptx, arch);
      }
    }
  }
}

TEST_CASE("pipeline buffers beyond the shared-memory limit: a UserError that names with_stages", "[pipeline]") {
  // 128x256x64 bf16: 48 KB of A and B tiles per stage; 8 stages need 384 KB (sm_90a: 227 KB).
  auto k = gk::matmul<bf16>();
  Grid g(1);
  g.with_warps(8).with_stages(8);
  CHECK_THROWS_WITH(k.ptx(90, g, fake_ptr<bf16>(), fake_ptr<bf16>(), fake_ptr<float>(), 4096, 4096, 4096, 128, 256, 64),
                    Catch::Contains("cp.async buffers of a pipelined loop") && Catch::Contains("Grid::with_stages, now 8"));
  g.with_stages(3);  // 144 KB: fits
  CHECK_NOTHROW(k.ptx(90, g, fake_ptr<bf16>(), fake_ptr<bf16>(), fake_ptr<float>(), 4096, 4096, 4096, 128, 256, 64));
}

TEST_CASE("matmul PTX without pipelining: ldmatrix, no cp.async (1 stage, K not a multiple of 16)", "[ptx][pipeline]") {
  auto k = gk::matmul<bf16>();
  Grid one(1);
  one.with_warps(4).with_stages(1);
  std::string ptx = k.ptx(89, one, fake_ptr<bf16>(), fake_ptr<bf16>(), fake_ptr<float>(), 4096, 4096, 4096, 64, 64, 32);
  CHECK(count_of(ptx, "cp.async") == 0);
  CHECK(count_of(ptx, "ldmatrix.sync.aligned.m8n8.x4") > 0);
  ptxtest::assemble("matmul, 1 stage", ptx, "sm_89");
  // K = 1001 (odd): the K-tail mask is not uniform over 8 elements; no pipelining, ldmatrix still.
  ptx = k.ptx(80, 4, fake_ptr<bf16>(), fake_ptr<bf16>(), fake_ptr<float>(), 1001, 1001, 1001, 64, 64, 32);
  CHECK(count_of(ptx, "cp.async") == 0);
  CHECK(count_of(ptx, "ldmatrix.sync.aligned.m8n8.x4") > 0);
  ptxtest::assemble("matmul, ragged", ptx, "sm_80");
  // M, N, K = 4000, 4100, 3000: multiples of 16, 4 and 8 (the specialization's divisibility): A's
  // rows and the K tail allow 16-byte copies, B's rows 8-byte ones; both loads are pipelined.
  ptx = k.ptx(80, 4, fake_ptr<bf16>(), fake_ptr<bf16>(), fake_ptr<float>(), 4000, 4100, 3000, 64, 64, 32);
  CHECK(count_of(ptx, "cp.async.cg.shared.global") > 0);
  CHECK(count_of(ptx, "cp.async.ca.shared.global") > 0);
  ptxtest::assemble("matmul, 4000x4100x3000", ptx, "sm_80");
}

TEST_CASE("launch options: with_stages outside 1..8 is a UserError on every backend", "[runtime][pipeline]") {
  auto k = gk::vector_add();
  std::vector<float> x(1000, 1.0f), out(1000);
  for (int s : {0, -1, 9}) {
    INFO("num_stages " << s);
    CHECK_THROWS_AS(k(Grid(1).with_stages(s).backend(Backend::CPU), x.data(), x.data(), out.data(), 1000, 1024),
                    UserError);
  }
  CHECK_THROWS_WITH(k(Grid(1).with_stages(0).backend(Backend::CPU), x.data(), x.data(), out.data(), 1000, 1024),
                    Catch::Contains("num_stages"));
  Grid bad(1);
  bad.with_stages(0);
  CHECK_THROWS_AS(k.ptx(90, bad, x.data(), x.data(), out.data(), 1000, 1024), UserError);
  k(Grid(1).with_stages(1).backend(Backend::CPU), x.data(), x.data(), out.data(), 1000, 1024);
  CHECK(out[999] == 2.0f);
  CHECK(Grid(1).with_stages(4).num_stages == 4);
  CHECK(Grid(1).num_stages == 3);
}

TEST_CASE("pipelined loops: two K loops in one kernel, a K loop inside a persistent tile loop", "[ptx][pipeline]") {
  auto one = gk::matmul<bf16>();
  auto two = gk::matmul_two_loops<bf16>();
  auto persistent = gk::matmul_persistent<bf16>();
  Grid g(1);
  g.with_warps(4).with_stages(3);
  auto b = fake_ptr<bf16>();
  auto c = fake_ptr<float>();
  // sm_89 (mma.sync): on sm_90a the one-loop kernel's loop is warp-specialized (test_wgmma.cpp).
  const std::string p1 = one.ptx(89, g, b, b, c, 4096, 4096, 4096, 64, 64, 32);
  const std::string p2 = two.ptx(89, g, b, b, b, b, c, 4096, 4096, 4096, 64, 64, 32);
  const std::string pp = persistent.ptx(89, g, b, b, c, 4096, 4096, 4096, 64, 64, 32);
  // Each pipelined loop has its own prologue, steady state and drain: the two-loop kernel has
  // twice the cp.async groups and waits of the one-loop kernel; the persistent one as many.
  for (const char* what : {"cp.async.commit_group", "cp.async.wait_group", "cp.async.cg.shared.global"}) {
    INFO(what);
    CHECK(count_of(p1, what) > 0);
    CHECK(count_of(p2, what) == 2 * count_of(p1, what));
    CHECK(count_of(pp, what) == count_of(p1, what));
  }
  ptxtest::assemble("two pipelined loops", p2, "sm_89");
  ptxtest::assemble("pipelined loop in a persistent loop", pp, "sm_89");
  ptxtest::assemble("two pipelined loops", two.ptx(90, g, b, b, b, b, c, 4096, 4096, 4096, 64, 64, 32), "sm_90a");
  ptxtest::assemble("pipelined loop in a persistent loop", persistent.ptx(90, g, b, b, c, 4096, 4096, 4096, 64, 64, 32),
                    "sm_90a");
  ptxtest::assemble("pipelined loop in a persistent loop", persistent.ptx(80, g, b, b, c, 4096, 4096, 4096, 64, 64, 32),
                    "sm_80");
}
