// tests/test_set_layout.cpp - gpu::set_layout with the tensor-core layouts (issue #13 item 5:
// gpu::MmaLayout versions 2 and 3, gpu::DotOperandLayout, gpu::SliceLayout; docs/struct.md,
// "Explicit layouts"): the layout assign_layouts gives the value and where conversions land
// ([struct-pass][layout]), user errors at the call's line ([errors][struct]), PTX assembled by
// ptxas for sm_90a and sm_80 ([ptx][struct]), values unchanged on ragged shapes on the CPU
// backend ([ops][struct]) and on the GPU ([.gpu][struct]). Blocked layouts: tests/test_struct.cpp.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "error_util.hpp"
#include "layout/ir_layout.hpp"
#include "layout/named_layouts.hpp"
#include "ops_util.hpp"
#include "passes/pass.hpp"
#include "ptxas_util.hpp"
#include "trace_util.hpp"

using namespace tle;
using namespace opstest;

namespace {

int acc_line = 0;  // gemm_kernel's line of the accumulator's set_layout (set when traced)

template <class T> T* fake(uintptr_t a = 0x10000) { return reinterpret_cast<T*>(a); }
template <class T> std::vector<T> all(const Buf<T>& b) { return std::vector<T>(b.begin(), b.end()); }

void passes_sm80(ir::Function& f) { passes::run_gpu_pipeline(f, 4, 3, false, false); }

/// c = a @ b (a [M, K], b [K, N] bf16, row-major) and rows = c's row sums. KIND 0: no layouts;
/// 1: the accumulator in MmaLayout{2, [WM, WN]}, the row sums in its slice; 2: as 1 with a and b
/// in its DotOperandLayouts; 3: MmaLayout version 3 (wgmma); 4: as 3 with a in its register
/// DotOperandLayout; 5: version 3 with instr_n 32 (repeated along N); 6: as 2, the store's
/// pointers in the mma layout too.
auto gemm_kernel = [](Ptr<bf16> a, Ptr<bf16> b, Ptr<float> c, Ptr<float> rows, Constexpr<int> M, Constexpr<int> N,
                      Constexpr<int> K, Constexpr<int> KIND, Constexpr<int> WM, Constexpr<int> WN) {
  Tile<int32_t> rm = expand_dims(arange(0, M), 1), ck = expand_dims(arange(0, K), 0);
  Tile<int32_t> rk = expand_dims(arange(0, K), 1), cn = expand_dims(arange(0, N), 0);
  const bool v3 = KIND == 3 || KIND == 4 || KIND == 5;
  const gpu::MmaLayout mma{v3 ? 3 : 2, {WM, WN}, KIND == 5 ? 32 : 0};
  Tile<bf16> ta = load(a + rm * K + ck), tb = load(b + rk * N + cn);
  if (KIND == 2 || KIND == 4 || KIND == 6) ta = gpu::set_layout(ta, gpu::DotOperandLayout{0, mma});
  if (KIND == 2 || KIND == 6) tb = gpu::set_layout(tb, gpu::DotOperandLayout{1, mma, 2});
  Tile<float> acc = zeros<float>({M, N});
  if (KIND != 0) acc_line = __LINE__, acc = gpu::set_layout(acc, mma);
  Tile<float> d = dot(ta, tb, acc);
  Ptr<float> cp = c + rm * N + cn;
  if (KIND == 6) cp = gpu::set_layout(cp, mma);
  store(cp, d);
  Tile<float> s = sum(d, 1);
  if (KIND != 0) s = gpu::set_layout(s, gpu::SliceLayout{1, mma});
  store(rows + arange(0, M), s);
};

/// x [M, N] f32 in a blocked layout; its row sums in the layout's slice (a reduction), plus a
/// column vector y [M] pinned to the same slice and broadcast back (expand_dims): out = x + y,
/// sums = row sums of x.
auto slice_kernel = [](Ptr<float> x, Ptr<float> y, Ptr<float> out, Ptr<float> sums, Constexpr<int> M,
                       Constexpr<int> N) {
  const gpu::BlockedLayout bl{{1, 4}, {4, 8}, {4, 1}, {1, 0}};
  Tile<int32_t> r = expand_dims(arange(0, M), 1), c = expand_dims(arange(0, N), 0);
  Tile<float> v = gpu::set_layout(load(x + r * N + c), bl);
  Tile<float> col = gpu::set_layout(load(y + arange(0, M)), gpu::SliceLayout{1, bl});
  store(out + r * N + c, v + expand_dims(col, 1));
  store(sums + arange(0, M), gpu::set_layout(sum(v, 1), gpu::SliceLayout{1, bl}));
};

void gemm_reference(const Buf<bf16>& a, const Buf<bf16>& b, int M, int N, int K, std::vector<float>& c,
                    std::vector<float>& rows) {
  c.assign(size_t(M) * N, 0.0f);
  rows.assign(size_t(M), 0.0f);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float s = 0;
      for (int k = 0; k < K; ++k) s += float(a[size_t(i) * K + k]) * float(b[size_t(k) * N + j]);
      c[size_t(i) * N + j] = s;
      rows[size_t(i)] += s;
    }
}

