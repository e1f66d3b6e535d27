// The online cost loop of one training rank (`--cost-model-update online`, docs/cost-model.md,
// "Online refit"), as one object: every iteration it observes the actions this rank ran with
// their measured times and its costs outside them, pools the pipeline's fits through the sums it
// is given (MPI in the Trainer, plain sums in tests), and hands out the cost model the next plans
// are made with. It keeps the run's cost models (the prior, the next plans', the one the
// background planner planned the next batch with) and the calibration the run leaves, and saves
// and restores its state with checkpoints (cost_loop_state.cc). With the update off it is the
// prior, and the per-rank terms of a calibration that has them.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "core/config.h"
#include "cost/calibration.h"
#include "cost/cost_model.h"
#include "cost/online_fit.h"
#include "cost/online_fit_step.h"
#include "obs/step_stats.h"
#include "plan/plan.h"
#include "runtime/cost_feedback.h"

namespace infinipipe::runtime {

// Where the rank runs: one of the pp ranks of a pipeline, one of dp replicas (the run's degrees;
// in one process every stage is this rank's, and stage and replica are 0).
struct CostLoopRank {
  bool distributed = false;
  int64_t pp = 1, dp = 1;
  int64_t stage = 0, replica = 0;
};

// The collectives of a distributed loop (unset in one process). The sums add `values` element by
// element over their ranks, in place; `what` names the reduction in deadline messages.
using CostLoopSum = std::function<void(std::span<double> values, const std::string& what)>;
struct CostLoopCollectives {
  CostLoopSum pipeline_sum;  // over this rank's pipeline
  CostLoopSum world_sum;     // over every rank: the replicas' fits
  // Every replica's `mine` on replica 0 of this stage, in replica order; empty on the others.
  std::function<std::vector<std::string>(const std::string& mine, const std::string& what)>
      replicas_gather;
};

class CostLoop {
 public:
  // `prior`: the run's cost model before any measurement (a preset or cfg's calibration, with
  // the ranks' hosts). Distributed with a calibration that holds per-rank terms
  // (calibration_ranks.h), the next plans time each rank with them and this rank's fit starts
  // from its own. ConfigError from a calibration that cannot be read.
  CostLoop(const Config& cfg, const cost::CostModel& prior, const CostLoopRank& rank,
           CostLoopCollectives collectives = {});

  bool online() const { return feedback_.has_value(); }
  const cost::CostModel& prior() const { return prior_; }
  // What the next plans are made with (after the last refit; per-rank terms from the
  // calibration before the first).
  const cost::CostModel& next_plan_cost_model() const { return next_; }
  // What to plan a batch with now, when the background planner did not plan it: once after a
  // resume, the model the uninterrupted run's background planner used; else the next plans'.
  cost::CostModel plan_now_cost_model();
  // The cost model a plan made with time `terms` runs with: the prior with those terms, and the
  // plan's own ranks (plan::plan_cost_model). Every rank of a pipeline computes the same.
  cost::CostModel plan_cost_model(std::span<const double> terms, const plan::Plan& plan) const;

  // One iteration, in the order the step runs them:
  // (1) this rank's executed `stats` (one, distributed): the gaps before its actions;
  void actions_measured(std::span<const obs::StepStats> stats);
  // (2) seconds of this rank's own work after its last action (the exposed all-reduce, the fit,
  // clip and optimizer), as each runs; the waits for other ranks stay out;
  void tail_add(double seconds);
  // (3) the actions of `plan` (planned with `plan_cost`, the run's `cfg`) into this rank's fit,
  // the pipeline's fits pooled: returns next_plan_cost_model(), refitted;
  const cost::CostModel& observe(const plan::Plan& plan, const cost::CostModel& plan_cost,
                                 const Config& cfg, std::span<const obs::StepStats> stats,
                                 int64_t iteration);
  // (4) after the optimizer: the iteration's step costs into their fit.
  void step_end();
  // The links measured again (runtime/link_watch.h): the prior and every cost model the next
  // plans are made with time this rank's pipeline's hops (its replica of `grid`) by `table` from
  // now on. Every rank calls it after the same iteration.
  void links_set(const cost::HostLinkTable& table, const cost::RankGrid& grid);

  // What the run learned so far, as a calibration file (docs/cost-model.md, "Online refit"):
  // distributed, the mean of the replicas' pooled terms and every rank's own terms
  // (Calibration::ranks); nullopt when off.
  std::optional<cost::Calibration> calibration() const;
  // After a resume with the fit on: whether it continued from the checkpoint's state or starts
  // from the calibration (one line for the log); empty otherwise.
  const std::string& resume_note() const { return resume_note_; }
  // A sentence when the last observed batch went beyond the lengths the fit had seen (and the fit
  // was widened for it), empty otherwise.
  const std::string& length_shift_note() const { return length_shift_note_; }

  // The fit's state into `shard` (a cost-fit file; docs/checkpoints.md, "The online cost fit"):
  // collective on every rank. Unless `every_replica_writes`, the replicas of a stage gather their
  // states to replica 0, the shard's writer. Nothing when off.
  void save(CheckpointShard& shard, bool every_replica_writes, int64_t iteration) const;
  // This rank's state from the checkpoint, when it holds one for this layout (resume_note()
  // says which); Error for a damaged or hostile file.
  void load(CheckpointReader& reader);

 private:
  using Clock = std::chrono::steady_clock;
  // Every replica's pooled fit and its pipeline ranks' own coefficients, what calibration.json
  // keeps (distributed).
  struct ReplicaFit {
    cost::OnlinePooled pooled;
    std::vector<cost::Coefficients> ranks;  // by pipeline rank
  };
  std::vector<cost::Coefficients> rank_coefficients_gather(int64_t iteration) const;
  void replica_fits_gather(int64_t iteration);
  nlohmann::json state_entry() const;
  cost::CostModel cost_model_from_json(const nlohmann::json& j, const std::string& where) const;

  cost::CostModel prior_;
  CostLoopRank rank_;
  CostLoopCollectives collectives_;
  std::string prior_source_;  // "the 'cpu' preset" or the calibration's path, for the notes
  cost::CostModel next_;
  // next_ before the last refit: what the background planner planned the next batch with.
  cost::CostModel next_before_refit_;
  // Resumed with the fit's state: the next batch's plan is made with these terms, as the
  // uninterrupted run's background planner made it.
  std::optional<cost::CostModel> resumed_plan_;
  std::optional<CostFeedback> feedback_;  // this rank's fit and the lengths it has seen
  // Distributed and online: this rank's costs outside its actions, and what this iteration
  // measured of them so far (the tail is complete after the optimizer step).
  std::optional<cost::StepCostFit> step_fit_;
  cost::StepCostSample step_sample_;
  cost::OnlinePooled pooled_;  // the pipeline's pooled fit after the last iteration
  std::vector<ReplicaFit> replica_fits_;
  std::string resume_note_;
  std::string length_shift_note_;
};

}  // namespace infinipipe::runtime
