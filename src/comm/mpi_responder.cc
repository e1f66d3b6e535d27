#include "comm/mpi_responder.h"

#include <array>
#include <chrono>
#include <cstring>
#include <list>
#include <thread>

#include <fmt/format.h>

#include "comm/mpi_comm.h"

namespace infinipipe {

namespace {

constexpr int kQueryTag = 1;
constexpr int kReplyTag = 2;
constexpr int kReplyLen = 512;

struct Reply {
  MPI_Request request = MPI_REQUEST_NULL;
  char text[kReplyLen];
};

// Only the main thread waits on MPI, so no lock: the responder lives in its wait loops.
struct Responder {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Request query = MPI_REQUEST_NULL;
  int query_buf = 0;
  std::list<Reply> replies;  // sends in flight; list: their buffers must not move
};
Responder g;
const int kQuery = 0;  // what a query carries; static, so a pending send never outlives it

void post_query_recv() {
  MPI_Irecv(&g.query_buf, 1, MPI_INT, MPI_ANY_SOURCE, kQueryTag, g.comm, &g.query);
}

}  // namespace

void responder_start(MPI_Comm world) {
  if (g.comm != MPI_COMM_NULL) return;
  if (MPI_Comm_dup(world, &g.comm) != MPI_SUCCESS) return;  // blame stays coarse; not fatal
  MPI_Comm_set_errhandler(g.comm, MPI_ERRORS_RETURN);
  post_query_recv();
}

void responder_stop() {
  if (g.comm == MPI_COMM_NULL) return;
  if (g.query != MPI_REQUEST_NULL) {
    MPI_Cancel(&g.query);
    MPI_Wait(&g.query, MPI_STATUS_IGNORE);
  }
  // Replies are a few bytes (sent eagerly); one still pending goes to a rank that is gone.
  for (Reply& r : g.replies) {
    int done = 0;
    MPI_Test(&r.request, &done, MPI_STATUS_IGNORE);
    if (!done) MPI_Request_free(&r.request);
  }
  g.replies.clear();
  MPI_Comm_free(&g.comm);
}

bool responder_active() {
  return g.comm != MPI_COMM_NULL;
}

void responder_poll(const std::string& what, double waited_s) {
  if (g.comm == MPI_COMM_NULL) return;
  for (auto it = g.replies.begin(); it != g.replies.end();) {
    int done = 0;
    MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
    it = done ? g.replies.erase(it) : std::next(it);
  }
  int done = 0;
  MPI_Status st;
  if (MPI_Test(&g.query, &done, &st) != MPI_SUCCESS || !done) return;
  Reply& r = g.replies.emplace_back();
  std::string text = fmt::format("{} is itself waiting ({:.0f} s so far) for {}", comm_rank_name(),
                                 waited_s, what);
  size_t n = std::min(text.size(), size_t(kReplyLen - 1));
  std::memcpy(r.text, text.data(), n);
  r.text[n] = '\0';
  MPI_Isend(r.text, static_cast<int>(n + 1), MPI_CHAR, st.MPI_SOURCE, kReplyTag, g.comm,
            &r.request);
  post_query_recv();
}

std::vector<std::string> responder_ask(std::span<const int> peers, double timeout_s,
                                       const std::string& what, double waited_s) {
  const size_t n = peers.size();
  std::vector<std::string> out(n);
  if (g.comm == MPI_COMM_NULL) return out;
  std::vector<std::array<char, kReplyLen>> answers(n);
  std::vector<MPI_Request> sends(n, MPI_REQUEST_NULL), recvs(n, MPI_REQUEST_NULL);
  for (size_t i = 0; i < n; ++i) {
    MPI_Irecv(answers[i].data(), kReplyLen, MPI_CHAR, peers[i], kReplyTag, g.comm, &recvs[i]);
    MPI_Isend(&kQuery, 1, MPI_INT, peers[i], kQueryTag, g.comm, &sends[i]);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  std::vector<int> done(n, 0);
  for (size_t left = n; left > 0 && std::chrono::steady_clock::now() < deadline;) {
    responder_poll(what, waited_s);  // our own asker may be waiting on us
    for (size_t i = 0; i < n; ++i) {
      if (done[i]) continue;
      MPI_Test(&recvs[i], &done[i], MPI_STATUS_IGNORE);
      if (done[i]) --left;
    }
    if (left > 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  for (size_t i = 0; i < n; ++i) {
    if (done[i]) {
      answers[i].back() = '\0';
      out[i] = answers[i].data();
    } else {
      MPI_Cancel(&recvs[i]);
      MPI_Wait(&recvs[i], MPI_STATUS_IGNORE);
    }
    int sent = 0;
    MPI_Test(&sends[i], &sent, MPI_STATUS_IGNORE);
    if (!sent) MPI_Request_free(&sends[i]);
  }
  return out;
}

}  // namespace infinipipe
