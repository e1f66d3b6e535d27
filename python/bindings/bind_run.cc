// The run driver (runtime/run_driver.h) over a backend written in Python: infinipipe.torch's
// trainer hands `run_train` an object that executes plans, steps its optimizer, fills and loads
// its checkpoint shard and runs the collectives over torch.distributed
// (python/infinipipe/torch/backend.py says what each method takes and returns). Everything else
// of the run is the C++ trainer's own code.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "bindings.h"
#include "ckpt/checkpoint.h"
#include "core/error.h"
#include "model/optimizer.h"
#include "obs/metrics.h"
#include "obs/step_stats.h"
#include "obs/trace.h"
#include "runtime/run_backend.h"
#include "runtime/run_driver.h"
#include "runtime/train_capabilities.h"
#include "runtime/train_stop.h"

namespace py = pybind11;

namespace infinipipe::python {
namespace {

using runtime::RunBackend;

// Python's time.monotonic() and std::chrono::steady_clock read the same clock on Linux.
obs::TraceClock::time_point at(double monotonic_s) {
  return obs::TraceClock::time_point(std::chrono::duration_cast<obs::TraceClock::duration>(
      std::chrono::duration<double>(monotonic_s)));
}

// This rank's measured actions as the C++ executor records them: (index in
// plan.actions[stage], start, end) in seconds since `step_start_s` (time.monotonic()).
obs::StepStats rank_stats(const plan::Plan& plan, int32_t stage,
                          const std::vector<std::tuple<int64_t, double, double>>& actions,
                          double step_start_s) {
  if (stage < 0 || stage >= static_cast<int32_t>(plan.actions.size()))
    fail("backend.train: rank {} is outside the plan's {} pipeline ranks", stage,
         plan.actions.size());
  const auto& list = plan.actions[static_cast<size_t>(stage)];
  obs::StepStats stats;
  stats.t0 = at(step_start_s);
  for (const auto& [index, start, end] : actions) {
    if (index < 0 || index >= static_cast<int64_t>(list.size()))
      fail("backend.train: action {} is outside rank {}'s {} actions", index, stage, list.size());
    obs::ActionTiming t;
    t.action = list[static_cast<size_t>(index)];
    t.start_s = start;
    t.end_s = end;
    stats.timings.push_back(t);
  }
  return stats;
}
using Array = py::array_t<float, py::array::c_style | py::array::forcecast>;
using Times = std::vector<std::tuple<int64_t, double, double>>;

std::vector<int64_t> array_shape(const Array& a) {
  return {a.shape(), a.shape() + a.ndim()};
}

// `a`'s values, kept in `storage` until the shard is written.
std::span<const float> kept(const Array& a, std::deque<std::vector<float>>& storage) {
  storage.emplace_back(a.data(), a.data() + a.size());
  return storage.back();
}

class PythonBackend final : public RunBackend {
 public:
  PythonBackend(py::object backend, const Config& cfg)
      : py_(std::move(backend)),
        prior_(py_.attr("prior").cast<cost::CostModel>()),
        load_dir_(cfg.training.load),
        optimizer_(OptimizerOptions::from_config(cfg.training)) {
    const py::dict r = py_.attr("rank")();
    rank_.distributed = r["distributed"].cast<bool>();
    rank_.world_rank = r["world_rank"].cast<int32_t>();
    rank_.world_size = r["world_size"].cast<int32_t>();
    rank_.stage = r["stage"].cast<int32_t>();
    rank_.replica = r["replica"].cast<int32_t>();
    rank_.pp = r["pp"].cast<int64_t>();
    rank_.dp = r["dp"].cast<int64_t>();
    rank_.plans = r["plans"].cast<bool>();
    layout_ = py_.attr("layout").cast<std::vector<plan::StageSpec>>();
  }

  runtime::RunRank rank() const override { return rank_; }
  const cost::CostModel& prior() const override { return prior_; }
  const std::vector<plan::StageSpec>& layout() const override { return layout_; }

