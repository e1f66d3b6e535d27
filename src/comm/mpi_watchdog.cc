#include "comm/mpi_watchdog.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>

#include <fmt/format.h>

#include "comm/mpi_comm.h"

namespace infinipipe {

namespace {

void write_text(const char* text, size_t n) {
  ssize_t rc = write(STDERR_FILENO, text, n);
  (void)rc;
}

// Text a signal handler may print (it may only write(2)), pre-formatted into two buffers so
// set() never rewrites the one a handler may be reading.
template <size_t Size>
struct SignalText {
  char buf[2][Size];
  std::atomic<int> active{-1};  // -1: nothing to say
  std::atomic<int> len[2];

  void set(const std::string& text) {
    const int next = active.load() == 0 ? 1 : 0;
    const size_t n = std::min(text.size(), Size);
    std::memcpy(buf[next], text.data(), n);
    len[next].store(static_cast<int>(n));
    active.store(next);
  }
  bool has() const { return active.load() >= 0; }
  void write_out() const {
    const int i = active.load();
    if (i >= 0) write_text(buf[i], static_cast<size_t>(len[i].load()));
  }
};

// What the SIGTERM handler prints; what the rank is doing now ("forward of chunk 3 (iteration
// 5)") and the wait in progress, once it lasts ("the activation of chunk 7 from rank 1 ..."),
// for watchdog_doing_write.
SignalText<512> g_note;
SignalText<256> g_doing;
SignalText<256> g_wait;
std::atomic<bool> g_doing_armed{false};
std::atomic<bool> g_waiting{false};

void on_sigterm(int sig) {
  g_note.write_out();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

Watchdog::Watchdog(double timeout_s, bool handle_sigterm)
    : timeout_s_(timeout_s), handle_sigterm_(handle_sigterm) {
  if (handle_sigterm_) std::signal(SIGTERM, on_sigterm);
  thread_ = std::thread([this] { run(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (handle_sigterm_) {
    std::signal(SIGTERM, SIG_DFL);
    g_note.active.store(-1);
  }
}

void Watchdog::timeout_set(double timeout_s) {
  std::lock_guard<std::mutex> lock(mutex_);
  timeout_s_ = timeout_s;
}

void Watchdog::arm(const std::string& doing) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = true;
    doing_ = doing;
    since_ = std::chrono::steady_clock::now();
  }
  g_doing.set(doing);
  g_doing_armed.store(true);
  if (handle_sigterm_) {
    g_note.set(
        fmt::format("infinipipe: {} was stopped during {} (another rank failed; see the "
                    "launcher's message)\n",
                    comm_rank_name(), doing));
  }
}

void Watchdog::disarm() {
  std::lock_guard<std::mutex> lock(mutex_);
  armed_ = false;
  g_doing_armed.store(false);
}

void watchdog_wait_begin(const std::string& what) {
  g_wait.set(what);
  g_waiting.store(true);
}

void watchdog_wait_end() {
  g_waiting.store(false);
}

bool watchdog_doing_write() {
  const bool doing = g_doing.has(), waiting = g_waiting.load() && g_wait.has();
  if (!doing && !waiting) return false;
  if (doing) {
    const char* before = g_doing_armed.load() ? " during " : " after ";
    write_text(before, std::strlen(before));
    g_doing.write_out();
  }
  if (waiting) {
    const char* before = doing ? ", waiting for " : " waiting for ";
    write_text(before, std::strlen(before));
    g_wait.write_out();
  }
  return true;
}

void Watchdog::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(100));
    if (stop_ || !armed_) continue;
    double held = std::chrono::duration<double>(std::chrono::steady_clock::now() - since_).count();
    if (held < timeout_s_) continue;
    std::string msg = fmt::format(
        "no progress for {:.0f} s during {} (watchdog timeout {:.0f} s): this rank or a peer is "
        "hung; if the step is only slow, raise --watchdog-timeout",
        held, doing_, timeout_s_);
    lock.unlock();
    comm_report_fatal(msg, 1);
  }
}

}  // namespace infinipipe
