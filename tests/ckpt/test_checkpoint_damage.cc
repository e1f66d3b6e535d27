// Checkpoints that went wrong: damaged files, half-written saves, another model, leftovers of
// another layout, verification of all, and the atomic file writes behind `latest`.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "checkpoint_fixture.h"
#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_config.h"
#include "ckpt/checkpoint_fs.h"
#include "common/file_text.h"
#include "core/error.h"

namespace infinipipe::ckpt_test {
namespace {

TEST_F(CheckpointTest, ChecksumDamageIsDetected) {
  Params p(model_, 7);
  CheckpointShard shard;
  auto views = p.optim();
  shard.params = to_save(views);
  checkpoint_save(dir_, meta(5), shard);
  // Flip one bit of tensor data: same size, valid header, only the checksum can tell.
  const std::string file = iter_file(5, "model.safetensors");
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-10, std::ios::end);
    char c;
    f.get(c);
    f.seekp(-10, std::ios::end);
    f.put(static_cast<char>(c ^ 0x04));
  }
  Params q(model_, 8);
  CheckpointReader r(dir_);
  auto qviews = q.optim();
  try {
    r.load_params(to_load(qviews));
    FAIL() << "damage not detected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
  }
  // A damaged config.json (same size) is caught when the checkpoint is opened.
  std::string cfg = file_text(iter_file(5, "config.json"));
  cfg[cfg.find("float32") + 5] = '6';
  std::ofstream(iter_file(5, "config.json"), std::ios::trunc) << cfg;
  EXPECT_TRUE(checkpoint_is_complete(dir_, 5));  // complete, but damaged
  try {
    CheckpointReader r2(dir_, 5);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("config.json: checksum mismatch"), std::string::npos)
        << e.what();
  }
  // A truncated file no longer has the size state.json recorded: the directory is incomplete.
  fs::resize_file(iter_file(5, "model.safetensors"), 8);
  EXPECT_FALSE(checkpoint_is_complete(dir_, 5));
  try {
    CheckpointReader r3(dir_, 5);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a complete checkpoint"), std::string::npos);
  }
}

TEST_F(CheckpointTest, HalfWrittenCheckpointsAreIgnored) {
  Params p(model_, 9);
  ParamOptimizer opt(OptimizerOptions{});
  train(p, opt, 1, 90);
  CheckpointShard shard;
  auto views = p.optim();
  shard.params = to_save(views);
  shard.optimizer = &opt;
  checkpoint_save(dir_, meta(10), shard);
  // A crash during the save of iteration 20: the shard is written, the commit never happened.
  train(p, opt, 1, 91);
  checkpoint_save_shard(dir_, 20, shard);
  EXPECT_FALSE(checkpoint_is_complete(dir_, 20));
  EXPECT_EQ(checkpoint_find_latest(dir_), 10);
  EXPECT_EQ(CheckpointReader(dir_).iteration(), 10);
  // A crash between state.json and `latest`: `latest` is the commit point and still wins.
  checkpoint_save(dir_, meta(20), shard);
  fs_write_atomic(dir_ + "/latest", "10\n");
  EXPECT_EQ(checkpoint_find_latest(dir_), 10);
  // `latest` lost or naming a vanished directory: the newest complete directory is used.
  fs::remove(dir_ + "/latest");
  EXPECT_EQ(checkpoint_find_latest(dir_), 20);
  fs_write_atomic(dir_ + "/latest", "30\n");
  EXPECT_EQ(checkpoint_find_latest(dir_), 20);
  fs_write_atomic(dir_ + "/latest", "garbage");
  EXPECT_EQ(checkpoint_find_latest(dir_), 20);
  // A shard truncated after the commit makes that directory incomplete too.
  fs::resize_file(iter_file(20, "optimizer.safetensors"), 100);
  EXPECT_EQ(checkpoint_find_latest(dir_), 10);
  // Re-saving an iteration first invalidates it, so a crash mid-save never mixes old and new.
  checkpoint_save_shard(dir_, 10, shard);
  EXPECT_FALSE(checkpoint_is_complete(dir_, 10));
  EXPECT_FALSE(checkpoint_find_latest(dir_).has_value());
  try {
    CheckpointReader r(dir_);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--load"), std::string::npos) << e.what();
  }
}

