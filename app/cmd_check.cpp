// agtrace check SCENARIO...|DIR: run each scenario and assert its expect block; with
// --golden DIR also compare the whole JSON report with a stored golden; --junit writes
// JUnit XML. A scenario fails on an expect fact that differs, on an error raised outside a
// `try` block that expect.errors does not name (unsupported outside `try` always), or when
// its file or golden is bad input. Exit 0 all pass, 1 a scenario failed, 2 a usage error.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "commands.hpp"
#include "errors.hpp"
#include "interp/interpreter.hpp"
#include "report/golden_diff.hpp"
#include "report/report.hpp"
#include "scenario/scenario.hpp"
#include "util/atomic_file.hpp"

namespace agtrace::app {

namespace {

struct CheckOpts {
  std::vector<std::string> paths;
  std::string golden_dir;
  bool update = false;
  std::string junit;
};

struct CaseResult {
  std::string name, file;
  std::vector<std::string> failures;
  bool skipped = false;
  std::string note;
  double seconds = 0;  // load and run
};

// JUnit's time attribute: seconds with millisecond resolution.
std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if (c < 0x20 && c != '\n' && c != '\t') continue;  // not allowed in XML 1.0
        out += static_cast<char>(c);
    }
  }
  return out;
}

std::string junit_xml(const std::vector<CaseResult>& cases) {
  int failures = 0, skipped = 0;
  double total = 0;
  for (const auto& c : cases) {
    if (c.skipped) ++skipped;
    else if (!c.failures.empty()) ++failures;
    total += c.seconds;
  }
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += "<testsuites>\n  <testsuite name=\"agtrace check\" tests=\"" + std::to_string(cases.size()) + "\" failures=\"" +
       std::to_string(failures) + "\" skipped=\"" + std::to_string(skipped) + "\" time=\"" + seconds_text(total) +
       "\">\n";
  for (const auto& c : cases) {
    x += "    <testcase classname=\"agtrace\" name=\"" + xml_escape(c.name) + "\" file=\"" + xml_escape(c.file) + "\" time=\"" +
         seconds_text(c.seconds) + "\"";
    if (c.skipped) {
      x += ">\n      <skipped message=\"" + xml_escape(c.note) + "\"/>\n    </testcase>\n";
    } else if (c.failures.empty()) {
      x += "/>\n";
    } else {
      x += ">\n";
      for (const auto& f : c.failures) x += "      <failure message=\"" + xml_escape(f) + "\"/>\n";
      x += "    </testcase>\n";
    }
  }
  return x + "  </testsuite>\n</testsuites>\n";
}

// Runs one scenario and fills in what failed: its expect facts, what it raised outside a
// `try` block, its golden report.
void check_one(const std::string& f, const CheckOpts& opts, CaseResult& c) {
  auto sc = load_scenario_file(f);
  c.name = sc->name;
  RunResult r = run_scenario(*sc, {});
  for (const auto& fl : check_expect(r)) c.failures.push_back(fl.describe());
  const std::vector<CheckFailure> raised = check_raised(r);
  for (const auto& fl : raised) c.failures.push_back(fl.describe());
  if (!opts.golden_dir.empty()) {
    const std::string golden = opts.golden_dir + "/" + sc->name + ".json";
    const nlohmann::json now = nlohmann::json::parse(report_json(r, true).dump());
    const bool exists = std::filesystem::exists(golden);
    std::vector<std::string> diffs;
    if (exists) {
      nlohmann::json old;
      try {
        old = nlohmann::json::parse(read_file(golden));
      } catch (const nlohmann::json::exception& e) {
        InputError err("json", std::string("golden report is not valid JSON: ") + e.what());
        err.file = golden;
        throw err;
      }
      diffs = report_differences(old, now);
    }
    if (opts.update) {
      if (!exists || !diffs.empty()) {
        std::filesystem::create_directories(opts.golden_dir);
        write_file_atomic(golden, stable_report(now).dump(2) + "\n");
        std::cout << (exists ? "UPDATED " : "CREATED ") << golden << "\n";
        for (const auto& d : diffs) std::cout << "     " << d << "\n";
      }
    } else if (!exists) {
      c.failures.push_back("no golden report " + golden + " (create it with --update)");
    } else {
      for (const auto& d : diffs) c.failures.push_back("golden: " + d);
    }
  }
  if (sc->expect.empty() && opts.golden_dir.empty() && raised.empty()) {
    c.skipped = true;
    c.note = "no expect block";
  }
}

}  // namespace

Runner add_check(CLI::App& root) {
  auto opts = std::make_shared<CheckOpts>();
  CLI::App* cmd = root.add_subcommand(
      "check",
      "Run scenarios and assert their expect blocks (exit 1 when a fact differs).\n\n"
      "Examples:\n"
      "  agtrace check scenarios/\n"
      "  agtrace check scenarios/ --golden tests/golden-reports --junit check.xml\n"
      "  agtrace check scenarios/ --golden tests/golden-reports --update");
  cmd->add_option("scenarios", opts->paths, "scenario files or folders")->required();
  cmd->add_option("--golden", opts->golden_dir, "also compare each JSON report with DIR/<name>.json");
  cmd->add_flag("--update", opts->update, "with --golden: rewrite goldens that differ (atomically)");
  cmd->add_option("--junit", opts->junit, "write JUnit XML to FILE (one test case per scenario)");
  return [opts]() -> int {
    std::vector<std::string> files;
    for (const std::string& p : opts->paths) {
      if (std::filesystem::is_directory(p)) {
        std::vector<std::string> found;
        for (const auto& entry : std::filesystem::directory_iterator(p))
          if (entry.path().extension() == ".json") found.push_back(entry.path().string());
        std::sort(found.begin(), found.end());
        files.insert(files.end(), found.begin(), found.end());
      } else {
        files.push_back(p);
      }
    }
    if (opts->update && opts->golden_dir.empty()) throw InputError("usage", "--update needs --golden DIR");
    std::vector<CaseResult> cases;
    for (const std::string& f : files) {
      CaseResult c;
      c.name = std::filesystem::path(f).stem().string();
      c.file = f;
      const auto started = std::chrono::steady_clock::now();
      // A file that cannot be read, parsed or validated, or a golden that cannot, is this
      // scenario's failure: the others still run and the JUnit file is still written.
      try {
        check_one(f, *opts, c);
      } catch (const InputError& e) {
        c.failures.push_back("bad input: [" + e.kind + "] " + e.describe());
      } catch (const std::exception& e) {
        c.failures.push_back(std::string("could not run: ") + e.what());
      }
      c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      cases.push_back(c);
    }
    int passed = 0, failed = 0, skipped = 0;
    for (const auto& c : cases) {
      if (c.skipped) {
        std::cout << "SKIP " << c.file << " (" << c.note << ")\n";
        ++skipped;
      } else if (c.failures.empty()) {
        std::cout << "PASS " << c.file << "\n";
        ++passed;
      } else {
        std::cout << "FAIL " << c.file << "\n";
        for (const auto& f : c.failures) std::cout << "     " << f << "\n";
        ++failed;
      }
    }
    std::cout << passed << " passed, " << failed << " failed";
    if (skipped) std::cout << ", " << skipped << " skipped";
    std::cout << "\n";
    if (!opts->junit.empty()) write_file_atomic(opts->junit, junit_xml(cases));
    return failed ? kCheckFailed : kOk;
  };
}

}  // namespace agtrace::app
