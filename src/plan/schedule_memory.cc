#include "plan/schedule_memory.h"

#include <algorithm>
#include <span>
#include <unordered_map>

namespace infinipipe::plan {

cost::StageShape stage_shape(const StageSpec& s) {
  cost::StageShape sh;
  sh.num_layers = s.num_layers;
  sh.has_embedding = s.has_embedding;
  sh.has_lm_head = s.has_lm_head;
  return sh;
}

bool plan_zero_shard(const Config& cfg) {
  return cfg.parallel.data_parallel > 1;
}

int64_t plan_static_bytes(const Plan& plan, const cost::CostModel& cost, const Config& cfg,
                          int32_t rank) {
  int64_t bytes = 0;
  for (const StageSpec& s : plan.stages)
    if (s.rank == rank)
      bytes += cost.static_bytes(stage_shape(s), cfg.parallel.data_parallel, plan_zero_shard(cfg));
  return bytes;
}

MemoryTrace schedule_memory_trace(const Plan& plan, const cost::CostModel& cost,
                                  const Config& cfg) {
  const size_t m = plan.chunks.size();
  std::vector<std::vector<cost::SliceShape>> shapes(m);
  for (size_t c = 0; c < m; ++c) shapes[c] = plan.chunks[c].shapes();

  MemoryTrace t;
  t.static_bytes.resize(plan.pp);
  t.steps.resize(plan.pp);
  t.peak.resize(plan.pp);
  for (int32_t r = 0; r < plan.pp; ++r) {
    const int64_t base = plan_static_bytes(plan, cost, cfg, r);
    t.static_bytes[r] = base;
    int64_t live = base, peak = base;
    // Bytes a chunk holds from its forward to its backward, per (stage, chunk).
    std::unordered_map<int64_t, int64_t> held;
    // dK/dV buffer waiting for the previous slice's backward, per (stage, sequence).
    std::unordered_map<int64_t, int64_t> pending_dkv;
    auto key = [&](int64_t stage, int64_t x) { return stage * (int64_t{1} << 32) + x; };
    const auto& list = plan.actions[r];
    t.steps[r].resize(list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      const cost::StageShape st = stage_shape(plan.stages[a.stage]);
      const auto& sh = shapes[a.chunk];
      const Chunk& chunk = plan.chunks[a.chunk];
      MemoryStep& step = t.steps[r][i];
      if (a.kind == ActionKind::forward) {
        int64_t b = cost.activation_bytes(sh, st, a.recompute_layers) + cost.kv_keep_bytes(sh, st);
        held[key(a.stage, a.chunk)] += b;
        live += b;
        step.during = step.after = live;
      } else {
        // Non-final slices consume (and free at the end) the dK/dV buffer their sequence's later
        // slices left behind; slices with context allocate the buffer for the earlier tokens.
        int64_t freed = 0, fresh = 0;
        for (const Slice& s : chunk.slices)
          if (s.is_split()) {
            auto it = pending_dkv.find(key(a.stage, s.seq));
            if (it != pending_dkv.end()) {
              freed += it->second;
              pending_dkv.erase(it);
            }
          }
        for (size_t k = 0; k < chunk.slices.size(); ++k)
          if (chunk.slices[k].offset > 0) {
            int64_t d = cost.dkv_buffer_bytes(std::span(&sh[k], 1), st);
            fresh += d;
            pending_dkv[key(a.stage, chunk.slices[k].seq)] += d;
          }
        step.during = live + fresh + cost.backward_transient_bytes(sh, st, a.recompute_layers);
        live += fresh - freed;
        auto h = held.find(key(a.stage, a.chunk));
        if (h != held.end()) {
          live -= h->second;
          held.erase(h);
        }
        step.after = live;
      }
      peak = std::max(peak, step.during);
    }
    t.peak[r] = peak;
  }
  return t;
}

}  // namespace infinipipe::plan
