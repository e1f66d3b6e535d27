#include "options/options.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>
#include <CLI/CLI.hpp>

#include "core/error.h"
#include "core/input_file.h"
#include "core/parallel_auto.h"
#include "options/megatron_flags.h"
#include "options/option_specs.h"
#include "options/option_usage.h"
#include "options/yaml_documents.h"
#include "plan/schedule_table.h"

namespace infinipipe::options {
namespace {

const OptionSpec* find_spec(const std::string& key) {
  for (const OptionSpec& s : option_specs()) {
    if (s.key == key) return &s;
    for (const std::string& a : s.aliases)
      if (a == key) return &s;
  }
  return nullptr;
}

std::string normalize_key(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return key;
}

// A scalar, or for a words option a list of scalars joined by spaces; false for anything else.
bool yaml_value(const YAML::Node& node, const std::string& key, std::string& out) {
  if (node.IsScalar()) {
    out = node.Scalar();
    return true;
  }
  const OptionSpec* spec = find_spec(normalize_key(key));
  if (!node.IsSequence() || spec == nullptr || spec->kind != Kind::words) return false;
  out.clear();
  for (const YAML::Node& item : node) {
    if (!item.IsScalar()) return false;
    out += (out.empty() ? "" : " ") + item.Scalar();
  }
  return true;
}

// Megatron counts a run in iterations or in samples, never both.
// A `train-samples: 0` next to train-iters (as `config show` prints a run by iterations) counts
// in iterations.
void check_iterations_or_samples(const std::set<std::string>& given, const Config& cfg) {
  const bool iters = given.count("train-iters") != 0;
  const bool samples = given.count("train-samples") != 0 && cfg.training.train_samples != 0;
  if (iters && samples) {
    fail_config(
        "give only one of --train-iters and --train-samples (with --train-samples the run has "
        "train-samples / global-batch-size iterations)");
  }
}

// A boolean spec named by Megatron's negative form: `no-tie-embeddings` -> tie-embeddings.
const OptionSpec* find_negated_flag(const std::string& key) {
  if (key.size() <= 3 || key.compare(0, 3, "no-") != 0) return nullptr;
  const OptionSpec* s = find_spec(key.substr(3));
  return s && s->kind == Kind::flag ? s : nullptr;
}

// What the flags and the file gave: the option keys (for the notes on unused ones) and the
// Megatron options without a spec (checked against the resolved configuration).
struct Given {
  std::set<std::string> keys;
  MegatronExtras extras;
};

void apply_given(Config& cfg, Given& given, const std::string& raw_key, const std::string& value,
                 const std::string& origin) {
  const std::string key = normalize_key(raw_key);
  if (const OptionSpec* s = find_spec(key)) {
    s->set(cfg, value);
    given.keys.insert(s->key);
  } else if (const OptionSpec* n = find_negated_flag(key)) {
    n->set(cfg, to_bool(key, value) ? "false" : "true");
    given.keys.insert(n->key);
  } else {
    megatron_extras_add(given.extras, key, value, origin);
  }
}

// A problem with one option is collected in `errors` (when given) and the others still applied,
// so one run names every refused or invalid option; without `errors` the first one throws.
void collect(std::vector<std::string>* errors, const std::function<void()>& apply) {
  if (!errors) return apply();
  try {
    apply();
  } catch (const ConfigError& e) {
    errors->push_back(e.what());
  }
}

void apply_yaml_given(Config& cfg, Given& given, const std::string& yaml_text,
                      const std::string& origin, std::vector<std::string>* errors = nullptr) {
  YAML::Node root;
  try {
    // A second document is refused rather than ignored.
    if (const std::optional<int> line = yaml_second_document_line(yaml_text)) {
      fail_config(
          "{}: holds more than one YAML document (or text after its map), from line {}; a "
          "configuration is one map of options: merge them, or remove the `---` line and "
          "what follows",
          origin, *line);
    }
    root = YAML::Load(yaml_text);
  } catch (const YAML::DeepRecursion&) {
    fail_config("{}: lists or maps nest too deeply; a configuration is a flat map of options",
                origin);
  } catch (const YAML::Exception& e) {
    fail_config("{}: not valid YAML at line {}: {}", origin, e.mark.line + 1, e.msg);
  }
  if (root.IsNull()) return;
  if (!root.IsMap())
    fail_config("{}: expected a map of options (e.g. `pipeline-model-parallel-size: 2`)", origin);
  std::map<std::string, std::pair<std::string, int>> seen;  // option -> (spelling, line)
  for (const auto& kv : root) {
    if (!kv.first.IsScalar())
      fail_config("{} (line {}): an option name must be a plain word, not a list or map", origin,
                  kv.first.Mark().line + 1);
    std::string key = kv.first.Scalar();
    // A key given twice (or by two of its names) would silently take the last value.
    const int line = kv.first.Mark().line + 1;
    const std::string norm = normalize_key(key);
    const OptionSpec* spec = find_spec(norm);
    if (!spec) spec = find_negated_flag(norm);
    collect(errors, [&] {
      const auto [it, fresh] = seen.emplace(spec ? spec->key : norm, std::make_pair(key, line));
      if (!fresh) {
        fail_config(
            "{}: the option '{}' is given twice, as '{}' (line {}) and '{}' (line {}); keep one",
            origin, it->first, it->second.first, it->second.second, key, line);
      }
      std::string value;
      if (!yaml_value(kv.second, key, value))
        fail_config("{}: option '{}' must be a single value, not a list or map", origin, key);
      try {
        apply_given(cfg, given, key, value, key);
        const std::string k = normalize_key(key);
        if (given.extras.origin.count(k))  // for the checks once the configuration is resolved
          given.extras.origin[k] = fmt::format("{} (line {}): {}", origin, line, k);
      } catch (const ConfigError& e) {
        fail_config("{} (line {}): {}", origin, line, e.what());
      }
    });
  }
}

// Flags CLI11 did not match (Megatron options without a spec, underscore spellings), in order.
void apply_extras(Config& cfg, Given& given, const std::vector<std::string>& extras,
                  std::vector<std::string>* errors) {
  for (size_t i = 0; i < extras.size(); ++i) {
    const std::string& arg = extras[i];
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      collect(errors, [&] { fail_config("unexpected argument '{}'", arg); });
      continue;
    }
    size_t eq = arg.find('=');
    std::string key = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    std::string value = "true";
    if (eq != std::string::npos)
      value = arg.substr(eq + 1);
    else if (i + 1 < extras.size() && extras[i + 1].compare(0, 2, "--") != 0)
      value = extras[++i];
    collect(errors, [&] { apply_given(cfg, given, key, value, "--" + normalize_key(key)); });
  }
}

// One problem as it is; several as one message listing each, so a ported script is fixed in
// one pass.
[[noreturn]] void fail_all(const std::vector<std::string>& errors) {
  if (errors.size() == 1) throw ConfigError(errors.front());
  std::string text = fmt::format("{} problems with the options, each to fix:", errors.size());
  for (const std::string& e : errors) text += "\n  * " + e;
  throw ConfigError(text);
}

// As Megatron-LM: without --data-parallel-size, dp is what the world leaves after the other
// degrees (infinipipe has no tensor or context parallelism, so world / (pp x ulysses)). An
// auto degree leaves it to the layout search.
void data_parallel_derive(Config& cfg, const std::set<std::string>& given, int64_t world) {
  ParallelConfig& p = cfg.parallel;
  if (world <= 0 || given.count("data-parallel-size") != 0 || parallel_has_auto(p)) return;
  const int64_t others = p.pipeline_parallel * p.ulysses_degree;
  if (others <= 0 || world % others != 0) {
    std::string fitting;
    for (int64_t pp = 1; pp <= world; ++pp)
      if (world % pp == 0)
        fitting += fmt::format("{}({},{})", fitting.empty() ? "" : ", ", pp, world / pp);
    fail_config(
        "{} not a multiple of pipeline-model-parallel-size {} x ulysses-degree {} = {}, so no "
        "data-parallel-size fits (dp = processes / (pp x ulysses), as Megatron-LM derives it): "
        "launch a multiple of {} processes (`mpirun -np N`, or torchrun --nproc_per_node N for "
        "the PyTorch trainer), or choose degrees that divide {}: "
        "(pp,dp) in {}",
        world == 1 ? "one process is" : fmt::format("{} processes are", world), p.pipeline_parallel,
        p.ulysses_degree, others, others, world, fitting);
  }
  p.data_parallel = world / others;
}

// The command's unmatched words: Megatron options without a spec, underscore spellings.
std::vector<std::string> extras_of(const ConfigOptions& opts) {
  if (!opts.command) return {};
  std::vector<std::string> words = opts.command->remaining();
  words.erase(words.begin(), words.begin() + std::min(opts.extras_skip, words.size()));
  return words;
}

// Only one rank of an MPI job prints the notes: every rank resolves the same configuration.
bool is_first_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* v = std::getenv(var)) return std::string(v) == "0";
  return true;
}

}  // namespace

