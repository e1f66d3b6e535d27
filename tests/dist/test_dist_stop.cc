// Stops that keep the work (docs/reliability.md, "Stopping a run"): SIGUSR1 to mpirun (which
// OpenMPI forwards to every rank), SIGTERM to one rank only, --exit-interval, and a second
// signal. The clean stops end every rank at the same iteration with exit 0 and a complete
// checkpoint, and the run resumed from it has the losses and weights of a run that never
// stopped: both go on to the same iteration (stopped there by --exit-interval), and their
// metrics and checkpoint files are compared exactly. EPP plans a long-tail corpus under a budget
// that makes it slice the long sequences and pack the short ones. --cost-model-update off: the
// online fit's state is not in the checkpoint yet, and it changes the plans of a resumed run.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "common/build_paths.h"
#include "common/shell_run.h"
#include "common/test_temp.h"
#include "common/text_count.h"
#include "dist_test_util.h"

namespace infinipipe {
namespace {

namespace fs = std::filesystem;

class DistStop : public ::testing::Test {
 protected:
  void SetUp() override {
    if (disttest::under_mpirun()) GTEST_SKIP() << "launches its own mpirun jobs";
    dir_ = test::test_temp_path("diststop");
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const testing::ShellResult j = testing::shell_run(
        fmt::format("{} data synth --output {} --seq-length 1024 --distribution github "
                    "--num-documents 400 --seed 1",
                    INFINIPIPE_BINARY, (dir_ / "corpus").string()));
    ASSERT_EQ(j.exit_code, 0) << j.output;
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // The training flags every run of a test shares, with a fixed lr schedule (not tied to
  // --train-iters). Under mpirun (pp 2) EPP plans without recompute under a budget that makes
  // it slice (K of 4 to 10 slices) and pack.
  std::string train_args(const std::string& extra, bool budget = true) const {
    return fmt::format(
        "train --num-layers 4 --hidden-size 64 --num-attention-heads 4 --num-query-groups 2 "
        "--seq-length 1024 --global-batch-size 8 --device cpu --data-path {} {} "
        "--cost-model-update off --lr-decay-iters 200 --train-iters 200 {}",
        (dir_ / "corpus").string(),
        budget ? "--memory-budget 11MiB --min-tail-slice 16 --recompute-granularity none" : "",
        extra);
  }

  // A job of np ranks; mca: extra mpirun options.
  std::string mpirun(int np, const std::string& args, const std::string& mca = "") const {
    return fmt::format(
        "timeout -s KILL 120 mpirun --allow-run-as-root --oversubscribe --bind-to none {} -np {} "
        "env OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive {} {}",
        mca, np, INFINIPIPE_BINARY, train_args(args));
  }

  // The shell condition of `metrics` holding at least `lines` iterations.
  static std::string metrics_hold(const fs::path& metrics, int lines) {
    return fmt::format("[ -f {0} ] && [ $(wc -l < {0}) -ge {1} ]", metrics.string(), lines);
  }

  std::string job_log() const { return (dir_ / "job.log").string(); }

  // Starts `job`, waits (up to 90 s) until the shell condition `ready` holds, sends `signal` to
  // `target` ("mpirun", "rank N" or "self" for a job without a launcher) and waits for the job.
  // With `again`, a second `signal` follows once the target said it will stop, past the window
  // in which a repeat counts as the same request. The output ends with
  // "HIT=<pid> RC=<the job's exit code>".
  testing::ShellResult signal_mid_run(const std::string& job, const std::string& ready,
                                      const std::string& target, const std::string& signal,
                                      bool again = false) const {
    const std::string script_path = (dir_ / "signal.sh").string();
    const std::string log = job_log();
    std::string find;
    if (target == "self") {
      find = "K=$T";
    } else if (target == "mpirun") {
      find = "K=$(pgrep -P $T)";
    } else {
      find = fmt::format(
          "for m in $(pgrep -P $T); do for c in $(pgrep -P $m); do tr '\\0' '\\n' < "
          "/proc/$c/environ | grep -qx OMPI_COMM_WORLD_RANK={} && K=$c; done; done",
          target.substr(5));
    }
    std::FILE* f = std::fopen(script_path.c_str(), "w");
    if (f == nullptr) return {1, "cannot write " + script_path};
    fmt::print(f, R"SH({job} > {log} 2>&1 &
T=$!
for i in $(seq 900); do {ready} && break; sleep 0.1; done
K=
{find}
[ -n "$K" ] && kill -{sig} $K
if [ -n "$K" ] && [ {again} = 1 ]; then
  for i in $(seq 600); do grep -q 'stopping after this iteration' {log} && break; sleep 0.1; done
  sleep 1.5
  kill -{sig} $K
fi
wait $T
RC=$?
cat {log}
echo "HIT=$K RC=$RC"
)SH",
               fmt::arg("job", job), fmt::arg("log", log), fmt::arg("ready", ready),
               fmt::arg("find", find), fmt::arg("sig", signal),
               fmt::arg("again", again ? 1 : 0));
    std::fclose(f);
    return testing::shell_run("bash " + script_path);
  }

