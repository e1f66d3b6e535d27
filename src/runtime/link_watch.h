// Links that change while `train --measure-links` trains (docs/multi-host.md, "Links that change
// during a run"): the links are measured again at the end of an iteration when the online fit
// notices a step slower than its prediction by more than its noise reaches (on any rank: the
// ranks vote through one sum, so all of them measure together), and every
// --measure-links-interval iterations. A pair of hosts whose bandwidth or latency moved is
// printed by rank 0 and the next plans time its hops with the new numbers.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "core/config.h"
#include "cost/host_link_table.h"
#include "cost/pipeline_links.h"

namespace infinipipe {
class ProcessGroups;
}

namespace infinipipe::runtime {

class CostLoop;

// One rank's verdict on its steps, MPI-free: the ratio measured / predicted of each step against
// the ratios of the steps before it. The fit's prediction is biased (it leaves out what it does
// not model) but steady, so a step is off when its ratio exceeds the median of the last
// kWindow ratios by kSlowFactor, or by more where those ratios spread more (2 robust standard
// deviations of their logarithms). A false alarm costs one measurement and changes nothing. The
// first kWarmup iterations of a process are planned before any refit (the prior's times, off by any
// factor) and only counted from then on.
class LinkWatch {
 public:
  static constexpr int64_t kWarmup = 2;
  static constexpr size_t kWindow = 8;
  static constexpr size_t kMinHistory = 3;
  static constexpr double kSlowFactor = 1.5;

  // Whether this rank's step was slower than its noise allows; records it unless it was (a slow
  // step is not the new normal before the links are measured again).
  bool step_slow(double measured_s, double predicted_s);
  // The links were measured again and some changed: the plans time the steps to come with the
  // new links, so they are judged against each other only.
  void restart() { ratios_.clear(); }
  // The links were measured again and none changed: the last step, slow for another reason, is
  // recorded after all (a step that stays slow becomes the normal after a few measurements,
  // instead of measuring the links every iteration; a false alarm does not hide the next step).
  void keep();
  // The factor over the median ratio a step must exceed now (kSlowFactor or more); 0 while the
  // history is too short to judge.
  double threshold() const;

 private:
  void record(double ratio);

  int64_t seen_ = 0;  // iterations observed by this process
  std::deque<double> ratios_;
  double slow_ratio_ = 0;  // the last step's ratio when it was judged slow, else 0
};

// A pair of hosts whose link moved beyond the measurement's noise: bandwidth by more than 25 %,
// or latency by more than 2x and 100 us.
struct LinkChange {
  size_t a = 0, b = 0;  // host indices, a <= b
  cost::Link before, after;
};
std::vector<LinkChange> link_changes(const cost::HostLinkTable& before,
                                     const cost::HostLinkTable& after);
// "ipp-host-a <-> ipp-host-b: 117 MB/s, 10 us -> 5.91 MB/s, 12 us".
std::string link_change_text(const cost::HostLinkTable& links, const LinkChange& c);

// The links of a distributed `train --measure-links` run, measured at start (rank 0 prints them)
// and again while it trains (not with --cost-model-update off, whose cost model stays as it
// started). Every rank holds the same numbers.
class RunLinks {
 public:
  // `measured`: the links train measured before it made the groups (to choose the rank order);
  // empty: measured here (collective over the world) when cfg.cluster.measure_links and `groups`.
  RunLinks(const Config& cfg, const ProcessGroups* groups, double timeout_s,
           const cost::HostLinkTable& measured);

  bool measured() const { return !table_.empty(); }
  const cost::HostLinkTable& table() const { return table_; }
  // The run's ranks (this rank's pipeline and replica), for the links its pipeline crosses.
  cost::RankGrid grid() const;
  int64_t replica() const;

  // At the end of every iteration, on every rank (collective over the world while it watches):
  // this rank's step measured against its plan's prediction; when any rank's step was slow, or
  // the interval is due, the links are measured again and the changed ones go into `costs` for
  // the next plans. Returns true when a link changed (a plan made ahead is then stale). Nothing
  // after the run's last iteration: no plan follows it.
  bool iteration_end(int64_t iteration, double measured_s, double predicted_s, CostLoop& costs);

 private:
  const ProcessGroups* groups_ = nullptr;
  double timeout_s_ = 0;
  bool watching_ = false;
  int64_t interval_ = 0;
  int64_t train_iters_ = 0;
  cost::HostLinkTable table_;
  LinkWatch watch_;
};

}  // namespace infinipipe::runtime
