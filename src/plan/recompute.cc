#include "plan/recompute.h"

#include <algorithm>
#include <map>
#include <utility>

#include "core/error.h"
#include "plan/schedule_memory.h"

namespace infinipipe::plan {

namespace {

cost::StageShape shape_of(const StageSpec& s) {
  return cost::StageShape{s.num_layers, s.has_embedding, s.has_lm_head, s.rank};
}

// For each chunk, the chunk holding the previous slice of its sequence (-1 when it has none):
// that chunk's backward consumes the dK/dV buffer this chunk's backward leaves.
std::vector<int32_t> previous_slice_chunk(const Plan& plan) {
  std::map<std::pair<int32_t, int64_t>, int32_t> chunk_of_end;  // (seq, end) -> chunk
  for (const Chunk& c : plan.chunks)
    for (const Slice& s : c.slices) chunk_of_end[{s.seq, s.end()}] = c.id;
  std::vector<int32_t> prev(plan.chunks.size(), -1);
  for (const Chunk& c : plan.chunks)
    for (const Slice& s : c.slices)
      if (s.offset > 0) {
        auto it = chunk_of_end.find({s.seq, s.offset});
        if (it != chunk_of_end.end()) prev[c.id] = it->second;
      }
  return prev;
}

// Position of each (stage, chunk)'s backward among its pipeline's backwards on that stage
// (stage * nchunks + chunk; -1 when the stage never runs it). The backwards that run at the
// same time are position j on stage s and j + 1 on stage s + 1; a cut sequence's slices run
// backward in reverse order, so the forward positions would tie slices that never overlap.
std::vector<int32_t> backward_positions(const Plan& plan, const std::vector<int32_t>& pipeline) {
  const int32_t n = static_cast<int32_t>(plan.chunks.size()), nstages = plan.num_stages();
  std::vector<int32_t> pos(static_cast<size_t>(nstages) * n, -1);
  for (const auto& list : plan.actions) {
    std::map<std::pair<int32_t, int32_t>, int32_t> count;  // (stage, pipeline) -> backwards seen
    for (const Action& a : list) {
      if (a.kind != ActionKind::backward || a.stage < 0 || a.stage >= nstages || a.chunk < 0 ||
          a.chunk >= n)
        continue;
      pos[static_cast<size_t>(a.stage) * n + a.chunk] = count[{a.stage, pipeline[a.chunk]}]++;
    }
  }
  return pos;
}

std::vector<std::vector<cost::SliceShape>> shapes_of_chunks(const Plan& plan) {
  std::vector<std::vector<cost::SliceShape>> out(plan.chunks.size());
  for (size_t c = 0; c < plan.chunks.size(); ++c) out[c] = plan.chunks[c].shapes();
  return out;
}

// The two halves of recompute_problem: the items (and their groups), then every rank's points.
struct ProblemBuilder {
  const Plan& plan;
  const cost::CostModel& cm;
  std::vector<std::vector<cost::SliceShape>> shapes;  // per chunk

  int32_t nchunks() const { return static_cast<int32_t>(plan.chunks.size()); }

  // One item per (stage, chunk), grouped along the backward diagonals of each consecutive
  // pipeline (EPP) when `diagonal`, else one group each (also an item whose stage never runs its
  // backward, which validation refuses). Returns the item of each stage * nchunks + chunk.
  std::vector<int32_t> add_items(RecomputeProblem& pb, bool diagonal) const {
    const int32_t n = nchunks(), nstages = plan.num_stages();
    std::vector<int32_t> pipeline(n, 0);
    for (int32_t c = 0; c < n; ++c)
      pipeline[c] =
          c < static_cast<int32_t>(plan.pipeline_of_chunk.size()) ? plan.pipeline_of_chunk[c] : 0;
    const std::vector<int32_t> bwd_pos = backward_positions(plan, pipeline);
    std::vector<int32_t> item_of(static_cast<size_t>(nstages) * n, -1);
    std::map<std::pair<int32_t, int32_t>, int32_t> group_of_key;
    for (int32_t s = 0; s < nstages; ++s)
      for (int32_t c = 0; c < n; ++c) {
        RecomputeItem it = item(s, c);
        const int32_t pos = bwd_pos[static_cast<size_t>(s) * n + c];
        const std::pair<int32_t, int32_t> key =
            diagonal && pos >= 0 ? std::pair{pipeline[c], pos - s}
                                 : std::pair{-1, static_cast<int32_t>(pb.items.size())};
        auto [g, fresh] = group_of_key.try_emplace(key, static_cast<int32_t>(pb.group_max.size()));
        if (fresh) pb.group_max.push_back(0);
        it.group = g->second;
        pb.group_max[it.group] = std::max(pb.group_max[it.group], it.max_layers);
        item_of[static_cast<size_t>(s) * n + c] = static_cast<int32_t>(pb.items.size());
        pb.items.push_back(std::move(it));
      }
    return item_of;
  }