/// Small integers in bf16: every product and sum is exact in f32, in any order.
Buf<bf16> small_ints(size_t n, unsigned seed) {
  Buf<float> f = random_buf<float>(n, seed, -4, 4);
  Buf<bf16> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = bf16(float(int(f[i])));
  return out;
}

const ir::Op* only(const ir::Function& f, ir::OpKind k, size_t i) {
  auto ops = tracetest::ops_of(f, k);
  REQUIRE(ops.size() > i);
  return ops[i];
}
const layout::LinearLayout& ll_of(const ir::Value* v) {
  REQUIRE(v->type.layout);
  return v->type.layout->ll;
}
bool is_conversion(const ir::Value* v) { return v->def && v->def->kind == ir::OpKind::ConvertLayout; }

}  // namespace

// ============================================================================ passes

TEST_CASE("set_layout passes: mma.sync accumulator, operands and slice are kept, the dot agrees", "[struct-pass][layout]") {
  // 4 warps on a 64x64x64 bf16 dot: the compiler's own mma.sync plan is warps [2, 2], so with the
  // same layouts asked for nothing is converted around the dot or the reduction.
  auto f = tracetest::trace_div16("setl_mma2", [](Ptr<bf16> a, Ptr<bf16> b, Ptr<float> c, Ptr<float> rows) {
    Tile<int32_t> r = expand_dims(arange(0, 64), 1), k = expand_dims(arange(0, 64), 0);
    const gpu::MmaLayout mma{2, {2, 2}};
    Tile<bf16> ta = gpu::set_layout(load(a + r * 64 + k), gpu::DotOperandLayout{0, mma});
    Tile<bf16> tb = gpu::set_layout(load(b + r * 64 + k), gpu::DotOperandLayout{1, mma});
    Tile<float> d = dot(ta, tb, gpu::set_layout(zeros<float>({64, 64}), mma));
    store(gpu::set_layout(c + r * 64 + k, mma), d);
    store(rows + arange(0, 64), gpu::set_layout(sum(d, 1), gpu::SliceLayout{1, mma}));
  });
  passes_sm80(*f);
  const auto acc = layout::mma_v2_accumulator({64, 64}, {2, 2});
  auto sets = tracetest::ops_of(*f, ir::OpKind::SetLayout);
  REQUIRE(sets.size() == 5);
  CHECK(ll_of(sets[0]->result()) == layout::mma_v2_operand(0, {64, 64}, {2, 2}, 16));
  CHECK(ll_of(sets[1]->result()) == layout::mma_v2_operand(1, {64, 64}, {2, 2}, 16));
  CHECK(ll_of(sets[2]->result()) == acc);
  CHECK(ll_of(sets[3]->result()) == acc);  // the store's pointers
  CHECK(ll_of(sets[4]->result()) == layout::slice(acc, 1));
  // the loads read in the operand layouts (no conversion between a load and its anchor)
  CHECK(sets[0]->operands[0]->def->kind == ir::OpKind::Load);
  CHECK(sets[1]->operands[0]->def->kind == ir::OpKind::Load);
  const ir::Op* dt = only(*f, ir::OpKind::Dot, 0);
  for (unsigned i = 0; i < 3; ++i) CHECK(dt->operands[i]->def->kind == ir::OpKind::SetLayout);
  CHECK(ll_of(dt->result()) == acc);
  CHECK(sets[4]->operands[0]->def->kind == ir::OpKind::Reduce);  // the sum comes in the slice
  const ir::Op* st = only(*f, ir::OpKind::Store, 0);
  CHECK(ll_of(st->operands[1]) == acc);  // the store of d writes in the mma layout
  // the one conversion: the reduced row sums into the coalesced layout of their store's pointers
  // (a set_layout on a value, not on the pointers, leaves the store its own access layout)
  auto cvs = tracetest::ops_of(*f, ir::OpKind::ConvertLayout);
  REQUIRE(cvs.size() == 1);
  CHECK(cvs[0]->operands[0] == sets[4]->result());

  // Other warps than the plan's: the accumulator keeps [4, 1], the dot converts it to its own.
  auto g = tracetest::trace_div16("setl_mma2_other", [](Ptr<bf16> a, Ptr<float> c) {
    Tile<int32_t> r = expand_dims(arange(0, 64), 1), k = expand_dims(arange(0, 64), 0);
    Tile<bf16> t = load(a + r * 64 + k);
    store(c + r * 64 + k, dot(t, t, gpu::set_layout(zeros<float>({64, 64}), gpu::MmaLayout{2, {4, 1}})));
  });
  passes_sm80(*g);
  CHECK(ll_of(only(*g, ir::OpKind::SetLayout, 0)->result()) == layout::mma_v2_accumulator({64, 64}, {4, 1}));
  const ir::Op* gd = only(*g, ir::OpKind::Dot, 0);
  CHECK(is_conversion(gd->operands[2]));
  CHECK(ll_of(gd->operands[2]) == layout::mma_v2_accumulator({64, 64}, {2, 2}));
}

