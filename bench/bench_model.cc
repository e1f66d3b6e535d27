// Model FLOP/s of a training step and of attention, next to oneDNN's sgemm in the same run.
// Prints a markdown table. Usage: bench_model [--quick]  (quick: fewer repetitions, 2K context)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "model/attention.h"
#include "model/engine.h"
#include "model/matmul.h"

using namespace infinipipe;

namespace {

double best_seconds(int reps, const std::function<void()>& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s);
  }
  return best;
}

// oneDNN sgemm GFLOP/s on a shape like the model's MLP matmul (tokens × ffn × hidden).
double sgemm_gflops(int reps) {
  const int64_t M = 4096, N = 1536, K = 512;
  std::vector<float> a(M * K, 0.5f), b(K * N, 0.25f), c(M * N);
  gemm_f32(false, false, M, N, K, 1.0f, a.data(), K, b.data(), N, 0.0f, c.data(), N);
  double s = best_seconds(reps, [&] {
    gemm_f32(false, false, M, N, K, 1.0f, a.data(), K, b.data(), N, 0.0f, c.data(), N);
  });
  return 2.0 * M * N * K / s * 1e-9;
}

// Megatron-LM's num_floating_point_operations for one sequence of s tokens (fwd + bwd, no
// recompute; attention counted over the full s×s matrix, as Megatron does).
double megatron_flops(const ModelConfig& c, double s) {
  const double h = c.hidden_size, l = c.num_layers;
  const double q_ratio = double(c.num_attention_heads * c.head_dim()) / h;
  const double kv_ratio = double(c.kv_heads()) / double(c.num_attention_heads);
  return 12.0 * s * l * h * h *
         ((1.0 + kv_ratio + s / h) * q_ratio + double(c.ffn_size()) / h * 1.5 +
          double(c.vocab_size) / (2.0 * l * h));
}

struct StepResult {
  int64_t peak_activation_bytes;
  double seconds;
  double gflops_megatron;
  double gflops_causal;  // attention counted over the causal half only
};

StepResult step_bench(const ModelConfig& cfg, int64_t tokens, int reps) {
  MemoryTracker tr;
  StageEngine e(cfg, StageRange::whole(cfg), 1, tr);
  std::mt19937 rng(1);
  ChunkInput chunk;
  chunk.chunk_id = 0;
  SliceInput s;
  s.seq_id = 0;
  s.offset = 0;
  s.len = tokens;
  for (int64_t i = 0; i < tokens; ++i) s.tokens.push_back(int32_t(rng() % cfg.vocab_size));
  chunk.slices.push_back(s);
  auto step = [&] {
    e.forward(chunk, nullptr, 0, 1.0 / double(tokens - 1));
    e.backward(0, nullptr);
  };
  step();  // warm-up
  double sec = best_seconds(reps, step);
  const double mf = megatron_flops(cfg, double(tokens));
  const double attn_full = 12.0 * double(tokens) * double(tokens) * cfg.num_layers *
                           double(cfg.num_attention_heads * cfg.head_dim());
  return {tr.peak(MemCategory::mem_activations), sec, mf / sec * 1e-9,
          (mf - attn_full / 2) / sec * 1e-9};
}

// Attention fwd + bwd of one T-token slice; flops counted over the causal half: 2 matmuls
// forward and 5 backward (FlashAttention-2's convention, 2.5× the forward).
double attention_gflops(int64_t T, int64_t NH, int64_t HS, int reps, double* seconds) {
  std::mt19937 rng(2);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t C = NH * HS;
  std::vector<float> q(T * C), k(T * C), v(T * C), dout(T * C), out(T * C), lse(T * NH), dq(T * C),
      dk(T * C), dv(T * C);
  for (auto* x : {&q, &k, &v, &dout})
    for (float& f : *x) f = nd(rng);
  AttnDims d{T, NH, NH, HS};
  std::vector<float> ws(attention_workspace_floats(d));
  AttnSegment seg{k.data(), v.data(), dk.data(), dv.data(), T, C};
  auto run = [&] {
    attention_forward(out.data(), C, lse.data(), q.data(), C, {&seg, 1}, d, ws.data());
    attention_backward(dq.data(), C, {&seg, 1}, dout.data(), C, q.data(), C, out.data(), C,
                       lse.data(), d, ws.data());
  };
  run();
  *seconds = best_seconds(reps, run);
  const double causal_pairs = double(T) * double(T + 1) / 2.0;
  const double flops = 7.0 * 2.0 * causal_pairs * double(HS) * double(NH);
  return flops / *seconds * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int reps = quick ? 1 : 3;
  ModelConfig cfg;
  cfg.num_layers = 8;
  cfg.hidden_size = 512;
  cfg.num_attention_heads = 8;
  cfg.vocab_size = 257;
  cfg.seq_length = 8192;
  const int64_t tokens = quick ? 1024 : 4096, attn_T = quick ? 2048 : 8192;
  std::printf(
      "model: %lld layers, hidden %lld, %lld heads, ffn %lld, vocab %lld; %lld tokens "
      "per chunk; attention at %lld context\n\n",
      (long long)cfg.num_layers, (long long)cfg.hidden_size, (long long)cfg.num_attention_heads,
      (long long)cfg.ffn_size(), (long long)cfg.vocab_size, (long long)tokens, (long long)attn_T);
  std::printf(
      "| threads | sgemm GFLOP/s | step s | step GFLOP/s (Megatron) | ratio | step "
      "GFLOP/s (causal) | ratio | attn fwd+bwd s | attn GFLOP/s | ratio |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  const int max_threads = omp_get_max_threads();
  int64_t peak = 0;
  for (int threads : {1, 2}) {
    if (threads > max_threads) break;
    omp_set_num_threads(threads);
    const double sg = sgemm_gflops(reps + 2);
    const StepResult st = step_bench(cfg, tokens, reps);
    double attn_s = 0;
    const double at = attention_gflops(attn_T, 8, 64, reps, &attn_s);
    std::printf("| %d | %.1f | %.3f | %.1f | %.2f | %.1f | %.2f | %.3f | %.1f | %.2f |\n", threads,
                sg, st.seconds, st.gflops_megatron, st.gflops_megatron / sg, st.gflops_causal,
                st.gflops_causal / sg, attn_s, at, at / sg);
    std::fflush(stdout);
    peak = st.peak_activation_bytes;
  }
  const StashBreakdown b = StageEngine::stash_breakdown(cfg);
  std::printf(
      "\nstash per token per layer: %lld B (recomputed: %lld B), K/V %lld B; measured peak "
      "activations of the step: %.1f MiB (stash alone by the formula: %.1f MiB)\n",
      (long long)b.full_per_token_layer, (long long)b.recompute_per_token_layer,
      (long long)b.kv_per_token_layer, double(peak) / (1 << 20),
      double(tokens * (cfg.num_layers * (b.full_per_token_layer + b.kv_per_token_layer) +
                       b.head_per_token + b.index_per_token)) /
          (1 << 20));
  return 0;
}
