#include <catch2/catch.hpp>

#include "util/slot_registry.hpp"

namespace {
struct Obj {
  int id = 0;
  size_t registry_slot = 0;
};
std::vector<int> ids(agtrace::SlotRegistry<Obj>& r) {
  std::vector<int> out;
  for (Obj* o : r.live()) out.push_back(o->id);
  return out;
}
}  // namespace

TEST_CASE("slot registry: removal in any order keeps creation order", "[util][registry]") {
  agtrace::SlotRegistry<Obj> r;
  std::vector<Obj> objs(6);
  for (int i = 0; i < 6; ++i) {
    objs[i].id = i;
    r.add(&objs[i]);
  }
  r.remove(&objs[1]);
  r.remove(&objs[4]);
  CHECK(ids(r) == std::vector<int>{0, 2, 3, 5});
  // Slots were renumbered by the read: removing after it still finds the right entry.
  r.remove(&objs[5]);
  r.remove(&objs[0]);
  CHECK(ids(r) == std::vector<int>{2, 3});
  Obj late{9};
  r.add(&late);
  r.remove(&objs[3]);
  CHECK(ids(r) == std::vector<int>{2, 9});
  // Removing something not registered (or twice) changes nothing.
  r.remove(&objs[3]);
  CHECK(ids(r) == std::vector<int>{2, 9});
}
