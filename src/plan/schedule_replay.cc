#include "plan/schedule_replay.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"

namespace infinipipe::plan {
namespace {

constexpr double kNotRun = -1.0;

std::string action_name(const Action& a) {
  return fmt::format("{} of chunk {} on stage {}", action_kind_name(a.kind), a.chunk, a.stage);
}

// Names each stuck rank, its next action and what it waits for.
std::string deadlock_reason(const Plan& plan, const std::vector<size_t>& next,
                            const std::vector<double>& fdone) {
  const size_t m = plan.chunks.size();
  std::string out;
  for (int32_t k = 0; k < plan.pp; ++k) {
    const auto& list = plan.actions[k];
    if (next[k] >= list.size()) continue;
    const Action& a = list[next[k]];
    std::string wait;
    if (a.kind == ActionKind::backward &&
        fdone[static_cast<size_t>(a.stage) * m + a.chunk] == kNotRun)
      wait = fmt::format("its own forward of chunk {} on stage {}", a.chunk, a.stage);
    else if (a.kind == ActionKind::forward)
      wait = fmt::format("the activation of chunk {} from stage {} (rank {})", a.chunk, a.stage - 1,
                         plan.rank_of_stage(a.stage - 1));
    else
      wait = fmt::format("the gradient of chunk {} from stage {} (rank {})", a.chunk, a.stage + 1,
                         plan.rank_of_stage(a.stage + 1));
    out += fmt::format("{}rank {} action {} ({}) waits for {}", out.empty() ? "" : "; ", k, next[k],
                       action_name(a), wait);
  }
  return out;
}

// When action `a` may start on inputs alone (its forward's predecessor, or its own forward and
// its successor's gradient, plus the transfer); kNotRun while one of them has not run.
double input_ready(const Plan& plan, const Action& a, const std::vector<double>& fdone,
                   const std::vector<double>& bdone, std::span<const double> transfer) {
  const int32_t ns = plan.num_stages();
  const size_t m = plan.chunks.size();
  auto idx = [&](int32_t stage) { return static_cast<size_t>(stage) * m + a.chunk; };
  auto xfer = [&](int32_t boundary) {
    return transfer.empty() ? 0.0 : transfer[static_cast<size_t>(a.chunk) * ns + boundary];
  };
  if (a.kind == ActionKind::forward) {
    if (a.stage == 0) return 0.0;
    const double d = fdone[idx(a.stage - 1)];
    return d == kNotRun ? kNotRun : d + xfer(a.stage - 1);
  }
  if (fdone[idx(a.stage)] == kNotRun) return kNotRun;
  if (a.stage + 1 >= ns) return 0.0;
  const double d = bdone[idx(a.stage + 1)];
  return d == kNotRun ? kNotRun : d + xfer(a.stage);
}

// The replay when ranks share cores: a discrete-event clock on which every computing rank's
// action advances at its share of the node's cores (cost::core_share_speeds), recomputed at
// every start and end. Gaps and transfers take wall time and compute nothing.
Replay replay_cores_shared(const Plan& plan, std::span<const double> transfer,
                           const std::vector<std::vector<double>>& durations,
                           std::span<const RankStepCost> step_costs,
                           std::span<const cost::RankHost> hosts) {
  const int32_t ns = plan.num_stages(), pp = plan.pp;
  const size_t m = plan.chunks.size();
  if (hosts.size() != static_cast<size_t>(pp))
    fail("the plan's hosts name {} ranks, it has pp {}", hosts.size(), pp);
  std::vector<double> fdone(ns * m, kNotRun), bdone(ns * m, kNotRun);
  auto idx = [&](int32_t stage, int32_t chunk) { return static_cast<size_t>(stage) * m + chunk; };
  // When rank k's next action may start, once its inputs are done; kNotRun while one is not.
  auto start_of = [&](int32_t k, size_t i, double free) {
    const double ready = input_ready(plan, plan.actions[k][i], fdone, bdone, transfer);
    if (ready == kNotRun) return kNotRun;
    return std::max(free, ready) + (step_costs.empty() ? 0.0 : step_costs[k].action_gap);
  };

  Replay r;
  r.timing.resize(pp);
  for (int32_t k = 0; k < pp; ++k) r.timing[k].resize(plan.actions[k].size());
  std::vector<size_t> next(pp, 0);
  std::vector<double> free(pp, 0.0), starts(pp, kNotRun), left(pp, 0.0);
  std::vector<bool> computing(pp, false);
  double now = 0;
  for (;;) {
    for (int32_t k = 0; k < pp; ++k)
      if (!computing[k] && starts[k] == kNotRun && next[k] < plan.actions[k].size())
        starts[k] = start_of(k, next[k], free[k]);
    // The next event: an action starts, or the first computing one ends at the current speeds.
    const std::vector<double> speed = cost::core_share_speeds(hosts, computing);
    double t = std::numeric_limits<double>::infinity();
    for (int32_t k = 0; k < pp; ++k) {
      if (starts[k] != kNotRun) t = std::min(t, starts[k]);
      if (computing[k]) t = std::min(t, now + left[k] / speed[k]);
    }
    if (t == std::numeric_limits<double>::infinity()) break;  // finished, or stuck
    t = std::max(t, now);
    for (int32_t k = 0; k < pp; ++k) {
      if (!computing[k]) continue;
      const bool ends = now + left[k] / speed[k] <= t;
      left[k] = ends ? 0.0 : left[k] - speed[k] * (t - now);
      if (!ends) continue;
      const Action& a = plan.actions[k][next[k]];
      r.timing[k][next[k]].end = t;
      (a.kind == ActionKind::forward ? fdone : bdone)[idx(a.stage, a.chunk)] = t;
      computing[k] = false;
      free[k] = t;
      ++next[k];
    }
    now = t;
    for (int32_t k = 0; k < pp; ++k) {
      if (starts[k] == kNotRun || starts[k] > now) continue;
      r.timing[k][next[k]].start = starts[k];
      left[k] = durations.empty() ? plan.actions[k][next[k]].predicted_time : durations[k][next[k]];
      computing[k] = true;
      starts[k] = kNotRun;
    }
  }
  bool finished = true;
  for (int32_t k = 0; k < pp; ++k) {
    finished = finished && next[k] == plan.actions[k].size();
    r.step_time = std::max(r.step_time, free[k] + (step_costs.empty() ? 0.0 : step_costs[k].tail));
  }
  if (finished) return r;
  r.deadlock = true;
  r.deadlock_reason = deadlock_reason(plan, next, fdone);
  return r;
}

}  // namespace

int64_t pipeline_rank_node(const Config& cfg, int64_t rank) {
  int64_t per_node = std::max<int64_t>(1, cfg.cluster.devices_per_node);
  int64_t device = rank * cfg.parallel.data_parallel * cfg.parallel.ulysses_degree;
  return device / per_node;
}

std::vector<double> replay_transfer_times(const Plan& plan, const cost::CostModel& cost,
                                          const Config& cfg) {
  const int32_t ns = plan.num_stages();
  std::vector<double> t(plan.chunks.size() * ns, 0.0);
  for (size_t c = 0; c < plan.chunks.size(); ++c) {
    auto shapes = plan.chunks[c].shapes();
    int64_t bytes = cost.p2p_bytes(shapes);
    for (int32_t s = 0; s + 1 < ns; ++s) {
      int32_t a = plan.rank_of_stage(s), b = plan.rank_of_stage(s + 1);
      if (a == b) continue;
      bool inter = pipeline_rank_node(cfg, a) != pipeline_rank_node(cfg, b);
      t[c * ns + s] = cost.p2p_time_between(bytes, a, b, inter);
    }
  }
  return t;
}

std::vector<RankStepCost> replay_step_costs(const Plan& plan, const cost::CostModel& cost) {
  std::vector<RankStepCost> out(static_cast<size_t>(plan.pp));
  for (int32_t k = 0; k < plan.pp; ++k) {
    const cost::Coefficients& c = cost.time_coefficients(k);
    out[static_cast<size_t>(k)] = {c.action_gap_s, c.step_tail_s};
  }
  return out;
}

Replay schedule_replay(const Plan& plan, std::span<const double> transfer,
                       const std::vector<std::vector<double>>& durations,
                       std::span<const RankStepCost> step_costs,
                       std::span<const cost::RankHost> hosts) {
  if (cost::cores_shared(hosts))
    return replay_cores_shared(plan, transfer, durations, step_costs, hosts);
  const int32_t ns = plan.num_stages(), pp = plan.pp;
  const size_t m = plan.chunks.size();
  // Completion time of forward / backward of (stage, chunk); kNotRun until it ran.
  std::vector<double> fdone(ns * m, kNotRun), bdone(ns * m, kNotRun);
  auto idx = [&](int32_t stage, int32_t chunk) { return static_cast<size_t>(stage) * m + chunk; };

  Replay r;
  r.timing.resize(pp);
  std::vector<size_t> next(pp, 0);
  std::vector<double> clock(pp, 0.0);
  for (int32_t k = 0; k < pp; ++k) r.timing[k].resize(plan.actions[k].size());

  // Each pass runs every rank as far as its inputs allow; a pass without progress is a deadlock.
  bool progress = true, finished = false;
  while (progress && !finished) {
    progress = false;
    finished = true;
    for (int32_t k = 0; k < pp; ++k) {
      const auto& list = plan.actions[k];
      while (next[k] < list.size()) {
        const Action& a = list[next[k]];
        const double ready = input_ready(plan, a, fdone, bdone, transfer);
        if (ready == kNotRun) break;
        double dur = durations.empty() ? a.predicted_time : durations[k][next[k]];
        ActionTiming& t = r.timing[k][next[k]];
        t.start = std::max(clock[k], ready) + (step_costs.empty() ? 0.0 : step_costs[k].action_gap);
        t.end = t.start + dur;
        clock[k] = t.end;
        (a.kind == ActionKind::forward ? fdone : bdone)[idx(a.stage, a.chunk)] = t.end;
        ++next[k];
        progress = true;
      }
      if (next[k] < list.size()) finished = false;
    }
  }
  for (int32_t k = 0; k < pp; ++k)
    r.step_time = std::max(r.step_time, clock[k] + (step_costs.empty() ? 0.0 : step_costs[k].tail));
  if (finished) return r;

  r.deadlock = true;
  r.deadlock_reason = deadlock_reason(plan, next, fdone);
  return r;
}

std::vector<std::vector<int32_t>> send_hold_start(const Plan& plan) {
  const int32_t ns = plan.num_stages(), pp = plan.pp;
  const size_t m = plan.chunks.size();
  std::vector<std::vector<int32_t>> hold(pp);
  for (int32_t r = 0; r < pp; ++r) {
    hold[r].resize(plan.actions[r].size());
    for (size_t i = 0; i < hold[r].size(); ++i) hold[r][i] = std::max<int32_t>(0, int32_t(i) - 1);
  }
  std::vector<std::vector<double>> unit(pp);
  for (int32_t r = 0; r < pp; ++r) unit[r].assign(plan.actions[r].size(), 1.0);
  const Replay rp = schedule_replay(plan, {}, unit);
  if (rp.deadlock) return hold;  // validation reports it
  // Where each (kind, stage, chunk) runs: its rank's index of it.
  std::vector<int32_t> at_f(ns * m, -1), at_b(ns * m, -1);
  auto idx = [&](int32_t stage, int32_t chunk) { return static_cast<size_t>(stage) * m + chunk; };
  for (int32_t r = 0; r < pp; ++r)
    for (size_t i = 0; i < plan.actions[r].size(); ++i) {
      const Action& a = plan.actions[r][i];
      (a.kind == ActionKind::forward ? at_f : at_b)[idx(a.stage, a.chunk)] = int32_t(i);
    }
  for (int32_t r = 0; r < pp; ++r) {
    const auto& list = plan.actions[r];
    // When each action's message is taken: the receiver reached its action (ended the one
    // before) and the message was sent; 0 for actions that send nothing to another rank.
    std::vector<double> taken(list.size(), 0.0);
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      const bool fwd = a.kind == ActionKind::forward;
      const int32_t to = fwd ? a.stage + 1 : a.stage - 1;
      if (to < 0 || to >= ns || plan.rank_of_stage(to) == r) continue;
      const int32_t r2 = plan.rank_of_stage(to);
      const int32_t j = (fwd ? at_f : at_b)[idx(to, a.chunk)];
      if (j < 0) continue;  // validation reports the missing action
      const double reached = j == 0 ? 0.0 : rp.timing[r2][j - 1].end;
      taken[i] = std::max(rp.timing[r][i].end, reached);
    }
    // The longest prefix of messages all taken by the start of action i, in the replay.
    int32_t prefix = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      while (prefix < int32_t(i) && taken[prefix] <= rp.timing[r][i].start) ++prefix;
      hold[r][i] = std::min(prefix, std::max<int32_t>(0, int32_t(i) - 1));
    }
  }
  return hold;
}

}  // namespace infinipipe::plan
