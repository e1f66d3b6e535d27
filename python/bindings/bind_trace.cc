// The Chrome traces `infinipipe train --trace DIR` writes (obs/trace.h), written by the PyTorch
// trainer from its measured actions, so `infinipipe report DIR` reads either runtime's run.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <tuple>

#include "bindings.h"
#include "core/error.h"
#include "obs/metrics.h"
#include "obs/trace.h"
#include "runtime/train.h"

namespace py = pybind11;

namespace infinipipe::python {
namespace {

// Python's time.monotonic() and std::chrono::steady_clock read the same clock on Linux.
obs::TraceClock::time_point at(double monotonic_s) {
  return obs::TraceClock::time_point(std::chrono::duration_cast<obs::TraceClock::duration>(
      std::chrono::duration<double>(monotonic_s)));
}

std::unique_ptr<obs::TraceWriter> writer_open(const std::string& dir, int32_t world_rank,
                                              int32_t pp, int32_t dp, int32_t stage,
                                              int32_t replica, const std::string& config_yaml,
                                              const std::string& schedule, double origin_s,
                                              const std::string& iterations,
                                              const std::string& calibration) {
  obs::TraceProcess who;
  who.world_rank = world_rank;
  who.pp = pp;
  who.dp = dp;
  who.stage = stage;
  who.replica = replica;
  who.one_process = pp * dp == 1;
  return std::make_unique<obs::TraceWriter>(
      dir, who, config_yaml, schedule, at(origin_s),
      iterations.empty() ? obs::TraceIterations{} : obs::trace_iterations_parse(iterations),
      calibration);
}

// This rank's measured actions as the C++ executor records them: (index in plan.actions[stage],
// start, end) in seconds since `step_start_s`.
obs::StepStats rank_stats(const plan::Plan& plan, int32_t stage,
                          const std::vector<std::tuple<int64_t, double, double>>& actions,
                          double step_start_s) {
  if (stage < 0 || stage >= static_cast<int32_t>(plan.actions.size()))
    fail_config("rank {} is outside the plan's {} pipeline ranks", stage, plan.actions.size());
  const auto& list = plan.actions[static_cast<size_t>(stage)];
  obs::StepStats stats;
  stats.t0 = at(step_start_s);
  for (const auto& [index, start, end] : actions) {
    if (index < 0 || index >= static_cast<int64_t>(list.size()))
      fail_config("action {} is outside rank {}'s {} actions", index, stage, list.size());
    obs::ActionTiming t;
    t.action = list[static_cast<size_t>(index)];
    t.start_s = start;
    t.end_s = end;
    stats.timings.push_back(t);
  }
  return stats;
}

// This rank's iteration: its actions (rank_stats), host events (category, name, start, end) in
// seconds since `step_start_s`, and on the planning rank the plan's explanation (JSON; "" none).
bool iteration_add(obs::TraceWriter& w, const obs::IterationMetrics& m, const plan::Plan& plan,
                   int32_t stage, const std::vector<std::tuple<int64_t, double, double>>& actions,
                   const std::vector<std::tuple<std::string, std::string, double, double>>& events,
                   double loss_sum, int64_t predicted_tokens, double step_start_s,
                   double step_end_s, const std::string& explain) {
  obs::StepStats stats = rank_stats(plan, stage, actions, step_start_s);
  stats.loss_sum = loss_sum;
  stats.predicted_tokens = predicted_tokens;
  for (const auto& [category, name, start, end] : events)
    obs::trace_event_add(stats, category, name, at(step_start_s + start), at(step_start_s + end));
  const nlohmann::json why = explain.empty() ? nlohmann::json() : nlohmann::json::parse(explain);
  return w.iteration_add(m, plan, {stats}, at(step_start_s), at(step_end_s),
                         why.is_null() ? nullptr : &why);
}

}  // namespace

void bind_trace(py::module_& m) {
  py::class_<obs::TraceWriter>(m, "TraceWriter",
                               "One rank's Chrome trace of a run (DIR/trace-rankNNNNN.json, the "
                               "plans, config.yaml), as `infinipipe train --trace DIR` writes it.")
      .def(py::init(&writer_open), py::arg("dir"), py::arg("world_rank"), py::arg("pp"),
           py::arg("dp"), py::arg("stage"), py::arg("replica"), py::arg("config_yaml"),
           py::arg("schedule"), py::arg("origin"), py::arg("iterations") = "",
           py::arg("calibration") = "",
           "`origin`: the run's start, time.monotonic() seconds (the same on every rank's clock); "
           "`iterations`: --trace-iterations ('A-B' or 'N'; default the first 50); "
           "`calibration`: the --calibration file the run plans with, copied into DIR.")
      .def("add", &iteration_add, py::arg("metrics"), py::arg("plan"), py::arg("stage"),
           py::arg("actions"), py::arg("events"), py::arg("loss_sum"), py::arg("predicted_tokens"),
           py::arg("step_start"), py::arg("step_end"), py::arg("explain") = "",
           "Appends an iteration (and its plan, from a pipeline's first rank, with `explain`, "
           "PlanResult.explain's JSON, as --trace-explain saves it); False outside the traced "
           "iterations.")
      .def("saves_plan", &obs::TraceWriter::saves_plan, py::arg("iteration"),
           "Whether add() saves this process's plan of `iteration` (where an explanation goes).")
      .def_property_readonly("path", &obs::TraceWriter::path);

  m.def(
      "timings_record",
      [](int64_t iteration, double predicted_step_seconds, const plan::Plan& plan, int32_t stage,
         const std::vector<std::tuple<int64_t, double, double>>& actions) {
        return obs::action_timings_to_json(iteration, predicted_step_seconds,
                                           {rank_stats(plan, stage, actions, 0.0)}, stage)
            .dump();
      },
      py::arg("iteration"), py::arg("predicted_step_seconds"), py::arg("plan"), py::arg("stage"),
      py::arg("actions"),
      "One line of `train --timings FILE`: this rank's actions of `plan` (index in "
      "plan.actions[stage], start, end in seconds since the step began) next to their "
      "predictions.");
  m.def("rank_path", &runtime::train_rank_path, py::arg("path"), py::arg("rank"),
        "Where rank `rank` writes what rank 0 writes to `path`, as `infinipipe train` names it: "
        "DIR/metrics.jsonl -> DIR/metrics-rank00003.jsonl.");
}

}  // namespace infinipipe::python
