#include "comm/mpi_groups.h"

#include <exception>

#include <fmt/format.h>

#include "comm/mpi_comm.h"
#include "core/error.h"

namespace infinipipe {

std::string rank_layout_fitting_degrees(int world_size) {
  std::string out;
  for (int pp = 1; pp <= world_size; ++pp) {
    if (world_size % pp != 0) continue;
    if (!out.empty()) out += ", ";
    out += fmt::format("({},{})", pp, world_size / pp);
  }
  return out;
}

RankLayout RankLayout::make(int world_size, int rank, int64_t pp, int64_t dp, RankOrder order) {
  if (pp < 1 || dp < 1) {
    fail_config("--pipeline-model-parallel-size ({}) and --data-parallel-size ({}) must be >= 1",
                pp, dp);
  }
  if (pp * dp != world_size) {
    fail_config(
        "the job has {} rank{} but --pipeline-model-parallel-size {} x --data-parallel-size {} = "
        "{}: launch with `mpirun -np {}`, or choose degrees whose product is {}: (pp,dp) in {}",
        world_size, world_size == 1 ? "" : "s", pp, dp, pp * dp, pp * dp, world_size,
        rank_layout_fitting_degrees(world_size));
  }
  if (rank < 0 || rank >= world_size) {
    fail("internal: rank {} outside a world of {} ranks", rank, world_size);
  }
  RankLayout l;
  l.pp = static_cast<int>(pp);
  l.dp = static_cast<int>(dp);
  l.rank = rank;
  l.order = order;
  l.stage = l.stage_of(rank);
  l.replica = l.replica_of(rank);
  return l;
}

std::vector<int> RankLayout::dp_group_ranks() const {
  std::vector<int> out;
  for (int r = 0; r < dp; ++r) out.push_back(rank_of(stage, r));
  return out;
}

std::vector<int> RankLayout::pp_group_ranks() const {
  std::vector<int> out;
  for (int s = 0; s < pp; ++s) out.push_back(rank_of(s, replica));
  return out;
}

std::vector<int> RankLayout::embedding_group_ranks() const {
  if (!is_first_stage() && !is_last_stage()) return {};
  if (pp == 1) return {rank};
  return {rank_of(0, replica), rank_of(pp - 1, replica)};
}

std::string RankLayout::describe(int r) const {
  return fmt::format("rank {} (stage {}, replica {})", r, stage_of(r), replica_of(r));
}

ProcessGroups::ProcessGroups(Comm& comm, int64_t pp, int64_t dp, RankOrder order)
    : comm_(comm), layout_(RankLayout::make(comm.size(), comm.rank(), pp, dp, order)) {
  comm_set_rank_name(layout_.describe());
  // Split keys order members by their index in the group: replica in dp, stage in pp.
  mpi_check(MPI_Comm_split(comm.world(), layout_.stage, layout_.replica, &dp_comm_),
            "creating the data-parallel group");
  mpi_check(MPI_Comm_split(comm.world(), layout_.replica, layout_.stage, &pp_comm_),
            "creating the pipeline group");
  bool ends = layout_.is_first_stage() || layout_.is_last_stage();
  mpi_check(MPI_Comm_split(comm.world(), ends ? layout_.replica : MPI_UNDEFINED, layout_.stage,
                           &embedding_comm_),
            "creating the embedding group");
  for (MPI_Comm c : {dp_comm_, pp_comm_, embedding_comm_}) {
    if (c != MPI_COMM_NULL) MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  }
}

ProcessGroups::~ProcessGroups() {
  int fin = 0;
  MPI_Finalized(&fin);
  if (fin || std::uncaught_exceptions() > 0) return;  // the job is being aborted
  if (dp_comm_ != MPI_COMM_NULL) MPI_Comm_free(&dp_comm_);
  if (pp_comm_ != MPI_COMM_NULL) MPI_Comm_free(&pp_comm_);
  if (embedding_comm_ != MPI_COMM_NULL) MPI_Comm_free(&embedding_comm_);
}

MPI_Comm ProcessGroups::world() const {
  return comm_.world();
}

}  // namespace infinipipe
