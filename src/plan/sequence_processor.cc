#include "plan/sequence_processor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <utility>

#include "core/error.h"

namespace infinipipe::plan {

namespace {

// A slice may be snapped down to a power of two when it keeps this share of the allowed cost.
constexpr double kPow2Keep = 0.9;

double slice_cost(const cost::CostModel& cm, const cost::StageShape& stage, int64_t context,
                  int64_t len, bool final_slice) {
  const cost::SliceShape s{context, len, final_slice};
  return chunk_cost(cm, stage, std::span<const cost::SliceShape>(&s, 1));
}

int64_t pow2_floor(int64_t x) {
  int64_t p = 1;
  while (p * 2 <= x) p *= 2;
  return p;
}

// Longest slice starting at `offset` (at most `remaining` tokens and `max_tokens`) whose cost is
// within `max_time`; at least one token. Snapped to a power of two when that costs little.
int64_t carve_one(const cost::CostModel& cm, const cost::StageShape& stage, int64_t offset,
                  int64_t remaining, double max_time, int64_t max_tokens) {
  int64_t hi = std::min(remaining, max_tokens);
  if (slice_cost(cm, stage, offset, hi, hi == remaining) <= max_time) return hi;
  int64_t lo = 1;  // invariant: answer in [lo, hi)
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (slice_cost(cm, stage, offset, mid, false) <= max_time)
      lo = mid;
    else
      hi = mid;
  }
  const int64_t p = pow2_floor(lo);
  if (p != lo && slice_cost(cm, stage, offset, p, false) >= kPow2Keep * max_time) return p;
  return lo;
}

// Grows a too-short tail at the expense of the slice before it (merging when that empties it).
void fix_tail(std::vector<Slice>& slices, int64_t min_tail) {
  while (slices.size() > 1 && slices.back().len < min_tail) {
    Slice& prev = slices[slices.size() - 2];
    Slice& last = slices.back();
    const int64_t need = min_tail - last.len;
    if (prev.len - need < 1) {
      prev.len += last.len;
      slices.pop_back();
      continue;
    }
    prev.len -= need;
    last.offset -= need;
    last.len += need;
  }
}

std::vector<Slice> carve_all(int32_t seq, int64_t len, double max_time, int64_t max_tokens,
                             const cost::CostModel& cm, const cost::StageShape& stage,
                             size_t max_slices) {
  std::vector<Slice> out;
  int64_t offset = 0;
  while (offset < len) {
    if (out.size() >= max_slices) return out;  // caller sees the overflow by the count
    const int64_t l = carve_one(cm, stage, offset, len - offset, max_time, max_tokens);
    out.push_back({seq, offset, l, len});
    offset += l;
  }
  return out;
}

struct Bucket {
  std::vector<Slice> slices;
  std::vector<cost::SliceShape> shapes;  // of `slices`, plus room for one trial
  int64_t tokens = 0;
  double time = 0;
  bool has_tail = false;
};

std::vector<cost::SliceShape> shapes_of(const std::vector<Slice>& slices) {
  std::vector<cost::SliceShape> out;
  out.reserve(slices.size() + 1);
  for (const Slice& s : slices) out.push_back({s.offset, s.len, !s.is_split()});
  return out;
}

// Buckets by time per token (empty ones, at +infinity, last), then index: the order in which
// best_bucket ranks them before it knows their time with one more sequence.
using RatioOrder = std::set<std::pair<double, int>>;

double ratio_of(const Bucket& b) {
  return b.tokens > 0 ? b.time / static_cast<double>(b.tokens)
                      : std::numeric_limits<double>::infinity();
}

// Long sequences cut into slices (each cut sequence's tail opens a bucket of its own) and the
// short ones left whole, to be packed into the buckets.
struct Packing {
  std::vector<std::vector<Slice>> split_runs;  // non-final slices per cut sequence, in order
  std::vector<Bucket> buckets;                 // first the tails' (as split_runs), then others
  std::vector<int32_t> shorts;                 // longest first
};

// The steps of sequence_process, sharing the batch and the cost of a slice on the stage.
struct Processor {
  std::span<const int64_t> lengths;
  const cost::CostModel& cm;
  const cost::StageShape& stage;
  bool uniform = false;  // cut by tokens, not by cost (the ablation)

