// The training split's global batches exactly as `infinipipe train` draws them (blends, splits,
// the seeded order, truncation, --outlier-delay), with their tokens.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bindings.h"
#include "core/error.h"
#include "cost/cost_model.h"
#include "data/run_datasets.h"
#include "data/training_batches.h"
#include "plan/replica_price.h"

namespace py = pybind11;

namespace infinipipe::python {
namespace {

data::TrainingBatches batches_open(const Config& cfg, const cost::CostModel* cost_model) {
  const TrainingConfig& t = cfg.training;
  data::TrainingBatches b(data::data_flags(cfg), t.global_batch_size, static_cast<uint64_t>(t.seed),
                          cfg.model.seq_length);
  if (cfg.parallel.outlier_delay) {
    if (!cost_model) fail_config("--outlier-delay weighs sequences with a cost model: pass it");
    b.delay_outliers(cfg.parallel.data_parallel, plan::replica_split_cost_fn(cfg, *cost_model));
  }
  return b;
}

}  // namespace

void bind_data(py::module_& m) {
  m.def("run_samples_message", &data::run_samples_message, py::arg("config"),
        "What a training run says once before it starts: the share of the training split's "
        "tokens truncation drops and how to keep them, or with --long-documents split how many "
        "samples the documents became; '' when nothing.");

  py::class_<data::TrainingBatches>(
      m, "TrainingBatches",
      "The run's global batches of the training split, in train's order: next() gives the "
      "tokens of each sequence (one per non-empty document, truncated to --seq-length).")
      .def(py::init(&batches_open), py::arg("config"), py::arg("cost_model") = py::none())
      .def(
          "resume",
          [](data::TrainingBatches& b, int64_t consumed, const std::string& delay_state) {
            b.resume(consumed,
                     delay_state.empty() ? nlohmann::json() : nlohmann::json::parse(delay_state));
          },
          py::arg("consumed_samples"), py::arg("delay_state") = "",
          "Continues after `consumed_samples` documents of the order (a checkpoint's position).")
      .def(
          "next",
          [](data::TrainingBatches& b) {
            const data::TrainingBatches::Batch batch = b.next();
            return b.tokens(batch);
          },
          "The next global batch: a list of token lists.")
      .def_property_readonly("consumed_samples", &data::TrainingBatches::consumed_samples)
      .def_property_readonly("prefixes", &data::TrainingBatches::prefixes,
                             "Every dataset prefix the run's data flags name, each once.")
      .def_property_readonly("delay_state",
                             [](const data::TrainingBatches& b) { return b.delay_state().dump(); });
}

}  // namespace infinipipe::python
