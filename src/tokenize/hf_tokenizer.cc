#include "tokenize/hf_tokenizer.h"

#include <sys/stat.h>

#include <array>
#include <filesystem>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "core/error.h"
#include "core/input_file.h"
#include "core/json_read.h"
#include "tokenize/hf_added_tokens.h"
#include "tokenize/hf_bpe.h"
#include "tokenize/hf_json.h"
#include "tokenize/hf_pipeline.h"
#include "tokenize/hf_text.h"

namespace infinipipe::tokenize {

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

inline constexpr const char* kHfConfigFile = "tokenizer_config.json";
// Pieces up to this size are cached: longer ones rarely repeat.
inline constexpr size_t kCacheMaxPiece = 256;
inline constexpr size_t kCacheMaxEntries = 1 << 18;
inline constexpr size_t kMaxAddedTokens = 1 << 20;
inline constexpr int64_t kMaxTokenizerJsonBytes = 256ll << 20;

// Transformers' Llama tokenizers rebuild the template from add_bos_token / add_eos_token.
bool llama_class(const Json& config) {
  const auto c = config.find("tokenizer_class");
  return c != config.end() && c->is_string() &&
         (*c == "LlamaTokenizer" || *c == "LlamaTokenizerFast" || *c == "CodeLlamaTokenizer" ||
          *c == "CodeLlamaTokenizerFast");
}

// bos_token / eos_token: a string or an AddedToken object {"content": ...}; "" when absent.
std::string config_token(const Json& config, const char* key, const std::string& where) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return "";
  if (it->is_object()) return hf_string(*it, "content", where + "." + key);
  return json_string(*it, where + "." + key);
}

class HfTokenizer final : public Tokenizer {
 public:
  HfTokenizer(const Json& tj, const Json& config, const std::string& where, HfTokenizerFiles files)
      : files_(std::move(files)),
        bpe_(model_of(tj, where), where + ": model"),
        normalizer_(tj.value("normalizer", Json()), where + ": normalizer"),
        pre_tokenizer_(tj.value("pre_tokenizer", Json()), where + ": pre_tokenizer"),
        decoder_(tj.value("decoder", Json()), where + ": decoder"),
        raw_matcher_({}),
        normalized_matcher_({}) {
    added_read(tj, where);
    vocab_size_ = bpe_.max_id() + 1;
    for (const HfAddedToken& t : added_) vocab_size_ = std::max<int64_t>(vocab_size_, t.id + 1);
    tokens_.assign(size_t(vocab_size_), {});
    added_flag_.assign(size_t(vocab_size_), 0);
    for (const auto& [token, id] : bpe_.vocab()) tokens_[id] = token;
    for (const HfAddedToken& t : added_) {
      // One id, one text: decoding could not tell them apart.
      if (!tokens_[t.id].empty() && tokens_[t.id] != t.content) {
        fail_config("{}: added token {} has id {}, which is already {}", where,
                    json_brief(t.content), t.id, json_brief(tokens_[t.id]));
      }
      tokens_[t.id] = t.content;
      added_flag_[t.id] = 1;
    }
    post_read(tj.value("post_processor", Json()), where + ": post_processor");
    const std::string cwhere = files_.tokenizer_config.empty() ? where : files_.tokenizer_config;
    const std::string bos = config_token(config, "bos_token", cwhere);
    const std::string eos = config_token(config, "eos_token", cwhere);
    bos_ = special_id(bos, cwhere, "bos_token");
    eos_ = special_id(eos, cwhere, "eos_token");
    if (eos_ < 0) {
      fail_config(
          "{} names no eos_token: HuggingFaceTokenizer ends documents with it; give the "
          "folder's tokenizer_config.json (with \"eos_token\") beside tokenizer.json",
          cwhere);
    }
    template_from_config(config, cwhere);
    config_ = config;
    bos_text_ = bos;
    eos_text_ = eos;
  }

  std::vector<int32_t> encode(std::string_view input) const override {
    const std::string text = utf8_sanitize(input);
    std::vector<int32_t> ids(prefix_);
    std::vector<HfSegment> sections;
    raw_matcher_.split(text, sections);
    std::vector<HfSegment> inner;
    std::vector<HfPiece> pieces;
    for (const HfSegment& s : sections) {
      if (s.id >= 0) {
        ids.push_back(s.id);
        continue;
      }
      const bool at_start = s.text.data() == text.data();
      const std::string normalized =
          normalizer_.empty() ? std::string(s.text) : normalizer_.apply(std::string(s.text));
      inner.clear();
      normalized_matcher_.split(normalized, inner);
      for (const HfSegment& n : inner) {
        if (n.id >= 0) {
          ids.push_back(n.id);
          continue;
        }
        pieces.clear();
        pieces.push_back({std::string(n.text), at_start && n.text.data() == normalized.data()});
        pre_tokenizer_.apply(pieces);
        for (const HfPiece& p : pieces) model_encode(p.text, ids);
      }
    }
    ids.insert(ids.end(), suffix_.begin(), suffix_.end());
    return ids;
  }