  // The iteration a clean stop reported ("stopped at iteration K of 200 (<why>)"), -1 if none.
  static int64_t stopped_at(const std::string& output, const std::string& why) {
    const std::string key = "stopped at iteration ";
    const size_t at = output.find(key);
    if (at == std::string::npos) return -1;
    const int64_t k = std::stoll(output.substr(at + key.size()));
    const std::string tail = fmt::format("{} of 200 ({}", k, why);
    return output.find(key + tail) == at ? k : -1;
  }

  // Nobody failed: no error, no rank reporting another's failure, no launcher abort notice.
  static void expect_no_failure(const std::string& output) {
    EXPECT_EQ(output.find("error"), std::string::npos) << output;
    EXPECT_EQ(output.find("another rank failed"), std::string::npos) << output;
    EXPECT_EQ(output.find("was stopped during"), std::string::npos) << output;
    EXPECT_EQ(output.find("exited on signal"), std::string::npos) << output;
  }

  // iteration -> the exact loss of each line of a metrics file.
  static std::map<int64_t, double> losses(const fs::path& metrics) {
    std::map<int64_t, double> out;
    std::ifstream in(metrics);
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json j = nlohmann::json::parse(line);
      out[j.at("iteration").get<int64_t>()] = j.at("loss").get<double>();
    }
    return out;
  }

