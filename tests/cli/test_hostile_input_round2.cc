// Issue 33's classes of hostile input through the real binary: special and oversized files,
// links inside a run directory, outputs that would land elsewhere, extreme integers, input
// accepted silently and messages that point at the wrong thing. Each gets one line saying what
// is wrong, the exit code of its kind, and never a hang, "internal error" or a lost file.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/corpus_cli_test.h"
#include "common/build_paths.h"

namespace {

namespace fs = std::filesystem;

const std::string kConfig =
    " --config " + std::string(INFINIPIPE_SOURCE_DIR) + "/examples/cpu-small.yaml";
const std::string kLengths =
    " --lengths " + std::string(INFINIPIPE_SOURCE_DIR) + "/examples/lengths-small.txt";

// One message, of the kind expected: no library text, no second line of CLI11's.
void expect_refused(const ShellResult& r, int exit_code, const std::string& says) {
  EXPECT_EQ(r.exit_code, exit_code) << r.output;
  for (const char* leak : {"internal error", "[json.exception", "Run with --help",
                           "Could not convert", "bad_alloc"})
    EXPECT_EQ(r.output.find(leak), std::string::npos) << leak << " in: " << r.output;
  EXPECT_NE(r.output.find(says), std::string::npos) << r.output;
}

ShellResult cli(const std::string& args) {
  // A hang would show as exit code 124, not as a stuck test.
  return infinipipe::testing::shell_run(
      fmt::format("timeout 60 {} {} 2>&1", INFINIPIPE_BINARY, args));
}

class HostileRound2 : public CorpusCliTest {
 protected:
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name), std::ios::binary) << text;
    return path(name);
  }
  std::string fifo() const {
    const std::string p = path("fifo");
    EXPECT_EQ(::mkfifo(p.c_str(), 0600), 0);
    return p;
  }
  // A one-iteration traced run with a checkpoint: dir_/run and dir_/ck.
  void train_traced() {
    const ShellResult r = cli(fmt::format("train {} --trace {} --save {}", corpus_train_args(1),
                                          path("run"), path("ck")));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
};

// --- 1. reads without a bound ---------------------------------------------------------------

TEST_F(HostileRound2, FifosAndDevicesAreRefusedNotWaitedOn) {
  const std::string f = fifo();
  const std::string jsonl = write("in.jsonl", "{\"text\": \"hello\"}\n");
  for (const std::string& special : {f, std::string("/dev/zero")}) {
    SCOPED_TRACE(special);
    const std::string kind = special == f ? "a FIFO" : "a character device";
    expect_refused(cli("config check " + special), 2, special + " is " + kind);
    expect_refused(cli("plan --config " + special), 2, "--config " + special + " is " + kind);
    expect_refused(cli("generate --load " + path("none") + " --prompt-file " + special), 2,
                   "--prompt-file " + special + " is " + kind);
    expect_refused(cli("data prepare --input " + special + " --output " + path("out")), 1,
                   "--input " + special + " is " + kind);
    expect_refused(cli("data prepare --input " + jsonl + " --output " + path("out") +
                       " --tokenizer-type SentencePieceTokenizer --tokenizer-model " + special),
                   2, "--tokenizer-model " + special + " is " + kind);
    expect_refused(cli("plan --num-layers 2" + kLengths + " --out " + path("p.json") +
                       " --calibration " + special),
                   1, kind);
  }
  EXPECT_FALSE(fs::exists(path("out.bin")));
}

TEST_F(HostileRound2, FilesPastTheirBoundAreRefusedBeforeTheyAreRead) {
  const std::string big = path("big.yaml");
  std::ofstream(big) << "num-layers: 2\n";
  fs::resize_file(big, (16ll << 20) + 1);  // sparse: nothing of it is read
  expect_refused(cli("config check " + big), 2, "more than the 16 MiB a YAML configuration file");
  const std::string prompt = path("prompt.txt");
  std::ofstream(prompt) << "x";
  fs::resize_file(prompt, (64ll << 20) + 1);
  expect_refused(cli("generate --load " + path("none") + " --prompt-file " + prompt), 2,
                 "more than the 64 MiB a prompt file may be");
}

// --- 2. report does not follow links inside RUN_DIR ------------------------------------------

