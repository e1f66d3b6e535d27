#include "model/kv_decoder.h"

#include "core/error.h"
#include "model/attention.h"
#include "model/kernels.h"
#include "model/matmul.h"

namespace infinipipe {

namespace {
constexpr auto kCacheMem = MemCategory::mem_activations;
constexpr auto kWorkspace = MemCategory::mem_workspace;
}  // namespace

KvCacheDecoder::KvCacheDecoder(ModelParams& params, MemoryTracker& tracker, int64_t capacity)
    : params_(params), tracker_(tracker), capacity_(capacity) {
  const ModelConfig& cfg = params.config();
  const StageRange& r = params.range();
  if (r.first_layer != 0 || r.num_layers != cfg.num_layers || !r.has_embedding || !r.has_lm_head) {
    fail("decoder: needs the whole model, got layers [{}, {}) of {}{}{}", r.first_layer,
         r.first_layer + r.num_layers, cfg.num_layers, r.has_embedding ? "" : " without embedding",
         r.has_lm_head ? "" : " without LM head");
  }
  if (capacity < 1 || capacity > cfg.max_positions()) {
    fail_config("decoder: a K/V cache of {} positions; the model takes 1 to {} (max positions)",
                capacity, cfg.max_positions());
  }
  inv_freq_.resize(static_cast<size_t>(cfg.head_dim() / 2));
  rope_inv_freq(inv_freq_.data(), cfg.head_dim(), cfg.rotary_base);
  const int64_t KV = cfg.kv_heads() * cfg.head_dim();
  for (int64_t l = 0; l < cfg.num_layers; ++l) {
    k_cache_.emplace_back(tracker, kCacheMem, std::vector<int64_t>{capacity, KV}, false);
    v_cache_.emplace_back(tracker, kCacheMem, std::vector<int64_t>{capacity, KV}, false);
  }
}

void KvCacheDecoder::check_tokens(std::span<const int32_t> tokens) const {
  const auto T = static_cast<int64_t>(tokens.size());
  if (T == 0) fail_config("decoder: no tokens to run");
  if (position_ + T > capacity_) {
    fail_config(
        "decoder: {} cached positions and {} new tokens exceed the cache of {} positions "
        "(the model's max positions bound it); shorten the prompt or --max-new-tokens",
        position_, T, capacity_);
  }
  const int64_t V = params_.config().vocab_size;
  for (const int32_t t : tokens) {
    if (t < 0 || t >= V) {
      fail_config(
          "decoder: token {} is outside the model's vocabulary of {}; the tokenizer "
          "does not match the checkpoint (check --tokenizer-type / --tokenizer-model)",
          t, V);
    }
  }
}

std::vector<float> KvCacheDecoder::forward(std::span<const int32_t> tokens, bool all_logits) {
  check_tokens(tokens);
  const ModelConfig& cfg = params_.config();
  const auto T = static_cast<int64_t>(tokens.size());
  const int64_t C = cfg.hidden_size;
  std::vector<int64_t> pos(static_cast<size_t>(T));
  for (int64_t i = 0; i < T; ++i) pos[static_cast<size_t>(i)] = position_ + i;
  Tensor x(tracker_, kWorkspace, {T, C}, false);  // the residual stream of the new tokens
  embedding_forward(x.data(), tokens.data(), params_.embedding()->value.data(), T, C,
                    cfg.vocab_size);
  for (int64_t l = 0; l < cfg.num_layers; ++l) layer_forward(l, x.data(), pos);
  position_ += T;
  const int64_t rows = all_logits ? T : 1;
  return head_forward(x.data() + (T - rows) * C, rows);
}

// x (T, C) in place: the layer of StageEngine::layer_forward, with this call's K/V written into
// the cache rows of their positions and the attention over every cached position.
void KvCacheDecoder::layer_forward(int64_t l, float* x, const std::vector<int64_t>& pos) {
  const ModelConfig& cfg = params_.config();
  LayerParams& w = params_.layer(l);
  const auto T = static_cast<int64_t>(pos.size());
  const int64_t C = cfg.hidden_size, F = cfg.ffn_size();
  const int64_t NH = cfg.num_attention_heads, KVH = cfg.kv_heads(), HS = cfg.head_dim();
  const int64_t Q = NH * HS, KV = KVH * HS;
  const float eps = static_cast<float>(cfg.norm_epsilon);

  Tensor rstd(tracker_, kWorkspace, {T}, false), ln(tracker_, kWorkspace, {T, C}, false);
  rmsnorm_forward(ln.data(), rstd.data(), x, w.input_norm->value.data(), T, C, eps);
  Tensor q(tracker_, kWorkspace, {T, Q}, false);
  matmul_forward(q.data(), ln.data(), w.wq->value.data(), T, C, Q);
  rope_forward(q.data(), pos.data(), inv_freq_.data(), T, NH, HS);
  float* k = k_cache_[static_cast<size_t>(l)].data() + position_ * KV;
  float* v = v_cache_[static_cast<size_t>(l)].data() + position_ * KV;
  matmul_forward(k, ln.data(), w.wk->value.data(), T, C, KV);
  matmul_forward(v, ln.data(), w.wv->value.data(), T, C, KV);
  rope_forward(k, pos.data(), inv_freq_.data(), T, KVH, HS);
  // One segment of every cached position: the queries are its last T.
  const AttnSegment seg{k_cache_[static_cast<size_t>(l)].data(),
                        v_cache_[static_cast<size_t>(l)].data(),
                        nullptr,
                        nullptr,
                        position_ + T,
                        KV};
  Tensor att(tracker_, kWorkspace, {T, Q}, false), lse(tracker_, kWorkspace, {T, NH}, false);
  Tensor ws(tracker_, kWorkspace, {attention_workspace_floats({T, NH, KVH, HS})}, false);
  attention_forward(att.data(), Q, lse.data(), q.data(), Q, std::span<const AttnSegment>(&seg, 1),
                    {T, NH, KVH, HS}, ws.data());
  gemm_f32(false, true, T, C, Q, 1.0f, att.data(), Q, w.wo->value.data(), Q, 1.0f, x, C);

  rmsnorm_forward(ln.data(), rstd.data(), x, w.post_norm->value.data(), T, C, eps);
  Tensor gate(tracker_, kWorkspace, {T, F}, false), up(tracker_, kWorkspace, {T, F}, false);
  matmul_forward(gate.data(), ln.data(), w.wgate->value.data(), T, C, F);
  matmul_forward(up.data(), ln.data(), w.wup->value.data(), T, C, F);
  swiglu_forward(gate.data(), gate.data(), up.data(), T, F);  // elementwise: may run in place
  gemm_f32(false, true, T, C, F, 1.0f, gate.data(), F, w.wdown->value.data(), F, 1.0f, x, C);
}

// logits (rows, V) = rmsnorm(x) · headᵀ
std::vector<float> KvCacheDecoder::head_forward(const float* x, int64_t rows) {
  const ModelConfig& cfg = params_.config();
  const int64_t C = cfg.hidden_size, V = cfg.vocab_size;
  Tensor ln(tracker_, kWorkspace, {rows, C}, false), rstd(tracker_, kWorkspace, {rows}, false);
  rmsnorm_forward(ln.data(), rstd.data(), x, params_.final_norm()->value.data(), rows, C,
                  static_cast<float>(cfg.norm_epsilon));
  std::vector<float> logits(static_cast<size_t>(rows * V));
  matmul_forward(logits.data(), ln.data(), params_.lm_head()->value.data(), rows, C, V);
  return logits;
}

}  // namespace infinipipe
