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
