// The training loop: resume is bit-identical, the loss falls on the synthetic corpus, metrics are
// written, and bad setups are refused with a clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "common/synth_corpus.h"
#include "common/tiny_train.h"
#include "common/trainer_dir_test.h"
#include "core/error.h"
#include "core/strings.h"
#include "cost/calibration.h"
#include "cost/online_fit.h"
#include "data/synth.h"
#include "plan/plan_json.h"
#include "plan/schedule_table.h"
#include "profile/profile.h"
#include "runlog/timings_record.h"
#include "runtime/train.h"

namespace infinipipe::runtime {
namespace {

namespace fs = std::filesystem;

class TrainTest : public testing::TrainerDirTest {
 protected:
  TrainTest() : TrainerDirTest("train") {}
  void SetUp() override {
    TrainerDirTest::SetUp();
    testing::synth_corpus_write_small((dir_ / "corpus").string(), 200);
  }

  TrainOptions options(int64_t iters) const {
    TrainOptions o = testing::tiny_train_options(2, iters, (dir_ / "corpus").string());
    o.config.model.tie_embeddings = false;  // the model the budgets here were sized for
    Config& c = o.config;
    c.training.lr = 3e-3;
    c.training.min_lr = 3e-4;
    c.training.lr_warmup_iters = iters >= 3 ? 3 : 0;
    c.training.weight_decay = 0.01;
    c.training.seed = 9;
    c.validate();
    return o;
  }
};

std::vector<std::vector<float>> weights_of(Trainer& t) {
  std::vector<std::vector<float>> w;
  for (const ParamRef& p : t.params()) w.emplace_back(p.value, p.value + p.numel);
  return w;
}

TEST_F(TrainTest, ResumeFromACheckpointIsBitIdentical) {
  // Uninterrupted: 4 iterations, checkpoints at 2 and 4. A budget tight enough to plan several
  // chunks with recompute makes the plans part of what must repeat exactly.
  TrainOptions a = options(4);
  a.config.training.save = (dir_ / "a").string();
  a.config.training.save_interval = 2;
  a.config.training.memory_budget = 5 << 20;
  const auto full = train_run(a);
  ASSERT_EQ(full.size(), 4u);
  ASSERT_TRUE(checkpoint_is_complete(a.config.training.save, 2));
  ASSERT_TRUE(checkpoint_is_complete(a.config.training.save, 4));

  // A run that only has the iteration-2 checkpoint.
  const fs::path b = dir_ / "b";
  fs::create_directories(b);
  fs::copy(dir_ / "a" / "iter_0000002", b / "iter_0000002", fs::copy_options::recursive);
  std::ofstream(b / "latest") << "2\n";
  TrainOptions r = options(4);
  r.config.training.load = b.string();
  r.config.training.memory_budget = a.config.training.memory_budget;
  Trainer resumed(r);
  ASSERT_EQ(resumed.iteration(), 2);
  EXPECT_EQ(resumed.consumed_samples(), 2 * 8);
  for (int i = 2; i < 4; ++i) {
    const obs::IterationMetrics m = resumed.step();
    EXPECT_EQ(m.iteration, full[i].iteration);
    EXPECT_EQ(m.loss, full[i].loss) << "iteration " << m.iteration << " differs after resume";
    EXPECT_EQ(m.grad_norm, full[i].grad_norm);
    EXPECT_EQ(m.lr, full[i].lr);
    EXPECT_GT(m.recompute_layers, 0) << "the budget should force recompute";
    EXPECT_GT(m.chunks, 1);
  }
  // The weights after iteration 4 equal the uninterrupted run's, bit for bit.
  TrainOptions l = options(4);
  l.config.training.load = a.config.training.save;
  Trainer saved(l);
  ASSERT_EQ(saved.iteration(), 4);
  const auto w_saved = weights_of(saved), w_resumed = weights_of(resumed);
  ASSERT_EQ(w_saved.size(), w_resumed.size());
  for (size_t i = 0; i < w_saved.size(); ++i) {
    ASSERT_EQ(w_saved[i].size(), w_resumed[i].size());
    EXPECT_EQ(0, std::memcmp(w_saved[i].data(), w_resumed[i].data(), w_saved[i].size() * 4))
        << "parameter " << saved.params()[i].name;
  }
}

// Plans of a batch-level schedule with a fixed micro-batch size and no recompute do not depend
// on the cost model, so with the refit on or off the runs execute the very same plans: losses and
// weights must be bit-identical, while the planner's coefficients moved.
TEST_F(TrainTest, OnlineCostModelUpdateLeavesTheMathsAlone) {
  struct Result {
    std::vector<double> losses;
    std::vector<plan::Plan> plans;
    std::vector<std::vector<float>> weights;
    cost::Coefficients planned_with;
  };
  const auto train = [&](CostModelUpdate update) {
    TrainOptions o = options(4);
    o.config.parallel.schedule = Schedule::one_f_one_b;
    o.config.parallel.micro_batch_size = 2;
    o.config.parallel.recompute_granularity = RecomputeGranularity::none;
    o.config.training.cost_model_update = update;
    o.config.validate();
    Trainer t(o);
    Result r;
    for (int i = 0; i < 4; ++i) {
      r.losses.push_back(t.step().loss);
      r.plans.push_back(t.last_plan());
    }
    r.weights = weights_of(t);
    r.planned_with = t.plan_cost_model().coefficients();
    EXPECT_EQ(t.cost_loop().calibration().has_value(), update == CostModelUpdate::online);
    return r;
  };
  const Result off = train(CostModelUpdate::off), online = train(CostModelUpdate::online);
  ASSERT_EQ(off.plans.size(), online.plans.size());
  for (size_t i = 0; i < off.plans.size(); ++i) {
    EXPECT_EQ(plan::plan_to_json(off.plans[i]).at("chunks"),
              plan::plan_to_json(online.plans[i]).at("chunks"))
        << "iteration " << i + 1 << " ran another plan";
    EXPECT_EQ(off.losses[i], online.losses[i]) << "iteration " << i + 1;
  }
  ASSERT_EQ(off.weights.size(), online.weights.size());
  for (size_t i = 0; i < off.weights.size(); ++i)
    EXPECT_EQ(0, std::memcmp(off.weights[i].data(), online.weights[i].data(),
                             off.weights[i].size() * sizeof(float)))
        << "parameter " << i;
  // The refit did run: the last plans were made with other time terms than the prior's.
  EXPECT_NE(online.planned_with.alpha2, off.planned_with.alpha2);
  EXPECT_EQ(off.planned_with.alpha2,
            profile::engine_cost_model(options(4).config).coefficients().alpha2);
}

// What a run learned is left in its --trace and --save directories as a calibration file that
// --calibration loads back.
TEST_F(TrainTest, OnlineRunLeavesACalibrationThatLoadsBack) {
  TrainOptions o = options(4);
  o.config.training.cost_model_update = CostModelUpdate::online;
  o.config.training.save = (dir_ / "save").string();
  o.trace_dir = (dir_ / "trace").string();
  train_run(o);
  const cost::CostModel prior = profile::engine_cost_model(o.config);
  for (const fs::path& d : {dir_ / "save", dir_ / "trace"}) {
    const fs::path file = d / kOnlineCalibrationFile;
    ASSERT_TRUE(fs::exists(file)) << file;
    const cost::Calibration cal = cost::load_calibration(file.string());
    EXPECT_NE(cal.coeffs.alpha2, prior.coefficients().alpha2);
    EXPECT_EQ(cal.coeffs.act_bytes_per_token_layer, prior.coefficients().act_bytes_per_token_layer);
    EXPECT_GT(cal.fit_residual_forward, 0.0);
    EXPECT_GT(cal.fit_residual_backward, 0.0);
    Config next = o.config;
    next.cluster.calibration = file.string();
    const cost::CostModel loaded = cost::CostModel::from_config(next);
    EXPECT_EQ(cost::online_terms_get(loaded.coefficients()), cost::online_terms_get(cal.coeffs));
  }
  // Off: nothing learned, nothing written.
  TrainOptions off = options(1);
  off.config.training.save = (dir_ / "off").string();
  train_run(off);
  EXPECT_FALSE(fs::exists(dir_ / "off" / kOnlineCalibrationFile));
}

TEST_F(TrainTest, LossFallsOnTheSyntheticCorpus) {
  TrainOptions o = options(30);
  o.metrics_path = (dir_ / "logs" / "metrics.jsonl").string();
  if (getenv("KEEP_METRICS")) o.metrics_path = getenv("KEEP_METRICS");
  const auto it = train_run(o);
  ASSERT_EQ(it.size(), 30u);
  auto mean = [&](size_t lo, size_t hi) {
    double s = 0;
    for (size_t i = lo; i < hi; ++i) s += it[i].loss;
    return s / static_cast<double>(hi - lo);
  };
  const double first = mean(0, 5), middle = mean(12, 17), last = mean(25, 30);
  EXPECT_NEAR(it[0].loss, std::log(257.0), 0.5) << "a fresh model predicts near uniformly";
  EXPECT_LT(middle, first - 0.5);
  EXPECT_LT(last, middle - 0.1);
  EXPECT_LT(last, 3.5) << "well below ln 257 = 5.55";
  for (const obs::IterationMetrics& m : it) {
    EXPECT_TRUE(std::isfinite(m.grad_norm));
    EXPECT_GT(m.tokens_per_s, 0);
    EXPECT_GT(m.measured_peak_bytes, 0);
    EXPECT_GT(m.predicted_peak_bytes, 0);
    EXPECT_EQ(m.schedule, "epp");
  }
  // One JSON line per iteration, in order, with the numbers reported.
  std::ifstream f(o.metrics_path);
  std::string line;
  int64_t n = 0;
  while (std::getline(f, line)) {
    const auto j = nlohmann::json::parse(line);
    ASSERT_LT(n, 30);
    EXPECT_EQ(j.at("iteration").get<int64_t>(), n + 1);
    EXPECT_DOUBLE_EQ(j.at("loss").get<double>(), it[static_cast<size_t>(n)].loss);
    EXPECT_TRUE(j.contains("measured_peak_bytes") && j.contains("predicted_peak_bytes"));
    ++n;
  }
  EXPECT_EQ(n, 30);
}

TEST_F(TrainTest, ZeroIterationsSavesTheInitialWeights) {
  TrainOptions o = options(0);
  o.config.training.data_path.clear();  // no data is needed to write the initial weights
  o.config.training.save = (dir_ / "init").string();
  EXPECT_TRUE(train_run(o).empty());
  ASSERT_TRUE(checkpoint_is_complete(o.config.training.save, 0));
  Trainer fresh(options(0));
  TrainOptions l = options(0);
  l.config.training.load = o.config.training.save;
  Trainer loaded(l);
  EXPECT_EQ(weights_of(fresh), weights_of(loaded));
  CheckpointReader reader(o.config.training.save);
  EXPECT_EQ(reader.iteration(), 0);
  EXPECT_EQ(reader.config().at("yaml").get<std::string>(), "test: true\n");
}

TEST_F(TrainTest, EveryScheduleTrainsAndRecordsActionTimings) {
  for (Schedule s : {Schedule::one_f_one_b, Schedule::gpipe, Schedule::seq1f1b}) {
    TrainOptions o = options(2);
    o.config.parallel.schedule = s;
    o.timings_path = (dir_ / fmt::format("timings_{}.jsonl", plan::schedule_name(s))).string();
    const auto it = train_run(o);
    ASSERT_EQ(it.size(), 2u);
    EXPECT_EQ(it[0].schedule, plan::schedule_name(s));
    EXPECT_TRUE(std::isfinite(it[1].loss));
    // Every action of the plan, measured, next to its prediction; each line fits the schema.
    std::ifstream f(o.timings_path);
    std::string line;
    int64_t n = 0;
    while (std::getline(f, line)) {
      const runlog::ActionTimingsRecord r =
          runlog::timings_record_from_json(nlohmann::json::parse(line), o.timings_path, "");
      EXPECT_EQ(r.iteration, ++n);
      EXPECT_EQ(static_cast<int64_t>(r.actions.size()),
                4 * it[static_cast<size_t>(n - 1)].chunks / 2);
      double prev_end = 0;
      for (const runlog::TimedAction& a : r.actions) {
        EXPECT_GT(a.predicted_s, 0);
        EXPECT_LE(a.start_s, a.end_s);
        EXPECT_GE(a.start_s, prev_end) << "one rank runs actions in order";
        prev_end = a.end_s;
      }
    }
    EXPECT_EQ(n, 2);
  }
}

TEST_F(TrainTest, LoadEqualToSaveStartsFreshThenResumes) {
  TrainOptions o = options(1);
  o.config.training.save = o.config.training.load = (dir_ / "job").string();
  const auto first = train_run(o);  // no checkpoint yet: from scratch
  ASSERT_EQ(first.size(), 1u);
  o.config.training.train_iters = 2;
  const auto second = train_run(o);  // resumes at 1
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].iteration, 2);
  // A --load elsewhere that holds nothing is a mistake, not a fresh start.
  o.config.training.load = (dir_ / "empty").string();
  EXPECT_THROW(train_run(o), ConfigError);
}