bool is_option_name(const std::string& key) {
  return find_spec(normalize_key(key)) != nullptr;
}

std::string option_value(const Config& cfg, const std::string& key) {
  const OptionSpec* s = find_spec(normalize_key(key));
  if (!s) fail_config("internal: no option {}", key);
  return s->get(cfg);
}

std::vector<std::string> option_names() {
  std::vector<std::string> names;
  for (const OptionSpec& s : option_specs()) {
    names.push_back(s.key);
    for (const std::string& a : s.aliases) names.push_back(a);
  }
  names.push_back("config");
  return names;
}

void apply_option(Config& cfg, const std::string& key, const std::string& value) {
  Given given;
  apply_given(cfg, given, key, value, normalize_key(key));
  std::vector<std::string> notes, errors;
  megatron_extras_check(given.extras, cfg, notes, &errors);
  if (!errors.empty()) fail_all(errors);
}

void apply_yaml(Config& cfg, const std::string& yaml_text, const std::string& origin) {
  Given given;
  apply_yaml_given(cfg, given, yaml_text, origin);
  std::vector<std::string> notes, errors;
  megatron_extras_check(given.extras, cfg, notes, &errors);
  if (!errors.empty()) fail_all(errors);
}

std::shared_ptr<ConfigOptions> add_config_options(CLI::App* cmd) {
  auto opts = std::make_shared<ConfigOptions>();
  opts->command = cmd;
  cmd->add_option("--config", opts->config_file, "YAML file of options (Megatron-LM keys)")
      ->check(CLI::ExistingFile)
      ->group("Configuration");
  std::weak_ptr<ConfigOptions> weak = opts;
  // trigger_on_parse keeps the command-line order and TakeAll accepts a repeated flag, so the
  // last value given wins, as with argparse.
  auto record = [weak](const std::string& key) {
    return [weak, key](const std::string& v) { weak.lock()->flags.emplace_back(key, v); };
  };
  for (const OptionSpec& s : option_specs()) {
    std::string names = "--" + s.key;
    for (const std::string& a : s.aliases) names += ",--" + a;
    CLI::Option* o = nullptr;
    if (s.kind == Kind::flag) {
      // The raw text, so `--x=false` is false and `--x=maybe` is refused by to_bool.
      o = cmd->add_flag(names, opts->flag_text.emplace_back(), s.help)->each(record(s.key));
      cmd->add_flag("--no-" + s.key, opts->flag_text.emplace_back(), "--" + s.key + "=false")
          ->each(record("no-" + s.key))
          ->trigger_on_parse()
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
          ->group("");
    } else if (s.kind == Kind::words) {
      o = cmd->add_option_function<std::vector<std::string>>(
                 names,
                 [rec = record(s.key)](const std::vector<std::string>& words) {
                   std::string v;
                   for (const std::string& w : words) v += (v.empty() ? "" : " ") + w;
                   rec(v);
                 },
                 s.help)
              ->expected(1, -1);
    } else {
      o = cmd->add_option_function<std::string>(names, record(s.key), s.help);
    }
    o->trigger_on_parse()
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->group("Configuration");
  }
  // Unknown flags are kept so that resolve_config can say which known key was meant.
  cmd->allow_extras();
  return opts;
}

