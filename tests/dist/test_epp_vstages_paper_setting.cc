// One of the InfiniPipe paper's settings (examples/llama7b-48k.yaml: Llama 7B, 32 A800s, pp 4,
// CommonCrawl-like synthetic lengths, the first global batch), simulated as a user runs it:
// EPP allowed up to 8 virtual stages is at least as fast as interleaved 1F1B tuned over its own
// vpp, and gets there on virtual stages (EPP on one stage per rank is slower than interleaved on
// this batch). Runs the binary (no mpirun); a second or two.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "common/build_paths.h"
#include "common/shell_run.h"

namespace {

struct Row {
  double step = -1;
  std::string setting;
};

// The step time and setting of `schedule`'s row in a `simulate --compare` table.
Row row_of(const std::string& table, const std::string& schedule) {
  const std::regex re("\\| " + schedule + " \\| ([0-9.]+) s \\|[^\\n]*\\| ([^|\\n]*) \\|\\n");
  std::smatch m;
  Row r;
  if (std::regex_search(table, m, re)) {
    r.step = std::stod(m[1]);
    r.setting = m[2];
  }
  return r;
}

TEST(EppVstagesPaperSetting, Llama7b48kEppWithVppAtLeastAsFastAsInterleaved) {
  const std::string cmd = std::string(INFINIPIPE_BINARY) + " simulate --compare --config " +
                          INFINIPIPE_SOURCE_DIR +
                          "/examples/llama7b-48k.yaml --distribution commoncrawl --iteration 0";
  const auto flat = infinipipe::testing::shell_run(cmd);
  ASSERT_EQ(flat.exit_code, 0) << flat.output;
  const auto allowed = infinipipe::testing::shell_run(cmd + " --vpp 8");
  ASSERT_EQ(allowed.exit_code, 0) << allowed.output;
  const Row epp1 = row_of(flat.output, "epp"), inter = row_of(flat.output, "interleaved");
  const Row epp = row_of(allowed.output, "epp");
  ASSERT_GT(epp1.step, 0) << flat.output;
  ASSERT_GT(inter.step, 0) << flat.output;
  ASSERT_GT(epp.step, 0) << allowed.output;
  EXPECT_NE(inter.setting.find("vpp="), std::string::npos) << inter.setting;
  EXPECT_NE(epp.setting.find("vpp="), std::string::npos) << "EPP chose " << epp.setting;
  EXPECT_LE(epp.step, inter.step) << "EPP " << epp.setting << " against interleaved "
                                  << inter.setting;
  EXPECT_LE(epp.step, epp1.step) << "EPP " << epp.setting << " against " << epp1.setting;
}

}  // namespace
