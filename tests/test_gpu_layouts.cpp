// tests/test_gpu_layouts.cpp - GPU layout assignment (src/passes/gpu): invariants, no needless
// convert_layout ops on the common kernels, coalescing and vector widths, power-of-two shapes.
#include <catch2/catch.hpp>

#include <tle/tle.hpp>

#include "../examples/kernels.hpp"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <tuple>

#include "backend/gpu/gpu_backend.hpp"
#include "frontend/trace.hpp"
#include "ir/ir.hpp"
#include "layout/ir_layout.hpp"
#include "layout/named_layouts.hpp"
#include "passes/gpu/gpu_passes.hpp"
#include "passes/pass.hpp"
#include "trace_util.hpp"

using namespace tle;

namespace {

using tracetest::ops_of;

/// Traces `fn` with constexpr parameters taken in order from `cx`; pointer arguments are
/// 16-byte aligned when `div16`. Runs the generic pipeline.
template <class F>
std::unique_ptr<ir::Function> trace(const char* name, F fn, std::vector<int64_t> cx, bool div16 = true) {
  return tracetest::trace(name, fn, std::move(cx), div16, /*ints_div16=*/false);
}

int count_ops(const ir::Function& f, ir::OpKind k) {
  int n = 0;
  ir::walk(f.entry(), [&](const ir::Op& op) { n += op.kind == k; });
  return n;
}

/// Runs the GPU passes and every check that must hold after them.
void assign(ir::Function& f, int num_warps = 4) {
  passes::run_gpu_pipeline(f, num_warps);
  if (std::getenv("TLE_TEST_DUMP_LAYOUTS")) std::fprintf(stderr, "%s\n", ir::print(f).c_str());
  INFO(ir::print(f));
  REQUIRE_NOTHROW(passes::verify_layouts(f, num_warps));
  REQUIRE_NOTHROW(ir::verify(f));
}

#define CHECK_NO_CONVERTS(f)                       \
  do {                                             \
    INFO(ir::print(f));                            \
    CHECK(count_ops(f, ir::OpKind::ConvertLayout) == 0); \
  } while (0)

const layout::LinearLayout& lay(const ir::Value* v) { return v->type.layout->ll; }

}  // namespace

TEST_CASE("vector add: coalesced, vectorized, no conversions", "[gpu-layout]") {
  auto f = trace("vadd", [](Ptr<float> x, Ptr<float> y, Ptr<float> out, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> mask = offs < n;
    store(out + offs, load(x + offs, mask) + load(y + offs, mask), mask);
  }, {1024});
  assign(*f);
  CHECK_NO_CONVERTS(*f);
  auto loads = ops_of(*f, ir::OpKind::Load);
  auto stores = ops_of(*f, ir::OpKind::Store);
  REQUIRE(loads.size() == 2);
  REQUIRE(stores.size() == 1);
  for (auto* op : {loads[0], loads[1], stores[0]}) {
    CHECK(op->int_attr("vec") == 4);
    CHECK(op->int_attr("mask_vec") == 1);  // n is not known to be a multiple of anything
  }
  // 1024 elements over 128 threads, 4 consecutive f32 per thread (16 bytes), repeated twice.
  const auto& l = lay(loads[0]->result());
  CHECK(l == layout::blocked({1024}, {4}, {32}, {4}, {0}));
  CHECK(l.num_regs() == 8);
  CHECK(l.num_warps() == 4);
}

TEST_CASE("axis info: minimum / maximum of multiples is a multiple (a slice's end masks whole vectors)",
          "[gpu-layout]") {
  // hi = minimum(lo + slice, n) with n and slice multiples of 16 (the launch specialization): the
  // mask offs < hi is uniform over each 4-element vector; with maximum the same; with an operand
  // not known to be a multiple (n + 1) it is not.
  auto k = [](Ptr<float> x, Ptr<float> out, Tile<int32_t> n, Tile<int32_t> slice, Constexpr<int> MODE) {
    Tile<int32_t> lo = program_id(0) * slice;
    Tile<int32_t> hi = MODE == 0 ? minimum(lo + slice, n) : MODE == 1 ? maximum(lo, n) : minimum(lo + slice, n + 1);
    Tile<int32_t> offs = lo + arange(0, 1024);
    store(out + offs, load(x + offs, offs < hi), offs < hi);
  };
  for (int mode : {0, 1, 2}) {
    INFO("mode " << mode);
    auto f = tracetest::trace("slice", k, {mode}, /*ptrs_div16=*/true, /*ints_div16=*/true);
    assign(*f);
    for (auto* op : ops_of(*f, ir::OpKind::Load)) {
      CHECK(op->int_attr("vec") == 4);
      CHECK(op->int_attr("mask_vec") == (mode == 2 ? 1 : 4));
    }
  }
}

