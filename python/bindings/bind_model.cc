// The model's parameters as the C++ engine initialises them (so a run started from a seed holds
// the same weights in either runtime), and the engine's loss and gradients of whole sequences on
// one process: the reference every parallel layout must reproduce (invariant 1).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "bindings.h"
#include "core/error.h"
#include "model/engine.h"
#include "model/params.h"
#include "runtime/executor.h"

namespace py = pybind11;

namespace infinipipe::python {
namespace {

using Array = py::array_t<float, py::array::c_style | py::array::forcecast>;

py::dict arrays_of(ModelParams& params, bool grads) {
  py::dict out;
  for (const ParamRef& p : params.params()) {
    Array a(p.shape);
    std::memcpy(a.mutable_data(), grads ? p.grad : p.value, sizeof(float) * size_t(p.numel));
    out[py::str(p.name)] = a;
  }
  return out;
}

void params_fill(ModelParams& params, const py::dict& values) {
  for (const ParamRef& p : params.params()) {
    if (!values.contains(p.name)) fail_config("the parameters lack '{}'", p.name);
    const Array a = values[py::str(p.name)].cast<Array>();
    std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
    if (shape != p.shape)
      fail_config("parameter '{}' has shape {}, the model needs {}", p.name,
                  fmt::format("{}", fmt::join(shape, "x")),
                  fmt::format("{}", fmt::join(p.shape, "x")));
    std::memcpy(p.value, a.data(), sizeof(float) * size_t(p.numel));
  }
}

StageRange stage_range(const ModelConfig& m, int64_t first_layer, std::optional<int64_t> layers,
                       bool embedding, bool lm_head) {
  StageRange r{first_layer, layers.value_or(m.num_layers - first_layer), embedding, lm_head};
  if (r.first_layer < 0 || r.num_layers < 0 || r.first_layer + r.num_layers > m.num_layers)
    fail_config("layers [{}, {}) are outside the model's {}", r.first_layer,
                r.first_layer + r.num_layers, m.num_layers);
  return r;
}

py::tuple reference_step(const Config& cfg, const py::dict& values,
                         const std::vector<std::vector<int32_t>>& sequences) {
  MemoryTracker tracker;
  StageEngine engine(cfg.model, StageRange::whole(cfg.model), 0, tracker);
  params_fill(engine.params(), values);
  std::vector<int64_t> lengths;
  for (const auto& s : sequences) {
    if (s.empty()) fail_config("a sequence is empty: every sequence needs at least one token");
    lengths.push_back(static_cast<int64_t>(s.size()));
  }
  const int64_t predicted = runtime::batch_predicted_tokens(lengths);
  if (predicted == 0) fail_config("the sequences predict no token (each needs two or more)");
  const double scale = 1.0 / static_cast<double>(predicted);
  double loss_sum = 0;
  {
    py::gil_scoped_release release;
    for (size_t i = 0; i < sequences.size(); ++i) {
      ChunkInput in;
      in.chunk_id = static_cast<int32_t>(i);
      in.slices.push_back({static_cast<int64_t>(i), 0, lengths[i], sequences[i]});
      loss_sum += engine.forward(in, nullptr, 0, scale).loss_sum;
    }
    for (size_t i = sequences.size(); i-- > 0;) engine.backward(static_cast<int32_t>(i), nullptr);
  }
  return py::make_tuple(loss_sum * scale, arrays_of(engine.params(), true));
}

}  // namespace

void bind_model(py::module_& m) {
  m.def(
      "init_params",
      [](const Config& cfg, std::optional<uint64_t> seed, int64_t first_layer,
         std::optional<int64_t> num_layers, bool embedding, bool lm_head) {
        MemoryTracker tracker;
        ModelParams params(cfg.model,
                           stage_range(cfg.model, first_layer, num_layers, embedding, lm_head),
                           seed.value_or(static_cast<uint64_t>(cfg.training.seed)), tracker);
        return arrays_of(params, false);
      },
      py::arg("config"), py::arg("seed") = py::none(), py::arg("first_layer") = 0,
      py::arg("num_layers") = py::none(), py::arg("embedding") = true, py::arg("lm_head") = true,
      "The C++ engine's initial parameters of layers [first_layer, first_layer + num_layers) (and "
      "the embedding / final norm and LM head), by Hugging Face name, as float32 arrays: a "
      "function of (seed, name) only, so every layout and runtime starts alike. With tied "
      "embeddings an LM-head stage without the embedding holds its own copy of "
      "model.embed_tokens.weight.");
  m.def("reference_step", &reference_step, py::arg("config"), py::arg("params"),
        py::arg("sequences"),
        "The C++ engine on one process, every sequence whole: the mean loss over the batch's "
        "predicted tokens and every parameter's gradient (by name). What any pp x dp x schedule "
        "must reproduce.");
}

}  // namespace infinipipe::python
