#include "plan/stage_layout.h"

#include <algorithm>
#include <bit>
#include <numeric>

#include "core/error.h"

namespace infinipipe::plan {
namespace {

std::vector<StageSpec> specs_from_counts(std::span<const int64_t> counts, int32_t pp) {
  std::vector<StageSpec> out(counts.size());
  int64_t first = 0;
  for (size_t s = 0; s < counts.size(); ++s) {
    StageSpec& st = out[s];
    st.index = static_cast<int32_t>(s);
    st.rank = static_cast<int32_t>(s % pp);
    st.first_layer = first;
    st.num_layers = counts[s];
    st.has_embedding = s == 0;
    st.has_lm_head = s + 1 == counts.size();
    first += counts[s];
  }
  return out;
}

void check_degrees(int64_t num_layers, int32_t pp, int32_t vpp) {
  if (pp < 1 || vpp < 1) fail_config("pp = {} and vpp = {} must be >= 1", pp, vpp);
  if (num_layers < int64_t{pp} * vpp)
    fail_config("{} layers cannot fill pp*vpp = {} stages: use fewer pipeline or virtual stages",
                num_layers, int64_t{pp} * vpp);
}

}  // namespace

std::vector<StageSpec> stage_layout_uniform(int64_t num_layers, int32_t pp, int32_t vpp) {
  check_degrees(num_layers, pp, vpp);
  const int64_t ns = int64_t{pp} * vpp;
  if (num_layers % ns != 0)
    fail_config(
        "{} layers do not split evenly over pp*vpp = {} stages (Megatron-LM's rule for "
        "virtual stages): choose pp and vpp whose product divides the layer count",
        num_layers, ns);
  std::vector<int64_t> counts(ns, num_layers / ns);
  return specs_from_counts(counts, pp);
}

std::vector<StageSpec> stage_layout_forced(std::span<const int64_t> layers_per_stage,
                                           int64_t num_layers, int32_t pp, int32_t vpp) {
  check_degrees(num_layers, pp, vpp);
  const size_t ns = static_cast<size_t>(pp) * vpp;
  if (layers_per_stage.size() != ns)
    fail_config("the forced layer split lists {} stages, the pipeline has pp*vpp = {}",
                layers_per_stage.size(), ns);
  for (size_t s = 0; s < ns; ++s)
    if (layers_per_stage[s] <= 0)
      fail_config("the forced layer split gives stage {} {} layers; every stage needs at least 1",
                  s, layers_per_stage[s]);
  int64_t sum = std::accumulate(layers_per_stage.begin(), layers_per_stage.end(), int64_t{0});
  if (sum != num_layers)
    fail_config("the forced layer split sums to {} layers, the model has {}", sum, num_layers);
  return specs_from_counts(layers_per_stage, pp);
}

std::vector<StageSpec> stage_layout_by_cost(const cost::CostModel& cost, int32_t pp, int32_t vpp,
                                            std::span<const cost::SliceShape> reference) {
  const int64_t L = cost.model().num_layers;
  check_degrees(L, pp, vpp);
  if (vpp > 1) return stage_layout_uniform(L, pp, vpp);
  std::vector<cost::SliceShape> ref(reference.begin(), reference.end());
  if (ref.empty()) ref.push_back({0, cost.model().seq_length, true});
  auto time = [&](int32_t s, int64_t n) {
    cost::StageShape st{n, s == 0, s == pp - 1, s};  // vpp 1: stage s runs on rank s
    return cost.forward_time(ref, st) + cost.backward_time(ref, st);
  };
  // Most layers stage s can take within time T (times grow with the layer count).
  const int64_t max_per_stage = L - (pp - 1);
  auto capacity = [&](int32_t s, double T) {
    int64_t lo = 0, hi = max_per_stage;  // largest n in [0, hi] with time <= T
    while (lo < hi) {
      int64_t mid = (lo + hi + 1) / 2;
      if (time(s, mid) <= T)
        lo = mid;
      else
        hi = mid - 1;
    }
    return lo;
  };
  auto feasible = [&](double T) {
    int64_t total = 0;
    for (int32_t s = 0; s < pp; ++s) {
      int64_t c = capacity(s, T);
      if (c < 1) return false;
      total += c;
    }
    return total >= L;
  };
  // The optimum is the smallest stage time T at which the split is feasible. Feasibility only
  // changes at stage times, so bisecting T over the ordered bit patterns of the doubles finds it
  // exactly in at most 64 steps, without listing pp x L candidates (L may be large).
  double longest = 0;
  for (int32_t s = 0; s < pp; ++s) longest = std::max(longest, time(s, max_per_stage));
  uint64_t lo = 0, hi = std::bit_cast<uint64_t>(longest);  // bits of 0.0 and of the longest
  if (feasible(0.0)) hi = 0;
  while (hi - lo > 1) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (feasible(std::bit_cast<double>(mid)))
      hi = mid;
    else
      lo = mid;
  }
  const double T = std::bit_cast<double>(hi);
  std::vector<int64_t> counts(pp);
  int64_t total = 0;
  for (int32_t s = 0; s < pp; ++s) total += counts[s] = capacity(s, T);
  // Give back the surplus from the slowest stages first (keeps the split balanced).
  while (total > L) {
    int32_t worst = -1;
    for (int32_t s = 0; s < pp; ++s)
      if (counts[s] > 1 && (worst < 0 || time(s, counts[s]) > time(worst, counts[worst])))
        worst = s;
    --counts[worst];
    --total;
  }
  return specs_from_counts(counts, pp);
}

std::vector<StageSpec> stage_layout_planned(const Config& cfg, const cost::CostModel& cost,
                                            int32_t pp, int32_t vpp) {
  if (cfg.parallel.stage_layers.empty()) return stage_layout_by_cost(cost, pp, vpp);
  return stage_layout_forced(cfg.parallel.stage_layers, cost.model().num_layers, pp, vpp);
}

}  // namespace infinipipe::plan
