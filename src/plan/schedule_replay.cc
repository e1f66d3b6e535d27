#include "plan/schedule_replay.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

namespace infinipipe::plan {
namespace {

constexpr double kNotDone = -1.0;

std::string action_name(const Action& a) {
  return fmt::format("{} of chunk {} on stage {}", action_kind_name(a.kind), a.chunk, a.stage);
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
      t[c * ns + s] = cost.p2p_time(bytes, inter);
    }
  }
  return t;
}

Replay schedule_replay(const Plan& plan, std::span<const double> transfer,
                       const std::vector<std::vector<double>>& durations) {
  const int32_t ns = plan.num_stages(), pp = plan.pp;
  const size_t m = plan.chunks.size();
  // Completion time of forward / backward of (stage, chunk); kNotDone until it ran.
  std::vector<double> fdone(ns * m, kNotDone), bdone(ns * m, kNotDone);
  auto idx = [&](int32_t stage, int32_t chunk) { return static_cast<size_t>(stage) * m + chunk; };
  auto xfer = [&](int32_t chunk, int32_t boundary) {
    return transfer.empty() ? 0.0 : transfer[static_cast<size_t>(chunk) * ns + boundary];
  };

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
        double ready = 0;
        if (a.kind == ActionKind::forward) {
          if (a.stage > 0) {
            double d = fdone[idx(a.stage - 1, a.chunk)];
            if (d == kNotDone) break;
            ready = d + xfer(a.chunk, a.stage - 1);
          }
        } else {
          if (fdone[idx(a.stage, a.chunk)] == kNotDone) break;
          if (a.stage + 1 < ns) {
            double d = bdone[idx(a.stage + 1, a.chunk)];
            if (d == kNotDone) break;
            ready = d + xfer(a.chunk, a.stage);
          }
        }
        double dur = durations.empty() ? a.predicted_time : durations[k][next[k]];
        ActionTiming& t = r.timing[k][next[k]];
        t.start = std::max(clock[k], ready);
        t.end = t.start + dur;
        clock[k] = t.end;
        (a.kind == ActionKind::forward ? fdone : bdone)[idx(a.stage, a.chunk)] = t.end;
        ++next[k];
        progress = true;
      }
      if (next[k] < list.size()) finished = false;
    }
  }
  for (int32_t k = 0; k < pp; ++k) r.step_time = std::max(r.step_time, clock[k]);
  if (finished) return r;

  r.deadlock = true;
  for (int32_t k = 0; k < pp; ++k) {
    const auto& list = plan.actions[k];
    if (next[k] >= list.size()) continue;
    const Action& a = list[next[k]];
    std::string wait;
    if (a.kind == ActionKind::backward && fdone[idx(a.stage, a.chunk)] == kNotDone)
      wait = fmt::format("its own forward of chunk {} on stage {}", a.chunk, a.stage);
    else if (a.kind == ActionKind::forward)
      wait = fmt::format("the activation of chunk {} from stage {} (rank {})", a.chunk, a.stage - 1,
                         plan.rank_of_stage(a.stage - 1));
    else
      wait = fmt::format("the gradient of chunk {} from stage {} (rank {})", a.chunk, a.stage + 1,
                         plan.rank_of_stage(a.stage + 1));
    r.deadlock_reason +=
        fmt::format("{}rank {} action {} ({}) waits for {}", r.deadlock_reason.empty() ? "" : "; ",
                    k, next[k], action_name(a), wait);
  }
  return r;
}

}  // namespace infinipipe::plan
