#include "runtime/train_capabilities.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "core/error.h"

namespace infinipipe::runtime {

namespace {

constexpr int kRuntimes = 3;

std::string runtime_name(TrainRuntime r) {
  return r == TrainRuntime::engine ? "infinipipe train" : "the PyTorch trainer";
}

// One option a runtime refuses: which runtimes (by TrainRuntime's value), when (its value, or
// its flags given), and why.
struct Refusal {
  std::array<bool, kRuntimes> refused_by;
  bool (*applies)(const Config&);
  std::string (*message)(const Config&, TrainRuntime);
  std::array<const char*, 2> flags = {nullptr, nullptr};
};

const std::array kRefusals = {
    Refusal{{true, false, false},
            [](const Config& c) { return c.parallel.ulysses_degree > 1; },
            [](const Config& c, TrainRuntime) {
              return fmt::format(
                  "infinipipe train does not run Ulysses sequence parallelism (ulysses = {}); "
                  "drop --ulysses-degree (the planner and simulator study it)",
                  c.parallel.ulysses_degree);
            }},
    Refusal{{true, true, true},
            [](const Config& c) { return c.parallel.zero_stage != 1; },
            [](const Config& c, TrainRuntime r) {
              return fmt::format(
                  "{} keeps a stage's weights and gradients whole (zero-stage = {}); drop "
                  "--zero-stage (ZeRO-3 inside a stage is for `plan` and `simulate`)",
                  runtime_name(r), c.parallel.zero_stage);
            }},
    Refusal{{true, false, false}, [](const Config& c) { return c.training.bf16; },
            [](const Config&, TrainRuntime) -> std::string {
              return "--bf16 plans bf16 activations for GPU presets, but CPU training runs in "
                     "fp32; drop --bf16 for `infinipipe train`";
            }},
    // infinipipe.torch's own modules compute what the engine computes.
    Refusal{{true, true, false},
            [](const Config& c) { return !engine_unsupported(c.model).empty(); },
            [](const Config& c, TrainRuntime r) {
              if (r == TrainRuntime::engine) return engine_unsupported_message(c.model);
              return fmt::format(
                  "infinipipe.torch's own modules compute the Llama architecture; {} needs the "
                  "folder's own modelling code: --hf-model DIR",
                  engine_unsupported(c.model));
            }},
    // The links are measured over MPI, by the C++ trainer's ranks.
    Refusal{{false, true, true},
            [](const Config& c) {
              return c.cluster.measure_links ||
                     c.cluster.measure_links_interval != ClusterConfig{}.measure_links_interval;
            },
            [](const Config&, TrainRuntime) -> std::string {
              return "the PyTorch trainer times links by the configuration (it measures none), "
                     "so --rank-placement auto ranks the orders by bytes; --measure-links and "
                     "--measure-links-interval are `infinipipe train`'s: drop them";
            },
            {"--measure-links", "--measure-links-interval"}},
};

}  // namespace

std::vector<std::string> train_config_problems(const Config& cfg, int world_size,
                                               TrainRuntime runtime,
                                               const std::vector<std::string>& given) {
  std::vector<std::string> out;
  const ParallelConfig& p = cfg.parallel;
  // The PyTorch trainer's world is pp × dp × Ulysses, checked when its groups are made.
  if (runtime == TrainRuntime::engine && world_size > 0 &&
      p.pipeline_parallel * p.data_parallel != world_size) {
    out.push_back(fmt::format(
        "pipeline-model-parallel-size × data-parallel-size must equal the number of processes: "
        "pp = {} × dp = {} = {}, but {} running; {}",
        p.pipeline_parallel, p.data_parallel, p.pipeline_parallel * p.data_parallel,
        world_size == 1 ? "one process is" : fmt::format("{} processes are", world_size),
        world_size == 1 ? "run it as `mpirun -np N infinipipe train ...` with N = pp × dp"
                        : "change the degrees or the -np of mpirun"));
  }
  const auto named = [&](const Refusal& r) {
    return std::any_of(given.begin(), given.end(), [&](const std::string& g) {
      return std::any_of(r.flags.begin(), r.flags.end(),
                         [&](const char* f) { return f != nullptr && g == f; });
    });
  };
  for (const Refusal& r : kRefusals) {
    if (r.refused_by[static_cast<size_t>(runtime)] && (r.applies(cfg) || named(r)))
      out.push_back(r.message(cfg, runtime));
  }
  return out;
}

std::vector<std::string> train_run_problems(const Config& cfg, int world_size,
                                            TrainRuntime runtime,
                                            const std::vector<std::string>& given) {
  std::vector<std::string> out = train_config_problems(cfg, world_size, runtime, given);
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

void train_check_config(const Config& cfg, int world_size, TrainRuntime runtime) {
  const std::vector<std::string> problems = train_run_problems(cfg, world_size, runtime);
  if (!problems.empty()) throw ConfigError(problems.front());
}

}  // namespace infinipipe::runtime
