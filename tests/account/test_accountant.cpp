// The accountant: events in, lifetimes, live bytes, peaks and totals out.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "account/accountant.hpp"
#include "interp/run_helpers.hpp"

using namespace agtrace;

namespace {
Event alloc(int64_t id, int64_t bytes) {
  Event e;
  e.kind = Event::Kind::Alloc;
  e.storage_id = id;
  e.bytes = bytes;
  e.what = "op";
  return e;
}
Event free_(int64_t id, int64_t bytes) {
  Event e;
  e.kind = Event::Kind::Free;
  e.storage_id = id;
  e.bytes = bytes;
  return e;
}
Event save(int64_t saved, int64_t storage, int64_t bytes) {
  Event e;
  e.kind = Event::Kind::Save;
  e.saved_id = saved;
  e.storage_id = storage;
  e.bytes = bytes;
  e.what = "N._saved_self";
  return e;
}
}  // namespace

TEST_CASE("peaks include temporaries freed inside the statement", "[account]") {
  Accountant acc;
  run_position().statement = 0;
  acc.begin_statement(0);
  acc.on_event(alloc(0, 100));
  acc.on_event(alloc(1, 50));
  acc.on_event(free_(1, 50));
  acc.end_statement(0, false, {{0, {"name y"}, "named"}});
  RunResult r;
  acc.finish(r);
  CHECK(r.memory.peak_bytes == 150);
  CHECK(r.memory.peak_statement == 0);
  REQUIRE(r.memory_by_statement.size() == 1);
  CHECK(r.memory_by_statement[0].live_after == 100);
  CHECK(r.memory_by_statement[0].peak_inside == 150);
  CHECK(r.memory_by_statement[0].temporary_bytes == 50);
  CHECK(r.memory_by_statement[0].categories.at("named") == 100);
  REQUIRE(r.storages.size() == 2);
  CHECK_FALSE(r.storages[0].freed);
  CHECK(r.storages[1].freed);
  CHECK(r.storages[1].freed_at == 0);
}

TEST_CASE("saved bytes exclude statements that raised - unique bytes count storages once", "[account]") {
  Accountant acc;
  run_position().statement = 0;
  acc.begin_statement(0);
  acc.on_event(alloc(0, 24));
  acc.on_event(save(0, 0, 24));
  acc.on_event(save(1, 0, 24));  // the same storage saved twice (x * x)
  acc.end_statement(0, false, {});
  run_position().statement = 1;
  acc.begin_statement(1);
  acc.on_event(alloc(1, 8));
  acc.on_event(save(2, 1, 8));
  acc.end_statement(1, true, {});  // raised: its save does not count
  RunResult r;
  acc.finish(r);
  CHECK(r.memory.saved_bytes == 48);
  CHECK(r.memory.saved_unique_bytes == 24);
  CHECK(r.saved.size() == 3);
}

TEST_CASE("graph-only bytes are the peak over statement ends", "[account]") {
  Accountant acc;
  run_position().statement = 0;
  acc.begin_statement(0);
  acc.on_event(alloc(0, 32));
  acc.end_statement(0, false, {{0, {"saved N._saved_self"}, "graph_only"}});
  run_position().statement = 1;
  acc.begin_statement(1);
  acc.on_event(free_(0, 32));
  acc.end_statement(1, false, {{0, {}, ""}});  // nothing holds storage 0 any more
  RunResult r;
  acc.finish(r);
  CHECK(r.memory.graph_only_bytes == 32);
  CHECK(r.memory.graph_only_statement == 0);
}

TEST_CASE("a run's figures for y = x * 2.0, worked out by hand", "[account]") {
  // x: f32[2,3] 24 B. `x * 2.0` wraps 2.0 as an f64[] tensor (8 B), saved by MulBackward0
  // because x requires grad; the result y is 24 B. Live after: 24 + 8 + 24 = 56.
  auto r = agtrace::test::run_text(
      R"JSON({"name": "t", "tensors": {"x": {"shape": [2, 3], "requires_grad": true}}, "program": ["y = x * 2.0", "del y"]})JSON");
  CHECK(r.memory.saved_bytes == 8);
  CHECK(r.memory.saved_unique_bytes == 8);
  REQUIRE(r.memory_by_statement.size() == 3);  // setup, [0], [1]
  CHECK(r.memory_by_statement[1].live_after == 56);
  CHECK(r.memory_by_statement[1].categories.at("leaf_param") == 24);
  CHECK(r.memory_by_statement[1].categories.at("named") == 24);
  CHECK(r.memory_by_statement[1].categories.at("graph_only") == 8);
  // del y drops the last reference to the graph: result and saved scalar are freed.
  CHECK(r.memory_by_statement[2].live_after == 24);
  CHECK(r.memory.peak_bytes == 56);
  CHECK(r.memory.graph_only_bytes == 8);
}

TEST_CASE("seed walk: saved 104 B, graph-only 32 B (the relu output)", "[account]") {
  auto r = agtrace::test::run_text(R"JSON({"name": "t", "tensors": {
      "x": {"shape": [2, 3], "requires_grad": true}, "W": {"shape": [3, 4], "requires_grad": true},
      "b": {"shape": [4], "requires_grad": true}}, "program": ["y = (x @ W + b).relu().sum()"]})JSON");
  CHECK(r.memory.saved_bytes == 24 + 48 + 32);
  CHECK(r.memory.saved_unique_bytes == 104);
  CHECK(r.memory.graph_only_bytes == 32);
  // Inside the statement: leaves 88, mm out 32, add out 32 at once = 152.
  CHECK(r.memory.peak_bytes == 152);
}