TEST_CASE("set_layout passes: wgmma accumulator, register A and slice on sm_90a", "[struct-pass][layout]") {
  auto f = tracetest::trace_div16("setl_mma3", [](Ptr<bf16> a, Ptr<bf16> b, Ptr<float> c, Ptr<float> rows) {
    Tile<int32_t> r = expand_dims(arange(0, 64), 1), k = expand_dims(arange(0, 64), 0);
    const gpu::MmaLayout mma{3, {4, 1}};
    Tile<bf16> ta = gpu::set_layout(load(a + r * 64 + k), gpu::DotOperandLayout{0, mma});
    Tile<float> d = dot(ta, load(b + r * 64 + k), gpu::set_layout(zeros<float>({64, 64}), mma));
    store(c + r * 64 + k, d);
    store(rows + arange(0, 64), gpu::set_layout(sum(d, 1), gpu::SliceLayout{1, mma}));
  });
  tracetest::gpu_passes_sm90(*f);
  const auto acc = layout::wgmma_accumulator({64, 64}, {1, 1});
  auto sets = tracetest::ops_of(*f, ir::OpKind::SetLayout);
  REQUIRE(sets.size() == 3);
  CHECK(ll_of(sets[0]->result()) == layout::mma_v2_operand(0, {64, 64}, {4, 1}, 16));
  CHECK(ll_of(sets[1]->result()) == acc);
  CHECK(ll_of(sets[2]->result()) == layout::slice(acc, 1));
  const ir::Op* dt = only(*f, ir::OpKind::Dot, 0);
  CHECK(dt->operands[0]->def->kind == ir::OpKind::SetLayout);  // wgmma reads A from these registers
  CHECK(dt->operands[2]->def->kind == ir::OpKind::SetLayout);
  CHECK(ll_of(dt->result()) == acc);
  CHECK(sets[2]->operands[0]->def->kind == ir::OpKind::Reduce);

  // instr_n 16 at 8 warps ([4, 2]: two warpgroups along N): each warpgroup's [64, 16] tile, the
  // [64, 32] CTA tile repeated along N in registers (col + 32 last) - not the layout the dot
  // computes in (instr_n 0: a warpgroup has 32 whole columns), so the dot converts the accumulator.
  auto g = tracetest::trace_div16("setl_mma3_n16", [](Ptr<bf16> a, Ptr<float> c) {
    Tile<int32_t> r = expand_dims(arange(0, 64), 1), k = expand_dims(arange(0, 64), 0);
    Tile<bf16> t = load(a + r * 64 + k);
    store(c + r * 64 + k, dot(t, t, gpu::set_layout(zeros<float>({64, 64}), gpu::MmaLayout{3, {4, 2}, 16})));
  });
  passes::run_gpu_pipeline(*g, 8, 3, true, true);
  const auto& l = ll_of(only(*g, ir::OpKind::SetLayout, 0)->result());
  using B = std::vector<std::vector<int32_t>>;
  CHECK(l.bases("reg") == B{{0, 1}, {8, 0}, {0, 8}, {0, 32}});
  CHECK(l.bases("lane") == B{{0, 2}, {0, 4}, {1, 0}, {2, 0}, {4, 0}});
  CHECK(l.bases("warp") == B{{16, 0}, {32, 0}, {0, 16}});
  const ir::Op* gd = only(*g, ir::OpKind::Dot, 0);
  CHECK(is_conversion(gd->operands[2]));
  CHECK(ll_of(gd->result()) == layout::wgmma_accumulator({64, 64}, {1, 2}));
  // with instr_n 0 the same warps are exactly the dot's layout: nothing to convert
  auto h = tracetest::trace_div16("setl_mma3_n0", [](Ptr<bf16> a, Ptr<float> c) {
    Tile<int32_t> r = expand_dims(arange(0, 64), 1), k = expand_dims(arange(0, 64), 0);
    Tile<bf16> t = load(a + r * 64 + k);
    store(c + r * 64 + k, dot(t, t, gpu::set_layout(zeros<float>({64, 64}), gpu::MmaLayout{3, {4, 2}})));
  });
  passes::run_gpu_pipeline(*h, 8, 3, true, true);
  CHECK(only(*h, ir::OpKind::Dot, 0)->operands[2]->def->kind == ir::OpKind::SetLayout);
}

