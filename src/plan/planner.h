// The planner: from the lengths of one global batch (one dp replica) to a validated Plan with
// its predictions filled, for any schedule. EPP searches the slice count K of the longest
// sequence; every baseline is tuned to its own best feasible setting (micro-batch capacity,
// slice count, static recompute), so comparisons between schedules are honest.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "cost/cost_model.h"
#include "plan/plan.h"
#include "plan/plan_explain.h"

namespace infinipipe::plan {

// The setting a plan was made with (what `simulate --compare` prints).
struct PlanKnobs {
  int64_t micro_batch_tokens = 0;  // batch-level / seq1f1b capacity of a micro-batch (0 = n/a)
  int64_t micro_batch_size = 0;    // sequences per micro-batch when packed by count (0: by tokens)
  int32_t slices = 0;              // seq1f1b: slices per micro-batch; epp: K of the longest seq
  int32_t vpp = 1;
  int32_t pipelines = 1;          // epp: consecutive 1F1B pipelines
  int32_t recompute_layers = -1;  // static count on every (stage, chunk); -1 = adaptive
  double recompute_time = 0;      // adaptive: objective of the recompute solve, seconds
  double recompute_gap = 0;       // adaptive: proven relative gap of that solve
  int32_t candidates = 0;         // settings evaluated
  bool uniform_slicing = false;   // epp: slices of equal tokens (ablation), else of equal cost
  std::string describe() const;   // "K=4, 2 pipelines, adaptive recompute" etc.
};

struct PlanResult {
  PlanResult() = default;
  PlanResult(Plan p, PlanKnobs k, PlanExplain e = {})
      : plan(std::move(p)), knobs(k), explain(std::move(e)) {}

  Plan plan;
  PlanKnobs knobs;
  // The search's candidates (epp); explain_chosen_plan adds the chosen plan's cuts, packs and
  // recompute on request (it rebuilds the recompute tables, which each training step need not).
  PlanExplain explain;
};

// Memory budget per rank: cfg.training.memory_budget, else the device's memory.
int64_t planner_budget(const Config& cfg, const cost::CostModel& cm);

// The schedule in cfg.parallel.schedule (knobs left at 0 in cfg are tuned). Returns a plan that
// passed validate() with every prediction filled. Throws BudgetError (budget_error.h) when no
// setting fits the budget, carrying the smallest budget that would under cfg's recompute setting
// and the rank that binds.
Plan make_plan(const Config& cfg, const cost::CostModel& cm, std::span<const int64_t> seq_lengths);
// `threads`: how many of EPP's candidates are evaluated side by side (0 = every core); the plan
// is the same for any count.
PlanResult make_plan_detailed(const Config& cfg, const cost::CostModel& cm,
                              std::span<const int64_t> seq_lengths, Schedule schedule,
                              int32_t threads = 1);

// One schedule each; fixed knobs in cfg are honoured, the rest searched.
PlanResult plan_epp(const Config& cfg, const cost::CostModel& cm, std::span<const int64_t> lengths,
                    int32_t threads = 1);
PlanResult tune_batch_level(const Config& cfg, const cost::CostModel& cm,
                            std::span<const int64_t> lengths, Schedule schedule);
PlanResult tune_seq1f1b(const Config& cfg, const cost::CostModel& cm,
                        std::span<const int64_t> lengths);

// Whole sequences into micro-batches of at most `capacity` tokens (Best-Fit-Decreasing by
// tokens; a longer sequence is an error since batch-level schedules cannot cut it).
std::vector<Chunk> pack_micro_batches(std::span<const int64_t> lengths, int64_t capacity);
// Seq1F1B: each micro-batch cut into `slices` pieces of equal cost along its tokens (cuts fall
// inside sequences); pieces that would mix a tail and a head are split at the sequence border.
std::vector<Chunk> seq1f1b_chunks(std::span<const int64_t> lengths, int64_t capacity,
                                  int32_t slices, const cost::CostModel& cm,
                                  const cost::StageShape& stage);
// Eq. 14: groups the EPP chunk list into consecutive 1F1B pipelines (cuts only between
// sequences) minimising the estimated total time subject to the memory estimate of each group.
// Returns pipeline_of_chunk, or empty when even the finest grouping does not fit.
std::vector<int32_t> epp_group_pipelines(const std::vector<Chunk>& chunks, int32_t pp,
                                         const cost::CostModel& cm, const cost::StageShape& stage,
                                         int64_t activation_budget);

// Data parallelism: splits the global batch over dp replicas so their predicted costs balance
// (longest-processing-time first, by ReplicaSplitCost of cfg's pipeline and budget). Result[r]
// holds replica r's lengths, costliest first. Defined in replica_balance.cc.
std::vector<std::vector<int64_t>> balance_replicas(std::span<const int64_t> lengths, int64_t dp,
                                                   const cost::CostModel& cm, const Config& cfg);

}  // namespace infinipipe::plan
