// src/runtime/autotune/search.cpp - exhaustive search, the genetic algorithm (FlagTune's core/GA:
// population, crossover picking each knob from one parent, mutation redrawing legal values,
// children valid and not yet seen) and a final local search over the best config's neighbours.
#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "runtime/autotune/tune.hpp"

namespace tle::tune {

uint64_t default_budget(uint64_t valid) {
  const uint64_t five = valid / 20;
  return std::min<uint64_t>(valid, std::clamp<uint64_t>(five, 32, 512));
}

namespace {

using Idx = std::vector<int>;

class Search {
 public:
  Search(const Space& s, const SearchOptions& o, const std::function<double(const Config&, double)>& measure,
         const Ranker& rank)
      : space_(s), o_(o), measure_(measure), rank_(rank), rng_(o.seed) {}

  SearchResult run(const std::function<void(uint64_t)>& before) {
    const uint64_t n = space_.size();
    if (o_.candidates) {
      res_.exhaustive = true;
      res_.valid = o_.candidates->size();
      if (before) before(o_.candidates->size());
      if (o_.prepare) o_.prepare(*o_.candidates);
      for (const Config& c : *o_.candidates) eval_config(c);
      return std::move(res_);
    }
    // Spaces up to 2^22 configs are enumerated (the constraints are cheap predicates); larger
    // ones are sampled.
    if (n <= (uint64_t(1) << 22)) {
      for (uint64_t i = 0; i < n; ++i) {
        Idx idx = space_.indices_at(i);
        if (space_.valid(space_.config_of(idx))) valid_.push_back(std::move(idx));
      }
      res_.valid = valid_.size();
      if (valid_.size() <= o_.exhaustive_limit) {
        res_.exhaustive = true;
        if (before) before(valid_.size());
        announce(valid_, valid_.size());
        for (auto& idx : valid_) eval(idx);
        return std::move(res_);
      }
    } else {
      // Estimate the valid fraction from 4096 samples.
      int ok = 0;
      for (int i = 0; i < 4096; ++i) ok += space_.valid(space_.config_of(random_idx()));
      res_.valid = static_cast<uint64_t>(double(n) * ok / 4096.0);
    }
    budget_ = o_.budget ? std::min<uint64_t>(o_.budget, std::max<uint64_t>(res_.valid, 1)) : default_budget(res_.valid);
    if (before) before(budget_);
    genetic();
    local_search();
    return std::move(res_);
  }

 private:
  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  double uniform() { return double(rng_() >> 11) * (1.0 / 9007199254740992.0); }
  Idx random_idx() {
    Idx idx(space_.knobs().size());
    for (size_t k = 0; k < idx.size(); ++k) idx[k] = pick(static_cast<int>(space_.knobs()[k].domain.size()));
    return idx;
  }
  bool valid(const Idx& idx) const { return space_.valid(space_.config_of(idx)); }
  /// Tells SearchOptions::prepare the first n of idxs not yet measured (the next batch).
  void announce(const std::vector<Idx>& idxs, uint64_t n) const {
    if (!o_.prepare) return;
    std::vector<Config> cs;
    for (size_t i = 0; i < idxs.size() && cs.size() < n; ++i)
      if (!seen_.count(idxs[i])) cs.push_back(space_.config_of(idxs[i]));
    if (!cs.empty()) o_.prepare(cs);
  }
  bool full() const { return res_.measured.size() >= budget_; }

  void eval_config(const Config& c) {
    const double t = measure_(c, res_.best_time);
    res_.measured.emplace_back(c, t);
    if (t < res_.best_time) res_.best_time = t, res_.best = c;
  }
  /// Measures idx unless seen; true if it was measured.
  bool eval(const Idx& idx) {
    if (!seen_.insert(idx).second) return false;
    const double t = measure_(space_.config_of(idx), res_.best_time);
    res_.measured.emplace_back(space_.config_of(idx), t);
    times_.emplace_back(idx, t);
    if (t < res_.best_time) res_.best_time = t, res_.best = space_.config_of(idx), best_ = idx;
    return true;
  }
  /// Candidates ordered by the model (predicted fastest first); unchanged without one.
  void order(std::vector<Idx>& cands) const {
    if (!rank_ || cands.size() < 2) return;
    std::vector<Config> cs;
    for (auto& i : cands) cs.push_back(space_.config_of(i));
    const std::vector<double> score = rank_(cs);
    std::vector<size_t> p(cands.size());
    std::iota(p.begin(), p.end(), 0);
    std::stable_sort(p.begin(), p.end(), [&](size_t a, size_t b) { return score[a] < score[b]; });
    std::vector<Idx> out;
    for (size_t i : p) out.push_back(std::move(cands[i]));
    cands = std::move(out);
  }
  /// A valid version of idx: itself, or idx with random knobs redrawn (up to 32 tries).
  bool repair(Idx& idx) {
    for (int t = 0; t < 32; ++t) {
      if (valid(idx)) return true;
      const int k = pick(static_cast<int>(idx.size()));
      idx[k] = pick(static_cast<int>(space_.knobs()[k].domain.size()));
    }
    return valid(idx);
  }

