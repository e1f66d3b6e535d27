#include "cli/option_usage.h"

#include <fmt/format.h>

namespace infinipipe::cli {
namespace {

bool batch_level(Schedule s) {
  return s == Schedule::gpipe || s == Schedule::one_f_one_b || s == Schedule::interleaved;
}

}  // namespace

std::vector<std::string> unused_option_notes(const Config& cfg,
                                             const std::set<std::string>& given) {
  std::vector<std::string> notes;
  auto note = [&](const char* key, const std::string& why) {
    if (given.count(key)) notes.push_back(fmt::format("warning: --{} is not used: {}", key, why));
  };
  const ParallelConfig& p = cfg.parallel;
  const std::string sched = schedule_name(p.schedule);
  if (p.schedule == Schedule::epp)
    note("micro-batch-size",
         "schedule epp packs each chunk up to the token capacity the planner searches per batch "
         "(use a batch-level schedule or seq1f1b for a fixed micro-batch size)");
  if (p.schedule != Schedule::seq1f1b)
    note("seq1f1b-slices", fmt::format("only schedule seq1f1b slices every sequence into a fixed "
                                       "number of slices; schedule {} decides its own slicing",
                                       sched));
  if (batch_level(p.schedule))
    note("min-tail-slice", fmt::format("schedule {} runs whole sequences and never slices them",
                                       sched));
  if (p.recompute_granularity != RecomputeGranularity::full) {
    const std::string why = fmt::format(
        "it applies to --recompute-granularity full; with {} {}", 
        recompute_granularity_name(p.recompute_granularity),
        p.recompute_granularity == RecomputeGranularity::adaptive
            ? "the planner chooses the recomputed layers of every stage and chunk"
            : "no layer is recomputed");
    note("recompute-method", why);
    note("recompute-num-layers", why);
  }
  if (given.count("num-query-groups") && !cfg.model.group_query_attention)
    notes.push_back(fmt::format(
        "warning: --num-query-groups {} is used without --group-query-attention (Megatron-LM "
        "would ignore it and use {} key/value heads); add --group-query-attention",
        cfg.model.num_query_groups, cfg.model.num_attention_heads));
  return notes;
}

}  // namespace infinipipe::cli
