// tests/test_autotune.cpp - the autotuner (tle/autotune.hpp, src/runtime/autotune/): spaces and
// constraints, the genetic search, the tuning cache and database, the XGBoost ranking model,
// pruning, and end-to-end tuning of tle kernels on the CPU backend (tag [tune]); on the GPU
// (hidden tag [.gpu]) a softmax and a matmul.
#include <catch2/catch.hpp>
#include <tle/autotune.hpp>
#include <tle/tle.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <set>

#include "env_util.hpp"
#include "error_util.hpp"
#include "file_util.hpp"
#include "runtime/autotune/tune.hpp"
#include "runtime/disk_cache.hpp"
#include "runtime/launch.hpp"

using namespace tle;
namespace fs = std::filesystem;

namespace {

/// A fresh, empty TLE_CACHE_DIR for one test (removed at the end), and quiet output.
struct TempCache {
  std::string dir;
  std::optional<envtest::EnvVar> env, quiet;
  TempCache() {
    // The kernels' disk cache reads TLE_CACHE_DIR once: let it settle on the suite's directory first.
    (void)tle::detail::DiskCache::global();
    dir = (fs::temp_directory_path() / ("tle-tune-test-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(std::random_device{}())))
              .string();
    fs::create_directories(dir);
    env.emplace("TLE_CACHE_DIR", dir.c_str());
    quiet.emplace("TLE_QUIET", "1");
  }
  ~TempCache() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    if (fs::exists(dir + "/tune"))
      for (auto& e : fs::directory_iterator(dir + "/tune"))
        if (e.path().extension() == ".tune") out.push_back(e.path().string());
    return out;
  }
};

/// Row sums of a [rows, ncols] f32 matrix, the row read in chunks of BLOCK columns.
auto make_rowsum() {
  return jit("tune_rowsum", [](Ptr<float> x, Ptr<float> out, Tile<int32_t> ncols, Constexpr<int> BLOCK) {
    Tile<int64_t> row = program_id(0).to<int64_t>();
    Tile<int32_t> cols = arange(0, BLOCK);
    Tile<float> acc = zeros<float>({BLOCK});
    for (auto c0 : range(0, ncols, BLOCK)) {
      Tile<int32_t> c = c0 + cols;
      acc = acc + load(x + row * ncols + c, c < ncols, 0.0f);
    }
    store(out + row, sum(acc, 0));
  });
}

/// out[row] += sum of the row: a kernel whose benchmark runs change its output (restore).
auto make_rowsum_accumulate() {
  return jit("tune_rowsum_acc", [](Ptr<float> x, Ptr<float> out, Tile<int32_t> ncols, Constexpr<int> BLOCK) {
    Tile<int64_t> row = program_id(0).to<int64_t>();
    Tile<int32_t> cols = arange(0, BLOCK);
    Tile<float> acc = zeros<float>({BLOCK});
    for (auto c0 : range(0, ncols, BLOCK)) {
      Tile<int32_t> c = c0 + cols;
      acc = acc + load(x + row * ncols + c, c < ncols, 0.0f);
    }
    store(out + row, load(out + row) + sum(acc, 0));
  });
}

std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float((i * 7919) % 101) * 0.25f - 12.0f;
  return v;
}

std::vector<double> row_sums(const std::vector<float>& x, int rows, int cols) {
  std::vector<double> s(rows, 0.0);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) s[r] += x[size_t(r) * cols + c];
  return s;
}

TuneKey cols_key(const float*, float*, int, int cols) { return TuneKey().add("cols", pow2_bucket(cols)); }

/// A space of 6 knobs, 12,000 configs, with a memory constraint, and a synthetic cost whose
/// optimum is BM=128 BN=64 BK=32 warps=4 stages=3 GM=8 (a sum of squared log distances plus an
/// interaction term, all >= 0, zero only there).
Space synthetic_space() {
  Space s;
  s.pow2("BM", 16, 256).pow2("BN", 16, 256).pow2("BK", 16, 128).pow2("num_warps", 1, 16).values("num_stages", {1, 2, 3, 4, 5, 6}).pow2("GM", 1, 8);
  s.constraint("(BM + BN) * BK * stages * 2 <= 228 KB", [](const Config& c) {
    return (c["BM"] + c["BN"]) * c["BK"] * c["num_stages"] * 2 <= 228 * 1024;
  });
  return s;
}
double synthetic_cost(const Config& c) {
  auto d = [&](const char* k, double opt) {
    const double x = std::log2(double(c[k])) - std::log2(opt);
    return x * x;
  };
  const double tiles = std::log2(double(c["BM"] * c["BN"])) - std::log2(double(c["num_warps"]) * 32.0 * 64.0);
  return 1.0 + d("BM", 128) + 0.8 * d("BN", 64) + 0.5 * d("BK", 32) + 0.7 * d("num_warps", 4) +
         0.3 * std::pow(double(c["num_stages"]) - 3.0, 2) + 0.2 * d("GM", 8) + 0.1 * tiles * tiles;
}

}  // namespace

