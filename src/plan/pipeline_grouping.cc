#include "plan/pipeline_grouping.h"

#include <algorithm>
#include <limits>

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

// One step of the grouping's shortest path: every segment [cuts[i], cuts[j]) that fits `cap`
// with the least recompute, relaxing best[j] (and from[j]) from best[i].
void grouping_extend(const GroupingCosts& gc, const std::vector<int32_t>& cuts, size_t i,
                     int32_t pp, double cap, std::vector<double>& best, std::vector<size_t>& from) {
  const int32_t a = cuts[i];
  // Windows of chunks c with c + pp <= e no longer change as the segment grows: fold them in
  // once (`done`), recompute only the last pp each step.
  double done_min = 0, done_need = 0;
  int32_t done = a;
  for (size_t j = i + 1; j < cuts.size(); ++j) {
    const int32_t e = cuts[j];
    auto window = [&](int32_t c, double& lean_out, double& need_out) {
      // On the first stage, chunk c's backward waits for pp chunks after it (its run's start
      // included): the in-flight window [max(a, unit_start[c]), c + pp).
      const int32_t lo = std::max(a, gc.unit_start[c]);
      const int32_t hi = std::min(e, c + pp);
      const double full = gc.pmax[hi] - gc.pmax[lo], lean = gc.pmin[hi] - gc.pmin[lo];
      lean_out = std::max(lean_out, lean);
      if (full > cap && full > lean)
        need_out = std::max(need_out, std::min(1.0, (full - cap) / (full - lean)));
    };
    for (; done < e && done + pp <= e; ++done) window(done, done_min, done_need);
    double worst_min = done_min, need = done_need;
    for (int32_t c = done; c < e; ++c) window(c, worst_min, need);
    if (worst_min > cap) break;  // longer segments only hold more
    const double time =
        gc.pf[e] - gc.pf[a] + (pp - 1) * (gc.f[a] + gc.b[e - 1]) + need * (gc.prt[e] - gc.prt[a]);
    if (best[i] + time < best[j]) {
      best[j] = best[i] + time;
      from[j] = i;
    }
  }
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
  // A cut before chunk c is allowed when c starts a unit and the previous unit has ended there.
  std::vector<int32_t> cuts;  // allowed segment starts, plus n
  for (int32_t c = 0; c < n; ++c)
    if (gc.unit_start[c] == c) cuts.push_back(c);
  cuts.push_back(n);
  const double cap = static_cast<double>(activation_budget) - gc.transient;
  const size_t u = cuts.size();
  std::vector<double> best(u, kInf);
  std::vector<size_t> from(u, 0);
  best[0] = 0;
  for (size_t i = 0; i + 1 < u; ++i)
    if (best[i] != kInf) grouping_extend(gc, cuts, i, pp, cap, best, from);
  if (best[u - 1] == kInf) return {};
  std::vector<size_t> starts;
  for (size_t j = u - 1; j > 0; j = from[j]) starts.push_back(from[j]);
  std::reverse(starts.begin(), starts.end());
  std::vector<int32_t> out(n, 0);
  for (size_t g = 0; g < starts.size(); ++g) {
    const int32_t lo = cuts[starts[g]];
    const int32_t hi = g + 1 < starts.size() ? cuts[starts[g + 1]] : n;
    for (int32_t c = lo; c < hi; ++c) out[c] = static_cast<int32_t>(g);
  }
  return out;
}

}  // namespace infinipipe::plan
