#include "data/outlier_delay.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace infinipipe::data {

namespace {

// A released group may leave its largest outlier this much above the batch's mean replica load:
// the slowest replica is then within 5% of the mean by the cost the split balances.
constexpr double kReleaseTolerance = 0.05;
// A drawn sequence must fit in 80% of the share. Measured with the one-chunk price the delay
// weighed before (docs/benchmarks.md, "Replica balance"): a replica holding a long sequence
// planned about 20% slower than that price, and with the whole share as the threshold a
// 590K-token sequence balanced at the share planned 59.8 s against the others' 49.4 s. The
// chunk price (plan/replica_price.h) leaves out the fill every replica pays; with it the 80%
// keeps all three measured workloads within 5% of the mean.
constexpr double kAbsorbableShare = 0.8;

std::vector<DelayedDocument> docs_of(const auto& entries) {
  std::vector<DelayedDocument> out;
  for (const auto& e : entries) out.push_back(e.doc);
  return out;
}

}  // namespace

OutlierDelay::OutlierDelay(int64_t global_batch_size, int64_t replicas, Cost cost)
    : global_batch_size_(global_batch_size), replicas_(replicas), cost_(std::move(cost)) {
  if (replicas < 2)
    fail_config(
        "--outlier-delay balances data-parallel replicas: it needs --data-parallel-size "
        ">= 2, got {}",
        replicas);
  if (global_batch_size < 2 * replicas)
    fail_config(
        "--outlier-delay needs --global-batch-size >= 2 x data-parallel size ({}) so a batch "
        "holds the released outliers and the sequences that fill the other replicas; got {}",
        2 * replicas, global_batch_size);
}

std::vector<DelayedDocument> OutlierDelay::queue() const {
  return docs_of(queue_);
}
std::vector<DelayedDocument> OutlierDelay::lookahead() const {
  return docs_of(lookahead_);
}

void OutlierDelay::restore(std::vector<DelayedDocument> queue,
                           std::vector<DelayedDocument> lookahead) {
  if (static_cast<int64_t>(queue.size()) > capacity())
    fail(
        "the saved outlier queue holds {} documents, more than the {} it can (4 x dp); the "
        "checkpoint belongs to a run with more data-parallel replicas or is damaged",
        queue.size(), capacity());
  queue_.clear();
  lookahead_.clear();
  for (const DelayedDocument& d : queue) queue_.push_back({d, cost_(d.length)});
  for (const DelayedDocument& d : lookahead) lookahead_.push_back({d, cost_(d.length)});
}

const OutlierDelay::Entry& OutlierDelay::look(size_t k, const Source& source) {
  while (lookahead_.size() <= k) {
    const DelayedDocument d = source();
    lookahead_.push_back({d, cost_(d.length)});
  }
  return lookahead_[k];
}

// One candidate batch: the queued documents `release` (indices into queue_), then the stream.
// Drawn documents costlier than a replica's share of the drawn ones go to the queue (while it
// has room) and the batch is refilled, until none is left.
OutlierDelay::Assembly OutlierDelay::assemble(const std::vector<size_t>& release,
                                              const Source& source) {
  Assembly a;
  std::vector<bool> fill;  // per batch entry: drawn from the stream in this batch
  std::vector<bool> out(queue_.size(), false);
  for (size_t i : release) {
    a.batch.push_back(queue_[i]);
    fill.push_back(false);
    out[i] = true;
  }
  a.released = static_cast<int64_t>(release.size());
  for (size_t i = 0; i < queue_.size(); ++i)
    if (!out[i]) a.queue.push_back(queue_[i]);
  const auto gbs = static_cast<size_t>(global_batch_size_);
  const auto cap = static_cast<size_t>(capacity());
  for (;;) {
    while (a.batch.size() < gbs) {
      const Entry d = look(a.used, source);
      // An ended epoch's queued documents of this dataset go in before the next epoch's first.
      for (auto it = a.queue.begin(); it != a.queue.end() && a.batch.size() < gbs;) {
        if (it->doc.ref.dataset == d.doc.ref.dataset && it->doc.epoch < d.doc.epoch) {
          a.batch.push_back(*it);
          fill.push_back(false);
          ++a.flushed;
          it = a.queue.erase(it);
        } else {
          ++it;
        }
      }
      if (a.batch.size() >= gbs) break;
      a.batch.push_back(d);
      fill.push_back(true);
      ++a.used;
    }
    double total = 0, fill_total = 0;
    for (size_t i = 0; i < a.batch.size(); ++i) {
      total += a.batch[i].cost;
      if (fill[i]) fill_total += a.batch[i].cost;
    }
    a.mean = total / static_cast<double>(replicas_);
    // What a replica absorbs is its share of the drawn sequences: with released outliers in the
    // batch each replica already carries one, and a mid-sized sequence next to it would make
    // that replica the slowest.
    const double absorbable = kAbsorbableShare * fill_total / static_cast<double>(replicas_);
    std::vector<Entry> kept;
    std::vector<bool> kept_fill;
    int64_t moved = 0;
    for (size_t i = 0; i < a.batch.size(); ++i) {
      if (fill[i] && a.batch[i].cost > absorbable && a.queue.size() < cap) {
        a.queue.push_back(a.batch[i]);
        ++moved;
      } else {
        kept.push_back(a.batch[i]);
        kept_fill.push_back(fill[i]);
      }
    }
    if (moved == 0) break;
    a.delayed += moved;
    a.batch = std::move(kept);
    fill = std::move(kept_fill);
  }
  return a;
}

void OutlierDelay::commit(Assembly a) {
  queue_ = std::move(a.queue);
  lookahead_.erase(lookahead_.begin(), lookahead_.begin() + static_cast<std::ptrdiff_t>(a.used));
}

OutlierDelay::Batch OutlierDelay::next(const Source& source) {
  auto finish = [this](Assembly a) {
    Batch b;
    b.documents = docs_of(a.batch);
    b.released = a.released;
    b.flushed = a.flushed;
    b.delayed = a.delayed;
    commit(std::move(a));
    return b;
  };
  const auto dp = static_cast<size_t>(replicas_);
  if (queue_.size() >= dp) {
    // Candidate groups: dp queued outliers of neighbouring cost, costliest first; the first
    // group whose largest member the batch absorbs is released.
    std::vector<size_t> order(queue_.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [this](size_t x, size_t y) { return queue_[x].cost > queue_[y].cost; });
    double best_ratio = std::numeric_limits<double>::infinity();
    std::vector<size_t> best;
    for (size_t j = 0; j + dp <= order.size(); ++j) {
      std::vector<size_t> group(order.begin() + static_cast<std::ptrdiff_t>(j),
                                order.begin() + static_cast<std::ptrdiff_t>(j + dp));
      std::sort(group.begin(), group.end());  // queue order inside the batch
      Assembly a = assemble(group, source);
      const double ratio = a.mean > 0 ? queue_[order[j]].cost / a.mean : 0;
      if (ratio <= 1 + kReleaseTolerance) return finish(std::move(a));
      if (ratio < best_ratio) {
        best_ratio = ratio;
        best = group;
      }
    }
    // A full queue cannot take the next outliers: release the best group there is.
    if (static_cast<int64_t>(queue_.size()) >= capacity()) return finish(assemble(best, source));
  }
  return finish(assemble({}, source));
}

}  // namespace infinipipe::data
