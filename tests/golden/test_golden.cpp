// Golden reports: for every scenario in scenarios/, the text, JSON and DOT reports are
// compared with tests/golden/<name>.{txt,json,dot}. A mismatch writes <file>.new next to
// the golden and names the first differing line; `scripts/update-goldens` approves.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <vector>

#include "support/command.hpp"

namespace fs = std::filesystem;
using namespace agtrace::test;

namespace {

std::vector<fs::path> scenario_files() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(source_dir()) / "scenarios"))
    if (e.path().extension() == ".json") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// The version string is volatile: it changes with every release, not with behaviour.
std::string without_volatile(const std::string& s) {
  std::istringstream in(s);
  std::string line, out;
  while (std::getline(in, line))
    if (line.find("\"agtrace_version\"") == std::string::npos) out += line + "\n";
  return out;
}

std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream ia(a), ib(b);
  std::string la, lb;
  for (int n = 1;; ++n) {
    bool ea = !std::getline(ia, la), eb = !std::getline(ib, lb);
    if (ea && eb) return "";
    if (ea != eb || la != lb)
      return "line " + std::to_string(n) + ":\n  golden: " + (ea ? "<end>" : la) + "\n  now:    " + (eb ? "<end>" : lb);
  }
}

void compare_golden(const fs::path& golden, const std::string& actual) {
  const bool update = std::getenv("AGTRACE_UPDATE_GOLDENS") != nullptr;
  if (update) {
    spit(golden.string(), actual);
    return;
  }
  INFO("golden " << golden.string());
  REQUIRE(fs::exists(golden));
  const std::string expected = slurp(golden.string());
  const std::string diff = first_difference(without_volatile(expected), without_volatile(actual));
  if (!diff.empty()) spit(golden.string() + ".new", actual);
  INFO("first difference at " << diff << "\n(new output written to " << golden.string() << ".new; approve with scripts/update-goldens)");
  CHECK(diff.empty());
}

}  // namespace

TEST_CASE("every scenario has golden text, JSON and DOT reports", "[golden]") {
  const auto files = scenario_files();
  REQUIRE(files.size() >= 7);
  const fs::path golden_dir = fs::path(source_dir()) / "tests" / "golden";
  const std::string tmp = temp_dir();
  for (const auto& f : files) {
    const std::string name = f.stem().string();
    SECTION(name) {
      auto text = run_agtrace("run " + f.string() + " --values --color never");
      INFO(text.err);
      REQUIRE((text.status == 0 || text.status == 3));
      compare_golden(golden_dir / (name + ".txt"), text.out);

      auto json = run_agtrace("run " + f.string() + " --values --format json");
      REQUIRE(json.status == text.status);
      compare_golden(golden_dir / (name + ".json"), json.out);

      const std::string dot_path = tmp + "/" + name + ".dot";
      auto dot = run_agtrace("run " + f.string() + " --format json -o /dev/null --dot " + dot_path);
      REQUIRE(dot.status == text.status);
      compare_golden(golden_dir / (name + ".dot"), slurp(dot_path));
    }
  }
}

TEST_CASE("the golden comparison detects a changed report", "[golden]") {
  // The comparison itself must be able to fail.
  CHECK(first_difference("a\nb\n", "a\nb\n").empty());
  CHECK_FALSE(first_difference("a\nb\n", "a\nc\n").empty());
  CHECK_FALSE(first_difference("a\n", "a\nb\n").empty());
  CHECK(without_volatile("{\n  \"agtrace_version\": \"1\",\n  \"x\": 1\n}\n") == "{\n  \"x\": 1\n}\n");
}
