// Attention forward written with TLE-Struct (ex::make_attention_ws: FlashAttention-3's structure,
// a TMA producer warpgroup and two wgmma consumer warpgroups with the online softmax, an mbarrier
// ring of key and value blocks), bf16 q, k, v, o of shape [batch * heads, S, D], causal and not.
// Default sizes: batch 1, 2 heads, S = 200 (ragged: not a multiple of the 128-row block), D = 64
// and 128, every output row checked against a double reference (on the CPU backend the roles run
// interleaved on the interpreter). With --gpu-sizes on the GPU: batch 4, 32 heads, S = 4096,
// D = 128 (a suite shape; gpu_bench's attention group has the others), 512 sampled rows checked,
// TFLOP/s printed.
#include <tle/tle.hpp>

#include "common.hpp"
#include "kernels.hpp"

static bool run(tle::Backend backend, int batch, int heads, int S, int D, bool causal, bool sampled) {
  using namespace tle;
  const int BH = batch * heads, BM = 128, BN = 128, stages = 2;
  const size_t n = size_t(BH) * S * D;
  const int64_t rows = int64_t(BH) * S;
  auto cast_bf16 = [](const std::vector<float>& f) { return std::vector<bf16>(f.begin(), f.end()); };
  std::vector<bf16> q = cast_bf16(ex::random_vector(n, 11)), k = cast_bf16(ex::random_vector(n, 12)),
                    v = cast_bf16(ex::random_vector(n, 13));
  std::vector<bf16> o(n);
  const double sm_scale = 1.0 / std::sqrt(double(D));
  const float qk_scale = float(sm_scale * 1.4426950408889634);  // base-2 exponentials
  // PINGPONG = false: on an H100 the consumers running side by side (1.93 ms at 4x32x4096x128) beat
  // taking a turn per dot (2.53 ms): benchmarks/RESULTS.md, 2026-12-07.
  constexpr bool pingpong = false;
  auto attn = ex::make_attention_ws<bf16>();
  const Grid grid(cdiv(S, BM), BH);
  double ms;
  if (backend == Backend::GPU) {
    DeviceBuffer<bf16> dq(q), dk(k), dv(v), dout(n);
    const TensorDescriptor<bf16, 2> tq(dq, {rows, D}, {D, 1}, {64, 64}), tk(dk, {rows, D}, {D, 1}, {BN, 64}),
        tv(dv, {rows, D}, {D, 1}, {BN, 64});
    ms = ex::time_gpu_ms([&] { attn(grid, tq, tk, tv, dout, S, qk_scale, D, causal, stages, pingpong); }, 5);
    dout.copy_to_host(o.data(), n);
  } else {
    const TensorDescriptor<bf16, 2> tq(q.data(), {rows, D}, {D, 1}, {64, 64}),
        tk(k.data(), {rows, D}, {D, 1}, {BN, 64}), tv(v.data(), {rows, D}, {D, 1}, {BN, 64});
    ms = ex::time_ms([&] { attn(grid, tq, tk, tv, o.data(), S, qk_scale, D, causal, stages, pingpong); }, 1);
  }
  std::vector<float> got, want;  // every row, or 512 sampled (head, row) pairs
  ex::attention_rows(q.data(), k.data(), v.data(), o.data(), BH, S, D, causal, sm_scale, sampled, got, want);
  char label[96];
  std::snprintf(label, sizeof label, "attention_ws %dx%dx%dx%d %s", batch, heads, S, D, causal ? "causal" : "full");
  const bool ok = ex::check(label, got, want, 2e-2, 2e-2);  // bf16 p and output: ~3 significant digits
  const double flops = 4.0 * BH * double(S) * S * D * (causal ? 0.5 : 1.0);
  std::printf("%s (%s): %.3f ms, %.1f TFLOP/s\n", label, backend_name(backend), ms, flops / ms / 1e9);
  return ok;
}

static int example(int argc, char** argv) {
  const tle::Backend backend = ex::announce_backend("attention_fwd");
  bool ok = true;
  for (bool causal : {false, true}) {
    if (backend == tle::Backend::GPU && ex::has_flag(argc, argv, "--gpu-sizes")) {
      ok &= run(backend, 4, 32, 4096, 128, causal, true);
    } else {
      ok &= run(backend, 1, 2, 200, 64, causal, false);
      ok &= run(backend, 1, 2, 200, 128, causal, false);
    }
  }
  return ok ? 0 : 1;
}

int main(int argc, char** argv) { return ex::guarded(argc, argv, example); }