TEST_CASE("autotune space: enumeration in knob order and constraints", "[tune]") {
  Space s;
  s.values("A", {3, 1, 3, 2}).pow2("B", 3, 17);
  REQUIRE(s.knobs().size() == 2);
  CHECK(s.knobs()[0].domain == std::vector<int64_t>{3, 1, 2});  // duplicates removed, order kept
  CHECK(s.knobs()[1].domain == std::vector<int64_t>{4, 8, 16});
  CHECK(s.size() == 9);
  CHECK(s.config_at(0).str() == "A=3 B=4");
  CHECK(s.config_at(1).str() == "A=3 B=8");
  CHECK(s.config_at(8).str() == "A=2 B=16");
  s.constraint("A * B <= 16", [](const Config& c) { return c["A"] * c["B"] <= 16; });
  s.constraint("throws for B = 8", [](const Config& c) -> bool {
    if (c["B"] == 8) throw std::runtime_error("no");
    return true;
  });
  std::vector<std::string> got;
  for (auto& c : s.enumerate()) got.push_back(c.str());
  CHECK(got == std::vector<std::string>{"A=3 B=4", "A=1 B=4", "A=1 B=16", "A=2 B=4"});
  CHECK(pow2_bucket(1) == 1);
  CHECK(pow2_bucket(17) == 32);
  CHECK(pow2_bucket(1024) == 1024);
  CHECK(TuneKey().add("n", 5).add("t", "f16").str() == "n=5,t=f16");
}

TEST_CASE("autotune space errors are UserErrors at the user's line", "[tune]") {
  int line = 0;
  errtest::expect_user_error([&] { line = __LINE__; Space().values("A", {}); }, {"knob 'A'", "empty list"},
                             "test_autotune.cpp", line);
  errtest::expect_user_error([&] { line = __LINE__; Space().pow2("B", 5, 7); }, {"knob 'B'", "no power of two"},
                             "test_autotune.cpp", line);
  errtest::expect_user_error([&] { Space s; s.values("A", {1}); line = __LINE__; s.values("A", {2}); },
                             {"declared twice"}, "test_autotune.cpp", line);
  errtest::expect_user_error(
      [&] {
        Space s;
        s.values("A", {1, 2}).constraint("A > 5", [](const Config& c) { return c["A"] > 5; });
        line = __LINE__; auto t = autotune("t", s, [](int) { return TuneKey(); }, [](const Config&, int) {});
      },
      {"reject all 2 configs", "'A > 5'"}, "test_autotune.cpp", line);
  errtest::expect_user_error(
      [&] { line = __LINE__; auto t = autotune("t", Space(), [](int) { return TuneKey(); }, [](const Config&, int) {}); },
      {"no knobs"}, "test_autotune.cpp", line);
  errtest::expect_user_error([&] { Config c({{"A", 1}}); line = __LINE__; (void)c.at("B"); }, {"no knob 'B'", "A"},
                             "test_autotune.cpp", line);
  errtest::expect_user_error([&] { Config c({{"A", 1}}); line = __LINE__; (void)c["C"]; }, {"no knob 'C'"},
                             "test_autotune.cpp", line);
  // A key function that throws: UserError at autotune()'s line.
  TempCache tc;
  Space s;
  s.values("A", {1, 2});
  line = __LINE__ + 1;
  auto t = autotune("t", s, [](int n) { if (n < 0) throw std::invalid_argument("negative n"); return TuneKey().add("n", n); },
                    [](const Config&, int) {});
  const int at = line;
  errtest::expect_user_error([&] { t(-1); }, {"key function threw", "negative n"}, "test_autotune.cpp", at);
  // autotune_config: knobs and domain checked at its line.
  errtest::expect_user_error([&] { line = __LINE__; autotune_config(t, Config({{"A", 3}})); }, {"A=3", "domain"},
                             "test_autotune.cpp", line);
  errtest::expect_user_error([&] { line = __LINE__; autotune_config(t, Config({{"A", 1}, {"Z", 1}})); },
                             {"'Z' is not a knob"}, "test_autotune.cpp", line);
  errtest::expect_user_error([&] { line = __LINE__; autotune_config(t, Config()); }, {"knob 'A' of autotune 't'"},
                             "test_autotune.cpp", line);
}

TEST_CASE("autotune search: small spaces are measured whole", "[tune]") {
  Space s;
  s.pow2("X", 1, 64).values("Y", {0, 1, 2});
  std::vector<Config> all = s.enumerate();
  tune::SearchOptions o;
  o.candidates = all;
  int calls = 0;
  auto r = tune::search(s, o, [&](const Config& c, double) { ++calls; return std::abs(double(c["X"]) - 8) + c["Y"]; });
  CHECK(r.exhaustive);
  CHECK(calls == 21);
  CHECK(r.best.str() == "X=8 Y=0");
}

TEST_CASE("autotune search: the genetic search is deterministic and finds a known optimum in 5% of 12000 configs",
          "[tune]") {
  const Space s = synthetic_space();
  REQUIRE(s.size() == 12000);
  tune::SearchOptions o;  // defaults: budget 5% of the valid configs
  o.seed = 7;
  auto run = [&] {
    std::vector<std::string> order;
    auto r = tune::search(s, o, [&](const Config& c, double) { order.push_back(c.str()); return synthetic_cost(c); });
    return std::make_pair(r, order);
  };
  auto [r1, o1] = run();
  auto [r2, o2] = run();
  CHECK(o1 == o2);  // the same seed measures the same configs in the same order
  CHECK_FALSE(r1.exhaustive);
  INFO("valid " << r1.valid << ", measured " << r1.measured.size() << ", best " << r1.best.str());
  CHECK(r1.valid > 5000);
  CHECK(r1.measured.size() <= r1.valid / 20);
  CHECK(r1.best.str() == "BM=128 BN=64 BK=32 num_warps=4 num_stages=3 GM=8");
  CHECK(r1.best_time == Approx(1.0));
  std::set<std::string> unique(o1.begin(), o1.end());
  CHECK(unique.size() == o1.size());  // nothing measured twice
  for (auto& [c, t] : r1.measured) CHECK(s.valid(c));
  o.seed = 8;
  auto [r3, o3] = run();
  CHECK(o3 != o1);  // another seed, another walk
  WARN("GA: valid " << r1.valid << ", measured " << r1.measured.size() << " (seed 7), " << r3.measured.size()
                    << " (seed 8), best " << r3.best.str());
}

