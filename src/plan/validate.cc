#include "plan/validate.h"

#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "core/error.h"
#include "plan/budget_error.h"
#include "plan/model_states.h"
#include "plan/schedule_memory.h"
#include "plan/schedule_replay.h"

namespace infinipipe::plan {
namespace {

constexpr size_t kMaxErrors = 20;  // enough to see a pattern, short enough to read

struct Checker {
  const Plan& p;
  ValidationResult& res;
  template <typename... A>
  void error(fmt::format_string<A...> f, A&&... a) {
    if (res.errors.size() < kMaxErrors) res.errors.push_back(fmt::format(f, std::forward<A>(a)...));
  }
};

std::string describe(const Action& a) {
  return fmt::format("{} of chunk {} on stage {}", action_kind_name(a.kind), a.chunk, a.stage);
}

// Degrees, stages and layer ranges.
void check_layout(Checker& ck, const Config& cfg) {
  const Plan& p = ck.p;
  if (p.pp < 1 || p.vpp < 1) return ck.error("pp = {} and vpp = {} must be >= 1", p.pp, p.vpp);
  if (p.pp != cfg.parallel.pipeline_parallel)
    ck.error("the plan has pp = {} but the configuration pipeline-parallel = {}", p.pp,
             cfg.parallel.pipeline_parallel);
  const int32_t ns = p.num_stages();
  if (static_cast<int32_t>(p.stages.size()) != ns)
    return ck.error("the plan has {} stages, expected pp*vpp = {}", p.stages.size(), ns);
  int64_t next_layer = 0;
  for (int32_t s = 0; s < ns; ++s) {
    const StageSpec& st = p.stages[s];
    if (st.index != s || st.rank != s % p.pp)
      ck.error("stage {} has index {} and rank {}, expected index {} on rank {}", s, st.index,
               st.rank, s, s % p.pp);
    if (st.first_layer != next_layer || st.num_layers < 0)
      ck.error("stage {} covers layers [{}, {}), expected it to start at layer {}", s,
               st.first_layer, st.first_layer + st.num_layers, next_layer);
    next_layer = st.first_layer + st.num_layers;
    if (st.has_embedding != (s == 0))
      ck.error("stage {} {} the embedding; only stage 0 must", s,
               st.has_embedding ? "holds" : "lacks");
    if (st.has_lm_head != (s == ns - 1))
      ck.error("stage {} {} the LM head; only the last stage must", s,
               st.has_lm_head ? "holds" : "lacks");
  }
  if (next_layer != cfg.model.num_layers)
    ck.error("the stages cover {} layers but the model has {}", next_layer, cfg.model.num_layers);
  if (!p.pipeline_of_chunk.empty() && p.pipeline_of_chunk.size() != p.chunks.size())
    ck.error("pipeline_of_chunk has {} entries for {} chunks", p.pipeline_of_chunk.size(),
             p.chunks.size());
  if (static_cast<int32_t>(p.actions.size()) != p.pp)
    ck.error("the plan has {} action lists, expected one per rank (pp = {})", p.actions.size(),
             p.pp);
}

// Every token of every sequence in exactly one slice; slices well formed.
void check_tokens(Checker& ck) {
  const Plan& p = ck.p;
  const int64_t nseq = static_cast<int64_t>(p.seq_lengths.size());
  struct Piece {
    int64_t offset, len;
    int32_t chunk;
  };
  std::vector<std::vector<Piece>> pieces(nseq);
  for (size_t c = 0; c < p.chunks.size(); ++c) {
    const Chunk& ch = p.chunks[c];
    if (ch.id != static_cast<int32_t>(c)) ck.error("chunk at position {} has id {}", c, ch.id);
    if (ch.slices.empty()) ck.error("chunk {} is empty", c);
    for (const Slice& s : ch.slices) {
      if (s.seq < 0 || s.seq >= nseq) {
        ck.error("chunk {} has a slice of sequence {}, but the batch has {} sequences", c, s.seq,
                 nseq);
        continue;
      }
      if (s.seq_len != p.seq_lengths[s.seq])
        ck.error("chunk {}: slice of sequence {} says the sequence has {} tokens, it has {}", c,
                 s.seq, s.seq_len, p.seq_lengths[s.seq]);
      if (s.offset < 0 || s.len <= 0)
        ck.error("chunk {}: slice [{}, {}) of sequence {} is empty or negative", c, s.offset,
                 s.offset + s.len, s.seq);
      else
        pieces[s.seq].push_back({s.offset, s.len, static_cast<int32_t>(c)});
    }
    for (size_t a = 0; a < ch.slices.size(); ++a)
      for (size_t b = a + 1; b < ch.slices.size(); ++b)
        if (ch.slices[a].seq == ch.slices[b].seq)
          ck.error("chunk {} holds two slices of sequence {}: merge them into one slice", c,
                   ch.slices[a].seq);
  }
  for (int64_t q = 0; q < nseq; ++q) {
    auto& v = pieces[q];
    std::sort(v.begin(), v.end(),
              [](const Piece& a, const Piece& b) { return a.offset < b.offset; });
    int64_t at = 0;
    int32_t prev_chunk = -1;
    for (const Piece& pc : v) {
      if (pc.offset > at)
        ck.error("tokens [{}, {}) of sequence {} are in no chunk (missing tokens)", at, pc.offset,
                 q);
      else if (pc.offset < at)
        ck.error("tokens [{}, {}) of sequence {} are in chunks {} and {} (duplicate tokens)",
                 pc.offset, std::min(at, pc.offset + pc.len), q, prev_chunk, pc.chunk);
      at = std::max(at, pc.offset + pc.len);
      prev_chunk = pc.chunk;
    }
    if (at < p.seq_lengths[q])
      ck.error("tokens [{}, {}) of sequence {} are in no chunk (missing tokens)", at,
               p.seq_lengths[q], q);
    else if (at > p.seq_lengths[q])
      ck.error("sequence {} has {} tokens but a slice reaches token {}", q, p.seq_lengths[q], at);
  }
}

// Per rank: stage placement, one forward and one backward of every (stage, chunk), forward
// first, equal recompute; per stage: slice forwards ascending, backwards descending.
void check_actions(Checker& ck) {
  const Plan& p = ck.p;
  const int32_t ns = p.num_stages();
  const int64_t m = static_cast<int64_t>(p.chunks.size());
  std::vector<int64_t> fpos(ns * m, -1), bpos(ns * m, -1);
  // Last forward / backward slice of (stage, sequence): offset and chunk.
  std::unordered_map<int64_t, std::pair<int64_t, int32_t>> last_f, last_b;
  const size_t errors_before = ck.res.errors.size();
  for (int32_t r = 0; r < p.pp && r < static_cast<int32_t>(p.actions.size()); ++r) {
    const auto& list = p.actions[r];
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      if (a.chunk < 0 || a.chunk >= m || a.stage < 0 || a.stage >= ns) {
        ck.error("rank {} action {}: chunk {} / stage {} out of range", r, i, a.chunk, a.stage);
        continue;
      }
      if (a.stage % p.pp != r) {
        ck.error("rank {} action {} ({}): stage {} lives on rank {}", r, i, describe(a), a.stage,
                 a.stage % p.pp);
        continue;
      }
      if (a.recompute_layers < 0 || a.recompute_layers > p.stages[a.stage].num_layers)
        ck.error("rank {} action {} ({}): recompute_layers = {} outside [0, {}]", r, i, describe(a),
                 a.recompute_layers, p.stages[a.stage].num_layers);
      const size_t at = static_cast<size_t>(a.stage) * m + a.chunk;
      auto& pos = a.kind == ActionKind::forward ? fpos : bpos;
      if (pos[at] >= 0) {
        ck.error("rank {} action {} repeats the {} (first at action {})", r, i, describe(a),
                 pos[at]);
        continue;
      }
      pos[at] = static_cast<int64_t>(i);
      if (p.forward_only && (a.kind == ActionKind::backward || a.recompute_layers != 0)) {
        ck.error("rank {} action {} ({}): a forward-only plan runs forwards without recompute", r,
                 i, describe(a));
      }
      if (a.kind == ActionKind::backward) {
        if (fpos[at] < 0) {
          ck.error("rank {} action {}: backward of chunk {} on stage {} comes before its forward",
                   r, i, a.chunk, a.stage);
        } else if (list[fpos[at]].recompute_layers != a.recompute_layers) {
          ck.error("rank {} action {} ({}): recompute_layers {} differs from its forward's {}", r,
                   i, describe(a), a.recompute_layers, list[fpos[at]].recompute_layers);
        }
      }
      // Slice order of every cut sequence on this stage.
      auto& last = a.kind == ActionKind::forward ? last_f : last_b;
      for (const Slice& s : p.chunks[a.chunk].slices) {
        if (s.is_whole()) continue;
        int64_t k = int64_t{a.stage} * (int64_t{1} << 32) + s.seq;
        auto it = last.find(k);
        if (it != last.end()) {
          bool fwd = a.kind == ActionKind::forward;
          if (fwd ? s.offset < it->second.first : s.offset > it->second.first)
            ck.error(
                "rank {} action {} ({}): slice [{}, {}) of sequence {} runs its {} after the "
                "{} slice at offset {} (chunk {}); forwards must run in slice order, "
                "backwards in reverse",
                r, i, describe(a), s.offset, s.end(), s.seq, action_kind_name(a.kind),
                fwd ? "later" : "earlier", it->second.first, it->second.second);
        }
        last[k] = {s.offset, a.chunk};
      }
    }
  }
  if (ck.res.errors.size() != errors_before) return;
  for (int32_t s = 0; s < ns; ++s)
    for (int64_t c = 0; c < m; ++c) {
      const size_t at = static_cast<size_t>(s) * m + c;
      if (fpos[at] < 0) ck.error("rank {} has no forward of chunk {} on stage {}", s % p.pp, c, s);
      if (bpos[at] < 0 && !p.forward_only)
        ck.error("rank {} has no backward of chunk {} on stage {}", s % p.pp, c, s);
    }
}

}  // namespace

