// src/runtime/autotune/tuner.cpp - the autotuned callable's core: cache lookups (memory, then
// disk), the probe of a config (trace for the cache key, compile for pruning), measurement (CUDA
// events on a private stream with an L2 flush; wall clock on the host), progress, and the search
// (search.cpp) ranked by the model (model.cpp).
#include <fmt/format.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/TargetParser/Host.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <set>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>

#include "runtime/autotune/tune.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/mesh.hpp"
#include "runtime/disk_cache.hpp"
#include "runtime/launch.hpp"
#include "tle/detail/trace_api.hpp"

namespace tle::detail {

namespace {
using tune::kFailed;
using tune::quiet;

constexpr size_t kFlushBytes = size_t(256) << 20;  // larger than any GPU's L2 (H200: 50 MB)
constexpr double kClockWarmMs = 30;  // warm_clocks: wall time of a warm-up (ms)
constexpr double kIdleMs = 100;      // warm_clocks: a GPU not timed for this long is warmed up again (ms)

/// The progress line on stderr (only when stderr is a terminal and TLE_QUIET is not 1).
class Progress {
 public:
  Progress(std::string what) : what_(std::move(what)), on_(!quiet() && ::isatty(2)) {}
  void start(uint64_t total) { total_ = total, t0_ = std::chrono::steady_clock::now(); }
  void step(double best_ms, const Config& best) {
    ++done_;
    if (!on_) return;
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    const double eta = done_ ? el / double(done_) * double(total_ > done_ ? total_ - done_ : 0) : 0;
    std::fprintf(stderr, "\r\033[Ktle: tuning %s: %llu/%llu configs, best %s (%s), ETA %.0f s", what_.c_str(),
                 static_cast<unsigned long long>(done_), static_cast<unsigned long long>(total_),
                 best_ms < kFailed ? fmt::format("{:.4f} ms", best_ms).c_str() : "-", best.str().c_str(), eta);
    std::fflush(stderr);
  }
  ~Progress() {
    if (on_ && done_) std::fprintf(stderr, "\n");
  }

 private:
  std::string what_;
  bool on_;
  uint64_t total_ = 0, done_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

/// "<device> | driver <version>" for cache keys.
std::string device_identity(Backend b) {
  if (b == Backend::GPU) {
    auto info = gpu_info(0);
    if (info) return fmt::format("gpu {} sm_{} | driver {}", info->name, info->sm, info->driver_version);
    return "gpu ?";
  }
  if (b == Backend::Interp) return "interp";
  return fmt::format("cpu {} x{}", llvm::sys::getHostCPUName().str(), std::max(1u, std::thread::hardware_concurrency()));
}

void check_cu(CUresult r, const char* call) { cuda::check(r, call); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
}  // namespace

/// Compiles configs ahead of their measurement on one thread of its own (SearchOptions::prepare
/// queues them): the compile probe of config i + 1 runs while config i is timed. One thread, not a
/// pool: tle compiles one kernel's specializations under one lock (kernel.cpp, compile_mu), while
/// launches of compiled specializations do not take it. The result of each probe (its stats, or
/// the error it threw) waits in `done` for measure().
class CompileAhead {
 public:
  struct Result {
    std::vector<KernelStatsData> stats;
    std::string error;  ///< what the probe threw ("" when it compiled)
  };
  using Probe = std::function<Result(const Config&)>;

