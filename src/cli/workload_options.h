// The workload options `plan` and `simulate` share (--lengths, --distribution or --data-path,
// --iteration, --replica), defined in cmd_plan.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/config.h"
#include "cost/cost_model.h"

namespace infinipipe::cli {

using Workload = std::pair<std::vector<int64_t>, std::vector<int64_t>>;  // (global batch, share)

struct WorkloadLoader {
  // The global batch of --iteration and this replica's share of it (balanced by cost over dp).
  std::function<Workload(const Config&, const cost::CostModel&)> share;
  // `count` consecutive global batches from --iteration on (the layout search's sample).
  std::function<std::vector<std::vector<int64_t>>(const Config&, int64_t count)> batches;
};

WorkloadLoader add_workload_options(CLI::App* cmd);

}  // namespace infinipipe::cli
