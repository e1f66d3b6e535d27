#include "sim/layout_staged.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"
#include "plan/budget_error.h"
#include "plan/planner.h"
#include "plan/schedule_table.h"
#include "sim/layout_hosts.h"
#include "sim/simulator.h"
#include "sim/step_bound.h"

namespace infinipipe::sim {
namespace {

void take_peaks(std::vector<int64_t>& into, const std::vector<int64_t>& peaks) {
  if (into.size() < peaks.size()) into.resize(peaks.size(), 0);
  for (size_t i = 0; i < peaks.size(); ++i) into[i] = std::max(into[i], peaks[i]);
}

}  // namespace

StagedLayout::StagedLayout(const Config& cfg, const cost::CostModel& cm, const LayoutSpace& space,
                           const Layout& layout, std::span<const std::vector<int64_t>> batches,
                           const std::string& refusal) {
  result_.layout = layout;
  result_.reason = refusal;
  batches_ = batches.size();
  if (!refusal.empty()) {
    finished_ = true;
    return;
  }
  cfg_ = cfg;
  // Ulysses groups stay inside a node (the refusal covers the rest through Config::validate).
  cost_ = cm.with_ulysses_degree(layout.ulysses, 0);
  result_.budget_bytes = plan::planner_budget(*cfg_, *cost_);
  // A bound made without the hosts or the pipeline's links stays a bound: sharing cores only
  // slows ranks down, and the bound counts no transfer (step_bound.h).
  for (int64_t k = 0; k < layout.dp; ++k)
    replica_cost_.push_back(layout_replica_cost_model(*cost_, space, layout, k));
  for (size_t b = 0; b < batches.size(); ++b) {
    const std::vector<int64_t>& batch = batches[b];
    for (int64_t len : batch) tokens_ += std::min(len, cfg.model.seq_length);
    // Each batch split over the replicas as training splits it.
    std::vector<std::vector<int64_t>> shares =
        layout.dp == 1 ? std::vector<std::vector<int64_t>>{batch}
                       : plan::balance_replicas(batch, layout.dp, *cost_, *cfg_);
    for (size_t k = 0; k < shares.size(); ++k) {
      const double bound = step_lower_bound(*cost_, *cfg_, shares[k]);
      units_.push_back({b, k, std::move(shares[k]), bound});
    }
  }
  // The slowest first; ties in (batch, replica) order.
  std::stable_sort(units_.begin(), units_.end(),
                   [](const Unit& x, const Unit& y) { return x.bound > y.bound; });
  result_.bound_tokens_per_s = upper_after(0);
}

double StagedLayout::upper_after(size_t planned) const {
  if (!cfg_) return 0.0;
  std::vector<double> step(batches_, 0.0);
  for (size_t j = 0; j < units_.size(); ++j)
    step[units_[j].batch] =
        std::max(step[units_[j].batch], j < planned ? steps_[j] : units_[j].bound);
  double total = 0;
  for (double x : step) total += x;
  if (!(total > 0)) return std::numeric_limits<double>::infinity();
  return static_cast<double>(tokens_) / total;
}

void StagedLayout::plan_next() {
  if (finished_) fail("layout search: {} is planned already", result_.layout.describe());
  const Unit& u = units_[steps_.size()];
  const Config& cfg = *cfg_;
  const cost::CostModel& g = replica_cost_[u.replica];
  LayoutResult& r = result_;
  const std::string where =
      units_.size() > 1 ? fmt::format(" (batch {}, replica {})", u.batch, u.replica) : "";
  try {
    const plan::PlanResult p = plan::make_plan_detailed(cfg, g, u.lengths, r.layout.schedule);
    const StepResult st = simulate(p.plan, g, cfg);
    if (st.oom) {
      const int64_t peak = *std::max_element(st.peak_bytes.begin(), st.peak_bytes.end());
      r.reason = fmt::format("over budget by {} in simulation: peak {} per device, budget {}{}",
                             format_bytes(peak - r.budget_bytes), format_bytes(peak),
                             format_bytes(r.budget_bytes), where);
    } else {
      if (u.batch == 0 && u.replica == 0) r.setting = p.knobs.describe();
      steps_.push_back(st.step_time);
      take_peaks(r.peak_bytes, st.peak_bytes);
    }
  } catch (const plan::BudgetError& e) {
    r.reason = fmt::format("over budget by {}: needs {} per device, budget {}{}",
                           format_bytes(e.least_budget() - r.budget_bytes),
                           format_bytes(e.least_budget()), format_bytes(r.budget_bytes), where);
  } catch (const ConfigError& e) {
    r.reason = fmt::format("{} cannot run it: {}{}", plan::schedule_name(r.layout.schedule),
                           e.what(), where);
  } catch (const Error& e) {
    r.reason = fmt::format("planning failed: {}{}", e.what(), where);
  }
  if (!r.reason.empty()) {
    r.peak_bytes.clear();
    finished_ = true;
    return;
  }
  if (steps_.size() < units_.size()) return;
  std::vector<double> step(batches_, 0.0);
  for (size_t j = 0; j < units_.size(); ++j)
    step[units_[j].batch] = std::max(step[units_[j].batch], steps_[j]);
  double total = 0;
  for (double x : step) total += x;
  r.feasible = true;
  r.tokens_per_s = static_cast<double>(tokens_) / total;
  r.mean_step_s = total / static_cast<double>(batches_);
  finished_ = true;
}

}  // namespace infinipipe::sim
