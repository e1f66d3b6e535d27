#include "comm/cpu_groups.h"

#include <algorithm>
#include <bit>

#include "core/error.h"

namespace infinipipe {
namespace {

int64_t count(const CpuMask& m) {
  int64_t n = 0;
  for (const uint64_t w : m) n += std::popcount(w);
  return n;
}

bool overlap(const CpuMask& a, const CpuMask& b) {
  for (size_t w = 0; w < a.size() && w < b.size(); ++w)
    if (a[w] & b[w]) return true;
  return false;
}

}  // namespace

CpuGroup cpu_group(std::span<const CpuMask> masks, int64_t me) {
  if (me < 0 || static_cast<size_t>(me) >= masks.size())
    fail("internal: cpu_group of rank {} among {} masks", me, masks.size());
  if (count(masks[static_cast<size_t>(me)]) == 0) return {me, 1, 1};
  // Grow the group from `me` through every mask that shares a CPU with one already in it.
  std::vector<bool> in(masks.size(), false);
  in[static_cast<size_t>(me)] = true;
  CpuMask cpus = masks[static_cast<size_t>(me)];
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t j = 0; j < masks.size(); ++j) {
      if (in[j] || !overlap(masks[j], cpus)) continue;
      in[j] = grew = true;
      if (cpus.size() < masks[j].size()) cpus.resize(masks[j].size(), 0);
      for (size_t w = 0; w < masks[j].size(); ++w) cpus[w] |= masks[j][w];
    }
  }
  CpuGroup g{me, 0, count(cpus)};
  for (size_t j = 0; j < masks.size(); ++j) {
    if (!in[j]) continue;
    g.first = std::min<int64_t>(g.first, static_cast<int64_t>(j));
    ++g.ranks;
  }
  return g;
}

}  // namespace infinipipe
