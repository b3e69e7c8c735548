// agtrace export --torch: the script it prints runs in real PyTorch (/usr/bin/python3) and
// reports what agtrace reports (walks, printed lines, statement statuses); it embeds
// tools/torch_runner.py verbatim and agtrace's own leaf values; -o is written atomically;
// bad input exits 2 and writes nothing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/export_torch.hpp"
#include "support/command.hpp"

namespace fs = std::filesystem;
using namespace agtrace::test;
using nlohmann::json;

namespace {

const char* const kPython = "/usr/bin/python3";

bool torch_available() {
  static const bool ok = run_shell(std::string(kPython) + " -c 'import torch'").status == 0;
  return ok;
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// The float tokens of a printed line may differ in the last digits (float32 sums in another
// order); everything else must be identical. Lines holding a tensor or a node object print
// in agtrace's own documented form (README: "Printed forms") and are not compared.
bool printed_line_matches(const std::string& ours, const std::string& theirs) {
  if (ours == theirs) return true;
  if (ours.find("tensor(") != std::string::npos || theirs.find("tensor(") != std::string::npos) return true;
  if (ours.find("object") != std::string::npos || theirs.find("object") != std::string::npos) return true;
  static const std::regex number(R"(-?(?:\d+\.\d*(?:e[-+]?\d+)?|\d+e[-+]?\d+|nan|inf))");
  auto split = [](const std::string& s, std::vector<std::string>& text, std::vector<double>& nums) {
    std::size_t last = 0;
    for (auto it = std::sregex_iterator(s.begin(), s.end(), number); it != std::sregex_iterator(); ++it) {
      text.push_back(s.substr(last, static_cast<std::size_t>(it->position()) - last));
      nums.push_back(std::stod(it->str()));
      last = static_cast<std::size_t>(it->position() + it->length());
    }
    text.push_back(s.substr(last));
  };
  std::vector<std::string> ta, tb;
  std::vector<double> na, nb;
  split(ours, ta, na);
  split(theirs, tb, nb);
  if (ta != tb || na.size() != nb.size()) return false;
  for (std::size_t i = 0; i < na.size(); ++i) {
    if (std::isnan(na[i]) || std::isnan(nb[i])) {
      if (!(std::isnan(na[i]) && std::isnan(nb[i]))) return false;
    } else if (std::fabs(na[i] - nb[i]) > 1e-6 + 1e-5 * std::fabs(nb[i])) {
      return false;
    }
  }
  return true;
}

json statuses(const json& report) {
  json out = json::array();
  for (const auto& s : report.at("statements")) out.push_back({s.at("index"), s.at("source"), s.at("status")});
  return out;
}

struct Both {
  json agtrace, torch;
  bool ran = false;  // false: skipped (reason WARNed)
};

// Runs the scenario with `agtrace run --format json --values` and its exported script with
// /usr/bin/python3, and checks that walks, printed lines and statuses agree.
Both export_and_compare(const std::string& scenario_path, const std::string& dir) {
  Both b;
  INFO("scenario " << scenario_path);
  auto run = run_agtrace("run " + quoted(scenario_path) + " --format json --values");
  REQUIRE((run.status == 0 || run.status == 1 || run.status == 3));
  b.agtrace = json::parse(run.out);
  for (const auto& e : b.agtrace.at("errors")) {
    if (e.at("kind") == "unsupported") {
      WARN(scenario_path << ": agtrace does not implement what statement " << e.at("statement")
                         << " uses (" << e.value("message", "") << "); not an export problem, skipped");
      return b;
    }
  }
  const std::string script = dir + "/" + fs::path(scenario_path).stem().string() + ".py";
  auto exp = run_agtrace("export --torch " + quoted(scenario_path) + " -o " + quoted(script));
  INFO("export stderr: " << exp.err);
  REQUIRE(exp.status == 0);
  REQUIRE(fs::exists(script));
  auto py = run_shell(std::string(kPython) + " " + quoted(script));
  INFO("script stderr: " << py.err);
  REQUIRE(py.status == 0);
  b.torch = json::parse(py.out);
  b.ran = true;

  CHECK(b.torch.at("format") == 1);
  CHECK(b.torch.at("scenario") == b.agtrace.at("scenario"));
  CHECK(b.torch.at("device") == b.agtrace.at("device"));
  CHECK(b.torch.at("harness_problems") == json::array());
  CHECK(statuses(b.torch) == statuses(b.agtrace));
  CHECK(b.torch.at("walks") == b.agtrace.at("walks"));
  const json& ap = b.agtrace.at("printed");
  const json& tp = b.torch.at("printed");
  CHECK(ap.size() == tp.size());
  for (std::size_t i = 0; i < std::min(ap.size(), tp.size()); ++i) {
    INFO("printed[" << i << "]: agtrace " << ap[i] << ", torch " << tp[i]);
    CHECK(printed_line_matches(ap[i].get<std::string>(), tp[i].get<std::string>()));
  }
  return b;
}

std::vector<std::string> all_scenarios() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(source_dir() + "/scenarios"))
    if (e.path().extension() == ".json") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("export --torch: every bundled scenario's script runs in PyTorch and agrees with agtrace", "[export]") {
  if (!torch_available()) {
    WARN("/usr/bin/python3 cannot import torch: the scripts cannot be run here");
    return;
  }
  const std::string dir = temp_dir();
  int compared = 0;
  for (const std::string& path : all_scenarios()) {
    INFO(path);
    if (export_and_compare(path, dir).ran) ++compared;
  }
  CHECK(compared > 0);
  fs::remove_all(dir);
}

TEST_CASE("export --torch: random initialisers, loops, raising programs and meta match agtrace", "[export]") {
  if (!torch_available()) {
    WARN("/usr/bin/python3 cannot import torch: the scripts cannot be run here");
    return;
  }
  const std::string dir = temp_dir();

  SECTION("random leaves get agtrace's exact values, so gradients agree exactly") {
    const std::string path = dir + "/random_leaves.json";
    spit(path, R"JSON({
      "name": "random_leaves", "seed": 1234,
      "tensors": {
        "x": {"shape": [2, 3], "requires_grad": true, "init": {"uniform": [-2, 2]}},
        "W": {"shape": [2, 3], "requires_grad": true, "init": {"normal": [0, 1]}},
        "d": {"shape": [3], "dtype": "float64", "requires_grad": true, "init": {"normal": [1, 3]}},
        "k": {"shape": [4], "dtype": "int64", "init": {"randint": [-5, 5]}},
        "m": {"shape": [2], "dtype": "bool", "init": {"values": [true, false]}},
        "big": {"shape": [2], "init": {"full": 1e39}}
      },
      "program": [
        "y = (x * W).sum()",
        "y.backward()",
        "(d * 3).sum().backward()",
        "print(k.dtype, k.shape, m.dtype, big.dtype)"
      ]
    })JSON");
    Both b = export_and_compare(path, dir);
    REQUIRE(b.ran);
    // x.grad is W's values and W.grad x's: exact when both sides start from the same values
    // (agtrace writes a float32 as its shortest float32 decimal, Python as a double).
    for (const char* leaf : {"x", "W"}) {
      INFO(leaf);
      const json& theirs = b.torch.at("grads").at(leaf).at("values");
      const json& ours = b.agtrace.at("grads").at(leaf).at("values");
      REQUIRE(theirs.size() == ours.size());
      for (std::size_t i = 0; i < ours.size(); ++i)
        CHECK(static_cast<float>(theirs[i].get<double>()) == static_cast<float>(ours[i].get<double>()));
    }
    CHECK(b.torch.at("memory").at("saved_bytes") == b.agtrace.at("memory").at("saved_bytes"));

    // The script's LEAF_VALUES are agtrace's leaf values, exactly (inf written as Infinity).
    const std::string script = dir + "/random_leaves.py";
    CHECK(slurp(script).find("Infinity") != std::string::npos);
    auto py = run_shell(std::string(kPython) + " -c " +
                        quoted("import json, math, runpy; g = runpy.run_path(\"" + script +
                               "\", run_name=\"not_main\"); print(json.dumps({k: [None if isinstance(v, float) and "
                               "not math.isfinite(v) else v for v in vs] for k, vs in g[\"LEAF_VALUES\"].items()}))"));
    INFO(py.err);
    REQUIRE(py.status == 0);
    const json values = json::parse(py.out);
    for (const auto& leaf : b.agtrace.at("leaves")) {
      INFO(leaf.at("name"));
      const json& theirs = values.at(leaf.at("name").get<std::string>());
      const json& ours = leaf.at("values");
      REQUIRE(theirs.size() == ours.size());
      const bool f32 = leaf.at("dtype") == "float32";
      for (std::size_t i = 0; i < ours.size(); ++i) {
        // JSON has no infinities: the report writes them as strings ("inf"), the script's
        // check above as null.
        if (ours[i].is_string()) CHECK((ours[i] == "inf" && theirs[i].is_null()));
        else if (f32) CHECK(static_cast<float>(theirs[i].get<double>()) == static_cast<float>(ours[i].get<double>()));
        else CHECK(theirs[i].get<double>() == ours[i].get<double>());
      }
    }
  }

