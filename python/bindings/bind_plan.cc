// The plan (docs/plan-format.md) as Python values, the planner that makes it for any schedule,
// its JSON, and the data-parallel split of a global batch.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <nlohmann/json.hpp>

#include "bindings.h"
#include "plan/forward_plan.h"
#include "plan/plan.h"
#include "plan/plan_explain.h"
#include "plan/plan_json.h"
#include "plan/planner.h"
#include "plan/schedule_table.h"
#include "runtime/dist_step.h"

namespace py = pybind11;

namespace infinipipe::python {
namespace {

plan::PlanResult plan_batch(const std::vector<int64_t>& lengths, const Config& cfg,
                            const cost::CostModel* cost_model, const std::string& schedule,
                            int32_t threads) {
  const cost::CostModel cm = cost_model ? *cost_model : cost::CostModel::from_config(cfg);
  plan::schedule_check_layout(cfg.parallel);
  const Schedule s = schedule.empty() ? cfg.parallel.schedule : plan::schedule_row(schedule).id;
  py::gil_scoped_release release;  // planning takes a while and touches no Python object
  return plan::make_plan_detailed(cfg, cm, lengths, s, threads);
}

}  // namespace

void bind_plan(py::module_& m) {
  py::class_<plan::Slice>(m, "Slice",
                          "Tokens [offset, offset + len) of sequence `seq`; it attends to the K/V "
                          "of the sequence's earlier tokens (its context).")
      .def_readonly("seq", &plan::Slice::seq)
      .def_readonly("offset", &plan::Slice::offset)
      .def_readonly("len", &plan::Slice::len)
      .def_readonly("seq_len", &plan::Slice::seq_len)
      .def_property_readonly("is_whole", &plan::Slice::is_whole)
      .def_property_readonly("is_tail", &plan::Slice::is_tail)
      .def_property_readonly("is_split", &plan::Slice::is_split, "Not the sequence's last slice.")
      .def("__repr__", [](const plan::Slice& s) {
        return "Slice(seq=" + std::to_string(s.seq) + ", offset=" + std::to_string(s.offset) +
               ", len=" + std::to_string(s.len) + ", seq_len=" + std::to_string(s.seq_len) + ")";
      });
  py::class_<plan::Chunk>(m, "Chunk",
                          "What a stage runs forward and backward: whole sequences (batched), "
                          "one non-final slice (split), or a tail slice with whole sequences "
                          "(hybrid).")
      .def_readonly("id", &plan::Chunk::id)
      .def_readonly("slices", &plan::Chunk::slices)
      .def_property_readonly("kind",
                             [](const plan::Chunk& c) { return plan::chunk_kind_name(c.kind()); })
      .def_property_readonly("tokens", &plan::Chunk::tokens);
  py::class_<plan::Action>(m, "Action",
                           "A forward or a backward of one chunk on one (virtual) stage, with the "
                           "layers it recomputes and its predicted seconds.")
      .def_property_readonly("kind",
                             [](const plan::Action& a) { return plan::action_kind_name(a.kind); })
      .def_readonly("chunk", &plan::Action::chunk)
      .def_readonly("stage", &plan::Action::stage)
      .def_readonly("recompute_layers", &plan::Action::recompute_layers)
      .def_readonly("predicted_time", &plan::Action::predicted_time)
      .def("__repr__", [](const plan::Action& a) {
        return std::string("Action(") + plan::action_kind_name(a.kind) +
               ", chunk=" + std::to_string(a.chunk) + ", stage=" + std::to_string(a.stage) +
               ", recompute_layers=" + std::to_string(a.recompute_layers) + ")";
      });
  py::class_<plan::StageSpec>(m, "Stage",
                              "A contiguous range of layers; stage s runs on pipeline "
                              "rank s % pp.")
      .def_readonly("index", &plan::StageSpec::index)
      .def_readonly("rank", &plan::StageSpec::rank)
      .def_readonly("first_layer", &plan::StageSpec::first_layer)
      .def_readonly("num_layers", &plan::StageSpec::num_layers)
      .def_readonly("has_embedding", &plan::StageSpec::has_embedding)
      .def_readonly("has_lm_head", &plan::StageSpec::has_lm_head);
  py::class_<plan::Plan>(m, "Plan",
                         "Everything decided about one global batch of one replica: chunks, "
                         "stages, one action list per pipeline rank, recompute and predictions.")
      .def_readonly("schedule", &plan::Plan::schedule)
      .def_readonly("pp", &plan::Plan::pp)
      .def_readonly("vpp", &plan::Plan::vpp)
      .def_readonly("seq_lengths", &plan::Plan::seq_lengths)
      .def_readonly("chunks", &plan::Plan::chunks)
      .def_readonly("pipeline_of_chunk", &plan::Plan::pipeline_of_chunk)
      .def_readonly("stages", &plan::Plan::stages)
      .def_readonly("actions", &plan::Plan::actions, "Per pipeline rank, in execution order.")
      .def_readonly("predicted_peak_bytes", &plan::Plan::predicted_peak_bytes)
      .def_readonly("predicted_step_time", &plan::Plan::predicted_step_time)
      .def_readonly("memory_budget", &plan::Plan::memory_budget)
      .def_readonly("forward_only", &plan::Plan::forward_only)
      .def_property_readonly("num_pipelines", &plan::Plan::num_pipelines)
      .def_property_readonly("num_tokens", &plan::Plan::num_tokens)
      .def(
          "to_json", [](const plan::Plan& p) { return plan::plan_to_json(p).dump(); },
          "The versioned plan JSON (docs/plan-format.md), as `plan --out` writes it.")
      .def_static(
          "from_json",
          [](const std::string& text) {
            nlohmann::json j;
            try {
              j = nlohmann::json::parse(text);
            } catch (const nlohmann::json::exception& e) {
              fail("plan JSON: {}", e.what());
            }
            return plan::plan_from_json(j);
          },
          py::arg("text"), "A plan from its JSON; Error naming what is wrong otherwise.")
      .def("save", py::overload_cast<const plan::Plan&, const std::string&>(&plan::plan_save),
           py::arg("path"), "Writes the plan JSON atomically.")
      .def_static("load", &plan::plan_load, py::arg("path"));

  py::class_<plan::PlanResult>(m, "PlanResult", "A plan and the setting the search chose.")
      .def_readonly("plan", &plan::PlanResult::plan)
      .def_property_readonly("setting",
                             [](const plan::PlanResult& r) { return r.knobs.describe(); })
      .def(
          "explain",
          [](const plan::PlanResult& r, const Config& cfg, const cost::CostModel& cm) {
            plan::PlanExplain ex = r.explain;
            plan::explain_chosen_plan(ex, r.plan, cfg, cm);
            return plan::explain_to_json(ex).dump();
          },
          py::arg("config"), py::arg("cost_model"),
          "The plan's explanation as JSON (the planner's candidates, the chosen plan's cuts, "
          "packs and recompute; `plan --explain`), given the cost model it was planned with.");

  m.def("plan", &plan_batch, py::arg("lengths"), py::arg("config"),
        py::arg("cost_model") = py::none(), py::arg("schedule") = "", py::arg("threads") = 1,
        "Plans one global batch (one replica's share) of sequences of these lengths with the "
        "configuration's schedule (or `schedule`), as `infinipipe plan` does: EPP searches its "
        "slicing, packing, grouping and recompute; a baseline tunes its knobs. The plan passed "
        "validation. BudgetError when nothing fits the memory budget.");
  m.def("plan_forward_only", &plan::plan_forward_only, py::arg("plan"), py::arg("cost_model"),
        py::arg("config"),
        "The evaluation plan of a training plan: its chunks and each rank's forwards in its "
        "order, no backward, recompute or gradient (the validation loss runs through it).");
  m.def(
      "replica_split",
      [](const std::vector<int64_t>& lengths, int64_t dp, const cost::CostModel& cm,
         const Config& cfg) { return runtime::dist_replica_split(lengths, dp, cm, cfg); },
      py::arg("lengths"), py::arg("dp"), py::arg("cost_model"), py::arg("config"),
      "The data-parallel split `train` makes of a global batch: per replica, the indices of its "
      "sequences (balanced by predicted cost; the same on every rank).");
}

}  // namespace infinipipe::python
