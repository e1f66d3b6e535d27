// The corpus the Trainer tests train on: synthetic "github"-like documents of at most
// seq_length tokens, from seed 5, written as the Megatron dataset PREFIX.bin / PREFIX.idx.
#pragma once

#include <cstdint>
#include <string>

#include "data/synth.h"

namespace infinipipe::testing {

inline void synth_corpus_write_small(const std::string& prefix, int64_t num_documents,
                                     int64_t seq_length = 256) {
  data::SynthOptions so;
  so.distribution = "github";
  so.num_documents = num_documents;
  so.seq_length = seq_length;
  so.seed = 5;
  so.output = prefix;
  data::synth_corpus_write(so);
}

}  // namespace infinipipe::testing
