// The training split's global batches exactly as `infinipipe train` draws them (blends, splits,
// the seeded order, truncation, --outlier-delay), with their tokens.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bindings.h"
#include "core/error.h"
#include "cost/cost_model.h"
#include "data/run_datasets.h"
#include "data/training_batches.h"
#include "plan/replica_price.h"
#include "runtime/data_tokenizer_check.h"

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

// The global batches `train` evaluates: --eval-iters of them from the validation split,
// continuing where evaluation `index` starts (index × eval-iters batches in; a resumed run
// evaluates the same documents), or the test split from its start.
class EvalBatches {
 public:
  explicit EvalBatches(const Config& cfg)
      : cfg_(cfg), sets_(data::RunDatasets::open(data::data_flags(cfg))) {}

  bool has(const std::string& split) const {
    return cfg_.training.eval_iters > 0 && sets_.has(split_of(split));
  }

  std::vector<std::vector<std::vector<int32_t>>> batches(const std::string& split,
                                                         int64_t index) const {
    const data::DataSplit s = split_of(split);
    const TrainingConfig& t = cfg_.training;
    data::DocumentStream stream = sets_.stream(s, t.global_batch_size, uint64_t(t.seed));
    if (s == data::DataSplit::valid)
      stream.set_consumed_samples(index * t.eval_iters * t.global_batch_size);
    std::vector<std::vector<std::vector<int32_t>>> out;
    for (int64_t i = 0; i < t.eval_iters; ++i) {
      std::vector<std::vector<int32_t>> batch;
      for (const data::DocumentRef& doc : stream.next()) {
        const int64_t n = std::min(sets_.document_length(s, doc), cfg_.model.seq_length);
        if (n > 0) batch.push_back(sets_.document_tokens(s, doc, n));
      }
      out.push_back(std::move(batch));
    }
    return out;
  }

 private:
  static data::DataSplit split_of(const std::string& split) {
    if (split == "validation") return data::DataSplit::valid;
    if (split == "test") return data::DataSplit::test;
    fail_config("split '{}': choose validation or test", split);
  }

  Config cfg_;
  data::RunDatasets sets_;
};

}  // namespace

void bind_data(py::module_& m) {
  m.def("run_samples_message", &data::run_samples_message, py::arg("config"),
        "What a training run says once before it starts: the share of the training split's "
        "tokens truncation drops and how to keep them, or with --long-documents split how many "
        "samples the documents became; '' when nothing.");

  m.def(
      "data_tokenizer_check",
      [](const Config& cfg, const std::vector<std::string>& prefixes) {
        runtime::data_tokenizer_check(cfg.training, prefixes);
      },
      py::arg("config"), py::arg("prefixes"),
      "Raises ConfigError, with `infinipipe train`'s message, when a dataset `data prepare` "
      "wrote (PREFIX.tokenizer_info.json) was tokenized by another tokenizer than the run's.");

  py::class_<EvalBatches>(m, "EvalBatches",
                          "The global batches `train` evaluates on, with their tokens.")
      .def(py::init<const Config&>(), py::arg("config"))
      .def("has", &EvalBatches::has, py::arg("split"),
           "Whether the run evaluates on 'validation' or 'test' (--eval-iters > 0 and documents).")
      .def("batches", &EvalBatches::batches, py::arg("split"), py::arg("index") = 0,
           "--eval-iters global batches (lists of token lists): the validation split from "
           "evaluation `index` on, or the test split from its start.");

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