TEST_CASE("a compaction's scattered store does not make the row's load one element per thread", "[gpu-layout]") {
  // A stream compaction (topk's filter): the row is loaded contiguously, the kept elements are
  // stored at cumsum positions (not contiguous). The load keeps its 16-byte vectors; the store
  // takes the load's layout. With only scattered accesses of a shape, the one-element layout stays.
  auto f = trace("compact", [](Ptr<bf16> x, Ptr<int32_t> out, Constexpr<int> BLOCK) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bf16> v = load(x + offs);
    Tile<bool> keep = v > 0.5f;
    Tile<int32_t> pos = cumsum(keep.to<int32_t>(), 0) - 1;
    store(out + pos, offs, keep);
  }, {2048});
  assign(*f, 8);
  auto loads = ops_of(*f, ir::OpKind::Load);
  REQUIRE(loads.size() == 1);
  CHECK(loads[0]->int_attr("vec") == 8);
  auto g = trace("scatter_only", [](Ptr<int32_t> idx, Ptr<int32_t> out, Constexpr<int> BLOCK) {
    Tile<int32_t> a = arange(0, BLOCK);
    Tile<int32_t> i = load(idx + load(idx + a * 3));
    store(out + i * 2, a);
  }, {2048});
  assign(*g, 8);
  for (auto* op : ops_of(*g, ir::OpKind::Store)) CHECK(layout::blocked({2048}, {1}, {32}, {8}, {0}) == lay(op->operands[1]));
  // A one-element tile (its layout moves along no dim) beside them: neither scattered nor
  // contiguous (the vote's check once indexed its pointer facts at dim -1; an ASan build sees it).
  auto h = trace("one_element", [](Ptr<int32_t> x, Ptr<int32_t> out) {
    Tile<int32_t> a = arange(0, 1);
    store(out + a, load(x + a) + 1);
    Tile<int32_t> b = arange(0, 256);
    store(out + load(x + b * 2), b);
  }, {});
  assign(*h, 4);
  CHECK(ops_of(*h, ir::OpKind::Load).size() == 2);
}

TEST_CASE("vector add: unaligned pointers or 8 warps", "[gpu-layout]") {
  auto k = [](Ptr<float> x, Ptr<float> out, Constexpr<int> BLOCK) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(out + offs, load(x + offs));
  };
  SECTION("not 16-byte aligned: scalar accesses, same coalesced layout") {
    auto f = trace("vcopy", k, {1024}, /*div16=*/false);
    assign(*f);
    CHECK_NO_CONVERTS(*f);
    for (auto* op : ops_of(*f, ir::OpKind::Load)) {
      CHECK(op->int_attr("vec") == 1);
      CHECK(lay(op->result()) == layout::blocked({1024}, {4}, {32}, {4}, {0}));
    }
  }
  SECTION("small tile: size_per_thread limited by numel / threads") {
    auto f = trace("vcopy", k, {256});
    assign(*f, 8);
    for (auto* op : ops_of(*f, ir::OpKind::Load)) {
      CHECK(op->int_attr("vec") == 1);
      CHECK(lay(op->result()) == layout::blocked({256}, {1}, {32}, {8}, {0}));
    }
  }
  SECTION("f16: 8 elements per 16 bytes") {
    auto f = trace("hcopy", [](Ptr<f16> x, Ptr<f16> out, Constexpr<int> BLOCK) {
      Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
      store(out + offs, load(x + offs));
    }, {2048});
    assign(*f);
    for (auto* op : ops_of(*f, ir::OpKind::Store)) CHECK(op->int_attr("vec") == 8);
  }
}

