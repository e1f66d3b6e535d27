// The `cpu` preset describes the machine it runs on: the ISA and core count it names are read
// here independently (cpuid through the compiler, core topology from sysfs) and must match.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#include "cost/cost_model.h"
#include "cost/host_cpu.h"

namespace infinipipe::cost {
namespace {

// Two Zen 3 vCPUs, AVX2 without AVX-512 (a KVM guest's /proc/cpuinfo, shortened).
constexpr const char* kZen3 =
    "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel name\t: AMD EPYC 7B13\n"
    "physical id\t: 0\ncore id\t\t: 0\nflags\t\t: fpu sse sse2 avx fma avx2 bmi2\n\n"
    "processor\t: 1\nmodel name\t: AMD EPYC 7B13\nphysical id\t: 0\ncore id\t\t: 1\n"
    "flags\t\t: fpu sse sse2 avx fma avx2 bmi2\n";
// Two sockets x one core x two hyper-threads, with AMX.
constexpr const char* kSmt =
    "processor : 0\nmodel name : Intel Xeon\nphysical id : 0\ncore id : 0\n"
    "flags : avx fma avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"
    "processor : 1\nphysical id : 0\ncore id : 0\n"
    "processor : 2\nphysical id : 1\ncore id : 0\n"
    "processor : 3\nphysical id : 1\ncore id : 0\n";

TEST(HostCpu, ParsesModelCoresIsaAndMemory) {
  const HostCpu z = host_cpu_parse(kZen3, "MemTotal:       24684092 kB\nMemFree: 1 kB\n");
  EXPECT_EQ(z.model, "AMD EPYC 7B13");
  EXPECT_EQ(z.cores, 2);
  EXPECT_TRUE(z.avx2 && z.fma);
  EXPECT_FALSE(z.avx512f || z.avx512_bf16 || z.amx_bf16);
  EXPECT_EQ(z.memory_bytes, 24684092LL * 1024);
  EXPECT_EQ(host_cpu_isa(z), "AVX2");
  EXPECT_EQ(host_cpu_flops_per_cycle(z, false), 32);
  EXPECT_EQ(host_cpu_flops_per_cycle(z, true), 32);  // no AVX512-BF16: bf16 at the fp32 rate

  const HostCpu s = host_cpu_parse(kSmt, "");
  EXPECT_EQ(s.cores, 2);  // hyper-threads share a core's FMA pipes
  EXPECT_EQ(s.logical_cpus, 4);
  EXPECT_EQ(host_cpu_isa(s), "AVX2, AVX-512, AVX512-BF16, AMX-BF16");
  EXPECT_EQ(host_cpu_flops_per_cycle(s, true), 64);
  EXPECT_EQ(s.memory_bytes, 0);

  const HostCpu none = host_cpu_parse("", "");
  EXPECT_EQ(none.model, "unknown CPU");
  EXPECT_EQ(none.cores, 1);
  EXPECT_EQ(host_cpu_isa(none), "no AVX2");
  EXPECT_EQ(host_cpu_flops_per_cycle(none, false), 8);
}

// Physical cores of the online CPUs, from sysfs topology: distinct (package, core) pairs.
int64_t sysfs_cores() {
  std::set<std::pair<std::string, std::string>> cores;
  for (const auto& e : std::filesystem::directory_iterator("/sys/devices/system/cpu")) {
    const std::string name = e.path().filename().string();
    if (name.size() < 4 || name.rfind("cpu", 0) != 0 || !std::isdigit(name[3])) continue;
    std::ifstream pkg(e.path() / "topology/physical_package_id"),
        core(e.path() / "topology/core_id");
    std::string p, c;
    if (pkg >> p && core >> c) cores.insert({p, c});
  }
  return static_cast<int64_t>(cores.size());
}

TEST(HostCpu, CpuPresetNamesThisMachinesIsaAndCores) {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") != 0;
  const bool fma = __builtin_cpu_supports("fma") != 0;
  const bool avx512 = __builtin_cpu_supports("avx512f") != 0;
  const bool bf16 = __builtin_cpu_supports("avx512bf16") != 0;
  const int64_t cores = sysfs_cores();
  ASSERT_GT(cores, 0) << "no CPU topology in /sys/devices/system/cpu";

  const DeviceSpec d = device_preset("cpu", false);
  std::string isa;
  for (auto [has, name] : {std::pair{avx2, "AVX2"}, {avx512, "AVX-512"}, {bf16, "AVX512-BF16"}})
    if (has) isa += (isa.empty() ? "" : ", ") + std::string(name);
  if (isa.empty()) isa = "no AVX2";
  EXPECT_NE(d.sources.find(", " + isa), std::string::npos) << d.sources;
  EXPECT_NE(d.sources.find(std::to_string(cores) + " cores"), std::string::npos) << d.sources;
  EXPECT_NE(d.sources.find("estimate"), std::string::npos) << d.sources;
  EXPECT_NE(d.sources.find("infinipipe profile"), std::string::npos) << d.sources;
  EXPECT_EQ(d.sources.find("measured on this machine"), std::string::npos) << d.sources;

  // The rate follows the detected cores: 115 GFLOP/s per core with two FMA pipes.
  const double per_core = avx2 && fma ? 115e9 : avx2 ? 57.5e9 : 28.75e9;
  EXPECT_DOUBLE_EQ(d.peak_flops, per_core * static_cast<double>(cores));
  EXPECT_DOUBLE_EQ(device_preset("cpu", true).peak_flops,
                   (bf16 ? 2 : 1) * per_core * static_cast<double>(cores));
}

}  // namespace
}  // namespace infinipipe::cost
