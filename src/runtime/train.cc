#include "runtime/train.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <filesystem>
#include <map>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "comm/mpi_allreduce.h"
#include "comm/mpi_comm.h"
#include "core/error.h"
#include "obs/profile.h"
#include "obs/trace.h"
#include "plan/plan_json.h"
#include "plan/planner.h"
#include "plan/stage_layout.h"
#include "runtime/dist_step.h"

namespace infinipipe::runtime {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

bool same_layout(const std::vector<plan::StageSpec>& a, const std::vector<plan::StageSpec>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first_layer != b[i].first_layer || a[i].num_layers != b[i].num_layers ||
        a[i].has_embedding != b[i].has_embedding || a[i].has_lm_head != b[i].has_lm_head) {
      return false;
    }
  }
  return true;
}

}  // namespace

void train_check_config(const Config& cfg, int world_size) {
  const ParallelConfig& p = cfg.parallel;
  if (p.pipeline_parallel * p.data_parallel != world_size) {
    fail_config(
        "pipeline-model-parallel-size × data-parallel-size must equal the number of processes: "
        "pp = {} × dp = {} = {}, but {} running; {}",
        p.pipeline_parallel, p.data_parallel, p.pipeline_parallel * p.data_parallel,
        world_size == 1 ? "one process is" : fmt::format("{} processes are", world_size),
        world_size == 1 ? "run it as `mpirun -np N infinipipe train ...` with N = pp × dp"
                        : "change the degrees or the -np of mpirun");
  }
  if (p.ulysses_degree > 1) {
    fail_config(
        "infinipipe train does not run Ulysses sequence parallelism (ulysses = {}); drop "
        "--ulysses-degree (the planner and simulator study it)",
        p.ulysses_degree);
  }
  if (cfg.training.bf16) {
    fail_config(
        "--bf16 plans bf16 activations for GPU presets, but CPU training runs in fp32; "
        "drop --bf16 for `infinipipe train`");
  }
  if (cfg.training.train_iters > 0 && cfg.training.data_path.empty()) {
    fail_config(
        "train needs a dataset: pass --data-path PREFIX (a Megatron PREFIX.bin/.idx). Make one "
        "with `infinipipe data synth --output PREFIX --seq-length {}` (synthetic, learnable) or "
        "`infinipipe data prepare --input FILE.jsonl --output PREFIX`",
        cfg.model.seq_length);
  }
}

Trainer::Trainer(const TrainOptions& opts)
    : cfg_(opts.config),
      config_yaml_(opts.config_yaml),
      cm_(obs::engine_cost_model(opts.config)),
      groups_(opts.groups) {
  train_check_config(cfg_, groups_ ? groups_->layout().world_size() : 1);
  watchdog_ = opts.watchdog;
  if (groups_) p2p_ = std::make_unique<P2p>(*groups_, groups_->comm().options().p2p_timeout_s);
  lr_ = LrSchedule::from_config(cfg_.training);
  const OptimizerOptions oo = OptimizerOptions::from_config(cfg_.training);
  oo.validate();
  model_build();
  if (groups_ && groups_->layout().dp > 1) {
    grads_ = std::make_unique<DistGradReducer>(*groups_, engine_ptrs_, p2p_->timeout_s());
  }
  if (groups_ && groups_->layout().pp > 1 && cfg_.model.tie_embeddings &&
      groups_->embedding_comm() != MPI_COMM_NULL) {
    // Both ends build it at once (it duplicates the communicator, a collective of the two).
    Param* tied = groups_->layout().is_first_stage() ? engines_.front()->params().embedding()
                                                     : engines_.back()->params().lm_head();
    if (tied == nullptr)
      fail("internal: stage {} holds no tied embedding", groups_->layout().stage);
    tied_grads_ = std::make_unique<GradBuckets>(groups_->embedding_comm(), p2p_->timeout_s());
    tied_grads_->add(tied->name, tied->grad.data(), tied->grad.numel());
  }
  if (groups_ && groups_->layout().dp > 1 && cfg_.parallel.use_distributed_optimizer) {
    dist_optimizer_ = std::make_unique<DistOptimizer>(groups_->dp_comm(), p2p_->timeout_s());
  }
  optimizer_ = std::make_unique<ParamOptimizer>(oo, [this](int64_t delta) {
    if (delta >= 0) {
      tracker_.charge(MemCategory::mem_optimizer, delta);
    } else {
      tracker_.release(MemCategory::mem_optimizer, -delta);
    }
  });
  if (!cfg_.training.load.empty()) checkpoint_load(cfg_.training.load);
  if (cfg_.training.train_iters > iteration_) {
    dataset_.emplace(data::IndexedDataset::open(cfg_.training.data_path));
    sampler_ = std::make_unique<data::BatchSampler>(dataset_->num_documents(),
                                                    cfg_.training.global_batch_size,
                                                    static_cast<uint64_t>(cfg_.training.seed));
    sampler_->set_consumed_samples(start_consumed_);
  }
}

