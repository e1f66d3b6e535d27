// FlexSP's model, per group of size s: the sequences assigned to it are packed best-fit into
// micro-batches as large as its memory allows without recompute (longer sequences alone, fully
// recomputed when they need it); a group's time is the sum of its micro-batches' compute and
// all-to-alls (sim/baseline_deepspeed.h). The step is the slowest group, plus the ZeRO-3
// collectives (3 per micro-batch round, over all devices) not hidden behind its compute, plus
// the optimizer. The lower bound relaxes every sequence to its cheapest group in device-seconds
// at full efficiency, without per-micro-batch overheads or latencies.
#include "sim/baseline_flexsp.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace infinipipe::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kMaxSplits = 4096;

struct Context {
  Context(const cost::CostModel& m, const Config& c) : cm(m), cfg(c) {}
  const cost::CostModel& cm;
  const Config& cfg;
  int64_t act_budget = 0;  // bytes per device left for activations after ZeRO-3's states
  std::map<std::pair<int64_t, int64_t>, double> seq_cost;  // (length, size) -> seconds
  std::map<int64_t, int64_t> capacity;                     // size -> tokens without recompute
};

bool fits(const SpMicroBatch& mb, const Context& x) {
  return mb.activation_bytes <= x.act_budget;
}

// The cheaper fitting choice of recompute (none, then every layer) for one micro-batch.
SpMicroBatch micro_batch(Context& x, int64_t sp, std::span<const cost::SliceShape> chunk) {
  SpMicroBatch mb = sp_micro_batch(x.cm, x.cfg, sp, chunk, 0);
  if (fits(mb, x)) return mb;
  return sp_micro_batch(x.cm, x.cfg, sp, chunk, x.cm.model().num_layers);
}

double sequence_cost(Context& x, int64_t len, int64_t sp) {
  auto [it, fresh] = x.seq_cost.try_emplace({len, sp}, 0.0);
  if (fresh) {
    const cost::SliceShape s{0, len};
    const SpMicroBatch mb = micro_batch(x, sp, std::span<const cost::SliceShape>(&s, 1));
    it->second = fits(mb, x) ? mb.compute + mb.alltoall : kInf;
  }
  return it->second;
}

int64_t capacity_of(Context& x, int64_t sp) {
  auto [it, fresh] = x.capacity.try_emplace(sp, 0);
  if (!fresh) return it->second;
  int64_t lo = 0, hi = 1;
  auto ok = [&](int64_t t) {
    const cost::SliceShape s{0, t};
    return fits(sp_micro_batch(x.cm, x.cfg, sp, std::span<const cost::SliceShape>(&s, 1), 0), x);
  };
  while (ok(hi) && hi < (int64_t{1} << 40)) {
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (ok(mid) ? lo : hi) = mid;
  }
  return it->second = std::max<int64_t>(lo, 1);
}

// Longest first, each to the group that would finish it earliest; false when one fits nowhere.
bool assign(Context& x, std::span<const int64_t> batch, std::span<const int64_t> sizes,
            std::vector<std::vector<int64_t>>& groups) {
  std::vector<int64_t> sorted(batch.begin(), batch.end());
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  std::vector<double> load(sizes.size(), 0.0);
  groups.assign(sizes.size(), {});
  for (int64_t len : sorted) {
    size_t best = sizes.size();
    double best_end = kInf;
    for (size_t g = 0; g < sizes.size(); ++g) {
      const double end = load[g] + sequence_cost(x, len, sizes[g]);
      if (end < best_end) best_end = end, best = g;
    }
    if (best == sizes.size()) return false;
    load[best] = best_end;
    groups[best].push_back(len);
  }
  return true;
}

