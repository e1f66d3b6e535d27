#include "plan/pipeline_grouping.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "plan/planner.h"

namespace infinipipe::plan {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// What the pipeline grouping (Eq. 14) knows of each chunk on the reference stage, as prefix sums
// over the chunk list: step time, activation bytes without and with full recompute, and the
// time of full recompute; plus the largest transient and the run each chunk belongs to.
struct GroupingCosts {
  std::vector<double> f, b;                 // per chunk: forward, backward seconds
  std::vector<double> pf, pmax, pmin, prt;  // prefix sums (n + 1)
  std::vector<int32_t> unit_start;          // first chunk of the run of each chunk
  double transient = 0;
};

GroupingCosts grouping_costs(const std::vector<Chunk>& chunks, const cost::CostModel& cm,
                             const cost::StageShape& stage) {
  const int32_t n = static_cast<int32_t>(chunks.size());
  GroupingCosts gc;
  gc.f.resize(n);
  gc.b.resize(n);
  gc.unit_start.resize(n);
  gc.pf.assign(n + 1, 0);
  gc.pmax.assign(n + 1, 0);
  gc.pmin.assign(n + 1, 0);
  gc.prt.assign(n + 1, 0);
  for (int32_t c = 0; c < n; ++c) {
    const auto sh = chunks[c].shapes();
    gc.f[c] = cm.forward_time(sh, stage);
    gc.b[c] = cm.backward_time(sh, stage);
    const double keep = static_cast<double>(cm.kv_keep_bytes(sh, stage));
    const double act_full = static_cast<double>(cm.activation_bytes(sh, stage, 0)) + keep;
    const double act_min =
        static_cast<double>(cm.activation_bytes(sh, stage, stage.num_layers)) + keep;
    gc.transient =
        std::max({gc.transient,
                  static_cast<double>(cm.backward_transient_bytes(sh, stage, stage.num_layers) +
                                      cm.dkv_buffer_bytes(sh, stage)),
                  static_cast<double>(cm.forward_transient_bytes(sh, stage))});
    bool continues = false;
    for (const Slice& s : chunks[c].slices) continues = continues || s.offset > 0;
    gc.unit_start[c] = c > 0 && continues ? gc.unit_start[c - 1] : c;
    gc.pf[c + 1] = gc.pf[c] + gc.f[c] + gc.b[c];
    gc.pmax[c + 1] = gc.pmax[c] + act_full;
    gc.pmin[c + 1] = gc.pmin[c] + act_min;
    gc.prt[c + 1] = gc.prt[c] + cm.recompute_time(sh, stage.num_layers);
  }
  return gc;
}

// The in-flight windows of one candidate pipeline over the cap, in chunk order, clustered where
// they overlap. Windows of one cluster share chunks; clusters do not, so the sum of each cluster's
// dearest recompute is what recompute must cost at least under the estimate's memory model.
struct WindowScan {
  double worst_min = 0;  // largest window with every layer recomputed
  double need = 0;       // Eq. 14: the largest recompute fraction any window needs
  double closed = 0;     // finished clusters: sum of their dearest window's recompute
  double open = 0;       // the open cluster's dearest window
  int32_t open_end = -1;
  bool over = false;  // some window is over the cap without recompute

