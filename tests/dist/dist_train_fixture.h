// The fixture of the Trainer tests under mpirun: a small synthetic corpus in a directory shared
// by the job (rank 0 writes it), the options of a small Llama, and comparisons of runs.
#pragma once

#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "comm/mpi_groups.h"
#include "common/synth_corpus.h"
#include "common/tensor_close.h"
#include "common/tiny_train.h"
#include "dist_test_util.h"
#include "runtime/train.h"

namespace infinipipe::runtime::disttest_fixture {

class DistTrainFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    omp_set_num_threads(1);
    if (!disttest::under_mpirun()) return;
    Comm& comm = disttest::test_comm();
    // One directory for the job: rank 0 names it.
    int64_t pid = getpid();
    MPI_Bcast(&pid, 1, MPI_INT64_T, 0, comm.world());
    // A parameterised test's name holds '/': one directory, not nested ones.
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '_');
    dir_ = std::filesystem::path(::testing::TempDir()) /
           fmt::format("infinipipe_dist_{}_{}", pid, name);
    if (comm.rank() == 0) {
      std::filesystem::remove_all(dir_);
      std::filesystem::create_directories(dir_);
      testing::synth_corpus_write_small((dir_ / "corpus").string(), 100);
    }
    comm.barrier("the test's setup");
  }
  void TearDown() override {
    if (!disttest::under_mpirun()) return;
    Comm& comm = disttest::test_comm();
    comm.barrier("the test's teardown");
    if (comm.rank() == 0) std::filesystem::remove_all(dir_);
  }

  // Another synthetic corpus in the test's directory, written by rank 0 while every rank waits;
  // returns its prefix.
  std::string corpus_write_shared(const std::string& name, const std::string& distribution,
                                  int64_t num_documents, int64_t seq_length, uint64_t seed) const {
    Comm& comm = disttest::test_comm();
    const std::string prefix = (dir_ / name).string();
    if (comm.rank() == 0) {
      data::SynthOptions so;
      so.distribution = distribution;
      so.num_documents = num_documents;
      so.seq_length = seq_length;
      so.seed = seed;
      so.output = prefix;
      data::synth_corpus_write(so);
    }
    comm.barrier(fmt::format("the {} corpus", name));
    return prefix;
  }

  // The test's options: options_base with its optimizer and embeddings.
  virtual TrainOptions options(int64_t pp, int64_t dp, Schedule schedule, int64_t iters) const = 0;

  // 4 layers × hidden 64 on the corpus, global batch 8; interleaved gets 2 virtual stages.
  TrainOptions options_base(int64_t pp, int64_t dp, Schedule schedule, int64_t iters,
                            Optimizer optimizer, bool tie_embeddings) const {
    TrainOptions o = testing::tiny_train_options(4, iters, (dir_ / "corpus").string());
    Config& c = o.config;
    c.model.tie_embeddings = tie_embeddings;
    c.parallel.pipeline_parallel = pp;
    c.parallel.data_parallel = dp;
    c.parallel.schedule = schedule;
    if (schedule == Schedule::interleaved) c.parallel.virtual_stages = 2;
    c.training.lr = 3e-3;
    c.training.min_lr = 3e-4;
    c.training.lr_warmup_iters = 2;
    c.training.weight_decay = 0.01;
    c.training.clip_grad = 1.0;
    c.training.seed = 9;
    c.training.optimizer = optimizer;
    c.validate();
    return o;
  }

  struct Run {
    std::vector<double> losses, grad_norms;
    std::map<std::string, std::vector<float>> weights;
  };

  static Run run(Trainer& t, int64_t steps) {
    Run r;
    for (int64_t i = 0; i < steps; ++i) {
      const obs::IterationMetrics m = t.step();
      r.losses.push_back(m.loss);
      r.grad_norms.push_back(m.grad_norm);
    }
    for (const ParamRef& p : t.params()) r.weights[p.name].assign(p.value, p.value + p.numel);
    return r;
  }

  static void expect_near_rel(const std::vector<double>& got, const std::vector<double>& want,
                              const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 1e-5 * std::fabs(want[i])) << what << " of iteration " << i + 1;
    }
  }

  // This rank's weights against the same names of the reference.
  static void expect_weights_match(const Run& got, const Run& want, const std::string& what) {
    ASSERT_FALSE(got.weights.empty()) << what;
    for (const auto& [name, g] : got.weights) {
      EXPECT_TRUE(testing::tensor_close(g, want.weights.at(name), 1e-5))
          << what << ": weights of " << name;
    }
  }

  // One process saves after 2 iterations, pp × dp ranks resume for the third, save, and one
  // process resumes that for a fourth: both continue the uninterrupted run's losses. `check`
  // sees the distributed Trainer after its iteration (before it saves); `check_saved` the
  // directory it saved (on rank 0).
  void expect_resume_reshards(
      int64_t pp, int64_t dp,
      const std::function<void(Trainer&, const ProcessGroups&, const Run&, const Run&)>& check = {},
      const std::function<void(const std::string&)>& check_saved = {}) {
    Comm& comm = disttest::test_comm();
    Trainer ref_t(options(1, 1, Schedule::epp, 4));
    const Run ref = run(ref_t, 4);
    const std::string one = (dir_ / "one").string(), many = (dir_ / "many").string();
    if (comm.rank() == 0) {
      TrainOptions o = options(1, 1, Schedule::epp, 4);
      o.config.training.save = one;
      Trainer t(o);
      run(t, 2);
      t.save();
    }
    comm.barrier("the one-process checkpoint");

    ProcessGroups groups(comm, pp, dp);
    TrainOptions o = options(pp, dp, Schedule::epp, 4);
    o.groups = &groups;
    o.config.training.load = one;
    o.config.training.save = many;
    Trainer t(o);
    ASSERT_TRUE(t.resumed());
    ASSERT_EQ(t.iteration(), 2);
    const Run third = run(t, 1);
    EXPECT_NEAR(third.losses[0], ref.losses[2], 1e-5 * ref.losses[2]) << "resumed on pp × dp";
    if (check) check(t, groups, third, ref);
    t.save();

    if (comm.rank() == 0) {
      if (check_saved) check_saved(many);
      TrainOptions o1 = options(1, 1, Schedule::epp, 4);
      o1.config.training.load = many;
      Trainer t1(o1);
      ASSERT_EQ(t1.iteration(), 3);
      const Run fourth = run(t1, 1);
      EXPECT_NEAR(fourth.losses[0], ref.losses[3], 1e-5 * ref.losses[3]) << "resumed alone";
      expect_weights_match(fourth, ref, "after resharding twice");
    }
  }

  // `o` trains 4 iterations; the same options save after 2, a new Trainer resumes there and
  // trains 2 more: losses and weights are bit-identical to the uninterrupted run. `check` sees
  // the resumed Trainer and its run.
  void expect_resume_bit_identical_with(
      const TrainOptions& o, const std::string& what,
      const std::function<void(Trainer&, const Run&)>& check = {}) const {
    Run whole;
    {
      Trainer t(o);
      whole = run(t, 4);
    }
    const std::string ckpt = (dir_ / "ckpt").string();
    Run first;
    {
      TrainOptions o1 = o;
      o1.config.training.save = ckpt;
      Trainer t(o1);
      first = run(t, 2);
      t.save();
    }
    TrainOptions o2 = o;
    o2.config.training.load = ckpt;
    Trainer t(o2);
    ASSERT_TRUE(t.resumed()) << what;
    ASSERT_EQ(t.iteration(), 2) << what;
    const Run rest = run(t, 2);
    const std::vector<double> got{first.losses[0], first.losses[1], rest.losses[0], rest.losses[1]};
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i], whole.losses[i]) << what << ": loss of iteration " << i + 1;
    }
    ASSERT_EQ(rest.weights.size(), whole.weights.size()) << what;
    for (const auto& [name, w] : whole.weights) {
      const auto& g = rest.weights.at(name);
      ASSERT_EQ(g.size(), w.size()) << what << ": " << name;
      EXPECT_EQ(std::memcmp(g.data(), w.data(), w.size() * sizeof(float)), 0)
          << what << ": weights of " << name << " differ after resuming";
    }
    if (check) check(t, rest);
  }

  std::filesystem::path dir_;
};

}  // namespace infinipipe::runtime::disttest_fixture
