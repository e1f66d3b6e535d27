// A rank's entry holds exactly what a rank fits for itself while training: the online fit's
// time terms (named as in "coefficients") and its step costs; links and memory stay shared.
#include "cost/calibration_ranks.h"

#include <algorithm>
#include <array>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json_read.h"
#include "cost/online_fit.h"

namespace infinipipe::cost {
namespace {

// Seconds per action gap and per step tail: an hour bounds either on any machine.
constexpr double kStepCostMax = 3600.0;

constexpr const char* kHint = "write it again with `infinipipe train --cost-model-update online`";

}  // namespace

nlohmann::ordered_json calibration_ranks_to_json(const Calibration& cal) {
  if (cal.ranks.empty()) return nullptr;
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  for (const CalibrationRank& r : cal.ranks) {
    nlohmann::ordered_json terms = nlohmann::ordered_json::object();
    const auto values = online_terms_get(r.coeffs);
    for (int t = 0; t < kNumOnlineTerms; ++t)
      terms[online_term_name(OnlineTerm(t))] = values[static_cast<size_t>(t)];
    entries.push_back({{"stage", r.stage},
                       {"replica", r.replica},
                       {"time_terms", terms},
                       {"action_gap_s", r.coeffs.action_gap_s},
                       {"step_tail_s", r.coeffs.step_tail_s}});
  }
  return {{"pipeline_parallel", cal.pipeline_parallel},
          {"data_parallel", cal.data_parallel},
          {"entries", entries}};
}

void calibration_ranks_read(const nlohmann::json& file, const std::string& where,
                            Calibration& cal) {
  cal.ranks.clear();
  cal.pipeline_parallel = cal.data_parallel = 0;
  if (!file.contains("ranks")) return;  // profile's files and those written before ranks
  const nlohmann::json& sec = file.at("ranks");
  const std::string at = fmt::format("calibration {}: ranks", where);
  if (!sec.is_object()) fail("{} must be an object; {}", at, kHint);
  // A world of more ranks than a run could hold is damage, not a layout.
  constexpr int64_t kMaxRanks = 1 << 20;
  cal.pipeline_parallel = json_int(json_field(sec, "pipeline_parallel", at),
                                   at + ".pipeline_parallel", 1, kMaxRanks);
  cal.data_parallel =
      json_int(json_field(sec, "data_parallel", at), at + ".data_parallel", 1, kMaxRanks);
  const int64_t pp = cal.pipeline_parallel, dp = cal.data_parallel;
  const nlohmann::json& entries = json_field(sec, "entries", at);
  if (!entries.is_array() || static_cast<int64_t>(entries.size()) != pp * dp)
    fail("{}.entries must hold one entry per rank of pp {} x dp {} ({}), got {}; {}", at, pp, dp,
         pp * dp, json_brief(entries), kHint);
  std::set<std::pair<int64_t, int64_t>> seen;
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string e_at = fmt::format("{}.entries[{}]", at, i);
    const nlohmann::json& e = entries[i];
    if (!e.is_object()) fail("{} must be an object, got {}", e_at, json_brief(e));
    CalibrationRank r;
    r.stage = json_int(json_field(e, "stage", e_at), e_at + ".stage", 0, pp - 1);
    r.replica = json_int(json_field(e, "replica", e_at), e_at + ".replica", 0, dp - 1);
    if (!seen.insert({r.stage, r.replica}).second)
      fail("{}: stage {} replica {} appears twice; {}", e_at, r.stage, r.replica, kHint);
    const nlohmann::json& terms = json_field(e, "time_terms", e_at);
    std::array<double, kNumOnlineTerms> values{};
    for (int t = 0; t < kNumOnlineTerms; ++t) {
      const char* name = online_term_name(OnlineTerm(t));
      const std::string t_at = fmt::format("{}.time_terms.{}", e_at, name);
      double& v = values[static_cast<size_t>(t)];
      v = json_number(json_field(terms, name, e_at + ".time_terms"), t_at, 0,
                      calibration_coefficient_max(name));
      if (v == 0 && calibration_coefficient_positive(name)) fail("{} must be > 0", t_at);
    }
    r.coeffs = cal.coeffs;
    online_terms_set(values, r.coeffs);
    r.coeffs.action_gap_s = json_number(json_field(e, "action_gap_s", e_at),
                                        e_at + ".action_gap_s", 0, kStepCostMax);
    r.coeffs.step_tail_s =
        json_number(json_field(e, "step_tail_s", e_at), e_at + ".step_tail_s", 0, kStepCostMax);
    cal.ranks.push_back(std::move(r));
  }
  // World-rank order, whatever order the file listed them in.
  std::sort(cal.ranks.begin(), cal.ranks.end(), [](const auto& x, const auto& y) {
    return std::pair(x.stage, x.replica) < std::pair(y.stage, y.replica);
  });
}

void rank_time_terms_mean(const std::vector<const Coefficients*>& ranks, Coefficients& out) {
  if (ranks.empty()) return;
  std::array<double, kNumOnlineTerms> sum{};
  double gap = 0, tail = 0;
  for (const Coefficients* c : ranks) {
    const auto v = online_terms_get(*c);
    for (size_t t = 0; t < sum.size(); ++t) sum[t] += v[t];
    gap += c->action_gap_s;
    tail += c->step_tail_s;
  }
  const double n = static_cast<double>(ranks.size());
  for (double& v : sum) v /= n;
  online_terms_set(sum, out);
  out.action_gap_s = gap / n;
  out.step_tail_s = tail / n;
}

std::vector<Coefficients> calibration_rank_coefficients(const Calibration& cal,
                                                        const Coefficients& base, int64_t pp,
                                                        int64_t dp, int64_t replica) {
  if (cal.ranks.empty() || cal.pipeline_parallel != pp) return {};
  std::vector<Coefficients> out;
  for (int64_t s = 0; s < pp; ++s) {
    std::vector<const Coefficients*> mine;
    for (const CalibrationRank& r : cal.ranks)
      if (r.stage == s && (cal.data_parallel != dp || r.replica == replica))
        mine.push_back(&r.coeffs);
    Coefficients c = base;
    rank_time_terms_mean(mine, c);
    out.push_back(c);
  }
  return out;
}

}  // namespace infinipipe::cost
