// The driver's evaluation: the validation (and final test) loss, as Megatron-LM's evaluate()
// computes it, over forward-only EPP plans through the same pipeline as training. Each batch is
// split over the replicas and planned as training would plan it (the same slicing and packing),
// then run without backward; the backend sums loss sums and predicted tokens over the world, so
// the result is the token-weighted mean over every predicted token of the evaluated batches.
#include <chrono>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/executor.h"
#include "runtime/run_driver.h"
#include "runtime/seconds_since.h"

namespace infinipipe::runtime {

RunDriver::EvalResult RunDriver::evaluate(data::DataSplit split, int64_t index) {
  if (!evaluates(split)) {
    fail("trainer: no {} data to evaluate on", data::data_split_name(split));
  }
  const auto t0 = std::chrono::steady_clock::now();
  data::DocumentStream stream = batches_.eval_stream(split, index);
  const std::string after = fmt::format(" of the {} evaluation after iteration {}",
                                        data::data_split_name(split), iteration_);
  double loss_sum = 0;
  EvalResult r;
  for (int64_t i = 0; i < cfg_.training.eval_iters; ++i) {
    const Batch batch = batches_.lengths_read(stream.next(), split);
    const int64_t predicted = batch_predicted_tokens(batch.lengths);
    if (predicted == 0) continue;  // every document has at most one token: nothing to score
    Batch share = batches_.share(batch);
    batches_.tokens_read(share, split);
    // Planned with the cost model the last training plan used (the same on every rank of the
    // pipeline), the loss summed over the world.
    last_eval_plan_ = planner_.eval_plan(share.lengths, last_.cost, iteration_ + 1);
    const auto [sum, tokens] = backend_.evaluate(last_eval_plan_, share.sequences, after);
    if (tokens != predicted) {
      fail("{} evaluation: the plan's chunks covered {} predicted tokens, the batch has {}",
           data::data_split_name(split), tokens, predicted);
    }
    loss_sum += sum;
    r.tokens += tokens;
  }
  if (r.tokens == 0) {
    fail("the {} evaluation predicts no token: its documents have at most one token each",
         data::data_split_name(split));
  }
  r.loss = loss_sum / static_cast<double>(r.tokens);
  r.seconds = seconds_since(t0);
  return r;
}

}  // namespace infinipipe::runtime