Trainer::~Trainer() = default;

void Trainer::model_build() {
  // The layout the planner uses for this schedule: pp stages, or pp × vpp virtual stages. This
  // rank builds the stages it runs (stage s runs on pipeline rank s % pp).
  const int32_t pp = static_cast<int32_t>(cfg_.parallel.pipeline_parallel);
  const int32_t vpp = cfg_.parallel.schedule == Schedule::interleaved
                          ? static_cast<int32_t>(cfg_.parallel.virtual_stages)
                          : 1;
  layout_ = plan::stage_layout_by_cost(cm_, pp, vpp);
  const int32_t my_stage = groups_ ? groups_->layout().stage : 0;
  const uint64_t seed = static_cast<uint64_t>(cfg_.training.seed);
  for (size_t i = 0; i < layout_.size(); ++i) {
    const plan::StageSpec& s = layout_[i];
    if (static_cast<int32_t>(i) % pp != my_stage) {
      engine_ptrs_.push_back(nullptr);
      continue;
    }
    const StageRange r{s.first_layer, s.num_layers, s.has_embedding, s.has_lm_head};
    engines_.push_back(std::make_unique<StageEngine>(cfg_.model, r, seed, tracker_));
    engine_ptrs_.push_back(engines_.back().get());
  }
}

int64_t Trainer::consumed_samples() const {
  return sampler_ ? sampler_->consumed_samples() : start_consumed_;
}

// The last stage's copy of the tied embedding when the first stage runs on another rank (it is
// trained here like any parameter, but counted and saved by the first stage's rank).
Param* Trainer::tied_remote_copy() {
  if (!tied_grads_ || groups_->layout().is_first_stage()) return nullptr;
  return engines_.back()->params().lm_head();
}

std::span<const float> Trainer::tied_copy_values() {
  Param* copy = tied_remote_copy();
  if (copy == nullptr) return {};
  return {copy->value.data(), static_cast<size_t>(copy->value.numel())};
}

std::vector<ParamRef> Trainer::params_local() {
  std::vector<ParamRef> out;
  std::map<std::string, bool> seen;
  for (auto& e : engines_) {
    for (ParamRef& p : e->params().params()) {
      if (seen.emplace(p.name, true).second) out.push_back(p);
    }
  }
  return out;
}

std::vector<ParamRef> Trainer::params() {
  std::vector<ParamRef> out = params_local();
  if (Param* copy = tied_remote_copy()) {
    std::erase_if(out, [copy](const ParamRef& p) { return p.value == copy->value.data(); });
  }
  return out;
}

std::vector<OptimTensor> Trainer::optim_tensors() {
  std::vector<OptimTensor> out;
  for (const ParamRef& p : params_local()) {
    const size_t n = static_cast<size_t>(p.numel);
    out.push_back({p.name, p.shape, {p.value, n}, {p.grad, n}});
  }
  return out;
}

// With tied embeddings and several stages, the last stage holds its own copy of the embedding:
// its gradient joins the first stage's before the update. In one process the update is then
// copied; across ranks both ends sum the two gradients (after the dp all-reduce, so each holds
// the global gradient) and apply the identical update, which keeps the copies bit-identical.
void Trainer::tied_grads_sum() {
  if (tied_grads_) {
    if (watchdog_) watchdog_->arm("the tied embedding's gradient all-reduce");
    tied_grads_->finish("the tied embedding's gradient all-reduce (first and last stage)");
    if (watchdog_) watchdog_->disarm();
    return;
  }
  if (!cfg_.model.tie_embeddings || engines_.size() < 2) return;
  Param* primary = engines_.front()->params().embedding();
  Param* copy = engines_.back()->params().lm_head();
  if (primary == nullptr || copy == nullptr || primary == copy) return;
  for (int64_t i = 0; i < primary->grad.numel(); ++i)
    primary->grad.data()[i] += copy->grad.data()[i];
}

