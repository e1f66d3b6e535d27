#include "options/option_usage.h"

#include <fmt/format.h>

#include "plan/schedule_table.h"

namespace infinipipe::options {

std::vector<std::string> unused_option_notes(const Config& cfg, const std::set<std::string>& given,
                                             const std::string& command) {
  std::vector<std::string> notes;
  auto note = [&](const char* key, const std::string& why) {
    if (given.count(key)) notes.push_back(fmt::format("warning: --{} is not used: {}", key, why));
  };
  // The commands that plan, simulate or measure read the configuration but run no training.
  if (command == "plan" || command == "simulate" || command == "cost" || command == "profile")
    for (const char* key :
         {"save", "load", "save-interval", "exit-interval", "rank-placement", "measure-links"})
      note(key, fmt::format("only `infinipipe train` reads it, not `{}`", command));
  const ParallelConfig& p = cfg.parallel;
  const plan::ScheduleRow& row = plan::schedule_row(p.schedule);
  if (!row.takes_micro_batch_size)
    note("micro-batch-size",
         fmt::format("schedule {} packs each chunk up to the token capacity the planner searches "
                     "per batch (use a batch-level schedule or seq1f1b for a fixed micro-batch "
                     "size)",
                     row.name));
  if (!row.takes_slice_count)
    note("seq1f1b-slices", fmt::format("only schedule seq1f1b slices every sequence into a fixed "
                                       "number of slices; schedule {} decides its own slicing",
                                       row.name));
  if (row.keeps_sequences_whole)
    note("min-tail-slice",
         fmt::format("schedule {} runs whole sequences and never slices them", row.name));
  if (p.recompute_granularity != RecomputeGranularity::full) {
    const std::string why =
        fmt::format("it applies to --recompute-granularity full; with {} {}",
                    recompute_granularity_name(p.recompute_granularity),
                    p.recompute_granularity == RecomputeGranularity::adaptive
                        ? "the planner chooses the recomputed layers of every stage and chunk"
                        : "no layer is recomputed");
    note("recompute-method", why);
    note("recompute-num-layers", why);
  }
  if (!cfg.training.has_data())
    note("long-documents",
         "it shapes the samples of a dataset (--data-path or the per-split paths); lengths from "
         "--distribution or --lengths are taken as sequences, cut at --seq-length");
  if (given.count("num-query-groups") && !cfg.model.group_query_attention)
    notes.push_back(fmt::format(
        "warning: --num-query-groups {} is used without --group-query-attention (Megatron-LM "
        "would ignore it and use {} key/value heads); add --group-query-attention",
        cfg.model.num_query_groups, cfg.model.num_attention_heads));
  return notes;
}

}  // namespace infinipipe::options
