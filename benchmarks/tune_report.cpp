// benchmarks/tune_report.cpp - what the autotuner stored (docs/autotune.md): for each tuning cache
// entry, the top configs by measured time; and how well the ranking model predicts them: each
// entry's configs ranked by a model trained on the OTHER entries of its device (leave one out, so
// the prediction is what a new kernel or shape would get), Spearman's rho per entry, and a CSV of
// (entry, predicted rank, measured time / the entry's best) that benchmarks/tune_plot.py draws
// (matplotlib) as measured time against predicted rank.
//
//   tune_report [--dir DIR] [--csv FILE] [--top N]
//
// DIR defaults to the tuning cache (<TLE_CACHE_DIR>/tune), FILE to $OUT/tune_report.csv (else
// ./tune_report.csv). Without libxgboost (or with fewer than two entries of a device) the model
// part is skipped with a notice.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "runtime/autotune/tune.hpp"

using namespace tle;

namespace {

std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> p(v.size());
  std::iota(p.begin(), p.end(), 0);
  std::stable_sort(p.begin(), p.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < p.size(); ++i) r[p[i]] = double(i);
  return r;
}

/// The device part of an entry's key ("... | key K | DEVICE | tle V").
std::string device_of(const std::string& key) {
  const size_t t = key.rfind(" | tle ");
  const size_t d = t == std::string::npos ? std::string::npos : key.rfind(" | ", t - 1);
  return d == std::string::npos ? "" : key.substr(d + 3, t - d - 3);
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = tune::tune_directory(), csv;
  size_t top = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc) dir = argv[++i];
    else if (a == "--csv" && i + 1 < argc) csv = argv[++i];
    else if (a == "--top" && i + 1 < argc) top = static_cast<size_t>(std::max(1, std::atoi(argv[++i])));
    else {
      std::fprintf(stderr, "usage: %s [--dir DIR] [--csv FILE] [--top N]\n", argv[0]);
      return 2;
    }
  }
  if (csv.empty()) csv = std::string(std::getenv("OUT") ? std::getenv("OUT") : ".") + "/tune_report.csv";
  const std::vector<tune::Entry> entries = tune::load_all(dir);
  std::printf("tuning cache %s: %zu entries\n", dir.empty() ? "(disabled)" : dir.c_str(), entries.size());
  if (entries.empty()) return 0;

  for (auto& e : entries) {
    std::vector<std::pair<double, std::string>> rows;
    for (auto& [c, ms] : e.measured) rows.emplace_back(ms, c.str());
    std::sort(rows.begin(), rows.end());
    std::printf("\n%s  [%s]\n  %zu configs measured, best %.4f ms: %s\n", e.kernel.c_str(), e.key.c_str(),
                e.measured.size(), e.best_ms, e.best.str().c_str());
    for (size_t i = 0; i < rows.size() && i < top; ++i)
      std::printf("  %2zu. %10.4f ms  %s\n", i + 1, rows[i].first, rows[i].second.c_str());
  }

  if (!tune::xgboost()) {
    std::printf("\nno ranking model: %s\n", tune::why_no_xgboost().c_str());
    return 0;
  }
  // Leave one out: each entry ranked by a model trained on the other entries of its device.
  struct Point {
    double x, y;
    size_t entry;
  };
  std::vector<Point> pts;
  std::printf("\nranking model, leave one entry out (Spearman rho of predicted vs measured order):\n");
  for (size_t i = 0; i < entries.size(); ++i) {
    const tune::Group g = tune::group_of(entries[i]);
    if (g.rows.size() < 2) continue;
    std::vector<tune::Group> train;
    for (size_t j = 0; j < entries.size(); ++j)
      if (j != i && device_of(entries[j].key) == device_of(entries[i].key)) train.push_back(tune::group_of(entries[j]));
    auto m = tune::Model::train(train);
    if (!m) {
      std::printf("  %s [%s]: too little other data to train on\n", entries[i].kernel.c_str(), entries[i].key.c_str());
      continue;
    }
    const std::vector<float> score = m->predict(g.rows);
    std::vector<double> neg(score.size());
    for (size_t k = 0; k < score.size(); ++k) neg[k] = -double(score[k]);
    const auto rp = ranks(neg), rt = ranks(g.times);
    double d2 = 0;
    for (size_t k = 0; k < rp.size(); ++k) d2 += (rp[k] - rt[k]) * (rp[k] - rt[k]);
    const double n = double(rp.size());
    std::printf("  rho %+.3f  n %3zu  %s [%s]\n", 1 - 6 * d2 / (n * (n * n - 1)), rp.size(), entries[i].kernel.c_str(),
                entries[i].key.c_str());
    const double best = *std::min_element(g.times.begin(), g.times.end());
    for (size_t k = 0; k < rp.size(); ++k) pts.push_back({rp[k] / std::max(1.0, n - 1), g.times[k] / best, i});
  }
  if (pts.empty()) return 0;
  // predicted_rank: 0 = predicted fastest .. 1 = predicted slowest; time_over_best >= 1.
  std::FILE* f = std::fopen(csv.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "tune_report: cannot write %s\n", csv.c_str());
    return 1;
  }
  std::fprintf(f, "entry,kernel,predicted_rank,time_over_best\n");
  for (auto& p : pts) std::fprintf(f, "%zu,%s,%.6f,%.6f\n", p.entry, entries[p.entry].kernel.c_str(), p.x, p.y);
  std::fclose(f);
  std::printf("\n%s: %zu points (benchmarks/tune_plot.py %s draws them)\n", csv.c_str(), pts.size(), csv.c_str());
  return 0;
}
