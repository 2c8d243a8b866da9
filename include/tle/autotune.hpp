// tle/autotune.hpp - choosing a kernel's knobs (block sizes, num_warps, num_stages, maxnreg) by
// measuring them, per tuning key, with a cache on disk.
//
//   auto rowsum = tle::jit("rowsum", [](tle::Ptr<float> x, tle::Ptr<float> out, tle::Tile<int32_t> n,
//                                       tle::Constexpr<int> BLOCK) { ... });
//   tle::Space space;
//   space.pow2("BLOCK", 32, 1024).values("num_warps", {2, 4, 8})
//        .constraint("BLOCK / num_warps >= 16", [](const tle::Config& c) { return c["BLOCK"] / c["num_warps"] >= 16; });
//   auto tuned = tle::autotune("rowsum", space,
//       [](const float*, float*, int rows, int n) { return tle::TuneKey().add("n", tle::pow2_bucket(n)); },
//       [&](const tle::Config& c, const float* x, float* out, int rows, int n) {
//         rowsum(c.grid(rows), x, out, n, int(c["BLOCK"]));
//       });
//   tuned(x, out, rows, n);   // first call for a key: tunes; later calls: the cached config
//
// This is Triton's @autotune (python/triton/runtime/autotuner.py) in C++: the `launch` function
// plays the kernel with its configs (the grid depends on the config, so the launcher builds it:
// Config::grid applies the num_warps / num_stages / maxnreg knobs and, while tuning, the tuner's
// private stream), `key` is Triton's key= (shape buckets; the element types of pointer arguments
// are added to the key automatically, as Triton adds str(dtype) of tensor arguments), `prune` is
// early_config_prune and `restore` is restore_value. The search follows FlagTune (FlagTree PRs
// #782/#850): exhaustive for small spaces, else a start spread over the space, a genetic algorithm
// (budgets of 32 and more) and a local search, ranked by an XGBoost rank:pairwise model trained on
// every measurement tle has stored for this device (docs/autotune.md lists the features; with the
// model the search starts from its favourites and stops early: AutotuneOptions::patience);
// libxgboost is opened with dlopen ($TLE_LIBXGBOOST, else libxgboost.so.0), and without it the
// search runs without the model (one notice on stderr).
//
// Measurement: on the GPU, CUDA events on a private stream, `warmup` runs, then `repeats` timed
// runs each after an L2 flush (a 256 MB memset), the median (a timing after 100 ms without one
// starts with 30 ms of flushes, so the clocks have ramped up from idle); a config whose fastest run is
// `abort_ratio` times slower than the best median so far stops early. On the CPU backend and the
// interpreter, wall-clock time of the same calls (no flush). Before any timing every config is
// compiled (its launches are compiled, not run); a config whose compile throws (UserError,
// RuntimeError) or that exceeds the GPU's shared memory or registers is pruned and reported, not
// fatal. On the GPU the next configs compile on a tuner thread while the current one is timed
// (AutotuneOptions::compile_ahead); one thread, not a pool: tle compiles one kernel's
// specializations under one lock (src/runtime/kernel.cpp, compile_mu).
//
// Cache: the best config and every measurement of a (kernel, key) are stored in
// <TLE_CACHE_DIR>/tune/ (next to the kernel cache; src/runtime/disk_cache.hpp names the directory),
// keyed by the hash of the traced IR of the kernels the launcher runs, the tuning key, the device
// (GPU name, or the host CPU) and driver, on the GPU the compiler's environment switches
// (TLE_WARP_SPECIALIZE, TLE_REORDER_LOADS, TLE_TMA), and the tle version; atomic writes; a damaged entry is
// ignored with a notice. TLE_AUTOTUNE=0 uses the forced config (autotune_config) or the first
// valid config without measuring; 1 (default) tunes on a miss; force retunes once per key and
// process, ignoring the disk. Progress on stderr while tuning when it is a terminal and TLE_QUIET
// is not 1.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tle/kernel.hpp"

namespace tle {

/// A knob name that records where it was written (so that `c["BLOCK"]` reports a missing knob at
/// the caller's line).
struct KnobName {
  std::string_view name;
  loc_t loc;
  KnobName(const char* n, loc_t l = loc_t::current()) : name(n), loc(l) {}
  KnobName(std::string_view n, loc_t l = loc_t::current()) : name(n), loc(l) {}
  KnobName(const std::string& n, loc_t l = loc_t::current()) : name(n), loc(l) {}
};

/// One configuration: a value per knob of a Space, in the Space's knob order.
class Config {
 public:
  Config() = default;
  Config(std::vector<std::pair<std::string, int64_t>> values) : values_(std::move(values)) {}