TEST_CASE("autotune model: XGBoost rank:pairwise learns a ranking of synthetic data", "[tune]") {
  if (!tune::xgboost()) {
    WARN("libxgboost is not installed (" << tune::why_no_xgboost() << "): model test skipped");
    return;
  }
  const Space s = synthetic_space();
  const std::vector<float> ir = tune::ir_features("%0 = load %a\n%1 = dot %0, %0\nstore %b, %1\n");
  CHECK(ir[0] == Approx(1.0f));  // log2(1 + 1 load)
  CHECK(ir[2] == Approx(1.0f));  // one dot
  std::mt19937_64 rng(1);
  std::vector<Config> valid = s.enumerate();
  auto group = [&](int n) {
    tune::Group g;
    for (int i = 0; i < n; ++i) {
      const Config& c = valid[rng() % valid.size()];
      g.rows.push_back(tune::features(ir, {1024, 1024}, s, c));
      g.times.push_back(synthetic_cost(c));
    }
    return g;
  };
  std::vector<tune::Group> train;
  for (int i = 0; i < 12; ++i) train.push_back(group(40));
  auto m = tune::Model::train(train);
  REQUIRE(m);
  // Held-out configs: the predicted order agrees with the true order (Spearman rho > 0.8).
  tune::Group test = group(200);
  const std::vector<float> score = m->predict(test.rows);
  auto ranks = [](const std::vector<double>& v) {
    std::vector<size_t> p(v.size());
    std::iota(p.begin(), p.end(), 0);
    std::stable_sort(p.begin(), p.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
    std::vector<double> r(v.size());
    for (size_t i = 0; i < p.size(); ++i) r[p[i]] = double(i);
    return r;
  };
  std::vector<double> neg(score.size());
  for (size_t i = 0; i < score.size(); ++i) neg[i] = -score[i];
  const auto rt = ranks(test.times), rp = ranks(neg);
  double d2 = 0;
  for (size_t i = 0; i < rt.size(); ++i) d2 += (rt[i] - rp[i]) * (rt[i] - rp[i]);
  const double n = double(rt.size());
  const double rho = 1 - 6 * d2 / (n * (n * n - 1));
  INFO("Spearman rho " << rho);
  CHECK(rho > 0.8);
  // The model-guided search finds the optimum too, deterministically.
  tune::SearchOptions o;
  o.seed = 3;
  tune::Ranker rank = [&](const std::vector<Config>& cs) {
    std::vector<std::vector<float>> rows;
    for (auto& c : cs) rows.push_back(tune::features(ir, {1024, 1024}, s, c));
    std::vector<double> out;
    for (float v : m->predict(rows)) out.push_back(-v);
    return out;
  };
  auto r = tune::search(s, o, [&](const Config& c, double) { return synthetic_cost(c); }, rank);
  auto cold = tune::search(s, o, [&](const Config& c, double) { return synthetic_cost(c); });
  WARN("model: Spearman rho " << rho << ", guided search measured " << r.measured.size() << ", unguided "
                              << cold.measured.size() << " (same seed)");
  CHECK(r.best.str() == "BM=128 BN=64 BK=32 num_warps=4 num_stages=3 GM=8");
  CHECK(r.measured.size() <= r.valid / 20);
  // The model transfers: the guided search reaches the optimum in >= 3x fewer measurements than
  // the unguided one and than one ranked by a ranker without information (every score 0: the
  // early stop alone), which measures the same or more.
  tune::Ranker blind = [](const std::vector<Config>& cs) { return std::vector<double>(cs.size(), 0.0); };
  auto flat = tune::search(s, o, [&](const Config& c, double) { return synthetic_cost(c); }, blind);
  auto first_best = [](const tune::SearchResult& x) {
    for (size_t i = 0; i < x.measured.size(); ++i)
      if (x.measured[i].second == x.best_time) return i + 1;
    return x.measured.size() + 1;
  };
  INFO("optimum first measured at " << first_best(r) << " (guided), " << first_best(cold) << " (unguided), "
                                    << first_best(flat) << " (blind ranker); measured " << r.measured.size() << ", "
                                    << cold.measured.size() << ", " << flat.measured.size());
  CHECK(3 * first_best(r) <= first_best(cold));
  CHECK(3 * first_best(r) <= first_best(flat));
  CHECK(r.measured.size() <= flat.measured.size());
}

TEST_CASE("autotune model: num_warps 0 (a kernel's own choice) is a missing feature, and such entries still train",
          "[tune]") {
  // gpu_bench's topk space has num_warps 0 (TopkOptions' default): log2(32 * 0) = -inf in the
  // features made XGBoost refuse the training matrix, so one such entry in the store turned the
  // model off for every kernel of the device.
  Space s;
  s.values("BLOCK", {256, 512, 1024}).values("num_warps", {0, 4, 8, 16});
  const std::vector<float> ir = tune::ir_features("%0 = load %a\n%1 = sum %0\nstore %b, %1\n");
  for (const Config& c : s.enumerate())
    for (float v : tune::features(ir, {4096, 8192}, s, c)) CHECK_FALSE(std::isinf(v));
  if (!tune::xgboost()) {
    WARN("libxgboost is not installed (" << tune::why_no_xgboost() << "): training part skipped");
    return;
  }
  std::vector<tune::Group> train;
  std::mt19937_64 rng(5);
  for (int g = 0; g < 6; ++g) {
    tune::Group grp;
    for (const Config& c : s.enumerate()) {
      grp.rows.push_back(tune::features(ir, {4096, int64_t(1024) << g}, s, c));
      grp.times.push_back(1.0 + double(c["BLOCK"]) / 1024 + (c["num_warps"] == 0 ? 0.5 : 0.1) + double(rng() % 100) / 1e4);
    }
    train.push_back(std::move(grp));
  }
  REQUIRE(tune::Model::train(train));
}

TEST_CASE("autotune cache: entry round trip and damaged entries", "[tune]") {
  tune::Entry e;
  e.key = "k | ir 00 | key n=1 | cpu x | tle 0";
  e.kernel = "rowsum";
  e.ir = {1.5f, 0, 2};
  e.key_numbers = {1024, 7};
  e.knobs = {"BLOCK", "num_warps"};
  e.best = Config({{"BLOCK", 128}, {"num_warps", 4}});
  e.best_ms = 0.125;
  e.measured = {{Config({{"BLOCK", 64}, {"num_warps", 4}}), 0.25}, {e.best, 0.125}};
  const std::string text = tune::serialize(e);
  auto p = tune::parse(text);
  REQUIRE(p);
  CHECK(p->key == e.key);
  CHECK(p->kernel == e.kernel);
  CHECK(p->ir == e.ir);
  CHECK(p->key_numbers == e.key_numbers);
  CHECK(p->best == e.best);
  CHECK(p->best_ms == 0.125);
  REQUIRE(p->measured.size() == 2);
  CHECK(p->measured[0].first.str() == "BLOCK=64 num_warps=4");
  // Any flipped byte, a truncation or a foreign header is refused.
  for (size_t i = 0; i < text.size(); i += 7) {
    std::string bad = text;
    bad[i] ^= 0x20;
    CHECK_FALSE(tune::parse(bad));
  }
  CHECK_FALSE(tune::parse(text.substr(0, text.size() - 10)));
  CHECK_FALSE(tune::parse(""));
  // Store and load through a directory; a damaged file is a miss.
  TempCache tc;
  const std::string dir = tc.dir + "/tune";
  REQUIRE(tune::store(dir, e));
  auto l = tune::load(dir, e.key);
  REQUIRE(l);
  CHECK(l->best == e.best);
  CHECK_FALSE(tune::load(dir, e.key + "x"));
  REQUIRE(tc.entries().size() == 1);
  filetest::write_file(tc.entries()[0], text.substr(0, 40));
  CHECK_FALSE(tune::load(dir, e.key));
  CHECK(tune::load_all(dir).empty());
}

TEST_CASE("autotune end to end: a row sum tuned on the CPU backend, cached, reused by a fresh tuner, exported",
          "[tune]") {
  TempCache tc;
  auto rowsum = make_rowsum();
  Space space;
  space.pow2("BLOCK", 32, 1024).values("num_warps", {4});
  const int rows = 17, cols = 1001;
  const std::vector<float> x = ramp(size_t(rows) * cols);
  const std::vector<double> want = row_sums(x, rows, cols);
  auto launch = [&](const Config& c, const float* px, float* out, int nrows, int ncols) {
    rowsum(c.grid(nrows), px, out, ncols, int(c["BLOCK"]));
  };
  AutotuneOptions opts;
  opts.repeats = 3, opts.warmup = 1;
  auto check_out = [&](const std::vector<float>& out) {
    for (int r = 0; r < rows; ++r) CHECK(out[r] == Approx(want[r]).margin(1e-3));
  };
  Config best;
  {
    auto tuned = autotune("rowsum", space, cols_key, launch, opts);
    std::vector<float> out(rows, -1.0f);
    tuned(x.data(), out.data(), rows, cols);
    check_out(out);
    const TuneReport r = tuned.last_report();
    CHECK_FALSE(r.from_cache);
    CHECK(r.measured == 6);  // 32..1024: exhaustive
    CHECK(r.pruned == 0);
    CHECK(r.best_ms > 0);
    CHECK(r.key == "cols=1024,f32*,f32*");
    best = r.best;
    CHECK(space.valid(best));
    REQUIRE(tc.entries().size() == 1);
    // A second call with the same key dispatches from memory; another bucket tunes again.
    std::fill(out.begin(), out.end(), -1.0f);
    tuned(x.data(), out.data(), rows, 1000);
    CHECK(tuned.last_report().measured == 6);  // the report is still the first tuning's: cols=1000 -> bucket 1024
    std::vector<float> x2 = ramp(size_t(rows) * 100);
    tuned(x2.data(), out.data(), rows, 100);
    CHECK(tuned.last_report().key == "cols=128,f32*,f32*");
    CHECK(tuned.last_report().measured == 6);
    const auto want2 = row_sums(x2, rows, 100);
    for (int r = 0; r < rows; ++r) CHECK(out[r] == Approx(want2[r]).margin(1e-3));
    CHECK(tc.entries().size() == 2);
    REQUIRE(tuned.last_report().times.size() == 6);
    for (auto& [c, ms] : tuned.last_report().times) CHECK((ms > 0 && ms < 1e4));
  }
  // Triton's early_config_prune: only the configs it returns are measured.
  {
    AutotuneOptions p = opts;
    p.prune = [](std::vector<Config> cs) {
      std::vector<Config> keep;
      for (auto& c : cs)
        if (c["BLOCK"] >= 256) keep.push_back(c);
      return keep;
    };
    auto tuned = autotune("rowsum_pruned", space, cols_key, launch, p);
    std::vector<float> out(rows);
    tuned(x.data(), out.data(), rows, cols);
    check_out(out);
    CHECK(tuned.last_report().measured == 3);
    CHECK(tuned.last_report().best["BLOCK"] >= 256);
    p.prune = [](std::vector<Config>) { return std::vector<Config>(); };
    const int line = __LINE__ + 1;
    auto empty = autotune("rowsum_pruned_all", space, cols_key, launch, p);
    errtest::expect_user_error([&] { empty(x.data(), out.data(), rows, cols); }, {"prune hook returned no config"},
                               "test_autotune.cpp", line);
  }
  // A fresh tuner (as a second process would be) finds the config on disk and measures nothing.
  {
    auto tuned = autotune("rowsum", space, cols_key, launch, opts);
    std::vector<float> out(rows, -1.0f);
    const auto t0 = std::chrono::steady_clock::now();
    const Config c = tuned.select(x.data(), out.data(), rows, cols);  // trace probe + disk read
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    WARN("a fresh tuner's disk-cache lookup took " << ms << " ms");
    CHECK(c == best);
    tuned(x.data(), out.data(), rows, cols);
    check_out(out);
    CHECK(tuned.last_report().from_cache);
    CHECK(tuned.last_report().measured == 0);
    CHECK(tuned.last_report().best == best);
    CHECK(tuned.last_report().lookup_ms > 0);   // set on a cache hit, within the whole select
    CHECK(tuned.last_report().lookup_ms <= ms);
  }
  // TLE_AUTOTUNE=force retunes; =0 takes the first valid config.
  {
    envtest::EnvVar force("TLE_AUTOTUNE", "force");
    auto tuned = autotune("rowsum", space, cols_key, launch, opts);
    std::vector<float> out(rows);
    tuned(x.data(), out.data(), rows, cols);
    check_out(out);
    CHECK(tuned.last_report().measured == 6);
  }
  {
    envtest::EnvVar off("TLE_AUTOTUNE", "0");
    auto tuned = autotune("rowsum", space, cols_key, launch, opts);
    CHECK(tuned.select(x.data(), nullptr, rows, cols).str() == "BLOCK=32 num_warps=4");
    autotune_config(tuned, Config({{"num_warps", 4}, {"BLOCK", 256}}));
    CHECK(tuned.select(x.data(), nullptr, rows, cols).str() == "BLOCK=256 num_warps=4");
    CHECK(tuned.last_report().measured == 0);
  }
  {
    envtest::EnvVar bad("TLE_AUTOTUNE", "sometimes");
    int line = __LINE__ + 1;
    auto tuned = autotune("rowsum", space, cols_key, launch, opts);
    errtest::expect_user_error([&] { tuned.select(x.data(), nullptr, rows, cols); }, {"TLE_AUTOTUNE=sometimes"},
                               "test_autotune.cpp", line);
  }
  // Export the database, import it into an empty cache: a fresh tuner hits.
  const std::string db = tc.dir + "/db.tletune";
  CHECK(tune_db_export(db) == 3);  // cols=1024 and cols=128 of rowsum, cols=1024 of rowsum_pruned
  TempCache other;
  CHECK(other.entries().empty());
  CHECK(tune_db_import(db) == 3);
  CHECK(other.entries().size() == 3);
  {
    auto tuned = autotune("rowsum", space, cols_key, launch, opts);
    std::vector<float> out(rows);
    tuned(x.data(), out.data(), rows, cols);
    check_out(out);
    CHECK(tuned.last_report().from_cache);
  }
  filetest::write_file(db, "not a database\n");
  CHECK_THROWS_AS(tune_db_import(db), RuntimeError);
}

TEST_CASE("autotune: configs that fail to compile are pruned and reported, restore keeps outputs", "[tune]") {
  TempCache tc;
  auto acc = make_rowsum_accumulate();
  Space space;
  // 2^21 elements exceed a tile's 2^20 limit: that config fails to trace, and is pruned.
  space.values("BLOCK", {64, 1 << 21, 256});
  const int rows = 5, cols = 300;
  const std::vector<float> x = ramp(size_t(rows) * cols);
  const std::vector<double> want = row_sums(x, rows, cols);
  AutotuneOptions opts;
  opts.repeats = 3, opts.warmup = 1;
  opts.compile_ahead = GENERATE(0, 1);  // compiles on the measuring thread, or on the tuner's thread
  auto tuned = autotune("rowsum_acc", space, cols_key,
                        [&](const Config& c, const float* px, float* out, int nrows, int ncols) {
                          acc(c.grid(nrows), px, out, ncols, int(c["BLOCK"]));
                        },
                        opts);
  tuned.restore([](const float*, float* out, int nrows, int) { return std::vector<Region>{{out, nrows * sizeof(float)}}; });
  std::vector<float> out(rows, 1.0f);
  tuned(x.data(), out.data(), rows, cols);
  const TuneReport r = tuned.last_report();
  CHECK(r.pruned == 1);
  REQUIRE(r.prune_reasons.size() == 1);
  CHECK_THAT(r.prune_reasons[0], Catch::Contains("BLOCK=2097152"));
  CHECK(r.best.get("BLOCK", 0) != (1 << 21));
  // out = 1 + one row sum: the benchmark runs' additions were undone.
  for (int i = 0; i < rows; ++i) CHECK(out[i] == Approx(1.0 + want[i]).margin(1e-3));
  // A space where every config fails: a UserError at autotune()'s line naming the reasons.
  Space bad;
  bad.values("BLOCK", {1 << 21});
  const int line = __LINE__ + 1;
  auto none = autotune("rowsum_none", bad, cols_key,
                       [&](const Config& c, const float* px, float* o, int nrows, int ncols) {
                         acc(c.grid(nrows), px, o, ncols, int(c["BLOCK"]));
                       },
                       opts);
  errtest::expect_user_error([&] { none(x.data(), out.data(), rows, cols); }, {"rowsum_none", "BLOCK=2097152"},
                             "test_autotune.cpp", line);
}

TEST_CASE("autotune: genetic search of a real kernel on the CPU backend, the second key ranked by a model trained on "
          "the first",
          "[tune]") {
  TempCache tc;
  auto rowsum = make_rowsum();
  Space space;
  space.pow2("BLOCK", 16, 1024).pow2("num_warps", 1, 8);  // 28 configs (num_warps is ignored on the CPU)
  AutotuneOptions opts;
  opts.repeats = 3, opts.warmup = 1;
  opts.exhaustive_limit = 4;  // force the genetic search on this small space
  opts.budget = 10;
  opts.compile_ahead = 1;
  auto tuned = autotune("rowsum_ga", space, cols_key,
                        [&](const Config& c, const float* px, float* out, int nrows, int ncols) {
                          rowsum(c.grid(nrows), px, out, ncols, int(c["BLOCK"]));
                        },
                        opts);
  const int rows = 9;
  for (int cols : {1001, 77}) {
    const std::vector<float> x = ramp(size_t(rows) * cols);
    const std::vector<double> want = row_sums(x, rows, cols);
    std::vector<float> out(rows, -1.0f);
    tuned(x.data(), out.data(), rows, cols);
    for (int r = 0; r < rows; ++r) CHECK(out[r] == Approx(want[r]).margin(1e-3));
    const TuneReport r = tuned.last_report();
    CHECK(r.valid == 28);
    CHECK(r.measured <= 10);
    CHECK(r.measured >= 1);
    CHECK(space.valid(r.best));
    // The first key has no stored measurements to learn from; the second has the first's 10.
    if (cols == 77 && tune::xgboost()) CHECK(r.used_model);
    if (cols == 1001) CHECK_FALSE(r.used_model);
  }
  CHECK(tc.entries().size() == 2);
}

// ---- the search replayed on landscapes measured on an H100 (tests/data; benchmarks/tune_replay
// prints the same over more seeds). Budget 5 % of the valid configs, as tune_study's searches.

namespace {

/// The recorded landscapes, or empty (with a WARN) when the data file is missing (a bundle
/// without the sources).
std::vector<tune::Landscape> recorded_landscapes() {
  const std::string path = std::string(TLE_TEST_DATA_DIR) + "/tune-landscapes-h100-2026-12-07.csv";
  if (!fs::exists(path)) {
    WARN(path << " is missing: replay test skipped");
    return {};
  }
  return tune::load_landscapes(path);
}

/// Over seeds 1..n: the mean configs measured, the mean best / landscape best, the seeds within 3 %.
struct ReplayStats {
  double measured = 0, ratio = 0, worst = 0;
  int within = 0, model = 0;
};

}  // namespace

TEST_CASE("autotune replay: the recorded H100 landscapes load, and a replay is deterministic", "[tune]") {
  const auto ls = recorded_landscapes();
  if (ls.empty()) return;
  REQUIRE(ls.size() == 4);
  CHECK(ls[0].kernel == "softmax f32");
  CHECK(ls[0].shape == "64x128256");
  CHECK(ls[0].key_numbers == std::vector<int64_t>{64, 128256});
  CHECK(ls[0].ms.size() == 192);
  CHECK(ls[1].ms.size() == 192);
  CHECK(ls[2].ms.size() == 560);
  CHECK(ls[3].ms.size() == 448);
  CHECK(ls[0].space.enumerate().size() == 192);  // valid = recorded
  CHECK(ls[0].best_ms == Approx(0.0436).epsilon(0.01));
  CHECK(std::isinf(ls[0].time(Config({{"BLOCK", 8192}, {"num_warps", 32}, {"stages", 1}, {"maxnreg", 128}}))));
  const auto a = tune::replay(ls[3], tune::replay_options(ls[3], 5)), b = tune::replay(ls[3], tune::replay_options(ls[3], 5));
  REQUIRE(a.measured.size() == b.measured.size());
  for (size_t i = 0; i < a.measured.size(); ++i) CHECK(a.measured[i].first == b.measured[i].first);
}

TEST_CASE("autotune replay: cold searches at 5 % of the recorded spaces get within a few % of the exhaustive best",
          "[tune]") {
  const auto ls = recorded_landscapes();
  if (ls.empty()) return;
  // Before the spread start and the local search with restarts (the GA's random population of 16
  // for budgets of 9 to 28), over these seeds: softmax 64x128256 4/20 within 3 % (worst 1.65x),
  // layernorm 4096x4100 5/20 (worst 1.22x).
  struct Want {
    double mean_ratio;
    int within;
    double worst;
  } want[] = {{1.035, 8, 1.10}, {1.01, 20, 1.01}, {1.02, 19, 1.05}, {1.08, 8, 1.25}};
  for (size_t i = 0; i < ls.size(); ++i) {
    ReplayStats st;
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      const tune::SearchResult r = tune::replay(ls[i], tune::replay_options(ls[i], seed));
      CHECK(r.measured.size() == ls[i].ms.size() / 20);  // a cold search spends its budget
      const double q = r.best_time / ls[i].best_ms;
      st.ratio += q / 20, st.worst = std::max(st.worst, q), st.within += q <= 1.03;
    }
    INFO(ls[i].kernel << " " << ls[i].shape << ": mean ratio " << st.ratio << ", worst " << st.worst << ", within 3 % "
                      << st.within << "/20");
    CHECK(st.ratio <= want[i].mean_ratio);
    CHECK(st.within >= want[i].within);
    CHECK(st.worst <= want[i].worst);
  }
}

