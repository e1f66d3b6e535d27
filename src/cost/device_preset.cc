// Device presets. Every number and its source is listed in docs/cost-model.md; keep the two in
// step. The GPU presets' links are their collective tables (collective_presets.h).
#include <algorithm>
#include <array>
#include <cctype>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "cost/collective_presets.h"
#include "cost/cost_model.h"
#include "cost/host_cpu.h"

namespace infinipipe::cost {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr std::array<const char*, 4> kNames = {"cpu", "a800-80gb", "h100-80gb", "h200-141gb"};

// This machine's cores at an all-core clock of about 3.6 GHz (Zen 3/4 EPYC and Ryzen): 32 FLOP per
// cycle make the 115 GFLOP/s per core the preset has always assumed for fp32.
constexpr double kCpuClockHz = 115e9 / 32;

DeviceSpec preset_cpu(bool bf16) {
  const HostCpu& cpu = host_cpu();
  DeviceSpec d;
  d.name = "cpu";
  const double per_core = host_cpu_flops_per_cycle(cpu, bf16) * kCpuClockHz;
  d.peak_flops = per_core * static_cast<double>(cpu.cores);
  // oneDNN reaches ~93% of this on large sgemm squares (2 Zen 4 cores); training shapes
  // (tall-skinny, weight-gradient reductions) less.
  d.matmul_efficiency = 0.8;
  d.attention_efficiency = 0.4;  // blocked CPU attention with softmax is far from GEMM speed
  d.memory_bytes = static_cast<int64_t>(24 * kGiB);  // the budget, whatever the machine holds
  d.memory_bandwidth = 20e9;                         // what two cores stream from DDR5
  d.intra_node_bandwidth = 8e9;                      // OpenMPI shared-memory ping-pong: 6-12 GB/s
  d.inter_node_bandwidth = 1e9;                      // TCP between machines (no fabric here)
  d.latency_s = 5e-6;
  d.inter_node_latency_s = 50e-6;  // TCP round trips between machines
  d.half_efficiency_tokens = 64;   // GEMMs with M >= a few hundred rows run near full speed
  d.chunk_overhead_s = 200e-6;     // OpenMP regions, allocation, MPI progress per chunk
  d.backward_factor = 2.0;
  d.sources = fmt::format(
      "this machine: {}, {} cores ({} logical CPUs), {}, {} of memory. Peak {:.0f} GFLOP/s {} is "
      "an estimate from the ISA and core count, not measured: {} cores x {:.0f} FLOP/cycle ({}) x "
      "{:.2f} GHz; `infinipipe profile` measures the real sgemm rate. Fixed preset values (docs/"
      "cost-model.md): memory budget 24 GiB, DRAM 20 GB/s, OpenMPI shared memory 8 GB/s (6-12 GB/s "
      "ping-pong on an idle 2-core VM), TCP 1 GB/s, efficiencies 0.8 (matmul) and 0.4 (attention)",
      cpu.model, cpu.cores, cpu.logical_cpus, host_cpu_isa(cpu),
      cpu.memory_bytes > 0 ? format_bytes(cpu.memory_bytes) : std::string("unknown amount"),
      d.peak_flops / 1e9, bf16 ? "bf16" : "fp32", cpu.cores, host_cpu_flops_per_cycle(cpu, bf16),
      host_cpu_flops_source(cpu, bf16), kCpuClockHz / 1e9);
  d.link_sources =
      "intra-node: OpenMPI shared-memory ping-pong 6-12 GB/s, 5 us; inter-node: TCP, 1 GB/s, "
      "50 us (no fabric here)";
  d.collectives = link_table({d.intra_node_bandwidth, d.inter_node_bandwidth, d.latency_s,
                              d.inter_node_latency_s, d.intra_node_bandwidth, d.latency_s},
                             d.link_sources);
  return d;
}

// An NVIDIA data-centre GPU: bf16 dense tensor-core peak, or TF32 when planning fp32.
DeviceSpec preset_gpu(const char* name, double bf16_flops, double memory, double hbm,
                      double matmul_eff, double attn_eff, double half_tokens, const char* sources,
                      const char* link_sources, CollectiveTable collectives, bool bf16) {
  DeviceSpec d;
  d.name = name;
  d.peak_flops = bf16 ? bf16_flops : bf16_flops / 2;  // TF32 tensor cores: half the bf16 rate
  d.matmul_efficiency = matmul_eff;
  d.attention_efficiency = attn_eff;
  d.memory_bytes = static_cast<int64_t>(memory);
  d.memory_bandwidth = hbm * 0.8;
  // The links a point-to-point message crosses: the table's send/recv rows.
  const CollectiveCost &inside = collectives.row(Collective::send_recv, false),
                       &across = collectives.row(Collective::send_recv, true);
  d.intra_node_bandwidth = inside.bus_bandwidth;
  d.inter_node_bandwidth = across.bus_bandwidth;
  d.latency_s = inside.call_latency_s;
  d.inter_node_latency_s = across.call_latency_s;
  d.half_efficiency_tokens = half_tokens;
  d.chunk_overhead_s = 300e-6;
  d.backward_factor = 2.0;
  // FlexSP's released planner (Hetu-Galvatron, galvatron/models/gpt_hf/train_dist.py scripts)
  // packs to a memory limit of 28-30 GB on 40 GB A100s: it holds back 10-12 GB for the CUDA
  // context, NCCL and the caching allocator. We hold back its smaller figure, 10 GiB.
  d.reserved_memory_bytes = static_cast<int64_t>(10 * kGiB);
  d.sources = sources;
  d.link_sources = link_sources;
  // Every collective from published measurements, row by row (collective_presets.h).
  d.collectives = std::move(collectives);
  return d;
}

}  // namespace

