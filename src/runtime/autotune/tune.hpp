// src/runtime/autotune/tune.hpp - the autotuner's parts (tle/autotune.hpp is the public API):
// search (search.cpp), ranking model and features (model.cpp), tuning cache (tune_cache.cpp);
// tuner.cpp ties them to measurement. docs/autotune.md describes the whole.
#pragma once
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tle/autotune.hpp"

namespace tle::tune {

constexpr double kFailed = std::numeric_limits<double>::infinity();  ///< time of a pruned config

// ---- search (search.cpp)

struct SearchOptions {
  uint64_t exhaustive_limit = 256;
  uint64_t budget = 0;  ///< 0: 5% of the valid configs, at least 32, at most 512
  uint64_t seed = 42;
  int population = 16;  ///< GA population (FlagTune: 20)
  int offspring = 8;    ///< children measured per generation (FlagTune: 10)
  double mutation = 0.3;  ///< per-knob mutation probability (FlagTune: 0.3)
  /// With a model: the local search stops after this many measurements in a row none of which
  /// was more than min_gain faster than the best at its last gain (negative: max(4, budget / 8);
  /// 0: never).
  /// Without a model: never (AutotuneOptions::patience).
  int patience = -1;
  /// The early stop's notion of a gain: a time below (1 - min_gain) x the best at the last gain.
  double min_gain = 0.01;
  /// Pre-computed valid configs (from prune); when set the search measures them all.
  std::optional<std::vector<Config>> candidates;
  /// Told the configs about to be measured, in order, before each batch (the tuner compiles
  /// them ahead on another thread). May be empty.
  std::function<void(const std::vector<Config>&)> prepare;
};

/// Ranks configs: lower score = predicted faster. Empty = no model.
using Ranker = std::function<std::vector<double>(const std::vector<Config>&)>;

struct SearchResult {
  Config best;
  double best_time = kFailed;
  std::vector<std::pair<Config, double>> measured;  ///< in measuring order, pruned ones with kFailed
  bool exhaustive = false;
  uint64_t valid = 0;  ///< valid configs (counted exactly up to exhaustive_limit for the GA, else estimated)
};

/// The budget for a space of `valid` configs (SearchOptions::budget semantics).
uint64_t default_budget(uint64_t valid);

/// Exhaustive when the space has at most exhaustive_limit valid configs (or candidates are given),
/// else a start (a Latin-hypercube design spread over the space, or the configs `rank` puts
/// first), for budgets of at least 2 * population a genetic algorithm (tournament selection,
/// uniform crossover, per-knob mutation to a random or neighbouring domain value, constraint
/// repair by re-mutation, children ranked by `rank` when given), then a local search over
/// one-step neighbours with restarts, within the budget; with `rank`, the local search stops
/// early (SearchOptions::patience). `measure` returns a time (kFailed: pruned) and may be
/// told the best time so far through its second argument. Deterministic for a seed and a
/// deterministic `measure`. `before` is called with the total number of configs planned before
/// measuring starts (for progress).
SearchResult search(const Space& space, const SearchOptions& o, const std::function<double(const Config&, double)>& measure,
                    const Ranker& rank = {}, const std::function<void(uint64_t)>& before = {});

// ---- features and ranking model (model.cpp)

/// IR features of a kernel: op counts of its traced IR (docs/autotune.md, "Features").
std::vector<float> ir_features(const std::string& ir_text);
/// The feature row of one config: IR features, shape (key numbers), config knobs (docs/autotune.md).
std::vector<float> features(const std::vector<float>& ir, const std::vector<int64_t>& key_numbers,
                            const Space& space, const Config& c);
constexpr int kNumFeatures = 26;
/// The ranking group of a stored entry: the feature rows of its measured configs and their times.
struct Group;
struct Entry;
Group group_of(const Entry& e);

/// libxgboost opened with dlopen (libxgboost.so.0, then libxgboost.so; TLE_LIBXGBOOST overrides).
/// Null when missing: why_no_xgboost() says why.
struct XGBoost;
const XGBoost* xgboost();
const std::string& why_no_xgboost();

/// One ranking group: the feature rows of configs measured for one (kernel, key, device), and
/// their times (finite).
struct Group {
  std::vector<std::vector<float>> rows;
  std::vector<double> times;
};

/// An XGBoost rank:pairwise model (labels: the reversed rank of the time in its group, fastest
/// highest, as FlagTune's ranker.py).
class Model {
 public:
  /// Trains on groups (those with fewer than 2 rows are skipped). Nullopt when libxgboost is
  /// missing or there is nothing to learn from (fewer than 8 rows in all).
  static std::optional<Model> train(const std::vector<Group>& groups, int rounds = 60, uint64_t seed = 2026);
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();
  /// Scores of rows: higher = predicted faster.
  std::vector<float> predict(const std::vector<std::vector<float>>& rows) const;

