#include "setup/layout_search_base.h"

#include <thread>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "core/parallel_auto.h"

namespace infinipipe::setup {

int search_threads(int64_t threads) {
  if (threads < 0 || threads > 4096)
    fail_config("--search-threads must be 0 (every core) or 1..4096, got {}", threads);
  if (threads > 0) return static_cast<int>(threads);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

Config validate_except_layout(const Config& raw) {
  Config base = raw;
  base.parallel.pipeline_parallel = base.parallel.data_parallel = 1;
  base.parallel.ulysses_degree = base.parallel.virtual_stages = 1;
  base.parallel.layers_per_virtual_stage = 0;
  base.parallel.schedule = Schedule::epp;
  base.cluster.num_devices = base.cluster.devices_per_node = 1;
  base.parallel.outlier_delay = false;  // it needs dp >= 2, checked with each layout's dp
  base.validate();
  base.parallel.outlier_delay = raw.parallel.outlier_delay;
  return base;
}

void outlier_delay_check_before_search(const Config& raw) {
  if (!raw.parallel.outlier_delay) return;
  const int64_t dp = raw.parallel.data_parallel;
  if (dp == kAutoDegree)
    fail_config(
        "--outlier-delay reorders the batches by data-parallel-size, which auto leaves to the "
        "layout search: give --dp N (N >= 2), or drop --outlier-delay");
  // The delay weighs sequences at the layout's pipeline (its ranks' layers and memory,
  // plan::ReplicaSplitCost), so its batches are not known before pp and vpp are.
  if (raw.parallel.pipeline_parallel == kAutoDegree || raw.parallel.virtual_stages == kAutoDegree)
    fail_config(
        "--outlier-delay weighs sequences at the layout's pipeline (its stages' layers and "
        "memory), which auto leaves to the layout search: give --pp N and --vpp N, or drop "
        "--outlier-delay");
  // The delay's own checks, at the layout of dp replicas of one device each.
  Config probe = validate_except_layout(raw);
  probe.parallel.data_parallel = dp;
  probe.cluster.num_devices = probe.cluster.devices_per_node = dp;
  probe.validate();
}

Config validate_keeping_auto(const Config& raw) {
  const ParallelConfig& p = raw.parallel;
  if (p.layers_per_virtual_stage > 0 && parallel_has_auto(p))
    fail_config(
        "num-layers-per-virtual-pipeline-stage fixes the virtual stages by the pipeline size, "
        "which auto leaves to the layout search: give virtual-pipeline-model-parallel-size N (or "
        "auto) instead");
  const std::pair<int64_t, const char*> degrees[] = {
      {p.pipeline_parallel, "pipeline-model-parallel-size"},
      {p.data_parallel, "data-parallel-size"},
      {p.virtual_stages, "virtual-pipeline-model-parallel-size"},
      {p.ulysses_degree, "ulysses-degree"}};
  for (const auto& [value, key] : degrees)
    if (value != kAutoDegree && value < 1)
      fail_config("{} must be a positive integer or auto, got {}", key, value);
  Config out = validate_except_layout(raw);
  outlier_delay_check_before_search(raw);
  out.parallel.pipeline_parallel = p.pipeline_parallel;
  out.parallel.data_parallel = p.data_parallel;
  out.parallel.virtual_stages = p.virtual_stages;
  out.parallel.ulysses_degree = p.ulysses_degree;
  out.parallel.schedule = p.schedule;
  out.cluster = raw.cluster;  // 0 devices: train's world size
  out.cluster.validate();
  return out;
}

Config layout_search_base(const options::ConfigOptions& options, const Config& defaults,
                          int64_t devices, sim::LayoutSpace& space) {
  const Config raw = options::resolve_config(options, defaults, false);
  const ParallelConfig& p = raw.parallel;
  if (devices == 0) devices = raw.cluster.num_devices;
  if (devices == 0) {
    if (parallel_has_auto(p))
      fail_config("the layout search needs the device count: give --num-devices N");
    const ParallelConfig degrees = [&] {
      ParallelConfig d;
      d.pipeline_parallel = p.pipeline_parallel;
      d.data_parallel = p.data_parallel;
      d.ulysses_degree = p.ulysses_degree;
      return d;
    }();
    degrees.validate();  // positive and bounded, so their product is the device count
    devices = degrees.world_size();
  }
  ClusterConfig cluster = raw.cluster;
  cluster.num_devices = devices;
  if (cluster.devices_per_node == 0) cluster.devices_per_node = devices;
  cluster.validate();
  space.num_devices = cluster.num_devices;
  space.devices_per_node = cluster.devices_per_node;
  // Each searched layout is validated again as it is evaluated.
  Config base = validate_except_layout(raw);
  base.cluster = cluster;
  return base;
}

}  // namespace infinipipe::setup
