// TensorBoard event files: CRC-32C against published test vectors, TFRecord frames and Event
// protobufs decoded by an independent reader, and the scalars of metrics records.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/tfevents_read.h"
#include "core/error.h"
#include "obs/tensorboard.h"

namespace infinipipe::obs {
namespace {

namespace fs = std::filesystem;
namespace tfe = infinipipe::test_tfevents;

TEST(TensorBoard, Crc32cMatchesKnownVectors) {
  // RFC 3720 (iSCSI) B.4 and the "123456789" check value of CRC-32C.
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
  EXPECT_EQ(crc32c(""), 0u);
  // The reader's bitwise CRC agrees, so the file check below is independent of the table.
  EXPECT_EQ(tfe::crc32c_bitwise("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c_masked("123456789"), tfe::masked(0xE3069283u));
}

TEST(TensorBoard, ScalarsOfAMetricsRecordUseMegatronTags) {
  IterationMetrics m;
  m.iteration = 3;
  m.loss = 4.5;
  m.lr = 3e-4;
  m.grad_norm = 1.25;
  m.seconds = 0.5;
  m.tokens_per_s = 2048.0;
  m.schedule = "epp";
  const auto s = tensorboard_scalars(m);
  ASSERT_EQ(s.size(), 5u);  // no valid_loss: no validation scalar
  EXPECT_EQ(s[0], (std::pair<std::string, float>{"lm loss", 4.5f}));
  EXPECT_EQ(s[1].first, "learning-rate");
  EXPECT_EQ(s[3], (std::pair<std::string, float>{"iteration-time", 0.5f}));
  EXPECT_EQ(s[4], (std::pair<std::string, float>{"throughput", 2048.0f}));
  m.valid_loss = 4.75;
  EXPECT_EQ(tensorboard_scalars(m).back(),
            (std::pair<std::string, float>{"lm loss validation", 4.75f}));
}

TEST(TensorBoard, EventFileDecodesWithValidCrcs) {
  const fs::path dir = fs::path(::testing::TempDir()) / fmt::format("infinipipe_tb_{}", getpid());
  fs::remove_all(dir);
  std::string path;
  {
    TensorBoardWriter w(dir.string());
    path = w.path();
    w.scalars_add(1, {{"lm loss", 5.5f}, {"learning-rate", 1e-4f}});
    w.scalars_add(2, {{"lm loss", 5.25f}});
  }
  EXPECT_EQ(fs::path(path).filename().string().rfind("events.out.tfevents.", 0), 0u) << path;
  const std::vector<tfe::Event> events = tfe::events_read(path);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_GT(events[0].wall_time, 1.6e9);  // seconds since 1970, as TensorBoard expects
  EXPECT_EQ(events[1].step, 1);
  EXPECT_EQ(events[1].scalars.at("lm loss"), 5.5f);
  EXPECT_EQ(events[1].scalars.at("learning-rate"), 1e-4f);
  EXPECT_EQ(events[2].step, 2);
  EXPECT_EQ(events[2].scalars.size(), 1u);
  EXPECT_GE(events[2].wall_time, events[1].wall_time);
  fs::remove_all(dir);
}

TEST(TensorBoard, UnwritableDirectoryIsAConfigError) {
  EXPECT_THROW(TensorBoardWriter("/proc/no-such-dir/tb"), ConfigError);
}

}  // namespace
}  // namespace infinipipe::obs
