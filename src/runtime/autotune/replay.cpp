// src/runtime/autotune/replay.cpp - the search replayed offline on recorded landscapes: the
// measurements of whole spaces that `tune_study --csv` writes (benchmarks/tune_study.cpp), read
// back, and search() (search.cpp) run against them with a lookup as its measurement, ranked by the
// real XGBoost model (model.cpp) when earlier searches of the kernel give it data. What
// benchmarks/tune_replay prints and tests/test_autotune.cpp checks ("[tune]").
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <stdexcept>

#include "runtime/autotune/tune.hpp"

namespace tle::tune {

double Landscape::time(const Config& c) const {
  auto it = ms.find(c.str());
  return it == ms.end() ? kFailed : it->second;
}

namespace {

/// "BLOCK=1024 num_warps=1" -> {{"BLOCK", 1024}, {"num_warps", 1}}; nullopt when malformed.
std::optional<std::vector<std::pair<std::string, int64_t>>> parse_config(const std::string& s) {
  std::vector<std::pair<std::string, int64_t>> v;
  for (const std::string& kv : split(s, ' ')) {
    if (kv.empty()) continue;
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) return std::nullopt;
    int64_t x;
    if (!parse_i64(kv.substr(eq + 1), x)) return std::nullopt;
    v.emplace_back(kv.substr(0, eq), x);
  }
  if (v.empty()) return std::nullopt;
  return v;
}

}  // namespace

std::vector<Landscape> load_landscapes(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(fmt::format("tune replay: cannot read {}", path));
  struct Raw {
    std::string kernel, shape;
    std::vector<std::pair<std::vector<std::pair<std::string, int64_t>>, double>> rows;
  };
  std::vector<Raw> raw;
  std::map<std::string, std::vector<std::string>> knob_names;          // kernel -> knobs in order
  std::map<std::string, std::map<std::string, std::set<int64_t>>> doms;  // kernel -> knob -> values
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (n == 1 && line.rfind("kernel,", 0) == 0)) continue;
    const std::vector<std::string> f = split(line, ',');
    auto bad = [&](const std::string& why) {
      return std::runtime_error(fmt::format("tune replay: {} line {}: {} ('{}')", path, n, why, line));
    };
    if (f.size() != 5) throw bad("expected kernel,phase,order,config,ms");
    if (f[1].rfind("exhaustive ", 0) != 0) continue;  // searches: not a landscape
    // matmul's "exhaustive sub-space SHAPE": a part of the space only, so the search would meet
    // configs it has no time for.
    if (f[1].rfind("exhaustive sub-space ", 0) == 0) continue;
    auto cfg = parse_config(f[3]);
    if (!cfg) throw bad("malformed config");
    char* end = nullptr;
    const double ms = std::strtod(f[4].c_str(), &end);
    if (!end || *end || std::isnan(ms)) throw bad("malformed time");
    const std::string shape = f[1].substr(11);
    if (raw.empty() || raw.back().kernel != f[0] || raw.back().shape != shape) {
      auto it = std::find_if(raw.begin(), raw.end(), [&](const Raw& r) { return r.kernel == f[0] && r.shape == shape; });
      if (it != raw.end()) throw bad("the landscape's lines are not contiguous");
      raw.push_back({f[0], shape, {}});
    }
    std::vector<std::string> names;
    for (auto& [k, v] : *cfg) names.push_back(k), doms[f[0]][k].insert(v);
    auto& kn = knob_names[f[0]];
    if (kn.empty()) kn = names;
    if (kn != names) throw bad("the config's knobs differ from the kernel's first config");
    raw.back().rows.emplace_back(std::move(*cfg), std::isfinite(ms) ? ms : kFailed);
  }
  std::vector<Landscape> out;
  for (Raw& r : raw) {
    Landscape l;
    l.kernel = r.kernel, l.shape = r.shape;
    for (const std::string& x : split(r.shape, 'x')) l.key_numbers.push_back(std::strtoll(x.c_str(), nullptr, 10));
    for (const std::string& k : knob_names[r.kernel]) {
      const auto& d = doms[r.kernel][k];
      l.space.values(k, std::vector<int64_t>(d.begin(), d.end()));
    }
    auto valid = std::make_shared<std::set<std::string>>();
    for (auto& [values, ms] : r.rows) {
      const std::string c = Config(values).str();
      valid->insert(c);
      l.ms[c] = ms;
      l.best_ms = std::min(l.best_ms, ms);
    }
    l.space.constraint("recorded for " + r.shape, [valid](const Config& c) { return valid->count(c.str()) > 0; });
    out.push_back(std::move(l));
  }
  return out;
}

SearchOptions replay_options(const Landscape& l, uint64_t seed, uint64_t budget) {
  SearchOptions o;
  o.exhaustive_limit = 0;
  o.budget = budget ? budget : std::max<uint64_t>(1, l.ms.size() / 20);
  o.seed = seed;
  return o;
}

SearchResult replay(const Landscape& l, const SearchOptions& o,
                    const std::vector<std::pair<const Landscape*, const SearchResult*>>& prior, bool* used_model) {
  // The model as tuner.cpp trains it: one ranking group per stored entry (the finite measurements
  // of one kernel at one key), all of them together.
  std::optional<Model> model;
  if (!prior.empty() && xgboost()) {
    std::vector<Group> groups;
    for (auto& [pl, pr] : prior) {
      Entry e;
      e.kernel = pl->kernel, e.key_numbers = pl->key_numbers;
      for (auto& k : pl->space.knobs()) e.knobs.push_back(k.name);
      for (auto& m : pr->measured)
        if (std::isfinite(m.second)) e.measured.push_back(m);  // the tuning cache omits pruned ones
      groups.push_back(group_of(e));
    }
    model = Model::train(groups);
  }
  Ranker rank;
  if (model) rank = model_ranker(*model, {}, l.key_numbers, l.space);
  if (used_model) *used_model = model.has_value();
  return search(l.space, o, [&](const Config& c, double) { return l.time(c); }, rank);
}

}  // namespace tle::tune
