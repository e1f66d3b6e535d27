#include "comm/mpi_comm.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "comm/mpi_hosts.h"
#include "comm/mpi_responder.h"
#include "comm/mpi_watchdog.h"
#include "core/error.h"

namespace infinipipe {

namespace {

std::mutex g_name_mutex;
std::string g_rank_name;  // empty until MPI is up
std::atomic<bool> g_fatal_reported{false};
double g_ask_timeout_s = 2.0;
double g_blame_grace_s = 5.0;

// "rank 1 does not answer, ..." for the peers that gave no answer; "" when all answered. Peers on
// other hosts than this rank's may also be cut off from it: their hosts are named.
std::string silent_peers(const std::vector<int>& peers, const std::vector<std::string>& answers) {
  std::vector<int> silent;
  std::vector<std::string> far;
  int me = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  const std::string here = rank_host(me);
  for (size_t i = 0; i < peers.size(); ++i) {
    if (!answers[i].empty()) continue;
    silent.push_back(peers[i]);
    const std::string there = rank_host(peers[i]);
    if (!there.empty() && there != here && std::find(far.begin(), far.end(), there) == far.end())
      far.push_back(there);
  }
  if (silent.empty()) return "";
  const std::string cut = far.empty() ? ""
                                      : fmt::format(", or host {} cannot be reached from host {}",
                                                    fmt::join(far, ", "), here);
  if (silent.size() == 1) {
    return fmt::format(
        "rank {} does not answer, so it has died or is stuck outside communication{}", silent[0],
        cut);
  }
  return fmt::format(
      "ranks {} do not answer, so they have died or are stuck outside communication{}",
      fmt::join(silent, ", "), cut);
}

// A wait that lasts past its first spins is named to a stop signal's handler (mpi_watchdog.h)
// until it ends, however it ends.
struct WaitNote {
  bool on = false;
  void begin(const std::string& what) {
    watchdog_wait_begin(what);
    on = true;
  }
  ~WaitNote() {
    if (on) watchdog_wait_end();
  }
};

bool mpi_active() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

[[noreturn]] void abort_job(int exit_code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (mpi_active()) {
    int level = MPI_THREAD_SINGLE, is_main = 0;
    MPI_Query_thread(&level);
    MPI_Is_thread_main(&is_main);
    // Below MPI_THREAD_MULTIPLE only the main thread may call MPI; from the watchdog, exiting
    // non-zero also makes mpirun end the whole job.
    if (level == MPI_THREAD_MULTIPLE || is_main) MPI_Abort(MPI_COMM_WORLD, exit_code);
  }
  std::_Exit(exit_code);
}

}  // namespace

void CommOptions::validate() const {
  if (!(p2p_timeout_s > 0)) {
    fail_config("--p2p-timeout must be positive (seconds), got {}; the default is 45",
                p2p_timeout_s);
  }
  if (watchdog_timeout_s < 0) {
    fail_config("--watchdog-timeout must be 0 (= p2p timeout + 10 s) or positive, got {}",
                watchdog_timeout_s);
  }
  if (watchdog_timeout_s > 0 && watchdog_timeout_s <= p2p_timeout_s) {
    fail_config(
        "--watchdog-timeout ({} s) must exceed --p2p-timeout ({} s): the watchdog is the backstop "
        "behind the waits' own deadline",
        watchdog_timeout_s, p2p_timeout_s);
  }
}

bool mpi_launched() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr ||
         std::getenv("PMI_RANK") != nullptr;
}

Comm::Comm(CommOptions options) : options_(options) {
  options_.validate();
  int init = 0;
  MPI_Initialized(&init);
  if (!init) {
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &thread_level_);
    if (rc != MPI_SUCCESS) fail("MPI_Init_thread failed: is OpenMPI installed and working?");
    owns_mpi_ = true;
  } else {
    MPI_Query_thread(&thread_level_);
  }
  mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &world_), "duplicating MPI_COMM_WORLD");
  MPI_Comm_set_errhandler(world_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(world_, &rank_);
  MPI_Comm_size(world_, &size_);
  g_ask_timeout_s = options_.ask_timeout_s;
  g_blame_grace_s = options_.blame_grace_s;
  responder_start(world_);
  if (comm_rank_name().empty() || comm_rank_name().starts_with("rank ")) {
    comm_set_rank_name(fmt::format("rank {}", rank_));
  }
  rank_hosts_gather(world_, options_.p2p_timeout_s);
}

Comm::~Comm() {
  // While an error unwinds, the other ranks may be blocked waiting on us: MPI_Finalize would
  // wait for them forever. comm_report_fatal is coming and aborts the job instead.
  if (!mpi_active() || std::uncaught_exceptions() > 0) return;
  responder_stop();
  if (world_ != MPI_COMM_NULL) MPI_Comm_free(&world_);
  if (owns_mpi_) MPI_Finalize();
}

void Comm::timeouts_set(double p2p_timeout_s, double watchdog_timeout_s) {
  CommOptions o = options_;
  o.p2p_timeout_s = p2p_timeout_s;
  o.watchdog_timeout_s = watchdog_timeout_s;
  o.validate();
  options_ = o;
}

void Comm::barrier(const std::string& during) {
  MPI_Request req = MPI_REQUEST_NULL;
  mpi_check(MPI_Ibarrier(world_, &req), "starting a barrier " + during);
  mpi_wait_deadline({&req, 1}, {}, options_.p2p_timeout_s,
                    {"every rank to reach the barrier " + during,
                     "a rank may have died or hung before reaching it", comm_peers(world_)});
}

void comm_set_rank_name(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_name_mutex);
  g_rank_name = name;
}

