// `infinipipe data prepare`: JSON lines (Megatron preprocess_data's input, one object per line
// with a text field) -> a Megatron indexed dataset of byte tokens (dtype uint16).
#pragma once

#include <cstdint>
#include <string>

namespace infinipipe::data {

struct PrepareOptions {
  std::string input;   // FILE.jsonl
  std::string output;  // PREFIX: writes PREFIX.bin and PREFIX.idx
  std::string json_key = "text";
  bool append_eod = false;  // end every document with the end-of-document token 256
};

struct PrepareSummary {
  int64_t documents = 0;
  int64_t tokens = 0;
  int64_t skipped_blank_lines = 0;
  int64_t skipped_empty_documents = 0;  // empty text and no --append-eod: nothing to train on
};

// Throws Error naming the input line for invalid JSON, a missing key or a non-string value;
// on any error no output files are left behind.
PrepareSummary prepare_jsonl(const PrepareOptions& options);

}  // namespace infinipipe::data
