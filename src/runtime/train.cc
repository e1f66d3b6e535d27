#include "runtime/train.h"

#include <fmt/format.h>

#include "comm/mpi_comm.h"
#include "comm/mpi_groups.h"
#include "core/error.h"
#include "runtime/train_stop.h"

namespace infinipipe::runtime {

Trainer::Trainer(const TrainOptions& opts) : backend_(opts.config, opts), driver_(opts, backend_) {}

std::vector<obs::IterationMetrics> train_run(const TrainOptions& options) {
  TrainOptions opts = options;
  static_cast<RunOptions&>(opts) =
      run_options_prepare(options, options.groups ? options.groups->comm().rank() : 0);
  RunStop stop(opts.config.training);  // from here on a signal asks for a stop after the iteration
  Trainer trainer(opts);
  return trainer.driver().run(stop);
}

}  // namespace infinipipe::runtime
