#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "options/options.h"
#include "cli/run_cli.h"
#include "core/error.h"

namespace infinipipe::options {
namespace {

Config parse(const std::vector<std::string>& args) {
  return resolve_config_args(args);
}

std::string parse_error(const std::vector<std::string>& args) {
  try {
    parse(args);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

std::string write_temp(const std::string& text) {
  std::string name = ::testing::TempDir() + "infinipipe_cfg_XXXXXX";  // TempDir ends in '/'
  int fd = mkstemp(name.data());
  close(fd);
  std::ofstream(name) << text;
  return name;
}

TEST(Options, MegatronFlagsAndAliases) {
  Config c = parse({"--num-layers", "16", "--hidden-size", "256", "--pp", "4", "--dp", "2",
                    "--global-batch-size", "32", "--lr", "1e-3", "--optimizer", "sgd", "--bf16",
                    "--memory-budget", "2GiB", "--lr-decay-style", "linear"});
  EXPECT_EQ(c.model.num_layers, 16);
  EXPECT_EQ(c.model.hidden_size, 256);
  EXPECT_EQ(c.parallel.pipeline_parallel, 4);
  EXPECT_EQ(c.parallel.data_parallel, 2);
  EXPECT_EQ(c.training.global_batch_size, 32);
  EXPECT_DOUBLE_EQ(c.training.lr, 1e-3);
  EXPECT_EQ(c.training.optimizer, Optimizer::sgd);
  EXPECT_TRUE(c.training.bf16);
  EXPECT_EQ(c.training.memory_budget, 2LL << 30);
  EXPECT_EQ(c.training.lr_decay_style, LrDecayStyle::linear);
  EXPECT_EQ(c.cluster.num_devices, 8);
}

// The exit signal handler is on by default (Ctrl-C must keep the work), Megatron's bare flag
// keeps it on, =false turns it off; the exit interval and duration take Megatron's meanings.
TEST(Options, ExitFlags) {
  Config c = parse({});
  EXPECT_TRUE(c.training.exit_signal_handler);
  EXPECT_EQ(c.training.exit_interval, 0);
  EXPECT_EQ(c.training.exit_duration_in_mins, 0.0);
  c = parse({"--exit-signal-handler", "--exit-interval", "50", "--exit-duration-in-mins", "0.5"});
  EXPECT_TRUE(c.training.exit_signal_handler);
  EXPECT_EQ(c.training.exit_interval, 50);
  EXPECT_DOUBLE_EQ(c.training.exit_duration_in_mins, 0.5);
  EXPECT_FALSE(parse({"--exit-signal-handler=false"}).training.exit_signal_handler);
  EXPECT_NE(parse_error({"--exit-interval", "-1"}).find("exit-interval must be an integer in [0, "),
            std::string::npos);
  EXPECT_NE(parse_error({"--exit-duration-in-mins", "-2"}).find("exit-duration-in-mins must be"),
            std::string::npos);
}

TEST(Options, FileThenFlagsOverride) {
  std::string f = write_temp(
      "num-layers: 12\npipeline-model-parallel-size: 2\nnum_attention_heads: 4\nlr: 0.01\n");
  Config c = parse({"--config", f, "--lr", "0.5"});
  EXPECT_EQ(c.model.num_layers, 12);
  EXPECT_EQ(c.parallel.pipeline_parallel, 2);
  EXPECT_EQ(c.model.num_attention_heads, 4);  // underscores accepted as in argparse dests
  EXPECT_DOUBLE_EQ(c.training.lr, 0.5);
  std::remove(f.c_str());
}

TEST(Options, UnknownKeySuggestsNearest) {
  EXPECT_NE(parse_error({"--num-layer", "4"}).find("did you mean 'num-layers'?"),
            std::string::npos);
  std::string f = write_temp("hiden-size: 128\n");
  std::string e = parse_error({"--config", f});
  EXPECT_NE(e.find("(line 1)"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'hidden-size'?"), std::string::npos) << e;
  std::remove(f.c_str());
}

TEST(Options, UnsupportedMegatronOptions) {
  EXPECT_NE(parse_error({"--tensor-model-parallel-size", "2"}).find("no tensor parallelism"),
            std::string::npos);
  EXPECT_EQ(parse_error({"--tensor-model-parallel-size", "1", "--use-flash-attn"}), "");
  std::string f = write_temp("tensor-model-parallel-size: 8\n");
  EXPECT_NE(parse_error({"--config", f}).find("is not supported"), std::string::npos);
  std::remove(f.c_str());
}

TEST(Options, BadValues) {
  EXPECT_NE(parse_error({"--num-layers", "four"}).find("expects an integer"), std::string::npos);
  EXPECT_NE(parse_error({"--schedule", "zb"}).find("choose one of"), std::string::npos);
  EXPECT_NE(parse_error({"--memory-budget", "lots"}).find("is not a size"), std::string::npos);
  std::string f = write_temp("num-layers: [1, 2]\n");
  EXPECT_NE(parse_error({"--config", f}).find("must be a single value"), std::string::npos);
  std::remove(f.c_str());
}

TEST(Options, VirtualStagesFromLayersPerVirtualStage) {
  Config c = parse({"--num-layers", "16", "--pp", "2", "--num-layers-per-virtual-pipeline-stage",
                    "2", "--schedule", "interleaved"});
  EXPECT_EQ(c.parallel.virtual_stages, 4);
}

TEST(Options, ShownYamlRoundTrips) {
  Config a = parse({"--num-layers", "6", "--pp", "3", "--save", "ckpt", "--rotary-base", "5e5"});
  Config b;
  apply_yaml(b, config_to_yaml(a), "shown");
  b.validate();
  EXPECT_EQ(config_to_yaml(a), config_to_yaml(b));
}

// Megatron's multi-word data flags: several words after one flag, a list or a string in YAML,
// and the shown configuration loads back (with --train-samples the iterations are derived).
TEST(Options, DataPathBlendsAndTrainSamples) {
  Config c = parse({"--data-path", "0.3", "A", "0.7", "B", "--split", "969,30,1", "--lr", "1e-3"});
  EXPECT_EQ(c.training.data_path, "0.3 A 0.7 B");
  EXPECT_EQ(c.training.split, "969,30,1");
  EXPECT_DOUBLE_EQ(c.training.lr, 1e-3);
  std::string f = write_temp("data-path: [0.5, A, 0.5, B]\n");
  Config y = parse({"--config", f});
  EXPECT_EQ(y.training.data_path, "0.5 A 0.5 B");
  std::remove(f.c_str());
  f = write_temp("data-path: A\nvalid-data-path: C\n");
  EXPECT_NE(parse_error({"--config", f}).find("not both"), std::string::npos);
  std::remove(f.c_str());
  f = write_temp("train-data-path: [0.5, A, 0.5, B]\nvalid-data-path: C D\n");
  y = parse({"--config", f});
  EXPECT_EQ(y.training.train_data_path, "0.5 A 0.5 B");
  EXPECT_EQ(y.training.valid_data_path, "C D");
  std::remove(f.c_str());

  Config s =
      parse({"--train-samples", "1000", "--global-batch-size", "16", "--lr-warmup-samples", "100"});
  EXPECT_EQ(s.training.train_iters, 62);  // Megatron's floor of samples / global batch
  Config back;
  apply_yaml(back, config_to_yaml(s), "shown");
  back.validate();
  EXPECT_EQ(back.training.train_iters, 62);
  EXPECT_EQ(config_to_yaml(back), config_to_yaml(s));
  EXPECT_NE(parse_error({"--train-samples", "100", "--train-iters", "5"}).find("only one of"),
            std::string::npos);
}

TEST(Cli, HelpListsSubcommands) {
  ShellResult r = run_cli("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("config"), std::string::npos);
}

TEST(Cli, ConfigCheckExitCodes) {
  std::string good = write_temp("num-layers: 8\npipeline-model-parallel-size: 2\n");
  ShellResult ok = run_cli("config check " + good);
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find(": ok"), std::string::npos);
  std::string bad = write_temp("num-layers: 30\npp: 4\nvpp: 2\nschedule: interleaved\n");
  ShellResult no = run_cli("config check " + bad);
  EXPECT_EQ(no.exit_code, 2) << no.output;
  EXPECT_NE(no.output.find("use 32 layers"), std::string::npos) << no.output;
  std::remove(good.c_str());
  std::remove(bad.c_str());
}

TEST(Cli, ConfigShowAndUsageErrors) {
  ShellResult r = run_cli("config show --pp 2 --num-layers 4");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("pipeline-model-parallel-size: 2"), std::string::npos);
  EXPECT_EQ(run_cli("config show --num-layer 4").exit_code, 2);
  EXPECT_EQ(run_cli("no-such-command").exit_code, 2);
  EXPECT_EQ(run_cli("config check /nonexistent.yaml").exit_code, 2);
}

}  // namespace
}  // namespace infinipipe::options
