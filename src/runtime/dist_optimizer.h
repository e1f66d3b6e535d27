// Megatron's distributed optimizer (ZeRO-1, --use-distributed-optimizer) over the data-parallel
// replicas of a stage. The stage's parameters, in their fixed order, form one flat range of N
// elements; replica r owns elements [r·N/dp, (r+1)·N/dp), whole tensors or parts of them, keeps
// optimizer state for those only, updates them, and the replicas then all-gather the updated
// weights. Gradients are still all-reduced whole (the global norm and clipping need them), so
// every element gets exactly the update the replicated optimizer gives it, bit for bit.
//
// Checkpoints stay one logical checkpoint whatever the layout: each tensor's state is written
// whole by the replica owning its first element, which gathers the parts of a tensor split
// between replicas; on load every replica takes its part of each tensor it owns, so a run can
// resume with another dp, or without the distributed optimizer.
#pragma once

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1  // the C API only: OpenMPI's deprecated C++ bindings warn
#endif
#include <mpi.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "model/optimizer.h"

namespace infinipipe::runtime {

// Part of tensor `tensor` (an index into the list partitioned): elements [offset, offset+numel).
struct ZeroSlice {
  size_t tensor = 0;
  int64_t offset = 0;
  int64_t numel = 0;
};

// The parts of the flat concatenation of tensors of sizes `numels` that replica `replica` of
// `dp` owns, in order. Every element belongs to exactly one replica; shares differ by at most 1.
std::vector<ZeroSlice> zero_owned_slices(std::span<const int64_t> numels, int dp, int replica);

class DistOptimizer {
 public:
  // dp_comm: the replicas of this stage (ProcessGroups::dp_comm()).
  DistOptimizer(MPI_Comm dp_comm, double timeout_s);
  ~DistOptimizer();
  DistOptimizer(const DistOptimizer&) = delete;
  DistOptimizer& operator=(const DistOptimizer&) = delete;

  int replicas() const { return dp_; }

  // This replica's parts of `full`: views of value and gradient under the tensor's name and
  // shape (the shape keeps weight decay's 1-D rule), to pass to the optimizer's step.
  std::vector<OptimTensor> owned(std::span<const OptimTensor> full) const;
  // After the update of owned(full) on every replica: all weights everywhere. Collective.
  void gather_weights(std::span<const OptimTensor> full, const std::string& during);

  // The whole optimizer states this replica writes into a checkpoint: those of the tensors of
  // `full` for which `saved` holds and whose first element it owns, gathering the parts of
  // split tensors from the other replicas (into `storage`). Collective over the replicas.
  std::vector<CheckpointOptimState> states_for_save(
      std::span<const OptimTensor> full, const ParamOptimizer& optimizer,
      const std::function<bool(const OptimTensor&)>& saved,
      std::deque<std::vector<float>>& storage);
  // The parts of each tensor's saved state this replica loads (full: the tensors in the same
  // order as for owned()).
  std::vector<CheckpointOptimSlice> load_slices(std::span<const CheckpointTarget> full) const;

 private:
  // Per tensor, the elements each replica owns and where they start in the tensor.
  struct Split {
    std::vector<int> counts, displs;
  };
  std::vector<Split> splits(std::span<const int64_t> numels) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int dp_ = 1;
  int replica_ = 0;
  double timeout_s_;
  std::vector<int> peers_;  // the other replicas' world ranks, asked when a wait times out
};

}  // namespace infinipipe::runtime
