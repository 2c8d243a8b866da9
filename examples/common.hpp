// examples/common.hpp - timing and checking helpers shared by the examples.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

namespace ex {

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

inline std::vector<float> random_vector(size_t n, unsigned seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
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