TEST_CASE("set_layout passes: a blocked layout's slice through a reduction and an expand_dims", "[struct-pass][layout]") {
  auto f = tracetest::trace_div16("setl_slice", [](Ptr<float> x, Ptr<float> y, Ptr<float> out, Ptr<float> sums) {
    const gpu::BlockedLayout bl{{1, 4}, {4, 8}, {4, 1}, {1, 0}};
    Tile<int32_t> r = expand_dims(arange(0, 64), 1), c = expand_dims(arange(0, 64), 0);
    Tile<float> v = gpu::set_layout(load(x + r * 64 + c), bl);
    Tile<float> col = gpu::set_layout(load(y + arange(0, 64)), gpu::SliceLayout{1, bl});
    store(out + r * 64 + c, v + expand_dims(col, 1));
    store(sums + arange(0, 64), gpu::set_layout(sum(v, 1), gpu::SliceLayout{1, bl}));
  });
  tracetest::gpu_passes_sm90(*f);
  const auto parent = layout::blocked({64, 64}, {1, 4}, {4, 8}, {4, 1}, {1, 0});
  auto sets = tracetest::ops_of(*f, ir::OpKind::SetLayout);
  REQUIRE(sets.size() == 3);
  CHECK(ll_of(sets[1]->result()) == layout::slice(parent, 1));
  CHECK(ll_of(sets[2]->result()) == layout::slice(parent, 1));
  CHECK(sets[1]->operands[0]->def->kind == ir::OpKind::Load);  // y is read in the slice layout
  CHECK(sets[2]->operands[0]->def->kind == ir::OpKind::Reduce);
  int expanded = 0;  // y's slice is broadcast back along dim 1 as it is, without a conversion
  for (const ir::Op* ed : tracetest::ops_of(*f, ir::OpKind::ExpandDims)) expanded += ed->operands[0] == sets[1]->result();
  CHECK(expanded == 1);
  for (const ir::Op* cv : tracetest::ops_of(*f, ir::OpKind::ConvertLayout))  // y's slice is never converted
    CHECK(cv->operands[0] != sets[1]->result());
}

// ============================================================================ errors

namespace {
int line = 0;
std::vector<float> fbuf(4096, 1.0f);
std::vector<bf16> hbuf(4096, bf16(1.0f));
template <class F> void expect_error(F&& f, const std::vector<std::string>& phrases) {
  errtest::expect_user_error(f, phrases, "test_set_layout.cpp", line);
}
}  // namespace

