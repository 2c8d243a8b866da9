// examples/raw_kernels.hpp - the TLE-Raw kernels of examples/raw_softmax.cpp and
// examples/raw_device_function.cpp, shared with the tests (tests/test_raw.cpp) so that they check
// what the examples run. See docs/raw.md.
#pragma once
#include <tle/tle.hpp>

#include <cmath>

namespace ex {

/// Row softmax of a [rows, ncols] f32 matrix like make_softmax (kernels.hpp), with the exponential
/// computed by the PTX instruction ex2.approx.ftz.f32 through tle::inline_asm:
/// exp(v - max) = 2^((v - max) * log2(e)). Masked lanes hold -inf, whose ex2 is +0.
inline auto make_raw_softmax() {
  using namespace tle;
  return jit("raw_softmax", [](Ptr<float> x, Ptr<float> y, Tile<int32_t> ncols, Constexpr<int> BLOCK) {
    Tile<int64_t> row = program_id(0).to<int64_t>();
    Tile<int32_t> cols = arange(0, BLOCK);
    Tile<bool> mask = cols < ncols;
    Tile<float> v = load(x + row * ncols + cols, mask, -INFINITY);
    Tile<float> t = (v - max(v, 0)) * 1.4426950408889634f;
    Tile<float> e = inline_asm<float>("ex2.approx.ftz.f32 $0, $1;", "=f,f", {t});
    store(y + row * ncols + cols, e / sum(e, 0), mask);
  });
}

/// CUDA device functions called collectively by the CTA from tile code (tle::cuda_function).
/// tle_bitonic_sort_f32 sorts a 1-D tile whose length is a power of two in place (ascending), with
/// all threads of the CTA taking pairs in turn and __syncthreads() between the stages.
/// tle_sum_squares returns the sum of squares of a tile: a per-thread partial sum, a warp
/// reduction with __shfl_xor_sync, then the warps' partials through shared memory (thread 0's
/// result is the call's value).
inline const tle::CudaSource& device_functions() {
  static const tle::CudaSource src(R"(
extern "C" __device__ void tle_bitonic_sort_f32(tle::TileRef<float> t) {
  const int n = t.numel();
  for (int k = 2; k <= n; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = tle::cta_thread(); i < n; i += tle::cta_threads()) {
        const int l = i ^ j;
        if (l > i) {
          const float a = t[i], b = t[l];
          const bool ascending = (i & k) == 0;
          if ((a > b) == ascending) { t[i] = b; t[l] = a; }
        }
      }
      __syncthreads();
    }
  }
}

extern "C" __device__ float tle_sum_squares(tle::TileRef<float> t) {
  __shared__ float partial[32];
  float s = 0.0f;
  for (int i = tle::cta_thread(); i < t.numel(); i += tle::cta_threads()) s += t[i] * t[i];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  const int warp = tle::cta_thread() / 32, lane = tle::cta_thread() % 32;
  if (lane == 0) partial[warp] = s;
  __syncthreads();
  float total = 0.0f;
  if (tle::cta_thread() == 0)
    for (int w = 0; w < tle::cta_threads() / 32; ++w) total += partial[w];
  __syncthreads();  // partial[] is free for the next call
  return total;
}
)",
                                   {}, "device_functions.cu");
  return src;
}

/// Per row of a [rows, ncols] f32 matrix (ncols <= BLOCK, BLOCK a power of two): y = the row sorted
/// ascending (CTA-wide bitonic sort in CUDA), ss[row] = the row's sum of squares (CUDA warp
/// reduction). Padding lanes load +inf, so they sort last and are not stored.
inline auto make_sort_rows() {
  using namespace tle;
  return jit("sort_rows", [](Ptr<float> x, Ptr<float> y, Ptr<float> ss, Tile<int32_t> ncols, Constexpr<int> BLOCK) {
    Tile<int64_t> row = program_id(0).to<int64_t>();
    Tile<int32_t> cols = arange(0, BLOCK);
    Tile<bool> mask = cols < ncols;
    Tile<float> v = load(x + row * ncols + cols, mask, INFINITY);
    Tile<float> squares = cuda_function<float>(device_functions(), "tle_sum_squares", where(mask, v, 0.0f));
    cuda_function(device_functions(), "tle_bitonic_sort_f32", inout(v));
    store(y + row * ncols + cols, v, mask);
    store(ss + row, squares);
  });
}

/// A whole CUDA kernel: y[i] = a * x[i] + b for i < n (launched with tle::raw_kernel).
inline auto make_raw_affine() {
  return tle::raw_kernel<void(float*, const float*, float, float, int)>("raw_affine", R"(
extern "C" __global__ void raw_affine(float* y, const float* x, float a, float b, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + b;
})");
}

}  // namespace ex
