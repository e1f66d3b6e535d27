// Tied embeddings under mpirun (Megatron's embedding group): the first and the last pipeline
// stage each hold model.embed_tokens.weight, sum its gradients and apply the same update. From
// the same seed and data, losses, gradient norms (the tied weight counted once) and weights
// match the one-process Trainer, the last stage's copy stays bit-identical to the first stage's,
// and checkpoints hold the embedding once and reshard between pp = 1 and pp = 2.
#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ckpt/checkpoint.h"
#include "comm/mpi_groups.h"
#include "dist_test_util.h"
#include "dist_train_fixture.h"
#include "plan/schedule_table.h"
#include "runtime/train.h"

namespace infinipipe::runtime {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kTiedIters = 3;
constexpr const char* kEmbedding = "model.embed_tokens.weight";

TEST(DistTiedLayout, EmbeddingGroupIsFirstAndLastStage) {
  EXPECT_EQ(RankLayout::make(4, 1, 2, 2).embedding_group_ranks(), (std::vector<int>{1, 3}));
  EXPECT_EQ(RankLayout::make(4, 2, 2, 2).embedding_group_ranks(), (std::vector<int>{0, 2}));
  EXPECT_EQ(RankLayout::make(3, 2, 3, 1).embedding_group_ranks(), (std::vector<int>{0, 2}));
  EXPECT_TRUE(RankLayout::make(3, 1, 3, 1).embedding_group_ranks().empty());
  EXPECT_EQ(RankLayout::make(2, 1, 1, 2).embedding_group_ranks(), (std::vector<int>{1}));
}

class DistTied : public disttest_fixture::DistTrainFixture {
 protected:
  TrainOptions options(int64_t pp, int64_t dp, Schedule schedule, int64_t iters) const override {
    return options_base(pp, dp, schedule, iters, Optimizer::adamw, true);
  }

  // The last stage's copy against the first stage's embedding, bit for bit: the first stage of
  // each replica sends its embedding to the last.
  static void expect_copy_bit_identical(Trainer& t, const ProcessGroups& g, const Run& got,
                                        const std::string& what) {
    const RankLayout& l = g.layout();
    if (l.is_first_stage()) {
      const std::vector<float>& e = got.weights.at(kEmbedding);
      ASSERT_EQ(MPI_Send(e.data(), static_cast<int>(e.size()), MPI_FLOAT,
                         l.rank_of(l.pp - 1, l.replica), 7, g.world()),
                MPI_SUCCESS);
      EXPECT_TRUE(t.tied_copy_values().empty()) << what << ": the first stage holds no copy";
    } else if (l.is_last_stage()) {
      const std::span<const float> copy = t.tied_copy_values();
      std::vector<float> e(static_cast<size_t>(t.cost_loop().prior().model().params_embedding()));
      // Receive first, so the sender never waits on a failed assertion here.
      ASSERT_EQ(MPI_Recv(e.data(), static_cast<int>(e.size()), MPI_FLOAT, l.rank_of(0, l.replica),
                         7, g.world(), MPI_STATUS_IGNORE),
                MPI_SUCCESS);
      EXPECT_EQ(got.weights.count(kEmbedding), 0u) << what << ": params() lists the copy";
      ASSERT_EQ(copy.size(), e.size()) << what;
      EXPECT_EQ(std::memcmp(e.data(), copy.data(), e.size() * sizeof(float)), 0)
          << what << ": the last stage's copy of the embedding drifted from the first stage's";
    }
  }

  void expect_matches_one_process(int64_t pp, int64_t dp, Schedule schedule) {
    Comm& comm = disttest::test_comm();
    const std::string what =
        fmt::format("tied pp {} dp {} {}", pp, dp, plan::schedule_name(schedule));
    Trainer ref_t(options(1, 1, Schedule::epp, kTiedIters));
    const Run ref = run(ref_t, kTiedIters);

    ProcessGroups groups(comm, pp, dp);
    int members = 0;
    if (groups.embedding_comm() != MPI_COMM_NULL) MPI_Comm_size(groups.embedding_comm(), &members);
    EXPECT_EQ(members, static_cast<int>(groups.layout().embedding_group_ranks().size())) << what;
    TrainOptions o = options(pp, dp, schedule, kTiedIters);
    o.groups = &groups;
    Trainer t(o);
    const Run got = run(t, kTiedIters);
    expect_near_rel(got.losses, ref.losses, what + ": loss");
    expect_near_rel(got.grad_norms, ref.grad_norms, what + ": gradient norm");
    expect_weights_match(got, ref, what);
    expect_copy_bit_identical(t, groups, got, what);
  }
};

TEST_F(DistTied, Pp2MatchesOneProcess) {
  DIST_TEST_RANKS(2);
  expect_matches_one_process(2, 1, Schedule::epp);
  expect_matches_one_process(2, 1, Schedule::interleaved);
}

TEST_F(DistTied, Pp2Dp2MatchesOneProcess) {
  DIST_TEST_RANKS(4);
  expect_matches_one_process(2, 2, Schedule::epp);
}

// A middle stage holds no copy and stays out of the embedding group.
TEST_F(DistTied, Pp3MatchesOneProcess) {
  DIST_TEST_RANKS(3);
  expect_matches_one_process(3, 1, Schedule::one_f_one_b);
}

// One process saves after 2 iterations; pp = 2 resumes (the last stage's copy filled from the
// embedding, with its optimizer state) for the third and saves (the embedding once, no
// lm_head.weight); one process resumes that for a fourth. Both continue the uninterrupted run.
TEST_F(DistTied, Pp2ResumeReshards) {
  DIST_TEST_RANKS(2);
  expect_resume_reshards(
      2, 1,
      [](Trainer& t, const ProcessGroups& groups, const Run& third, const Run& ref) {
        EXPECT_NEAR(third.grad_norms[0], ref.grad_norms[2], 1e-5 * ref.grad_norms[2]);
        expect_copy_bit_identical(t, groups, third, "resumed on pp 2");
      },
      [](const std::string& saved) {
        CheckpointReader reader(saved);
        const std::vector<std::string> names = reader.param_names();
        EXPECT_EQ(std::count(names.begin(), names.end(), kEmbedding), 1);
        EXPECT_EQ(std::count(names.begin(), names.end(), "lm_head.weight"), 0);
      });
}

// pp = 2 saves after 2 iterations and pp = 2 resumes: bit for bit the uninterrupted run.
TEST_F(DistTied, Pp2ResumeIsBitIdentical) {
  DIST_TEST_RANKS(2);
  ProcessGroups groups(disttest::test_comm(), 2, 1);
  TrainOptions o = options(2, 1, Schedule::epp, 4);
  o.groups = &groups;
  expect_resume_bit_identical_with(o, "pp 2, tied", [&](Trainer& t, const Run& rest) {
    expect_copy_bit_identical(t, groups, rest, "resumed on the same layout");
  });
}

}  // namespace
}  // namespace infinipipe::runtime
