#include "runtime/train.h"

#include <map>
#include <utility>

#include <fmt/format.h>

#include "comm/mpi_comm.h"
#include "core/error.h"
#include "obs/profile.h"
#include "plan/schedule_table.h"
#include "plan/stage_layout.h"
#include "runtime/checkpoint_meta.h"
#include "runtime/dist_step.h"

namespace infinipipe::runtime {

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
  if (p.zero_stage != 1) {
    fail_config(
        "infinipipe train keeps a stage's weights and gradients whole (zero-stage = {}); drop "
        "--zero-stage (ZeRO-3 inside a stage is for `plan` and `simulate`)",
        p.zero_stage);
  }
  if (cfg.training.bf16) {
    fail_config(
        "--bf16 plans bf16 activations for GPU presets, but CPU training runs in fp32; "
        "drop --bf16 for `infinipipe train`");
  }
  if (cfg.training.train_iters > 0 && !cfg.training.has_data()) {
    fail_config(
        "train needs a dataset: pass --data-path PREFIX (a Megatron PREFIX.bin/.idx, or a blend "
        "'0.3 A 0.7 B'). Make one with `infinipipe data synth --output PREFIX --seq-length {}` "
        "(synthetic, learnable) or "
        "`infinipipe data prepare --input FILE.jsonl --output PREFIX`",
        cfg.model.seq_length);
  }
}

Trainer::Trainer(const TrainOptions& opts)
    : cfg_(opts.config),
      config_yaml_(opts.config_yaml),
      cm_(obs::engine_cost_model(opts.config)),
      plan_cm_(cm_),
      last_plan_cm_(cm_),
      plan_cm_before_refit_(cm_),
      groups_(opts.groups),
      watchdog_(opts.watchdog),
      action_hook_(opts.action_hook) {
  train_check_config(cfg_, groups_ ? groups_->layout().world_size() : 1);
  if (groups_) p2p_ = std::make_unique<P2p>(*groups_, groups_->comm().options().p2p_timeout_s);
  if (groups_) {
    cm_ = cm_.with_rank_hosts(rank_hosts_gather());
    plan_cm_ = last_plan_cm_ = plan_cm_before_refit_ = cm_;
  }
  lr_ = LrSchedule::from_config(cfg_.training);
  const OptimizerOptions oo = OptimizerOptions::from_config(cfg_.training);
  oo.validate();
  model_build();
  reducers_build();
  optimizer_build(oo);
  saved_tokenizer_ = checkpoint_tokenizer(cfg_);
  // Before a resume, which may continue the fit from the checkpoint's state.
  const std::optional<cost::Coefficients> mine = rank_costs_from_calibration();
  if (cfg_.training.cost_model_update == CostModelUpdate::online) {
    // This rank's fit starts from its own terms when the calibration has them.
    fit_.emplace(
        mine ? cost::CostModel(cm_.model(), cm_.device(), *mine, cm_.ulysses_degree(), cm_.bf16())
             : cm_);
    pooled_.coeffs = cm_.coefficients();
    if (groups_) step_fit_.emplace();  // one rank per process: its gaps and tail are its own
    // The calibration's step costs count as one measured step and action, until measured here.
    if (mine && step_fit_)
      step_fit_->restore({{mine->action_gap_s, mine->step_tail_s}, {1, 1}}, "the calibration");
  }
  if (!cfg_.training.load.empty()) {
    checkpoint_load(cfg_.training.load);
  } else if (!cfg_.training.pretrained_checkpoint.empty()) {
    weights_load(cfg_.training.pretrained_checkpoint);
  }
  if (cfg_.training.train_iters > iteration_) dataset_open();
}

// What a distributed rank reduces beyond its pipeline: the dp gradient all-reduce, the tied
// embedding's gradient between first and last stage, and the distributed optimizer's share.
void Trainer::reducers_build() {
  if (!groups_) return;
  if (groups_->layout().dp > 1) {
    grads_ = std::make_unique<DistGradReducer>(*groups_, engine_ptrs_, p2p_->timeout_s());
  }
  if (groups_->layout().pp > 1 && cfg_.model.tie_embeddings &&
      groups_->embedding_comm() != MPI_COMM_NULL) {
    // Both ends build it at once (it duplicates the communicator, a collective of the two).
    Param* tied = groups_->layout().is_first_stage() ? engines_.front()->params().embedding()
                                                     : engines_.back()->params().lm_head();
    if (tied == nullptr)
      fail("internal: stage {} holds no tied embedding", groups_->layout().stage);
    tied_grads_ = std::make_unique<GradBuckets>(groups_->embedding_comm(), p2p_->timeout_s());
    tied_grads_->add(tied->name, tied->grad.data(), tied->grad.numel());
  }
  if (groups_->layout().dp > 1 && cfg_.parallel.use_distributed_optimizer) {
    dist_optimizer_ = std::make_unique<DistOptimizer>(groups_->dp_comm(), p2p_->timeout_s());
  }
}

// The optimizer's state is charged to the memory tracker as it grows and shrinks.
void Trainer::optimizer_build(const OptimizerOptions& oo) {
  optimizer_ = std::make_unique<ParamOptimizer>(oo, [this](int64_t delta) {
    if (delta >= 0) {
      tracker_.charge(MemCategory::mem_optimizer, delta);
    } else {
      tracker_.release(MemCategory::mem_optimizer, -delta);
    }
  });
}

// The datasets and the training order, at the data position the run starts from.
void Trainer::dataset_open() {
  const TrainingConfig& t = cfg_.training;
  datasets_.emplace(data::RunDatasets::open(
      {t.data_path, t.split, t.train_data_path, t.valid_data_path, t.test_data_path}));
  stream_.emplace(datasets_->stream(data::DataSplit::train, t.global_batch_size,
                                    static_cast<uint64_t>(t.seed)));
  stream_->set_consumed_samples(start_consumed_);
  delay_restore(start_delay_);
}

Trainer::~Trainer() = default;

void Trainer::model_build() {
  // The layout the planner uses for this schedule: pp stages, or pp × vpp virtual stages. This
  // rank builds the stages it runs (stage s runs on pipeline rank s % pp).
  const int32_t pp = static_cast<int32_t>(cfg_.parallel.pipeline_parallel);
  const int32_t vpp = plan::schedule_vpp(cfg_.parallel);
  layout_ = plan::stage_layout_by_cost(cm_, pp, vpp);
  // Plans keep this layout when the refitted cost model would split the layers otherwise.
  cfg_.parallel.stage_layers.clear();
  for (const plan::StageSpec& s : layout_) cfg_.parallel.stage_layers.push_back(s.num_layers);
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
  return stream_ ? stream_->consumed_samples() : start_consumed_;
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

}  // namespace infinipipe::runtime
