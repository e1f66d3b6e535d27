// The sequence processor of EPP (InfiniPipe §IV): cuts sequences longer than a chunk's token
// capacity into slices of balanced cost and packs short sequences, with the tail slices, into
// chunks by a Best-Fit-Decreasing variant under a time threshold T_t and a token threshold T_m.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cost/cost_model.h"
#include "plan/plan.h"

namespace infinipipe::plan {

// The thresholds one chunk must respect. The time is forward + backward on the reference stage.
struct PackLimits {
  double time_threshold = 0;    // T_t, seconds
  int64_t token_threshold = 0;  // T_m, tokens
  int64_t min_tail_slice = 1024;
};

struct ProcessorResult {
  std::vector<Chunk> chunks;  // forward order: sliced sequences (longest first), then the packs
  PackLimits limits;  // T_t as the packing left it: raised by every relaxation
  double derived_time_threshold = 0;  // T_t from the longest sequence's split, before relaxing
  int32_t slices_of_longest = 1;      // K
  int32_t relaxed = 0;  // short sequences placed above T_t because no chunk could hold them
};

// The stage the processor balances on: an inner stage holding num_layers / pp layers.
cost::StageShape processor_reference_stage(const ModelConfig& model, int64_t pp);

// Forward + backward seconds of a chunk on `stage` (no recompute).
double chunk_cost(const cost::CostModel& cm, const cost::StageShape& stage,
                  std::span<const cost::SliceShape> chunk);

// Cuts sequence `seq` of `len` tokens into at most `k` slices whose costs are as equal as the
// cost model allows (later slices shorter), power-of-two lengths preferred, tail >= min_tail.
std::vector<Slice> sequence_split_balanced(int32_t seq, int64_t len, int32_t k,
                                           const cost::CostModel& cm, const cost::StageShape& stage,
                                           int64_t min_tail);

// The paper's "without balanced chunking" ablation: `len` tokens in ceil(len / slice_tokens)
// slices of equal length (the first ones one token longer where it does not divide), tail >=
// min_tail. Later slices then cost more, since their context is longer.
std::vector<Slice> sequence_split_uniform(int32_t seq, int64_t len, int64_t slice_tokens,
                                          int64_t min_tail);

// Cuts off slices as long as the limits allow, front first; the remainder is the tail slice
// (grown to min_tail when shorter). A sequence within the limits comes back whole.
std::vector<Slice> sequence_split_capped(int32_t seq, int64_t len, const PackLimits& limits,
                                         const cost::CostModel& cm, const cost::StageShape& stage);

// The whole processor for a given K (slices of the longest sequence): derives T_t and T_m from
// the longest sequence's balanced split, cuts every longer-than-T_m sequence, packs the rest.
// Chunk ids are their positions. Lengths must be positive. With uniform_slicing every cut is
// by tokens (sequence_split_uniform): the longest into k equal slices, the others into slices
// of that length; T_t is then the dearest of the longest's slices.
ProcessorResult sequence_process(std::span<const int64_t> lengths, int32_t k,
                                 const cost::CostModel& cm, const cost::StageShape& stage,
                                 int64_t min_tail, bool uniform_slicing = false);

// Largest K worth trying for this batch: slices of the longest sequence stay >= min_tail.
int32_t sequence_max_slices(std::span<const int64_t> lengths, int64_t min_tail);

// The K values EPP's search tries, up to k_max: dense where it matters, geometric beyond. The
// replica split (replica_balance.h) prices a replica's longest sequence over the same list.
std::vector<int32_t> sequence_slice_candidates(int32_t k_max);

}  // namespace infinipipe::plan
