// Internal to the engine: what it keeps per chunk between forward and backward.
#pragma once

#include <cstdint>
#include <vector>

#include "model/engine.h"
#include "model/memory.h"

namespace infinipipe {

inline constexpr auto kAct = MemCategory::mem_activations;
inline constexpr auto kWs = MemCategory::mem_workspace;

// What a layer keeps for backward. K/V and their grads are also what other slices use.
struct LayerStash {
  Tensor x;           // (N,C) layer input: always kept
  Tensor rstd1, ln1;  // (N), (N,C)
  Tensor q;           // (N,NH*HS) after RoPE
  Tensor k, v;        // (N,KVH*HS), k after RoPE
  Tensor att, lse;    // (N,NH*HS), (N,NH)
  Tensor xmid;        // (N,C) residual after attention
  Tensor rstd2, ln2;  // (N), (N,C)
  Tensor gate, up;    // (N,F)
  Tensor dk, dv;      // (N,KVH*HS) grads from this and later slices, made in backward

  int64_t bytes() const {
    int64_t b = 0;
    for (const Tensor* t :
         {&x, &rstd1, &ln1, &q, &k, &v, &att, &lse, &xmid, &rstd2, &ln2, &gate, &up, &dk, &dv}) {
      b += t->bytes();
    }
    return b;
  }
};

struct StageEngine::Chunk {
  int32_t id = 0;
  int64_t N = 0;
  std::vector<SliceInput> slices;  // tokens cleared: only the metadata is kept
  std::vector<int64_t> row0;       // first row of each slice
  std::vector<int64_t> pos;        // (N) position of each token within its sequence
  std::vector<int32_t> tokens;     // (N) input tokens (first stage)
  int64_t index_bytes = 0;         // pos + tokens, charged to the tracker as activations
  int64_t recompute_layers = 0;
  bool keep_kv = false;  // a slice is not final: later slices attend to its K/V
  std::vector<LayerStash> layers;
  Tensor dx_head;  // (N,C) last stage: grad of the last layer's output, from the loss
};

// Transient buffers of a chunk's backward, shared by its layers.
struct BackwardWorkspace {
  Tensor h, dh;     // (N,F)
  Tensor dln;       // (N,C)
  Tensor datt, dq;  // (N,NH*HS)
  Tensor attn;      // attention tiles
};

}  // namespace infinipipe
