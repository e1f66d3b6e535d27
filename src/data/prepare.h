// `infinipipe data prepare`: JSON lines (Megatron preprocess_data's input, one object per line
// with one or more text fields) -> one Megatron indexed dataset per field, tokenized by any
// tokenizer of tokenize/tokenizer_types.h, in parallel over --workers with output
// byte-identical for any count.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "tokenize/tokenizer_types.h"

namespace infinipipe::data {

struct PrepareOptions {
  std::string input;   // FILE.jsonl
  std::string output;  // PREFIX: writes PREFIX.bin and PREFIX.idx (one json key only)
  std::vector<std::string> json_keys{"text"};
  bool append_eod = false;  // end every document with the tokenizer's end-of-document token
  // Megatron's naming instead of `output`: PREFIX_{key}_document.bin/.idx for every key.
  std::string output_prefix;
  std::string tokenizer_type{tokenize::kDefaultTokenizerType};
  std::string tokenizer_model;  // the SentencePiece .model file
  int32_t workers = 1;
  std::FILE* progress = nullptr;  // a progress line goes here (rewritten on a terminal); null: none
};

struct PrepareSummary {
  std::vector<std::string> outputs;  // the dataset prefixes written, one per json key
  int64_t documents = 0;             // over every output
  int64_t tokens = 0;
  int64_t skipped_blank_lines = 0;
  int64_t skipped_empty_documents = 0;  // empty text and no --append-eod: nothing to train on
  int64_t vocab_size = 0;               // the tokenizer's; uint16 tokens below 65500, else int32
};

// The output prefix of one json key.
std::string prepare_output_prefix(const PrepareOptions& options, const std::string& key);

// Throws Error naming the input line for invalid JSON, a missing key or a non-string value (the
// first such line, whatever the worker count); on any error no output files are left behind.
PrepareSummary prepare_jsonl(const PrepareOptions& options);

}  // namespace infinipipe::data
