// src/runtime/autotune/search.cpp - exhaustive search; else a start (configs spread over the
// space, or the ranking model's favourites), the genetic algorithm when the budget allows
// generations (FlagTune's core/GA: population, crossover picking each knob from one parent,
// mutation redrawing legal values, children valid and not yet seen), and a local search (hill
// climbing over one-step neighbours, with restarts) that spends the rest of the budget - or, with
// a model, stops once it stops finding faster configs. docs/autotune.md, "Search".
#include <algorithm>
#include <cmath>
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
    make_pool();
    if (budget_ < uint64_t(2 * o_.population)) {
      // Too few measurements for generations of a population: a few configs spread over the
      // space (or the model's favourites), then the local search spends the rest.
      start(std::clamp<uint64_t>(budget_ / (rank_ ? 8 : 4), 2, uint64_t(o_.population)));
    } else {
      start(std::min<uint64_t>(uint64_t(o_.population), budget_));
      genetic();
    }
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
  /// The budget is spent, or (in the local search, with a model) its last `patience_`
  /// measurements found nothing more than min_gain faster than the best before them.
  bool full() const {
    return res_.measured.size() >= budget_ ||
           (patience_ && res_.best_time < kFailed && res_.measured.size() - gain_at_ >= patience_);
  }
  /// Distance of two configs in domain steps, each knob's scaled to [0, 1].
  double distance(const Idx& a, const Idx& b) const {
    double d = 0;
    for (size_t k = 0; k < a.size(); ++k)
      if (const size_t n = space_.knobs()[k].domain.size(); n > 1) d += std::abs(a[k] - b[k]) / double(n - 1);
    return d;
  }

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
    if (t < gain_ref_ * (1.0 - o_.min_gain)) gain_ref_ = t, gain_at_ = res_.measured.size();
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

  /// pool_: up to 4096 valid configs in random order (all of them in smaller spaces).
  void make_pool() {
    std::set<Idx> in_pool;
    if (!valid_.empty()) {
      std::vector<size_t> p(valid_.size());
      std::iota(p.begin(), p.end(), 0);
      for (size_t i = 0; i < std::min<size_t>(kPool, p.size()); ++i) {
        std::swap(p[i], p[i + static_cast<size_t>(rng_() % (p.size() - i))]);
        pool_.push_back(valid_[p[i]]);
      }
    } else {
      for (int t = 0; t < 200000 && pool_.size() < kPool; ++t) {
        Idx idx = random_idx();
        if (valid(idx) && in_pool.insert(idx).second) pool_.push_back(std::move(idx));
      }
    }
  }

  /// The first n measurements: the model's n best of the pool; without a model a spread-out
  /// design (spread()).
  void start(uint64_t n) {
    std::vector<Idx> first;
    if (rank_) {
      first = pool_;
      order(first);
      if (first.size() > n) first.resize(n);
    } else {
      first = spread(n);
    }
    announce(first, first.size());
    for (auto& idx : first)
      if (!full()) eval(idx);
  }

  /// n configs of the pool spread over the space, a Latin hypercube in domain steps: knob k takes
  /// its domain's values at the quantiles (j + 0.5) / n, j < n, each in a random order, and each
  /// point snaps to the nearest pool config not taken yet (the constraints hold); of 16 such
  /// designs the one whose closest two configs are farthest apart.
  std::vector<Idx> spread(uint64_t n) {
    n = std::min<uint64_t>(n, pool_.size());
    std::vector<Idx> best;
    double best_gap = -1;
    const size_t nk = space_.knobs().size();
    for (int d = 0; d < 16 && n > 0; ++d) {
      std::vector<std::vector<int>> cols(nk);
      for (size_t k = 0; k < nk; ++k) {
        const int dom = static_cast<int>(space_.knobs()[k].domain.size());
        for (uint64_t j = 0; j < n; ++j) cols[k].push_back(std::min(dom - 1, int((double(j) + 0.5) * dom / double(n))));
        for (size_t j = cols[k].size(); j > 1; --j) std::swap(cols[k][j - 1], cols[k][rng_() % j]);
      }
      std::vector<Idx> design;
      std::set<size_t> taken;
      for (uint64_t j = 0; j < n; ++j) {
        Idx want(nk);
        for (size_t k = 0; k < nk; ++k) want[k] = cols[k][j];
        size_t at = 0;
        double near = 1e300;
        for (size_t i = 0; i < pool_.size(); ++i)
          if (const double dist = distance(want, pool_[i]); dist < near && !taken.count(i)) near = dist, at = i;
        taken.insert(at);
        design.push_back(pool_[at]);
      }
      double gap = 1e300;
      for (size_t a = 0; a < design.size(); ++a)
        for (size_t b = a + 1; b < design.size(); ++b) gap = std::min(gap, distance(design[a], design[b]));
      if (gap > best_gap) best_gap = gap, best = std::move(design);
    }
    return best;
  }

  void genetic() {
    const uint64_t ga_budget = std::max<uint64_t>(budget_ * 3 / 4, std::min<uint64_t>(budget_, o_.population));
    int stale = 0;
    // Stop after generations that found nothing faster: 8, or 4 when the model ranks the children
    // (its picks are better, so a stall means more).
    const int patience = rank_ ? 4 : 8;
    while (res_.measured.size() < ga_budget && !full() && stale < patience) {
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
      for (size_t i = 0;
           i < children.size() && static_cast<int>(i) < o_.offspring && res_.measured.size() < ga_budget && !full(); ++i)
        added += eval(children[i]);
      stale = added ? (res_.best_time < last_best_ ? 0 : stale + 1) : stale + 1;
      last_best_ = std::min(last_best_, res_.best_time);
    }
  }

  /// Hill climbing from the best config: its unseen valid neighbours (one knob one domain step
  /// away) in the model's order (a random order without one), measured until one is faster
  /// (first improvement), which becomes the next starting point, its same step tried first
  /// (sizes and warp counts often improve several steps in a row). At a local optimum it climbs
  /// again from the fastest measured config not yet a starting point. Ends when the budget is
  /// spent, when every measured config has been a starting point, or - with a model - after
  /// `patience` measurements in a row none of which was more than min_gain faster than the best
  /// (SearchOptions::patience; the window opens here, so the start and the GA never stop it).
  void local_search() {
    // Nothing ran yet (every config so far pruned): the pool's next configs (the model's order)
    // until one runs.
    if (best_.empty()) {
      std::vector<Idx> rest;
      for (auto& idx : pool_)
        if (!seen_.count(idx)) rest.push_back(idx);
      order(rest);
      for (size_t i = 0; i < rest.size() && best_.empty() && !full(); ++i) eval(rest[i]);
    }
    if (best_.empty()) return;
    // With a model, stop early (SearchOptions::patience): the window starts here.
    if (rank_) {
      patience_ = o_.patience >= 0 ? uint64_t(o_.patience) : std::max<uint64_t>(4, budget_ / 8);
      gain_ref_ = res_.best_time, gain_at_ = res_.measured.size();
    }
    Idx step;  // the last move, tried again first
    Idx cur = best_;
    double cur_t = res_.best_time;
    std::set<Idx> centers;
    while (!full()) {
      const Idx from = cur;
      centers.insert(from);
      std::vector<Idx> nb = neighbours(from);
      if (rank_) order(nb);
      else
        for (size_t j = nb.size(); j > 1; --j) std::swap(nb[j - 1], nb[rng_() % j]);
      if (!step.empty()) {  // the last move again, first
        Idx again = from;
        for (size_t k = 0; k < again.size(); ++k) again[k] += step[k];
        if (auto it = std::find(nb.begin(), nb.end(), again); it != nb.end()) std::rotate(nb.begin(), it, it + 1);
      }
      for (size_t i = 0; i < nb.size(); ++i) {
        if (full()) break;
        // Announced a few at a time: a move makes the rest moot, and the compile thread would
        // compile them before the next starting point's neighbours.
        announce(std::vector<Idx>(nb.begin() + i, nb.begin() + std::min(nb.size(), i + 3)), 3);
        const Idx& c = nb[i];
        eval(c);
        if (times_.back().second < cur_t) {
          cur = c, cur_t = times_.back().second;
          break;
        }
      }
      if (cur == from) {
        // A local optimum (or the budget spent): climb again from the fastest config measured
        // that has not been a starting point yet.
        std::vector<std::pair<Idx, double>> m = times_;
        std::stable_sort(m.begin(), m.end(), [](auto& a, auto& b) { return a.second < b.second; });
        auto next = std::find_if(m.begin(), m.end(), [&](auto& x) { return x.second < kFailed && !centers.count(x.first); });
        if (next == m.end()) return;
        cur = next->first, cur_t = next->second;
        step.clear();
        continue;
      }
      step.assign(from.size(), 0);
      for (size_t k = 0; k < from.size(); ++k) step[k] = cur[k] - from[k];
    }
  }

  /// The unseen valid configs one knob one domain step from idx.
  std::vector<Idx> neighbours(const Idx& idx) const {
    std::vector<Idx> out;
    for (size_t k = 0; k < idx.size(); ++k)
      for (int step : {-1, 1}) {
        Idx c = idx;
        c[k] += step;
        if (c[k] >= 0 && c[k] < static_cast<int>(space_.knobs()[k].domain.size()) && !seen_.count(c) && valid(c))
          out.push_back(std::move(c));
      }
    return out;
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
  std::vector<Idx> pool_;
  uint64_t patience_ = 0;  ///< 0: no early stop
  double gain_ref_ = kFailed;  ///< the best when it last improved by more than min_gain
  uint64_t gain_at_ = 0;       ///< measurements then
  static constexpr size_t kPool = 4096;
};

}  // namespace

SearchResult search(const Space& space, const SearchOptions& o,
                    const std::function<double(const Config&, double)>& measure, const Ranker& rank,
                    const std::function<void(uint64_t)>& before) {
  return Search(space, o, measure, rank).run(before);
}

}  // namespace tle::tune
