// tests/test_reorder_loads.cpp - passes::reorder_loads (src/passes/gpu/reorder_loads.cpp): which
// global loads move above reductions and conversions, where they land, what they must not cross
// (stores, atomics, volatile loads, barriers, loops), and the PTX (every ld.global of a one-row
// layernorm issued before the first bar.sync). Results on the GPU: the [.gpu] case at the end and
// every mirrored GPU test (all kernels go through the pass).
#include <catch2/catch.hpp>

#include <tle/tle.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "../examples/kernels.hpp"
#include "ir/ir.hpp"
#include "passes/gpu/gpu_passes.hpp"
#include "passes/pass.hpp"
#include "ops_util.hpp"
#include "ptxas_util.hpp"
#include "trace_util.hpp"

using namespace tle;
using ptxtest::count_of;

namespace {

/// Position of each op of the entry block (top level).
std::vector<const ir::Op*> top_ops(const ir::Function& f) {
  std::vector<const ir::Op*> v;
  for (const auto& op : f.entry().ops) v.push_back(op.get());
  return v;
}

/// Index in the entry block of the n-th top-level op of kind k (-1 when there is none).
long index_of(const ir::Function& f, ir::OpKind k, int n = 0) {
  auto ops = top_ops(f);
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i]->kind == k && n-- == 0) return static_cast<long>(i);
  return -1;
}

/// Index in the entry block of the load whose pointer derives from kernel argument `arg`.
long load_of_arg(const ir::Function& f, long arg) {
  auto ops = top_ops(f);
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i]->kind == ir::OpKind::Load && tracetest::pointer_arg(f, *ops[i]) == arg) return static_cast<long>(i);
  return -1;
}

/// The GPU passes as a launch runs them (4 warps, 3 stages, sm_90a), with or without reordering;
/// the loads it reordered.
int gpu_passes(ir::Function& f, bool reorder = true) {
  passes::GpuPassStats st;
  passes::run_gpu_pipeline(f, 4, 3, true, true, reorder, &st);
  ir::verify(f);  // every operand defined before its use (Release builds skip the pipeline's check)
  return st.loads_reordered;
}

// LayerNorm of one row per program as Triton's tutorial writes it: w and b loaded after the two
// reductions that use the row's x.
auto layernorm_row = [](Ptr<float> x, Ptr<float> y, Ptr<float> w, Ptr<float> b, Tile<int32_t> ncols,
                        Constexpr<int> BLOCK) {
  Tile<int32_t> cols = arange(0, BLOCK);
  Tile<bool> mask = cols < ncols;
  Tile<int64_t> row = program_id(0).to<int64_t>() * ncols;
  Tile<float> v = load(x + row + cols, mask, 0.0f);
  Tile<float> n = ncols.to<float>();
  Tile<float> mean = sum(v, 0) / n;
  Tile<float> d = where(mask, v - mean, 0.0f);
  Tile<float> rstd = rsqrt(sum(d * d, 0) / n + 1e-5f);
  Tile<float> wv = load(w + cols, mask, 0.0f);
  Tile<float> bv = load(b + cols, mask, 0.0f);
  store(y + row + cols, d * rstd * wv + bv, mask);
};

}  // namespace

TEST_CASE("reorder_loads: layernorm's w and b are loaded before the reductions, in their order", "[passes][reorder]") {
  for (int block : {1024, 1000}) {  // 1000: pad_shapes' masks are operands too
    INFO("BLOCK " << block);
    auto f = tracetest::trace("ln", layernorm_row, {block}, true, false);
    CHECK(gpu_passes(*f) == 2);
    const long first_reduce = index_of(*f, ir::OpKind::Reduce);
    const long lx = load_of_arg(*f, 0), lw = load_of_arg(*f, 2), lb = load_of_arg(*f, 3);
    REQUIRE(first_reduce >= 0);
    REQUIRE(lx >= 0);
    CHECK(lx < lw);  // loads keep their order
    CHECK(lw < lb);
    CHECK(lb < first_reduce);
    // without the pass they stay after both reductions
    auto g = tracetest::trace("ln", layernorm_row, {block}, true, false);
    CHECK(gpu_passes(*g, false) == 0);
    CHECK(load_of_arg(*g, 2) > index_of(*g, ir::OpKind::Reduce, 1));
    // a second run finds nothing to move
    CHECK(passes::reorder_loads(*f) == 0);
  }
}