TEST_CASE("softmax and layernorm rows: no conversions", "[gpu-layout]") {
  SECTION("softmax") {
    auto f = trace("softmax", [](Ptr<float> x, Ptr<float> y, Tile<int32_t> ncols, Constexpr<int> BLOCK) {
      Tile<int64_t> row = program_id(0).to<int64_t>();
      Tile<int32_t> cols = arange(0, BLOCK);
      Tile<bool> mask = cols < ncols;
      Tile<float> v = load(x + row * ncols + cols, mask, -INFINITY);
      Tile<float> e = exp(v - max(v, 0));
      store(y + row * ncols + cols, e / sum(e, 0), mask);
    }, {4096});
    assign(*f);
    CHECK_NO_CONVERTS(*f);
    for (auto* op : ops_of(*f, ir::OpKind::Load)) CHECK(op->int_attr("vec") == 1);  // row * ncols: unknown alignment
    for (auto* op : ops_of(*f, ir::OpKind::Reduce)) CHECK(op->result()->type.is_scalar());
  }
  SECTION("layernorm") {
    auto f = trace("layernorm", [](Ptr<float> x, Ptr<float> y, Ptr<float> w, Ptr<float> b, Tile<int32_t> ncols,
                                   Tile<float> eps, Constexpr<int> BLOCK) {
      Tile<int64_t> base = program_id(0).to<int64_t>() * ncols;
      Tile<int32_t> cols = arange(0, BLOCK);
      Tile<bool> mask = cols < ncols;
      Tile<float> v = load(x + base + cols, mask);
      Tile<float> n = ncols.to<float>();
      Tile<float> mean = sum(v, 0) / n;
      Tile<float> d = where(mask, v - mean, 0.0f);
      Tile<float> rstd = rsqrt(sum(d * d, 0) / n + eps);
      store(y + base + cols, d * rstd * load(w + cols, mask) + load(b + cols, mask), mask);
    }, {4096});
    assign(*f);
    CHECK_NO_CONVERTS(*f);
    // w + cols is 16-byte aligned and contiguous: vectorized; x + base + cols is not known aligned.
    int vec4 = 0;
    for (auto* op : ops_of(*f, ir::OpKind::Load)) vec4 += op->int_attr("vec") == 4;
    CHECK(vec4 == 2);
  }
  SECTION("2-D rows with keepdims-style broadcasting") {
    auto f = trace("rows2d", [](Ptr<float> x, Ptr<float> y, Constexpr<int> R, Constexpr<int> C) {
      Tile<int32_t> r = arange(0, R), c = arange(0, C);
      Tile<int32_t> offs = expand_dims(r, 1) * C + expand_dims(c, 0);
      Tile<float> v = load(x + offs);
      Tile<float> m = expand_dims(max(v, 1), 1);
      store(y + offs, v - m);
    }, {16, 128});
    passes::GpuPassStats stats;
    const std::string traced = ir::print(*f);
    passes::run_gpu_pipeline(*f, 4, 1, false, false, true, &stats);
    INFO(ir::print(*f));
    REQUIRE_NOTHROW(passes::verify_layouts(*f, 4));
    // reduce gives slice(L) (zero register bases dropped) and broadcast asks of its operand the
    // projection of L, also without them: the row maximum needs no conversion, and holds one
    // register per row of the thread where the loaded tile holds four per row.
    CHECK_NO_CONVERTS(*f);
    const ir::Op* bc = nullptr;  // broadcast(expand_dims(reduce))
    for (auto* op : ops_of(*f, ir::OpKind::Broadcast))
      if (const ir::Op* e = op->operands[0]->def; e && e->kind == ir::OpKind::ExpandDims &&
                                                  e->operands[0]->def && e->operands[0]->def->kind == ir::OpKind::Reduce)
        bc = op;
    REQUIRE(bc);
    CHECK(lay(bc->operands[0]).num_regs() * 4 == lay(bc->result()).num_regs());
    // With the elimination off, the pointer tile (computed in a default layout) and the broadcast
    // (defaulted, then subtracted from the loaded tile) would each be converted.
    CHECK(stats.conversions == 0);
    CHECK(stats.conversions_without_elimination >= 2);
    for (auto* op : ops_of(*f, ir::OpKind::Load)) {
      CHECK(op->int_attr("vec") == 4);
      CHECK(lay(op->result()) == layout::blocked({16, 128}, {1, 4}, {1, 32}, {4, 1}, {1, 0}));
    }
  }
}

