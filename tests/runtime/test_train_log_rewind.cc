// A run's logs tell each iteration once: a resumed run cuts the records past its checkpoint, a
// run from scratch starts its logs anew, and a file that is not a log is refused untouched.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/synth_corpus.h"
#include "common/tiny_train.h"
#include "common/trainer_dir_test.h"
#include "core/error.h"
#include "runtime/train.h"
#include "runtime/train_log_rewind.h"

namespace infinipipe::runtime {
namespace {

namespace fs = std::filesystem;

class TrainLogRewind : public testing::TrainerDirTest {
 protected:
  TrainLogRewind() : TrainerDirTest("log_rewind") {}

  std::string write(const std::string& text) const {
    const std::string p = (dir_ / "metrics.jsonl").string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  static std::string read(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }
  static std::vector<int64_t> iterations(const std::string& p) {
    std::vector<int64_t> out;
    std::ifstream f(p);
    for (std::string line; std::getline(f, line);)
      out.push_back(nlohmann::json::parse(line).at("iteration").get<int64_t>());
    return out;
  }
};

const char* kTwoRuns =
    "{\"iteration\":1,\"loss\":5}\n{\"iteration\":2,\"loss\":4}\n{\"iteration\":3,\"loss\":3}\n"
    "{\"iteration\":1,\"loss\":5}\n";

TEST_F(TrainLogRewind, KeepsTheRecordsUpToTheResumedIteration) {
  const std::string p = write(kTwoRuns);
  train_log_rewind(p, 2);
  EXPECT_EQ(read(p), "{\"iteration\":1,\"loss\":5}\n{\"iteration\":2,\"loss\":4}\n");
  train_log_rewind(p, 2);  // nothing past 2 left: unchanged
  EXPECT_EQ(iterations(p), (std::vector<int64_t>{1, 2}));
}

TEST_F(TrainLogRewind, ARunFromScratchStartsAnEmptyLog) {
  const std::string p = write(kTwoRuns);
  train_log_rewind(p, 0);
  EXPECT_TRUE(fs::exists(p));
  EXPECT_EQ(read(p), "");
}

TEST_F(TrainLogRewind, AHalfWrittenLastLineIsCut) {
  const std::string p = write("{\"iteration\":1}\n{\"iteration\":2}\n{\"itera");
  train_log_rewind(p, 5);
  EXPECT_EQ(read(p), "{\"iteration\":1}\n{\"iteration\":2}\n");
}

TEST_F(TrainLogRewind, AFileThatIsNotALogIsRefusedUntouched) {
  for (const std::string text : {"name,loss\n1,2\n3,4\n", "{\"iteration\":1}\n[1,2]\n{}\n",
                                 "{\"iteration\":1}\n{\"step\":2}\n{\"iteration\":3}\n",
                                 "{\"iteration\":-1}\n{\"iteration\":3}\n"}) {
    const std::string p = write(text);
    try {
      train_log_rewind(p, 0);
      ADD_FAILURE() << "accepted " << text;
    } catch (const ConfigError& e) {  // a usage error: exit 2
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("line"), std::string::npos) << e.what();
    }
    EXPECT_EQ(read(p), text);
  }
}

TEST_F(TrainLogRewind, ALinkIsRefusedAndItsTargetKept) {
  const std::string target = write(kTwoRuns);
  const fs::path link = dir_ / "link.jsonl";
  fs::create_symlink(target, link);
  EXPECT_THROW(train_log_rewind(link.string(), 0), ConfigError);
  EXPECT_EQ(read(target), kTwoRuns);
}

// A FIFO where the log should be is refused at once, never read (which would wait for a writer).
TEST_F(TrainLogRewind, AFifoIsRefusedWithoutWaiting) {
  const fs::path fifo = dir_ / "fifo.jsonl";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  try {
    train_log_rewind(fifo.string(), 0);
    FAIL() << "a FIFO was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
}

TEST_F(TrainLogRewind, NoFileOrNoPathIsNothingToDo) {
  EXPECT_NO_THROW(train_log_rewind((dir_ / "absent.jsonl").string(), 3));
  EXPECT_FALSE(fs::exists(dir_ / "absent.jsonl"));
  EXPECT_NO_THROW(train_log_rewind("", 3));
}

// Through train_run: a rerun from scratch and a resume from an earlier checkpoint leave metrics
// and timings with iterations 1..N once each, in order.
TEST_F(TrainLogRewind, RerunsAndResumesLeaveEachIterationOnce) {
  testing::synth_corpus_write_small((dir_ / "corpus").string(), 200);
  auto options = [&](int64_t iters) {
    TrainOptions o = testing::tiny_train_options(2, iters, (dir_ / "corpus").string());
    o.metrics_path = (dir_ / "logs" / "metrics.jsonl").string();
    o.timings_path = (dir_ / "logs" / "timings.jsonl").string();
    o.config.training.save = (dir_ / "ck").string();
    o.config.training.save_interval = 2;
    return o;
  };
  ASSERT_EQ(train_run(options(3)).size(), 3u);
  ASSERT_EQ(train_run(options(3)).size(), 3u);  // from scratch again, into the same folders
  const std::vector<int64_t> three{1, 2, 3};
  EXPECT_EQ(iterations(options(3).metrics_path), three);
  EXPECT_EQ(iterations(options(3).timings_path), three);

  // Resumed from the checkpoint of iteration 2: iteration 3 is run again, and 4 after it.
  TrainOptions r = options(4);
  r.config.training.load = (dir_ / "ck").string();
  ASSERT_TRUE(fs::remove_all(dir_ / "ck" / "iter_0000003") > 0);  // latest: iteration 2's
  ASSERT_EQ(train_run(r).size(), 2u);
  const std::vector<int64_t> four{1, 2, 3, 4};
  EXPECT_EQ(iterations(r.metrics_path), four);
  EXPECT_EQ(iterations(r.timings_path), four);
}

}  // namespace
}  // namespace infinipipe::runtime
