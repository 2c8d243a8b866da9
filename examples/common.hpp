// examples/common.hpp - timing, checking and backend helpers shared by the examples.
//
// Every example runs on tle::default_backend(): the GPU when a CUDA driver and device are usable
// (TLE_BACKEND=cpu|gpu forces one). On the GPU it copies inputs into tle::DeviceBuffers, launches
// (asynchronously), synchronizes and copies results back; `--gpu-sizes` selects the larger problem
// sizes of the GPU-backend issue.
#pragma once
#include <tle/tle.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

namespace ex {

/// Runs an example's body and turns an escaping tle error into a message and exit status 1 (a
/// RuntimeError's log, e.g. the driver's JIT log, is printed too).
inline int guarded(int argc, char** argv, int (*body)(int, char**)) {
  try {
    return body(argc, argv);
  } catch (const tle::RuntimeError& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    if (!e.log().empty()) std::fprintf(stderr, "%s\n", e.log().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
  }
  return 1;
}

/// Whether `flag` (e.g. "--gpu-sizes") is among the command-line arguments.
inline bool has_flag(int argc, char** argv, const char* flag) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], flag) == 0) return true;
  return false;
}

/// The backend this run uses, printed once ("<example>: backend gpu (NVIDIA H200, sm_90)").
inline tle::Backend announce_backend(const char* example) {
  tle::Backend b = tle::default_backend();
  if (b == tle::Backend::GPU) {
    auto info = tle::gpu_info();
    std::printf("%s: backend gpu (%s, sm_%d)\n", example, info ? info->name.c_str() : "?", info ? info->sm : 0);
  } else {
    std::printf("%s: backend cpu\n", example);
  }
  return b;
}

/// Median wall time in milliseconds of `reps` runs of GPU work `f` (asynchronous launches), each
/// bracketed by tle::synchronize(), after one warm-up run (which also compiles).
inline double time_gpu_ms(const std::function<void()>& f, int reps = 10) {
  f();
  tle::synchronize();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto a = std::chrono::steady_clock::now();
    f();
    tle::synchronize();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/// Median wall time in milliseconds of `reps` runs of f after one warm-up run (which also compiles).
inline double time_ms(const std::function<void()>& f, int reps = 10) {
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/// n uniform values in [lo, hi) from a counter-based hash (fast enough for the 2^28-element GPU
/// sizes; the same values on every run).
inline std::vector<float> random_vector(size_t n, unsigned seed, float lo = -1.f, float hi = 1.f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    uint64_t z = (uint64_t(seed) << 40) + i + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    v[i] = lo + (hi - lo) * float(double(z >> 40) * 0x1.0p-24);
  }
  return v;
}

/// Compares got against want with a mixed tolerance; prints the verdict and returns it.
inline bool check(const char* what, const std::vector<float>& got, const std::vector<float>& want, double rtol,
                  double atol) {
  double worst = 0;
  size_t bad = 0, at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double err = std::fabs(double(got[i]) - double(want[i]));
    double tol = atol + rtol * std::fabs(double(want[i]));
    if (!(err <= tol)) {
      if (!bad) at = i;
      ++bad;
    }
    worst = std::max(worst, err);
  }
  if (bad)
    std::printf("%-28s FAILED: %zu of %zu elements off (first at %zu: got %g, want %g), max abs error %.3g\n", what,
                bad, got.size(), at, got[at], want[at], worst);
  else
    std::printf("%-28s reference check passed (max abs error %.3g)\n", what, worst);
  return bad == 0;
}

}  // namespace ex
