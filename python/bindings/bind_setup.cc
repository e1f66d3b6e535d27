// The decisions a run is set up with before it starts (src/setup), for the PyTorch trainer: the
// auto layout `infinipipe train --pp auto` searches and the rank order --rank-placement
// decides, on the same code and with the same printed lines.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "bindings.h"
#include "core/config.h"
#include "cost/core_sharing.h"
#include "options/options.h"
#include "setup/rank_order.h"
#include "setup/train_auto_layout.h"
#include "setup/train_config.h"

namespace py = pybind11;

namespace infinipipe::python {
namespace {

struct AutoLayoutResult {
  std::vector<std::string> args;   // the words given, the chosen degrees appended as flags
  std::vector<std::string> lines;  // what the search printed (the layout, the rank order)
};

AutoLayoutResult resolve_auto_layout(
    const std::vector<std::string>& args, int64_t world_size,
    const std::vector<std::tuple<int64_t, int64_t, int64_t>>& hosts, int64_t search_iterations,
    bool search_iterations_given) {
  const options::ParsedArgs parsed = options::parse_config_args(args);
  parsed.options->world_size = world_size;
  AutoLayoutResult out;
  setup::TrainAutoLayout how;
  how.world = static_cast<int>(world_size);
  how.search_iterations = search_iterations;
  how.search_iterations_given = search_iterations_given;
  how.say = [&out](const std::string& line) { out.lines.push_back(line); };
  if (!hosts.empty()) {
    how.hosts = [&hosts] {
      std::vector<cost::RankHost> v;
      for (const auto& [node, cores, ranks] : hosts) v.push_back({node, cores, ranks});
      return v;
    };
  }
  std::string folder;
  const Config defaults = setup::train_defaults(*parsed.options, folder);
  const std::shared_ptr<options::ConfigOptions> resolved =
      setup::train_resolve_auto_layout(parsed.options, defaults, how);
  out.args = args;
  for (size_t i = parsed.options->flags.size(); i < resolved->flags.size(); ++i) {
    out.args.push_back("--" + resolved->flags[i].first);
    out.args.push_back(resolved->flags[i].second);
  }
  return out;
}

}  // namespace

void bind_setup(py::module_& m) {
  m.def(
      "train_options_lenient",
      [](const std::vector<std::string>& args, int64_t world_size) {
        const options::ParsedArgs parsed = options::parse_config_args(args);
        parsed.options->world_size = world_size;
        std::string folder;
        return options::resolve_config_lenient(*parsed.options,
                                               setup::train_defaults(*parsed.options, folder));
      },
      py::arg("args"), py::arg("world_size") = 0,
      "The options as `infinipipe train` reads them before its layout search: over the model "
      "of a Hugging Face folder the run starts from, auto degrees kept, nothing validated (the "
      "device to join the job on before the layout is known). Config.for_training resolves "
      "the run.");
  py::class_<AutoLayoutResult>(m, "AutoLayout",
                               "The layout an auto degree resolved to: the run's words with the "
                               "chosen degrees appended, and the lines the search printed.")
      .def_readonly("args", &AutoLayoutResult::args)
      .def_readonly("lines", &AutoLayoutResult::lines);
  m.def("resolve_auto_layout", &resolve_auto_layout, py::arg("args"), py::arg("world_size"),
        py::arg("hosts") = std::vector<std::tuple<int64_t, int64_t, int64_t>>{},
        py::arg("search_iterations") = 4, py::arg("search_iterations_given") = false,
        "What `infinipipe train --pp auto` (--dp, --vpp auto) does before the run, for "
        "`world_size` ranks: searches the layouts the runtime runs (pp x dp, no Ulysses on CPU) "
        "on the run's first `search_iterations` training batches and returns an AutoLayout, "
        "whose args carry the chosen degrees as flags (the words unchanged when no degree is "
        "auto). `hosts`: per world rank (node, cores, ranks), the lowest rank sharing its CPUs, "
        "how many CPUs they share and how many ranks do, as `infinipipe train` gathers them; "
        "empty: a core per rank. Raises ConfigError as train does (--search-iterations without "
        "an auto degree, no layout fits, ...).");
  m.def(
      "rank_order",
      [](const Config& cfg, const std::vector<std::string>& rank_hosts) {
        setup::RankOrderQuestion q;
        q.rank_hosts = rank_hosts;
        q.runtime_measures_links = false;  // the PyTorch trainer measures no links
        const setup::RankOrderDecision d = setup::decide_rank_order(cfg, q);
        return std::make_tuple(std::string(rank_order_name(d.order)), d.reason, d.decided);
      },
      py::arg("config"), py::arg("rank_hosts"),
      "The rank order a run of `config` makes its groups in: (order, reason, decided), order "
      "'megatron' (rank = stage x dp + replica) or 'pipelines' (rank = replica x pp + stage). "
      "--rank-placement megatron or pipelines is kept (decided False); auto is decided (as "
      "`infinipipe train` decides it without measured links) by the bytes each order sends "
      "between the hosts of `rank_hosts`, one host name per world rank; the reason is the line "
      "train prints after 'rank placement auto: '.");
}

}  // namespace infinipipe::python
