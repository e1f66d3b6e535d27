#include "runtime/train_stop.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>

#include <fmt/format.h>

#include "comm/mpi_comm.h"
#include "comm/mpi_watchdog.h"
#include "core/error.h"

namespace infinipipe::runtime {

namespace {

constexpr std::array<int, 3> kStopSignals = {SIGTERM, SIGINT, SIGUSR1};

std::atomic<int> g_received{0};
std::atomic<int64_t> g_first_ns{0};
std::atomic<bool> g_installed{false};
std::atomic<bool> g_closing{false};  // wakes the waiting thread to end
// "infinipipe: rank 1 (stage 1, replica 0): ", formatted before the handlers go in (a handler
// may only write(2)).
char g_prefix[256];
size_t g_prefix_len = 0;

int64_t monotonic_ns() {  // clock_gettime is async-signal-safe
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGUSR1:
      return "SIGUSR1";
  }
  return "a signal";
}

void say(const char* text) {
  ssize_t rc = write(STDERR_FILENO, text, std::strlen(text));
  (void)rc;
}

void on_stop_signal(int sig) {
  const int64_t now = monotonic_ns();
  int none = 0;
  ssize_t rc = 0;
  if (g_received.compare_exchange_strong(none, sig)) {
    g_first_ns.store(now);
    rc = write(STDERR_FILENO, g_prefix, g_prefix_len);
    say(signal_name(sig));
    say(" received");
    watchdog_doing_write();  // where it stood: mpirun's TERM may mean that a peer died
    say(": stopping after this iteration (a second signal stops at once, without "
        "saving)\n");
    (void)rc;
    return;
  }
  const int64_t window_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(StopSignals::kRepeatWindow).count();
  if (now - g_first_ns.load() < window_ns) return;  // the same request, relayed
  rc = write(STDERR_FILENO, g_prefix, g_prefix_len);
  (void)rc;
  say("second stop signal (");
  say(signal_name(sig));
  say("): stopping at once without saving; the last complete checkpoint is kept\n");
  std::signal(sig, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);  // on the waiting thread it was blocked
  std::raise(sig);  // the process ends by the signal (in a handler: once it returns)
}

sigset_t stop_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kStopSignals) sigaddset(&set, s);
  return set;
}

}  // namespace

std::string stop_reasons_text(const StopReasons& r, const TrainingConfig& tc) {
  if (r.signal != 0) return signal_name(r.signal);
  if (r.interval) return fmt::format("at --exit-interval {}", tc.exit_interval);
  if (r.duration) return fmt::format("after --exit-duration-in-mins {}", tc.exit_duration_in_mins);
  return "nothing";
}

StopSignals::StopSignals() {
  if (g_installed.exchange(true)) fail("internal: stop signal handlers installed twice");
  g_received.store(0);
  const std::string name = comm_rank_name();
  const std::string prefix = name.empty() ? "infinipipe: " : "infinipipe: " + name + ": ";
  g_prefix_len = std::min(prefix.size(), sizeof(g_prefix));
  std::memcpy(g_prefix, prefix.data(), g_prefix_len);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sa.sa_flags = SA_RESTART;  // a read or write the signal lands in carries on
  sigemptyset(&sa.sa_mask);
  for (int s : kStopSignals) sigaddset(&sa.sa_mask, s);
  for (size_t i = 0; i < kStopSignals.size(); ++i) sigaction(kStopSignals[i], &sa, &previous_[i]);
  // The signals are taken by one thread waiting for them, blocked on this thread and the ones it
  // starts, so they never interrupt the training's own calls; the handler above serves threads
  // started before (MPI's).
  const sigset_t set = stop_signal_set();
  pthread_sigmask(SIG_BLOCK, &set, &previous_mask_);
  g_closing.store(false);
  waiter_ = std::thread([set] {
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) continue;
      if (g_closing.load()) return;
      on_stop_signal(sig);
    }
  });
}

StopSignals::~StopSignals() {
  g_closing.store(true);
  pthread_kill(waiter_.native_handle(), SIGUSR1);
  waiter_.join();
  pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
  for (size_t i = 0; i < kStopSignals.size(); ++i)
    sigaction(kStopSignals[i], &previous_[i], nullptr);
  g_installed.store(false);
}

int StopSignals::received() {
  return g_received.load();
}

RunStop::RunStop(const TrainingConfig& tc) : tc_(tc), start_(std::chrono::steady_clock::now()) {
  if (tc.exit_signal_handler) signals_.emplace();
}

StopReasons RunStop::check(int64_t iteration, const StopAgree& agree) {
  const double minutes =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count() / 60.0;
  std::array<int32_t, 3> v = {
      signals_ ? StopSignals::received() : 0,
      tc_.exit_interval > 0 && iteration % tc_.exit_interval == 0,
      tc_.exit_duration_in_mins > 0 && minutes >= tc_.exit_duration_in_mins,
  };
  if (agree) agree(v, iteration);
  return {v[0], v[1] != 0, v[2] != 0};
}

}  // namespace infinipipe::runtime