  void add(const GroupingCosts& gc, int32_t lo, int32_t hi, double cap) {
    const double full = gc.pmax[hi] - gc.pmax[lo], lean = gc.pmin[hi] - gc.pmin[lo];
    worst_min = std::max(worst_min, lean);
    if (!(full > cap && full > lean)) return;
    over = true;
    const double fraction = std::min(1.0, (full - cap) / (full - lean));
    need = std::max(need, fraction);
    const double cost = fraction * (gc.prt[hi] - gc.prt[lo]);
    if (lo >= open_end) {
      closed += open;
      open = cost;
    } else {
      open = std::max(open, cost);
    }
    open_end = std::max(open_end, hi);
  }
  double bound() const { return closed + open; }
};

// One candidate pipeline [cuts[i], cuts[j]), under the estimate: compute and bubble
// (`base`), Eq. 14's linear recompute (`linear`: the worst window's fraction of every chunk's
// recompute), and the clustered windows' recompute (`bound`, at most `linear`).
struct PipelineEstimate {
  size_t j = 0;
  double base = 0, linear = 0, bound = 0;
  bool over = false;
};

// Every candidate pipeline from cuts[i] that fits `cap` with full recompute, shortest first, to
// `visit`. Ends stop before cut `end_limit`.
template <class Visit>
void for_each_pipeline_from(const GroupingCosts& gc, const std::vector<int32_t>& cuts, size_t i,
                            int32_t pp, double cap, Visit&& visit, size_t end_limit = SIZE_MAX) {
  const int32_t a = cuts[i];
  // On the first stage, chunk c's backward waits for pp chunks after it (its run's start
  // included): the in-flight window [max(a, unit_start[c]), c + pp). Windows with c + pp <= e
  // no longer change as the candidate pipeline grows: folded in once (`done`), the last pp each
  // step.
  WindowScan done_scan;
  int32_t done = a;
  for (size_t j = i + 1; j < std::min(cuts.size(), end_limit); ++j) {
    const int32_t e = cuts[j];
    for (; done < e && done + pp <= e; ++done)
      done_scan.add(gc, std::max(a, gc.unit_start[done]), done + pp, cap);
    WindowScan scan = done_scan;
    for (int32_t c = done; c < e; ++c) scan.add(gc, std::max(a, gc.unit_start[c]), e, cap);
    if (scan.worst_min > cap) break;  // longer candidate pipelines only hold more
    PipelineEstimate est;
    est.j = j;
    est.base = gc.pf[e] - gc.pf[a] + (pp - 1) * (gc.f[a] + gc.b[e - 1]);
    est.linear = scan.need * (gc.prt[e] - gc.prt[a]);
    est.bound = scan.bound();
    est.over = scan.over;
    visit(est);
  }
}

// The allowed starts of a pipeline (a chunk that starts a run), plus the chunk count.
std::vector<int32_t> grouping_cuts(const GroupingCosts& gc) {
  const int32_t n = static_cast<int32_t>(gc.f.size());
  std::vector<int32_t> cuts;
  for (int32_t c = 0; c < n; ++c)
    if (gc.unit_start[c] == c) cuts.push_back(c);
  cuts.push_back(n);
  return cuts;
}

// The cut indices of the shortest path ending at the last cut, from `from`.
std::vector<size_t> grouping_path(const std::vector<size_t>& from) {
  std::vector<size_t> starts;
  for (size_t j = from.size() - 1; j > 0; j = from[j]) starts.push_back(from[j]);
  std::reverse(starts.begin(), starts.end());
  starts.push_back(from.size() - 1);
  return starts;
}

std::vector<int32_t> groups_of_path(const std::vector<int32_t>& cuts,
                                    const std::vector<size_t>& path, int32_t n) {
  std::vector<int32_t> out(n, 0);
  for (size_t g = 0; g + 1 < path.size(); ++g)
    for (int32_t c = cuts[path[g]]; c < cuts[path[g + 1]]; ++c) out[c] = static_cast<int32_t>(g);
  return out;
}

// Whether one pipeline of every chunk has no in-flight window over `cap`. Then no candidate
// pipeline has one either (a candidate pipeline's windows are parts of these), so a grouping costs
// its compute plus each pipeline's fill and drain, (pp - 1)·(first forward + last backward), and
// one pipeline is the cheapest by that much: what the shortest path finds, without its O(chunks² ·
// pp) walk.
bool one_pipeline_within(const GroupingCosts& gc, int32_t pp, double cap) {
  const int32_t n = static_cast<int32_t>(gc.f.size());
  if (pp < 2) return false;  // no fill and drain: groupings tie
  for (int32_t c = 0; c < n; ++c) {
    if (!(gc.f[c] + gc.b[c] > 0)) return false;
    const int32_t lo = gc.unit_start[c], hi = std::min(c + pp, n);
    if (gc.pmax[hi] - gc.pmax[lo] > cap) return false;
  }
  return true;
}

}  // namespace

