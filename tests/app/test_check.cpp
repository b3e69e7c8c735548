// agtrace check: expect blocks, golden reports with readable differences, --update,
// JUnit XML, and Graphviz rendering through run --svg/--png.
#include <catch2/catch.hpp>

#include <filesystem>

#include "report/golden_diff.hpp"
#include "report/report.hpp"
#include "support/command.hpp"

namespace fs = std::filesystem;
using namespace agtrace::test;

namespace {
const char* kScenario = R"JSON({"name": "g", "tensors": {"x": {"shape": [2, 4], "requires_grad": true, "init": {"linspace": [-1, 1]}}},
  "program": ["y = x.relu().sum()"], "expect": {"walk": {"y": ["SumBackward0", "ReluBackward0", "AccumulateGrad"]}}})JSON";
const char* kBigger = R"JSON({"name": "g", "tensors": {"x": {"shape": [4, 4], "requires_grad": true, "init": {"linspace": [-1, 1]}}},
  "program": ["y = x.relu().exp().sum()"], "expect": {"walk": {"y": ["SumBackward0", "ExpBackward0", "ReluBackward0", "AccumulateGrad"]}}})JSON";
}  // namespace

TEST_CASE("check --golden creates, passes, and explains a change", "[cli][check]") {
  const std::string dir = temp_dir();
  const std::string sc = dir + "/g.json", golden = dir + "/golden";
  spit(sc, kScenario);
  auto missing = run_agtrace("check " + sc + " --golden " + golden);
  CHECK(missing.status == 1);
  CHECK(missing.out.find("--update") != std::string::npos);

  auto created = run_agtrace("check " + sc + " --golden " + golden + " --update");
  CHECK(created.status == 0);
  CHECK(created.out.find("CREATED") != std::string::npos);
  REQUIRE(fs::exists(golden + "/g.json"));
  CHECK(slurp(golden + "/g.json").find("agtrace_version") == std::string::npos);

  auto same = run_agtrace("check " + sc + " --golden " + golden);
  CHECK(same.status == 0);
  CHECK(same.out.find("1 passed, 0 failed") != std::string::npos);

  spit(sc, kBigger);
  auto changed = run_agtrace("check " + sc + " --golden " + golden + " --junit " + dir + "/j.xml");
  INFO(changed.out);
  CHECK(changed.status == 1);
  CHECK(changed.out.find("walk of y: +ExpBackward0") != std::string::npos);
  CHECK(changed.out.find("ReluBackward0._saved_result: 32 B -> 64 B") != std::string::npos);
  CHECK(changed.out.find("ExpBackward0._saved_result: newly saved (64 B)") != std::string::npos);
  const std::string xml = slurp(dir + "/j.xml");
  CHECK(xml.find("<testsuite name=\"agtrace check\" tests=\"1\" failures=\"1\"") != std::string::npos);
  CHECK(xml.find("<failure message=\"golden: walk of y") != std::string::npos);

  auto updated = run_agtrace("check " + sc + " --golden " + golden + " --update");
  CHECK(updated.status == 0);
  CHECK(updated.out.find("UPDATED") != std::string::npos);
  CHECK(run_agtrace("check " + sc + " --golden " + golden).status == 0);
  fs::remove_all(dir);
}

