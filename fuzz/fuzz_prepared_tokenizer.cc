// A dataset's PREFIX.tokenizer_info.json (written by `data prepare`, read by `train` and the
// PyTorch trainer): prepared_tokenizer_check against the byte tokenizer must accept it or end
// in one infinipipe error, whatever the file holds.
#include <string>

#include "fuzz_common.h"
#include "tokenize/prepared_tokenizer.h"
#include "tokenize/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace infinipipe;
  static const std::string prefix = fuzz::fuzz_scratch_path("prepared");
  static const auto bytes = tokenize::tokenizer_open("ByteTokenizer", "");
  fuzz::fuzz_write_file(tokenize::prepared_tokenizer_path(prefix), data, size);
  try {
    tokenize::prepared_tokenizer_check(prefix, *bytes);
  } catch (const Error&) {
  }
  return 0;
}
