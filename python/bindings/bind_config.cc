// Config: a run's configuration, resolved from Megatron-LM flags or YAML through the same option
// table as the `infinipipe` command (src/options), so a Python user gets the CLI's defaults,
// checks and messages.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "core/config.h"
#include "core/error.h"
#include "data/split.h"
#include "model/lr_schedule.h"
#include "options/options.h"
#include "plan/schedule_table.h"
#include "plan/stage_layout.h"
#ifndef INFINIPIPE_PYTHON_PLANNER_ONLY
#include "runtime/checkpoint_meta.h"
#include "setup/train_config.h"
#endif

namespace py = pybind11;

namespace infinipipe::python {
namespace {

Config config_from_yaml(const std::string& text, const std::string& origin) {
  Config cfg;
  options::apply_yaml(cfg, text, origin);
  cfg.validate();
  plan::schedule_check_layout(cfg.parallel);
  return cfg;
}

}  // namespace

void bind_config(py::module_& m) {
  py::class_<ModelConfig>(m, "ModelConfig",
                          "The model of a configuration: a Llama-shaped decoder of one of the "
                          "families llama, qwen2, qwen3, mistral (Hugging Face config fields).")
      .def_readonly("num_layers", &ModelConfig::num_layers)
      .def_readonly("hidden_size", &ModelConfig::hidden_size)
      .def_readonly("num_attention_heads", &ModelConfig::num_attention_heads)
      .def_property_readonly("num_key_value_heads", &ModelConfig::kv_heads)
      .def_property_readonly("head_dim", &ModelConfig::head_dim)
      .def_property_readonly("ffn_hidden_size", &ModelConfig::ffn_size)
      .def_readonly("vocab_size", &ModelConfig::vocab_size)
      .def_readonly("seq_length", &ModelConfig::seq_length)
      .def_property_readonly("max_position_embeddings", &ModelConfig::max_positions)
      .def_readonly("rotary_base", &ModelConfig::rotary_base)
      .def_readonly("norm_epsilon", &ModelConfig::norm_epsilon)
      .def_readonly("tie_embeddings", &ModelConfig::tie_embeddings)
      .def_readonly("init_method_std", &ModelConfig::init_method_std)
      .def_readonly("family", &ModelConfig::family,
                    "llama, qwen2, qwen3 or mistral (config.json's model_type)")
      .def_readonly("qkv_bias", &ModelConfig::add_qkv_bias,
                    "q/k/v projections have biases (qwen2; --add-qkv-bias)")
      .def_readonly("qk_norm", &ModelConfig::qk_layernorm,
                    "RMSNorm of each query and key head over head_dim (qwen3; --qk-layernorm)")
      .def_readonly("sliding_window", &ModelConfig::sliding_window,
                    "attention window in tokens, 0 = none (mistral; never below seq_length)")
      .def_property_readonly("num_parameters", &ModelConfig::params_total)
      .def_property_readonly("llama_differences", &engine_unsupported,
                             "What of this model Llama's maths (the C++ engine, infinipipe.torch's "
                             "own modules) does not compute; '' when nothing");

  py::class_<Config>(m, "Config",
                     "A resolved and validated configuration: Megatron-LM option names, the "
                     "defaults and checks of `infinipipe config show`.")
      .def_static(
          "from_args",
          [](const std::vector<std::string>& args, const Config* base) {
            std::vector<std::string> notes;
            Config cfg = options::resolve_config_args(args, base ? *base : Config{}, true, &notes);
            return cfg;
          },
          py::arg("args"), py::arg("base") = py::none(),
          "From command-line words, e.g. ['--num-layers', '4', '--pp', '2'] or ['--config', "
          "'run.yaml']: defaults (or `base`) < file < flags. Raises ConfigError with the CLI's "
          "message for an unknown, refused or invalid option.")
#ifndef INFINIPIPE_PYTHON_PLANNER_ONLY  // they read checkpoints and tokenizers
      .def_static("for_training", &setup::resolve_train_config_args, py::arg("args"),
                  py::arg("world_size") = 0,
                  "What `infinipipe train` resolves from these words: as from_args, but a run "
                  "starting from a Hugging Face folder (--load or --pretrained-checkpoint) takes "
                  "the model from its config.json (model flags may repeat it, not contradict it); "
                  "with world_size (the run's processes) and no --data-parallel-size, dp = "
                  "world_size / (pp x ulysses-degree), as Megatron-LM derives it.")
      .def_static("for_hf_model", &setup::resolve_hf_config_args, py::arg("config_json"),
                  py::arg("origin"), py::arg("args"), py::arg("world_size") = 0,
                  "As for_training, for a model that the text of a Hugging Face config.json "
                  "defines (a transformers model's config.to_json_string()); `origin` names it "
                  "in messages. Model flags may repeat it, not contradict it.")
#endif
      .def_static("from_yaml", &config_from_yaml, py::arg("text"), py::arg("origin") = "<yaml>",
                  "From YAML text with the same keys (without dashes).")
      .def_static(
          "notes",
          [](const std::vector<std::string>& args) {
            std::vector<std::string> notes;
            options::resolve_config_args(args, Config{}, true, &notes);
            return notes;
          },
          py::arg("args"),
          "What the CLI would print about these options (accepted without effect, unused by the "
          "schedule, ...).")
      .def("to_yaml", &options::config_to_yaml,
           "Every option with its value, as YAML that from_yaml() and --config accept back.")
#ifndef INFINIPIPE_PYTHON_PLANNER_ONLY
      .def("with_run_tokenizer", &runtime::config_with_run_tokenizer,
           "This configuration with the tokenizer a run uses written in (--tokenizer-type / "
           "--tokenizer-model, else the one of the --load / --pretrained-checkpoint folder, "
           "else ByteTokenizer): what `infinipipe config show` prints and a run records.")
#endif
      .def("get", &options::option_value, py::arg("key"),
           "The value of option `key` as `infinipipe config show` prints it.")
      .def_static("keys", &options::config_keys, "Every option `get` and to_yaml() know.")
      .def_property_readonly("model", [](const Config& c) { return c.model; })
      .def_property_readonly("pp", [](const Config& c) { return c.parallel.pipeline_parallel; })
      .def_property_readonly("dp", [](const Config& c) { return c.parallel.data_parallel; })
      .def_property_readonly(
          "vpp", [](const Config& c) { return plan::schedule_vpp(c.parallel); },
          "Virtual stages per rank the schedule runs (1 where it runs none).")
      .def_property_readonly("ulysses_degree",
                             [](const Config& c) { return c.parallel.ulysses_degree; })
      .def_property_readonly(
          "schedule", [](const Config& c) { return plan::schedule_name(c.parallel.schedule); })
      .def_property_readonly("global_batch_size",
                             [](const Config& c) { return c.training.global_batch_size; })
      .def_property_readonly("train_iters", [](const Config& c) { return c.training.train_iters; })
      .def_property_readonly("seed", [](const Config& c) { return c.training.seed; })
      .def_property_readonly("clip_grad", [](const Config& c) { return c.training.clip_grad; })
      .def_property_readonly("device", [](const Config& c) { return c.cluster.device; })
      // The optimizer and run settings a runtime reads, typed (not by `get`'s option text).
      .def_property_readonly("optimizer",
                             [](const Config& c) { return optimizer_name(c.training.optimizer); })
      .def_property_readonly(
          "lr", [](const Config& c) { return c.training.lr; },
          "The peak learning rate (lr_at gives the schedule's).")
      .def_property_readonly("weight_decay",
                             [](const Config& c) { return c.training.weight_decay; })
      .def_property_readonly("adam_betas",
                             [](const Config& c) {
                               return std::make_pair(c.training.adam_beta1, c.training.adam_beta2);
                             })
      .def_property_readonly("adam_eps", [](const Config& c) { return c.training.adam_eps; })
      .def_property_readonly("use_distributed_optimizer",
                             [](const Config& c) { return c.parallel.use_distributed_optimizer; })
      .def_property_readonly("bf16", [](const Config& c) { return c.training.bf16; })
      .def_property_readonly("p2p_timeout", [](const Config& c) { return c.parallel.p2p_timeout; })
      .def_property_readonly("save", [](const Config& c) { return c.training.save; })
      .def_property_readonly("tensorboard_dir",
                             [](const Config& c) { return c.training.tensorboard_dir; })
      .def_property_readonly("has_training_data",
                             [](const Config& c) { return c.training.has_data(); })
      .def_property_readonly(
          "has_evaluation_data",
          [](const Config& c) {
            const TrainingConfig& t = c.training;
            if (!t.valid_data_path.empty() || !t.test_data_path.empty()) return true;
            if (t.data_path.empty()) return false;
            const auto w = data::split_parse(t.split);
            return w[1] > 0 || w[2] > 0;
          },
          "Whether --split or the per-split paths give validation or test documents.")
      .def(
          "with_stage_layout",
          [](const Config& c, const cost::CostModel& cm) {
            Config out = c;
            out.parallel.stage_layers.clear();
            for (const plan::StageSpec& s :
                 plan::stage_layout_by_cost(cm, static_cast<int32_t>(c.parallel.pipeline_parallel),
                                            plan::schedule_vpp(c.parallel)))
              out.parallel.stage_layers.push_back(s.num_layers);
            return out;
          },
          py::arg("cost_model"),
          "This configuration with its layers split over the stages by cost (as `train` fixes "
          "them before the first plan), so every plan of the run keeps that layout.")
      .def(
          "stage_layout",
          [](const Config& c, const cost::CostModel& cm) {
            return plan::stage_layout_planned(c, cm,
                                              static_cast<int32_t>(c.parallel.pipeline_parallel),
                                              plan::schedule_vpp(c.parallel));
          },
          py::arg("cost_model"), "The stages every plan of this configuration uses.")
      .def(
          "lr_at",
          [](const Config& c, int64_t consumed) {
            return LrSchedule::from_config(c.training).lr_at(consumed);
          },
          py::arg("consumed_samples"),
          "The learning rate of the update after `consumed_samples` (Megatron-LM's schedule).")
      .def("__repr__", [](const Config& c) {
        return "<infinipipe.Config " + std::to_string(c.model.num_layers) + " layers, pp " +
               std::to_string(c.parallel.pipeline_parallel) + " x dp " +
               std::to_string(c.parallel.data_parallel) + ", " +
               plan::schedule_name(c.parallel.schedule) + ">";
      });

  m.def(
      "schedules",
      [] {
        std::vector<std::string> out;
        for (const plan::ScheduleRow& r : plan::schedule_table()) out.push_back(r.name);
        return out;
      },
      "The schedule names --schedule takes, in the order `simulate --compare` lists them.");
}

}  // namespace infinipipe::python
