// A Hugging Face tokenizer.json (HuggingFaceTokenizer): the input is the file, a NUL byte, its
// tokenizer_config.json, a NUL byte and a text (missing parts are empty). Reading must end in a
// tokenizer or a clean Error; a tokenizer must encode the text to ids within its vocabulary
// (or refuse a character it has no token for) and decode any ids without failing.
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_common.h"
#include "tokenize/hf_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace infinipipe;
  const std::string input = fuzz::fuzz_text(data, size);
  const size_t a = input.find('\0');
  const size_t b = a == std::string::npos ? a : input.find('\0', a + 1);
  const std::string_view all(input);
  const std::string_view json = all.substr(0, a);
  const std::string_view config = a == std::string::npos ? "" : all.substr(a + 1, b - a - 1);
  const std::string_view text = b == std::string::npos ? "" : all.substr(b + 1);
  std::unique_ptr<tokenize::Tokenizer> tok;
  try {
    tok = tokenize::hf_tokenizer_parse(json, config, "fuzz tokenizer.json");
  } catch (const Error&) {
    return 0;
  }
  try {
    for (const int32_t id : tok->encode(text)) {
      if (id < 0 || id >= tok->vocab_size()) std::abort();
    }
  } catch (const Error&) {
  }
  std::vector<int32_t> ids;
  for (size_t i = 0; i < text.size() && i < 64; i++) ids.push_back(int32_t(uint8_t(text[i])) * 7);
  ids.push_back(-1);
  ids.push_back(tok->eos());
  tok->decode(ids);
  return 0;
}
