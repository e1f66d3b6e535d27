// Solvers of the checkpoint problem (checkpoint.h): greedy, exact (CBC) and brute force.
#include <coin/Cbc_C_Interface.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "plan/checkpoint.h"

namespace infinipipe::plan {

namespace {

struct Occurrence {
  int32_t point = 0, item = 0;
  bool transient = false;
};

int64_t term_value(const CheckpointItem& it, bool transient, int32_t x) {
  const int32_t r = std::min(x, it.max_layers);
  return transient ? it.transient[r] : it.act[r];
}

// Per group, the slowest recompute of its items with x layers.
double group_time(const CheckpointProblem& pb, const std::vector<std::vector<int32_t>>& items_of,
                  int32_t g, int32_t x) {
  double w = 0;
  for (int32_t i : items_of[g]) {
    const CheckpointItem& it = pb.items[i];
    w = std::max(w, it.time[std::min(x, it.max_layers)]);
  }
  return w;
}

struct Index {
  std::vector<std::vector<int32_t>> items_of;   // group -> items
  std::vector<std::vector<Occurrence>> occ_of;  // group -> where its items appear
};

Index build_index(const CheckpointProblem& pb) {
  Index ix;
  ix.items_of.resize(pb.group_max.size());
  ix.occ_of.resize(pb.group_max.size());
  for (int32_t i = 0; i < static_cast<int32_t>(pb.items.size()); ++i)
    ix.items_of[pb.items[i].group].push_back(i);
  for (int32_t p = 0; p < static_cast<int32_t>(pb.points.size()); ++p)
    for (const CheckpointTerm& t : pb.points[p].terms)
      ix.occ_of[pb.items[t.item].group].push_back({p, t.item, t.transient});
  return ix;
}

std::vector<int64_t> point_values(const CheckpointProblem& pb, const std::vector<int32_t>& x) {
  std::vector<int64_t> v(pb.points.size());
  for (size_t p = 0; p < pb.points.size(); ++p) {
    int64_t s = pb.points[p].fixed;
    for (const CheckpointTerm& t : pb.points[p].terms) {
      const CheckpointItem& it = pb.items[t.item];
      s += term_value(it, t.transient, x[it.group]);
    }
    v[p] = s;
  }
  return v;
}

}  // namespace

CheckpointSolution checkpoint_solve_greedy(const CheckpointProblem& pb) {
  CheckpointSolution sol;
  const int32_t ng = static_cast<int32_t>(pb.group_max.size());
  sol.layers.assign(ng, 0);
  const Index ix = build_index(pb);
  auto& x = sol.layers;
  auto val = point_values(pb, x);
  auto violated = [&](int32_t p) { return val[p] > pb.budget; };
  auto bump = [&](int32_t g, int32_t to) {
    for (const Occurrence& o : ix.occ_of[g]) {
      const CheckpointItem& it = pb.items[o.item];
      val[o.point] += term_value(it, o.transient, to) - term_value(it, o.transient, x[g]);
    }
    x[g] = to;
  };

  // Raise the group (to whichever level) that frees the most over-budget bytes per second of
  // recompute. Levels beyond +1 matter: the first recomputed layer adds a layer of working set
  // to its own backward, so one step alone may free nothing there.
  std::vector<int32_t> stamp(ng, -1), candidates;
  for (int32_t round = 0;; ++round) {
    // Only groups with a term in an over-budget point can help.
    candidates.clear();
    for (size_t p = 0; p < val.size(); ++p) {
      if (!violated(static_cast<int32_t>(p))) continue;
      for (const CheckpointTerm& t : pb.points[p].terms) {
        const int32_t g = pb.items[t.item].group;
        if (stamp[g] != round && x[g] < pb.group_max[g]) {
          stamp[g] = round;
          candidates.push_back(g);
        }
      }
    }
    if (candidates.empty()) break;
    int32_t best = -1, best_to = 0;
    double best_score = 0;
    for (int32_t g : candidates) {
      const double t0 = group_time(pb, ix.items_of, g, x[g]);
      for (int32_t to = x[g] + 1; to <= pb.group_max[g]; ++to) {
        double freed = 0;
        for (const Occurrence& o : ix.occ_of[g]) {
          if (!violated(o.point)) continue;
          const CheckpointItem& it = pb.items[o.item];
          const int64_t d = term_value(it, o.transient, x[g]) - term_value(it, o.transient, to);
          freed += static_cast<double>(std::min<int64_t>(d, val[o.point] - pb.budget));
        }
        if (freed <= 0) continue;
        const double dt = group_time(pb, ix.items_of, g, to) - t0;
        const double score = freed / std::max(dt, 1e-12);
        if (score > best_score) {
          best_score = score;
          best = g;
          best_to = to;
        }
      }
    }
    if (best < 0) break;  // no move frees anything: greedy gives up (exact may still succeed)
    bump(best, best_to);
  }
  // Give back what is not needed, the most expensive layers first.
  std::vector<int32_t> order(ng);
  for (int32_t g = 0; g < ng; ++g) order[g] = g;
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return group_time(pb, ix.items_of, a, x[a]) > group_time(pb, ix.items_of, b, x[b]);
  });
  for (int32_t g : order) {
    const int32_t old = x[g];
    for (int32_t to = 0; to < old; ++to) {
      bump(g, to);
      bool ok = true;
      for (const Occurrence& o : ix.occ_of[g]) ok = ok && !violated(o.point);
      if (ok) break;
      bump(g, old);
    }
  }
  sol.feasible = true;
  for (int64_t v : val) sol.feasible = sol.feasible && v <= pb.budget;
  sol.cost = checkpoint_cost(pb, x);
  sol.proven = sol.cost == 0.0;
  sol.lower_bound = 0;  // greedy proves nothing unless it recomputes nothing
  return sol;
}

