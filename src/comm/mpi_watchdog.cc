#include "comm/mpi_watchdog.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>

#include <fmt/format.h>

#include "comm/mpi_comm.h"

namespace infinipipe {

namespace {

// What the SIGTERM handler prints, pre-formatted (a handler may only write(2)). Two buffers so
// arm() never rewrites the one a handler may be reading; -1 = nothing to say.
char g_note[2][512];
std::atomic<int> g_note_active{-1};
std::atomic<int> g_note_len[2];

void note_set(const std::string& text) {
  int next = g_note_active.load() == 0 ? 1 : 0;
  size_t n = std::min(text.size(), sizeof(g_note[next]));
  std::memcpy(g_note[next], text.data(), n);
  g_note_len[next].store(static_cast<int>(n));
  g_note_active.store(next);
}

// What the rank is doing now ("forward of chunk 3 (iteration 5)"), the same way, for
// watchdog_doing_write.
char g_doing[2][256];
std::atomic<int> g_doing_active{-1};
std::atomic<int> g_doing_len[2];
std::atomic<bool> g_doing_armed{false};

void doing_set(const std::string& text) {
  int next = g_doing_active.load() == 0 ? 1 : 0;
  size_t n = std::min(text.size(), sizeof(g_doing[next]));
  std::memcpy(g_doing[next], text.data(), n);
  g_doing_len[next].store(static_cast<int>(n));
  g_doing_active.store(next);
}

// The wait in progress, once it lasts ("the activation of chunk 7 from rank 1 ..."): the same.
char g_wait[2][256];
std::atomic<int> g_wait_active{-1};
std::atomic<int> g_wait_len[2];
std::atomic<bool> g_waiting{false};

void write_text(const char* text, size_t n) {
  ssize_t rc = write(STDERR_FILENO, text, n);
  (void)rc;
}

void on_sigterm(int sig) {
  int i = g_note_active.load();
  if (i >= 0) {
    ssize_t rc = write(STDERR_FILENO, g_note[i], static_cast<size_t>(g_note_len[i].load()));
    (void)rc;
  }
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
    g_note_active.store(-1);
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
  doing_set(doing);
  g_doing_armed.store(true);
  if (handle_sigterm_) {
    note_set(
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
  int next = g_wait_active.load() == 0 ? 1 : 0;
  size_t n = std::min(what.size(), sizeof(g_wait[next]));
  std::memcpy(g_wait[next], what.data(), n);
  g_wait_len[next].store(static_cast<int>(n));
  g_wait_active.store(next);
  g_waiting.store(true);
}

void watchdog_wait_end() {
  g_waiting.store(false);
}

bool watchdog_doing_write() {
  const int i = g_doing_active.load(), w = g_wait_active.load();
  const bool waiting = g_waiting.load() && w >= 0;
  if (i < 0 && !waiting) return false;
  if (i >= 0) {
    const char* before = g_doing_armed.load() ? " during " : " after ";
    write_text(before, std::strlen(before));
    write_text(g_doing[i], static_cast<size_t>(g_doing_len[i].load()));
  }
  if (waiting) {
    const char* before = i >= 0 ? ", waiting for " : " waiting for ";
    write_text(before, std::strlen(before));
    write_text(g_wait[w], static_cast<size_t>(g_wait_len[w].load()));
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
