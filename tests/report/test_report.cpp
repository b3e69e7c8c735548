// Printers and expect checks, on runs of small scenarios.
#include <catch2/catch.hpp>

#include <filesystem>

#include "account/analysis.hpp"
#include "interp/run_helpers.hpp"
#include "scenario/scenario.hpp"
#include "support/command.hpp"
#include "report/report.hpp"

using namespace agtrace;

namespace {
const char* kSeed = R"JSON({"name": "t", "tensors": {
    "x": {"shape": [2, 3], "requires_grad": true}, "W": {"shape": [3, 4], "requires_grad": true}},
    "program": ["y = (x @ W).relu().sum()", "print(y.grad_fn.name())"]})JSON";
}

TEST_CASE("the JSON report holds the spec's stable core", "[report]") {
  auto j = report_json(test::run_text(kSeed), false);
  for (const char* key : {"format", "scenario", "device", "statements", "printed", "walks", "errors", "grads", "memory"})
    CHECK(j.contains(key));
  CHECK(j["format"] == 1);
  CHECK(j["walks"]["y"] == nlohmann::ordered_json({"SumBackward0", "ReluBackward0", "MmBackward0", "AccumulateGrad", "AccumulateGrad"}));
  for (const char* key : {"peak_bytes", "saved_bytes", "saved_unique_bytes", "graph_only_bytes"})
    CHECK(j["memory"].contains(key));
  CHECK(j["statements"][0]["status"] == "ok");
}

TEST_CASE("human byte units", "[report]") {
  CHECK(human_bytes(0) == "0 B");
  CHECK(human_bytes(1023) == "1023 B");
  CHECK(human_bytes(1536) == "1.5 KiB");
  CHECK(human_bytes(3 * 1024 * 1024) == "3.0 MiB");
}

TEST_CASE("check_expect reports each fact that differs", "[report]") {
  RunResult r = test::run_text(kSeed);
  r.expect = nlohmann::json::parse(R"JSON({
    "walk": {"y": ["SumBackward0", "ReluBackward0", "MmBackward0", "AccumulateGrad", "AccumulateGrad"], "nope": []},
    "printed": ["SumBackward0"],
    "memory": {"saved_bytes": 104, "peak_bytes": {"max": 1}, "graph_only_bytes": {"min": 0, "max": 1000}}
  })JSON");
  auto failures = check_expect(r);
  std::vector<std::string> facts;
  for (const auto& f : failures) facts.push_back(f.fact);
  CHECK(facts == std::vector<std::string>{"walk of nope", "memory.peak_bytes"});

  r.expect = nlohmann::json::parse(R"JSON({"printed": ["ReluBackward0"], "memory": {"saved_bytes": 105},
                                       "errors": [{"kind": "leaf_inplace"}]})JSON");
  failures = check_expect(r);
  REQUIRE(failures.size() == 3);
  CHECK(failures[0].fact == "printed");
  CHECK(failures[1].fact == "errors (count)");
  CHECK(failures[2].fact == "memory.saved_bytes");
  CHECK(failures[2].actual == "104");
}

TEST_CASE("the text report starts with a summary and shows saved identity", "[report]") {
  const std::string t = report_text(test::run_text(kSeed), {});
  CHECK(t.find("Summary") < t.find("Program"));
  CHECK(t.find("same object as x") != std::string::npos);
  CHECK(t.find("new object") != std::string::npos);
  CHECK(t.find("\x1b[") == std::string::npos);
  TextOptions colored;
  colored.color = true;
  CHECK(report_text(test::run_text(kSeed), colored).find("\x1b[") != std::string::npos);
}

TEST_CASE("DOT has nodes, edges, saved tensors and a legend, and escapes strings", "[report]") {
  RunResult r = test::run_text(kSeed);
  r.scenario = "quote\"back\\slash";
  const std::string d = report_dot(r);
  CHECK(d.rfind("digraph agtrace {", 0) == 0);
  CHECK(d.find("MmBackward0") != std::string::npos);
  CHECK(d.find("result: float32[2, 4], 32 B, new object on relu@[0]") != std::string::npos);
  CHECK(d.find("cluster_legend") != std::string::npos);
  CHECK(d.find("quote\\\"back\\\\slash") != std::string::npos);
}

