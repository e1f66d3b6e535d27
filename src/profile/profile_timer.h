// The profiler's stopwatch (internal to src/profile): a chunk's forward and backward timed
// through a StageEngine, with and without recompute, each timing's fastest undisturbed run.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/config.h"
#include "cost/cost_model.h"
#include "model/engine.h"
#include "profile/profile.h"

namespace infinipipe::profile {

using ProfileClock = std::chrono::steady_clock;

inline double seconds_since(ProfileClock::time_point t0) {
  return std::chrono::duration<double>(ProfileClock::now() - t0).count();
}

// Runs chunks on one engine; the prefixes that give slices their context run untimed.
class ChunkTimer {
 public:
  ChunkTimer(const ModelConfig& m, StageRange range)
      : m_(m), range_(range), engine_(std::make_unique<StageEngine>(m, range, 1234, tracker_)) {}

  struct Timing {
    double wall = 0;
    double cpu = 0;     // of the calling thread (-1: unreadable)
    bool whole = true;  // not descheduled meanwhile
  };
  struct Times {
    Timing forward, backward;
  };

  // Runs the untimed prefixes that give the chunk's slices their context; they stay live while
  // the chunk runs any number of times (a final slice may follow its prefix again once its own
  // backward ran), and finish() runs their backwards.
  void prepare(const std::vector<cost::SliceShape>& chunk);
  // Forward then backward of the prepared chunk with `recompute` layers recomputed.
  Times run(int64_t recompute);
  void finish();

 private:
  template <typename F>
  static Timing timed(F&& work);
  Tensor input(int64_t n, uint32_t seed);
  Tensor output_grad(int64_t n, uint32_t seed);

  ModelConfig m_;
  StageRange range_;
  MemoryTracker tracker_;
  std::unique_ptr<StageEngine> engine_;
  int64_t next_seq_ = 0;
  ChunkInput target_;
  std::vector<std::pair<int32_t, int64_t>> prefixes_;  // (chunk id, tokens)
};

// Fastest forward, backward and recompute of a chunk over the repeats, after a warm-up that lets
// oneDNN build its kernels for these shapes. The minimum, not the median: on a shared machine
// other processes only ever add time (a descheduled OpenMP thread stalls a whole region). A
// descheduled run does not count towards the repeats: up to 4 x repeats + 10 runs are made to
// get `repeats` whole ones of each timing (docs/profiling.md).
ProfileSample time_chunk(ChunkTimer& timer, const std::vector<cost::SliceShape>& chunk,
                         int64_t layers, int64_t repeats);

// time_chunk, timed again (at most twice more) while its recompute, a difference of two
// backwards, is not positive; if it never is, the sample's recompute stays <= 0 and is not fitted.
ProfileSample time_chunk_checked(ChunkTimer& timer, const std::vector<cost::SliceShape>& chunk,
                                 int64_t layers, int64_t repeats);

}  // namespace infinipipe::profile
