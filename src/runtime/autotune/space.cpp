// src/runtime/autotune/space.cpp - Config, Space, TuneKey (tle/autotune.hpp).
#include <fmt/format.h>

#include <algorithm>

#include "runtime/autotune/tune.hpp"

namespace tle {

int64_t Config::at(std::string_view name, loc_t l) const {
  for (auto& [n, v] : values_)
    if (n == name) return v;
  std::vector<std::string> names;
  for (auto& kv : values_) names.push_back(kv.first);
  throw UserError(l, fmt::format("autotune: the config has no knob '{}' (its knobs: {}); declare it in the tle::Space",
                                 name, names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
}

int64_t Config::get(std::string_view name, int64_t fallback) const {
  for (auto& [n, v] : values_)
    if (n == name) return v;
  return fallback;
}

bool Config::has(std::string_view name) const {
  for (auto& kv : values_)
    if (kv.first == name) return true;
  return false;
}

std::string Config::str() const {
  std::string s;
  for (auto& [n, v] : values_) s += fmt::format("{}{}={}", s.empty() ? "" : " ", n, v);
  return s;
}

Grid Config::grid(int64_t x, int64_t y, int64_t z, loc_t l) const {
  Grid g(x, y, z, l);
  g.num_warps = static_cast<int>(get("num_warps", g.num_warps));
  g.num_stages = static_cast<int>(get("num_stages", g.num_stages));
  g.maxnreg = static_cast<int>(get("maxnreg", g.maxnreg));
  g.stream = stream;
  if (backend >= 0) g.backend(static_cast<Backend>(backend));
  return g;
}

namespace {
void check_name(const std::vector<Space::Knob>& knobs, const std::string& name, const SrcLoc& l) {
  if (name.empty()) throw UserError(l, "autotune: a knob needs a name (Space::values / Space::pow2)");
  for (auto& k : knobs)
    if (k.name == name)
      throw UserError(l, fmt::format("autotune: knob '{}' is declared twice (first at line {}); give each knob one "
                                     "domain",
                                     name, k.loc.line));
}
}  // namespace

Space& Space::values(std::string name, std::vector<int64_t> domain, loc_t l) {
  check_name(knobs_, name, l);
  if (domain.empty())
    throw UserError(l, fmt::format("autotune: knob '{}' has an empty list of values; give it at least one", name));
  std::vector<int64_t> d;
  for (int64_t v : domain)
    if (std::find(d.begin(), d.end(), v) == d.end()) d.push_back(v);
  knobs_.push_back({std::move(name), std::move(d), l});
  return *this;
}

Space& Space::pow2(std::string name, int64_t lo, int64_t hi, loc_t l) {
  check_name(knobs_, name, l);
  std::vector<int64_t> d;
  for (int64_t p = 1; p > 0 && p <= hi && p < (int64_t(1) << 62); p <<= 1)
    if (p >= lo) d.push_back(p);
  if (d.empty())
    throw UserError(l, fmt::format("autotune: knob '{}': no power of two lies in [{}, {}]; give a range that holds "
                                   "one (1 <= lo <= hi)",
                                   name, lo, hi));
  knobs_.push_back({std::move(name), std::move(d), l});
  return *this;
}

Space& Space::constraint(std::string what, std::function<bool(const Config&)> pred, loc_t l) {
  if (!pred) throw UserError(l, fmt::format("autotune: constraint '{}' has no predicate", what));
  constraints_.push_back({std::move(what), std::move(pred), l});
  return *this;
}

uint64_t Space::size() const {
  if (knobs_.empty()) return 0;
  uint64_t n = 1;
  for (auto& k : knobs_) {
    if (n > (uint64_t(1) << 63) / k.domain.size()) return uint64_t(1) << 63;
    n *= k.domain.size();
  }
  return n;
}

std::vector<int> Space::indices_at(uint64_t index) const {
  std::vector<int> idx(knobs_.size());
  for (size_t i = knobs_.size(); i-- > 0;) {
    const uint64_t d = knobs_[i].domain.size();
    idx[i] = static_cast<int>(index % d);
    index /= d;
  }
  return idx;
}

Config Space::config_of(const std::vector<int>& idx) const {
  std::vector<std::pair<std::string, int64_t>> v;
  v.reserve(knobs_.size());
  for (size_t i = 0; i < knobs_.size(); ++i) v.emplace_back(knobs_[i].name, knobs_[i].domain[idx[i]]);
  return Config(std::move(v));
}

bool Space::valid(const Config& c) const {
  for (auto& k : constraints_) {
    try {
      if (!k.pred(c)) return false;
    } catch (...) {
      return false;
    }
  }
  return true;
}

std::vector<Config> Space::enumerate(uint64_t limit) const {
  const uint64_t n = size();
  if (n > limit)
    throw UserError(knobs_.empty() ? SrcLoc() : knobs_[0].loc,
                    fmt::format("autotune: the space has {} configs, more than {} to enumerate; the genetic search "
                                "handles it without enumerating (leave AutotuneOptions::prune unset)",
                                n, limit));
  std::vector<Config> out;
  for (uint64_t i = 0; i < n; ++i) {
    Config c = config_at(i);
    if (valid(c)) out.push_back(std::move(c));
  }
  return out;
}

TuneKey& TuneKey::add(std::string_view name, int64_t value) {
  s_ += fmt::format("{}{}={}", s_.empty() ? "" : ",", name, value);
  nums_.push_back(value);
  return *this;
}

TuneKey& TuneKey::add(std::string_view name, std::string_view value) {
  s_ += fmt::format("{}{}={}", s_.empty() ? "" : ",", name, value);
  return *this;
}

int64_t pow2_bucket(int64_t n) {
  int64_t p = 1;
  while (p < n && p < (int64_t(1) << 62)) p <<= 1;
  return p;
}

}  // namespace tle
