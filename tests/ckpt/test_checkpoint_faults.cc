// Checkpoints under faults a careless or hostile user causes: poisoned values (NaN, inf, negative
// second moments), a state.json that does not match its optimizer state, file names outside the
// folder, symbolic links planted at every temporary name or in place of the files, and a save
// folder that cannot be written.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include <fmt/format.h>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_checksum.h"
#include "ckpt/checkpoint_fs.h"
#include "ckpt/checkpoint_state.h"
#include "ckpt/safetensors.h"
#include "common/file_text.h"
#include "core/error.h"

namespace infinipipe {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Three parameters (an embedding row absent from the data would look like any of them) trained
// two AdamW steps, saved as iteration 2 in one process.
class CheckpointFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ip_ckfault_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    model_.num_layers = 1;
    model_.hidden_size = 8;
    model_.num_attention_heads = 2;
    model_.vocab_size = 5;
    for (auto& [name, n] : std::vector<std::pair<std::string, int64_t>>{
             {"model.embed_tokens.weight", 40}, {"model.norm.weight", 8}, {"lm_head.weight", 40}}) {
      values_.emplace_back(static_cast<size_t>(n));
      grads_.emplace_back(static_cast<size_t>(n));
      names_.push_back(name);
      for (int64_t i = 0; i < n; i++) values_.back()[i] = 0.01f * static_cast<float>(i % 7);
    }
    for (int s = 0; s < 2; s++) {
      for (auto& g : grads_) {
        for (size_t i = 0; i < g.size(); i++) g[i] = 0.1f * static_cast<float>((i + s) % 5) - 0.2f;
      }
      opt_.step(tensors(), 1e-3);
    }
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<OptimTensor> tensors() {
    std::vector<OptimTensor> out;
    for (size_t i = 0; i < names_.size(); i++) {
      out.push_back({names_[i], {static_cast<int64_t>(values_[i].size())}, values_[i], grads_[i]});
    }
    return out;
  }
  std::vector<CheckpointTarget> targets() {
    std::vector<CheckpointTarget> out;
    for (const OptimTensor& t : tensors()) out.push_back({t.name, t.shape, t.value});
    return out;
  }
  CheckpointMeta meta(int64_t iteration) const {
    CheckpointMeta m;
    m.iteration = iteration;
    m.model = model_;
    return m;
  }
  void save(int64_t iteration) {
    CheckpointShard shard;
    for (const OptimTensor& t : tensors()) shard.params.push_back({t.name, t.shape, t.value});
    shard.optimizer = &opt_;
    checkpoint_save(dir_.string(), meta(iteration), shard);
  }
  fs::path iter_file(int64_t it, const std::string& f) const {
    return fs::path(checkpoint_iter_dir(dir_.string(), it)) / f;
  }
  // Rewrites a listed file and its entry in state.json, as a checkpoint written with these
  // contents would have it: only the value checks can tell.
  void rewrite_listed(int64_t it, const std::string& file, const std::string& bytes) {
    std::ofstream(iter_file(it, file), std::ios::binary | std::ios::trunc) << bytes;
    const FileChecksum c = checksum_file(iter_file(it, file).string());
    Json state = Json::parse(file_text(iter_file(it, "state.json").string()));
    state["files"][file] = {{"crc32c", checksum_hex(c.crc32c)}, {"bytes", c.bytes}};
    std::ofstream(iter_file(it, "state.json"), std::ios::trunc) << state.dump(2);
  }
  // Puts `value` at element 0 of tensor `name` of `file`, checksum updated.
  void poison(int64_t it, const std::string& file, const std::string& name, float value) {
    int64_t at = 0;
    {
      SafetensorsReader r(iter_file(it, file).string());
      std::string bytes = file_text(iter_file(it, file).string());
      uint64_t n = 0;
      for (int i = 0; i < 8; i++) n |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
      at = static_cast<int64_t>(8 + n) + r.info(name).begin;
    }
    std::string bytes = file_text(iter_file(it, file).string());
    std::memcpy(bytes.data() + at, &value, sizeof(value));
    rewrite_listed(it, file, bytes);
  }
  void edit_state(int64_t it, const std::function<void(Json&)>& edit) {
    Json state = Json::parse(file_text(iter_file(it, "state.json").string()));
    edit(state);
    std::ofstream(iter_file(it, "state.json"), std::ios::trunc) << state.dump(2);
  }
  void edit_optim_index(int64_t it, const std::function<void(Json&)>& edit) {
    Json index = Json::parse(file_text(iter_file(it, "optimizer.safetensors.index.json").string()));
    edit(index["weight_map"]);
    rewrite_listed(it, "optimizer.safetensors.index.json", index.dump(2));
  }
  // The error of loading everything from iteration `it` ("" when it loads).
  std::string load_error(int64_t it) {
    try {
      CheckpointReader r(dir_.string(), it);
      std::vector<std::vector<float>> buf;
      std::vector<CheckpointTarget> ts = targets();
      for (CheckpointTarget& t : ts) {
        buf.emplace_back(t.data.size());
        t.data = buf.back();
      }
      r.load_params(ts);
      ParamOptimizer fresh(OptimizerOptions{});
      r.load_optimizer(ts, fresh);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  std::string verify_error(int64_t it) {
    try {
      CheckpointReader(dir_.string(), it).verify_all();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
  ModelConfig model_;
  std::vector<std::string> names_;
  std::vector<std::vector<float>> values_, grads_;
  ParamOptimizer opt_{OptimizerOptions{}};
};

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST_F(CheckpointFaultTest, PoisonedValuesAreRefusedOnLoadAndByVerify) {
  save(2);
  ASSERT_EQ(load_error(2), "");
  EXPECT_EQ(verify_error(2), "");
  struct Case {
    const char* file;
    std::string tensor;
    float value;
    const char* shown;
  };
  const std::vector<Case> cases = {
      {"optimizer.safetensors", "model.embed_tokens.weight.exp_avg", kNaN, "nan"},
      {"optimizer.safetensors", "lm_head.weight.exp_avg_sq", kInf, "inf"},
      {"optimizer.safetensors", "model.norm.weight.exp_avg_sq", -1.0f, "-1"},
      {"model.safetensors", "model.norm.weight", kNaN, "nan"},
  };
  int64_t it = 10;
  for (const Case& c : cases) {
    save(it);
    poison(it, c.file, c.tensor, c.value);
    EXPECT_TRUE(checkpoint_is_complete(dir_.string(), it));  // the layout is fine, the values not
    for (const std::string& err : {load_error(it), verify_error(it)}) {
      EXPECT_HAS(err, c.tensor);
      EXPECT_HAS(err, fmt::format("holds {} at element 0", c.shown));
      EXPECT_HAS(err, "--load resumes from the previous");
    }
    ++it;
  }
}

TEST_F(CheckpointFaultTest, SaveRefusesNonFiniteValuesAndKeepsThePreviousCheckpoint) {
  save(2);
  const std::string latest = file_text((dir_ / "latest").string());
  values_[0][3] = kNaN;
  try {
    save(3);
    FAIL() << "NaN weights were saved";
  } catch (const Error& e) {
    EXPECT_HAS(std::string(e.what()), "model.embed_tokens.weight holds nan at element 3 of 40");
    EXPECT_HAS(std::string(e.what()), "lower --lr");
  }
  values_[0][3] = 0;
  // A moment poisoned while the weights still look fine (a distributed optimizer's states).
  std::vector<float> bad_sq(8, 0.0f);
  bad_sq[5] = kInf;
  CheckpointShard shard;
  for (const OptimTensor& t : tensors()) shard.params.push_back({t.name, t.shape, t.value});
  shard.optimizer = &opt_;
  shard.optimizer_states = std::vector<CheckpointOptimState>{
      {"model.norm.weight", {8}, 2, opt_.state("model.norm.weight").exp_avg, bad_sq}};
  try {
    checkpoint_save(dir_.string(), meta(4), shard);
    FAIL() << "an infinite second moment was saved";
  } catch (const Error& e) {
    EXPECT_HAS(std::string(e.what()), "model.norm.weight.exp_avg_sq holds inf at element 5");
  }
  EXPECT_EQ(file_text((dir_ / "latest").string()), latest);
  EXPECT_FALSE(fs::exists(checkpoint_iter_dir(dir_.string(), 3)));
  EXPECT_FALSE(fs::exists(checkpoint_iter_dir(dir_.string(), 4)));
  EXPECT_EQ(load_error(2), "");
}

TEST_F(CheckpointFaultTest, StateJsonMustMatchTheOptimizerStateExactly) {
  // optimizer "none" with moments on disk: they would be dropped silently.
  save(1);
  edit_state(1, [](Json& s) { s["optimizer"] = "none"; });
  // A missing .step: that parameter's state would silently restart.
  save(2);
  edit_optim_index(2, [](Json& m) { m.erase("lm_head.weight.step"); });
  // An entry of no saved parameter, and one the kind does not save.
  save(3);
  edit_optim_index(
      3, [](Json& m) { m["model.layers.9.mlp.up_proj.weight.step"] = "optimizer.safetensors"; });
  save(4);
  edit_state(4, [](Json& s) { s["optimizer"] = "sgd"; });
  const std::vector<std::pair<int64_t, std::string>> want = {
      {1, "does not belong to optimizer 'none'"},
      {2, "lm_head.weight.step is missing"},
      {3, "model.layers.9.mlp.up_proj.weight.step does not belong"},
      {4, "exp_avg does not belong to optimizer 'sgd'"}};
  const std::vector<CheckpointEntry> list = checkpoint_list(dir_.string());
  ASSERT_EQ(list.size(), 4u);
  for (size_t i = 0; i < want.size(); i++) {
    const auto& [it, part] = want[i];
    EXPECT_FALSE(checkpoint_is_complete(dir_.string(), it)) << it;
    EXPECT_FALSE(list[i].complete) << it;
    EXPECT_HAS(list[i].problem, part);
    EXPECT_HAS(load_error(it), part);
    EXPECT_HAS(load_error(it), "not a complete checkpoint");
  }
  EXPECT_FALSE(checkpoint_find_latest(dir_.string()).has_value());
  // Weights only at iteration 6: resuming would restart the moments silently.
  CheckpointShard weights;
  for (const OptimTensor& t : tensors()) weights.params.push_back({t.name, t.shape, t.value});
  checkpoint_save(dir_.string(), meta(6), weights);
  ParamOptimizer adam(OptimizerOptions{});
  EXPECT_THROW(CheckpointReader(dir_.string(), 6).load_optimizer(targets(), adam), ConfigError);
  // AdamW at iteration 7 without any state: every parameter's state is missing.
  ParamOptimizer never_stepped(OptimizerOptions{});
  weights.optimizer = &never_stepped;
  checkpoint_save(dir_.string(), meta(7), weights);
  EXPECT_HAS(load_error(7), "lm_head.weight.step is missing");
  // The optimizer kind must be the run's.
  save(5);
  OptimizerOptions sgd;
  sgd.kind = Optimizer::sgd;
  ParamOptimizer other(sgd);
  EXPECT_THROW(CheckpointReader(dir_.string(), 5).load_optimizer(targets(), other), ConfigError);
}

TEST_F(CheckpointFaultTest, FilesOutsideTheFolderOrBehindLinksAreNeverComplete) {
  save(1);
  save(2);
  save(3);
  // state.json names a file outside the folder with its real size: --load and list agree.
  const int64_t passwd = static_cast<int64_t>(fs::file_size("/etc/passwd"));
  edit_state(1, [&](Json& s) {
    s["files"]["/etc/passwd"] = {{"crc32c", "00000000"}, {"bytes", passwd}};
  });
  edit_state(2, [&](Json& s) {
    s["files"]["../../etc/passwd"] = {{"crc32c", "00000000"}, {"bytes", passwd}};
  });
  // A checkpoint file replaced by a link to an identical copy elsewhere.
  const fs::path copy = dir_ / "elsewhere.safetensors";
  fs::copy_file(iter_file(3, "model.safetensors"), copy);
  fs::remove(iter_file(3, "model.safetensors"));
  fs::create_symlink(copy, iter_file(3, "model.safetensors"));
  // A whole iter_ folder that is a link to a complete checkpoint elsewhere.
  save(4);
  fs::rename(checkpoint_iter_dir(dir_.string(), 4), dir_ / "moved");
  fs::create_directory_symlink(dir_ / "moved", checkpoint_iter_dir(dir_.string(), 4));

  const std::vector<CheckpointEntry> list = checkpoint_list(dir_.string());
  ASSERT_EQ(list.size(), 4u);
  const std::vector<std::string> why = {"outside the checkpoint directory",
                                        "outside the checkpoint directory", "symbolic link",
                                        "symbolic link"};
  for (size_t i = 0; i < list.size(); i++) {
    EXPECT_FALSE(list[i].complete) << list[i].iteration;
    EXPECT_HAS(list[i].problem, why[i]);
    EXPECT_HAS(load_error(list[i].iteration), why[i]);
  }
  EXPECT_FALSE(checkpoint_find_latest(dir_.string()).has_value());
  // `latest` as a link is not followed either; the newest complete folder is found instead.
  save(5);
  save(6);
  fs::remove(dir_ / "latest");
  fs_write_atomic((dir_ / "elsewhere-latest").string(), "5\n");
  fs::create_symlink(dir_ / "elsewhere-latest", dir_ / "latest");
  EXPECT_EQ(checkpoint_find_latest(dir_.string()), 6);

  EXPECT_TRUE(checkpoint_plain_file_name("model-00001-of-00002.safetensors"));
  for (const char* bad : {"", ".", "..", ".hidden", "a/b", "/etc/passwd", "a\\b", "a\nb"}) {
    EXPECT_FALSE(checkpoint_plain_file_name(bad)) << bad;
  }
}

// state.json, config.json and the indexes are read by core/input_file.h: a FIFO, a link or an
// oversized file is one clear error at once, never a wait for a writer or a gigabyte read.
TEST_F(CheckpointFaultTest, SmallFilesGoThroughTheBoundedReader) {
  save(3);
  fs::remove(iter_file(3, "state.json"));
  ASSERT_EQ(::mkfifo(iter_file(3, "state.json").c_str(), 0600), 0);
  EXPECT_HAS(load_error(3), "state.json is a FIFO (named pipe), not a regular file");
  // Sparse: past the bound without using the disk.
  save(4);
  fs::resize_file(iter_file(4, "state.json"), (int64_t{1} << 30) + 1);
  EXPECT_HAS(load_error(4), "more than the 1 GiB a checkpoint JSON file may be");
  save(5);
  const fs::path copy = dir_ / "elsewhere-config.json";
  fs::copy_file(iter_file(5, "config.json"), copy);
  fs::remove(iter_file(5, "config.json"));
  fs::create_symlink(copy, iter_file(5, "config.json"));
  EXPECT_HAS(load_error(5), "config.json is a symbolic link");
  EXPECT_HAS(load_error(5), "(cp -rL)");
}

// The tokenizer a save copies and the `latest` pointer go through core/input_file.h too: a FIFO
// is one error at once (never a wait for a writer), an oversized `latest` is passed over.
TEST_F(CheckpointFaultTest, TokenizerCopyAndLatestGoThroughTheBoundedReader) {
  fs::create_directories(dir_);
  const fs::path fifo = dir_ / "tokenizer.model";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  CheckpointMeta m = meta(2);
  m.tokenizer.tokenizer_config = Json::object();
  m.tokenizer.model_file = fifo.string();
  CheckpointShard shard;
  for (const OptimTensor& t : tensors()) shard.params.push_back({t.name, t.shape, t.value});
  shard.optimizer = &opt_;
  try {
    checkpoint_save(dir_.string(), m, shard);
    ADD_FAILURE() << "a FIFO tokenizer model was copied";
  } catch (const Error& e) {
    EXPECT_HAS(std::string(e.what()), "tokenizer.model is a FIFO (named pipe), not a regular file");
  }
  save(3);
  save(4);
  // Sparse: past the bound without using the disk; the newest complete iteration is taken.
  fs::resize_file(dir_ / "latest", (int64_t{1} << 30) + 1);
  EXPECT_EQ(checkpoint_find_latest(dir_.string()), std::optional<int64_t>(4));
  // A listed file read whole (read_file) that is over the bound, its checksum recorded.
  rewrite_listed(4, "notes.txt", "notes");
  fs::resize_file(iter_file(4, "notes.txt"), (int64_t{1} << 30) + 1);
  const FileChecksum c = checksum_file(iter_file(4, "notes.txt").string());
  edit_state(4, [&](Json& state) {
    state["files"]["notes.txt"] = {{"crc32c", checksum_hex(c.crc32c)}, {"bytes", c.bytes}};
  });
  CheckpointReader r(dir_.string(), 4);
  try {
    r.read_file("notes.txt");
    ADD_FAILURE() << "an over-size listed file was read whole";
  } catch (const Error& e) {
    EXPECT_HAS(std::string(e.what()), "more than the 1 GiB a checkpoint file read whole may be");
  }
}

TEST_F(CheckpointFaultTest, LinksPlantedAtEveryTemporaryNameAreNotWrittenThrough) {
  save(1);
  const fs::path victim = dir_ / "victim.txt";
  const std::string original = "the file a planted link points to\n";
  fs_write_atomic(victim.string(), original);
  const fs::path iter2 = checkpoint_iter_dir(dir_.string(), 2);
  fs::create_directories(iter2);
  const std::vector<fs::path> planted = {iter2 / "model.safetensors.tmp",
                                         iter2 / "optimizer.safetensors.tmp",
                                         iter2 / "shard-rank00000.json.tmp",
                                         iter2 / "config.json.tmp",
                                         iter2 / "state.json.tmp",
                                         iter2 / "model.safetensors.index.json.tmp",
                                         dir_ / "latest.tmp",
                                         dir_ / "latest_checkpointed_iteration.txt.tmp"};
  for (const fs::path& p : planted) fs::create_symlink(victim, p);
  // A link to a folder among the leftovers the commit sweeps: the link goes, the folder stays.
  fs::create_directories(dir_ / "keep");
  fs_write_atomic((dir_ / "keep" / "file").string(), original);
  fs::create_directory_symlink(dir_ / "keep", iter2 / "junk");
  save(2);
  EXPECT_EQ(file_text(victim.string()), original);
  EXPECT_EQ(file_text((dir_ / "keep" / "file").string()), original);
  EXPECT_FALSE(fs::exists(fs::symlink_status(iter2 / "junk")));
  for (const fs::path& p : planted) EXPECT_FALSE(fs::exists(fs::symlink_status(p))) << p;
  EXPECT_EQ(checkpoint_find_latest(dir_.string()), 2);
  EXPECT_EQ(load_error(2), "");
  EXPECT_EQ(verify_error(2), "");

  // An iter_ folder that is a link: the save refuses instead of writing into its target.
  const fs::path target = dir_ / "target";
  fs::create_directories(target);
  fs::create_directory_symlink(target, checkpoint_iter_dir(dir_.string(), 3));
  try {
    save(3);
    FAIL() << "saved through a linked folder";
  } catch (const Error& e) {
    EXPECT_HAS(std::string(e.what()), "is a symbolic link");
  }
  EXPECT_TRUE(fs::is_empty(target));
  // A folder swapped for a link between the shards and the commit: the commit refuses.
  CheckpointShard shard;
  for (const OptimTensor& t : tensors()) shard.params.push_back({t.name, t.shape, t.value});
  checkpoint_save_shard(dir_.string(), 8, shard);
  fs::rename(checkpoint_iter_dir(dir_.string(), 8), dir_ / "swapped");
  fs::create_directory_symlink(dir_ / "swapped", checkpoint_iter_dir(dir_.string(), 8));
  EXPECT_THROW(checkpoint_commit(dir_.string(), meta(8)), Error);
  EXPECT_FALSE(fs::exists(dir_ / "swapped" / "state.json"));
  EXPECT_EQ(checkpoint_find_latest(dir_.string()), 2);
}

TEST(FsAtomicFile, StaleOrPlantedTemporaryIsReplacedNotFollowed) {
  const fs::path dir = fs::temp_directory_path() / ("ip_atomic_link_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path victim = dir / "victim", path = dir / "file";
  fs_write_atomic(victim.string(), "victim");
  fs::create_symlink(victim, dir / "file.tmp");
  fs_write_atomic(path.string(), "new");
  EXPECT_EQ(file_text(victim.string()), "victim");
  EXPECT_EQ(file_text(path.string()), "new");
  EXPECT_FALSE(fs::is_symlink(path));
  // Reading through a link is refused, naming it.
  fs::create_symlink(victim, dir / "link");
  try {
    file_text((dir / "link").string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_HAS(std::string(e.what()), "symbolic link");
  }
  fs::remove_all(dir);
}

TEST(FsCheckWritableDir, CreatesTheFolderAndRefusesOneThatCannotBeWritten) {
  const fs::path dir = fs::temp_directory_path() / ("ip_probe_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs_check_writable_dir((dir / "new" / "ck").string(), "--save");
  EXPECT_TRUE(fs::is_directory(dir / "new" / "ck"));
  EXPECT_TRUE(fs::is_empty(dir / "new" / "ck"));  // the probe file is gone
  fs_write_atomic((dir / "file").string(), "x");
  try {
    fs_check_writable_dir((dir / "file" / "ck").string(), "--save");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_HAS(std::string(e.what()), "--save");
    EXPECT_HAS(std::string(e.what()), "cannot create the folder");
  }
  if (::geteuid() != 0) {  // root writes through permission bits; the CLI test mounts one instead
    fs::create_directories(dir / "ro");
    fs::permissions(dir / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_THROW(fs_check_writable_dir((dir / "ro").string(), "--save"), ConfigError);
    fs::permissions(dir / "ro", fs::perms::owner_all);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace infinipipe
