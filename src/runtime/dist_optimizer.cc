#include "runtime/dist_optimizer.h"

#include <algorithm>

#include <fmt/format.h>

#include "comm/mpi_comm.h"
#include "core/error.h"

namespace infinipipe::runtime {

std::vector<ZeroSlice> zero_owned_slices(std::span<const int64_t> numels, int dp, int replica) {
  if (dp < 1 || replica < 0 || replica >= dp)
    fail("internal: replica {} of {} data-parallel replicas", replica, dp);
  int64_t total = 0;
  for (int64_t n : numels) total += n;
  const int64_t lo = total * replica / dp, hi = total * (replica + 1) / dp;
  std::vector<ZeroSlice> out;
  int64_t start = 0;
  for (size_t i = 0; i < numels.size(); ++i) {
    const int64_t end = start + numels[i];
    const int64_t a = std::max(start, lo), b = std::min(end, hi);
    if (a < b) out.push_back({i, a - start, b - a});
    start = end;
  }
  return out;
}

DistOptimizer::DistOptimizer(MPI_Comm dp_comm, double timeout_s) : timeout_s_(timeout_s) {
  // A private communicator: these collectives never meet the gradient buckets'.
  mpi_check(MPI_Comm_dup(dp_comm, &comm_), "duplicating the data-parallel group");
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_size(comm_, &dp_);
  MPI_Comm_rank(comm_, &replica_);
  peers_ = comm_peers(comm_);
}

DistOptimizer::~DistOptimizer() {
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

std::vector<DistOptimizer::Split> DistOptimizer::splits(std::span<const int64_t> numels) const {
  std::vector<Split> out(numels.size(), Split{std::vector<int>(static_cast<size_t>(dp_), 0),
                                              std::vector<int>(static_cast<size_t>(dp_), 0)});
  for (int r = 0; r < dp_; ++r) {
    for (const ZeroSlice& z : zero_owned_slices(numels, dp_, r)) {
      out[z.tensor].counts[static_cast<size_t>(r)] = mpi_count(z.numel, "a parameter's part");
      out[z.tensor].displs[static_cast<size_t>(r)] = mpi_count(z.offset, "a parameter's part");
    }
  }
  return out;
}

namespace {

std::vector<int64_t> numels_of(std::span<const OptimTensor> full) {
  std::vector<int64_t> n;
  for (const OptimTensor& t : full) n.push_back(static_cast<int64_t>(t.value.size()));
  return n;
}

// The replica owning a tensor's first element: it writes the tensor's state.
int first_owner(const std::vector<int>& counts) {
  for (size_t r = 0; r < counts.size(); ++r)
    if (counts[r] > 0) return static_cast<int>(r);
  return 0;
}

}  // namespace

std::vector<OptimTensor> DistOptimizer::owned(std::span<const OptimTensor> full) const {
  std::vector<OptimTensor> out;
  for (const ZeroSlice& z : zero_owned_slices(numels_of(full), dp_, replica_)) {
    const OptimTensor& t = full[z.tensor];
    const size_t off = static_cast<size_t>(z.offset), n = static_cast<size_t>(z.numel);
    out.push_back({t.name, t.shape, t.value.subspan(off, n), t.grad.subspan(off, n)});
  }
  return out;
}

void DistOptimizer::gather_weights(std::span<const OptimTensor> full, const std::string& during) {
  const std::vector<Split> sp = splits(numels_of(full));
  std::vector<MPI_Request> reqs(full.size(), MPI_REQUEST_NULL);
  for (size_t i = 0; i < full.size(); ++i) {
    mpi_check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, full[i].value.data(),
                              sp[i].counts.data(), sp[i].displs.data(), MPI_FLOAT, comm_, &reqs[i]),
              "starting the all-gather of " + full[i].name);
  }
  mpi_wait_deadline(
      reqs, {}, timeout_s_,
      {"the distributed optimizer's all-gather of the updated weights during " + during,
       "a replica of this stage may have died or hung", peers_});
}

std::vector<CheckpointOptimState> DistOptimizer::states_for_save(
    std::span<const OptimTensor> full, const ParamOptimizer& optimizer,
    const std::function<bool(const OptimTensor&)>& saved, std::deque<std::vector<float>>& storage) {
  const bool adamw = optimizer.options().kind == Optimizer::adamw;
  const std::vector<Split> sp = splits(numels_of(full));
  std::vector<CheckpointOptimState> out;
  std::vector<MPI_Request> reqs;
  std::deque<std::vector<float>> zeros;  // a part never updated contributes zeros
  for (size_t i = 0; i < full.size(); ++i) {
    const OptimTensor& t = full[i];
    if (!saved(t)) continue;
    const int root = first_owner(sp[i].counts);
    const int mine = sp[i].counts[static_cast<size_t>(replica_)];
    const bool has = optimizer.has_state(t.name);
    const OptimState* s = has ? &optimizer.state(t.name) : nullptr;
    const bool whole = sp[i].counts[static_cast<size_t>(root)] == static_cast<int>(t.value.size());
    if (replica_ == root && has) {
      CheckpointOptimState c{t.name, t.shape, s->step, {}, {}};
      if (adamw && whole) {
        c.exp_avg = s->exp_avg;
        c.exp_avg_sq = s->exp_avg_sq;
      }
      out.push_back(std::move(c));
    }
    if (!adamw || whole) continue;
    // Split between replicas: the first owner gathers both moments whole.
    for (int moment = 0; moment < 2; ++moment) {
      const float* part = nullptr;
      if (mine > 0) {
        if (has) {
          part = (moment == 0 ? s->exp_avg : s->exp_avg_sq).data();
        } else {
          part = zeros.emplace_back(static_cast<size_t>(mine), 0.0f).data();
        }
      }
      float* into = nullptr;
      if (replica_ == root) {
        into = storage.emplace_back(t.value.size()).data();
        if (has) {
          (moment == 0 ? out.back().exp_avg : out.back().exp_avg_sq) = {into, t.value.size()};
        }
      }
      MPI_Request& req = reqs.emplace_back(MPI_REQUEST_NULL);
      mpi_check(MPI_Igatherv(part, mine, MPI_FLOAT, into, sp[i].counts.data(), sp[i].displs.data(),
                             MPI_FLOAT, root, comm_, &req),
                "starting the gather of the optimizer state of " + t.name);
    }
  }
  mpi_wait_deadline(reqs, {}, timeout_s_,
                    {"the distributed optimizer's gather of its state for a checkpoint",
                     "a replica of this stage may have died or hung", peers_});
  return out;
}

std::vector<CheckpointOptimSlice> DistOptimizer::load_slices(
    std::span<const CheckpointTarget> full) const {
  std::vector<int64_t> numels;
  for (const CheckpointTarget& t : full) numels.push_back(static_cast<int64_t>(t.data.size()));
  std::vector<CheckpointOptimSlice> out;
  for (const ZeroSlice& z : zero_owned_slices(numels, dp_, replica_)) {
    const CheckpointTarget& t = full[z.tensor];
    out.push_back({t.name, t.shape, z.offset, z.numel});
  }
  return out;
}

}  // namespace infinipipe::runtime
