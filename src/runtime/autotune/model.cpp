// src/runtime/autotune/model.cpp - the ranking model's features and libxgboost, opened with
// dlopen (as the CUDA driver in src/runtime/cuda/driver.cpp) so that libtle needs no XGBoost:
// $TLE_LIBXGBOOST if set (only that file), else libxgboost.so.0, else libxgboost.so.
//
// The C API used is xgboost/c_api.h of XGBoost 1.7 (Debian's libxgboost-dev 1.7.4): the types
// below mirror its declarations (bst_ulong is uint64_t, handles are void*), so tle builds without
// the header.
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <sstream>

#include "runtime/autotune/tune.hpp"

namespace tle::tune {

// ---- features (docs/autotune.md, "Features": keep the two in step; the column order is the
// model's, and entries store their raw inputs, not the rows, so a change here retrains cleanly).

namespace {
float lg(double v) { return static_cast<float>(std::log2(1.0 + std::max(0.0, v))); }
bool launch_knob(const std::string& n) { return n == "num_warps" || n == "num_stages" || n == "maxnreg"; }
}  // namespace

std::vector<float> ir_features(const std::string& ir_text) {
  std::map<std::string, int> count;
  int total = 0;
  std::istringstream in(ir_text);
  for (std::string line; std::getline(in, line);) {
    size_t p = line.find(" = ");
    p = p == std::string::npos ? line.find_first_not_of(' ') : p + 3;
    if (p == std::string::npos || p >= line.size() || line[p] == '^' || line[p] == '}') continue;
    const size_t e = line.find_first_of(" {:(", p);
    const std::string op = line.substr(p, e == std::string::npos ? std::string::npos : e - p);
    if (op.empty() || op == "func" || op.back() == ')') continue;
    ++count[op], ++total;
  }
  auto c = [&](const char* op) { return count.count(op) ? count[op] : 0; };
  return {lg(c("load")),
          lg(c("store") + c("atomic_rmw") + c("atomic_cas")),
          lg(c("dot")),
          lg(c("reduce")),
          lg(c("scan") + c("sort") + c("histogram") + c("gather")),
          lg(c("for") + c("while")),
          lg(c("unary") + c("fma")),
          lg(total)};
}

std::vector<float> features(const std::vector<float>& ir, const std::vector<int64_t>& key_numbers, const Space& space,
                            const Config& c) {
  std::vector<float> f(kNumFeatures, 0.0f);
  for (size_t i = 0; i < 8 && i < ir.size(); ++i) f[i] = ir[i];
  double shape = 0;
  for (size_t i = 0; i < key_numbers.size(); ++i) {
    if (i < 4) f[8 + i] = lg(static_cast<double>(key_numbers[i]));
    shape += std::log2(1.0 + std::max<double>(0, static_cast<double>(key_numbers[i])));
  }
  f[12] = static_cast<float>(shape);
  double block = 0;
  int nblock = 0;
  for (auto& k : space.knobs()) {
    if (launch_knob(k.name)) continue;
    const double v = static_cast<double>(c.get(k.name, 0));
    if (nblock < 4) f[13 + nblock] = lg(v);
    block += std::log2(1.0 + std::max(0.0, v));
    ++nblock;
  }
  // num_warps 0 (or below) is a kernel's own choice (e.g. TopkOptions::num_warps): unknown here,
  // so its features are missing (NaN), not log2(0) = -inf - XGBoost refuses a matrix holding inf,
  // and one such entry in the store would switch the model off for every kernel of the device.
  const double warps = static_cast<double>(c.get("num_warps", 4));
  const float unknown = std::numeric_limits<float>::quiet_NaN();
  f[17] = static_cast<float>(block);
  f[18] = warps > 0 ? lg(warps) : unknown;
  f[19] = static_cast<float>(c.get("num_stages", 3));
  f[20] = static_cast<float>(c.get("maxnreg", 0)) / 32.0f;
  f[21] = static_cast<float>(nblock);
  f[22] = static_cast<float>(shape - block);                         // programs per launch (log2)
  f[23] = static_cast<float>(block - std::log2(32.0 * warps));       // elements per thread (log2; missing below)
  f[24] = static_cast<float>(block + std::log2(std::max(1.0, double(f[19]))));  // staged tile volume (log2)
  f[25] = static_cast<float>(key_numbers.size());
  for (float& v : f)
    if (!std::isfinite(v)) v = unknown;  // log2(32 * 0) and whatever else overflows: missing, never +-inf
  return f;
}

Group group_of(const Entry& e) {
  Space knobs;  // the entry's knob names (features read knobs by name; domains do not matter)
  for (auto& k : e.knobs) knobs.values(k, {0});
  Group g;
  for (auto& [c, ms] : e.measured) {
    g.rows.push_back(features(e.ir, e.key_numbers, knobs, c));
    g.times.push_back(ms);
  }
  return g;
}

Ranker model_ranker(const Model& m, std::vector<float> ir, std::vector<int64_t> key_numbers, const Space& space) {
  return [&m, ir = std::move(ir), key_numbers = std::move(key_numbers), &space](const std::vector<Config>& cs) {
    std::vector<std::vector<float>> rows;
    for (auto& c : cs) rows.push_back(features(ir, key_numbers, space, c));
    std::vector<double> out;
    for (float v : m.predict(rows)) out.push_back(-double(v));  // the model scores faster higher
    return out;
  };
}

// ---- libxgboost

struct XGBoost {
  using bst_ulong = uint64_t;
  int (*XGDMatrixCreateFromMat)(const float*, bst_ulong, bst_ulong, float, void**);
  int (*XGDMatrixSetFloatInfo)(void*, const char*, const float*, bst_ulong);
  int (*XGDMatrixSetUIntInfo)(void*, const char*, const unsigned*, bst_ulong);
  int (*XGDMatrixFree)(void*);
  int (*XGBoosterCreate)(void* const*, bst_ulong, void**);
  int (*XGBoosterFree)(void*);
  int (*XGBoosterSetParam)(void*, const char*, const char*);
  int (*XGBoosterUpdateOneIter)(void*, int, void*);
  int (*XGBoosterPredict)(void*, void*, int, unsigned, int, bst_ulong*, const float**);
  const char* (*XGBGetLastError)();
};

namespace {
std::string g_why;

std::unique_ptr<XGBoost> load_xgboost() {
  std::vector<std::string> names;
  if (const char* p = std::getenv("TLE_LIBXGBOOST"); p && *p) {
    names.push_back(p);  // only this one (as TLE_LIBCUDA)
  } else {
    names.push_back("libxgboost.so.0");
    names.push_back("libxgboost.so");
  }
  void* h = nullptr;
  std::string err;
  for (auto& n : names) {
    h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h) break;
    const char* e = dlerror();
    err += fmt::format("{}{}", err.empty() ? "" : "; ", e ? e : n);
  }
  if (!h) {
    g_why = "libxgboost not found (" + err + "); install libxgboost-dev or set TLE_LIBXGBOOST";
    return nullptr;
  }
  auto x = std::make_unique<XGBoost>();
  bool ok = true;
  auto sym = [&](auto& fn, const char* name) {
    void* s = dlsym(h, name);
    if (!s) ok = false, g_why = fmt::format("libxgboost lacks {}", name);
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(s);
  };
  sym(x->XGDMatrixCreateFromMat, "XGDMatrixCreateFromMat");
  sym(x->XGDMatrixSetFloatInfo, "XGDMatrixSetFloatInfo");
  sym(x->XGDMatrixSetUIntInfo, "XGDMatrixSetUIntInfo");
  sym(x->XGDMatrixFree, "XGDMatrixFree");
  sym(x->XGBoosterCreate, "XGBoosterCreate");
  sym(x->XGBoosterFree, "XGBoosterFree");
  sym(x->XGBoosterSetParam, "XGBoosterSetParam");
  sym(x->XGBoosterUpdateOneIter, "XGBoosterUpdateOneIter");
  sym(x->XGBoosterPredict, "XGBoosterPredict");
  sym(x->XGBGetLastError, "XGBGetLastError");
  if (!ok) return nullptr;  // the handle stays open, as the driver's
  return x;
}
}  // namespace