int64_t usable_memory_bytes(const DeviceSpec& device) {
  return std::max<int64_t>(0, device.memory_bytes - device.reserved_memory_bytes);
}

std::span<const char* const> device_preset_names() {
  return kNames;
}

std::string gpu_preset(const std::string& reported_name) {
  // A GPU preset is named by its model ("h100-80gb"), which the driver's name spells in capitals
  // ("NVIDIA H100 80GB HBM3").
  for (const std::string preset : kNames) {
    const size_t dash = preset.find('-');
    if (dash == std::string::npos) continue;  // cpu
    std::string model = preset.substr(0, dash);
    std::transform(model.begin(), model.end(), model.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    if (reported_name.find(model) != std::string::npos) return preset;
  }
  return "";
}

DeviceSpec device_preset(const std::string& name, bool bf16) {
  if (name == "cpu") return preset_cpu(bf16);
  if (name == "a800-80gb")
    return preset_gpu("a800-80gb", 312e12, 80 * kGiB, 2.039e12, 0.55, 0.5, 256,
                      "NVIDIA A800 datasheet (312 TFLOP/s bf16 dense, 80 GB HBM2e 2.0 TB/s, "
                      "NVLink 400 GB/s); Megatron-LM MFU 50-55% on A100",
                      "NVLink 400 GB/s bidirectional (A800 datasheet); the InfiniPipe paper's "
                      "400 Gb/s InfiniBand taken PER NODE (shared by 8 GPUs; "
                      "--inter-node-bandwidth for another reading); every collective from the "
                      "collective table's A800 rows (docs/cost-model.md, \"Collective costs\")",
                      a800_collectives(), bf16);
  if (name == "h100-80gb")
    return preset_gpu("h100-80gb", 989e12, 80 * kGiB, 3.35e12, 0.45, 0.4, 384,
                      "NVIDIA H100 SXM datasheet (989 TFLOP/s bf16 dense, 80 GB HBM3 3.35 TB/s, "
                      "NVLink 900 GB/s); Megatron-LM MFU 40-47% on H100",
                      "NVLink 900 GB/s bidirectional; 400 Gb/s NDR InfiniBand per GPU (DGX H100: "
                      "8 ConnectX-7 per node); every collective from the collective table's "
                      "H100/H200 rows (docs/cost-model.md, \"Collective costs\")",
                      hopper_collectives(), bf16);
  if (name == "h200-141gb")
    return preset_gpu("h200-141gb", 989e12, 141e9, 4.8e12, 0.45, 0.4, 384,
                      "NVIDIA H200 SXM datasheet (989 TFLOP/s bf16 dense, 141 GB HBM3e 4.8 TB/s, "
                      "NVLink 900 GB/s); efficiencies as H100",
                      "NVLink 900 GB/s bidirectional; 400 Gb/s NDR InfiniBand per GPU (DGX H200: "
                      "8 ConnectX-7 per node); every collective from the collective table's "
                      "H100/H200 rows (docs/cost-model.md, \"Collective costs\")",
                      hopper_collectives(), bf16);
  std::string known;
  for (const char* n : kNames) known += (known.empty() ? "" : ", ") + std::string(n);
  fail_config("unknown device preset '{}': use one of {}, or give a calibration file", name, known);
}

}  // namespace infinipipe::cost
