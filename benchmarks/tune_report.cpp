// benchmarks/tune_report.cpp - what the autotuner stored (docs/autotune.md): for each tuning cache
// entry, the top configs by measured time; and how well the ranking model predicts them: each
// entry's configs ranked by a model trained on the OTHER entries of its device (leave one out, so
// the prediction is what a new kernel or shape would get), Spearman's rho per entry, and a PNG of
// measured time (relative to the entry's best, log scale) against predicted rank.
//
//   tune_report [--dir DIR] [--png FILE] [--top N]
//
// DIR defaults to the tuning cache (<TLE_CACHE_DIR>/tune), FILE to $OUT/tune_report.png (else
// ./tune_report.png). Without libxgboost (or with fewer than two entries of a device) the model
// part is skipped with a notice.
#include <zlib.h>

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

/// A small RGB canvas written as a PNG (IHDR, one zlib IDAT, IEND).
struct Canvas {
  int w, h;
  std::vector<unsigned char> px;
  Canvas(int w_, int h_) : w(w_), h(h_), px(size_t(w_) * h_ * 3, 255) {}
  void set(int x, int y, unsigned r, unsigned g, unsigned b) {
    if (x < 0 || y < 0 || x >= w || y >= h) return;
    unsigned char* p = &px[(size_t(y) * w + x) * 3];
    p[0] = static_cast<unsigned char>(r), p[1] = static_cast<unsigned char>(g), p[2] = static_cast<unsigned char>(b);
  }
  void dot(int x, int y, unsigned r, unsigned g, unsigned b) {
    for (int dy = -2; dy <= 2; ++dy)
      for (int dx = -2; dx <= 2; ++dx)
        if (dx * dx + dy * dy <= 5) set(x + dx, y + dy, r, g, b);
  }
  void line(int x0, int y0, int x1, int y1, unsigned v) {
    const int n = std::max(std::abs(x1 - x0), std::abs(y1 - y0));
    for (int i = 0; i <= n; ++i) set(x0 + (x1 - x0) * i / std::max(n, 1), y0 + (y1 - y0) * i / std::max(n, 1), v, v, v);
  }
  bool write_png(const std::string& path) const {
    std::vector<unsigned char> raw;
    for (int y = 0; y < h; ++y) {
      raw.push_back(0);  // filter: none
      raw.insert(raw.end(), px.begin() + size_t(y) * w * 3, px.begin() + size_t(y + 1) * w * 3);
    }
    uLongf zn = compressBound(raw.size());
    std::vector<unsigned char> z(zn);
    if (compress2(z.data(), &zn, raw.data(), raw.size(), 9) != Z_OK) return false;
    z.resize(zn);
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return false;
    auto be32 = [](std::vector<unsigned char>& v, uint32_t x) {
      for (int s = 24; s >= 0; s -= 8) v.push_back(static_cast<unsigned char>(x >> s));
    };
    auto chunk = [&](const char* type, const std::vector<unsigned char>& data) {
      std::vector<unsigned char> c;
      be32(c, static_cast<uint32_t>(data.size()));
      c.insert(c.end(), type, type + 4);
      c.insert(c.end(), data.begin(), data.end());
      be32(c, static_cast<uint32_t>(crc32(0, c.data() + 4, static_cast<uInt>(c.size() - 4))));
      std::fwrite(c.data(), 1, c.size(), f);
    };
    static const unsigned char sig[8] = {137, 80, 78, 71, 13, 10, 26, 10};
    std::fwrite(sig, 1, 8, f);
    std::vector<unsigned char> ihdr;
    be32(ihdr, static_cast<uint32_t>(w)), be32(ihdr, static_cast<uint32_t>(h));
    ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});  // 8-bit RGB
    chunk("IHDR", ihdr);
    chunk("IDAT", z);
    chunk("IEND", {});
    return std::fclose(f) == 0;
  }
};

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
  std::string dir = tune::tune_directory(), png;
  size_t top = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc) dir = argv[++i];
    else if (a == "--png" && i + 1 < argc) png = argv[++i];
    else if (a == "--top" && i + 1 < argc) top = static_cast<size_t>(std::max(1, std::atoi(argv[++i])));
    else {
      std::fprintf(stderr, "usage: %s [--dir DIR] [--png FILE] [--top N]\n", argv[0]);
      return 2;
    }
  }
  if (png.empty()) png = std::string(std::getenv("OUT") ? std::getenv("OUT") : ".") + "/tune_report.png";
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
  // x: predicted rank (0 = predicted fastest .. 1 = slowest); y: time / best, log scale up to 16x.
  const int W = 800, H = 500, L = 60, B = 40;
  Canvas cv(W, H);
  cv.line(L, H - B, W - 10, H - B, 0), cv.line(L, 10, L, H - B, 0);
  for (int k = 0; k <= 4; ++k) {  // 1x, 2x, 4x, 8x, 16x gridlines
    const int y = (H - B) - k * (H - B - 10) / 4;
    cv.line(L, y, W - 10, y, 210);
  }
  static const unsigned palette[][3] = {{31, 119, 180}, {255, 127, 14}, {44, 160, 44}, {214, 39, 40},
                                        {148, 103, 189}, {140, 86, 75},  {227, 119, 194}, {23, 190, 207}};
  for (auto& p : pts) {
    const double ly = std::min(4.0, std::log2(std::max(1.0, p.y)));
    const int x = L + static_cast<int>(p.x * (W - 10 - L));
    const int y = (H - B) - static_cast<int>(ly / 4.0 * (H - B - 10));
    const unsigned* c = palette[p.entry % 8];
    cv.dot(x, y, c[0], c[1], c[2]);
  }
  if (!cv.write_png(png)) {
    std::fprintf(stderr, "tune_report: cannot write %s\n", png.c_str());
    return 1;
  }
  std::printf("\n%s: measured time / best (log2, gridlines at 1x 2x 4x 8x 16x) against predicted rank (left: "
              "predicted fastest), one colour per entry\n",
              png.c_str());
  return 0;
}
