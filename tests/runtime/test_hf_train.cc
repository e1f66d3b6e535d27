// Training from and saving to Hugging Face folders: a hand-written bf16 folder (sharded) gives
// the first loss the independent reference model computes from the same bf16 values; HF in ->
// infinipipe -> HF out is bit-identical (fp32, and bf16 exported as bf16); a saved checkpoint
// records the tokenizer; --pretrained-checkpoint starts at iteration 0 with the weights only.
#include <gtest/gtest.h>
#include <sentencepiece_trainer.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "ckpt/checkpoint.h"
#include "ckpt/hf_export.h"
#include "ckpt/safetensors.h"
#include "common/error_text.h"
#include "common/hf_folder_write.h"
#include "common/synth_corpus.h"
#include "common/tiny_train.h"
#include "common/trainer_dir_test.h"
#include "core/json_read.h"
#include "data/indexed_dataset.h"
#include "model/reference_model.h"
#include "runtime/train.h"
#include "tokenize/tokenizer.h"
#include "tokenize/tokenizer_saved.h"

namespace infinipipe::runtime {
namespace {

namespace fs = std::filesystem;

class HfTrainTest : public testing::TrainerDirTest {
 protected:
  HfTrainTest() : TrainerDirTest("hftrain") {}
  void SetUp() override {
    TrainerDirTest::SetUp();
    // As many documents as one global batch: the first iteration sees every one of them.
    testing::synth_corpus_write_small(corpus(), 8);
  }

  std::string corpus() const { return (dir_ / "corpus").string(); }
  TrainOptions options(int64_t iters) const {
    TrainOptions o = testing::tiny_train_options(2, iters, corpus());
    o.config.validate();
    return o;
  }
};

// Every tensor of `folder` holds the bytes `want` holds, in the same dtype.
void expect_same_tensors(const fs::path& folder,
                         const std::map<std::string, testing::HfTensor>& want, const char* dtype) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(folder)) {
    if (e.path().extension() == ".safetensors") files.push_back(e.path().string());
  }
  size_t seen = 0;
  for (const std::string& f : files) {
    SafetensorsReader r(f);
    for (const SafetensorsInfo& t : r.tensors()) {
      ASSERT_TRUE(want.count(t.name)) << t.name;
      EXPECT_EQ(t.dtype, dtype) << t.name;
      EXPECT_EQ(t.shape, want.at(t.name).shape) << t.name;
      EXPECT_EQ(r.read_raw(t.name), want.at(t.name).bytes) << t.name;
      ++seen;
    }
  }
  EXPECT_EQ(seen, want.size());
}

TEST_F(HfTrainTest, HandWrittenBf16FolderGivesTheReferenceLoss) {
  TrainOptions o = options(1);
  const ModelConfig& m = o.config.model;
  const auto tensors = testing::hf_random_tensors(m, true, 17);
  testing::hf_write_folder(dir_ / "hf", testing::hf_llama_config(m), tensors, true, 2);
  o.config.training.load = (dir_ / "hf").string();
  Trainer t(o);
  EXPECT_EQ(t.iteration(), 0);
  EXPECT_FALSE(t.resumed());
  EXPECT_EQ(t.weights_from(), o.config.training.load);
  const double loss = t.step().loss;

  // The reference: the bf16 values as the test wrote them, in double precision.
  MemoryTracker tracker;
  ModelParams params(m, StageRange::whole(m), 1, tracker);
  testing::ReferenceModel ref(m, params);
  for (const auto& [name, tensor] : tensors) {
    ASSERT_TRUE(ref.w.count(name)) << name;
    ref.w[name].assign(tensor.values.begin(), tensor.values.end());
  }
  const data::IndexedDataset ds = data::IndexedDataset::open(corpus());
  std::vector<std::vector<int32_t>> seqs;
  int64_t predicted = 0;
  for (int64_t d = 0; d < ds.num_documents(); ++d) {
    std::vector<int32_t> s = ds.document_tokens(d, m.seq_length);
    if (s.size() < 2) continue;
    predicted += static_cast<int64_t>(s.size()) - 1;
    seqs.push_back(std::move(s));
  }
  EXPECT_NEAR(loss, ref.loss(seqs) / static_cast<double>(predicted), 2e-4);
}

TEST_F(HfTrainTest, HuggingFaceInAndOutIsBitIdentical) {
  for (const bool bf16 : {false, true}) {
    const std::string what = bf16 ? "bf16" : "fp32";
    TrainOptions o = options(0);
    const ModelConfig& m = o.config.model;
    const auto tensors = testing::hf_random_tensors(m, bf16, 23);
    const fs::path in = dir_ / ("in_" + what), ck = dir_ / ("ck_" + what);
    testing::hf_write_folder(in, testing::hf_llama_config(m), tensors, bf16, bf16 ? 3 : 1);
    o.config.training.load = in.string();
    o.config.training.save = ck.string();
    train_run(o);
    HfExportOptions eo;
    eo.dtype = bf16 ? HfExportDtype::bf16 : HfExportDtype::fp32;
    const fs::path out = dir_ / ("out_" + what);
    hf_export(ck.string(), out.string(), eo);
    expect_same_tensors(out, tensors, bf16 ? "BF16" : "F32");
    // The checkpoint's own folder is a Hugging Face fp32 model too.
    if (!bf16) expect_same_tensors(checkpoint_iter_dir(ck.string(), 0), tensors, "F32");

    const nlohmann::json config = json_read_file((out / "config.json").string());
    EXPECT_EQ(config.at("torch_dtype"), bf16 ? "bfloat16" : "float32");
    EXPECT_EQ(config.at("num_key_value_heads"), 2);
    EXPECT_TRUE(config.at("bos_token_id").is_null());  // ByteTokenizer has no bos
    EXPECT_EQ(config.at("eos_token_id"), 256);
    const nlohmann::json gen = json_read_file((out / "generation_config.json").string());
    EXPECT_EQ(gen.at("eos_token_id"), 256);
    const nlohmann::json tok = json_read_file((out / "tokenizer_config.json").string());
    EXPECT_EQ(tok.at("infinipipe_tokenizer_type"), "ByteTokenizer");
    EXPECT_EQ(tokenize::tokenizer_open_saved(out.string())->type(), "ByteTokenizer");
    EXPECT_FALSE(fs::exists(out / "optimizer.safetensors"));
  }
}

