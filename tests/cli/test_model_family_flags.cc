// The model families from flags and YAML: Megatron-LM's --kv-channels, --add-qkv-bias and
// --qk-layernorm, infinipipe's --sliding-window and --model-family (derived when not given), and
// the refusals that keep a family and its features in agreement.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "options/options.h"

namespace infinipipe::model_family_flags_test {
namespace {

std::string error_of(const std::vector<std::string>& args) {
  try {
    options::resolve_config_args(args);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ModelFamilyFlags, TheFamilyIsDerivedFromMegatronsFlags) {
  const Config qwen3 = options::resolve_config_args({"--qk-layernorm", "--kv-channels", "128"});
  EXPECT_EQ(qwen3.model.family, "qwen3");
  EXPECT_EQ(qwen3.model.head_dim(), 128);
  EXPECT_EQ(qwen3.model.q_size(), 8 * 128);
  const Config qwen2 = options::resolve_config_args({"--add-qkv-bias"});
  EXPECT_EQ(qwen2.model.family, "qwen2");
  EXPECT_EQ(qwen2.model.head_dim(), 512 / 8);
  EXPECT_EQ(options::resolve_config_args({}).model.family, "llama");
  const Config mistral = options::resolve_config_args(
      {"--model-family", "mistral", "--sliding-window", "4096", "--seq-length", "4096"});
  EXPECT_EQ(mistral.model.family, "mistral");
  EXPECT_EQ(mistral.model.sliding_window, 4096);
  EXPECT_TRUE(engine_unsupported(mistral.model).empty());  // Llama maths
}

TEST(ModelFamilyFlags, YamlRoundTripKeepsTheFamily) {
  const Config a = options::resolve_config_args(
      {"--model-family", "mistral", "--sliding-window", "8192", "--kv-channels", "128"});
  Config b;
  options::apply_yaml(b, options::config_to_yaml(a), "round trip");
  b.validate();
  EXPECT_EQ(b.model.family, "mistral");
  EXPECT_EQ(b.model.sliding_window, 8192);
  EXPECT_EQ(b.model.kv_channels, 128);
}

TEST(ModelFamilyFlags, DisagreementsAndShortWindowsAreRefused) {
  EXPECT_NE(error_of({"--model-family", "qwen2"}).find("model family qwen2 has q/k/v biases"),
            std::string::npos);
  EXPECT_NE(error_of({"--model-family", "mistral", "--qk-layernorm"})
                .find("model family mistral has no q/k RMSNorm"),
            std::string::npos);
  EXPECT_NE(error_of({"--model-family", "gemma"}).find("gemma"), std::string::npos);
  EXPECT_NE(error_of({"--sliding-window", "1024", "--seq-length", "2048"})
                .find("sliding-window attention is not honoured: train with --seq-length <= 1024"),
            std::string::npos);
  EXPECT_EQ(error_of({"--sliding-window", "2048", "--seq-length", "2048"}), "");
  EXPECT_NE(error_of({"--kv-channels", "15"}).find("must be even"), std::string::npos);
  // An explicit head_dim no longer needs heads to divide the hidden size.
  EXPECT_EQ(error_of({"--hidden-size", "100", "--num-attention-heads", "8", "--kv-channels", "16"}),
            "");
}

TEST(ModelFamilyFlags, TheEngineRefusesWhatIsNotLlamaMaths) {
  const Config qwen3 = options::resolve_config_args({"--qk-layernorm"});
  const std::string why = engine_unsupported_message(qwen3.model);
  EXPECT_NE(why.find("the C++ engine trains the Llama architecture; q/k RMSNorm (model family "
                     "qwen3) needs the PyTorch trainer"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("python3 -m infinipipe.torch.train --hf-model DIR"), std::string::npos);
  EXPECT_FALSE(engine_unsupported(options::resolve_config_args({"--add-qkv-bias"}).model).empty());
  EXPECT_NE(engine_unsupported(options::resolve_config_args({"--kv-channels", "128"}).model)
                .find("head_dim 128"),
            std::string::npos);
  EXPECT_TRUE(
      engine_unsupported(options::resolve_config_args({"--kv-channels", "64"}).model).empty());
}

}  // namespace
}  // namespace infinipipe::model_family_flags_test
