#include "comm/mpi_p2p.h"

#include <exception>

#include <fmt/format.h>

#include "comm/mpi_comm.h"
#include "core/error.h"

namespace infinipipe {

const char* p2p_kind_name(P2pKind kind) {
  switch (kind) {
    case P2pKind::activation:
      return "activation";
    case P2pKind::gradient:
      return "activation gradient";
  }
  return "message";
}

P2p::P2p(const ProcessGroups& groups, double timeout_s)
    : P2p(groups.world(), groups.layout(), timeout_s) {}

P2p::P2p(MPI_Comm world, const RankLayout& layout, double timeout_s)
    : layout_(layout), timeout_s_(timeout_s) {
  mpi_check(MPI_Comm_dup(world, &comm_), "duplicating the communicator for point-to-point");
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  void* ub = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(comm_, MPI_TAG_UB, &ub, &flag);
  if (flag && ub) tag_ub_ = *static_cast<int*>(ub);
}

P2p::~P2p() {
  int fin = 0;
  MPI_Finalized(&fin);
  if (fin || std::uncaught_exceptions() > 0) return;  // the job is being aborted
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

int p2p_tag(P2pKind kind, int64_t chunk, int vstage, int64_t tag_ub) {
  if (chunk < 0 || vstage < 0 || vstage >= kP2pMaxVirtualStages) {
    fail("internal: point-to-point tag for chunk {} virtual stage {} (must be >= 0 and < {})",
         chunk, vstage, kP2pMaxVirtualStages);
  }
  int64_t tag = (chunk * kP2pMaxVirtualStages + vstage) * 2 + static_cast<int>(kind);
  if (tag > tag_ub) {
    fail(
        "chunk {} is beyond what this MPI's tag range ({}) can label; plan fewer chunks per "
        "global batch (at most {})",
        chunk, tag_ub, tag_ub / (2 * kP2pMaxVirtualStages));
  }
  return static_cast<int>(tag);
}

P2pRequest P2p::isend(const float* data, int64_t count, int peer, P2pKind kind, int64_t chunk,
                      int vstage) {
  P2pRequest r{MPI_REQUEST_NULL, true, peer, kind, chunk, vstage, count};
  int n = mpi_count(count, describe(r, "sending"));
  mpi_check(
      MPI_Isend(data, n, MPI_FLOAT, peer, p2p_tag(kind, chunk, vstage, tag_ub_), comm_, &r.request),
      "posting the send of " + describe(r, "sending"));
  return r;
}

P2pRequest P2p::irecv(float* data, int64_t count, int peer, P2pKind kind, int64_t chunk,
                      int vstage) {
  P2pRequest r{MPI_REQUEST_NULL, false, peer, kind, chunk, vstage, count};
  int n = mpi_count(count, describe(r, "receiving"));
  mpi_check(
      MPI_Irecv(data, n, MPI_FLOAT, peer, p2p_tag(kind, chunk, vstage, tag_ub_), comm_, &r.request),
      "posting the receive of " + describe(r, "receiving"));
  return r;
}

std::string P2p::describe(const P2pRequest& r, const std::string& during) const {
  std::string vs = r.vstage > 0 ? fmt::format(" (virtual stage {})", r.vstage) : "";
  return fmt::format("the {} of chunk {}{} {} {} during {}", p2p_kind_name(r.kind), r.chunk, vs,
                     r.is_send ? "to" : "from", layout_.describe(r.peer), during);
}

bool P2p::test(P2pRequest& r) {
  if (!r.pending()) return true;
  int done = 0;
  MPI_Status st;
  mpi_check(MPI_Test(&r.request, &done, &st), "testing " + describe(r, "a test"));
  return done != 0;
}

void P2p::wait(P2pRequest& r, const std::string& during) {
  if (!r.pending()) return;
  std::string what = r.is_send ? "the send of " + describe(r, during) : describe(r, during);
  std::string suspect =
      fmt::format("rank {} may have died or hung (or be waiting on a rank that did){}", r.peer,
                  r.is_send ? ", or never posted the matching receive (plans disagree?)" : "");
  MPI_Status st;
  mpi_wait_deadline({&r.request, 1}, {&st, 1}, timeout_s_, {what, suspect, {r.peer}});
  if (!r.is_send) {
    int got = 0;
    MPI_Get_count(&st, MPI_FLOAT, &got);
    if (got != r.count) {
      fail("{} received {} floats as {}, but its plan expects {}: the ranks disagree on the plan",
           layout_.describe(), got, describe(r, during), r.count);
    }
  }
}

void P2p::wait_all(std::span<P2pRequest> rs, const std::string& during) {
  // One at a time: each wait's deadline counts from when the previous one finished, and the
  // error names exactly the message that never came.
  for (P2pRequest& r : rs) wait(r, during);
}

void P2p::progress() {
  int flag = 0;
  MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, MPI_STATUS_IGNORE);
}

}  // namespace infinipipe
