// StageLink over MPI point-to-point: the executor's activations and gradients cross ranks with
// non-blocking sends and receives. Every receive's size is the chunk's tokens × hidden, known from
// the plan, so there is no shape hand-shake (and none of the variable-length deadlocks it causes).
// A receive is posted when its action comes (begin() only lists them): its buffer then lives just
// through that action, as the planner's memory model counts it, instead of every receive of the
// step holding a buffer from the start. A sent buffer lives until the receiver takes it (on
// shared memory OpenMPI copies a large message when the receive is posted); action_begin keeps
// those in flight to the ones the plan's memory counts. Waits carry the p2p deadline and name the
// peer and the action, so a dead or hung neighbour is an Error.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <tuple>

#include "comm/mpi_p2p.h"
#include "model/memory.h"
#include "runtime/executor.h"

namespace infinipipe::runtime {

class MpiStageLink : public StageLink {
 public:
  // p2p: this rank's transfers (its layout gives the pipeline neighbours of this replica).
  // Receive buffers are charged to `tracker` as activations while they live.
  MpiStageLink(P2p& p2p, int64_t hidden_size, MemoryTracker& tracker);
  ~MpiStageLink() override;

  void begin(const plan::Plan& plan, int32_t rank) override;
  void finish(int32_t rank) override;
  void send_activation(int32_t from, int32_t chunk, Tensor t) override;
  void send_grad(int32_t from, int32_t chunk, Tensor t) override;
  bool has_activation(int32_t to, int32_t chunk) const override;
  bool has_grad(int32_t to, int32_t chunk) const override;
  Tensor recv_activation(int32_t to, int32_t chunk) override;
  Tensor recv_grad(int32_t to, int32_t chunk) override;

  // Before action `a` (the rank's index-th): posts its receive, then waits until the messages
  // of the rank's actions before `hold` were taken (plan::send_hold_start), so the sends still
  // in flight are those the plan's memory counts. The receive goes first: a neighbour waiting
  // for this rank to take its message is then never what this rank waits on.
  void action_begin(const plan::Action& a, int32_t index, int32_t hold);
  // Between actions: drives MPI and frees the buffers of sends that completed.
  void progress();

  // Receives posted and not yet taken (at most the next action's), sends not yet complete (0
  // after finish()).
  size_t pending_recvs() const { return recvs_.size(); }
  size_t pending_sends() const { return sends_.size(); }

 private:
  struct Posted {
    Tensor buffer;
    P2pRequest request;
    int32_t action = 0;  // sends: the rank's index of the action that sent it
    std::string what;    // sends: what it carries, to name a wait for it
  };
  using Key = std::tuple<int, int32_t, int32_t>;  // (P2pKind, receiving stage, chunk)

  int peer_of_stage(int32_t stage) const;
  int vstage_of(int32_t stage) const;
  void post_recv(P2pKind kind, int32_t to, int32_t from, int32_t chunk) const;
  void send(P2pKind kind, int32_t from, int32_t to, int32_t chunk, Tensor t);
  Tensor take(P2pKind kind, int32_t to, int32_t chunk);
  // The posted receive, posting it now if the action list expects it; recvs_.end() if not.
  std::map<Key, Posted>::iterator recv_find(P2pKind kind, int32_t to, int32_t chunk) const;
  bool ready(P2pKind kind, int32_t to, int32_t chunk) const;
  void sends_reap();

  P2p& p2p_;
  int64_t hidden_;
  MemoryTracker& tracker_;
  const plan::Plan* plan_ = nullptr;
  mutable std::map<Key, Posted> recvs_;      // mutable: has_*() posts and tests requests
  mutable std::map<Key, int32_t> expected_;  // receives not yet posted -> sender stage offset
  std::deque<Posted> sends_;                 // buffers stay alive until their send completes
  int32_t action_ = 0;                       // the rank's index of the action running
};

}  // namespace infinipipe::runtime