  runtime::RunCollectives collectives() override {
    runtime::RunCollectives c;
    if (!rank_.distributed) return c;
    py::object b = py_;
    const auto sum = [b](const char* method) {
      return [b, method](std::span<double> values, const std::string& what) {
        py::gil_scoped_acquire gil;
        const std::vector<double> out =
            b.attr(method)(std::vector<double>(values.begin(), values.end()), what)
                .cast<std::vector<double>>();
        if (out.size() != values.size())
          fail("backend.{} returned {} values for {}", method, out.size(), values.size());
        std::copy(out.begin(), out.end(), values.begin());
      };
    };
    c.cost.pipeline_sum = sum("pipeline_sum");
    c.cost.world_sum = sum("world_sum");
    c.cost.replicas_gather = [b](const std::string& mine, const std::string& what) {
      py::gil_scoped_acquire gil;
      return b.attr("replicas_gather")(py::bytes(mine), what).cast<std::vector<std::string>>();
    };
    c.pipeline_share = [b](std::string text, const std::string& what) {
      py::gil_scoped_acquire gil;
      return b.attr("pipeline_share")(py::bytes(text), what).cast<std::string>();
    };
    c.stop_agree = [b](std::span<int32_t> values, int64_t iteration) {
      py::gil_scoped_acquire gil;
      const std::vector<int32_t> out =
          b.attr("stop_agree")(std::vector<int32_t>(values.begin(), values.end()), iteration)
              .cast<std::vector<int32_t>>();
      if (out.size() != values.size()) fail("backend.stop_agree returned {} values", out.size());
      std::copy(out.begin(), out.end(), values.begin());
    };
    c.barrier = [b](const std::string& what) {
      py::gil_scoped_acquire gil;
      b.attr("barrier")(what);
    };
    return c;
  }

  Executed train(const plan::Plan& plan, std::span<const std::vector<int32_t>> share,
                 double loss_scale, int64_t iteration) override {
    const py::tuple r = py_.attr("train")(plan, sequences(share), loss_scale, iteration);
    Executed e;
    e.stats.push_back(rank_stats(plan, rank_.stage, r[0].cast<Times>(), r[1].cast<double>()));
    e.stats.front().loss_sum = r[2].cast<double>();
    e.stats.front().predicted_tokens = r[3].cast<int64_t>();
    e.loss_sum = r[4].cast<double>();
    e.loss_tokens = r[5].cast<int64_t>();
    e.tail_seconds = r[6].cast<double>();
    e.seconds = r[7].cast<double>();
    return e;
  }

  std::pair<double, int64_t> evaluate(const plan::Plan& plan,
                                      std::span<const std::vector<int32_t>> share,
                                      const std::string& what) override {
    return py_.attr("evaluate")(plan, sequences(share), what).cast<std::pair<double, int64_t>>();
  }

  Update optimizer_step(int64_t completed) override {
    const auto [norm, lr] = py_.attr("optimizer_step")(completed).cast<std::pair<double, double>>();
    return {norm, lr};
  }

  void memory_measured(obs::IterationMetrics& m) override {
    const auto [peak, activations] =
        py_.attr("memory_measured")().cast<std::pair<int64_t, int64_t>>();
    m.measured_peak_bytes = peak;
    m.measured_activation_peak_bytes = activations;
  }

  // The PyTorch trainer does not measure links (--measure-links is the C++ trainer's).
  bool iteration_end(const obs::IterationMetrics&, const plan::Plan&, runtime::CostLoop&) override {
    return false;
  }

  // backend.shard(iteration) -> {"params": {name: array}, "states": {name: (step, exp_avg,
  // exp_avg_sq)}, "shapes": {name: shape}, "rank", "num_ranks", "model_part", "model_parts",
  // "writes", "every_replica_saves"}; the arrays are copied into `storage`.
  ShardPlan shard_fill(CheckpointShard& shard, std::deque<std::vector<float>>& storage,
                       int64_t iteration) override {
    const py::dict d = py_.attr("shard")(iteration);
    shard.rank = d["rank"].cast<int64_t>();
    shard.num_ranks = d["num_ranks"].cast<int64_t>();
    shard.model_part = d["model_part"].cast<int64_t>();
    shard.model_parts = d["model_parts"].cast<int64_t>();
    const auto params = d["params"].cast<std::map<std::string, Array>>();
    const auto shapes = d["shapes"].cast<std::map<std::string, std::vector<int64_t>>>();
    for (const auto& [name, a] : params)
      shard.params.push_back({name, array_shape(a), kept(a, storage)});
    const auto states =
        d["states"].cast<std::map<std::string, std::tuple<int64_t, Array, Array>>>();
    shard.optimizer_states.emplace();
    for (const auto& [name, st] : states) {
      const auto& [step, m, v] = st;
      std::vector<int64_t> shape = array_shape(m);
      if (const auto s = shapes.find(name); s != shapes.end()) shape = s->second;
      if (const auto p = params.find(name); p != params.end()) shape = array_shape(p->second);
      shard.optimizer_states->push_back({name, shape, step, kept(m, storage), kept(v, storage)});
    }
    shard.optimizer = &optimizer_;
    return {d["writes"].cast<bool>(), d["every_replica_saves"].cast<bool>()};
  }