TEST_CASE("autotune replay: a model trained on another shape's search makes the search stop early", "[tune]") {
  if (!tune::xgboost()) {
    WARN("libxgboost is not installed (" << tune::why_no_xgboost() << "): transfer replay skipped");
    return;
  }
  const auto ls = recorded_landscapes();
  if (ls.empty()) return;
  // Warm on shape i after the cold search of shape j (tune_study's "warm search (after A)").
  auto warm = [&](size_t i, size_t j) {
    ReplayStats st;
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      const tune::SearchResult prior = tune::replay(ls[j], tune::replay_options(ls[j], seed));
      bool used = false;
      const tune::SearchResult r = tune::replay(ls[i], tune::replay_options(ls[i], seed), {{&ls[j], &prior}}, &used);
      const double q = r.best_time / ls[i].best_ms;
      st.measured += double(r.measured.size()) / 20, st.ratio += q / 20, st.worst = std::max(st.worst, q);
      st.within += q <= 1.03, st.model += used;
    }
    WARN(ls[i].kernel << " " << ls[i].shape << " warm: measured " << st.measured << " of a budget of "
                      << ls[i].ms.size() / 20 << ", mean ratio " << st.ratio << ", within 3 % " << st.within
                      << "/20, model " << st.model << "/20");
    return st;
  };
  // layernorm 16384x4096 after 4096x4100: >= 3x fewer measurements than the cold budget (28),
  // within 3 % (before the early stop: 26 measured).
  const ReplayStats ln = warm(2, 3);
  CHECK(ln.model == 20);
  CHECK(3 * ln.measured <= double(ls[2].ms.size() / 20));
  CHECK(ln.within >= 16);  // 19/20 with libxgboost 1.6 (other versions rank a little differently)
  CHECK(ln.ratio <= 1.03);
  // softmax 64x128256 after 2048x128256: the budget is 9, so fewer measured but not 3x fewer;
  // within 3 % where the cold search gets there in about half the seeds.
  const ReplayStats sm = warm(0, 1);
  CHECK(sm.model >= 10);  // without a model (fewer than 8 configs of the prior ran): a cold search
  CHECK(sm.measured < double(ls[0].ms.size() / 20));
  CHECK(sm.within >= 16);  // 19/20 with libxgboost 1.6
}