  // Stage s, chunk c: its costs for every recompute count (group left to the caller).
  RecomputeItem item(int32_t s, int32_t c) const {
    const StageSpec& spec = plan.stages[s];
    const cost::StageShape sh = shape_of(spec);
    RecomputeItem it;
    it.stage = s;
    it.chunk = c;
    it.rank = plan.rank_of_stage(s);
    it.max_layers = static_cast<int32_t>(spec.num_layers);
    // The K/V kept and the dK/dV buffer do not depend on r.
    const int64_t kv = cm.kv_keep_bytes(shapes[c], sh), dkv = cm.dkv_buffer_bytes(shapes[c], sh);
    it.time.reserve(it.max_layers + 1);
    it.act.reserve(it.max_layers + 1);
    it.transient.reserve(it.max_layers + 1);
    for (int32_t r = 0; r <= it.max_layers; ++r) {
      it.time.push_back(r == 0 ? 0.0 : cm.recompute_time(shapes[c], r, it.rank));
      it.act.push_back(cm.activation_bytes(shapes[c], sh, r) + kv);
      it.transient.push_back(cm.backward_transient_bytes(shapes[c], sh, r) + dkv);
    }
    return it;
  }

  // Walks one rank's list: activations live from forward to backward; the dK/dV buffer a
  // backward leaves lives until the backward of the previous slice's chunk on that stage.
  void add_points(RecomputeProblem& pb, int32_t rank, const MemoryContext& mem,
                  const std::vector<int32_t>& item_of, const std::vector<int32_t>& prev,
                  const std::vector<int64_t>& in_flight) const {
    const int32_t n = nchunks(), nstages = plan.num_stages();
    int64_t fixed = rank_static_bytes(plan, cm, mem, rank);
    std::vector<int32_t> live;            // items holding activations
    std::map<int32_t, int64_t> dkv_held;  // item waiting for its buffer to be consumed -> bytes
    int64_t dkv_total = 0;
    const auto& acts = plan.actions[rank];
    for (int32_t a = 0; a < static_cast<int32_t>(acts.size()); ++a) {
      const Action& act = acts[a];
      if (act.stage < 0 || act.stage >= nstages || act.chunk < 0 || act.chunk >= n)
        fail("rank {} action {} names stage {} chunk {}, outside the plan", rank, a, act.stage,
             act.chunk);
      const int32_t item = item_of[static_cast<size_t>(act.stage) * n + act.chunk];
      const cost::StageShape sh = shape_of(plan.stages[act.stage]);
      RecomputePoint pt;
      pt.rank = rank;
      pt.action = a;
      pt.terms.reserve(live.size() + 1);
      const int64_t sent_before = in_flight[a];  // as schedule_memory_trace counts them
      if (act.kind == ActionKind::forward) {
        live.push_back(item);
        // A forward's temporaries do not depend on the recompute count: a fixed term.
        pt.fixed =
            fixed + dkv_total + sent_before + cm.forward_transient_bytes(shapes[act.chunk], sh);
        for (int32_t l : live) pt.terms.push_back({l, false, l == item});
        pb.points.push_back(std::move(pt));
        continue;
      }
      // The buffers of the next slice's chunks (whose prev is this chunk) hold this chunk's
      // context: its dK/dV (its item's transient) accumulate there, as schedule_memory_trace
      // counts them. The backward consumes them and leaves its own context's.
      int64_t consumed = 0;
      for (auto it = dkv_held.begin(); it != dkv_held.end();) {
        const RecomputeItem& held = pb.items[it->first];
        if (held.stage == act.stage && prev[held.chunk] == act.chunk) {
          consumed += it->second;
          it = dkv_held.erase(it);
        } else {
          ++it;
        }
      }
      dkv_total -= consumed;
      const int64_t own = cm.dkv_buffer_bytes(shapes[act.chunk], sh);
      pt.fixed = fixed + dkv_total + std::max<int64_t>(0, consumed - own) + sent_before;
      for (int32_t l : live) pt.terms.push_back({l, false});
      pt.terms.push_back({item, true});
      pb.points.push_back(std::move(pt));
      live.erase(std::remove(live.begin(), live.end(), item), live.end());
      if (prev[act.chunk] >= 0) {
        dkv_held[item] = own;
        dkv_total += own;
      }
    }
  }
};

}  // namespace

RecomputeProblem recompute_problem(const Plan& plan, const cost::CostModel& cm,
                                   const MemoryContext& mem, RecomputeTie tie) {
  RecomputeProblem pb;
  pb.budget = mem.budget;
  pb.pp = plan.pp;
  const int32_t nstages = plan.num_stages();
  if (static_cast<int32_t>(plan.stages.size()) != nstages)
    fail("plan has {} stage specs for pp {} x vpp {}", plan.stages.size(), plan.pp, plan.vpp);
  const ProblemBuilder b{plan, cm, shapes_of_chunks(plan)};
  const std::vector<int32_t> item_of =
      b.add_items(pb, tie == RecomputeTie::diagonal && plan.vpp == 1);
  const auto prev = previous_slice_chunk(plan);
  const std::vector<std::vector<int64_t>> in_flight = in_flight_bytes(plan, cm);
  for (int32_t rank = 0; rank < static_cast<int32_t>(plan.actions.size()); ++rank)
    b.add_points(pb, rank, mem, item_of, prev, in_flight[rank]);
  return pb;
}

std::vector<int64_t> recompute_peaks(const RecomputeProblem& pb, std::span<const int32_t> layers) {
  // Each item's three term values first (held, held at its own forward, transient): a point
  // has far more terms than the plan has items, and each then reads one number.
  std::vector<int64_t> value(3 * pb.items.size());
  for (size_t i = 0; i < pb.items.size(); ++i) {
    const RecomputeItem& it = pb.items[i];
    const int32_t x = layers[it.group];
    value[3 * i] = recompute_term_value(it, false, false, x);
    value[3 * i + 1] = recompute_term_value(it, false, true, x);
    value[3 * i + 2] = recompute_term_value(it, true, false, x);
  }
  std::vector<int64_t> peak(pb.pp, 0);
  for (const RecomputePoint& pt : pb.points) {
    int64_t v = pt.fixed;
    for (const RecomputeTerm& t : pt.terms)
      v += value[3 * static_cast<size_t>(t.item) + (t.transient ? 2 : t.forward ? 1 : 0)];
    peak[pt.rank] = std::max(peak[pt.rank], v);
  }
  return peak;
}

double recompute_cost(const RecomputeProblem& pb, std::span<const int32_t> layers) {
  std::vector<double> worst(pb.group_max.size(), 0.0);
  for (const RecomputeItem& it : pb.items) {
    const int32_t r = std::min(layers[it.group], it.max_layers);
    worst[it.group] = std::max(worst[it.group], it.time[r]);
  }
  double sum = 0;
  for (double w : worst) sum += w;
  return sum;
}

int64_t recompute_min_budget(const RecomputeProblem& pb) {
  const auto peaks = recompute_peaks(pb, pb.group_max);
  int64_t m = 0;
  for (int64_t p : peaks) m = std::max(m, p);
  return m;
}

void recompute_apply(Plan& plan, const RecomputeProblem& pb, std::span<const int32_t> layers) {
  const int32_t nchunks = static_cast<int32_t>(plan.chunks.size());
  std::vector<int32_t> r_of(static_cast<size_t>(plan.num_stages()) * nchunks, 0);
  for (const RecomputeItem& it : pb.items)
    r_of[static_cast<size_t>(it.stage) * nchunks + it.chunk] =
        std::min(layers[it.group], it.max_layers);
  for (auto& list : plan.actions)
    for (Action& a : list)
      a.recompute_layers = r_of[static_cast<size_t>(a.stage) * nchunks + a.chunk];
}

int32_t megatron_recompute_layers(const ParallelConfig& par, int64_t stage_layers) {
  if (par.recompute_granularity != RecomputeGranularity::full) return 0;
  if (par.recompute_method == RecomputeMethod::uniform) return static_cast<int32_t>(stage_layers);
  const int64_t n = par.recompute_num_layers > 0 ? par.recompute_num_layers : stage_layers;
  return static_cast<int32_t>(std::min(n, stage_layers));
}

void recompute_apply_static(Plan& plan, const ParallelConfig& par) {
  for (auto& list : plan.actions)
    for (Action& a : list)
      a.recompute_layers = megatron_recompute_layers(par, plan.stages[a.stage].num_layers);
}

}  // namespace infinipipe::plan
