// TrainingBatches resumed from a checkpoint's data position (consumed samples and the outlier
// delay's saved documents, outlier_delay_state.h) continues with the batches the uninterrupted
// run draws: the trainer's way (batch_documents_draw over its own stream and delay), saved and
// restored as a checkpoint keeps them.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/data_test_util.h"
#include "common/synth_corpus.h"
#include "core/error.h"
#include "data/outlier_delay_state.h"
#include "data/training_batches.h"

namespace infinipipe::data {
namespace {

constexpr int64_t kResumeBatch = 8;
constexpr int64_t kResumeDp = 2;
constexpr int64_t kSeq = 8192;  // long documents, whose quadratic resume_cost makes them outliers
constexpr uint64_t kSeed = 3;

double resume_cost(int64_t length) {
  return static_cast<double>(length) * static_cast<double>(length);
}

TEST(TrainingBatchesResume, ContinuesTheTrainersDelayedOrderFromItsSavedState) {
  test::ScratchDir dir;
  testing::synth_corpus_write_small(dir.file("c"), 300, kSeq);
  const DataFlags flags{dir.file("c"), "90,5,5", "", "", ""};
  // The trainer's draw: its stream and delay, until the delay holds documents back.
  const RunDatasets sets = RunDatasets::open(flags);
  DocumentStream stream = sets.stream(DataSplit::train, kResumeBatch, kSeed);
  OutlierDelay delay(kResumeBatch, kResumeDp, resume_cost);
  const auto length = [&sets](const DocumentRef& r) {
    return std::min(sets.document_length(DataSplit::train, r), kSeq);
  };
  int drawn = 0;
  while (delay.queue().empty() && drawn < 50) {
    batch_documents_draw(stream, &delay, length);
    ++drawn;
  }
  ASSERT_FALSE(delay.queue().empty()) << "the corpus is meant to have outliers to hold back";
  // Saved as a checkpoint keeps it (JSON text), then restored.
  const nlohmann::json state = nlohmann::json::parse(outlier_delay_state(delay).dump());
  TrainingBatches resumed(flags, kResumeBatch, kSeed, kSeq);
  resumed.delay_outliers(kResumeDp, resume_cost);
  resumed.resume(stream.consumed_samples(), state);
  EXPECT_EQ(resumed.waiting(), static_cast<int64_t>(delay.queue().size()));
  for (int i = 0; i < 8; ++i) {
    std::vector<int64_t> want;
    for (const DelayedDocument& d : batch_documents_draw(stream, &delay, length).documents)
      if (d.length > 0) want.push_back(d.length);
    EXPECT_EQ(resumed.next().lengths, want) << "batch " << drawn + i;
  }

  // Without the delay the held documents would never be trained: refused.
  TrainingBatches plain(flags, kResumeBatch, kSeed, kSeq);
  EXPECT_THROW(plain.resume(stream.consumed_samples(), state), ConfigError);
}

// Without the delay, resuming is starting the order after the consumed samples.
TEST(TrainingBatchesResume, WithoutTheDelayResumeSkipsTheConsumedBatches) {
  test::ScratchDir dir;
  testing::synth_corpus_write_small(dir.file("c"), 100, kSeq);
  const DataFlags flags{dir.file("c"), "100,0,0", "", "", ""};
  TrainingBatches whole(flags, kResumeBatch, kSeed, kSeq);
  for (int i = 0; i < 3; ++i) whole.next();
  TrainingBatches resumed(flags, kResumeBatch, kSeed, kSeq);
  resumed.resume(3 * kResumeBatch, nlohmann::json());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(resumed.next().lengths, whole.next().lengths);
}

}  // namespace
}  // namespace infinipipe::data