TEST_CASE("a reduction's result is stored from its slice layout: no conversion", "[gpu-layout]") {
  // out[r] = sum over the row r of x [BM, BN] (divided by n, cast), stored straight from the slice
  // layout the reduction leaves (pointers recomputed in it) instead of through a coalesced anchor,
  // a shared-memory round trip; the elimination-off count still has that conversion.
  auto k = [](Ptr<float> x, Ptr<bf16> out, Tile<int32_t> M, Tile<float> n, Constexpr<int> BM, Constexpr<int> BN,
              Constexpr<int> AXIS) {
    Tile<int32_t> rm = program_id(0) * BM + arange(0, BM), rn = arange(0, BN);
    Tile<float> t = load(x + expand_dims(rm, 1) * BN + expand_dims(rn, 0), expand_dims(rm < M, 1));
    if (AXIS == 1) store(out + rm, cast<bf16>(sum(t, 1) / n), rm < M);
    else store(out + program_id(0) * BN + rn, cast<bf16>(max(t, 0)));
  };
  for (int axis : {0, 1})
    for (int warps : {1, 4, 8}) {
      INFO("axis " << axis << " warps " << warps);
      auto f = trace("rowsum", k, {64, 128, axis});
      passes::GpuPassStats stats;
      passes::run_gpu_pipeline(*f, warps, 1, false, false, true, &stats);
      CHECK_NO_CONVERTS(*f);
      CHECK(stats.conversions_without_elimination >= 1);
      auto stores = ops_of(*f, ir::OpKind::Store);
      auto reduces = ops_of(*f, ir::OpKind::Reduce);
      REQUIRE(stores.size() == 1);
      REQUIRE(reduces.size() == 1);
      CHECK(lay(stores[0]->operands[1]) == lay(reduces[0]->result()));
    }
}

TEST_CASE("count_conversions_without_elimination: a dry run that leaves the function as it was", "[gpu-layout]") {
  // A bf16 K loop into a dot (mma.sync operands and accumulator), then a masked store.
  auto f = trace("mm", [](Ptr<bf16> a, Ptr<bf16> b, Ptr<float> c, Tile<int32_t> M, Tile<int32_t> N, Tile<int32_t> K,
                          Constexpr<int> BM, Constexpr<int> BN, Constexpr<int> BK) {
    Tile<int32_t> rm = program_id(0) * BM + arange(0, BM);
    Tile<int32_t> rn = program_id(1) * BN + arange(0, BN);
    Tile<float> acc = ex::matmul_block<bf16>(a, b, rm, rn, M, N, K, BM, BN, BK);
    store(c + expand_dims(rm, 1) * N + expand_dims(rn, 0), acc, expand_dims(rm < M, 1) & expand_dims(rn < N, 0));
  }, {64, 64, 32});
  const std::string before = ir::print(*f);
  const int without = passes::count_conversions_without_elimination(*f, 4);
  CHECK(ir::print(*f) == before);
  passes::GpuPassStats stats;
  passes::run_gpu_pipeline(*f, 4, 1, false, false, true, &stats);
  INFO(ir::print(*f));
  REQUIRE_NOTHROW(passes::verify_layouts(*f, 4));
  CHECK(stats.conversions_without_elimination == without);
  CHECK(stats.conversions == count_ops(*f, ir::OpKind::ConvertLayout));
  // a and b into the mma operand layouts, the accumulator into the store's: conversions the
  // elimination cannot remove; forward inference alone also converts the pointer and mask tiles.
  CHECK(stats.conversions == 3);
  CHECK(without > stats.conversions);
}