TEST_CASE("reorder_loads: layernorm PTX issues every global load before the first bar.sync", "[passes][reorder][ptx]") {
  auto k = jit("ln_row", layernorm_row);
  auto* p = reinterpret_cast<float*>(uintptr_t{0x20000});
  for (int block : {1024, 4096}) {
    INFO("BLOCK " << block);
    Grid g(100);
    g.with_warps(4);
    const std::string ptx = k.ptx(90, g, p, p, p, p, 1000, block);
    const size_t first_bar = ptx.find("bar.sync");
    REQUIRE(first_bar != std::string::npos);
    const size_t loads = count_of(ptx, "ld.global");
    CHECK(loads >= 3);
    CHECK(count_of(ptx.substr(0, first_bar), "ld.global") == loads);
    ptxtest::assemble("layernorm row", ptx, "sm_90a");
  }
}

TEST_CASE("reorder_loads: a load crosses no store, atomic, volatile load, barrier or loop", "[passes][reorder]") {
  SECTION("store") {  // the store may write what the load reads: the load moves above the reduction only
    auto f = tracetest::trace_div16("k", [](Ptr<float> x, Ptr<float> y, Ptr<float> w) {
      Tile<int32_t> c = arange(0, 256);
      Tile<float> v = load(x + c);
      store(y + c, v);
      Tile<float> s = sum(v, 0);
      store(y + c, load(w + c) * s);
    });
    CHECK(gpu_passes(*f) == 1);
    CHECK(load_of_arg(*f, 2) > index_of(*f, ir::OpKind::Store, 0));
    CHECK(load_of_arg(*f, 2) < index_of(*f, ir::OpKind::Reduce));
  }
  SECTION("atomic") {
    for (bool atomic : {true, false}) {  // without it, the load moves
      auto f = tracetest::trace("k", [](Ptr<float> x, Ptr<int32_t> cnt, Ptr<float> w, Ptr<float> y, Constexpr<bool> A) {
        Tile<int32_t> c = arange(0, 256);
        Tile<float> s = sum(load(x + c), 0);
        if (A) atomic_add(cnt, Tile<int32_t>(1));
        store(y + c, load(w + c) * s);
      }, {atomic}, true, true);
      CHECK(gpu_passes(*f) == (atomic ? 0 : 1));
      if (atomic) CHECK(load_of_arg(*f, 2) > index_of(*f, ir::OpKind::AtomicRMW));
    }
  }
  SECTION("a reduction whose combine stores") {
    auto f = tracetest::trace_div16("k", [](Ptr<float> x, Ptr<float> w, Ptr<float> y, Ptr<float> log) {
      Tile<int32_t> c = arange(0, 256);
      Tile<float> s = reduce(load(x + c), 0, [&](Tile<float> a, Tile<float> b) {
        store(log, a);
        return a + b;
      });
      store(y + c, load(w + c) * s);
    });
    CHECK(gpu_passes(*f) == 0);
    CHECK(load_of_arg(*f, 1) > index_of(*f, ir::OpKind::Reduce));
  }
  SECTION("volatile load") {  // a flag another program sets: what follows it stays after it
    auto f = tracetest::trace_div16("k", [](Ptr<float> x, Ptr<int32_t> flag, Ptr<float> w, Ptr<float> y) {
      Tile<int32_t> c = arange(0, 256);
      Tile<float> s = sum(load(x + c), 0);
      Tile<int32_t> ready = load(flag, MemHints{"", "", true});
      store(y + c, load(w + c) * s + ready.to<float>());
    });
    CHECK(gpu_passes(*f) == 0);
    CHECK(load_of_arg(*f, 1) > index_of(*f, ir::OpKind::Reduce));  // the volatile load itself stays
    CHECK(load_of_arg(*f, 2) > load_of_arg(*f, 1));
  }
  SECTION("barrier") {
    auto f = tracetest::trace_div16("k", [](Ptr<float> x, Ptr<float> w, Ptr<float> y) {
      Tile<int32_t> c = arange(0, 256);
      Tile<float> s = sum(load(x + c), 0);
      gpu::sync();
      store(y + c, load(w + c) * s);
    });
    CHECK(gpu_passes(*f) == 0);
    CHECK(load_of_arg(*f, 1) > index_of(*f, ir::OpKind::Barrier));
  }
  SECTION("if") {
    auto f = tracetest::trace_div16("k", [](Ptr<float> x, Ptr<float> w, Ptr<float> y, Tile<int32_t> n) {
      Tile<int32_t> c = arange(0, 256);
      Tile<float> s = sum(load(x + c), 0);
      if_(n > 0, [&] { store(y, s); });
      store(y + c, load(w + c) * s);
    });
    CHECK(gpu_passes(*f) == 0);
    CHECK(load_of_arg(*f, 1) > index_of(*f, ir::OpKind::If));
  }
  SECTION("a shared buffer's load stays, a global one behind it moves") {
    auto f = tracetest::trace_div16("k", [](Ptr<float> x, Ptr<float> w, Ptr<float> y) {
      auto buf = gpu::alloc<float>({256});
      Tile<int32_t> c = arange(0, 256);
      Tile<float> v = load(x + c);
      store(gpu::local_ptr(buf, {c}), v);
      Tile<float> s = sum(v, 0);
      Tile<float> back = load(gpu::local_ptr(buf, {255 - c}));
      store(y + c, load(w + c) * s + back);
    });
    CHECK(gpu_passes(*f) == 1);
    long shared_load = -1;
    const auto ops = top_ops(*f);
    for (size_t i = 0; i < ops.size(); ++i)
      if (ops[i]->kind == ir::OpKind::Load && i != static_cast<size_t>(load_of_arg(*f, 0)) &&
          i != static_cast<size_t>(load_of_arg(*f, 1)))
        shared_load = static_cast<long>(i);
    CHECK(shared_load > index_of(*f, ir::OpKind::Reduce));
    CHECK(load_of_arg(*f, 1) < index_of(*f, ir::OpKind::Reduce));
  }
  SECTION("in a loop body, within the body") {
    auto f = tracetest::trace_div16("k", [](Ptr<float> x, Ptr<float> w, Ptr<float> y, Tile<int32_t> n) {
      Tile<int32_t> c = arange(0, 256);
      for (auto i : range(0, n)) {
        Tile<float> s = sum(load(x + i * 256 + c), 0);
        store(y + i * 256 + c, load(w + c) * s);
      }
    });
    CHECK(gpu_passes(*f) == 1);
    auto loops = tracetest::ops_of(*f, ir::OpKind::For);
    REQUIRE(loops.size() == 1);
    long reduce_at = -1, w_at = -1, i = 0;
    for (const auto& op : loops[0]->region().body().ops) {
      if (op->kind == ir::OpKind::Reduce && reduce_at < 0) reduce_at = i;
      if (op->kind == ir::OpKind::Load) w_at = i;  // the later load in the new order: w's or x's
      ++i;
    }
    CHECK(w_at < reduce_at);  // both loads before the reduction
  }
  SECTION("loop") {
    auto f = tracetest::trace_div16("k", [](Ptr<float> x, Ptr<float> w, Ptr<float> y, Tile<int32_t> n) {
      Tile<int32_t> c = arange(0, 256);
      Tile<float> acc = zeros<float>({256});
      for (auto i : range(0, n)) acc = acc + load(x + i * 256 + c);
      store(y + c, load(w + c) * acc);
    });
    CHECK(gpu_passes(*f) == 0);
    CHECK(load_of_arg(*f, 1) > index_of(*f, ir::OpKind::For));
  }
}

