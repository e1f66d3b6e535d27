// The per-iteration metrics record `infinipipe train` writes (metrics.jsonl, the progress line),
// filled by the PyTorch trainer too, so both runtimes' logs read alike.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "obs/metrics.h"
#include "runlog/metrics_record.h"

namespace py = pybind11;

namespace infinipipe::python {

void bind_metrics(py::module_& m) {
  using obs::IterationMetrics;
  py::class_<IterationMetrics>(m, "IterationMetrics",
                               "One iteration's record: metrics_json() is the metrics.jsonl line, "
                               "str() the progress line.")
      .def(py::init<>())
      .def_readwrite("iteration", &IterationMetrics::iteration)
      .def_readwrite("train_iters", &IterationMetrics::train_iters)
      .def_readwrite("consumed_samples", &IterationMetrics::consumed_samples)
      .def_readwrite("loss", &IterationMetrics::loss)
      .def_readwrite("sequences", &IterationMetrics::sequences)
      .def_readwrite("tokens", &IterationMetrics::tokens)
      .def_readwrite("predicted_tokens", &IterationMetrics::predicted_tokens)
      .def_readwrite("seconds", &IterationMetrics::seconds)
      .def_readwrite("plan_seconds", &IterationMetrics::plan_seconds)
      .def_readwrite("plan_wait_seconds", &IterationMetrics::plan_wait_seconds)
      .def_readwrite("tokens_per_s", &IterationMetrics::tokens_per_s)
      .def_readwrite("lr", &IterationMetrics::lr)
      .def_readwrite("grad_norm", &IterationMetrics::grad_norm)
      .def_readwrite("schedule", &IterationMetrics::schedule)
      .def_readwrite("plan_knobs", &IterationMetrics::plan_knobs)
      .def_readwrite("chunks", &IterationMetrics::chunks)
      .def_readwrite("recompute_layers", &IterationMetrics::recompute_layers)
      .def_readwrite("predicted_step_seconds", &IterationMetrics::predicted_step_seconds)
      .def_readwrite("measured_step_seconds", &IterationMetrics::measured_step_seconds)
      .def_readwrite("predicted_peak_bytes", &IterationMetrics::predicted_peak_bytes)
      .def_readwrite("measured_peak_bytes", &IterationMetrics::measured_peak_bytes)
      .def_readwrite("measured_activation_peak_bytes",
                     &IterationMetrics::measured_activation_peak_bytes)
      .def_readwrite("memory_budget", &IterationMetrics::memory_budget)
      .def_readwrite("rss_peak_bytes", &IterationMetrics::rss_peak_bytes)
      .def_readwrite("valid_loss", &IterationMetrics::valid_loss)
      .def_readwrite("valid_tokens", &IterationMetrics::valid_tokens)
      .def_readwrite("test_loss", &IterationMetrics::test_loss)
      .def_readwrite("test_tokens", &IterationMetrics::test_tokens)
      .def_readwrite("eval_seconds", &IterationMetrics::eval_seconds)
      .def("metrics_json", [](const IterationMetrics& x) { return runlog::metrics_record_to_json(x).dump(); })
      .def("__str__", &obs::metrics_format_line);
}

}  // namespace infinipipe::python
