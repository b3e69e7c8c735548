// InlineVector (lib/util/inline_vector.hpp): the holder index's per-storage list, one element
// inside, more on the heap; ordered inserts and erases as std::vector does them.
#include <catch2/catch.hpp>

#include <utility>
#include <vector>

#include "util/inline_vector.hpp"

using agtrace::InlineVector;

namespace {
std::vector<int> items(const InlineVector<int, 1>& v) { return std::vector<int>(v.begin(), v.end()); }
}  // namespace

TEST_CASE("an inline vector inserts and erases in order, inside and past its inline room", "[util][inline_vector]") {
  InlineVector<int, 1> v;
  CHECK(v.empty());
  v.push_back(5);  // inline
  CHECK(items(v) == std::vector<int>{5});
  v.insert(v.begin(), 1);  // to the heap, in front
  v.insert(v.begin() + 1, 3);
  v.push_back(9);
  v.insert(v.end() - 1, 7);
  CHECK(items(v) == std::vector<int>{1, 3, 5, 7, 9});
  CHECK(v.size() == 5);
  CHECK(v[2] == 5);
  v.erase(v.begin());
  v.erase(v.begin() + 2);
  v.erase(v.end() - 1);
  CHECK(items(v) == std::vector<int>{3, 5});

  InlineVector<int, 1> copy = v;  // on the heap: a copy of its own
  copy[0] = 4;
  CHECK(items(v) == std::vector<int>{3, 5});
  CHECK(items(copy) == std::vector<int>{4, 5});
  InlineVector<int, 1> moved = std::move(copy);
  CHECK(items(moved) == std::vector<int>{4, 5});
  CHECK(copy.empty());  // NOLINT(bugprone-use-after-move): a moved-from vector is empty
  copy.push_back(8);    // and usable
  CHECK(items(copy) == std::vector<int>{8});

  InlineVector<int, 1> one;
  one.push_back(2);
  InlineVector<int, 1> one_moved = std::move(one);  // inline: the element copied over
  CHECK(items(one_moved) == std::vector<int>{2});
  one_moved = moved;
  CHECK(items(one_moved) == std::vector<int>{4, 5});
  one_moved = InlineVector<int, 1>();
  CHECK(one_moved.empty());
  one_moved.clear();
  CHECK(one_moved.size() == 0);
  for (int i = 0; i < 4; ++i) one_moved.push_back(i);
  one_moved.truncate(2);  // as erase(begin() + 2, end())
  CHECK(items(one_moved) == std::vector<int>{0, 1});
  one_moved.truncate(5);  // past the end: unchanged
  CHECK(items(one_moved) == std::vector<int>{0, 1});
}