const XGBoost* xgboost() {
  static std::once_flag once;
  static std::unique_ptr<XGBoost> x;
  std::call_once(once, [] { x = load_xgboost(); });
  return x.get();
}

const std::string& why_no_xgboost() {
  xgboost();
  return g_why;
}

namespace {
/// A DMatrix of rows, freed with the object.
struct DMatrix {
  const XGBoost* x;
  void* h = nullptr;
  DMatrix(const XGBoost* xg, const std::vector<std::vector<float>>& rows) : x(xg) {
    std::vector<float> flat;
    flat.reserve(rows.size() * kNumFeatures);
    for (auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
    if (x->XGDMatrixCreateFromMat(flat.data(), rows.size(), kNumFeatures, NAN, &h) != 0) h = nullptr;
  }
  ~DMatrix() {
    if (h) x->XGDMatrixFree(h);
  }
};
}  // namespace

std::optional<Model> Model::train(const std::vector<Group>& groups, int rounds, uint64_t seed) {
  const XGBoost* x = xgboost();
  if (!x) return std::nullopt;
  std::vector<std::vector<float>> rows;
  std::vector<float> labels;
  std::vector<unsigned> sizes;
  for (auto& g : groups) {
    if (g.rows.size() < 2) continue;
    // Labels: the reversed rank in the group (the fastest gets n - 1; ties keep their order).
    std::vector<size_t> p(g.rows.size());
    std::iota(p.begin(), p.end(), 0);
    std::stable_sort(p.begin(), p.end(), [&](size_t a, size_t b) { return g.times[a] < g.times[b]; });
    std::vector<float> lab(p.size());
    for (size_t r = 0; r < p.size(); ++r) lab[p[r]] = static_cast<float>(p.size() - 1 - r);
    for (size_t i = 0; i < g.rows.size(); ++i) rows.push_back(g.rows[i]), labels.push_back(lab[i]);
    sizes.push_back(static_cast<unsigned>(g.rows.size()));
  }
  if (rows.size() < 8) return std::nullopt;
  DMatrix d(x, rows);
  if (!d.h || x->XGDMatrixSetFloatInfo(d.h, "label", labels.data(), labels.size()) != 0 ||
      x->XGDMatrixSetUIntInfo(d.h, "group", sizes.data(), sizes.size()) != 0)
    return std::nullopt;
  Model m;
  if (x->XGBoosterCreate(&d.h, 1, &m.booster_) != 0) return std::nullopt;
  const std::string s = std::to_string(seed % 2147483647);
  for (auto [k, v] : {std::pair<const char*, const char*>{"objective", "rank:pairwise"},
                      {"eval_metric", "ndcg"}, {"tree_method", "hist"}, {"max_depth", "6"}, {"eta", "0.1"},
                      {"nthread", "1"}, {"verbosity", "0"}, {"seed", s.c_str()}})
    if (x->XGBoosterSetParam(m.booster_, k, v) != 0) return std::nullopt;
  for (int i = 0; i < rounds; ++i)
    if (x->XGBoosterUpdateOneIter(m.booster_, i, d.h) != 0) return std::nullopt;
  return m;
}

Model::Model(Model&& o) noexcept : booster_(std::exchange(o.booster_, nullptr)) {}
Model& Model::operator=(Model&& o) noexcept {
  std::swap(booster_, o.booster_);
  return *this;
}
Model::~Model() {
  if (booster_) xgboost()->XGBoosterFree(booster_);
}

std::vector<float> Model::predict(const std::vector<std::vector<float>>& rows) const {
  const XGBoost* x = xgboost();
  std::vector<float> out(rows.size(), 0.0f);
  if (rows.empty()) return out;
  DMatrix d(x, rows);
  uint64_t n = 0;
  const float* r = nullptr;
  if (!d.h || x->XGBoosterPredict(booster_, d.h, 0, 0, 0, &n, &r) != 0 || n != rows.size()) return out;
  std::copy(r, r + n, out.begin());
  return out;
}

}  // namespace tle::tune
