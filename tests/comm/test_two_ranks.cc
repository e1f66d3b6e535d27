// Two ranks that may sit on different hosts: scripts/multihost-check.sh runs this test with one
// rank in each of two network namespaces (MPI over TCP through a veth pair) and sets
// INFINIPIPE_EXPECT_TWO_HOSTS=1; alone it runs on two local ranks.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "comm/mpi_allreduce.h"
#include "comm/mpi_hosts.h"
#include "comm/mpi_p2p.h"
#include "mpi_test_util.h"

namespace infinipipe {
namespace {

TEST(MpiTwoRanks, PointToPointAndAllReduceAcrossHosts) {
  MPI_TEST_RANKS(2);
  Comm& comm = test::test_comm();
  // dp = 2 for the all-reduce; the p2p part pairs the two ranks directly.
  ProcessGroups g(comm, 1, 2);
  const int me = comm.rank(), peer = 1 - me;
  if (std::getenv("INFINIPIPE_EXPECT_TWO_HOSTS")) {
    // A host here is (host name, network namespace): namespaces tell the simulated hosts of
    // multihost-check.sh apart, names tell real machines apart.
    struct stat st {};
    ASSERT_EQ(stat("/proc/self/ns/net", &st), 0);
    char host[64] = {};
    gethostname(host, sizeof(host) - 1);
    char ids[2][128] = {};
    std::snprintf(ids[me], sizeof(ids[me]), "%s:%llu", host, (unsigned long long)st.st_ino);
    MPI_Allgather(MPI_IN_PLACE, 128, MPI_CHAR, ids, 128, MPI_CHAR, comm.world());
    EXPECT_STRNE(ids[0], ids[1]) << "both ranks run on the same host and network namespace";
    // Errors about a silent peer name its host (comm/mpi_hosts.h): each rank knows both.
    EXPECT_EQ(rank_host(me), host);
    EXPECT_FALSE(rank_host(peer).empty());
    if (std::getenv("INFINIPIPE_EXPECT_TWO_HOSTNAMES")) EXPECT_NE(rank_host(0), rank_host(1));
  }
  RankLayout pair = RankLayout::make(2, me, 2, 1);  // the two ranks as a 2-stage pipeline
  P2p p2p(comm.world(), pair, 20.0);
  const int64_t n = 1 << 18;  // 1 MiB
  std::vector<float> out(n), in(n, -1.0f);
  for (int64_t i = 0; i < n; ++i) out[size_t(i)] = float(me * 3 + i % 1001);
  const int reps = 5;
  auto t0 = std::chrono::steady_clock::now();
  for (int rep = 0; rep < reps; ++rep) {
    P2pRequest r = p2p.irecv(in.data(), n, peer, P2pKind::activation, rep);
    P2pRequest s = p2p.isend(out.data(), n, peer, P2pKind::activation, rep);
    p2p.wait(r, "the two-host exchange");
    p2p.wait(s, "the two-host exchange");
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int64_t i = 0; i < n; i += 4099) ASSERT_EQ(in[size_t(i)], float(peer * 3 + i % 1001));

  GradBuckets buckets(g.dp_comm(), 20.0);
  std::vector<float> grad(3 << 18);  // 3 MiB: one bucket
  for (size_t i = 0; i < grad.size(); ++i) grad[i] = float(me + 1) * float(i % 7);
  buckets.add("w", grad.data(), int64_t(grad.size()));
  buckets.mark_ready(0);
  buckets.finish("the two-host all-reduce");
  for (size_t i = 0; i < grad.size(); i += 1021) ASSERT_EQ(grad[i], 3.0f * float(i % 7));
  if (me == 0) {
    fmt::print("two-rank exchange: {:.3f} GB/s each way ({} x {:.0f} MiB in {:.3f} s)\n",
               double(reps) * double(n) * 4 / secs / 1e9, reps, double(n * 4) / (1 << 20), secs);
  }
}

}  // namespace
}  // namespace infinipipe
