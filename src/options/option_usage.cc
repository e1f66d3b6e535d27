#include "options/option_usage.h"

#include <fmt/format.h>

#include "core/error.h"
#include "cost/calibration.h"
#include "plan/schedule_table.h"

namespace infinipipe::options {
namespace {

// Whether plan and simulate have links between hosts to order ranks by. A file that does not
// load counts as having them: the command itself reports what is wrong with it.
bool calibration_has_host_links(const std::string& path) {
  if (path.empty()) return false;
  try {
    return !cost::load_calibration(path).host_links.empty();
  } catch (const Error&) {
    return true;
  }
}

}  // namespace

std::vector<std::string> unused_option_notes(const Config& cfg, const std::set<std::string>& given,
                                             const std::string& command) {
  std::vector<std::string> notes;
  auto note = [&](const char* key, const std::string& why) {
    if (given.count(key)) notes.push_back(fmt::format("warning: --{} is not used: {}", key, why));
  };
  // The commands that plan, simulate or measure read the configuration but run no training.
  if (command == "plan" || command == "simulate" || command == "cost" || command == "profile")
    for (const char* key : {"save", "load", "save-interval", "exit-interval", "measure-links",
                            "measure-links-interval"})
      note(key, fmt::format("only `infinipipe train` reads it, not `{}`", command));
  if (command == "cost" || command == "profile")
    note("rank-placement", fmt::format("`infinipipe train` reads it, and plan and simulate on "
                                       "measured links between hosts; not `{}`",
                                       command));
  if ((command == "plan" || command == "simulate") && given.count("rank-placement") &&
      !calibration_has_host_links(cfg.cluster.calibration))
    note("rank-placement",
         fmt::format("{} orders the ranks by the measured links between hosts, and {}: every order "
                     "crosses the same two global links here{}. Measure them with `mpirun ... "
                     "infinipipe profile` across the hosts and give its file to --calibration",
                     command,
                     cfg.cluster.calibration.empty()
                         ? std::string("there is no --calibration")
                         : fmt::format("calibration '{}' has none", cfg.cluster.calibration),
                     cfg.parallel.rank_placement == RankPlacement::auto_
                         ? " (auto has nothing to choose by: Megatron's order is priced)"
                         : ""));
  // The links are measured again only by a train run that measures them and refits its costs.
  if (command == "train" && !cfg.cluster.measure_links)
    note("measure-links-interval",
         "it sets how often --measure-links measures the links again; add --measure-links");
  else if (command == "train" && cfg.training.cost_model_update == CostModelUpdate::off)
    note("measure-links-interval",
         "with --cost-model-update off the cost model keeps the links measured at start; use "
         "--cost-model-update online");
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
