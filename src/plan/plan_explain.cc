#include "plan/plan_explain.h"

#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "plan/recompute.h"

namespace infinipipe::plan {

namespace {

using nlohmann::json;

std::string bytes_list(const std::vector<int64_t>& bytes) {
  std::string s;
  for (size_t i = 0; i < bytes.size(); ++i) s += (i ? ", " : "") + format_bytes(bytes[i]);
  return s;
}

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

void explain_record(PlanExplain& ex, std::string setting, int32_t k, const Candidate& c) {
  ExplainCandidate e;
  e.setting = std::move(setting);
  e.k = k;
  e.chunks = static_cast<int32_t>(c.plan.chunks.size());
  e.pipelines = c.plan.num_pipelines();
  e.step_time = c.plan.predicted_step_time;
  e.peak_bytes = c.plan.predicted_peak_bytes;
  e.fits = c.fits;
  ex.candidates.push_back(std::move(e));
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
    } else if (c.step_time >= win.step_time) {
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
  explain_record(ex, ex.candidates[best].setting + ", exact recompute", k, *exact);
  explain_verdicts(ex, ex.candidates.size() - 1, budget);
  ex.candidates[best].verdict =
      "fastest with the greedy recompute solve: re-solved exactly (below)";
}

void explain_chosen_plan(PlanExplain& ex, const Plan& plan, const Config& cfg,
                         const cost::CostModel& cm) {
  const cost::StageShape ref = processor_reference_stage(cm.model(), plan.pp);
  explain_cuts(ex, plan, cm, ref);
  explain_packs(ex, plan, cm, ref);
  explain_recompute(ex, plan, cfg, cm);
}

json explain_to_json(const PlanExplain& ex) {
  json cands = json::array();
  for (const ExplainCandidate& c : ex.candidates)
    cands.push_back({{"setting", c.setting},
                     {"k", c.k},
                     {"chunks", c.chunks},
                     {"pipelines", c.pipelines},
                     {"predicted_step_time", c.step_time},
                     {"predicted_peak_bytes", c.peak_bytes},
                     {"fits", c.fits},
                     {"chosen", c.chosen},
                     {"verdict", c.verdict}});
  json cuts = json::array();
  for (const ExplainCut& c : ex.cuts)
    cuts.push_back({{"seq", c.seq},
                    {"length", c.length},
                    {"rule", c.rule},
                    {"offsets", c.offsets},
                    {"lens", c.lens},
                    {"times", c.times}});
  json packs = json::array();
  for (const ExplainPack& p : ex.packs)
    packs.push_back({{"chunk", p.chunk},
                     {"tail_of", p.tail_of},
                     {"seqs", p.seqs},
                     {"tokens", p.tokens},
                     {"time", p.time}});
  json rec = json::array();
  for (const ExplainRecompute& r : ex.recompute)
    rec.push_back({r.stage, r.chunk, r.rank, r.layers, r.max_layers, r.saved_bytes, r.time});
  json j = {{"candidates", std::move(cands)}, {"notes", ex.notes},
            {"cuts", std::move(cuts)},        {"packs", std::move(packs)},
            {"recompute", std::move(rec)},    {"recompute_time", ex.recompute_time}};
  if (ex.has_limits)
    j["limits"] = {{"time_threshold", ex.limits.time_threshold},
                   {"token_threshold", ex.limits.token_threshold},
                   {"min_tail_slice", ex.limits.min_tail_slice},
                   {"relaxed", ex.relaxed}};
  return j;
}

namespace {

// Long lists are cut in the text; the JSON keeps every entry.
constexpr size_t kTextRows = 16;

void text_candidates(std::string& s, const PlanExplain& ex) {
  if (ex.candidates.empty()) {
    s += "candidates: only the epp search records them\n";
    return;
  }
  s += fmt::format("candidates ({} evaluated, in search order):\n", ex.candidates.size());
  for (const ExplainCandidate& c : ex.candidates)
    s += fmt::format("  {} {}: {} chunks, {} pipeline(s), step {:.4f} s, peak {} -> {}\n",
                     c.chosen ? "*" : " ", c.setting, c.chunks, c.pipelines, c.step_time,
                     bytes_list(c.peak_bytes), c.verdict);
  for (const std::string& n : ex.notes) s += "    note: " + n + "\n";
}

void text_slicing(std::string& s, const PlanExplain& ex) {
  if (ex.has_limits)
    s += fmt::format("slicing: T_t = {:.5f} s, T_m = {} tokens, min tail {} tokens{}\n",
                     ex.limits.time_threshold, ex.limits.token_threshold, ex.limits.min_tail_slice,
                     ex.relaxed ? fmt::format(", {} short sequences above T_t", ex.relaxed) : "");
  if (ex.cuts.empty()) s += "  no sequence is cut\n";
  for (const ExplainCut& c : ex.cuts) {
    s += fmt::format("  seq {} ({} tokens), {}:\n   ", c.seq, c.length, c.rule);
    for (size_t i = 0; i < c.lens.size(); ++i)
      s += fmt::format(" [{}, +{}) {:.5f} s", c.offsets[i], c.lens[i], c.times[i]);
    s += "\n";
  }
}

void text_packs(std::string& s, const PlanExplain& ex) {
  s += fmt::format("packing: {} chunks of whole sequences (Best-Fit-Decreasing within T_t, T_m)\n",
                   ex.packs.size());
  for (size_t i = 0; i < ex.packs.size() && i < kTextRows; ++i) {
    const ExplainPack& p = ex.packs[i];
    std::string what = p.tail_of >= 0 ? fmt::format("tail of seq {} + ", p.tail_of) : "";
    s += fmt::format("  chunk {}: {}{} whole, {} tokens, {:.5f} s\n", p.chunk, what, p.seqs.size(),
                     p.tokens, p.time);
  }
  if (ex.packs.size() > kTextRows)
    s += fmt::format("  ... {} more in the plan JSON's explain\n", ex.packs.size() - kTextRows);
}

void text_recompute(std::string& s, const PlanExplain& ex) {
  int64_t saved = 0;
  double time = 0;
  for (const ExplainRecompute& r : ex.recompute) {
    saved += r.saved_bytes;
    time += r.time;
  }
  s += fmt::format(
      "recompute: {} (stage, chunk) recompute, {} less held and {:.4f} s of recompute summed over "
      "them",
      ex.recompute.size(), format_bytes(saved), time);
  if (ex.recompute_time > 0)
    s += fmt::format(" ({:.4f} s on the critical waves, the solve's objective)", ex.recompute_time);
  s += "\n";
  for (size_t i = 0; i < ex.recompute.size() && i < kTextRows; ++i) {
    const ExplainRecompute& r = ex.recompute[i];
    s += fmt::format("  stage {} chunk {}: {}/{} layers, saves {}, costs {:.5f} s\n", r.stage,
                     r.chunk, r.layers, r.max_layers, format_bytes(r.saved_bytes), r.time);
  }
  if (ex.recompute.size() > kTextRows)
    s += fmt::format("  ... {} more in the plan JSON's explain\n", ex.recompute.size() - kTextRows);
}

}  // namespace

std::string explain_text(const PlanExplain& ex) {
  std::string s;
  text_candidates(s, ex);
  text_slicing(s, ex);
  text_packs(s, ex);
  text_recompute(s, ex);
  return s;
}

}  // namespace infinipipe::plan
