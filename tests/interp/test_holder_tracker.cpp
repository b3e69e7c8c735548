// The holder index (issue #6): what holds each storage, kept from changes, must be what a
// walk over every live tensor and node finds at every statement end.
#include <catch2/catch.hpp>

#include <filesystem>
#include <random>

#include "interp/holder_tracker.hpp"
#include "interp/run_helpers.hpp"
#include "tensor/kernels.hpp"

using namespace agtrace;

TEST_CASE("the holder index agrees with the full scan at every statement of every bundled scenario",
          "[interp][holders]") {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(std::string(AGTRACE_SOURCE_DIR) + "/scenarios"))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 20);
  for (const auto& f : files) {
    INFO(f.filename().string());
    auto sc = load_scenario_file(f.string());
    RunOptions o;
    o.verify_holders = true;  // throws std::logic_error naming the storage on a disagreement
    CHECK_NOTHROW(run_scenario(*sc, o));
  }
}

TEST_CASE("the holder index follows .grad, del, rebinding, tuples and requires_grad_", "[interp][holders]") {
  // Each statement changes what holds some storage in a way no allocation announces
  // ("v = x" adds the name v to x's storage; x's .grad stays "grad of x").
  auto sc = load_scenario_text(R"JSON({"name": "t",
      "tensors": {"x": {"shape": [3], "requires_grad": true}, "z": {"shape": [3]}},
      "program": [
        "y = (x * x).sum()",
        "y.backward(retain_graph=True)",
        "g = x.grad",
        "x.grad = None",
        "x.grad = z * 2.0",
        "v = x",
        "del x.grad",
        "pair = (z, y)",
        "del y",
        "z.requires_grad_()",
        "w = pair",
        "del pair",
        "w[1].backward()",
        "x = z"
      ]})JSON",
                               "<test>");
  RunOptions o;
  o.verify_holders = true;
  RunResult r;
  REQUIRE_NOTHROW(r = run_scenario(*sc, o));
  CHECK(r.errors.empty());
  // After "x.grad = None" the first gradient is held by the name g only: a named leaf that
  // does not require grad.
  CHECK(r.memory_by_statement.at(4).categories.at("leaf_input") == 2 * 12);  // z and g
}

TEST_CASE("the holder tracker reports only storages whose holders changed", "[interp][holders]") {
  reset_run_state();
  HolderTracker tracker([](int64_t id) { return "t" + std::to_string(id); }, nullptr);
  tracker.attach();
  Tensor a = kernels::full({2}, 1.0, DType::Float32, false);
  Tensor b = kernels::full({2}, 2.0, DType::Float32, false);
  std::map<std::string, Value> names{{"a", Value::tensor(a)}};

  auto first = tracker.commit(names);
  REQUIRE(first.size() == 2);
  CHECK(first[0].storage_id == a->storage->id);
  CHECK(first[0].holders == std::vector<InternedString>{"name a"});
  CHECK(std::string(first[0].category) == "leaf_input");
  CHECK(first[1].holders == std::vector<InternedString>{"unnamed tensor"});
  CHECK(std::string(first[1].category) == "other");

  CHECK(tracker.commit(names).empty());  // nothing changed

  // A .grad assigned without telling the tracker is invisible to it; told, it is a change.
  a->grad = b;
  CHECK(tracker.commit(names).empty());
  notify_grad_changed(*a);
  auto told = tracker.commit(names);
  REQUIRE(told.size() == 1);
  CHECK(told[0].storage_id == b->storage->id);
  CHECK(told[0].holders == std::vector<InternedString>{"grad of t" + std::to_string(a->id)});
  CHECK(std::string(told[0].category) == "grad");

  // Dropping the name and the tensor object: nothing holds a's storage any more.
  const int64_t a_storage = a->storage->id;
  names.clear();
  a.reset();
  auto gone = tracker.commit(names);
  bool saw_a = false;
  for (const auto& c : gone)
    if (c.storage_id == a_storage) {
      saw_a = true;
      CHECK(c.holders.empty());
      CHECK(c.category == nullptr);
    }
  CHECK(saw_a);
  CHECK(tracker.state().category.count(a_storage) == 0);
  tracker.detach();
}

TEST_CASE("the holder index looks names up again after one leaves the scope", "[interp][holders]") {
  // `del a` then `b = ...` leaves as many names as before, in another order: the labels kept
  // from the last statement end (issue #6) must not be reused for them. The checkpoint's
  // body ends with {c, w, x} and the scope after it is {b, c, x} again: as many names,
  // others, with no name bound by the statement that follows (`print`).
  auto sc = load_scenario_text(R"JSON({"name": "t",
      "tensors": {"x": {"shape": [3], "requires_grad": true}},
      "program": ["a = x * 2", "del a", "b = x * 3", "c = b * 1",
                  {"checkpoint": ["w = x * 2", "del b", "c = w * 1"], "inputs": ["x"], "outputs": ["c"]},
                  "print(c)"]})JSON",
                               "<test>");
  RunOptions o;
  o.verify_holders = true;
  RunResult r;
  REQUIRE_NOTHROW(r = run_scenario(*sc, o));
  bool b_named = false;
  for (const auto& s : r.storages)
    for (const auto& h : s.holders) b_named = b_named || h == "name b";
  CHECK(b_named);
}