TEST_F(HostileRound2, ReportRefusesLinksInsideTheRunDirectory) {
  train_traced();
  const std::string secret = write("secret.txt", "SECRET-BYTES\n");
  const fs::path run = dir_ / "run";
  ASSERT_EQ(cli("report " + run.string() + " --no-html").exit_code, 0);
  ASSERT_TRUE(fs::exists(run / "config.yaml"));
  ASSERT_TRUE(fs::exists(run / "trace-rank00000.json"));
  for (const std::string name : {"metrics.jsonl", "config.yaml", "trace-rank00000.json"}) {
    SCOPED_TRACE(name);
    if (!fs::exists(run / name)) continue;
    fs::rename(run / name, dir_ / "kept");
    fs::create_symlink(secret, run / name);
    const ShellResult r = cli("report " + run.string() + " --no-html");
    expect_refused(r, 1, (run / name).string() + " is a symbolic link");
    EXPECT_EQ(r.output.find("SECRET"), std::string::npos) << r.output;
    fs::remove(run / name);
    fs::rename(dir_ / "kept", run / name);
  }
  fs::rename(run / "plans", dir_ / "plans");
  fs::create_directory_symlink(dir_ / "plans", run / "plans");
  expect_refused(cli("report " + run.string() + " --no-html"), 1,
                 (run / "plans").string() + " is a symbolic link");
}

// --- 3. outputs that land elsewhere ----------------------------------------------------------

TEST_F(HostileRound2, DataPrepareOutputsNameAFileInAnExistingFolderNeverTheInput) {
  const std::string jsonl = write("in.jsonl", "{\"text\": \"hello\", \"a/b\": \"x\"}\n");
  const std::string prep = "data prepare --input " + jsonl;
  fs::create_directory(dir_ / "d");
  expect_refused(cli(prep + " --output " + path("d") + "/"), 2, "names a folder, not a file");
  expect_refused(cli(prep + " --output /"), 2, "names a folder, not a file");
  expect_refused(cli(prep + " --output " + path("missing/x")), 2, "does not exist");
  EXPECT_TRUE(fs::is_empty(dir_ / "d"));
  EXPECT_FALSE(fs::exists("/.bin"));
  for (const std::string key : {"a/b", "..", "../../x"}) {
    expect_refused(cli(prep + " --json-keys " + key + " --output-prefix " + path("p")), 2,
                   "cannot hold '/' or '..'");
  }
  // --input X.bin --output X would replace the input with the output.
  const std::string as_bin = write("x.bin", "{\"text\": \"hello\"}\n");
  expect_refused(cli("data prepare --input " + as_bin + " --output " + path("x")), 2,
                 "is the input");
  std::ifstream in(as_bin);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "{\"text\": \"hello\"}\n");
  EXPECT_EQ(cli(prep + " --output " + path("d/ok")).exit_code, 0);
  // profile checks its output before minutes of timing, not after.
  expect_refused(cli("profile --out " + path("d") + "/"), 2, "names a folder, not a file");
}

TEST_F(HostileRound2, ReportOutputsAreCheckedFirstAndLeaveNoTemporary) {
  train_traced();
  const std::string run = path("run");
  fs::create_directory(dir_ / "html");
  expect_refused(cli("report " + run + " --html " + path("html")), 2, "is an existing folder");
  EXPECT_FALSE(fs::exists(path("html.tmp")));
  expect_refused(cli("report " + run + " --html " + path("nowhere/r.html")), 2, "does not exist");
  expect_refused(cli("report " + run + " --html " + run + "/trace-rank00000.json"), 2,
                 "is the input");
  expect_refused(cli("report " + run + " --no-html --json " + run + "/config.yaml"), 2,
                 "is the input");
  EXPECT_EQ(cli("report " + run + " --no-html").exit_code, 0);
  for (const fs::path& d : {dir_, dir_ / "run", dir_ / "html"})
    for (const auto& e : fs::directory_iterator(d))
      EXPECT_NE(e.path().extension(), ".tmp") << "left behind: " << e.path();
}

// --- 4. extreme integers ---------------------------------------------------------------------

TEST_F(HostileRound2, ExtremeIntegersAreRefusedWithTheirRange) {
  const std::string out = kLengths + " --out " + path("p.json");
  expect_refused(cli("plan --global-batch-size 4611686018427387904" + out), 2,
                 "--global-batch-size must be an integer in [1, 1048576]");
  expect_refused(cli("plan --train-iters 4611686018427387904" + out), 2,
                 "--train-iters must be an integer in [0, 1099511627776]");
  expect_refused(cli("plan --memory-budget 1e30GiB" + out), 2,
                 "--memory-budget '1e30GiB' must be a size in [0, 1 EiB]");
  expect_refused(cli("plan --seq-length 99999999999999999999999" + out), 2,
                 "--seq-length must be an integer in [1, 4294967296]");
  expect_refused(cli("config check " + write("i.yaml", "train-iters: -5\n")), 2,
                 "train-iters must be an integer in [0, 1099511627776], got -5");
  // The subcommands' own flags: a range too, in one line naming the command's --help.
  expect_refused(cli("data prepare --input x --output y --workers 99999999999999999999"), 2,
                 "--workers: expects an integer in");
  expect_refused(cli("generate --load x --prompt a --max-new-tokens 1e99"), 2,
                 "see `infinipipe generate --help`");
  EXPECT_FALSE(fs::exists(path("p.json")));
}

