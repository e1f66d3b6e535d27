#include "plan/replica_price.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <span>

#include "plan/model_states.h"
#include "plan/planner.h"
#include "plan/schedule_memory.h"
#include "plan/sequence_processor.h"
#include "plan/stage_layout.h"

namespace infinipipe::plan {

namespace {

// Tokens of each of the two chunks that measure the per-chunk overhead (any length gives the
// same F while the cost model is affine in a chunk's tokens).
constexpr int64_t kOverheadProbeTokens = 1024;

}  // namespace

ReplicaSplitCost::ReplicaSplitCost(const Config& cfg, const cost::CostModel& cm)
    : cm_(cm),
      pp_(std::max<int64_t>(1, cfg.parallel.pipeline_parallel)),
      min_tail_(cfg.parallel.min_tail_slice) {
  const int64_t budget = planner_budget(cfg, cm);
  const MemoryContext mem = plan_memory_context(cfg, budget);
  const auto pp = static_cast<int32_t>(pp_);
  // A forced split (the trainer's) may list virtual stages; a rank holds all of its stages'
  // layers and states, so each rank's stages count as one.
  const auto forced = static_cast<int32_t>(cfg.parallel.stage_layers.size());
  const int32_t vpp = forced > 0 ? std::max(1, forced / pp) : 1;
  std::vector<Stage> ranks(static_cast<size_t>(pp));
  std::vector<int64_t> states(static_cast<size_t>(pp), 0);
  for (const StageSpec& st : stage_layout_planned(cfg, cm, pp, vpp)) {
    const auto r = static_cast<size_t>(st.rank);
    const cost::StageShape sh = stage_shape(st);
    ranks[r].shape.num_layers += sh.num_layers;
    ranks[r].shape.has_embedding = ranks[r].shape.has_embedding || sh.has_embedding;
    ranks[r].shape.has_lm_head = ranks[r].shape.has_lm_head || sh.has_lm_head;
    states[r] += stage_static_bytes(cm, sh, mem);
  }
  for (size_t r = 0; r < ranks.size(); ++r) {
    ranks[r].activation_cap = static_cast<double>(budget - states[r]);
    stages_.push_back(ranks[r]);
  }
  // F = 2·cost(one sequence) − cost(two of them in one chunk): the chunk's share of the pair.
  const cost::StageShape whole{cm.model().num_layers, false, false};
  const cost::SliceShape one{0, kOverheadProbeTokens, true};
  const cost::SliceShape two[] = {one, one};
  overhead_ = std::max(0.0, 2 * whole_cost(0, kOverheadProbeTokens, true) -
                                chunk_cost(cm_, whole, std::span<const cost::SliceShape>(two)));
  default_limit_ = lead_limit(std::max<int64_t>(1, cfg.model.seq_length), 0);
}

double ReplicaSplitCost::whole_cost(int64_t context, int64_t len, bool final_slice) const {
  const cost::StageShape whole{cm_.model().num_layers, false, false};
  const cost::SliceShape s{context, len, final_slice};
  return chunk_cost(cm_, whole, std::span<const cost::SliceShape>(&s, 1));
}

double ReplicaSplitCost::marginal(int64_t length) const {
  return length > 0 ? std::max(0.0, whole_cost(0, length, true) - overhead_) : 0.0;
}

ChunkLimit ReplicaSplitCost::lead_limit(int64_t length, int64_t rest_tokens) const {
  const double m = marginal(length);
  const int64_t one[] = {length};
  ChunkLimit best;
  double best_time = std::numeric_limits<double>::infinity();
  for (int32_t k : sequence_slice_candidates(sequence_max_slices(one, min_tail_))) {
    ChunkLimit lim;
    lim.slices = k;
    lim.time = (m + k * overhead_) / k;
    lim.tokens = length;
    if (k > 1) {  // the first slice: no context, so the longest within T_t
      int64_t lo = 1, hi = length;
      while (lo < hi) {
        const int64_t mid = lo + (hi - lo + 1) / 2;
        if (whole_cost(0, mid, false) <= lim.time)
          lo = mid;
        else
          hi = mid - 1;
      }
      lim.tokens = lo;
    }
    const double t =
        m + k * overhead_ +
        overhead_ * static_cast<double>(rest_tokens) / static_cast<double>(lim.tokens) + fill(lim);
    if (t < best_time) {
      best_time = t;
      best = lim;
    }
  }
  // K = 1 packs whole sequences into chunks of 2, 4, ... times the lead, as the planner's
  // capacity search does, until one chunk would hold the whole share.
  const double per_token = m / static_cast<double>(length);
  for (int64_t cap = 2 * length; cap / 2 < length + rest_tokens; cap *= 2) {
    ChunkLimit lim;
    lim.tokens = cap;
    lim.time = overhead_ + per_token * static_cast<double>(cap);
    const double t =
        m + overhead_ * static_cast<double>(length + rest_tokens) / static_cast<double>(cap) +
        fill(lim);
    if (t < best_time) {
      best_time = t;
      best = lim;
    }
  }
  return best;
}

double ReplicaSplitCost::work(int64_t length, const ChunkLimit& limit) const {
  if (length <= 0) return 0;
  const double m = marginal(length);
  const int64_t cap = std::max<int64_t>(1, limit.tokens);
  if (length <= cap) return m + overhead_ * static_cast<double>(length) / static_cast<double>(cap);
  // Cut within T_m and T_t: n slices of M/n + F each. The tolerance keeps the lead's own
  // K = (M + K·F) / T_t from rounding up to K + 1.
  double n = std::ceil(static_cast<double>(length) / static_cast<double>(cap));
  if (limit.time > overhead_) n = std::max(n, std::ceil(m / (limit.time - overhead_) - 1e-9));
  return m + n * overhead_;
}

double ReplicaSplitCost::fill(const ChunkLimit& limit) const {
  return static_cast<double>(pp_ - 1) * limit.time;
}

double ReplicaSplitCost::recompute(int64_t length) const {
  if (length <= 0) return 0;
  // One non-final slice of the whole length: a sliced sequence keeps its K/V even where its
  // layers are recomputed (kv_keep_bytes), as the grouping's estimate counts it.
  const cost::SliceShape s{0, length, false};
  const std::span<const cost::SliceShape> one(&s, 1);
  // The cap also leaves room for the largest transient, as the grouping's does: a sliced
  // sequence's is its tail's backward, whose K/V-gradient buffer spans the whole context.
  const int64_t tail_len = length > default_limit_.tokens ? std::min(length, min_tail_) : length;
  const cost::SliceShape tail_shape{length - tail_len, tail_len, true};
  const std::span<const cost::SliceShape> tail(&tail_shape, 1);
  double out = 0;
  for (const Stage& st : stages_) {
    const double keep = static_cast<double>(cm_.kv_keep_bytes(one, st.shape));
    const double full = static_cast<double>(cm_.activation_bytes(one, st.shape, 0)) + keep;
    const double lean =
        static_cast<double>(cm_.activation_bytes(one, st.shape, st.shape.num_layers)) + keep;
    const double transient = static_cast<double>(
        std::max(cm_.backward_transient_bytes(tail, st.shape, st.shape.num_layers) +
                     cm_.dkv_buffer_bytes(tail, st.shape),
                 cm_.forward_transient_bytes(tail, st.shape)));
    const double cap = st.activation_cap - transient;
    if (full <= cap || full <= lean) continue;
    const double need = std::min(1.0, (full - cap) / (full - lean));
    out += need * cm_.recompute_time(one, st.shape.num_layers);
  }
  return out;
}

double ReplicaSplitCost::share(std::span<const int64_t> lengths) const {
  int64_t longest = 0, tokens = 0;
  for (int64_t l : lengths) {
    longest = std::max(longest, l);
    tokens += std::max<int64_t>(0, l);
  }
  if (longest <= 0) return 0;
  const ChunkLimit limit = lead_limit(longest, tokens - longest);
  double out = fill(limit);
  for (int64_t l : lengths) out += work(l, limit) + recompute(l);
  return out;
}

double ReplicaSplitCost::operator()(int64_t length) const {
  return length > 0 ? work(length, default_limit_) + recompute(length) : 0.0;
}

std::function<double(int64_t)> replica_split_cost_fn(const Config& cfg, const cost::CostModel& cm) {
  auto cost = std::make_shared<const ReplicaSplitCost>(cfg, cm);
  return [cost](int64_t length) { return (*cost)(length); };
}

}  // namespace infinipipe::plan
