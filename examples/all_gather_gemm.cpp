// All-gather GEMM over a device mesh: every rank holds an [m, k] row shard of A and its own B
// [k, n]; C [ranks * m, n] = all_gather(A) @ B on every rank (tle::ops::AllGatherGemm: the gather
// by the copy engine, overlapped with one persistent GEMM that waits per shard). On the GPU the
// mesh is every visible device, or 2 ranks on device 0 when there is one (correct, but no NVLink:
// its time says nothing about the overlap); on the CPU 2 simulated ranks. Default shapes are small
// and ragged; --gpu-sizes runs issue #17's three per-rank shapes (m x k x n, bf16):
// 4096 x 8192 x 14336, 1024 x 8192 x 28672, 128 x 8192 x 14336. Checks 256 sampled elements of
// every rank's C against a double-precision product, prints the time per call and GFLOP/s per rank.
// Then the mirror, GEMM + reduce-scatter (tle::ops::GemmReduceScatter), on the same shapes with m
// as the output rows per rank.
#include <tle/ops/all_gather_gemm.hpp>
#include <tle/ops/gemm_reduce_scatter.hpp>
#include <tle/tle.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "common.hpp"

namespace {

struct AgShape {
  int m, n, k;
};

bool run(tle::Mesh& mesh, const AgShape& s, int reps) {
  using namespace tle;
  const int ranks = mesh.size();
  ops::AllGatherGemm<bf16> ag(mesh, s.m, s.n, s.k);
  auto a = mesh.alloc_symmetric<bf16>(size_t(s.m) * s.k);
  auto b = mesh.alloc_symmetric<bf16>(size_t(s.k) * s.n);
  auto c = mesh.alloc_symmetric<bf16>(size_t(ranks) * s.m * s.n);
  std::vector<std::vector<bf16>> ha(ranks), hb(ranks);
  for (int r = 0; r < ranks; ++r) {
    for (float v : ex::random_vector(size_t(s.m) * s.k, 10 + r)) ha[r].push_back(bf16(v));
    for (float v : ex::random_vector(size_t(s.k) * s.n, 20 + r)) hb[r].push_back(bf16(v));
    a.copy_from_host(r, ha[r].data(), ha[r].size());
    b.copy_from_host(r, hb[r].data(), hb[r].size());
  }
  auto call = [&](int times) {
    mesh.run([&](Rank& r) {
      for (int i = 0; i < times; ++i) ag(r, r.local(a), r.local(b), r.local(c));
    });
  };
  call(1);  // compiles; the first call's epoch
  const auto t0 = std::chrono::steady_clock::now();
  call(reps);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
  bool ok = true;
  for (int r = 0; r < ranks; ++r) {
    std::vector<bf16> got(size_t(ranks) * s.m * s.n);
    c.copy_to_host(r, got.data(), got.size());
    double worst = 0;
    for (int i = 0; i < 256; ++i) {
      const size_t row = (size_t(i) * 7919) % (size_t(ranks) * s.m), col = (size_t(i) * 104729) % size_t(s.n);
      double want = 0;
      for (int kk = 0; kk < s.k; ++kk)
        want += double(float(ha[row / s.m][(row % s.m) * s.k + kk])) * double(float(hb[r][size_t(kk) * s.n + col]));
      const double err = std::fabs(double(float(got[row * s.n + col])) - want) / (1 + std::fabs(want));
      worst = std::max(worst, err);
    }
    ok = ok && worst < 2e-2;
    if (worst >= 2e-2) std::printf("  rank %d: worst relative error %.3g\n", r, worst);
  }
  const double flops = 2.0 * ranks * s.m * double(s.n) * s.k;
  std::printf("all_gather_gemm %d ranks, per rank m %d k %d n %d: %.3f ms per call, %.1f GFLOP/s per rank (%s)\n",
              ranks, s.m, s.k, s.n, ms, flops / ms / 1e6, ok ? "ok" : "WRONG");
  return ok;
}

/// GEMM + reduce-scatter on the same shape: rank r's A [ranks * m, k] and B [k, n] (its slice of
/// the contraction), C_r = rows [r m, (r + 1) m) of the sum over ranks.
bool run_reduce_scatter(tle::Mesh& mesh, const AgShape& s, int reps) {
  using namespace tle;
  const int ranks = mesh.size();
  ops::GemmReduceScatter<bf16> rs(mesh, s.m, s.n, s.k);
  auto a = mesh.alloc_symmetric<bf16>(size_t(ranks) * s.m * s.k);
  auto b = mesh.alloc_symmetric<bf16>(size_t(s.k) * s.n);
  auto c = mesh.alloc_symmetric<bf16>(size_t(s.m) * s.n);
  std::vector<std::vector<bf16>> ha(ranks), hb(ranks);
  for (int r = 0; r < ranks; ++r) {
    for (float v : ex::random_vector(size_t(ranks) * s.m * s.k, 30 + r)) ha[r].push_back(bf16(v));
    for (float v : ex::random_vector(size_t(s.k) * s.n, 40 + r)) hb[r].push_back(bf16(v));
    a.copy_from_host(r, ha[r].data(), ha[r].size());
    b.copy_from_host(r, hb[r].data(), hb[r].size());
  }
  auto call = [&](int times) {
    mesh.run([&](Rank& r) {
      for (int i = 0; i < times; ++i) rs(r, r.local(a), r.local(b), r.local(c));
    });
  };
  call(1);
  const auto t0 = std::chrono::steady_clock::now();
  call(reps);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
  bool ok = true;
  for (int r = 0; r < ranks; ++r) {
    std::vector<bf16> got(size_t(s.m) * s.n);
    c.copy_to_host(r, got.data(), got.size());
    double worst = 0;
    for (int i = 0; i < 256; ++i) {
      const size_t row = (size_t(i) * 7919) % size_t(s.m), col = (size_t(i) * 104729) % size_t(s.n);
      double want = 0;
      for (int q = 0; q < ranks; ++q)
        for (int kk = 0; kk < s.k; ++kk)
          want += double(float(ha[q][(size_t(r) * s.m + row) * s.k + kk])) * double(float(hb[q][size_t(kk) * s.n + col]));
      worst = std::max(worst, std::fabs(double(float(got[row * s.n + col])) - want) / (1 + std::fabs(want)));
    }
    ok = ok && worst < 2e-2;
    if (worst >= 2e-2) std::printf("  rank %d: worst relative error %.3g\n", r, worst);
  }
  const double flops = 2.0 * ranks * s.m * double(s.n) * s.k;
  std::printf("gemm_reduce_scatter %d ranks, per rank m %d (output rows) k %d n %d: %.3f ms per call, %.1f GFLOP/s "
              "per rank (%s)\n",
              ranks, s.m, s.k, s.n, ms, flops / ms / 1e6, ok ? "ok" : "WRONG");
  return ok;
}

}  // namespace

static int example(int argc, char** argv) {
  using namespace tle;
  const Backend backend = ex::announce_backend("all_gather_gemm");
  std::vector<int> devices;
  if (backend == Backend::GPU) {
    for (int d = 0; gpu_info(d); ++d) devices.push_back(d);
    if (devices.size() == 1) {
      devices.push_back(0);
      std::printf("all_gather_gemm: one GPU: 2 ranks on device 0 (no peer link: the time is not the overlap's)\n");
    }
  }
  Mesh mesh = backend == Backend::GPU ? Mesh::gpus(devices) : Mesh::cpu(2);
  std::vector<AgShape> shapes = {{250, 1000, 384}};
  if (ex::has_flag(argc, argv, "--gpu-sizes")) shapes = {{4096, 14336, 8192}, {1024, 28672, 8192}, {128, 14336, 8192}};
  bool ok = true;
  for (const AgShape& s : shapes) {
    ok = run(mesh, s, backend == Backend::GPU ? 10 : 2) && ok;
    ok = run_reduce_scatter(mesh, s, backend == Backend::GPU ? 10 : 2) && ok;
  }
  return ok ? 0 : 1;
}

int main(int argc, char** argv) { return ex::guarded(argc, argv, example); }
