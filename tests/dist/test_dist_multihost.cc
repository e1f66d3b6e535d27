// Training across two simulated hosts (scripts/multihost-check.sh: network namespaces joined by
// a veth pair, one CPU each, MPI over TCP only). Skipped where namespaces are not permitted (not
// root, or a container without CAP_NET_ADMIN): the script exits 77 there and says so.
#include <gtest/gtest.h>

#include <string>

#include "common/build_paths.h"
#include "common/shell_run.h"
#include "dist_test_util.h"

namespace infinipipe {
namespace {

// `scripts/multihost-check.sh <build dir> <check>`.
testing::ShellResult multihost_check(const std::string& check) {
  const std::string bin = INFINIPIPE_BINARY;
  const std::string dir = bin.substr(0, bin.find_last_of('/'));
  return testing::shell_run(std::string("bash ") + INFINIPIPE_SOURCE_DIR +
                            "/scripts/multihost-check.sh " + dir + " " + check);
}

// pp 2 x dp 2 with two ranks per host, sliced and packed EPP plans, recompute, a checkpoint and
// a resume: every loss, gradient norm and plan equals the one-host run's, bit for bit.
TEST(DistMultiHost, TrainsAcrossTwoHostsWithTheOneHostLosses) {
  if (disttest::under_mpirun()) GTEST_SKIP() << "launches its own mpirun jobs";
  const testing::ShellResult r = multihost_check("train");
  if (r.exit_code == 77) GTEST_SKIP() << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("multihost-check: passed"), std::string::npos) << r.output;
}

// The link between the hosts shaped to 1 Gbit/s (tc tbf): `train --measure-links` measures it
// at 0.5-1.1 Gbit/s and the link inside a host at least 3 times faster, and plans with them.
TEST(DistMultiHost, MeasuresTheShapedLinkBetweenTheHosts) {
  if (disttest::under_mpirun()) GTEST_SKIP() << "launches its own mpirun jobs";
  const testing::ShellResult r = multihost_check("links");
  if (r.exit_code == 77) GTEST_SKIP() << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("multihost-check: passed"), std::string::npos) << r.output;
}

// The shaped link slowed from 1 Gbit/s to 10 Mbit/s while `train --measure-links` trains across
// it: the online fit notices a slow step, the links are measured again (the new rate within
// 0.5-1.1 of the shaping), and every plan after that iteration predicts its step with the new
// link (its predicted step time is the replay of its actions with it, not with the old one).
TEST(DistMultiHost, SlowedLinkIsNoticedAndTheNextPlansFollowIt) {
  if (disttest::under_mpirun()) GTEST_SKIP() << "launches its own mpirun jobs";
  const testing::ShellResult r = multihost_check("link-slowed");
  if (r.exit_code == 77) GTEST_SKIP() << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("multihost-check: passed"), std::string::npos) << r.output;
}

// The same shaped link with mpirun's usual order (ranks 0-1 on host A): --rank-placement auto
// --measure-links ranks both orders by predicted time with the measured link, says why it puts
// each pipeline inside a host for this small model, and trains as Megatron's order does; with
// --pp auto it names the order of the layout it chose and trains it.
TEST(DistMultiHost, AutoPlacementKeepsPipelinesInsideHosts) {
  if (disttest::under_mpirun()) GTEST_SKIP() << "launches its own mpirun jobs";
  const testing::ShellResult r = multihost_check("placement");
  if (r.exit_code == 77) GTEST_SKIP() << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("multihost-check: passed"), std::string::npos) << r.output;
}

// The same shaped link: `infinipipe profile` with one rank per host, then two per host dealt out
// in turn, writes the links between the hosts into its calibration file as measured (the rate
// between them 0.5-1.1 Gbit/s, the job's placement where mpirun did not fill the hosts in order),
// and `simulate --calibration` plans on them.
TEST(DistMultiHost, ProfileWritesTheLinksBetweenTheHosts) {
  if (disttest::under_mpirun()) GTEST_SKIP() << "launches its own mpirun jobs";
  const testing::ShellResult r = multihost_check("profile");
  if (r.exit_code == 77) GTEST_SKIP() << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("multihost-check: passed"), std::string::npos) << r.output;
}

// Host B's link set down once a checkpoint exists: host A's ranks end with an error naming the
// wait, the silent ranks and host B (within --p2p-timeout 3 + the 2 s question + a margin), and
// a relaunch from the last checkpoint continues with the losses of an uninterrupted run.
TEST(DistMultiHost, LinkDownEndsTheJobNamingTheHostAndResumes) {
  if (disttest::under_mpirun()) GTEST_SKIP() << "launches its own mpirun jobs";
  const testing::ShellResult r = multihost_check("link-down");
  if (r.exit_code == 77) GTEST_SKIP() << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("multihost-check: passed"), std::string::npos) << r.output;
}

// Every rank of host B killed once a checkpoint exists: the job ends naming a dead rank and its
// host, the survivors say where they stood, and a relaunch resumes with the same losses.
TEST(DistMultiHost, HostWhoseRanksDieEndsTheJobAndResumes) {
  if (disttest::under_mpirun()) GTEST_SKIP() << "launches its own mpirun jobs";
  const testing::ShellResult r = multihost_check("host-dies");
  if (r.exit_code == 77) GTEST_SKIP() << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("multihost-check: passed"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace infinipipe
