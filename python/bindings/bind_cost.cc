// CostModel (time and memory of chunks on stages, from a device preset or a calibration) and
// CostFeedback, the online fit a runtime feeds with the action times it measured.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "core/error.h"
#include "cost/calibration.h"
#include "profile/profile.h"
#include "runtime/cost_feedback.h"

namespace py = pybind11;

namespace infinipipe::python {
namespace {

// One measured action: its rank's action index in the plan and its interval in seconds.
std::vector<obs::ActionTiming> timings_of(const plan::Plan& plan, int32_t rank,
                                          const std::vector<std::pair<int64_t, double>>& measured) {
  if (rank < 0 || rank >= static_cast<int32_t>(plan.actions.size()))
    fail_config("rank {} is outside the plan's {} pipeline ranks", rank, plan.actions.size());
  const auto& actions = plan.actions[static_cast<size_t>(rank)];
  std::vector<obs::ActionTiming> out;
  double clock = 0;
  for (const auto& [index, seconds] : measured) {
    if (index < 0 || index >= static_cast<int64_t>(actions.size()))
      fail_config("action {} is outside rank {}'s {} actions", index, rank, actions.size());
    obs::ActionTiming t;
    t.action = actions[static_cast<size_t>(index)];
    t.start_s = clock;
    t.end_s = clock + seconds;
    clock = t.end_s;
    out.push_back(t);
  }
  return out;
}

runtime::CostFeedback::Share share_of(const std::vector<double>& summed) {
  runtime::CostFeedback::Share s{};
  if (summed.size() != s.size())
    fail_config("a summed share has {} numbers, not {}", summed.size(), s.size());
  std::copy(summed.begin(), summed.end(), s.begin());
  return s;
}

}  // namespace

void bind_cost(py::module_& m) {
  m.def("gpu_preset", &cost::gpu_preset, py::arg("reported_name"),
        "The device preset of a GPU by the name PyTorch reports (torch.cuda.get_device_name()), "
        "e.g. 'NVIDIA H100 80GB HBM3' -> 'h100-80gb'; '' for a GPU without a preset.");
  py::class_<cost::CostModel>(m, "CostModel",
                              "Predicted time and memory of chunks on stages for one model and "
                              "device: the planner's and simulator's view of the hardware.")
      .def_static("from_config", &profile::planning_cost_model, py::arg("config"),
                  "What `infinipipe plan` uses: the configured device preset or --calibration "
                  "file, with the CPU engine's memory terms on the cpu device.")
      .def_property_readonly("device", [](const cost::CostModel& c) { return c.device().name; });

  py::class_<runtime::CostFeedback>(
      m, "CostFeedback",
      "The online refit of one rank: observe() the actions it ran, sum share() over the ranks of "
      "its pipeline, then next_cost_model(summed) gives the model the next plans use.")
      .def(py::init<const cost::CostModel&>(), py::arg("prior"))
      .def(
          "observe",
          [](runtime::CostFeedback& f, const plan::Plan& plan, const cost::CostModel& plan_cost,
             const Config& cfg, int32_t rank,
             const std::vector<std::pair<int64_t, double>>& measured) {
            return f.observe(plan, plan_cost, cfg, timings_of(plan, rank, measured));
          },
          py::arg("plan"), py::arg("plan_cost"), py::arg("config"), py::arg("rank"),
          py::arg("measured"),
          "Feeds rank `rank`'s measured actions of `plan` (planned with `plan_cost`): a list of "
          "(index in plan.actions[rank], seconds). Returns a note when the batch went beyond the "
          "lengths fitted so far, else ''.")
      .def(
          "share",
          [](const runtime::CostFeedback& f) {
            const auto s = f.share();
            return std::vector<double>(s.begin(), s.end());
          },
          "This rank's part of the pipeline's pool: sum these vectors over the pipeline's ranks.")
      .def(
          "next_cost_model",
          [](const runtime::CostFeedback& f, const std::vector<double>& summed) {
            return f.next_cost_model(f.pool(share_of(summed)));
          },
          py::arg("summed"), "The cost model of the pipeline's next plans, from the summed shares.")
      .def(
          "calibration_json",
          [](const runtime::CostFeedback& f, const std::vector<double>& summed,
             const std::string& notes) {
            return cost::calibration_to_json(
                cost::online_calibration(f.prior(), f.pool(share_of(summed)),
                                         profile::machine_name(), profile::utc_now(), notes));
          },
          py::arg("summed"), py::arg("notes") = "",
          "What the pipeline learned, as a calibration file for --calibration (the prior's links "
          "and memory, the pooled time terms).")
      .def_property_readonly("samples", [](const runtime::CostFeedback& f) {
        return f.fit().num_samples(false) + f.fit().num_samples(true);
      });
}

}  // namespace infinipipe::python
