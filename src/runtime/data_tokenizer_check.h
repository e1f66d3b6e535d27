// Data `data prepare` wrote names its tokenizer (data/prepared_tokenizer.h): it must be the
// run's. One check for `infinipipe train` and the PyTorch trainer, so both refuse the same data
// with the same message.
#pragma once

#include <string>
#include <vector>

#include "core/config.h"

namespace infinipipe::runtime {

// ConfigError, naming both tokenizers, when a prefix's record names another tokenizer than the
// run's (run_tokenizer); the run's tokenizer is opened only when a prefix has a record.
void data_tokenizer_check(const TrainingConfig& tc, const std::vector<std::string>& prefixes);

}  // namespace infinipipe::runtime
