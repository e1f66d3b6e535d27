// The Trainer's online refit of the cost model (--cost-model-update online): after every
// iteration each rank feeds the actions it ran into its fit, a pipeline's ranks pool their fits
// (one all-reduce), and the next plans of that pipeline are made with the pooled coefficients.
// The stage layout and the data-parallel split keep the prior: every rank computes them alike.
#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "comm/mpi_allreduce.h"
#include "obs/profile.h"
#include "plan/schedule_memory.h"
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
  for (const obs::StepStats& stats : last_stats_) {
    for (const obs::ActionTiming& t : stats.timings) {
      const plan::Action& a = t.action;
      cost::ActionSample s;
      s.chunk = last_plan_.chunks[static_cast<size_t>(a.chunk)].shapes();
      s.stage = plan::stage_shape(last_plan_.stages[static_cast<size_t>(a.stage)]);
      s.backward = a.kind == plan::ActionKind::backward;
      s.recompute_layers = s.backward ? a.recompute_layers : 0;
      s.seconds = t.end_s - t.start_s;
      // An action shorter than the clock's resolution tells nothing about the coefficients.
      if (s.seconds > 0) fit_->update(s);
    }
  }
  std::array<double, cost::kOnlineShareSize> share = cost::online_fit_share(*fit_);
  if (groups_) {
    allreduce_sum(groups_->pp_comm(), share, p2p_->timeout_s(),
                  fmt::format("the cost model's refit of iteration {}", iteration));
  }
  pooled_ = cost::online_fit_pool(cm_, share);
  plan_cm_before_refit_ = plan_cm_;
  plan_cm_ =
      cost::CostModel(cm_.model(), cm_.device(), pooled_.coeffs, cm_.ulysses_degree(), cm_.bf16());
  if (groups_) plan_cm_ = plan_cm_.with_rank_coefficients(rank_coefficients_gather(iteration));
}

// Every rank of the pipeline learns each rank's own time terms (its slot of one summed vector),
// so the planner times a rank's stages with what that rank measured: a slow rank gets less work.
std::vector<cost::Coefficients> Trainer::rank_coefficients_gather(int64_t iteration) const {
  const int pp = static_cast<int>(cfg_.parallel.pipeline_parallel);
  const auto mine = cost::online_terms_get(fit_->coefficients());
  std::vector<double> all(static_cast<size_t>(pp) * cost::kNumOnlineTerms, 0.0);
  std::copy(
      mine.begin(), mine.end(),
      all.begin() + static_cast<std::ptrdiff_t>(groups_->layout().stage) * cost::kNumOnlineTerms);
  allreduce_sum(groups_->pp_comm(), std::span<double>(all), p2p_->timeout_s(),
                fmt::format("the ranks' cost terms of iteration {}", iteration));
  std::vector<cost::Coefficients> out;
  for (int r = 0; r < pp; ++r) {
    cost::Coefficients c = pooled_.coeffs;
    cost::online_terms_set(
        std::span<const double>(all).subspan(static_cast<size_t>(r) * cost::kNumOnlineTerms,
                                             cost::kNumOnlineTerms),
        c);
    out.push_back(c);
  }
  return out;
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