TEST_CASE("reorder_loads: a gather's index load and the gather move up together, a load of a reduction's result stays",
          "[passes][reorder]") {
  // cross-entropy: the loss of row r is logsumexp(x[r]) - x[r, target[r]]
  auto f = tracetest::trace_div16("xent", [](Ptr<float> x, Ptr<int32_t> target, Ptr<float> loss, Tile<int32_t> V) {
    Tile<int32_t> c = arange(0, 1024);
    Tile<int32_t> r = program_id(0);
    Tile<bool> m = c < V;
    Tile<float> v = load(x + r * V + c, m, -INFINITY);
    Tile<float> mx = max(v, 0);
    Tile<float> se = sum(exp(v - mx), 0);
    Tile<int32_t> t = load(target + r);
    Tile<float> xt = load(x + r * V + t);
    Tile<int32_t> am = argmax(v, 0);
    Tile<float> at = load(x + r * V + am);  // needs the reduction: stays after it
    store(loss + r, log(se) + mx - xt + at);
  });
  CHECK(gpu_passes(*f) == 2);
  const auto ops = top_ops(*f);
  std::vector<long> loads, reduces;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i]->kind == ir::OpKind::Load) loads.push_back(static_cast<long>(i));
    if (ops[i]->kind == ir::OpKind::Reduce) reduces.push_back(static_cast<long>(i));
  }
  REQUIRE(loads.size() == 4);
  REQUIRE(reduces.size() == 3);
  CHECK(loads[2] < reduces[0]);  // x, target, x[target] before the first reduction
  // the third is the gather: its pointer derives from the second's result (the target)
  bool from_target = false;
  std::vector<const ir::Value*> todo{ops[static_cast<size_t>(loads[2])]->operands[0]};
  while (!todo.empty()) {
    const ir::Value* v = todo.back();
    todo.pop_back();
    if (!v->def) continue;
    if (v->def == ops[static_cast<size_t>(loads[1])]) from_target = true;
    for (const ir::Value* o : v->def->operands) todo.push_back(o);
  }
  CHECK(from_target);
  CHECK(loads[3] > reduces[2]);  // after the argmax
}

