#include "plan/recompute_search.h"

#include <algorithm>
#include <ctime>
#include <limits>
#include <numeric>
#include <queue>
#include <tuple>
#include <utility>

namespace infinipipe::plan {

namespace {

// Levels of every group and the bytes of every point they give, kept in step.
struct State {
  const RecomputeProblem& pb;
  const RecomputeIndex& ix;
  std::vector<int32_t>& x;
  std::vector<int64_t> val;

  State(const RecomputeProblem& p, const RecomputeIndex& i, std::vector<int32_t>& levels)
      : pb(p), ix(i), x(levels), val(p.points.size()) {
    for (size_t q = 0; q < pb.points.size(); ++q) {
      int64_t s = pb.points[q].fixed;
      for (const RecomputeTerm& t : pb.points[q].terms) {
        const RecomputeItem& it = pb.items[t.item];
        s += recompute_term_value(it, t.transient, t.forward, x[it.group]);
      }
      val[q] = s;
    }
  }
  bool over(int32_t q) const { return val[q] > pb.budget; }
  void set(int32_t g, int32_t to) {
    for (const RecomputeOccurrence& o : ix.occ_of[g]) {
      const RecomputeItem& it = pb.items[o.item];
      val[o.point] += recompute_term_value(it, o.transient, o.forward, to) -
                      recompute_term_value(it, o.transient, o.forward, x[g]);
    }
    x[g] = to;
  }
  // Whether every point of group g would fit with g at level `to`, g left where it is: what
  // set(g, to) then checking g's points says, without writing (a group's occurrences of one
  // point are consecutive: recompute_index lists them point by point).
  bool fits_at(int32_t g, int32_t to) const {
    const auto& occ = ix.occ_of[g];
    for (size_t i = 0; i < occ.size();) {
      const int32_t p = occ[i].point;
      int64_t v = val[p];
      for (; i < occ.size() && occ[i].point == p; ++i) {
        const RecomputeItem& it = pb.items[occ[i].item];
        v += recompute_term_value(it, occ[i].transient, occ[i].forward, to) -
             recompute_term_value(it, occ[i].transient, occ[i].forward, x[g]);
      }
      if (v > pb.budget) return false;
    }
    return true;
  }
  bool fits() const {
    for (int64_t v : val)
      if (v > pb.budget) return false;
    return true;
  }

  // The level of group g that frees the most over-budget bytes per second of recompute now:
  // {score, level}, score 0 when no level frees anything. Levels beyond +1 matter: the first
  // recomputed layer adds a layer of working set to its own backward, so one step alone may free
  // nothing.
  std::pair<double, int32_t> best_move(int32_t g, std::vector<double>& freed) const {
    freed.assign(pb.group_max[g] + 1, 0.0);
    for (const RecomputeOccurrence& o : ix.occ_of[g]) {
      if (!over(o.point)) continue;
      const RecomputeItem& it = pb.items[o.item];
      const int64_t now = recompute_term_value(it, o.transient, o.forward, x[g]);
      const int64_t excess = val[o.point] - pb.budget;
      for (int32_t to = x[g] + 1; to <= pb.group_max[g]; ++to)
        freed[to] += static_cast<double>(
            std::min<int64_t>(now - recompute_term_value(it, o.transient, o.forward, to), excess));
    }
    std::pair<double, int32_t> best{0.0, x[g]};
    const double t0 = recompute_group_time(pb, ix, g, x[g]);
    for (int32_t to = x[g] + 1; to <= pb.group_max[g]; ++to) {
      if (freed[to] <= 0) continue;
      const double dt = recompute_group_time(pb, ix, g, to) - t0;
      const double score = freed[to] / std::max(dt, 1e-12);
      if (score > best.first) best = {score, to};
    }
    return best;
  }