FlexSpResult evaluate(Context& x, std::span<const int64_t> batch, std::span<const int64_t> sizes,
                      const std::vector<std::vector<int64_t>>& g) {
  FlexSpResult f;
  f.group_sizes.assign(sizes.begin(), sizes.end());
  int64_t act = 0, rounds = 0;
  double slowest = 0, slowest_compute = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    double t = 0, compute = 0;
    const auto mbs = baseline_pack(g[k], capacity_of(x, sizes[k]));
    for (const auto& chunk : mbs) {
      const SpMicroBatch mb = micro_batch(x, sizes[k], chunk);
      t += mb.compute + mb.alltoall;
      compute += mb.compute;
      act = std::max(act, mb.activation_bytes);
    }
    rounds = std::max<int64_t>(rounds, static_cast<int64_t>(mbs.size()));
    f.group_time_s.push_back(t);
    if (t > slowest) slowest = t, slowest_compute = compute;
  }
  BaselineResult& r = f.result;
  const int64_t n = x.cfg.cluster.num_devices;
  r.compute_time_s = slowest_compute;
  r.comm_exposed_s =
      (slowest - slowest_compute) +
      std::max(0.0, static_cast<double>(rounds) * 3 * zero3_collective_time(x.cm, x.cfg) -
                        slowest_compute);
  r.optimizer_time_s = optimizer_seconds(
      x.cm, static_cast<double>(x.cm.model().params_total()) / static_cast<double>(n));
  r.step_time_s = r.compute_time_s + r.comm_exposed_s + r.optimizer_time_s;
  r.peak_memory_bytes = zero3_static_bytes(x.cm, n) + act;
  r.setting = fmt::format("sp groups {}, ZeRO-3", fmt::join(sizes, "+"));
  baseline_finish(x.cm, x.cfg, batch, r);
  return f;
}

// Device-seconds relaxation: see the file comment.
double lower_bound(const Context& x, std::span<const int64_t> batch,
                   std::span<const int64_t> sizes) {
  cost::Coefficients c = x.cm.coefficients();
  c.beta1 = c.half_efficiency_tokens = c.p2p_latency_s = c.p2p_latency_inter_s = 0;
  const cost::CostModel ideal(x.cm.model(), x.cm.device(), c, x.cm.ulysses_degree(), x.cm.bf16());
  const double n = static_cast<double>(x.cfg.cluster.num_devices);
  double work = 0, longest = 0;
  for (int64_t len : batch) {
    const cost::SliceShape s{0, len};
    double area = kInf, fastest = kInf;
    for (int64_t sp : sizes) {
      const SpMicroBatch mb =
          sp_micro_batch(ideal, x.cfg, sp, std::span<const cost::SliceShape>(&s, 1), 0);
      const double t = mb.compute + mb.alltoall;
      area = std::min(area, static_cast<double>(sp) * t);
      fastest = std::min(fastest, t);
    }
    work += area;
    longest = std::max(longest, fastest);
  }
  return std::max(work / n, longest) +
         optimizer_seconds(x.cm, static_cast<double>(x.cm.model().params_total()) / n);
}

void enumerate_splits(std::span<const int64_t> sizes, size_t from, int64_t left,
                      std::vector<int64_t>& split, std::vector<std::vector<int64_t>>& out) {
  if (static_cast<int64_t>(out.size()) >= kMaxSplits) return;
  if (left == 0) {
    out.push_back(split);
    return;
  }
  for (size_t i = from; i < sizes.size(); ++i) {  // sizes largest first: splits non-increasing
    if (sizes[i] > left) continue;
    split.push_back(sizes[i]);
    enumerate_splits(sizes, i, left - sizes[i], split, out);
    split.pop_back();
  }
}

Context make_context(const cost::CostModel& cm, const Config& cfg) {
  Context x(cm, cfg);
  const int64_t budget =
      cfg.training.memory_budget > 0 ? cfg.training.memory_budget : cm.device().memory_bytes;
  x.act_budget = budget - zero3_static_bytes(cm, cfg.cluster.num_devices);
  return x;
}

}  // namespace

