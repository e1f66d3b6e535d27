// The cost loop's iteration: this rank's measured actions into its fit (CostFeedback), the
// pipeline's fits pooled (one sum) into the coefficients the next plans use, each rank's own terms
// and step costs beside them, and the replicas' fits exchanged for the calibration the run
// leaves. The stage layout and the data-parallel split keep the prior: every rank computes them
// alike.
#include "runtime/cost_loop.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "cost/calibration_ranks.h"
#include "plan/plan_costs.h"
#include "profile/profile.h"
#include "runtime/seconds_since.h"

namespace infinipipe::runtime {

namespace {

// A rank's time terms, action gap and tail: the slot it fills in the summed vectors below.
constexpr size_t kRankSlot = cost::kNumOnlineTerms + 2;

void rank_slot_put(std::span<double> slot, const cost::Coefficients& c, double a, double b) {
  const auto terms = cost::online_terms_get(c);
  std::copy(terms.begin(), terms.end(), slot.begin());
  slot[cost::kNumOnlineTerms] = a;
  slot[cost::kNumOnlineTerms + 1] = b;
}

// `base` with a slot's time terms, action gap and tail.
cost::Coefficients rank_slot_get(std::span<const double> slot, cost::Coefficients base) {
  cost::online_terms_set(slot.first(cost::kNumOnlineTerms), base);
  base.action_gap_s = slot[cost::kNumOnlineTerms];
  base.step_tail_s = slot[cost::kNumOnlineTerms + 1];
  return base;
}

}  // namespace

CostLoop::CostLoop(const Config& cfg, const cost::CostModel& prior, const CostLoopRank& rank,
                   CostLoopCollectives collectives)
    : prior_(prior),
      rank_(rank),
      collectives_(std::move(collectives)),
      prior_source_(cfg.cluster.calibration.empty() ? "the '" + cfg.cluster.device + "' preset"
                                                    : "'" + cfg.cluster.calibration + "'"),
      next_(prior),
      next_before_refit_(prior) {
  pooled_.coeffs = prior_.coefficients();
  // Distributed with a calibration that holds per-rank terms: each rank's own.
  std::optional<cost::Coefficients> mine;
  if (rank_.distributed && !cfg.cluster.calibration.empty()) {
    std::vector<cost::Coefficients> ranks = cost::calibration_rank_coefficients(
        cost::load_calibration(cfg.cluster.calibration), prior_.coefficients(), rank_.pp, rank_.dp,
        rank_.replica);
    if (!ranks.empty()) {
      mine = ranks[static_cast<size_t>(rank_.stage)];
      next_ = next_.with_rank_coefficients(std::move(ranks));
      next_before_refit_ = next_;
    }
  }
  if (cfg.training.cost_model_update != CostModelUpdate::online) return;
  feedback_.emplace(prior_, mine);  // the fit starts from this rank's own terms when it has them
  if (!rank_.distributed) return;
  step_fit_.emplace();  // one rank per process: its gaps and tail are its own
  // The calibration's step costs count as one measured step and action, until measured here.
  if (mine)
    step_fit_->restore({{mine->action_gap_s, mine->step_tail_s}, {1, 1}}, "the calibration");
}

cost::CostModel CostLoop::plan_now_cost_model() {
  if (!resumed_plan_) return next_;
  cost::CostModel out = std::move(*resumed_plan_);
  resumed_plan_.reset();
  return out;
}

cost::CostModel CostLoop::plan_cost_model(std::span<const double> terms,
                                          const plan::Plan& plan) const {
  cost::Coefficients c = prior_.coefficients();
  cost::online_terms_set(terms, c);
  return plan::plan_cost_model(plan, prior_.with_coefficients(c));
}

// The gap before each action: from the previous action's end (the step's start for the first)
// or, when it waited for its input, from the wait's end, to the action's start. What the
// executor does after the last action (completing its sends) waits for the receiver to take
// them, so it is not part of the tail: on the last stage it was 0.1 s of a 3 s step, spent while
// the first stage still computed.
void CostLoop::actions_measured(std::span<const obs::StepStats> stats) {
  step_sample_ = {};
  if (!step_fit_ || stats.size() != 1) return;
  const obs::StepStats& st = stats.front();
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

void CostLoop::tail_add(double seconds) {
  if (step_fit_) step_sample_.tail_s += seconds;
}

const cost::CostModel& CostLoop::observe(const plan::Plan& plan, const cost::CostModel& plan_cost,
                                         const Config& cfg, std::span<const obs::StepStats> stats,
                                         int64_t iteration) {
  length_shift_note_.clear();
  if (!feedback_) return next_;
  const auto t_fit = Clock::now();
  std::vector<obs::ActionTiming> timings;
  for (const obs::StepStats& s : stats)
    timings.insert(timings.end(), s.timings.begin(), s.timings.end());
  // Batches beyond the lengths fitted so far: the fit weighs their actions as it did its first.
  const std::string moved = feedback_->observe(plan, plan_cost, cfg, timings);
  if (!moved.empty()) {
    length_shift_note_ = fmt::format(
        "iteration {}: {}; the online cost fit now weighs the new shapes as it did its first",
        iteration, moved);
  }
  tail_add(seconds_since(t_fit));
  CostFeedback::Share share = feedback_->share();
  if (collectives_.pipeline_sum)
    collectives_.pipeline_sum(share,
                              fmt::format("the cost model's refit of iteration {}", iteration));
  pooled_ = feedback_->pool(share);
  next_before_refit_ = next_;
  next_ = feedback_->next_cost_model(pooled_);
  if (rank_.distributed) {
    next_ = next_.with_rank_coefficients(rank_coefficients_gather(iteration));
    replica_fits_gather(iteration);
  }
  return next_;
}

void CostLoop::step_end() {
  if (step_fit_ && step_sample_.actions > 0) step_fit_->update(step_sample_);
  step_sample_ = {};
}

void CostLoop::links_set(const cost::HostLinkTable& table, const cost::RankGrid& grid) {
  prior_ = prior_.with_host_links(table).with_replica_links(grid, rank_.replica);
  const cost::PipelineLinks& links = prior_.pipeline_links();
  next_ = next_.with_pipeline_links(links);
  next_before_refit_ = next_before_refit_.with_pipeline_links(links);
  if (resumed_plan_) resumed_plan_ = resumed_plan_->with_pipeline_links(links);
  if (feedback_) feedback_->links_set(links);
}

// Every rank of the pipeline learns each rank's own time terms and step costs (its slot of one
// summed vector), so the planner times a rank's stages with what that rank measured: a slow
// rank gets less work.
std::vector<cost::Coefficients> CostLoop::rank_coefficients_gather(int64_t iteration) const {
  const size_t pp = static_cast<size_t>(rank_.pp);
  std::vector<double> all(pp * kRankSlot, 0.0);
  const size_t at = static_cast<size_t>(rank_.stage) * kRankSlot;
  rank_slot_put(std::span<double>(all).subspan(at, kRankSlot), feedback_->fit().coefficients(),
                step_fit_ ? step_fit_->action_gap() : 0.0, step_fit_ ? step_fit_->tail() : 0.0);
  if (collectives_.pipeline_sum)
    collectives_.pipeline_sum(all, fmt::format("the ranks' cost terms of iteration {}", iteration));
  std::vector<cost::Coefficients> out;
  for (size_t r = 0; r < pp; ++r)
    out.push_back(rank_slot_get(std::span<const double>(all).subspan(r * kRankSlot, kRankSlot),
                                pooled_.coeffs));
  return out;
}

// Every rank learns every replica's pooled fit and ranks' terms: each replica's first stage
// fills its slot of one summed vector (with dp 1 every rank knows its pipeline's already).
void CostLoop::replica_fits_gather(int64_t iteration) {
  const size_t pp = static_cast<size_t>(rank_.pp);
  const size_t dp = static_cast<size_t>(rank_.dp);
  const size_t per_replica = (pp + 1) * kRankSlot;  // the pooled fit, then each pipeline rank's
  std::vector<double> all(dp * per_replica, 0.0);
  if (dp == 1 || rank_.stage == 0) {
    const std::span<double> mine = std::span<double>(all).subspan(
        static_cast<size_t>(rank_.replica) * per_replica, per_replica);
    rank_slot_put(mine.first(kRankSlot), pooled_.coeffs, pooled_.residual_forward,
                  pooled_.residual_backward);
    const std::vector<cost::Coefficients>& ranks = next_.rank_coefficients();
    for (size_t r = 0; r < pp; ++r)
      rank_slot_put(mine.subspan((r + 1) * kRankSlot, kRankSlot), ranks[r], ranks[r].action_gap_s,
                    ranks[r].step_tail_s);
  }
  if (dp > 1 && collectives_.world_sum)
    collectives_.world_sum(all, fmt::format("the replicas' cost fits of iteration {}", iteration));
  replica_fits_.assign(dp, {});
  for (size_t d = 0; d < dp; ++d) {
    const std::span<const double> rep =
        std::span<const double>(all).subspan(d * per_replica, per_replica);
    ReplicaFit& f = replica_fits_[d];
    // The pooled slot holds the residuals where a rank's holds its step costs.
    f.pooled.coeffs = prior_.coefficients();
    cost::online_terms_set(rep.first(cost::kNumOnlineTerms), f.pooled.coeffs);
    f.pooled.residual_forward = rep[cost::kNumOnlineTerms];
    f.pooled.residual_backward = rep[cost::kNumOnlineTerms + 1];
    for (size_t r = 0; r < pp; ++r)
      f.ranks.push_back(
          rank_slot_get(rep.subspan((r + 1) * kRankSlot, kRankSlot), f.pooled.coeffs));
  }
}

std::optional<cost::Calibration> CostLoop::calibration() const {
  if (!feedback_) return std::nullopt;
  const cost::OnlineFit& fit = feedback_->fit();
  const std::string notes = fmt::format(
      "infinipipe train --cost-model-update online: time terms refitted from the actions the "
      "ranks measured ({} on this rank), starting from {}; links and memory as the prior{}",
      fit.num_samples(false) + fit.num_samples(true), prior_source_,
      replica_fits_.empty() ? ""
                            : "; coefficients: the mean of the replicas' pooled fits; ranks: "
                              "each rank's own terms and step costs");
  if (replica_fits_.empty())
    return cost::online_calibration(prior_, pooled_, profile::machine_name(), profile::utc_now(),
                                    notes);
  cost::OnlinePooled mean;
  mean.coeffs = prior_.coefficients();
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
      cost::online_calibration(prior_, mean, profile::machine_name(), profile::utc_now(), notes);
  cal.pipeline_parallel = rank_.pp;
  cal.data_parallel = rank_.dp;
  for (size_t s = 0; s < static_cast<size_t>(cal.pipeline_parallel); ++s)
    for (size_t d = 0; d < replica_fits_.size(); ++d)
      cal.ranks.push_back(
          {static_cast<int64_t>(s), static_cast<int64_t>(d), replica_fits_[d].ranks[s]});
  return cal;
}

}  // namespace infinipipe::runtime