std::vector<int32_t> finest_grouping(const std::vector<Chunk>& chunks) {
  std::vector<int32_t> out(chunks.size(), 0);
  int32_t g = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    bool continues = false;
    for (const Slice& s : chunks[i].slices) continues = continues || s.offset > 0;
    if (i > 0 && !continues) ++g;
    out[i] = g;
  }
  return out;
}

std::vector<int32_t> epp_group_pipelines(const std::vector<Chunk>& chunks, int32_t pp,
                                         const cost::CostModel& cm, const cost::StageShape& stage,
                                         int64_t activation_budget) {
  const int32_t n = static_cast<int32_t>(chunks.size());
  if (n == 0) return {};
  const GroupingCosts gc = grouping_costs(chunks, cm, stage);
  const std::vector<int32_t> cuts = grouping_cuts(gc);
  const double cap = static_cast<double>(activation_budget) - gc.transient;
  if (one_pipeline_within(gc, pp, cap)) return std::vector<int32_t>(n, 0);
  const size_t u = cuts.size();
  std::vector<double> best(u, kInf);
  std::vector<size_t> from(u, 0);
  best[0] = 0;
  for (size_t i = 0; i + 1 < u; ++i) {
    if (best[i] == kInf) continue;
    for_each_pipeline_from(gc, cuts, i, pp, cap, [&](const PipelineEstimate& s) {
      const double time = s.base + s.linear;
      if (best[i] + time < best[s.j]) {
        best[s.j] = best[i] + time;
        from[s.j] = i;
      }
    });
  }
  if (best[u - 1] == kInf) return {};
  return groups_of_path(cuts, grouping_path(from), n);
}

namespace {

// The lazy shortest path of epp_group_pipelines_solved: the solved candidate pipelines (cached),
// the ones found not to fit, and the scale of the estimate of the others.
struct LazyGrouping {
  LazyGrouping(const GroupingCosts& g, const std::vector<int32_t>& c, int32_t p, double cp,
               const PipelineRecompute& sv, GroupingSolveStats& s)
      : gc(g), cuts(c), pp(p), cap(cp), solve(sv), st(s), known(c.size()) {}

  const GroupingCosts& gc;
  const std::vector<int32_t>& cuts;
  int32_t pp;
  double cap;
  const PipelineRecompute& solve;
  GroupingSolveStats& st;
  // Solved candidate pipelines by start cut: (end cut, recompute seconds or +inf), sorted by end.
  std::vector<std::vector<std::pair<size_t, double>>> known;
  // Candidate pipelines the solve found no recompute for: a candidate pipeline holding one does not
  // fit either (as the estimate's "longer candidate pipelines only hold more").
  std::vector<std::pair<size_t, size_t>> dead;
  // The largest solve over the windows' bound seen: the bound sees only the first rank and no
  // recompute tied along the backward diagonals, so alone it undercharges (about 4x on the 30B
  // paper settings) and the path would creep one cut at a time; scaled by the largest ratio
  // seen, the estimated candidate pipelines look no cheaper than the solved ones did.
  double scale = 1;

  double solved(size_t i, size_t j, double bound) {
    const double r = solve(cuts[i], cuts[j]);
    ++st.solves;
    if (std::isfinite(r) && bound > 0) scale = std::max(scale, r / bound);
    if (!std::isfinite(r)) dead.push_back({i, j});
    auto& list = known[i];
    list.insert(std::lower_bound(list.begin(), list.end(), std::pair{j, -kInf}), {j, r});
    return r;
  }

  // [i, j) does not fit: the longest candidate pipeline from i that does, by bisection over its
  // end.
  void bisect_from(size_t i, size_t j) {
    size_t fits = i;  // the empty candidate pipeline
    while (j - fits > 1 && st.solves < kGroupingMaxSolves) {
      const size_t mid = fits + (j - fits) / 2;
      if (std::isfinite(solved(i, mid, 0)))
        fits = mid;
      else
        j = mid;
    }
  }

