// The online cost fit across a resume: a run resumed from a checkpoint restores the fit's state
// exactly and plans the next two batches with the same bytes as the uninterrupted run (whose
// background planner made them from the same terms), so losses and weights stay bit-identical.
// A checkpoint without fit state still loads (the fit starts from the calibration), and a
// damaged or hostile fit file is refused.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_checksum.h"
#include "common/tiny_train.h"
#include "common/trainer_dir_test.h"
#include "core/error.h"
#include "cost/online_fit.h"
#include "data/synth.h"
#include "plan/plan_json.h"
#include "runtime/train.h"

namespace infinipipe::runtime {
namespace {

namespace fs = std::filesystem;

class TrainFitResume : public testing::TrainerDirTest {
 protected:
  TrainFitResume() : TrainerDirTest("fit_resume") {}
  void SetUp() override {
    TrainerDirTest::SetUp();
    // Lengths uniform in 1..1024: short documents and long ones.
    data::SynthOptions so;
    so.distribution = "uniform";
    so.num_documents = 200;
    so.seq_length = 1024;
    so.seed = 5;
    so.output = (dir_ / "corpus").string();
    data::synth_corpus_write(so);
  }

  TrainOptions options(int64_t iters, CostModelUpdate update) const {
    TrainOptions o = testing::tiny_train_options(2, iters, (dir_ / "corpus").string());
    o.config.training.lr = 3e-3;
    o.config.training.seed = 9;
    o.config.training.cost_model_update = update;
    o.config.training.save = (dir_ / "ckpt").string();
    // Documents of many lengths: EPP slices long ones and packs short ones, so the plans
    // depend on the fitted terms.
    o.config.model.seq_length = 1024;
    o.config.validate();
    return o;
  }

  // Rewrites the saved fit file through `edit` and records its new checksum in state.json, as a
  // hostile writer would.
  void fit_file_rewrite(const std::function<void(nlohmann::json&)>& edit) const {
    const fs::path iter = dir_ / "ckpt" / "iter_0000003";
    const fs::path file = iter / "cost-fit-rank00000.json";
    nlohmann::json j = nlohmann::json::parse(std::ifstream(file));
    edit(j);
    const std::string text = j.dump();
    std::ofstream(file, std::ios::trunc) << text;
    nlohmann::json state = nlohmann::json::parse(std::ifstream(iter / "state.json"));
    state["files"]["cost-fit-rank00000.json"] = {
        {"crc32c", checksum_hex(checksum_crc32c(0, text.data(), text.size()))},
        {"bytes", text.size()}};
    std::ofstream(iter / "state.json", std::ios::trunc) << state.dump(2);
  }
};

std::array<double, cost::kNumOnlineTerms> pooled_terms(const Trainer& t) {
  return cost::online_terms_get(t.cost_loop().calibration()->coeffs);
}

TEST_F(TrainFitResume, ResumedRunPlansTheNextBatchesAsTheUninterruptedRun) {
  std::vector<std::string> plans;
  std::vector<double> losses;
  std::vector<std::vector<float>> weights;
  std::array<double, cost::kNumOnlineTerms> saved_terms{}, prior_terms{};
  {
    Trainer t(options(5, CostModelUpdate::online));
    for (int i = 0; i < 3; ++i) t.step();
    t.save();
    saved_terms = pooled_terms(t);
    prior_terms = cost::online_terms_get(t.cost_loop().prior().coefficients());
    for (int i = 0; i < 2; ++i) {
      losses.push_back(t.step().loss);
      plans.push_back(plan::plan_to_json(t.last_plan()).dump());
    }
    for (const ParamRef& p : t.params()) weights.emplace_back(p.value, p.value + p.numel);
  }
  ASSERT_NE(saved_terms, prior_terms)
      << "the fit never moved: the test would not see a fit that is not restored";

  TrainOptions o = options(5, CostModelUpdate::online);
  o.config.training.load = o.config.training.save;
  Trainer t(o);
  ASSERT_EQ(t.iteration(), 3);
  EXPECT_NE(t.cost_loop().resume_note().find("resumed the online cost fit"), std::string::npos)
      << t.cost_loop().resume_note();
  EXPECT_EQ(pooled_terms(t), saved_terms) << "the pooled terms were not restored exactly";
  bool packs_or_slices = false;
  for (int i = 0; i < 2; ++i) {
    const obs::IterationMetrics m = t.step();
    EXPECT_EQ(plan::plan_to_json(t.last_plan()).dump(), plans[i])
        << "iteration " << m.iteration << " was planned differently after the resume";
    EXPECT_EQ(m.loss, losses[i]) << "iteration " << m.iteration;
    for (const plan::Chunk& c : t.last_plan().chunks)
      packs_or_slices |= c.slices.size() > 1 || c.kind() == plan::ChunkKind::split;
  }
  EXPECT_TRUE(packs_or_slices) << "the plans should pack or slice sequences: " << plans[0];
  const std::vector<ParamRef> params = t.params();
  ASSERT_EQ(params.size(), weights.size());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(0, std::memcmp(params[i].value, weights[i].data(), weights[i].size() * 4))
        << params[i].name;
  }
}

TEST_F(TrainFitResume, CheckpointWithoutFitStateStartsFromTheCalibration) {
  {
    Trainer t(options(3, CostModelUpdate::off));
    for (int i = 0; i < 3; ++i) t.step();
    t.save();
  }
  ASSERT_FALSE(fs::exists(dir_ / "ckpt" / "iter_0000003" / "cost-fit-rank00000.json"));
  TrainOptions o = options(5, CostModelUpdate::online);
  o.config.training.load = o.config.training.save;
  Trainer t(o);
  EXPECT_NE(t.cost_loop().resume_note().find("starts from the calibration"), std::string::npos)
      << t.cost_loop().resume_note();
  EXPECT_EQ(pooled_terms(t), cost::online_terms_get(t.cost_loop().prior().coefficients()));
  t.step();  // trains on, refitting from the prior
}

TEST_F(TrainFitResume, DamagedOrHostileFitStateIsRefused) {
  {
    Trainer t(options(3, CostModelUpdate::online));
    for (int i = 0; i < 3; ++i) t.step();
    t.save();
  }
  TrainOptions o = options(5, CostModelUpdate::online);
  o.config.training.load = o.config.training.save;
  const auto refusal = [&] {
    try {
      Trainer t(o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // Values a fit never reaches, with a checksum that matches them.
  fit_file_rewrite([](nlohmann::json& j) { j["ranks"][0]["fit"]["value"][1] = -2.0; });
  EXPECT_NE(refusal().find("alpha2"), std::string::npos) << refusal();
  // A sane value again, and a list of terms one short.
  fit_file_rewrite([](nlohmann::json& j) {
    j["ranks"][0]["fit"]["value"][1] = 1e-9;
    j["ranks"][0]["next_plans"]["terms"].erase(0);
  });
  EXPECT_NE(refusal().find("next_plans.terms"), std::string::npos) << refusal();
  // One byte changed, the size and recorded checksum kept: the checksum catches it.
  const fs::path file = dir_ / "ckpt" / "iter_0000003" / "cost-fit-rank00000.json";
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(3);
    f.put('#');
  }
  EXPECT_NE(refusal().find("cost-fit-rank00000.json"), std::string::npos) << refusal();
}

}  // namespace
}  // namespace infinipipe::runtime
