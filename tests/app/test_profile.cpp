// `agtrace run --profile` and `--threads`: the profile's structure and call counts (never
// its times, which vary), and reports that do not depend on the thread count.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "support/command.hpp"

using namespace agtrace::test;
using nlohmann::json;

namespace {

// Three steps of a repeat block: every op and node runs three times, the backward pass
// once per step, inside statement 3.
const char* kLoop = R"json({"name": "prof", "tensors": {
  "x": {"shape": [4, 3], "requires_grad": true, "init": {"linspace": [-1, 1]}},
  "W": {"shape": [3, 2], "requires_grad": true, "init": {"linspace": [0, 1]}}},
  "program": [{"repeat": 3, "body": [
    "h = (x @ W).tanh()",
    "y = h * 2.0",
    "s = y.sum()",
    "s.backward()",
    "x.grad = None"]}]})json";

const json* find_op(const json& ops, const std::string& phase, const std::string& name) {
  for (const json& o : ops)
    if (o["phase"] == phase && o["name"] == name) return &o;
  return nullptr;
}

std::string write(const std::string& body) {
  const std::string path = temp_dir() + "/prof.json";
  spit(path, body);
  return path;
}

}  // namespace

TEST_CASE("profile: calls per op kind, node and statement, forward and backward apart", "[cli][profile]") {
  auto r = run_agtrace("run " + write(kLoop) + " --format json --profile");
  REQUIRE(r.status == 0);
  const json rep = json::parse(r.out);
  REQUIRE(rep.contains("profile"));
  const json& p = rep["profile"];
  CHECK(p["total_seconds"].get<double>() >= 0.0);
  struct Want {
    const char* phase;
    const char* name;
    int calls;
  } wants[] = {{"forward", "matmul", 3},       {"forward", "tanh", 3},          {"forward", "mul", 3},
               {"forward", "sum", 3},          {"forward", "backward", 3},      {"backward", "MmBackward0", 3},
               {"backward", "TanhBackward0", 3}, {"backward", "MulBackward0", 3}, {"backward", "SumBackward0", 3},
               {"backward", "AccumulateGrad", 6}};
  for (const Want& w : wants) {
    INFO(w.phase << " " << w.name);
    const json* o = find_op(p["ops"], w.phase, w.name);
    REQUIRE(o != nullptr);
    CHECK((*o)["calls"] == w.calls);
    CHECK((*o)["self_seconds"].get<double>() <= (*o)["total_seconds"].get<double>() + 1e-9);
  }
  // Forward rows come before backward rows.
  bool seen_backward = false;
  for (const json& o : p["ops"]) {
    if (o["phase"] == "backward") seen_backward = true;
    else CHECK_FALSE(seen_backward);
  }
  REQUIRE(p["statements"].size() == 5);
  for (int i = 0; i < 5; ++i) {
    const json& s = p["statements"][i];
    CHECK(s["index"] == i);
    CHECK(s["source"] == rep["statements"][i]["source"]);
    CHECK(s["forward"]["calls"] == 3);
    if (i == 3) CHECK(s["backward"]["calls"] == 3);
    else CHECK(s["backward"].is_null());
  }
}

TEST_CASE("profile: absent unless asked - the text report gets the table", "[cli][profile]") {
  const std::string path = write(kLoop);
  auto plain = run_agtrace("run " + path + " --format json");
  REQUIRE(plain.status == 0);
  CHECK_FALSE(json::parse(plain.out).contains("profile"));
  auto text = run_agtrace("run " + path + " --profile --color never");
  REQUIRE(text.status == 0);
  CHECK(text.out.find("Profile (wall time") != std::string::npos);
  for (const char* part : {"forward ops", "backward nodes", "statements, forward", "statements, backward",
                           "MmBackward0", "[3] s.backward()"})
    CHECK(text.out.find(part) != std::string::npos);
  CHECK(run_shell("AGTRACE_THREADS=x " + std::string(AGTRACE_BINARY) + " run " + path).status == 2);
  CHECK(run_agtrace("run " + path + " --threads 0").status == 2);
}

TEST_CASE("threads: the same thread count gives the same report, by option or environment", "[cli][threads]") {
  // Large enough that BLAS splits the product between threads.
  const std::string path = write(R"json({"name": "thr", "tensors": {
    "a": {"shape": [200, 300], "requires_grad": true, "init": {"uniform": [-1, 1]}},
    "b": {"shape": [300, 250], "requires_grad": true, "init": {"uniform": [-1, 1]}}},
    "program": ["c = (a @ b).tanh()", "c.sum().backward()"]})json");
  auto two = run_agtrace("run " + path + " --format json --values --threads 2");
  auto again = run_agtrace("run " + path + " --format json --values --threads 2");
  auto env = run_shell("AGTRACE_THREADS=2 " + std::string(AGTRACE_BINARY) + " run " + path + " --format json --values");
  auto one = run_agtrace("run " + path + " --format json --threads 1");
  auto plain = run_agtrace("run " + path + " --format json");
  REQUIRE(two.status == 0);
  CHECK(two.out == again.out);
  CHECK(two.out == env.out);
  CHECK(one.out == plain.out);  // the default is one thread
}