  /// The value of knob `name`. UserError at the caller's line if the config has no such knob.
  int64_t at(std::string_view name, loc_t l = loc_t::current()) const;
  int64_t operator[](KnobName k) const { return at(k.name, k.loc); }
  /// The value of `name`, or `fallback` when the config has no such knob.
  int64_t get(std::string_view name, int64_t fallback) const;
  bool has(std::string_view name) const;
  const std::vector<std::pair<std::string, int64_t>>& values() const { return values_; }
  /// "BLOCK=128 num_warps=4" (knob order).
  std::string str() const;
  bool operator==(const Config& o) const { return values_ == o.values_; }

  /// A Grid of x * y * z programs with this config's launch knobs: num_warps, num_stages and
  /// maxnreg when the config has them (else the Grid defaults), the stream the tuner measures on
  /// (else the autotuned callable's stream) and the backend it tunes for. Errors as Grid's (at the
  /// caller's line).
  Grid grid(int64_t x, int64_t y = 1, int64_t z = 1, loc_t l = loc_t::current()) const;

  void* stream = nullptr;  ///< set by the tuner: where launches go (CUstream)
  int backend = -1;        ///< set by the tuner: a tle::Backend value, or -1 for default_backend()

 private:
  std::vector<std::pair<std::string, int64_t>> values_;
};

/// The knobs of a kernel and the constraints between them: the Cartesian product of the knob
/// domains, less the configs a constraint rejects.
class Space {
 public:
  struct Knob {
    std::string name;
    std::vector<int64_t> domain;  ///< in the order given (pow2: ascending)
    SrcLoc loc;
  };
  struct Constraint {
    std::string what;  ///< for messages: what the predicate requires
    std::function<bool(const Config&)> pred;
    SrcLoc loc;
  };

  /// Knob `name` takes one of `domain` (given order, duplicates removed). UserError at the
  /// caller's line for an empty list, an empty or repeated name.
  Space& values(std::string name, std::vector<int64_t> domain, loc_t l = loc_t::current());
  /// Knob `name` takes the powers of two from lo to hi (both included; 1 <= lo <= hi < 2^62).
  /// UserError at the caller's line when the range holds no power of two.
  Space& pow2(std::string name, int64_t lo, int64_t hi, loc_t l = loc_t::current());
  /// Only configs for which pred returns true are valid (e.g. BM * BN * stages * 2 <= 227 KB).
  /// `what` names the rule in messages. A predicate that throws rejects the config.
  Space& constraint(std::string what, std::function<bool(const Config&)> pred, loc_t l = loc_t::current());

  const std::vector<Knob>& knobs() const { return knobs_; }
  const std::vector<Constraint>& constraints() const { return constraints_; }
  /// The number of configs before constraints (saturates at 2^63).
  uint64_t size() const;
  /// Config number `index` (0 <= index < size()) in mixed radix, the first knob varying slowest.
  Config config_at(uint64_t index) const { return config_of(indices_at(index)); }
  /// The domain indices of config number `index`.
  std::vector<int> indices_at(uint64_t index) const;
  /// A config of indices into each knob's domain.
  Config config_of(const std::vector<int>& idx) const;
  /// Whether every constraint accepts c (false if one throws).
  bool valid(const Config& c) const;
  /// Every valid config, in index order. Throws UserError (at the Space's first knob) beyond
  /// `limit` configs before constraints.
  std::vector<Config> enumerate(uint64_t limit = 1u << 22) const;

 private:
  std::vector<Knob> knobs_;
  std::vector<Constraint> constraints_;
};

/// A tuning key (Triton's key=): named values that select a tuned config. Two launches with equal
/// keys share a config.
class TuneKey {
 public:
  TuneKey& add(std::string_view name, int64_t value);
  TuneKey& add(std::string_view name, std::string_view value);
  /// "name=value,name=value" in order.
  const std::string& str() const { return s_; }
  /// The integer values in order (the shape features of the ranking model).
  const std::vector<int64_t>& numbers() const { return nums_; }