std::vector<int64_t> flexsp_group_sizes(const Config& cfg, const ModelConfig& m) {
  const int64_t n = cfg.cluster.num_devices, dpn = cfg.cluster.devices_per_node;
  std::vector<int64_t> out;
  for (int64_t s = 1; s <= n && s <= m.num_attention_heads; s *= 2)
    if ((s <= dpn && dpn % s == 0) || (s > dpn && s % dpn == 0 && n % s == 0)) out.push_back(s);
  std::reverse(out.begin(), out.end());
  return out;
}

FlexSpResult simulate_flexsp_groups(const cost::CostModel& cm, const Config& cfg,
                                    std::span<const int64_t> batch,
                                    std::span<const int64_t> group_sizes) {
  baseline_check_batch(batch, "flexsp");
  const std::vector<int64_t> allowed = flexsp_group_sizes(cfg, cm.model());
  int64_t total = 0;
  for (int64_t s : group_sizes) {
    if (std::find(allowed.begin(), allowed.end(), s) == allowed.end())
      fail_config("flexsp: group size {} is not a power of two inside a node or whole nodes", s);
    total += s;
  }
  if (total != cfg.cluster.num_devices)
    fail_config("flexsp: group sizes add up to {}, not the {} devices", total,
                cfg.cluster.num_devices);
  Context x = make_context(cm, cfg);
  std::vector<int64_t> sizes(group_sizes.begin(), group_sizes.end());
  std::sort(sizes.begin(), sizes.end(), std::greater<>());
  std::vector<std::vector<int64_t>> groups;
  if (!assign(x, batch, sizes, groups))
    fail_config("flexsp: a sequence fits the memory of none of the groups {}",
                fmt::join(sizes, "+"));
  FlexSpResult f = evaluate(x, batch, sizes, groups);
  f.lower_bound_s = lower_bound(x, batch, allowed);
  f.splits_tried = 1;
  return f;
}

FlexSpResult simulate_flexsp(const cost::CostModel& cm, const Config& cfg,
                             std::span<const int64_t> batch) {
  baseline_check_batch(batch, "flexsp");
  const std::vector<int64_t> sizes = flexsp_group_sizes(cfg, cm.model());
  if (sizes.empty()) fail_config("flexsp: no sequence-parallel group size fits these devices");
  Context x = make_context(cm, cfg);
  std::vector<std::vector<int64_t>> splits;
  std::vector<int64_t> split;
  enumerate_splits(sizes, 0, cfg.cluster.num_devices, split, splits);
  for (int64_t s : sizes) {  // the uniform splits, even where the cap on splits cut them off
    std::vector<int64_t> uniform(static_cast<size_t>(cfg.cluster.num_devices / s), s);
    if (cfg.cluster.num_devices % s == 0 &&
        std::find(splits.begin(), splits.end(), uniform) == splits.end())
      splits.push_back(std::move(uniform));
  }
  FlexSpResult best, least;
  bool have_best = false, have_least = false;
  std::vector<std::vector<int64_t>> groups;
  for (const auto& sp : splits) {
    if (!assign(x, batch, sp, groups)) continue;
    FlexSpResult f = evaluate(x, batch, sp, groups);
    if (!f.result.oom && (!have_best || f.result.step_time_s < best.result.step_time_s))
      best = f, have_best = true;
    if (!have_least || f.result.peak_memory_bytes < least.result.peak_memory_bytes)
      least = f, have_least = true;
  }
  if (!have_best && !have_least)
    fail_config("flexsp: some sequence fits no sequence-parallel group's memory");
  FlexSpResult& out = have_best ? best : least;
  out.lower_bound_s = lower_bound(x, batch, sizes);
  out.splits_tried = static_cast<int64_t>(splits.size());
  out.result.setting +=
      fmt::format(", {:.1f}% above the lower bound ({} splits)",
                  100 * (out.result.step_time_s / out.lower_bound_s - 1), out.splits_tried);
  return out;
}

}  // namespace infinipipe::sim
