// agtrace diff: two runs' memory side by side, from reports or scenarios; bad reports are
// input errors naming the file and the JSON pointer (exit 2).
#include <catch2/catch.hpp>

#include "errors.hpp"
#include "interp/run_helpers.hpp"
#include "report/diff_report.hpp"
#include "report/report.hpp"
#include "support/command.hpp"

using namespace agtrace;

namespace {

const char* kKept = R"js({"name": "kept", "tensors": {"x": {"shape": [4], "requires_grad": true, "init": "ones"}},
  "program": ["h = x.exp()", "y = h.sin()"]})js";
const char* kDropped = R"js({"name": "dropped", "tensors": {"x": {"shape": [4], "requires_grad": true, "init": "ones"}},
  "program": ["h = x.exp()", "y = h.sin()", "del h"]})js";

nlohmann::json report_of(const char* scenario) {
  return nlohmann::json::parse(report_json(test::run_text(scenario), false).dump());
}

const DiffRow& row(const std::vector<DiffRow>& rows, const std::string& key) {
  for (const auto& r : rows)
    if (r.key == key) return r;
  FAIL("no row " << key);
  throw;
}

}  // namespace

TEST_CASE("diff sets two runs side by side by summary, category and node", "[report][diff]") {
  const nlohmann::json a = report_of(kKept), b = report_of(kDropped);
  const ReportDiff d = diff_reports(a, b);
  CHECK(d.name_a == "kept");
  CHECK(d.name_b == "dropped");
  // The same graph saves the same bytes ...
  CHECK(row(d.summary, "saved_bytes").a == a["memory"]["saved_bytes"].get<int64_t>());
  CHECK(row(d.summary, "saved_bytes").a == row(d.summary, "saved_bytes").b);
  // ... but without the name, exp's result is held only by the graph: new bytes appear.
  CHECK(row(d.summary, "new_bytes").a == 0);
  CHECK(row(d.summary, "new_bytes").b == b["accountant"]["new_bytes"].get<int64_t>());
  CHECK(row(d.summary, "new_bytes").b > 0);
  const DiffRow& sin = row(d.nodes, "SinBackward0");
  CHECK(sin.a == sin.b);
  CHECK(sin.new_a == 0);
  CHECK(sin.new_b == 16);
  const DiffRow& named = row(d.categories, "named");
  CHECK(named.a > named.b);
  const nlohmann::ordered_json j = diff_json(d);
  CHECK(j["nodes"].size() == d.nodes.size());
  CHECK(diff_text(d).find("SinBackward0") != std::string::npos);
}

TEST_CASE("diff rejects a file that is not a report, naming the pointer", "[report][diff]") {
  nlohmann::json bad = report_of(kKept);
  bad["memory"]["peak_bytes"] = "lots";
  try {
    check_diffable_report(bad, "r.json");
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(e.file == "r.json");
    CHECK(e.json_pointer == "/memory/peak_bytes");
  }
  bad = report_of(kKept);
  bad["accountant"]["nodes"][0].erase("new_bytes");
  try {
    check_diffable_report(bad, "r.json");
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(e.json_pointer == "/accountant/nodes/0");
  }
}

TEST_CASE("agtrace diff: scenarios or reports, text or JSON, exit 2 on bad files", "[report][diff][cli]") {
  const std::string dir = test::temp_dir();
  test::spit(dir + "/a.json", kKept);
  test::spit(dir + "/b.json", kDropped);
  auto text = test::run_agtrace("diff " + dir + "/a.json " + dir + "/b.json");
  CHECK(text.status == 0);
  CHECK(text.out.find("graph_only_bytes") != std::string::npos);
  auto rep = test::run_agtrace("run " + dir + "/b.json --format json -o " + dir + "/b.report.json");
  REQUIRE(rep.status == 0);
  auto js = test::run_agtrace("diff " + dir + "/a.json " + dir + "/b.report.json --format json");
  REQUIRE(js.status == 0);
  const auto j = nlohmann::json::parse(js.out);
  CHECK(j["b"] == "dropped");
  test::spit(dir + "/broken.json", R"js({"scenario": "x", "memory": {"peak_bytes": 1}})js");
  auto bad = test::run_agtrace("diff " + dir + "/a.json " + dir + "/broken.json");
  CHECK(bad.status == 2);
  CHECK(bad.err.find("broken.json") != std::string::npos);
  CHECK(bad.err.find("/memory") != std::string::npos);
  test::spit(dir + "/garbage.json", "{not json");
  CHECK(test::run_agtrace("diff " + dir + "/garbage.json " + dir + "/a.json").status == 2);
  CHECK(test::run_agtrace("diff " + dir + "/missing.json " + dir + "/a.json").status == 2);
}

