// The Trainer's online refit of the cost model (--cost-model-update online): after every
// iteration each rank feeds the actions it ran into its fit, a pipeline's ranks pool their fits
// (one all-reduce), and the next plans of that pipeline are made with the pooled coefficients.
// The stage layout and the data-parallel split keep the prior: every rank computes them alike.
#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "comm/mpi_allreduce.h"
#include "comm/mpi_node.h"
#include "obs/profile.h"
#include "plan/schedule_memory.h"
#include "runtime/fit_sample.h"
#include "runtime/train.h"

namespace infinipipe::runtime {

void Trainer::cost_model_update(int64_t iteration) {
  if (!fit_) return;
  // Batches beyond the lengths fitted so far: the fit weighs their actions as it did its first.
  length_shift_note_.clear();
  if (const auto moved = length_shift_.observe(last_plan_.seq_lengths)) {
    fit_->widen();
    length_shift_note_ = fmt::format(
        "iteration {}: {}; the online cost fit now weighs the new shapes as it did its first",
        iteration, *moved);
  }
  const auto t_fit = Clock::now();
  // Where ranks share cores, each interval is scaled to a core of its own by the plan's replay.
  const PlanShares shares = plan_shares(last_plan_, last_plan_cm_, cfg_);
  for (const obs::StepStats& stats : last_stats_) {
    for (const obs::ActionTiming& t : stats.timings) {
      const plan::Action& a = t.action;
      cost::ActionSample s;
      s.chunk = last_plan_.chunks[static_cast<size_t>(a.chunk)].shapes();
      s.stage = plan::stage_shape(last_plan_.stages[static_cast<size_t>(a.stage)]);
      s.backward = a.kind == plan::ActionKind::backward;
      s.recompute_layers = s.backward ? a.recompute_layers : 0;
      const auto share = shares.find({static_cast<int>(a.kind), a.stage, a.chunk});
      s.seconds =
          action_fit_seconds(t.end_s - t.start_s, share == shares.end() ? nullptr : &share->second);
      // An action shorter than the clock's resolution tells nothing about the coefficients.
      if (s.seconds > 0) fit_->update(s);
    }
  }
  step_costs_add_tail(t_fit);
  std::array<double, cost::kOnlineShareSize> share = cost::online_fit_share(*fit_);
  if (groups_) {
    allreduce_sum(groups_->pp_comm(), share, p2p_->timeout_s(),
                  fmt::format("the cost model's refit of iteration {}", iteration));
  }
  pooled_ = cost::online_fit_pool(cm_, share);
  plan_cm_before_refit_ = plan_cm_;
  plan_cm_ =
      cost::CostModel(cm_.model(), cm_.device(), pooled_.coeffs, cm_.ulysses_degree(), cm_.bf16())
          .with_rank_hosts(cm_.rank_hosts());
  if (groups_) plan_cm_ = plan_cm_.with_rank_coefficients(rank_coefficients_gather(iteration));
}

// Every rank of the pipeline learns each rank's own time terms and step costs (its slot of one
// summed vector), so the planner times a rank's stages with what that rank measured: a slow
// rank gets less work.
std::vector<cost::Coefficients> Trainer::rank_coefficients_gather(int64_t iteration) const {
  constexpr size_t kSlot = cost::kNumOnlineTerms + 2;  // the time terms, action gap, tail
  const size_t pp = static_cast<size_t>(cfg_.parallel.pipeline_parallel);
  const auto mine = cost::online_terms_get(fit_->coefficients());
  std::vector<double> all(pp * kSlot, 0.0);
  const size_t at = static_cast<size_t>(groups_->layout().stage) * kSlot;
  std::copy(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(at));
  all[at + cost::kNumOnlineTerms] = step_fit_ ? step_fit_->action_gap() : 0.0;
  all[at + cost::kNumOnlineTerms + 1] = step_fit_ ? step_fit_->tail() : 0.0;
  allreduce_sum(groups_->pp_comm(), std::span<double>(all), p2p_->timeout_s(),
                fmt::format("the ranks' cost terms of iteration {}", iteration));
  std::vector<cost::Coefficients> out;
  for (size_t r = 0; r < pp; ++r) {
    cost::Coefficients c = pooled_.coeffs;
    const std::span<const double> slot = std::span<const double>(all).subspan(r * kSlot, kSlot);
    cost::online_terms_set(slot.first(cost::kNumOnlineTerms), c);
    c.action_gap_s = slot[cost::kNumOnlineTerms];
    c.step_tail_s = slot[cost::kNumOnlineTerms + 1];
    out.push_back(c);
  }
  return out;
}

std::vector<cost::RankHost> Trainer::rank_hosts_gather() const {
  const NodeRanks mine = node_ranks(groups_->world(), p2p_->timeout_s());
  const size_t pp = static_cast<size_t>(cfg_.parallel.pipeline_parallel);
  std::vector<int64_t> all(pp * 3, 0);
  const size_t at = static_cast<size_t>(groups_->layout().stage) * 3;
  all[at] = mine.node;
  all[at + 1] = mine.cores;
  all[at + 2] = mine.ranks;
  allreduce_sum(groups_->pp_comm(), std::span<int64_t>(all), p2p_->timeout_s(),
                "the nodes of the pipeline's ranks");
  std::vector<cost::RankHost> out;
  for (size_t r = 0; r < pp; ++r) out.push_back({all[r * 3], all[r * 3 + 1], all[r * 3 + 2]});
  return out;
}

// The gap before each action: from the previous action's end (the step's start for the first)
// or, when it waited for its input, from the wait's end, to the action's start. What the
// executor does after the last action (completing its sends) waits for the receiver to take
// them, so it is not part of the tail: on the last stage it was 0.1 s of a 3 s step, spent while
// the first stage still computed.
void Trainer::step_costs_measure_actions() {
  step_sample_ = {};
  if (!step_fit_ || last_stats_.size() != 1) return;
  const obs::StepStats& st = last_stats_.front();
  double prev_end = 0;
  for (const obs::ActionTiming& t : st.timings) {
    double ready = prev_end;
    for (const obs::EventTiming& e : st.events)
      if (e.category == "p2p_wait" && e.end_s <= t.start_s && e.end_s > ready) ready = e.end_s;
    step_sample_.gap_sum_s += std::max(0.0, t.start_s - ready);
    ++step_sample_.actions;
    prev_end = t.end_s;
  }
}

// Parts of the tail are this rank's own work (the exposed all-reduce, the cost fit, clip and
// optimizer); the collectives that wait for other ranks (the loss sum, the terms' exchange) are
// not costs of this rank and stay out.
void Trainer::step_costs_add_tail(Clock::time_point start) {
  if (step_fit_) step_sample_.tail_s += seconds_since(start);
}

void Trainer::step_costs_update() {
  if (step_fit_ && step_sample_.actions > 0) step_fit_->update(step_sample_);
  step_sample_ = {};
}

std::optional<cost::Calibration> Trainer::online_calibration() const {
  if (!fit_) return std::nullopt;
  const std::string notes = fmt::format(
      "infinipipe train --cost-model-update online: time terms refitted from the actions this "
      "pipeline measured ({} on this rank), starting from {}; links and memory as the prior",
      fit_->num_samples(false) + fit_->num_samples(true),
      cfg_.cluster.calibration.empty() ? "the '" + cfg_.cluster.device + "' preset"
                                       : "'" + cfg_.cluster.calibration + "'");
  return cost::online_calibration(cm_, pooled_, obs::machine_name(), obs::utc_now(), notes);
}

}  // namespace infinipipe::runtime