TEST_CASE("errors: set_layout with mma, dot operand and slice layouts", "[errors][struct]") {
  // checked when traced, on every backend
  auto slice_dim = jit("setl_err_sdim", [](Ptr<float> x) {
    Tile<float> v = load(x + arange(0, 64));
    line = __LINE__; store(x + arange(0, 64), gpu::set_layout(v, gpu::SliceLayout{2, gpu::BlockedLayout{{1, 1}, {1, 32}, {4, 1}, {1, 0}}}));
  });
  expect_error([&] { slice_dim(Grid(1), fbuf.data()); }, {"dim 2 is out of range for a parent of rank 2", "from 0 to 1"});
  auto slice_rank = jit("setl_err_srank", [](Ptr<float> x) {
    Tile<float> v = load(x + arange(0, 64));
    line = __LINE__; store(x + arange(0, 64), gpu::set_layout(v, gpu::SliceLayout{0, gpu::BlockedLayout{{1}, {32}, {4}, {0}}}));
  });
  expect_error([&] { slice_rank(Grid(1), fbuf.data()); },
               {"SliceLayout of a BlockedLayout", "size_per_thread has 1 entries for a parent (the tile's rank + 1) of rank 2"});
  auto mma_rank = jit("setl_err_mrank", [](Ptr<float> x) {
    Tile<float> v = load(x + arange(0, 64));
    line = __LINE__; store(x + arange(0, 64), gpu::set_layout(v, gpu::MmaLayout{2, {2, 2}}));
  });
  expect_error([&] { mma_rank(Grid(1), fbuf.data()); }, {"an mma layout has rank 2", "SliceLayout"});
  auto version = jit("setl_err_version", [](Ptr<float> x) {
    Tile<float> v = zeros<float>({16, 16});
    line = __LINE__; v = gpu::set_layout(v, gpu::MmaLayout{4, {2, 2}});
    store(x, sum(sum(v, 1), 0));
  });
  expect_error([&] { version(Grid(1), fbuf.data()); }, {"MmaLayout version 4 does not exist", "use 2"});
  auto wm = jit("setl_err_wm", [](Ptr<float> x) {
    Tile<float> v = zeros<float>({64, 64});
    line = __LINE__; v = gpu::set_layout(v, gpu::MmaLayout{3, {2, 2}});
    store(x, sum(sum(v, 1), 0));
  });
  expect_error([&] { wm(Grid(1), fbuf.data()); }, {"wm must be a multiple of 4", "e.g. [4, 1]"});
  auto b3 = jit("setl_err_b3", [](Ptr<bf16> x) {
    Tile<bf16> v = load(x + expand_dims(arange(0, 64), 1) * 64 + expand_dims(arange(0, 64), 0));
    line = __LINE__; v = gpu::set_layout(v, gpu::DotOperandLayout{1, gpu::MmaLayout{3, {4, 1}}});
    store(x + expand_dims(arange(0, 64), 1) * 64 + expand_dims(arange(0, 64), 0), v);
  });
  expect_error([&] { b3(Grid(1), hbuf.data()); }, {"reads its B operand from shared memory", "version 2 parent"});
  auto kw = jit("setl_err_kw", [](Ptr<bf16> x) {
    Tile<bf16> v = load(x + expand_dims(arange(0, 64), 1) * 64 + expand_dims(arange(0, 64), 0));
    line = __LINE__; v = gpu::set_layout(v, gpu::DotOperandLayout{0, gpu::MmaLayout{2, {2, 2}}, 3});
    store(x + expand_dims(arange(0, 64), 1) * 64 + expand_dims(arange(0, 64), 0), v);
  });
  expect_error([&] { kw(Grid(1), hbuf.data()); }, {"k_width 3 must be 1 (32-bit elements), 2 (16-bit) or 4 (8-bit)"});

  // checked when compiled for the GPU, at the call's line
  // (the accumulator's set_layout is the first one of these kinds, where the pass stops)
  auto gemm = jit("setl_err_gemm", gemm_kernel);
  auto expect_gemm_error = [&](int sm, int warps, int M, int N, int K, int kind, int wm_, int wn_,
                               const std::vector<std::string>& phrases) {
    acc_line = 0;
    errtest::expect_user_error(
        [&] {
          (void)gemm.ptx(sm, warps, fake<bf16>(), fake<bf16>(), fake<float>(), fake<float>(), M, N, K, kind, wm_, wn_);
        },
        phrases, "test_set_layout.cpp", acc_line);
  };
  expect_gemm_error(80, 4, 64, 64, 64, 1, 2, 1,
                    {"warps_per_cta [2, 1] spreads the tile over 2 warps, but the kernel is compiled for 4"});
  expect_gemm_error(80, 4, 64, 64, 64, 3, 4, 1, {"only sm_90a has", "use version 2"});
  expect_gemm_error(90, 8, 64, 64, 64, 3, 8, 1, {"needs M to be a multiple of 128"});
  expect_gemm_error(90, 4, 64, 16, 64, 5, 4, 1, {"needs N to be a multiple of 32"});
  // ... and at the user's own line: an accumulator tile too small for mma.sync
  auto small = jit("setl_err_small", [](Ptr<float> x) {
    Tile<float> v = load(x + expand_dims(arange(0, 8), 1) * 64 + expand_dims(arange(0, 64), 0));
    line = __LINE__; v = gpu::set_layout(v, gpu::MmaLayout{2, {2, 2}});
    store(x + expand_dims(arange(0, 8), 1) * 64 + expand_dims(arange(0, 64), 0), v);
  });
  expect_error([&] { (void)small.ptx(80, 4, fake<float>()); },
               {"the tile [8, 64] (padded to powers of two) cannot be tiled", "needs M >= 16 and N >= 8"});
  auto small_op = jit("setl_err_smallop", [](Ptr<float> x) {
    Tile<float> v = load(x + expand_dims(arange(0, 16), 1) * 4 + expand_dims(arange(0, 4), 0));
    line = __LINE__; v = gpu::set_layout(v, gpu::DotOperandLayout{0, gpu::MmaLayout{2, {4, 1}}});
    store(x + expand_dims(arange(0, 16), 1) * 4 + expand_dims(arange(0, 4), 0), v);
  });
  expect_error([&] { (void)small_op.ptx(80, 4, fake<float>()); }, {"needs at least [16, 8]", "m16n8k8 A fragment"});
  auto v3_80 = jit("setl_err_v3", [](Ptr<float> x) {
    Tile<float> v = load(x + arange(0, 64));
    line = __LINE__; v = gpu::set_layout(v, gpu::SliceLayout{0, gpu::MmaLayout{3, {4, 1}}});
    store(x + arange(0, 64), v);
  });
  expect_error([&] { (void)v3_80.ptx(80, 4, fake<float>()); }, {"SliceLayout of a MmaLayout", "only sm_90a has"});
  CHECK_NOTHROW(v3_80.ptx(90, 4, fake<float>()));
}

