// Limits and determinism: hostile sizes are refused before allocating, and the same
// scenario always gives byte-identical reports.
#include <catch2/catch.hpp>

#include <filesystem>

#include "support/command.hpp"

namespace fs = std::filesystem;
using namespace agtrace::test;

TEST_CASE("a leaf over the memory budget is bad input at its shape, before any allocation", "[cli][limits]") {
  const std::string dir = temp_dir();
  spit(dir + "/s.json", R"JSON({"name": "s", "tensors": {"x": {"shape": [100000, 100000]}}, "program": ["print(1)"]})JSON");
  auto r = run_agtrace("run " + dir + "/s.json -o " + dir + "/out.txt");
  CHECK(r.status == 2);
  CHECK(r.err.find("/tensors/x/shape") != std::string::npos);
  CHECK(r.err.find("--max-memory") != std::string::npos);
  CHECK_FALSE(fs::exists(dir + "/out.txt"));
  // The meta device holds no element data: the same scenario is accounted.
  auto meta = run_agtrace("run " + dir + "/s.json --device meta --format json");
  CHECK(meta.status == 0);
  CHECK(meta.out.find("\"peak_bytes\": 40000000000") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("an allocation over the budget inside the program is a 'limit' error at its statement", "[cli][limits]") {
  const std::string dir = temp_dir();
  spit(dir + "/s.json", R"JSON({"name": "s", "program": [{"try": ["z = torch.zeros(1000, 1000)"]}, "print('after')"]})JSON");
  auto r = run_agtrace("run " + dir + "/s.json --format json --max-memory 1M");
  CHECK(r.status == 0);
  CHECK(r.out.find("\"kind\": \"limit\"") != std::string::npos);
  CHECK(r.out.find("\"after\"") != std::string::npos);
  CHECK(run_agtrace("run " + dir + "/s.json --max-memory 16M").status == 0);
  CHECK(run_agtrace("run " + dir + "/s.json --max-memory lots").status == 2);
  fs::remove_all(dir);
}

TEST_CASE("every scenario gives byte-identical reports on every run", "[cli][determinism]") {
  const std::string dir = temp_dir();
  int checked = 0;
  for (const auto& e : fs::directory_iterator(source_dir() + "/scenarios")) {
    if (e.path().extension() != ".json") continue;
    const std::string sc = e.path().string();
    for (const char* fmt : {"--format json --values", "--format text --values"}) {
      auto a = run_agtrace("run " + sc + " " + fmt + " --dot " + dir + "/a.dot");
      auto b = run_agtrace("run " + sc + " " + fmt + " --dot " + dir + "/b.dot");
      INFO(sc << " " << fmt);
      CHECK(a.out == b.out);
      CHECK(slurp(dir + "/a.dot") == slurp(dir + "/b.dot"));
    }
    ++checked;
  }
  CHECK(checked >= 8);
  fs::remove_all(dir);
}

TEST_CASE("the process's memory is bounded, graph and records included: 'limit' at the statement, report kept",
          "[cli][limits]") {
  // A chain of 20,000 nodes on a 4-element leaf: a few hundred kilobytes of element data,
  // far under --max-memory, but about a kilobyte of nodes, saved-value records and events
  // per statement (measured: 10 MB resident at the start, the budget of 32M passed before
  // the end of the loop; a 90,000-node chain reaches 569 MB with its report).
  const std::string dir = temp_dir();
  spit(dir + "/s.json", R"JSON({"name": "s", "tensors": {"x": {"shape": [4], "requires_grad": true}},
    "program": ["y = x * 1.0", {"repeat": 20000, "body": ["y = y * x"]}, "print('done')"]})JSON");
  auto r = run_agtrace("run " + dir + "/s.json --format json --max-process-memory 32M -o " + dir + "/out.json");
  CHECK(r.status == 3);
  const std::string report = slurp(dir + "/out.json");
  CHECK(report.find("\"kind\": \"limit\"") != std::string::npos);
  CHECK(report.find("beyond its budget of 33554432 bytes (--max-process-memory") != std::string::npos);
  CHECK(report.find("\"done\"") == std::string::npos);  // the program ended there
  CHECK(r.err.find("limit") != std::string::npos);      // what raised where, on stderr
  // Within the budget (and by default, half the machine's memory) it runs to the end.
  auto ok = run_agtrace("run " + dir + "/s.json --format json --max-process-memory 8G");
  CHECK(ok.status == 0);
  CHECK(ok.out.find("\"done\"") != std::string::npos);
  CHECK(run_agtrace("run " + dir + "/s.json -q -o " + dir + "/default.txt").status == 0);
  CHECK(run_agtrace("run " + dir + "/s.json --max-process-memory lots").status == 2);
  fs::remove_all(dir);
}

TEST_CASE("a render past --render-max-nodes is a limit error before Graphviz starts, nothing written",
          "[cli][limits]") {
  // 6,000 multiplications: 6,000 nodes in the picture (their saved values are rows of their
  // boxes), over the default 5,000 (dot's layout of a 30,000-node graph runs for many minutes).
  const std::string dir = temp_dir();
  spit(dir + "/s.json", R"JSON({"name": "s", "tensors": {"x": {"shape": [4], "requires_grad": true}},
    "program": ["y = x * 1.0", {"repeat": 6000, "body": ["y = y * x"]}]})JSON");
  auto r = run_agtrace("run " + dir + "/s.json -o " + dir + "/out.txt --svg " + dir + "/g.svg");
  CHECK(r.status == 2);
  CHECK(r.err.find("[limit] " + dir + "/g.svg: the graph has 60") != std::string::npos);
  CHECK(r.err.find("more than --render-max-nodes (5000)") != std::string::npos);
  CHECK_FALSE(fs::exists(dir + "/g.svg"));
  CHECK_FALSE(fs::exists(dir + "/out.txt"));
  // The limit is the user's: a small graph under a lower one is refused too, and renders
  // under the default.
  const std::string seed = source_dir() + "/scenarios/seed_walk.json";
  auto low = run_agtrace("run " + seed + " -o " + dir + "/seed.txt --png " + dir + "/seed.png --render-max-nodes 5");
  CHECK(low.status == 2);
  CHECK(low.err.find("more than --render-max-nodes (5)") != std::string::npos);
  CHECK(run_agtrace("run " + seed + " -o " + dir + "/seed.txt --svg " + dir + "/seed.svg").status == 0);
  CHECK(fs::exists(dir + "/seed.svg"));
  fs::remove_all(dir);
}

