// The regular expressions of tokenizer.json (Split pre-tokenizers, Replace normalizers and
// decoders) on PCRE2, in UTF mode with Unicode properties for \p{L}, \s, \w and case folding.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace infinipipe::tokenize {

class HfRegex {
 public:
  // ConfigError naming `where` when PCRE2 refuses the pattern. `literal`: match the pattern
  // text as it is (tokenizer.json's {"String": ...} patterns).
  HfRegex(const std::string& pattern, bool literal, const std::string& where);
  ~HfRegex();
  HfRegex(const HfRegex&) = delete;
  HfRegex& operator=(const HfRegex&) = delete;

  // The [begin, end) byte ranges of the leftmost non-overlapping matches in `text` (valid UTF-8);
  // after an empty match the search resumes one character further, as Rust's find_iter does.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;
  // `text` with every match replaced by `with`.
  std::string replace_all(std::string_view text, std::string_view with) const;

 private:
  struct Code;
  std::unique_ptr<Code> code_;
};

}  // namespace infinipipe::tokenize
