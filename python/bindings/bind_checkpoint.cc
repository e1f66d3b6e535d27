// infinipipe checkpoints (docs/checkpoints.md) and Hugging Face model folders, read and written
// by the same code as `infinipipe train`, so a run saved by either runtime resumes in the other.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <map>
#include <tuple>

#include <nlohmann/json.hpp>

#include "bindings.h"
#include "ckpt/checkpoint.h"
#include "ckpt/hf_export.h"
#include "ckpt/hf_folder.h"
#include "ckpt/safetensors.h"
#include "core/error.h"
#include "model/optimizer.h"
#include "runtime/checkpoint_meta.h"

namespace py = pybind11;

namespace infinipipe::python {
namespace {

using Array = py::array_t<float, py::array::c_style | py::array::forcecast>;

std::vector<int64_t> shape_of(const Array& a) {
  return {a.shape(), a.shape() + a.ndim()};
}

nlohmann::json json_or_empty(const std::string& text, const char* what) {
  if (text.empty()) return nlohmann::json::object();
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail_config("{} is not JSON: {}", what, e.what());
  }
}

// One writer's shard: its parameters and, with an optimizer, the whole states it saves (of its
// parameters, or with a sharded optimizer of those it owns): name -> (step, exp_avg,
// exp_avg_sq), moments empty for SGD; `shapes` names a state's shape where its parameter is not
// in `params` and its moments are empty.
void save_shard(const std::string& dir, int64_t iteration, int64_t rank, int64_t num_ranks,
                const std::map<std::string, Array>& params, const Config& cfg,
                const std::map<std::string, std::tuple<int64_t, Array, Array>>& states,
                bool with_optimizer, const std::string& rank_state,
                const std::map<std::string, py::bytes>& small_files, int64_t model_part,
                int64_t model_parts, const std::map<std::string, std::vector<int64_t>>& shapes) {
  CheckpointShard shard;
  shard.rank = rank;
  shard.num_ranks = num_ranks;
  shard.model_part = model_part;
  shard.model_parts = model_parts;
  for (const auto& [name, a] : params)
    shard.params.push_back({name, shape_of(a), {a.data(), static_cast<size_t>(a.size())}});
  // The optimizer names the kind; the states go as they are.
  const ParamOptimizer optimizer(OptimizerOptions::from_config(cfg.training));
  std::vector<CheckpointOptimState> saved;
  for (const auto& [name, st] : states) {
    const auto& [step, m, v] = st;
    std::vector<int64_t> shape = shape_of(m);
    if (const auto s = shapes.find(name); s != shapes.end()) shape = s->second;
    if (const auto p = params.find(name); p != params.end()) shape = shape_of(p->second);
    saved.push_back({name,
                     shape,
                     step,
                     {m.data(), static_cast<size_t>(m.size())},
                     {v.data(), static_cast<size_t>(v.size())}});
  }
  if (with_optimizer) {
    shard.optimizer = &optimizer;
    shard.optimizer_states = std::move(saved);
  }
  shard.rank_state = json_or_empty(rank_state, "rank_state");
  for (const auto& [name, bytes] : small_files) shard.small_files[name] = std::string(bytes);
  py::gil_scoped_release release;
  checkpoint_save_shard(dir, iteration, shard);
}

void commit(const std::string& dir, const Config& cfg, const std::string& config_yaml,
            int64_t iteration, int64_t consumed_samples, const std::string& delay_state) {
  const CheckpointMeta meta =
      runtime::checkpoint_meta(cfg, config_yaml, runtime::checkpoint_tokenizer(cfg), iteration,
                               consumed_samples, json_or_empty(delay_state, "delay_state"));
  py::gil_scoped_release release;
  checkpoint_commit(dir, meta);
}

py::dict read_params(CheckpointReader& r, const std::vector<std::string>& names) {
  py::dict out;
  for (const std::string& name : names) {
    std::vector<int64_t> shape;
    const std::vector<float> v = r.read_param(name, shape);
    Array a(shape);
    std::memcpy(a.mutable_data(), v.data(), sizeof(float) * v.size());
    out[py::str(name)] = a;
  }
  return out;
}

// The saved optimizer state of `names`: name -> (step, exp_avg, exp_avg_sq); empty when the
// checkpoint was saved before the first update.
py::dict read_optimizer(CheckpointReader& r, const Config& cfg,
                        const std::vector<std::string>& names) {
  std::vector<std::vector<float>> holders;
  std::vector<CheckpointTarget> targets;
  holders.reserve(names.size());
  for (const std::string& name : names) {
    std::vector<int64_t> shape = r.param_shape(name);
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    holders.emplace_back(static_cast<size_t>(n));
    targets.push_back({name, shape, holders.back()});
  }
  ParamOptimizer optimizer(OptimizerOptions::from_config(cfg.training));
  r.load_optimizer(targets, optimizer);
  py::dict out;
  for (const CheckpointTarget& t : targets) {
    if (!optimizer.has_state(t.name)) continue;
    const OptimState& s = optimizer.state(t.name);
    Array m(t.shape), v(t.shape);
    if (!s.exp_avg.empty()) {
      std::memcpy(m.mutable_data(), s.exp_avg.data(), sizeof(float) * s.exp_avg.size());
      std::memcpy(v.mutable_data(), s.exp_avg_sq.data(), sizeof(float) * s.exp_avg_sq.size());
    }
    out[py::str(t.name)] = py::make_tuple(s.step, m, v);
  }
  return out;
}

py::tuple read_hf(const std::string& dir) {
  HfModelReader r(dir);
  std::vector<std::vector<float>> holders;
  std::vector<CheckpointTarget> targets;
  const std::vector<std::string> names = r.param_names();
  holders.reserve(names.size());
  for (const std::string& name : names) {
    const std::vector<int64_t> shape = r.info(name).shape;
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    holders.emplace_back(static_cast<size_t>(n));
    targets.push_back({name, shape, holders.back()});
  }
  r.load_params(targets);
  py::dict out;
  for (size_t i = 0; i < targets.size(); ++i) {
    Array a(targets[i].shape);
    std::memcpy(a.mutable_data(), holders[i].data(), sizeof(float) * holders[i].size());
    out[py::str(names[i])] = a;
  }
  return py::make_tuple(r.model(), out);
}

}  // namespace

