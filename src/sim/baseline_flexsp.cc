// FlexSP's model. Per micro-batch and group of size s: the group's sequences run as one packed
// chunk with the setting's recomputed layers (sim/baseline_deepspeed.h, sp_micro_batch), so its
// time is that chunk's compute and all-to-alls and its memory must fit what ZeRO-3's states leave
// of the budget. A micro-batch costs its slowest group plus the ZeRO-3 gathers and
// reduce-scatters (over all devices, unit by unit) its compute leaves exposed; the step is the
// sum over micro-batches plus the optimizer. The lower bound relaxes every sequence to its cheapest
// group size in device-seconds at full efficiency, without per-chunk overheads, latencies or lock
// step.
#include "sim/baseline_flexsp.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace infinipipe::sim {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();
constexpr int64_t kMaxSplits = 4096;

struct FlexContext {
  FlexContext(const cost::CostModel& m, const Config& c, const FlexSpSetting& s)
      : cm(m), cfg(c), setting(s) {}
  const cost::CostModel& cm;
  const Config& cfg;
  const FlexSpSetting& setting;
  int64_t act_budget = 0;  // bytes per device left for activations after ZeRO-3's states
  std::map<std::pair<int64_t, int64_t>, double> seq_cost;  // (length, size) -> seconds
  std::map<int64_t, int64_t> capacity;                     // size -> tokens of one chunk
};

FlexContext make_flex_context(const cost::CostModel& cm, const Config& cfg,
                              const FlexSpSetting& setting) {
  FlexContext x(cm, cfg, setting);
  const int64_t budget = cfg.training.memory_budget > 0 ? cfg.training.memory_budget
                                                        : cost::usable_memory_bytes(cm.device());
  x.act_budget = budget - zero3_static_bytes(cm, cfg.cluster.num_devices);
  return x;
}

SpMicroBatch one_chunk(const FlexContext& x, int64_t sp, std::span<const int64_t> lengths) {
  std::vector<cost::SliceShape> chunk;
  for (int64_t len : lengths) chunk.push_back({0, len});
  return sp_micro_batch(x.cm, x.cfg, sp, chunk, x.setting.recompute_layers, 0);  // FSDP
}

double sequence_cost(FlexContext& x, int64_t len, int64_t sp) {
  auto [it, fresh] = x.seq_cost.try_emplace({len, sp}, 0.0);
  if (fresh) {
    const SpMicroBatch mb = one_chunk(x, sp, std::span<const int64_t>(&len, 1));
    it->second = mb.compute + mb.alltoall;
  }
  return it->second;
}

// The most tokens one packed chunk of a group of `sp` holds within the activation budget.
int64_t capacity_of(FlexContext& x, int64_t sp) {
  auto [it, fresh] = x.capacity.try_emplace(sp, 0);
  if (!fresh) return it->second;
  auto ok = [&](int64_t t) {
    return one_chunk(x, sp, std::span<const int64_t>(&t, 1)).activation_bytes <= x.act_budget;
  };
  int64_t lo = 0, hi = 1;
  while (ok(hi) && hi < (int64_t{1} << 40)) lo = hi, hi *= 2;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (ok(mid) ? lo : hi) = mid;
  }
  return it->second = lo;
}

// Times the groups of one micro-batch and picks its slowest; false when a group does not fit.
bool time_micro_batch(const FlexContext& x, FlexSpMicroBatch& mb) {
  bool fits = true;
  mb.slowest = 0;
  for (size_t g = 0; g < mb.groups.size(); ++g) {
    FlexSpGroup& grp = mb.groups[g];
    grp.time_s = grp.compute_s = grp.zero3_exposed_s = 0;
    grp.activation_bytes = 0;
    if (!grp.lengths.empty()) {
      const SpMicroBatch t = one_chunk(x, grp.size, grp.lengths);
      grp.time_s = t.compute + t.alltoall;
      grp.compute_s = t.compute;
      grp.zero3_exposed_s = t.zero3_exposed;
      grp.activation_bytes = t.activation_bytes;
      fits = fits && t.activation_bytes <= x.act_budget;
    }
    if (grp.time_s > mb.groups[mb.slowest].time_s) mb.slowest = g;
  }
  mb.zero_exposed_s = mb.groups[mb.slowest].zero3_exposed_s;
  return fits;
}