  // Thresholds from the longest sequence's balanced split.
  PackLimits limits_of(const std::vector<Slice>& top, int64_t min_tail) const {
    PackLimits lim;
    lim.min_tail_slice = min_tail;
    for (const Slice& s : top) {
      lim.token_threshold = std::max(lim.token_threshold, s.len);
      lim.time_threshold =
          std::max(lim.time_threshold, slice_cost(cm, stage, s.offset, s.len, !s.is_split()));
    }
    return lim;
  }

  // Cut the long sequences; each tail slice opens a bucket of its own.
  Packing cut_long(const std::vector<int32_t>& order, const std::vector<Slice>& top,
                   const PackLimits& lim) const {
    Packing pk;
    const int32_t longest = order[0];
    for (int32_t seq : order) {
      const int64_t len = lengths[seq];
      auto slices =
          seq == longest && top.size() > 1 ? top
          : len <= lim.token_threshold     ? std::vector<Slice>{}
          : uniform ? sequence_split_uniform(seq, len, lim.token_threshold, lim.min_tail_slice)
                    : sequence_split_capped(seq, len, lim, cm, stage);
      if (slices.size() <= 1) {
        pk.shorts.push_back(seq);
        continue;
      }
      Bucket b;
      b.slices.push_back(slices.back());
      b.tokens = slices.back().len;
      b.has_tail = true;
      b.shapes = shapes_of(b.slices);
      b.time = chunk_cost(cm, stage, b.shapes);
      pk.buckets.push_back(std::move(b));
      slices.pop_back();
      pk.split_runs.push_back(std::move(slices));
    }
    return pk;
  }

  // Empty buckets for what the tails' spare room cannot take (by time and by tokens).
  void add_empty_buckets(Packing& pk, const PackLimits& lim) const {
    double short_time = 0, spare_time = 0;
    int64_t short_tokens = 0, spare_tokens = 0;
    for (int32_t seq : pk.shorts) {
      short_time += slice_cost(cm, stage, 0, lengths[seq], true);
      short_tokens += lengths[seq];
    }
    for (const Bucket& b : pk.buckets) {
      spare_time += std::max(0.0, lim.time_threshold - b.time);
      spare_tokens += std::max<int64_t>(0, lim.token_threshold - b.tokens);
    }
    const double need_t = std::ceil((short_time - spare_time) / lim.time_threshold);
    const double need_m =
        std::ceil(static_cast<double>(short_tokens - spare_tokens) / lim.token_threshold);
    const int64_t empties = static_cast<int64_t>(std::max({0.0, need_t, need_m}));
    for (int64_t i = 0; i < empties; ++i) pk.buckets.emplace_back();
  }

  // The bucket a short sequence of `len` tokens goes to (Best-Fit-Decreasing): among buckets
  // within both thresholds, the lowest time/token ratio (the least loaded per token), then the
  // tightest fit; an empty bucket only when no other fits (as BFD opens a new bin), else the
  // empties took every short sequence and left the tail slices alone in tiny hybrid chunks that
  // stall the pipeline. When none is within T_t, relax it (*relaxed set): the bucket that ends
  // least loaded among those within T_m. -1 when none is within T_m either. Ties go to the
  // lowest index. Buckets are visited in `order`, so once one fits, only those of its ratio
  // remain to be timed (the same choice as timing every bucket, at a fraction of the cost).
  int best_bucket(std::vector<Bucket>& buckets, const RatioOrder& order, int64_t len,
                  const PackLimits& lim, bool* relaxed_used) const {
    int best = -1, relaxed = -1;
    double best_key1 = 0, best_key2 = 0, relaxed_time = 0;
    double alone = 0;  // the time of the sequence alone: every empty bucket's trial
    bool have_alone = false;
    for (const std::pair<double, int>& key : order) {
      const double ratio = key.first;
      const int i = key.second;
      // Every later bucket has a larger ratio, or is empty like the chosen one (no less slack).
      if (best >= 0 && (ratio != best_key1 || std::isinf(ratio))) break;
      Bucket& b = buckets[i];
      if (b.tokens + len > lim.token_threshold) continue;
      const bool empty = b.shapes.empty();
      double t = alone;
      if (!empty || !have_alone) {
        b.shapes.push_back({0, len, true});
        t = chunk_cost(cm, stage, b.shapes);
        b.shapes.pop_back();
        if (empty) {
          alone = t;
          have_alone = true;
        }
      }
      if (t <= lim.time_threshold) {
        const double slack = lim.time_threshold - t;
        if (best < 0 || slack < best_key2) {
          best = i;
          best_key1 = ratio;
          best_key2 = slack;
        }
      } else if (relaxed < 0 || t < relaxed_time || (t == relaxed_time && i < relaxed)) {
        relaxed = i;
        relaxed_time = t;
      }
    }
    *relaxed_used = best < 0 && relaxed >= 0;
    return best >= 0 ? best : relaxed;
  }

