// cpu_group: the ranks a rank shares CPUs with, from the node's affinity masks.
#include <gtest/gtest.h>

#include <vector>

#include "comm/cpu_groups.h"

namespace infinipipe {
namespace {

CpuMask cpus(std::initializer_list<int> list) {
  CpuMask m(2, 0);  // 128 CPUs
  for (const int c : list) m[static_cast<size_t>(c / 64)] |= uint64_t{1} << (c % 64);
  return m;
}

TEST(CpuGroups, RanksFreeToRunAnywhereShareTheNode) {  // mpirun --bind-to none
  const std::vector<CpuMask> masks(4, cpus({0, 1}));
  for (int64_t r = 0; r < 4; ++r) {
    const CpuGroup g = cpu_group(masks, r);
    EXPECT_EQ(g.first, 0);
    EXPECT_EQ(g.ranks, 4);
    EXPECT_EQ(g.cores, 2);
  }
}

TEST(CpuGroups, PinnedRanksShareOnlyTheirCores) {  // --bind-to core, ranks round robin on 2 cores
  const std::vector<CpuMask> masks = {cpus({0}), cpus({1}), cpus({0}), cpus({1})};
  const CpuGroup a = cpu_group(masks, 2), b = cpu_group(masks, 3);
  EXPECT_EQ(a.first, 0);
  EXPECT_EQ(a.ranks, 2);
  EXPECT_EQ(a.cores, 1);
  EXPECT_EQ(b.first, 1);
  EXPECT_EQ(b.ranks, 2);
  EXPECT_EQ(b.cores, 1);
  // CPUs past the first word count the same.
  const std::vector<CpuMask> far = {cpus({64, 65}), cpus({0, 1}), cpus({64, 65})};
  EXPECT_EQ(cpu_group(far, 2).first, 0);
  EXPECT_EQ(cpu_group(far, 2).ranks, 2);
  EXPECT_EQ(cpu_group(far, 2).cores, 2);
  EXPECT_EQ(cpu_group(far, 1).ranks, 1);
}

TEST(CpuGroups, MasksOverlappingInPartShareTheirUnion) {
  // 0 and 2 share no CPU, but both share one with 1: the three compete for CPUs 0-2.
  const std::vector<CpuMask> masks = {cpus({0, 1}), cpus({3}), cpus({1, 2}), cpus({0})};
  for (const int64_t r : {0, 2, 3}) {
    const CpuGroup g = cpu_group(masks, r);
    EXPECT_EQ(g.first, 0);
    EXPECT_EQ(g.ranks, 3);
    EXPECT_EQ(g.cores, 3);
  }
  EXPECT_EQ(cpu_group(masks, 1).first, 1);
  EXPECT_EQ(cpu_group(masks, 1).ranks, 1);
  EXPECT_EQ(cpu_group(masks, 1).cores, 1);
}

TEST(CpuGroups, AnEmptyMaskIsItsRanksOwnCpu) {
  const std::vector<CpuMask> masks = {cpus({0}), CpuMask(2, 0)};
  EXPECT_EQ(cpu_group(masks, 1).first, 1);
  EXPECT_EQ(cpu_group(masks, 1).ranks, 1);
  EXPECT_EQ(cpu_group(masks, 1).cores, 1);
  EXPECT_EQ(cpu_group(masks, 0).ranks, 1);
}

}  // namespace
}  // namespace infinipipe
