// `infinipipe generate`: text from a checkpoint on one process, the new tokens streamed as they
// are picked. The weights load whatever pp × dp wrote them; the tokenizer is the one saved with
// the checkpoint unless --tokenizer-type names another.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "ckpt/checkpoint_model.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/input_file.h"
#include "model/generate.h"
#include "tokenize/tokenizer.h"
#include "tokenize/tokenizer_saved.h"
#include "tokenize/tokenizer_types.h"

namespace infinipipe::cli {

namespace {

struct GenerateArgs {
  std::string load;
  std::string prompt;
  std::string prompt_file;
  std::string tokenizer_type;
  std::string tokenizer_model;
  int64_t seed = 1234;
  bool no_kv_cache = false;
  GenerateOptions options;
};

std::string prompt_text(const GenerateArgs& a) {
  if (a.prompt.empty() == a.prompt_file.empty()) {
    fail_config("generate needs exactly one of --prompt TEXT or --prompt-file FILE");
  }
  if (a.prompt_file.empty()) return a.prompt;
  return input_file_read(a.prompt_file, input_kind::kPrompt, InputLinks::follow, "--prompt-file");
}

std::unique_ptr<tokenize::Tokenizer> tokenizer_for(const GenerateArgs& a,
                                                   const CheckpointModel& m) {
  if (a.tokenizer_type.empty() && !a.tokenizer_model.empty()) {
    fail_config("--tokenizer-model {} needs --tokenizer-type too (the kind of tokenizer it is)",
                a.tokenizer_model);
  }
  std::unique_ptr<tokenize::Tokenizer> t =
      a.tokenizer_type.empty() ? tokenize::tokenizer_open_saved(m.path)
                               : tokenize::tokenizer_open(a.tokenizer_type, a.tokenizer_model);
  if (t->vocab_size() > m.config.vocab_size) {
    fail_config(
        "the {} tokenizer has {} tokens, but the model of {} only {}: it is not the tokenizer "
        "the model was trained with; name that one with --tokenizer-type / --tokenizer-model",
        t->type(), t->vocab_size(), m.path, m.config.vocab_size);
  }
  return t;
}

// Prints the continuation as it grows: the text of prompt + new tokens, less what is already
// on the screen (decoding the new tokens alone would lose SentencePiece's leading spaces).
class TextStreamer {
 public:
  TextStreamer(const tokenize::Tokenizer& tok, std::vector<int32_t> prompt)
      : tok_(tok), ids_(std::move(prompt)), shown_(tok.decode(ids_)) {}

  void push(int32_t token) {
    if (token == tok_.eos() || token == tok_.eod()) return;  // the end, not text
    ids_.push_back(token);
    const std::string text = tok_.decode(ids_);
    if (text.size() > shown_.size() && text.compare(0, shown_.size(), shown_) == 0) {
      fmt::print("{}", text.substr(shown_.size()));
      std::fflush(stdout);
      shown_ = text;
    }
  }

