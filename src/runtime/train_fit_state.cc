// The online fit's state in checkpoints: each rank's recursion, its pipeline's pooled and
// per-rank terms, and the terms the background planner had planned the next batch with, so a
// run resumed from iteration N plans iterations N+1 and N+2 exactly as the uninterrupted run
// did (docs/checkpoints.md, "The online cost fit").
#include <numeric>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "comm/mpi_comm.h"
#include "core/error.h"
#include "core/json_read.h"
#include "cost/online_fit_state.h"
#include "runtime/train.h"

namespace infinipipe::runtime {

using Json = nlohmann::json;

namespace {

constexpr const char* kFitFormat = "infinipipe-cost-fit";
constexpr int64_t kFitVersion = 1;

std::string fit_file_name(int64_t writer) {
  return fmt::format("cost-fit-rank{:05d}.json", writer);
}

// A planning cost model's time terms: the shared ones and each pipeline rank's own.
Json plan_terms_to_json(const cost::CostModel& cm) {
  Json ranks = Json::array(), steps = Json::array();
  for (const cost::Coefficients& c : cm.rank_coefficients()) {
    ranks.push_back(cost::online_terms_get(c));
    steps.push_back({c.action_gap_s, c.step_tail_s});
  }
  return {{"terms", cost::online_terms_get(cm.coefficients())},
          {"rank_terms", ranks},
          {"rank_step_terms", steps}};
}

}  // namespace

// The prior with the saved terms, built as cost_model_update builds plan_cm_.
cost::CostModel Trainer::plan_terms_from_json(const Json& j, const std::string& where) const {
  std::array<double, cost::kNumOnlineTerms> terms{};
  cost::json_terms_read(json_field(j, "terms", where), where + ".terms", terms);
  cost::Coefficients shared = cm_.coefficients();
  cost::online_terms_set(terms, shared);
  cost::CostModel out =
      cost::CostModel(cm_.model(), cm_.device(), shared, cm_.ulysses_degree(), cm_.bf16())
          .with_rank_hosts(cm_.rank_hosts());
  const Json& ranks = json_field(j, "rank_terms", where);
  const size_t pp = groups_ ? static_cast<size_t>(cfg_.parallel.pipeline_parallel) : 0;
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

// The step-cost fit's state: gap Σ and weight, tail Σ and weight (zeros without one).
Json Trainer::step_costs_json() const {
  const cost::StepCostState s = step_fit_ ? step_fit_->state() : cost::StepCostState{};
  return {s.weighted[0], s.weight[0], s.weighted[1], s.weight[1]};
}

Json Trainer::fit_state_entry() const {
  const RankLayout* l = groups_ ? &groups_->layout() : nullptr;
  return {{"replica", l ? l->replica : 0},
          {"stage", l ? l->stage : 0},
          {"fit", cost::online_fit_state_to_json(fit_->state())},
          {"pooled",
           {{"terms", cost::online_terms_get(pooled_.coeffs)},
            {"residual_forward", pooled_.residual_forward},
            {"residual_backward", pooled_.residual_backward}}},
          {"seen_lengths", {{"max", length_shift_.seen().max}, {"p90", length_shift_.seen().p90}}},
          {"step_costs", step_costs_json()},
          {"next_plans", plan_terms_to_json(plan_cm_)},
          {"next_batch_plan", plan_terms_to_json(plan_cm_before_refit_)}};
}

// With data parallelism and replica 0 the only writer, each stage's replicas send it their
// entries (one gather over the stage's dp group); otherwise each writer saves its own.
std::string Trainer::fit_state_file() const {
  Json entries = Json::array({fit_state_entry()});
  if (groups_ && !dist_optimizer_ && groups_->layout().dp > 1) {
    entries = fit_state_gather(entries[0].dump());
    if (groups_->layout().replica != 0) return "";
  }
  const Json file = {{"format", kFitFormat},
                     {"version", kFitVersion},
                     {"pipeline_parallel", cfg_.parallel.pipeline_parallel},
                     {"data_parallel", cfg_.parallel.data_parallel},
                     {"ranks", entries}};
  return file.dump(1) + "\n";
}

Json Trainer::fit_state_gather(const std::string& mine) const {
  const MPI_Comm dp = groups_->dp_comm();
  const int n = static_cast<int>(groups_->layout().dp);
  const bool root = groups_->layout().replica == 0;
  const WaitContext ctx{
      fmt::format("the cost fits' gather for the checkpoint of iteration {}", iteration_),
      "a replica of this stage may have died or hung", comm_peers(dp)};
  int size = mpi_count(static_cast<int64_t>(mine.size()), "a cost fit's state");
  std::vector<int> sizes(root ? n : 0);
  MPI_Request req = MPI_REQUEST_NULL;
  mpi_check(MPI_Igather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, dp, &req), ctx.what);
  mpi_wait_deadline({&req, 1}, {}, p2p_->timeout_s(), ctx);
  std::vector<int> offsets(sizes.size(), 0);
  if (root) std::exclusive_scan(sizes.begin(), sizes.end(), offsets.begin(), 0);
  std::string all(root ? static_cast<size_t>(offsets.back() + sizes.back()) : 0, '\0');
  mpi_check(MPI_Igatherv(mine.data(), size, MPI_CHAR, all.data(), sizes.data(), offsets.data(),
                         MPI_CHAR, 0, dp, &req),
            ctx.what);
  mpi_wait_deadline({&req, 1}, {}, p2p_->timeout_s(), ctx);
  Json out = Json::array();
  for (size_t r = 0; r < sizes.size(); ++r)
    out.push_back(
        Json::parse(all.substr(static_cast<size_t>(offsets[r]), static_cast<size_t>(sizes[r]))));
  return out;
}

void Trainer::fit_state_save(CheckpointShard& shard) const {
  if (!fit_) return;
  std::string text = fit_state_file();
  if (!text.empty()) shard.small_files[fit_file_name(shard.rank)] = std::move(text);
}

// This rank's entry among the writers' cost-fit files; null when the checkpoint has none for
// it (saved before fit state was kept, with the fit off, or by another layout).
Json Trainer::fit_state_find(CheckpointReader& reader) const {
  const int64_t replica = groups_ ? groups_->layout().replica : 0;
  const int64_t stage = groups_ ? groups_->layout().stage : 0;
  for (int64_t w = 0; w < reader.num_ranks(); ++w) {
    const std::string name = fit_file_name(w);
    if (!reader.has_file(name)) continue;
    const std::string where = reader.path() + "/" + name;
    const Json file = json_parse(reader.read_file(name), where, "the checkpoint is damaged");
    if (json_string(json_field(file, "format", where), where + ": format") != kFitFormat ||
        json_int(json_field(file, "version", where), where + ": version") != kFitVersion)
      fail("{}: not an infinipipe cost-fit file of version {}", where, kFitVersion);
    if (json_int(json_field(file, "pipeline_parallel", where), where) !=
            cfg_.parallel.pipeline_parallel ||
        json_int(json_field(file, "data_parallel", where), where) != cfg_.parallel.data_parallel)
      return nullptr;
    const Json& entries = json_field(file, "ranks", where);
    if (!entries.is_array()) fail("{}: ranks must be an array", where);
    for (const Json& e : entries) {
      if (json_int(json_field(e, "replica", where), where + ": replica") == replica &&
          json_int(json_field(e, "stage", where), where + ": stage") == stage)
        return e;
    }
  }
  return nullptr;
}

void Trainer::fit_state_load(CheckpointReader& reader) {
  if (!fit_) return;
  const Json e = fit_state_find(reader);
  if (e.is_null()) {
    fit_resume_note_ =
        "the checkpoint holds no online cost fit for this layout: the fit starts from the "
        "calibration";
    return;
  }
  const std::string where = reader.path() + ": the cost fit of this rank";
  fit_->restore(cost::online_fit_state_from_json(json_field(e, "fit", where), where + ".fit"),
                where);
  const Json& pooled = json_field(e, "pooled", where);
  std::array<double, cost::kNumOnlineTerms> terms{};
  cost::json_terms_read(json_field(pooled, "terms", where), where + ".pooled.terms", terms);
  pooled_.coeffs = cm_.coefficients();
  cost::online_terms_set(terms, pooled_.coeffs);
  pooled_.residual_forward = json_number(json_field(pooled, "residual_forward", where), where, 0);
  pooled_.residual_backward = json_number(json_field(pooled, "residual_backward", where), where, 0);
  const Json& seen = json_field(e, "seen_lengths", where);
  length_shift_.restore({json_int(json_field(seen, "max", where), where + ".seen_lengths.max", 0),
                         json_int(json_field(seen, "p90", where), where + ".seen_lengths.p90", 0)});
  if (step_fit_ && e.contains("step_costs")) {
    std::array<double, 4> v{};  // gap Σ, its weight, tail Σ, its weight
    // Forgetting-weighted sums; restore() checks that they make sane means.
    cost::json_numbers_read(e.at("step_costs"), where + ".step_costs", v, 1e15);
    step_fit_->restore({{v[0], v[2]}, {v[1], v[3]}}, where + ".step_costs");
  }
  plan_cm_ = plan_terms_from_json(json_field(e, "next_plans", where), where + ".next_plans");
  plan_cm_before_refit_ = plan_cm_;
  first_plan_cm_ =
      plan_terms_from_json(json_field(e, "next_batch_plan", where), where + ".next_batch_plan");
  fit_resume_note_ = fmt::format(
      "resumed the online cost fit ({} actions measured on this rank before the checkpoint)",
      fit_->num_samples(false) + fit_->num_samples(true));
}

}  // namespace infinipipe::runtime
