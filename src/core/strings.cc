#include "core/strings.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include <fmt/format.h>

namespace infinipipe {

int edit_distance(std::string_view a, std::string_view b, int limit) {
  limit = std::max(limit, 0);
  const int64_t la = static_cast<int64_t>(a.size()), lb = static_cast<int64_t>(b.size());
  if (std::abs(la - lb) > limit) return limit + 1;
  // Only cells within `limit` of the diagonal can stay within the limit (Ukkonen's band).
  const int far = limit + 1;
  std::vector<int> prev(b.size() + 1, far), cur(b.size() + 1, far);
  for (int64_t j = 0; j <= std::min<int64_t>(lb, limit); ++j) prev[j] = static_cast<int>(j);
  for (int64_t i = 1; i <= la; ++i) {
    const int64_t lo = std::max<int64_t>(1, i - limit), hi = std::min<int64_t>(lb, i + limit);
    std::fill(cur.begin(), cur.end(), far);
    if (i <= limit) cur[0] = static_cast<int>(i);
    int row_min = cur[0];
    for (int64_t j = lo; j <= hi; ++j) {
      const int sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub, far});
      row_min = std::min(row_min, cur[j]);
    }
    if (row_min > limit) return limit + 1;
    std::swap(prev, cur);
  }
  return std::min(prev[b.size()], far);
}

std::string nearest_word(std::string_view word, const std::vector<std::string>& candidates) {
  // Accept up to a third of the word mistyped (at least 2 edits), else the hint would mislead.
  const int allowed = static_cast<int>(std::max<size_t>(2, word.size() / 3));
  std::string best;
  int best_d = allowed + 1;
  for (const std::string& c : candidates) {
    const int d = edit_distance(word, c, best_d - 1);
    if (d < best_d) best_d = d, best = c;
  }
  return best;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = static_cast<int64_t>(std::llround(seconds));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

}  // namespace infinipipe
