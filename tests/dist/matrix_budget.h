// A tight memory budget found by the planner itself: the batches a Trainer will plan (each dp
// replica's share of each global batch), the least budget every one of them fits and the peak
// each reaches unconstrained, and a budget a given fraction of the way from the one to the other.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "cost/cost_model.h"
#include "data/batch_sampler.h"
#include "data/indexed_dataset.h"
#include "plan/planner.h"
#include "runtime/dist_step.h"

namespace infinipipe::runtime::disttest_matrix {

// What Trainer::step plans in the first `iters` iterations of `cfg`: one list of lengths per
// iteration and replica, in the order the Trainer takes them.
inline std::vector<std::vector<int64_t>> replica_batches(const Config& cfg,
                                                         const cost::CostModel& cm, int64_t iters) {
  const data::IndexedDataset ds = data::IndexedDataset::open(cfg.training.data_path);
  data::BatchSampler sampler(ds.num_documents(), cfg.training.global_batch_size,
                             static_cast<uint64_t>(cfg.training.seed));
  std::vector<std::vector<int64_t>> out;
  for (int64_t it = 0; it < iters; ++it) {
    std::vector<int64_t> lengths;
    for (int64_t doc : sampler.next()) {
      const int64_t n = std::min(ds.document_length(doc), cfg.model.seq_length);
      if (n > 0) lengths.push_back(n);
    }
    const int64_t dp = cfg.parallel.data_parallel;
    if (dp == 1) {
      out.push_back(lengths);
      continue;
    }
    for (const auto& replica : dist_replica_split(lengths, dp, cm, cfg)) {
      std::vector<int64_t> mine;
      for (int32_t i : replica) mine.push_back(lengths[static_cast<size_t>(i)]);
      out.push_back(mine);
    }
  }
  return out;
}

// The highest predicted peak of any rank in the plan of `lengths` under `budget` bytes per rank
// (0: the device's memory), or -1 when no plan fits.
inline int64_t planned_peak(Config cfg, const cost::CostModel& cm, std::span<const int64_t> lengths,
                            int64_t budget) {
  cfg.training.memory_budget = budget;
  try {
    const plan::Plan p = plan::make_plan(cfg, cm, lengths);
    return *std::max_element(p.predicted_peak_bytes.begin(), p.predicted_peak_bytes.end());
  } catch (const Error&) {
    return -1;
  }
}

struct BudgetRange {
  int64_t least = 0;  // the smallest budget (to 1%) that every batch fits
  int64_t peak = 0;   // the highest peak of any batch planned without a budget
};

// Bisects the budget between a plan's static floor and the unconstrained peak.
inline BudgetRange budget_range(const Config& cfg, const cost::CostModel& cm,
                                const std::vector<std::vector<int64_t>>& batches) {
  BudgetRange r;
  for (const auto& lengths : batches) {
    const int64_t peak = planned_peak(cfg, cm, lengths, 0);
    if (peak <= 0) fail("the batch of {} sequences has no plan without a budget", lengths.size());
    r.peak = std::max(r.peak, peak);
    // Fits what the batches before it need (budget 0 would mean the device's memory).
    if (r.least > 0 && planned_peak(cfg, cm, lengths, r.least) > 0) continue;
    int64_t lo = r.least, hi = peak;  // lo does not fit, hi does
    while (hi - lo > hi / 100) {
      const int64_t mid = lo + (hi - lo) / 2;
      (planned_peak(cfg, cm, lengths, mid) > 0 ? hi : lo) = mid;
    }
    r.least = hi;
  }
  return r;
}

// `fraction` of the way from the least budget to the unconstrained peak.
inline int64_t budget_between(const BudgetRange& r, double fraction) {
  return r.least + static_cast<int64_t>(fraction * static_cast<double>(r.peak - r.least));
}

}  // namespace infinipipe::runtime::disttest_matrix