void Trainer::tied_values_copy() {
  if (tied_grads_ || !cfg_.model.tie_embeddings || engines_.size() < 2) return;
  Param* primary = engines_.front()->params().embedding();
  Param* copy = engines_.back()->params().lm_head();
  if (primary == nullptr || copy == nullptr || primary == copy) return;
  std::copy(primary->value.data(), primary->value.data() + primary->value.numel(),
            copy->value.data());
}

void Trainer::checkpoint_load(const std::string& dir) {
  CheckpointReader reader(dir);
  reader.check_model(cfg_.model);
  // Every engine's parameters, tied copies included, so all of them get the saved values.
  std::vector<ParamRef> all;
  for (auto& e : engines_) {
    for (ParamRef& p : e->params().params()) all.push_back(p);
  }
  const std::vector<CheckpointTarget> targets = checkpoint_targets(all);
  reader.load_params(targets);
  // A tied copy on this rank is trained here too: it takes the embedding's state.
  const std::vector<CheckpointTarget> unique = checkpoint_targets(params_local());
  if (dist_optimizer_) {
    reader.load_optimizer(dist_optimizer_->load_slices(unique), *optimizer_);
  } else {
    reader.load_optimizer(unique, *optimizer_);
  }
  iteration_ = reader.iteration();
  start_consumed_ = reader.consumed_samples();
  resumed_ = true;
}

void Trainer::save() {
  const std::string& dir = cfg_.training.save;
  if (dir.empty()) fail_config("saving needs --save DIR");
  CheckpointShard shard;
  // With data parallelism the replicas hold the same values: replica 0 writes them, the others
  // write a shard without tensors (the optimizer only names its kind: state goes per tensor).
  if (!groups_ || groups_->layout().replica == 0) shard.params = checkpoint_tensors(params());
  shard.optimizer = optimizer_.get();
  std::deque<std::vector<float>> gathered;  // split tensors' states, whole, while they are written
  if (dist_optimizer_) {
    // The tied copy's state is the embedding's, saved by the first stage.
    const float* copy = tied_copy_values().data();
    shard.optimizer_states = dist_optimizer_->states_for_save(
        optim_tensors(), *optimizer_,
        [copy](const OptimTensor& t) { return copy == nullptr || t.value.data() != copy; },
        gathered);
  }
  CheckpointMeta meta;
  meta.iteration = iteration_;
  meta.consumed_samples = consumed_samples();
  meta.model = cfg_.model;
  // Training draws no random numbers: the data order is the sampler's seeded shuffle, fully
  // determined by (seed, consumed samples), and the initialisation only by the seed.
  meta.rng = {{"generator", "none"},
              {"data_order_seed", cfg_.training.seed},
              {"consumed_samples", meta.consumed_samples}};
  meta.config = {{"format", "yaml"}, {"yaml", config_yaml_}};
  if (!groups_) {
    checkpoint_save(dir, meta, shard);
    return;
  }
  // Every rank writes its shard; `latest` moves only after all finished (one commit, rank 0),
  // and nobody goes on before it did.
  Comm& comm = groups_->comm();
  shard.rank = comm.rank();
  shard.num_ranks = comm.size();
  checkpoint_save_shard(dir, iteration_, shard);
  comm.barrier(fmt::format("saving the checkpoint of iteration {}", iteration_));
  if (comm.rank() == 0) checkpoint_commit(dir, meta);
  comm.barrier(fmt::format("committing the checkpoint of iteration {}", iteration_));
}

// This rank's replica's share of a global batch: all of it in one process or with dp = 1.
std::vector<int64_t> Trainer::replica_lengths(std::span<const int64_t> lengths) const {
  if (!groups_ || groups_->layout().dp == 1) return {lengths.begin(), lengths.end()};
  const auto split = dist_replica_split(lengths, groups_->layout().dp, cm_);
  std::vector<int64_t> out;
  for (int32_t i : split[static_cast<size_t>(groups_->layout().replica)])
    out.push_back(lengths[static_cast<size_t>(i)]);
  return out;
}

