// `infinipipe._core` built with INFINIPIPE_PYTHON_PLANNER_ONLY: the planner's parts of module.cc
// (configuration, plans, simulation, cost model and its online fit, metrics records, traces),
// without the engine, checkpoints and training data, whose libraries (oneDNN, MPI, ICU,
// sentencepiece, PCRE2) a GPU machine lacks. Each left-out name stays in the module as a function
// that raises ConfigError saying so, so `import infinipipe` works and a call cannot go wrong.
#include <array>
#include <string>

#include "bindings.h"
#include "core/error.h"

namespace py = pybind11;

namespace {

// What bind_model, bind_checkpoint, bind_data and bind_setup define.
constexpr std::array kLeftOut = {"init_params",         "reference_step",
                                 "CheckpointReader",    "checkpoint_commit",
                                 "checkpoint_latest",   "checkpoint_save_shard",
                                 "hf_folder_is",        "read_hf",
                                 "export_hf",           "TrainingBatches",
                                 "run_samples_message", "train_options_lenient",
                                 "resolve_auto_layout", "rank_order",
                                 "run_train",           "rank_path",
                                 "metrics_path",        "train_problems"};

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() =
      "infinipipe's C++ planner (a planner-only build, INFINIPIPE_PYTHON_PLANNER_ONLY): "
      "configuration (Megatron-LM options), the EPP planner and the baseline schedules, the cost "
      "model and its online fit, the simulator and the layout search. The engine, checkpoints "
      "and training data are not in this build. See help(infinipipe).";
  infinipipe::python::bind_errors(m);
  infinipipe::python::bind_config(m);
  infinipipe::python::bind_cost(m);
  infinipipe::python::bind_plan(m);
  infinipipe::python::bind_simulate(m);
  infinipipe::python::bind_metrics(m);
  m.attr("planner_only") = true;
  const auto refusal = [](const std::string& name) {
    return [name](const py::args&, const py::kwargs&) {
      infinipipe::fail_config(
          "infinipipe.{} is not in this planner-only build of the module "
          "(INFINIPIPE_PYTHON_PLANNER_ONLY, bench/gpu_bundle.sh); use a full build "
          "(cmake --preset release) for the engine, checkpoints and training data",
          name);
    };
  };
  constexpr const char* doc =
      "Not in this planner-only build of the module: raises ConfigError (use a full build).";
  for (const char* name : kLeftOut) m.def(name, refusal(name), doc);
  // Config's methods that read checkpoints and tokenizers (bind_config.cc leaves them out).
  py::object config = m.attr("Config");
  config.attr("for_training") = py::staticmethod(
      py::cpp_function(refusal("Config.for_training"), py::name("for_training"), py::doc(doc)));
  config.attr("with_run_tokenizer") =
      py::cpp_function(refusal("Config.with_run_tokenizer"), py::name("with_run_tokenizer"),
                       py::is_method(config), py::doc(doc));
}
