#include "runtime/executor.h"

#include <string>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "obs/cpu_time.h"
#include "runtime/seconds_since.h"

namespace infinipipe::runtime {

namespace {

enum : int { kAct = 0, kGrad = 1 };

// CPU seconds since `cpu0` (obs::thread_cpu_seconds), -1 when the clock cannot be read.
double cpu_interval(double cpu0) {
  const double now = obs::thread_cpu_seconds();
  return cpu0 < 0 || now < 0 ? -1.0 : now - cpu0;
}

std::string action_describe(const plan::Action& a) {
  return fmt::format("{} of chunk {} on stage {}", plan::action_kind_name(a.kind), a.chunk,
                     a.stage);
}

}  // namespace

void LocalStageLink::send_activation(int32_t from, int32_t chunk, Tensor t) {
  box_[{kAct, from + 1, chunk}] = std::move(t);
}

void LocalStageLink::send_grad(int32_t from, int32_t chunk, Tensor t) {
  box_[{kGrad, from - 1, chunk}] = std::move(t);
}

bool LocalStageLink::has_activation(int32_t to, int32_t chunk) const {
  return box_.count({kAct, to, chunk}) > 0;
}

bool LocalStageLink::has_grad(int32_t to, int32_t chunk) const {
  return box_.count({kGrad, to, chunk}) > 0;
}

Tensor LocalStageLink::recv_activation(int32_t to, int32_t chunk) {
  auto it = box_.find({kAct, to, chunk});
  if (it == box_.end()) {
    fail(
        "executor: stage {} needs the activation of chunk {}, which stage {} never sent; the "
        "plan's action order is broken (validate the plan)",
        to, chunk, to - 1);
  }
  Tensor t = std::move(it->second);
  box_.erase(it);
  return t;
}

Tensor LocalStageLink::recv_grad(int32_t to, int32_t chunk) {
  auto it = box_.find({kGrad, to, chunk});
  if (it == box_.end()) {
    fail(
        "executor: stage {} needs the output gradient of chunk {}, which stage {} never sent; "
        "the plan's action order is broken (validate the plan)",
        to, chunk, to + 1);
  }
  Tensor t = std::move(it->second);
  box_.erase(it);
  return t;
}

int64_t batch_predicted_tokens(std::span<const int64_t> seq_lengths) {
  int64_t n = 0;
  for (int64_t len : seq_lengths) n += len > 0 ? len - 1 : 0;
  return n;
}

ChunkInput executor_chunk_input(const plan::Chunk& chunk,
                                std::span<const std::vector<int32_t>> sequences) {
  ChunkInput in;
  in.chunk_id = chunk.id;
  for (const plan::Slice& s : chunk.slices) {
    if (s.seq < 0 || static_cast<size_t>(s.seq) >= sequences.size()) {
      fail("executor: chunk {} names sequence {}, but the batch has {} sequences", chunk.id, s.seq,
           sequences.size());
    }
    const std::vector<int32_t>& seq = sequences[static_cast<size_t>(s.seq)];
    const int64_t n = static_cast<int64_t>(seq.size());
    if (n != s.seq_len || s.offset < 0 || s.len <= 0 || s.end() > n) {
      fail(
          "executor: chunk {} slice [{}, {}) of sequence {} (planned length {}) does not fit the "
          "sequence's {} tokens",
          chunk.id, s.offset, s.end(), s.seq, s.seq_len, n);
    }
    SliceInput si;
    si.seq_id = s.seq;
    si.offset = s.offset;
    si.len = s.len;
    const int64_t end = s.end() < n ? s.end() + 1 : n;  // label lookahead of a non-final slice
    si.tokens.assign(seq.begin() + s.offset, seq.begin() + end);
    in.slices.push_back(std::move(si));
  }
  return in;
}

RankExecutor::RankExecutor(const plan::Plan& plan, int32_t rank,
                           std::span<StageEngine* const> engines, StageLink& link,
                           std::span<const std::vector<int32_t>> sequences, double loss_scale,
                           Clock::time_point t0)
    : plan_(plan),
      rank_(rank),
      engines_(engines),
      link_(link),
      sequences_(sequences),
      loss_scale_(loss_scale),
      t0_(t0) {
  if (rank < 0 || static_cast<size_t>(rank) >= plan.actions.size()) {
    fail("executor: rank {} has no action list (the plan has {} ranks)", rank, plan.actions.size());
  }
  if (sequences.size() != plan.seq_lengths.size()) {
    fail("executor: the plan has {} sequences, the batch {}", plan.seq_lengths.size(),
         sequences.size());
  }
  actions_ = plan.actions[static_cast<size_t>(rank)];
  // Every stage this rank runs needs an engine holding exactly the plan's layers.
  for (const plan::Action& a : actions_) {
    if (a.stage < 0 || static_cast<size_t>(a.stage) >= plan.stages.size() ||
        static_cast<size_t>(a.stage) >= engines.size() || engines[a.stage] == nullptr) {
      fail("executor: rank {} has no engine for stage {} ({})", rank, a.stage, action_describe(a));
    }
    if (a.chunk < 0 || static_cast<size_t>(a.chunk) >= plan.chunks.size()) {
      fail("executor: {} names a chunk the plan does not have", action_describe(a));
    }
    const plan::StageSpec& st = plan.stages[static_cast<size_t>(a.stage)];
    const StageRange& r = engines[a.stage]->range();
    if (r.first_layer != st.first_layer || r.num_layers != st.num_layers ||
        r.has_embedding != st.has_embedding || r.has_lm_head != st.has_lm_head) {
      fail(
          "executor: stage {} of the plan holds layers [{}, {}), its engine [{}, {}); the plan's "
          "stage layout must match the model's",
          a.stage, st.first_layer, st.first_layer + st.num_layers, r.first_layer,
          r.first_layer + r.num_layers);
    }
  }
  for (size_t i = 0; i < actions_.size(); ++i) {
    if (actions_[i].kind == plan::ActionKind::backward) last_backward_[actions_[i].stage] = i;
  }
  stats_.timings.reserve(actions_.size());
  stats_.t0 = t0_;
  link_.begin(plan, rank);
}

const ChunkInput& RankExecutor::chunk_input(int32_t chunk) {
  auto it = inputs_.find(chunk);
  if (it == inputs_.end()) {
    it = inputs_.emplace(chunk, executor_chunk_input(plan_.chunks[chunk], sequences_)).first;
  }
  return it->second;
}

bool RankExecutor::next_ready() const {
  if (done()) return false;
  const plan::Action& a = actions_[next_];
  const plan::StageSpec& st = plan_.stages[static_cast<size_t>(a.stage)];
  if (a.kind == plan::ActionKind::forward) {
    return st.has_embedding || link_.has_activation(a.stage, a.chunk);
  }
  return st.has_lm_head || link_.has_grad(a.stage, a.chunk);
}

void RankExecutor::run_next() {
  if (done()) fail("executor: rank {} has no action left", rank_);
  const plan::Action& a = actions_[next_];
  const plan::StageSpec& st = plan_.stages[static_cast<size_t>(a.stage)];
  StageEngine& engine = *engines_[a.stage];
  obs::ActionTiming timing{a, 0, 0};
  if (const MemoryTracker* mt = link_.memory_tracker()) mt->window_start();
  if (a.kind == plan::ActionKind::forward) {
    Tensor input;
    if (!st.has_embedding) input = link_.recv_activation(a.stage, a.chunk);
    const ChunkInput& in = chunk_input(a.chunk);
    timing.start_s = seconds_since(t0_);
    const double cpu0 = obs::thread_cpu_seconds();
    // The received buffer becomes the chunk's stashed input (no copy, no second buffer). A
    // forward-only (evaluation) plan keeps nothing for a backward.
    ForwardOutput out = plan_.forward_only
                            ? engine.forward_eval(in, std::move(input))
                            : engine.forward(in, std::move(input), a.recompute_layers, loss_scale_);
    action_hook_call(a, timing.start_s, cpu0);
    timing.end_s = seconds_since(t0_);
    timing.cpu_s = cpu_interval(cpu0);
    if (st.has_lm_head) {
      stats_.loss_sum += out.loss_sum;
      stats_.predicted_tokens += out.predicted_tokens;
    } else {
      link_.send_activation(a.stage, a.chunk, std::move(out.activation));
    }
    if (plan_.forward_only) chunk_input_release(a.chunk);
  } else {
    Tensor grad;
    if (!st.has_lm_head) grad = link_.recv_grad(a.stage, a.chunk);
    timing.start_s = seconds_since(t0_);
    const double cpu0 = obs::thread_cpu_seconds();
    StageEngine::BackwardPartDone part_done;
    if (grad_part_done_) {
      const bool final = last_backward_.at(a.stage) == next_;
      if (st.has_lm_head) grad_part_done_(a.stage, kGradPartHead, final);
      part_done = [this, stage = a.stage, final](int64_t part) {
        grad_part_done_(stage, part, final);
      };
    }
    Tensor dx = engine.backward(a.chunk, std::move(grad), part_done);
    action_hook_call(a, timing.start_s, cpu0);
    timing.end_s = seconds_since(t0_);
    timing.cpu_s = cpu_interval(cpu0);
    if (!st.has_embedding) link_.send_grad(a.stage, a.chunk, std::move(dx));
    chunk_input_release(a.chunk);
  }
  if (const MemoryTracker* mt = link_.memory_tracker()) {
    timing.memory_bytes = mt->current_total();
    timing.peak_bytes = mt->window_peak();
  }
  stats_.timings.push_back(timing);
  ++next_;
  if (done()) link_.finish(rank_);
  link_waits_collect();
}

void RankExecutor::action_hook_call(const plan::Action& a, double start_s, double cpu0) {
  if (action_hook_) action_hook_(rank_, a, {seconds_since(t0_) - start_s, cpu_interval(cpu0)});
}

// After the chunk's last action on this rank its tokens are no longer needed.
void RankExecutor::chunk_input_release(int32_t chunk) {
  for (size_t i = next_ + 1; i < actions_.size(); ++i) {
    if (actions_[i].chunk == chunk) return;
  }
  inputs_.erase(chunk);
}

void RankExecutor::link_waits_collect() {
  for (LinkWait& w : link_.waits_take()) {
    stats_.events.push_back({"p2p_wait", std::move(w.name),
                             std::chrono::duration<double>(w.start - t0_).count(),
                             std::chrono::duration<double>(w.end - t0_).count()});
  }
}

void RankExecutor::run_all() {
  while (!done()) run_next();
}

std::vector<obs::StepStats> execute_plan_local(const plan::Plan& plan,
                                               std::span<StageEngine* const> engines,
                                               std::span<const std::vector<int32_t>> sequences,
                                               double loss_scale, const MemoryTracker* tracker,
                                               const ActionHook& action_hook) {
  LocalStageLink link;
  link.memory_tracker_set(tracker);
  const auto t0 = RankExecutor::Clock::now();
  std::vector<RankExecutor> ranks;
  ranks.reserve(plan.actions.size());
  for (size_t r = 0; r < plan.actions.size(); ++r) {
    ranks.emplace_back(plan, static_cast<int32_t>(r), engines, link, sequences, loss_scale, t0);
    ranks.back().set_action_hook(action_hook);
  }
  for (;;) {
    bool progressed = false, all_done = true;
    for (RankExecutor& ex : ranks) {
      while (ex.next_ready()) {
        ex.run_next();
        progressed = true;
      }
      all_done = all_done && ex.done();
    }
    if (all_done) break;
    if (!progressed) {
      std::string waiting;
      for (size_t r = 0; r < ranks.size(); ++r) {
        if (ranks[r].done()) continue;
        waiting += fmt::format("{}rank {} waits in {}", waiting.empty() ? "" : "; ", r,
                               action_describe(ranks[r].next_action()));
      }
      fail("executor: the plan cannot progress ({}); it was not validated", waiting);
    }
  }
  if (link.pending() != 0) {
    fail("executor: {} tensors were sent but never received; the plan was not validated",
         link.pending());
  }
  std::vector<obs::StepStats> out;
  for (const RankExecutor& ex : ranks) out.push_back(ex.stats());
  return out;
}

}  // namespace infinipipe::runtime
