// The command line: help, version, subcommands, exit statuses (0 ran, 1 a check failed,
// 2 bad input or usage, 3 the scenario raised outside try), errors that point, and
// outputs that are never left half written.
#include <catch2/catch.hpp>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/command.hpp"

namespace fs = std::filesystem;
using namespace agtrace::test;

namespace {
std::string scenario(const std::string& name) { return source_dir() + "/scenarios/" + name + ".json"; }

std::string write_scenario(const std::string& dir, const std::string& body) {
  std::string path = dir + "/s.json";
  spit(path, body);
  return path;
}
}  // namespace

TEST_CASE("version and help flags", "[cli]") {
  auto v = run_agtrace("--version");
  CHECK(v.status == 0);
  CHECK(v.out.find("agtrace 0.") == 0);

  auto h = run_agtrace("--help");
  CHECK(h.status == 0);
  CHECK(h.out.find("Examples") != std::string::npos);
  for (const char* sub : {"run", "check", "validate", "ops"}) {
    auto s = run_agtrace(std::string(sub) + " --help");
    INFO(sub);
    CHECK(s.status == 0);
    CHECK(s.out.find("Example") != std::string::npos);
  }
}

TEST_CASE("usage errors exit 2", "[cli]") {
  CHECK(run_agtrace("").status == 2);
  CHECK(run_agtrace("frobnicate").status == 2);
  CHECK(run_agtrace("run").status == 2);
  CHECK(run_agtrace("run " + scenario("seed_walk") + " --format yaml").status == 2);
}

TEST_CASE("run prints the seed walk and exits 0", "[cli]") {
  auto r = run_agtrace("run " + scenario("seed_walk"));
  REQUIRE(r.status == 0);
  CHECK(r.out.find("SumBackward0") != std::string::npos);
  CHECK(r.out.find("_saved_self") != std::string::npos);
  CHECK(r.out.find("same object as x") != std::string::npos);
  CHECK(r.out.find("\x1b[") == std::string::npos);  // no colour when not a terminal
  auto colored = run_agtrace("run " + scenario("seed_walk") + " --color always");
  CHECK(colored.out.find("\x1b[") != std::string::npos);
  auto quiet = run_agtrace("run " + scenario("seed_walk") + " --quiet");
  CHECK(quiet.out.find("Summary") != std::string::npos);
  CHECK(quiet.out.find("Storage lifetimes") == std::string::npos);
}

TEST_CASE("the JSON report leaves the timeline and lifetimes to --detail full", "[cli]") {
  auto summary = run_agtrace("run " + scenario("seed_walk") + " --format json");
  auto full = run_agtrace("run " + scenario("seed_walk") + " --format json --detail full");
  REQUIRE(summary.status == 0);
  REQUIRE(full.status == 0);
  const auto s = nlohmann::json::parse(summary.out), f = nlohmann::json::parse(full.out);
  CHECK_FALSE(s.contains("events"));
  CHECK_FALSE(s.contains("lifetimes"));
  CHECK(f.contains("events"));
  CHECK(f.contains("lifetimes"));
  // Everything else is the same document.
  nlohmann::json rest = f;
  rest.erase("events");
  rest.erase("lifetimes");
  CHECK(rest == s);
  CHECK(run_agtrace("run " + scenario("seed_walk") + " --format json --detail most").status == 2);
}

TEST_CASE("compact JSON (--compact) is the same document without layout", "[cli]") {
  auto pretty = run_agtrace("run " + scenario("mlp_toy") + " --format json --detail full");
  auto compact = run_agtrace("run " + scenario("mlp_toy") + " --format json --detail full --compact");
  REQUIRE(pretty.status == 0);
  REQUIRE(compact.status == 0);
  const auto document = nlohmann::ordered_json::parse(pretty.out);
  // nlohmann's own compact text of the same document, byte for byte (strings with spaces
  // and newlines inside them keep them).
  CHECK(compact.out == document.dump() + "\n");
  CHECK(compact.out.size() * 3 < pretty.out.size() * 2);  // mlp_toy: 29,847 bytes against 49,687
  CHECK(compact.out.find('\n') == compact.out.size() - 1);
}

