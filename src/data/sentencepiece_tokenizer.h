// The SentencePiece-based tokenizers of tokenizer.h, behind the SentencePiece library.
#pragma once

#include <memory>
#include <string>

#include "data/tokenizer.h"

namespace infinipipe::data {

// type: SentencePieceTokenizer | GPTSentencePieceTokenizer | Llama2Tokenizer.
std::unique_ptr<Tokenizer> sentencepiece_tokenizer_open(const std::string& type,
                                                        const std::string& model_path);

}  // namespace infinipipe::data
