// Ulysses + ZeRO-3 baseline. Assumptions (docs/cost-model.md, "Ulysses baseline"):
// * sequences are packed best-fit-decreasing into micro-batches of a token capacity; each
//   micro-batch runs on one sp group with all layers, embedding and LM head;
// * ZeRO-3 collectives span every device, so the dp groups advance micro-batch by micro-batch in
//   lock step: a round costs its slowest group;
// * per micro-batch, every unit (embedding, layer, LM head) is all-gathered before its forward and
//   its backward and its gradient reduce-scattered after (the recompute reuses the backward's
//   gather); the next unit is prefetched while one computes, so what is exposed is charged unit by
//   unit (sim::zero3_micro_batch_exposed, EPP's own ZeRO-3 model); the all-to-alls are data
//   dependencies and are not hidden.
#include "sim/ulysses.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "core/error.h"
#include "sim/baseline.h"

namespace infinipipe::sim {
namespace {

using cost::CostModel;
using cost::SliceShape;
using cost::StageShape;

void check_inputs(const Config& cfg, std::span<const int64_t> lengths) {
  if (lengths.empty()) fail_config("ulysses: the global batch has no sequences");
  for (int64_t len : lengths)
    if (len <= 0) fail("ulysses: sequence length {} must be positive", len);
  if (cfg.cluster.num_devices < 1 || cfg.cluster.devices_per_node < 1)
    fail_config("ulysses: num-devices and devices-per-node must be >= 1");
}

void check_setting(const CostModel& cm, const Config& cfg, std::span<const int64_t> lengths,
                   const UlyssesSetting& setting) {
  check_inputs(cfg, lengths);
  const ModelConfig& m = cm.model();
  const int64_t n = cfg.cluster.num_devices, sp = setting.sp_degree;
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  if (sp < 1 || n % sp != 0) fail_config("ulysses: sp degree {} must divide the {} devices", sp, n);
  if (m.num_attention_heads % sp != 0)
    fail_config("ulysses: sp degree {} must divide the {} attention heads", sp,
                m.num_attention_heads);
  if (setting.micro_batch_tokens < longest)
    fail_config("ulysses: micro-batch capacity {} is below the longest sequence ({} tokens)",
                setting.micro_batch_tokens, longest);
}

double param_element_bytes(const CostModel& cm) {
  return cm.bf16() ? 2.0 : 4.0;
}

struct MicroBatch {
  double compute, a2a;  // seconds: compute, and the all-to-alls it waits on
  double zero3;         // ZeRO-3 gathers and reduce-scatters it leaves exposed, unit by unit
  int64_t act;          // peak activation bytes
};

// The batch's micro-batches, each timed on one sp group (g: the cost model at that
// Ulysses degree) with every layer; heaviest first.
std::vector<MicroBatch> micro_batches(const CostModel& g, const Config& cfg,
                                      const std::vector<std::vector<SliceShape>>& bins,
                                      const UlyssesSetting& setting) {
  const ModelConfig& m = g.model();
  const StageShape all{.num_layers = m.num_layers, .has_embedding = true, .has_lm_head = true};
  const int64_t recompute = setting.full_recompute ? m.num_layers : 0;
  std::vector<MicroBatch> mbs;
  for (const auto& chunk : bins) {
    const int64_t tokens = cost::chunk_tokens(chunk);
    const double a2a = g.ulysses_alltoall_time(tokens) * m.num_layers * (2 + (recompute > 0));
    const double total = g.forward_time(chunk, all) + g.backward_time(chunk, all) +
                         g.recompute_time(chunk, recompute);
    mbs.push_back({total - a2a, a2a, zero3_micro_batch_exposed(g, cfg, chunk),
                   g.activation_bytes(chunk, all, recompute) +
                       std::max(g.forward_transient_bytes(chunk, all),
                                g.backward_transient_bytes(chunk, all, recompute))});
  }
  std::sort(mbs.begin(), mbs.end(), [](const MicroBatch& a, const MicroBatch& b) {
    return a.compute + a.a2a > b.compute + b.a2a;
  });
  return mbs;
}

// Tokens per second and MFU of the step timed in r.
void add_throughput(UlyssesResult& r, const CostModel& cm, const Config& cfg,
                    std::span<const int64_t> lengths) {
  int64_t tokens = 0;
  double flops = 0;
  for (int64_t len : lengths) {
    tokens += len;
    const SliceShape s{0, len};
    flops += 3 * cm.flops(std::span<const SliceShape>(&s, 1), cm.model().num_layers, true);
  }
  r.tokens_per_s = static_cast<double>(tokens) / r.step_time_s;
  r.mfu = flops /
          (r.step_time_s * static_cast<double>(cfg.cluster.num_devices) * cm.device().peak_flops);
}

// Memory: everything sharded over n, plus gathered parameters in flight (two layers being
// prefetched, and the embedding / LM-head tables while they run), plus the activations.
void add_memory(UlyssesResult& r, const CostModel& cm, const Config& cfg,
                const cost::Coefficients& c, int64_t peak_act) {
  const ModelConfig& m = cm.model();
  const int64_t n = cfg.cluster.num_devices;
  const double gathered = (2.0 * m.params_per_layer() + static_cast<double>(m.params_embedding())) *
                          param_element_bytes(cm);
  r.peak_memory_bytes =
      static_cast<int64_t>(
          std::ceil(static_cast<double>(m.params_total()) * c.bytes_per_param / n + gathered)) +
      peak_act;
  r.memory_budget_bytes = cfg.training.memory_budget > 0 ? cfg.training.memory_budget
                                                         : cost::usable_memory_bytes(cm.device());
  if (r.peak_memory_bytes > r.memory_budget_bytes) {
    r.oom = true;
    r.reason = fmt::format(
        "needs {} per device (sp {}, dp {}, {} recompute, micro-batch {} tokens) but the budget "
        "is {}",
        format_bytes(r.peak_memory_bytes), r.setting.sp_degree, r.dp_degree,
        r.setting.full_recompute ? "full" : "no", r.setting.micro_batch_tokens,
        format_bytes(r.memory_budget_bytes));
  }
}

}  // namespace

UlyssesResult simulate_ulysses_setting(const CostModel& cm, const Config& cfg,
                                       std::span<const int64_t> lengths,
                                       const UlyssesSetting& setting) {
  check_setting(cm, cfg, lengths, setting);
  const ModelConfig& m = cm.model();
  const int64_t n = cfg.cluster.num_devices, sp = setting.sp_degree;
  UlyssesResult r;
  r.setting = setting;
  r.dp_degree = n / sp;
  const CostModel g = cm.with_ulysses_degree(sp, cfg.cluster.devices_per_node);
  const cost::Coefficients& c = g.coefficients();
  const cost::DeviceSpec& d = cm.device();

  // Micro-batches, heaviest first, dealt dp at a time into lock-step rounds.
  const auto bins = baseline_pack(lengths, setting.micro_batch_tokens);
  const std::vector<MicroBatch> mbs = micro_batches(g, cfg, bins, setting);
  int64_t peak_act = 0;
  for (size_t i = 0; i < mbs.size(); i += r.dp_degree) {
    const MicroBatch& slowest = mbs[i];  // sorted: the first of each round is its slowest
    r.compute_time_s += slowest.compute;
    r.alltoall_time_s += slowest.a2a;
    // Lock step: each unit's gather waits for the slowest group's previous unit.
    r.zero_exposed_s += slowest.zero3;
    ++r.micro_batch_rounds;
  }
  for (const MicroBatch& mb : mbs) peak_act = std::max(peak_act, mb.act);

  // Adam over this device's 1/n of the parameters: memory-bound, ~bytes_per_param read + written.
  const double shard_params = static_cast<double>(m.params_total()) / n;
  r.optimizer_time_s = 2 * shard_params * c.bytes_per_param / d.memory_bandwidth;
  r.step_time_s = r.compute_time_s + r.alltoall_time_s + r.zero_exposed_s + r.optimizer_time_s;
  add_throughput(r, cm, cfg, lengths);
  add_memory(r, cm, cfg, c, peak_act);
  return r;
}

UlyssesResult simulate_ulysses(const CostModel& cm, const Config& cfg,
                               std::span<const int64_t> lengths) {
  check_inputs(cfg, lengths);
  const ModelConfig& m = cm.model();
  const int64_t n = cfg.cluster.num_devices;
  std::vector<int64_t> sps;
  for (int64_t sp = 1; sp <= std::min(n, cfg.cluster.devices_per_node); ++sp)
    if (n % sp == 0 && cfg.cluster.devices_per_node % sp == 0) sps.push_back(sp);
  if (std::find(sps.begin(), sps.end(), n) == sps.end()) sps.push_back(n);
  std::erase_if(sps, [&](int64_t sp) { return m.num_attention_heads % sp != 0; });
  if (sps.empty())
    fail_config(
        "ulysses: no sequence-parallel degree divides both the {} devices and the {} "
        "attention heads",
        n, m.num_attention_heads);

  int64_t longest = 0, total = 0;
  for (int64_t len : lengths) {
    longest = std::max(longest, len);
    total += len;
  }
  std::vector<int64_t> caps;  // powers of two from the longest sequence up to the whole batch
  for (int64_t cap = longest;; cap *= 2) {
    caps.push_back(cap);
    if (cap >= total) break;
  }

  UlyssesResult best, least;
  bool have_best = false, have_least = false;
  for (int64_t sp : sps)
    for (bool rc : {false, true})
      for (int64_t cap : caps) {
        UlyssesResult r = simulate_ulysses_setting(cm, cfg, lengths, {sp, rc, cap});
        if (!r.oom && (!have_best || r.step_time_s < best.step_time_s)) {
          best = r;
          have_best = true;
        }
        if (!have_least || r.peak_memory_bytes < least.peak_memory_bytes) {
          least = r;
          have_least = true;
        }
      }
  if (have_best) return best;
  least.reason = "no setting fits: the smallest " + least.reason;
  return least;
}

}  // namespace infinipipe::sim