TEST_CASE("a report written to a file is the report written to stdout", "[cli]") {
  const std::string dir = temp_dir();
  // More than one megabyte of JSON, so the file gets the report in several pieces.
  std::string program = "\"h = x * 1.5\"";
  for (int i = 0; i < 1500; ++i) program += ", \"h = h.sin() * 1.5\"";
  auto path = write_scenario(dir, R"JSON({"name": "chain", "tensors": {"x": {"shape": [4], "requires_grad": true}},
                                       "program": [)JSON" + program + R"JSON(, "h.sum().backward()"]})JSON");
  for (const std::string format : {"json --detail full", "json --compact", "text"}) {
    INFO(format);
    auto to_stdout = run_agtrace("run " + path + " --format " + format);
    auto to_file = run_agtrace("run " + path + " --format " + format + " -o " + dir + "/report");
    REQUIRE(to_stdout.status == 0);
    REQUIRE(to_file.status == 0);
    CHECK(to_file.out.empty());
    const std::string written = slurp(dir + "/report");
    CHECK(written == to_stdout.out);
    if (format == "json --detail full") CHECK(written.size() > (size_t(1) << 20));
  }
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) (void)e, ++entries;
  CHECK(entries == 2);  // the scenario and the report: no temporary file left
  fs::remove_all(dir);
}

TEST_CASE("the progress line goes to stderr, never into the report, and -q silences it", "[cli]") {
  const std::string dir = temp_dir();
  auto plain = run_agtrace("run " + scenario("mlp_toy") + " --format json");
  auto shown = run_agtrace("run " + scenario("mlp_toy") + " --format json --progress always");
  REQUIRE(plain.status == 0);
  REQUIRE(shown.status == 0);
  CHECK(shown.out == plain.out);
  CHECK(plain.err.empty());  // not a terminal: auto shows nothing
  CHECK(shown.err.find("mlp_toy.json: statement [0] of ") != std::string::npos);
  CHECK(shown.err.find(" calls, ") != std::string::npos);
  CHECK(shown.err.find("writing the report") != std::string::npos);
  auto quiet = run_agtrace("run " + scenario("mlp_toy") + " -q --progress always");
  CHECK(quiet.status == 0);
  CHECK(quiet.err.empty());
  auto rendering = run_agtrace("run " + scenario("mlp_toy") + " --progress always -o " + dir + "/r.txt --svg " + dir + "/g.svg");
  CHECK(rendering.status == 0);
  CHECK(rendering.err.find("rendering " + dir + "/g.svg with Graphviz") != std::string::npos);
  CHECK(run_agtrace("run " + scenario("mlp_toy") + " --progress sometimes").status == 2);
  fs::remove_all(dir);
}

