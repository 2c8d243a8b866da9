// tests/gpu_kernels.hpp - the representative kernels the GPU tests use: tests/test_ptx.cpp compiles
// each to PTX and assembles it with ptxas (no GPU needed), tests/test_gpu.cpp runs each on the CPU
// and on the GPU and compares. Each factory returns a fresh tle::Kernel.
#pragma once
#include <tle/tle.hpp>

#include "../examples/kernels.hpp"

#include <cmath>
#include <cstdint>

namespace gk {
using namespace tle;

// The examples' kernels (examples/kernels.hpp), so the GPU tests check what the examples and
// benchmarks run.
inline auto vector_add() { return ex::make_vector_add(); }
inline auto softmax() { return ex::make_softmax(); }
template <class T> auto layernorm() { return ex::make_layernorm<T>(); }

/// y = 2 * x over the rows of [nrows, ncols] (row-major, BLOCK >= ncols) with persistent programs
/// (program p: rows p, p + P, ...) whose row loop is pipelined S deep (tle::LoopOptions; S = 0:
/// no hint, left to the launch). Exact in every dtype, so GPU and CPU results match bit for bit.
template <class T, int S> auto scale_rows() {
  return jit("scale_rows", [](Ptr<T> x, Ptr<T> y, Tile<int32_t> nrows, Tile<int32_t> ncols, Constexpr<int> BLOCK) {
    Tile<int32_t> cols = arange(0, BLOCK);
    Tile<bool> mask = cols < ncols;
    for (auto r : range(program_id(0), nrows, num_programs(0), {.num_stages = S})) {
      Tile<int64_t> row = r.to<int64_t>() * ncols;
      Tile<T> v = load(x + row + cols, mask, 0);
      store(y + row + cols, v + v, mask);
    }
  });
}

/// C[M,N] (f32) = A @ B and RS[pid1, m] = the sum of row m of A, in one K loop hinted with
/// range(..., {.num_stages = S}). A's tile has two uses (the dot's operand conversion and the row
/// sum), so the pipeliner copies it in its own layout (pipe_vec) and converts it from registers,
/// while B's goes the ldmatrix way: both kinds in one loop.
template <class T, int S> auto matmul_rowsum() {
  return jit("matmul_rowsum", [](Ptr<T> a, Ptr<T> b, Ptr<float> c, Ptr<float> rs, Tile<int32_t> M, Tile<int32_t> N,
                                 Tile<int32_t> K, Constexpr<int> BM, Constexpr<int> BN, Constexpr<int> BK) {
    Tile<int32_t> rm = program_id(0) * BM + arange(0, BM);
    Tile<int32_t> rn = program_id(1) * BN + arange(0, BN);
    Tile<int32_t> rk = arange(0, BK);
    Tile<float> acc = zeros<float>({BM, BN});
    Tile<float> rsum = zeros<float>({BM});
    for (auto k0 : range(0, K, BK, {.num_stages = S})) {
      Tile<int32_t> kk = k0 + rk;
      Tile<T> ta = load(a + expand_dims(rm, 1) * K + expand_dims(kk, 0), expand_dims(rm < M, 1) & expand_dims(kk < K, 0));
      Tile<T> tb = load(b + expand_dims(kk, 1) * N + expand_dims(rn, 0), expand_dims(kk < K, 1) & expand_dims(rn < N, 0));
      acc = dot(ta, tb, acc);
      rsum = rsum + sum(cast<float>(ta), 1);
    }
    store(c + expand_dims(rm, 1) * N + expand_dims(rn, 0), acc, expand_dims(rm < M, 1) & expand_dims(rn < N, 0));
    store(rs + program_id(1) * M + rm, rsum, rm < M);
  });
}

/// C[M,N] (f32 or i32 accumulator) = A[M,K] @ B[K,N] with a device K loop and masked tails.
template <class T> auto matmul() { return ex::make_matmul<T>(); }

/// C[M,N] (f32) = A1 @ B1 + A2 @ B2, all row-major with the same M, N, K: two K loops
/// (ex::matmul_block) one after the other in one program, each with its own accumulator (two
/// pipelined loops in one kernel: their cp.async buffers, waits and barriers must not interfere).
template <class T> auto matmul_two_loops() {
  return jit("matmul_two_loops", [](Ptr<T> a1, Ptr<T> b1, Ptr<T> a2, Ptr<T> b2, Ptr<float> c, Tile<int32_t> M,
                                    Tile<int32_t> N, Tile<int32_t> K, Constexpr<int> BM, Constexpr<int> BN,
                                    Constexpr<int> BK) {
    Tile<int32_t> rm = program_id(0) * BM + arange(0, BM);
    Tile<int32_t> rn = program_id(1) * BN + arange(0, BN);
    Tile<float> acc = ex::matmul_block<T>(a1, b1, rm, rn, M, N, K, BM, BN, BK) +
                      ex::matmul_block<T>(a2, b2, rm, rn, M, N, K, BM, BN, BK);
    store(c + expand_dims(rm, 1) * N + expand_dims(rn, 0), acc, expand_dims(rm < M, 1) & expand_dims(rn < N, 0));
  });
}

/// C[M,N] (f32) = A @ B with persistent programs: program p computes the BM x BN tiles p, p + P,
/// ... (row-major tile order) in an outer device loop, each with the K loop (ex::matmul_block)
/// inside (a pipelined loop inside another loop: every tile's prologue refills the cp.async
/// buffers the previous tile's last iterations read).
template <class T> auto matmul_persistent() {
  return jit("matmul_persistent", [](Ptr<T> a, Ptr<T> b, Ptr<float> c, Tile<int32_t> M, Tile<int32_t> N,
                                     Tile<int32_t> K, Constexpr<int> BM, Constexpr<int> BN, Constexpr<int> BK) {
    Tile<int32_t> tiles_n = cdiv(N, BN);
    for (auto t : range(program_id(0), cdiv(M, BM) * tiles_n, num_programs(0))) {
      Tile<int32_t> rm = (t / tiles_n) * BM + arange(0, BM);
      Tile<int32_t> rn = (t % tiles_n) * BN + arange(0, BN);
      Tile<float> acc = ex::matmul_block<T>(a, b, rm, rn, M, N, K, BM, BN, BK);
      store(c + expand_dims(rm, 1) * N + expand_dims(rn, 0), acc, expand_dims(rm < M, 1) & expand_dims(rn < N, 0));
    }
  });
}

/// Every reduction of an R x C tile along AXIS (0 or 1): out is 7 result vectors of length
/// (AXIS == 0 ? C : R): sum, max, min, argmax, argmin, a custom-combine reduce (product-free:
/// max of |a|, |b| via where), and a keepdims sum broadcast back and re-reduced.
template <class T> auto reductions() {
  return jit("reductions", [](Ptr<T> x, Ptr<T> vals, Ptr<int32_t> idx, Constexpr<int> R, Constexpr<int> C,
                              Constexpr<int> AXIS) {
    Tile<int32_t> rows = arange(0, R), cols = arange(0, C);
    Tile<T> v = load(x + expand_dims(rows, 1) * C + expand_dims(cols, 0));
    const int L = AXIS == 0 ? C : R;
    Tile<int32_t> o = arange(0, L);
    store(vals + o, sum(v, AXIS));
    store(vals + L + o, max(v, AXIS));
    store(vals + 2 * L + o, min(v, AXIS));
    store(idx + o, argmax(v, AXIS));
    store(idx + L + o, argmin(v, AXIS));
    store(vals + 3 * L + o, reduce(v, AXIS, [](Tile<T> a, Tile<T> b) { return where(a > b, a, b); }));
    Tile<T> k = sum(v, AXIS, true);
    store(vals + 4 * L + o, sum(broadcast_to(k, {R, C}), AXIS) );
  });
}

/// Scans of a 1-D tile of N: cumsum forward and reverse, and an associative max-scan.
template <class T> auto scans() {
  return jit("scans", [](Ptr<T> x, Ptr<T> out, Constexpr<int> N) {
    Tile<int32_t> o = arange(0, N);
    Tile<T> v = load(x + o);
    store(out + o, cumsum(v, 0));
    store(out + N + o, cumsum(v, 0, true));
    store(out + 2 * N + o, associative_scan(v, 0, [](Tile<T> a, Tile<T> b) { return where(a > b, a, b); }));
  });
}

/// Integer atomics from every program: add, max, min, and, or, xor into counters[0..5], xchg into
/// counters[6], cas on counters[7] (0 -> pid + 1), plus the old values of atomic_add per lane.
inline auto atomics_int() {
  return jit("atomics_int", [](Ptr<int32_t> counters, Ptr<int32_t> olds, Ptr<int32_t> vals, Tile<int32_t> n,
                               Constexpr<int> BLOCK) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> mask = offs < n;
    Tile<int32_t> v = load(vals + offs, mask);
    Tile<int32_t> zero = zeros<int32_t>({BLOCK});
    Tile<int32_t> old = atomic_add(counters + zero, v, mask);
    store(olds + offs, old, mask);
    atomic_max(counters + (zero + 1), v, mask);
    atomic_min(counters + (zero + 2), v, mask);
    atomic_and(counters + (zero + 3), v, mask);
    atomic_or(counters + (zero + 4), v, mask);
    atomic_xor(counters + (zero + 5), v, mask);
    atomic_xchg(counters + 6, 7);
    atomic_cas(counters + 7, 0, program_id(0) + 1);
  });
}