  std::string decode(std::span<const int32_t> ids) const override {
    std::vector<HfDecodeToken> tokens;
    tokens.reserve(ids.size());
    for (const int32_t id : ids) {
      // Ids without a token are skipped, as Hugging Face's decode does.
      if (id < 0 || id >= vocab_size_ || tokens_[id].empty()) continue;
      tokens.push_back({tokens_[id], added_flag_[id] != 0});
    }
    return decoder_.apply(std::move(tokens));
  }

  int64_t vocab_size() const override { return vocab_size_; }
  int32_t eod() const override { return eos_; }
  int32_t bos() const override { return bos_; }
  int32_t eos() const override { return eos_; }
  const std::string& type() const override { return type_; }
  const HfTokenizerFiles& files() const { return files_; }
  Json saved_config(int64_t model_max_length) const {
    Json c = config_;
    c["infinipipe_tokenizer_type"] = type_;
    if (!c.contains("bos_token") && !bos_text_.empty()) c["bos_token"] = bos_text_;
    if (!c.contains("eos_token")) c["eos_token"] = eos_text_;
    c["model_max_length"] = model_max_length;
    return c;
  }

 private:
  static const Json& model_of(const Json& tj, const std::string& where) {
    const Json& model = hf_field(tj, "model", where);
    if (!model.is_object()) fail_config("{}: model is not an object", where);
    const auto t = model.find("type");
    // Files of old tokenizers versions omit the type of a BPE model.
    if (t != model.end() && *t != "BPE") {
      hf_unsupported("model", t->is_string() ? t->get<std::string>() : json_brief(*t),
                     where + ": model", "BPE");
    }
    return model;
  }

  void added_read(const Json& tj, const std::string& where) {
    const auto a = tj.find("added_tokens");
    if (a == tj.end() || a->is_null()) return;
    if (!a->is_array() || a->size() > kMaxAddedTokens) {
      fail_config("{}: added_tokens is not an array of at most {} tokens", where, kMaxAddedTokens);
    }
    added_.reserve(a->size());
    for (size_t i = 0; i < a->size(); i++) {
      const std::string at = fmt::format("{}: added_tokens[{}]", where, i);
      const Json& t = (*a)[i];
      if (!t.is_object()) fail_config("{}: not an object", at);
      HfAddedToken x{hf_string(t, "content", at),
                     int32_t(json_int(hf_field(t, "id", at), at + ".id", 0, kHfMaxTokenId)),
                     hf_bool_or(t, "lstrip", at, false),
                     hf_bool_or(t, "rstrip", at, false),
                     hf_bool_or(t, "single_word", at, false),
                     hf_bool_or(t, "normalized", at, false),
                     hf_bool_or(t, "special", at, false)};
      if (x.content.empty()) fail_config("{}: empty content", at);
      if (const int32_t v = bpe_.id_of(x.content); v >= 0 && v != x.id) {
        fail_config("{}: {} has id {} but the vocabulary gives it {}", at, json_brief(x.content),
                    x.id, v);
      }
      added_.push_back(std::move(x));
    }
    std::vector<const HfAddedToken*> raw, normalized;
    for (const HfAddedToken& t : added_) {
      // Special tokens are always matched in the raw text (Hugging Face ignores `normalized`
      // for them), as are tokens of a tokenizer without a normalizer.
      (t.normalized && !t.special && !normalizer_.empty() ? normalized : raw).push_back(&t);
    }
    raw_matcher_ = HfAddedMatcher(std::move(raw));
    normalized_matcher_ = HfAddedMatcher(std::move(normalized));
  }

  std::vector<int32_t> template_ids(const Json& special, const std::string& name,
                                    const std::string& where) {
    const Json& entry = hf_field(special, name.c_str(), where + ".special_tokens");
    const Json& ids = hf_field(entry, "ids", where + ".special_tokens." + name);
    if (!ids.is_array() || ids.size() > 64) {
      fail_config("{}.special_tokens.{}.ids: not an array of at most 64 ids", where, name);
    }
    std::vector<int32_t> out;
    for (const Json& id : ids) {
      out.push_back(
          int32_t(json_int(id, where + ".special_tokens." + name + ".ids", 0, vocab_size_ - 1)));
    }
    return out;
  }

