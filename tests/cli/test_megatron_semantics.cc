// What a Megatron-LM user meets porting a script: every refused or invalid option named in one
// message, `config check` refusing what `train` refuses before any work, dp derived from the
// world size, `--save-interval` without `--save`, the semantics `--diff-megatron` lists, and the
// truncation warning (or --long-documents split) of train and `data stats`.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/cli_dir_test.h"
#include "cli/run_cli.h"
#include "common/build_paths.h"
#include "core/error.h"
#include "options/option_usage.h"
#include "options/options.h"

namespace {

int occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class MegatronSemanticsTest : public CliDirTest {
 protected:
  std::string tiny() const {
    return "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --global-batch-size 4 "
           "--min-tail-slice 16 --cost-model-update off --eval-iters 0 ";
  }
  // Documents up to 512 tokens, so --seq-length 64 truncates most of them.
  std::string corpus() {
    const std::string p = (dir_ / "corpus").string();
    const ShellResult r =
        run_cli("data synth --num-documents 40 --seq-length 512 --seed 3 --output " + p);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return p;
  }
};

TEST_F(MegatronSemanticsTest, EveryRefusedOrInvalidOptionIsNamedInOneMessage) {
  const ShellResult r = run_cli(
      "config check --num-layers many --recompute-activations --fp8-format hybrid "
      "--tensor-model-parallel-size 2 --lr-warmup-iterz 3 --bf16");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("6 problems"), std::string::npos) << r.output;
  for (const char* flag : {"num-layers", "--recompute-activations", "--fp8-format",
                           "--tensor-model-parallel-size", "--lr-warmup-iterz", "--bf16"})
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag << "\n" << r.output;
  EXPECT_NE(r.output.find("did you mean 'lr-warmup-iters'"), std::string::npos) << r.output;
  // One problem stays one line, as before.
  const ShellResult one = run_cli("config show --recompute-activations");
  EXPECT_EQ(one.exit_code, 2);
  EXPECT_EQ(one.output.find("problems"), std::string::npos) << one.output;
}

TEST_F(MegatronSemanticsTest, ProblemsOfAYamlFileAndTheFlagsComeTogether) {
  const std::string file = (dir_ / "c.yaml").string();
  {
    std::ofstream out(file);
    out << "num-layers: 2\nhidden-size: x\nprofile: true\n";
  }
  const ShellResult r = run_cli("config check " + file + " --fp8-format hybrid");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("3 problems"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("line 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("profile"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--fp8-format"), std::string::npos) << r.output;
}

TEST_F(MegatronSemanticsTest, ConfigCheckRefusesWhatTrainRefusesBeforeAnyWork) {
  const std::string data = corpus();
  for (const std::string& flags :
       {std::string("--bf16"), std::string("--ulysses-degree 2"),
        std::string("--tokenizer-type NoSuchTokenizer"), std::string("--split 1,x"),
        std::string("--train-iters 2 --lr-warmup-iters 2")}) {
    const ShellResult check = run_cli("config check " + flags + " --data-path " + data);
    EXPECT_EQ(check.exit_code, 2) << flags << "\n" << check.output;
    const ShellResult train = run_cli(fmt::format(
        "train {} --seq-length 64 --train-iters 1 --data-path {} {}", tiny(), data, flags));
    EXPECT_EQ(train.exit_code, 2) << flags << "\n" << train.output;
    EXPECT_EQ(train.output.find(" layers x hidden "), std::string::npos)
        << "banner before the refusal\n"
        << train.output;
    // The same reason in both (its numbers may differ: the run's batch is smaller).
    const std::string reason = check.output.substr(check.output.find("error: ") + 7, 16);
    EXPECT_NE(train.output.find(reason), std::string::npos) << check.output << "\n" << train.output;
  }
  // plan and simulate still take --bf16 (they plan GPU presets).
  EXPECT_EQ(run_cli("config show --bf16").exit_code, 0);
  EXPECT_EQ(run_cli("config check --seq-length 64").exit_code, 0);
}

TEST_F(MegatronSemanticsTest, SaveIntervalWithoutSaveIsAcceptedAndSavesNothing) {
  const ShellResult show = run_cli("config show --save-interval 1000");
  EXPECT_EQ(show.exit_code, 0) << show.output;
  const std::string data = corpus();
  const ShellResult r = run_cli(fmt::format(
      "train {} --seq-length 64 --train-iters 2 --save-interval 1 --data-path {} --quiet", tiny(),
      data));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("saved checkpoint"), std::string::npos) << r.output;
}