TEST_CASE("gpu::compile's stats: conversions with and without elimination, shared bytes, barriers", "[gpu-layout]") {
  // A transpose: the tile is loaded coalesced along dim 1 and stored coalesced along dim 0, so
  // one conversion moves it through shared memory (32 x 64 f32 = 8192 bytes) between 2 barriers.
  auto f = trace("transpose", [](Ptr<float> x, Ptr<float> y, Constexpr<int> R, Constexpr<int> C) {
    Tile<int32_t> r = arange(0, R), c = arange(0, C);
    Tile<float> v = load(x + expand_dims(r, 1) * C + expand_dims(c, 0));
    store(y + expand_dims(r, 1) + expand_dims(c, 0) * R, v * 2.0f);
  }, {32, 64});
  gpu::Target t;
  t.sm = 90;
  t.arch_specific = true;
  const gpu::Artifact art = gpu::compile(*f, t, gpu::Options{});
  INFO(ir::print(*f));
  CHECK(art.stats.conversions == count_ops(*f, ir::OpKind::ConvertLayout));
  CHECK(art.stats.conversions == 1);
  CHECK(art.stats.conversions_through_shared == 1);
  CHECK(art.stats.conversion_shared_bytes == 32 * 64 * 4);
  CHECK(art.stats.barriers == 2);
  CHECK(art.stats.conversions_without_elimination >= 2);  // also the pointer tiles, made in the default layout
}

TEST_CASE("matmul-style kernel: 2-D loads, dot in a loop, store", "[gpu-layout]") {
  auto f = trace("matmul", [](Ptr<float> a, Ptr<float> b, Ptr<float> c, Tile<int32_t> M, Tile<int32_t> N,
                              Tile<int32_t> K, Constexpr<int> BM, Constexpr<int> BN, Constexpr<int> BK) {
    Tile<int32_t> rm = program_id(0) * BM + arange(0, BM);
    Tile<int32_t> rn = program_id(1) * BN + arange(0, BN);
    Tile<float> acc = ex::matmul_block<float>(a, b, rm, rn, M, N, K, BM, BN, BK);
    store(c + expand_dims(rm, 1) * N + expand_dims(rn, 0), acc, expand_dims(rm < M, 1) & expand_dims(rn < N, 0));
  }, {64, 64, 32});
  assign(*f);
  // The accumulator keeps the store's layout through the loop: no conversion of the tile itself.
  auto dots = ops_of(*f, ir::OpKind::Dot);
  REQUIRE(dots.size() == 1);
  auto stores = ops_of(*f, ir::OpKind::Store);
  REQUIRE(stores.size() == 1);
  CHECK(lay(dots[0]->result()) == lay(stores[0]->operands[1]));
  INFO(ir::print(*f));
  for (const ir::Op* op : ops_of(*f, ir::OpKind::ConvertLayout))
    CHECK(op->operands[0]->type.dtype != DType::f32);  // only cheap index/mask values, if any
  CHECK(count_ops(*f, ir::OpKind::ConvertLayout) == 0);
  // Loads are row-major coalesced; K * rows is not known aligned, so scalar accesses.
  for (auto* op : ops_of(*f, ir::OpKind::Load)) {
    const auto& l = lay(op->result());
    CHECK(l.basis(layout::kLane, 0) == layout::LinearLayout::Basis{0, 4});  // lanes run along dim 1
    CHECK(l.basis(layout::kReg, 0) == layout::LinearLayout::Basis{0, 1});
  }
}