TEST_CASE("the holder tracker recycles the states of dead tensors and keeps a dying .grad holder right", "[interp][holders]") {
  // A tensor's state lives in a slot reused once the tensor is dead and committed: a long
  // run of short-lived tensors needs a handful of slots, not one per tensor ever made. A
  // tensor that dies before the commit that would have looked at it, with a .grad, takes
  // its holders with it.
  reset_run_state();
  HolderTracker tracker([](int64_t id) { return "t" + std::to_string(id); }, nullptr);
  tracker.attach();
  Tensor kept = kernels::full({2}, 1.0, DType::Float32, false);
  std::map<std::string, Value> names{{"k", Value::tensor(kept)}};
  tracker.commit(names);
  for (int i = 0; i < 500; ++i) {
    Tensor temp = kernels::full({2}, static_cast<double>(i), DType::Float32, false);
    if (i % 2) temp.reset();  // dies before the commit
    tracker.commit(names);
  }
  CHECK(tracker.tensor_slots() <= 4);

  Tensor with_grad = kernels::full({2}, 3.0, DType::Float32, false);
  with_grad->grad = kernels::full({2}, 4.0, DType::Float32, false);
  notify_grad_changed(*with_grad);
  const int64_t grad_storage = with_grad->grad->storage->id;
  tracker.commit(names);
  CHECK(tracker.state().holders.at(grad_storage) ==
        std::vector<std::string>{"grad of t" + std::to_string(with_grad->id)});
  Tensor grad = with_grad->grad;  // the .grad tensor outlives its owner
  with_grad.reset();
  const auto changes = tracker.commit(names);
  const HolderScan now = tracker.state();
  CHECK(now.holders.at(grad_storage) == std::vector<std::string>{"unnamed tensor"});
  CHECK(now.category.at(grad_storage) == "other");
  CHECK(now.holders.at(kept->storage->id) == std::vector<std::string>{"name k"});
  tracker.detach();
}

TEST_CASE("dirty storage ids come out sorted and without repeats, short and long lists alike", "[interp][holders]") {
  // The commit hands changes to the accountant in storage id order; long lists (a backward
  // pass) go through a bit per id, short ones through an insertion sort, sparse ones std::sort.
  std::mt19937_64 rng(7);
  for (size_t n : {0, 1, 2, 5, 32, 33, 100, 1000, 10000}) {
    for (int64_t spread : {int64_t{3}, int64_t{64}, int64_t{1} << 20}) {
      std::vector<int64_t> ids;
      for (size_t i = 0; i < n; ++i) ids.push_back(100 + static_cast<int64_t>(rng() % static_cast<uint64_t>(spread)));
      std::vector<int64_t> expected = ids;
      std::sort(expected.begin(), expected.end());
      expected.erase(std::unique(expected.begin(), expected.end()), expected.end());
      INFO("n " << n << " spread " << spread);
      sort_unique_ids(ids);
      CHECK(ids == expected);
    }
  }
  std::vector<int64_t> edge{64, 0, 127, 63, 128, 0, 191, 64};  // word edges, repeats
  sort_unique_ids(edge);
  CHECK(edge == std::vector<int64_t>{0, 63, 64, 127, 128, 191});
}

TEST_CASE("a declared leaf keeps its name when bound again: grad of x, not of the new name", "[interp][holders]") {
  // PyTorch: after `h = x` the gradient is x.grad; the report names it so, while the storage
  // lists both names.
  auto sc = load_scenario_text(R"JSON({"name": "t",
      "tensors": {"x": {"shape": [2], "requires_grad": true, "init": "ones"}},
      "program": ["h = x", "y = (h * 2).relu()", "t = y", "z = t.sum()", "z.backward()"]})JSON",
                               "<test>");
  RunOptions o;
  o.verify_holders = true;
  const RunResult r = run_scenario(*sc, o);
  REQUIRE(r.errors.empty());
  std::vector<std::string> all;
  for (const StorageLifetime& s : r.storages)
    for (const InternedString& h : s.holders) all.push_back(h.str());
  auto has = [&](const std::string& h) { return std::find(all.begin(), all.end(), h) != all.end(); };
  CHECK(has("grad of x"));
  CHECK_FALSE(has("grad of h"));
  CHECK(has("name x"));
  CHECK(has("name h"));
  // A non-leaf takes its latest name, as before.
  CHECK(has("name t"));
}