  // For each start, the first end holding a candidate pipeline that does not fit.
  std::vector<size_t> end_limits() const {
    std::vector<size_t> limit(cuts.size() + 1, SIZE_MAX);
    for (const auto& [i, j] : dead) limit[i] = std::min(limit[i], j);
    for (size_t i = cuts.size(); i-- > 0;) limit[i] = std::min(limit[i], limit[i + 1]);
    return limit;
  }

  // One round: the shortest path under solved and estimated costs; true when every candidate
  // pipeline on it is solved (`path` is the answer), false after solving the others. Empty path:
  // none fits.
  bool round(std::vector<size_t>& path) {
    ++st.rounds;
    const size_t u = cuts.size();
    const std::vector<size_t> limit = end_limits();
    std::vector<double> best(u, kInf), bound_into(u, 0);
    std::vector<size_t> from(u, 0);
    std::vector<char> solved_into(u, 0);  // the path's pipeline ending at j is solved
    best[0] = 0;
    for (size_t i = 0; i + 1 < u; ++i) {
      if (best[i] == kInf) continue;
      size_t k = 0;  // walks known[i] alongside the growing candidate pipeline
      auto visit = [&](const PipelineEstimate& s) {
        double recompute = 0;
        bool exact = true;  // within the cap: nothing to recompute
        if (s.over) {
          while (k < known[i].size() && known[i][k].first < s.j) ++k;
          exact = k < known[i].size() && known[i][k].first == s.j;
          recompute = exact ? known[i][k].second : scale * s.bound;
        }
        const double time = s.base + recompute;
        if (best[i] + time < best[s.j]) {
          best[s.j] = best[i] + time;
          from[s.j] = i;
          solved_into[s.j] = exact;
          bound_into[s.j] = s.bound;
        }
      };
      for_each_pipeline_from(gc, cuts, i, pp, cap, visit, limit[i]);
    }
    path.clear();
    if (best[u - 1] == kInf) return false;
    path = grouping_path(from);
    bool all_solved = true;
    for (size_t g = 0; g + 1 < path.size() && st.solves < kGroupingMaxSolves; ++g) {
      const size_t i = path[g], j = path[g + 1];
      if (solved_into[j]) continue;
      all_solved = false;
      if (!std::isfinite(solved(i, j, bound_into[j]))) bisect_from(i, j);
    }
    return all_solved;
  }
};

}  // namespace

std::vector<int32_t> epp_group_pipelines_solved(const std::vector<Chunk>& chunks, int32_t pp,
                                                const cost::CostModel& cm,
                                                const cost::StageShape& stage,
                                                int64_t activation_budget,
                                                const PipelineRecompute& solve,
                                                GroupingSolveStats* stats) {
  const int32_t n = static_cast<int32_t>(chunks.size());
  if (n == 0) return {};
  const GroupingCosts gc = grouping_costs(chunks, cm, stage);
  const std::vector<int32_t> cuts = grouping_cuts(gc);
  GroupingSolveStats local;
  GroupingSolveStats& st = stats ? *stats : local;
  st = {};
  // One run of chunks (a single sequence cut into slices): one grouping, nothing to compare.
  if (cuts.size() == 2) return epp_group_pipelines(chunks, pp, cm, stage, activation_budget);
  const double cap = static_cast<double>(activation_budget) - gc.transient;
  if (one_pipeline_within(gc, pp, cap)) return std::vector<int32_t>(n, 0);  // nothing to solve
  LazyGrouping lazy(gc, cuts, pp, cap, solve, st);
  std::vector<size_t> path;
  while (st.solves < kGroupingMaxSolves) {
    if (lazy.round(path)) return groups_of_path(cuts, path, n);
    if (path.empty()) {
      if (st.solves == 0) return {};  // as Eq. 14's: none fits even with full recompute
      break;                          // the solves left no grouping that fits
    }
  }
  st.fell_back = true;  // bounded work: Eq. 14's linear answer
  return epp_group_pipelines(chunks, pp, cm, stage, activation_budget);
}

}  // namespace infinipipe::plan
