#include "plan/schedule_memory.h"

#include <algorithm>
#include <span>
#include <unordered_map>

#include "plan/model_states.h"
#include "plan/schedule_replay.h"

namespace infinipipe::plan {

cost::StageShape stage_shape(const StageSpec& s) {
  cost::StageShape sh;
  sh.num_layers = s.num_layers;
  sh.has_embedding = s.has_embedding;
  sh.has_lm_head = s.has_lm_head;
  sh.rank = s.rank;
  return sh;
}

bool plan_zero_shard(const Config& cfg) {
  return cfg.parallel.ulysses_degree > 1 || plan_optimizer_dp(cfg) > 1;
}

int64_t plan_optimizer_dp(const Config& cfg) {
  return cfg.parallel.use_distributed_optimizer ? cfg.parallel.data_parallel : 1;
}

int64_t plan_static_bytes(const Plan& plan, const cost::CostModel& cost, const Config& cfg,
                          int32_t rank) {
  return rank_static_bytes(plan, cost, plan_memory_context(cfg, plan.memory_budget), rank);
}

namespace {

// A forward sends its activation on unless it is on the last stage; a backward its gradient back
// unless it is on the first.
bool action_sends(const Plan& plan, const Action& a) {
  return a.kind == ActionKind::forward ? a.stage + 1 < static_cast<int32_t>(plan.stages.size())
                                       : a.stage > 0;
}

}  // namespace

int64_t action_send_bytes(const Plan& plan, const Action& a, const cost::CostModel& cost,
                          std::span<const cost::SliceShape> chunk) {
  return action_sends(plan, a) ? cost.p2p_bytes(chunk) : 0;
}

std::vector<std::vector<int64_t>> in_flight_bytes(const Plan& plan, const cost::CostModel& cost) {
  const std::vector<std::vector<int32_t>> hold = send_hold_start(plan);
  // A chunk's message bytes, once per chunk rather than once per action.
  std::vector<int64_t> chunk_bytes(plan.chunks.size());
  for (size_t c = 0; c < plan.chunks.size(); ++c)
    chunk_bytes[c] = cost.p2p_bytes(plan.chunks[c].shapes());
  std::vector<std::vector<int64_t>> out(plan.actions.size());
  for (size_t r = 0; r < plan.actions.size(); ++r) {
    const auto& list = plan.actions[r];
    std::vector<int64_t> sum(list.size() + 1, 0);  // sum[i]: sends of actions 0..i-1
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      sum[i + 1] = sum[i] + (action_sends(plan, a) ? chunk_bytes[a.chunk] : 0);
    }
    out[r].resize(list.size());
    for (size_t i = 0; i < list.size(); ++i) out[r][i] = sum[i] - sum[hold[r][i]];
  }
  return out;
}

MemoryTrace schedule_memory_trace(const Plan& plan, const cost::CostModel& cost,
                                  const Config& cfg) {
  const size_t m = plan.chunks.size();
  std::vector<std::vector<cost::SliceShape>> shapes(m);
  for (size_t c = 0; c < m; ++c) shapes[c] = plan.chunks[c].shapes();

  const std::vector<std::vector<int64_t>> in_flight = in_flight_bytes(plan, cost);
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
        // The forward's own temporaries (and a block of logits on the last stage) come on top of
        // what it saves, until it ends.
        step.during = live + cost.forward_transient_bytes(sh, st);
        // It builds each layer's whole stash before dropping a recomputed one: recomputing every
        // layer of the stage peaks like recomputing all but one.
        if (a.recompute_layers > 0 && a.recompute_layers >= st.num_layers) {
          step.during += cost.activation_bytes(sh, st, a.recompute_layers - 1) -
                         cost.activation_bytes(sh, st, a.recompute_layers);
        }
        step.after = live;
      } else {
        // A slice with context needs dK/dV for the earlier tokens; its later slice's backward
        // left them for a longer context, which holds this one's: they accumulate in place,
        // and the slice's own part goes at its end. Only the last slice allocates, the first
        // frees.
        int64_t fresh = 0, change = 0;
        for (size_t k = 0; k < chunk.slices.size(); ++k) {
          const Slice& s = chunk.slices[k];
          if (s.offset == 0 && !s.is_split()) continue;  // a whole sequence
          const int64_t slot = key(a.stage, s.seq);
          auto it = pending_dkv.find(slot);
          const int64_t old = it == pending_dkv.end() ? 0 : it->second;
          const int64_t need =
              s.offset > 0 ? cost.dkv_buffer_bytes(std::span(&sh[k], 1), st) : 0;
          fresh += std::max<int64_t>(0, need - old);
          change += need - old;
          if (need > 0)
            pending_dkv[slot] = need;
          else if (it != pending_dkv.end())
            pending_dkv.erase(it);
        }
        step.during = live + fresh + cost.backward_transient_bytes(sh, st, a.recompute_layers);
        live += change;
        auto h = held.find(key(a.stage, a.chunk));
        if (h != held.end()) {
          live -= h->second;
          held.erase(h);
        }
        step.after = live;
      }
      step.during += in_flight[r][i];  // earlier messages the neighbours have not taken yet
      peak = std::max(peak, step.during);
    }
    t.peak[r] = peak;
  }
  return t;
}

}  // namespace infinipipe::plan
