// Trains a SentencePiece BPE model on a text file with the library's own trainer, for
// bench/tokenizer_speed.sh (SentencePiece against tokenizer.json on the same text).
// Usage: sp_model_train TEXT_FILE OUT_PREFIX VOCAB_SIZE  (writes OUT_PREFIX.model)
#include <sentencepiece_trainer.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: sp_model_train TEXT_FILE OUT_PREFIX VOCAB_SIZE\n");
    return 2;
  }
  const auto status = sentencepiece::SentencePieceTrainer::Train(
      std::string("--input=") + argv[1] + " --model_prefix=" + argv[2] +
      " --vocab_size=" + argv[3] +
      " --model_type=bpe --hard_vocab_limit=false --byte_fallback=true --character_coverage=1.0"
      " --input_sentence_size=200000 --shuffle_input_sentence=true --num_threads=2"
      " --minloglevel=2");
  if (!status.ok()) {
    std::fprintf(stderr, "sp_model_train: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
