// TensorBoard event files of a training run (`infinipipe train --tensorboard-dir DIR`, Megatron's
// flag): DIR/events.out.tfevents.<seconds>.<host>, one scalar per metric and iteration.
// The format is TensorFlow's: a TFRecord stream (length, masked CRC-32C of the length, payload,
// masked CRC-32C of the payload) of serialized `Event` protobufs. Only the few fields scalars need
// are encoded here (Event.wall_time, step, file_version, summary; Summary.Value.tag,
// simple_value), so no protobuf dependency is needed.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "obs/metrics.h"

namespace infinipipe::obs {

// CRC-32C (Castagnoli), as TFRecord frames use it, and the masking TFRecord applies to it.
uint32_t crc32c(std::string_view bytes);
uint32_t crc32c_masked(std::string_view bytes);

// One TFRecord: u64 length, masked crc of the length, the data, masked crc of the data.
std::string tfrecord_frame(std::string_view data);

// A serialized Event: the header event (`file_version` "brain.Event:2") when `scalars` is empty
// and `file_version` is set, else one Summary of simple_value scalars (tag, value) at `step`.
std::string tf_event_encode(double wall_time, int64_t step, const std::string& file_version,
                            const std::vector<std::pair<std::string, float>>& scalars);

// The scalars of one metrics record, under Megatron-LM's tags: "lm loss", "learning-rate",
// "grad-norm", "iteration-time" (s), "throughput" (tokens/s) and, where an evaluation ran,
// "lm loss validation".
std::vector<std::pair<std::string, float>> tensorboard_scalars(const IterationMetrics& m);

class TensorBoardWriter {
 public:
  // Creates DIR and a new event file in it (ConfigError when DIR cannot be written).
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // Appends the scalars of one step and flushes, so TensorBoard sees them while the run goes on.
  void scalars_add(int64_t step, const std::vector<std::pair<std::string, float>>& scalars);
  const std::string& path() const { return path_; }

 private:
  void record_write(const std::string& event);

  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace infinipipe::obs
