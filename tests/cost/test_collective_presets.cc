// Each row of the GPU presets' collective tables is the number its source gives (or the stated
// arithmetic on it); docs/cost-model.md, "Collective costs", lists the same rows and sources.
#include <gtest/gtest.h>

#include <string>

#include "cost/cost_model.h"

namespace infinipipe::cost {
namespace {

using C = Collective;

struct Pinned {
  C op;
  bool inter;
  double call_s, step_s, bus_bandwidth;
  const char* cites;  // a part of the row's source
};

void expect_rows(const char* preset, std::initializer_list<Pinned> rows) {
  const CollectiveTable t = device_preset(preset, true).collectives;
  for (const Pinned& p : rows) {
    const CollectiveCost& r = t.row(p.op, p.inter);
    const std::string what =
        std::string(preset) + (p.inter ? " inter " : " intra ") + collective_name(p.op);
    EXPECT_DOUBLE_EQ(r.call_latency_s, p.call_s) << what;
    EXPECT_DOUBLE_EQ(r.step_latency_s, p.step_s) << what;
    EXPECT_DOUBLE_EQ(r.bus_bandwidth, p.bus_bandwidth) << what;
    EXPECT_NE(r.source.find(p.cites), std::string::npos) << what << ": " << r.source;
  }
}

TEST(CollectiveTable, A800RowsAreTheirSources) {
  // Inside a node: the A800 all-reduce (1 GiB in 12.369 ms: 1.75 x 2^30 B / 12.369 ms), the
  // others by measured ratios; latency fitted to A100's 10.14 us (n = 2) and 43.83 us (n = 8).
  EXPECT_NEAR(1.75 * 1073741824 / 12.369e-3, 151.9e9, 0.05e9);
  EXPECT_NEAR(151.9e9 * 361.4 / 367.2, 149.5e9, 0.05e9);
  EXPECT_NEAR(151.9e9 * 362.9 / 367.2, 150.1e9, 0.05e9);
  EXPECT_NEAR(151.9e9 * 195.1 / 230.8, 128.4e9, 0.05e9);
  EXPECT_NEAR(195.1e9 * 200 / 300, 130.1e9, 0.05e9);
  // The fitted latencies are rounded (4.525 -> 4.5 us, 2.8075 -> 2.8; 18.264 -> 18.3, 0.818 ->
  // 0.82): the fitted points are met within the rounding.
  EXPECT_NEAR(4.5e-6 + 2 * 2.8e-6, 10.14e-6, 0.1e-6);
  EXPECT_NEAR(4.5e-6 + 14 * 2.8e-6, 43.83e-6, 0.2e-6);
  // Across nodes: Galvatron's 2-node profile (44.682 MiB/ms per node of 8; p2p 7.65998 MiB/ms),
  // FlexSP's all-to-all (5.94 GB/s buffer over time at 32, 24 of 32 peers off the node);
  // latency fitted to 19.90 us (n = 2) and 23.99 us (reduce-scatter, n = 8).
  EXPECT_NEAR(44.682 * 1.048576e9, 46.85e9, 0.01e9);
  EXPECT_NEAR(7.65998 * 1.048576e9, 8.032e9, 0.001e9);
  EXPECT_NEAR(18.3e-6 + 2 * 0.82e-6, 19.90e-6, 0.1e-6);
  EXPECT_NEAR(18.3e-6 + 7 * 0.82e-6, 23.99e-6, 0.1e-6);
  expect_rows("a800-80gb",
              {{C::all_reduce, false, 4.5e-6, 2.8e-6, 151.9e9, "12.369 ms"},
               {C::all_gather, false, 4.5e-6, 2.8e-6, 149.5e9, "inferred"},
               {C::reduce_scatter, false, 4.5e-6, 2.8e-6, 150.1e9, "inferred"},
               {C::all_to_all, false, 80e-6, 0, 128.4e9, "sp_time_1nodes_8gpus_per_node"},
               {C::send_recv, false, 3.7e-6, 0, 130.1e9, "li-plus/playground"},
               {C::all_reduce, true, 18.3e-6, 0.82e-6, 46.85e9 / 8, "44.682 MiB/ms"},
               {C::all_gather, true, 18.3e-6, 0.82e-6, 46.85e9 / 8, "inferred"},
               {C::reduce_scatter, true, 18.3e-6, 0.82e-6, 46.85e9 / 8, "inferred"},
               {C::all_to_all, true, 18.3e-6, 0, 5.94e9 * 24 / 32, "flexsp_solver"},
               {C::send_recv, true, 18.3e-6 + 0.82e-6, 0, 8.032e9, "pp_size_2"}});
}

TEST(CollectiveTable, HopperRowsAreTheirSources) {
  for (const char* preset : {"h100-80gb", "h200-141gb"})
    expect_rows(preset,
                {{C::all_reduce, false, 12.9e-6, 0, 367.2e9, "NCCL_NVLS_ENABLE=0"},
                 {C::all_gather, false, 12.9e-6, 0, 361.4e9, "361.4"},
                 {C::reduce_scatter, false, 12.9e-6, 0, 362.9e9, "362.9"},
                 {C::all_to_all, false, 58.1e-6, 0, 334.9e9, "NVIDIA/nccl#2169"},
                 {C::send_recv, false, 3.7e-6, 0, 370e9, "NVIDIA/nccl-tests#212"},
                 {C::all_reduce, true, 18.3e-6, 0.82e-6, 364.65e9 / 8, "364.65"},
                 {C::all_gather, true, 18.3e-6, 0.82e-6, 360e9 / 8, "inferred"},
                 {C::reduce_scatter, true, 18.3e-6, 0.82e-6, 360e9 / 8, "NVIDIA/nccl#1229"},
                 {C::all_to_all, true, 18.3e-6, 0, 48.5e9, "NVIDIA/nccl-tests#267"},
                 {C::send_recv, true, 18.3e-6 + 0.82e-6, 0, 47e9, "NVIDIA/nccl-tests#290"}});
}

// The cpu preset keeps its measured links: OpenMPI shared memory 8 GB/s, 5 us; TCP 1 GB/s, 50 us.
TEST(CollectiveTable, CpuRowsAreItsLinks) {
  const CollectiveTable t = device_preset("cpu", false).collectives;
  EXPECT_EQ(t.row(C::all_reduce, false).bus_bandwidth, 8e9);
  EXPECT_EQ(t.row(C::all_reduce, false).step_latency_s, 5e-6);
  EXPECT_EQ(t.row(C::all_to_all, false).call_latency_s, 5e-6);
  EXPECT_EQ(t.row(C::send_recv, true).bus_bandwidth, 1e9);
  EXPECT_EQ(t.row(C::send_recv, true).call_latency_s, 50e-6);
  EXPECT_EQ(t.row(C::all_gather, true).step_latency_s, 50e-6);
}

}  // namespace
}  // namespace infinipipe::cost