namespace {

double plan_timed(const Config& cfg, const cost::CostModel& cm, std::span<const int64_t> lengths,
                  plan::PlanResult& out) {
  const auto t = Clock::now();
  out = plan::make_plan_detailed(cfg, cm, lengths, cfg.parallel.schedule);
  return seconds_between(t, Clock::now());
}

}  // namespace

// The plan of `lengths`: the background planner's when it planned these very lengths (it
// planned the batch the sampler was going to give), else planned now.
Trainer::Planned Trainer::plan_take(std::span<const int64_t> lengths) {
  if (ahead_.valid()) {
    Planned p = ahead_.get();  // rethrows the planner's error, which is this batch's
    if (std::equal(lengths.begin(), lengths.end(), ahead_lengths_.begin(), ahead_lengths_.end()))
      return p;
  }
  Planned p;
  p.seconds = plan_timed(cfg_, cm_, lengths, p.result);
  return p;
}

// Starts planning the next global batch on a thread. The sampler is copied to look ahead, so
// the position a checkpoint saves stays the consumed one.
void Trainer::plan_ahead_start() {
  data::BatchSampler peek = *sampler_;
  std::vector<int64_t> lengths;
  for (int64_t doc : peek.next()) {
    const int64_t n = std::min(dataset_->document_length(doc), cfg_.model.seq_length);
    if (n > 0) lengths.push_back(n);
  }
  if (batch_predicted_tokens(lengths) == 0) return;  // step() reports that batch
  ahead_lengths_ = replica_lengths(lengths);
  ahead_ = std::async(std::launch::async, [this, lengths = ahead_lengths_] {
    Planned p;
    p.seconds = plan_timed(cfg_, cm_, lengths, p.result);
    return p;
  });
}

// From the pipeline's first stage to the others, with the p2p deadline: a stage that stopped
// between iterations is named instead of hanging the broadcast.
void Trainer::plan_broadcast(void* data, int count, MPI_Datatype type, const std::string& what) {
  MPI_Request req = MPI_REQUEST_NULL;
  mpi_check(MPI_Ibcast(data, count, type, 0, groups_->pp_comm(), &req),
            "starting the broadcast of " + what);
  mpi_wait_deadline(
      {&req, 1}, {}, p2p_->timeout_s(),
      {fmt::format("the broadcast of {} for iteration {}", what, iteration_ + 1),
       "a stage of this pipeline may have died or hung", comm_peers(groups_->pp_comm())});
}

// One process plans the whole batch. Distributed: the replica's share (balance_replicas), planned
// by its first pipeline rank and broadcast, so the ranks of a pipeline run the very same plan
// whatever the planner's search does. planner_seconds: the planner's own time for it.
plan::PlanResult Trainer::plan_replica(std::span<const int64_t> lengths, double& planner_seconds) {
  const bool plans_here = !groups_ || groups_->layout().stage == 0;
  plan::PlanResult out;
  if (plans_here) {
    Planned p = plan_take(lengths);
    out = std::move(p.result);
    planner_seconds = p.seconds;
    knobs_text_ = out.knobs.describe();
  }
  if (!groups_) return out;
  std::string text;
  if (plans_here) {
    nlohmann::json j = {{"plan", plan::plan_to_json(out.plan)},
                        {"knobs", knobs_text_},
                        {"seconds", planner_seconds}};
    text = j.dump();
  }
  int64_t n = static_cast<int64_t>(text.size());
  plan_broadcast(&n, 1, MPI_INT64_T, "the plan's size");
  text.resize(static_cast<size_t>(n));
  plan_broadcast(text.data(), mpi_count(n, "the plan"), MPI_CHAR, "the plan");
  if (!plans_here) {
    const nlohmann::json j = nlohmann::json::parse(text);
    out.plan = plan::plan_from_json(j.at("plan"));
    knobs_text_ = j.at("knobs").get<std::string>();
    planner_seconds = j.at("seconds").get<double>();
  }
  return out;
}

