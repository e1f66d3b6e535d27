// The cost loop's state in checkpoints: each rank's recursion, its pipeline's pooled and per-rank
// terms, and the terms the background planner had planned the next batch with, so a run resumed
// from iteration N plans iterations N+1 and N+2 exactly as the uninterrupted run did
// (docs/checkpoints.md, "The online cost fit").
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_read.h"
#include "cost/online_fit_state.h"
#include "runtime/cost_loop.h"

namespace infinipipe::runtime {

using Json = nlohmann::json;

namespace {

constexpr const char* kCostFitFormat = "infinipipe-cost-fit";
constexpr int64_t kCostFitVersion = 1;

std::string cost_fit_file_name(int64_t writer) {
  return fmt::format("cost-fit-rank{:05d}.json", writer);
}

// A planning cost model's time terms: the shared ones and each pipeline rank's own.
Json cost_model_terms_json(const cost::CostModel& cm) {
  Json ranks = Json::array(), steps = Json::array();
  for (const cost::Coefficients& c : cm.rank_coefficients()) {
    ranks.push_back(cost::online_terms_get(c));
    steps.push_back({c.action_gap_s, c.step_tail_s});
  }
  return {{"terms", cost::online_terms_get(cm.coefficients())},
          {"rank_terms", ranks},
          {"rank_step_terms", steps}};
}

// The step-cost fit's state: gap Σ and weight, tail Σ and weight (zeros without one).
Json step_costs_json(const std::optional<cost::StepCostFit>& fit) {
  const cost::StepCostState s = fit ? fit->state() : cost::StepCostState{};
  return {s.weighted[0], s.weight[0], s.weighted[1], s.weight[1]};
}

// The entry of (replica, stage) among the writers' cost-fit files; null when the checkpoint has
// none for it (saved before fit state was kept, with the fit off, or by another layout).
Json cost_fit_entry_find(CheckpointReader& reader, const CostLoopRank& rank) {
  for (int64_t w = 0; w < reader.num_ranks(); ++w) {
    const std::string name = cost_fit_file_name(w);
    if (!reader.has_file(name)) continue;
    const std::string where = reader.path() + "/" + name;
    const Json file = json_parse(reader.read_file(name), where, "the checkpoint is damaged");
    if (json_string(json_field(file, "format", where), where + ": format") != kCostFitFormat ||
        json_int(json_field(file, "version", where), where + ": version") != kCostFitVersion)
      fail("{}: not an infinipipe cost-fit file of version {}", where, kCostFitVersion);
    if (json_int(json_field(file, "pipeline_parallel", where), where) != rank.pp ||
        json_int(json_field(file, "data_parallel", where), where) != rank.dp)
      return nullptr;
    const Json& entries = json_field(file, "ranks", where);
    if (!entries.is_array()) fail("{}: ranks must be an array", where);
    for (const Json& e : entries) {
      if (json_int(json_field(e, "replica", where), where + ": replica") == rank.replica &&
          json_int(json_field(e, "stage", where), where + ": stage") == rank.stage)
        return e;
    }
  }
  return nullptr;
}

}  // namespace

// The prior with the saved terms, built as observe() builds the next plans' model.
cost::CostModel CostLoop::cost_model_from_json(const Json& j, const std::string& where) const {
  std::array<double, cost::kNumOnlineTerms> terms{};
  cost::json_terms_read(json_field(j, "terms", where), where + ".terms", terms);
  cost::Coefficients shared = prior_.coefficients();
  cost::online_terms_set(terms, shared);
  cost::CostModel out = prior_.with_coefficients(shared).with_rank_hosts(prior_.rank_hosts());
  const Json& ranks = json_field(j, "rank_terms", where);
  const size_t pp = rank_.distributed ? static_cast<size_t>(rank_.pp) : 0;
  if (!ranks.is_array() || ranks.size() != (ranks.empty() ? 0 : pp))
    fail("{}.rank_terms must hold none or one entry per pipeline rank ({})", where, pp);
  if (ranks.empty()) return out;
  // Each rank's step costs (action gap, tail); absent in checkpoints saved before they were fitted.
  const Json* steps = j.contains("rank_step_terms") ? &j.at("rank_step_terms") : nullptr;
  if (steps && (!steps->is_array() || steps->size() != ranks.size()))
    fail("{}.rank_step_terms must hold one entry per pipeline rank ({})", where, pp);
  std::vector<cost::Coefficients> per_rank;
  for (size_t r = 0; r < ranks.size(); ++r) {
    cost::json_terms_read(ranks[r], fmt::format("{}.rank_terms[{}]", where, r), terms);
    cost::Coefficients c = shared;
    cost::online_terms_set(terms, c);
    if (steps) {
      std::array<double, 2> step{};
      // Seconds per action gap and per step tail: an hour bounds either on any machine.
      cost::json_numbers_read((*steps)[r], fmt::format("{}.rank_step_terms[{}]", where, r), step,
                              3600.0);
      c.action_gap_s = step[0];
      c.step_tail_s = step[1];
    }
    per_rank.push_back(c);
  }
  return out.with_rank_coefficients(std::move(per_rank));
}

Json CostLoop::state_entry() const {
  const cost::LengthRange& seen = feedback_->lengths_seen().seen();
  return {{"replica", rank_.replica},
          {"stage", rank_.stage},
          {"fit", cost::online_fit_state_to_json(feedback_->fit().state())},
          {"pooled",
           {{"terms", cost::online_terms_get(pooled_.coeffs)},
            {"residual_forward", pooled_.residual_forward},
            {"residual_backward", pooled_.residual_backward}}},
          {"seen_lengths", {{"max", seen.max}, {"p90", seen.p90}}},
          {"step_costs", step_costs_json(step_fit_)},
          {"next_plans", cost_model_terms_json(next_)},
          {"next_batch_plan", cost_model_terms_json(next_before_refit_)}};
}

// With data parallelism and replica 0 the only writer, each stage's replicas send it their
// entries (one gather over the stage's replicas); otherwise each writer saves its own.
void CostLoop::save(CheckpointShard& shard, bool every_replica_writes, int64_t iteration) const {
  if (!feedback_) return;
  Json entries = Json::array({state_entry()});
  if (rank_.distributed && !every_replica_writes && rank_.dp > 1) {
    const std::vector<std::string> all = collectives_.replicas_gather(
        entries[0].dump(),
        fmt::format("the cost fits' gather for the checkpoint of iteration {}", iteration));
    if (rank_.replica != 0) return;
    entries = Json::array();
    for (const std::string& text : all) entries.push_back(Json::parse(text));
  }
  const Json file = {{"format", kCostFitFormat},
                     {"version", kCostFitVersion},
                     {"pipeline_parallel", rank_.pp},
                     {"data_parallel", rank_.dp},
                     {"ranks", entries}};
  shard.small_files[cost_fit_file_name(shard.rank)] = file.dump(1) + "\n";
}

void CostLoop::load(CheckpointReader& reader) {
  if (!feedback_) return;
  const Json e = cost_fit_entry_find(reader, rank_);
  if (e.is_null()) {
    resume_note_ =
        "the checkpoint holds no online cost fit for this layout: the fit starts from the "
        "calibration";
    return;
  }
  const std::string where = reader.path() + ": the cost fit of this rank";
  cost::OnlineFit& fit = feedback_->fit();
  fit.restore(cost::online_fit_state_from_json(json_field(e, "fit", where), where + ".fit"), where);
  const Json& pooled = json_field(e, "pooled", where);
  std::array<double, cost::kNumOnlineTerms> terms{};
  cost::json_terms_read(json_field(pooled, "terms", where), where + ".pooled.terms", terms);
  pooled_.coeffs = prior_.coefficients();
  cost::online_terms_set(terms, pooled_.coeffs);
  pooled_.residual_forward = json_number(json_field(pooled, "residual_forward", where), where, 0);
  pooled_.residual_backward = json_number(json_field(pooled, "residual_backward", where), where, 0);
  const Json& seen = json_field(e, "seen_lengths", where);
  feedback_->lengths_seen().restore(
      {json_int(json_field(seen, "max", where), where + ".seen_lengths.max", 0),
       json_int(json_field(seen, "p90", where), where + ".seen_lengths.p90", 0)});
  if (step_fit_ && e.contains("step_costs")) {
    std::array<double, 4> v{};  // gap Σ, its weight, tail Σ, its weight
    // Forgetting-weighted sums; restore() checks that they make sane means.
    cost::json_numbers_read(e.at("step_costs"), where + ".step_costs", v, 1e15);
    step_fit_->restore({{v[0], v[2]}, {v[1], v[3]}}, where + ".step_costs");
  }
  next_ = cost_model_from_json(json_field(e, "next_plans", where), where + ".next_plans");
  next_before_refit_ = next_;
  resumed_plan_ =
      cost_model_from_json(json_field(e, "next_batch_plan", where), where + ".next_batch_plan");
  resume_note_ = fmt::format(
      "resumed the online cost fit ({} actions measured on this rank before the checkpoint)",
      fit.num_samples(false) + fit.num_samples(true));
}

}  // namespace infinipipe::runtime