TEST_CASE("run with --values keeps the values of tensors up to --values-limit elements, the count of larger ones",
          "[cli][limits]") {
  const std::string dir = temp_dir();
  spit(dir + "/s.json", R"JSON({"name": "s", "tensors": {
      "big": {"shape": [2000], "requires_grad": true}, "small": {"shape": [3], "requires_grad": true}},
    "program": ["(big.sum() + small.sum()).backward()"]})JSON");
  auto json = run_agtrace("run " + dir + "/s.json --format json --values --values-limit 1000");
  REQUIRE(json.status == 0);
  auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  CHECK(count(json.out, "\"values_elided\": 2000") == 2);  // the leaf and its gradient
  CHECK(count(json.out, "\"values\": [") == 2);           // small's, and its gradient's
  auto text = run_agtrace("run " + dir + "/s.json --values --values-limit 1000");
  CHECK(text.out.find("(2000 values, beyond --values-limit)") != std::string::npos);
  // The default (1,000,000) and 0 (no limit) keep all 2000.
  for (const std::string& limit : {std::string(""), std::string(" --values-limit 0")}) {
    auto all = run_agtrace("run " + dir + "/s.json --format json --values" + limit);
    CHECK(all.out.find("values_elided") == std::string::npos);
  }
  CHECK(run_agtrace("run " + dir + "/s.json --values --values-limit -1").status == 2);
  fs::remove_all(dir);
}
