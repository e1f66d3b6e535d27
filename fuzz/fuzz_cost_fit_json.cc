// A checkpoint's cost-fit-rankNNNNN.json (the online cost fit's state, written by `train --save`
// with --cost-model-update online): each rank entry's fit state parsed and restored into an
// OnlineFit as a resumed run restores it, its pooled terms read, then the restored fit predicts
// one action and learns from it. A state restore accepts is one a fit reaches, so what it
// predicts and learns must stay finite.
#include <array>
#include <cmath>
#include <string>

#include "core/json_read.h"
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

void must_be_finite(double v) {
  if (!std::isfinite(v)) std::abort();
}

// One rank entry, as Trainer::fit_state_load reads it.
void entry_read(const nlohmann::json& e, const std::string& where) {
  cost::OnlineFit fit(prior());
  fit.restore(cost::online_fit_state_from_json(json_field(e, "fit", where), where + ".fit"), where);
  std::array<double, cost::kNumOnlineTerms> terms{};
  cost::json_terms_read(json_field(json_field(e, "pooled", where), "terms", where),
                        where + ".pooled.terms", terms);
  cost::ActionSample s;
  s.chunk = {{32, 64, true}};
  s.stage = {2, true, true};
  s.backward = true;
  s.recompute_layers = 1;
  const double predicted = fit.predict(s);
  must_be_finite(predicted);
  s.seconds = 0.01;
  fit.update(s);
  for (int t = 0; t < cost::kNumOnlineTerms; ++t) must_be_finite(fit.term(cost::OnlineTerm(t)));
  must_be_finite(fit.residual(true));
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