  static std::string file_bytes(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  // The resumed run (from `resumed`) and the uninterrupted one (`reference`) both stopped at
  // `iteration`: equal losses from `from` on, and equal weights and optimizer state (every
  // safetensors file of the two checkpoints, byte for byte).
  static void expect_same_run(const fs::path& resumed, const fs::path& reference, int64_t from,
                              int64_t iteration) {
    const std::map<int64_t, double> a = losses(resumed / "metrics.jsonl");
    const std::map<int64_t, double> b = losses(reference / "metrics.jsonl");
    for (int64_t it = from; it <= iteration; ++it) {
      ASSERT_TRUE(a.count(it) && b.count(it)) << "iteration " << it;
      EXPECT_EQ(a.at(it), b.at(it)) << "loss of iteration " << it;
    }
    const fs::path da = checkpoint_iter_dir(resumed.string(), iteration);
    const fs::path db = checkpoint_iter_dir(reference.string(), iteration);
    int files = 0;
    for (const auto& e : fs::directory_iterator(db)) {
      if (e.path().extension() != ".safetensors") continue;
      ++files;
      const fs::path other = da / e.path().filename();
      ASSERT_TRUE(fs::exists(other)) << other;
      EXPECT_TRUE(file_bytes(e.path()) == file_bytes(other)) << e.path().filename() << " differs";
    }
    EXPECT_GT(files, 0) << db;
  }

  // From the checkpoint of a run stopped at k in `ck`: the resumed run and a fresh one both
  // stop at k + 2 by --exit-interval (exit 0, saying so) and are the same run.
  void expect_resume_is_exact(int np, const std::string& layout, const fs::path& ck, int64_t k) {
    const int64_t until = k + 2;
    const std::string stop = fmt::format("--exit-interval {} --quiet", until);
    const testing::ShellResult r = testing::shell_run(mpirun(
        np, fmt::format("{} --load {} --save {} {}", layout, ck.string(), ck.string(), stop)));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(stopped_at(r.output, "at --exit-interval"), until) << r.output;
    const fs::path ref = dir_ / "reference";
    const testing::ShellResult f =
        testing::shell_run(mpirun(np, fmt::format("{} --save {} {}", layout, ref.string(), stop)));
    ASSERT_EQ(f.exit_code, 0) << f.output;
    EXPECT_EQ(stopped_at(f.output, "at --exit-interval"), until) << f.output;
    EXPECT_EQ(checkpoint_find_latest(ref.string()).value_or(-1), until);
    expect_same_run(ck, ref, k + 1, until);
  }

  fs::path dir_;
};

// SIGUSR1 to mpirun, which OpenMPI forwards to every rank without ending the job (a SIGTERM or
// SIGINT to mpirun aborts the job instead; docs/reliability.md). Every rank finishes the
// iteration, they save one checkpoint, the first rank says so once, every rank exits 0.
TEST_F(DistStop, Sigusr1ToMpirunStopsEveryRankAndResumesExactly) {
  const fs::path ck = dir_ / "ck";
  const testing::ShellResult j =
      signal_mid_run(mpirun(2, fmt::format("--pp 2 --quiet --save {}", ck.string())),
                     metrics_hold(ck / "metrics.jsonl", 2), "mpirun", "USR1");
  ASSERT_EQ(j.output.find("HIT= "), std::string::npos) << "mpirun was not found:\n" << j.output;
  EXPECT_NE(j.output.find("RC=0"), std::string::npos) << j.output;
  const int64_t k = stopped_at(j.output, "SIGUSR1");
  ASSERT_GE(k, 2) << j.output;
  EXPECT_EQ(testing::text_count(j.output, "stopped at iteration"), 1) << j.output;
  expect_no_failure(j.output);
  ASSERT_EQ(checkpoint_find_latest(ck.string()).value_or(-1), k) << j.output;
  expect_resume_is_exact(2, "--pp 2", ck, k);
}

// SIGTERM to mpirun, with OpenMPI's SIGKILL delay raised: mpirun relays SIGTERM to every rank,
// which stop with one checkpoint and the first rank's line, nobody failing (mpirun itself then
// exits 1 after twice the delay, whatever the ranks did: docs/reliability.md). Signals arriving
// on every rank at once are what an asynchronous handler on the training thread did not survive.
TEST_F(DistStop, SigtermToMpirunWithARaisedKillDelayStopsEveryRankCleanly) {
  const fs::path ck = dir_ / "ck";
  const testing::ShellResult j = signal_mid_run(
      mpirun(2, fmt::format("--pp 2 --quiet --save {}", ck.string()),
             "--mca odls_base_sigkill_timeout 8"),
      metrics_hold(ck / "metrics.jsonl", 2), "mpirun", "TERM");
  ASSERT_EQ(j.output.find("HIT= "), std::string::npos) << "mpirun was not found:\n" << j.output;
  const int64_t k = stopped_at(j.output, "SIGTERM");
  ASSERT_GE(k, 2) << j.output;
  expect_no_failure(j.output);
  EXPECT_EQ(checkpoint_find_latest(ck.string()).value_or(-1), k) << j.output;
}

// SIGTERM to one rank of four (pp 2 x dp 2): the stop flag every rank all-reduces after each
// iteration stops the other three at the same iteration; every rank exits 0, so mpirun does.
TEST_F(DistStop, SigtermToOneRankStopsEveryRankAndResumesExactly) {
  const fs::path ck = dir_ / "ck";
  const testing::ShellResult j = signal_mid_run(
      mpirun(4, fmt::format("--pp 2 --dp 2 --quiet --save {}", ck.string())),
      metrics_hold(ck / "metrics.jsonl", 2), "rank 3", "TERM");
  ASSERT_EQ(j.output.find("HIT= "), std::string::npos) << "rank 3 was not found:\n" << j.output;
  EXPECT_NE(j.output.find("RC=0"), std::string::npos) << j.output;
  EXPECT_NE(j.output.find("rank 3 (stage 1, replica 1): SIGTERM received"), std::string::npos)
      << j.output;
  const int64_t k = stopped_at(j.output, "SIGTERM");
  ASSERT_GE(k, 2) << j.output;
  expect_no_failure(j.output);
  ASSERT_EQ(checkpoint_find_latest(ck.string()).value_or(-1), k) << j.output;
  expect_resume_is_exact(4, "--pp 2 --dp 2", ck, k);
}

// scripts/mpirun_stoppable.sh (what scripts/demo.sh runs): a SIGTERM to the script, like the
// Ctrl-C it gets from the terminal, reaches the ranks as SIGUSR1, and the job stops cleanly.
TEST_F(DistStop, StoppableLauncherTurnsItsSignalIntoACleanStop) {
  const fs::path ck = dir_ / "ck";
  const std::string job = fmt::format(
      "bash {}/scripts/mpirun_stoppable.sh --allow-run-as-root --oversubscribe --bind-to none -np "
      "2 env OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive {} {}",
      INFINIPIPE_SOURCE_DIR, INFINIPIPE_BINARY,
      train_args(fmt::format("--pp 2 --quiet --save {}", ck.string())));
  const testing::ShellResult j =
      signal_mid_run(job, metrics_hold(ck / "metrics.jsonl", 1), "self", "TERM");
  EXPECT_NE(j.output.find("RC=0"), std::string::npos) << j.output;
  EXPECT_NE(j.output.find("mpirun_stoppable: stopping after the current iteration"),
            std::string::npos)
      << j.output;
  const int64_t k = stopped_at(j.output, "SIGUSR1");
  ASSERT_GE(k, 1) << j.output;
  expect_no_failure(j.output);
  EXPECT_EQ(checkpoint_find_latest(ck.string()).value_or(-1), k) << j.output;
}

// --exit-interval without --save: stops at the first multiple, says nothing was saved, exits 0;
// --exit-duration-in-mins stops after the iteration in which the time ran out.
TEST_F(DistStop, ExitIntervalAndDurationWithoutSaveSaySoAndExitZero) {
  const testing::ShellResult r = testing::shell_run(fmt::format(
      "OMP_NUM_THREADS=1 {} {}", INFINIPIPE_BINARY,
      train_args("--exit-interval 3 --quiet", /*budget=*/false)));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("stopped at iteration 3 of 200 (at --exit-interval 3): nothing saved, "
                          "--save was not given"),
            std::string::npos)
      << r.output;
  // 0.0001 minutes (6 ms) pass before the first iteration ends: the run stops after it.
  const testing::ShellResult d = testing::shell_run(
      fmt::format("OMP_NUM_THREADS=1 {} {}", INFINIPIPE_BINARY,
                  train_args("--exit-duration-in-mins 0.0001 --quiet", /*budget=*/false)));
  EXPECT_EQ(d.exit_code, 0) << d.output;
  EXPECT_EQ(stopped_at(d.output, "after --exit-duration-in-mins 0.0001"), 1) << d.output;
}

// --exit-signal-handler=false restores the default action: SIGTERM ends the run at once
// (exit 143), no stop line, no checkpoint of the iteration it was in.
TEST_F(DistStop, WithoutTheHandlerSigtermEndsTheRunAtOnce) {
  const fs::path ck = dir_ / "ck";
  const std::string job =
      fmt::format("OMP_NUM_THREADS=1 {} {}", INFINIPIPE_BINARY,
                  train_args(fmt::format("--exit-signal-handler=false --quiet --save {}",
                                         ck.string()),
                             /*budget=*/false));
  const testing::ShellResult j =
      signal_mid_run(job, metrics_hold(ck / "metrics.jsonl", 1), "self", "TERM");
  EXPECT_NE(j.output.find("RC=143"), std::string::npos) << j.output;
  EXPECT_EQ(j.output.find("SIGTERM received"), std::string::npos) << j.output;
  EXPECT_EQ(j.output.find("stopped at iteration"), std::string::npos) << j.output;
  EXPECT_FALSE(checkpoint_find_latest(ck.string()).has_value()) << j.output;
}

// A second SIGTERM while the first stop is under way ends the process at once, by the signal,
// without writing anything: the checkpoint it resumed from is still the newest and verifies.
TEST_F(DistStop, SecondSignalStopsAtOnceKeepingTheLastCheckpoint) {
  const fs::path ck = dir_ / "ck";
  // Iterations of several seconds (large batches), so the second signal, sent 1.5 s after the
  // first was acknowledged, lands in the iteration the first one lets finish.
  const std::string job = fmt::format(
      "OMP_NUM_THREADS=1 {} train --num-layers 4 --hidden-size 128 --num-attention-heads 4 "
      "--seq-length 1024 --global-batch-size 64 --device cpu --data-path {} --train-iters 200 "
      "--cost-model-update off --save {} --load {}",
      INFINIPIPE_BINARY, (dir_ / "corpus").string(), ck.string(), ck.string());
  const testing::ShellResult first = testing::shell_run(job + " --exit-interval 1");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  ASSERT_EQ(checkpoint_find_latest(ck.string()).value_or(-1), 1) << first.output;

  const testing::ShellResult j =
      signal_mid_run(job, fmt::format("grep -q 'resumed from' {}", job_log()), "self", "TERM",
                     /*again=*/true);
  EXPECT_NE(j.output.find("RC=143"), std::string::npos) << "ended by SIGTERM:\n" << j.output;
  EXPECT_NE(j.output.find("second stop signal (SIGTERM): stopping at once"), std::string::npos)
      << j.output;
  EXPECT_EQ(j.output.find("stopped at iteration"), std::string::npos) << j.output;
  EXPECT_EQ(checkpoint_find_latest(ck.string()).value_or(-1), 1) << j.output;
  const testing::ShellResult v = testing::shell_run(
      fmt::format("{} checkpoint verify {}", INFINIPIPE_BINARY, ck.string()));
  EXPECT_EQ(v.exit_code, 0) << v.output;
}

}  // namespace
}  // namespace infinipipe
