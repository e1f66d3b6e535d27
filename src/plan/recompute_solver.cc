// Solvers of the recompute problem (recompute.h): greedy, exact (LP bound, LP-guided search,
// then CBC's cuts and branching only while the gap is above the goal) and brute force.
#include <coin/Cbc_C_Interface.h>
#include <coin/Clp_C_Interface.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "plan/recompute.h"
#include "plan/recompute_search.h"

namespace infinipipe::plan {

namespace {

bool fits(const RecomputeProblem& pb, const std::vector<int32_t>& x) {
  for (int64_t p : recompute_peaks(pb, x))
    if (p > pb.budget) return false;
  return true;
}

// Thermometer encoding: y[g][k] = 1 when group g recomputes at least k+1 layers. Rows: y[g][k+1]
// <= y[g][k], and per point over budget with nothing recomputed, the bytes its terms shed must
// cover the excess. (Points within budget at zero can only exceed it through the working set of
// a fully recomputed backward; leaving them out keeps a relaxation, and every answer is checked.)
// Column-major, as both Clp and Cbc load it.
struct MipModel {
  std::vector<int32_t> col0;  // first column of each group
  std::vector<double> obj, col_lb, col_ub, row_lb, row_ub, value;
  std::vector<CoinBigIndex> start;
  std::vector<int> index;
  // A point over budget that no recompute choice brings within it: the problem has no answer,
  // and Clp must not see the row (an unsatisfiable empty row trips its assertions).
  bool infeasible = false;
  int ncols() const { return static_cast<int>(obj.size()); }
  int nrows() const { return static_cast<int>(row_ub.size()); }
};

constexpr double kBruteForceChoices = 20000;

// CBC solves the LP again, its own way, before it cuts and branches, and its time limit does
// not cover that solve: on the 30B 96K plan of 8192 sequences at pp 4 (perf) it took about 4x our
// dual simplex's time, some 3 s of CPU against the 1 s cap. So CBC starts only when this many LP
// times are left.
constexpr double kCbcStartLpTimes = 4.0;

// Rows gathered as triplets, then stored at once (adding rows one by one makes CoinUtils resize
// its matrix each time).
struct MipRows {
  std::vector<int> row_of, col_of;
  std::vector<double> val_of;