TEST_F(TrainTest, MissingDataPathSaysHowToMakeOne) {
  TrainOptions o = options(3);
  o.config.training.data_path.clear();
  try {
    train_run(o);
    FAIL() << "trained without data";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--data-path"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("infinipipe data synth"), std::string::npos) << e.what();
  }
}

TEST_F(TrainTest, MultiRankLayoutsAreRefusedClearly) {
  TrainOptions o = options(3);
  o.config.parallel.pipeline_parallel = 2;
  o.config.cluster.num_devices = 0;
  o.config.validate();
  try {
    train_run(o);
    FAIL() << "pp = 2 ran in one process";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("pp = 2"), std::string::npos) << e.what();
  }
}

TEST_F(TrainTest, DamagedCheckpointIsRefusedAsARuntimeError) {
  TrainOptions o = options(1);
  o.config.training.save = (dir_ / "ck").string();
  train_run(o);
  const fs::path model = dir_ / "ck" / "iter_0000001" / "model.safetensors";
  ASSERT_TRUE(fs::exists(model));
  {
    std::fstream f(model, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(model) - 5));
    const char junk[4] = {0x12, 0x34, 0x56, 0x78};
    f.write(junk, 4);
  }
  TrainOptions l = options(2);
  l.config.training.load = (dir_ / "ck").string();
  try {
    train_run(l);
    FAIL() << "a damaged checkpoint was loaded";
  } catch (const ConfigError& e) {
    FAIL() << "damage is a runtime error (exit 1), not a configuration error: " << e.what();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.safetensors"), std::string::npos) << e.what();
  }
}

TEST(Metrics, DurationsAndPathsReadWell) {
  EXPECT_EQ(format_duration(12.4), "12s");
  EXPECT_EQ(format_duration(252), "4m12s");
  EXPECT_EQ(format_duration(3780), "1h03m");
  EXPECT_EQ(train_metrics_path("m.jsonl", "logs", "tr", "ck"), "m.jsonl");
  EXPECT_EQ(train_metrics_path("", "logs", "tr", "ck"), "logs/metrics.jsonl");
  EXPECT_EQ(train_metrics_path("", "", "tr", "ck"), "tr/metrics.jsonl");
  EXPECT_EQ(train_metrics_path("", "", "", "ck"), "ck/metrics.jsonl");
  EXPECT_EQ(train_metrics_path("", "", "", ""), "");
}

}  // namespace
}  // namespace infinipipe::runtime