CheckpointSolution checkpoint_solve_exact(const CheckpointProblem& pb, double gap,
                                          double time_limit_s) {
  CheckpointSolution greedy = checkpoint_solve_greedy(pb);
  if (greedy.feasible && greedy.proven) return greedy;
  const Index ix = build_index(pb);
  const int32_t ng = static_cast<int32_t>(pb.group_max.size());

  // Thermometer encoding: y[g][k] = 1 when group g recomputes at least k+1 layers.
  std::vector<int32_t> col0(ng + 1, 0);
  for (int32_t g = 0; g < ng; ++g) col0[g + 1] = col0[g] + pb.group_max[g];
  const int32_t ncols = col0[ng];
  std::vector<double> obj(ncols), lb(ncols, 0.0), ub(ncols, 1.0);
  for (int32_t g = 0; g < ng; ++g)
    for (int32_t k = 0; k < pb.group_max[g]; ++k)
      obj[col0[g] + k] = group_time(pb, ix.items_of, g, k + 1) - group_time(pb, ix.items_of, g, k);

  // Rows gathered as triplets, then loaded at once in column-major form (adding rows one by
  // one makes CoinUtils resize its matrix each time).
  std::vector<int> row_of, col_of;
  std::vector<double> val_of, row_ub;
  auto add_row = [&](const std::vector<int>& idx, const std::vector<double>& coef, double ub) {
    for (size_t i = 0; i < idx.size(); ++i) {
      row_of.push_back(static_cast<int>(row_ub.size()));
      col_of.push_back(idx[i]);
      val_of.push_back(coef[i]);
    }
    row_ub.push_back(ub);
  };
  // Ordering rows: y[g][k+1] <= y[g][k].
  for (int32_t g = 0; g < ng; ++g)
    for (int32_t k = 0; k + 1 < pb.group_max[g]; ++k)
      add_row({col0[g] + k + 1, col0[g] + k}, {1.0, -1.0}, 0.0);
  // Memory rows, only for points over budget with nothing recomputed.
  const auto base = point_values(pb, std::vector<int32_t>(ng, 0));
  std::vector<double> coef_of(ncols, 0.0);
  std::vector<int> touched, idx;
  std::vector<double> coef;
  for (size_t p = 0; p < pb.points.size(); ++p) {
    if (base[p] <= pb.budget) continue;
    touched.clear();
    for (const CheckpointTerm& t : pb.points[p].terms) {
      const CheckpointItem& it = pb.items[t.item];
      for (int32_t k = 0; k < it.max_layers; ++k) {
        const double d = static_cast<double>(term_value(it, t.transient, k + 1) -
                                             term_value(it, t.transient, k));
        const int c = col0[it.group] + k;
        if (coef_of[c] == 0.0) touched.push_back(c);
        coef_of[c] += d;
      }
    }
    idx.clear();
    coef.clear();
    for (int c : touched) {
      if (coef_of[c] != 0.0) {
        idx.push_back(c);
        coef.push_back(coef_of[c]);
      }
      coef_of[c] = 0.0;
    }
    add_row(idx, coef, static_cast<double>(pb.budget - base[p]));
  }
  const int nrows = static_cast<int>(row_ub.size());
  std::vector<CoinBigIndex> start(ncols + 1, 0);
  for (int c : col_of) ++start[c + 1];
  for (int c = 0; c < ncols; ++c) start[c + 1] += start[c];
  std::vector<int> index(col_of.size());
  std::vector<double> value(col_of.size());
  std::vector<CoinBigIndex> fill(start.begin(), start.end() - 1);
  for (size_t e = 0; e < col_of.size(); ++e) {
    const CoinBigIndex at = fill[col_of[e]]++;
    index[at] = row_of[e];
    value[at] = val_of[e];
  }
  std::vector<double> row_lb(nrows, -std::numeric_limits<double>::infinity());
  Cbc_Model* m = Cbc_newModel();
  Cbc_setLogLevel(m, 0);
  Cbc_loadProblem(m, ncols, nrows, start.data(), index.data(), value.data(), lb.data(), ub.data(),
                  obj.data(), row_lb.data(), row_ub.data());
  for (int32_t c = 0; c < ncols; ++c) Cbc_setInteger(m, c);
  std::vector<int> start_idx(ncols);
  std::vector<double> start_val(ncols);
  for (int32_t g = 0; g < ng; ++g)
    for (int32_t k = 0; k < pb.group_max[g]; ++k) {
      start_idx[col0[g] + k] = col0[g] + k;
      start_val[col0[g] + k] = k < greedy.layers[g] ? 1.0 : 0.0;
    }
  if (greedy.feasible) Cbc_setMIPStartI(m, ncols, start_idx.data(), start_val.data());
  Cbc_setAllowableFractionGap(m, gap);
  Cbc_setParameter(m, "seconds", std::to_string(time_limit_s).c_str());
  Cbc_setParameter(m, "threads", "1");
  if (greedy.feasible) Cbc_setParameter(m, "feas", "off");  // the greedy start is feasible
  Cbc_setParameter(m, "passC", "1");  // one round of root cuts: most of the bound, little time
  Cbc_solve(m);

  CheckpointSolution sol = greedy;
  const double* xs = Cbc_getColSolution(m);
  if (xs != nullptr && Cbc_getObjValue(m) < std::numeric_limits<double>::max() / 2) {
    std::vector<int32_t> layers(ng, 0);
    for (int32_t g = 0; g < ng; ++g) {
      int32_t k = 0;
      while (k < pb.group_max[g] && xs[col0[g] + k] > 0.5) ++k;
      layers[g] = k;
    }
    const auto peaks = checkpoint_peaks(pb, layers);
    bool fits = true;
    for (int64_t p : peaks) fits = fits && p <= pb.budget;
    const double c = checkpoint_cost(pb, layers);
    if (fits && (!greedy.feasible || c <= greedy.cost)) {
      sol.layers = layers;
      sol.cost = c;
      sol.feasible = true;
    }
  }
  if (!sol.feasible) {
    Cbc_deleteModel(m);
    return sol;
  }
  sol.lower_bound = std::max(0.0, Cbc_getBestPossibleObjValue(m));
  if (sol.lower_bound > sol.cost) sol.lower_bound = sol.cost;
  sol.proven =
      Cbc_isProvenOptimal(m) != 0 || sol.cost - sol.lower_bound <= gap * std::max(sol.cost, 1e-12);
  Cbc_deleteModel(m);
  return sol;
}

CheckpointSolution checkpoint_solve_brute(const CheckpointProblem& pb) {
  const int32_t ng = static_cast<int32_t>(pb.group_max.size());
  double combos = 1;
  for (int32_t u : pb.group_max) combos *= u + 1;
  if (combos > 5e6)
    fail("brute force over {:.0f} choices is too large; use the exact solver", combos);
  CheckpointSolution best;
  best.cost = std::numeric_limits<double>::infinity();
  std::vector<int32_t> x(ng, 0);
  for (;;) {
    const auto peaks = checkpoint_peaks(pb, x);
    bool fits = true;
    for (int64_t p : peaks) fits = fits && p <= pb.budget;
    if (fits) {
      const double c = checkpoint_cost(pb, x);
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
