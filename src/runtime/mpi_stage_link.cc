#include "runtime/mpi_stage_link.h"

#include <chrono>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"

namespace infinipipe::runtime {

namespace {

std::string during_describe(P2pKind kind, int32_t stage, int32_t chunk) {
  return fmt::format("{} of chunk {} on stage {}",
                     kind == P2pKind::activation ? "forward" : "backward", chunk, stage);
}

}  // namespace

MpiStageLink::MpiStageLink(P2p& p2p, int64_t hidden_size, MemoryTracker& tracker)
    : p2p_(p2p), hidden_(hidden_size), tracker_(tracker) {
  memory_tracker_set(&tracker);
}

MpiStageLink::~MpiStageLink() {
  // Only after an error: MPI must not write into buffers that are gone.
  for (auto& [key, p] : recvs_) {
    if (p.request.pending()) {
      MPI_Cancel(&p.request.request);
      MPI_Request_free(&p.request.request);
    }
  }
  for (Posted& p : sends_) {
    if (p.request.pending()) MPI_Request_free(&p.request.request);
  }
}

int MpiStageLink::peer_of_stage(int32_t stage) const {
  const RankLayout& l = p2p_.layout();
  return l.rank_of(plan_->rank_of_stage(stage), l.replica);
}

int MpiStageLink::vstage_of(int32_t stage) const {
  return stage / plan_->pp;
}

void MpiStageLink::begin(const plan::Plan& plan, int32_t rank) {
  const RankLayout& l = p2p_.layout();
  if (plan.pp != l.pp || rank != l.stage) {
    fail(
        "mpi link: the plan is for pp = {} and pipeline rank {}, this process is {} of a pp = {} "
        "layout; every rank must plan with the run's --pipeline-model-parallel-size",
        plan.pp, rank, l.describe(), l.pp);
  }
  if (!recvs_.empty() || !sends_.empty()) {
    fail("mpi link: begin() of a new plan while {} receives and {} sends of the last are pending",
         recvs_.size(), sends_.size());
  }
  plan_ = &plan;
  expected_.clear();
  for (const plan::Action& a : plan.actions[static_cast<size_t>(rank)]) {
    const plan::StageSpec& st = plan.stages[static_cast<size_t>(a.stage)];
    const bool fwd = a.kind == plan::ActionKind::forward;
    if (fwd ? st.has_embedding : st.has_lm_head) continue;
    const P2pKind kind = fwd ? P2pKind::activation : P2pKind::gradient;
    if (!expected_.emplace(Key{static_cast<int>(kind), a.stage, a.chunk}, fwd ? -1 : 1).second) {
      fail("mpi link: stage {} receives the {} of chunk {} twice; the plan is broken", a.stage,
           p2p_kind_name(kind), a.chunk);
    }
  }
}

std::map<MpiStageLink::Key, MpiStageLink::Posted>::iterator MpiStageLink::recv_find(
    P2pKind kind, int32_t to, int32_t chunk) const {
  const Key key{static_cast<int>(kind), to, chunk};
  auto it = recvs_.find(key);
  if (it != recvs_.end()) return it;
  auto e = expected_.find(key);
  if (e == expected_.end()) return recvs_.end();
  const int32_t from = to + e->second;
  expected_.erase(e);
  post_recv(kind, to, from, chunk);
  return recvs_.find(key);
}

void MpiStageLink::post_recv(P2pKind kind, int32_t to, int32_t from, int32_t chunk) const {
  const Key key{static_cast<int>(kind), to, chunk};
  const int64_t n = plan_->chunks[static_cast<size_t>(chunk)].tokens();
  Posted p;
  p.buffer = Tensor(tracker_, MemCategory::mem_activations, {n, hidden_}, false);
  p.request = p2p_.irecv(p.buffer.data(), p.buffer.numel(), peer_of_stage(from), kind, chunk,
                         vstage_of(to));
  recvs_.emplace(key, std::move(p));
}

void MpiStageLink::send(P2pKind kind, int32_t from, int32_t to, int32_t chunk, Tensor t) {
  const int64_t n = plan_->chunks[static_cast<size_t>(chunk)].tokens();
  if (t.numel() != n * hidden_) {
    fail("mpi link: stage {} sends {} floats as the {} of chunk {}, the plan says {} × {}", from,
         t.numel(), p2p_kind_name(kind), chunk, n, hidden_);
  }
  Posted p;
  p.request = p2p_.isend(t.data(), t.numel(), peer_of_stage(to), kind, chunk, vstage_of(to));
  p.buffer = std::move(t);
  p.action = action_;
  p.what = fmt::format("{} of chunk {} to stage {}", p2p_kind_name(kind), chunk, to);
  sends_.push_back(std::move(p));
  sends_reap();
}

void MpiStageLink::action_begin(const plan::Action& a, int32_t index, int32_t hold) {
  const plan::StageSpec& st = plan_->stages[static_cast<size_t>(a.stage)];
  const bool fwd = a.kind == plan::ActionKind::forward;
  if (fwd ? !st.has_embedding : !st.has_lm_head) {
    recv_find(fwd ? P2pKind::activation : P2pKind::gradient, a.stage, a.chunk);
  }
  action_ = index;
  sends_reap();
  for (auto it = sends_.begin(); it != sends_.end();) {
    if (it->action >= hold) {
      ++it;
      continue;
    }
    const auto start = std::chrono::steady_clock::now();
    p2p_.wait(it->request, fmt::format("the start of {} of chunk {} on stage {} (the plan's memory "
                                       "counts that message as taken by then)",
                                       plan::action_kind_name(a.kind), a.chunk, a.stage));
    wait_record("send of the " + it->what, start, std::chrono::steady_clock::now());
    it = sends_.erase(it);
  }
}

void MpiStageLink::progress() {
  p2p_.progress();
  sends_reap();
}

void MpiStageLink::sends_reap() {
  // Any completed send, not just a completed prefix: its buffer is memory the plan does not hold.
  for (auto it = sends_.begin(); it != sends_.end();) {
    it = p2p_.test(it->request) ? sends_.erase(it) : it + 1;
  }
}

void MpiStageLink::send_activation(int32_t from, int32_t chunk, Tensor t) {
  send(P2pKind::activation, from, from + 1, chunk, std::move(t));
}

void MpiStageLink::send_grad(int32_t from, int32_t chunk, Tensor t) {
  send(P2pKind::gradient, from, from - 1, chunk, std::move(t));
}

bool MpiStageLink::ready(P2pKind kind, int32_t to, int32_t chunk) const {
  auto it = recv_find(kind, to, chunk);
  if (it == recvs_.end()) return false;
  return !it->second.request.pending() || p2p_.test(it->second.request);
}

bool MpiStageLink::has_activation(int32_t to, int32_t chunk) const {
  return ready(P2pKind::activation, to, chunk);
}

bool MpiStageLink::has_grad(int32_t to, int32_t chunk) const {
  return ready(P2pKind::gradient, to, chunk);
}

Tensor MpiStageLink::take(P2pKind kind, int32_t to, int32_t chunk) {
  auto it = recv_find(kind, to, chunk);
  if (it == recvs_.end()) {
    fail("mpi link: stage {} needs the {} of chunk {}, which its action list never receives", to,
         p2p_kind_name(kind), chunk);
  }
  sends_reap();
  // A receive still in flight is a wait the trace shows (the executor collects it).
  const bool in_flight = it->second.request.pending();
  const auto wait_start = std::chrono::steady_clock::now();
  p2p_.wait(it->second.request, during_describe(kind, to, chunk));
  if (in_flight) {
    wait_record(fmt::format("{} of chunk {} for stage {}", p2p_kind_name(kind), chunk, to),
                wait_start, std::chrono::steady_clock::now());
  }
  Tensor t = std::move(it->second.buffer);
  recvs_.erase(it);
  return t;
}

Tensor MpiStageLink::recv_activation(int32_t to, int32_t chunk) {
  return take(P2pKind::activation, to, chunk);
}

Tensor MpiStageLink::recv_grad(int32_t to, int32_t chunk) {
  return take(P2pKind::gradient, to, chunk);
}

void MpiStageLink::finish(int32_t rank) {
  if (!recvs_.empty() || !expected_.empty()) {
    const auto& [kind, to, chunk] =
        recvs_.empty() ? expected_.begin()->first : recvs_.begin()->first;
    fail(
        "mpi link: rank {} finished its actions with {} receives never taken (first: the {} of "
        "chunk {} for stage {}); the plan is broken",
        rank, recvs_.size() + expected_.size(), p2p_kind_name(static_cast<P2pKind>(kind)), chunk,
        to);
  }
  for (Posted& p : sends_) {
    p2p_.wait(p.request, fmt::format("the end of rank {}'s actions", rank));
  }
  sends_.clear();
}

}  // namespace infinipipe::runtime
