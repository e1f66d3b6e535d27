#include "plan/schedule.h"

#include <algorithm>
#include <span>
#include <unordered_map>

#include "core/error.h"
#include "plan/schedule_table.h"

namespace infinipipe::plan {
namespace {

Action make_action(ActionKind kind, int32_t chunk, int32_t stage) {
  Action a;
  a.kind = kind;
  a.chunk = chunk;
  a.stage = stage;
  return a;
}

void require_flat(const Plan& p, const char* name) {
  if (p.pp < 1) fail_config("pipeline-parallel size must be >= 1, got {}", p.pp);
  if (p.vpp != 1)
    fail_config(
        "schedule {} runs one stage per rank but the plan has {} virtual stages: use "
        "--schedule interleaved or --virtual-stages 1",
        name, p.vpp);
}

}  // namespace

std::vector<int32_t> schedule_backward_order(const Plan& p, std::span<const int32_t> fwd) {
  const size_t m = fwd.size();
  std::vector<size_t> parent(m);
  for (size_t i = 0; i < m; ++i) parent[i] = i;
  auto find = [&](size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  std::unordered_map<int32_t, size_t> first_pos_of_seq;
  std::vector<bool> cut(m, false);
  for (size_t i = 0; i < m; ++i)
    for (const Slice& s : p.chunks[fwd[i]].slices) {
      if (s.is_whole()) continue;
      cut[i] = true;
      auto [it, fresh] = first_pos_of_seq.emplace(s.seq, i);
      if (!fresh) parent[find(i)] = find(it->second);
    }
  std::unordered_map<size_t, std::vector<size_t>> groups;  // root -> positions, ascending
  for (size_t i = 0; i < m; ++i)
    if (cut[i]) groups[find(i)].push_back(i);
  std::vector<int32_t> bwd(fwd.begin(), fwd.end());
  for (auto& [root, pos] : groups)
    for (size_t j = 0; j < pos.size(); ++j) bwd[pos[j]] = fwd[pos[pos.size() - 1 - j]];
  return bwd;
}

namespace {

// One 1F1B pipeline over `fwd` appended to every rank's list (vpp = 1). Before its i-th backward,
// rank r has run f_r(i) = min(m, max(pp-r+i, ahead(i)+pp-1-r)) forwards. need(i) = 1 + the latest
// forward position among backwards 0..i: a cut sequence's backwards wait for all its slices'
// forwards. ahead(i) = max over j >= i of need(j) - (j-i) starts those forwards early, one per
// backward, instead of in a burst that drains the pipeline before every cut sequence; it never
// raises the most chunks in flight, max(f_r(i) - i). The pp-1-r term keeps rank r as far ahead
// of the last stage as plain 1F1B does. f_r(i) never grows with r, so whenever rank r-1 runs
// backward i before forward j, so does rank r: no cycle of waits, hence no deadlock. `gpipe`
// runs every forward first.
void pipeline_append(Plan& p, std::span<const int32_t> fwd, bool gpipe) {
  const int64_t m = static_cast<int64_t>(fwd.size());
  // GPipe runs the backwards in reverse forward order, as autograd over the whole batch would.
  std::vector<int32_t> bwd =
      gpipe ? std::vector<int32_t>(fwd.rbegin(), fwd.rend()) : schedule_backward_order(p, fwd);
  std::unordered_map<int32_t, int64_t> pos;
  for (int64_t i = 0; i < m; ++i) pos[fwd[i]] = i;
  std::vector<int64_t> ahead(m);
  int64_t run = 0;
  for (int64_t i = 0; i < m; ++i) ahead[i] = run = std::max(run, pos[bwd[i]] + 1);  // need(i)
  for (int64_t i = m - 2; i >= 0; --i) ahead[i] = std::max(ahead[i], ahead[i + 1] - 1);
  for (int32_t r = 0; r < p.pp; ++r) {
    auto& list = p.actions[r];
    int64_t f = 0;
    for (int64_t i = 0; i < m; ++i) {
      const int64_t target =
          gpipe ? m
                : std::min<int64_t>(m, std::max<int64_t>(p.pp - r + i, ahead[i] + p.pp - 1 - r));
      while (f < target) list.push_back(make_action(ActionKind::forward, fwd[f++], r));
      list.push_back(make_action(ActionKind::backward, bwd[i], r));
    }
  }
}

std::vector<int32_t> all_chunks(const Plan& p) {
  std::vector<int32_t> v(p.chunks.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(i);
  return v;
}

void reset_actions(Plan& p, const char* name) {
  p.schedule = name;
  p.actions.assign(p.pp, {});
  for (size_t i = 0; i < p.chunks.size(); ++i)
    if (p.chunks[i].id != static_cast<int32_t>(i))
      fail("chunk at position {} has id {}: chunk ids must equal their positions", i,
           p.chunks[i].id);
}

}  // namespace

void schedule_gpipe(Plan& p) {
  require_flat(p, "gpipe");
  reset_actions(p, "gpipe");
  pipeline_append(p, all_chunks(p), /*gpipe=*/true);
}

void schedule_1f1b(Plan& p) {
  require_flat(p, "1f1b");
  reset_actions(p, "1f1b");
  pipeline_append(p, all_chunks(p), false);
}

void schedule_seq1f1b(Plan& p) {
  require_flat(p, "seq1f1b");
  reset_actions(p, "seq1f1b");
  pipeline_append(p, all_chunks(p), false);
}

void schedule_epp(Plan& p) {
  if (p.pp < 1) fail_config("pipeline-parallel size must be >= 1, got {}", p.pp);
  if (p.vpp > 1 && p.pp < 2)
    fail_config("epp on {} virtual stages needs pipeline-parallel size >= 2, got {}: use --vpp 1",
                p.vpp, p.pp);
  reset_actions(p, "epp");
  // vpp > 1: each pipeline runs the interleaved order over the rank's virtual stages.
  auto append = [&](std::span<const int32_t> g) {
    if (p.vpp > 1)
      schedule_interleaved_pipeline_append(p, g);
    else
      pipeline_append(p, g, false);
  };
  const size_t m = p.chunks.size();
  if (p.pipeline_of_chunk.empty()) p.pipeline_of_chunk.assign(m, 0);
  if (p.pipeline_of_chunk.size() != m)
    fail("pipeline_of_chunk has {} entries for {} chunks", p.pipeline_of_chunk.size(), m);
  // A cut sequence must stay in one pipeline: its first slice's backward waits for the later ones.
  std::unordered_map<int32_t, int32_t> pipe_of_seq;
  std::vector<int32_t> group;
  for (size_t c = 0; c < m; ++c) {
    int32_t g = p.pipeline_of_chunk[c];
    if (c > 0 && g < p.pipeline_of_chunk[c - 1])
      fail(
          "pipeline_of_chunk must not decrease along the chunk order: chunk {} is in pipeline {} "
          "after chunk {} in pipeline {}",
          c, g, c - 1, p.pipeline_of_chunk[c - 1]);
    for (const Slice& s : p.chunks[c].slices) {
      if (s.is_whole()) continue;
      auto [it, fresh] = pipe_of_seq.emplace(s.seq, g);
      if (!fresh && it->second != g)
        fail(
            "sequence {} is cut across pipelines {} and {} (chunk {}): all slices of a sequence "
            "must run in the same pipeline",
            s.seq, it->second, g, c);
    }
    if (!group.empty() && p.pipeline_of_chunk[group.back()] != g) {
      append(group);
      group.clear();
    }
    group.push_back(static_cast<int32_t>(c));
  }
  if (!group.empty()) append(group);
}

// Megatron-LM's interleaved 1F1B (forward_backward_pipelining_with_interleaving). The virtual
// micro-batch table runs groups of N micro-batches through model chunk 0, then chunk 1, ...; the
// last group takes what is left. Megatron requires pp <= N <= m and a remainder m % N that is 0
// or >= pp (a smaller last group stalls on its dependencies); N defaults to pp, which forces
// m % pp == 0. We take the smallest N that satisfies the rule (Megatron's
// --microbatch-group-size-per-virtual-pipeline-stage), so N = pp whenever pp divides m.
// Backwards walk the same table with the model chunks reversed.
void schedule_interleaved(Plan& p) {
  const int64_t pp = p.pp, vpp = p.vpp, m = static_cast<int64_t>(p.chunks.size());
  if (pp < 2)
    fail_config(
        "the interleaved schedule needs pipeline-parallel size >= 2 (Megatron-LM's rule), "
        "got {}: use --schedule 1f1b",
        pp);
  if (vpp < 2)
    fail_config(
        "the interleaved schedule needs --virtual-stages >= 2, got {}: set it or use "
        "--schedule 1f1b",
        vpp);
  if (m < pp)
    fail_config(
        "the interleaved schedule needs at least pp = {} micro-batches, the batch has {}: "
        "use smaller micro-batches or --schedule 1f1b",
        pp, m);
  for (const Chunk& c : p.chunks)
    for (const Slice& s : c.slices)
      if (!s.is_whole())
        fail_config(
            "the interleaved schedule runs whole sequences only, chunk {} holds a slice of "
            "sequence {}: use --schedule seq1f1b or epp for sliced sequences",
            c.id, s.seq);
  reset_actions(p, "interleaved");

  int64_t group = pp;
  while (m % group != 0 && m % group < pp) ++group;  // terminates at group = m
  std::vector<std::pair<int32_t, int32_t>> table;    // (micro-batch, model chunk)
  for (int64_t lo = 0; lo < m; lo += group) {
    int64_t hi = lo + group >= m ? m : lo + group;
    for (int64_t mc = 0; mc < vpp; ++mc)
      for (int64_t mb = lo; mb < hi; ++mb) table.emplace_back(mb, mc);
    if (hi == m) break;
  }
  const int64_t total = m * vpp;
  for (int64_t r = 0; r < pp; ++r) {
    int64_t warm = std::min(total, (pp - r - 1) * 2 + (vpp - 1) * group);
    auto fwd = [&](int64_t k) {
      auto [mb, mc] = table[k];
      return make_action(ActionKind::forward, mb, static_cast<int32_t>(mc * pp + r));
    };
    auto bwd = [&](int64_t k) {
      auto [mb, mc] = table[k];
      return make_action(ActionKind::backward, mb, static_cast<int32_t>((vpp - 1 - mc) * pp + r));
    };
    auto& list = p.actions[r];
    list.reserve(2 * total);
    for (int64_t k = 0; k < warm; ++k) list.push_back(fwd(k));
    for (int64_t k = 0; k < total - warm; ++k) {
      list.push_back(fwd(k + warm));
      list.push_back(bwd(k));
    }
    for (int64_t k = total - warm; k < total; ++k) list.push_back(bwd(k));
  }
}

void schedule_build(Plan& p, Schedule s) {
  schedule_row(s).generate(p);
}

}  // namespace infinipipe::plan