// --- 5. accepted silently --------------------------------------------------------------------

TEST_F(HostileRound2, YamlDuplicateKeysAndSecondDocumentsAreRefused) {
  expect_refused(cli("config check " + write("d.yaml", "num-layers: 2\nseq-length: 64\n"
                                                       "num-layers: 4\n")),
                 2, "the option 'num-layers' is given twice, as 'num-layers' (line 1) and "
                    "'num-layers' (line 3)");
  expect_refused(cli("config check " + write("a.yaml", "pp: 2\npipeline_model_parallel_size: 2\n")),
                 2, "'pipeline-model-parallel-size' is given twice");
  expect_refused(cli("config check " + write("two.yaml", "num-layers: 2\n---\nnum-layers: 4\n")),
                 2, "holds more than one YAML document (or text after its map), from line 2");
  // A stray flow token: yaml-cpp's Load read an empty map and dropped the rest ("ok"), its
  // LoadAll looped for ever (fuzz_config_yaml).
  expect_refused(cli("config check " + write("stray.yaml", "# c\n,\nnum-layers: 2\n")), 2,
                 "from line 2");
  EXPECT_EQ(cli("config check " + write("ok.yaml", "---\nnum-layers: 2\n")).exit_code, 0);
}

// Appends a tensor of one F32 zero to a safetensors file.
void safetensors_add(const fs::path& file, const std::string& name) {
  std::ifstream in(file, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), {});
  uint64_t n = 0;
  std::memcpy(&n, all.data(), 8);
  nlohmann::json header = nlohmann::json::parse(all.substr(8, n));
  const std::string data = all.substr(8 + n);
  header[name] = {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {data.size(), data.size() + 4}}};
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t m = text.size();
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(&m), 8);
  out << text << data << std::string(4, '\0');
}

TEST_F(HostileRound2, HuggingFaceTensorsTheConfigDoesNotDescribeAreRefusedOrIgnoredOnRequest) {
  ShellResult r = cli(fmt::format("train {} --save {}", corpus_train_args(1), path("ck")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = cli(fmt::format("checkpoint export {} {}", path("ck"), path("hf")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string start = fmt::format(
      "train --global-batch-size 4 --min-tail-slice 32 --train-iters 1 --data-path {} --load {}",
      path("corpus"), path("hf"));
  ASSERT_EQ(cli(start).exit_code, 0);
  safetensors_add(dir_ / "hf" / "model.safetensors", "model.layers.2.mlp.up_proj.weight");
  safetensors_add(dir_ / "hf" / "model.safetensors", "vision_tower.weight");
  r = cli(start);
  expect_refused(r, 2, "does not describe: model.layers.2.mlp.up_proj.weight, vision_tower.weight");
  EXPECT_NE(r.output.find("--ignore-unexpected-keys"), std::string::npos) << r.output;
  r = cli(start + " --ignore-unexpected-keys");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// --- 6. messages that point at the right thing -----------------------------------------------

TEST_F(HostileRound2, CheckpointVerifyNamesTheDamagedFile) {
  train_traced();
  const fs::path iter = dir_ / "ck" / "iter_0000001";
  ASSERT_EQ(cli("checkpoint verify " + path("ck")).exit_code, 0);
  const fs::path optim = iter / "optimizer.safetensors";
  fs::resize_file(optim, fs::file_size(optim) - 16);
  expect_refused(cli("checkpoint verify " + path("ck")), 1, optim.string());
  fs::remove_all(dir_ / "ck");
  fs::remove_all(dir_ / "run");
  train_traced();
  const fs::path state = iter / "state.json";
  std::ifstream in(state);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  in.close();
  std::ofstream(state, std::ios::trunc) << text.substr(0, text.size() / 2);
  const ShellResult r = cli("checkpoint verify " + path("ck"));
  expect_refused(r, 1, state.string());
  EXPECT_EQ(r.output.find("no complete checkpoint"), std::string::npos) << r.output;
  expect_refused(cli("checkpoint verify " + path("corpus.bin")), 2, "holds no iter_NNNNNNN");
}

TEST_F(HostileRound2, LibraryTextStaysOutOfMessages) {
  expect_refused(cli("simulate --plan " + write("p.json", "{\"a\": 1e400}") + kConfig), 1,
                 "is not valid JSON (number overflow");
  expect_refused(cli("simulate --plan " + write("q.json", "{\"a\": ") + kConfig), 1,
                 "is not valid JSON (parse error");
  expect_refused(cli("simulate --plan"), 2, "--plan");
}

}  // namespace
