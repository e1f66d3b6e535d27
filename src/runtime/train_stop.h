// Stops that keep the work (docs/reliability.md, "Stopping a run"): SIGTERM, SIGINT or SIGUSR1
// (--exit-signal-handler, on by default), --exit-interval and --exit-duration-in-mins end a run
// after a complete iteration, on every rank at the same one, with a checkpoint.
#pragma once

#include <chrono>
#include <csignal>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <thread>

#include "core/config.h"

namespace infinipipe::runtime {

// Why a run stops early, as every rank agreed.
struct StopReasons {
  int signal = 0;  // the first stop signal any rank received (its number), 0 = none
  bool interval = false;
  bool duration = false;
  bool any() const { return signal != 0 || interval || duration; }
};

// "SIGTERM", "at --exit-interval 5", "after --exit-duration-in-mins 0.5": what stopped the run.
std::string stop_reasons_text(const StopReasons& r, const TrainingConfig& tc);

// While alive, SIGTERM, SIGINT and SIGUSR1 ask for a stop after the current iteration: a thread
// waiting for them (they are blocked on the threads that train) records the signal and says so
// on stderr. Another stop signal at least
// kRepeatWindow after the first ends the process at once, by that signal (non-zero exit;
// checkpoint writes are atomic, so the last complete checkpoint stays intact). One within the
// window is the same request relayed (a launcher forwarding what the terminal also sent).
// One per process; restores the previous handlers on destruction.
class StopSignals {
 public:
  static constexpr std::chrono::milliseconds kRepeatWindow{1000};
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  static int received();  // the first stop signal's number, 0 = none yet

 private:
  struct sigaction previous_[3];
  sigset_t previous_mask_;
  std::thread waiter_;
};

// Every rank's stop reasons after `iteration`, their element-wise maximum, in place (unset: one
// process).
using StopAgree = std::function<void(std::span<int32_t> values, int64_t iteration)>;

// The stop decision of one run: installs the handlers (with --exit-signal-handler), and after
// each iteration combines this rank's reasons with every other rank's.
class RunStop {
 public:
  explicit RunStop(const TrainingConfig& tc);

  // After `iteration` completed iterations: the reasons every rank agrees on (`agree`: one
  // all-reduce of three integers over the world when distributed).
  StopReasons check(int64_t iteration, const StopAgree& agree);

 private:
  TrainingConfig tc_;
  std::chrono::steady_clock::time_point start_;
  std::optional<StopSignals> signals_;
};

}  // namespace infinipipe::runtime
