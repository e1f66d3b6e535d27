// The `data` subcommands as a user runs them: synth -> stats, and errors with exit codes.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "cli/run_cli.h"
#include "common/test_temp.h"

namespace {

std::string temp_dir() {
  return infinipipe::test::test_temp_dir_make("data_cli");
}

TEST(DataCli, SynthThenStats) {
  std::string dir = temp_dir();
  ShellResult s = run_cli(
      "data synth --distribution github --num-documents 200 --seq-length 4096 "
      "--seed 7 --output " +
      dir + "/corpus");
  ASSERT_EQ(s.exit_code, 0) << s.output;
  ShellResult st = run_cli("data stats --data-path " + dir + "/corpus --seq-length 4096");
  ASSERT_EQ(st.exit_code, 0) << st.output;
  EXPECT_NE(st.output.find("p50"), std::string::npos) << st.output;
  EXPECT_NE(st.output.find("2K-4K"), std::string::npos) << st.output;
  std::system(("rm -rf " + dir).c_str());
}

TEST(DataCli, StatsWithoutSourceIsUsageError) {
  ShellResult r = run_cli("data stats --seq-length 4096");
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

TEST(DataCli, PrepareNamesTheBadLine) {
  std::string dir = temp_dir();
  std::ofstream(dir + "/in.jsonl") << "{\"text\": \"hello\"}\n{\"text\": oops}\n";
  ShellResult r = run_cli("data prepare --input " + dir + "/in.jsonl --output " + dir + "/out");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("in.jsonl:2"), std::string::npos) << r.output;
  std::ifstream left(dir + "/out.bin");
  EXPECT_FALSE(left.good()) << "a failed prepare must not leave output behind";
  std::system(("rm -rf " + dir).c_str());
}

TEST(DataCli, PrepareTokenizerFlagsAreChecked) {
  std::string dir = temp_dir();
  std::ofstream(dir + "/in.jsonl") << "{\"text\": \"hello\", \"title\": \"hi\"}\n";
  ShellResult r = run_cli("data prepare --input " + dir + "/in.jsonl --output " + dir +
                          "/out --tokenizer-type Llama2Tokenizer");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--tokenizer-model"), std::string::npos) << r.output;
  r = run_cli("data prepare --input " + dir + "/in.jsonl --output-prefix " + dir +
              "/m --json-keys text title --workers 2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::ifstream(dir + "/m_text_document.idx").good()) << r.output;
  EXPECT_TRUE(std::ifstream(dir + "/m_title_document.bin").good()) << r.output;
  std::system(("rm -rf " + dir).c_str());
}

// Not on a terminal, progress is a line at every quarter of the input read, each with its rate
// and ETA, the last with the time taken.
TEST(DataCli, PrepareShowsRateAndEta) {
  std::string dir = temp_dir();
  {
    std::ofstream in(dir + "/in.jsonl");
    for (int i = 0; i < 2000; ++i) in << "{\"text\": \"document " << i << " of the corpus\"}\n";
  }
  ShellResult r = run_cli("data prepare --input " + dir + "/in.jsonl --output " + dir + "/out");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("MiB/s, ETA "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("prepare: 2000 documents, 0.1 of 0.1 MiB read (100%), "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(" MiB/s, in "), std::string::npos) << r.output;
  std::system(("rm -rf " + dir).c_str());
}

TEST(DataCli, MissingDatasetIsClear) {
  ShellResult r = run_cli("data stats --data-path /nonexistent/corpus --seq-length 4096");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("/nonexistent/corpus"), std::string::npos) << r.output;
}

}  // namespace