  SECTION("blocks, a loop and an error outside try") {
    const std::string path = dir + "/blocks.json";
    spit(path, R"JSON({
      "name": "blocks",
      "tensors": {"x": {"shape": [3], "requires_grad": true, "init": {"arange": [1, 0.5]}}},
      "program": [
        {"repeat": 3, "body": ["z = (x * x).sum()", "z.backward()"]},
        {"no_grad": ["n = x * 2", {"enable_grad": ["g = x * 3", "print(g.requires_grad)"]}]},
        "print(n.requires_grad, x.grad.shape)",
        {"try": ["x.add_(1)", "print('never')"]},
        "e = x.exp()",
        "e.mul_(2)",
        "e.sum().backward()",
        "print('never either')"
      ]
    })JSON");
    Both b = export_and_compare(path, dir);
    REQUIRE(b.ran);
    CHECK(b.torch.at("raised") == true);
    CHECK(b.torch.at("statements").at(0).at("runs") == 3);
  }

  SECTION("Python's builtins beyond agtrace's names raise name_error in the script too") {
    // agtrace knows torch, F, print, shares_storage, len, float, int and bool; eval, exec,
    // open and __import__ are undefined names in both, so the script runs no code of them.
    const std::string path = dir + "/builtins.json";
    spit(path, R"JSON({
      "name": "builtins",
      "tensors": {"x": {"shape": [3], "init": {"arange": [1, 1]}}},
      "program": [
        {"try": ["e = eval('1 + 1')"]},
        {"try": ["o = open('/etc/hostname')"]},
        {"try": ["m = __import__('os')"]},
        "print(len(x), float(x[0]), int(x[1]), bool(x[2]))"
      ]
    })JSON");
    Both b = export_and_compare(path, dir);
    REQUIRE(b.ran);
    REQUIRE(b.torch.at("errors").size() == 3);
    for (const json& e : b.torch.at("errors")) CHECK(e.at("kind") == "name_error");
    CHECK(b.torch.at("printed").at(0) == "3 1.0 2 True");
  }

  SECTION("meta: no values are embedded, the graph is still built") {
    const std::string path = dir + "/meta.json";
    spit(path, R"JSON({
      "name": "meta", "device": "meta",
      "tensors": {"x": {"shape": [4096, 4096], "requires_grad": true, "init": {"normal": [0, 1]}}},
      "program": ["y = (x * x).sum()", "print(y.requires_grad)"]
    })JSON");
    Both b = export_and_compare(path, dir);
    REQUIRE(b.ran);
    CHECK(slurp(dir + "/meta.py").find("LEAF_VALUES = json.loads(r\"\"\"\n{}\n\"\"\")") != std::string::npos);
    CHECK(b.torch.at("memory").at("saved_bytes") == b.agtrace.at("memory").at("saved_bytes"));
  }
  fs::remove_all(dir);
}