  /// `init` runs first on the thread (making the tuner's CUDA context current there).
  CompileAhead(Probe probe, std::function<void()> init)
      : probe_(std::move(probe)), init_(std::move(init)), worker_([this] { work(); }) {}
  ~CompileAhead() {
    {
      std::lock_guard lk(m_);
      stop_ = true;
      queue_.clear();
    }
    cv_.notify_all();
    worker_.join();
  }
  /// Queues the search's next batch. It supersedes the configs still waiting (not yet compiling):
  /// the search has moved on (a local-search step announces its next few neighbours and drops the
  /// rest when it moves); any of them it measures later compiles then.
  void enqueue(const std::vector<Config>& cs) {
    {
      std::lock_guard lk(m_);
      std::set<std::string> batch;
      for (auto& c : cs) batch.insert(c.str());
      for (auto it = queue_.begin(); it != queue_.end();)
        if (!batch.count(it->str())) queued_.erase(it->str()), it = queue_.erase(it);
        else ++it;
      for (auto& c : cs)
        if (!done_.count(c.str()) && !queued_.count(c.str())) queue_.push_back(c), queued_.insert(c.str());
    }
    cv_.notify_all();
  }
  /// The probe's result for c: waits while it is queued or compiling; runs it here when it is
  /// neither (a config the search did not announce).
  Result take(const Config& c) {
    std::unique_lock lk(m_);
    const std::string k = c.str();
    cv_.wait(lk, [&] { return done_.count(k) || (!queued_.count(k)); });
    if (auto it = done_.find(k); it != done_.end()) {
      Result r = std::move(it->second);
      done_.erase(it);
      return r;
    }
    lk.unlock();
    return probe_(c);
  }

 private:
  void work() {
    if (init_) try {
        init_();
      } catch (...) {  // a probe then reports what fails
      }
    std::unique_lock lk(m_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      Config c = std::move(queue_.front());
      queue_.pop_front();
      lk.unlock();
      Result r = probe_(c);
      lk.lock();
      const std::string k = c.str();
      queued_.erase(k);
      done_[k] = std::move(r);
      cv_.notify_all();
    }
  }
  Probe probe_;
  std::function<void()> init_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<Config> queue_;
  std::set<std::string> queued_;  // queued or compiling
  std::map<std::string, Result> done_;
  bool stop_ = false;
  std::thread worker_;  // last: starts after the members it uses
};

class TunerCore {
 public:
  std::string name;
  Space space;
  AutotuneOptions opts;
  SrcLoc loc;
  std::mutex mu;  // the in-memory cache and tuning (one key tuned at a time)
  std::unordered_map<std::string, Config> cache;
  std::optional<Config> forced;
  TuneReport last;
  // GPU measurement resources, made on first use.
  CUstream stream = nullptr;
  CUdeviceptr flush = 0;

  ~TunerCore() {
    if (const cuda::Driver* d = stream || flush ? cuda::driver() : nullptr) {
      if (flush) d->cuMemFree(flush);
      if (stream) d->cuStreamDestroy(stream);
    }
  }

