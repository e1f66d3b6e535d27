// The executor: runs one rank's action list of a Plan through the StageEngines of the stages that
// rank holds. It is the only control flow of the runtime (docs/architecture.md: schedules are
// generators of plans), so every schedule the planner makes runs through it unchanged. Tensors
// between stages go through a StageLink: LocalStageLink keeps them in process (pp = 1, virtual
// stages, tests); the distributed runtime plugs in point-to-point sends and receives behind the
// same interface.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "model/engine.h"
#include "obs/step_stats.h"
#include "plan/plan.h"

namespace infinipipe::runtime {

// A wait the link measured (a point-to-point receive that was not there yet), on the steady
// clock; the executor moves it into StepStats::events as a "p2p_wait".
struct LinkWait {
  std::string name;
  std::chrono::steady_clock::time_point start, end;
};

// How activations (forward) and their gradients (backward) cross stage boundaries. Stages are
// global (virtual) stage indices; the chunk id is the plan's, so a receiver knows the shape
// (chunk tokens × hidden) from the plan alone.
class StageLink {
 public:
  virtual ~StageLink() = default;
  // Called once per rank before its first action: a link over MPI posts its receives here (every
  // size is known from the plan), so transfers overlap compute.
  virtual void begin(const plan::Plan& plan, int32_t rank) {
    (void)plan;
    (void)rank;
  }
  // Called after the rank's last action: completes outstanding sends.
  virtual void finish(int32_t rank) { (void)rank; }
  // Output of `chunk` on stage `from` for stage from + 1.
  virtual void send_activation(int32_t from, int32_t chunk, Tensor t) = 0;
  // Gradient of the input of `chunk` on stage `from`, for stage from - 1.
  virtual void send_grad(int32_t from, int32_t chunk, Tensor t) = 0;
  // True when recv_* would return without waiting.
  virtual bool has_activation(int32_t to, int32_t chunk) const = 0;
  virtual bool has_grad(int32_t to, int32_t chunk) const = 0;
  // The input activation of `chunk` on stage `to` / the gradient of its output.
  virtual Tensor recv_activation(int32_t to, int32_t chunk) = 0;
  virtual Tensor recv_grad(int32_t to, int32_t chunk) = 0;

  // The tracker the stages' buffers are charged to, if the link was told (traces record its
  // bytes after each action); null otherwise.
  const MemoryTracker* memory_tracker() const { return memory_tracker_; }
  void memory_tracker_set(const MemoryTracker* t) { memory_tracker_ = t; }
  // Waits measured since the last call.
  std::vector<LinkWait> waits_take() { return std::exchange(waits_, {}); }

 protected:
  void wait_record(std::string name, std::chrono::steady_clock::time_point start,
                   std::chrono::steady_clock::time_point end) {
    waits_.push_back({std::move(name), start, end});
  }

 private:
  const MemoryTracker* memory_tracker_ = nullptr;
  std::vector<LinkWait> waits_;
};

// In-process mailbox. A receive of a tensor nobody sent is an error, never a wait.
class LocalStageLink : public StageLink {
 public:
  void send_activation(int32_t from, int32_t chunk, Tensor t) override;
  void send_grad(int32_t from, int32_t chunk, Tensor t) override;
  bool has_activation(int32_t to, int32_t chunk) const override;
  bool has_grad(int32_t to, int32_t chunk) const override;
  Tensor recv_activation(int32_t to, int32_t chunk) override;
  Tensor recv_grad(int32_t to, int32_t chunk) override;
  size_t pending() const { return box_.size(); }

