#include "sim/step_bound.h"

#include <algorithm>
#include <vector>

#include "plan/model_states.h"
#include "plan/planner.h"

namespace infinipipe::sim {
namespace {

// The smallest of each time coefficient over the shared ones and every rank's own: a bound for
// whichever rank runs an action (links and memory are always the shared coefficients).
cost::Coefficients least_time_coefficients(const cost::CostModel& cm) {
  cost::Coefficients lo = cm.coefficients();
  for (const cost::Coefficients& r : cm.rank_coefficients()) {
    lo.alpha1 = std::min(lo.alpha1, r.alpha1);
    lo.alpha2 = std::min(lo.alpha2, r.alpha2);
    lo.beta1 = std::min(lo.beta1, r.beta1);
    lo.embedding_per_token = std::min(lo.embedding_per_token, r.embedding_per_token);
    lo.lm_head_per_token = std::min(lo.lm_head_per_token, r.lm_head_per_token);
    lo.backward_factor = std::min(lo.backward_factor, r.backward_factor);
    lo.lm_head_backward_factor = std::min(lo.lm_head_backward_factor, r.lm_head_backward_factor);
    lo.half_efficiency_tokens = std::min(lo.half_efficiency_tokens, r.half_efficiency_tokens);
  }
  return lo;
}

// Recompute the memory budget forces on the longest sequence (n tokens), seconds summed over
// ranks. Just after the forward of the sequence's last slice on a rank's highest stage, no slice
// of it has run backward on any of the rank's stages (a backward waits for the stage above,
// which runs the last slice's backward first), so the rank holds every token of it on every
// layer it owns: a kept layer act bytes per token, a recomputed one at least rec bytes. Summed
// over the ranks, model states S + n·L·act − X·(act − rec) <= pp·budget, X the sequence's
// recomputed (token, layer) pairs. Recomputing x tokens of one layer costs at least
// rf·(α1·x² + α2·x) plus its all-to-all (a slice at context C pays (C+s)² − C², and the contexts
// of the recomputed slices hold the earlier ones: the sum is >= (Σs)²), and Σ x_l² >= X²/L.
double forced_recompute_seconds(const cost::CostModel& least, const cost::Coefficients& lo,
                                const Config& cfg, int64_t n) {
  const cost::Coefficients& c = least.coefficients();
  const double saved = c.act_bytes_per_token_layer - c.recompute_bytes_per_token_layer;
  if (!(saved > 0) || n <= 0) return 0.0;
  const ModelConfig& m = least.model();
  const int64_t budget = plan::planner_budget(cfg, least);
  const plan::MemoryContext mem = plan::plan_memory_context(cfg, budget);
  const double states =
      static_cast<double>(plan::stage_sharded_bytes(least, {m.num_layers, true, true, -1}, mem));
  const double layers = static_cast<double>(m.num_layers), tokens = static_cast<double>(n);
  const double pp = static_cast<double>(cfg.parallel.pipeline_parallel);
  const double over =
      states + tokens * layers * c.act_bytes_per_token_layer - pp * static_cast<double>(budget);
  if (!(over > 0)) return 0.0;
  const double x = std::min(over / saved, tokens * layers);  // more does not fit: no plan runs
  // The all-to-alls are affine in tokens: their slope leaves out the per-call latency.
  const double a2a_per_token =
      (least.ulysses_alltoall_time(2 * n) - least.ulysses_alltoall_time(n)) / tokens;
  const double per_token = lo.recompute_factor * lo.alpha2 + a2a_per_token;
  return lo.recompute_factor * lo.alpha1 * x * x / layers + std::max(0.0, per_token) * x;
}

}  // namespace

// Why this is below the simulated step of every plan (the property test
// `StepBound.NeverAboveTheSimulatedStep` checks it on real plans):
//
// 1. The simulator's step is max over ranks of (end of the rank's last action + its tail). A
//    rank runs its actions one after another, and transfers, waits, gaps and tails only add, so
//    the step is at least the busiest rank's sum of action times, which is at least the mean
//    over the pp ranks of that sum, and at least the sum of the rank holding the most layers
//    (>= ceil(L / pp) of them, whatever the split).
// 2. An action's time is forward_time / backward_time (+ recompute, + exposed ZeRO-3 gathers
//    >= 0). Summed over the chunks of any chunking, every term is at least what one chunk of
//    every sequence, whole, costs:
//    * attention α1·((C+s)² − C²) telescopes over a sequence's slices to α1·n², however sliced;
//    * linear work α2·T/eff(T) = α2·(T + u·t_half) (eff(t) = t/(t+t_half), t = T/u), the LM
//      head likewise, and the Ulysses all-to-all (bytes ∝ T, plus latency) are affine in the
//      chunk's tokens with a non-negative per-chunk term, so splitting tokens over more chunks
//      never lowers their sum; the embedding is linear;
//    * β1 is paid per chunk and stage: at least once on each of the pp ranks' stages.
//    Summed over stages, layers add up to L, with one embedding and one LM head.
// 3. Recompute is at least what the budget forces on the longest sequence
//    (forced_recompute_seconds), added to the ranks' sum.
// 4. Each time coefficient is the least over the ranks' own (least_time_coefficients).
// So step >= max((W + R) / pp, W_ceil), W the whole model's forward + backward of that one chunk
// plus the other ranks' β1, R the forced recompute, W_ceil the forward + backward of
// ceil(L / pp) layers alone. Not counted (each >= 0, so leaving it out keeps the bound): bubbles,
// point-to-point transfers, other recompute, the data-parallel all-reduce, per-action gaps. So
// measured links (a replica's pipeline links, the host links pricing the all-reduce) change
// only terms left out: one bound, made without them, holds for every rank order.
double step_lower_bound(const cost::CostModel& cm, const Config& cfg,
                        std::span<const int64_t> lengths) {
  const int64_t pp = cfg.parallel.pipeline_parallel;
  if (lengths.empty() || pp < 1 || cost::cores_shared(cm.rank_hosts())) return 0.0;
  const ModelConfig& m = cm.model();
  std::vector<cost::SliceShape> whole;
  int64_t longest = 0;
  for (int64_t n : lengths) {
    const int64_t len = std::min(n, m.seq_length);
    if (len > 0) whole.push_back({0, len, true});
    longest = std::max(longest, len);
  }
  if (whole.empty()) return 0.0;
  const cost::Coefficients lo = least_time_coefficients(cm);
  const cost::CostModel least(m, cm.device(), lo, cm.ulysses_degree(), cm.bf16());
  const cost::StageShape model{m.num_layers, true, true, -1};
  const double all = least.forward_time(whole, model) + least.backward_time(whole, model) +
                     2.0 * static_cast<double>(pp - 1) * lo.beta1 +
                     forced_recompute_seconds(least, lo, cfg, longest);
  const cost::StageShape most{(m.num_layers + pp - 1) / pp, false, false, -1};
  const double busiest = least.forward_time(whole, most) + least.backward_time(whole, most);
  return std::max(all / static_cast<double>(pp), busiest);
}

}  // namespace infinipipe::sim
