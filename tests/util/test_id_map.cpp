// IdMap (util/id_map.hpp): RunResult::nodes' table by node id, with the std::map interface
// the reports use. Checked against std::map on the same operations.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "util/id_map.hpp"

using agtrace::IdMap;

TEST_CASE("IdMap behaves as a std::map from ids for what RunResult::nodes does", "[util]") {
  IdMap<std::string> m;
  std::map<int64_t, std::string> want;
  CHECK(m.empty());
  CHECK(m.begin() == m.end());
  // Out of order, with gaps and a repeat (try_emplace leaves an existing value alone).
  for (int64_t id : {7, 2, 40, 0, 7, 13}) {
    auto [it, inserted] = m.try_emplace(id);
    auto [wit, winserted] = want.try_emplace(id);
    CHECK(inserted == winserted);
    CHECK(it->first == id);
    if (inserted) {
      it->second = "node " + std::to_string(id);
      wit->second = it->second;
    }
  }
  CHECK(m.size() == want.size());
  std::vector<std::pair<int64_t, std::string>> seen, expected(want.begin(), want.end());
  for (const auto& [id, v] : m) seen.emplace_back(id, v);
  CHECK(seen == expected);  // id order, gaps skipped
  CHECK(m.count(13) == 1);
  CHECK(m.count(3) == 0);
  CHECK(m.count(-1) == 0);
  CHECK(m.count(1000) == 0);
  CHECK(m.find(3) == m.end());
  CHECK(m.find(40)->second == "node 40");
  CHECK(m.at(2) == "node 2");
  CHECK_THROWS_AS(m.at(5), std::out_of_range);
  CHECK_THROWS_AS(m.try_emplace(-1), std::out_of_range);
  // References survive growth, as std::map's do.
  std::string& kept = m.at(7);
  for (int64_t id = 41; id < 5000; ++id) m[id] = "more";
  CHECK(&kept == &m.at(7));
  CHECK(kept == "node 7");
  const IdMap<std::string>& c = m;
  size_t n = 0;
  int64_t last = -1;
  for (auto it = c.begin(); it != c.end(); ++it, ++n) {
    CHECK(it->first > last);
    last = it->first;
  }
  CHECK(n == c.size());
  CHECK(c.find(4999) != c.end());
  m.clear();
  CHECK(m.empty());
  CHECK(m.find(7) == m.end());
}
