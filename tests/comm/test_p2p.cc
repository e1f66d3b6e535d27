#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "comm/mpi_p2p.h"
#include "core/error.h"
#include "mpi_test_util.h"

namespace infinipipe {
namespace {

float value_of(int rank, int kind, int64_t chunk, int vstage, int64_t i) {
  return static_cast<float>(rank * 100000 + kind * 50000 + chunk * 1000 + vstage * 500 + i);
}

TEST(P2pTag, DistinctPerChunkKindAndVirtualStage) {
  std::vector<int> tags;
  for (int64_t c = 0; c < 50; ++c)
    for (int v = 0; v < 3; ++v)
      for (P2pKind k : {P2pKind::activation, P2pKind::gradient})
        tags.push_back(p2p_tag(k, c, v, 32767));
  std::sort(tags.begin(), tags.end());
  EXPECT_EQ(std::adjacent_find(tags.begin(), tags.end()), tags.end());
  EXPECT_GE(tags.front(), 0);
  // 32767 is the smallest MPI_TAG_UB the standard allows: chunk 255 is the last that fits.
  EXPECT_NO_THROW(p2p_tag(P2pKind::gradient, 255, kP2pMaxVirtualStages - 1, 32767));
  EXPECT_THROW(p2p_tag(P2pKind::activation, 256, 0, 32767), Error);
  EXPECT_THROW(p2p_tag(P2pKind::activation, 0, kP2pMaxVirtualStages, 1 << 30), Error);
}

// Every rank sends chunks of both kinds to the next rank and receives from the previous one.
// Receives are posted first and in the reverse order of the sends, so only the tags can pair
// them correctly; sizes differ per chunk, as a plan's chunks do.
void ring_exchange() {
  ProcessGroups g(test::test_comm(), 4, 1);
  P2p p2p(g, 10.0);
  const RankLayout& l = g.layout();
  const int64_t chunks = 6;
  const int vstages = 2;
  auto count_of = [](int64_t c, int v) { return 1000 + 517 * c + 3 * v; };
  std::vector<std::vector<float>> in, out;
  std::vector<P2pRequest> recvs, sends;
  for (int64_t c = chunks - 1; c >= 0; --c)
    for (int v = 0; v < vstages; ++v)
      for (P2pKind k : {P2pKind::gradient, P2pKind::activation}) {
        in.emplace_back(static_cast<size_t>(count_of(c, v)), -1.0f);
        recvs.push_back(p2p.irecv(in.back().data(), count_of(c, v), l.prev_rank(), k, c, v));
      }
  for (int64_t c = 0; c < chunks; ++c)
    for (int v = 0; v < vstages; ++v)
      for (P2pKind k : {P2pKind::activation, P2pKind::gradient}) {
        out.emplace_back(static_cast<size_t>(count_of(c, v)));
        for (int64_t i = 0; i < count_of(c, v); ++i)
          out.back()[static_cast<size_t>(i)] = value_of(l.rank, static_cast<int>(k), c, v, i);
        sends.push_back(p2p.isend(out.back().data(), count_of(c, v), l.next_rank(), k, c, v));
      }
  p2p.wait_all(recvs, "the ring test");
  p2p.wait_all(sends, "the ring test");
  for (size_t j = 0; j < recvs.size(); ++j) {
    const P2pRequest& r = recvs[j];
    EXPECT_FALSE(r.pending());
    for (int64_t i = 0; i < r.count; i += 97) {
      ASSERT_EQ(in[j][static_cast<size_t>(i)],
                value_of(l.prev_rank(), static_cast<int>(r.kind), r.chunk, r.vstage, i))
          << "chunk " << r.chunk << " vstage " << r.vstage << " element " << i;
    }
  }
  test::test_comm().barrier("after the ring test");
}

// A 2 x 2 pipeline: activations go down each replica's pipeline and gradients come back, and
// the two replicas never see each other's messages.
void two_pipelines() {
  ProcessGroups g(test::test_comm(), 2, 2);
  P2p p2p(g, 10.0);
  const RankLayout& l = g.layout();
  std::vector<float> buf(4096);
  for (int64_t c = 0; c < 3; ++c) {
    if (l.is_first_stage()) {
      for (size_t i = 0; i < buf.size(); ++i) buf[i] = value_of(l.rank, 0, c, 0, int64_t(i));
      P2pRequest s =
          p2p.isend(buf.data(), int64_t(buf.size()), l.next_rank(), P2pKind::activation, c);
      p2p.wait(s, "forward");
      P2pRequest r =
          p2p.irecv(buf.data(), int64_t(buf.size()), l.next_rank(), P2pKind::gradient, c);
      p2p.wait(r, "backward");
      for (size_t i = 0; i < buf.size(); i += 511)
        ASSERT_EQ(buf[i], value_of(l.next_rank(), 1, c, 0, int64_t(i)));
    } else {
      P2pRequest r =
          p2p.irecv(buf.data(), int64_t(buf.size()), l.prev_rank(), P2pKind::activation, c);
      p2p.wait(r, "forward");
      for (size_t i = 0; i < buf.size(); i += 511)
        ASSERT_EQ(buf[i], value_of(l.prev_rank(), 0, c, 0, int64_t(i)));
      for (size_t i = 0; i < buf.size(); ++i) buf[i] = value_of(l.rank, 1, c, 0, int64_t(i));
      P2pRequest s =
          p2p.isend(buf.data(), int64_t(buf.size()), l.prev_rank(), P2pKind::gradient, c);
      p2p.wait(s, "backward");
    }
  }
  test::test_comm().barrier("after the pipeline test");
}

// Rank 2 waits for a message rank 1 never sends. First rank 1 is itself waiting (in a
// barrier) and says so when asked; then rank 1 is busy outside the MPI layer's waits (the only
// place it answers questions) until rank 2 has its error, so it cannot answer.
void timeout_names_peer() {
  ProcessGroups g(test::test_comm(), 4, 1);
  P2p p2p(g, 1.0);
  // Ranks 1 and 2 say where they stand on a communicator of their own: plain MPI calls, outside
  // the layer under test. tag 0: rank 1 is about to wait or go silent; tag 1: rank 2 has failed.
  MPI_Comm side = MPI_COMM_NULL;
  MPI_Comm_dup(test::test_comm().world(), &side);
  // Measured: at least the 1 s of the timeout and the 0.5 s of grace or the 1 s question.
  const std::regex prefix(
      R"(^rank 2 \(stage 2, replica 0\) waited ([2-9]|[1-9][0-9]+) s for the activation of chunk )"
      R"(7 from rank 1 \(stage 1, replica 0\) during forward of chunk 7: )");
  const std::string suffix = ". If the peer is only slow (a long chunk), raise --p2p-timeout";
  int note = 0;
  for (bool silent : {false, true}) {
    SCOPED_TRACE(silent ? "rank 1 computing" : "rank 1 waiting");
    if (g.layout().rank == 2) {
      MPI_Recv(&note, 1, MPI_INT, 1, 0, side, MPI_STATUS_IGNORE);
      std::vector<float> buf(16);
      P2pRequest r = p2p.irecv(buf.data(), 16, 1, P2pKind::activation, 7);
      std::string msg;
      try {
        p2p.wait(r, "forward of chunk 7");
      } catch (const Error& e) {
        msg = e.what();
      }
      if (silent) MPI_Send(&note, 1, MPI_INT, 1, 1, side);  // whatever happened: rank 1 goes on
      ASSERT_FALSE(msg.empty()) << "the wait returned although nobody sent";
      ASSERT_TRUE(r.pending());
      MPI_Cancel(&r.request);
      MPI_Wait(&r.request, MPI_STATUS_IGNORE);
      EXPECT_TRUE(std::regex_search(msg, prefix)) << msg;
      EXPECT_TRUE(msg.ends_with(suffix)) << msg;
      if (silent) {
        EXPECT_NE(msg.find(": rank 1 does not answer, so it has died or is stuck outside "
                           "communication."),
                  std::string::npos)
            << msg;
      } else {
        EXPECT_NE(msg.find(": rank 1 (stage 1, replica 0) is itself waiting ("), std::string::npos)
            << msg;
        EXPECT_NE(msg.find("s so far) for every rank to reach the barrier after the timeout test "
                           "(the fault lies further along)."),
                  std::string::npos)
            << msg;
      }
    } else if (g.layout().rank == 1) {
      MPI_Send(&note, 1, MPI_INT, 2, 0, side);
      if (silent) MPI_Recv(&note, 1, MPI_INT, 2, 1, side, MPI_STATUS_IGNORE);
    }
    test::test_comm().barrier("after the timeout test");
  }
  MPI_Comm_free(&side);
}

void size_mismatch() {
  ProcessGroups g(test::test_comm(), 4, 1);
  P2p p2p(g, 10.0);
  std::vector<float> buf(32, 1.0f);
  if (g.layout().rank == 0) {
    P2pRequest a = p2p.isend(buf.data(), 10, 1, P2pKind::activation, 0);
    P2pRequest b = p2p.isend(buf.data(), 32, 1, P2pKind::activation, 1);
    p2p.wait(a, "forward of chunk 0");
    p2p.wait(b, "forward of chunk 1");
  } else if (g.layout().rank == 1) {
    P2pRequest a = p2p.irecv(buf.data(), 12, 0, P2pKind::activation, 0);
    try {
      p2p.wait(a, "forward of chunk 0");
      FAIL() << "a short message passed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("received 10 floats"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("plan expects 12"), std::string::npos) << e.what();
    }
    P2pRequest b = p2p.irecv(buf.data(), 16, 0, P2pKind::activation, 1);
    try {
      p2p.wait(b, "forward of chunk 1");
      FAIL() << "a long message passed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("longer than planned"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("chunk 1 from rank 0"), std::string::npos) << e.what();
    }
  }
  test::test_comm().barrier("after the size test");
}

// One mpirun per group of checks: starting a job costs more than the checks.
TEST(MpiP2p, RingAndPipelinesDeliverKnownData) {
  MPI_TEST_RANKS(4);
  ring_exchange();
  two_pipelines();
}

TEST(MpiP2p, TimeoutAndWrongSizeNameRankPeerAndAction) {
  MPI_TEST_RANKS(4);
  timeout_names_peer();
  size_mismatch();
}

}  // namespace
}  // namespace infinipipe
