#include "plan/model_states.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "plan/schedule_memory.h"

namespace infinipipe::plan {

namespace {

bool zero3_active(const MemoryContext& mem) { return mem.zero_stage == 3 && mem.zero3_group > 1; }

// Bytes per element of gathered weights and of the gradients reduce-scattered (the compute
// precision, DeepSpeed's default communication data type).
double unit_bytes_per_param(const cost::CostModel& cm) { return cm.bf16() ? 2.0 : 4.0; }

double table_params(const ModelConfig& m) { return static_cast<double>(m.params_embedding()); }
double head_params(const ModelConfig& m) { return m.hidden_size + table_params(m); }

double stage_params(const ModelConfig& m, const cost::StageShape& stage) {
  double p = static_cast<double>(stage.num_layers) * static_cast<double>(m.params_per_layer());
  if (stage.has_embedding) p += table_params(m);
  if (stage.has_lm_head)  // a tied head shares the table only when the embedding is here too
    p += m.tie_embeddings && stage.has_embedding ? m.hidden_size : head_params(m);
  return p;
}

// One gathered unit of a stage: its parameters and its forward / backward compute seconds.
struct GatherUnit {
  double params = 0, forward_s = 0, backward_s = 0;
};

// The stage's units in forward order: embedding table, layers, final norm + LM head.
std::vector<GatherUnit> stage_units(const cost::CostModel& cm,
                                    std::span<const cost::SliceShape> chunk,
                                    const cost::StageShape& stage) {
  const cost::Coefficients& c = cm.time_coefficients(stage.rank);
  const double tokens = static_cast<double>(cost::chunk_tokens(chunk));
  std::vector<GatherUnit> units;
  if (stage.has_embedding) {
    const double f = c.embedding_per_token * tokens;
    units.push_back({table_params(cm.model()), f, c.backward_factor * f});
  }
  const double layer = cm.layer_seconds(chunk, c);
  for (int64_t l = 0; l < stage.num_layers; ++l)
    units.push_back({static_cast<double>(cm.model().params_per_layer()), layer,
                     c.backward_factor * layer});
  if (stage.has_lm_head) {
    const double f = cm.lm_head_seconds(chunk, stage, c);
    units.push_back({head_params(cm.model()), f, c.lm_head_backward_factor * f});
  }
  return units;
}

}  // namespace

MemoryContext plan_memory_context(const Config& cfg, int64_t budget) {
  MemoryContext mem{budget, plan_optimizer_dp(cfg), plan_zero_shard(cfg)};
  mem.zero_stage = cfg.parallel.zero_stage;
  mem.zero3_group = cfg.parallel.ulysses_degree * cfg.parallel.data_parallel;
  return mem;
}

int64_t stage_sharded_bytes(const cost::CostModel& cm, const cost::StageShape& stage,
                            const MemoryContext& mem) {
  if (mem.zero_stage != 3) return cm.static_bytes(stage, mem.dp, mem.zero_shard);
  const double all = stage_params(cm.model(), stage) * cm.coefficients().bytes_per_param;
  return static_cast<int64_t>(std::ceil(all / static_cast<double>(mem.zero3_group)));
}

int64_t stage_gather_buffer_bytes(const cost::CostModel& cm, const cost::StageShape& stage,
                                  const MemoryContext& mem) {
  if (!zero3_active(mem)) return 0;
  double largest = stage.num_layers > 0 ? static_cast<double>(cm.model().params_per_layer()) : 0;
  if (stage.has_embedding) largest = std::max(largest, table_params(cm.model()));
  if (stage.has_lm_head) largest = std::max(largest, head_params(cm.model()));
  return static_cast<int64_t>(std::ceil(3 * largest * unit_bytes_per_param(cm)));
}

int64_t stage_static_bytes(const cost::CostModel& cm, const cost::StageShape& stage,
                           const MemoryContext& mem) {
  return stage_sharded_bytes(cm, stage, mem) + stage_gather_buffer_bytes(cm, stage, mem);
}

int64_t rank_static_bytes(const Plan& plan, const cost::CostModel& cm, const MemoryContext& mem,
                          int32_t rank) {
  int64_t sharded = 0, buffer = 0;
  for (const StageSpec& s : plan.stages)
    if (s.rank == rank) {
      sharded += stage_sharded_bytes(cm, stage_shape(s), mem);
      buffer = std::max(buffer, stage_gather_buffer_bytes(cm, stage_shape(s), mem));
    }
  return sharded + buffer;
}

double zero3_unit_collective_seconds(const cost::CostModel& cm, const Config& cfg, int32_t rank,
                                     cost::Collective op, double bytes) {
  const int64_t n = cfg.parallel.ulysses_degree * cfg.parallel.data_parallel;
  // The stage's devices are consecutive (pp outermost), as for the data-parallel all-reduce.
  return cm.collective_time(op, {rank * n, n, cfg.cluster.devices_per_node}, bytes);
}

double overlap_exposed_seconds(double comm_s, double compute_s, double slowdown) {
  return std::max(0.0, comm_s - compute_s) + (slowdown - 1.0) * std::min(comm_s, compute_s);
}

double zero3_forward_exposed_seconds(const cost::CostModel& cm, const Config& cfg,
                                     std::span<const cost::SliceShape> chunk,
                                     const cost::StageShape& stage, int32_t rank) {
  if (cfg.parallel.zero_stage != 3 || chunk.empty()) return 0.0;
  const std::vector<GatherUnit> units = stage_units(cm, chunk, stage);
  const double w = unit_bytes_per_param(cm);
  const double slowdown = cm.coefficients().collectives.overlap_slowdown;
  double exposed = 0;
  for (size_t i = 0; i < units.size(); ++i) {
    const double g = zero3_unit_collective_seconds(cm, cfg, rank, cost::Collective::all_gather,
                                                   units[i].params * w);
    exposed += i == 0 ? g : overlap_exposed_seconds(g, units[i - 1].forward_s, slowdown);
  }
  return exposed;
}

double zero3_backward_exposed_seconds(const cost::CostModel& cm, const Config& cfg,
                                      std::span<const cost::SliceShape> chunk,
                                      const cost::StageShape& stage, int32_t rank,
                                      double reduce_bucket_params) {
  if (cfg.parallel.zero_stage != 3 || chunk.empty()) return 0.0;
  std::vector<GatherUnit> units = stage_units(cm, chunk, stage);
  if (units.empty()) return 0.0;
  std::reverse(units.begin(), units.end());  // backward runs the units last to first
  const double w = unit_bytes_per_param(cm);
  const double slowdown = cm.coefficients().collectives.overlap_slowdown;
  const auto coll = [&](cost::Collective op, double params) {
    return params > 0 ? zero3_unit_collective_seconds(cm, cfg, rank, op, params * w) : 0.0;
  };
  const auto gather = [&](size_t i) {
    return i < units.size() ? coll(cost::Collective::all_gather, units[i].params) : 0.0;
  };
  double exposed = gather(0);
  double issued = 0;  // reduce-scatter seconds issued before the unit that computes next
  double bucket = 0;  // gradient parameters waiting in the bucket
  for (size_t i = 0; i < units.size(); ++i) {
    exposed += overlap_exposed_seconds(gather(i + 1) + issued, units[i].backward_s, slowdown);
    issued = 0;
    // The unit's gradients join the bucket; a bucket they would overflow is reduce-scattered
    // first (DeepSpeed), and without a bucket each unit's are at once (FSDP).
    const bool overflows = bucket > 0 && bucket + units[i].params > reduce_bucket_params;
    if (reduce_bucket_params > 0 && overflows) {
      issued = coll(cost::Collective::reduce_scatter, bucket);
      bucket = 0;
    }
    bucket += units[i].params;
    if (reduce_bucket_params <= 0) {
      issued = coll(cost::Collective::reduce_scatter, bucket);
      bucket = 0;
    }
  }
  // What is still issued or in the bucket is reduce-scattered at the end of the backward, with
  // no compute left to hide behind.
  return exposed + issued + coll(cost::Collective::reduce_scatter, bucket);
}

}  // namespace infinipipe::plan
