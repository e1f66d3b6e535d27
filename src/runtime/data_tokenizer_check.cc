#include "runtime/data_tokenizer_check.h"

#include <memory>

#include "runtime/checkpoint_meta.h"
#include "tokenize/prepared_tokenizer.h"
#include "tokenize/tokenizer.h"

namespace infinipipe::runtime {

void data_tokenizer_check(const TrainingConfig& tc, const std::vector<std::string>& prefixes) {
  std::unique_ptr<data::Tokenizer> tokenizer;
  for (const std::string& prefix : prefixes) {
    if (!data::prepared_tokenizer_exists(prefix)) continue;
    if (!tokenizer) {
      const RunTokenizer run = run_tokenizer(tc);
      tokenizer = data::tokenizer_open(run.type, run.model);
    }
    data::prepared_tokenizer_check(prefix, *tokenizer);
  }
}

}  // namespace infinipipe::runtime