// The three example kernels the load reordering is measured on (benchmarks, group "reorder"),
// against references in double on ragged rows; mirrored on the GPU (TLE_TEST_BACKEND=gpu), where
// the pass moves their loads.
TEST_CASE("reorder examples: layernorm_row, cross_entropy, cosine_rows on ragged rows", "[ops][reorder]") {
  using opstest::Buf;
  for (int ncols : {1, 17, 1001}) {
    INFO("ncols " << ncols);
    const int rows = 5, block = ncols == 1 ? 1 : ncols == 17 ? 32 : 1024;
    const size_t n = size_t(rows) * ncols;
    Buf<float> x = opstest::random_buf<float>(n, 7, -3, 3);
    {
      Buf<float> w = opstest::random_buf<float>(ncols, 8, 0.5, 1.5), b = opstest::random_buf<float>(ncols, 9), y(n);
      ex::make_layernorm_row<float>()(Grid(rows), x.data(), y.data(), w.data(), b.data(), ncols, 1e-5f, block);
      std::vector<double> want(n);
      for (int r = 0; r < rows; ++r) {
        double mean = 0, var = 0;
        for (int c = 0; c < ncols; ++c) mean += x[r * ncols + c];
        mean /= ncols;
        for (int c = 0; c < ncols; ++c) var += (x[r * ncols + c] - mean) * (x[r * ncols + c] - mean);
        const double rstd = 1 / std::sqrt(var / ncols + 1e-5);
        for (int c = 0; c < ncols; ++c) want[r * ncols + c] = (x[r * ncols + c] - mean) * rstd * w[c] + b[c];
      }
      CHECK(opstest::diffs(y, want, 1e-5, 1e-5) == "");
    }
    {
      Buf<int32_t> t(rows);
      for (int r = 0; r < rows; ++r) t[r] = r == 2 ? -100 : (r * 7919) % ncols;  // row 2 ignored
      Buf<float> loss(rows);
      ex::make_cross_entropy()(Grid(rows), x.data(), t.data(), loss.data(), ncols, block);
      std::vector<double> want(rows);
      for (int r = 0; r < rows; ++r) {
        if (t[r] < 0) continue;
        double m = -INFINITY, s = 0;
        for (int c = 0; c < ncols; ++c) m = std::max(m, double(x[r * ncols + c]));
        for (int c = 0; c < ncols; ++c) s += std::exp(x[r * ncols + c] - m);
        want[r] = std::log(s) + m - x[r * ncols + t[r]];
      }
      CHECK(opstest::diffs(loss, want, 1e-5, 1e-5) == "");
    }
    {
      Buf<float> bb = opstest::random_buf<float>(n, 10, -3, 3), out(rows);
      ex::make_cosine_rows<float>()(Grid(rows), x.data(), bb.data(), out.data(), ncols, 1e-8f, block);
      std::vector<double> want(rows);
      for (int r = 0; r < rows; ++r) {
        double na = 0, nb = 0, d = 0;
        for (int c = 0; c < ncols; ++c) {
          const double a = x[r * ncols + c], b = bb[r * ncols + c];
          na += a * a, nb += b * b, d += a * b;
        }
        want[r] = d / std::max(std::sqrt(na) * std::sqrt(nb), 1e-8);
      }
      CHECK(opstest::diffs(out, want, 1e-5, 1e-6) == "");
    }
  }
}