TEST_CASE("export --torch embeds tools/torch_runner.py verbatim, after a header", "[export]") {
  const std::string runner = slurp(source_dir() + "/tools/torch_runner.py");
  REQUIRE_FALSE(runner.empty());
  // The configure-time embedding is current (CMake re-runs when the file changes).
  CHECK(std::string(agtrace::torch_runner_source()) == runner);

  const std::string path = source_dir() + "/scenarios/seed_walk.json";
  auto r = run_agtrace("export --torch " + quoted(path));
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  const std::string& s = r.out;
  CHECK(s.rfind("#!/usr/bin/env python3\n#", 0) == 0);
  CHECK(s.find("agtrace " AGTRACE_VERSION) != std::string::npos);
  CHECK(s.find("#   " + path + "\n") != std::string::npos);
  CHECK(s.find("#   python3 script.py\n") != std::string::npos);
  const std::size_t at = s.find(runner);
  REQUIRE(at != std::string::npos);
  CHECK(s.substr(0, at).find("import") == std::string::npos);  // only the header before it
  const std::size_t scenario_at = s.find("SCENARIO = json.loads(", at + runner.size());
  const std::size_t values_at = s.find("LEAF_VALUES = json.loads(", at + runner.size());
  const std::size_t call_at = s.find("sys.exit(main(SCENARIO, LEAF_VALUES))");
  CHECK(scenario_at != std::string::npos);
  CHECK(values_at > scenario_at);
  CHECK(call_at != std::string::npos);
  CHECK(call_at > values_at);
}

