#include "interp/suggest.hpp"

#include <algorithm>

namespace agtrace {

size_t edit_distance(const std::string& a, const std::string& b) {
  // Optimal string alignment: insertions, deletions, substitutions and adjacent swaps
  // ("rleu" -> "relu" is one swap).
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

std::string suggest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::max<size_t>(1, word.size() / 3) + 1;
  for (const std::string& c : candidates) {
    if (c == word) continue;
    size_t dist = edit_distance(word, c);
    if (dist < best_d || (dist == best_d && !best.empty() && c < best && dist <= std::max<size_t>(1, word.size() / 3))) {
      if (dist <= std::max<size_t>(1, word.size() / 3)) {
        best = c;
        best_d = dist;
      }
    }
  }
  return best;
}

}  // namespace agtrace