// ---- issue #4: allocator model ----
TEST_CASE("allocator model rounds each allocation up to 512-byte blocks", "[account]") {
  CHECK(allocator_block_bytes(0) == 0);
  CHECK(allocator_block_bytes(1) == 512);
  CHECK(allocator_block_bytes(512) == 512);
  CHECK(allocator_block_bytes(513) == 1024);
  Accountant acc;
  run_position().statement = 0;
  acc.begin_statement(0);
  acc.on_event(alloc(0, 4));      // 512
  acc.on_event(alloc(1, 1000));   // 1024
  acc.on_event(alloc(2, 0));      // nothing
  acc.end_statement(0, false, {});
  RunResult r;
  acc.finish(r);
  CHECK(r.memory.peak_bytes == 1004);
  CHECK(r.account.model.peak_bytes == 1536);
  CHECK(r.account.model.live_at_end == 1536);
}


TEST_CASE("saved categories: found by id among the ids appended, refused out of order", "[account]") {
  SavedCategories c;
  for (int64_t id = 0; id < 300; id += 3) c.append(id, id % 2 ? "graph_only" : "named");
  CHECK(c.size() == 100);
  for (int64_t id = 0; id < 302; ++id) {
    INFO("id " << id);
    const char* got = c.find(id);
    if (id % 3 != 0 || id >= 300) {
      CHECK(got == nullptr);
    } else {
      REQUIRE(got != nullptr);
      CHECK(std::string(got) == (id % 2 ? "graph_only" : "named"));
    }
  }
  CHECK_THROWS_AS(c.append(297, "named"), std::logic_error);
}

TEST_CASE("a saved value's category in the report is its storage's at the last statement end it was held", "[account]") {
  // y = x * x saves x (a leaf requiring grad) twice; z = (x * 2).exp() saves the wrapped 2,
  // bound to no name (graph_only), and exp's result, which is z's storage (named).
  auto r = agtrace::test::run_text(R"JSON({"name": "t", "tensors": {"x": {"shape": [3], "requires_grad": true}},
    "program": ["y = x * x", "z = (x * 2).exp()"]})JSON");
  REQUIRE(r.saved.size() == 4);
  for (const auto& s : r.saved) {
    INFO(s.what);
    const char* c = r.account.saved_category.find(s.id);
    REQUIRE(c != nullptr);
    const char* want = s.saved_at == 0 ? "leaf_param" : s.what == "ExpBackward0._saved_result" ? "named" : "graph_only";
    CHECK(std::string(c) == want);
  }
}

TEST_CASE("the categories' alphabetical order lists each category once, ascending", "[account]") {
  // end_statement appends a statement's categories in this order without comparing names.
  std::vector<std::string> names;
  std::set<int> seen;
  for (HolderCategory c : kCategoriesByName) {
    names.push_back(kHolderCategories[c]);
    seen.insert(c);
  }
  CHECK(seen.size() == static_cast<size_t>(kCategoryCount));
  CHECK(std::is_sorted(names.begin(), names.end()));
  CHECK(std::adjacent_find(names.begin(), names.end()) == names.end());
}

TEST_CASE("a storage's holders are every holder seen at statement ends, in first-seen order", "[account]") {
  // The record keeps the current holder list while it is the only one seen, and merges
  // when another appears (interned lists: a merge that forgot the earlier holders, or
  // repeated one, fails here).
  Accountant acc;
  run_position().statement = 0;
  acc.begin_statement(0);
  acc.on_event(alloc(0, 64));
  acc.end_statement(0, false, {{0, {"name a"}, "named"}});
  acc.begin_statement(1);
  acc.end_statement(1, false, {{0, {"name b", "name a"}, "named"}});
  acc.begin_statement(2);
  acc.end_statement(2, false, {{0, {"saved N._saved_self"}, "graph_only"}});
  acc.begin_statement(3);
  acc.end_statement(3, false, {{0, {"name a"}, "named"}});
  RunResult r;
  acc.finish(r);
  REQUIRE(r.storages.size() == 1);
  CHECK(r.storages[0].holders ==
        std::vector<InternedString>{"name a", "name b", "saved N._saved_self"});
  CHECK(r.account.holders_at_end.at(0) == std::vector<InternedString>{"name a"});
  // One record per statement end, each with that statement's category.
  REQUIRE(r.memory_by_statement.size() == 4);
  CHECK(r.memory_by_statement.at(2).categories.at("graph_only") == 64);
  CHECK(r.memory_by_statement.at(2).categories.count("named") == 0);
  CHECK_THROWS_AS(r.memory_by_statement.at(4), std::out_of_range);
}

TEST_CASE("category bytes refuse a name that is not a holder category", "[account]") {
  CategoryBytes c;
  CHECK_THROWS_AS(c.add("activations", 1), std::logic_error);
  c.add("other", 3);
  c.add("grad", 1);
  std::vector<std::string> listed;
  for (const auto& [name, bytes] : c) listed.push_back(std::string(name) + "=" + std::to_string(bytes));
  CHECK(listed == std::vector<std::string>{"grad=1", "other=3"});
  CHECK(c.size() == 2);
  CHECK(c.count("named") == 0);
  CHECK_THROWS_AS(c.at("named"), std::out_of_range);
}