TEST_CASE("bad input names the file and where, exits 2, and writes no output", "[cli]") {
  const std::string dir = temp_dir();
  const std::string out = dir + "/report.json";

  SECTION("unknown field with its JSON pointer") {
    auto path = write_scenario(dir, R"JSON({"name": "t", "tensors": {"x": {"shape": [2], "requires_gard": true}}, "program": []})JSON");
    auto r = run_agtrace("run " + path + " -o " + out);
    CHECK(r.status == 2);
    CHECK(r.err.find(path) != std::string::npos);
    CHECK(r.err.find("/tensors/x") != std::string::npos);
    CHECK(r.err.find("requires_grad") != std::string::npos);  // the suggestion
  }
  SECTION("syntax error with statement, column and caret") {
    auto path = write_scenario(dir, R"JSON({"name": "t", "program": ["y = 1", "z = (y +* 2)"]})JSON");
    auto r = run_agtrace("run " + path + " -o " + out);
    CHECK(r.status == 2);
    CHECK(r.err.find("statement 1, column 9") != std::string::npos);
    CHECK(r.err.find("        ^") != std::string::npos);
  }
  SECTION("malformed JSON") {
    auto path = write_scenario(dir, "{\"name\": \"t\",\n \"program\": [}");
    auto r = run_agtrace("run " + path + " -o " + out);
    CHECK(r.status == 2);
    CHECK(r.err.find("line 2") != std::string::npos);
  }
  SECTION("missing file") {
    auto r = run_agtrace("run " + dir + "/nope.json -o " + out);
    CHECK(r.status == 2);
    CHECK(r.err.find("nope.json") != std::string::npos);
  }
  SECTION("cuda is refused (exit 2) with its reason") {
    // Exit 2 naming CUDA and why: a CPU-only build has no CUDA compiled in; a CUDA build on
    // a machine without a usable GPU quotes the runtime ("no CUDA device: CUDA driver
    // version is insufficient ..."); with a GPU, operations have no CUDA dispatch yet.
    auto r = run_agtrace("run " + scenario("seed_walk") + " --device cuda -o " + out);
    CHECK(r.status == 2);
    CHECK(r.err.find("CUDA") != std::string::npos);
    const bool cpu_build = r.err.find("no CUDA support compiled in") != std::string::npos;
    const bool no_device = r.err.find("no CUDA device: ") != std::string::npos;
    const bool no_dispatch = r.err.find("no CUDA dispatch yet") != std::string::npos;
    CHECK((cpu_build || no_device || no_dispatch));
  }
  CHECK_FALSE(fs::exists(out));
  fs::remove_all(dir);
}

