#include "tokenize/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <map>
#include <utility>

#include "core/error.h"
#include "core/input_file.h"

namespace infinipipe::tokenize {

namespace {

std::unique_ptr<sentencepiece::SentencePieceProcessor> model_load(const std::string& path) {
  if (path.empty()) {
    fail_config("a SentencePiece --tokenizer-type needs --tokenizer-model FILE.model");
  }
  // The library would read a FIFO or /dev/zero until memory runs out.
  input_file_check(path, input_kind::kTokenizerModel, InputLinks::follow, "--tokenizer-model");
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = sp->Load(path);
  if (!status.ok()) {
    fail_config("--tokenizer-model {}: the SentencePiece library cannot load it ({})", path,
                status.ToString());
  }
  return sp;
}

std::vector<int32_t> ids_encode(const sentencepiece::SentencePieceProcessor& sp,
                                std::string_view text) {
  std::vector<int> ids;
  const auto status = sp.Encode(text, &ids);
  if (!status.ok()) fail("SentencePiece cannot encode a document: {}", status.ToString());
  return {ids.begin(), ids.end()};
}

// The piece of a special id, or `fallback` when the model has no such id (-1).
std::string piece_or(const sentencepiece::SentencePieceProcessor& sp, int id,
                     const char* fallback) {
  return id >= 0 && id < sp.GetPieceSize() ? sp.IdToPiece(id) : std::string(fallback);
}

// GPTSentencePieceTokenizer and Llama2Tokenizer: the model as it is.
class PlainTokenizer final : public Tokenizer {
 public:
  PlainTokenizer(std::string type, std::unique_ptr<sentencepiece::SentencePieceProcessor> sp,
                 bool bos_first)
      : type_(std::move(type)), sp_(std::move(sp)), bos_first_(bos_first) {
    if (sp_->eos_id() < 0) {
      fail_config("--tokenizer-type {}: the model has no eos piece to end documents with", type_);
    }
    if (bos_first_ && sp_->bos_id() < 0) {
      fail_config("--tokenizer-type {}: the model has no bos piece", type_);
    }
  }
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids = ids_encode(*sp_, text);
    if (bos_first_) ids.insert(ids.begin(), sp_->bos_id());
    return ids;
  }
  std::string decode(std::span<const int32_t> ids) const override {
    std::string out;
    sp_->Decode(std::vector<int>(ids.begin(), ids.end()), &out).IgnoreError();
    return out;
  }
  int64_t vocab_size() const override { return sp_->GetPieceSize(); }
  int32_t eod() const override { return sp_->eos_id(); }
  int32_t bos() const override { return sp_->bos_id(); }
  int32_t eos() const override { return sp_->eos_id(); }
  const std::string& type() const override { return type_; }

 private:
  std::string type_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  bool bos_first_;
};

// Megatron's SentencePieceTokenizer: special tokens appended to the vocabulary when the model
// lacks them, and cut out of the text before the pieces between them are encoded.
class SpecialTokenizer final : public Tokenizer {
 public:
  explicit SpecialTokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp)
      : sp_(std::move(sp)), vocab_size_(sp_->GetPieceSize()) {
    special_add("<CLS>");
    special_add("<SEP>");
    eod_ = special_add("<EOD>");
    special_add("<MASK>");
    special_add(piece_or(*sp_, sp_->pad_id(), "<PAD>"));
    bos_ = special_add(piece_or(*sp_, sp_->bos_id(), "<BOS>"));
    eos_ = special_add(piece_or(*sp_, sp_->eos_id(), "<EOS>"));
  }
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    size_t at = 0;
    for (;;) {
      // The earliest special token in the rest of the text; on a tie the first added.
      size_t best = std::string_view::npos;
      const std::pair<std::string, int32_t>* hit = nullptr;
      for (const auto& s : specials_) {
        const size_t p = text.find(s.first, at);
        if (p < best) {
          best = p;
          hit = &s;
        }
      }
      if (hit == nullptr) break;
      const auto piece = ids_encode(*sp_, text.substr(at, best - at));
      ids.insert(ids.end(), piece.begin(), piece.end());
      ids.push_back(hit->second);
      at = best + hit->first.size();
    }
    const auto rest = ids_encode(*sp_, text.substr(at));
    ids.insert(ids.end(), rest.begin(), rest.end());
    return ids;
  }
  std::string decode(std::span<const int32_t> ids) const override {
    std::string out;
    std::vector<int> run;
    auto flush = [&] {
      std::string part;
      sp_->Decode(run, &part).IgnoreError();
      out += part;
      run.clear();
    };
    for (int32_t id : ids) {
      if (id >= sp_->GetPieceSize()) {
        flush();
        for (const auto& s : specials_) {
          if (s.second == id) out += s.first;
        }
      } else {
        run.push_back(id);
      }
    }
    flush();
    return out;
  }
  int64_t vocab_size() const override { return vocab_size_; }
  int32_t eod() const override { return eod_; }
  int32_t bos() const override { return bos_; }
  int32_t eos() const override { return eos_; }
  const std::string& type() const override { return type_; }

 private:
  int32_t special_add(const std::string& piece) {
    for (const auto& s : specials_) {
      if (s.first == piece) return s.second;
    }
    int32_t id = sp_->PieceToId(piece);
    // PieceToId answers unk for a piece the model lacks.
    if (id == sp_->unk_id() && piece != sp_->IdToPiece(sp_->unk_id())) {
      id = static_cast<int32_t>(vocab_size_++);
    }
    specials_.emplace_back(piece, id);
    return id;
  }

  std::string type_ = "SentencePieceTokenizer";
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  int64_t vocab_size_;
  std::vector<std::pair<std::string, int32_t>> specials_;
  int32_t eod_ = -1, bos_ = -1, eos_ = -1;
};

}  // namespace

std::unique_ptr<Tokenizer> sentencepiece_megatron_open(const std::string& model_path) {
  return std::make_unique<SpecialTokenizer>(model_load(model_path));
}

std::unique_ptr<Tokenizer> sentencepiece_plain_open(const std::string& model_path) {
  return std::make_unique<PlainTokenizer>("GPTSentencePieceTokenizer", model_load(model_path),
                                          false);
}

std::unique_ptr<Tokenizer> sentencepiece_llama2_open(const std::string& model_path) {
  return std::make_unique<PlainTokenizer>("Llama2Tokenizer", model_load(model_path), true);
}

bool sentencepiece_llama2_detect(const SavedFolder& folder) {
  return !folder.has_tokenizer_json && (folder.tokenizer_class == "LlamaTokenizer" ||
                                        folder.tokenizer_class == "LlamaTokenizerFast");
}

}  // namespace infinipipe::tokenize
