#include "comm/mpi_allreduce.h"

#include <algorithm>
#include <cstring>

#include <exception>

#include <fmt/format.h>

#include "comm/mpi_comm.h"
#include "core/error.h"

namespace infinipipe {

GradBuckets::GradBuckets(MPI_Comm dp_comm, double timeout_s, GradReduceOp op, int64_t bucket_bytes)
    : timeout_s_(timeout_s), op_(op), bucket_count_(bucket_bytes / int64_t(sizeof(float))) {
  if (bucket_count_ < 1)
    fail_config("gradient bucket size must be >= 4 bytes, got {}", bucket_bytes);
  mpi_check(MPI_Comm_size(dp_comm, &dp_), "reading the data-parallel group size");
  // A private communicator: our collectives are ordered among themselves only.
  mpi_check(MPI_Comm_dup(dp_comm, &comm_), "duplicating the data-parallel group");
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  peers_ = comm_peers(comm_);
}

GradBuckets::~GradBuckets() {
  int fin = 0;
  MPI_Finalized(&fin);
  if (fin || std::uncaught_exceptions() > 0) return;  // the job is being aborted
  for (Bucket& b : buckets_) {
    for (MPI_Request& r : b.requests)
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
  }
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

int GradBuckets::add(const std::string& name, float* grad, int64_t numel) {
  if (built_) fail("internal: gradient '{}' added to the buckets after the first iteration", name);
  if (numel <= 0 || grad == nullptr) fail("internal: gradient '{}' is empty", name);
  tensors_.push_back({name, grad, numel, {}, false});
  numel_ += numel;
  return static_cast<int>(tensors_.size()) - 1;
}

int GradBuckets::num_buckets() const {
  return static_cast<int>(built_ ? buckets_.size() : layout().size());
}

std::vector<GradBuckets::Bucket> GradBuckets::layout() const {
  std::vector<Bucket> out;
  Bucket packed;  // the run of small tensors being packed
  auto flush = [&] {
    if (packed.count > 0) out.push_back(std::move(packed));
    packed = Bucket{};
  };
  const int64_t pack_floats = kPackBytes / int64_t(sizeof(float));
  for (int t = 0; t < static_cast<int>(tensors_.size()); ++t) {
    const int64_t n = tensors_[t].numel;
    if (n >= pack_floats) {
      flush();
      for (int64_t off = 0; off < n; off += bucket_count_) {
        Bucket b;
        b.count = std::min(n - off, bucket_count_);
        b.slices.push_back({t, off, b.count});
        b.tensors.push_back(t);
        out.push_back(std::move(b));
      }
      continue;
    }
    if (packed.count + n > bucket_count_) flush();
    packed.slices.push_back({t, 0, n});
    packed.tensors.push_back(t);
    packed.count += n;
  }
  flush();
  return out;
}

void GradBuckets::build() {
  built_ = true;
  buckets_ = layout();
  for (int b = 0; b < static_cast<int>(buckets_.size()); ++b) {
    Bucket& bk = buckets_[b];
    for (int t : bk.tensors) tensors_[t].buckets.push_back(b);
    bk.waiting = static_cast<int>(bk.tensors.size());
  }
}

void GradBuckets::start(Bucket& b) {
  b.started = Clock::now();
  b.requests.assign(b.slices.size(), MPI_REQUEST_NULL);
  for (size_t k = 0; k < b.slices.size(); ++k) {
    const Slice& s = b.slices[k];
    mpi_check(MPI_Iallreduce(MPI_IN_PLACE, tensors_[s.tensor].grad + s.offset,
                             mpi_count(s.count, "a gradient bucket"), MPI_FLOAT, MPI_SUM, comm_,
                             &b.requests[k]),
              fmt::format("starting the gradient all-reduce of '{}'", tensors_[s.tensor].name));
  }
  b.in_flight = true;
}

void GradBuckets::complete(Bucket& b) {
  if (op_ != GradReduceOp::average) return;
  const float inv = 1.0f / static_cast<float>(dp_);
  for (const Slice& s : b.slices) {
    float* data = tensors_[s.tensor].grad + s.offset;
    for (int64_t i = 0; i < s.count; ++i) data[i] *= inv;
  }
}

void GradBuckets::mark_ready(int id) {
  if (!built_) build();
  if (id < 0 || id >= static_cast<int>(tensors_.size())) {
    fail("internal: gradient id {} not registered ({} are)", id, tensors_.size());
  }
  Tensor& t = tensors_[id];
  if (t.ready) return;
  t.ready = true;
  if (dp_ == 1) return;
  for (int b : t.buckets) --buckets_[b].waiting;
  while (next_start_ < buckets_.size() && buckets_[next_start_].waiting == 0) {
    start(buckets_[next_start_++]);
  }
  progress();
}

void GradBuckets::progress() {
  // Tests in start order up to the first unfinished one: each test drives OpenMPI's progress
  // engine, and a finished bucket gets its end time.
  for (Bucket& b : buckets_) {
    if (!b.in_flight) continue;
    int done = 0;
    mpi_check(MPI_Testall(static_cast<int>(b.requests.size()), b.requests.data(), &done,
                          MPI_STATUSES_IGNORE),
              "testing a gradient all-reduce");
    if (!done) return;
    b.in_flight = false;
    b.ended = Clock::now();
  }
}

void GradBuckets::finish(const std::string& during) {
  if (!built_) build();
  last_started_early_ = static_cast<int>(next_start_);
  if (dp_ == 1) {
    for (Tensor& t : tensors_) t.ready = false;
    return;
  }
  while (next_start_ < buckets_.size()) start(buckets_[next_start_++]);
  for (int i = 0; i < static_cast<int>(buckets_.size()); ++i) {
    Bucket& b = buckets_[i];
    mpi_wait_deadline(
        b.requests, {}, timeout_s_,
        {fmt::format("the data-parallel gradient all-reduce of bucket {}/{} (from '{}') during {}",
                     i + 1, buckets_.size(), tensors_[b.slices[0].tensor].name, during),
         "a replica of this stage may have died or hung, or its plan has other parameters",
         peers_});
    if (b.in_flight) {
      b.in_flight = false;
      b.ended = Clock::now();
    }
    complete(b);
  }
  last_timings_.clear();
  for (int i = 0; i < static_cast<int>(buckets_.size()); ++i) {
    const Bucket& b = buckets_[i];
    last_timings_.push_back({i, b.count * int64_t(sizeof(float)), b.started, b.ended});
  }
  for (Tensor& t : tensors_) t.ready = false;
  for (Bucket& b : buckets_) {
    b.waiting = static_cast<int>(b.tensors.size());
  }
  next_start_ = 0;
}

namespace {

void allreduce_span(MPI_Comm comm, void* data, int64_t n, MPI_Datatype type, MPI_Op op,
                    double timeout_s, const std::string& what) {
  MPI_Request req = MPI_REQUEST_NULL;
  mpi_check(MPI_Iallreduce(MPI_IN_PLACE, data, mpi_count(n, what), type, op, comm, &req),
            "starting the reduction of " + what);
  mpi_wait_deadline(
      {&req, 1}, {}, timeout_s,
      {"the reduction of " + what, "a rank of this group may have died or hung", comm_peers(comm)});
}

}  // namespace

void allreduce_sum(MPI_Comm comm, std::span<double> values, double timeout_s,
                   const std::string& what) {
  allreduce_span(comm, values.data(), int64_t(values.size()), MPI_DOUBLE, MPI_SUM, timeout_s, what);
}

void allreduce_sum(MPI_Comm comm, std::span<int64_t> values, double timeout_s,
                   const std::string& what) {
  allreduce_span(comm, values.data(), int64_t(values.size()), MPI_INT64_T, MPI_SUM, timeout_s,
                 what);
}

void allreduce_max(MPI_Comm comm, std::span<double> values, double timeout_s,
                   const std::string& what) {
  allreduce_span(comm, values.data(), int64_t(values.size()), MPI_DOUBLE, MPI_MAX, timeout_s, what);
}

double allreduce_sum(MPI_Comm comm, double value, double timeout_s, const std::string& what) {
  allreduce_sum(comm, std::span<double>(&value, 1), timeout_s, what);
  return value;
}

int64_t allreduce_sum(MPI_Comm comm, int64_t value, double timeout_s, const std::string& what) {
  allreduce_sum(comm, std::span<int64_t>(&value, 1), timeout_s, what);
  return value;
}

}  // namespace infinipipe
