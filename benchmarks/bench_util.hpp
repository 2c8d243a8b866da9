// benchmarks/bench_util.hpp - helpers of gpu_bench: JSON lines, CUDA-event timing with an L2
// flush between repetitions, random inputs, parallel host references and result checks.
//
// Timing method (the same as benchmarks/peers/peers.py, so ratios compare like with like):
//   1. one call (compiles), then an estimate from 3 calls, then warm-up calls worth ~25 ms
//      (at least 3, at most 50);
//   2. `reps` repetitions, each: write a 256 MB buffer (cuMemsetD32 on the legacy default stream,
//      which the blocking bench stream waits for) so L2 (50 MB on the H200) holds nothing of the
//      inputs; record a start event on the stream; the call; record a stop event;
//   3. one synchronize at the end; the per-repetition times are cuEventElapsedTime(start, stop), so
//      the flush is not timed. Reported: median, p10, p90, min, max.
// Only a kernel slower than 150 ms gets fewer than `reps` repetitions (15 s worth, at least 10).
#pragma once
#include <tle/tle.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/cuda/driver.hpp"

namespace bench {

// ------------------------------------------------------------------------------- JSON lines

inline std::string json_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size() + 8);
  for (unsigned char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\r': o += "\\r"; break;
      case '\t': o += "\\t"; break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          o += b;
        } else {
          o += char(c);
        }
    }
  }
  return o;
}

/// One JSON object, built field by field, printed as one line.
class Json {
 public:
  Json& str(const std::string& k, const std::string& v) { return raw(k, "\"" + json_escape(v) + "\""); }
  Json& num(const std::string& k, double v) {
    if (!std::isfinite(v)) return raw(k, "null");
    char b[64];
    std::snprintf(b, sizeof b, "%.6g", v);
    return raw(k, b);
  }
  Json& integer(const std::string& k, long long v) { return raw(k, std::to_string(v)); }
  Json& boolean(const std::string& k, bool v) { return raw(k, v ? "true" : "false"); }
  Json& obj(const std::string& k, const Json& o) { return raw(k, o.text()); }
  Json& raw(const std::string& k, const std::string& v) {
    s_ += (s_.empty() ? "" : ",") + ("\"" + json_escape(k) + "\":" + v);
    return *this;
  }
  bool empty() const { return s_.empty(); }
  std::string text() const { return "{" + s_ + "}"; }
  /// Prints the object as one line on stdout and flushes (a later crash keeps earlier lines).
  void print() const {
    std::fputs((text() + "\n").c_str(), stdout);
    std::fflush(stdout);
  }

 private:
  std::string s_;
};

inline std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

/// The message of an exception, with a RuntimeError's log (e.g. the driver's JIT log) appended and
/// the whole cut to `limit` characters.
inline std::string error_text(const std::exception& e, size_t limit = 1500) {
  std::string m = e.what();
  if (auto* r = dynamic_cast<const tle::RuntimeError*>(&e); r && !r->log().empty()) m += "\nlog: " + r->log();
  if (m.size() > limit) m = m.substr(0, limit) + "...";
  return m;
}

// ------------------------------------------------------------------------------- host helpers

/// Runs f(begin, end) over [0, n) split across the host's cores.
template <class F> void parallel_for(size_t n, F&& f) {
  unsigned t = std::max(1u, std::min(64u, std::thread::hardware_concurrency()));
  if (n < 65536 || t == 1) {
    f(size_t(0), n);
    return;
  }
  std::vector<std::thread> th;
  size_t chunk = (n + t - 1) / t;
  for (unsigned i = 0; i < t; ++i) {
    size_t a = i * chunk, b = std::min(n, a + chunk);
    if (a < b) th.emplace_back([&f, a, b] { f(a, b); });
  }
  for (auto& x : th) x.join();
}

/// Uniform in [lo, hi) from a counter-based hash of (seed, i), nudged away from zero so every
/// value is non-zero (|v| >= 2^-10 * (hi - lo)).
inline float random_at(unsigned seed, size_t i, float lo, float hi) {
  uint64_t z = (uint64_t(seed) << 40) + i + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  float v = lo + (hi - lo) * float(double(z >> 40) * 0x1.0p-24);
  float eps = (hi - lo) * 0x1.0p-10f;
  if (std::fabs(v) < eps) v = v < 0 ? -eps : eps;
  return v;
}

