#include "runtime/checkpoint_meta.h"

#include "core/error.h"
#include "data/hf_tokenizer.h"
#include "data/tokenizer.h"
#include "data/tokenizer_saved.h"

namespace infinipipe::runtime {

CheckpointTokenizer checkpoint_tokenizer(const Config& cfg) {
  const TrainingConfig& tc = cfg.training;
  const auto tokenizer = data::tokenizer_open(tc.tokenizer_type, tc.tokenizer_model);
  if (tokenizer->vocab_size() > cfg.model.vocab_size) {
    fail_config(
        "--tokenizer-type {} has {} tokens, more than the model's --vocab-size {}; raise "
        "--vocab-size to at least {} or use the tokenizer the data was prepared with",
        tc.tokenizer_type, tokenizer->vocab_size(), cfg.model.vocab_size, tokenizer->vocab_size());
  }
  CheckpointTokenizer out;
  out.tokenizer_config = data::tokenizer_saved_config(*tokenizer, cfg.model.max_positions());
  // The files it was read from, copied into every checkpoint so the folder is self-contained.
  if (data::tokenizer_type_has_model(tc.tokenizer_type)) out.model_file = tc.tokenizer_model;
  if (data::tokenizer_type_has_json(tc.tokenizer_type)) {
    out.json_file = data::hf_tokenizer_source(*tokenizer).tokenizer_json;
  }
  out.bos = tokenizer->bos();
  out.eos = tokenizer->eos();
  out.eod = tokenizer->eod();
  return out;
}

CheckpointMeta checkpoint_meta(const Config& cfg, const std::string& config_yaml,
                               const CheckpointTokenizer& tokenizer, int64_t iteration,
                               int64_t consumed_samples, const nlohmann::json& delay_state) {
  CheckpointMeta meta;
  meta.iteration = iteration;
  meta.consumed_samples = consumed_samples;
  meta.model = cfg.model;
  // Training draws no random numbers: the data order is the sampler's seeded shuffle, fully
  // determined by (seed, consumed samples, the outlier delay's documents), and the
  // initialisation only by the seed.
  meta.rng = {{"generator", "none"},
              {"data_order_seed", cfg.training.seed},
              {"consumed_samples", consumed_samples}};
  // With --outlier-delay the position also holds the documents drawn but not trained yet.
  if (cfg.parallel.outlier_delay) meta.rng["outlier_delay"] = delay_state;
  meta.config = {{"format", "yaml"}, {"yaml", config_yaml}};
  meta.tokenizer = tokenizer;
  return meta;
}

}  // namespace infinipipe::runtime