  // Packs every short sequence, longest first; returns how many needed a relaxed T_t. A
  // relaxation persists (Alg. 1): T_t rises to the chunk it made, for every later sequence.
  int32_t pack_short(Packing& pk, PackLimits& lim) const {
    int32_t relaxed_count = 0;
    // Sequences come longest first: a bucket without room for the shortest never takes another
    // (best_bucket would pass over it every time), so it leaves the order for good.
    const int64_t shortest = pk.shorts.empty() ? 0 : lengths[pk.shorts.back()];
    RatioOrder order;
    auto enter = [&](int i) {
      if (pk.buckets[i].tokens + shortest <= lim.token_threshold)
        order.insert({ratio_of(pk.buckets[i]), i});
    };
    for (size_t i = 0; i < pk.buckets.size(); ++i) enter(static_cast<int>(i));
    for (int32_t seq : pk.shorts) {
      const int64_t len = lengths[seq];
      bool relaxed = false;
      int best = best_bucket(pk.buckets, order, len, lim, &relaxed);
      if (relaxed) ++relaxed_count;
      if (best < 0) {
        pk.buckets.emplace_back();
        best = static_cast<int>(pk.buckets.size()) - 1;
      } else {
        order.erase({ratio_of(pk.buckets[best]), best});
      }
      Bucket& b = pk.buckets[best];
      b.slices.push_back({seq, 0, len, len});
      b.tokens += len;
      b.shapes.push_back({0, len, true});
      b.time = chunk_cost(cm, stage, b.shapes);
      if (relaxed) lim.time_threshold = std::max(lim.time_threshold, b.time);
      enter(best);
    }
    return relaxed_count;
  }
};

// Order: each cut sequence's slices then its hybrid chunk (longest first), then the packs,
// heaviest first (the pipeline drains behind light chunks: a short cool-down).
std::vector<Chunk> chunks_in_order(const Packing& pk) {
  std::vector<Chunk> out;
  auto add_chunk = [&](std::vector<Slice> slices) {
    Chunk c;
    c.id = static_cast<int32_t>(out.size());
    c.slices = std::move(slices);
    out.push_back(std::move(c));
  };
  for (size_t i = 0; i < pk.split_runs.size(); ++i) {
    for (const Slice& s : pk.split_runs[i]) add_chunk({s});
    add_chunk(pk.buckets[i].slices);
  }
  std::vector<size_t> packs;
  for (size_t i = pk.split_runs.size(); i < pk.buckets.size(); ++i)
    if (!pk.buckets[i].slices.empty()) packs.push_back(i);
  std::stable_sort(packs.begin(), packs.end(),
                   [&](size_t a, size_t b) { return pk.buckets[a].time > pk.buckets[b].time; });
  for (size_t i : packs) add_chunk(pk.buckets[i].slices);
  return out;
}

}  // namespace

cost::StageShape processor_reference_stage(const ModelConfig& model, int64_t pp) {
  const int64_t layers = std::max<int64_t>(1, model.num_layers / std::max<int64_t>(1, pp));
  return cost::StageShape{layers, false, false};
}

double chunk_cost(const cost::CostModel& cm, const cost::StageShape& stage,
                  std::span<const cost::SliceShape> chunk) {
  return cm.forward_time(chunk, stage) + cm.backward_time(chunk, stage);
}

int32_t sequence_max_slices(std::span<const int64_t> lengths, int64_t min_tail) {
  int64_t longest = 0;
  for (int64_t l : lengths) longest = std::max(longest, l);
  const int64_t k = longest / std::max<int64_t>(1, min_tail);
  return static_cast<int32_t>(std::clamp<int64_t>(k, 1, 256));
}