inline std::vector<float> random_f32(size_t n, unsigned seed, float lo = -1.f, float hi = 1.f) {
  std::vector<float> v(n);
  parallel_for(n, [&](size_t a, size_t b) {
    for (size_t i = a; i < b; ++i) v[i] = random_at(seed, i, lo, hi);
  });
  return v;
}

/// float -> bf16, round to nearest even (inputs here are finite).
inline tle::bf16 to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return tle::bf16::from_bits(uint16_t(u >> 16));
}
inline float from_bf16(tle::bf16 h) {
  uint32_t u = uint32_t(h.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float to_float(float f) { return f; }
inline float to_float(tle::bf16 h) { return from_bf16(h); }

inline std::vector<tle::bf16> random_bf16(size_t n, unsigned seed, float lo = -1.f, float hi = 1.f) {
  std::vector<tle::bf16> v(n);
  parallel_for(n, [&](size_t a, size_t b) {
    for (size_t i = a; i < b; ++i) {
      tle::bf16 h = to_bf16(random_at(seed, i, lo, hi));
      if ((h.bits & 0x7fff) == 0) h = to_bf16(lo < 0 ? -0.25f : 0.25f);
      v[i] = h;
    }
  });
  return v;
}

/// Result of comparing a kernel's output with a reference.
struct Check {
  bool ok = true;
  size_t bad = 0, n = 0;
  double max_abs_err = 0;
  std::string message;  ///< empty when ok
};

/// Compares got(i) with want(i) for i in [0, n): |got - want| <= atol + rtol * |want| (NaN fails).
template <class G, class W> Check compare(size_t n, G&& got, W&& want, double rtol, double atol) {
  unsigned t = std::max(1u, std::min(64u, std::thread::hardware_concurrency()));
  struct Part {
    size_t bad = 0, first = SIZE_MAX;
    double worst = 0;
  };
  std::vector<Part> parts(t);
  size_t chunk = (n + t - 1) / t;
  std::vector<std::thread> th;
  for (unsigned p = 0; p < t; ++p) {
    th.emplace_back([&, p] {
      Part& r = parts[p];
      size_t a = p * chunk, b = std::min(n, a + chunk);
      for (size_t i = a; i < b; ++i) {
        double g = got(i), w = want(i), err = std::fabs(g - w);
        if (!(err <= atol + rtol * std::fabs(w))) {
          if (r.first == SIZE_MAX) r.first = i;
          ++r.bad;
        }
        if (err > r.worst || std::isnan(err)) r.worst = std::isnan(err) ? INFINITY : err;
      }
    });
  }
  for (auto& x : th) x.join();
  Check c;
  c.n = n;
  size_t first = SIZE_MAX;
  for (auto& r : parts) {
    c.bad += r.bad;
    c.max_abs_err = std::max(c.max_abs_err, r.worst);
    if (r.first < first) first = r.first;
  }
  c.ok = c.bad == 0 && n > 0;
  if (!c.ok) {
    std::ostringstream o;
    if (n == 0) o << "nothing compared";
    else
      o << "reference check failed: " << c.bad << " of " << n << " values off (first at " << first << ": got "
        << got(first) << ", want " << want(first) << "), max abs error " << c.max_abs_err;
    c.message = o.str();
  }
  return c;
}

// ------------------------------------------------------------------------------- timing

/// Per-repetition kernel times in milliseconds, summarized.
struct Timing {
  double median = NAN, p10 = NAN, p90 = NAN, min = NAN, max = NAN;
  int reps = 0, warmup = 0;
  /// (p90 - p10) / median: the relative spread reported as tle_spread.
  double spread() const { return (p90 - p10) / median; }
};

inline Timing summarize(std::vector<double> t, int warmup) {
  Timing r;
  if (t.empty()) return r;
  std::sort(t.begin(), t.end());
  auto q = [&](double p) { return t[std::min(t.size() - 1, size_t(p * double(t.size() - 1) + 0.5))]; };
  r.median = t.size() % 2 ? t[t.size() / 2] : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]);
  r.p10 = q(0.10), r.p90 = q(0.90), r.min = t.front(), r.max = t.back(), r.reps = int(t.size());
  r.warmup = warmup;
  return r;
}

