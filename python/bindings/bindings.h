// The parts of `infinipipe._core`, one file each; module.cc calls them in order.
#pragma once

#include <pybind11/pybind11.h>

namespace infinipipe::python {

void bind_errors(pybind11::module_& m);
void bind_config(pybind11::module_& m);
void bind_plan(pybind11::module_& m);
void bind_simulate(pybind11::module_& m);
void bind_cost(pybind11::module_& m);
void bind_model(pybind11::module_& m);
void bind_checkpoint(pybind11::module_& m);
void bind_data(pybind11::module_& m);
void bind_metrics(pybind11::module_& m);
void bind_setup(pybind11::module_& m);
void bind_run(pybind11::module_& m);

}  // namespace infinipipe::python
