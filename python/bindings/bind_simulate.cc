// The simulator (a plan's step on a discrete-event clock) and the parallel layout search.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "core/error.h"
#include "sim/layout_search.h"
#include "sim/layout_search_report.h"
#include "sim/simulator.h"

namespace py = pybind11;

namespace infinipipe::python {

void bind_simulate(py::module_& m) {
  py::class_<sim::StepResult>(m, "StepResult", "A simulated (or measured) step of one plan.")
      .def_readonly("step_time", &sim::StepResult::step_time)
      .def_readonly("bubble_ratio", &sim::StepResult::bubble_ratio)
      .def_readonly("bubble_ratio_mean", &sim::StepResult::bubble_ratio_mean)
      .def_readonly("peak_bytes", &sim::StepResult::peak_bytes)
      .def_readonly("memory_budget", &sim::StepResult::memory_budget)
      .def_readonly("oom", &sim::StepResult::oom)
      .def_readonly("tokens", &sim::StepResult::tokens)
      .def_readonly("tokens_per_second", &sim::StepResult::tokens_per_second)
      .def_readonly("mfu", &sim::StepResult::mfu)
      .def_readonly("hfu", &sim::StepResult::hfu)
      .def_readonly("busy_time", &sim::StepResult::busy_time);

  m.def(
      "simulate",
      [](const plan::Plan& plan, const Config& cfg, const cost::CostModel* cost_model) {
        const cost::CostModel cm = cost_model ? *cost_model : cost::CostModel::from_config(cfg);
        return sim::simulate(plan, cm, cfg);
      },
      py::arg("plan"), py::arg("config"), py::arg("cost_model") = py::none(),
      "Predicts the plan's step: every action at its predicted time, transfers at the links' "
      "time, memory following the plan (as `infinipipe simulate`).");

  m.def(
      "search_layout",
      [](const Config& cfg, const std::vector<std::vector<int64_t>>& batches, int64_t num_devices,
         int64_t devices_per_node, bool exhaustive, int threads) {
        sim::LayoutSpace space;
        space.num_devices = num_devices > 0 ? num_devices : cfg.cluster.num_devices;
        space.devices_per_node =
            devices_per_node > 0 ? devices_per_node : cfg.cluster.devices_per_node;
        space.exhaustive = exhaustive;
        space.threads = threads;
        const cost::CostModel cm = cost::CostModel::from_config(cfg);
        sim::LayoutSearchResult r;
        {
          py::gil_scoped_release release;
          r = sim::layout_search(cfg, cm, space, batches);
        }
        return sim::layout_search_json(r, space).dump();
      },
      py::arg("config"), py::arg("batches"), py::arg("num_devices") = 0,
      py::arg("devices_per_node") = 0, py::arg("exhaustive") = false, py::arg("threads") = 1,
      "Ranks every (pp, vpp, Ulysses degree, dp, schedule) of the cluster by predicted tokens/s "
      "on these global batches (lists of lengths), as `plan --search-layout`; returns the JSON "
      "that `--search-layout --out` writes.");
}

}  // namespace infinipipe::python