  void add(MipModel& md, const std::vector<int>& idx, const std::vector<double>& coef, double lo) {
    for (size_t i = 0; i < idx.size(); ++i) {
      row_of.push_back(md.nrows());
      col_of.push_back(idx[i]);
      val_of.push_back(coef[i]);
    }
    md.row_lb.push_back(lo);
    md.row_ub.push_back(std::numeric_limits<double>::infinity());
  }
};

// Columns (one per group and level, in [0, 1]), their objective (the level's added time), and
// the thermometer rows y[g][k+1] <= y[g][k].
void mip_columns(MipModel& md, MipRows& rows, const RecomputeProblem& pb,
                 const RecomputeIndex& ix) {
  const int32_t ng = static_cast<int32_t>(pb.group_max.size());
  md.col0.assign(ng + 1, 0);
  for (int32_t g = 0; g < ng; ++g) md.col0[g + 1] = md.col0[g] + pb.group_max[g];
  const int32_t ncols = md.col0[ng];
  md.obj.resize(ncols);
  md.col_lb.assign(ncols, 0.0);
  md.col_ub.assign(ncols, 1.0);
  for (int32_t g = 0; g < ng; ++g)
    for (int32_t k = 0; k < pb.group_max[g]; ++k)
      md.obj[md.col0[g] + k] =
          recompute_group_time(pb, ix, g, k + 1) - recompute_group_time(pb, ix, g, k);
  for (int32_t g = 0; g < ng; ++g)
    for (int32_t k = 0; k + 1 < pb.group_max[g]; ++k)
      rows.add(md, {md.col0[g] + k, md.col0[g] + k + 1}, {1.0, -1.0}, 0.0);
}

// The row of one point over budget with nothing recomputed: the bytes its terms shed cover the
// excess. coef_of is all zeros on entry and on return (scratch of one entry per column).
void mip_budget_row(MipModel& md, MipRows& rows, const RecomputeProblem& pb,
                    const RecomputePoint& pt, std::vector<double>& coef_of) {
  int64_t base = pt.fixed;
  for (const RecomputeTerm& t : pt.terms)
    base += recompute_term_value(pb.items[t.item], t.transient, t.forward, 0);
  if (base <= pb.budget) return;
  std::vector<int> touched;
  for (const RecomputeTerm& t : pt.terms) {
    const RecomputeItem& it = pb.items[t.item];
    for (int32_t k = 0; k < it.max_layers; ++k) {
      const double shed =
          static_cast<double>(recompute_term_value(it, t.transient, t.forward, k) -
                              recompute_term_value(it, t.transient, t.forward, k + 1));
      const int c = md.col0[it.group] + k;
      if (coef_of[c] == 0.0) touched.push_back(c);
      coef_of[c] += shed;
    }
  }
  // In units of the excess (bytes would leave the LP badly scaled), and no variable credited
  // with more than the excess plus what the negative terms can take back: the same integer
  // answers, a tighter relaxation.
  const double excess = static_cast<double>(base - pb.budget);
  double negative = 0;
  for (int c : touched) negative += std::min(0.0, coef_of[c]);
  std::vector<int> idx;
  std::vector<double> coef;
  double reach = 0;  // the most the row's left side can be
  for (int c : touched) {
    if (coef_of[c] != 0.0) {
      idx.push_back(c);
      coef.push_back(std::min(1.0 - negative / excess, coef_of[c] / excess));
      reach += std::max(0.0, coef.back());
    }
    coef_of[c] = 0.0;
  }
  if (reach < 1.0 - 1e-9) md.infeasible = true;  // slack for the scaling's round-off
  rows.add(md, idx, coef, 1.0);
}

// The triplets into the column-major arrays Clp and Cbc load.
void mip_store(MipModel& md, const MipRows& rows) {
  const int ncols = md.ncols();
  md.start.assign(ncols + 1, 0);
  for (int c : rows.col_of) ++md.start[c + 1];
  for (int c = 0; c < ncols; ++c) md.start[c + 1] += md.start[c];
  md.index.resize(rows.col_of.size());
  md.value.resize(rows.col_of.size());
  std::vector<CoinBigIndex> fill(md.start.begin(), md.start.end() - 1);
  for (size_t e = 0; e < rows.col_of.size(); ++e) {
    const CoinBigIndex at = fill[rows.col_of[e]]++;
    md.index[at] = rows.row_of[e];
    md.value[at] = rows.val_of[e];
  }
}

MipModel mip_model(const RecomputeProblem& pb, const RecomputeIndex& ix) {
  MipModel md;
  MipRows rows;
  mip_columns(md, rows, pb, ix);
  std::vector<double> coef_of(md.ncols(), 0.0);
  for (const RecomputePoint& pt : pb.points) mip_budget_row(md, rows, pb, pt, coef_of);
  mip_store(md, rows);
  return md;
}

// A lower bound in O(nonzeros log nonzeros), computed before the LP so that the solve always has
// one: each budget row alone, with y in [0, 1] and the thermometer order dropped, is a fractional
// covering knapsack whose cheapest cover takes columns by objective per unit of coefficient.
// Rows over disjoint columns add up (objectives are >= 0), so rows are taken dearest first while
// their columns are untouched. 0 when some objective is negative (nothing is proven then).
double cover_bound(const MipModel& md) {
  for (double o : md.obj)
    if (o < 0) return 0.0;
  const int nrows = md.nrows();
  struct Col {
    double per_unit;  // objective per unit of coefficient
    int col;
    double coef;
    bool operator<(const Col& o) const {
      return per_unit < o.per_unit || (per_unit == o.per_unit && col < o.col);
    }
  };
  std::vector<std::vector<Col>> cols_of(nrows);
  for (int c = 0; c < md.ncols(); ++c)
    for (CoinBigIndex e = md.start[c]; e < md.start[c + 1]; ++e) {
      const int r = md.index[e];
      if (md.row_lb[r] > 0 && md.value[e] > 0)
        cols_of[r].push_back({md.obj[c] / md.value[e], c, md.value[e]});
    }
  std::vector<std::pair<double, int>> row_bound;  // {bound, row}
  for (int r = 0; r < nrows; ++r) {
    if (md.row_lb[r] <= 0) continue;  // a thermometer row
    auto& cols = cols_of[r];
    std::sort(cols.begin(), cols.end());
    double need = md.row_lb[r], cost = 0;
    for (const Col& col : cols) {
      if (need <= 0) break;
      const double take = std::min(1.0, need / col.coef);
      cost += take * md.obj[col.col];
      need -= take * col.coef;
    }
    row_bound.push_back({cost, r});
  }
  std::sort(row_bound.begin(), row_bound.end(), std::greater<>());
  std::vector<char> used(md.ncols(), 0);
  double sum = 0;
  for (const auto& rb : row_bound) {
    bool disjoint = true;
    for (const Col& col : cols_of[rb.second]) disjoint = disjoint && !used[col.col];
    if (!disjoint) continue;
    for (const Col& col : cols_of[rb.second]) used[col.col] = 1;
    sum += rb.first;
  }
  return sum * (1 - 1e-9);  // round-off of the sums, so the bound stays a bound
}

// The LP relaxation: its optimum bounds every integer answer from below; its y guides rounding.
// `lagrangian` is a bound from the row duals the simplex holds when it stops, optimal or not.
struct LpResult {
  bool optimal = false, infeasible = false;
  double bound = 0;
  double lagrangian = 0;
  std::vector<double> y;
};

// Weak duality, with every row relaxed and the [0, 1] boxes kept: for any row multipliers
// pi >= 0, sum_r pi_r lb_r + sum_c min(0, obj_c - sum_r pi_r a_rc) is at most the optimum. So a
// simplex stopped by its time limit still yields a bound, computed here from its duals rather
// than trusted from its (perhaps perturbed) objective.
double lagrangian_bound(const MipModel& md, const double* pi) {
  double sum = 0;
  for (int r = 0; r < md.nrows(); ++r) sum += std::max(0.0, pi[r]) * md.row_lb[r];
  for (int c = 0; c < md.ncols(); ++c) {
    double reduced = md.obj[c];
    for (CoinBigIndex e = md.start[c]; e < md.start[c + 1]; ++e)
      reduced -= std::max(0.0, pi[md.index[e]]) * md.value[e];
    sum += std::min(0.0, reduced);
  }
  return std::max(0.0, sum * (1 - 1e-9));  // round-off of the sums, so the bound stays a bound
}

LpResult lp_solve(MipModel& md, double seconds) {
  LpResult r;
  Clp_Simplex* lp = Clp_newModel();
  Clp_setLogLevel(lp, 0);
  Clp_loadProblem(lp, md.ncols(), md.nrows(), md.start.data(), md.index.data(), md.value.data(),
                  md.col_lb.data(), md.col_ub.data(), md.obj.data(), md.row_lb.data(),
                  md.row_ub.data());
  Clp_setMaximumSeconds(lp, seconds);
  Clp_dual(lp, 0);
  r.optimal = Clp_isProvenOptimal(lp) != 0;
  r.infeasible = Clp_status(lp) == 1;
  if (!r.infeasible && md.nrows() > 0) r.lagrangian = lagrangian_bound(md, Clp_dualRowSolution(lp));
  if (r.optimal) {
    // Relative slack for the simplex's round-off, so the bound stays a bound.
    r.bound = std::max(0.0, Clp_objectiveValue(lp) * (1 - 1e-7));
    const double* y = Clp_getColSolution(lp);
    r.y.assign(y, y + md.ncols());
  }
  Clp_deleteModel(lp);
  return r;
}

// Levels whose thermometer variables are at least `threshold` in the LP answer.
std::vector<int32_t> lp_round(const RecomputeProblem& pb, const MipModel& md,
                              const std::vector<double>& y, double threshold) {
  std::vector<int32_t> x(pb.group_max.size(), 0);
  for (size_t g = 0; g < x.size(); ++g)
    while (x[g] < pb.group_max[g] && y[md.col0[g] + x[g]] >= threshold) ++x[g];
  return x;
}

// CBC from the best known answer: root cuts raise the bound, branching finds better answers.
// Returns CBC's bound (0 when it has none) and improves `best` when it finds better.
double cbc_solve(const RecomputeProblem& pb, MipModel& md, double gap, double seconds,
                 RecomputeSolution& best) {
  const int32_t ng = static_cast<int32_t>(pb.group_max.size());
  // CBC's solve driver (CbcMain, behind Cbc_solve) keeps process-wide state and is not
  // thread-safe unless CBC is built with CBC_THREAD_SAFE: planners on several threads (the layout
  // search, sim/layout_search.h) take turns here.
  static std::mutex cbc_mutex;
  const std::lock_guard<std::mutex> one_solve_at_a_time(cbc_mutex);
  Cbc_Model* m = Cbc_newModel();
  Cbc_setLogLevel(m, 0);
  Cbc_loadProblem(m, md.ncols(), md.nrows(), md.start.data(), md.index.data(), md.value.data(),
                  md.col_lb.data(), md.col_ub.data(), md.obj.data(), md.row_lb.data(),
                  md.row_ub.data());
  for (int c = 0; c < md.ncols(); ++c) Cbc_setInteger(m, c);
  if (best.feasible) {
    std::vector<int> idx(md.ncols());
    std::vector<double> val(md.ncols());
    for (int32_t g = 0; g < ng; ++g)
      for (int32_t k = 0; k < pb.group_max[g]; ++k) {
        idx[md.col0[g] + k] = md.col0[g] + k;
        val[md.col0[g] + k] = k < best.layers[g] ? 1.0 : 0.0;
      }
    Cbc_setMIPStartI(m, md.ncols(), idx.data(), val.data());
    Cbc_setParameter(m, "feas", "off");  // the start is feasible
  }
  Cbc_setAllowableFractionGap(m, gap);
  Cbc_setParameter(m, "seconds", std::to_string(std::max(0.01, seconds)).c_str());
  Cbc_setParameter(m, "threads", "1");
  // Mixed-integer rounding cuts close most of the gap on these knapsack-like rows; Gomory and
  // two-step MIR cuts took most of the root's time for little more (measured on the examples).
  Cbc_setParameter(m, "gomoryCuts", "off");
  Cbc_setParameter(m, "twoMirCuts", "off");
  // CglPreProcess::postProcess (CBC's preprocessing) dereferenced null on models whose solve
  // the time limit cut short (twice in the layout search's paper test); these small rows gain
  // little from it.
  Cbc_setParameter(m, "preprocess", "off");
  Cbc_solve(m);
  const double* xs = Cbc_getColSolution(m);
  if (xs != nullptr && Cbc_getObjValue(m) < std::numeric_limits<double>::max() / 2) {
    std::vector<int32_t> layers(ng, 0);
    for (int32_t g = 0; g < ng; ++g)
      while (layers[g] < pb.group_max[g] && xs[md.col0[g] + layers[g]] > 0.5) ++layers[g];
    const double c = recompute_cost(pb, layers);
    if (fits(pb, layers) && (!best.feasible || c < best.cost)) {
      best.layers = layers;
      best.cost = c;
      best.feasible = true;
    }
  }
  // CBC's best bound (it stops once within `gap`, still "optimal" to it). The model may leave
  // out points (see MipModel), which only makes it a relaxation: a bound all the same.
  double bound = Cbc_getBestPossibleObjValue(m);
  if (!std::isfinite(bound) || bound > std::numeric_limits<double>::max() / 2) bound = 0;
  Cbc_deleteModel(m);
  return std::max(0.0, bound);
}

}  // namespace

RecomputeSolution recompute_solve_greedy(const RecomputeProblem& pb) {
  RecomputeSolution sol;
  sol.layers.assign(pb.group_max.size(), 0);
  // Nothing over budget without recompute: the repair below would change nothing, and its
  // index is most of the cost of a candidate where memory does not bind.
  if (fits(pb, sol.layers)) {
    sol.feasible = true;
    sol.proven = true;
    return sol;
  }
  // No choice fits: the repair would raise every group to learn it. Callers show the leanest.
  if (recompute_never_fits(pb)) {
    sol.layers = pb.group_max;
    sol.cost = recompute_cost(pb, sol.layers);
    return sol;
  }
  const RecomputeIndex ix = recompute_index(pb);
  sol.feasible = recompute_repair(pb, ix, sol.layers);
  sol.cost = recompute_cost(pb, sol.layers);
  sol.proven = sol.feasible && sol.cost == 0.0;
  sol.lower_bound = 0;  // greedy proves nothing unless it recomputes nothing
  return sol;
}

RecomputeSolution recompute_solve_exact(const RecomputeProblem& pb, double gap,
                                        double time_limit_s) {
  const double deadline = thread_cpu_seconds() + time_limit_s;
  auto left = [&] { return deadline - thread_cpu_seconds(); };
  RecomputeSolution best = recompute_solve_greedy(pb);
  if (best.feasible && best.proven) return best;
  // Few choices (small models, short pipelines): try them all. It is exact and fast there, and
  // keeps CBC off the small models on which its branching was seen to trip an assertion in Clp.
  double combos = 1;
  for (int32_t u : pb.group_max) combos *= u + 1;
  if (combos <= kBruteForceChoices) return recompute_solve_brute(pb);
  const RecomputeIndex ix = recompute_index(pb);
  MipModel md = mip_model(pb, ix);
  if (md.infeasible) {
    best.feasible = false;
    return best;
  }

  // The cheap bound first: whatever the LP and CBC manage within the cap, a bound is proven.
  const double cover = cover_bound(md);
  const double lp_start = thread_cpu_seconds();
  const LpResult lp = lp_solve(md, std::max(0.01, 0.5 * left()));
  const double lp_seconds = thread_cpu_seconds() - lp_start;
  if (lp.infeasible) {  // not even the relaxation fits: no choice does
    best.feasible = false;
    return best;
  }
  // Proven before any search: the search stops once it is within the gap of it (the goal; going
  // on would spend the cap, and make the answer depend on the machine's speed).
  const double bound = std::max({cover, lp.lagrangian, lp.optimal ? lp.bound : 0.0});
  const double good_enough = gap + 1e-6 < 1 ? bound / (1 - gap - 1e-6) : 0.0;
  auto offer = [&](std::vector<int32_t> x, bool repair) {
    if (best.feasible && best.cost <= good_enough) return;
    if (repair && !recompute_repair(pb, ix, x)) return;
    recompute_improve(pb, ix, x, deadline, good_enough);
    const double c = recompute_cost(pb, x);
    if (fits(pb, x) && (!best.feasible || c < best.cost)) {
      best.layers = std::move(x);
      best.cost = c;
      best.feasible = true;
    }
  };
  if (best.feasible) offer(best.layers, false);
  if (lp.optimal)
    for (double threshold : {0.5, 0.25, 0.75, 1e-6}) offer(lp_round(pb, md, lp.y, threshold), true);
  best.lower_bound = std::min(best.cost, bound);
  auto closed = [&] {
    // (1e-6: the solvers' own tolerances, far below any gap worth asking for)
    return best.feasible && best.cost - best.lower_bound <= (gap + 1e-6) * best.cost;
  };
  if (!closed() && left() > kCbcStartLpTimes * lp_seconds) {
    const double bound = cbc_solve(pb, md, gap, left(), best);
    best.lower_bound = std::min(best.cost, std::max(best.lower_bound, bound));
  }
  best.proven = closed();
  return best;
}

double recompute_cover_bound(const RecomputeProblem& pb) {
  const MipModel md = mip_model(pb, recompute_index(pb));
  return md.infeasible ? std::numeric_limits<double>::infinity() : cover_bound(md);
}

RecomputeSolution recompute_solve_brute(const RecomputeProblem& pb) {
  const int32_t ng = static_cast<int32_t>(pb.group_max.size());
  double combos = 1;
  for (int32_t u : pb.group_max) combos *= u + 1;
  if (combos > 5e6)
    fail("brute force over {:.0f} choices is too large; use the exact solver", combos);
  RecomputeSolution best;
  best.cost = std::numeric_limits<double>::infinity();
  std::vector<int32_t> x(ng, 0);
  for (;;) {
    const auto peaks = recompute_peaks(pb, x);
    bool fits = true;
    for (int64_t p : peaks) fits = fits && p <= pb.budget;
    if (fits) {
      const double c = recompute_cost(pb, x);
      if (c < best.cost) {
        best.cost = c;
        best.layers = x;
        best.feasible = true;
      }
    }
    int32_t g = 0;
    while (g < ng && x[g] == pb.group_max[g]) x[g++] = 0;
    if (g == ng) break;
    ++x[g];
  }
  if (!best.feasible) {
    best.layers.assign(ng, 0);
    best.cost = 0;
    return best;
  }
  best.proven = true;
  best.lower_bound = best.cost;
  return best;
}

}  // namespace infinipipe::plan
