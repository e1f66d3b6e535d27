// The baselines' chunking and their tuning: batch-level schedules (gpipe, 1f1b, interleaved) and
// Seq1F1B, each searched over its own knobs; plus the data-parallel split of a global batch.
#include "plan/baselines.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "core/error.h"
#include "plan/budget_error.h"
#include "plan/plan_explain.h"
#include "plan/planner.h"
#include "plan/recompute.h"
#include "plan/schedule_table.h"
#include "plan/sequence_processor.h"
#include "plan/stage_layout.h"

namespace infinipipe::plan {

namespace {

int64_t longest_of(std::span<const int64_t> lengths) {
  int64_t m = 0;
  for (int64_t l : lengths) m = std::max(m, l);
  return m;
}

// Micro-batch capacities worth trying: the longest sequence times 1, 2, 4, ... up to the batch.
std::vector<int64_t> capacity_candidates(std::span<const int64_t> lengths, size_t max_count) {
  const int64_t longest = longest_of(lengths);
  const int64_t total = std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
  std::vector<int64_t> out;
  for (int64_t c = longest; out.size() < max_count; c *= 2) {
    out.push_back(c);
    if (c >= total) break;
  }
  return out;
}

// Sequences per micro-batch fixed by the user: consecutive groups in batch order.
std::vector<Chunk> pack_by_count(std::span<const int64_t> lengths, int64_t per_batch) {
  std::vector<Chunk> out;
  for (size_t i = 0; i < lengths.size(); i += static_cast<size_t>(per_batch)) {
    Chunk c;
    for (size_t j = i; j < std::min(lengths.size(), i + static_cast<size_t>(per_batch)); ++j)
      c.slices.push_back({static_cast<int32_t>(j), 0, lengths[j], lengths[j]});
    out.push_back(std::move(c));
  }
  return out;
}

int32_t max_stage_layers(const std::vector<StageSpec>& stages) {
  int64_t m = 0;
  for (const StageSpec& s : stages) m = std::max(m, s.num_layers);
  return static_cast<int32_t>(m);
}

// A baseline setting as `plan --explain` names it ("mb<=8192 tok, vpp=2").
std::string setting_name(const PlanKnobs& k) {
  std::string s = k.micro_batch_size > 0 ? fmt::format("mbs={}", k.micro_batch_size)
                                         : fmt::format("mb<={} tok", k.micro_batch_tokens);
  if (k.slices > 0) s += fmt::format(", slices={}", k.slices);
  if (k.vpp > 1) s += fmt::format(", vpp={}", k.vpp);
  return s;
}

struct Search {
  Candidate best;
  PlanKnobs knobs;
  bool have = false;
  LeastBudget least;
  std::string last_config_error;
  bool runtime_error = false;  // last_config_error came from a failed plan, not the config
  int32_t evaluated = 0;
  PlanExplain explain;    // every evaluated setting, in order
  size_t best_index = 0;  // of `best` in explain.candidates

