// The backstop against silent hangs. Waits in the MPI layer carry their own deadline; the
// watchdog covers everything else a rank can get stuck in (a blocking MPI call, a kernel that
// never returns). The main thread arms it around each step ("forward of chunk 7"); when a step
// stays armed past the timeout, the watchdog thread reports it once and aborts the job.
//
// With handle_sigterm it also installs a SIGTERM handler: when another rank dies, mpirun sends
// SIGTERM to the survivors before SIGKILL, and each prints one line saying what it was doing, so
// the terminal shows where every stage of the pipeline stood. `train` leaves SIGTERM to its
// exit signal handler (a stop request, runtime/train_stop.h) unless --exit-signal-handler=false.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace infinipipe {

class Watchdog {
 public:
  // timeout_s: CommOptions::watchdog_timeout(). Starts the thread.
  explicit Watchdog(double timeout_s, bool handle_sigterm = true);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void timeout_set(double timeout_s);  // from the next check on
  void arm(const std::string& doing);  // the clock starts now for this step
  void disarm();

  // Arms for the lifetime of the scope.
  class Scope {
   public:
    Scope(Watchdog& w, const std::string& doing) : w_(w) { w_.arm(doing); }
    ~Scope() { w_.disarm(); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Watchdog& w_;
  };

 private:
  void run();

  double timeout_s_;
  bool handle_sigterm_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool armed_ = false;
  std::string doing_;
  std::chrono::steady_clock::time_point since_;
  std::thread thread_;
};

// Async-signal-safe, for stop-signal handlers: writes to stderr " during <step>" (" after <step>"
// once it ended) for the last step a watchdog was armed for ("forward of chunk 3 (iteration 5)"),
// and ", waiting for <what>" while a wait of the MPI layer lasts (between the two calls below);
// false (nothing written) when there is neither.
bool watchdog_doing_write();
void watchdog_wait_begin(const std::string& what);
void watchdog_wait_end();

}  // namespace infinipipe
