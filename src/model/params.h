// Parameters of a range of layers of the Llama model, named by Hugging Face global names so a
// checkpoint loads under any pipeline layout. The model knows nothing of pipelines: a stage is
// just a range of layers, with or without the embedding and the LM head.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "model/memory.h"

namespace infinipipe {

// Which part of the model an engine holds. Layers are [first_layer, first_layer + num_layers).
struct StageRange {
  int64_t first_layer = 0;
  int64_t num_layers = 0;
  bool has_embedding = true;  // embeds tokens (the first stage)
  bool has_lm_head = true;    // final norm + LM head + loss (the last stage)

  static StageRange whole(const ModelConfig& cfg) { return {0, cfg.num_layers, true, true}; }
};

// A flat view of one parameter, for the optimizer and checkpoints. Shapes are HF's [out, in].
struct ParamRef {
  std::string name;
  std::vector<int64_t> shape;
  float* value;
  float* grad;
  int64_t numel;
};

// One parameter with its gradient.
struct Param {
  std::string name;
  Tensor value;  // mem_weights
  Tensor grad;   // mem_grads
};

// Pointers into ModelParams for one decoder layer.
struct LayerParams {
  int64_t layer;  // global index
  Param* input_norm;
  Param* wq;  // [NH*HS, C]
  Param* wk;  // [KVH*HS, C]
  Param* wv;  // [KVH*HS, C]
  Param* wo;  // [C, NH*HS]
  Param* post_norm;
  Param* wgate;  // [F, C]
  Param* wup;    // [F, C]
  Param* wdown;  // [C, F]
};

class ModelParams {
 public:
  // Initialises every parameter from (seed, global name) only: normal(0, init-method-std) for
  // matrices (std / sqrt(2 num_layers) for o_proj and down_proj, as Megatron-LM), ones for norms. With tied embeddings a last stage without the embedding holds its own copy
  // of model.embed_tokens.weight (same values); the runtime must sum its gradient with the
  // first stage's.
  ModelParams(const ModelConfig& cfg, StageRange range, uint64_t seed, MemoryTracker& tracker);
  ModelParams(const ModelParams&) = delete;
  ModelParams& operator=(const ModelParams&) = delete;

  const ModelConfig& config() const { return cfg_; }
  const StageRange& range() const { return range_; }

  // Every parameter of this range, in a fixed order (embedding, layers, final norm, head).
  std::vector<ParamRef> params();
  void grads_zero();
  int64_t numel() const;

  Param* embedding() { return embedding_; }    // null without embedding (or tied copy)
  Param* final_norm() { return final_norm_; }  // null without LM head
  Param* lm_head() { return lm_head_; }        // the embedding when tied
  LayerParams& layer(int64_t local) { return layers_.at(static_cast<size_t>(local)); }
  int64_t num_layers() const { return range_.num_layers; }

 private:
  Param* add(const std::string& name, std::vector<int64_t> shape, bool is_norm);

  ModelConfig cfg_;
  StageRange range_;
  uint64_t seed_;
  MemoryTracker& tracker_;
  std::vector<std::unique_ptr<Param>> all_;
  std::vector<LayerParams> layers_;
  Param* embedding_ = nullptr;
  Param* final_norm_ = nullptr;
  Param* lm_head_ = nullptr;
};

// Deterministic init of one parameter from (seed, name): what ModelParams uses, normal(0, std).
void param_init(float* out, int64_t numel, uint64_t seed, const std::string& name, bool is_norm,
                double std);
// The std ModelParams gives parameter `name` (a matrix) of model `cfg`.
double param_init_std(const ModelConfig& cfg, const std::string& name);

}  // namespace infinipipe
