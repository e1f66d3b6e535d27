#include "cost/collective_presets.h"

#include <string>

namespace infinipipe::cost {
namespace {

using C = Collective;

// A100 nccl-tests small all-reduces as call + 2(n−1)·step: 10.14 us at n = 2 (32 B) and 43.83 us
// at n = 8 (32 KiB) give 4.5 us a call and 2.8 us a step.
constexpr const char* kNvlinkLatency =
    "latency: call + 2(n-1) steps fitted to A100 all-reduces of 10.14 us at n=2, 32 B "
    "(NVIDIA/nccl#583) and 43.83 us at n=8, 32 KiB (stas00/ml-engineering network/README.md)";
// Across nodes, A100 on HDR: a 2-rank all-reduce of 8 B, 19.90 us (NVIDIA/nccl-tests#150), and a
// reduce-scatter over 2 nodes x 4 of 512 B, 23.99 us (NVIDIA/nccl-tests#128): 18.3 us a call,
// 0.82 us a step.
constexpr double kIbCall = 18.3e-6, kIbStep = 0.82e-6;
constexpr const char* kIbLatency =
    "latency: call + steps fitted to A100 HDR all-reduce, n=2 over 2 nodes, 8 B, 19.90 us "
    "(NVIDIA/nccl-tests#150) and reduce-scatter over 2 nodes x 4, 512 B, 23.99 us "
    "(NVIDIA/nccl-tests#128)";

std::string with(const char* row, const char* latency) {
  return std::string(row) + "; " + latency;
}

// Hetu-Galvatron's profiled overlap slowdown (the larger of compute's and communication's
// slowdown when the two overlap); its docs give 1.1-1.3 as typical.
void galvatron_overlap(CollectiveTable& t) {
  t.overlap_slowdown = 1.125552573612729;
  t.overlap_source =
      "Hetu-Galvatron galvatron/profile_hardware/hardware_configs/overlap_coefficient.json "
      "(overlap_coe 1.1256, the GPU not stated; its profiler takes the larger of the compute's "
      "and the all-reduce's slowdown when they overlap)";
}

}  // namespace

CollectiveTable a800_collectives() {
  CollectiveTable t;
  galvatron_overlap(t);
  // Inside a node. The one A800 measurement is an 8-GPU all-reduce; the other rows scale it by
  // ratios measured on other GPUs with NVLink and NVSwitch.
  constexpr double ar = 151.9e9;
  t.row(C::all_reduce, false) = {
      4.5e-6, 2.8e-6, ar,
      with("A800 x8 all-reduce of 1 GiB in 12.369 ms, busbw 151.9 GB/s (NCCL 2.21.5, 'GPU NCCL "
           "All-Reduce 性能测试报告', CNSim alignment report, 2026-03-18)",
           kNvlinkLatency)};
  t.row(C::all_gather, false) = {
      4.5e-6, 2.8e-6, 149.5e9,
      with("inferred: A800 all-reduce 151.9 GB/s x H200 ring all-gather / all-reduce busbw "
           "361.4 / 367.2 (stas00/ml-engineering network/README.md, NCCL 2.27.7)",
           kNvlinkLatency)};
  t.row(C::reduce_scatter, false) = {
      4.5e-6, 2.8e-6, 150.1e9,
      with("inferred: A800 all-reduce 151.9 GB/s x H200 ring reduce-scatter / all-reduce busbw "
           "362.9 / 367.2 (stas00/ml-engineering network/README.md, NCCL 2.27.7)",
           kNvlinkLatency)};
  t.row(C::all_to_all, false) = {
      80e-6, 0, 128.4e9,
      "inferred: A800 all-reduce 151.9 GB/s x all-to-all / all-reduce busbw 195.1 / 230.8 at "
      "1 GiB on 8 A100-class GPUs; 80 us a call from the same profile's line fit, 65-104 us "
      "(Hetu-Galvatron galvatron/profile_hardware/hardware_configs/"
      "sp_time_1nodes_8gpus_per_node.json)"};
  t.row(C::send_recv, false) = {
      3.7e-6, 0, 130.1e9,
      "inferred: A100 sendrecv of 1 GiB around 8 GPUs, busbw 195.1 GB/s (li-plus/playground "
      "cuda/nccl.md) x NVLink 200 / 300 GB/s; latency: H800 (A800's NVLink budget) sendrecv of "
      "1 KB, 3.7 us (NVIDIA/nccl#1984)"};
  // Across nodes: one device's share of its node's NICs, from Hetu-Galvatron's profiles of 8-GPU
  // nodes with 2 HCAs (the paper's group's cluster, the closest to its 400 Gb/s per node).
  constexpr double ring = 46.85e9 / 8;
  const char* ring_source =
      "Hetu-Galvatron allreduce_bandwidth_2nodes_8gpus_per_node.json: 16-GPU all-reduce of "
      "32 MiB, 44.682 MiB/ms = busbw 46.85 GB/s per node of 8";
  t.row(C::all_reduce, true) = {kIbCall, kIbStep, ring, with(ring_source, kIbLatency)};
  t.row(C::all_gather, true) = {
      kIbCall, kIbStep, ring,
      std::string("inferred: the all-reduce's (rings move the same bytes per NIC): ") +
          ring_source + "; " + kIbLatency};
  t.row(C::reduce_scatter, true) = t.row(C::all_gather, true);
  t.row(C::all_to_all, true) = {
      kIbCall, 0, 5.94e9 * 24 / 32,
      "FlexSP's measured all-to-all over 4 nodes x 8 A100, 400 Gb/s IB: 5.94 GB/s per-device "
      "buffer over time (Hetu-Galvatron flexsp branch, galvatron/flexsp_solver/solver.py), "
      "24 of 32 peers behind the NIC: 4.455 GB/s per device; call latency inferred: the "
      "all-reduce's"};
  t.row(C::send_recv, true) = {
      kIbCall + kIbStep, 0, 8.032e9,
      with("Hetu-Galvatron p2p_bandwidth_2nodes_8gpus_per_node.json pp_size_2: 8 pairs across "
           "the node boundary at once, 7.65998 MiB/ms = 8.03 GB/s each; latency inferred: one "
           "step of",
           kIbLatency)};
  return t;
}

CollectiveTable hopper_collectives() {
  CollectiveTable t;
  galvatron_overlap(t);  // no Hopper measurement found: Galvatron's (A100-era) profile
  // Inside a node: nccl-tests on 8 H100 / H200 (the same NVLink 4 and NVSwitch).
  constexpr double call = 12.9e-6;
  const char* latency = "latency: 8-GPU H100 all-reduce of 8 B, 12.9 us (aws/aws-k8s-tester#503)";
  t.row(C::all_reduce, false) = {
      call, 0, 367.2e9,
      with("8 x H200 ring all-reduce of 16 GiB (NCCL_NVLS_ENABLE=0), busbw 367.2 GB/s "
           "(stas00/ml-engineering network/README.md, NCCL 2.27.7); NVLS, which NCCL uses above "
           "4 GPUs, reaches 480",
           latency)};
  t.row(C::all_gather, false) = {
      call, 0, 361.4e9,
      with("8 x H200 all-gather of 16 GiB, busbw 361.4 GB/s (stas00/ml-engineering "
           "network/README.md)",
           latency)};
  t.row(C::reduce_scatter, false) = {
      call, 0, 362.9e9,
      with("8 x H200 reduce-scatter of 16 GiB, busbw 362.9 GB/s (stas00/ml-engineering "
           "network/README.md)",
           latency)};
  t.row(C::all_to_all, false) = {
      58.1e-6, 0, 334.9e9,
      "H100 all-to-all of 500 MiB over 4 GPUs, busbw 334.9 GB/s (NVIDIA/nccl#2169); call: "
      "H20 (NVLink 4) all-to-all floor of 58.1 us at 1 MiB (NVIDIA/nccl-tests#314)"};
  t.row(C::send_recv, false) = {
      3.7e-6, 0, 370e9,
      "NVLink 4 effective 370 GB/s outside all-reduce (NVIDIA/nccl-tests#212, sjeaugey); "
      "latency: H800 sendrecv of 1 KB, 3.7 us (NVIDIA/nccl#1984)"};
  // Across nodes: a 400 Gb/s NDR NIC per GPU.
  t.row(C::all_reduce, true) = {
      kIbCall, kIbStep, 364.65e9 / 8,
      with("4 nodes x 8 H200 ring all-reduce of 4 GiB, busbw 364.65 GB/s per node "
           "(stas00/ml-engineering network/README.md; EFA); inferred for InfiniBand",
           kIbLatency)};
  t.row(C::reduce_scatter, true) = {
      kIbCall, kIbStep, 360e9 / 8,
      with("H100 reduce-scatter over 4 nodes, busbw 360 GB/s per node (NVIDIA/nccl#1229)",
           kIbLatency)};
  t.row(C::all_gather, true) = t.row(C::reduce_scatter, true);
  t.row(C::all_gather, true).source =
      with("inferred: the reduce-scatter's, 360 GB/s per node over 4 nodes (NVIDIA/nccl#1229)",
           kIbLatency);
  t.row(C::all_to_all, true) = {
      kIbCall, 0, 48.5e9,
      "an all-to-all moves at one NIC per flow, NDR 48-49 GB/s (NVIDIA/nccl-tests#267); call "
      "latency inferred: the all-reduce's"};
  t.row(C::send_recv, true) = {
      kIbCall + kIbStep, 0, 47e9,
      with("NDR 400 Gb/s: 46-48 GB/s per NIC (NVIDIA/nccl-tests#290, AddyLaddy); latency "
           "inferred: one step of",
           kIbLatency)};
  return t;
}

}  // namespace infinipipe::cost
