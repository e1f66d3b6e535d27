// `mpirun -np N infinipipe train` end to end: trains, prints progress once (rank 0), saves one
// checkpoint that one process resumes; a world size that does not fit pp × dp exits 2 with one
// message saying which degrees fit.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "ckpt/checkpoint.h"
#include "common/build_paths.h"
#include "common/shell_run.h"
#include "common/test_temp.h"
#include "common/text_count.h"
#include "corpus_dir_fixture.h"
#include "dist_test_util.h"

namespace infinipipe {
namespace {

namespace fs = std::filesystem;

class DistCli : public disttest::CorpusDirTest {
 protected:
  DistCli() : CorpusDirTest("distcli") {}

  // Starts `job`, waits (up to 60 s) for its first checkpoint in `ck` to appear, sends `signal`
  // to rank 1 (found by its environment among the launcher's children) and waits for the job.
  // The output ends with "CKPT=<yes|no> HIT=<pid> RC=<job's exit code> AFTER=<seconds from the
  // signal to the end>"; without a checkpoint nothing is signalled.
  testing::ShellResult signal_rank1_after_checkpoint(const std::string& job, const std::string& ck,
                                                     const std::string& signal) const {
    const std::string script_path = (dir_ / "signal.sh").string();
    std::FILE* f = std::fopen(script_path.c_str(), "w");
    if (f == nullptr) return {1, "cannot write " + script_path};
    fmt::print(f, R"SH({} &
T=$!
C=no
for i in $(seq 600); do [ -e {}/latest ] && C=yes && break; sleep 0.1; done
K=
[ $C = yes ] && for m in $(pgrep -P $T); do
  for c in $(pgrep -P $m); do
    tr '\0' '\n' < /proc/$c/environ | grep -qx OMPI_COMM_WORLD_RANK=1 && K=$c
  done
done
[ -n "$K" ] && kill -{} $K
S=$(date +%s)
wait $T
RC=$?
[ -n "$K" ] && kill -9 $K 2>/dev/null
echo "CKPT=$C HIT=$K RC=$RC AFTER=$(( $(date +%s) - S ))"
)SH",
               job, ck, signal);
    std::fclose(f);
    return testing::shell_run("bash " + script_path);
  }

  // The job ended non-zero within `seconds` of the signal, and rank 1 was found and named.
  static void expect_ended_naming_rank1(const testing::ShellResult& j, int seconds) {
    ASSERT_NE(j.output.find("CKPT=yes"), std::string::npos)
        << "no checkpoint appeared within 60 s:\n"
        << j.output;
    ASSERT_NE(j.output.find("HIT="), std::string::npos) << j.output;
    ASSERT_EQ(j.output.find("HIT= "), std::string::npos) << "rank 1 was not found:\n" << j.output;
    EXPECT_EQ(j.output.find("RC=0"), std::string::npos) << j.output;
    const size_t at = j.output.find("AFTER=");
    ASSERT_NE(at, std::string::npos) << j.output;
    EXPECT_LT(std::stoi(j.output.substr(at + 6)), seconds) << j.output;
    EXPECT_NE(j.output.find("rank 1"), std::string::npos) << j.output;
  }

  std::string mpirun(int np, const std::string& args) const {
    return fmt::format(
        "timeout -s KILL 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -np {} env "
        "OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive {} train --num-layers 4 --hidden-size 64 "
        "--num-attention-heads 4 --num-query-groups 2 --seq-length 256 --global-batch-size 8 "
        "--device cpu --data-path {} {}",
        np, INFINIPIPE_BINARY, (dir_ / "corpus").string(), args);
  }
};

TEST_F(DistCli, TrainsOnPpTimesDpRanksAndOneProcessResumes) {
  const std::string ck = (dir_ / "ck").string();
  const testing::ShellResult j =
      testing::shell_run(mpirun(4, fmt::format("--pp 2 --dp 2 --train-iters 3 --save {}", ck)));
  ASSERT_EQ(j.exit_code, 0) << j.output;
  EXPECT_EQ(testing::text_count(j.output, "iter 3/3"), 1) << "rank 0 alone reports:\n" << j.output;
  EXPECT_EQ(testing::text_count(j.output, "done: 3 iterations"), 1) << j.output;
  ASSERT_EQ(checkpoint_find_latest(ck).value_or(-1), 3) << j.output;
  for (const char* f : {"metrics.jsonl", "metrics-rank00001.jsonl", "metrics-rank00003.jsonl"}) {
    EXPECT_TRUE(fs::exists(fs::path(ck) / f)) << f;
  }

  const testing::ShellResult r = testing::shell_run(fmt::format(
      "{} train --num-layers 4 --hidden-size 64 --num-attention-heads 4 --num-query-groups 2 "
      "--seq-length 256 --global-batch-size 8 --device cpu --data-path {} --train-iters 4 --load "
      "{}",
      INFINIPIPE_BINARY, (dir_ / "corpus").string(), ck));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("iter 4/4"), std::string::npos) << r.output;
}