// Clips to --clip-grad by the global norm: squares summed over this rank's parameters, then over
// the pipeline (dp replicas hold the same reduced gradients); a tied copy counts once, on the
// first stage. Returns the norm before clipping.
double Trainer::grad_norm_clip() {
  std::vector<OptimTensor> tensors = optim_tensors();
  if (!groups_) return grad_clip_norm(tensors, cfg_.training.clip_grad);
  std::vector<OptimTensor> counted = tensors;
  if (Param* copy = tied_remote_copy()) {
    std::erase_if(counted,
                  [copy](const OptimTensor& t) { return t.value.data() == copy->value.data(); });
  }
  double sq = grad_sum_squares(counted);
  sq = allreduce_sum(groups_->pp_comm(), sq, p2p_->timeout_s(), "the squared gradient norm");
  const double norm = std::sqrt(sq);
  grad_apply_scale(tensors, grad_clip_scale(norm, cfg_.training.clip_grad));
  return norm;
}

// Every parameter, or with the distributed optimizer this replica's share of them, after which
// the replicas exchange the updated weights.
void Trainer::optimizer_step(double lr) {
  const std::vector<OptimTensor> tensors = optim_tensors();
  if (!dist_optimizer_) {
    optimizer_->step(tensors, lr);
    return;
  }
  optimizer_->step(dist_optimizer_->owned(tensors), lr);
  const std::string during = fmt::format("iteration {}", iteration_ + 1);
  if (watchdog_) watchdog_->arm("the distributed optimizer's all-gather of " + during);
  dist_optimizer_->gather_weights(tensors, during);
  if (watchdog_) watchdog_->disarm();
}

