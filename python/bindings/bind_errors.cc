// C++ errors as Python exceptions with the CLI's messages: ConfigError (a usage or
// configuration mistake, the CLI's exit 2) is a subclass of Error (a runtime failure, exit 1);
// BudgetError, a budget too small, carries the least budget that fits.
#include <pybind11/pybind11.h>

#include "bindings.h"
#include "core/error.h"
#include "plan/budget_error.h"

namespace py = pybind11;

namespace infinipipe::python {

void bind_errors(py::module_& m) {
  static py::exception<Error> error(m, "Error", PyExc_RuntimeError);
  error.doc() =
      "A runtime failure: bad data, a damaged file, an infeasible plan (the CLI's exit 1).";
  static py::exception<ConfigError> config_error(m, "ConfigError", error.ptr());
  config_error.doc() =
      "A usage or configuration mistake, fixed by changing options or files (the CLI's exit 2).";
  static py::exception<plan::BudgetError> budget_error(m, "BudgetError", config_error.ptr());
  budget_error.doc() =
      "The memory budget is too small: .least_budget (bytes per rank) would fit, .rank binds.";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const plan::BudgetError& e) {
      py::object err = py::reinterpret_borrow<py::object>(budget_error.ptr())(e.what());
      err.attr("least_budget") = e.least_budget();
      err.attr("rank") = e.rank();
      PyErr_SetObject(budget_error.ptr(), err.ptr());
    } catch (const ConfigError& e) {  // PyErr_SetString: the same in every pybind11 version
      PyErr_SetString(config_error.ptr(), e.what());
    } catch (const Error& e) {
      PyErr_SetString(error.ptr(), e.what());
    }
  });
}

}  // namespace infinipipe::python
