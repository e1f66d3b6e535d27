// The machine this process runs on, as the `cpu` device preset describes it: CPU model, physical
// cores, vector ISA and memory, read from /proc/cpuinfo and /proc/meminfo at run time (the VMs
// this project runs on have moved between Zen 3 with AVX2 only and CPUs with AVX-512). The
// preset's compute rate is estimated from the ISA and the core count, never measured here;
// `infinipipe profile` measures the real sgemm rate.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace infinipipe::cost {

struct HostCpu {
  std::string model;         // /proc/cpuinfo "model name"; "unknown CPU" when absent
  int64_t cores = 0;         // physical cores: distinct (physical id, core id), else processors
  int64_t logical_cpus = 0;  // "processor" entries
  bool fma = false;          // FMA3
  bool avx2 = false;
  bool avx512f = false;      // AVX-512 Foundation
  bool avx512_bf16 = false;  // VDPBF16PS: bf16 dot products into fp32
  bool amx_bf16 = false;     // AMX tiles with bf16
  int64_t memory_bytes = 0;  // /proc/meminfo MemTotal; 0 when unknown
};

// Parses the text of /proc/cpuinfo and /proc/meminfo (either may be empty: the fields stay
// unknown, cores falls back to 1).
HostCpu host_cpu_parse(std::string_view cpuinfo, std::string_view meminfo);
// This machine, read once.
const HostCpu& host_cpu();

// "AVX2, AVX-512, AVX512-BF16" (each extension present, lowest first), or "no AVX2".
std::string host_cpu_isa(const HostCpu& cpu);
// Peak dense FLOP per cycle of one core for fp32 (or bf16) matmuls, from the ISA alone; and
// the reasoning behind the figure, for the preset's sources.
double host_cpu_flops_per_cycle(const HostCpu& cpu, bool bf16);
std::string host_cpu_flops_source(const HostCpu& cpu, bool bf16);

}  // namespace infinipipe::cost