  void genetic() {
    // Initial population: a pool of valid configs (sampled), the model's best or a random subset.
    std::vector<Idx> pool;
    std::set<Idx> in_pool;
    const size_t pool_size = rank_ ? 4096 : static_cast<size_t>(o_.population);
    if (!valid_.empty()) {
      std::vector<size_t> p(valid_.size());
      std::iota(p.begin(), p.end(), 0);
      for (size_t i = 0; i < std::min(pool_size, p.size()); ++i) {
        std::swap(p[i], p[i + static_cast<size_t>(rng_() % (p.size() - i))]);
        pool.push_back(valid_[p[i]]);
      }
    } else {
      for (int t = 0; t < 200000 && pool.size() < pool_size; ++t) {
        Idx idx = random_idx();
        if (valid(idx) && in_pool.insert(idx).second) pool.push_back(std::move(idx));
      }
    }
    order(pool);
    const uint64_t ga_budget = std::max<uint64_t>(budget_ * 3 / 4, std::min<uint64_t>(budget_, o_.population));
    announce(pool, std::min<uint64_t>(o_.population, ga_budget));
    for (size_t i = 0; i < pool.size() && static_cast<int>(i) < o_.population && res_.measured.size() < ga_budget; ++i)
      eval(pool[i]);
    int stale = 0;
    // Stop after generations that found nothing faster: 8, or 4 when the model ranks the children
    // (its picks are better, so a stall means more).
    const int patience = rank_ ? 4 : 8;
    while (res_.measured.size() < ga_budget && stale < patience) {
      // Parents: the fastest `population` configs measured so far.
      std::vector<std::pair<Idx, double>> elite;
      for (auto& t : times_)
        if (t.second < kFailed) elite.push_back(t);
      if (elite.empty()) {  // everything failed so far: more random configs
        Idx idx = random_idx();
        stale += !(repair(idx) && eval(idx));
        continue;
      }
      std::stable_sort(elite.begin(), elite.end(), [](auto& a, auto& b) { return a.second < b.second; });
      if (elite.size() > static_cast<size_t>(o_.population)) elite.resize(o_.population);
      auto tournament = [&]() -> const Idx& {
        const size_t a = pick(static_cast<int>(elite.size())), b = pick(static_cast<int>(elite.size()));
        return elite[std::min(a, b)].first;  // elite is sorted: the lower index is faster
      };
      std::vector<Idx> children;
      std::set<Idx> made;
      const int want = rank_ ? 4 * o_.offspring : o_.offspring;
      for (int t = 0; t < 64 * want && static_cast<int>(children.size()) < want; ++t) {
        const Idx &p1 = tournament(), &p2 = tournament();
        Idx c(p1.size());
        for (size_t k = 0; k < c.size(); ++k) c[k] = (rng_() & 1) ? p1[k] : p2[k];
        for (size_t k = 0; k < c.size(); ++k) {
          if (uniform() >= o_.mutation) continue;
          const int d = static_cast<int>(space_.knobs()[k].domain.size());
          if (rng_() & 1) c[k] = std::clamp(c[k] + ((rng_() & 1) ? 1 : -1), 0, d - 1);  // a neighbouring value
          else c[k] = pick(d);                                                          // any legal value
        }
        if (!repair(c) || seen_.count(c) || !made.insert(c).second) continue;
        children.push_back(std::move(c));
      }
      order(children);
      announce(children, std::min<uint64_t>(o_.offspring, ga_budget - res_.measured.size()));
      int added = 0;
      for (size_t i = 0; i < children.size() && static_cast<int>(i) < o_.offspring && res_.measured.size() < ga_budget;
           ++i)
        added += eval(children[i]);
      stale = added ? (res_.best_time < last_best_ ? 0 : stale + 1) : stale + 1;
      last_best_ = std::min(last_best_, res_.best_time);
    }
  }

  /// Hill climbing from the best config: measure its unseen valid neighbours (one knob one domain
  /// step away); move to a faster one; stop when none is faster or the budget is spent.
  void local_search() {
    if (best_.empty()) return;
    bool moved = true;
    while (moved && !full()) {
      moved = false;
      const Idx from = best_;
      std::vector<Idx> nb;
      for (size_t k = 0; k < from.size(); ++k)
        for (int step : {-1, 1}) {
          Idx c = from;
          c[k] += step;
          if (c[k] < 0 || c[k] >= static_cast<int>(space_.knobs()[k].domain.size())) continue;
          if (!seen_.count(c) && valid(c)) nb.push_back(std::move(c));
        }
      order(nb);
      announce(nb, budget_ - res_.measured.size());
      for (auto& c : nb) {
        if (full()) break;
        eval(c);
      }
      moved = best_ != from;
    }
  }

  const Space& space_;
  const SearchOptions& o_;
  const std::function<double(const Config&, double)>& measure_;
  const Ranker& rank_;
  std::mt19937_64 rng_;
  SearchResult res_;
  std::vector<Idx> valid_;
  std::set<Idx> seen_;
  std::vector<std::pair<Idx, double>> times_;
  Idx best_;
  uint64_t budget_ = 0;
  double last_best_ = kFailed;
};

}  // namespace

SearchResult search(const Space& space, const SearchOptions& o,
                    const std::function<double(const Config&, double)>& measure, const Ranker& rank,
                    const std::function<void(uint64_t)>& before) {
  return Search(space, o, measure, rank).run(before);
}

}  // namespace tle::tune