TEST_CASE("bf16/f16 matmul: dot on mma.sync layouts", "[gpu-layout]") {
  auto kernel = [](auto tag) {
    using T = decltype(tag);
    return [](Ptr<T> a, Ptr<T> b, Ptr<float> c, Tile<int32_t> M, Tile<int32_t> N, Tile<int32_t> K, Constexpr<int> BM,
              Constexpr<int> BN, Constexpr<int> BK) {
      Tile<int32_t> rm = program_id(0) * BM + arange(0, BM);
      Tile<int32_t> rn = program_id(1) * BN + arange(0, BN);
      Tile<float> acc = ex::matmul_block<T>(a, b, rm, rn, M, N, K, BM, BN, BK);
      store(c + expand_dims(rm, 1) * N + expand_dims(rn, 0), acc, expand_dims(rm < M, 1) & expand_dims(rn < N, 0));
    };
  };
  // (BM, BN, BK, warps) -> expected warps_per_cta (Triton's warpsPerTileV2).
  struct Case {
    int bm, bn, bk, warps, wm, wn;
  };
  for (Case cs : {Case{64, 64, 32, 4, 2, 2}, Case{128, 128, 32, 8, 2, 4}, Case{16, 64, 16, 4, 1, 4},
                  Case{64, 16, 16, 4, 4, 1}, Case{128, 32, 64, 4, 4, 1}, Case{32, 32, 16, 1, 1, 1}}) {
    for (bool is_bf16 : {true, false}) {
      INFO("BM " << cs.bm << " BN " << cs.bn << " BK " << cs.bk << " warps " << cs.warps << (is_bf16 ? " bf16" : " f16"));
      auto f = is_bf16 ? trace("mm", kernel(bf16{}), {cs.bm, cs.bn, cs.bk}) : trace("mm", kernel(f16{}), {cs.bm, cs.bn, cs.bk});
      assign(*f, cs.warps);
      INFO(ir::print(*f));
      auto dots = ops_of(*f, ir::OpKind::Dot);
      REQUIRE(dots.size() == 1);
      const ir::Op& d = *dots[0];
      const std::vector<int32_t> w = {cs.wm, cs.wn};
      const auto acc = layout::mma_v2_accumulator({cs.bm, cs.bn}, w);
      CHECK(lay(d.result()) == acc);
      CHECK(lay(d.operands[2]) == acc);
      CHECK(lay(d.operands[0]) == layout::mma_v2_operand(0, {cs.bm, cs.bk}, w, 16));
      CHECK(lay(d.operands[1]) == layout::mma_v2_operand(1, {cs.bk, cs.bn}, w, 16));
      // a and b are converted from the coalesced loads right before the dot.
      for (int i : {0, 1}) {
        REQUIRE(d.operands[i]->def != nullptr);
        CHECK(d.operands[i]->def->kind == ir::OpKind::ConvertLayout);
        CHECK(d.operands[i]->def->operands[0]->def->kind == ir::OpKind::Load);
      }
      // The loop carries the accumulator in the mma layout, from the zeros to the loop result;
      // the store after the loop converts it to its coalesced layout.
      auto fors = ops_of(*f, ir::OpKind::For);
      REQUIRE(fors.size() == 1);
      const ir::Op& loop = *fors[0];
      REQUIRE(loop.results.size() == 1);
      CHECK(lay(loop.region().body().arg(1)) == acc);
      CHECK(lay(loop.operands[3]) == acc);
      CHECK(loop.operands[3]->def->kind == ir::OpKind::Constant);
      CHECK(lay(loop.result(0)) == acc);
      auto stores = ops_of(*f, ir::OpKind::Store);
      REQUIRE(stores.size() == 1);
      const ir::Value* sv = stores[0]->operands[1];
      CHECK(sv->def->kind == ir::OpKind::ConvertLayout);
      CHECK(sv->def->operands[0] == loop.result(0));
      CHECK(lay(sv) == lay(stores[0]->operands[0]));
      CHECK(count_ops(*f, ir::OpKind::ConvertLayout) == 3);
    }
  }
}

TEST_CASE("dots that do not qualify for mma.sync keep the accumulator's layout", "[gpu-layout]") {
  auto one_dot = [](auto tag) {
    using T = decltype(tag);
    using Acc = dot_acc_t<T>;
    return [](Ptr<T> a, Ptr<T> b, Ptr<Acc> c, Constexpr<int> BM, Constexpr<int> BN, Constexpr<int> BK) {
      Tile<int32_t> rm = arange(0, BM), rn = arange(0, BN), rk = arange(0, BK);
      Tile<T> ta = load(a + expand_dims(rm, 1) * BK + expand_dims(rk, 0));
      Tile<T> tb = load(b + expand_dims(rk, 1) * BN + expand_dims(rn, 0));
      store(c + expand_dims(rm, 1) * BN + expand_dims(rn, 0), dot(ta, tb, zeros<Acc>({BM, BN})));
    };
  };
  auto check_plain = [](ir::Function& f, int warps) {
    assign(f, warps);
    INFO(ir::print(f));
    auto dots = ops_of(f, ir::OpKind::Dot);
    REQUIRE(dots.size() == 1);
    auto stores = ops_of(f, ir::OpKind::Store);
    REQUIRE(stores.size() == 1);
    CHECK(lay(dots[0]->result()) == lay(stores[0]->operands[1]));
    CHECK(count_ops(f, ir::OpKind::ConvertLayout) == 0);
  };
  SECTION("f32 inputs") {
    auto f = trace("mm", one_dot(float{}), {64, 64, 32});
    check_plain(*f, 4);
  }
  SECTION("i8 inputs") {
    auto f = trace("mm", one_dot(int8_t{}), {64, 64, 32});
    check_plain(*f, 4);
  }
  SECTION("bf16 with K = 8 (no k16 step)") {
    auto f = trace("mm", one_dot(bf16{}), {64, 64, 8});
    check_plain(*f, 4);
  }
  SECTION("bf16 16x8 with 4 warps (fewer 16x8 tiles than warps)") {
    auto f = trace("mm", one_dot(bf16{}), {16, 8, 16});
    check_plain(*f, 4);
  }
  SECTION("bf16 with 2 warps qualifies: result and zeros take the mma layout") {
    auto f = trace("mm", one_dot(bf16{}), {32, 16, 16});
    assign(*f, 2);
    auto dots = ops_of(*f, ir::OpKind::Dot);
    REQUIRE(dots.size() == 1);
    CHECK(lay(dots[0]->result()) == layout::mma_v2_accumulator({32, 16}, {2, 1}));
    CHECK(dots[0]->operands[2]->def->kind == ir::OpKind::Constant);
  }
}

