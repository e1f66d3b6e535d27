#include "runtime/data_tokenizer_check.h"

#include <memory>

#include "runtime/checkpoint_meta.h"
#include "tokenize/prepared_tokenizer.h"
#include "tokenize/tokenizer.h"

namespace infinipipe::runtime {

void data_tokenizer_check(const TrainingConfig& tc, const std::vector<std::string>& prefixes) {
  std::unique_ptr<tokenize::Tokenizer> tokenizer;
  for (const std::string& prefix : prefixes) {
    if (!tokenize::prepared_tokenizer_exists(prefix)) continue;
    if (!tokenizer) {
      const RunTokenizer run = run_tokenizer(tc);
      tokenizer = tokenize::tokenizer_open(run.type, run.model);
    }
    tokenize::prepared_tokenizer_check(prefix, *tokenizer);
  }
}

}  // namespace infinipipe::runtime