Config resolve_config(const ConfigOptions& opts, const Config& base, bool validate,
                      std::vector<std::string>* notes_out) {
  Config cfg = base;
  Given given;
  std::vector<std::string> errors;
  if (!opts.config_file.empty()) {
    const std::string text = input_file_read(opts.config_file, input_kind::kConfigYaml,
                                             InputLinks::follow, opts.config_label);
    apply_yaml_given(cfg, given, text, opts.config_file, &errors);
  }
  apply_extras(cfg, given, extras_of(opts), &errors);
  // A named pair, not a structured binding: clang 14 cannot capture those in a lambda.
  for (const auto& flag : opts.flags) {
    collect(&errors, [&] {
      const auto& [key, value] = flag;
      try {
        apply_given(cfg, given, key, value, "--" + key);
      } catch (const ConfigError& e) {
        fail_config("--{}", e.what());
      }
    });
  }
  collect(&errors, [&] { check_iterations_or_samples(given.keys, cfg); });
  // A world the degrees do not divide is named once, here, not again by the command's check of
  // the number of processes.
  int64_t world = opts.world_size;
  collect(&errors, [&] {
    world = 0;
    data_parallel_derive(cfg, given.keys, opts.world_size);
    world = opts.world_size;
  });
  if (!validate) {
    if (!errors.empty()) fail_all(errors);
    return cfg;  // the checks below need the final configuration
  }
  // The checks of the whole configuration run over the options that were read; a mistake
  // there is reported with the options' own.
  bool valid = false;
  collect(&errors, [&] {
    cfg.validate();
    plan::schedule_check_layout(cfg.parallel);
    valid = true;
  });
  std::vector<std::string> notes;
  megatron_extras_check(given.extras, cfg, notes, &errors);
  if (valid && opts.command_checks) opts.command_checks(cfg, world, errors);
  if (!errors.empty()) fail_all(errors);
  const std::string command = opts.command ? opts.command->get_name() : "";
  for (std::string& n : unused_option_notes(cfg, given.keys, command))
    notes.push_back(std::move(n));
  if (notes_out) {
    *notes_out = std::move(notes);
  } else if (is_first_rank()) {
    // Once per process: `train` under mpirun resolves the configuration twice.
    static bool printed = false;
    for (const std::string& n : notes)
      if (!printed) fmt::print(stderr, "infinipipe: {}\n", n);
    printed = true;
  }
  return cfg;
}