// Longest first, each to the group that would finish it earliest among those it still fits.
bool assign(FlexContext& x, std::span<const int64_t> lengths, std::span<const int64_t> sizes,
            FlexSpMicroBatch& mb) {
  mb = {};
  std::vector<double> load(sizes.size(), 0.0);
  std::vector<int64_t> tokens(sizes.size(), 0);
  for (int64_t s : sizes) {
    FlexSpGroup g;
    g.size = s;
    mb.groups.push_back(std::move(g));
  }
  for (int64_t len : lengths) {  // already longest first
    size_t best = sizes.size();
    double best_end = kNever;
    for (size_t g = 0; g < sizes.size(); ++g) {
      if (tokens[g] + len > capacity_of(x, sizes[g])) continue;
      const double end = load[g] + sequence_cost(x, len, sizes[g]);
      if (end < best_end) best_end = end, best = g;
    }
    if (best == sizes.size()) return false;
    load[best] = best_end;
    tokens[best] += len;
    mb.groups[best].lengths.push_back(len);
  }
  return time_micro_batch(x, mb);
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

// Step, breakdown, memory and the setting's words from timed micro-batches.
FlexSpResult finish(const FlexContext& x, std::span<const int64_t> batch,
                    std::vector<FlexSpMicroBatch> mbs, bool fits) {
  FlexSpResult f;
  BaselineResult& r = f.result;
  r.solve_min_s = kFlexSpSolveMinSeconds;
  r.solve_max_s = kFlexSpSolveMaxSeconds;
  r.solve_source = "FlexSP's MILP per batch on CPUs beside the training: its paper, §4.1.3, §5";
  const int64_t n = x.cfg.cluster.num_devices;
  int64_t act = 0;
  for (const FlexSpMicroBatch& mb : mbs) {
    const FlexSpGroup& slow = mb.groups[mb.slowest];
    r.compute_time_s += slow.compute_s;
    r.parts.a2a += slow.time_s - slow.compute_s;
    r.parts.zero += mb.zero_exposed_s;
    for (const FlexSpGroup& g : mb.groups) act = std::max(act, g.activation_bytes);
  }
  r.comm_exposed_s = r.parts.a2a + r.parts.zero;
  r.optimizer_time_s = optimizer_seconds(
      x.cm, static_cast<double>(x.cm.model().params_total()) / static_cast<double>(n));
  r.parts.others = r.compute_time_s + r.optimizer_time_s;
  r.step_time_s = r.parts.total();
  r.peak_memory_bytes = zero3_static_bytes(x.cm, n) + act;
  std::map<std::vector<int64_t>, int> sets;  // distinct group sets, how many micro-batches each
  for (const FlexSpMicroBatch& mb : mbs) {
    std::vector<int64_t> sizes;
    for (const FlexSpGroup& g : mb.groups) sizes.push_back(g.size);
    ++sets[sizes];
  }
  std::vector<std::string> words;
  for (auto it = sets.rbegin(); it != sets.rend(); ++it)
    words.push_back(fmt::format("{}x[{}]", it->second, fmt::join(it->first, "+")));
  r.setting = fmt::format("M={} micro-batches, sp groups {}, {} layers recomputed, ZeRO-3",
                          mbs.size(), fmt::join(words, " "), x.setting.recompute_layers);
  baseline_finish(x.cm, x.cfg, batch, r);
  if (!fits && !r.oom) {
    r.oom = true;
    r.reason = fmt::format("a group's activations exceed the {} left after ZeRO-3's states",
                           format_bytes(x.act_budget));
  }
  f.micro_batches = std::move(mbs);
  return f;
}

// Device-seconds relaxation: see the file comment.
double lower_bound(const FlexContext& x, std::span<const int64_t> batch,
                   std::span<const int64_t> sizes) {
  cost::Coefficients c = x.cm.coefficients();
  c.beta1 = c.half_efficiency_tokens = 0;
  for (auto* rows : {&c.collectives.intra, &c.collectives.inter})
    for (cost::CollectiveCost& r : *rows) r.call_latency_s = r.step_latency_s = 0;
  const cost::CostModel ideal = x.cm.with_coefficients(c);
  const double n = static_cast<double>(x.cfg.cluster.num_devices);
  double work = 0, longest = 0;
  for (int64_t len : batch) {
    const cost::SliceShape s{0, len};
    double area = kNever, fastest = kNever;
    for (int64_t sp : sizes) {
      const SpMicroBatch mb =
          sp_micro_batch(ideal, x.cfg, sp, std::span(&s, 1), x.setting.recompute_layers, 0);
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

void check_setting(const cost::CostModel& cm, std::span<const int64_t> batch,
                   const FlexSpSetting& s) {
  baseline_check_batch(batch, "flexsp");
  if (s.recompute_layers < 0 || s.recompute_layers > cm.model().num_layers)
    fail_config("flexsp: recompute layers {} must be in [0, {}]", s.recompute_layers,
                cm.model().num_layers);
  if (s.extra_micro_batches < 0)
    fail_config("flexsp: extra micro-batch counts {} must be >= 0", s.extra_micro_batches);
}

}  // namespace

FlexSpSetting flexsp_paper_setting(const ModelConfig& model) {
  return {.recompute_layers = zero3_paper_recompute_layers(model), .extra_micro_batches = 4};
}

std::vector<int64_t> flexsp_group_sizes(const Config& cfg, const ModelConfig& m) {
  const int64_t n = cfg.cluster.num_devices, dpn = cfg.cluster.devices_per_node;
  std::vector<int64_t> out;
  for (int64_t s = 1; s <= n && s <= m.num_attention_heads; s *= 2)
    if ((s <= dpn && dpn % s == 0) || (s > dpn && s % dpn == 0 && n % s == 0)) out.push_back(s);
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::vector<int64_t>> flexsp_micro_batches(std::span<const int64_t> batch, int64_t m) {
  std::vector<int64_t> a(batch.begin(), batch.end());
  std::sort(a.begin(), a.end(), std::greater<>());
  const size_t n = a.size();
  const size_t k_max = static_cast<size_t>(std::clamp<int64_t>(m, 1, static_cast<int64_t>(n)));
  std::vector<int64_t> prefix(n + 1, 0);
  for (size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + a[i];
  // best[k][i]: the smallest largest sum cutting the first i sequences into k runs.
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  std::vector<std::vector<int64_t>> best(k_max + 1, std::vector<int64_t>(n + 1, kNone));
  std::vector<std::vector<size_t>> cut(k_max + 1, std::vector<size_t>(n + 1, 0));
  best[0][0] = 0;
  for (size_t k = 1; k <= k_max; ++k)
    for (size_t i = k; i <= n; ++i)
      for (size_t j = k - 1; j < i; ++j) {
        if (best[k - 1][j] == kNone) continue;
        const int64_t worst = std::max(best[k - 1][j], prefix[i] - prefix[j]);
        if (worst < best[k][i]) best[k][i] = worst, cut[k][i] = j;
      }
  std::vector<std::vector<int64_t>> out(k_max);
  for (size_t k = k_max, i = n; k > 0; --k) {
    const size_t j = cut[k][i];
    out[k - 1].assign(a.begin() + static_cast<std::ptrdiff_t>(j),
                      a.begin() + static_cast<std::ptrdiff_t>(i));
    i = j;
  }
  return out;
}

FlexSpResult flexsp_evaluate(const cost::CostModel& cm, const Config& cfg,
                             std::span<const int64_t> batch,
                             std::vector<std::vector<FlexSpGroup>> plan,
                             const FlexSpSetting& setting) {
  check_setting(cm, batch, setting);
  const std::vector<int64_t> allowed = flexsp_group_sizes(cfg, cm.model());
  std::vector<int64_t> planned;
  for (const auto& groups : plan) {
    int64_t total = 0;
    for (const FlexSpGroup& g : groups) {
      if (std::find(allowed.begin(), allowed.end(), g.size) == allowed.end())
        fail_config("flexsp: group size {} is not a power of two inside a node or whole nodes",
                    g.size);
      total += g.size;
      planned.insert(planned.end(), g.lengths.begin(), g.lengths.end());
    }
    if (total != cfg.cluster.num_devices)
      fail_config("flexsp: a micro-batch's group sizes add up to {}, not the {} devices", total,
                  cfg.cluster.num_devices);
  }
  std::vector<int64_t> want(batch.begin(), batch.end());
  std::sort(want.begin(), want.end());
  std::sort(planned.begin(), planned.end());
  if (planned != want)
    fail_config("flexsp: the plan's sequences are not the batch's ({} planned, {} in the batch)",
                planned.size(), want.size());
  const FlexContext x = make_flex_context(cm, cfg, setting);
  std::vector<FlexSpMicroBatch> mbs;
  bool fits = true;
  for (auto& groups : plan) {
    FlexSpMicroBatch mb;
    mb.groups = std::move(groups);
    fits = time_micro_batch(x, mb) && fits;
    mbs.push_back(std::move(mb));
  }
  FlexSpResult f = finish(x, batch, std::move(mbs), fits);
  f.lower_bound_s = lower_bound(x, batch, allowed);
  return f;
}

FlexSpResult simulate_flexsp(const cost::CostModel& cm, const Config& cfg,
                             std::span<const int64_t> batch, const FlexSpSetting& setting) {
  check_setting(cm, batch, setting);
  const std::vector<int64_t> sizes = flexsp_group_sizes(cfg, cm.model());
  if (sizes.empty()) fail_config("flexsp: no sequence-parallel group size fits these devices");
  FlexContext x = make_flex_context(cm, cfg, setting);
  std::vector<std::vector<int64_t>> splits;
  std::vector<int64_t> split;
  enumerate_splits(sizes, 0, cfg.cluster.num_devices, split, splits);

  // M_min: the batch's tokens over what the whole cluster holds in one micro-batch.
  int64_t total = 0, cluster = 0;
  for (int64_t len : batch) total += len;
  for (int64_t s : sizes)
    if (cfg.cluster.num_devices % s == 0)
      cluster = std::max(cluster, capacity_of(x, s) * (cfg.cluster.num_devices / s));
  const int64_t longest = *std::max_element(batch.begin(), batch.end());
  FlexSpResult best;
  best.lower_bound_s = lower_bound(x, batch, sizes);
  best.splits_tried = static_cast<int64_t>(splits.size());
  best.result.setting = fmt::format("{} layers recomputed, ZeRO-3", setting.recompute_layers);
  if (cluster <= 0 || longest > capacity_of(x, sizes.front())) {
    best.result.oom = true;
    best.result.memory_budget_bytes =
        x.act_budget + zero3_static_bytes(cm, cfg.cluster.num_devices);
    best.result.reason = fmt::format(
        "a {}-token sequence does not fit a group of {} devices with {} layers recomputed", longest,
        sizes.front(), setting.recompute_layers);
    return best;
  }
  const int64_t n = static_cast<int64_t>(batch.size());
  const int64_t m_min = std::min(n, std::max<int64_t>(1, (total + cluster - 1) / cluster));
  bool have = false;
  for (int64_t m = m_min; m <= std::min(n, m_min + setting.extra_micro_batches); ++m) {
    std::vector<FlexSpMicroBatch> mbs;
    bool fits = true;
    for (const std::vector<int64_t>& lengths : flexsp_micro_batches(batch, m)) {
      FlexSpMicroBatch pick, trial;
      bool found = false;
      for (const std::vector<int64_t>& sp : splits)
        if (assign(x, lengths, sp, trial) && (!found || trial.time_s() < pick.time_s()))
          pick = trial, found = true;
      if (!found) {
        fits = false;
        break;
      }
      mbs.push_back(std::move(pick));
    }
    if (!fits) continue;
    FlexSpResult f = finish(x, batch, std::move(mbs), true);
    if (!have || f.result.step_time_s < best.result.step_time_s) {
      f.lower_bound_s = best.lower_bound_s;
      f.splits_tried = best.splits_tried;
      best = std::move(f);
      have = true;
    }
  }
  best.min_micro_batches = m_min;
  if (!have) {
    best.result.oom = true;
    best.result.reason =
        fmt::format("no micro-batch count from {} to {} lets every micro-batch's groups fit", m_min,
                    m_min + setting.extra_micro_batches);
    return best;
  }
  best.result.setting += fmt::format(" (M from {}), {:.1f}% above the lower bound", m_min,
                                     100 * (best.result.step_time_s / best.lower_bound_s - 1));
  return best;
}

}  // namespace infinipipe::sim