std::string comm_rank_name() {
  std::lock_guard<std::mutex> lock(g_name_mutex);
  return g_rank_name;
}

void comm_report_fatal(const std::string& msg, int exit_code) {
  if (!g_fatal_reported.exchange(true)) {
    std::string name = comm_rank_name();
    // Errors of the MPI layer already start with the rank's name; don't say it twice.
    if (name.empty() || msg.starts_with(name + " ")) {
      fmt::print(stderr, "infinipipe: error: {}\n", msg);
    } else {
      fmt::print(stderr, "infinipipe: error on {}: {}\n", name, msg);
    }
    abort_job(exit_code);
  }
  // Someone in this process is already reporting; give it time to abort the job.
  std::this_thread::sleep_for(std::chrono::seconds(5));
  abort_job(exit_code);
}

void comm_report_fatal_collective(const std::string& msg, int exit_code) {
  int rank = 0;
  if (mpi_active()) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    // Rank 0 most likely hit the same error and is aborting the job, which kills us here.
    std::this_thread::sleep_for(std::chrono::seconds(3));
  }
  comm_report_fatal(msg, exit_code);
}

int comm_run_guarded(const std::function<int()>& fn) {
  try {
    return fn();
  } catch (const ConfigError& e) {
    comm_report_fatal_collective(e.what(), 2);
  } catch (const std::exception& e) {
    comm_report_fatal(e.what(), 1);
  }
}

void mpi_wait_deadline(std::span<MPI_Request> requests, std::span<MPI_Status> statuses,
                       double timeout_s, const WaitContext& ctx) {
  using clock = std::chrono::steady_clock;
  if (!statuses.empty() && statuses.size() != requests.size()) {
    fail("internal: mpi_wait_deadline got {} statuses for {} requests", statuses.size(),
         requests.size());
  }
  const auto start = clock::now();
  auto deadline = start + std::chrono::duration<double>(timeout_s);
  bool asked = false;
  std::string answer;
  std::vector<MPI_Status> own(statuses.empty() ? requests.size() : 0);
  MPI_Status* st = statuses.empty() ? own.data() : statuses.data();
  int64_t sleep_us = 0;
  WaitNote note;
  for (int64_t polls = 0;; ++polls) {
    int done = 0;
    int rc = MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, st);
    if (rc == MPI_ERR_IN_STATUS) {
      for (size_t i = 0; i < requests.size(); ++i) {
        if (st[i].MPI_ERROR != MPI_SUCCESS && st[i].MPI_ERROR != MPI_ERR_PENDING) {
          rc = st[i].MPI_ERROR;
          break;
        }
      }
    }
    if (rc != MPI_SUCCESS) {
      int cls = 0;
      MPI_Error_class(rc, &cls);
      fail("{} failed while waiting for {}: {}{}", comm_rank_name(), ctx.what, mpi_error_string(rc),
           cls == MPI_ERR_TRUNCATE ? " (the message is longer than planned: the ranks disagree on "
                                     "the plan)"
                                   : "");
    }
    if (done) return;
    auto now = clock::now();
    double waited = std::chrono::duration<double>(now - start).count();
    responder_poll(ctx.what, waited);
    if (now >= deadline) {
      if (!asked && !ctx.peers.empty() && responder_active()) {
        asked = true;
        const std::vector<std::string> answers =
            responder_ask(ctx.peers, g_ask_timeout_s, ctx.what, waited);
        answer = silent_peers(ctx.peers, answers);
        if (answer.empty()) {
          answer = fmt::format("{} (the fault lies further along)", fmt::join(answers, "; "));
          deadline = clock::now() + std::chrono::duration<double>(g_blame_grace_s);
          continue;  // all peers wait too: the rank next to the culprit reports first
        }
      }
      waited = std::chrono::duration<double>(clock::now() - start).count();
      fail(
          "{} waited {:.0f} s for {}: {}. If the peer is only slow (a long chunk), raise "
          "--p2p-timeout",
          comm_rank_name(), waited, ctx.what, answer.empty() ? ctx.suspect : answer);
    }
    // Spin for the first polls (a message in flight lands within microseconds), then back off
    // to at most 200 us so waiting ranks do not steal the cores of computing ones.
    if (polls < 64) continue;
    if (polls == 64) note.begin(ctx.what);
    sleep_us = sleep_us == 0 ? 5 : std::min<int64_t>(sleep_us * 2, 200);
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
  }
}

std::vector<int> comm_peers(MPI_Comm comm) {
  MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  mpi_check(MPI_Comm_group(comm, &group), "reading a communicator's group");
  mpi_check(MPI_Comm_group(MPI_COMM_WORLD, &world), "reading the world group");
  int size = 0, me = 0;
  MPI_Group_size(group, &size);
  MPI_Group_rank(group, &me);
  std::vector<int> local(static_cast<size_t>(size)), global(static_cast<size_t>(size));
  for (int i = 0; i < size; ++i) local[static_cast<size_t>(i)] = i;
  MPI_Group_translate_ranks(group, size, local.data(), world, global.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  global.erase(global.begin() + me);
  return global;
}

std::string mpi_error_string(int rc) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", rc);
  return std::string(buf, static_cast<size_t>(len));
}

void mpi_check(int rc, const std::string& what) {
  if (rc != MPI_SUCCESS) fail("{} failed on {}: {}", what, comm_rank_name(), mpi_error_string(rc));
}

int mpi_count(int64_t count, const std::string& what) {
  if (count < 0 || count > INT_MAX) {
    fail("{} has {} elements, beyond MPI's int count limit ({}); use smaller chunks", what, count,
         INT_MAX);
  }
  return static_cast<int>(count);
}

}  // namespace infinipipe