  void post_read(const Json& p, const std::string& where, int depth = 0) {
    if (p.is_null()) return;
    if (depth > kHfMaxComponentDepth) fail_config("{}: Sequences nest too deep", where);
    const std::string& type = hf_type(p, where);
    if (type == "ByteLevel") return;  // it only moves offsets, which infinipipe does not use
    if (type == "Sequence") {
      const Json& list = hf_field(p, "processors", where);
      if (!list.is_array()) fail_config("{}.processors: not an array", where);
      for (size_t i = 0; i < list.size(); i++) {
        post_read(list[i], fmt::format("{}.processors[{}]", where, i), depth + 1);
      }
      return;
    }
    if (type != "TemplateProcessing") {
      hf_unsupported("post-processor", type, where, "TemplateProcessing, ByteLevel, Sequence");
    }
    const Json& single = hf_field(p, "single", where);
    const Json& special = hf_field(p, "special_tokens", where);
    if (!single.is_array() || !special.is_object()) {
      fail_config("{}: single must be an array and special_tokens an object", where);
    }
    prefix_.clear();
    suffix_.clear();
    bool seen_a = false;
    for (const Json& item : single) {
      if (item.is_object() && item.contains("SpecialToken")) {
        const auto ids =
            template_ids(special, hf_string(item["SpecialToken"], "id", where + ".single"), where);
        (seen_a ? suffix_ : prefix_)
            .insert((seen_a ? suffix_ : prefix_).end(), ids.begin(), ids.end());
      } else if (item.is_object() && item.contains("Sequence") &&
                 hf_string(item["Sequence"], "id", where + ".single") == "A" && !seen_a) {
        seen_a = true;
      } else {
        fail_config("{}.single: {} is neither a SpecialToken nor the one Sequence A", where,
                    json_brief(item));
      }
    }
    if (!seen_a) fail_config("{}.single: no Sequence A (the text)", where);
  }

  int32_t special_id(const std::string& token, const std::string& where, const char* key) {
    if (token.empty()) return -1;
    for (const HfAddedToken& t : added_) {
      if (t.content == token) return t.id;
    }
    const int32_t id = bpe_.id_of(token);
    if (id < 0) {
      fail_config("{}: {} {} is not a token of the tokenizer", where, key, json_brief(token));
    }
    return id;
  }

  // add_bos_token / add_eos_token as transformers applies them: always for its Llama classes
  // (bos by default), and for others when the config sets them.
  void template_from_config(const Json& config, const std::string& where) {
    const bool llama = llama_class(config);
    const auto b = config.find("add_bos_token");
    const auto e = config.find("add_eos_token");
    if (!llama && b == config.end() && e == config.end()) return;
    const bool add_bos = b == config.end() ? llama : json_bool(*b, where + ".add_bos_token");
    const bool add_eos = e == config.end() ? false : json_bool(*e, where + ".add_eos_token");
    if (add_bos && bos_ < 0) fail_config("{}: add_bos_token is true but no bos_token", where);
    prefix_.clear();
    suffix_.clear();
    if (add_bos) prefix_.push_back(bos_);
    if (add_eos) suffix_.push_back(eos_);
  }

