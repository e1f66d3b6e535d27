// Properties over random chunks: packing never costs more than running apart, slicing a
// sequence finer never makes it cheaper, memory terms add up over slices.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "cost/cost_model.h"

namespace infinipipe::cost {
namespace {

ModelConfig gqa_model() {
  ModelConfig m;
  m.num_layers = 16;
  m.hidden_size = 1024;
  m.num_attention_heads = 16;
  m.num_query_groups = 4;
  m.vocab_size = 32000;
  m.seq_length = 1 << 17;
  return m;
}

std::vector<SliceShape> random_chunk(std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> n(1, 6), len(1, 8192), ctx(0, 65536);
  std::bernoulli_distribution has_ctx(0.3), final_slice(0.7);
  std::vector<SliceShape> chunk;
  for (int64_t i = n(rng); i > 0; --i)
    chunk.push_back({has_ctx(rng) ? ctx(rng) : 0, len(rng), final_slice(rng)});
  return chunk;
}

TEST(CostProperties, PackingNeverCostsMore) {
  std::mt19937_64 rng(42);
  for (const char* dev : {"cpu", "h100-80gb"})
    for (int64_t u : {1, 4}) {
      CostModel cm(gqa_model(), device_preset(dev, true), u, true);
      for (int trial = 0; trial < 200; ++trial) {
        const StageShape st{.num_layers = 1 + trial % 4,
                            .has_embedding = trial % 5 == 0,
                            .has_lm_head = trial % 7 == 0};
        std::vector<SliceShape> a = random_chunk(rng), b = random_chunk(rng), ab = a;
        ab.insert(ab.end(), b.begin(), b.end());
        EXPECT_LT(cm.forward_time(ab, st), cm.forward_time(a, st) + cm.forward_time(b, st));
        EXPECT_LT(cm.backward_time(ab, st), cm.backward_time(a, st) + cm.backward_time(b, st));
        EXPECT_GT(cm.forward_time(ab, st),
                  std::max(cm.forward_time(a, st), cm.forward_time(b, st)));
        // Memory is linear in tokens: the packed chunk holds what the parts hold together.
        for (int64_t r : {int64_t{0}, st.num_layers}) {
          EXPECT_NEAR(cm.activation_bytes(ab, st, r),
                      cm.activation_bytes(a, st, r) + cm.activation_bytes(b, st, r), 2);
        }
        EXPECT_NEAR(cm.kv_keep_bytes(ab, st), cm.kv_keep_bytes(a, st) + cm.kv_keep_bytes(b, st), 2);
        EXPECT_NEAR(cm.dkv_buffer_bytes(ab, st),
                    cm.dkv_buffer_bytes(a, st) + cm.dkv_buffer_bytes(b, st), 2);
        EXPECT_NEAR(cm.flops(ab, st.num_layers, true),
                    cm.flops(a, st.num_layers, true) + cm.flops(b, st.num_layers, true),
                    1e-9 * cm.flops(ab, st.num_layers, true));
      }
    }
}

TEST(CostProperties, FinerSlicingNeverCheaper) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> len(2048, 131072);
  CostModel cm(gqa_model(), device_preset("a800-80gb", true), 1, true);
  const StageShape st{.num_layers = 2};
  for (int trial = 0; trial < 100; ++trial) {
    const int64_t n = len(rng);
    double prev = 0;
    for (int64_t k = 1; k <= 32; k *= 2) {
      // k slices as equal as possible, each attending to everything before it.
      double total = 0, flops = 0;
      int64_t off = 0;
      for (int64_t i = 0; i < k; ++i) {
        const int64_t l = n / k + (i < n % k ? 1 : 0);
        const std::vector<SliceShape> s = {{off, l, i == k - 1}};
        total += cm.forward_time(s, st);
        flops += cm.flops(s, st.num_layers, false);
        off += l;
      }
      const std::vector<SliceShape> whole = {{0, n}};
      EXPECT_NEAR(flops, cm.flops(whole, st.num_layers, false), 1e-9 * flops);
      EXPECT_GT(total, prev) << n << " " << k;
      prev = total;
    }
  }
}

}  // namespace
}  // namespace infinipipe::cost
