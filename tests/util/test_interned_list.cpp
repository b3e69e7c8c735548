// InternedList (util/interned_list.hpp): holder lists made once and compared by pointer.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "util/interned_list.hpp"

using agtrace::InternedList;
using agtrace::InternedString;

TEST_CASE("InternedList: equal lists are one list, others are not", "[util]") {
  const std::string unique = "test list " + std::to_string(reinterpret_cast<uintptr_t>(&unique));
  const size_t before = InternedList::table_size();
  const InternedList a({InternedString(unique), InternedString("saved X._saved_self")});
  CHECK(InternedList::table_size() == before + 1);
  const InternedList b(std::vector<InternedString>{InternedString(unique), InternedString("saved X._saved_self")});
  CHECK(InternedList::table_size() == before + 1);  // found, not added again
  CHECK(a == b);
  CHECK(&a.items() == &b.items());
  const InternedList reversed({InternedString("saved X._saved_self"), InternedString(unique)});
  CHECK(reversed != a);  // order matters: holders are listed in the full scan's order
  const InternedList shorter({InternedString(unique)});
  CHECK(shorter != a);
  CHECK(a.size() == 2);
  CHECK(a[0] == unique);
  CHECK(a == std::vector<InternedString>{InternedString(unique), InternedString("saved X._saved_self")});
  std::vector<std::string> texts;
  for (const InternedString& s : a) texts.push_back(s.str());
  CHECK(texts == std::vector<std::string>{unique, "saved X._saved_self"});
  const InternedList none, also_none(std::vector<InternedString>{});
  CHECK(none.empty());
  CHECK(none == also_none);
  CHECK(none.size() == 0);
  CHECK(none != a);
  CHECK(none == std::vector<InternedString>{});
}

TEST_CASE("InternedList: the thread's recent lists give the table's list, also after they rotate out",
          "[util]") {
  // More distinct lists than the recent cache keeps (8), made twice in a cycle: the second
  // round finds some in the cache and some only in the shared table; every one must be the
  // list the first round made, and lists that differ only in one item or in length stay apart.
  const std::string tag = "recent " + std::to_string(reinterpret_cast<uintptr_t>(&tag)) + " ";
  std::vector<std::vector<InternedString>> contents;
  for (int i = 0; i < 20; ++i) {
    contents.push_back({InternedString(tag + std::to_string(i))});
    contents.push_back({InternedString(tag + std::to_string(i)), InternedString(tag + "saved")});
  }
  std::vector<InternedList> first;
  for (const auto& c : contents) first.emplace_back(c);
  for (int round = 0; round < 2; ++round)
    for (size_t i = 0; i < contents.size(); ++i) {
      const InternedList again(contents[i]);
      CHECK(again == first[i]);
      CHECK(again.items() == contents[i]);
      for (size_t j = 0; j < contents.size(); ++j)
        if (j != i) CHECK(again != first[j]);
    }
  // The same list made again at once (the common case: one statement after another).
  const InternedList x(contents[3]), y(contents[3]);
  CHECK(&x.items() == &y.items());
}
