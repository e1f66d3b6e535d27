// `infinipipe profile`: times the engine's real kernels for a model on this machine and fits the
// cost model's coefficients to them; the memory coefficients come from the engine's allocator.
// The result is a calibration file that plan, simulate and train read (--calibration).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "cost/calibration.h"
#include "cost/cost_model.h"
#include "cost/fit.h"

namespace infinipipe::profile {

// What to time: one slice per (len, context) pair, packed chunks of `count` sequences of `len`
// tokens, and the embedding / LM head at `edge_lens` tokens.
struct ProfileGrid {
  std::vector<int64_t> lens;
  std::vector<int64_t> contexts;
  std::vector<std::pair<int64_t, int64_t>> packed;  // (count, len)
  std::vector<int64_t> two_layer_lens;  // chunks also timed on 2 layers (tells β1 from γ)
  std::vector<int64_t> edge_lens;       // embedding and LM-head timings
  int64_t threads = 0;        // OpenMP threads while timing; 0 = as configured (OMP_NUM_THREADS)
  int64_t repeats = 3;        // timed runs per point (fastest kept), after a warm-up
  int64_t sgemm_size = 1024;  // n of the n x n x n fp32 sgemm whose rate is measured
};
// The default grid (about a minute or two for examples/cpu-small.yaml) or a quick one (seconds).
ProfileGrid profile_grid_default(bool quick);

// For a calibration's metadata: "host (CPU model, N CPUs online)" and the time now, ISO 8601 UTC.
std::string machine_name();
std::string utc_now();

// One measured chunk on a middle stage of `num_layers` layers.
struct ProfileSample {
  std::vector<cost::SliceShape> chunk;
  int64_t num_layers = 1;
  double forward_s = 0;
  double backward_s = 0;   // no recompute
  double recompute_s = 0;  // backward with every layer recomputed, minus backward_s
  bool held_out = false;   // not used in the fit
  // Of its three timings, those descheduled in every run on several threads.
  int64_t interrupted = 0;
};

// FLOP/s of the fastest of `repeats` fp32 sgemms n x n x n (oneDNN, on the OpenMP threads set),
// after a warm-up: the real dense-matmul rate the `cpu` preset's peak only estimates.
double profile_sgemm_flops(int64_t n, int64_t repeats);

// Relative prediction errors |pred − measured| / measured over the held-out samples.
struct ProfileError {
  double median = 0;
  double max = 0;
  int64_t count = 0;
};

struct ProfileReport {
  cost::Calibration calibration;
  std::vector<ProfileSample> samples;
  cost::LayerTimeFit fit;
  ProfileError heldout_forward, heldout_backward, heldout_recompute;
  bool links_measured = false;
  std::string link_note;  // what happened to the link coefficients
  // Timings (three per chunk, samples and edges) whose every run was descheduled for another
  // process while the kernels ran on several threads: their time includes other processes'
  // time slices. (On one thread such a timing takes the thread's CPU time instead.)
  int64_t interrupted_timings = 0, timings = 0;
  double seconds = 0;  // wall time of the whole profile
  int threads = 0;     // OpenMP threads the kernels were timed with
  // What the fit left out or kept from the preset, one sentence each (a difference of timings
  // that stayed within the timer's noise), for the command's output and the calibration's notes.
  std::vector<std::string> notes;
};

using ProfileLog = std::function<void(const std::string&)>;

// The grid's timing points (a chunk timed on the middle stage; an edge length times three
// stages), each weighed by its predicted time under `prior`, so the progress of a profile is
// "k of N" with an ETA that knows the long chunks come last.
class ProfileProgress {
 public:
  ProfileProgress(const ModelConfig& m, const ProfileGrid& grid, const cost::CostModel& prior);
  int64_t total() const { return total_; }
  // "[ 7/31, ETA 1m05s]" after one more point of predicted time `weight` (seconds under prior).
  std::string step(double weight);
  // A point's weight: its chunk's predicted forward on `layers` layers.
  double weight(const std::vector<cost::SliceShape>& chunk, int64_t layers) const;

 private:
  cost::CostModel prior_;
  int64_t total_ = 0, done_ = 0;
  double total_weight_ = 0, done_weight_ = 0;
  std::chrono::steady_clock::time_point start_;
};

// A difference of timings that must be positive (an edge stage's extra time, recompute's): each
// call of `measure` times it afresh, at most `tries` times while it is not > 0. nullopt when it
// never is: the difference is within the timer's noise and is not fitted.
std::optional<double> positive_difference(const std::function<double()>& measure, int tries);

// Times, fits and fills a calibration for cfg.model (fp32 CPU engine, ulysses degree 1). The
// device entries (memory, links, sources) start from cfg.cluster's preset. Throws ConfigError
// when the grid is empty or reaches beyond what the model can run.
ProfileReport profile_run(const Config& cfg, const ProfileGrid& grid, const ProfileLog& log);

// The memory coefficients the engine really allocates (StageEngine::stash_breakdown, attention
// workspace, optimizer state); every other field of `base` is kept.
cost::Coefficients profile_memory_coefficients(const ModelConfig& model, Optimizer optimizer,
                                               cost::Coefficients base);

// The cost model of the plans this engine executes: cfg's (preset or calibration) with the memory
// terms above, so a predicted peak is what the engine allocates; without a calibration the LM
// head's gradient is charged to forward, where the engine's fused loss computes it. (A preset's
// generic terms are a GPU framework's; a calibration's are those of its own model shape only.)
cost::CostModel engine_cost_model(const Config& cfg);
// What plan, simulate and cost use: engine_cost_model on the cpu device (plans this machine
// runs), the configured model as it is for GPU devices.
cost::CostModel planning_cost_model(const Config& cfg);

ProfileError profile_relative_error(const std::vector<double>& predicted,
                                    const std::vector<double>& measured);

}  // namespace infinipipe::profile
