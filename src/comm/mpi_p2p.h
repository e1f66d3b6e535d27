// Point-to-point transfers between pipeline stages: non-blocking sends and receives of float
// buffers whose sizes come from the plan (no shape hand-shake, so no variable-length deadlock),
// tagged by (chunk, virtual stage, kind) so two messages between the same ranks can never be
// confused, and waits with a deadline that name the peer and the action when it passes.
//
// Typical executor use: post the receive of chunk c's activation as soon as its buffer exists,
// compute other chunks, then wait(recv, "forward of chunk c") right before it is needed.
#pragma once

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1  // the C API only: OpenMPI's deprecated C++ bindings warn
#endif
#include <mpi.h>

#include <cstdint>
#include <span>
#include <string>

#include "comm/mpi_groups.h"

namespace infinipipe {

enum class P2pKind : int {
  activation = 0,  // forward: stage s -> s + 1
  gradient = 1,    // backward: the activation's gradient, stage s + 1 -> s
};
const char* p2p_kind_name(P2pKind kind);  // "activation", "activation gradient"

// Max virtual stages per rank the tags can tell apart.
constexpr int kP2pMaxVirtualStages = 64;

// The tag of a message: distinct for every (kind, chunk, vstage). Throws Error when it would
// exceed tag_ub (MPI_TAG_UB of the communicator).
int p2p_tag(P2pKind kind, int64_t chunk, int vstage, int64_t tag_ub);

// One posted send or receive, and what it carries, for error messages and the size check.
struct P2pRequest {
  MPI_Request request = MPI_REQUEST_NULL;
  bool is_send = false;
  int peer = -1;
  P2pKind kind = P2pKind::activation;
  int64_t chunk = -1;
  int vstage = 0;     // the virtual stage (model chunk) of the *receiving* side
  int64_t count = 0;  // floats

  bool pending() const { return request != MPI_REQUEST_NULL; }
};

class P2p {
 public:
  // Uses its own duplicate of the world communicator, so its tags meet no one else's.
  P2p(const ProcessGroups& groups, double timeout_s);
  P2p(MPI_Comm world, const RankLayout& layout, double timeout_s);
  ~P2p();
  P2p(const P2p&) = delete;
  P2p& operator=(const P2p&) = delete;

  // `peer` is a world rank (layout().prev_rank() / next_rank() for the pipeline neighbours).
  // The buffer must stay alive and untouched until the request completes.
  P2pRequest isend(const float* data, int64_t count, int peer, P2pKind kind, int64_t chunk,
                   int vstage = 0);
  P2pRequest irecv(float* data, int64_t count, int peer, P2pKind kind, int64_t chunk,
                   int vstage = 0);

  // True when complete (the request is then released); never blocks.
  bool test(P2pRequest& r);
  // Blocks until complete. Past the timeout throws Error: "rank 2 (stage 2, replica 0) waited
  // 45 s for the activation of chunk 7 from rank 1 (stage 1, replica 0) during forward of
  // chunk 7: rank 1 may have died or hung". A receive of another size than planned is an Error.
  void wait(P2pRequest& r, const std::string& during);
  void wait_all(std::span<P2pRequest> rs, const std::string& during);
  // Lets MPI move data of posted requests while this rank computes (large messages need the
  // receiver to call into MPI); cheap, call it between layers or actions.
  void progress();

  double timeout_s() const { return timeout_s_; }
  void set_timeout_s(double s) { timeout_s_ = s; }
  const RankLayout& layout() const { return layout_; }
  MPI_Comm comm() const { return comm_; }

  int64_t tag_ub() const { return tag_ub_; }

 private:
  std::string describe(const P2pRequest& r, const std::string& during) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  RankLayout layout_;
  double timeout_s_;
  int64_t tag_ub_ = 32767;
};

}  // namespace infinipipe
