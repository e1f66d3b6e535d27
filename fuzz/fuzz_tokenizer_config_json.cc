// A saved folder's tokenizer_config.json (`train --save`, `checkpoint export`, a Hugging Face
// Llama folder): tokenizer_open_saved on a folder holding only that file, then the tokenizer it
// names encodes and decodes a text. Without a tokenizer.model in the folder, the SentencePiece
// types end at the missing-model error; the byte tokenizer must read back what it encoded.
#include <sys/stat.h>

#include <cerrno>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "tokenize/tokenizer_saved.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace infinipipe;
  static const std::string dir = [] {
    const std::string d = fuzz::fuzz_scratch_path("tokenizer");
    if (mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) std::abort();
    return d;
  }();
  fuzz::fuzz_write_file(dir + "/" + tokenize::kTokenizerConfigFile, data, size);
  try {
    const auto tok = tokenize::tokenizer_open_saved(dir);
    const std::string text = "saved tokenizers decode what they encode: \xc3\xbc\n";
    const std::vector<int32_t> ids = tok->encode(text);
    if (tok->type() == "ByteTokenizer" && tok->decode(ids) != text) std::abort();
  } catch (const Error&) {
  }
  return 0;
}