namespace {
// The DOT line that declares node `id` (a node's box or a leaf), or "" if none does.
std::string node_line(const std::string& dot, const std::string& id) {
  const size_t at = dot.find("\n" + id + " [");
  const size_t indented = at == std::string::npos ? dot.find(" " + id + " [") : at;
  if (indented == std::string::npos) return "";
  return dot.substr(indented, dot.find('\n', indented + 1) - indented);
}
int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}
}  // namespace

TEST_CASE("the picture shows the graph when the most saved bytes were alive, saved tensors in their node", "[report][dot]") {
  // After backward every saved value is released; the default picture is the graph after [1]
  // (the forward), with the three saved tensors orange inside their nodes' boxes.
  const RunResult r = test::run_text(R"JSON({"name": "t", "tensors": {
      "x": {"shape": [2, 3], "requires_grad": true}, "W": {"shape": [3, 4], "requires_grad": true}},
      "program": ["h = x @ W", "y = h.relu().sum()", "y.backward()", "z = x.exp()"]})JSON");
  const std::string peak = report_dot(r);
  CHECK(peak.find("the graph after [1], when the most saved bytes were alive (104 B): y = h.relu().sum()") != std::string::npos);
  // kept: self, mat2 and result, and the legend's row
  CHECK(count_of(peak, "bgcolor=\"#f6a540\">") == 3 + 1);
  CHECK(peak.find("mat2: float32[3, 4], 48 B, same object as W") != std::string::npos);
  CHECK(peak.find("self: float32[2, 3], 24 B, same object as x") != std::string::npos);
  CHECK(peak.find("ExpBackward0") == std::string::npos);  // made after [1]
  CHECK(peak.find("cluster_s0") != std::string::npos);
  CHECK(peak.find("[0] h = x @ W") != std::string::npos);
  CHECK(node_line(peak, "n1").find("float32[2, 3]") != std::string::npos);  // the leaf x with its shape

  DotOptions end;
  end.at = DotOptions::kAtEnd;
  const std::string after = report_dot(r, end);
  CHECK(count_of(after, "bgcolor=\"#f6a540\">") == 1 + 1);  // only ExpBackward0's result is kept
  CHECK(after.find("released at [2]") != std::string::npos);
  CHECK(after.find("ExpBackward0") != std::string::npos);

  DotOptions first;
  first.at = 0;
  const std::string at0 = report_dot(r, first);
  CHECK(at0.find("MmBackward0") != std::string::npos);
  CHECK(at0.find("ReluBackward0") == std::string::npos);

  DotOptions bare;
  bare.saved = false;
  const std::string no_saved = report_dot(r, bare);
  CHECK(no_saved.find("same object as W") == std::string::npos);
  CHECK(no_saved.find("keeps 72 B") != std::string::npos);  // the node still says what it keeps

  DotOptions forward;
  forward.forward_edges = true;
  const std::string torchviz = report_dot(r, forward);
  // MmBackward0 (#0) -> AccumulateGrad of x (#1) as next_functions run; reversed for torchviz.
  CHECK(peak.find("  n0 -> n1;") != std::string::npos);
  CHECK(torchviz.find("  n1 -> n0;") != std::string::npos);
  CHECK(torchviz.find("  n0 -> n1;") == std::string::npos);
}

TEST_CASE("pictures fold repeated blocks into one box each under --max-nodes", "[report][dot]") {
  // Four identical layers: the last three are one box, and their parameters go with it.
  std::string program = "\"h = x\"";
  std::string tensors = "\"x\": {\"shape\": [2, 4], \"requires_grad\": true}";
  for (int layer = 0; layer < 4; ++layer) {
    const std::string w = "W" + std::to_string(layer);
    tensors += ", \"" + w + "\": {\"shape\": [4, 4], \"requires_grad\": true}";
    program += ", \"h = (h @ " + w + ").tanh()\"";
  }
  const RunResult r = test::run_text("{\"name\": \"t\", \"tensors\": {" + tensors + "}, \"program\": [" + program +
                                     ", \"loss = h.sum()\"]}");
  const std::string whole = report_dot(r);
  CHECK(count_of(whole, "<b>MmBackward0</b>") == 4);
  DotOptions small;
  small.max_nodes = 8;
  const std::string folded = report_dot(r, small);
  CHECK(count_of(folded, "<b>MmBackward0</b>") == 1);
  CHECK(count_of(folded, "<b>TanhBackward0</b>") == 1);
  CHECK(folded.find("3 more repeats of the block of 2 nodes") != std::string::npos);
  CHECK(folded.find("W1\\n") == std::string::npos);  // W1..W3 folded with their layers
  CHECK(folded.find("W0\\n") != std::string::npos);
  // Distinct storages: layer 1's input (layer 0's tanh result), W1..W3 and three tanh results.
  CHECK(folded.find("keeping 320 B") != std::string::npos);
  DotOptions tiny;
  tiny.max_nodes = 3;
  const std::string cut = report_dot(r, tiny);
  CHECK(cut.find("earlier nodes not drawn (--max-nodes 3)") != std::string::npos);
}

