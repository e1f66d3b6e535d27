// What a sequence costs the data-parallel replica that trains it, priced at the chunks the EPP
// planner will run it in: the replica split (balance_replicas), the outlier delay's threshold and
// its release test (data/outlier_delay.h) weigh sequences with this one price.
//
// The planner does not run a sequence as one chunk: it cuts a replica's longest sequence into K
// slices of equal cost, which sets the chunk limits T_t (that cost) and T_m (the first slice's
// length); longer sequences are cut within them and short ones packed into chunks of up to T_m
// tokens (sequence_processor.h); one pipeline pays a fill and drain of about (pp − 1) chunks.
// Every time of the cost model is affine in a chunk's tokens (eff(t) = t / (t + t_half) makes
// the linear work α·(T + u·t_half)) and its causal pairs add up over the slices of a sequence,
// so a chunk's cost is an overhead F (β1, the efficiency's fixed part, the all-to-alls'
// latency) plus each sequence's marginal cost M; a sequence cut into n slices costs M + n·F,
// one packed into a chunk of T_m tokens M + F·len / T_m.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/config.h"
#include "cost/cost_model.h"

namespace infinipipe::plan {

// The bounds of a replica's chunks, set by its longest sequence cut into `slices` slices.
struct ChunkLimit {
  int32_t slices = 1;  // K
  int64_t tokens = 0;  // T_m: the longest chunk (the first slice) in tokens
  double time = 0;     // T_t: one slice's forward + backward through every layer, seconds
};

class ReplicaSplitCost {
 public:
  ReplicaSplitCost(const Config& cfg, const cost::CostModel& cm);

  // The K the planner would cut a replica's longest sequence of `length` tokens into, beside
  // `rest_tokens` tokens of shorter ones: the planner's K list (and, at K = 1, its chunks of
  // 2, 4, ... times the lead), minimising the compute (M + K·F, the rest's chunks F each) and
  // the fill (pp − 1)·T_t.
  ChunkLimit lead_limit(int64_t length, int64_t rest_tokens) const;
  // Forward + backward seconds through every layer of the sequence in a replica whose chunks
  // are within `limit`: its slices when longer than T_m (as many as T_t requires), else its
  // share of a packed chunk of T_m tokens.
  double work(int64_t length, const ChunkLimit& limit) const;
  // The pipeline's fill and drain: (pp − 1) chunks of T_t.
  double fill(const ChunkLimit& limit) const;
  // Recompute the sequence's own activations force (0 when they fit on every stage): a sliced
  // sequence keeps every slice on every stage until the backwards, so past the rank's budget
  // (less its model states) the planner recomputes the fraction (full − cap) / (full − lean)
  // of the rank's layers, Eq. 14's estimate for the sequence in its own pipeline
  // (pipeline_grouping.cc), at their full recompute time.
  double recompute(int64_t length) const;

  // A replica's whole share: its longest sequence leads (lead_limit, with the others' tokens
  // beside it), plus the fill, every sequence's work within that limit and their recompute.
  double share(std::span<const int64_t> lengths) const;

  // The price without a replica: work at default_limit() plus recompute; 0 for length <= 0.
  double operator()(int64_t length) const;
  // The limits of a replica whose longest sequence is --seq-length tokens: what the delay
  // prices with, as it weighs a batch before it is split.
  const ChunkLimit& default_limit() const { return default_limit_; }
  // Per-chunk overhead F and a sequence's marginal cost M (seconds, every layer).
  double overhead() const { return overhead_; }
  double marginal(int64_t length) const;

 private:
  struct Stage {  // one pipeline rank: its stages' layers as one
    cost::StageShape shape;
    double activation_cap = 0;  // bytes: budget less the rank's model states
  };
  double whole_cost(int64_t context, int64_t len, bool final_slice) const;

  cost::CostModel cm_;
  int64_t pp_ = 1;
  int64_t min_tail_ = 1;
  double overhead_ = 0;
  std::vector<Stage> stages_;
  ChunkLimit default_limit_;
};

// ReplicaSplitCost(cfg, cm) as a function of the length, for data::OutlierDelay.
std::function<double(int64_t)> replica_split_cost_fn(const Config& cfg, const cost::CostModel& cm);

}  // namespace infinipipe::plan