Config resolve_config_lenient(const ConfigOptions& opts, const Config& base) {
  // Every option that can be read is applied; the full resolution reports the others.
  Config cfg = base;
  Given given;
  std::vector<std::string> ignored;
  if (!opts.config_file.empty()) {
    collect(&ignored, [&] {
      const std::string text = input_file_read(opts.config_file, input_kind::kConfigYaml,
                                               InputLinks::follow, opts.config_label);
      apply_yaml_given(cfg, given, text, opts.config_file, &ignored);
    });
  }
  apply_extras(cfg, given, extras_of(opts), &ignored);
  for (const auto& flag : opts.flags)
    collect(&ignored, [&] { apply_given(cfg, given, flag.first, flag.second, "--" + flag.first); });
  return cfg;
}

ParsedArgs parse_config_args(const std::vector<std::string>& args) {
  ParsedArgs out;
  out.parser = std::make_shared<CLI::App>();
  out.options = add_config_options(out.parser.get());
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses from the back
  try {
    out.parser->parse(reversed);
  } catch (const CLI::ParseError& e) {
    fail_config("{}", e.what());
  }
  return out;
}

Config resolve_config_args(const std::vector<std::string>& args, const Config& base, bool validate,
                           std::vector<std::string>* notes) {
  return resolve_config(*parse_config_args(args).options, base, validate, notes);
}

std::string config_to_yaml(const Config& cfg) {
  std::string out;
  for (const OptionSpec& s : option_specs()) {
    // With --train-samples the iterations are derived; writing both would refuse the file.
    if (s.key == "train-iters" && cfg.training.sample_based()) continue;
    if (!s.shown) continue;
    std::string v = s.get(cfg);
    bool quote = s.kind == Kind::text || s.kind == Kind::words;
    out += fmt::format("{}: {}\n", s.key, quote ? fmt::format("\"{}\"", v) : v);
  }
  return out;
}

std::vector<std::string> config_keys() {
  std::vector<std::string> keys;
  for (const OptionSpec& s : option_specs())
    if (s.shown) keys.push_back(s.key);
  return keys;
}

}  // namespace infinipipe::options
