// What `plan --explain` prints: the candidates with their verdicts, the slicing, the packs and
// the recompute of the chosen plan; long lists cut (the JSON keeps every entry).
#include <fmt/format.h>

#include "plan/plan_explain.h"

namespace infinipipe::plan {

namespace {

constexpr size_t kTextRows = 16;

std::string bytes_list(const std::vector<int64_t>& bytes) {
  std::string s;
  for (size_t i = 0; i < bytes.size(); ++i) s += (i ? ", " : "") + format_bytes(bytes[i]);
  return s;
}

void text_candidates(std::string& s, const PlanExplain& ex) {
  if (ex.candidates.empty()) {
    s += "candidates: none recorded\n";
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
  s += fmt::format("packing: {} chunks of whole sequences ({})\n", ex.packs.size(), ex.pack_rule);
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
