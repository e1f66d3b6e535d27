// Hostile flags and files through the real binary: every one gets one clear error and the exit
// code of its kind (2 for configuration, 1 for files at run time), never "internal error", a
// crash or a hang.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/cli_dir_test.h"
#include "cli/run_cli.h"
#include "common/build_paths.h"
#include "core/error.h"
#include "options/options.h"

namespace infinipipe::cli {
namespace {

Config parse_flags(const std::vector<std::string>& args) {
  return options::resolve_config_args(args);
}

TEST(HostileOptions, BooleanFlagsHonourTheirValue) {
  EXPECT_TRUE(parse_flags({}).model.tie_embeddings);  // Megatron-LM ties them by default
  EXPECT_TRUE(parse_flags({"--tie-embeddings=false", "--tie-embeddings"}).model.tie_embeddings);
  EXPECT_TRUE(parse_flags({"--tie-embeddings=true"}).model.tie_embeddings);
  EXPECT_FALSE(parse_flags({"--tie-embeddings=false"}).model.tie_embeddings);
  EXPECT_FALSE(parse_flags({"--tie-embeddings", "--tie-embeddings=false"}).model.tie_embeddings);
  try {
    parse_flags({"--tie-embeddings=maybe"});
    ADD_FAILURE() << "--tie-embeddings=maybe was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("tie-embeddings expects true or false, got 'maybe'"),
              std::string::npos)
        << e.what();
  }
}

TEST(HostileOptions, YamlComplexKeysAreConfigErrors) {
  Config cfg;
  for (const char* text : {"? [a, b]\n: 1\n", "? {a: 1}\n: 2\n", "[1, 2]: 3\n"}) {
    try {
      options::apply_yaml(cfg, text, "bad.yaml");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("bad.yaml"), std::string::npos) << e.what();
    }
  }
}

class HostileCli : public CliDirTest {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  // Runs `command` with a time limit; a hang shows as exit code 124.
  ShellResult run(const std::string& command) {
    ShellResult r;
    FILE* p = popen(("timeout 60 " + command + " 2>&1").c_str(), "r");
    if (!p) return r;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
    const int status = pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
  }
};

void expect_clean(const ShellResult& r, int exit_code, const std::string& says) {
  EXPECT_EQ(r.exit_code, exit_code) << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(says), std::string::npos) << r.output;
}

std::string bin() {
  return INFINIPIPE_BINARY;
}
std::string deep(size_t n) {
  return std::string(n, '[') + std::string(n, ']');
}

TEST_F(HostileCli, DeeplyNestedPlanIsAnError) {
  const std::string plan = write(
      "plan.json",
      "{\"format\": \"infinipipe-plan\", \"version\": 1, \"schedule\": " + deep(100000) + "}");
  expect_clean(run(bin() + " simulate --plan " + plan +
                   " --config " + std::string(INFINIPIPE_SOURCE_DIR) + "/examples/cpu-small.yaml"),
               1, "more than 64 levels");
}

TEST_F(HostileCli, NumberBeyondDoubleInAPlanIsAnError) {
  const std::string plan = write("plan.json", "{\"format\": \"infinipipe-plan\", \"v\": 1e400}");
  expect_clean(run(bin() + " simulate --plan " + plan +
                   " --config " + std::string(INFINIPIPE_SOURCE_DIR) + "/examples/cpu-small.yaml"),
               1, "is not valid JSON");
}

TEST_F(HostileCli, CalibrationWithAHugeCoefficientIsRefusedBeforeTheSolver) {
  std::ifstream in(std::string(INFINIPIPE_SOURCE_DIR) + "/examples/calibration-cpu.json");
  nlohmann::json j = nlohmann::json::parse(in);
  j["coefficients"]["alpha1"] = 1e20;
  const std::string cal = write("calibration.json", j.dump());
  expect_clean(run(bin() +
                   " plan --config " + INFINIPIPE_SOURCE_DIR +
                   "/examples/cpu-small.yaml --lengths " + INFINIPIPE_SOURCE_DIR +
                   "/examples/lengths-small.txt --calibration " +
                   cal + " --out " + (dir_ / "plan.json").string()),
               1, "coefficients.alpha1 = 1e+20 must be >= 0 and at most 60");
  const std::string nested = write("nested.json", "{\"format\": " + deep(100000) + "}");
  expect_clean(run(bin() + " cost --calibration " + nested), 1, "more than 64 levels");
}

TEST_F(HostileCli, HugeSizesAreConfigErrorsNotHangsOrWrappedAnswers) {
  const std::string lengths =
      " --lengths " + std::string(INFINIPIPE_SOURCE_DIR) + "/examples/lengths-small.txt";
  const std::string out = " --out " + (dir_ / "plan.json").string();
  expect_clean(run(bin() + " config check " +
                   write("a.yaml",
                         "hidden-size: 9223372036854775806\n"
                         "num-attention-heads: 4000000000000000000\n")),
               2, "hidden-size must be an integer in [1, 4294967296]");
  expect_clean(run(bin() + " plan --num-layers 4294967296" + lengths + out), 2,
               "--num-layers must be an integer in [1, 65536], got 4294967296");
  expect_clean(run(bin() + " plan --ffn-hidden-size 9223372036854775807" + lengths + out), 2,
               "--ffn-hidden-size must be an integer in [0, 4294967296]");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "plan.json"));
}

TEST_F(HostileCli, YamlComplexKeyIsAConfigError) {
  expect_clean(run(bin() + " config check " + write("k.yaml", "? [a, b]\n: 1\n")), 2,
               "an option name must be a plain word");
}

TEST_F(HostileCli, DeeplyNestedYamlIsAConfigError) {
  expect_clean(run(bin() + " config check " + write("d.yaml", "a: " + deep(100000) + "\n")), 2,
               "nest too deeply");
}

TEST_F(HostileCli, TraceAndMetricsWithBadNumbersAreErrors) {
  const std::filesystem::path run_dir = dir_ / "run";
  std::filesystem::create_directories(run_dir);
  std::ofstream(run_dir / "trace-rank00000.json") << "{\"traceEvents\": [], \"x\": 1e400}";
  expect_clean(run(bin() + " report " + run_dir.string()), 1, "is not valid JSON");
  std::ofstream(run_dir / "trace-rank00000.json") << deep(100000);
  expect_clean(run(bin() + " report " + run_dir.string()), 1, "more than 64 levels");
}

TEST_F(HostileCli, DataPrepareInputWithAHugeNumberIsAnError) {
  const std::string in = write("in.jsonl", "{\"text\": \"ok\"}\n{\"text\": \"x\", \"n\": 1e400}\n");
  expect_clean(run(bin() + " data prepare --input " + in + " --output " + (dir_ / "d").string()), 1,
               "in.jsonl:2: is not valid JSON");
}

}  // namespace
}  // namespace infinipipe::cli
