#include "report/run_compare.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "core/error.h"
#include "sim/simulator.h"

namespace infinipipe::report {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The kind an action's error is filed under: a backward that recomputes is its own kind, as its
// cost has a second (recompute) term.
const char* action_class(plan::ActionKind kind, int32_t recompute_layers) {
  if (kind == plan::ActionKind::forward) return "forward";
  return recompute_layers > 0 ? "recompute" : "backward";
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

struct Pairs {
  std::vector<double> predicted, measured;
  void add(double p, double m) {
    predicted.push_back(p);
    measured.push_back(m);
  }
};

// The measured Gantt hatches a backward's recompute at the share the simulator gives it (the
// runtime does not time the recompute apart).
void recompute_share_apply(sim::StepResult& meas, const sim::StepResult& pred) {
  for (size_t k = 0; k < meas.actions.size() && k < pred.actions.size(); ++k) {
    std::map<std::tuple<int32_t, int32_t>, double> share;  // (chunk, stage) of backwards
    for (const sim::ActionRecord& a : pred.actions[k]) {
      if (a.action.kind == plan::ActionKind::backward && a.end > a.start) {
        share[{a.action.chunk, a.action.stage}] = a.recompute_time / (a.end - a.start);
      }
    }
    for (sim::ActionRecord& a : meas.actions[k]) {
      auto it = share.find({a.action.chunk, a.action.stage});
      if (a.action.kind == plan::ActionKind::backward && it != share.end()) {
        a.recompute_time = it->second * (a.end - a.start);
      }
    }
  }
}

}  // namespace

ErrorStats error_stats(const std::string& label, const std::vector<double>& predicted_s,
                       const std::vector<double>& measured_s) {
  ErrorStats e;
  e.label = label;
  std::vector<double> abs_rel, rel;
  for (size_t i = 0; i < predicted_s.size() && i < measured_s.size(); ++i) {
    if (!(predicted_s[i] > 0) || !std::isfinite(measured_s[i])) continue;
    ++e.count;
    e.predicted_s += predicted_s[i];
    e.measured_s += measured_s[i];
    const double r = (measured_s[i] - predicted_s[i]) / predicted_s[i];
    rel.push_back(r);
    abs_rel.push_back(std::fabs(r));
  }
  e.median_abs_rel = median(abs_rel);
  e.mean_abs_rel = mean(abs_rel);
  e.mean_rel = mean(rel);
  return e;
}

std::vector<double> idle_in_span(const sim::StepResult& step) {
  std::vector<double> out;
  for (const auto& list : step.actions) {
    if (list.empty()) {
      out.push_back(0);
      continue;
    }
    double first = list.front().start, last = list.front().end, busy = 0;
    for (const sim::ActionRecord& a : list) {
      first = std::min(first, a.start);
      last = std::max(last, a.end);
      busy += a.end - a.start;
    }
    out.push_back(last > first ? std::max(0.0, 1.0 - busy / (last - first)) : 0.0);
  }
  return out;
}

sim::StepResult measured_step(const RunTrace& trace, const plan::Plan& plan, int64_t iteration,
                              int32_t replica, const cost::CostModel& cost, const Config& cfg) {
  sim::StepResult r;
  r.source = "runtime";
  r.actions.assign(plan.actions.size(), {});
  r.memory.assign(plan.actions.size(), {});
  double origin = INFINITY, end = -INFINITY;
  std::vector<const TracedAction*> mine;
  for (const TracedAction& a : trace.actions) {
    if (a.iteration != iteration || a.replica != replica) continue;
    if (a.rank < 0 || static_cast<size_t>(a.rank) >= plan.actions.size()) {
      fail("the trace of iteration {} has an action on rank {}, its plan only {} ranks", iteration,
           a.rank, plan.actions.size());
    }
    mine.push_back(&a);
    origin = std::min(origin, a.start_s);
    end = std::max(end, a.end_s);
  }
  if (mine.empty()) return r;
  std::stable_sort(mine.begin(), mine.end(), [](const TracedAction* a, const TracedAction* b) {
    return a->start_s < b->start_s;
  });
  for (const TracedAction* a : mine) {
    sim::ActionRecord rec;
    rec.action.kind = a->kind;
    rec.action.chunk = a->chunk;
    rec.action.stage = a->stage;
    rec.action.recompute_layers = a->recompute_layers;
    rec.action.predicted_time = a->predicted_s;
    rec.start = a->start_s - origin;
    rec.end = a->end_s - origin;
    r.actions[static_cast<size_t>(a->rank)].push_back(rec);
    // The action's peak over its span, then what it left allocated.
    if (a->peak_bytes >= 0) {
      r.memory[static_cast<size_t>(a->rank)].push_back({rec.start, a->peak_bytes});
    }
    if (a->memory_bytes >= 0) {
      r.memory[static_cast<size_t>(a->rank)].push_back({rec.end, a->memory_bytes});
    }
  }
  r.step_time = end - origin;
  sim::step_result_finish(r, plan, cost, cfg);
  return r;
}

namespace {

// Predicted next to measured times gathered over the compared iterations, by action kind, by
// rank, over all actions, and per iteration.
struct CompareTally {
  std::map<std::string, Pairs> kinds;
  Pairs all, steps;
  std::vector<Pairs> ranks;
  std::vector<int32_t> stage_iterations;  // iterations added to each rank's sums
};

// Files each traced action of (ic.iteration, ic.replica), and its error under its kind in ic;
// returns the sum of their predicted times (the step a run that executes the stages one after
// another predicts).
double actions_tally(const RunTrace& trace, IterationCompare& ic, CompareTally& tally) {
  double serial = 0;
  for (const TracedAction& a : trace.actions) {
    if (a.iteration != ic.iteration || a.replica != ic.replica) continue;
    const double m = a.end_s - a.start_s;
    const char* kind = action_class(a.kind, a.recompute_layers);
    tally.kinds[kind].add(a.predicted_s, m);
    ic.kind_error_s[kind] += m - a.predicted_s;
    tally.all.add(a.predicted_s, m);
    tally.ranks[static_cast<size_t>(a.rank)].add(a.predicted_s, m);
    serial += a.predicted_s;
  }
  return serial;
}

// Adds one iteration's bubbles, idle shares and predicted peaks to each rank's sums.
void stages_add(const plan::Plan& plan, const sim::StepResult& pred, const sim::StepResult& meas,
                RunCompare& c, CompareTally& tally) {
  const std::vector<double> ip = idle_in_span(pred), im = idle_in_span(meas);
  for (int32_t k = 0; k < c.pp; ++k) {
    StageCompare& s = c.stages[static_cast<size_t>(k)];
    const size_t kk = static_cast<size_t>(k);
    s.bubble_predicted += pred.bubble_ratio[kk];
    s.bubble_measured += meas.bubble_ratio[kk];
    s.idle_predicted += ip[kk];
    s.idle_measured += im[kk];
    ++tally.stage_iterations[kk];
    if (kk < plan.predicted_peak_bytes.size()) {
      s.peak_predicted = std::max(s.peak_predicted, plan.predicted_peak_bytes[kk]);
    }
  }
}

// The iteration's metrics lines: measured peaks (per stage, or the process's), and the loss and
// throughput its replica's stage 0 reported.
void iteration_metrics_read(const RunTrace& trace, RunCompare& c, IterationCompare& ic) {
  for (const TracedIteration& ti : trace.iterations) {
    if (ti.iteration != ic.iteration || ti.replica != ic.replica) continue;
    const int64_t peak = ti.metrics.measured_peak_bytes;
    if (c.one_process) {
      c.process_peak_measured = std::max(c.process_peak_measured, peak);
    } else {
      StageCompare& s = c.stages[static_cast<size_t>(ti.stage)];
      s.peak_measured = std::max(s.peak_measured, peak);
    }
    if (ti.world_rank == (c.one_process ? 0 : ic.replica)) {  // stage 0 of the replica
      ic.loss = ti.metrics.loss;
      ic.tokens_per_s = ti.metrics.tokens_per_s;
      ic.has_metrics = true;
    }
  }
}

// One completely traced iteration of one replica, simulated next to measured.
void iteration_compare(const RunTrace& trace, const plan::Plan& plan, int64_t iteration,
                       int32_t replica, const cost::CostModel& cost, const Config& cfg,
                       RunCompare& c, CompareTally& tally) {
  if (plan.pp != c.pp) {
    fail("the plan of iteration {} is for pp {}, the traces for pp {}; the directory mixes runs",
         iteration, plan.pp, c.pp);
  }
  const sim::StepResult pred = sim::simulate(plan, cost, cfg);
  sim::StepResult meas = measured_step(trace, plan, iteration, replica, cost, cfg);
  recompute_share_apply(meas, pred);
  IterationCompare ic;
  ic.iteration = iteration;
  ic.replica = replica;
  const double serial = actions_tally(trace, ic, tally);
  ic.predicted_step_s = c.serial_steps ? serial : pred.step_time;
  ic.measured_step_s = meas.step_time;
  ic.bubble_predicted = pred.bubble_ratio_mean;
  ic.bubble_measured = meas.bubble_ratio_mean;
  ic.idle_predicted = mean(idle_in_span(pred));
  ic.idle_measured = mean(idle_in_span(meas));
  tally.steps.add(ic.predicted_step_s, ic.measured_step_s);
  stages_add(plan, pred, meas, c, tally);
  iteration_metrics_read(trace, c, ic);
  c.iterations.push_back(ic);
  if (replica == 0) {
    c.shown_iteration = iteration;
    c.shown_predicted = pred;
    c.shown_measured = meas;
    c.replica0_steps[iteration] = {pred, meas};
  }
}

// The iteration error after the warm-up and per window of iterations (c.iterations sorted).
void step_windows_fill(RunCompare& c) {
  if (c.iterations.empty()) return;
  const int64_t first = c.iterations.front().iteration, last = c.iterations.back().iteration;
  const int64_t width = 10 * ((last - first + 100) / 100);  // at most 10 windows
  auto within = [&](int64_t lo, int64_t hi) {
    std::vector<const IterationCompare*> out;
    for (const IterationCompare& i : c.iterations)
      if (i.iteration >= lo && i.iteration <= hi) out.push_back(&i);
    return out;
  };
  auto window = [&](const std::string& label, int64_t lo, int64_t hi) {
    Pairs p;
    for (const IterationCompare* i : within(lo, hi)) p.add(i->predicted_step_s, i->measured_step_s);
    return error_stats(label, p.predicted, p.measured);
  };
  const int64_t after = std::max(first, kRunCompareWarmup + 1);
  if (after <= last)
    c.step_after_warmup = window(fmt::format("iterations {}-{}", after, last), after, last);
  for (int64_t lo = first; lo <= last; lo += width) {
    const int64_t hi = std::min(last, lo + width - 1);
    ErrorStats e = window(fmt::format("iterations {}-{}", lo, hi), lo, hi);
    if (e.count == 0) continue;
    c.step_windows.push_back(std::move(e));
    c.step_window_kinds.push_back(kind_shares(within(lo, hi)));
  }
}

// The statistics of the tally, and each rank's sums turned into means over its iterations.
void compare_finish(const CompareTally& tally, RunCompare& c) {
  std::sort(c.iterations.begin(), c.iterations.end(),
            [](const IterationCompare& a, const IterationCompare& b) {
              return std::tie(a.iteration, a.replica) < std::tie(b.iteration, b.replica);
            });
  for (const char* k : {"forward", "backward", "recompute"}) {
    auto it = tally.kinds.find(k);
    if (it != tally.kinds.end())
      c.by_kind.push_back(error_stats(k, it->second.predicted, it->second.measured));
  }
  c.by_kind.push_back(error_stats("all actions", tally.all.predicted, tally.all.measured));
  c.step = error_stats("iteration", tally.steps.predicted, tally.steps.measured);
  step_windows_fill(c);
  for (int32_t k = 0; k < c.pp; ++k) {
    StageCompare& s = c.stages[static_cast<size_t>(k)];
    const double n = std::max(1, tally.stage_iterations[static_cast<size_t>(k)]);
    s.time = error_stats(fmt::format("rank {}", k), tally.ranks[static_cast<size_t>(k)].predicted,
                         tally.ranks[static_cast<size_t>(k)].measured);
    s.bubble_predicted /= n;
    s.bubble_measured /= n;
    s.idle_predicted /= n;
    s.idle_measured /= n;
    c.bubble_predicted += s.bubble_predicted / c.pp;
    c.bubble_measured += s.bubble_measured / c.pp;
    c.idle_predicted += s.idle_predicted / c.pp;
    c.idle_measured += s.idle_measured / c.pp;
  }
}

}  // namespace

std::vector<KindShare> kind_shares(const std::vector<const IterationCompare*>& iterations) {
  std::map<std::string, double> error_s;
  double predicted_s = 0;
  for (const IterationCompare* i : iterations) {
    predicted_s += i->predicted_step_s;
    for (const auto& [kind, e] : i->kind_error_s) error_s[kind] += e;
  }
  std::vector<KindShare> out;
  if (!(predicted_s > 0)) return out;
  for (const auto& [kind, e] : error_s) out.push_back({kind, e / predicted_s});
  std::stable_sort(out.begin(), out.end(), [](const KindShare& a, const KindShare& b) {
    return std::fabs(a.share) > std::fabs(b.share);
  });
  return out;
}

RunCompare run_compare(const RunTrace& trace, const cost::CostModel& cost, const Config& cfg) {
  RunCompare c;
  c.dir = trace.dir;
  c.pp = trace.pp();
  c.dp = trace.dp();
  c.one_process = trace.one_process();
  c.serial_steps = c.one_process && c.pp > 1;
  c.schedule = trace.files.empty() ? "" : trace.files.front().schedule;
  c.stages.resize(static_cast<size_t>(c.pp));
  for (int32_t k = 0; k < c.pp; ++k) c.stages[static_cast<size_t>(k)].rank = k;
  CompareTally tally;
  tally.ranks.resize(static_cast<size_t>(c.pp));
  tally.stage_iterations.assign(static_cast<size_t>(c.pp), 0);

  // Actions traced per (iteration, replica): complete when every planned action is there.
  std::map<std::pair<int64_t, int32_t>, size_t> traced;
  for (const TracedAction& a : trace.actions) ++traced[{a.iteration, a.replica}];
  for (const auto& [key, plan] : trace.plans) {
    size_t planned = 0;
    for (const auto& list : plan.actions) planned += list.size();
    auto it = traced.find(key);
    if (it == traced.end() || it->second != planned) continue;  // a rank did not finish it
    iteration_compare(trace, plan, key.first, key.second, cost, cfg, c, tally);
  }
  if (c.iterations.empty()) {
    fail(
        "{}: no iteration was traced completely (every rank's actions of one plan); let the run "
        "finish at least one iteration with --trace",
        trace.dir);
  }
  compare_finish(tally, c);
  return c;
}

}  // namespace infinipipe::report
