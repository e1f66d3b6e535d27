#include "runtime/link_watch.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>

#include <fmt/format.h>

#include "comm/mpi_allreduce.h"
#include "comm/mpi_comm.h"
#include "comm/mpi_groups.h"
#include "runtime/cost_loop.h"
#include "runtime/train_links.h"

namespace infinipipe::runtime {

namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string rate_text(double bytes_per_s) {
  const double mb = bytes_per_s / 1e6;
  return mb >= 100 ? fmt::format("{:.0f} MB/s", mb) : fmt::format("{:.3g} MB/s", mb);
}

std::string link_text(const cost::Link& l) {
  return fmt::format("{}, {:.0f} us", rate_text(l.bandwidth), l.latency_s * 1e6);
}

}  // namespace

double LinkWatch::threshold() const {
  if (ratios_.size() < kMinHistory) return 0;
  std::vector<double> logs;
  for (double r : ratios_) logs.push_back(std::log(r));
  const double mid = median_of(logs);
  std::vector<double> dev;
  for (double l : logs) dev.push_back(std::abs(l - mid));
  const double sigma = 1.4826 * median_of(dev);  // the median absolute deviation as a sigma
  return std::max(kSlowFactor, std::exp(2 * sigma));
}

bool LinkWatch::step_slow(double measured_s, double predicted_s) {
  slow_ratio_ = 0;
  if (++seen_ <= kWarmup || !(measured_s > 0) || !(predicted_s > 0)) return false;
  const double ratio = measured_s / predicted_s;
  const double factor = threshold();
  if (factor > 0 && ratio > factor * median_of({ratios_.begin(), ratios_.end()})) {
    slow_ratio_ = ratio;
    return true;
  }
  record(ratio);
  return false;
}

void LinkWatch::keep() {
  if (slow_ratio_ > 0) record(slow_ratio_);
  slow_ratio_ = 0;
}

void LinkWatch::record(double ratio) {
  ratios_.push_back(ratio);
  if (ratios_.size() > kWindow) ratios_.pop_front();
}

std::vector<LinkChange> link_changes(const cost::HostLinkTable& before,
                                     const cost::HostLinkTable& after) {
  std::vector<LinkChange> out;
  const size_t n = before.hosts.size();
  if (after.hosts.size() != n) return out;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i; j < n; ++j) {
      const cost::Link& b = before.between(static_cast<int64_t>(i), static_cast<int64_t>(j));
      const cost::Link& a = after.between(static_cast<int64_t>(i), static_cast<int64_t>(j));
      if (b.bandwidth <= 0 || a.bandwidth <= 0) continue;  // not measured
      const double bw = a.bandwidth / b.bandwidth;
      const double lat_hi = std::max(a.latency_s, b.latency_s);
      const double lat_lo = std::min(a.latency_s, b.latency_s);
      const bool latency_moved = lat_hi - lat_lo > 100e-6 && lat_hi > 2 * lat_lo;
      if (bw > 1.25 || bw < 1 / 1.25 || latency_moved) out.push_back({i, j, b, a});
    }
  }
  return out;
}

std::string link_change_text(const cost::HostLinkTable& links, const LinkChange& c) {
  return fmt::format("{} <-> {}: {} -> {}", links.hosts[c.a].name, links.hosts[c.b].name,
                     link_text(c.before), link_text(c.after));
}

RunLinks::RunLinks(const Config& cfg, const ProcessGroups* groups, double timeout_s,
                   const cost::HostLinkTable& measured)
    : groups_(groups),
      timeout_s_(timeout_s),
      interval_(cfg.cluster.measure_links_interval),
      train_iters_(cfg.training.train_iters) {
  if (!groups_ || !cfg.cluster.measure_links) return;
  table_ = !measured.empty()
               ? measured
               : train_links_measure(groups_->world(), timeout_s_, groups_->comm().rank() == 0);
  // With the update off the cost model stays the one the run started with (docs/cost-model.md).
  watching_ = cfg.training.cost_model_update == CostModelUpdate::online;
}

cost::RankGrid RunLinks::grid() const {
  const RankLayout& l = groups_->layout();
  return {l.pp, l.dp, 1, l.order};
}

int64_t RunLinks::replica() const {
  return groups_->layout().replica;
}

bool RunLinks::iteration_end(int64_t iteration, double measured_s, double predicted_s,
                             CostLoop& costs) {
  if (!watching_ || iteration >= train_iters_) return false;
  const bool slow = watch_.step_slow(measured_s, predicted_s);
  // Every rank's verdict and step in its slot of one sum: the same decision everywhere.
  const size_t world = static_cast<size_t>(groups_->layout().world_size());
  const size_t me = static_cast<size_t>(groups_->comm().rank());
  std::vector<double> all(world * 3, 0.0);
  if (slow) {
    all[me * 3] = 1;
    all[me * 3 + 1] = measured_s;
    all[me * 3 + 2] = predicted_s;
  }
  allreduce_sum(groups_->world(), std::span<double>(all), timeout_s_,
                fmt::format("the ranks' verdicts on the step of iteration {}", iteration));
  // The slowest voter's step names why, else the interval.
  std::string why;
  double worst = 0;
  for (size_t r = 0; r < world; ++r) {
    if (all[r * 3] <= 0) continue;
    const double ratio = all[r * 3 + 1] / all[r * 3 + 2];
    if (ratio <= worst) continue;
    worst = ratio;
    why = fmt::format("iteration {}: step {:.3g} s measured, {:.3g} s predicted on rank {}",
                      iteration, all[r * 3 + 1], all[r * 3 + 2], r);
  }
  if (why.empty() && interval_ > 0 && iteration % interval_ == 0)
    why = fmt::format("iteration {}: every {} iterations", iteration, interval_);
  if (why.empty()) return false;
  const cost::HostLinkTable now = train_links_measure(groups_->world(), timeout_s_, false);
  const std::vector<LinkChange> changes = link_changes(table_, now);
  if (changes.empty()) {
    watch_.keep();
    return false;
  }
  watch_.restart();
  const size_t n = table_.hosts.size();
  for (const LinkChange& c : changes) {
    if (groups_->comm().rank() == 0) fmt::print("link {} ({})\n", link_change_text(table_, c), why);
    table_.links[c.a * n + c.b] = table_.links[c.b * n + c.a] = c.after;
  }
  if (groups_->comm().rank() == 0) std::fflush(stdout);
  costs.links_set(table_, grid());
  return true;
}

}  // namespace infinipipe::runtime