TEST_F(MegatronSemanticsTest, DiffMegatronListsTheSemantics) {
  const ShellResult r = run_cli("config show --diff-megatron --seq-length 256");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* subject :
       {"\na sample\n", "\n--global-batch-size\n",
        "\n--train-samples, --lr-warmup-samples, --lr-decay-samples\n", "\nattention mask\n",
        "\nposition ids\n", "\nloss\n", "\ndata-parallel-size\n"})
    EXPECT_NE(r.output.find(subject), std::string::npos) << subject << "\n" << r.output;
  EXPECT_NE(r.output.find("--reset-attention-mask"), std::string::npos);
  EXPECT_NE(r.output.find("--reset-position-ids"), std::string::npos);
  EXPECT_NE(r.output.find("--calculate-per-token-loss"), std::string::npos);
  EXPECT_NE(r.output.find("truncated to its first --seq-length 256 tokens"), std::string::npos);
  const ShellResult split = run_cli("config show --diff-megatron --long-documents split");
  EXPECT_NE(split.output.find("--long-documents split one piece"), std::string::npos)
      << split.output;
  // Without a dataset it shapes nothing, and says so.
  EXPECT_NE(split.output.find("warning: --long-documents is not used"), std::string::npos)
      << split.output;
}

// A command that runs no training names the train-only options it was given instead of
// dropping them silently; config show keeps them (it describes what train would run).
TEST_F(MegatronSemanticsTest, TrainOnlyOptionsAreNamedAsUnusedByOtherCommands) {
  const ShellResult sim = run_cli(
      "simulate --distribution fixed --global-batch-size 4 --num-layers 2 --hidden-size 64 "
      "--num-attention-heads 4 --seq-length 256 --device cpu --save ckpt --rank-placement auto "
      "--measure-links --measure-links-interval 5");
  EXPECT_EQ(sim.exit_code, 0) << sim.output;
  for (const char* key : {"save", "measure-links", "measure-links-interval"})
    EXPECT_NE(
        sim.output.find(fmt::format(
            "warning: --{} is not used: only `infinipipe train` reads it, not `simulate`", key)),
        std::string::npos)
        << key << "\n"
        << sim.output;
  // simulate orders ranks only on measured links between hosts, and has none here.
  EXPECT_NE(sim.output.find("warning: --rank-placement is not used: simulate orders the ranks by "
                            "the measured links between hosts, and there is no --calibration"),
            std::string::npos)
      << sim.output;
  EXPECT_NE(sim.output.find("auto has nothing to choose by"), std::string::npos) << sim.output;
  const ShellResult show = run_cli("config show --rank-placement auto");
  EXPECT_EQ(show.output.find("is not used"), std::string::npos) << show.output;
}

// train measures the links again only when it measures them and refits its costs: otherwise
// --measure-links-interval is named as unused, with what to add.
TEST(MeasureLinksInterval, IsNamedAsUnusedWhereTrainMeasuresNoLinksAgain) {
  using infinipipe::options::unused_option_notes;
  infinipipe::Config cfg;
  const std::set<std::string> given = {"measure-links-interval"};
  auto notes = unused_option_notes(cfg, given, "train");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("--measure-links-interval is not used"), std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find("add --measure-links"), std::string::npos) << notes[0];
  cfg.cluster.measure_links = true;
  EXPECT_TRUE(unused_option_notes(cfg, given, "train").empty());
  cfg.training.cost_model_update = infinipipe::CostModelUpdate::off;
  notes = unused_option_notes(cfg, given, "train");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("keeps the links measured at start"), std::string::npos) << notes[0];
  EXPECT_TRUE(unused_option_notes(cfg, {}, "train").empty()) << "the default is no request";
}

TEST_F(MegatronSemanticsTest, DataParallelIsDerivedFromTheWorldAsMegatronDoes) {
  using infinipipe::options::parse_config_args;
  auto resolve = [](const std::vector<std::string>& args, int64_t world) {
    auto parsed = parse_config_args(args);
    parsed.options->world_size = world;
    return infinipipe::options::resolve_config(*parsed.options, infinipipe::Config{}, true,
                                               nullptr);
  };
  EXPECT_EQ(resolve({"--pp", "2"}, 4).parallel.data_parallel, 2);
  EXPECT_EQ(resolve({"--pp", "2", "--num-layers", "8"}, 8).parallel.data_parallel, 4);
  EXPECT_EQ(resolve({}, 3).parallel.data_parallel, 3);
  EXPECT_EQ(resolve({"--pp", "2", "--dp", "1"}, 4).parallel.data_parallel, 1);  // as given
  EXPECT_EQ(resolve({"--pp", "2"}, 0).parallel.data_parallel, 1);               // world unknown
  try {
    resolve({"--pp", "2"}, 3);
    ADD_FAILURE() << "3 processes over pp 2 accepted";
  } catch (const infinipipe::ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("3 processes are not a multiple of pipeline-model-parallel-size 2"),
              std::string::npos)
        << m;
  }
  // Under train: one process and pp 2 names the mpirun to use.
  const ShellResult one = run_cli("train --pp 2 --num-layers 2 --train-iters 1");
  EXPECT_EQ(one.exit_code, 2) << one.output;
  EXPECT_NE(one.output.find("one process is not a multiple"), std::string::npos) << one.output;
}

