// Helpers for the plan tests: a small configuration, plans built from explicit chunks, and random
// long-tail workloads cut into slices and packed, in a random interleaving of sequences.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "core/config.h"
#include "cost/cost_model.h"
#include "plan/plan.h"
#include "plan/schedule.h"
#include "plan/stage_layout.h"
#include "plan/validate.h"

namespace infinipipe::plan::testing {

// Parameters a stage holds (the LM head's norm and matrix on the last).
inline double stage_params(const ModelConfig& m, const StageSpec& s) {
  double p = static_cast<double>(s.num_layers) * m.params_per_layer();
  if (s.has_embedding) p += m.params_embedding();
  if (s.has_lm_head) p += m.hidden_size + m.params_embedding();
  return p;
}

inline int64_t max_of(const std::vector<int64_t>& v) {
  return *std::max_element(v.begin(), v.end());
}

inline Config small_config(int32_t pp, int32_t vpp = 1, int64_t layers = 8) {
  Config c;
  c.model.num_layers = layers;
  c.model.hidden_size = 256;
  c.model.num_attention_heads = 4;
  c.model.seq_length = 8192;
  c.parallel.pipeline_parallel = pp;
  c.parallel.virtual_stages = vpp;
  c.cluster.device = "cpu";
  c.cluster.num_devices = pp;
  c.cluster.devices_per_node = pp;
  return c;
}

struct SliceSpec {
  int32_t seq;
  int64_t offset, len;
};

// A plan over `lens` with the given chunks (forward order) and a uniform stage layout.
inline Plan plan_from_chunks(const Config& cfg, std::vector<int64_t> lens,
                             const std::vector<std::vector<SliceSpec>>& chunks) {
  Plan p;
  p.pp = static_cast<int32_t>(cfg.parallel.pipeline_parallel);
  p.vpp = static_cast<int32_t>(cfg.parallel.virtual_stages);
  p.seq_lengths = std::move(lens);
  for (size_t c = 0; c < chunks.size(); ++c) {
    Chunk ch;
    ch.id = static_cast<int32_t>(c);
    for (const SliceSpec& s : chunks[c])
      ch.slices.push_back({s.seq, s.offset, s.len, p.seq_lengths[s.seq]});
    p.chunks.push_back(std::move(ch));
  }
  p.pipeline_of_chunk.assign(p.chunks.size(), 0);
  p.stages = stage_layout_uniform(cfg.model.num_layers, p.pp, p.vpp);
  return p;
}

// m chunks, each one whole sequence of `len` tokens.
inline Plan plan_equal_chunks(const Config& cfg, int m, int64_t len = 1024) {
  std::vector<std::vector<SliceSpec>> chunks;
  for (int i = 0; i < m; ++i) chunks.push_back({{i, 0, len}});
  return plan_from_chunks(cfg, std::vector<int64_t>(m, len), chunks);
}

// Random long-tail batch: long sequences cut into 2..4 slices (split chunks, then the tail packed
// with short sequences into a hybrid chunk), the other short ones packed by 1..3 into batched
// chunks; the sequences' chunk lists are interleaved at random (each list keeps its order).
inline Plan plan_random(const Config& cfg, std::mt19937& rng, int nseq) {
  std::vector<int64_t> lens(nseq);
  std::uniform_int_distribution<int64_t> short_len(16, 512), long_len(2048, 8192);
  std::bernoulli_distribution is_long(0.2);
  for (auto& l : lens) l = is_long(rng) ? long_len(rng) : short_len(rng);
  std::vector<int32_t> shorts;
  std::vector<std::vector<std::vector<SliceSpec>>> lists;  // per unit: its chunks in order
  for (int32_t q = 0; q < nseq; ++q)
    if (lens[q] < 2048) shorts.push_back(q);
  size_t next_short = 0;
  for (int32_t q = 0; q < nseq; ++q) {
    if (lens[q] < 2048) continue;
    int k = std::uniform_int_distribution<int>(2, 4)(rng);
    std::vector<std::vector<SliceSpec>> list;
    int64_t at = 0;
    for (int j = 0; j < k; ++j) {
      int64_t len = j + 1 == k ? lens[q] - at : lens[q] / k;
      list.push_back({{q, at, len}});
      at += len;
    }
    if (next_short < shorts.size()) {  // hybrid: the tail plus one short sequence
      int32_t s = shorts[next_short++];
      list.back().push_back({s, 0, lens[s]});
    }
    lists.push_back(std::move(list));
  }
  while (next_short < shorts.size()) {
    int n = std::uniform_int_distribution<int>(1, 3)(rng);
    std::vector<SliceSpec> chunk;
    for (int i = 0; i < n && next_short < shorts.size(); ++i) {
      int32_t s = shorts[next_short++];
      chunk.push_back({s, 0, lens[s]});
    }
    lists.push_back({chunk});
  }
  std::vector<std::vector<SliceSpec>> order;
  std::vector<size_t> at(lists.size(), 0);
  std::vector<size_t> open;
  for (size_t i = 0; i < lists.size(); ++i) open.push_back(i);
  while (!open.empty()) {
    size_t pick = std::uniform_int_distribution<size_t>(0, open.size() - 1)(rng);
    size_t u = open[pick];
    order.push_back(lists[u][at[u]++]);
    if (at[u] == lists[u].size()) open.erase(open.begin() + pick);
  }
  return plan_from_chunks(cfg, lens, order);
}

// Sets every forward to `f` seconds and every backward to `b` (equal stages for closed forms).
inline void set_uniform_times(Plan& p, double f, double b) {
  for (auto& list : p.actions)
    for (Action& a : list) a.predicted_time = a.kind == ActionKind::forward ? f : b;
}

// Long-tail lengths: mostly short, a few near the maximum, the maximum itself once.
inline std::vector<int64_t> long_tail_lengths(std::mt19937& rng, int n, int64_t max_len) {
  std::lognormal_distribution<double> body(8.0, 1.2);
  std::uniform_int_distribution<int64_t> tail(max_len / 4, max_len);
  std::bernoulli_distribution is_long(0.04);
  std::vector<int64_t> out(n);
  for (auto& l : out)
    l = is_long(rng) ? tail(rng)
                     : std::clamp<int64_t>(static_cast<int64_t>(body(rng)), 16, max_len);
  out[n / 3] = max_len;
  return out;
}

}  // namespace infinipipe::plan::testing
