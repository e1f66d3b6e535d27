#include "plan/plan.h"

#include <algorithm>

namespace infinipipe::plan {

const char* chunk_kind_name(ChunkKind k) {
  switch (k) {
    case ChunkKind::batched:
      return "batched";
    case ChunkKind::split:
      return "split";
    case ChunkKind::hybrid:
      return "hybrid";
  }
  return "?";
}

const char* action_kind_name(ActionKind k) {
  return k == ActionKind::forward ? "forward" : "backward";
}

ChunkKind Chunk::kind() const {
  bool tail = false;
  for (const Slice& s : slices) {
    if (s.is_split()) return ChunkKind::split;
    tail = tail || s.is_tail();
  }
  return tail ? ChunkKind::hybrid : ChunkKind::batched;
}

int64_t Chunk::tokens() const {
  int64_t n = 0;
  for (const Slice& s : slices) n += s.len;
  return n;
}

std::vector<cost::SliceShape> Chunk::shapes() const {
  std::vector<cost::SliceShape> out;
  out.reserve(slices.size());
  for (const Slice& s : slices) out.push_back({s.offset, s.len, !s.is_split()});
  return out;
}

int64_t Plan::num_tokens() const {
  int64_t n = 0;
  for (int64_t l : seq_lengths) n += l;
  return n;
}

int32_t Plan::num_pipelines() const {
  int32_t m = 0;
  for (int32_t p : pipeline_of_chunk) m = std::max(m, p);
  return m + 1;
}

ActionPeers Plan::peers(const Action& a) const {
  ActionPeers p;
  const int32_t before = a.stage - 1, after = a.stage + 1, last = num_stages() - 1;
  const int32_t from = a.kind == ActionKind::forward ? before : after;
  const int32_t to = a.kind == ActionKind::forward ? after : before;
  if (from >= 0 && from <= last) {
    p.recv_stage = from;
    p.recv_rank = rank_of_stage(from);
  }
  if (to >= 0 && to <= last) {
    p.send_stage = to;
    p.send_rank = rank_of_stage(to);
  }
  return p;
}

}  // namespace infinipipe::plan