TEST_CASE("the JSON report written record by record is the whole document's dump, byte for byte", "[report]") {
  // dump_report_json never builds the event timeline as a tree (issue #6): it must write
  // exactly what report_json(r).dump(2) writes, for runs with hooks, checkpoints, errors.
  size_t compared = 0, events = 0, scenarios = 0;
  for (const auto& entry : std::filesystem::directory_iterator(test::source_dir() + "/scenarios")) {
    if (entry.path().extension() != ".json") continue;
    ++scenarios;
    RunResult r = run_scenario(*load_scenario_file(entry.path().string()), RunOptions{});
    for (bool values : {false, true}) {
      const std::string whole = report_json(r, values).dump(2);
      CHECK(dump_report_json(report_json_skeleton(r, values), r, values) == whole);
      // One analysis given to both calls (as `agtrace run` does) writes the same text.
      const SharedAnalysis analysis = std::make_shared<const MemoryAnalysis>(analyse_memory(r));
      CHECK(dump_report_json(report_json_skeleton(r, values, analysis), r, values, analysis) == whole);
      ++compared;
    }
    events += r.events.size();
  }
  CHECK(scenarios >= 20);
  CHECK(compared == 2 * scenarios);
  CHECK(events > 100);
  // A placeholder found twice (only a caller could add one) makes it build the arrays in a
  // copy of the document and dump that instead: both places get the array.
  RunResult r = test::run_text(kSeed);
  auto skeleton = report_json_skeleton(r, false);
  auto full = report_json(r, false);
  REQUIRE(full["events"].size() > 3);
  skeleton["profile"] = {{"again", kEventsPlaceholder}};
  full["profile"] = {{"again", full["events"]}};
  CHECK(dump_report_json(skeleton, r, false) == full.dump(2));
}

TEST_CASE("the text report prints a subtree shared by two walks once", "[report]") {
  // h's graph is inside loss's: the walk of loss names h's top node and the walk it is in,
  // instead of printing h's subtree (and its saved values) a second time.
  const RunResult r = test::run_text(R"JSON({"name": "t", "tensors": {
      "x": {"shape": [2, 3], "requires_grad": true}, "W": {"shape": [3, 4], "requires_grad": true}},
      "program": ["h = (x @ W).relu()", "loss = h.exp().sum()"]})JSON");
  const std::string report = report_text(r, {});
  const size_t walks_at = report.find("Walk of h");
  REQUIRE(walks_at != std::string::npos);
  const std::string t = report.substr(walks_at, report.find("\nMemory by statement") - walks_at);
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = t.find(what); at != std::string::npos; at = t.find(what, at + 1)) ++n;
    return n;
  };
  CHECK(count("Walk of ") == 2);
  CHECK(count("MmBackward0 #") == 1);
  CHECK(count("_saved_mat2 ") == 1);
  CHECK(t.find("ReluBackward0 #3 (see the walk of h)") != std::string::npos);
  // A node reached twice within one walk is still "(above)", with its variable.
  const std::string twice = report_text(test::run_text(R"JSON({"name": "t", "tensors": {
      "x": {"shape": [2], "requires_grad": true}}, "program": ["y = (x * x).sum()"]})JSON"), {});
  CHECK(twice.find(" (x) (above)") != std::string::npos);
}

TEST_CASE("the text report states each expect fact that differs, --quiet included", "[report]") {
  RunResult r = test::run_text(kSeed);
  r.expect = nlohmann::json::parse(R"JSON({"printed": ["MmBackward0"], "memory": {"saved_bytes": {"max": 1}}})JSON");
  TextOptions quiet;
  quiet.quiet = true;
  const std::string t = report_text(r, quiet);
  CHECK(t.find("2 facts differ") != std::string::npos);
  CHECK(t.find("printed: expected [\"MmBackward0\"], got [\"SumBackward0\"]") != std::string::npos);
  CHECK(t.find("memory.saved_bytes: expected <= 1, got ") != std::string::npos);
}