  // One evaluated candidate of setting `k` under static recompute r.
  void record(const Candidate& c, const PlanKnobs& k, int32_t r) {
    ++evaluated;
    ExplainCandidate& e = explain_record(
        explain,
        setting_name(k) + (r == 0 ? ", no recompute" : fmt::format(", recompute {} layers", r)),
        k.slices > 0 ? k.slices : 1, c);
    e.micro_batch_tokens = k.micro_batch_tokens;
    e.micro_batch_size = k.micro_batch_size;
    e.vpp = k.vpp;
    e.recompute_layers = r;
  }
  // The setting's candidate the tuner keeps; `index` is its entry in explain.candidates.
  void offer(Candidate c, const PlanKnobs& k, size_t index) {
    least.offer(c);
    if (!c.fits) return;
    if (!have || c.plan.predicted_step_time < best.plan.predicted_step_time) {
      best = std::move(c);
      knobs = k;
      have = true;
      best_index = index;
    }
  }
  void skipped(const PlanKnobs& k, const std::string& why) {
    explain.notes.push_back(fmt::format("{}: not evaluated, {}", setting_name(k), why));
  }
  PlanResult finish(const char* schedule, const Config& cfg, int64_t budget) {
    if (!have) {
      if (!least.known()) {
        if (runtime_error)
          fail("no setting of the {} schedule gave a usable plan: {}", schedule, last_config_error);
        fail_config("no setting of the {} schedule can run this batch: {}", schedule,
                    last_config_error);
      }
      fail_budget(least.bytes, least.rank,
                  "the memory budget {} per rank is too small for this batch with the {} "
                  "schedule: the smallest budget that fits is {} ({} bytes, for rank {}); raise "
                  "--memory-budget or use more pipeline stages{}",
                  format_bytes(budget), schedule, format_bytes(least.bytes), least.bytes,
                  least.rank, least_budget_hint(cfg));
    }
    knobs.candidates = evaluated;
    explain_verdicts(explain, best_index, budget);
    return PlanResult{std::move(best.plan), knobs, std::move(explain)};
  }
};

// Evaluates setting `k` with static recompute: tuned by bisection (the least count that fits),
// or the user's fixed Megatron choice. Every count tried is recorded; the kept one is offered.
void evaluate_static(const Config& cfg, const cost::CostModel& cm, std::span<const int64_t> lengths,
                     const CandidateSpec& spec, PlanKnobs k, Search& search) {
  const int32_t max_r = max_stage_layers(*spec.stages);
  const size_t first = search.explain.candidates.size();
  Candidate c;
  if (cfg.parallel.recompute_granularity == RecomputeGranularity::adaptive) {
    c = planner_least_recompute(
        cfg, cm, lengths, spec, max_r,
        [&](int32_t r, const Candidate& tried) { search.record(tried, k, r); });
    k.recompute_layers = 0;
    for (const auto& list : c.plan.actions)
      for (const Action& a : list)
        k.recompute_layers = std::max(k.recompute_layers, a.recompute_layers);
  } else {
    CandidateSpec s = spec;
    s.static_recompute = megatron_recompute_layers(cfg.parallel, max_r);
    k.recompute_layers = s.static_recompute;
    c = planner_evaluate(cfg, cm, lengths, std::move(s));
    search.record(c, k, k.recompute_layers);
  }
  size_t index = first;
  for (size_t i = first; i < search.explain.candidates.size(); ++i)
    if (search.explain.candidates[i].recompute_layers == k.recompute_layers) index = i;
  search.offer(std::move(c), k, index);
}

}  // namespace

const char* least_budget_hint(const Config& cfg) {
  return cfg.parallel.recompute_granularity == RecomputeGranularity::adaptive
             ? ""
             : "; or recompute more (--recompute-granularity adaptive lets the planner choose)";
}

std::vector<Chunk> pack_micro_batches(std::span<const int64_t> lengths, int64_t capacity) {
  std::vector<int32_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return lengths[a] > lengths[b]; });
  std::vector<Chunk> bins;
  std::vector<int64_t> used;
  for (int32_t seq : order) {
    const int64_t len = lengths[seq];
    if (len > capacity)
      fail(
          "sequence {} has {} tokens, more than the micro-batch capacity {}: batch-level "
          "schedules cannot cut sequences",
          seq, len, capacity);
    int best = -1;
    for (size_t i = 0; i < bins.size(); ++i)
      if (used[i] + len <= capacity && (best < 0 || used[i] > used[best]))
        best = static_cast<int>(i);
    if (best < 0) {
      bins.emplace_back();
      used.push_back(0);
      best = static_cast<int>(bins.size()) - 1;
    }
    bins[best].slices.push_back({seq, 0, len, len});
    used[best] += len;
  }
  for (size_t i = 0; i < bins.size(); ++i) bins[i].id = static_cast<int32_t>(i);
  return bins;
}

std::vector<Chunk> seq1f1b_chunks(std::span<const int64_t> lengths, int64_t capacity,
                                  int32_t slices, const cost::CostModel& cm,
                                  const cost::StageShape& stage) {
  std::vector<Chunk> out;
  auto cost_of = [&](int64_t context, int64_t len) {
    if (len <= 0) return 0.0;
    const cost::SliceShape s{context, len, true};
    return chunk_cost(cm, stage, std::span<const cost::SliceShape>(&s, 1));
  };
  for (const Chunk& mb : pack_micro_batches(lengths, capacity)) {
    // The micro-batch's sequences end to end; prefix cost at a token position.
    std::vector<int64_t> start{0};
    std::vector<double> before{0.0};
    for (const Slice& s : mb.slices) {
      before.push_back(before.back() + cost_of(0, s.len));
      start.push_back(start.back() + s.len);
    }
    const int64_t total_tokens = start.back();
    auto prefix = [&](int64_t x) {
      size_t j = std::upper_bound(start.begin(), start.end(), x) - start.begin() - 1;
      if (j >= mb.slices.size()) return before.back();
      return before[j] + cost_of(0, x - start[j]);
    };
    std::vector<int64_t> cuts{0};
    for (int32_t i = 1; i < slices; ++i) {
      const double target = before.back() * i / slices;
      int64_t lo = cuts.back(), hi = total_tokens;
      while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (prefix(mid) < target)
          lo = mid;
        else
          hi = mid;
      }
      if (hi > cuts.back() && hi < total_tokens) cuts.push_back(hi);
    }
    cuts.push_back(total_tokens);
    for (size_t p = 0; p + 1 < cuts.size(); ++p) {
      Chunk piece;
      for (size_t j = 0; j < mb.slices.size(); ++j) {
        const int64_t lo = std::max(cuts[p], start[j]), hi = std::min(cuts[p + 1], start[j + 1]);
        if (lo >= hi) continue;
        const Slice& s = mb.slices[j];
        piece.slices.push_back({s.seq, lo - start[j], hi - lo, s.len});
      }
      // A non-final slice next to other slices goes to a chunk of its own (chunk kinds).
      if (piece.slices.size() > 1 && piece.slices.back().is_split()) {
        Chunk head;
        head.slices.push_back(piece.slices.back());
        piece.slices.pop_back();
        out.push_back(std::move(piece));
        out.push_back(std::move(head));
      } else {
        out.push_back(std::move(piece));
      }
    }
  }
  for (size_t i = 0; i < out.size(); ++i) out[i].id = static_cast<int32_t>(i);
  return out;
}