  // Raise phase: repeatedly the best move of any group with a term at an over-budget point;
  // `frozen` groups are not raised. Lazy greedy: raising one group only shrinks the excess the
  // others can free, so a group's last score bounds its current one from above, and only the top
  // of the heap needs evaluating. (Points a move pushes over budget, through the working set of
  // a fully recomputed backward, put their groups back at the top.)
  bool raise(const std::vector<char>& frozen) {
    constexpr double kFresh = std::numeric_limits<double>::infinity();
    // {score bound, group, version}: one live entry per group, older versions are skipped.
    std::priority_queue<std::tuple<double, int32_t, int32_t>> heap;
    std::vector<int32_t> version(pb.group_max.size(), 0);
    std::vector<char> fresh(pb.group_max.size(), 0);  // live entry is kFresh
    auto push = [&](int32_t g, double score) {
      if (x[g] >= pb.group_max[g] || frozen[g] || (score == kFresh && fresh[g])) return;
      fresh[g] = score == kFresh;
      heap.push({score, g, ++version[g]});
    };
    auto push_point = [&](int32_t q) {
      for (const RecomputeTerm& t : pb.points[q].terms) push(pb.items[t.item].group, kFresh);
    };
    for (size_t q = 0; q < val.size(); ++q)
      if (over(static_cast<int32_t>(q))) push_point(static_cast<int32_t>(q));
    std::vector<double> freed;
    std::vector<int32_t> was_fine;
    while (!heap.empty()) {
      const auto [bound, g, ver] = heap.top();
      heap.pop();
      if (ver != version[g]) continue;
      fresh[g] = 0;
      ++version[g];  // no live entry until pushed again
      const auto [score, to] = best_move(g, freed);
      if (score <= 0) continue;
      if (!heap.empty() && score < std::get<0>(heap.top())) {
        push(g, score);
        continue;
      }
      was_fine.clear();
      for (const RecomputeOccurrence& o : ix.occ_of[g])
        if (!over(o.point)) was_fine.push_back(o.point);
      set(g, to);
      for (int32_t q : was_fine)
        if (over(q)) push_point(q);
      push(g, kFresh);
    }
    return fits();
  }

  // Give back what is not needed, the most expensive levels first; among `order` (all groups
  // when empty).
  void lower(std::vector<int32_t> order = {}) {
    if (order.empty()) {
      order.resize(pb.group_max.size());
      std::iota(order.begin(), order.end(), 0);
    }
    std::vector<double> t(pb.group_max.size());
    for (int32_t g : order) t[g] = recompute_group_time(pb, ix, g, x[g]);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return t[a] > t[b]; });
    for (int32_t g : order) {
      if (x[g] == 0) continue;
      for (int32_t to = 0; to < x[g]; ++to)
        if (fits_at(g, to)) {
          set(g, to);
          break;
        }
    }
  }
};

double total_time(const RecomputeProblem& pb, const RecomputeIndex& ix,
                  const std::vector<int32_t>& x) {
  double s = 0;
  for (int32_t g = 0; g < static_cast<int32_t>(x.size()); ++g)
    s += recompute_group_time(pb, ix, g, x[g]);
  return s;
}

}  // namespace

RecomputeIndex recompute_index(const RecomputeProblem& pb) {
  RecomputeIndex ix;
  ix.items_of.resize(pb.group_max.size());
  ix.occ_of.resize(pb.group_max.size());
  for (int32_t i = 0; i < static_cast<int32_t>(pb.items.size()); ++i)
    ix.items_of[pb.items[i].group].push_back(i);
  for (int32_t p = 0; p < static_cast<int32_t>(pb.points.size()); ++p)
    for (const RecomputeTerm& t : pb.points[p].terms)
      ix.occ_of[pb.items[t.item].group].push_back({p, t.item, t.transient, t.forward});
  ix.time_of.resize(pb.group_max.size());
  for (size_t g = 0; g < pb.group_max.size(); ++g) {
    ix.time_of[g].assign(pb.group_max[g] + 1, 0.0);
    for (int32_t x = 0; x <= pb.group_max[g]; ++x)
      for (int32_t i : ix.items_of[g]) {
        const RecomputeItem& it = pb.items[i];
        ix.time_of[g][x] = std::max(ix.time_of[g][x], it.time[std::min(x, it.max_layers)]);
      }
  }
  return ix;
}

double recompute_group_time(const RecomputeProblem& pb, const RecomputeIndex& ix, int32_t g,
                            int32_t x) {
  return ix.time_of[g][std::min(x, pb.group_max[g])];
}

bool recompute_repair(const RecomputeProblem& pb, const RecomputeIndex& ix,
                      std::vector<int32_t>& x) {
  State s(pb, ix, x);
  const bool ok = s.raise(std::vector<char>(pb.group_max.size(), 0));
  s.lower();
  return ok && s.fits();
}

