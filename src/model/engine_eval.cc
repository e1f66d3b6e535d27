// StageEngine::forward_eval: a chunk's forward for the validation loss. It runs the very layers
// and kernels of training's forward (so the loss is the same number), keeps no activation for a
// backward and never touches a gradient.
#include <set>
#include <utility>

#include "model/classifier.h"
#include "model/engine.h"
#include "model/engine_stash.h"
#include "model/kernels.h"

namespace infinipipe {

// The loss of the last layer's output x (N, C) through the final norm and the LM head.
double StageEngine::head_loss(Chunk& c, const Tensor& x, const std::vector<int32_t>& targets) {
  const int64_t N = c.N, C = cfg_.hidden_size, V = cfg_.vocab_size;
  Tensor ln(tracker_, kWs, {N, C}, false), rstd(tracker_, kWs, {N}, false);
  rmsnorm_forward(ln.data(), rstd.data(), x.data(), params_->final_norm()->value.data(), N, C,
                  static_cast<float>(cfg_.norm_epsilon));
  Tensor ws(tracker_, kWs, {kClassifierBlock, V}, false);
  return classifier_loss(ln.data(), params_->lm_head()->value.data(), targets.data(), N, C, V,
                         ws.data());
}

// After a chunk's forward: every chunk whose sequences all ran their final slice here is done.
void StageEngine::eval_release(int32_t chunk_id) {
  auto closed = [this](int64_t seq) {
    auto it = sequences_.find(seq);
    return it == sequences_.end() || it->second.back().is_final;
  };
  std::set<int32_t> candidates{chunk_id};
  for (const SliceInput& s : chunks_.at(chunk_id)->slices) {
    if (!closed(s.seq_id)) continue;
    for (const SliceRef& r : sequences_.at(s.seq_id)) candidates.insert(r.chunk_id);
  }
  for (int32_t id : candidates) {
    auto it = chunks_.find(id);
    if (it == chunks_.end()) continue;
    bool done = true;
    for (const SliceInput& s : it->second->slices) done = done && closed(s.seq_id);
    if (done) chunk_drop(id);
  }
}

ForwardOutput StageEngine::forward_eval(const ChunkInput& chunk, Tensor&& input_activation) {
  const Tensor* input = input_activation.empty() ? nullptr : &input_activation;
  forward_check(chunk, input, 0);
  std::vector<int32_t> targets;
  Chunk& c = chunk_open(chunk, 0, targets);
  ForwardOutput result;
  try {
    Tensor x = forward_input(c, input, input != nullptr ? &input_activation : nullptr);
    for (int64_t l = 0; l < range_.num_layers; ++l) {
      LayerStash& ls = c.layers[static_cast<size_t>(l)];
      ls.x = std::move(x);
      // keep_all = false keeps only the input and, for a non-final slice, the K/V.
      x = layer_forward(c, l, false, true);
      ls.x.reset();
    }
    if (range_.has_lm_head) {
      result.loss_sum = head_loss(c, x, targets);
      for (int32_t t : targets) result.predicted_tokens += t >= 0 ? 1 : 0;
    } else {
      result.activation = std::move(x);
    }
  } catch (...) {
    chunk_drop(c.id, true);
    throw;
  }
  eval_release(c.id);
  return result;
}

}  // namespace infinipipe
