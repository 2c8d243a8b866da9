// benchmarks/tune_replay.cpp - the autotuner's search replayed on recorded landscapes (issue #16):
// no GPU, no kernel; each measurement is a lookup of the time `tune_study --csv` recorded for the
// config when it measured the whole space of a kernel at a shape (its "exhaustive SHAPE" phases).
// The search is the tuner's own (src/runtime/autotune/search.cpp, through tune::replay), ranked by
// the real XGBoost model (model.cpp) when libxgboost loads.
//
//   tune_replay [--csv FILE] [--seeds N] [--first-seed S] [--budget N] [--kernels K1,K2] [--verbose]
//
// FILE defaults to tests/data/tune-landscapes-h100-2026-12-07.csv (softmax f32 and layernorm bf16
// on an H100, two shapes each). For every landscape (kernel, shape) and every seed it runs, as
// tune_study's phases do:
//   cold   the search with no stored measurements (no model);
//   warm   the search after the cold searches of the kernel's other shapes (same seed): their
//          measurements train the ranking model, as the tuner trains on its cache's entries;
//   warm*  the same with the model trained on the other shapes' whole landscapes (what a store
//          holding many measurements of the kernel gives; an upper bound of "warm").
// Budget: 5 % of the shape's valid configs (tune_study's), or --budget. Per row: configs measured
// (mean, min-max over the seeds), the best found against the landscape's best (median, worst), the
// seeds whose best is within 3 %, and the measurements before the first config within 3 % (median
// over the seeds that got there). --verbose prints each search.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "runtime/autotune/tune.hpp"

using namespace tle;

namespace {

/// Measurements before the first within `ratio` of best (1-based), or -1.
int to_within(const tune::SearchResult& r, double best, double ratio = 1.03) {
  for (size_t i = 0; i < r.measured.size(); ++i)
    if (r.measured[i].second <= best * ratio) return int(i) + 1;
  return -1;
}

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Row {
  std::vector<double> measured, ratio, to3;
  int within = 0, model = 0;
  void add(const tune::SearchResult& r, double best, bool used_model) {
    measured.push_back(double(r.measured.size()));
    ratio.push_back(r.best_time / best);
    within += r.best_time <= best * 1.03;
    model += used_model;
    if (const int t = to_within(r, best); t > 0) to3.push_back(t);
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string csv = TLE_SOURCE_DIR "/tests/data/tune-landscapes-h100-2026-12-07.csv", kernels;
  int seeds = 20;
  uint64_t first_seed = 1, budget = 0;
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--csv" && i + 1 < argc) csv = argv[++i];
    else if (a == "--seeds" && i + 1 < argc) seeds = std::max(1, std::atoi(argv[++i]));
    else if (a == "--first-seed" && i + 1 < argc) first_seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--budget" && i + 1 < argc) budget = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--kernels" && i + 1 < argc) kernels = argv[++i];
    else if (a == "--verbose") verbose = true;
    else {
      std::fprintf(stderr,
                   "usage: %s [--csv FILE] [--seeds N] [--first-seed S] [--budget N] [--kernels K1,K2] [--verbose]\n",
                   argv[0]);
      return 2;
    }
  }
  std::vector<tune::Landscape> ls;
  try {
    ls = tune::load_landscapes(csv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  if (!kernels.empty())
    ls.erase(std::remove_if(ls.begin(), ls.end(),
                            [&](const tune::Landscape& l) {
                              return ("," + kernels + ",").find("," + l.kernel + ",") == std::string::npos;
                            }),
             ls.end());
  std::printf("tune_replay: %s, %zu landscapes, seeds %llu-%llu, libxgboost %s\n", csv.c_str(), ls.size(),
              (unsigned long long)first_seed, (unsigned long long)(first_seed + seeds - 1),
              tune::xgboost() ? "loaded" : tune::why_no_xgboost().c_str());
  auto options = [&](const tune::Landscape& l, uint64_t seed) { return tune::replay_options(l, seed, budget); };
  // The whole landscapes as "searches" (warm*'s training data).
  std::vector<tune::SearchResult> whole(ls.size());
  for (size_t i = 0; i < ls.size(); ++i)
    for (const Config& c : ls[i].space.enumerate()) whole[i].measured.emplace_back(c, ls[i].time(c));
  const char* modes[] = {"cold", "warm", "warm*"};
  std::vector<std::vector<Row>> rows(ls.size(), std::vector<Row>(3));
  for (int s = 0; s < seeds; ++s) {
    const uint64_t seed = first_seed + uint64_t(s);
    std::vector<tune::SearchResult> cold(ls.size());
    for (size_t i = 0; i < ls.size(); ++i) cold[i] = tune::replay(ls[i], options(ls[i], seed));
    for (size_t i = 0; i < ls.size(); ++i) {
      std::vector<std::pair<const tune::Landscape*, const tune::SearchResult*>> prior, prior_whole;
      for (size_t j = 0; j < ls.size(); ++j)
        if (j != i && ls[j].kernel == ls[i].kernel) prior.emplace_back(&ls[j], &cold[j]), prior_whole.emplace_back(&ls[j], &whole[j]);
      bool m1 = false, m2 = false;
      const tune::SearchResult warm = tune::replay(ls[i], options(ls[i], seed), prior, &m1);
      const tune::SearchResult warm_all = tune::replay(ls[i], options(ls[i], seed), prior_whole, &m2);
      const tune::SearchResult* rs[] = {&cold[i], &warm, &warm_all};
      const bool ms[] = {false, m1, m2};
      for (int m = 0; m < 3; ++m) {
        rows[i][m].add(*rs[m], ls[i].best_ms, ms[m]);
        if (verbose)
          std::printf("  %s %s %-5s seed %llu: measured %zu, best %.4f ms (%.3fx, %s), to 3 %% %d%s\n",
                      ls[i].kernel.c_str(), ls[i].shape.c_str(), modes[m], (unsigned long long)seed,
                      rs[m]->measured.size(), rs[m]->best_time, rs[m]->best_time / ls[i].best_ms,
                      rs[m]->best.str().c_str(), to_within(*rs[m], ls[i].best_ms), ms[m] ? ", model" : "");
      }
    }
  }
  std::printf("\n| kernel | shape | valid | budget | search | measured: mean (min-max) | best / exhaustive: median, "
              "worst | within 3 %% | to 3 %%: median (seeds) | model |\n|---|---|---:|---:|---|---:|---:|---:|---:|---:|\n");
  for (size_t i = 0; i < ls.size(); ++i)
    for (int m = 0; m < 3; ++m) {
      const Row& r = rows[i][m];
      const double mean = std::accumulate(r.measured.begin(), r.measured.end(), 0.0) / double(r.measured.size());
      std::printf("| %s | %s | %zu | %llu | %s | %.1f (%.0f-%.0f) | %.3fx, %.3fx | %d/%d | %s (%zu) | %d/%d |\n",
                  ls[i].kernel.c_str(), ls[i].shape.c_str(), ls[i].ms.size(),
                  (unsigned long long)options(ls[i], 0).budget, modes[m], mean,
                  *std::min_element(r.measured.begin(), r.measured.end()),
                  *std::max_element(r.measured.begin(), r.measured.end()), median(r.ratio),
                  *std::max_element(r.ratio.begin(), r.ratio.end()), r.within, seeds,
                  r.to3.empty() ? "-" : std::to_string(int(median(r.to3))).c_str(), r.to3.size(), r.model, seeds);
    }
  return 0;
}
