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
#include <map>

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
  bool loaded = false;  // the scenario file was read: `name` is its name, not the file's stem
  std::string note;
  double seconds = 0;  // load and run
};

// JUnit's time attribute: seconds with millisecond resolution.
std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

// Text for an XML 1.0 attribute value. XML 1.0 allows only #x9 | #xA | #xD | [#x20-#xD7FF]
// | [#xE000-#xFFFD] | [#x10000-#x10FFFF], not even as character references, so a
// character outside that set is written as the Python escape that names it (\x01, \ufffe),
// and a byte that is not UTF-8 as \xNN: the file stays well-formed and the text readable.
// Tab, newline and carriage return are character references, which attribute-value
// normalization keeps (a literal newline would be read back as a space).
std::string xml_escape(const std::string& s) {
  std::string out;
  auto escaped = [&out](const char* fmt, unsigned v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, fmt, v);
    out += buf;
  };
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += "&apos;"; break;
        case '\t': out += "&#9;"; break;
        case '\n': out += "&#10;"; break;
        case '\r': out += "&#13;"; break;
        default:
          if (c < 0x20) escaped("\\x%02x", c);
          else out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    // One UTF-8 sequence: its length from the lead byte, then continuation bytes, and no
    // overlong form, surrogate or value past U+10FFFF.
    const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    unsigned cp = len == 4 ? c & 0x07u : len == 3 ? c & 0x0Fu : c & 0x1Fu;
    bool valid = len != 0 && i + len <= s.size();
    for (size_t k = 1; valid && k < len; ++k) {
      const unsigned char cc = static_cast<unsigned char>(s[i + k]);
      valid = (cc & 0xC0) == 0x80;
      cp = (cp << 6) | (cc & 0x3Fu);
    }
    const unsigned min_cp = len == 4 ? 0x10000 : len == 3 ? 0x800 : 0x80;
    if (!valid || cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      escaped("\\x%02x", c);
      ++i;
      continue;
    }
    if (cp == 0xFFFE || cp == 0xFFFF) escaped("\\u%04x", cp);
    else out.append(s, i, len);
    i += len;
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
// `golden_owner`: the file each scenario name came from so far in this run. Two files with
// one name would share DIR/<name>.json, the second comparing with (or, with --update,
// overwriting) the first one's golden, so the second is refused before it runs.
void check_one(const std::string& f, const CheckOpts& opts, std::map<std::string, std::string>& golden_owner,
               CaseResult& c) {
  auto sc = load_scenario_file(f);
  c.name = sc->name;
  c.loaded = true;
  if (!opts.golden_dir.empty()) {
    const auto [owner, fresh] = golden_owner.emplace(sc->name, f);
    std::error_code ignored;
    if (!fresh && !std::filesystem::equivalent(owner->second, f, ignored)) {
      InputError e("schema", "the scenario name '" + sc->name + "' is also the name of " + owner->second +
                                 ": both would use the golden " + opts.golden_dir + "/" + sc->name +
                                 ".json (give one of them another name)");
      e.file = f;
      e.json_pointer = "/name";
      throw e;
    }
  }
  RunResult r = run_scenario(*sc, {});
  for (const auto& fl : check_expect(r)) c.failures.push_back(fl.fact + ": expected " + fl.expected + ", got " + fl.actual);
  const std::vector<CheckFailure> raised = check_raised(r);
  for (const auto& fl : raised) c.failures.push_back(fl.fact + ": expected " + fl.expected + ", got " + fl.actual);
  if (!opts.golden_dir.empty()) {
    const std::string golden = opts.golden_dir + "/" + sc->name + ".json";
    const nlohmann::json now = nlohmann::json::parse(report_json(r, true).dump());
    const bool exists = std::filesystem::exists(golden);
    std::vector<std::string> diffs;
    if (exists) {
      // Bounded as every input is (size, nesting), and checked to be a report before it is
      // compared: a golden that is `[1]` is this scenario's bad input, not an internal error.
      const nlohmann::json old(parse_json_bounded(read_file(golden, kMaxInputBytes, "golden report"), golden));
      if (!old.is_object()) {
        InputError err("schema", std::string("a golden report is a JSON object (agtrace's JSON report), found ") +
                                     old.type_name());
        err.file = golden;
        throw err;
      }
      try {
        diffs = report_differences(old, now);
      } catch (const nlohmann::json::exception& e) {
        InputError err("schema", std::string("the golden does not have the shape of agtrace's JSON report: ") + e.what());
        err.file = golden;
        throw err;
      }
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
    std::map<std::string, std::string> golden_owner;
    for (const std::string& f : files) {
      CaseResult c;
      c.name = std::filesystem::path(f).stem().string();
      c.file = f;
      const auto started = std::chrono::steady_clock::now();
      // A file that cannot be read, parsed or validated, or a golden that cannot, is this
      // scenario's failure: the others still run and the JUnit file is still written.
      try {
        check_one(f, *opts, golden_owner, c);
      } catch (const InputError& e) {
        c.failures.push_back("bad input: [" + e.kind + "] " + e.describe());
      } catch (const std::exception& e) {
        c.failures.push_back(std::string("could not run: ") + e.what());
      }
      c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      cases.push_back(c);
    }
    // The first of two scenarios sharing a name fails too: its golden is ambiguous, so its
    // pass would mean nothing.
    for (CaseResult& c : cases) {
      const auto owner = golden_owner.find(c.name);
      if (owner == golden_owner.end() || owner->second != c.file) continue;
      for (const CaseResult& other : cases) {
        std::error_code ignored;
        if (&other != &c && other.loaded && other.name == c.name && !std::filesystem::equivalent(other.file, c.file, ignored))
          c.failures.push_back("the scenario name '" + c.name + "' is also the name of " + other.file +
                               " (golden names must be unique)");
      }
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
