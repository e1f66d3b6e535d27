#include "runlog/metrics_record.h"

#include "runlog/record_fields.h"

namespace infinipipe::runlog {

namespace {

// Required: every field written since traces and the report exist (every field but the
// optional ones below). Optional: rss_peak_bytes (unknown on some systems; older files have
// none), valid_* / test_* / eval_seconds (only where an evaluation ran; older files have none).
template <typename Record, typename Fields>
void metrics_record_fields(Record& m, Fields& f) {
  f.required("iteration", m.iteration, 0);
  f.required("train_iters", m.train_iters, 0);
  f.required("consumed_samples", m.consumed_samples, 0);
  f.required("loss", m.loss);
  f.required("sequences", m.sequences, 0);
  f.required("tokens", m.tokens, 0);
  f.required("predicted_tokens", m.predicted_tokens, 0);
  f.required("seconds", m.seconds);
  f.required("plan_seconds", m.plan_seconds);
  f.required("plan_wait_seconds", m.plan_wait_seconds);
  f.required("tokens_per_s", m.tokens_per_s);
  f.required("lr", m.lr);
  f.required("grad_norm", m.grad_norm);
  f.required("schedule", m.schedule);
  f.required("plan_knobs", m.plan_knobs);
  f.required("chunks", m.chunks, 0);
  f.required("recompute_layers", m.recompute_layers, 0);
  f.required("predicted_step_seconds", m.predicted_step_seconds);
  f.required("measured_step_seconds", m.measured_step_seconds);
  f.required("predicted_peak_bytes", m.predicted_peak_bytes, 0);
  f.required("measured_peak_bytes", m.measured_peak_bytes, 0);
  f.required("measured_activation_peak_bytes", m.measured_activation_peak_bytes, 0);
  f.required("memory_budget", m.memory_budget, 0);
  f.required_if(m.rss_peak_bytes >= 0, "rss_peak_bytes", m.rss_peak_bytes, 0);
  f.optional("valid_loss", m.valid_loss);
  f.required_if(m.valid_loss.has_value(), "valid_tokens", m.valid_tokens, 0);
  f.optional("test_loss", m.test_loss);
  f.required_if(m.test_loss.has_value(), "test_tokens", m.test_tokens, 0);
  f.required_if(m.valid_loss || m.test_loss, "eval_seconds", m.eval_seconds);
}

}  // namespace

nlohmann::json metrics_record_to_json(const IterationMetrics& m) {
  return record_to_json(m, [](auto& r, auto& f) { metrics_record_fields(r, f); });
}

IterationMetrics metrics_record_from_json(const nlohmann::json& j, const std::string& where,
                                          const std::string& fix) {
  return record_from_json<IterationMetrics>(j, where, "metrics record", fix,
                                            [](auto& r, auto& f) { metrics_record_fields(r, f); });
}

}  // namespace infinipipe::runlog