bool recompute_never_fits(const RecomputeProblem& pb) {
  // Each item's terms with its group at the maximum (held, held at its forward, transient).
  std::vector<int64_t> at_max_of(3 * pb.items.size());
  for (size_t i = 0; i < pb.items.size(); ++i)
    for (int k = 0; k < 3; ++k)
      at_max_of[3 * i + k] =
          recompute_term_value(pb.items[i], k == 2, k == 1, pb.group_max[pb.items[i].group]);
  std::vector<std::pair<int32_t, const RecomputeTerm*>> by_group;
  for (const RecomputePoint& pt : pb.points) {
    // Within budget with every group at its maximum: this point can fit.
    int64_t at_max = pt.fixed;
    for (const RecomputeTerm& t : pt.terms)
      at_max += at_max_of[3 * static_cast<size_t>(t.item) + (t.transient ? 2 : t.forward ? 1 : 0)];
    if (at_max <= pb.budget) continue;
    // Its least value: groups are independent, so each takes its own best level.
    by_group.clear();
    for (const RecomputeTerm& t : pt.terms) by_group.push_back({pb.items[t.item].group, &t});
    std::sort(by_group.begin(), by_group.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    int64_t least = pt.fixed;
    for (size_t i = 0; i < by_group.size();) {
      const int32_t g = by_group[i].first;
      size_t end = i;
      while (end < by_group.size() && by_group[end].first == g) ++end;
      int64_t best = std::numeric_limits<int64_t>::max();
      for (int32_t x = 0; x <= pb.group_max[g]; ++x) {
        int64_t v = 0;
        for (size_t j = i; j < end; ++j) {
          const RecomputeTerm& t = *by_group[j].second;
          v += recompute_term_value(pb.items[t.item], t.transient, t.forward, x);
        }
        best = std::min(best, v);
      }
      least += best;
      i = end;
    }
    if (least > pb.budget) return true;
  }
  return false;
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

void recompute_improve(const RecomputeProblem& pb, const RecomputeIndex& ix,
                       std::vector<int32_t>& x, double cpu_deadline_s, double good_enough) {
  const int32_t ng = static_cast<int32_t>(pb.group_max.size());
  State s(pb, ix, x);
  if (!s.fits()) return;
  double cost = total_time(pb, ix, x);
  std::vector<char> frozen(ng, 0), mark(ng, 0);
  for (bool improved = true; improved;) {
    improved = false;
    // Biggest saving first.
    std::vector<std::pair<double, int32_t>> moves;
    for (int32_t g = 0; g < ng; ++g)
      if (x[g] > 0)
        moves.push_back(
            {recompute_group_time(pb, ix, g, x[g]) - recompute_group_time(pb, ix, g, x[g] - 1), g});
    std::sort(moves.begin(), moves.end(), std::greater<>());
    for (const auto& [saving, g] : moves) {
      if (cost <= good_enough || thread_cpu_seconds() > cpu_deadline_s) return;
      if (x[g] == 0) continue;
      const std::vector<int32_t> keep_x = x;
      const std::vector<int64_t> keep_val = s.val;
      s.set(g, x[g] - 1);
      frozen[g] = 1;
      const bool ok = s.raise(frozen);
      frozen[g] = 0;
      // Only groups sharing a point with a raised one can now give something back (everything
      // else was as low as it could go before the move).
      if (ok) {
        std::vector<int32_t> near;
        for (int32_t h = 0; h < ng; ++h) {
          if (x[h] <= keep_x[h]) continue;
          for (const RecomputeOccurrence& o : ix.occ_of[h])
            for (const RecomputeTerm& t : pb.points[o.point].terms) {
              const int32_t k = pb.items[t.item].group;
              if (!mark[k]) {
                mark[k] = 1;
                near.push_back(k);
              }
            }
        }
        for (int32_t k : near) mark[k] = 0;
        if (!near.empty()) s.lower(std::move(near));
      }
      const double c = ok ? total_time(pb, ix, x) : cost;
      if (ok && c < cost * (1 - 1e-9)) {
        cost = c;
        improved = true;
      } else {
        x = keep_x;
        s.val = keep_val;
      }
    }
  }
}

}  // namespace infinipipe::plan