TEST_CASE("an error outside try exits 3 and the report shows it", "[cli]") {
  const std::string dir = temp_dir();
  auto path = write_scenario(dir, R"JSON({"name": "t", "tensors": {"x": {"shape": [2], "requires_grad": true}},
                                       "program": ["x.add_(1)", "print('unreachable')"]})JSON");
  auto r = run_agtrace("run " + path + " --format json");
  CHECK(r.status == 3);
  CHECK(r.out.find("\"leaf_inplace\"") != std::string::npos);
  CHECK(r.out.find("\"not_run\"") != std::string::npos);
  CHECK(r.out.find("unreachable\"\n") == std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("a failing expect exits 1 from run and check", "[cli]") {
  const std::string dir = temp_dir();
  auto path = write_scenario(dir, R"JSON({"name": "t", "tensors": {"x": {"shape": [2], "requires_grad": true}},
                                       "program": ["y = x.exp().sum()"],
                                       "expect": {"walk": {"y": ["SumBackward0", "LogBackward0", "AccumulateGrad"]}}})JSON");
  CHECK(run_agtrace("run " + path).status == 1);
  auto c = run_agtrace("check " + path);
  CHECK(c.status == 1);
  CHECK(c.out.find("walk of y") != std::string::npos);
  CHECK(c.out.find("0 passed, 1 failed") != std::string::npos);
  auto ok = run_agtrace("check " + source_dir() + "/scenarios");
  INFO(ok.out);
  CHECK(ok.status == 0);
  CHECK(ok.out.find(" 0 failed") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("output and DOT files are replaced atomically", "[cli]") {
  const std::string dir = temp_dir();
  const std::string out = dir + "/report.txt", dot = dir + "/graph.dot";
  spit(out, "old");
  auto r = run_agtrace("run " + scenario("seed_walk") + " -o " + out + " --dot " + dot);
  REQUIRE(r.status == 0);
  CHECK(r.out.empty());
  CHECK(slurp(out).find("SumBackward0") != std::string::npos);
  CHECK(slurp(dot).rfind("digraph", 0) == 0);
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) (void)e, ++entries;
  CHECK(entries == 2);  // no temporary files left behind
  fs::remove_all(dir);
}

TEST_CASE("ops lists the table the code uses", "[cli]") {
  auto all = run_agtrace("ops");
  REQUIRE(all.status == 0);
  CHECK(all.out.find("MmBackward0") != std::string::npos);
  auto f = run_agtrace("ops --filter relu");
  CHECK(f.out.find("ReluBackward0") != std::string::npos);
  CHECK(f.out.find("MmBackward0") == std::string::npos);
  auto j = run_agtrace("ops --format json --filter exp");
  CHECK(j.out.find("\"ExpBackward0\"") != std::string::npos);
}

TEST_CASE("validate parses without running", "[cli]") {
  auto r = run_agtrace("validate " + scenario("seed_walk"));
  CHECK(r.status == 0);
  CHECK(r.out.find("valid scenario") != std::string::npos);
}

TEST_CASE("validate names every call agtrace lacks, without running, and exits 2", "[cli]") {
  const std::string dir = temp_dir();
  auto path = write_scenario(dir, R"JSON({"name": "t", "tensors": {"x": {"shape": [2]}},
      "program": ["y = x.rleu()", {"try": ["z = torch.rleu(x) + F.gelu(x).sum()"]}, "w = torch.nn.functional.nope(x)",
                  "print(y.grad_fn.name(), float('inf'))"]})JSON");
  auto r = run_agtrace("validate " + path);
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find("/program/0: statement 0, column 5: 'Tensor.rleu' is not an operation agtrace supports; did you "
                   "mean 'Tensor.relu'?") != std::string::npos);
  CHECK(r.err.find("/program/1/try/0: statement 1, column 5: 'torch.rleu'") != std::string::npos);
  CHECK(r.err.find("'F.nope'") != std::string::npos);
  CHECK(r.err.find("F.gelu") == std::string::npos);
  CHECK(r.err.find("name") == std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("unknown names get a suggestion", "[cli]") {
  const std::string dir = temp_dir();
  auto path = write_scenario(dir, R"JSON({"name": "t", "tensors": {"x": {"shape": [2]}},
                                       "program": [{"try": ["y = x.rleu()"]}, {"try": ["z = torch.rleu(x)"]}, {"try": ["w = xx + 1"]}]})JSON");
  auto r = run_agtrace("run " + path + " --format json");
  CHECK(r.status == 0);
  CHECK(r.out.find("did you mean 'relu'") != std::string::npos);
  CHECK(r.out.find("did you mean 'torch.relu'") != std::string::npos);
  CHECK(r.out.find("did you mean 'x'") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("every scenario's DOT renders with Graphviz without complaint", "[cli][dot]") {
  REQUIRE(run_shell("command -v dot").status == 0);
  const std::string dir = temp_dir();
  int rendered = 0;
  for (const auto& e : fs::directory_iterator(source_dir() + "/scenarios")) {
    if (e.path().extension() != ".json") continue;
    const std::string dot = dir + "/" + e.path().stem().string() + ".dot";
    auto r = run_agtrace("run " + e.path().string() + " -o " + dir + "/report.txt --dot " + dot);
    INFO(e.path().string());
    REQUIRE((r.status == 0 || r.status == 3));
    auto svg = run_shell("dot -Tsvg " + dot + " -o " + dir + "/out.svg");
    INFO(svg.err);
    CHECK(svg.status == 0);
    CHECK(svg.err.empty());
    ++rendered;
  }
  CHECK(rendered >= 7);
  fs::remove_all(dir);
}

TEST_CASE("DOT escapes quotes and backslashes in names", "[cli][dot]") {
  const std::string dir = temp_dir();
  auto path = write_scenario(dir, R"JSON({"name": "t", "description": "a \"quoted\" \\ name",
                                       "tensors": {"x": {"shape": [2], "requires_grad": true}},
                                       "program": ["y = x.exp().sum()", "print('a\"b')"]})JSON");
  auto r = run_agtrace("run " + path + " -o " + dir + "/report.txt --dot " + dir + "/g.dot");
  REQUIRE(r.status == 0);
  auto svg = run_shell("dot -Tsvg " + dir + "/g.dot -o " + dir + "/g.svg");
  CHECK(svg.status == 0);
  CHECK(svg.err.empty());
  fs::remove_all(dir);
}