PlanResult tune_batch_level(const Config& cfg, const cost::CostModel& cm,
                            std::span<const int64_t> lengths, Schedule schedule) {
  const int32_t pp = static_cast<int32_t>(cfg.parallel.pipeline_parallel);
  std::vector<int32_t> vpps{1};
  if (schedule_row(schedule).virtual_stages == VirtualStages::required) {
    vpps.clear();
    if (cfg.parallel.virtual_stages > 1) {
      vpps.push_back(static_cast<int32_t>(cfg.parallel.virtual_stages));
    } else {
      const int64_t per_rank = cm.model().num_layers / std::max(1, pp);
      for (int32_t v = 2; v <= 8 && v <= per_rank; ++v)
        if (cm.model().num_layers % (static_cast<int64_t>(pp) * v) == 0) vpps.push_back(v);
    }
    if (vpps.empty())
      fail_config(
          "the {} schedule needs num_layers ({}) divisible by pp x vpp with vpp >= 2: no such "
          "vpp for pp = {}",
          schedule_name(schedule), cm.model().num_layers, pp);
  }
  std::vector<std::vector<Chunk>> packings;
  std::vector<int64_t> caps, counts;  // per packing: token capacity or sequences per micro-batch
  if (cfg.parallel.micro_batch_size > 0) {
    packings.push_back(pack_by_count(lengths, cfg.parallel.micro_batch_size));
    caps.push_back(0);
    counts.push_back(cfg.parallel.micro_batch_size);
  } else {
    for (int64_t c : capacity_candidates(lengths, 8)) {
      packings.push_back(pack_micro_batches(lengths, c));
      caps.push_back(c);
      counts.push_back(0);
    }
    // Megatron's usual micro-batch of one sequence: the most micro-batches, which interleaving
    // needs (at least pp of them) when packing to the longest leaves too few.
    packings.push_back(pack_by_count(lengths, 1));
    caps.push_back(0);
    counts.push_back(1);
  }
  Search search;
  for (int32_t vpp : vpps) {
    std::vector<StageSpec> stages;
    try {
      stages = stage_layout_planned(cfg, cm, pp, vpp);
    } catch (const ConfigError& e) {
      search.last_config_error = e.what();
      search.explain.notes.push_back(fmt::format("vpp={}: not evaluated, {}", vpp, e.what()));
      continue;
    }
    for (size_t i = 0; i < packings.size(); ++i) {
      CandidateSpec spec;
      spec.schedule = schedule;
      spec.vpp = vpp;
      spec.stages = &stages;
      spec.chunks = packings[i];
      PlanKnobs k;
      k.micro_batch_tokens = caps[i];
      k.micro_batch_size = counts[i];
      k.vpp = vpp;
      try {
        evaluate_static(cfg, cm, lengths, spec, k, search);
      } catch (const ConfigError& e) {
        search.last_config_error = e.what();
        search.skipped(k, e.what());
      } catch (const Error& e) {  // a generator's plan that deadlocks: skip that setting
        search.last_config_error = e.what();
        search.runtime_error = true;
        search.skipped(k, e.what());
      }
    }
  }
  return search.finish(schedule_name(schedule), cfg, planner_budget(cfg, cm));
}

PlanResult tune_seq1f1b(const Config& cfg, const cost::CostModel& cm,
                        std::span<const int64_t> lengths) {
  const int32_t pp = static_cast<int32_t>(cfg.parallel.pipeline_parallel);
  const auto stages = stage_layout_planned(cfg, cm, pp, 1);
  const cost::StageShape ref = processor_reference_stage(cm.model(), pp);
  std::vector<int32_t> ks;
  if (cfg.parallel.seq1f1b_slices > 0) {
    ks.push_back(static_cast<int32_t>(cfg.parallel.seq1f1b_slices));
  } else {
    const int64_t longest = longest_of(lengths);
    for (int32_t k = 1; k <= 64; k *= 2)
      if (k == 1 || longest / k >= cfg.parallel.min_tail_slice) ks.push_back(k);
  }
  std::vector<int64_t> caps = cfg.parallel.micro_batch_size > 0
                                  ? std::vector<int64_t>{longest_of(lengths)}
                                  : capacity_candidates(lengths, 4);
  Search search;
  for (int64_t cap : caps)
    for (int32_t k : ks) {
      CandidateSpec spec;
      spec.schedule = Schedule::seq1f1b;
      spec.stages = &stages;
      spec.chunks = seq1f1b_chunks(lengths, cap, k, cm, ref);
      PlanKnobs kn;
      kn.micro_batch_tokens = cap;
      kn.slices = k;
      evaluate_static(cfg, cm, lengths, spec, kn, search);
    }
  return search.finish("seq1f1b", cfg, planner_budget(cfg, cm));
}

}  // namespace infinipipe::plan