// ============================================================================ PTX

TEST_CASE("ptx: set_layout with mma, dot operand and slice layouts assembles", "[ptx][struct]") {
  auto k = jit("setl_ptx_gemm", gemm_kernel);
  struct Case {
    int sm, kind, wm, wn, M, N, K;
  };
  for (Case c : {Case{90, 1, 2, 2, 64, 64, 32}, Case{90, 2, 2, 2, 64, 64, 32}, Case{90, 3, 4, 1, 64, 64, 32},
                 Case{90, 4, 4, 1, 64, 64, 32}, Case{90, 5, 4, 1, 64, 128, 32}, Case{90, 6, 1, 4, 50, 40, 24},
                 Case{80, 1, 2, 2, 64, 64, 32}, Case{80, 2, 4, 1, 64, 64, 32}, Case{80, 6, 2, 2, 17, 33, 20}}) {
    const std::string arch = c.sm == 90 ? "sm_90a" : "sm_80";
    INFO(arch << " kind " << c.kind << " warps [" << c.wm << ", " << c.wn << "] " << c.M << "x" << c.N << "x" << c.K);
    const std::string ptx =
        k.ptx(c.sm, 4, fake<bf16>(), fake<bf16>(), fake<float>(), fake<float>(), c.M, c.N, c.K, c.kind, c.wm, c.wn);
    if (c.kind >= 3 && c.kind <= 5) CHECK(ptx.find("wgmma.mma_async") != std::string::npos);
    if (c.sm == 80) CHECK(ptx.find("mma.sync.aligned.m16n8k16") != std::string::npos);
    ptxtest::assemble("gemm with set_layout", ptx, arch);
  }
  auto s = jit("setl_ptx_slice", slice_kernel);
  for (int sm : {90, 80}) {
    const std::string ptx = s.ptx(sm, 4, fake<float>(), fake<float>(), fake<float>(), fake<float>(), 33, 70);
    ptxtest::assemble("slice of a blocked layout", ptx, sm == 90 ? "sm_90a" : "sm_80");
  }
}

// ============================================================================ values