/// Float atomics: add, max, min into sums[0..2].
inline auto atomics_float() {
  return jit("atomics_float", [](Ptr<float> sums, Ptr<float> vals, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> mask = offs < n;
    Tile<float> v = load(vals + offs, mask);
    Tile<int32_t> zero = zeros<int32_t>({BLOCK});
    atomic_add(sums + zero, v, mask);
    atomic_max(sums + (zero + 1), v, mask);
    atomic_min(sums + (zero + 2), v, mask);
  });
}

/// Device control flow: a loop with carried values and a data-dependent if_ inside and outside.
inline auto control_flow() {
  return jit("control_flow", [](Ptr<int32_t> x, Ptr<int32_t> out, Tile<int32_t> lo, Tile<int32_t> hi,
                                Tile<int32_t> step, Constexpr<int> BLOCK) {
    Tile<int32_t> o = arange(0, BLOCK);
    Tile<int32_t> acc = zeros<int32_t>({BLOCK});
    Tile<int32_t> trips = 0;
    for (auto i : range(lo, hi, step)) {
      acc = acc + load(x + o) * i;
      trips = trips + 1;
      if_(trips > 3, [&] { acc = acc - 1; });
    }
    Tile<int32_t> total = sum(acc, 0);
    if_(total > 0, [&] { total = total * 2; }, [&] { total = -total; });
    store(out + o, acc);
    store(out + BLOCK, total);
    store(out + BLOCK + 1, trips);
  });
}

