// Recording the search's candidates and their verdicts, and explaining the chosen plan's cuts,
// packs and recompute.
#include "plan/plan_explain.h"

#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "plan/recompute.h"

namespace infinipipe::plan {

namespace {

// The first of the longest sequences: the one the processor splits into K balanced slices.
int32_t longest_sequence(const Plan& plan) {
  int32_t best = 0;
  for (size_t i = 1; i < plan.seq_lengths.size(); ++i)
    if (plan.seq_lengths[i] > plan.seq_lengths[best]) best = static_cast<int32_t>(i);
  return best;
}

std::string cut_rule(const PlanExplain& ex, const Plan& plan, int32_t seq) {
  if (plan.schedule == "seq1f1b")
    return "seq1f1b: its micro-batch cut into pieces of equal cost along the tokens";
  if (!ex.has_limits) return "cut by the schedule";
  if (seq == longest_sequence(plan))
    return "the longest sequence: split into K slices of near-equal cost (binary search on the "
           "per-slice cost); its dearest slice sets T_t and T_m";
  return fmt::format(
      "longer than T_m = {} tokens: slices carved front first, each within T_t and T_m, the tail "
      "grown to at least {} tokens",
      ex.limits.token_threshold, ex.limits.min_tail_slice);
}

const ExplainCandidate* chosen_candidate(const PlanExplain& ex) {
  for (const ExplainCandidate& c : ex.candidates)
    if (c.chosen) return &c;
  return nullptr;
}

// How the chosen plan's chunks hold whole sequences, from the winning setting's knobs.
std::string pack_rule(const PlanExplain& ex, const Plan& plan) {
  const ExplainCandidate* win = chosen_candidate(ex);
  if (ex.has_limits) return "Best-Fit-Decreasing within T_t and T_m";
  if (plan.schedule == "epp") {
    const int64_t longest = plan.seq_lengths.empty() ? 0 : plan.seq_lengths[longest_sequence(plan)];
    if (win && win->micro_batch_tokens > longest)
      return fmt::format(
          "whole sequences, Best-Fit-Decreasing by tokens, at most {} tokens per chunk ({}x the "
          "longest sequence)",
          win->micro_batch_tokens, win->micro_batch_tokens / std::max<int64_t>(1, longest));
    return "whole sequences, Best-Fit-Decreasing by tokens up to the longest sequence's length";
  }
  if (plan.schedule == "seq1f1b")
    return win ? fmt::format(
                     "micro-batches of at most {} tokens (Best-Fit-Decreasing), each cut "
                     "into {} piece(s) of equal cost",
                     win->micro_batch_tokens, win->k)
               : "micro-batches cut into pieces of equal cost";
  if (win && win->micro_batch_size > 0)
    return fmt::format("{} consecutive sequence(s) per micro-batch, in batch order",
                       win->micro_batch_size);
  if (win && win->micro_batch_tokens > 0)
    return fmt::format("Best-Fit-Decreasing by tokens, at most {} tokens per micro-batch",
                       win->micro_batch_tokens);
  return "whole sequences per micro-batch";
}

void explain_cuts(PlanExplain& ex, const Plan& plan, const cost::CostModel& cm,
                  const cost::StageShape& ref) {
  std::map<int32_t, std::vector<Slice>> slices_of;
  for (const Chunk& c : plan.chunks)
    for (const Slice& s : c.slices)
      if (!s.is_whole()) slices_of[s.seq].push_back(s);
  for (auto& [seq, slices] : slices_of) {
    std::sort(slices.begin(), slices.end(),
              [](const Slice& a, const Slice& b) { return a.offset < b.offset; });
    ExplainCut cut;
    cut.seq = seq;
    cut.length = plan.seq_lengths[seq];
    cut.rule = cut_rule(ex, plan, seq);
    for (const Slice& s : slices) {
      const cost::SliceShape shape{s.offset, s.len, !s.is_split()};
      cut.offsets.push_back(s.offset);
      cut.lens.push_back(s.len);
      cut.times.push_back(chunk_cost(cm, ref, std::span<const cost::SliceShape>(&shape, 1)));
    }
    ex.cuts.push_back(std::move(cut));
  }
}

void explain_packs(PlanExplain& ex, const Plan& plan, const cost::CostModel& cm,
                   const cost::StageShape& ref) {
  for (const Chunk& c : plan.chunks) {
    if (c.kind() == ChunkKind::split) continue;
    ExplainPack pk;
    pk.chunk = c.id;
    for (const Slice& s : c.slices) {
      if (s.is_whole())
        pk.seqs.push_back(s.seq);
      else
        pk.tail_of = s.seq;
    }
    pk.tokens = c.tokens();
    const auto shapes = c.shapes();
    pk.time = chunk_cost(cm, ref, shapes);
    ex.packs.push_back(std::move(pk));
  }
}

// Every (stage, chunk) the plan recomputes, priced by the recompute problem's own tables.
void explain_recompute(PlanExplain& ex, const Plan& plan, const Config& cfg,
                       const cost::CostModel& cm) {
  const MemoryContext mem = plan_memory_context(cfg, plan.memory_budget);
  const RecomputeProblem pb = recompute_problem(plan, cm, mem, RecomputeTie::diagonal);
  std::map<std::pair<int32_t, int32_t>, const RecomputeItem*> item_at;
  for (const RecomputeItem& it : pb.items) item_at[{it.stage, it.chunk}] = &it;
  for (const auto& list : plan.actions)
    for (const Action& a : list) {
      if (a.kind != ActionKind::backward || a.recompute_layers == 0) continue;
      const auto found = item_at.find({a.stage, a.chunk});
      if (found == item_at.end()) continue;
      const RecomputeItem& it = *found->second;
      const int32_t r = std::min(a.recompute_layers, it.max_layers);
      ex.recompute.push_back({a.stage, a.chunk, it.rank, r, it.max_layers,
                              it.act[0] - it.act[static_cast<size_t>(r)],
                              it.time[static_cast<size_t>(r)]});
    }
  std::sort(ex.recompute.begin(), ex.recompute.end(), [](const auto& x, const auto& y) {
    return std::pair(x.stage, x.chunk) < std::pair(y.stage, y.chunk);
  });
}

}  // namespace

ExplainCandidate& explain_record(PlanExplain& ex, std::string setting, int32_t k,
                                 const Candidate& c) {
  ExplainCandidate e;
  e.setting = std::move(setting);
  e.k = k;
  e.chunks = static_cast<int32_t>(c.plan.chunks.size());
  e.pipelines = c.plan.num_pipelines();
  e.step_time = c.plan.predicted_step_time;
  e.peak_bytes = c.plan.predicted_peak_bytes;
  e.fits = c.fits;
  ex.candidates.push_back(std::move(e));
  return ex.candidates.back();
}

void explain_verdicts(PlanExplain& ex, size_t chosen, int64_t budget) {
  const ExplainCandidate& win = ex.candidates[chosen];
  for (size_t i = 0; i < ex.candidates.size(); ++i) {
    ExplainCandidate& c = ex.candidates[i];
    c.chosen = i == chosen;
    if (c.chosen) {
      c.verdict = "chosen: the fastest that fits";
    } else if (!c.fits) {
      size_t worst = 0;
      for (size_t r = 1; r < c.peak_bytes.size(); ++r)
        if (c.peak_bytes[r] > c.peak_bytes[worst]) worst = r;
      c.verdict = fmt::format("rank {} over budget by {}", worst,
                              format_bytes(c.peak_bytes[worst] - budget));
    } else if (c.step_time == win.step_time) {
      c.verdict =
          fmt::format("as fast as the chosen {}, which the search found first", win.setting);
    } else if (c.step_time > win.step_time) {
      c.verdict = fmt::format("{:.1f}% slower than the chosen {}",
                              100 * (c.step_time - win.step_time) / win.step_time, win.setting);
    } else {
      c.verdict = fmt::format("{:.1f}% faster than the chosen {}, but not chosen",
                              100 * (win.step_time - c.step_time) / win.step_time, win.setting);
    }
  }
}

void explain_search_end(PlanExplain& ex, size_t best, const Candidate* exact, int32_t k,
                        int64_t budget) {
  if (ex.candidates.empty()) return;
  if (!exact) {
    explain_verdicts(ex, best, budget);
    return;
  }
  const ExplainCandidate winner = ex.candidates[best];  // a copy: the record may reallocate
  ExplainCandidate& e = explain_record(ex, winner.setting + ", exact recompute", k, *exact);
  e.micro_batch_tokens = winner.micro_batch_tokens;
  explain_verdicts(ex, ex.candidates.size() - 1, budget);
  ex.candidates[best].verdict =
      "fastest with the greedy recompute solve: re-solved exactly (below)";
}

void explain_chosen_plan(PlanExplain& ex, const Plan& plan, const Config& cfg,
                         const cost::CostModel& cm) {
  const cost::StageShape ref = processor_reference_stage(cm.model(), plan.pp);
  ex.schedule = plan.schedule;
  ex.pack_rule = pack_rule(ex, plan);
  explain_cuts(ex, plan, cm, ref);
  explain_packs(ex, plan, cm, ref);
  explain_recompute(ex, plan, cfg, cm);
}

}  // namespace infinipipe::plan
