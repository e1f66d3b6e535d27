// A Hugging Face folder loaded under mpirun pp 2 × dp 2 trains with the losses of one process
// loading it, and the checkpoint the job saves has no empty shard: data-parallel replicas other
// than 0 write nothing, and the indexes name only files that exist.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include "ckpt/checkpoint.h"
#include "ckpt/safetensors.h"
#include "common/hf_folder_write.h"
#include "core/json_read.h"
#include "dist_test_util.h"
#include "dist_train_fixture.h"

namespace infinipipe::runtime {
namespace {

namespace fs = std::filesystem;

class DistHf : public disttest_fixture::DistTrainFixture {
 protected:
  TrainOptions options(int64_t pp, int64_t dp, Schedule schedule, int64_t iters) const override {
    return options_base(pp, dp, schedule, iters, Optimizer::adamw, false);
  }
};

// The folder's safetensors files, each with at least one tensor, and what its indexes name; an
// empty `want_files` checks only that.
void expect_no_empty_shards(const fs::path& iter, const std::set<std::string>& want_files) {
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(iter)) {
    const std::string name = e.path().filename().string();
    if (!want_files.empty()) {
      EXPECT_FALSE(name.find("shard-rank0000") == 0 && name != "shard-rank00000.json" &&
                   name != "shard-rank00001.json")
          << "a data-parallel replica wrote " << name;
    }
    if (e.path().extension() != ".safetensors") continue;
    files.insert(name);
    EXPECT_FALSE(SafetensorsReader(e.path().string()).tensors().empty()) << name << " is empty";
  }
  if (!want_files.empty()) {
    EXPECT_EQ(files, want_files);
  }
  for (const char* index : {"model.safetensors.index.json", "optimizer.safetensors.index.json"}) {
    const nlohmann::json j = json_read_file((iter / index).string());
    for (const auto& [tensor, file] : j.at("weight_map").items()) {
      EXPECT_TRUE(files.count(file.get<std::string>())) << index << " names " << file;
    }
  }
}

TEST_F(DistHf, Pp2Dp2LoadsAHuggingFaceFolderLikeOneProcessAndSavesNoEmptyShards) {
  DIST_TEST_RANKS(4);
  Comm& comm = disttest::test_comm();
  const fs::path hf = dir_ / "hf", ck = dir_ / "ck";
  const ModelConfig model = options(1, 1, Schedule::epp, 3).config.model;
  if (comm.rank() == 0) {
    testing::hf_write_folder(hf, testing::hf_llama_config(model),
                             testing::hf_random_tensors(model, true, 31), true, 2);
  }
  comm.barrier("the Hugging Face folder");

  TrainOptions one = options(1, 1, Schedule::epp, 3);
  one.config.training.load = hf.string();
  Trainer ref_t(one);
  const Run ref = run(ref_t, 2);

  ProcessGroups groups(comm, 2, 2);
  TrainOptions o = options(2, 2, Schedule::epp, 3);
  o.groups = &groups;
  o.config.training.load = hf.string();
  o.config.training.save = ck.string();
  Trainer t(o);
  EXPECT_EQ(t.weights_from(), hf.string());
  const Run got = run(t, 2);
  expect_near_rel(got.losses, ref.losses, "pp 2 dp 2 from the Hugging Face folder");
  expect_weights_match(got, ref, "pp 2 dp 2 from the Hugging Face folder");
  t.save();
  if (comm.rank() == 0) {
    expect_no_empty_shards(
        checkpoint_iter_dir(ck.string(), 2),
        {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
         "optimizer-00001-of-00002.safetensors", "optimizer-00002-of-00002.safetensors"});
    EXPECT_EQ(CheckpointReader(ck.string()).num_ranks(), 2);
  }
  comm.barrier("the checks of the saved checkpoint");
}

// With the distributed optimizer every replica saves the states it owns, but no file is empty and
// the model files stay one per pipeline rank.
TEST_F(DistHf, Pp2Dp2DistributedOptimizerSavesNoEmptyShards) {
  DIST_TEST_RANKS(4);
  Comm& comm = disttest::test_comm();
  const fs::path ck = dir_ / "ck";
  ProcessGroups groups(comm, 2, 2);
  TrainOptions o = options(2, 2, Schedule::epp, 3);
  o.groups = &groups;
  o.config.parallel.use_distributed_optimizer = true;
  o.config.training.save = ck.string();
  o.config.validate();
  Trainer t(o);
  run(t, 1);
  t.save();
  if (comm.rank() == 0) {
    const fs::path iter = checkpoint_iter_dir(ck.string(), 1);
    expect_no_empty_shards(iter, {});
    EXPECT_TRUE(fs::exists(iter / "model-00001-of-00002.safetensors"));
    EXPECT_TRUE(fs::exists(iter / "model-00002-of-00002.safetensors"));
    CheckpointReader reader(ck.string());
    EXPECT_GT(reader.verify_all(), 0);
  }
  comm.barrier("the checks of the saved checkpoint");
}

}  // namespace
}  // namespace infinipipe::runtime
