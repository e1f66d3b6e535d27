// `infinipipe._core`: the C++ planner, cost model, simulator, data and checkpoints for Python.
// The package's __init__.py re-exports it; python/infinipipe/_core.pyi holds the type stubs.
#include "bindings.h"

PYBIND11_MODULE(_core, m) {
  m.doc() =
      "infinipipe's C++ library: configuration (Megatron-LM options), the EPP planner and the "
      "baseline schedules, the cost model and its online fit, the simulator and the layout "
      "search, training data, and checkpoints. See help(infinipipe).";
  infinipipe::python::bind_errors(m);
  infinipipe::python::bind_config(m);
  infinipipe::python::bind_cost(m);
  infinipipe::python::bind_plan(m);
  infinipipe::python::bind_simulate(m);
  infinipipe::python::bind_model(m);
  infinipipe::python::bind_checkpoint(m);
  infinipipe::python::bind_data(m);
  infinipipe::python::bind_metrics(m);
  infinipipe::python::bind_setup(m);
  infinipipe::python::bind_run(m);
}
