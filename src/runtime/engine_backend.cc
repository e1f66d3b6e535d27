#include "runtime/engine_backend.h"

#include <chrono>
#include <optional>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "ckpt/checkpoint.h"
#include "ckpt/hf_folder.h"
#include "comm/mpi_comm.h"
#include "comm/mpi_groups.h"
#include "comm/mpi_p2p.h"
#include "comm/mpi_stop.h"
#include "comm/mpi_text.h"
#include "comm/mpi_watchdog.h"
#include "core/error.h"
#include "profile/profile.h"
#include "runtime/cost_loop_mpi.h"
#include "runtime/dist_step.h"
#include "runtime/run_driver.h"
#include "runtime/seconds_since.h"
#include "runtime/train.h"

namespace infinipipe::runtime {

namespace {

// The checks come before any collective: a wrong world size is named, not hung on. Distributed,
// the run's --p2p-timeout and --watchdog-timeout hold for every wait from here on.
const ProcessGroups* groups_checked(const Config& cfg, const EngineRanks& ranks) {
  train_check_config(cfg, ranks.groups ? ranks.groups->layout().world_size() : 1);
  if (ranks.groups) {
    const ParallelConfig& p = cfg.parallel;
    ranks.groups->comm().timeouts_set(p.p2p_timeout, p.watchdog_timeout);
    if (ranks.watchdog)
      ranks.watchdog->timeout_set(ranks.groups->comm().options().watchdog_timeout());
  }
  return ranks.groups;
}

std::unique_ptr<P2p> p2p_open(const ProcessGroups* groups) {
  if (!groups) return nullptr;
  return std::make_unique<P2p>(*groups, groups->comm().options().p2p_timeout_s);
}

double timeout_of(const P2p* p2p) {
  return p2p ? p2p->timeout_s() : 0.0;
}

// The cost model before any measurement: the engine's preset or calibration, and distributed,
// where each rank of the pipeline runs (whether ranks share cores) and with --measure-links the
// links between the hosts, this rank's pipeline priced by those it crosses in the groups' order.
cost::CostModel train_prior(const Config& cfg, const ProcessGroups* groups, const P2p* p2p,
                            const RunLinks& links) {
  const cost::CostModel cm = profile::engine_cost_model(cfg);
  if (!groups && cfg.cluster.measure_links)
    fail_config(
        "--measure-links measures the links between the ranks of a job: launch with "
        "`mpirun -np N` (N = pp x dp > 1), or leave it out");
  if (!groups) return cm;
  const cost::CostModel out = cm.with_rank_hosts(pipeline_rank_hosts(*groups, p2p->timeout_s()));
  if (!links.measured()) return out;
  return out.with_host_links(links.table()).with_replica_links(links.grid(), links.replica());
}

// The layout the stages are built with: the optimizer's configuration is the run's with it.
Config layout_config(const Config& cfg, const RankStages& stages) {
  return config_with_layout(cfg, stages.layout());
}

}  // namespace

EngineBackend::EngineBackend(const Config& cfg, const EngineRanks& ranks)
    : groups_(groups_checked(cfg, ranks)),
      watchdog_(ranks.watchdog),
      action_hook_(ranks.action_hook),
      p2p_(p2p_open(groups_)),
      links_(cfg, groups_, timeout_of(p2p_.get()), ranks.host_links),
      model_(cfg.model),
      prior_(train_prior(cfg, groups_, p2p_.get(), links_)),
      stages_(cfg, prior_, groups_ ? groups_->layout().stage : 0,
              tied_across_ranks(cfg, groups_) && !groups_->layout().is_first_stage()),
      optimizer_(layout_config(cfg, stages_), stages_, groups_, timeout_of(p2p_.get()), watchdog_) {
}

EngineBackend::~EngineBackend() = default;

RunRank EngineBackend::rank() const {
  RunRank r;
  if (!groups_) return r;
  const RankLayout& l = groups_->layout();
  r.distributed = true;
  r.world_rank = groups_->comm().rank();
  r.world_size = groups_->comm().size();
  r.stage = l.stage;
  r.replica = l.replica;
  r.pp = l.pp;
  r.dp = l.dp;
  r.plans = l.stage == 0;
  return r;
}

RunCollectives EngineBackend::collectives() {
  RunCollectives c;
  if (!groups_) return c;
  const ProcessGroups* g = groups_;
  const double timeout_s = timeout_of(p2p_.get());
  Watchdog* watchdog = watchdog_;
  c.cost = cost_loop_collectives(g, timeout_s);
  // From the pipeline's first stage to the others, with the p2p deadline: a stage that stopped
  // between iterations is named instead of hanging the broadcast.
  c.pipeline_share = [g, timeout_s](std::string text, const std::string& what) {
    return mpi_text_broadcast(g->pp_comm(), std::move(text), timeout_s, "the plan", what,
                              "a stage of this pipeline may have died or hung");
  };
  c.stop_agree = [g, watchdog](std::span<int32_t> values, int64_t iteration) {
    std::optional<Watchdog::Scope> armed;
    const std::string doing = fmt::format("agreeing whether to stop after iteration {}", iteration);
    if (watchdog != nullptr) armed.emplace(*watchdog, doing);
    const Comm& comm = g->comm();
    mpi_stop_agree(comm.world(), values, comm.options().p2p_timeout_s, iteration);
  };
  c.barrier = [g](const std::string& what) { g->comm().barrier(what); };
  return c;
}

std::vector<obs::StepStats> EngineBackend::execute(const plan::Plan& plan,
                                                   std::span<const std::vector<int32_t>> share,
                                                   double loss_scale, int64_t iteration,
                                                   DistGradReducer* grads) {
  if (groups_) {
    return {dist_execute_plan(plan, stages_.engines(), *p2p_, model_.hidden_size, stages_.tracker(),
                              share, loss_scale, watchdog_, iteration, grads, action_hook_)};
  }
  return execute_plan_local(plan, stages_.engines(), share, loss_scale, &stages_.tracker(),
                            action_hook_);
}

// Forward and backward of every chunk of the plan, gradients accumulated from zero; then the
// loss over the whole batch (distributed: last stages hold the losses, every rank learns the
// global sum) and the data-parallel gradient all-reduce.
RunBackend::Executed EngineBackend::train(const plan::Plan& plan,
                                          std::span<const std::vector<int32_t>> share,
                                          double loss_scale, int64_t iteration) {
  stages_.grads_zero();
  stages_.tracker().reset_peak();
  Executed e;
  const auto t_exec = std::chrono::steady_clock::now();
  e.stats = execute(plan, share, loss_scale, iteration, optimizer_.dp_reducer());
  e.seconds = seconds_since(t_exec);
  const std::string it = fmt::format(" of iteration {}", iteration);
  std::tie(e.loss_sum, e.loss_tokens) = world_loss(e.stats, groups_, timeout_of(p2p_.get()), it);
  if (groups_) e.tail_seconds = optimizer_.dp_finish(it, e.stats.front().events);
  return e;
}

std::pair<double, int64_t> EngineBackend::evaluate(const plan::Plan& plan,
                                                   std::span<const std::vector<int32_t>> share,
                                                   const std::string& what) {
  const std::vector<obs::StepStats> stats = execute(plan, share, 1.0, 0, nullptr);
  return world_loss(stats, groups_, timeout_of(p2p_.get()), what);
}

RunBackend::Update EngineBackend::optimizer_step(int64_t completed) {
  const RankOptimizer::Update u = optimizer_.step(completed);
  return {u.grad_norm, u.lr};
}

void EngineBackend::memory_measured(obs::IterationMetrics& m) {
  m.measured_peak_bytes = stages_.tracker().peak_total();
  m.measured_activation_peak_bytes = stages_.tracker().peak(MemCategory::mem_activations);
}

// A step the fit did not expect may be a link that changed: the next plans follow it.
bool EngineBackend::iteration_end(const obs::IterationMetrics& m, const plan::Plan& plan,
                                  CostLoop& cost_loop) {
  return links_.iteration_end(m.iteration, m.measured_step_seconds, plan.predicted_step_time,
                              cost_loop);
}

RunBackend::ShardPlan EngineBackend::shard_fill(CheckpointShard& shard,
                                                std::deque<std::vector<float>>& storage,
                                                int64_t /*iteration*/) {
  // With data parallelism the replicas hold the same values: replica 0 writes them.
  const bool replica0 = !groups_ || groups_->layout().replica == 0;
  if (replica0) shard.params = checkpoint_tensors(stages_.params());
  optimizer_.save(shard, storage);
  ShardPlan out;
  out.every_replica_saves = optimizer_.every_replica_saves();
  if (!groups_) return out;
  const RankLayout& layout = groups_->layout();
  if (out.every_replica_saves) {
    // Every replica saves the whole states of the parameters whose first element it holds; the
    // model files are replica 0's, one per pipeline rank.
    shard.rank = groups_->comm().rank();
    shard.num_ranks = groups_->comm().size();
    shard.model_part = layout.stage;
    shard.model_parts = layout.pp;
  } else {
    // Replica 0 of each pipeline rank is the only writer: the others hold nothing of their own.
    shard.rank = layout.stage;
    shard.num_ranks = layout.pp;
  }
  out.writes = out.every_replica_saves || replica0;
  return out;
}

// Every stage's parameters, tied copies included, so all of them get the saved values.
void EngineBackend::load(CheckpointReader& reader) {
  reader.load_params(checkpoint_targets(stages_.params_every_stage()));
  optimizer_.load(reader);
}

void EngineBackend::weights_load(const std::string& dir) {
  const std::vector<CheckpointTarget> targets = checkpoint_targets(stages_.params_every_stage());
  const ModelConfig& model = model_;
  if (hf_folder_is(dir)) {
    HfModelReader reader(dir);
    reader.check_model(model);
    reader.load_params(targets);
  } else {
    CheckpointReader reader(dir);
    reader.check_model(model);
    reader.load_params(targets);
  }
}

}  // namespace infinipipe::runtime
