// Attention forward in plain tle (ex::make_attention: FlashAttention-2 structure, online softmax),
// bf16 q, k, v, o of shape [batch * heads, S, D], causal and not. Default sizes: batch 1, 2 heads,
// S = 1000 (ragged), D = 64, every output row checked against a double reference. With
// --gpu-sizes: batch 4, 32 heads, S = 4096, D = 128 (the suite's shape), 512 sampled rows checked.
// Runs on tle::default_backend(); on the GPU through DeviceBuffers.
#include <tle/tle.hpp>

#include "common.hpp"
#include "kernels.hpp"

static bool run(tle::Backend backend, int batch, int heads, int S, int D, bool causal, bool sampled) {
  using namespace tle;
  const int BH = batch * heads;
  const size_t n = size_t(BH) * S * D;
  auto cast_bf16 = [](const std::vector<float>& f) { return std::vector<bf16>(f.begin(), f.end()); };
  std::vector<bf16> q = cast_bf16(ex::random_vector(n, 11)), k = cast_bf16(ex::random_vector(n, 12)),
                    v = cast_bf16(ex::random_vector(n, 13));
  std::vector<bf16> o(n);
  const double sm_scale = 1.0 / std::sqrt(double(D));
  const float qk_scale = float(sm_scale * 1.4426950408889634);  // base-2 exponentials
  auto attn = ex::make_attention<bf16>();
  double ms;
  const int BM = 128, BN = backend == Backend::GPU ? 128 : 64;
  Grid grid(cdiv(S, BM), BH);
  if (backend == Backend::GPU) {
    DeviceBuffer<bf16> dq(q), dk(k), dv(v), dout(n);
    ms = ex::time_gpu_ms([&] { attn(Grid(grid).with_warps(8).with_stages(3), dq, dk, dv, dout, S, qk_scale, BM, BN, D, causal); }, 5);
    dout.copy_to_host(o.data(), n);
  } else {
    ms = ex::time_ms([&] { attn(grid, q.data(), k.data(), v.data(), o.data(), S, qk_scale, BM, BN, D, causal); }, 1);
  }
  std::vector<float> got, want;  // every row, or 512 sampled (head, row) pairs
  ex::attention_rows(q.data(), k.data(), v.data(), o.data(), BH, S, D, causal, sm_scale, sampled, got, want);
  char label[96];
  std::snprintf(label, sizeof label, "attention %dx%dx%dx%d %s", batch, heads, S, D, causal ? "causal" : "full");
  bool ok = ex::check(label, got, want, 2e-2, 2e-2);  // bf16 p and output: ~3 significant digits
  const double flops = 4.0 * BH * double(S) * S * D * (causal ? 0.5 : 1.0);
  std::printf("%s (%s): %.3f ms, %.1f GFLOP/s\n", label, backend_name(backend), ms, flops / ms / 1e6);
  return ok;
}

static int example(int argc, char** argv) {
  const tle::Backend backend = ex::announce_backend("attention");
  bool ok = true;
  for (bool causal : {false, true}) {
    if (ex::has_flag(argc, argv, "--gpu-sizes")) ok &= run(backend, 4, 32, 4096, 128, causal, true);
    else ok &= run(backend, 1, 2, 1000, 64, causal, false);
  }
  return ok ? 0 : 1;
}

int main(int argc, char** argv) { return ex::guarded(argc, argv, example); }
