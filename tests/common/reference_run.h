// The computation every parallel run must reproduce (invariant 1 of docs/architecture.md): one
// engine for the whole model, each sequence whole in its own chunk, no recompute, no plan, the
// loss a mean over the batch's predicted tokens.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/engine.h"

namespace infinipipe::testing {

// A run's loss and gradients, to compare with another's.
struct LossGrads {
  double loss = 0;                                  // mean over the predicted tokens
  std::map<std::string, std::vector<float>> grads;  // by parameter name
};

inline LossGrads reference_run(const ModelConfig& model,
                               const std::vector<std::vector<int32_t>>& seqs, uint64_t seed) {
  MemoryTracker tracker;
  StageEngine engine(model, StageRange::whole(model), seed, tracker);
  int64_t predicted = 0;
  for (const auto& s : seqs) predicted += s.empty() ? 0 : static_cast<int64_t>(s.size()) - 1;
  const double scale = 1.0 / static_cast<double>(predicted);
  double loss_sum = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    ChunkInput in;
    in.chunk_id = static_cast<int32_t>(i);
    in.slices.push_back(
        {static_cast<int64_t>(i), 0, static_cast<int64_t>(seqs[i].size()), seqs[i]});
    loss_sum += engine.forward(in, nullptr, 0, scale).loss_sum;
    engine.backward(static_cast<int32_t>(i), nullptr);
  }
  LossGrads ref;
  ref.loss = loss_sum * scale;
  for (const ParamRef& p : engine.params().params()) {
    ref.grads[p.name].assign(p.grad, p.grad + p.numel);
  }
  return ref;
}

}  // namespace infinipipe::testing