TEST_F(HfTrainTest, PretrainedCheckpointGivesTheWeightsAtIterationZero) {
  TrainOptions a = options(2);
  a.config.training.save = (dir_ / "a").string();
  train_run(a);
  TrainOptions l = options(0);
  l.config.training.load = a.config.training.save;
  Trainer saved(l);

  // --load names a folder without a checkpoint yet: Megatron falls back to the pretrained one.
  TrainOptions p = options(1);
  p.config.training.load = (dir_ / "job").string();
  p.config.training.save = (dir_ / "job").string();
  p.config.training.pretrained_checkpoint = a.config.training.save;
  const auto iters = train_run(p);
  ASSERT_EQ(iters.size(), 1u);
  EXPECT_EQ(iters[0].iteration, 1);

  TrainOptions w = options(0);
  w.config.training.pretrained_checkpoint = a.config.training.save;
  Trainer started(w);
  EXPECT_EQ(started.iteration(), 0);
  EXPECT_FALSE(started.resumed());
  const auto want = saved.params(), got = started.params();
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(0, std::memcmp(want[i].value, got[i].value, size_t(want[i].numel) * 4))
        << want[i].name;
  }
}

// A SentencePiece tokenizer is saved as Hugging Face's LlamaTokenizer: tokenizer.model byte for
// byte, its bos/eos ids in config.json, and the folder opens the same tokenizer again.
TEST_F(HfTrainTest, SentencePieceTokenizerIsSavedByteForByte) {
  const fs::path text = dir_ / "text.txt";
  {
    std::ofstream out(text);
    for (int i = 0; i < 300; ++i) out << "the pipeline plans batch " << i % 17 << " afresh\n";
  }
  const auto status = sentencepiece::SentencePieceTrainer::Train(
      "--input=" + text.string() + " --model_prefix=" + (dir_ / "sp").string() +
      " --vocab_size=40 --hard_vocab_limit=false --model_type=unigram --num_threads=1 "
      "--minloglevel=2");
  ASSERT_TRUE(status.ok()) << status.ToString();
  const std::string model = (dir_ / "sp.model").string();
  TrainOptions o = options(0);
  o.config.training.tokenizer_type = "Llama2Tokenizer";
  o.config.training.tokenizer_model = model;
  o.config.training.save = (dir_ / "ck").string();
  train_run(o);
  const fs::path iter = checkpoint_iter_dir(o.config.training.save, 0);
  auto bytes = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(bytes(iter / "tokenizer.model"), bytes(model));
  const auto original = tokenize::tokenizer_open("Llama2Tokenizer", model);
  const nlohmann::json config = json_read_file((iter / "config.json").string());
  EXPECT_EQ(config.at("bos_token_id"), original->bos());
  EXPECT_EQ(config.at("eos_token_id"), original->eos());
  const nlohmann::json tok = json_read_file((iter / "tokenizer_config.json").string());
  EXPECT_EQ(tok.at("tokenizer_class"), "LlamaTokenizer");
  EXPECT_EQ(tok.at("infinipipe_tokenizer_type"), "Llama2Tokenizer");
  const auto saved = tokenize::tokenizer_open_saved(iter.string());
  EXPECT_EQ(saved->type(), "Llama2Tokenizer");
  EXPECT_EQ(saved->encode("the pipeline plans"), original->encode("the pipeline plans"));
  // Checksummed like every file of the checkpoint, and exported with the weights.
  CheckpointReader reader(o.config.training.save);
  EXPECT_GT(reader.verify_all(), 0);
  hf_export(o.config.training.save, (dir_ / "out").string(), {});
  EXPECT_EQ(bytes(dir_ / "out" / "tokenizer.model"), bytes(model));
  fs::remove(dir_ / "out" / "tokenizer.model");
  EXPECT_NE(testing::error_text([&] {
              tokenize::tokenizer_open_saved((dir_ / "out").string());
            }).find("tokenizer.model is missing"),
            std::string::npos);
}

TEST_F(HfTrainTest, TokenizerLargerThanTheVocabularyIsRefused) {
  TrainOptions o = options(0);
  o.config.model.vocab_size = 200;
  const std::string e = testing::error_text([&] { Trainer t(o); });
  EXPECT_NE(e.find("ByteTokenizer has 257 tokens, more than the model's --vocab-size 200"),
            std::string::npos)
      << e;
  o.config.model.vocab_size = 257;
  o.config.training.tokenizer_type = "WordPiece";
  EXPECT_NE(testing::error_text([&] { Trainer t(o); }).find("is not supported"), std::string::npos);
}

}  // namespace
}  // namespace infinipipe::runtime