  // The model's ids of one piece, through a cache of recent pieces shared by all threads
  // (`data prepare` starts its workers afresh for every block), in shards so they rarely wait.
  void model_encode(const std::string& piece, std::vector<int32_t>& out) const {
    if (piece.size() > kCacheMaxPiece) {
      bpe_.encode(piece, out);
      return;
    }
    CacheShard& shard = cache_[std::hash<std::string>{}(piece) % cache_.size()];
    {
      std::lock_guard<std::mutex> lock(shard.mutex);
      if (const auto it = shard.map.find(piece); it != shard.map.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    const size_t first = out.size();
    bpe_.encode(piece, out);
    std::lock_guard<std::mutex> lock(shard.mutex);
    if (shard.map.size() >= kCacheMaxEntries / cache_.size()) shard.map.clear();
    shard.map.emplace(piece, std::vector<int32_t>(out.begin() + first, out.end()));
  }

  struct CacheShard {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<int32_t>> map;
  };
  mutable std::array<CacheShard, 64> cache_;
  std::string type_ = "HuggingFaceTokenizer";
  HfTokenizerFiles files_;
  HfBpe bpe_;
  HfNormalizer normalizer_;
  HfPreTokenizer pre_tokenizer_;
  HfDecoder decoder_;
  std::vector<HfAddedToken> added_;
  HfAddedMatcher raw_matcher_, normalized_matcher_;
  std::vector<int32_t> prefix_, suffix_;
  std::vector<std::string> tokens_;
  std::vector<char> added_flag_;
  int64_t vocab_size_ = 0;
  int32_t bos_ = -1, eos_ = -1;
  Json config_;
  std::string bos_text_, eos_text_;
};

bool regular_file(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::unique_ptr<Tokenizer> parse(std::string_view tokenizer_json, std::string_view config_json,
                                 const std::string& where, HfTokenizerFiles files) {
  const Json tj = json_parse(tokenizer_json, where);
  if (!tj.is_object()) fail_config("{}: not a JSON object", where);
  Json config = Json::object();
  if (!config_json.empty()) {
    const std::string cwhere =
        files.tokenizer_config.empty() ? where + " (config)" : files.tokenizer_config;
    config = json_parse(config_json, cwhere);
    if (!config.is_object()) fail_config("{}: not a JSON object", cwhere);
  }
  return std::make_unique<HfTokenizer>(tj, config, where, std::move(files));
}

}  // namespace

HfTokenizerFiles hf_tokenizer_files(const std::string& path) {
  if (path.empty()) {
    fail_config(
        "--tokenizer-type HuggingFaceTokenizer needs --tokenizer-model: a folder with "
        "tokenizer.json and tokenizer_config.json, or a tokenizer.json file");
  }
  const fs::path p(path);
  std::error_code ec;
  HfTokenizerFiles f;
  fs::path config;
  if (fs::is_directory(p, ec)) {
    f.tokenizer_json = (p / kHfTokenizerJsonFile).string();
    if (!regular_file(f.tokenizer_json)) {
      fail_config("--tokenizer-model {}: the folder has no tokenizer.json", path);
    }
    config = p / kHfConfigFile;
  } else {
    f.tokenizer_json = path;
    config = p.parent_path().empty() ? fs::path(kHfConfigFile) : p.parent_path() / kHfConfigFile;
  }
  if (regular_file(config)) f.tokenizer_config = config.string();
  return f;
}

bool hf_tokenizer_detect(const SavedFolder& folder) {
  return folder.has_tokenizer_json;
}

std::unique_ptr<Tokenizer> hf_tokenizer_open(const std::string& path) {
  HfTokenizerFiles files = hf_tokenizer_files(path);
  // The largest real files are a few tens of MiB; parsed JSON takes several times its size.
  const int64_t bytes = input_file_check(files.tokenizer_json, input_kind::kTokenizerModel,
                                         InputLinks::follow, "--tokenizer-model");
  if (bytes > kMaxTokenizerJsonBytes) {
    fail_config("--tokenizer-model {}: {} is larger than {}, more than any real tokenizer.json",
                path, input_bytes_text(bytes), input_bytes_text(kMaxTokenizerJsonBytes));
  }
  const std::string tj = input_file_read(files.tokenizer_json, input_kind::kTokenizerModel,
                                         InputLinks::follow, "--tokenizer-model");
  const std::string config =
      files.tokenizer_config.empty()
          ? std::string()
          : input_file_read(files.tokenizer_config, input_kind::kTokenizerConfig,
                            InputLinks::follow, "--tokenizer-model");
  const std::string where = files.tokenizer_json;
  try {
    return parse(tj, config, where, std::move(files));
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    // A damaged file the user named is a usage error (exit 2), like the other tokenizers'.
    fail_config("{}", e.what());
  }
}

std::unique_ptr<Tokenizer> hf_tokenizer_parse(std::string_view tokenizer_json,
                                              std::string_view config_json,
                                              const std::string& where) {
  return parse(tokenizer_json, config_json, where, {});
}

HfTokenizerFiles hf_tokenizer_source(const Tokenizer& tokenizer) {
  const auto* hf = dynamic_cast<const HfTokenizer*>(&tokenizer);
  return hf == nullptr ? HfTokenizerFiles{} : hf->files();
}

Json hf_tokenizer_saved_config(const Tokenizer& tokenizer, int64_t model_max_length) {
  const auto* hf = dynamic_cast<const HfTokenizer*>(&tokenizer);
  if (hf == nullptr)
    fail("hf_tokenizer_saved_config: {} is not HuggingFaceTokenizer", tokenizer.type());
  return hf->saved_config(model_max_length);
}

}  // namespace infinipipe::tokenize
