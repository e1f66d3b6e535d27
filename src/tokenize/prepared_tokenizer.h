// Which tokenizer wrote a dataset: `data prepare` leaves PREFIX.tokenizer_info.json beside
// PREFIX.bin/.idx, and `train` refuses data whose tokenizer type or vocabulary differs from the
// run's, naming both, instead of training on ids that mean other text. Data prepared elsewhere
// (Megatron-LM's preprocess_data.py) has no such file and is taken as it is.
#pragma once

#include <string>

#include "tokenize/tokenizer.h"

namespace infinipipe::tokenize {

std::string prepared_tokenizer_path(const std::string& prefix);  // PREFIX.tokenizer_info.json

// Writes it (atomically): type, model path as given, vocabulary size, the ids of end of
// document, bos and eos, and whether documents end with the end-of-document id.
void prepared_tokenizer_write(const std::string& prefix, const Tokenizer& tokenizer,
                              const std::string& model_path, bool append_eod);

// ConfigError when PREFIX's file names another tokenizer type or vocabulary size than
// `tokenizer`'s (a damaged file too); nothing when there is no file.
void prepared_tokenizer_check(const std::string& prefix, const Tokenizer& tokenizer);
// Whether PREFIX has the file (so a check is worth opening the run's tokenizer for).
bool prepared_tokenizer_exists(const std::string& prefix);

}  // namespace infinipipe::tokenize
