#include "runtime/train.h"

#include <memory>
#include <utility>

#include <fmt/format.h>

#include "comm/mpi_comm.h"
#include "comm/mpi_groups.h"
#include "comm/mpi_p2p.h"
#include "comm/mpi_watchdog.h"
#include "core/error.h"
#include "plan/plan_explain.h"
#include "profile/profile.h"
#include "runtime/checkpoint_meta.h"
#include "runtime/cost_loop_mpi.h"

namespace infinipipe::runtime {

std::vector<std::string> train_config_problems(const Config& cfg, int world_size) {
  std::vector<std::string> out;
  const ParallelConfig& p = cfg.parallel;
  if (world_size > 0 && p.pipeline_parallel * p.data_parallel != world_size) {
    out.push_back(fmt::format(
        "pipeline-model-parallel-size × data-parallel-size must equal the number of processes: "
        "pp = {} × dp = {} = {}, but {} running; {}",
        p.pipeline_parallel, p.data_parallel, p.pipeline_parallel * p.data_parallel,
        world_size == 1 ? "one process is" : fmt::format("{} processes are", world_size),
        world_size == 1 ? "run it as `mpirun -np N infinipipe train ...` with N = pp × dp"
                        : "change the degrees or the -np of mpirun"));
  }
  if (p.ulysses_degree > 1) {
    out.push_back(fmt::format(
        "infinipipe train does not run Ulysses sequence parallelism (ulysses = {}); drop "
        "--ulysses-degree (the planner and simulator study it)",
        p.ulysses_degree));
  }
  if (p.zero_stage != 1) {
    out.push_back(fmt::format(
        "infinipipe train keeps a stage's weights and gradients whole (zero-stage = {}); drop "
        "--zero-stage (ZeRO-3 inside a stage is for `plan` and `simulate`)",
        p.zero_stage));
  }
  if (cfg.training.bf16) {
    out.push_back(
        "--bf16 plans bf16 activations for GPU presets, but CPU training runs in fp32; "
        "drop --bf16 for `infinipipe train`");
  }
  if (!engine_unsupported(cfg.model).empty()) out.push_back(engine_unsupported_message(cfg.model));
  return out;
}

std::vector<std::string> train_run_problems(const Config& cfg, int world_size) {
  std::vector<std::string> out = train_config_problems(cfg, world_size);
  if (cfg.training.train_iters > 0 && !cfg.training.has_data()) {
    out.push_back(fmt::format(
        "train needs a dataset: pass --data-path PREFIX (a Megatron PREFIX.bin/.idx, or a blend "
        "'0.3 A 0.7 B'). Make one with `infinipipe data synth --output PREFIX --seq-length {}` "
        "(synthetic, learnable) or "
        "`infinipipe data prepare --input FILE.jsonl --output PREFIX`",
        cfg.model.seq_length));
  }
  return out;
}

void train_check_config(const Config& cfg, int world_size) {
  const std::vector<std::string> problems = train_run_problems(cfg, world_size);
  if (!problems.empty()) throw ConfigError(problems.front());
}

namespace {

// The checks come before any collective: a wrong world size is named, not hung on.
const ProcessGroups* groups_checked(const TrainOptions& opts) {
  train_check_config(opts.config, opts.groups ? opts.groups->layout().world_size() : 1);
  return opts.groups;
}

std::unique_ptr<P2p> p2p_open(const ProcessGroups* groups) {
  if (!groups) return nullptr;
  return std::make_unique<P2p>(*groups, groups->comm().options().p2p_timeout_s);
}

// The cost model before any measurement: the engine's preset or calibration, and distributed,
// where each rank of the pipeline runs (whether ranks share cores) and with --measure-links the
// links between the hosts, this rank's pipeline priced by those it crosses in the groups' order.
cost::CostModel train_prior(const Config& cfg, const ProcessGroups* groups, const P2p* p2p,
                            const RunLinks& links) {
  const cost::CostModel cm = obs::engine_cost_model(cfg);
  if (!groups && cfg.cluster.measure_links)
    fail_config(
        "--measure-links measures the links between the ranks of a job: launch with "
        "`mpirun -np N` (N = pp x dp > 1), or leave it out");
  if (!groups) return cm;
  const cost::CostModel out = cm.with_rank_hosts(pipeline_rank_hosts(*groups, p2p->timeout_s()));
  if (!links.measured()) return out;
  return out.with_host_links(links.table()).with_replica_links(links.grid(), links.replica());
}

// Plans keep the model's layout when the refitted cost model would split the layers otherwise.
Config config_with_layout(Config cfg, const std::vector<plan::StageSpec>& layout) {
  cfg.parallel.stage_layers.clear();
  for (const plan::StageSpec& s : layout) cfg.parallel.stage_layers.push_back(s.num_layers);
  return cfg;
}

double timeout_of(const P2p* p2p) {
  return p2p ? p2p->timeout_s() : 0.0;
}

}  // namespace

Trainer::Trainer(const TrainOptions& opts)
    : groups_(groups_checked(opts)),
      watchdog_(opts.watchdog),
      action_hook_(opts.action_hook),
      p2p_(p2p_open(groups_)),
      links_(opts.config, groups_, timeout_of(p2p_.get()), opts.host_links),
      cost_loop_(opts.config, train_prior(opts.config, groups_, p2p_.get(), links_),
                 cost_loop_rank(opts.config, groups_),
                 cost_loop_collectives(groups_, timeout_of(p2p_.get()))),
      stages_(opts.config, cost_loop_.prior(), groups_ ? groups_->layout().stage : 0,
              tied_across_ranks(opts.config, groups_) && !groups_->layout().is_first_stage()),
      cfg_(config_with_layout(opts.config, stages_.layout())),
      config_yaml_(opts.config_yaml),
      saved_tokenizer_(checkpoint_tokenizer(cfg_)),
      optimizer_(cfg_, stages_, groups_, timeout_of(p2p_.get()), watchdog_),
      batches_(cfg_, cost_loop_.prior(), groups_ ? groups_->layout().replica : 0),
      planner_(cfg_, groups_, timeout_of(p2p_.get())),
      start_(train_start_load(cfg_, stages_, optimizer_, cost_loop_)),
      iteration_(start_.iteration),
      last_(cost_loop_.prior()) {
  batches_.position_set(start_.data);
  if (cfg_.training.train_iters > iteration_) batches_.open();
}

Trainer::~Trainer() = default;

nlohmann::json Trainer::last_plan_explain() const {
  plan::PlanExplain ex = last_.explain;
  plan::explain_chosen_plan(ex, last_.plan, cfg_, last_.cost);
  return plan::explain_to_json(ex);
}

}  // namespace infinipipe::runtime