obs::IterationMetrics Trainer::step() {
  if (!sampler_) fail("trainer: no dataset is open (train-iters {} reached)", iteration_);
  const auto t_start = Clock::now();
  obs::IterationMetrics m;
  m.iteration = iteration_ + 1;
  m.train_iters = cfg_.training.train_iters;

  // The next global batch: one sequence per document, truncated to seq-length.
  std::vector<std::vector<int32_t>> seqs;
  std::vector<int64_t> lengths;
  for (int64_t doc : sampler_->next()) {
    std::vector<int32_t> t = dataset_->document_tokens(doc, cfg_.model.seq_length);
    if (t.empty()) continue;  // an empty document predicts nothing
    lengths.push_back(static_cast<int64_t>(t.size()));
    seqs.push_back(std::move(t));
  }
  const int64_t predicted = batch_predicted_tokens(lengths);
  if (predicted == 0) {
    fail(
        "iteration {}: the global batch (documents {}..{} of the data order) predicts no token "
        "(every document has at most one token); check --data-path {}",
        m.iteration, sampler_->consumed_samples() - cfg_.training.global_batch_size,
        sampler_->consumed_samples() - 1, cfg_.training.data_path);
  }

  // This rank's share: the whole batch in one process, its replica's sequences otherwise.
  std::vector<int64_t> my_lengths = lengths;
  std::vector<std::vector<int32_t>> my_seqs;
  if (groups_ && groups_->layout().dp > 1) {
    const auto split = dist_replica_split(lengths, groups_->layout().dp, cm_);
    my_lengths.clear();
    for (int32_t i : split[static_cast<size_t>(groups_->layout().replica)]) {
      my_lengths.push_back(lengths[static_cast<size_t>(i)]);
      my_seqs.push_back(std::move(seqs[static_cast<size_t>(i)]));
    }
  } else {
    my_seqs = std::move(seqs);
  }

  // Planning never stalls training: this batch was planned while the last one trained (but for
  // the first), and the next one is planned while this one trains. plan_seconds is the
  // planner's time, plan_wait_seconds what this step waited for its plan.
  const auto t_plan = Clock::now();
  plan::PlanResult planned = plan_replica(my_lengths, m.plan_seconds);
  last_plan_ = std::move(planned.plan);
  m.plan_wait_seconds = seconds_between(t_plan, Clock::now());
  if ((!groups_ || groups_->layout().stage == 0) && m.iteration < cfg_.training.train_iters) {
    plan_ahead_start();
  }
  if (!same_layout(last_plan_.stages, layout_)) {
    fail(
        "iteration {}: the {} plan splits the layers differently from the model's stage layout; "
        "this is a bug in the planner",
        m.iteration, last_plan_.schedule);
  }

  for (auto& e : engines_) e->params().grads_zero();
  tracker_.reset_peak();
  const auto t_exec = Clock::now();
  const double loss_scale = 1.0 / static_cast<double>(predicted);
  if (groups_) {
    last_stats_ = {dist_execute_plan(last_plan_, engine_ptrs_, *p2p_, cfg_.model.hidden_size,
                                     tracker_, my_seqs, loss_scale, watchdog_, m.iteration,
                                     grads_.get())};
  } else {
    last_stats_ = execute_plan_local(last_plan_, engine_ptrs_, my_seqs, loss_scale, &tracker_);
  }
  m.measured_step_seconds = seconds_between(t_exec, Clock::now());
  double loss_sum = 0;
  int64_t loss_tokens = 0;
  for (const obs::StepStats& s : last_stats_) {
    loss_sum += s.loss_sum;
    loss_tokens += s.predicted_tokens;
  }
  if (groups_) {
    // Last stages hold the losses; every rank learns the global per-token mean.
    const double t = p2p_->timeout_s();
    const std::string it = fmt::format(" of iteration {}", m.iteration);
    loss_sum = allreduce_sum(groups_->comm().world(), loss_sum, t, "the loss sum" + it);
    loss_tokens = allreduce_sum(groups_->comm().world(), loss_tokens, t, "the token count" + it);
    if (grads_) {
      if (watchdog_) watchdog_->arm("the gradient all-reduce" + it);
      grads_->finish("the data-parallel gradient all-reduce" + it, last_stats_[0].events);
      if (watchdog_) watchdog_->disarm();
    }
  }
  if (loss_tokens != predicted) {
    fail(
        "iteration {}: the plan's chunks covered {} predicted tokens, the batch has {}; the plan "
        "is broken",
        m.iteration, loss_tokens, predicted);
  }
  m.loss = loss_sum / static_cast<double>(predicted);
  if (!std::isfinite(m.loss)) {
    fail(
        "iteration {}: the loss is {}; training diverged. Lower --lr, raise --lr-warmup-iters, "
        "or resume from an earlier checkpoint",
        m.iteration, m.loss);
  }

  // Planning runs in the background: the trace shows what this step waited for its plan.
  obs::trace_event_add(last_stats_.front(), "plan",
                       fmt::format("waiting for the plan (planner took {:.3f} s)", m.plan_seconds),
                       t_plan,
                       t_plan + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(m.plan_wait_seconds)));
  const auto t_optimizer = Clock::now();
  tied_grads_sum();
  m.grad_norm = grad_norm_clip();
  m.lr = lr_.lr_at(iteration_);
  optimizer_step(m.lr);
  tied_values_copy();
  obs::trace_event_add(last_stats_.front(), "optimizer", "clip and optimizer step", t_optimizer,
                       Clock::now());
  ++iteration_;

  m.consumed_samples = sampler_->consumed_samples();
  m.sequences = static_cast<int64_t>(lengths.size());
  for (int64_t n : lengths) m.tokens += n;
  m.predicted_tokens = predicted;
  m.seconds = seconds_between(t_start, Clock::now());
  m.tokens_per_s = m.seconds > 0 ? static_cast<double>(m.tokens) / m.seconds : 0;
  m.schedule = last_plan_.schedule;
  m.chunks = static_cast<int32_t>(last_plan_.chunks.size());
  for (const auto& list : last_plan_.actions) {
    for (const plan::Action& a : list) {
      if (a.kind == plan::ActionKind::forward) m.recompute_layers += a.recompute_layers;
    }
  }
  m.plan_knobs = knobs_text_;
  m.predicted_step_seconds = last_plan_.predicted_step_time;
  const size_t my_rank = groups_ ? static_cast<size_t>(groups_->layout().stage) : 0;
  m.predicted_peak_bytes = last_plan_.predicted_peak_bytes.size() > my_rank
                               ? last_plan_.predicted_peak_bytes[my_rank]
                               : 0;
  m.measured_peak_bytes = tracker_.peak_total();
  m.measured_activation_peak_bytes = tracker_.peak(MemCategory::mem_activations);
  m.memory_budget = last_plan_.memory_budget;
  return m;
}

}  // namespace infinipipe::runtime
