// The process's MPI session: initialisation, world rank and size, waits with a deadline, and the
// one way a distributed run dies (comm_report_fatal). Every wait in the MPI layer goes through
// mpi_wait_deadline, so a dead or hung peer becomes an Error naming it, never a silent hang.
#pragma once

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1  // the C API only: OpenMPI's deprecated C++ bindings warn
#endif
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace infinipipe {

struct CommOptions {
  // A point-to-point or collective wait longer than this is an error naming the peer. The
  // default leaves a margin under the 60 s in which a fault must end the job.
  double p2p_timeout_s = 45.0;
  // The watchdog aborts the job when the main thread stays in one armed scope this long;
  // 0 means p2p_timeout_s + 10 (it is the backstop behind the waits' own deadline).
  double watchdog_timeout_s = 0.0;
  // On a timeout the rank asks its peer what it is doing (mpi_responder.h): how long to wait
  // for the answer, and how much longer to wait when the peer is itself waiting, leaving the
  // report to the rank next to the culprit.
  double ask_timeout_s = 2.0;
  double blame_grace_s = 5.0;

  double watchdog_timeout() const {
    return watchdog_timeout_s > 0 ? watchdog_timeout_s : p2p_timeout_s + 10.0;
  }
  void validate() const;  // throws ConfigError
};

// True when this process was started by mpirun/mpiexec (OpenMPI or a PMIx launcher).
bool mpi_launched();

// Owns MPI for the process. Initialises with MPI_THREAD_MULTIPLE (the watchdog thread may call
// MPI_Abort while the main thread waits; a planning thread exists but never calls MPI) unless
// MPI is already initialised, and finalises only what it initialised. One per process.
class Comm {
 public:
  explicit Comm(CommOptions options = {});
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_logging_rank() const { return rank_ == 0; }  // rank 0 prints progress; others quiet
  // A duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN, so errors become exceptions with
  // context instead of OpenMPI's generic abort, and our tags never meet anyone else's.
  MPI_Comm world() const { return world_; }
  const CommOptions& options() const { return options_; }
  int thread_level() const { return thread_level_; }

  void barrier(const std::string& during);  // with the p2p deadline
  // The run's --p2p-timeout / --watchdog-timeout (known once its configuration is read, after
  // MPI is up); ConfigError when invalid. Before any wait that should use them.
  void timeouts_set(double p2p_timeout_s, double watchdog_timeout_s);

 private:
  CommOptions options_;
  MPI_Comm world_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  int thread_level_ = 0;
  bool owns_mpi_ = false;
};

// Sets how errors name this rank, e.g. "rank 2 (stage 2, replica 0)"; ProcessGroups calls it
// once the layout is known. Before that a rank is "rank R".
void comm_set_rank_name(const std::string& name);
std::string comm_rank_name();

// Prints "infinipipe: error on <rank name>: <msg>" once per process (the first caller wins; a
// second caller, e.g. the watchdog racing the main thread, only aborts) and ends the whole job
// with exit_code through MPI_Abort. Without MPI it just exits.
[[noreturn]] void comm_report_fatal(const std::string& msg, int exit_code = 1);

// For an error every rank is likely to detect identically (a bad flag, a world-size mismatch):
// rank 0 reports it and aborts the job, the others wait a few seconds for that abort before
// reporting it themselves, so the terminal shows it once.
[[noreturn]] void comm_report_fatal_collective(const std::string& msg, int exit_code);

// Runs fn and turns an exception into a fatal report: ConfigError -> exit code 2 (collective),
// any other error -> 1. Returns fn's result when it returns normally.
int comm_run_guarded(const std::function<int()>& fn);

// What a wait is for, to name it in errors: "the activation of chunk 7 from rank 1 during
// forward of chunk 7" and, on timeout, the likely culprit: "rank 1 may have died or hung".
struct WaitContext {
  std::string what;
  std::string suspect;
  // The world ranks this wait depends on (the peer of a p2p, the other members of a
  // collective's group), asked before they are blamed.
  std::vector<int> peers;
};

// The world ranks of `comm`'s members other than this one: the peers of a collective on it.
std::vector<int> comm_peers(MPI_Comm comm);

// Polls the requests with MPI_Testall (spinning briefly, then sleeping with backoff so idle
// ranks leave the cores to busy ones) until all complete, filling statuses when non-empty.
// Past timeout_s it throws Error("<rank> waited <s> s for <what>: <suspect>..."); with peers,
// it first asks them what they are doing and names those that do not answer as dead or stuck,
// or, when all are themselves waiting, waits blame_grace_s longer and then says so.
void mpi_wait_deadline(std::span<MPI_Request> requests, std::span<MPI_Status> statuses,
                       double timeout_s, const WaitContext& ctx);

// Throws Error("<what>: <MPI error string>") when rc is not MPI_SUCCESS.
void mpi_check(int rc, const std::string& what);
std::string mpi_error_string(int rc);

// Converts an element count to MPI's int, failing with a message for giant buffers.
int mpi_count(int64_t count, const std::string& what);

}  // namespace infinipipe