 private:
  using Key = std::tuple<int, int32_t, int32_t>;  // (0 act / 1 grad, receiving stage, chunk)
  std::map<Key, Tensor> box_;
};

// Tokens a batch of sequences predicts: Σ (n − 1). The loss is the sum of token losses over it.
int64_t batch_predicted_tokens(std::span<const int64_t> seq_lengths);

// The engine's view of a plan chunk: each slice's tokens, plus the label lookahead (the first
// token of the next slice) unless the slice ends its sequence. `sequences` holds every sequence
// of the plan, indexed like Plan::seq_lengths (lengths must agree).
ChunkInput executor_chunk_input(const plan::Chunk& chunk,
                                std::span<const std::vector<int32_t>> sequences);

// What an action has cost so far, from its start, inside its measured interval.
struct ActionSpent {
  double wall_s = 0;
  double cpu_s = -1;  // CPU seconds of the rank's thread (-1: its clock cannot be read)
};
// A test hook, empty in production: called after each action's compute, inside its measured
// interval, with the plan's rank that runs it. Tests make a rank slower with it
// (tests/common/slow_rank.h) to check that the cost model learns each rank's own speed.
using ActionHook = std::function<void(int32_t rank, const plan::Action& action, ActionSpent spent)>;

// Runs one rank's action list. `engines` is indexed by global stage (Plan::stages) and must hold
// an engine for every stage of this rank whose layers match the plan's; other entries may be null.
class RankExecutor {
 public:
  using Clock = std::chrono::steady_clock;
  // Told as a backward finishes a part of a stage: `part` is a stage-local layer index,
  // StageEngine::kBackwardPartEmbedding, or kGradPartHead (final norm and LM head, whose
  // gradients accumulate in forward: told just before the backward starts). `final` is true in
  // the rank's last backward of that stage: the part's parameter gradients will not change again
  // this step, so their data-parallel reduction may start (dist_step.h).
  using GradPartFn = std::function<void(int32_t stage, int64_t part, bool final)>;
  static constexpr int64_t kGradPartHead = -2;

  RankExecutor(const plan::Plan& plan, int32_t rank, std::span<StageEngine* const> engines,
               StageLink& link, std::span<const std::vector<int32_t>> sequences, double loss_scale,
               Clock::time_point t0 = Clock::now());

  void set_grad_part_done(GradPartFn fn) { grad_part_done_ = std::move(fn); }
  void set_action_hook(ActionHook fn) { action_hook_ = std::move(fn); }

  bool done() const { return next_ >= actions_.size(); }
  // The next action's input is there (always true for a first-stage forward and a last-stage
  // backward), so run_next() would not wait on the link.
  bool next_ready() const;
  const plan::Action& next_action() const { return actions_[next_]; }
  void run_next();
  void run_all();  // run_next() until done()
  const obs::StepStats& stats() const { return stats_; }

 private:
  const ChunkInput& chunk_input(int32_t chunk);
  void link_waits_collect();
  void chunk_input_release(int32_t chunk);
  void action_hook_call(const plan::Action& a, double start_s, double cpu0);

  const plan::Plan& plan_;
  int32_t rank_;
  std::span<const plan::Action> actions_;
  std::span<StageEngine* const> engines_;
  StageLink& link_;
  std::span<const std::vector<int32_t>> sequences_;
  double loss_scale_;
  Clock::time_point t0_;
  size_t next_ = 0;
  std::map<int32_t, ChunkInput> inputs_;     // built on a chunk's first forward on this rank
  std::map<int32_t, size_t> last_backward_;  // stage -> index of its last backward action here
  GradPartFn grad_part_done_;
  ActionHook action_hook_;
  obs::StepStats stats_;
};

// Every rank of the plan in this process, over a LocalStageLink: runs whichever rank's next action
// is ready, in rank order, until all lists are done. `engines` covers every stage. Returns one
// StepStats per rank. A plan that cannot progress is an Error naming each rank's waiting action.
// `tracker` (optional): the engines' tracker, whose bytes each ActionTiming records;
// `action_hook` (tests): every rank's executor's.
std::vector<obs::StepStats> execute_plan_local(const plan::Plan& plan,
                                               std::span<StageEngine* const> engines,
                                               std::span<const std::vector<int32_t>> sequences,
                                               double loss_scale,
                                               const MemoryTracker* tracker = nullptr,
                                               const ActionHook& action_hook = {});

}  // namespace infinipipe::runtime