TEST_CASE("ops: set_layout with mma, dot operand and slice layouts keeps the values on ragged shapes",
          "[ops][struct]") {
  auto k = jit("setl_ops_gemm", gemm_kernel);
  struct Case {
    int kind, wm, wn, M, N, K;
  };
  for (Case c : {Case{0, 2, 2, 17, 33, 20}, Case{1, 2, 2, 17, 33, 20}, Case{2, 2, 2, 17, 33, 20},
                 Case{3, 4, 1, 50, 40, 24}, Case{4, 4, 1, 64, 64, 32}, Case{5, 4, 1, 33, 100, 16},
                 Case{6, 1, 4, 3, 9, 5}}) {
    INFO("kind " << c.kind << " " << c.M << "x" << c.N << "x" << c.K);
    Buf<bf16> a = small_ints(size_t(c.M) * c.K, 11), b = small_ints(size_t(c.K) * c.N, 12);
    Buf<float> out(size_t(c.M) * c.N), rows(static_cast<size_t>(c.M));
    if ((gpu_mode() || std::getenv("TLE_CHECK_GPU")) && c.M < 16) {
      // [3, 5] pads to [4, 8]: the CPU backend and the interpreter ignore layouts, but an mma
      // operand layout cannot tile it on the GPU (a UserError at the set_layout's line), whether
      // the kernel runs there or is compiled for it beside a CPU run (TLE_CHECK_GPU).
      try {
        k(Grid(1), a.data(), b.data(), out.data(), rows.data(), c.M, c.N, c.K, c.kind, c.wm, c.wn);
        FAIL("a [3, 5] tile in an mma operand layout compiled for the GPU");
      } catch (const UserError& e) {
        CHECK_THAT(e.what(), Catch::Contains("cannot be tiled by this layout"));
      }
      continue;
    }
    k(Grid(1), a.data(), b.data(), out.data(), rows.data(), c.M, c.N, c.K, c.kind, c.wm, c.wn);
    std::vector<float> want, want_rows;
    gemm_reference(a, b, c.M, c.N, c.K, want, want_rows);
    CHECK(diffs(all(out), want) == "");
    CHECK(diffs(all(rows), want_rows) == "");
  }
  auto s = jit("setl_ops_slice", slice_kernel);
  for (auto [M, N] : {std::pair{17, 33}, std::pair{64, 64}, std::pair{1, 1}}) {
    INFO("[" << M << ", " << N << "]");
    Buf<float> x = random_buf<float>(size_t(M) * N, 5), y = random_buf<float>(size_t(M), 6);
    for (auto& e : x) e = float(int(e * 8));
    Buf<float> out(size_t(M) * N), sums(static_cast<size_t>(M));
    s(Grid(1), x.data(), y.data(), out.data(), sums.data(), M, N);
    std::vector<float> want(size_t(M) * N), want_s(size_t(M), 0.0f);
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j)
        want[size_t(i) * N + j] = x[size_t(i) * N + j] + y[size_t(i)], want_s[size_t(i)] += x[size_t(i) * N + j];
    CHECK(diffs(all(out), want) == "");
    CHECK(diffs(all(sums), want_s) == "");
  }
}

// ============================================================================ thread queries

namespace {
/// Thread-level code through gpu::thread_id / warp_id / lane_id on NW warps: thread t stores
/// 3 t + lane + 1000 warp at out[t], and where t < n also t * t at sq[t]; out[32 NW] is the sum of
/// the thread ids (a reduction of the per-thread tile).
void thread_kernel(Ptr<int32_t> out, Ptr<int32_t> sq, Tile<int32_t> n, Constexpr<int> NW) {
  Tile<int32_t> t = gpu::thread_id(NW);
  store(out + t, t * 3 + gpu::lane_id(NW) + gpu::warp_id(NW) * 1000);
  store(sq + t, t * t, t < n);
  store(out + 32 * NW, sum(t, 0));
}
}  // namespace

TEST_CASE("ops: thread_id, warp_id and lane_id give each thread its own element", "[ops][struct]") {
  auto k = jit("thread_queries", thread_kernel);
  for (int nw : {1, 4, 8})
    for (int n : {0, 17, 1000}) {
      INFO(nw << " warps, n " << n);
      const int threads = 32 * nw;
      Buf<int32_t> out(static_cast<size_t>(threads) + 1, -1), sq(static_cast<size_t>(threads), -1);
      k(Grid(1).with_warps(nw), out.data(), sq.data(), n, nw);
      std::vector<int32_t> want(static_cast<size_t>(threads) + 1), want_sq(static_cast<size_t>(threads));
      for (int t = 0; t < threads; ++t) {
        want[size_t(t)] = 3 * t + t % 32 + 1000 * (t / 32);
        want_sq[size_t(t)] = t < n ? t * t : -1;
      }
      want[size_t(threads)] = threads * (threads - 1) / 2;
      CHECK(all(out) == want);
      CHECK(all(sq) == want_sq);
    }
}

TEST_CASE("ptx: thread_id is the thread index, one element per thread", "[ptx][struct]") {
  auto k = jit("thread_queries_ptx", thread_kernel);
  const std::string ptx = k.ptx(90, 4, fake<int32_t>(), fake<int32_t>(), 100, 4);
  CHECK(ptx.find("%tid.x") != std::string::npos);
  CHECK(ptxtest::count_of(ptx, "st.global") == 3);  // out[t], the masked sq[t], and the sum (one thread)
  // no layout conversion before the per-thread stores (the sum's cross-warp exchange comes after)
  CHECK(ptx.find("st.shared") > ptx.find("st.global"));
  ptxtest::assemble("thread_id", ptx, "sm_90a");
}

