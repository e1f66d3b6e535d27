// The Trainer's online refit of the cost model (--cost-model-update online): after every
// iteration each rank feeds the actions it ran into its fit, a pipeline's ranks pool their fits
// (one all-reduce), and the next plans of that pipeline are made with the pooled coefficients;
// the replicas then exchange their fits for the calibration file the run leaves.
// The stage layout and the data-parallel split keep the prior: every rank computes them alike.
#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "comm/mpi_allreduce.h"
#include "comm/mpi_node.h"
#include "cost/calibration_ranks.h"
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
  if (groups_) {
    plan_cm_ = plan_cm_.with_rank_coefficients(rank_coefficients_gather(iteration));
    replica_fits_gather(iteration);
  }
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

// Every rank learns every replica's pooled fit and ranks' terms: each replica's first stage
// fills its slot of one summed vector (with dp 1 every rank knows its pipeline's already).
void Trainer::replica_fits_gather(int64_t iteration) {
  constexpr size_t kSlot = cost::kNumOnlineTerms + 2;  // terms, then residuals or gap and tail
  const size_t pp = static_cast<size_t>(cfg_.parallel.pipeline_parallel);
  const size_t dp = static_cast<size_t>(cfg_.parallel.data_parallel);
  const size_t per_replica = (pp + 1) * kSlot;  // the pooled fit, then each pipeline rank's
  std::vector<double> all(dp * per_replica, 0.0);
  const RankLayout& l = groups_->layout();
  const auto put = [](std::span<double> slot, const cost::Coefficients& c, double a, double b) {
    const auto terms = cost::online_terms_get(c);
    std::copy(terms.begin(), terms.end(), slot.begin());
    slot[cost::kNumOnlineTerms] = a;
    slot[cost::kNumOnlineTerms + 1] = b;
  };
  if (dp == 1 || l.stage == 0) {
    const std::span<double> mine =
        std::span<double>(all).subspan(static_cast<size_t>(l.replica) * per_replica, per_replica);
    put(mine.first(kSlot), pooled_.coeffs, pooled_.residual_forward, pooled_.residual_backward);
    const std::vector<cost::Coefficients>& ranks = plan_cm_.rank_coefficients();
    for (size_t r = 0; r < pp; ++r)
      put(mine.subspan((r + 1) * kSlot, kSlot), ranks[r], ranks[r].action_gap_s,
          ranks[r].step_tail_s);
  }
  if (dp > 1) {
    allreduce_sum(groups_->world(), std::span<double>(all), p2p_->timeout_s(),
                  fmt::format("the replicas' cost fits of iteration {}", iteration));
  }
  replica_fits_.assign(dp, {});
  for (size_t d = 0; d < dp; ++d) {
    const std::span<const double> rep =
        std::span<const double>(all).subspan(d * per_replica, per_replica);
    ReplicaFit& f = replica_fits_[d];
    f.pooled.coeffs = cm_.coefficients();
    cost::online_terms_set(rep.first(cost::kNumOnlineTerms), f.pooled.coeffs);
    f.pooled.residual_forward = rep[cost::kNumOnlineTerms];
    f.pooled.residual_backward = rep[cost::kNumOnlineTerms + 1];
    for (size_t r = 0; r < pp; ++r) {
      const std::span<const double> slot = rep.subspan((r + 1) * kSlot, kSlot);
      cost::Coefficients c = f.pooled.coeffs;
      cost::online_terms_set(slot.first(cost::kNumOnlineTerms), c);
      c.action_gap_s = slot[cost::kNumOnlineTerms];
      c.step_tail_s = slot[cost::kNumOnlineTerms + 1];
      f.ranks.push_back(c);
    }
  }
}

std::optional<cost::Coefficients> Trainer::rank_costs_from_calibration() {
  if (!groups_ || cfg_.cluster.calibration.empty()) return std::nullopt;
  const RankLayout& l = groups_->layout();
  std::vector<cost::Coefficients> ranks = cost::calibration_rank_coefficients(
      cost::load_calibration(cfg_.cluster.calibration), cm_.coefficients(), l.pp, l.dp,
      l.replica);
  if (ranks.empty()) return std::nullopt;
  const cost::Coefficients mine = ranks[static_cast<size_t>(l.stage)];
  plan_cm_ = plan_cm_.with_rank_coefficients(std::move(ranks));
  plan_cm_before_refit_ = plan_cm_;
  return mine;
}

std::optional<cost::Calibration> Trainer::online_calibration() const {
  if (!fit_) return std::nullopt;
  const std::string notes = fmt::format(
      "infinipipe train --cost-model-update online: time terms refitted from the actions the "
      "ranks measured ({} on this rank), starting from {}; links and memory as the prior{}",
      fit_->num_samples(false) + fit_->num_samples(true),
      cfg_.cluster.calibration.empty() ? "the '" + cfg_.cluster.device + "' preset"
                                       : "'" + cfg_.cluster.calibration + "'",
      replica_fits_.empty() ? ""
                            : "; coefficients: the mean of the replicas' pooled fits; ranks: "
                              "each rank's own terms and step costs");
  if (replica_fits_.empty())
    return cost::online_calibration(cm_, pooled_, obs::machine_name(), obs::utc_now(), notes);
  cost::OnlinePooled mean;
  mean.coeffs = cm_.coefficients();
  std::vector<const cost::Coefficients*> pooled;
  double fwd2 = 0, bwd2 = 0;
  for (const ReplicaFit& f : replica_fits_) {
    pooled.push_back(&f.pooled.coeffs);
    fwd2 += f.pooled.residual_forward * f.pooled.residual_forward;
    bwd2 += f.pooled.residual_backward * f.pooled.residual_backward;
  }
  cost::rank_time_terms_mean(pooled, mean.coeffs);
  const double n = static_cast<double>(replica_fits_.size());
  mean.residual_forward = std::sqrt(fwd2 / n);
  mean.residual_backward = std::sqrt(bwd2 / n);
  cost::Calibration cal =
      cost::online_calibration(cm_, mean, obs::machine_name(), obs::utc_now(), notes);
  cal.pipeline_parallel = cfg_.parallel.pipeline_parallel;
  cal.data_parallel = cfg_.parallel.data_parallel;
  for (size_t s = 0; s < static_cast<size_t>(cal.pipeline_parallel); ++s)
    for (size_t d = 0; d < replica_fits_.size(); ++d)
      cal.ranks.push_back({static_cast<int64_t>(s), static_cast<int64_t>(d),
                           replica_fits_[d].ranks[s]});
  return cal;
}

}  // namespace infinipipe::runtime
