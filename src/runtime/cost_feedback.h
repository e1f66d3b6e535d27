// The online cost loop of one rank (`--cost-model-update online`, docs/cost-model.md, "Online
// refit"), without communication: the rank observes the actions it ran with their measured
// times, the ranks of a pipeline sum their shares (the caller's collective: MPI in the C++
// trainer, torch.distributed in the PyTorch executor), and every rank pools the sum into the
// same cost model for the pipeline's next plans.
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string>

#include "core/config.h"
#include "cost/cost_model.h"
#include "cost/length_shift.h"
#include "cost/online_fit.h"
#include "obs/step_stats.h"
#include "plan/plan.h"

namespace infinipipe::runtime {

class CostFeedback {
 public:
  using Share = std::array<double, cost::kOnlineShareSize>;

  // `prior`: the cost model before any measurement (a preset or a calibration), which pooling
  // and the next cost models start from. The fit starts from this rank's `own` time terms when
  // given (a calibration's per-rank terms, calibration_ranks.h), else from the prior's.
  explicit CostFeedback(const cost::CostModel& prior,
                        const std::optional<cost::Coefficients>& own = std::nullopt);

  // This rank's actions of `plan` (planned with `plan_cost`; `cfg` the run's), each measured
  // over [start_s, end_s]. Where the plan's ranks share cores, an interval is scaled to a core
  // of its own by the plan's replay (fit_sample.h). Returns a sentence when the batch went beyond
  // the lengths fitted so far (the fit then weighs the new shapes as it did its first), else "".
  std::string observe(const plan::Plan& plan, const cost::CostModel& plan_cost, const Config& cfg,
                      std::span<const obs::ActionTiming> timings);

  // What this rank adds to its pipeline's pool.
  Share share() const { return cost::online_fit_share(fit_); }
  // The pipeline's pooled fit from the sum of its ranks' shares.
  cost::OnlinePooled pool(const Share& summed) const;
  // The cost model the next plans are made with: the prior's model, device and memory terms with
  // the pooled time terms.
  cost::CostModel next_cost_model(const cost::OnlinePooled& pooled) const;

  // The links the next cost models time the pipeline's hops by (measured again while training).
  void links_set(const cost::PipelineLinks& links) { prior_ = prior_.with_pipeline_links(links); }

  cost::OnlineFit& fit() { return fit_; }
  const cost::OnlineFit& fit() const { return fit_; }
  cost::LengthShiftDetector& lengths_seen() { return length_shift_; }
  const cost::LengthShiftDetector& lengths_seen() const { return length_shift_; }
  const cost::CostModel& prior() const { return prior_; }

 private:
  cost::CostModel prior_;
  cost::OnlineFit fit_;
  cost::LengthShiftDetector length_shift_;
};

}  // namespace infinipipe::runtime
