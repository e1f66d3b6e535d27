// One layout of the layout search planned replica plan by replica plan, the slowest (highest
// step bound) first, so that its upper bound on tokens/s tightens with every plan and a layout
// that cannot win shows it early (layout_search.cc, docs/cost-model.md "Layout search").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/config.h"
#include "cost/cost_model.h"
#include "sim/layout_search.h"

namespace infinipipe::sim {

class StagedLayout {
 public:
  // `refusal` non-empty: the layout cannot run for that reason, seen before planning; it is
  // finished at once. Otherwise `cfg` is the layout's validated configuration (its rank
  // placement the layout's order). Each replica is planned with the hosts of its ranks when
  // `space` knows them, and with its pipeline's links when `cm` has host links (layout_hosts.h).
  StagedLayout(const Config& cfg, const cost::CostModel& cm, const LayoutSpace& space,
               const Layout& layout, std::span<const std::vector<int64_t>> batches,
               const std::string& refusal);

  bool finished() const { return finished_; }  // every plan made, or one failed, or refused
  size_t planned() const { return steps_.size(); }
  size_t plans() const { return units_.size(); }
  // Upper bound on tokens/s once the first `planned` plans have their steps: a batch's step is
  // at least its planned replicas' steps and its other replicas' step bounds. +infinity when no
  // bound applies; 0 for a refused layout.
  double upper_after(size_t planned) const;
  double upper() const { return upper_after(planned()); }
  // Plans and simulates the next replica share; not finished() before.
  void plan_next();
  // The layout's result once finished (feasible, or why not); before, what is known.
  const LayoutResult& result() const { return result_; }

 private:
  struct Unit {
    size_t batch = 0, replica = 0;
    std::vector<int64_t> lengths;
    double bound = 0;
  };
  std::optional<Config> cfg_;
  std::optional<cost::CostModel> cost_;        // the layout's: the split and the step bounds
  std::vector<cost::CostModel> replica_cost_;  // each replica's plans (its hosts and links)
  std::vector<Unit> units_;                    // in planning order
  std::vector<double> steps_;                  // the planned units' steps, in that order
  size_t batches_ = 0;
  int64_t tokens_ = 0;
  bool finished_ = false;
  LayoutResult result_;
};

}  // namespace infinipipe::sim
