// "Did you mean ...?" for unknown names: the closest candidate by edit distance.
#pragma once
#include <string>
#include <vector>

namespace agtrace {

size_t edit_distance(const std::string& a, const std::string& b);
// The closest candidate within a distance of max(1, len/3), or "" when none is close.
std::string suggest(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace agtrace
