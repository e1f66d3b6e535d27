// Why a plan is what it is: the settings the planner's search evaluated (EPP's K and grouping,
// a baseline tuner's micro-batch, slices, vpp and static recompute counts; with their predicted
// step time, peak memory per rank and the reason each lost), and for the chosen plan how the long
// sequences were cut, how the short ones were packed and which (stage, chunk) recomputes what.
// Collected while the search runs; every number is one the planner computed. `plan --explain`
// prints it and saves it as the plan JSON's optional "explain" object (docs/plan-format.md);
// `train --trace-explain` saves it with the traced plans, and the report shows it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "cost/cost_model.h"
#include "plan/baselines.h"
#include "plan/plan.h"
#include "plan/sequence_processor.h"

namespace infinipipe::plan {

// One setting the search evaluated.
struct ExplainCandidate {
  std::string setting;  // "K=4, Eq. 14 grouping", "mb<=8192 tok, recompute 2 layers" etc.
  int32_t k = 0;        // epp: slices of the longest sequence; seq1f1b: slices per micro-batch
  int64_t micro_batch_tokens = 0;  // token capacity of a micro-batch, EPP's K = 1 packings too
                                   // (0 = n/a)
  int64_t micro_batch_size = 0;    // baselines: sequences per micro-batch (0 = packed by tokens)
  int32_t vpp = 1;
  int32_t recompute_layers = -1;  // static count on every (stage, chunk); -1 = adaptive solve
  int32_t chunks = 0;
  int32_t pipelines = 1;
  double step_time = 0;             // predicted, seconds
  std::vector<int64_t> peak_bytes;  // predicted, per rank
  bool fits = false;
  bool chosen = false;
  std::string verdict;  // "chosen", or why it lost
};

// How one long sequence was cut: the rule and each slice's tokens and cost.
struct ExplainCut {
  int32_t seq = 0;
  int64_t length = 0;
  std::string rule;
  std::vector<int64_t> offsets, lens;
  std::vector<double> times;  // forward + backward seconds of each slice on the reference stage
};

// One chunk holding whole sequences (and at most one tail slice).
struct ExplainPack {
  int32_t chunk = 0;
  int32_t tail_of = -1;       // the sequence whose tail slice opened the chunk, -1 = none
  std::vector<int32_t> seqs;  // whole sequences packed in
  int64_t tokens = 0;
  double time = 0;  // forward + backward seconds on the reference stage
};

// One (stage, chunk) with recompute: what it saves and costs, from the recompute problem's tables.
struct ExplainRecompute {
  int32_t stage = 0, chunk = 0, rank = 0;
  int32_t layers = 0, max_layers = 0;
  int64_t saved_bytes = 0;  // activations held from forward to backward, less than with none
  double time = 0;          // recompute seconds added to the backward
};

struct PlanExplain {
  std::vector<ExplainCandidate> candidates;  // in the order the search evaluated them
  std::vector<std::string> notes;            // settings skipped and why the search stopped
  std::string schedule;                      // of the chosen plan (explain_chosen_plan)
  // The sequence processor's thresholds for the chosen K (has_limits false: whole sequences
  // packed by tokens, or a schedule without the processor).
  bool has_limits = false;
  PackLimits limits;
  int32_t relaxed = 0;    // short sequences placed above T_t
  std::string pack_rule;  // how the chosen plan put whole sequences into chunks
  std::vector<ExplainCut> cuts;
  std::vector<ExplainPack> packs;
  std::vector<ExplainRecompute> recompute;
  double recompute_time = 0;  // the recompute solve's objective, seconds (adaptive only)
};

// Appends an evaluated candidate (its verdict is set by explain_verdicts); the caller may fill
// the returned entry's knob fields.
ExplainCandidate& explain_record(PlanExplain& ex, std::string setting, int32_t k,
                                 const Candidate& c);
// Marks candidate `chosen` and gives every other one its reason: over budget on the rank that
// binds most, else how much slower than the chosen one (or as fast: a tie keeps the first).
void explain_verdicts(PlanExplain& ex, size_t chosen, int64_t budget);
// The end of a search whose winner is candidate `best`: with `exact` (the winner's chunks
// re-solved by the exact recompute solve, fitting) that is recorded as the chosen one.
void explain_search_end(PlanExplain& ex, size_t best, const Candidate* exact, int32_t k,
                        int64_t budget);
// Cuts, packs and recompute of the chosen plan.
void explain_chosen_plan(PlanExplain& ex, const Plan& plan, const Config& cfg,
                         const cost::CostModel& cm);

// The plan JSON's "explain" object (plan_explain_json.cc) and back: Error naming `where` and the
// field for anything explain_to_json does not write (the report reads it from traced runs).
nlohmann::json explain_to_json(const PlanExplain& ex);
PlanExplain explain_from_json(const nlohmann::json& j, const std::string& where);
// What `plan --explain` prints (plan_explain_text.cc).
std::string explain_text(const PlanExplain& ex);

}  // namespace infinipipe::plan