std::vector<int32_t> sequence_slice_candidates(int32_t k_max) {
  static constexpr int32_t kList[] = {1,  2,  3,  4,  5,  6,  8,   10,  12, 16,
                                      20, 24, 32, 48, 64, 96, 128, 192, 256};
  std::vector<int32_t> out;
  for (int32_t k : kList)
    if (k <= k_max) out.push_back(k);
  return out;
}

std::vector<Slice> sequence_split_balanced(int32_t seq, int64_t len, int32_t k,
                                           const cost::CostModel& cm, const cost::StageShape& stage,
                                           int64_t min_tail) {
  if (k <= 1 || len <= min_tail) return {Slice{seq, 0, len, len}};
  const double whole = slice_cost(cm, stage, 0, len, true);
  // Binary search the smallest per-slice cost that needs at most k slices; `hi` stays feasible.
  double lo = whole / k * 0.5, hi = whole;
  for (int it = 0; it < 40 && hi - lo > 1e-4 * hi; ++it) {
    const double mid = 0.5 * (lo + hi);
    const auto s = carve_all(seq, len, mid, len, cm, stage, static_cast<size_t>(k) + 1);
    if (s.size() <= static_cast<size_t>(k) && s.back().end() == len)
      hi = mid;
    else
      lo = mid;
  }
  auto slices = carve_all(seq, len, hi, len, cm, stage, static_cast<size_t>(k));
  if (slices.back().end() != len) slices.back().len = len - slices.back().offset;
  fix_tail(slices, min_tail);
  return slices;
}

std::vector<Slice> sequence_split_uniform(int32_t seq, int64_t len, int64_t slice_tokens,
                                          int64_t min_tail) {
  if (slice_tokens <= 0) fail("uniform slicing needs a positive slice length, got {}", slice_tokens);
  const int64_t n = (len + slice_tokens - 1) / slice_tokens;
  std::vector<Slice> slices;
  int64_t offset = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t l = len / n + (i < len % n ? 1 : 0);
    slices.push_back({seq, offset, l, len});
    offset += l;
  }
  fix_tail(slices, min_tail);
  return slices;
}

std::vector<Slice> sequence_split_capped(int32_t seq, int64_t len, const PackLimits& limits,
                                         const cost::CostModel& cm, const cost::StageShape& stage) {
  if (len <= limits.token_threshold && slice_cost(cm, stage, 0, len, true) <= limits.time_threshold)
    return {Slice{seq, 0, len, len}};
  auto slices = carve_all(seq, len, limits.time_threshold, limits.token_threshold, cm, stage,
                          static_cast<size_t>(len));
  fix_tail(slices, limits.min_tail_slice);
  return slices;
}

ProcessorResult sequence_process(std::span<const int64_t> lengths, int32_t k,
                                 const cost::CostModel& cm, const cost::StageShape& stage,
                                 int64_t min_tail, bool uniform_slicing) {
  ProcessorResult res;
  if (lengths.empty()) return res;
  for (size_t i = 0; i < lengths.size(); ++i)
    if (lengths[i] <= 0)
      fail("sequence {} has length {}: every sequence needs at least one token", i, lengths[i]);

  std::vector<int32_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return lengths[a] > lengths[b]; });
  const int32_t longest = order[0];
  k = std::clamp(k, 1, sequence_max_slices(lengths, min_tail));

  const Processor pr{lengths, cm, stage, uniform_slicing};
  const int64_t top_len = lengths[longest];
  const auto top =
      uniform_slicing
          ? sequence_split_uniform(longest, top_len, (top_len + k - 1) / k, min_tail)
          : sequence_split_balanced(longest, top_len, k, cm, stage, min_tail);
  res.limits = pr.limits_of(top, min_tail);
  res.derived_time_threshold = res.limits.time_threshold;
  res.slices_of_longest = static_cast<int32_t>(top.size());
  Packing pk = pr.cut_long(order, top, res.limits);
  pr.add_empty_buckets(pk, res.limits);
  res.relaxed = pr.pack_short(pk, res.limits);
  res.chunks = chunks_in_order(pk);
  return res;
}

}  // namespace infinipipe::plan