TEST_CASE("reorder examples: the loads moved, in their PTX and in Kernel::stats", "[ptx][reorder]") {
  auto* fp = reinterpret_cast<float*>(uintptr_t{0x20000});
  auto* ip = reinterpret_cast<int32_t*>(uintptr_t{0x20000});
  Grid g(64);
  g.with_warps(8);
  // every global load before the first bar.sync (the reductions' cross-warp step)
  auto loads_first = [](const std::string& what, const std::string& ptx) {
    INFO(what);
    const size_t bar = ptx.find("bar.sync");
    REQUIRE(bar != std::string::npos);
    CHECK(count_of(ptx.substr(0, bar), "ld.global") == count_of(ptx, "ld.global"));
    ptxtest::assemble(what, ptx, "sm_90a");
  };
  loads_first("cross_entropy", ex::make_cross_entropy().ptx(90, g, fp, ip, fp, 4100, 8192));
  loads_first("cosine_rows", ex::make_cosine_rows<float>().ptx(90, g, fp, fp, fp, 4100, 1e-8f, 8192));
}

TEST_CASE("gpu: Kernel::stats counts the reordered loads", "[.gpu][reorder]") {
  DeviceBuffer<float> x(64 * 1000), w(1000), out(64 * 1000);
  DeviceBuffer<int32_t> t(64);
  Grid g(64);
  CHECK(ex::make_layernorm_row<float>().stats(g, x, out, w, w, 1000, 1e-5f, 1024).loads_reordered == 2);
  CHECK(ex::make_cross_entropy().stats(g, x, t, out, 1000, 1024).loads_reordered == 2);
  CHECK(ex::make_cosine_rows<float>().stats(g, x, x, out, 1000, 1e-8f, 1024).loads_reordered == 1);
  CHECK(ex::make_softmax().stats(g, x, out, 1000, 1024).loads_reordered == 0);
}

TEST_CASE("dce: a reduce whose combine updates memory is kept though its result is unused", "[passes]") {
  // Op::is_pure looks into regions: the combine's atomic is a side effect of the reduce.
  auto k = jit("combine_with_effect", [](Ptr<float> x, Ptr<int32_t> calls) {
    Tile<float> v = load(x + arange(0, 16));
    (void)reduce(v, 0, [&](Tile<float> a, Tile<float> b) {
      atomic_add(calls, 1);
      return a + b;
    });
  });
  std::vector<float> x(16, 1.0f);
  std::vector<int32_t> calls(1, 0);
  CHECK_THAT(k.ir(true, x.data(), calls.data()), Catch::Contains("reduce"));
  k(Grid(1).backend(Backend::CPU), x.data(), calls.data());
  CHECK(calls[0] > 0);  // the combine ran (15 times on the CPU backend)
}