TEST_CASE("agtrace diff: the same block with and without checkpointing", "[report][diff][cli]") {
  // sin saves x (a leaf), exp saves its result (new bytes) - unless the block is checkpointed.
  const std::string dir = test::temp_dir();
  test::spit(dir + "/c.json", R"js({"name": "ckpt", "tensors": {"x": {"shape": [4], "requires_grad": true, "init": "ones"}},
    "program": [{"checkpoint": ["h = x.sin()", "y = h.exp()"], "inputs": ["x"], "outputs": ["y"]}, "loss = y.sum()"]})js");
  auto out = test::run_agtrace("diff " + dir + "/c.json " + dir + "/c.json --b-without-checkpoint --format json");
  INFO(out.err);
  REQUIRE(out.status == 0);
  const auto j = nlohmann::json::parse(out.out);
  int64_t saved_a = -1, saved_b = -1, exp_a = -1, exp_b = -1;
  for (const auto& r : j["memory"])
    if (r["key"] == "saved_bytes") {
      saved_a = r["a"].get<int64_t>();
      saved_b = r["b"].get<int64_t>();
    }
  for (const auto& r : j["nodes"])
    if (r["key"] == "ExpBackward0") {
      exp_a = r["a"].is_null() ? 0 : r["a"].get<int64_t>();
      exp_b = r["b"].get<int64_t>();
    }
  CHECK(saved_a < saved_b);
  CHECK(exp_a == 0);   // checkpointed: nothing kept
  CHECK(exp_b == 16);  // plain: exp's float32 [4] result
  // A report cannot be re-run without checkpointing.
  auto rep = test::run_agtrace("run " + dir + "/c.json --format json -o " + dir + "/c.report.json");
  REQUIRE(rep.status == 0);
  CHECK(test::run_agtrace("diff " + dir + "/c.json " + dir + "/c.report.json --b-without-checkpoint").status == 2);
}

TEST_CASE("agtrace diff: the same program with and without autocast", "[report][diff][cli]") {
  // Under CPU bfloat16 autocast AddmmBackward0 saves the bfloat16 casts of x and W (2 bytes
  // an element); without the block it saves the float32 leaves themselves.
  const std::string dir = test::temp_dir();
  test::spit(dir + "/a.json", R"js({"name": "amp", "tensors": {
      "x": {"shape": [4, 3], "requires_grad": true, "init": "ones"},
      "W": {"shape": [5, 3], "requires_grad": true, "init": "ones"}},
    "program": [{"autocast": "bfloat16", "body": ["h = F.linear(x, W)"]}, "loss = h.float().sum()"]})js");
  auto out = test::run_agtrace("diff " + dir + "/a.json " + dir + "/a.json --b-without-autocast --format json");
  INFO(out.err);
  REQUIRE(out.status == 0);
  const auto j = nlohmann::json::parse(out.out);
  int64_t mm_a = -1, mm_b = -1;
  for (const auto& r : j["nodes"])
    if (r["key"] == "MmBackward0") {
      mm_a = r["a"].get<int64_t>();
      mm_b = r["b"].get<int64_t>();
    }
  CHECK(mm_a == (12 + 15) * 2);  // bfloat16 casts of x and W
  CHECK(mm_b == (12 + 15) * 4);  // the float32 leaves
  auto rep = test::run_agtrace("run " + dir + "/a.json --format json -o " + dir + "/a.report.json");
  REQUIRE(rep.status == 0);
  CHECK(nlohmann::json::parse(test::slurp(dir + "/a.report.json"))["autocast_comparison"]["without"]["saved_bytes"] ==
        mm_b);
  auto refused = test::run_agtrace("diff " + dir + "/a.json " + dir + "/a.report.json --b-without-autocast");
  CHECK(refused.status == 2);
  CHECK(refused.err.find("--b-without-autocast needs B to be a scenario") != std::string::npos);
}
