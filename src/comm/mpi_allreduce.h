// Data-parallel gradient all-reduce in buckets, overlapped with backward, and the scalar
// reductions of a training step (loss sum, token counts, squared gradient norm).
//
// Which reduction: the loss is the mean over every predicted token of the *global* batch, and
// each replica scales its loss gradient by 1 / (global predicted tokens). Each replica's
// gradient is then its share of the global gradient, and the right reduction is a SUM
// (GradReduceOp::sum). `average` (divide by dp) is only right when each replica normalises by
// its own token count and replicas hold equal token counts, i.e. not for variable-length data.
#pragma once

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1  // the C API only: OpenMPI's deprecated C++ bindings warn
#endif
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace infinipipe {

enum class GradReduceOp { sum, average };

// Gradients are registered in the order they become final (parameters in reverse layer order,
// as backward proceeds) and cut into buckets, each of which starts an MPI_Iallreduce as soon as
// all of its gradients are final. A tensor of at least kPackBytes is reduced in place, in pieces
// of at most bucket_bytes; runs of smaller ones (norms, small projections) share a bucket, which
// starts one in-place all-reduce per tensor at once. Nothing is copied to a staging buffer, so
// the reduction needs no memory beyond the gradients the plan counts. Buckets start strictly in
// bucket order, which is the same on every replica of a stage, as MPI requires of collectives.
// finish() waits for all before the optimizer step.
class GradBuckets {
 public:
  static constexpr int64_t kDefaultBucketBytes = 4 << 20;
  static constexpr int64_t kPackBytes = 64 << 10;
  using Clock = std::chrono::steady_clock;

  // When one bucket's all-reduce ran: started by mark_ready/finish, seen complete by progress()
  // or finish() (so the end is as late as the next call into them).
  struct BucketTiming {
    int bucket;
    int64_t bytes;
    Clock::time_point start, end;
  };

  // dp_comm: the replicas of this stage (ProcessGroups::dp_comm()). With one replica
  // everything is a no-op.
  GradBuckets(MPI_Comm dp_comm, double timeout_s, GradReduceOp op = GradReduceOp::sum,
              int64_t bucket_bytes = kDefaultBucketBytes);
  ~GradBuckets();
  GradBuckets(const GradBuckets&) = delete;
  GradBuckets& operator=(const GradBuckets&) = delete;

  // Before the first mark_ready. Returns the id to pass to mark_ready. `grad` must stay valid.
  int add(const std::string& name, float* grad, int64_t numel);

  // This gradient is final for this iteration. Starts every bucket that became complete (and
  // all complete buckets before it), then pushes in-flight ones along.
  void mark_ready(int id);
  // Lets in-flight all-reduces progress (OpenMPI's non-blocking collectives advance only inside
  // MPI calls); call it between layers of backward.
  void progress();
  // Starts what has not started (gradients never marked ready are taken as final), waits for
  // every bucket with the deadline, writes the reduced values back to the gradients and resets
  // for the next iteration. Throws Error naming the bucket and its first parameter on timeout.
  void finish(const std::string& during);

  int num_buckets() const;
  int dp() const { return dp_; }
  int64_t numel() const { return numel_; }
  // Buckets of the last finish() whose all-reduce had started before finish() was called: how
  // much of the reduction overlapped backward.
  int last_started_early() const { return last_started_early_; }
  // Every bucket of the last finish(), in bucket order (empty with one replica).
  const std::vector<BucketTiming>& last_timings() const { return last_timings_; }

 private:
  struct Slice {
    int tensor;
    int64_t offset;  // in the tensor
    int64_t count;
  };
  struct Bucket {
    std::vector<Slice> slices;
    std::vector<int> tensors;  // distinct tensors, for readiness
    int64_t count = 0;
    int waiting = 0;                    // tensors not yet ready
    std::vector<MPI_Request> requests;  // one per slice, in place
    bool in_flight = false;             // started, completion not yet seen
    Clock::time_point started, ended;
  };
  struct Tensor {
    std::string name;
    float* grad;
    int64_t numel;
    std::vector<int> buckets;
    bool ready = false;
  };

  std::vector<Bucket> layout() const;  // the buckets of the registered tensors
  void build();
  void start(Bucket& b);
  void complete(Bucket& b);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int dp_ = 1;
  std::vector<int> peers_;  // the other replicas' world ranks, asked when a wait times out
  double timeout_s_;
  GradReduceOp op_;
  int64_t bucket_count_;  // floats per bucket
  std::vector<Tensor> tensors_;
  std::vector<Bucket> buckets_;
  bool built_ = false;
  size_t next_start_ = 0;
  int64_t numel_ = 0;
  int last_started_early_ = 0;
  std::vector<BucketTiming> last_timings_;
};

// Scalar reductions with the p2p deadline, element-wise in place. `what` names the quantity in
// errors ("the loss sum of iteration 12"). comm: dp_comm, pp_comm or world.
void allreduce_sum(MPI_Comm comm, std::span<double> values, double timeout_s,
                   const std::string& what);
void allreduce_sum(MPI_Comm comm, std::span<int64_t> values, double timeout_s,
                   const std::string& what);
void allreduce_max(MPI_Comm comm, std::span<double> values, double timeout_s,
                   const std::string& what);
double allreduce_sum(MPI_Comm comm, double value, double timeout_s, const std::string& what);
int64_t allreduce_sum(MPI_Comm comm, int64_t value, double timeout_s, const std::string& what);

}  // namespace infinipipe