TEST_CASE("errors: thread_id with a warp count that is not a power of two or not the launch's", "[errors][struct]") {
  auto three = jit("thread_err_three", [](Ptr<int32_t> x) {
    line = __LINE__; store(x + gpu::thread_id(3), 1);
  });
  opstest::Vec<int32_t> x(128, 0);  // (managed memory in the mirrored GPU run: the launch gets to the trace)
  expect_error([&] { three(Grid(1), x.data()); }, {"gpu::thread_id(3)", "a power of two from 1 to 32"});
  auto eight = jit("thread_err_eight", [](Ptr<int32_t> x) {
    line = __LINE__; store(x + gpu::lane_id(8), 1);
  });
  expect_error([&] { (void)eight.ptx(90, 4, fake<int32_t>()); }, {"8 warps", "compiled for 4"});
}

// ============================================================================ GPU

TEST_CASE("gpu: set_layout with mma, dot operand and slice layouts keeps the values", "[.gpu][struct]") {
  if (!gpu_info()) {
    WARN("no usable GPU: [.gpu] case skipped");
    return;
  }
  auto k = jit("setl_gpu_gemm", gemm_kernel);
  struct Case {
    int kind, wm, wn, M, N, K;
  };
  // kinds 3-5 (wgmma layouts) need sm_90a: the H100 these cases are meant for
  const bool hopper = gpu_info()->sm >= 90;
  for (Case c : {Case{0, 2, 2, 17, 33, 20}, Case{1, 2, 2, 17, 33, 20}, Case{2, 2, 2, 64, 64, 64}, Case{2, 4, 1, 30, 20, 40},
                 Case{3, 4, 1, 50, 40, 24}, Case{4, 4, 1, 64, 64, 32}, Case{5, 4, 1, 33, 100, 16},
                 Case{6, 1, 4, 17, 9, 20}, Case{6, 2, 2, 64, 128, 64}}) {
    if (!hopper && c.kind >= 3 && c.kind <= 5) continue;
    INFO("kind " << c.kind << " warps [" << c.wm << ", " << c.wn << "] " << c.M << "x" << c.N << "x" << c.K);
    ManagedBuffer<bf16> a(size_t(c.M) * c.K), b(size_t(c.K) * c.N);
    Buf<bf16> ha = small_ints(a.size(), 21), hb = small_ints(b.size(), 22);
    for (size_t i = 0; i < a.size(); ++i) a.data()[i] = ha[i];
    for (size_t i = 0; i < b.size(); ++i) b.data()[i] = hb[i];
    ManagedBuffer<float> out(size_t(c.M) * c.N), rows(static_cast<size_t>(c.M));
    k(Grid(1).with_warps(4).backend(Backend::GPU), a.data(), b.data(), out.data(), rows.data(), c.M, c.N, c.K, c.kind,
      c.wm, c.wn);
    synchronize();
    std::vector<float> want, want_rows;
    gemm_reference(ha, hb, c.M, c.N, c.K, want, want_rows);
    CHECK(diffs(std::vector<float>(out.data(), out.data() + out.size()), want) == "");
    CHECK(diffs(std::vector<float>(rows.data(), rows.data() + rows.size()), want_rows) == "");
  }
  auto s = jit("setl_gpu_slice", slice_kernel);
  for (auto [M, N] : {std::pair{17, 33}, std::pair{64, 64}, std::pair{128, 8}}) {
    INFO("[" << M << ", " << N << "]");
    ManagedBuffer<float> x(size_t(M) * N), y(static_cast<size_t>(M)), out(size_t(M) * N), sums(static_cast<size_t>(M));
    for (size_t i = 0; i < x.size(); ++i) x.data()[i] = float(int(i % 17) - 8);
    for (size_t i = 0; i < y.size(); ++i) y.data()[i] = float(i);
    s(Grid(1).with_warps(4).backend(Backend::GPU), x.data(), y.data(), out.data(), sums.data(), M, N);
    synchronize();
    int bad = 0;
    for (int i = 0; i < M; ++i) {
      float rs = 0;
      for (int j = 0; j < N; ++j) {
        bad += out.data()[size_t(i) * N + j] != x.data()[size_t(i) * N + j] + y.data()[size_t(i)];
        rs += x.data()[size_t(i) * N + j];
      }
      bad += sums.data()[size_t(i)] != rs;
    }
    CHECK(bad == 0);
  }
}