TEST_CASE("autotune search: when the first configs are all pruned, the search goes on until one runs", "[tune]") {
  Space s;
  s.pow2("X", 1, 256).values("Y", {0, 1, 2, 3, 4, 5, 6, 7});  // 72 configs
  tune::SearchOptions o;
  // Only X = 1 runs (8 of 72): the spread start (X at its quantiles) misses it, and a budget of 65
  // is enough to reach it whatever the order (64 pruned configs + 1), for every seed.
  o.exhaustive_limit = 0, o.budget = 65;
  for (o.seed = 1; o.seed <= 20; ++o.seed) {
    auto r = tune::search(s, o, [](const Config& c, double) { return c["X"] == 1 ? 1.0 + double(c["Y"]) : tune::kFailed; });
    CHECK(r.best_time < tune::kFailed);
    CHECK(r.measured.size() <= 65);
  }
  o.seed = 3;
  // With a ranker that puts the 16 pruned configs X = 128, 256 first (as a model that never saw
  // them fail can), too: no early stop before a config ran.
  tune::Ranker rank = [](const std::vector<Config>& cs) {
    std::vector<double> v;
    for (auto& c : cs) v.push_back(-double(c["X"]));
    return v;
  };
  o.budget = 20;
  auto m = tune::search(s, o, [](const Config& c, double) { return c["X"] <= 64 ? 1.0 + double(c["Y"]) : tune::kFailed; }, rank);
  CHECK(m.best_time < tune::kFailed);
  CHECK(m.measured.size() >= 17);
}