  Config select(const std::string& key, const std::vector<int64_t>& key_numbers,
                const std::function<void(const Config&)>& run, const std::function<std::vector<Region>()>& regions) {
    std::lock_guard lk(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
    // Inside Mesh::run every rank would measure on its own, a different number of launches each,
    // and a mesh kernel's flags and barriers would drift apart between the ranks.
    if (current_mesh_rank())
      throw UserError(loc, fmt::format("autotuned kernel '{}' needs tuning for key {} on a rank's thread inside "
                                       "Mesh::run, where each rank would measure on its own; tune it before run (a "
                                       "launch outside the mesh fills the cache) or force a config "
                                       "(tle::autotune_config)",
                                       name, key));
    const auto t0 = std::chrono::steady_clock::now();
    last = TuneReport{};
    last.key = key;
    last.space_size = space.size();
    const char* env = std::getenv("TLE_AUTOTUNE");
    const std::string mode = env && *env ? env : "1";
    if (mode != "0" && mode != "1" && mode != "force")
      throw UserError(loc, fmt::format("TLE_AUTOTUNE={}: use 0 (no tuning: the forced or first valid config), 1 "
                                       "(tune on a cache miss, the default) or force (retune)",
                                       mode));
    if (forced || mode == "0") {
      last.best = forced ? *forced : first_valid();
      return cache[key] = last.best;
    }
    const Backend backend = opts.backend ? *opts.backend : default_backend();
    const std::vector<Config> cands = candidates();
    // The cache key: the traced IR of what the launcher runs (probed with the first candidate that
    // traces), the tuning key, the device and driver, tle's version.
    // When no candidate traces, the IR part of the key is empty and the search prunes them all
    // (reporting why).
    std::string ir_text;
    for (size_t i = 0; i < cands.size() && i < 8 && ir_text.empty(); ++i) {
      LaunchProbe p;
      p.mode = LaunchProbe::Trace;
      try {
        probe(p, cands[i], run, backend);
        ir_text = std::move(p.ir);
      } catch (const std::exception&) {
      }
    }
    const std::string ckey = fmt::format("{} | ir {} | key {} | {}{} | tle {}", name, DiskCache::key_hash(ir_text), key,
                                         device_identity(backend),
                                         backend == Backend::GPU ? " | " + gpu_compiler_switches() : std::string(),
                                         TLE_VERSION);
    const std::string dir = tune::tune_directory();
    if (mode != "force")
      if (auto e = tune::load(dir, ckey); e && in_domains(e->best) && space.valid(e->best)) {
        last.best = e->best, last.best_ms = e->best_ms, last.from_cache = true;
        last.lookup_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        return cache[key] = e->best;
      }
    tune_key(key, key_numbers, run, regions, backend, ckey, dir, ir_text, cands);
    return cache[key] = last.best;
  }

  /// Whether c has exactly the space's knobs, each with a value of its domain.
  bool in_domains(const Config& c) const {
    if (c.values().size() != space.knobs().size()) return false;
    for (auto& k : space.knobs())
      if (!c.has(k.name) || std::find(k.domain.begin(), k.domain.end(), c.get(k.name, 0)) == k.domain.end())
        return false;
    return true;
  }

  /// The valid configs after prune, or empty for spaces too large to enumerate (the GA samples).
  std::vector<Config> candidates() {
    if (space.size() > (uint64_t(1) << 22)) return {sample_valid()};
    std::vector<Config> v = space.enumerate();
    if (opts.prune && v.size() <= opts.exhaustive_limit) {
      v = opts.prune(std::move(v));
      if (v.empty())
        throw UserError(loc, fmt::format("autotune '{}': the prune hook returned no config; it must keep at least one",
                                         name));
    }
    return v;
  }
  Config sample_valid() const {
    std::mt19937_64 rng(opts.seed);
    for (int t = 0; t < 1000000; ++t) {
      Config c = space.config_at(rng() % space.size());
      if (space.valid(c)) return c;
    }
    throw UserError(loc, fmt::format("autotune '{}': no valid config found in 10^6 samples of {} configs; the "
                                     "constraints reject (nearly) everything",
                                     name, space.size()));
  }
  Config first_valid() {
    const auto c = candidates();
    return c.front();
  }

  void probe(LaunchProbe& p, Config c, const std::function<void(const Config&)>& run, Backend backend) {
    c.backend = static_cast<int>(backend);
    LaunchProbe* prev = set_launch_probe(&p);
    try {
      run(c);
    } catch (...) {
      set_launch_probe(prev);
      throw;
    }
    set_launch_probe(prev);
  }

  void tune_key(const std::string& key, const std::vector<int64_t>& key_numbers,
                const std::function<void(const Config&)>& run, const std::function<std::vector<Region>()>& regions, Backend backend,
                const std::string& ckey, const std::string& dir, const std::string& ir_text,
                const std::vector<Config>& cands) {
    const bool gpu = backend == Backend::GPU;
    std::optional<DeviceInfo> info;
    if (gpu) {
      cuda::ensure_context();
      info = gpu_info(0);
      const cuda::Driver& d = cuda::require_driver("autotune");
      if (!stream) check_cu(d.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
      if (!flush) check_cu(d.cuMemAlloc(&flush, kFlushBytes), "cuMemAlloc");
      // The private stream does not wait for the legacy default stream: let the work that wrote
      // the inputs finish first.
      check_cu(d.cuCtxSynchronize(), "cuCtxSynchronize");
    }
    // Outputs a benchmark run overwrites: saved now, restored after each config and at the end.
    std::vector<std::string> saved;
    auto copy = [&](void* dst, const void* src, size_t n) {
      if (gpu)
        check_cu(cuda::require_driver("autotune").cuMemcpy(reinterpret_cast<CUdeviceptr>(dst),
                                                            reinterpret_cast<CUdeviceptr>(src), n),
                 "cuMemcpy");
      else
        std::memcpy(dst, src, n);
    };
    const std::vector<Region> rs = regions ? regions() : std::vector<Region>();
    for (auto& r : rs) {
      saved.emplace_back(r.bytes, '\0');
      copy(saved.back().data(), r.ptr, r.bytes);
    }
    auto restore = [&] {
      for (size_t i = 0; i < rs.size(); ++i) copy(rs[i].ptr, saved[i].data(), rs[i].bytes);
    };

    const std::vector<float> irf = tune::ir_features(ir_text);
    tune::SearchOptions so;
    so.exhaustive_limit = opts.exhaustive_limit, so.budget = opts.budget, so.seed = opts.seed;
    so.patience = opts.patience;
    const bool small = space.size() <= (uint64_t(1) << 22) && cands.size() <= opts.exhaustive_limit;
    if (small) so.candidates = cands;
    // The ranking model: trained on every measurement of this device in the tuning cache.
    std::optional<tune::Model> model;
    if (!small) {
      if (!tune::xgboost()) {
        static std::once_flag once;
        std::call_once(once, [] {
          if (!quiet())
            std::fprintf(stderr, "tle: autotune: %s; the search runs without a ranking model\n",
                         tune::why_no_xgboost().c_str());
        });
      } else {
        // Measurements of this device only (FlagTune's models are per platform too).
        std::vector<tune::Group> groups;
        const std::string device = " | " + device_identity(backend) + " | ";
        for (auto& e : tune::load_all(dir)) {
          if (e.key.find(device) == std::string::npos) continue;
          groups.push_back(tune::group_of(e));
        }
        model = tune::Model::train(groups);
      }
    }
    tune::Ranker ranker;
    if (model) ranker = tune::model_ranker(*model, irf, key_numbers, space);
    last.used_model = static_cast<bool>(model);

    // The compile probe of one config: its launches compiled, not run (on the calling thread).
    auto compile_probe = [&](const Config& c0) {
      Config c = c0;
      c.backend = static_cast<int>(backend);
      CompileAhead::Result r;
      try {
        LaunchProbe p;
        p.mode = LaunchProbe::Compile;
        probe(p, c, run, backend);
        r.stats = std::move(p.stats);
      } catch (const std::exception& e) {
        r.error = e.what();
        if (r.error.empty()) r.error = "failed to compile";
      } catch (...) {  // the probe may run on the compile thread: nothing may escape it
        r.error = "the launcher threw a non-standard exception";
      }
      return r;
    };
    // Compiles run ahead of measurement on the GPU (host compiles overlap GPU timing); on the host
    // they would compete with the timed runs for the cores (AutotuneOptions::compile_ahead).
    std::optional<CompileAhead> ahead;
    if (opts.compile_ahead == 1 || (opts.compile_ahead < 0 && gpu)) {
      CUcontext ctx = gpu ? cuda::ensure_context() : nullptr;
      ahead.emplace(compile_probe, [ctx] {
        if (ctx) check_cu(cuda::require_driver("autotune").cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
      });
      so.prepare = [&](const std::vector<Config>& cs) { ahead->enqueue(cs); };
    }
    Progress progress(fmt::format("{} [{}]", name, key));
    Config best_c;
    double best_t = kFailed;
    auto measure = [&](const Config& c0, double best) -> double {
      Config c = c0;
      c.backend = static_cast<int>(backend);
      c.stream = gpu ? stream : nullptr;
      double t = kFailed;
      try {
        const CompileAhead::Result compiled = ahead ? ahead->take(c) : compile_probe(c);
        if (!compiled.error.empty()) throw RuntimeError("compile", compiled.error);
        if (gpu && info)
          for (auto& s : compiled.stats) {
            if (static_cast<size_t>(s.shared_bytes) > info->shared_mem_per_block_optin)
              throw RuntimeError("autotune", fmt::format("needs {} bytes of shared memory, the GPU has {}",
                                                         s.shared_bytes, info->shared_mem_per_block_optin));
            if (s.registers * 32 * s.num_warps > info->regs_per_block)
              throw RuntimeError("autotune", fmt::format("needs {} registers per thread x {} threads, more than the "
                                                         "{} of a block",
                                                         s.registers, 32 * s.num_warps, info->regs_per_block));
          }
        t = gpu ? time_gpu(c, run, best) : time_host(c, run, best);
        restore();
      } catch (const std::exception& e) {
        ++last.pruned;
        last.prune_reasons.push_back(fmt::format("{}: {}", c.str(), e.what()));
        try {
          restore();
        } catch (...) {
        }
        t = kFailed;
      }
      if (t < best_t) best_t = t, best_c = c0;
      progress.step(best_t, best_c);
      return t;
    };
    const tune::SearchResult r = tune::search(space, so, measure, ranker, [&](uint64_t n) { progress.start(n); });
    // Launches after tuning go to the caller's stream, which does not wait for the private one.
    if (gpu) check_cu(cuda::require_driver("autotune").cuStreamSynchronize(stream), "cuStreamSynchronize");
    last.valid = r.valid;
    last.measured = static_cast<int>(r.measured.size());
    last.times = r.measured;
    if (!(r.best_time < kFailed)) {
      std::string why;
      for (size_t i = 0; i < last.prune_reasons.size() && i < 4; ++i) why += "\n  " + last.prune_reasons[i];
      throw UserError(loc, fmt::format("autotune '{}': no config ran for key {} ({} tried, all pruned):{}", name, key,
                                       r.measured.size(), why));
    }
    last.best = r.best;
    last.best_ms = r.best_time;
    tune::Entry e;
    e.key = ckey, e.kernel = name, e.ir = irf, e.key_numbers = key_numbers, e.best = r.best, e.best_ms = r.best_time;
    for (auto& k : space.knobs()) e.knobs.push_back(k.name);
    e.measured = r.measured;
    tune::store(dir, e);
  }

  double time_host(const Config& c, const std::function<void(const Config&)>& run, double best) {
    for (int i = 0; i < opts.warmup; ++i) run(c);
    std::vector<double> ts;
    for (int i = 0; i < std::max(1, opts.repeats); ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      run(c);
      ts.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      if (ts.size() >= 2 && *std::min_element(ts.begin(), ts.end()) > opts.abort_ratio * best) break;
    }
    return median(ts);
  }

  /// Before timing on a GPU that has been idle (no timing by this process in the last
  /// kIdleMs - its first, or after the host worked for a while, e.g. a benchmark computing its
  /// references): L2 flushes (memsets) for kClockWarmMs of wall time, so that the config is not
  /// timed while the clocks ramp up from idle (a fresh process once timed its first config at 120
  /// us and the same kernels at 72.6 us a few configs later, H100, 2026-12-07; Triton's do_bench
  /// warms up for 25 ms likewise).
  void warm_clocks(const cuda::Driver& d) {
    using clock = std::chrono::steady_clock;
    static std::mutex mu;
    static clock::time_point last{};
    std::lock_guard<std::mutex> lock(mu);
    const auto ms_since = [](clock::time_point t) {
      return std::chrono::duration<double, std::milli>(clock::now() - t).count();
    };
    if (last != clock::time_point{} && ms_since(last) < kIdleMs) {
      last = clock::now();
      return;
    }
    const auto t0 = clock::now();
    for (int i = 0; ms_since(t0) < kClockWarmMs; ++i) {
      check_cu(d.cuMemsetD8Async(flush, static_cast<unsigned char>(i), kFlushBytes, stream), "cuMemsetD8Async");
      check_cu(d.cuStreamSynchronize(stream), "cuStreamSynchronize");
    }
    last = clock::now();
  }

  double time_gpu(const Config& c, const std::function<void(const Config&)>& run, double best) {
    const cuda::Driver& d = cuda::require_driver("autotune");
    CUevent e0 = nullptr, e1 = nullptr;
    check_cu(d.cuEventCreate(&e0, CU_EVENT_DEFAULT), "cuEventCreate");
    check_cu(d.cuEventCreate(&e1, CU_EVENT_DEFAULT), "cuEventCreate");
    std::vector<double> ts;
    try {
      for (int i = 0; i < opts.warmup; ++i) run(c);
      warm_clocks(d);
      for (int i = 0; i < std::max(1, opts.repeats); ++i) {
        check_cu(d.cuMemsetD8Async(flush, static_cast<unsigned char>(i), kFlushBytes, stream), "cuMemsetD8Async");
        check_cu(d.cuEventRecord(e0, stream), "cuEventRecord");
        run(c);
        check_cu(d.cuEventRecord(e1, stream), "cuEventRecord");
        check_cu(d.cuEventSynchronize(e1), "cuEventSynchronize");
        float ms = 0;
        check_cu(d.cuEventElapsedTime(&ms, e0, e1), "cuEventElapsedTime");
        ts.push_back(ms);
        if (ts.size() >= 2 && *std::min_element(ts.begin(), ts.end()) > opts.abort_ratio * best) break;
      }
    } catch (...) {
      d.cuEventDestroy(e0), d.cuEventDestroy(e1);
      throw;
    }
    d.cuEventDestroy(e0), d.cuEventDestroy(e1);
    return median(ts);
  }

  void force(const Config& c, const SrcLoc& at) {
    std::vector<std::pair<std::string, int64_t>> v;
    for (auto& k : space.knobs()) {
      if (!c.has(k.name))
        throw UserError(at, fmt::format("autotune_config: knob '{}' of autotune '{}' has no value; give every knob "
                                        "of the space",
                                        k.name, name));
      const int64_t x = c.get(k.name, 0);
      if (std::find(k.domain.begin(), k.domain.end(), x) == k.domain.end())
        throw UserError(at, fmt::format("autotune_config: {}={} is not in the knob's domain (declared at line {})",
                                        k.name, x, k.loc.line));
      v.emplace_back(k.name, x);
    }
    for (auto& [n, x] : c.values()) {
      bool known = false;
      for (auto& k : space.knobs()) known |= k.name == n;
      if (!known)
        throw UserError(at, fmt::format("autotune_config: '{}' is not a knob of autotune '{}'", n, name));
    }
    Config cfg(std::move(v));
    for (auto& k : space.constraints()) {
      bool ok = false;
      try {
        ok = k.pred(cfg);
      } catch (...) {
      }
      if (!ok)
        throw UserError(at, fmt::format("autotune_config: {} breaks the constraint '{}' (line {})", cfg.str(), k.what,
                                        k.loc.line));
    }
    std::lock_guard lk(mu);
    forced = cfg;
    cache.clear();
  }
};

TunerCore* tuner_create(std::string name, Space space, AutotuneOptions opts, const SrcLoc& loc) {
  if (space.knobs().empty())
    throw UserError(loc, fmt::format("autotune '{}': the space has no knobs; declare them with Space::values or "
                                     "Space::pow2",
                                     name));
  auto t = std::make_unique<TunerCore>();
  t->name = std::move(name), t->space = std::move(space), t->opts = std::move(opts), t->loc = loc;
  // Some config must pass the constraints.
  if (t->space.size() <= (uint64_t(1) << 22)) {
    bool any = false;
    for (uint64_t i = 0; i < t->space.size() && !any; ++i) any = t->space.valid(t->space.config_at(i));
    if (!any) {
      std::string rules;
      for (auto& k : t->space.constraints()) rules += fmt::format("\n  '{}' (line {})", k.what, k.loc.line);
      throw UserError(loc, fmt::format("autotune '{}': the constraints reject all {} configs of the space; relax one "
                                       "of:{}",
                                       t->name, t->space.size(), rules));
    }
  } else {
    (void)t->sample_valid();
  }
  return t.release();
}

void tuner_destroy(TunerCore* t) noexcept { delete t; }

Config tuner_select(TunerCore* t, const std::string& key, const std::vector<int64_t>& key_numbers,
                    const std::function<void(const Config&)>& run, const std::function<std::vector<Region>()>& regions) {
  return t->select(key, key_numbers, run, regions);
}

void tuner_force(TunerCore* t, const Config& c, const SrcLoc& loc) { t->force(c, loc); }

TuneReport tuner_last_report(const TunerCore* t) {
  std::lock_guard lk(const_cast<TunerCore*>(t)->mu);
  return t->last;
}

const SrcLoc& tuner_loc(const TunerCore* t) { return t->loc; }

int tuner_backend(const TunerCore* t) { return t->opts.backend ? static_cast<int>(*t->opts.backend) : -1; }

std::string key_type_of(const HostArg& h) {
  if (h.kind != HostArg::Pointer || h.untyped_pointer) return "";
  return std::string(dtype_name(h.pointee)) + "*";
}

}  // namespace tle::detail