 private:
  const tokenize::Tokenizer& tok_;
  std::vector<int32_t> ids_;
  std::string shown_;
};

// Greedy decoding draws nothing: a sampling flag beside it would be silently ignored.
void check_no_sampling_flags_when_greedy(const CLI::App& cmd, const SamplingOptions& s) {
  if (!s.is_greedy()) return;
  const char* why = s.greedy ? "--greedy" : "--temperature 0";
  std::vector<const char*> flags{"--top-k", "--top-p", "--seed"};
  if (s.greedy) flags.push_back("--temperature");  // --temperature 0 is itself the greedy choice
  for (const char* flag : flags) {
    if (cmd.count(flag) > 0) {
      fail_config("{} only applies to sampling, and {} picks the most likely token: drop one", flag,
                  why);
    }
  }
}

void run_generate(GenerateArgs& a) {
  const std::string text = prompt_text(a);
  a.options.sampling.validate();
  if (a.options.max_new_tokens < 1) {
    fail_config("--max-new-tokens {} must be ≥ 1", a.options.max_new_tokens);
  }
  MemoryTracker tracker;
  const CheckpointModel model = checkpoint_load_model(a.load, tracker);
  const std::unique_ptr<tokenize::Tokenizer> tok = tokenizer_for(a, model);
  const std::vector<int32_t> prompt = tok->encode(text);
  const auto P = static_cast<int64_t>(prompt.size());
  if (P > generate_max_prompt_tokens(model.config)) {
    fail_config(
        "the prompt is {} tokens, but the model of {} takes {} positions "
        "(max-position-embeddings) and one must stay for a new token: shorten it to at most {} "
        "tokens",
        P, model.path, model.config.max_positions(), generate_max_prompt_tokens(model.config));
  }
  a.options.seed = static_cast<uint64_t>(a.seed);
  a.options.eos = tok->eos();
  a.options.eod = tok->eod();  // documents of --append-eod data end with it
  a.options.kv_cache = !a.no_kv_cache;
  const int64_t positions = model.config.max_positions();  // (min first: no overflow)
  KvCacheDecoder decoder(*model.params, tracker,
                         std::min(positions, P + std::min(a.options.max_new_tokens, positions)));
  fmt::print("{}", text);
  std::fflush(stdout);
  TextStreamer streamer(*tok, prompt);
  const GenerateResult r =
      generate(decoder, prompt, a.options, [&](int32_t t) { streamer.push(t); });
  const auto n = static_cast<int64_t>(r.tokens.size());
  fmt::print("\n");
  std::fflush(stdout);  // the text, then the summary, even when both go to one pipe
  fmt::print(stderr,
             "generate: {} new tokens, stopped at {}; prompt of {} tokens in {:.3f} s, then {:.1f} "
             "tokens/s ({}, tokenizer {}, {})\n",
             n, generate_stop_name(r.stop), P, r.prompt_seconds,
             r.decode_seconds > 0 ? static_cast<double>(n - 1) / r.decode_seconds : 0.0,
             a.options.kv_cache ? "K/V cache" : "no K/V cache: every token reruns the prefix",
             tok->type(), model.path);
}

}  // namespace

void add_generate_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "generate", "Generate text from a checkpoint, streaming it (one process, K/V cache)");
  auto a = std::make_shared<GenerateArgs>();
  SamplingOptions& s = a->options.sampling;
  cmd->add_option("--load", a->load, "checkpoint directory written by `train --save`")->required();
  cmd->add_option("--prompt", a->prompt, "the text to continue");
  cmd->add_option("--prompt-file", a->prompt_file, "a file holding the text to continue");
  cmd->add_option("--max-new-tokens", a->options.max_new_tokens,
                  "most tokens to generate (fewer at the end-of-sequence token or the model's "
                  "max positions)")
      ->capture_default_str();
  cmd->add_option("--temperature", s.temperature,
                  "divides the logits before sampling; 0 picks the most likely token")
      ->capture_default_str();
  cmd->add_option("--top-k", s.top_k, "sample among the k most likely tokens (0: all)")
      ->capture_default_str();
  cmd->add_option("--top-p", s.top_p,
                  "sample among the most likely tokens whose probabilities sum to p, in (0, 1]")
      ->capture_default_str();
  cmd->add_option("--seed", a->seed, "seed of the sampling")->capture_default_str();
  cmd->add_flag("--greedy", s.greedy, "always pick the most likely token (no sampling)");
  cmd->add_option("--tokenizer-type", a->tokenizer_type,
                  fmt::format("{} (default: the one saved with the checkpoint, else {})",
                              tokenize::tokenizer_types_text<tokenize::TokenizerTypesText::names>(),
                              tokenize::kDefaultTokenizerType));
  cmd->add_option(
      "--tokenizer-model", a->tokenizer_model,
      fmt::format("the file of --tokenizer-type: {}",
                  tokenize::tokenizer_types_text<tokenize::TokenizerTypesText::model_file>()));
  cmd->add_flag("--no-kv-cache", a->no_kv_cache,
                "rerun the whole sequence for every new token (as Hugging Face's "
                "use_cache=False): the same text, slower; to measure what the cache saves");
  cmd->callback([a, cmd] {
    check_no_sampling_flags_when_greedy(*cmd, a->options.sampling);
    run_generate(*a);
  });
}

}  // namespace infinipipe::cli
