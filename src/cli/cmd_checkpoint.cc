// `infinipipe checkpoint`: inspect and verify checkpoint directories written by --save, and
// export one as a Hugging Face model folder.
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/hf_export.h"
#include "cli/commands.h"
#include "core/config.h"
#include "core/error.h"

namespace infinipipe::cli {

namespace {

struct CheckpointArgs {
  std::string dir;
  int64_t iteration = -1;
  std::string out;
  std::string dtype = "fp32";
  std::string max_shard_size = "5GB";
};

void run_checkpoint_export(const CheckpointArgs& a) {
  HfExportOptions o;
  o.dtype = a.dtype == "bf16" ? HfExportDtype::bf16 : HfExportDtype::fp32;
  o.max_shard_bytes = parse_bytes(a.max_shard_size, "--max-shard-size");
  const HfExportResult r = hf_export(a.dir, a.out, o);
  fmt::print("{}: Hugging Face model of iteration {} ({} tensors, {:.1f} MiB of {}, {} file{})\n",
             a.out, r.iteration, r.tensors, static_cast<double>(r.bytes) / (1 << 20), a.dtype,
             r.shards, r.shards == 1 ? "" : "s");
}

void run_checkpoint_list(const CheckpointArgs& a) {
  const std::vector<CheckpointEntry> entries = checkpoint_list(a.dir);
  if (entries.empty()) fail_config("{} holds no iter_NNNNNNN checkpoint directory", a.dir);
  for (const CheckpointEntry& e : entries) {
    fmt::print("{}  {}{}\n", checkpoint_iter_dir(a.dir, e.iteration),
               e.complete ? "complete" : "INCOMPLETE (interrupted save or damaged; never loaded)",
               e.latest ? "  <- latest" : "");
    if (!e.complete) fmt::print("    {}\n", e.problem);
  }
}

// The iteration `checkpoint verify` checks: the one asked for, else the one --load would take.
// Newer folders that are not complete are named with their fault, and when none is complete
// the newest is checked, so a truncated file or an edited state.json is named rather than
// "no complete checkpoint there" said.
int64_t verify_iteration(const CheckpointArgs& a) {
  if (a.iteration >= 0) return a.iteration;
  const std::vector<CheckpointEntry> entries = checkpoint_list(a.dir);
  if (entries.empty()) {
    fail_config("checkpoint verify {}: holds no iter_NNNNNNN checkpoint folder; give the folder "
                "written by `train --save`",
                a.dir);
  }
  const std::optional<int64_t> latest = checkpoint_find_latest(a.dir);
  for (const CheckpointEntry& e : entries) {
    if (!e.complete && (!latest || e.iteration > *latest))
      fmt::print(stderr, "infinipipe: note: {} is not complete and is never loaded: {}\n",
                 checkpoint_iter_dir(a.dir, e.iteration), e.problem);
  }
  return latest ? *latest : entries.back().iteration;  // entries are sorted by iteration
}

void run_checkpoint_verify(const CheckpointArgs& a) {
  CheckpointReader r(a.dir, verify_iteration(a));
  const int64_t bytes = r.verify_all();
  const ModelConfig& m = r.model();
  fmt::print("{}: OK, every checksum matches and every value is finite ({:.1f} MiB checked)\n",
             r.path(), static_cast<double>(bytes) / (1 << 20));
  fmt::print("  iteration {}, consumed samples {}, written by {} rank(s), optimizer {}\n",
             r.iteration(), r.consumed_samples(), r.num_ranks(), r.optimizer_kind());
  fmt::print("  model: {} layers, hidden {}, heads {} (kv {}), ffn {}, vocab {}, {} tensors\n",
             m.num_layers, m.hidden_size, m.num_attention_heads, m.kv_heads(), m.ffn_size(),
             m.vocab_size, r.param_names().size());
}

}  // namespace

void add_checkpoint_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("checkpoint", "Inspect and verify checkpoints (--save DIR)");
  cmd->require_subcommand(1);
  auto args = std::make_shared<CheckpointArgs>();

  CLI::App* list = cmd->add_subcommand("list", "List the iter_ directories and which is loaded");
  list->add_option("dir", args->dir, "Checkpoint directory (as given to --save)")->required();
  list->callback([args] { run_checkpoint_list(*args); });

  CLI::App* verify = cmd->add_subcommand(
      "verify", "Verify every file's checksum and every value of one checkpoint");
  verify->add_option("dir", args->dir, "Checkpoint directory (as given to --save)")->required();
  verify->add_option("--iteration", args->iteration,
                     "Iteration to verify (default: the one --load would resume from)");
  verify->callback([args] { run_checkpoint_verify(*args); });

  CLI::App* exp = cmd->add_subcommand(
      "export",
      "Write the newest complete checkpoint as one Hugging Face model folder (config.json, "
      "generation_config.json, safetensors weights, tokenizer files)");
  exp->add_option("dir", args->dir, "Checkpoint directory (as given to --save)")->required();
  exp->add_option("out", args->out, "New or empty folder to write (never through a link)")
      ->required();
  exp->add_option("--dtype", args->dtype, "Weights' dtype: fp32 (as trained) or bf16 (rounded)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  exp->add_option("--max-shard-size", args->max_shard_size,
                  "Largest weights file before the model is sharded with an index, e.g. 5GB "
                  "(transformers' default)");
  exp->callback([args] { run_checkpoint_export(*args); });
}

}  // namespace infinipipe::cli