 private:
  std::string s_;
  std::vector<int64_t> nums_;
};

/// The shape bucket of n: the next power of two >= n (1 for n <= 1). Keys built with it share a
/// config over [2^(k-1) + 1, 2^k].
int64_t pow2_bucket(int64_t n);

/// A memory range a benchmark run overwrites (Triton's restore_value): saved before tuning and
/// restored after each measured config, so the call that tunes leaves what a plain launch would.
/// Host or GPU memory (copied with cuMemcpy when the tuner runs on the GPU).
struct Region {
  void* ptr = nullptr;
  size_t bytes = 0;
};

/// What one tuning did (Autotuned::last_report).
struct TuneReport {
  std::string key;                 ///< the full tuning key (user key + pointer element types)
  Config best;                     ///< the config chosen
  double best_ms = 0;              ///< its median time in milliseconds (0 when not measured)
  uint64_t space_size = 0;         ///< configs before constraints
  uint64_t valid = 0;              ///< configs the constraints and prune accepted (counted up to 2^22)
  int measured = 0;                ///< configs timed in this process for this key (0: cache hit)
  int pruned = 0;                  ///< configs that failed to compile or exceed the GPU's resources
  bool from_cache = false;         ///< the config came from the disk cache or a database
  /// With from_cache: milliseconds from the call to the config found (tracing the launcher once for
  /// the cache key, reading the entry); the kernel's compile or load and the launch come after.
  double lookup_ms = 0;
  bool used_model = false;         ///< the XGBoost ranking model guided the search
  std::vector<std::string> prune_reasons;  ///< "CONFIG: why", one per pruned config
  /// Every config timed, in measuring order, with its median in ms (+infinity when pruned; the
  /// partial median when timing stopped early).
  std::vector<std::pair<Config, double>> times;
};

/// Options of tle::autotune. Defaults follow Triton (warm-up, repeats) and FlagTune (GA).
struct AutotuneOptions {
  int warmup = 2;              ///< untimed runs of each config before its timed runs
  int repeats = 10;            ///< timed runs; the median is the config's time
  double abort_ratio = 1.5;    ///< stop timing a config whose fastest run is this many times the best median
  uint64_t exhaustive_limit = 256;  ///< spaces with at most this many valid configs are measured whole
  /// Most configs the search measures (0: 5% of the valid configs, at least 32, at most 512).
  /// Budgets under 32 skip the genetic algorithm: a few configs spread over the space (budget / 4,
  /// at least 2; with a ranking model its budget / 8 favourites), then the local search.
  uint64_t budget = 0;
  uint64_t seed = 42;          ///< the search is deterministic for a seed
  /// Early stop of a search ranked by the model (trained on this device's stored measurements:
  /// other shapes or kernels tuned before): its final local search ends after this many
  /// measurements in a row that did not beat, by more than 1 %, the best as it stood at its last
  /// such gain, so a kernel tuned before at other shapes measures fewer configs than `budget`.
  /// Negative (default -1): max(4, B / 8) with B the budget in effect (after `budget = 0` is
  /// resolved); 0: never (spend the budget). A search without a model (the first tuning on a
  /// device, or no libxgboost) always spends its budget (or ends at a local optimum every
  /// measured config of which has been climbed from). Where the model misleads (a shape unlike
  /// those it learned from) the early stop can keep a config a few % slower than the full search
  /// finds (docs/autotune.md, "Search"): raise it, or set 0, where a tuned config lives long.
  int patience = -1;
  /// Triton's early_config_prune: gets the valid configs of the space (for spaces of at most
  /// exhaustive_limit valid configs; larger spaces are pruned by their constraints only) and
  /// returns those to try (at least one).
  std::function<std::vector<Config>(std::vector<Config>)> prune;
  /// The backend to tune for (default: default_backend()); Config::grid applies it.
  std::optional<Backend> backend;
  /// Compile the next configs on a tuner thread while the current one is timed: -1 (default) on
  /// the GPU only (host compiles would compete with CPU-backend timing for the cores), 0 never, 1
  /// always. The launcher then runs on two threads at once (for a config being compiled: its
  /// launches compile and do not run); a launcher that only launches tle kernels is safe.
  int compile_ahead = -1;
};

namespace detail {
/// The non-template part of an autotuned callable (src/runtime/autotune/tuner.cpp).
class TunerCore;
TunerCore* tuner_create(std::string name, Space space, AutotuneOptions opts, const SrcLoc& loc);
void tuner_destroy(TunerCore* t) noexcept;
/// The config for `key` (tuning on a miss). `run` launches once with a config; `regions` (called
/// only when tuning; may be empty) lists the memory the runs overwrite, saved and restored.
Config tuner_select(TunerCore* t, const std::string& key, const std::vector<int64_t>& key_numbers,
                    const std::function<void(const Config&)>& run,
                    const std::function<std::vector<Region>()>& regions);
void tuner_force(TunerCore* t, const Config& c, const SrcLoc& loc);
TuneReport tuner_last_report(const TunerCore* t);
const SrcLoc& tuner_loc(const TunerCore* t);
/// AutotuneOptions::backend as a tle::Backend value, or -1.
int tuner_backend(const TunerCore* t);
/// "f32*" for a pointer argument to f32 (the dtype part of a tuning key), "" for others.
std::string key_type_of(const HostArg& h);

template <class L> struct launch_signature : launch_signature<decltype(&L::operator())> {};
template <class C, class R, class... A> struct launch_signature<R (C::*)(const Config&, A...) const> {
  using args = std::tuple<std::decay_t<A>...>;
};
template <class C, class R, class... A> struct launch_signature<R (C::*)(const Config&, A...)> {
  using args = std::tuple<std::decay_t<A>...>;
};
}  // namespace detail

/// A kernel launcher with tuned configs, made by tle::autotune. Call it with the launcher's
/// arguments (without the Config). Thread-safe; tuning of one key happens once.
template <class Args> class Autotuned;
template <class... A> class Autotuned<std::tuple<A...>> {
 public:
  using Launch = std::function<void(const Config&, const A&...)>;
  using KeyFn = std::function<TuneKey(const A&...)>;
  using RestoreFn = std::function<std::vector<Region>(const A&...)>;

  Autotuned(detail::TunerCore* core, KeyFn key, Launch launch)
      : core_(core, &detail::tuner_destroy), key_(std::move(key)), launch_(std::move(launch)) {}

  /// Launches with the config tuned for these arguments' key (tuning first on a miss: every
  /// measured config runs the launcher, so outputs hold the last run's values unless `restore`
  /// names them). Throws UserError at autotune()'s line when the key function throws or no config
  /// survives compiling; what the launcher throws for the chosen config passes through.
  void operator()(const A&... args) const {
    const Config c = select(args...);
    Config run = c;
    run.stream = stream_;
    run.backend = detail::tuner_backend(core_.get());
    launch_(run, args...);
  }
  /// The config these arguments select (tuning on a miss), without launching it afterwards.
  Config select(const A&... args) const {
    TuneKey k;
    try {
      k = key_(args...);
    } catch (const std::exception& e) {
      throw UserError(detail::tuner_loc(core_.get()),
                      std::string("autotune: the key function threw: ") + e.what() +
                          "; it maps the launch arguments to a tle::TuneKey and must accept every launch");
    }
    std::string key = k.str();
    (void)std::initializer_list<int>{(append_type(key, args), 0)...};
    return detail::tuner_select(
        core_.get(), key, k.numbers(), [&](const Config& c) { launch_(c, args...); },
        [&] { return restore_ ? restore_(args...) : std::vector<Region>(); });
  }
  /// Outputs a benchmark run overwrites (Triton's restore_value): saved before tuning and
  /// restored after each measured config.
  Autotuned& restore(RestoreFn f) { restore_ = std::move(f); return *this; }
  /// Launches after tuning go to this CUstream (default: the legacy default stream).
  Autotuned& on_stream(void* cu_stream) { stream_ = cu_stream; return *this; }
  /// What the last tuning (or cache lookup that tuned nothing) did.
  TuneReport last_report() const { return detail::tuner_last_report(core_.get()); }
  detail::TunerCore* core() const { return core_.get(); }

 private:
  template <class T> static void append_type(std::string& key, const T& a) {
    if constexpr (std::is_pointer_v<T>) {
      if constexpr (detail::typed_pointee<std::remove_cv_t<std::remove_pointer_t<T>>>) {
        key += ",";
        key += detail::key_type_of(detail::host_arg(a));
      }
    }
  }
  std::unique_ptr<detail::TunerCore, void (*)(detail::TunerCore*) noexcept> core_;
  KeyFn key_;
  Launch launch_;
  RestoreFn restore_;
  void* stream_ = nullptr;
};

/// Makes an autotuned launcher. `name` names it in progress lines, reports and the tuning cache;
/// `space` declares the knobs; `key(args...)` returns the TuneKey of a launch; `launch(config,
/// args...)` launches the kernel(s) with a config (a lambda or function with a first parameter
/// `const tle::Config&`; not generic: its parameter types are the callable's). Throws UserError
/// at this line for a space without knobs or whose constraints reject every config.
template <class L, class K>
auto autotune(std::string name, Space space, K key, L launch, AutotuneOptions opts = {}, loc_t l = loc_t::current()) {
  using Args = typename detail::launch_signature<std::decay_t<L>>::args;
  detail::TunerCore* core = detail::tuner_create(std::move(name), std::move(space), std::move(opts), l);
  return Autotuned<Args>(core, std::move(key), std::move(launch));
}

/// Forces one config for every key of `tuned` (no measuring; TLE_AUTOTUNE=0 uses it too). UserError
/// at the caller's line if a knob is missing or unknown, a value outside its domain, or a
/// constraint rejects it.
template <class Args>
void autotune_config(Autotuned<Args>& tuned, const Config& c, loc_t l = loc_t::current()) {
  detail::tuner_force(tuned.core(), c, l);
}

/// Writes every entry of the tuning cache to one file (a tuning database an engine can ship).
/// Returns the number of entries. Throws RuntimeError when the file cannot be written.
size_t tune_db_export(const std::string& path);
/// Adds the entries of a database file to the tuning cache (atomic writes). Returns the number of
/// entries imported; damaged entries are skipped with a notice. Throws RuntimeError when the file
/// cannot be read or is not a tle tuning database.
size_t tune_db_import(const std::string& path);

}  // namespace tle