TEST_CASE("check budgets: memory max fails CI when the graph holds more", "[cli][check]") {
  const std::string dir = temp_dir();
  spit(dir + "/b.json", R"JSON({"name": "b", "tensors": {"x": {"shape": [4, 4], "requires_grad": true}},
    "program": ["y = x.exp().exp().sum()"], "expect": {"memory": {"graph_only_bytes": {"max": 64}}}})JSON");
  auto r = run_agtrace("check " + dir + "/b.json");
  CHECK(r.status == 1);
  CHECK(r.out.find("memory.graph_only_bytes: expected <= 64, got 128") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("report_differences on hand-made reports", "[check]") {
  auto a = nlohmann::json::parse(R"JSON({"agtrace_version": "1", "walks": {"y": ["A", "B"]}, "memory": {"peak_bytes": 10}})JSON");
  auto b = nlohmann::json::parse(R"JSON({"agtrace_version": "2", "walks": {"y": ["A", "C"]}, "memory": {"peak_bytes": 12}})JSON");
  auto d = agtrace::report_differences(a, b);
  REQUIRE(d.size() == 2);
  CHECK(d[0].find("walk of y: -B +C") == 0);
  CHECK(d[1] == "memory.peak_bytes: 10 -> 12");
  CHECK(agtrace::report_differences(a, a).empty());
  b = a;
  b["agtrace_version"] = "3";
  CHECK(agtrace::report_differences(a, b).empty());  // the version is volatile
  b["description"] = "x";
  CHECK(agtrace::report_differences(a, b).size() == 1);
}

TEST_CASE("run --svg and --png render with Graphviz, and say so when dot is missing", "[cli][dot]") {
  const std::string dir = temp_dir();
  const std::string sc = source_dir() + "/scenarios/seed_walk.json";
  auto r = run_agtrace("run " + sc + " -o " + dir + "/report.txt --svg " + dir + "/g.svg --png " + dir + "/g.png");
  REQUIRE(r.status == 0);
  CHECK(slurp(dir + "/g.svg").find("<svg") != std::string::npos);
  CHECK(slurp(dir + "/g.png").substr(1, 3) == "PNG");
  auto no_dot = run_shell(std::string("PATH=/nonexistent ") + AGTRACE_BINARY + " run " + sc + " -o " + dir + "/report2.txt --svg " + dir + "/h.svg");
  CHECK(no_dot.status == 2);
  CHECK(no_dot.err.find("Graphviz") != std::string::npos);
  CHECK_FALSE(fs::exists(dir + "/h.svg"));
  int leftovers = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(".agtrace-", 0) == 0) ++leftovers;
  CHECK(leftovers == 0);
  fs::remove_all(dir);
}

TEST_CASE("JUnit XML is well-formed and names each scenario", "[cli][check]") {
  const std::string dir = temp_dir();
  spit(dir + "/a.json", R"JSON({"name": "a", "program": ["print(1)"], "expect": {"printed": ["2"]}})JSON");
  spit(dir + "/b.json", R"JSON({"name": "b", "program": ["print(1)"], "expect": {"printed": ["1"]}})JSON");
  auto r = run_agtrace("check " + dir + " --junit " + dir + "/out.xml");
  CHECK(r.status == 1);
  auto parse = run_shell("/usr/bin/python3 -c \"import xml.etree.ElementTree as E, sys; t = E.parse(sys.argv[1]); "
                         "s = t.getroot().find('testsuite'); print(s.get('tests'), s.get('failures'), "
                         "[c.get('name') for c in s.findall('testcase')])\" " + dir + "/out.xml");
  INFO(parse.err);
  CHECK(parse.status == 0);
  CHECK(parse.out == "2 1 ['a', 'b']\n");
  fs::remove_all(dir);
}

TEST_CASE("logs go to stderr and never into the report", "[cli]") {
  const std::string sc = source_dir() + "/scenarios/seed_walk.json";
  auto quiet = run_agtrace("run " + sc + " --format json");
  auto verbose = run_agtrace("-v run " + sc + " --format json");
  CHECK(verbose.status == 0);
  CHECK(verbose.out == quiet.out);
  CHECK(verbose.err.find("running seed_walk") != std::string::npos);
  CHECK(quiet.err.empty());
}