TEST_CASE("loop-carried tile and if", "[gpu-layout]") {
  SECTION("for with a carried accumulator") {
    auto f = trace("rowsum", [](Ptr<float> x, Ptr<float> y, Tile<int32_t> n, Constexpr<int> BLOCK) {
      Tile<int32_t> offs = arange(0, BLOCK);
      Tile<float> acc = zeros<float>({BLOCK});
      for (auto i : range(0, n)) acc = acc + load(x + i * BLOCK + offs);
      store(y + offs, acc);
    }, {512});
    assign(*f);
    CHECK_NO_CONVERTS(*f);
    auto fors = ops_of(*f, ir::OpKind::For);
    REQUIRE(fors.size() == 1);
    // i * BLOCK keeps 16-byte alignment: BLOCK * 4 bytes
    for (auto* op : ops_of(*f, ir::OpKind::Load)) CHECK(op->int_attr("vec") == 4);
  }
  SECTION("carried tile that needs a conversion at the yield") {
    auto f = trace("transposed_acc", [](Ptr<float> x, Ptr<float> y, Tile<int32_t> n, Constexpr<int> B) {
      Tile<int32_t> r = arange(0, B);
      Tile<float> acc = zeros<float>({B, B});
      for (auto i : range(0, n)) {
        // column-major load: contiguous along dim 0
        Tile<float> t = load(x + i * B * B + expand_dims(r, 1) + expand_dims(r, 0) * B);
        acc = acc + t;
      }
      store(y + expand_dims(r, 1) * B + expand_dims(r, 0), acc);
    }, {32});
    assign(*f);  // invariants hold whatever was converted
  }
  SECTION("if with tile results") {
    auto f = trace("ifk", [](Ptr<float> x, Ptr<float> y, Tile<int32_t> flag, Constexpr<int> BLOCK) {
      Tile<int32_t> offs = arange(0, BLOCK);
      Tile<float> v = load(x + offs);
      if_(flag > 0, [&] { v = v * 2.0f; }, [&] { v = exp(v); });
      store(y + offs, v);
    }, {256});
    assign(*f);
    CHECK_NO_CONVERTS(*f);
    auto ifs = ops_of(*f, ir::OpKind::If);
    REQUIRE(ifs.size() == 1);
    REQUIRE(ifs[0]->results.size() == 1);
    CHECK(ifs[0]->result()->type.layout);
  }
}