TEST_CASE("export -o writes the script atomically - stdout stays empty", "[export]") {
  const std::string dir = temp_dir();
  const std::string out = dir + "/walk.py";
  const std::string path = source_dir() + "/scenarios/seed_walk.json";
  spit(out, "old content that must be replaced as a whole\n");
  auto r = run_agtrace("export --torch " + quoted(path) + " -o " + quoted(out));
  REQUIRE(r.status == 0);
  CHECK(r.out.empty());
  const std::string written = slurp(out);
  CHECK(written.rfind("#!/usr/bin/env python3\n", 0) == 0);
  CHECK(written.find("old content") == std::string::npos);
  CHECK(written.find("#   python3 walk.py\n") != std::string::npos);
  // Same script as on stdout, but for the file name in the run line.
  auto printed = run_agtrace("export --torch " + quoted(path));
  std::string expected = printed.out;
  const std::string from = "#   python3 script.py\n";
  REQUIRE(expected.find(from) != std::string::npos);
  expected.replace(expected.find(from), from.size(), "#   python3 walk.py\n");
  CHECK(written == expected);
  CHECK(listing(dir) == std::vector<std::string>{"walk.py"});  // no temporary left behind

  auto missing_dir = run_agtrace("export --torch " + quoted(path) + " -o " + quoted(dir + "/no/such/dir/x.py"));
  CHECK(missing_dir.status == 2);
  CHECK(missing_dir.err.find(dir + "/no/such/dir") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("export: bad input exits 2 and writes nothing", "[export]") {
  const std::string dir = temp_dir();
  const std::string out = dir + "/out.py";
  const std::string scen = dir + "/s.json";
  auto refused = [&](const std::string& args) {
    auto r = run_agtrace(args);
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK_FALSE(fs::exists(out));
    return r;
  };

  SECTION("malformed JSON") {
    spit(scen, "{\"name\": \"t\",\n \"program\": [}");
    auto r = refused("export --torch " + quoted(scen) + " -o " + quoted(out));
    CHECK(r.err.find(scen) != std::string::npos);
  }
  SECTION("unknown field, named by its JSON pointer") {
    spit(scen, R"JSON({"name": "t", "tensors": {"x": {"shape": [2], "requires_gard": true}}, "program": []})JSON");
    auto r = refused("export --torch " + quoted(scen) + " -o " + quoted(out));
    CHECK(r.err.find("/tensors/x") != std::string::npos);
  }
  SECTION("a statement agtrace cannot parse") {
    spit(scen, R"JSON({"name": "t", "program": ["y = 1", "z = (y +* 2)"]})JSON");
    auto r = refused("export --torch " + quoted(scen) + " -o " + quoted(out));
    CHECK(r.err.find("statement 1, column 9") != std::string::npos);
  }
  SECTION("an existing output file is left untouched") {
    spit(out, "keep me\n");
    spit(scen, "not json");
    auto r = run_agtrace("export --torch " + quoted(scen) + " -o " + quoted(out));
    CHECK(r.status == 2);
    CHECK(slurp(out) == "keep me\n");
    fs::remove(out);
  }
  SECTION("a call run would stop at as unsupported, with validate's message") {
    spit(scen, R"JSON({"name": "t", "program": ["y = 1", "x = __import__('os').system('touch pwned')"]})JSON");
    auto r = refused("export --torch " + quoted(scen) + " -o " + quoted(out));
    auto v = run_agtrace("validate " + quoted(scen));
    CHECK(v.status == 2);
    CHECK(r.err == v.err);
    CHECK(r.err.find("/program/1: statement 1, column 5: 'Tensor.system' is not an operation agtrace supports") !=
          std::string::npos);
    CHECK_FALSE(fs::exists(dir + "/pwned"));
  }
  SECTION("usage errors") {
    refused("export " + quoted(source_dir() + "/scenarios/seed_walk.json") + " -o " + quoted(out));  // no --torch
    refused("export --torch");                                                                        // no scenario
    refused("export --torch " + quoted(dir + "/missing.json") + " -o " + quoted(out));
  }
  fs::remove_all(dir);
}

TEST_CASE("export --help shows an example", "[export]") {
  auto h = run_agtrace("export --help");
  CHECK(h.status == 0);
  CHECK(h.out.find("Example") != std::string::npos);
  CHECK(h.out.find("agtrace export --torch scenarios/") != std::string::npos);
  CHECK(h.out.find("--torch") != std::string::npos);
  CHECK(h.out.find("-o,--output") != std::string::npos);
}
