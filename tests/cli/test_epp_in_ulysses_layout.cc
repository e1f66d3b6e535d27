// EPP at pp 1 in the tuned Ulysses baseline's own layout (Ulysses degree = the baseline's sp,
// the same dp) on the twelve paper settings (examples/llama{7b,13b,30b}-{48k,96k}.yaml x github /
// commoncrawl, A800 preset, one global batch each). With ZeRO-3, the baseline's model states,
// the same devices hold the same bytes and move them over the same links, and without a
// pipeline there is no bubble: EPP must be at least as fast on every setting (ZeRO-3 is also the
// examples' default, the paper's "Tailored FSDP"). ZeRO-1 is printed for comparison only: it keeps
// weights and fp32 gradients whole (13B and 30B do not fit one device) and all-reduces them once
// after the step, unhidden.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/example_config.h"
#include "data/lengths.h"
#include "profile/profile.h"
#include "sim/layout_search.h"
#include "sim/ulysses.h"

namespace infinipipe {
namespace {

TEST(EppInUlyssesLayout, AtLeastAsFastAsTunedUlyssesOnThePaperSettings) {
  std::string report;
  for (const char* example : {"llama7b-48k", "llama7b-96k", "llama13b-48k", "llama13b-96k",
                              "llama30b-48k", "llama30b-96k"})
    for (const char* dist : {"github", "commoncrawl"}) {
      Config cfg = testing::example_config(example);
      const std::string key = fmt::format("{} {}", example, dist);
      // The batch `simulate --distribution DIST` plans at --iteration 0.
      std::vector<int64_t> batch =
          data::lengths_synthetic(dist, cfg.training.global_batch_size, cfg.model.seq_length,
                                  static_cast<uint64_t>(cfg.training.seed));
      for (int64_t& len : batch) len = std::min(len, cfg.model.seq_length);
      const cost::CostModel cm = profile::planning_cost_model(cfg);
      const sim::UlyssesResult u = sim::simulate_ulysses(cm, cfg, batch);
      ASSERT_FALSE(u.oom) << key << ": " << u.reason;
      // EPP's Ulysses groups stay inside a node: the baseline's choice must be such a layout.
      ASSERT_LE(u.setting.sp_degree, cfg.cluster.devices_per_node) << key;

      sim::LayoutSpace space;
      space.num_devices = cfg.cluster.num_devices;
      space.devices_per_node = cfg.cluster.devices_per_node;
      const sim::Layout layout{.pp = 1,
                               .vpp = 1,
                               .ulysses = u.setting.sp_degree,
                               .dp = u.dp_degree,
                               .schedule = Schedule::epp};
      const std::vector<std::vector<int64_t>> batches = {batch};
      report += fmt::format("{}: ulysses sp {} x dp {} {:.3f} s;", key, u.setting.sp_degree,
                            u.dp_degree, u.step_time_s);
      for (int64_t zero : {1, 3}) {
        cfg.parallel.zero_stage = zero;
        const sim::LayoutResult r = sim::layout_evaluate(cfg, cm, space, layout, batches);
        if (!r.feasible) {
          // ZeRO-1 keeps every weight and gradient whole: 13B and 30B do not fit one device.
          EXPECT_EQ(zero, 1) << key << ": " << r.reason;
          report += fmt::format(" epp zero-{} {}", zero, r.reason);
          continue;
        }
        report += fmt::format(" epp zero-{} {:.3f} s ({:.3f}x, {})", zero, r.mean_step_s,
                              u.step_time_s / r.mean_step_s, r.setting);
        if (zero == 3) {
          EXPECT_LE(r.mean_step_s, u.step_time_s) << key;
        }
      }
      report += "\n";
    }
  std::printf("%s", report.c_str());
}

}  // namespace
}  // namespace infinipipe