/// CUDA-event timer on one blocking stream, with a 256 MB L2-flush buffer.
class Timer {
 public:
  explicit Timer(int reps) : reps_(reps), d_(tle::cuda::require_driver("gpu_bench")) {
    tle::cuda::ensure_context();
    flush_ = tle::DeviceBuffer<uint32_t>(size_t(64) << 20);  // 256 MB
  }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  const tle::cuda::Driver& driver() const { return d_; }
  tle::Stream& stream() { return stream_; }
  CUstream cu_stream() const { return static_cast<CUstream>(stream_.handle()); }
  int reps() const { return reps_; }

  /// Overwrites the 256 MB flush buffer (legacy default stream; the bench stream is blocking, so
  /// it is ordered between the surrounding stream work). Not timed.
  void flush_l2() {
    tle::cuda::check(d_.cuMemsetD32(flush_.device_ptr(), ++flush_value_, flush_.size()), "cuMemsetD32");
  }

  /// Times `f` (which queues GPU work on stream(); or, with on_legacy, on the legacy default
  /// stream, whose work the events on the blocking stream still bracket) as described at the top
  /// of this file. `reps` 0 means the timer's default.
  Timing time(const std::function<void()>& f, int reps = 0) {
    if (reps <= 0) reps = reps_;
    f();
    stream_.synchronize();
    tle::synchronize();
    // Estimate, then warm up for ~25 ms (3..50 calls).
    CUevent a = event(), b = event();
    record(a);
    for (int i = 0; i < 3; ++i) f();
    record(b);
    tle::cuda::check(d_.cuEventSynchronize(b), "cuEventSynchronize");
    float est = 0;
    tle::cuda::check(d_.cuEventElapsedTime(&est, a, b), "cuEventElapsedTime");
    est /= 3;
    int warm = std::clamp(int(25.0 / std::max(est, 1e-3f)), 3, 50);
    // A very slow kernel (over 150 ms) gets fewer repetitions (at least 10) so that one case
    // cannot take the group's whole time limit; the count is reported as "reps".
    if (est > 0 && reps * double(est) > 15000.0) reps = std::max(10, int(15000.0 / est));
    for (int i = 0; i < warm; ++i) f();
    std::vector<CUevent> start(reps), stop(reps);
    for (int i = 0; i < reps; ++i) start[i] = event(), stop[i] = event();
    for (int i = 0; i < reps; ++i) {
      flush_l2();
      record(start[i]);
      f();
      record(stop[i]);
    }
    stream_.synchronize();
    tle::synchronize();
    std::vector<double> ms(reps);
    for (int i = 0; i < reps; ++i) {
      float x = 0;
      tle::cuda::check(d_.cuEventElapsedTime(&x, start[i], stop[i]), "cuEventElapsedTime");
      ms[i] = x;
    }
    for (CUevent e : events_) d_.cuEventDestroy(e);
    events_.clear();
    return summarize(ms, warm);
  }

 private:
  CUevent event() {
    CUevent e = nullptr;
    tle::cuda::check(d_.cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
    events_.push_back(e);
    return e;
  }
  void record(CUevent e) { tle::cuda::check(d_.cuEventRecord(e, cu_stream()), "cuEventRecord"); }

  int reps_;
  const tle::cuda::Driver& d_;
  tle::Stream stream_{false};
  tle::DeviceBuffer<uint32_t> flush_;
  uint32_t flush_value_ = 0;
  std::vector<CUevent> events_;
};

/// Median of host wall-clock samples.
inline double median_of(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

using clk = std::chrono::steady_clock;
inline double ms_since(clk::time_point a) { return std::chrono::duration<double, std::milli>(clk::now() - a).count(); }

}  // namespace bench