TEST_CASE("check: a bad file and an unexpected raise are failed cases, the others still run", "[cli][check]") {
  const std::string dir = temp_dir();
  spit(dir + "/a_bad.json", "{bad");
  spit(dir + "/b_raises.json", R"JSON({"name": "b", "tensors": {"x": {"shape": [2], "requires_grad": true, "init": "ones"}},
    "program": ["x.mul_(2)"]})JSON");
  spit(dir + "/c_named.json", R"JSON({"name": "c", "tensors": {"x": {"shape": [2], "requires_grad": true, "init": "ones"}},
    "program": ["x.mul_(2)"], "expect": {"errors": [{"statement": 0, "kind": "leaf_inplace"}]}})JSON");
  spit(dir + "/d_unsupported.json", R"JSON({"name": "d", "tensors": {"x": {"shape": [2], "init": "ones"}},
    "program": ["y = x.frobnicate()"], "expect": {"errors": [{"statement": 0, "kind": "unsupported"}]}})JSON");
  spit(dir + "/e_ok.json", R"JSON({"name": "e", "program": ["print(1)"], "expect": {"printed": ["1"]}})JSON");
  auto r = run_agtrace("check " + dir + " --junit " + dir + "/out.xml");
  CHECK(r.status == 1);
  CHECK(r.out.find("FAIL " + dir + "/a_bad.json\n     bad input: [json]") != std::string::npos);
  CHECK(r.out.find("FAIL " + dir + "/b_raises.json\n     raised outside try: expected no error, or one expect.errors "
                   "names, got leaf_inplace at statement 0") != std::string::npos);
  CHECK(r.out.find("PASS " + dir + "/c_named.json") != std::string::npos);  // the raise is the expected fact
  CHECK(r.out.find("FAIL " + dir + "/d_unsupported.json") != std::string::npos);  // named or not
  CHECK(r.out.find("PASS " + dir + "/e_ok.json") != std::string::npos);
  CHECK(r.out.find("2 passed, 3 failed") != std::string::npos);
  auto parse = run_shell("/usr/bin/python3 -c \"import xml.etree.ElementTree as E, sys; t = E.parse(sys.argv[1]); "
                         "s = t.getroot().find('testsuite'); print(s.get('tests'), s.get('failures'), "
                         "all(float(c.get('time')) >= 0 for c in s.findall('testcase')), s.get('time') is not None)\" " +
                         dir + "/out.xml");
  INFO(parse.err);
  CHECK(parse.out == "5 3 True True\n");
  fs::remove_all(dir);
}

TEST_CASE("check -j N prints what the serial check prints and writes the same JUnit cases", "[cli][check]") {
  const std::string dir = temp_dir();
  spit(dir + "/a_bad.json", "{bad");
  spit(dir + "/b_raises.json", R"JSON({"name": "b", "tensors": {"x": {"shape": [2], "requires_grad": true, "init": "ones"}},
    "program": ["x.mul_(2)"]})JSON");
  spit(dir + "/c_fails.json", R"JSON({"name": "c", "program": ["print(2)"], "expect": {"printed": ["1"]}})JSON");
  spit(dir + "/d_skip.json", R"JSON({"name": "d", "program": ["print(1)"]})JSON");
  for (int i = 0; i < 5; ++i) {
    std::string text = kScenario;
    text.replace(text.find("\"name\": \"g\""), 11, "\"name\": \"g" + std::to_string(i) + "\"");
    spit(dir + "/e" + std::to_string(i) + ".json", text);
  }
  auto serial = run_agtrace("check " + dir + " --golden " + dir + "/golden --update");
  REQUIRE(serial.status == 1);
  fs::remove_all(dir + "/golden");
  for (const char* jobs : {"-j 2", "-j 3", "--jobs 16"}) {
    INFO(jobs);
    auto parallel = run_agtrace(std::string("check ") + jobs + " " + dir + " --golden " + dir + "/golden --update");
    CHECK(parallel.status == serial.status);
    CHECK(parallel.out == serial.out);  // CREATED lines, PASS/FAIL/SKIP in file order, the count
    CHECK(fs::exists(dir + "/golden/g4.json"));
    fs::remove_all(dir + "/golden");
  }
  CHECK(serial.out.find("CREATED " + dir + "/golden/g4.json") != std::string::npos);
  CHECK(serial.out.find("6 passed, 3 failed") != std::string::npos);
  CHECK(run_agtrace("check -j 0 " + dir).status == 2);
  fs::remove_all(dir);
}

TEST_CASE("expect.walk: an ellipsis stands for any run of nodes", "[check]") {
  using agtrace::walk_matches;
  const std::vector<std::string> walk{"MeanBackward0", "MulBackward0", "AccumulateGrad"};
  CHECK(walk_matches({"MeanBackward0", "..."}, walk));
  CHECK(walk_matches({"...", "AccumulateGrad"}, walk));
  CHECK(walk_matches({"MeanBackward0", "...", "MulBackward0", "...", "AccumulateGrad"}, walk));  // empty runs
  CHECK(walk_matches({"..."}, walk));
  CHECK(walk_matches(walk, walk));
  CHECK_FALSE(walk_matches({"MeanBackward0", "..."}, {"SumBackward0", "MeanBackward0"}));
  CHECK_FALSE(walk_matches({"...", "MulBackward0"}, walk));
  CHECK_FALSE(walk_matches({"MeanBackward0", "MulBackward0"}, walk));
  CHECK_FALSE(walk_matches({"MeanBackward0"}, {}));
  CHECK(walk_matches({"..."}, {}));
}
