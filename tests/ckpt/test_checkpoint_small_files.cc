// A writer's small files (such as the online cost fit's state): listed with their checksums,
// read back byte for byte, verified, refused when damaged, and never two writers' of one name.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "checkpoint_fixture.h"
#include "core/error.h"

namespace infinipipe::ckpt_test {
namespace {

TEST_F(CheckpointTest, SmallFilesRoundTripAndAreChecksummed) {
  Params p(model_, 3);
  auto views = p.optim();
  CheckpointShard s0, s1;
  s0.num_ranks = s1.num_ranks = 2;
  s1.rank = 1;
  s0.params = to_save(p.optim([](const std::string& n) { return !is_layer1_or_head(n); }));
  s1.params = to_save(p.optim(is_layer1_or_head));
  s0.small_files["fit-0.json"] = "{\"a\": 1}\n";
  s1.small_files["fit-1.json"] = std::string("\0binary\xff", 8);
  checkpoint_save_shard(dir_, 2, s0);
  checkpoint_save_shard(dir_, 2, s1);
  checkpoint_commit(dir_, meta(2));
  {
    CheckpointReader r(dir_);
    ASSERT_TRUE(r.has_file("fit-0.json"));
    EXPECT_EQ(r.read_file("fit-0.json"), "{\"a\": 1}\n");
    EXPECT_EQ(r.read_file("fit-1.json"), std::string("\0binary\xff", 8));
    r.verify_all();
  }
  // One byte changed, the size kept.
  {
    std::fstream f(iter_file(2, "fit-1.json"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(2);
    f.put('X');
  }
  CheckpointReader r(dir_);
  EXPECT_EQ(r.read_file("fit-0.json"), "{\"a\": 1}\n");
  try {
    r.read_file("fit-1.json");
    FAIL() << "a damaged small file was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fit-1.json"), std::string::npos) << e.what();
  }
}

TEST_F(CheckpointTest, SmallFilesNeedPlainUniqueNames) {
  Params p(model_, 4);
  CheckpointShard s0, s1;
  s0.num_ranks = s1.num_ranks = 2;
  s1.rank = 1;
  s0.params = to_save(p.optim([](const std::string& n) { return !is_layer1_or_head(n); }));
  s1.params = to_save(p.optim(is_layer1_or_head));
  CheckpointShard bad = s0;
  bad.small_files["../escape.json"] = "x";
  EXPECT_THROW(checkpoint_save_shard(dir_, 1, bad), Error);
  bad.small_files.clear();
  bad.small_files["model-00001-of-00002.safetensors"] = "x";  // the writer's own tensor file
  EXPECT_THROW(checkpoint_save_shard(dir_, 1, bad), Error);
  s0.small_files["fit.json"] = "0";
  s1.small_files["fit.json"] = "1";
  checkpoint_save_shard(dir_, 1, s0);
  checkpoint_save_shard(dir_, 1, s1);
  try {
    checkpoint_commit(dir_, meta(1));
    FAIL() << "two writers' files of one name were committed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("written by two ranks"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace infinipipe::ckpt_test
