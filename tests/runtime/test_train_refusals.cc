// What `infinipipe train` refuses because its engine does not run it: ZeRO-3 inside a stage is
// for `plan` and `simulate` only.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "runtime/train.h"

namespace infinipipe::runtime {
namespace {

TEST(TrainRefusals, ZeroStageThreeIsAPlanningOnlyOption) {
  Config cfg;
  cfg.parallel.zero_stage = 3;
  try {
    train_check_config(cfg, 1);
    FAIL() << "train accepted --zero-stage 3";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--zero-stage"), std::string::npos) << e.what();
  }
  cfg.parallel.zero_stage = 1;
  try {
    train_check_config(cfg, 1);
  } catch (const ConfigError& e) {  // other checks (a dataset) may refuse; not the ZeRO stage
    EXPECT_EQ(std::string(e.what()).find("--zero-stage"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace infinipipe::runtime
