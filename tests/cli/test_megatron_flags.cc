// Megatron-LM compatibility: the flag table covers arguments.py, flags parse as argparse does,
// neutral values are the only ones accepted, and the defaults diff is what it says.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "common/build_paths.h"
#include "options/megatron_defaults.h"
#include "options/megatron_flags.h"
#include "options/options.h"
#include "cli/run_cli.h"
#include "core/error.h"

namespace infinipipe::options {
namespace {

Config parse_quiet(const std::vector<std::string>& args,
                   std::vector<std::string>* notes = nullptr) {
  std::vector<std::string> ignored;
  return resolve_config_args(args, Config{}, true, notes ? notes : &ignored);
}

std::string quiet_parse_error(const std::vector<std::string>& args) {
  try {
    parse_quiet(args);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

std::vector<std::string> arguments_py_names() {
  std::ifstream in(std::string(INFINIPIPE_SOURCE_DIR) +
                   "/tests/cli/data/megatron_arguments_core_v0.15.0.txt");
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::replace(line.begin(), line.end(), '_', '-');
    names.push_back(line);
  }
  return names;
}

// How many lists of the table hold `name`, and which.
std::vector<std::string> listed_in(const std::string& name) {
  std::vector<std::string> in;
  for (const NeutralFlag& n : megatron_neutral_flags())
    if (n.name == name) in.push_back("neutral");
  for (const FlagGroup& g : megatron_irrelevant_flags())
    in.insert(in.end(), std::count(g.names.begin(), g.names.end(), name), "irrelevant");
  for (const FlagGroup& g : megatron_refused_flags())
    in.insert(in.end(), std::count(g.names.begin(), g.names.end(), name), "refused");
  return in;
}

TEST(MegatronFlags, EveryArgumentsPyNameIsInExactlyOneClass) {
  const std::vector<std::string> names = arguments_py_names();
  ASSERT_GT(names.size(), 500u) << "the names file did not load";
  for (const std::string& name : names) {
    const std::vector<std::string> in = listed_in(name);
    if (is_option_name(name)) {
      for (const std::string& c : in)
        ADD_FAILURE() << name << " has an option spec but is also listed " << c;
      continue;
    }
    EXPECT_EQ(in.size(), 1u) << name << " is in " << in.size()
                             << " classes: " << fmt::format("{}", fmt::join(in, ", "));
  }
}

TEST(MegatronFlags, TheTableListsOnlyArgumentsPyNames) {
  const std::vector<std::string> names = arguments_py_names();
  auto known = [&](const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  for (const NeutralFlag& n : megatron_neutral_flags()) EXPECT_TRUE(known(n.name)) << n.name;
  for (const auto* groups : {&megatron_irrelevant_flags(), &megatron_refused_flags()})
    for (const FlagGroup& g : *groups)
      for (const std::string& n : g.names) EXPECT_TRUE(known(n)) << n;
}

TEST(MegatronFlags, BooleansTakeArgparseAndMegatronForms) {
  EXPECT_TRUE(parse_quiet({}).model.tie_embeddings);  // Megatron ties unless told otherwise
  EXPECT_FALSE(parse_quiet({"--tie-embeddings=false"}).model.tie_embeddings);
  EXPECT_TRUE(parse_quiet({"--tie-embeddings=false", "--tie-embeddings"}).model.tie_embeddings);
  EXPECT_FALSE(parse_quiet({"--no-tie-embeddings"}).model.tie_embeddings);
  EXPECT_FALSE(parse_quiet({"--untie-embeddings-and-output-weights"}).model.tie_embeddings);
  EXPECT_TRUE(parse_quiet({"--untie-embeddings-and-output-weights=false"}).model.tie_embeddings);
  EXPECT_TRUE(parse_quiet({"--bf16=true"}).training.bf16);
  EXPECT_FALSE(parse_quiet({"--bf16", "--no-bf16"}).training.bf16);
  EXPECT_NE(quiet_parse_error({"--bf16=maybe"}).find("expects true or false"), std::string::npos);
  Config c;
  apply_yaml(c, "no-tie-embeddings: true\n", "test.yaml");
  EXPECT_FALSE(c.model.tie_embeddings);
}

TEST(MegatronFlags, ARepeatedFlagTakesTheLastValue) {
  Config c = parse_quiet({"--lr", "1e-3", "--num-layers", "4", "--lr", "2e-3", "--lr=5e-3"});
  EXPECT_DOUBLE_EQ(c.training.lr, 5e-3);
  EXPECT_EQ(c.model.num_layers, 4);
  // A neutral Megatron option too: argparse keeps the last value, which is the neutral one.
  EXPECT_EQ(quiet_parse_error({"--attention-dropout", "0.1", "--attention-dropout", "0.0"}), "");
  EXPECT_NE(quiet_parse_error({"--attention-dropout", "0.0", "--attention-dropout", "0.1"})
                .find("attention-dropout 0.1 is not supported"),
            std::string::npos);
}

TEST(MegatronFlags, TypoHintsRankPrefixesThenEditDistance) {
  EXPECT_EQ(nearest_option_name("save-interva"), "save-interval");
  EXPECT_EQ(nearest_option_name("lr-warmup-iter"), "lr-warmup-iters");
  EXPECT_EQ(nearest_option_name("hidden-szie"), "hidden-size");
  EXPECT_EQ(nearest_option_name("adam_beta"), "adam-beta1");
  EXPECT_EQ(nearest_option_name("eval-interva"), "eval-interval");
  EXPECT_EQ(nearest_option_name("completely-different"), "");
  EXPECT_NE(quiet_parse_error({"--save-interva", "3"}).find("did you mean 'save-interval'?"),
            std::string::npos);
  // A Megatron option this build lacks says so instead of pointing at a look-alike.
  const std::string e = quiet_parse_error({"--eval-interval", "100"});
  if (!is_option_name("eval-interval")) {
    EXPECT_NE(e.find("does not have yet"), std::string::npos) << e;
    EXPECT_EQ(e.find("save-interval"), std::string::npos) << e;
  }
}

TEST(MegatronFlags, NeutralValuesOnly) {
  // hidden 512 / 8 heads = 64 channels per head.
  EXPECT_EQ(
      quiet_parse_error({"--kv-channels", "64", "--rotary-percent", "1.0", "--hidden-dropout", "0",
                         "--use-mcore-models", "--sequence-parallel",
                         "--tensor-model-parallel-size", "1", "--context-parallel-size", "1"}),
      "");
  // --kv-channels is supported since the model families: a head_dim of its own (Qwen3).
  EXPECT_EQ(quiet_parse_error({"--kv-channels", "128"}), "");
  EXPECT_NE(
      quiet_parse_error({"--rotary-percent", "0.5"}).find("rotary-percent 0.5 is not supported"),
      std::string::npos);
  EXPECT_NE(quiet_parse_error({"--context-parallel-size", "2"}).find("slices long sequences"),
            std::string::npos);
  EXPECT_NE(quiet_parse_error({"--make-vocab-size-divisible-by", "128"}).find("is not padded"),
            std::string::npos);
  EXPECT_EQ(quiet_parse_error({"--make-vocab-size-divisible-by", "128", "--vocab-size", "384"}),
            "");
  EXPECT_NE(quiet_parse_error({"--recompute-activations"}).find("whole layers"), std::string::npos);
  EXPECT_NE(quiet_parse_error({"--fp8-format", "hybrid"}).find("Transformer Engine"),
            std::string::npos);
  EXPECT_NE(quiet_parse_error({"--mock-data"}).find("data synth"), std::string::npos);
}

TEST(MegatronFlags, IrrelevantAndUnusedFlagsGetANote) {
  std::vector<std::string> notes;
  parse_quiet({"--manual-gc", "--log-throughput", "--micro-batch-size", "2"}, &notes);
  auto has = [&](const std::string& s) {
    return std::any_of(notes.begin(), notes.end(),
                       [&](const std::string& n) { return n.find(s) != std::string::npos; });
  };
  EXPECT_TRUE(has("--manual-gc has no effect here")) << fmt::format("{}", fmt::join(notes, "\n"));
  EXPECT_TRUE(has("--log-throughput has no effect here"));
  EXPECT_TRUE(has("--micro-batch-size is not used: schedule epp"));
  parse_quiet({"--micro-batch-size", "2", "--schedule", "1f1b"}, &notes);
  EXPECT_TRUE(notes.empty()) << notes.front();
  parse_quiet({"--seq1f1b-slices", "4", "--recompute-method", "block"}, &notes);
  EXPECT_TRUE(has("--seq1f1b-slices is not used"));
  EXPECT_TRUE(has("--recompute-method is not used"));
  parse_quiet({"--recompute-granularity", "full", "--recompute-method", "block",
               "--recompute-num-layers", "2"},
              &notes);
  EXPECT_TRUE(notes.empty()) << notes.front();
}

TEST(MegatronFlags, RecomputeAsMegatron) {
  Config c = parse_quiet({"--recompute-granularity", "full", "--recompute-method", "uniform",
                          "--recompute-num-layers", "1"});
  EXPECT_EQ(c.parallel.recompute_granularity, RecomputeGranularity::full);
  EXPECT_NE(quiet_parse_error({"--recompute-granularity", "full", "--recompute-method", "uniform",
                               "--recompute-num-layers", "2"})
                .find("keeps one input per 2 layers"),
            std::string::npos);
  EXPECT_NE(quiet_parse_error({"--recompute-granularity", "selective"}).find("blockwise attention"),
            std::string::npos);
}

TEST(MegatronFlags, GroupQueryAttentionTakesEffect) {
  EXPECT_EQ(parse_quiet({"--group-query-attention", "--num-query-groups", "2"}).model.kv_heads(),
            2);
  EXPECT_EQ(parse_quiet({"--group-query-attention"}).model.kv_heads(), 1);
  EXPECT_EQ(parse_quiet({}).model.kv_heads(), 8);
  std::vector<std::string> notes;
  parse_quiet({"--num-query-groups", "2"}, &notes);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("without --group-query-attention"), std::string::npos);
}

TEST(MegatronFlags, DefaultsAreMegatronsWhereTheConceptIsTheSame) {
  const Config c;
  EXPECT_DOUBLE_EQ(c.training.adam_beta2, 0.999);
  EXPECT_DOUBLE_EQ(c.training.weight_decay, 0.01);
  EXPECT_EQ(c.training.lr_decay_style, LrDecayStyle::linear);
  EXPECT_TRUE(c.model.tie_embeddings);
  EXPECT_DOUBLE_EQ(c.model.init_method_std, 0.02);
  std::map<std::string, DefaultDifference> diff;
  for (const DefaultDifference& d : megatron_default_differences(parse_quiet({})))
    diff[d.option] = d;
  EXPECT_EQ(diff.count("adam-beta2"), 0u);
  EXPECT_EQ(diff.count("weight-decay"), 0u);
  EXPECT_EQ(diff.count("lr-decay-style"), 0u);
  ASSERT_EQ(diff.count("recompute-granularity"), 1u);
  EXPECT_EQ(diff["recompute-granularity"].infinipipe, "adaptive");
  EXPECT_EQ(diff["recompute-granularity"].megatron, "none");
  for (const auto& [key, d] : diff) EXPECT_FALSE(d.why.empty()) << key;
  // A value the user sets shows up as differing.
  for (const DefaultDifference& d :
       megatron_default_differences(parse_quiet({"--adam-beta2", "0.95"})))
    if (d.option == "adam-beta2") {
      EXPECT_EQ(d.infinipipe, "0.95");
    }
}

TEST(MegatronFlags, ConfigShowDiffMegatron) {
  ShellResult r = run_cli("config show --diff-megatron --weight-decay 0.1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("weight-decay"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("recompute-granularity"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("adam-beta2"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace infinipipe::options

namespace infinipipe::options {
namespace {

// docs/megatron.md holds the rendered table between two markers; INFINIPIPE_UPDATE_DOCS=1
// rewrites it after a deliberate change to the table.
TEST(MegatronFlags, DocsPageHasTheTable) {
  const std::string path = std::string(INFINIPIPE_SOURCE_DIR) + "/docs/megatron.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  std::string page = ss.str();
  const std::string begin = "<!-- flag table begin -->\n", end = "<!-- flag table end -->";
  const size_t b = page.find(begin), e = page.find(end);
  ASSERT_TRUE(b != std::string::npos && e != std::string::npos && b < e) << "markers missing";
  const std::string want = megatron_flags_markdown(arguments_py_names());
  if (std::getenv("INFINIPIPE_UPDATE_DOCS")) {
    page.replace(b + begin.size(), e - b - begin.size(), want);
    std::ofstream(path) << page;
    return;
  }
  EXPECT_EQ(page.substr(b + begin.size(), e - b - begin.size()), want)
      << "docs/megatron.md is out of date: run test_cli with INFINIPIPE_UPDATE_DOCS=1";
}

}  // namespace
}  // namespace infinipipe::options
