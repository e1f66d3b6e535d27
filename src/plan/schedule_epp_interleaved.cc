// EPP's chunks on virtual stages: one interleaved 1F1B pipeline over any chunk list (slices,
// packed and hybrid chunks), as Megatron-LM's forward_backward_pipelining_with_interleaving
// orders whole micro-batches, with the two rules slices add:
//  * on every virtual stage the slices of a sequence run their forwards in slice order and their
//    backwards in reverse (a later slice's backward produces dK/dV for the earlier tokens);
//  * the backward of a sequence's first slice waits for the forwards of all its slices, so the
//    rank must run those forwards first instead of stalling on the backward.
// Megatron's table runs groups of micro-batches through model chunk 0, then 1, ...; here the
// groups hold chunk positions and never cut a set of chunks linked by a cut sequence, and the
// backward table walks the positions in schedule_backward_order (slices reversed).
// How many forwards a rank runs before its k-th backward generalises Megatron's warm-up the way
// plain EPP generalises 1F1B: need(k) = 1 + the latest forward-table entry the backwards 0..k
// need on their own stage, ahead(k) = max over j >= k of need(j) - (j - k) (those forwards start
// one per backward ahead of time instead of in a burst), and rank r runs
// min(T, max(ahead(k), k + 1 + (vpp - 1)N) + 2(pp - 1 - r)) forwards; with whole sequences that
// is Megatron's order exactly (warm-up 2(pp - r - 1) + (vpp - 1)N, then 1F1B).
// The lists are produced by replaying that rule with unit times (forward 1, backward 2): a rank
// starts its next action only once what it depends on has finished; when the quota asks for a
// forward that is not ready (the rank holding its input is still short of its own quota, which
// a cut sequence causes) it runs its next backward if that is ready, and when every rank waits
// one waiting rank takes its other action instead. Every action therefore starts after
// its dependencies in one consistent execution, so the blocking replay of the lists cannot
// deadlock, whatever the real times (validate() checks it again).
#include <algorithm>
#include <limits>
#include <vector>

#include "core/error.h"
#include "plan/schedule.h"