// ---- GPU (hidden tag: run on the H200 by the lead)

TEST_CASE("autotune on the GPU: softmax over BLOCK and num_warps", "[.gpu]") {
  TempCache tc;
  auto softmax = jit("tune_softmax", [](Ptr<float> x, Ptr<float> y, Tile<int32_t> ncols, Constexpr<int> BLOCK) {
    Tile<int64_t> row = program_id(0).to<int64_t>();
    Tile<int32_t> cols = arange(0, BLOCK);
    Tile<bool> mask = cols < ncols;
    Tile<float> v = load(x + row * ncols + cols, mask, -INFINITY);
    Tile<float> e = exp(v - max(v, 0));
    store(y + row * ncols + cols, e / sum(e, 0), mask);
  });
  const int rows = 4096, cols = 3001;
  ManagedBuffer<float> x(size_t(rows) * cols), y(size_t(rows) * cols);
  for (size_t i = 0; i < x.size(); ++i) x.data()[i] = float((i * 7919) % 101) * 0.05f;
  Space space;
  space.pow2("BLOCK", 1024, 8192).pow2("num_warps", 1, 32);
  space.constraint("BLOCK >= ncols", [&](const Config& c) { return c["BLOCK"] >= cols; });
  AutotuneOptions opts;
  opts.backend = Backend::GPU;
  auto tuned = autotune("softmax", space, [](const float*, float*, int, int n) { return TuneKey().add("n", pow2_bucket(n)); },
                        [&](const Config& c, const float* px, float* py, int nrows, int ncols) {
                          softmax(c.grid(nrows), px, py, ncols, int(c["BLOCK"]));
                        },
                        opts);
  tuned(x.data(), y.data(), rows, cols);
  synchronize();
  const TuneReport r = tuned.last_report();
  INFO("best " << r.best.str() << " " << r.best_ms << " ms");
  CHECK(r.measured == 12);
  CHECK(r.best_ms > 0);
  for (int row : {0, 1777, rows - 1}) {
    std::vector<float> ref(cols);
    const float* xr = x.data() + size_t(row) * cols;
    float m = -INFINITY;
    for (int c = 0; c < cols; ++c) m = std::max(m, xr[c]);
    double s = 0;
    for (int c = 0; c < cols; ++c) s += std::exp(double(xr[c]) - m);
    for (int c = 0; c < cols; ++c)
      CHECK(y.data()[size_t(row) * cols + c] == Approx(std::exp(double(xr[c]) - m) / s).epsilon(1e-4).margin(1e-7));
  }
  // A fresh tuner finds it on disk.
  auto again = autotune("softmax", space, [](const float*, float*, int, int n) { return TuneKey().add("n", pow2_bucket(n)); },
                        [&](const Config& c, const float* px, float* py, int nrows, int ncols) {
                          softmax(c.grid(nrows), px, py, ncols, int(c["BLOCK"]));
                        },
                        opts);
  CHECK(again.select(x.data(), y.data(), rows, cols) == r.best);
  CHECK(again.last_report().from_cache);
}

