// Small string helpers used to make error messages helpful.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace infinipipe {

// Levenshtein edit distance, for "did you mean" suggestions; any distance above `limit` is
// returned as limit + 1, found in O(limit × length) (a hostile key may be long).
int edit_distance(std::string_view a, std::string_view b, int limit = 1 << 20);

// The candidate closest to `word`, or "" when none is plausibly what was meant.
std::string nearest_word(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace infinipipe