// As Megatron-LM: without --data-parallel-size, dp = processes / pp; the truncation warning is
// said once, by rank 0.
TEST_F(DistCli, DataParallelIsDerivedFromTheWorldSize) {
  const testing::ShellResult j = testing::shell_run(mpirun(4, "--pp 2 --train-iters 1"));
  ASSERT_EQ(j.exit_code, 0) << j.output;
  EXPECT_NE(j.output.find("pp 2 x dp 2,"), std::string::npos) << j.output;
  EXPECT_LE(testing::text_count(j.output, "warning: --seq-length 256 truncates"), 1) << j.output;
}

TEST_F(DistCli, WorldSizeThatDoesNotFitExitsTwoOnce) {
  const testing::ShellResult j = testing::shell_run(mpirun(3, "--pp 2 --train-iters 1"));
  EXPECT_EQ(j.exit_code, 2) << j.output;
  EXPECT_EQ(testing::text_count(j.output, "infinipipe: error"), 1) << j.output;
  EXPECT_NE(j.output.find("(3,1)"), std::string::npos) << j.output;
}

// kill -9 of one rank mid-training: the job ends non-zero well inside 60 s, the survivor says
// where it stood, and `--load` continues from the last complete checkpoint.
TEST_F(DistCli, KilledRankEndsTheJobAndLoadResumes) {
  const std::string ck = (dir_ / "ck").string();
  const std::string job = mpirun(2, fmt::format("--pp 2 --train-iters 100000 --quiet --save {} "
                                                "--save-interval 2",
                                                ck));
  const testing::ShellResult j = signal_rank1_after_checkpoint(job, ck, "9");
  expect_ended_naming_rank1(j, 60);

  const auto latest = checkpoint_find_latest(ck);
  ASSERT_TRUE(latest.has_value()) << j.output;
  const testing::ShellResult r = testing::shell_run(fmt::format(
      "{} train --num-layers 4 --hidden-size 64 --num-attention-heads 4 --num-query-groups 2 "
      "--seq-length 256 --global-batch-size 8 --device cpu --data-path {} --train-iters {} "
      "--load {}",
      INFINIPIPE_BINARY, (dir_ / "corpus").string(), *latest + 1, ck));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(fmt::format("at iteration {}", *latest)), std::string::npos) << r.output;
}

TEST_F(DistCli, TimeoutFlagsAreValidated) {
  const std::string one = fmt::format(
      "{} train --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 256 "
      "--device cpu --data-path {} --train-iters 1 ",
      INFINIPIPE_BINARY, (dir_ / "corpus").string());
  testing::ShellResult j = testing::shell_run(one + "--p2p-timeout 0");
  EXPECT_EQ(j.exit_code, 2) << j.output;
  EXPECT_NE(j.output.find("p2p-timeout must be a positive number of seconds"), std::string::npos)
      << j.output;
  j = testing::shell_run(one + "--p2p-timeout 10 --watchdog-timeout 5");
  EXPECT_EQ(j.exit_code, 2) << j.output;
  EXPECT_NE(j.output.find("must exceed p2p-timeout"), std::string::npos) << j.output;
  j = testing::shell_run(one + "--watchdog-timeout -1");
  EXPECT_EQ(j.exit_code, 2) << j.output;
  EXPECT_NE(j.output.find("watchdog-timeout must be 0"), std::string::npos) << j.output;
}

// A rank that hangs (SIGSTOP) ends the job after about --p2p-timeout, not the 45 s default: the
// flag reaches the waits, and the message names the stopped rank.
TEST_F(DistCli, P2pTimeoutFlagBoundsAHang) {
  const std::string ck = (dir_ / "ck").string();
  const std::string job =
      mpirun(2, fmt::format("--pp 2 --train-iters 100000 --quiet --save {} --save-interval 2 "
                            "--p2p-timeout 4",
                            ck));
  // 4 s of waiting, a 2 s question to the stopped peer, the abort: well under the default 45 s.
  expect_ended_naming_rank1(signal_rank1_after_checkpoint(job, ck, "STOP"), 25);
}

// A save that fails on one rank only (a folder holds the name of rank 1's shard file, so its
// rename fails) ends every rank non-zero with that rank's error, and `latest` never moves.
TEST_F(DistCli, SaveFailingOnOneRankEndsEveryRank) {
  const fs::path ck = dir_ / "ck";
  fs::create_directories(ck / "iter_0000002" / "model-00002-of-00002.safetensors" / "taken");
  const testing::ShellResult j = testing::shell_run(
      mpirun(2, fmt::format("--pp 2 --train-iters 2 --quiet --save {}", ck.string())));
  EXPECT_NE(j.exit_code, 0) << j.output;
  EXPECT_NE(j.output.find("error on rank 1"), std::string::npos) << j.output;
  EXPECT_NE(j.output.find("cannot rename"), std::string::npos) << j.output;
  EXPECT_FALSE(fs::exists(ck / "latest")) << j.output;
  EXPECT_FALSE(checkpoint_find_latest(ck.string()).has_value()) << j.output;
}

}  // namespace
}  // namespace infinipipe