TEST_F(CheckpointTest, DifferentModelIsRefusedNamingTheFields) {
  ModelConfig saved = model_;
  saved.hidden_size = 512;
  ModelConfig current = model_;
  current.hidden_size = 256;
  const auto diff = checkpoint_model_diff(saved, current);
  ASSERT_EQ(diff.size(), 1u);
  EXPECT_EQ(diff[0], "checkpoint has hidden-size 512, this run has 256");
  current.num_layers = 3;
  current.tie_embeddings = true;
  EXPECT_EQ(checkpoint_model_diff(saved, current).size(), 3u);
  current = saved;
  current.seq_length *= 4;  // a longer context is not a different model
  EXPECT_TRUE(checkpoint_model_diff(saved, current).empty());

  Params p(model_, 11);
  CheckpointShard shard;
  auto views = p.optim();
  shard.params = to_save(views);
  checkpoint_save(dir_, meta(1), shard);
  CheckpointReader r(dir_);
  ModelConfig other = model_;
  other.num_layers = 4;
  other.num_query_groups = 4;
  try {
    r.check_model(other);
    FAIL();
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("checkpoint has num-layers 2, this run has 4"), std::string::npos) << msg;
    EXPECT_NE(msg.find("checkpoint has num-query-groups 2, this run has 4"), std::string::npos);
  }
  // A tensor of another shape is refused by load_params even without check_model.
  std::vector<float> buf(16 * 8);
  std::vector<CheckpointTarget> wrong = {{"model.norm.weight", {16, 8}, buf}};
  try {
    r.load_params(wrong);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shape [16] in the checkpoint, this run expects [16, 8]"),
              std::string::npos)
        << e.what();
  }
  std::vector<CheckpointTarget> missing = {{"model.layers.7.mlp.up_proj.weight", {24, 16}, buf}};
  EXPECT_THROW(r.load_params(missing), Error);
}

TEST_F(CheckpointTest, CommitRemovesLeftoversOfAnotherLayout) {
  Params p(model_, 13);
  auto views = p.optim();
  // An abandoned 2-rank attempt at iteration 4, then a 1-rank save of the same iteration.
  CheckpointShard s1;
  s1.rank = 1, s1.num_ranks = 2;
  s1.params = {to_save(views).front()};
  checkpoint_save_shard(dir_, 4, s1);
  std::ofstream(iter_file(4, "model.safetensors.tmp")) << "partial";
  CheckpointShard all;
  all.params = to_save(views);
  checkpoint_save(dir_, meta(4), all);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(checkpoint_iter_dir(dir_, 4))) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  const std::vector<std::string> want = {"config.json",
                                         "model.safetensors",
                                         "model.safetensors.index.json",
                                         "optimizer.safetensors.index.json",
                                         "shard-rank00000.json",
                                         "state.json"};
  EXPECT_EQ(names, want);
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_NE(e.path().extension(), ".tmp") << e.path();
  }
}

TEST_F(CheckpointTest, ListAndVerifyAll) {
  Params p(model_, 14);
  CheckpointShard shard;
  auto views = p.optim();
  shard.params = to_save(views);
  checkpoint_save(dir_, meta(1), shard);
  checkpoint_save(dir_, meta(2), shard);
  checkpoint_save_shard(dir_, 3, shard);  // interrupted
  const std::vector<CheckpointEntry> list = checkpoint_list(dir_);
  ASSERT_EQ(list.size(), 3u);
  EXPECT_TRUE(list[0].complete && !list[0].latest);
  EXPECT_TRUE(list[1].complete && list[1].latest);
  EXPECT_TRUE(!list[2].complete && !list[2].latest);
  EXPECT_EQ(list[2].iteration, 3);

  CheckpointReader r(dir_, 1);
  EXPECT_GT(r.verify_all(), 0);
  // Damage the weights file's header (no tensor read yet): verify_all finds it. A save without
  // optimizer state writes no optimizer file (no empty shards).
  EXPECT_FALSE(fs::exists(iter_file(2, "optimizer.safetensors")));
  const std::string f = iter_file(2, "model.safetensors");
  std::string bytes = file_text(f);
  bytes[8] ^= 0x01;  // the first header byte
  std::ofstream(f, std::ios::binary | std::ios::trunc) << bytes;
  CheckpointReader r2(dir_, 2);
  try {
    r2.verify_all();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
  }
}

TEST(FsAtomicFile, UncommittedWriteLeavesTheOldFile) {
  const std::string path =
      (fs::temp_directory_path() / ("ip_atomic_" + std::to_string(::getpid()))).string();
  fs_write_atomic(path, "old");
  {
    FsAtomicFile f(path);
    f.write("new content", 11);
    // destroyed without commit(): as if the process died mid-write
  }
  EXPECT_EQ(file_text(path), "old");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  fs_write_atomic(path, "new");
  EXPECT_EQ(file_text(path), "new");
  fs::remove(path);
}

}  // namespace
}  // namespace infinipipe::ckpt_test
