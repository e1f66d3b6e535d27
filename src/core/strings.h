// Small string helpers for messages: suggestions for mistyped words, durations.
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

// Seconds as a person reads an ETA: "12s", "4m12s", "1h03m"; "?" when not finite or negative.
std::string format_duration(double seconds);

}  // namespace infinipipe