 private:
  Model() = default;
  void* booster_ = nullptr;
};

/// The search's Ranker for configs of `space` at one tuning key: the model's score of each
/// config's features (IR features `ir`, shape `key_numbers`), negated (lower = predicted faster).
/// The ranker refers to `m`, which must outlive it.
Ranker model_ranker(const Model& m, std::vector<float> ir, std::vector<int64_t> key_numbers, const Space& space);

// ---- the tuning cache (tune_cache.cpp)

/// s cut at every `sep`: "" -> {}, "a,,b" -> {"a", "", "b"}, "a," -> {"a", ""}.
std::vector<std::string> split(const std::string& s, char sep);
/// s as a whole base-10 int64 into v; false when empty, malformed or out of range.
bool parse_i64(const std::string& s, int64_t& v);

/// TLE_QUIET=1: no progress line, no notices.
bool quiet();

/// One stored tuning: the best config of a (kernel, key, device) and every measurement.
struct Entry {
  std::string key;       ///< the full cache key (hashed for the file name)
  std::string kernel;    ///< the autotune name
  std::vector<float> ir;            ///< IR features
  std::vector<int64_t> key_numbers;  ///< shape features
  std::vector<std::string> knobs;   ///< knob names, in order
  Config best;
  double best_ms = 0;
  std::vector<std::pair<Config, double>> measured;  ///< ms; pruned ones omitted
};

std::string serialize(const Entry& e);
/// Nullopt for a damaged entry (bad header, checksum, syntax).
std::optional<Entry> parse(const std::string& text);

/// <cache dir>/tune, or "" when the disk cache is disabled (TLE_CACHE=0) or has no directory.
std::string tune_directory();
/// The entry stored for `key` in `dir`; a damaged one is ignored (one notice per process).
std::optional<Entry> load(const std::string& dir, const std::string& key);
/// Stores e atomically (temporary file + rename). False (one warning) on failure.
bool store(const std::string& dir, const Entry& e);
/// Every readable entry of `dir` (damaged ones skipped): the model's training data.
std::vector<Entry> load_all(const std::string& dir);

// ---- replay of recorded landscapes (replay.cpp): the search run offline against measurements on
// file (benchmarks/tune_replay, tests/test_autotune.cpp)

/// One shape's landscape: the time of every valid config of a kernel's space at one shape, as
/// `tune_study --csv` records it (its "exhaustive SHAPE" phases).
struct Landscape {
  std::string kernel;                ///< "softmax f32"
  std::string shape;                 ///< "64x128256"
  std::vector<int64_t> key_numbers;  ///< the shape's numbers (64, 128256): the model's key features
  /// Knobs in the recorded configs' order, each domain the values recorded for the kernel at any
  /// shape (ascending); valid = recorded for this shape (pruned ones included, as the tuner's
  /// constraints accept them and measuring prunes them).
  Space space;
  std::map<std::string, double> ms;  ///< Config::str() -> ms (kFailed: pruned)
  double best_ms = kFailed;
  /// The recorded time of c (kFailed when pruned or not recorded).
  double time(const Config& c) const;
};

/// The landscapes of a tune_study CSV (header kernel,phase,order,config,ms; only the phases named
/// "exhaustive SHAPE" are read), in file order. Throws std::runtime_error when the file cannot be
/// read or a line is malformed.
std::vector<Landscape> load_landscapes(const std::string& path);

/// The options of tune_study's searches on l: always the search (never the whole space), the
/// budget `budget` or, when 0, 5 % of l's valid configs (at least 1), the seed.
SearchOptions replay_options(const Landscape& l, uint64_t seed, uint64_t budget = 0);

/// search() on a landscape, each measurement a lookup of the recorded time. `prior` lists earlier
/// searches (landscape, result) of the same kernel at other shapes: as the tuner trains its ranking
/// model on the measurements stored for the device, their finite measurements train the model
/// that ranks this search's configs (IR features all 0: one kernel, one IR). Empty `prior`, or no
/// libxgboost, or too little data to train on: a cold search. `used_model` (optional) tells which.
SearchResult replay(const Landscape& l, const SearchOptions& o,
                    const std::vector<std::pair<const Landscape*, const SearchResult*>>& prior = {},
                    bool* used_model = nullptr);

}  // namespace tle::tune
