// The SentencePiece-based rows of tokenizer_types.h, behind the SentencePiece library.
#pragma once

#include <memory>
#include <string>

#include "tokenize/tokenizer.h"

namespace infinipipe::tokenize {

// Each opens --tokenizer-model FILE.model.
// SentencePieceTokenizer (Megatron's): the model's pieces plus <CLS> <SEP> <EOD> <MASK> and the
// pad/bos/eos pieces as special tokens, added at the end of the vocabulary when missing and
// matched literally in the text; end of document <EOD>.
std::unique_ptr<Tokenizer> sentencepiece_megatron_open(const std::string& model_path);
// GPTSentencePieceTokenizer: the model as it is; end of document eos.
std::unique_ptr<Tokenizer> sentencepiece_plain_open(const std::string& model_path);
// Llama2Tokenizer: the model as it is, bos before every document; end of document eos.
std::unique_ptr<Tokenizer> sentencepiece_llama2_open(const std::string& model_path);

// A transformers Llama folder (tokenizer_class LlamaTokenizer or LlamaTokenizerFast) without a
// tokenizer.json (which HuggingFaceTokenizer reads) holds a Llama2Tokenizer's tokenizer.model.
bool sentencepiece_llama2_detect(const SavedFolder& folder);

}  // namespace infinipipe::tokenize
