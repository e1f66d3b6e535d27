// An independent, straightforward double-precision Llama (HF LlamaForCausalLM semantics) for
// the engine tests: whole sequences, full T×T attention, no blocks, no slices, no stash.
#pragma once

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/config.h"
#include "model/params.h"

namespace infinipipe::testing {

class ReferenceModel {
 public:
  ReferenceModel(const ModelConfig& cfg, ModelParams& params) : cfg_(cfg) {
    for (const ParamRef& r : params.params()) w[r.name].assign(r.value, r.value + r.numel);
  }

  std::map<std::string, std::vector<double>> w;

  // Σ over sequences of Σ −log p(token[i+1] | tokens[0..i]).
  double loss(const std::vector<std::vector<int32_t>>& seqs) const {
    double total = 0;
    for (const auto& s : seqs) total += sequence_loss(s);
    return total;
  }

 private:
  using Mat = std::vector<double>;  // row-major

  // y (T,O) = x (T,I) · W (O,I)ᵀ
  static Mat linear(const Mat& x, const Mat& W, int64_t T, int64_t I, int64_t O) {
    Mat y(static_cast<size_t>(T * O), 0.0);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t o = 0; o < O; ++o) {
        double a = 0;
        for (int64_t i = 0; i < I; ++i) a += x[t * I + i] * W[o * I + i];
        y[t * O + o] = a;
      }
    return y;
  }

  Mat rmsnorm(const Mat& x, const Mat& g, int64_t T) const {
    const int64_t C = cfg_.hidden_size;
    Mat y(x.size());
    for (int64_t t = 0; t < T; ++t) {
      double ss = 0;
      for (int64_t c = 0; c < C; ++c) ss += x[t * C + c] * x[t * C + c];
      const double r = 1.0 / std::sqrt(ss / C + cfg_.norm_epsilon);
      for (int64_t c = 0; c < C; ++c) y[t * C + c] = x[t * C + c] * r * g[c];
    }
    return y;
  }

  void rope(Mat& x, int64_t T, int64_t H) const {
    const int64_t HS = cfg_.head_dim(), half = HS / 2;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        double* v = &x[(t * H + h) * HS];
        for (int64_t i = 0; i < half; ++i) {
          const double inv = 1.0 / std::pow(cfg_.rotary_base, double(2 * i) / double(HS));
          const double a = double(t) * inv, c = std::cos(a), s = std::sin(a);
          const double x1 = v[i], x2 = v[i + half];
          v[i] = x1 * c - x2 * s;
          v[i + half] = x2 * c + x1 * s;
        }
      }
  }

  double sequence_loss(const std::vector<int32_t>& tok) const {
    const int64_t T = static_cast<int64_t>(tok.size()), C = cfg_.hidden_size;
    const int64_t NH = cfg_.num_attention_heads, KVH = cfg_.kv_heads(), HS = cfg_.head_dim();
    const int64_t F = cfg_.ffn_size(), V = cfg_.vocab_size;
    const Mat& emb = w.at("model.embed_tokens.weight");
    Mat x(static_cast<size_t>(T * C));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < C; ++c) x[t * C + c] = emb[tok[t] * C + c];
    for (int64_t l = 0; l < cfg_.num_layers; ++l) {
      auto P = [&](const char* n) -> const Mat& {
        return w.at(fmt::format("model.layers.{}.{}.weight", l, n));
      };
      Mat h = rmsnorm(x, P("input_layernorm"), T);
      Mat q = linear(h, P("self_attn.q_proj"), T, C, NH * HS);
      Mat k = linear(h, P("self_attn.k_proj"), T, C, KVH * HS);
      Mat v = linear(h, P("self_attn.v_proj"), T, C, KVH * HS);
      rope(q, T, NH);
      rope(k, T, KVH);
      Mat att(static_cast<size_t>(T * NH * HS), 0.0);
      for (int64_t hd = 0; hd < NH; ++hd) {
        const int64_t g = hd / (NH / KVH);
        Mat s(static_cast<size_t>(T * T), -INFINITY);  // the full score matrix
        for (int64_t i = 0; i < T; ++i)
          for (int64_t j = 0; j <= i; ++j) {
            double a = 0;
            for (int64_t c = 0; c < HS; ++c)
              a += q[(i * NH + hd) * HS + c] * k[(j * KVH + g) * HS + c];
            s[i * T + j] = a / std::sqrt(double(HS));
          }
        for (int64_t i = 0; i < T; ++i) {
          double mx = -INFINITY, z = 0;
          for (int64_t j = 0; j <= i; ++j) mx = std::max(mx, s[i * T + j]);
          for (int64_t j = 0; j <= i; ++j) z += std::exp(s[i * T + j] - mx);
          for (int64_t j = 0; j <= i; ++j) {
            const double p = std::exp(s[i * T + j] - mx) / z;
            for (int64_t c = 0; c < HS; ++c)
              att[(i * NH + hd) * HS + c] += p * v[(j * KVH + g) * HS + c];
          }
        }
      }
      Mat o = linear(att, P("self_attn.o_proj"), T, NH * HS, C);
      for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
      Mat h2 = rmsnorm(x, P("post_attention_layernorm"), T);
      Mat gt = linear(h2, P("mlp.gate_proj"), T, C, F);
      Mat up = linear(h2, P("mlp.up_proj"), T, C, F);
      for (size_t i = 0; i < gt.size(); ++i) gt[i] = gt[i] / (1 + std::exp(-gt[i])) * up[i];
      Mat d = linear(gt, P("mlp.down_proj"), T, F, C);
      for (size_t i = 0; i < x.size(); ++i) x[i] += d[i];
    }
    Mat hf = rmsnorm(x, w.at("model.norm.weight"), T);
    const Mat& head =
        cfg_.tie_embeddings ? w.at("model.embed_tokens.weight") : w.at("lm_head.weight");
    Mat logits = linear(hf, head, T, C, V);
    double loss = 0;
    for (int64_t t = 0; t + 1 < T; ++t) {
      double mx = -INFINITY, z = 0;
      for (int64_t v = 0; v < V; ++v) mx = std::max(mx, logits[t * V + v]);
      for (int64_t v = 0; v < V; ++v) z += std::exp(logits[t * V + v] - mx);
      loss += std::log(z) + mx - logits[t * V + tok[t + 1]];
    }
    return loss;
  }

  ModelConfig cfg_;
};

}  // namespace infinipipe::testing