TEST_F(MegatronSemanticsTest, TrainWarnsOnceWhatTruncationDropsAndSplitKeepsIt) {
  const std::string data = corpus();
  const ShellResult cut =
      run_cli(fmt::format("train {} --seq-length 64 --train-iters 2 --data-path {}", tiny(), data));
  ASSERT_EQ(cut.exit_code, 0) << cut.output;
  EXPECT_EQ(occurrences(cut.output, "warning: --seq-length 64 truncates"), 1) << cut.output;
  EXPECT_LT(cut.output.find("warning: --seq-length 64"), cut.output.find(" layers x hidden "))
      << "the warning comes before the run starts\n"
      << cut.output;
  EXPECT_NE(cut.output.find("--long-documents split"), std::string::npos);

  const ShellResult split = run_cli(
      fmt::format("train {} --seq-length 64 --train-iters 2 --long-documents split --data-path {}",
                  tiny(), data));
  ASSERT_EQ(split.exit_code, 0) << split.output;
  EXPECT_NE(split.output.find("done: 2 iterations"), std::string::npos) << split.output;
  EXPECT_EQ(split.output.find("truncates"), std::string::npos) << split.output;
  EXPECT_EQ(occurrences(split.output,
                        "note: --long-documents split: the training split's 40 "
                        "documents are "),
            1)
      << split.output;
}

TEST_F(MegatronSemanticsTest, ASplitRunResumesOnlyWithTheSamplesItCounted) {
  const std::string data = corpus();
  const std::string ck = (dir_ / "ck").string();
  const std::string run =
      fmt::format("train {} --data-path {} --quiet --save {} --load {} ", tiny(), data, ck, ck);
  const ShellResult first = run_cli(run + "--seq-length 64 --long-documents split --train-iters 2");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  for (const char* other : {"--seq-length 64", "--seq-length 32 --long-documents split"}) {
    const ShellResult r = run_cli(run + other + " --train-iters 3");
    EXPECT_EQ(r.exit_code, 2) << other << "\n" << r.output;
    EXPECT_NE(r.output.find("resume with --long-documents split --seq-length 64"),
              std::string::npos)
        << r.output;
  }
  const ShellResult same = run_cli(run + "--seq-length 64 --long-documents split --train-iters 3");
  EXPECT_EQ(same.exit_code, 0) << same.output;
}

TEST_F(MegatronSemanticsTest, DataStatsWarnsOfTruncationAndCountsSplitPieces) {
  const std::string data = corpus();
  const ShellResult cut = run_cli("data stats --data-path " + data + " --seq-length 64");
  ASSERT_EQ(cut.exit_code, 0) << cut.output;
  EXPECT_NE(cut.output.find("warning: --seq-length 64 truncates"), std::string::npos) << cut.output;
  const ShellResult split =
      run_cli("data stats --data-path " + data + " --seq-length 64 --long-documents split");
  ASSERT_EQ(split.exit_code, 0) << split.output;
  EXPECT_EQ(split.output.find("truncates"), std::string::npos) << split.output;
  EXPECT_NE(split.output.find("split at 64 tokens"), std::string::npos) << split.output;
  // Every token is counted: the tokens of the table equal the dataset's.
  const size_t at = split.output.find(" tokens\n");
  ASSERT_NE(at, std::string::npos);
  const size_t from = split.output.rfind(", ", at) + 2;
  const std::string total = split.output.substr(from, at - from);
  EXPECT_NE(split.output.find("| 100.00 | " + total + " | 100.00 |"), std::string::npos)
      << total << "\n"
      << split.output;
  EXPECT_EQ(run_cli("data stats --data-path " + data + " --long-documents split").exit_code, 2);
}

// examples/megatron-llama.sh with the flags it leaves out of Megatron-LM's script given back:
// one message names each of them.
TEST_F(MegatronSemanticsTest, LlamaScriptsLeftOutFlagsAreRefusedInOneMessage) {
  const std::string out = (dir_ / "llama").string();
  const std::vector<std::string> left_out = {"--bf16",
                                             "--fp8-format hybrid",
                                             "--fp8-amax-history-len 1024",
                                             "--fp8-amax-compute-algo max",
                                             "--fp8-param-gather",
                                             "--decoupled-lr 5e-4",
                                             "--decoupled-min-lr 4.5e-5",
                                             "--tiktoken-pattern v2",
                                             "--ckpt-format torch_dist",
                                             "--profile",
                                             "--profile-step-start 4",
                                             "--profile-step-end 6",
                                             "--mock-data"};
  std::string extra;
  for (const std::string& f : left_out) extra += " " + f;
  const ShellResult r = infinipipe::testing::shell_run(
      fmt::format("PP_SIZE=1 INFINIPIPE={} {}/examples/megatron-llama.sh {}{}", INFINIPIPE_BINARY,
                  INFINIPIPE_SOURCE_DIR, out, extra));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(occurrences(r.output, "infinipipe: error:"), 1) << r.output;
  EXPECT_NE(r.output.find(fmt::format("{} problems", left_out.size())), std::string::npos)
      << r.output;
  for (const std::string& f : left_out) {
    const std::string name = f.substr(0, f.find(' '));
    EXPECT_NE(r.output.find(name), std::string::npos) << name << "\n" << r.output;
  }
  EXPECT_EQ(r.output.find(" layers x hidden "), std::string::npos) << r.output;
}

}  // namespace