std::string ValidationResult::message() const {
  std::string out;
  for (const auto& e : errors) {
    if (!out.empty()) out += '\n';
    out += e;
  }
  return out;
}

ValidationResult validate_structure(const Plan& plan, const Config& cfg) {
  ValidationResult res;
  Checker ck{plan, res};
  check_layout(ck, cfg);
  if (!res.ok()) return res;
  check_tokens(ck);
  check_actions(ck);
  if (!res.ok()) return res;
  Replay replay = schedule_replay(plan, {});
  if (replay.deadlock) ck.error("the action lists deadlock: {}", replay.deadlock_reason);
  return res;
}

ValidationResult validate(const Plan& plan, const cost::CostModel& cost, const Config& cfg) {
  ValidationResult res = validate_structure(plan, cfg);
  if (!res.ok()) return res;
  Checker ck{plan, res};
  MemoryTrace mem = schedule_memory_trace(plan, cost, cfg);
  res.peak_bytes = mem.peak;
  if (plan.memory_budget > 0)
    for (int32_t r = 0; r < plan.pp; ++r) {
      if (mem.peak[r] <= plan.memory_budget) continue;
      if (mem.static_bytes[r] > plan.memory_budget) {
        ck.error(
            "rank {}: weights, gradients and optimizer state alone take {} > memory budget "
            "{}; raise --memory-budget, use more pipeline stages or data parallelism",
            r, format_bytes(mem.static_bytes[r]), format_bytes(plan.memory_budget));
        continue;
      }
      const auto& steps = mem.steps[r];
      for (size_t i = 0; i < steps.size(); ++i)
        if (steps[i].during > plan.memory_budget) {
          ck.error(
              "rank {} exceeds the memory budget at action {} ({}): predicted {} ({} bytes) "
              "> budget {} ({} bytes); this plan needs at least {} on rank {}: raise "
              "--memory-budget or recompute more layers",
              r, i, describe(plan.actions[r][i]), format_bytes(steps[i].during), steps[i].during,
              format_bytes(plan.memory_budget), plan.memory_budget, format_bytes(mem.peak[r]), r);
          break;
        }
    }
  return res;
}

