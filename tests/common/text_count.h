// How often a piece of text occurs in another, for tests of generated SVG and HTML.
#pragma once

#include <string>

namespace infinipipe::testing {

// Occurrences of `part` in `s`, overlapping ones included.
inline int text_count(const std::string& s, const std::string& part) {
  int n = 0;
  for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
  return n;
}

}  // namespace infinipipe::testing