void bind_checkpoint(py::module_& m) {
  m.def("checkpoint_latest", &checkpoint_find_latest, py::arg("dir"),
        "The iteration --load resumes from (the newest complete checkpoint), or None.");
  m.def("checkpoint_save_shard", &save_shard, py::arg("dir"), py::arg("iteration"), py::arg("rank"),
        py::arg("num_ranks"), py::arg("params"), py::arg("config"),
        py::arg("optimizer_states") = std::map<std::string, std::tuple<int64_t, Array, Array>>{},
        py::arg("with_optimizer") = true, py::arg("rank_state") = "",
        py::arg("small_files") = std::map<std::string, py::bytes>{}, py::arg("model_part") = -1,
        py::arg("model_parts") = 0,
        py::arg("shapes") = std::map<std::string, std::vector<int64_t>>{},
        "Step 1 of a save, on every writer: its parameters (name -> float32 array; each saved "
        "by exactly one writer) and the optimizer states it saves (name -> (step, exp_avg, "
        "exp_avg_sq); each saved by exactly one writer) into DIR/iter_NNNNNNN. With a sharded "
        "optimizer every rank writes (rank = world rank) and `model_part` of `model_parts` "
        "names the model file of the writers that hold parameters.");
  m.def("checkpoint_commit", &commit, py::arg("dir"), py::arg("config"), py::arg("config_yaml"),
        py::arg("iteration"), py::arg("consumed_samples"), py::arg("delay_state") = "",
        "Step 2, on one process after every writer saved: checks the shards, writes config.json, "
        "the indexes and state.json, then moves DIR/latest.");

  py::class_<CheckpointReader>(m, "CheckpointReader",
                               "A committed checkpoint (checksums verified as files are read).")
      .def(py::init<const std::string&, int64_t>(), py::arg("dir"), py::arg("iteration") = -1)
      .def_property_readonly("path", &CheckpointReader::path)
      .def_property_readonly("iteration", &CheckpointReader::iteration)
      .def_property_readonly("consumed_samples", &CheckpointReader::consumed_samples)
      .def(
          "check_samples",
          [](const CheckpointReader& r, const Config& cfg) {
            runtime::checkpoint_samples_check(cfg, r.rng(), r.path());
          },
          py::arg("config"),
          "ConfigError unless the run's samples (whole documents, or --long-documents split "
          "pieces) are those the checkpoint's data position counts.")
      .def_property_readonly("num_ranks", &CheckpointReader::num_ranks)
      .def_property_readonly("model", &CheckpointReader::model)
      .def_property_readonly("optimizer_kind", &CheckpointReader::optimizer_kind)
      .def_property_readonly(
          "config_yaml",
          [](const CheckpointReader& r) { return r.config().value("yaml", std::string()); })
      .def_property_readonly("delay_state",
                             [](const CheckpointReader& r) {
                               return r.rng().contains("outlier_delay")
                                          ? r.rng().at("outlier_delay").dump()
                                          : std::string();
                             })
      .def("rank_state",
           [](const CheckpointReader& r, int64_t rank) { return r.rank_state(rank).dump(); })
      .def("param_names", &CheckpointReader::param_names)
      .def("read_params", &read_params, py::arg("names"),
           "name -> float32 array of the saved values (any layout wrote them).")
      .def("read_optimizer", &read_optimizer, py::arg("config"), py::arg("names"),
           "name -> (step, exp_avg, exp_avg_sq) of the saved optimizer state.")
      .def("has_file", &CheckpointReader::has_file, py::arg("file"))
      .def(
          "read_file",
          [](CheckpointReader& r, const std::string& file) { return py::bytes(r.read_file(file)); },
          py::arg("file"))
      .def("check_model", &CheckpointReader::check_model, py::arg("model"),
           "ConfigError naming every field in which the saved model differs.");

  m.def("hf_folder_is", &hf_folder_is, py::arg("dir"));
  m.def("read_hf", &read_hf, py::arg("dir"),
        "A Hugging Face Llama folder: (ModelConfig, name -> float32 array).");
  m.def(
      "export_hf",
      [](const std::string& checkpoint_dir, const std::string& out, const std::string& dtype) {
        HfExportOptions o;
        if (dtype == "bf16") {
          o.dtype = HfExportDtype::bf16;
        } else if (dtype != "fp32") {
          fail_config("dtype '{}': choose fp32 or bf16", dtype);
        }
        return hf_export(checkpoint_dir, out, o).iteration;
      },
      py::arg("checkpoint_dir"), py::arg("out"), py::arg("dtype") = "fp32",
      "`infinipipe checkpoint export`: the newest checkpoint as a clean Hugging Face folder.");
}

}  // namespace infinipipe::python
