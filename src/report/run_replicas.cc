#include "report/run_replicas.h"

#include <map>

#include <fmt/format.h>

namespace infinipipe::report {

std::vector<ReplicaBalance> run_replica_balance(const RunCompare& c) {
  std::vector<ReplicaBalance> out;
  if (c.dp <= 1) return out;
  std::map<int64_t, std::map<int32_t, const IterationCompare*>> by_iteration;
  for (const IterationCompare& ic : c.iterations) by_iteration[ic.iteration][ic.replica] = &ic;
  for (const auto& [iteration, replicas] : by_iteration) {
    if (static_cast<int32_t>(replicas.size()) != c.dp) continue;  // not traced on every replica
    std::vector<double> predicted, measured;
    for (const auto& [replica, ic] : replicas) {
      predicted.push_back(ic->predicted_step_s);
      measured.push_back(ic->measured_step_s);
    }
    out.push_back(
        {iteration, plan::replica_imbalance(predicted), plan::replica_imbalance(measured)});
  }
  return out;
}

std::string run_replica_balance_table(const std::vector<ReplicaBalance>& rows) {
  if (rows.empty()) return "";
  std::string t =
      "\n## Replicas: the slowest replica's step against the mean (the global step waits for "
      "it)\n\n"
      "| iteration | predicted slowest (replica) | predicted mean | predicted slowest/mean | "
      "measured slowest (replica) | measured mean | measured slowest/mean |\n"
      "|---:|---:|---:|---:|---:|---:|---:|\n";
  double pr = 0, mr = 0;
  for (const ReplicaBalance& r : rows) {
    t += fmt::format(
        "| {} | {:.4f} s ({}) | {:.4f} s | {:.3f} | {:.4f} s ({}) | {:.4f} s | {:.3f} |\n",
        r.iteration, r.predicted.slowest, r.predicted.slowest_replica, r.predicted.mean,
        r.predicted.ratio, r.measured.slowest, r.measured.slowest_replica, r.measured.mean,
        r.measured.ratio);
    pr += r.predicted.ratio;
    mr += r.measured.ratio;
  }
  const double n = static_cast<double>(rows.size());
  t += fmt::format("| mean | | | {:.3f} | | | {:.3f} |\n", pr / n, mr / n);
  return t;
}

nlohmann::json run_replica_balance_json(const std::vector<ReplicaBalance>& rows) {
  auto side = [](const plan::ReplicaImbalance& r) {
    return nlohmann::json{{"slowest_s", r.slowest},
                          {"mean_s", r.mean},
                          {"slowest_over_mean", r.ratio},
                          {"slowest_replica", r.slowest_replica}};
  };
  nlohmann::json j = nlohmann::json::array();
  for (const ReplicaBalance& r : rows)
    j.push_back({{"iteration", r.iteration},
                 {"predicted", side(r.predicted)},
                 {"measured", side(r.measured)}});
  return j;
}

}  // namespace infinipipe::report
