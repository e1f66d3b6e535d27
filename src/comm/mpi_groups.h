// Ranks and groups of a (pp, dp) run. Megatron's order: data-parallel replicas of one stage are
// adjacent ranks (rank = stage * dp + replica), so the gradient all-reduce stays inside a node
// when a node holds a stage, and the pipeline crosses nodes with activations only.
//
//   pp = 2, dp = 2:  stage 0 = ranks {0, 1}, stage 1 = ranks {2, 3}
//                    dp groups {0, 1} {2, 3};  pp groups (pipelines) {0, 2} {1, 3}
//                    embedding groups (tied embeddings) {0, 2} {1, 3}
//   pp = 3, dp = 1:  embedding group {0, 2}; rank 1 is in none
//
// The other order (`--rank-placement`, setup/rank_order.h) puts the stages of one pipeline on
// adjacent ranks (rank = replica * pp + stage): pipelines stay inside a node, the all-reduce
// crosses.
#pragma once

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1  // the C API only: OpenMPI's deprecated C++ bindings warn
#endif
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"

namespace infinipipe {

class Comm;

// The pure mapping (no MPI), so it can be checked and printed anywhere.
struct RankLayout {
  int pp = 1;
  int dp = 1;
  int rank = 0;
  int stage = 0;    // pipeline stage of this rank
  int replica = 0;  // data-parallel replica of this rank
  RankOrder order = RankOrder::megatron;

  // Throws ConfigError when world_size != pp * dp, listing the (pp, dp) that do fit.
  static RankLayout make(int world_size, int rank, int64_t pp, int64_t dp,
                         RankOrder order = RankOrder::megatron);

  int world_size() const { return pp * dp; }
  int rank_of(int stage_, int replica_) const {
    return static_cast<int>(rank_in_order(order, pp, dp, stage_, replica_));
  }
  int stage_of(int rank_) const { return order == RankOrder::megatron ? rank_ / dp : rank_ % pp; }
  int replica_of(int rank_) const { return order == RankOrder::megatron ? rank_ % dp : rank_ / pp; }
  bool is_first_stage() const { return stage == 0; }
  bool is_last_stage() const { return stage == pp - 1; }
  // Neighbours in this replica's pipeline. They wrap around (stage 0's previous is the last
  // stage), which is what interleaved schedules need between virtual stages; with pp = 1 both
  // are this rank.
  int prev_rank() const { return rank_of((stage + pp - 1) % pp, replica); }
  int next_rank() const { return rank_of((stage + 1) % pp, replica); }
  std::vector<int> dp_group_ranks() const;  // the replicas of this stage
  std::vector<int> pp_group_ranks() const;  // the stages of this replica's pipeline
  // The first and last stage of this replica's pipeline when this rank is one of them (one rank
  // with pp = 1); empty on middle stages. What ProcessGroups::embedding_comm() holds.
  std::vector<int> embedding_group_ranks() const;
  std::string describe(int rank_) const;  // "rank 2 (stage 1, replica 0)"
  std::string describe() const { return describe(rank); }
};

// "(1,6), (2,3), (3,2), (6,1)": the (pp, dp) pairs whose product is world_size.
std::string rank_layout_fitting_degrees(int world_size);

// The layout plus its communicators: dp (the replicas of this stage, for gradient all-reduce)
// and pp (the stages of this pipeline, for scalar reductions such as the loss). Both use
// MPI_ERRORS_RETURN. Also names this rank in error reports (comm_set_rank_name).
class ProcessGroups {
 public:
  ProcessGroups(Comm& comm, int64_t pp, int64_t dp, RankOrder order = RankOrder::megatron);
  ~ProcessGroups();
  ProcessGroups(const ProcessGroups&) = delete;
  ProcessGroups& operator=(const ProcessGroups&) = delete;

  const RankLayout& layout() const { return layout_; }
  Comm& comm() const { return comm_; }
  MPI_Comm world() const;
  MPI_Comm dp_comm() const { return dp_comm_; }  // rank in it = replica
  MPI_Comm pp_comm() const { return pp_comm_; }  // rank in it = stage
  // The first and last stage of this pipeline (Megatron's embedding group): with tied
  // embeddings both hold a copy of the embedding whose gradients must be summed. MPI_COMM_NULL
  // on middle stages; with pp = 1 it holds just this rank.
  MPI_Comm embedding_comm() const { return embedding_comm_; }

 private:
  Comm& comm_;
  RankLayout layout_;
  MPI_Comm dp_comm_ = MPI_COMM_NULL;
  MPI_Comm pp_comm_ = MPI_COMM_NULL;
  MPI_Comm embedding_comm_ = MPI_COMM_NULL;
};

}  // namespace infinipipe
