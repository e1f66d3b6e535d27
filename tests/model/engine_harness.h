// Runs a global batch through one or more StageEngines the way a pipeline would (no MPI):
// chunks of slices, per-chunk recomputation, forwards then backwards in a given order.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/engine.h"

namespace infinipipe::testing {

struct SliceSpec {
  int64_t seq;
  int64_t offset;
  int64_t len;
};

struct ChunkSpec {
  std::vector<SliceSpec> slices;
  int64_t recompute = 0;  // layers recomputed on each stage (clamped to the stage's layers)
};

struct Action {
  size_t chunk;
  bool forward;
};

struct BatchResult {
  double loss = 0;  // mean over predicted tokens
  int64_t predicted = 0;
  std::map<std::string, std::vector<float>> grads;  // summed over stages (tied copies)
  int64_t peak_activation_bytes = 0;
};

inline ChunkInput chunk_make(int32_t id, const ChunkSpec& spec,
                             const std::vector<std::vector<int32_t>>& seqs) {
  ChunkInput c;
  c.chunk_id = id;
  for (const SliceSpec& s : spec.slices) {
    const auto& seq = seqs.at(static_cast<size_t>(s.seq));
    const int64_t n = static_cast<int64_t>(seq.size());
    const int64_t end = std::min(n, s.offset + s.len + 1);  // label lookahead unless final
    SliceInput in;
    in.seq_id = s.seq;
    in.offset = s.offset;
    in.len = s.len;
    in.tokens.assign(seq.begin() + s.offset, seq.begin() + end);
    c.slices.push_back(in);
  }
  return c;
}

// Every chunk forward in order, then every backward in reverse order, unless actions are given.
inline BatchResult batch_run(const ModelConfig& cfg, const std::vector<std::vector<int32_t>>& seqs,
                             const std::vector<ChunkSpec>& chunks,
                             const std::vector<StageRange>& stages, uint64_t seed,
                             std::vector<Action> actions = {}) {
  int64_t total = 0;
  for (const auto& s : seqs) total += static_cast<int64_t>(s.size()) - 1;
  const double scale = 1.0 / static_cast<double>(total);
  MemoryTracker tracker;
  std::vector<std::unique_ptr<StageEngine>> engines;
  for (const StageRange& r : stages) {
    engines.push_back(std::make_unique<StageEngine>(cfg, r, seed, tracker));
  }
  if (actions.empty()) {
    for (size_t c = 0; c < chunks.size(); ++c) actions.push_back({c, true});
    for (size_t c = chunks.size(); c-- > 0;) actions.push_back({c, false});
  }
  BatchResult res;
  double loss_sum = 0;
  for (const Action& a : actions) {
    const int32_t id = static_cast<int32_t>(a.chunk) + 100;
    if (a.forward) {
      ChunkInput in = chunk_make(id, chunks[a.chunk], seqs);
      Tensor act;
      for (auto& e : engines) {
        const int64_t r = std::min(chunks[a.chunk].recompute, e->range().num_layers);
        ForwardOutput out = e->forward(in, act.empty() ? nullptr : &act, r, scale);
        act = std::move(out.activation);
        loss_sum += out.loss_sum;
        res.predicted += out.predicted_tokens;
      }
    } else {
      Tensor grad;
      for (size_t i = engines.size(); i-- > 0;) {
        grad = engines[i]->backward(id, grad.empty() ? nullptr : &grad);
      }
    }
  }
  res.loss = loss_sum * scale;
  for (auto& e : engines) {
    for (const ParamRef& p : e->params().params()) {
      auto& g = res.grads[p.name];
      if (g.empty()) g.assign(static_cast<size_t>(p.numel), 0.0f);
      for (int64_t i = 0; i < p.numel; ++i) g[static_cast<size_t>(i)] += p.grad[i];
    }
  }
  res.peak_activation_bytes = tracker.peak(MemCategory::mem_activations);
  return res;
}

}  // namespace infinipipe::testing