  // Python reads the same checkpoint with its own reader.
  void load(CheckpointReader& reader) override { py_.attr("load")(load_dir_, reader.iteration()); }

  void weights_load(const std::string& dir) override { py_.attr("weights_load")(dir); }

 private:
  static py::list sequences(std::span<const std::vector<int32_t>> share) {
    py::list out;
    for (const std::vector<int32_t>& s : share) out.append(py::cast(s));
    return out;
  }

  py::object py_;
  runtime::RunRank rank_;
  cost::CostModel prior_;
  std::string load_dir_;  // --load: where the checkpoint the driver resumes from is
  std::vector<plan::StageSpec> layout_;
  const ParamOptimizer optimizer_;  // names the optimizer kind in the shards it fills
};

std::vector<obs::IterationMetrics> run_train(
    py::object backend, const Config& cfg, const std::string& config_yaml,
    const std::string& metrics_path, const std::string& timings_path, const std::string& trace_dir,
    const std::string& trace_iterations, bool trace_explain, const std::string& tensorboard_dir,
    bool quiet) {
  runtime::RunOptions o;
  o.config = cfg;
  o.config_yaml = config_yaml;
  o.metrics_path = metrics_path;
  o.timings_path = timings_path;
  o.trace_dir = trace_dir;
  if (!trace_iterations.empty()) o.trace_iterations = obs::trace_iterations_parse(trace_iterations);
  o.trace_explain = trace_explain;
  o.tensorboard_dir = tensorboard_dir;
  o.quiet = quiet;
  const int rank = py::dict(backend.attr("rank")())["world_rank"].cast<int>();
  const runtime::RunOptions opts = runtime::run_options_prepare(o, rank);
  // From here on a signal asks for a stop after the iteration.
  runtime::RunStop stop(opts.config.training);
  PythonBackend b(backend, opts.config);
  runtime::RunDriver driver(opts, b);
  return driver.run(stop);
}

}  // namespace

void bind_run(py::module_& m) {
  m.def("run_train", &run_train, py::arg("backend"), py::arg("config"), py::arg("config_yaml"),
        py::arg("metrics_path") = "", py::arg("timings_path") = "", py::arg("trace_dir") = "",
        py::arg("trace_iterations") = "", py::arg("trace_explain") = false,
        py::arg("tensorboard_dir") = "", py::arg("quiet") = false,
        "The whole training run of `infinipipe train` (its loop, batches, plans, online cost "
        "fit, evaluations, metrics, timings, trace and TensorBoard files, checkpoints and "
        "stops) over `backend`, this rank's runtime (infinipipe.torch.backend.TorchBackend). "
        "Returns the metrics of the iterations run; rank 0 prints as `infinipipe train` does.");
  m.def(
      "train_problems",
      [](const Config& cfg, const std::string& runtime, const std::vector<std::string>& words) {
        runtime::TrainRuntime r = runtime::TrainRuntime::torch;
        if (runtime == "transformers")
          r = runtime::TrainRuntime::transformers;
        else if (runtime == "engine")
          r = runtime::TrainRuntime::engine;
        else if (runtime != "torch")
          fail_config("runtime '{}': engine, torch or transformers", runtime);
        std::vector<std::string> given;
        for (const std::string& w : words) given.push_back(w.substr(0, w.find('=')));
        return runtime::train_run_problems(cfg, 0, r, given);
      },
      py::arg("config"), py::arg("runtime"), py::arg("words") = std::vector<std::string>{},
      "What `runtime` ('engine', 'torch': infinipipe.torch with its own Llama, 'transformers': "
      "with a transformers model's modules) cannot honour of `config` (`words`: its command "
      "line, where a flag given at its default shows), one message each, from the one table "
      "of runtime/train_capabilities.h; [] when it trains it.");
  m.def("metrics_path", &runtime::train_metrics_path, py::arg("metrics"), py::arg("log_dir"),
        py::arg("trace"), py::arg("save"),
        "Where a run's metrics go, as `infinipipe train` decides: --metrics FILE, else "
        "LOG_DIR/metrics.jsonl, else next to the --trace files, else in --save, else '' (none).");
  m.def("rank_path", &runtime::train_rank_path, py::arg("path"), py::arg("rank"),
        "Where rank `rank` writes what rank 0 writes to `path`, as `infinipipe train` names it: "
        "DIR/metrics.jsonl -> DIR/metrics-rank00003.jsonl.");
}

}  // namespace infinipipe::python