namespace infinipipe::plan {
namespace {

constexpr int64_t kNotDone = std::numeric_limits<int64_t>::max();

// One entry of the forward or backward table: the chunk at `pos` on the rank's model chunk `mc`.
struct Entry {
  int64_t pos = 0;
  int32_t mc = 0;
};

// Groups of consecutive positions, each of at least N, cut only where no set of linked chunks
// spans the cut; a last group shorter than pp joins the one before. N is Megatron's group size
// (schedule_interleaved): the smallest N >= pp with m % N == 0 or m % N >= pp, so whole
// sequences get Megatron's very groups.
int64_t megatron_group_size(int64_t m, int64_t pp) {
  int64_t n = std::min(pp, m);
  while (m % n != 0 && m % n < pp) ++n;  // terminates at n = m
  return n;
}

std::vector<std::pair<int64_t, int64_t>> position_groups(std::span<const int64_t> bwd_pos,
                                                         int64_t pp, int64_t n) {
  const int64_t m = static_cast<int64_t>(bwd_pos.size());
  std::vector<std::pair<int64_t, int64_t>> groups;
  int64_t lo = 0, reach = 0;
  for (int64_t i = 0; i < m; ++i) {
    reach = std::max({reach, i, bwd_pos[i]});
    if (reach == i && (i + 1 - lo >= n || i + 1 == m)) {
      groups.emplace_back(lo, i + 1);
      lo = i + 1;
    }
  }
  if (groups.size() > 1 && groups.back().second - groups.back().first < pp) {
    groups[groups.size() - 2].second = groups.back().second;
    groups.pop_back();
  }
  return groups;
}

}  // namespace

void schedule_interleaved_pipeline_append(Plan& p, std::span<const int32_t> fwd) {
  const int64_t pp = p.pp, vpp = p.vpp, m = static_cast<int64_t>(fwd.size());
  if (pp < 2 || vpp < 2)
    fail_config("the interleaved order needs pp >= 2 and vpp >= 2, got pp {} and vpp {}", pp, vpp);
  if (m == 0) return;
  const int64_t ns = pp * vpp, total = m * vpp;
  std::vector<int64_t> pos_of_chunk(p.chunks.size(), -1);
  for (int64_t i = 0; i < m; ++i) pos_of_chunk[fwd[i]] = i;
  const std::vector<int32_t> bwd = schedule_backward_order(p, fwd);
  std::vector<int64_t> bwd_pos(m);  // position (in fwd) of the i-th backward's chunk
  for (int64_t i = 0; i < m; ++i) bwd_pos[i] = pos_of_chunk[bwd[i]];

  // The tables, the same on every rank: model chunk mc of rank r is stage mc * pp + r.
  std::vector<Entry> ftab, btab;
  std::vector<int64_t> fidx(m * vpp);  // forward-table index of (position, model chunk)
  const int64_t group = megatron_group_size(m, pp);
  for (const auto& [lo, hi] : position_groups(bwd_pos, pp, group))
    for (int32_t mc = 0; mc < vpp; ++mc)
      for (int64_t i = lo; i < hi; ++i) {
        fidx[i * vpp + mc] = static_cast<int64_t>(ftab.size());
        ftab.push_back({i, mc});
        btab.push_back({bwd_pos[i], static_cast<int32_t>(vpp - 1 - mc)});
      }
  std::vector<int64_t> ahead(total);
  int64_t run = 0;
  for (int64_t k = 0; k < total; ++k)
    ahead[k] = run = std::max(run, fidx[btab[k].pos * vpp + btab[k].mc] + 1);  // need(k)
  for (int64_t k = total - 2; k >= 0; --k) ahead[k] = std::max(ahead[k], ahead[k + 1] - 1);

  // Replay with unit times. done[stage * m + pos]: when that forward / backward finished.
  std::vector<int64_t> fdone(ns * m, kNotDone), bdone(ns * m, kNotDone);
  std::vector<int64_t> f(pp, 0), b(pp, 0), busy(pp, 0);
  auto stage_of = [&](const Entry& e, int64_t r) { return e.mc * pp + r; };
  auto ready = [&](bool forward, int64_t r, int64_t t) {
    if (forward) {
      if (f[r] >= total) return false;
      const Entry& e = ftab[f[r]];
      const int64_t s = stage_of(e, r);
      return s == 0 || fdone[(s - 1) * m + e.pos] <= t;
    }
    if (b[r] >= total) return false;
    const Entry& e = btab[b[r]];
    const int64_t s = stage_of(e, r);
    return fdone[s * m + e.pos] <= t && (s == ns - 1 || bdone[(s + 1) * m + e.pos] <= t);
  };
  auto start = [&](bool forward, int64_t r, int64_t t) {
    const Entry& e = forward ? ftab[f[r]++] : btab[b[r]++];
    const int64_t s = stage_of(e, r);
    const int64_t end = t + (forward ? 1 : 2);
    (forward ? fdone : bdone)[s * m + e.pos] = end;
    busy[r] = end;
    Action a;
    a.kind = forward ? ActionKind::forward : ActionKind::backward;
    a.chunk = fwd[e.pos];
    a.stage = static_cast<int32_t>(s);
    p.actions[r].push_back(a);
  };
  auto wants_forward = [&](int64_t r) {
    if (f[r] >= total) return false;
    if (b[r] >= total) return true;
    // Megatron's warm-up and 1F1B pairing at least; more where a cut sequence needs it.
    const int64_t megatron = b[r] + 1 + (vpp - 1) * group;
    return f[r] < std::min(total, std::max(ahead[b[r]], megatron) + 2 * (pp - 1 - r));
  };
  int64_t left = 2 * total * pp, t = 0;
  while (left > 0) {
    for (int64_t r = 0; r < pp; ++r) {
      if (busy[r] > t) continue;
      // A rank whose next forward is not ready yet runs its next backward if that is (it only
      // frees memory): a cut sequence can leave the quota asking for a forward the rank before
      // has not released.
      const bool fw = wants_forward(r);
      if (ready(fw, r, t) || (fw && ready(false, r, t))) {
        start(fw && ready(true, r, t), r, t);
        --left;
      }
    }
    int64_t next = kNotDone;
    for (int64_t r = 0; r < pp; ++r)
      if (busy[r] > t) next = std::min(next, busy[r]);
    if (next != kNotDone) {
      t = next;
      continue;
    }
    if (left == 0) break;
    // Every rank waits: one takes its other action, a backward (it frees memory) if any can.
    bool relaxed = false;
    for (int pass = 0; pass < 2 && !relaxed; ++pass)
      for (int64_t r = 0; r < pp && !relaxed; ++r) {
        const bool fw = pass == 1;
        if (fw != wants_forward(r) && ready(fw, r, t)) {
          start(fw, r, t);
          --left;
          relaxed = true;
        }
      }
    if (!relaxed)
      fail("the interleaved order of {} chunks on pp {} x vpp {} stalled with {} actions left", m,
           pp, vpp, left);
  }
}

}  // namespace infinipipe::plan