TEST_CASE("autotune on the GPU: a bf16 matmul over a space of more than 5000 configs, genetic search", "[.gpu]") {
  TempCache tc;
  auto mm = jit("tune_mm", [](Ptr<bf16> a, Ptr<bf16> b, Ptr<float> c, Tile<int32_t> M, Tile<int32_t> N, Tile<int32_t> K,
                              Constexpr<int> BM, Constexpr<int> BN, Constexpr<int> BK) {
    Tile<int32_t> rm = program_id(0) * BM + arange(0, BM), rn = program_id(1) * BN + arange(0, BN);
    Tile<int32_t> rk = arange(0, BK);
    Tile<float> acc = zeros<float>({BM, BN});
    for (auto k0 : range(0, K, BK)) {
      Tile<int32_t> kk = k0 + rk;
      Tile<bf16> ta = load(a + expand_dims(rm, 1) * K + expand_dims(kk, 0), expand_dims(rm < M, 1) & expand_dims(kk < K, 0));
      Tile<bf16> tb = load(b + expand_dims(kk, 1) * N + expand_dims(rn, 0), expand_dims(kk < K, 1) & expand_dims(rn < N, 0));
      acc = dot(ta, tb, acc);
    }
    store(c + expand_dims(rm, 1) * N + expand_dims(rn, 0), acc, expand_dims(rm < M, 1) & expand_dims(rn < N, 0));
  });
  const int M = 1024, N = 1024, K = 1024;
  ManagedBuffer<bf16> a(size_t(M) * K), b(size_t(K) * N);
  ManagedBuffer<float> c(size_t(M) * N);
  for (size_t i = 0; i < a.size(); ++i) a.data()[i] = bf16(float(int(i % 7) - 3) * 0.125f);
  for (size_t i = 0; i < b.size(); ++i) b.data()[i] = bf16(float(int(i % 5) - 2) * 0.25f);
  Space space;
  space.pow2("BM", 16, 256).pow2("BN", 16, 256).pow2("BK", 16, 128).pow2("num_warps", 1, 16).values("num_stages", {1, 2, 3, 4, 5});
  space.values("maxnreg", {0, 128, 168, 255});
  space.constraint("(BM + BN) * BK * stages * 2 <= 227 KB", [](const Config& cf) {
    return (cf["BM"] + cf["BN"]) * cf["BK"] * cf["num_stages"] * 2 <= 227 * 1024;
  });
  REQUIRE(space.size() >= 5000);
  AutotuneOptions opts;
  opts.backend = Backend::GPU;
  opts.budget = 24;  // each config compiles (~0.5 s, overlapped with timing): keep the test near 15 s
  auto key = [](const bf16*, const bf16*, float*, int m, int n, int k) {
    return TuneKey().add("M", pow2_bucket(m)).add("N", pow2_bucket(n)).add("K", pow2_bucket(k));
  };
  auto tuned = autotune("matmul", space, key,
                        [&](const Config& cf, const bf16* pa, const bf16* pb, float* pc, int m, int n, int k) {
                          mm(cf.grid((m + cf["BM"] - 1) / cf["BM"], (n + cf["BN"] - 1) / cf["BN"]), pa, pb, pc, m, n, k,
                             int(cf["BM"]), int(cf["BN"]), int(cf["BK"]));
                        },
                        opts);
  tuned(a.data(), b.data(), c.data(), M, N, K);
  synchronize();
  const TuneReport r = tuned.last_report();
  INFO("best " << r.best.str() << " " << r.best_ms << " ms, measured " << r.measured << " of " << r.valid
               << ", pruned " << r.pruned << (r.used_model ? ", model" : ", no model"));
  CHECK(r.measured <= 24);
  CHECK(r.valid >= 5000);
  CHECK(r.best_ms > 0);
  for (int i : {0, 1000, M - 1})
    for (int j : {0, 777, N - 1}) {  // exact: multiples of 1/32 summed in f32 stay below 2^9
      double s = 0;
      for (int k = 0; k < K; ++k) s += double(float(a.data()[size_t(i) * K + k])) * double(float(b.data()[size_t(k) * N + j]));
      CHECK(c.data()[size_t(i) * N + j] == Approx(s).margin(1e-2));
    }
}

TEST_CASE("autotune cache: the GPU key holds the compiler's switches (a config tuned with TMA off is another entry)",
          "[tune]") {
  std::string on, off;
  {
    envtest::EnvVar tma("TLE_TMA", nullptr);
    on = detail::gpu_compiler_switches();
  }
  {
    envtest::EnvVar tma("TLE_TMA", "0");
    off = detail::gpu_compiler_switches();
  }
  CHECK_THAT(on, Catch::Contains("tma 1"));
  CHECK_THAT(off, Catch::Contains("tma 0"));
  CHECK_THAT(on, Catch::Contains("ws ") && Catch::Contains("reorder "));
}
