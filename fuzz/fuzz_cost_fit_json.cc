// A checkpoint's cost-fit-rankNNNNN.json (the online cost fit's state, written by `train --save`
// with --cost-model-update online): each rank entry's fit state parsed and restored into an
// OnlineFit as a resumed run restores it, its pooled and planning terms read, then the restored
// fit predicts and learns from two actions. A state restore accepts is one a fit reaches, so
// what it predicts and learns stays finite, and the calibration file a run writes from it
// (`DIR/calibration.json`, for --calibration) loads again; either failing is a finding.
#include <array>
#include <cmath>
#include <cstdio>
#include <string>

#include "core/json_read.h"
#include "cost/calibration.h"
#include "cost/cost_model.h"
#include "cost/online_fit.h"
#include "cost/online_fit_state.h"
#include "fuzz_common.h"

namespace {

using namespace infinipipe;

const cost::CostModel& prior() {
  static const cost::CostModel cm = [] {
    Config cfg;
    cfg.model.num_layers = 2;
    cfg.model.hidden_size = 64;
    cfg.model.num_attention_heads = 4;
    cfg.model.seq_length = 128;
    cfg.cluster.device = "cpu";
    return cost::CostModel::from_config(cfg);
  }();
  return cm;
}

void must_be_finite(double v, const char* what) {
  if (std::isfinite(v)) return;
  std::fprintf(stderr, "a restored fit gave a non-finite %s: %g\n", what, v);
  std::abort();
}

// What a run does with a fit: its calibration file must load as --calibration.
void calibration_must_load(const cost::OnlineFit& fit) {
  try {
    (void)cost::calibration_from_json(
        cost::calibration_to_json(cost::online_fit_calibration(fit, "fuzz", "2026-12-01", "")),
        "the restored fit's calibration");
  } catch (const Error& e) {
    std::fprintf(stderr, "a restored fit writes a calibration that does not load: %s\n", e.what());
    std::abort();
  }
}

// Saved time terms (the pooled fit's, those the next plans use): what a run plans with and
// writes as its calibration file, which must load.
void terms_read(const nlohmann::json& j, const std::string& where) {
  std::array<double, cost::kNumOnlineTerms> terms{};
  cost::json_terms_read(j, where, terms);
  cost::Coefficients c = prior().coefficients();
  cost::online_terms_set(terms, c);
  try {
    (void)cost::calibration_from_json(
        cost::calibration_to_json(cost::online_calibration(prior(), {c, 0, 0}, "fuzz", "", "")),
        "the saved terms' calibration");
  } catch (const Error& e) {
    std::fprintf(stderr, "saved terms accepted make a calibration that does not load: %s\n",
                 e.what());
    std::abort();
  }
}

// Predicts `s`, then learns from it taking `seconds`; everything must stay finite.
void learn(cost::OnlineFit& fit, cost::ActionSample s, double seconds) {
  must_be_finite(fit.predict(s), "prediction");
  s.seconds = seconds;
  fit.update(s);
  for (int t = 0; t < cost::kNumOnlineTerms; ++t)
    must_be_finite(fit.term(cost::OnlineTerm(t)), "term");
  must_be_finite(fit.residual(s.backward), "residual");
  calibration_must_load(fit);
}

// One rank entry, as Trainer::fit_state_load reads it.
void entry_read(const nlohmann::json& e, const std::string& where) {
  cost::OnlineFit fit(prior());
  fit.restore(cost::online_fit_state_from_json(json_field(e, "fit", where), where + ".fit"), where);
  terms_read(json_field(json_field(e, "pooled", where), "terms", where), where + ".pooled.terms");
  terms_read(json_field(json_field(e, "next_plans", where), "terms", where),
             where + ".next_plans.terms");
  calibration_must_load(fit);
  cost::ActionSample s;
  s.chunk = {{32, 64, true}};
  s.stage = {2, true, true};
  learn(fit, s, 0.004);
  s.backward = true;
  s.recompute_layers = 1;
  learn(fit, s, 0.01);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const std::string where = "cost-fit-rank00000.json";
    const nlohmann::json file = json_parse(fuzz::fuzz_text(data, size), where);
    const nlohmann::json& ranks = json_field(file, "ranks", where);
    if (!ranks.is_array()) return 0;
    for (size_t i = 0; i < ranks.size(); ++i)
      entry_read(ranks[i], where + ": ranks[" + std::to_string(i) + "]");
  } catch (const Error&) {
  }
  return 0;
}
