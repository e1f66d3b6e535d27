// A calibration file (`--calibration`), then the cost model built from it, and with measured host
// links each replica's pipeline links and a stage's all-reduce priced on them.
#include <algorithm>

#include "cost/calibration.h"
#include "cost/cost_model.h"
#include "cost/host_link_table.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace infinipipe;
  try {
    const cost::Calibration c =
        cost::calibration_from_json(fuzz::fuzz_text(data, size), "calibration.json");
    const cost::CostModel m(c.model, c.device, c.coeffs, c.ulysses_degree, c.bf16);
    const cost::SliceShape slice{0, c.model.seq_length, true};
    (void)m.forward_time({&slice, 1}, {c.model.num_layers, true, true});
    if (!c.host_links.empty()) {
      const cost::CostModel linked = m.with_host_links(c.host_links);
      // A job the table can hold: the measured one, else up to 64 of its slots.
      const cost::HostLinkTable& t = c.host_links;
      const int64_t ranks = t.host_of_rank.empty() ? std::min<int64_t>(t.slots(), 64)
                                                   : static_cast<int64_t>(t.host_of_rank.size());
      cost::RankGrid grid;
      grid.pp = ranks % 2 == 0 ? 2 : 1;
      grid.dp = ranks / grid.pp;
      grid.order = ranks % 4 == 0 ? RankOrder::pipelines : RankOrder::megatron;
      const cost::CostModel replica = linked.with_replica_links(grid, grid.dp - 1);
      (void)replica.p2p_time_between(1 << 20, 0, static_cast<int32_t>(grid.pp - 1), true);
      (void)cost::host_allreduce_time(t, linked.coefficients(), grid, grid.pp - 1, 1e6);
    }
  } catch (const Error&) {
  }
  return 0;
}
