#include "cost/host_cpu.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

namespace infinipipe::cost {
namespace {

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// "key\t: value" -> (key, value); a line without ':' gives an empty key.
std::pair<std::string_view, std::string_view> key_value(std::string_view line) {
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return {};
  return {trim(line.substr(0, colon)), trim(line.substr(colon + 1))};
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    out.push_back(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

void flags_parse(std::string_view flags, HostCpu& cpu) {
  std::istringstream in{std::string(flags)};
  for (std::string f; in >> f;) {
    if (f == "fma") cpu.fma = true;
    if (f == "avx2") cpu.avx2 = true;
    if (f == "avx512f") cpu.avx512f = true;
    if (f == "avx512_bf16") cpu.avx512_bf16 = true;
    if (f == "amx_bf16") cpu.amx_bf16 = true;
  }
}

std::string file_text(const char* path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

HostCpu host_cpu_parse(std::string_view cpuinfo, std::string_view meminfo) {
  HostCpu cpu;
  std::set<std::pair<std::string, std::string>> cores;  // (physical id, core id)
  std::string package;
  bool flags_seen = false;
  for (std::string_view line : lines_of(cpuinfo)) {
    const auto [key, value] = key_value(line);
    if (key == "processor") {
      ++cpu.logical_cpus;
      package.clear();
    } else if (key == "model name" && cpu.model.empty()) {
      cpu.model = value;
    } else if (key == "physical id") {
      package = value;
    } else if (key == "core id") {
      cores.insert({package, std::string(value)});
    } else if (key == "flags" && !flags_seen) {
      flags_parse(value, cpu);  // the first processor's: every core of a machine has the same
      flags_seen = true;
    }
  }
  if (cpu.model.empty()) cpu.model = "unknown CPU";
  cpu.cores =
      !cores.empty() ? static_cast<int64_t>(cores.size()) : std::max<int64_t>(1, cpu.logical_cpus);
  if (cpu.logical_cpus == 0) cpu.logical_cpus = cpu.cores;
  for (std::string_view line : lines_of(meminfo)) {
    const auto [key, value] = key_value(line);
    if (key != "MemTotal") continue;
    std::istringstream in{std::string(value)};
    int64_t kib = 0;
    if (in >> kib && kib > 0) cpu.memory_bytes = kib * 1024;
  }
  return cpu;
}

const HostCpu& host_cpu() {
  static const HostCpu cpu = [] {
    HostCpu c = host_cpu_parse(file_text("/proc/cpuinfo"), file_text("/proc/meminfo"));
    if (c.logical_cpus == 0) {  // no /proc/cpuinfo: what the C++ runtime knows
      c.logical_cpus = std::max<int64_t>(1, std::thread::hardware_concurrency());
      c.cores = c.logical_cpus;
    }
    return c;
  }();
  return cpu;
}

std::string host_cpu_isa(const HostCpu& cpu) {
  std::string out;
  auto add = [&out](bool has, const char* name) {
    if (has) out += (out.empty() ? "" : ", ") + std::string(name);
  };
  add(cpu.avx2, "AVX2");
  add(cpu.avx512f, "AVX-512");
  add(cpu.avx512_bf16, "AVX512-BF16");
  add(cpu.amx_bf16, "AMX-BF16");
  return out.empty() ? "no AVX2" : out;
}

// Two 256-bit FMA pipes per core (AMD Zen 2-5, Intel Haswell and later) give 8 fp32 lanes x 2
// pipes x 2 FLOP = 32 per cycle. AVX-512 counts the same: Zen 4 runs it on those 256-bit pipes,
// and only parts with two 512-bit FMA units (Xeon Scalable, Zen 5) double it, which the flags
// do not tell. Without FMA a core issues one 256-bit multiply and one add (16), or 128-bit SSE
// (8). bf16 dot products (VDPBF16PS) do two multiply-adds per fp32 lane: twice the rate. AMX
// tiles are faster still, but counted like AVX512-BF16 (the engine does not use them).
double host_cpu_flops_per_cycle(const HostCpu& cpu, bool bf16) {
  const double fp32 = cpu.avx2 && cpu.fma ? 32 : cpu.avx2 ? 16 : 8;
  return bf16 && (cpu.avx512_bf16 || cpu.amx_bf16) ? 2 * fp32 : fp32;
}

std::string host_cpu_flops_source(const HostCpu& cpu, bool bf16) {
  std::string s = cpu.avx2 && cpu.fma
                      ? "2 x 256-bit FMA pipes x 8 fp32 lanes x 2 FLOP (AMD Zen and Intel "
                        "Haswell-and-later optimisation manuals; AVX-512 counted alike, as Zen 4 "
                        "runs it)"
                  : cpu.avx2 ? "one 256-bit multiply and one add per cycle (no FMA)"
                             : "one 128-bit SSE multiply and one add per cycle (no AVX2)";
  if (bf16)
    s += cpu.avx512_bf16 || cpu.amx_bf16 ? "; bf16 x2 (VDPBF16PS: 2 multiply-adds per fp32 lane)"
                                         : "; bf16 at the fp32 rate (no AVX512-BF16)";
  return s;
}

}  // namespace infinipipe::cost
