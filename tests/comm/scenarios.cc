// Fault scenarios, run on every rank of an mpirun job started by test_faults.cc (the binary's
// main() dispatches here when INFINIPIPE_MPI_SCENARIO is set). Each is a small pipeline
// (pp = world size) that runs forward and backward of a few chunks per iteration, through the
// real Comm, ProcessGroups, P2p, Watchdog and comm_run_guarded, with a fault injected.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "comm/mpi_allreduce.h"
#include "comm/mpi_comm.h"
#include "comm/mpi_groups.h"
#include "comm/mpi_p2p.h"
#include "comm/mpi_watchdog.h"
#include "core/error.h"

namespace infinipipe::test {

namespace {

double env_seconds(const char* name, double fallback) {
  const char* v = std::getenv(name);
  return v ? std::atof(v) : fallback;
}

// fault(iteration, chunk, layout) runs inside the forward step of every chunk.
using Fault = std::function<void(int, int, const RankLayout&)>;

CommOptions scenario_options() {
  CommOptions opts;
  opts.p2p_timeout_s = env_seconds("SCENARIO_P2P_TIMEOUT", 45);
  opts.ask_timeout_s = env_seconds("SCENARIO_ASK_TIMEOUT", 2);
  return opts;
}

int run_pipeline(int iterations, const Fault& fault) {
  const CommOptions opts = scenario_options();
  Comm comm(opts);
  ProcessGroups g(comm, comm.size(), 1);
  const RankLayout& l = g.layout();
  P2p p2p(g, opts.p2p_timeout_s);
  // SCENARIO_WATCHDOG_RANK: only that rank gets SCENARIO_WATCHDOG_TIMEOUT.
  double wd = opts.watchdog_timeout();
  const char* wd_rank = std::getenv("SCENARIO_WATCHDOG_RANK");
  if (!wd_rank || std::atoi(wd_rank) == l.rank) wd = env_seconds("SCENARIO_WATCHDOG_TIMEOUT", wd);
  Watchdog watchdog(wd);
  const int chunks = 4;
  const int64_t n = 1024;
  std::vector<float> act(n, 1.0f), grad(n, 1.0f);
  for (int it = 0; it < iterations; ++it) {
    for (int c = 0; c < chunks; ++c) {
      std::string step = fmt::format("forward of chunk {} (iteration {})", c, it);
      Watchdog::Scope armed(watchdog, step);
      if (!l.is_first_stage()) {
        P2pRequest r = p2p.irecv(act.data(), n, l.prev_rank(), P2pKind::activation, c);
        p2p.wait(r, step);
      }
      fault(it, c, l);
      if (!l.is_last_stage()) {
        P2pRequest s = p2p.isend(act.data(), n, l.next_rank(), P2pKind::activation, c);
        p2p.wait(s, step);
      }
    }
    for (int c = chunks - 1; c >= 0; --c) {
      std::string step = fmt::format("backward of chunk {} (iteration {})", c, it);
      Watchdog::Scope armed(watchdog, step);
      if (!l.is_last_stage()) {
        P2pRequest r = p2p.irecv(grad.data(), n, l.next_rank(), P2pKind::gradient, c);
        p2p.wait(r, step);
      }
      if (!l.is_first_stage()) {
        P2pRequest s = p2p.isend(grad.data(), n, l.prev_rank(), P2pKind::gradient, c);
        p2p.wait(s, step);
      }
    }
  }
  comm.barrier("at the end of the scenario");
  if (comm.is_logging_rank()) fmt::print("scenario finished\n");
  return 0;
}

void hang_forever() {
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

// Every rank sums a loss per iteration over the world; rank 2 hangs before the second.
int run_collective_hang() {
  Comm comm(scenario_options());
  ProcessGroups g(comm, comm.size(), 1);
  Watchdog watchdog(comm.options().watchdog_timeout());
  for (int it = 0; it < 3; ++it) {
    if (g.layout().rank == 2 && it == 1) hang_forever();
    allreduce_sum(comm.world(), 1.0, comm.options().p2p_timeout_s,
                  fmt::format("the loss of iteration {}", it));
  }
  return 0;
}

}  // namespace

int scenario_main(const std::string& name) {
  return comm_run_guarded([&]() -> int {
    if (name == "clean") return run_pipeline(3, [](int, int, const RankLayout&) {});
    if (name == "kill") {
      // kill -9 of rank 1 in the middle of an iteration.
      return run_pipeline(1000, [](int it, int c, const RankLayout& l) {
        if (l.rank == 1 && it == 5 && c == 2) raise(SIGKILL);
      });
    }
    if (name == "run") {
      // Runs until killed from outside; rank SCENARIO_PID_RANK writes its pid to
      // SCENARIO_PID_FILE once the pipeline is busy.
      const char* file = std::getenv("SCENARIO_PID_FILE");
      const int pid_rank =
          std::atoi(std::getenv("SCENARIO_PID_RANK") ? std::getenv("SCENARIO_PID_RANK") : "1");
      return run_pipeline(1000000, [file, pid_rank](int it, int c, const RankLayout& l) {
        if (file && l.rank == pid_rank && it == 3 && c == 0) {
          // Written aside and renamed: the file appears whole, so its appearing is the event.
          const std::string part = std::string(file) + ".part";
          std::FILE* f = std::fopen(part.c_str(), "w");
          if (f) {
            std::fprintf(f, "%d\n", static_cast<int>(getpid()));
            std::fclose(f);
            std::rename(part.c_str(), file);
          }
        }
      });
    }
    if (name == "hang") {
      // Rank 1 stops making progress (a stuck kernel) before sending chunk 2's activation.
      return run_pipeline(1000, [](int it, int c, const RankLayout& l) {
        if (l.rank == 1 && it == 2 && c == 2) hang_forever();
      });
    }
    if (name == "hang_collective") return run_collective_hang();
    if (name == "error") {
      return run_pipeline(1000, [](int it, int c, const RankLayout& l) {
        if (l.rank == 3 && it == 1 && c == 1) fail("bad data in shard {}: re-run prepare", l.rank);
      });
    }
    if (name == "config") {
      // Every rank detects the same mistake.
      Comm comm;
      ProcessGroups g(comm, 3, 1);
      return 0;
    }
    fail_config("unknown scenario '{}'", name);
  });
}

}  // namespace infinipipe::test