/// out[i] = x[i] for i < n: loads and stores of T (with a mask and an `other`).
template <class T> auto copy() {
  return jit("copy", [](Ptr<T> x, Ptr<T> out, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> mask = offs < n;
    store(out + offs, load(x + offs, mask), mask);
  });
}

/// out[i] = cast<U>(x[i]).
template <class T, class U> auto convert() {
  return jit("convert", [](Ptr<T> x, Ptr<U> out, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> mask = offs < n;
    store(out + offs, cast<U>(load(x + offs, mask)), mask);
  });
}

/// 16 math results per element of x (T floating point), in out[k * n + i].
template <class T> auto math() {
  return jit("math", [](Ptr<T> x, Ptr<T> out, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> mask = offs < n;
    Tile<T> v = load(x + offs, mask);
    Tile<T> p = abs(v) + 0.5f;
    int k = 0;
    auto put = [&](const Tile<T>& r) { store(out + (k++) * n + offs, r, mask); };
    put(exp(v));
    put(exp2(v));
    put(log(p));
    put(log2(p));
    put(sqrt(p));
    put(rsqrt(p));
    put(floor(v * 3.0f));
    put(ceil(v * 3.0f));
    put(sin(v));
    put(cos(v));
    put(tanh(v));
    put(erf(v));
    put(pow(p, v));
    put(fma(v, v, p));
    put(maximum(v, p - 1.0f));
    put(minimum(v, p - 1.0f) / p);
  });
}

/// Integer / and % of two arrays (E19 rules).
template <class T> auto divmod() {
  return jit("divmod", [](Ptr<T> a, Ptr<T> b, Ptr<T> q, Ptr<T> r, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> mask = offs < n;
    Tile<T> x = load(a + offs, mask), y = load(b + offs, mask);
    store(q + offs, x / y, mask);
    store(r + offs, x % y, mask);
  });
}

/// A histogram of BLOCK values into BINS bins (E06/E21), with a mask.
inline auto histogram_kernel() {
  return jit("histogram", [](Ptr<int32_t> x, Ptr<int32_t> out, Tile<int32_t> n, Constexpr<int> BLOCK, Constexpr<int> BINS) {
    Tile<int32_t> o = arange(0, BLOCK);
    Tile<bool> mask = o < n;
    store(out + arange(0, BINS), histogram(load(x + o, mask), BINS, mask));
  });
}

}  // namespace gk