TEST_CASE("shape ops, reductions, scans, histogram, atomics keep the invariants", "[gpu-layout]") {
  SECTION("transpose copy") {
    auto f = trace("tcopy", [](Ptr<float> x, Ptr<float> y, Constexpr<int> B) {
      Tile<int32_t> r = arange(0, B);
      Tile<float> t = load(x + expand_dims(r, 1) * B + expand_dims(r, 0));
      store(y + expand_dims(r, 1) * B + expand_dims(r, 0), trans(t));
    }, {64});
    assign(*f);
  }
  SECTION("transposing store: load and store each stay coalesced") {
    // The load is contiguous along dim 1, the store along dim 0: their anchors must not be merged.
    auto f = trace("tstore", [](Ptr<float> x, Ptr<float> y, Constexpr<int> B) {
      Tile<int32_t> r = arange(0, B);
      Tile<float> t = load(x + expand_dims(r, 1) * B + expand_dims(r, 0));
      store(y + expand_dims(r, 0) * B + expand_dims(r, 1), t);
    }, {64});
    assign(*f);
    for (auto* op : ops_of(*f, ir::OpKind::Load)) CHECK(op->int_attr("vec") == 4);
    for (auto* op : ops_of(*f, ir::OpKind::Store)) CHECK(op->int_attr("vec") == 4);
    CHECK(ops_of(*f, ir::OpKind::ConvertLayout).size() == 1);
  }
  SECTION("reshape, 2-D reduce, cumsum") {
    auto f = trace("misc", [](Ptr<float> x, Ptr<float> y, Ptr<float> z, Constexpr<int> N) {
      Tile<float> v = load(x + arange(0, N));
      Tile<float> m = reshape(v, {N / 16, 16});
      Tile<float> s = sum(m, 1);
      store(y + arange(0, N / 16), s);
      store(z + arange(0, N), cumsum(v, 0));
    }, {1024});
    assign(*f);
  }
  SECTION("histogram and atomics") {
    auto f = trace("hist", [](Ptr<int32_t> ids, Ptr<int32_t> counts, Tile<int32_t> n, Constexpr<int> N) {
      Tile<int32_t> o = arange(0, N);
      Tile<bool> m = o < n;
      Tile<int32_t> x = load(ids + o, m);
      atomic_add(counts + arange(0, 64), histogram(x, 64, m));
    }, {4096});
    assign(*f);
    for (auto* op : ops_of(*f, ir::OpKind::AtomicRMW)) CHECK(op->has_attr("vec"));
  }
  SECTION("scalar memory ops keep scalars") {
    auto f = trace("scalar", [](Ptr<int32_t> count, Ptr<float> x) {
      atomic_add(count, 1);
      store(x, load(x) + 1.0f);
    }, {});
    assign(*f);
    for (auto* op : ops_of(*f, ir::OpKind::Load)) {
      CHECK_FALSE(op->result()->type.layout);
      CHECK(op->int_attr("vec") == 1);
    }
  }
}

TEST_CASE("non-power-of-two tiles are padded before the layouts (pad_shapes), never seen by assign_layouts",
          "[gpu-layout]") {
  auto f = trace("np2", [](Ptr<float> x, Constexpr<int> N) {
    Tile<int32_t> o = arange(0, N);
    store(x + o, o.to<float>());
  }, {100});
  auto g = trace("np2", [](Ptr<float> x, Constexpr<int> N) {
    Tile<int32_t> o = arange(0, N);
    store(x + o, o.to<float>());
  }, {100});
  // Called alone on unpadded IR, assign_layouts reports the broken precondition.
  CHECK_THROWS_AS(passes::assign_layouts(*g, 4), InternalError);
  assign(*f);
  auto stores = ops_of(*f, ir::OpKind::Store);
  REQUIRE(stores.size() == 1);
  CHECK(stores[0]->operands[0]->type.shape == ir::Shape{128});
  CHECK(stores[0]->operands.size() == 3);  // the real-element mask
}

TEST_CASE("verify_layouts catches a broken relation", "[gpu-layout]") {
  auto f = trace("vcopy", [](Ptr<float> x, Ptr<float> out, Constexpr<int> BLOCK) {
    Tile<int32_t> offs = arange(0, BLOCK);
    store(out + offs, load(x + offs) * 2.0f);
  }, {1024});
  passes::assign_layouts(*f, 4);
  // Give the multiplication's result another layout than its operands.
  for (auto* op : ops_of(*f, ir::OpKind::Binary))
    const_cast<ir::Op*>(op)->result()->type.layout = ir::make_layout(layout::blocked({1024}, {1}, {32}, {4}, {0}));
  CHECK_THROWS_AS(passes::verify_layouts(*f, 4), InternalError);
}