void validate_or_throw(const Plan& plan, const cost::CostModel& cost, const Config& cfg) {
  ValidationResult res = validate(plan, cost, cfg);
  if (res.ok()) return;
  // Peaks are only traced once the structure is sound, so then every error is one of memory.
  if (!res.peak_bytes.empty()) {
    const auto binding = std::max_element(res.peak_bytes.begin(), res.peak_bytes.end());
    fail_budget(*binding, static_cast<int32_t>(binding - res.peak_bytes.begin()),
                "the {} plan is invalid:\n{}", plan.schedule, res.message());
  }
  fail("the {} plan is invalid:\n{}", plan.schedule, res.message());
}

std::vector<std::vector<double>> plan_action_seconds(const Plan& plan, const cost::CostModel& cost,
                                                     const Config& cfg) {
  std::vector<std::vector<double>> out(plan.actions.size());
  for (size_t k = 0; k < plan.actions.size(); ++k)
    for (const Action& a : plan.actions[k]) {
      auto sh = plan.chunks[a.chunk].shapes();
      cost::StageShape st = stage_shape(plan.stages[a.stage]);
      const int32_t rank = plan.stages[a.stage].rank;
      // ZeRO-3's gathers and reduce-scatters where the prefetch does not hide them (0 with ZeRO-1)
      out[k].push_back(
          a.kind == ActionKind::forward
              ? cost.forward_time(sh, st) + zero3_forward_exposed_seconds(cost, cfg, sh, st, rank)
              : cost.backward_time(sh, st) + cost.recompute_time(sh, a.recompute_layers, st.rank) +
                    zero3_backward_exposed_seconds(cost, cfg, sh, st, rank));
    }
  return out;
}

void plan_predict(Plan& plan, const cost::CostModel& cost, const Config& cfg) {
  const std::vector<std::vector<double>> own = plan_action_seconds(plan, cost, cfg);
  for (size_t k = 0; k < plan.actions.size(); ++k)
    for (size_t i = 0; i < own[k].size(); ++i) plan.actions[k][i].predicted_time = own[k][i];
  plan.rank_hosts = cost.rank_hosts();
  plan.predicted_peak_bytes = schedule_memory_trace(plan, cost, cfg).peak;
  Replay r = schedule_replay(plan, replay_transfer_times(plan, cost, cfg), own,
                             replay_step_costs(plan, cost), plan.rank_hosts);
  if (r.deadlock) fail("the {} plan deadlocks: {}", plan.schedule, r.deadlock_reason);
  plan.predicted_step_time = r.step_time;
  if (!cost::cores_shared(plan.rank_hosts)) return;
  for (size_t k = 0; k < plan.actions.size(); ++k)
    for (size_t i = 0; i < own[k].size(); ++i)
      plan.actions[k][i].predicted_time = r.timing[k][i].end - r.timing[k][i].start;
}

}  // namespace infinipipe::plan
