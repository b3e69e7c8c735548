// The event timeline (issue #4): every storage allocation and free, save and release,
// version bump, with the statement and phase where it happened.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "interp/run_helpers.hpp"

using agtrace::test::run_text;

TEST_CASE("events: allocations, frees, saves, releases and version bumps, each at its statement", "[events]") {
  auto r = run_text(R"JSON({"name": "t", "tensors": {
      "x": {"shape": [2, 3], "requires_grad": true, "init": {"linspace": [-1, 1]}}},
    "program": ["h = x * 1", "e = h.exp()", "s = e.sum()", "h.add_(1)", "s.backward()", "del e"]})JSON");
  REQUIRE(r.errors.empty());
  // Every storage the accountant knows was announced once as an alloc, and freed once at most.
  std::map<int64_t, int> allocs, frees;
  for (const auto& e : r.events) {
    if (e.kind == "alloc") allocs[e.storage_id]++;
    if (e.kind == "free") frees[e.storage_id]++;
  }
  CHECK(allocs.size() == r.storages.size());
  for (const auto& s : r.storages) {
    CHECK(allocs[s.id] == 1);
    CHECK(frees[s.id] == (s.freed ? 1 : 0));
  }
  // exp saves its result at statement 1; backward (statement 4) releases it.
  bool saved = false, released = false, bumped = false, backward_alloc = false;
  for (const auto& e : r.events) {
    if (e.kind == "save" && e.what == "ExpBackward0._saved_result") {
      saved = true;
      CHECK(e.statement == 1);
      CHECK(e.bytes == 24);
    }
    if (e.kind == "release" && e.statement == 4) released = true;
    if (e.kind == "version_bump") {
      bumped = true;
      CHECK(e.statement == 3);
      CHECK(e.version == 1);
    }
    if (e.kind == "alloc" && e.statement == 4) {
      CHECK(e.in_backward);
      // Inside a node: its id; the implicit ones_like gradient comes before any node runs.
      CHECK((e.op == "ones_like" ? e.node_id == -1 : e.node_id >= 0));
      backward_alloc = true;
    }
  }
  CHECK(saved);
  CHECK(released);
  CHECK(bumped);
  CHECK(backward_alloc);
  // Events are in the order they happened: statements never go backwards.
  int last = -1;
  for (const auto& e : r.events) {
    if (e.statement < 0) continue;
    CHECK(e.statement >= last);
    last = e.statement;
  }
}
