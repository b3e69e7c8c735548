// agtrace check SCENARIO...|DIR: run each scenario and assert its expect block; with
// --golden DIR also compare the whole JSON report with a stored golden; --junit writes
// JUnit XML. A scenario fails on an expect fact that differs, on an error raised outside a
// `try` block that expect.errors does not name (unsupported outside `try` always), or when
// its file or golden is bad input. Exit 0 all pass, 1 a scenario failed, 2 a usage error.
#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

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
  int jobs = 1;
  std::map<std::string, std::string> golden_owner;  // scenario name -> its first file (with --golden)
};

struct CaseResult {
  std::string name, file;
  std::vector<std::string> failures;
  bool skipped = false;
  bool loaded = false;  // the scenario file was read: `name` is its name, not the file's stem
  std::string note;
  double seconds = 0;  // load and run
  std::string log;     // lines printed before the summary ("UPDATED golden ...")
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
// opts.golden_owner: the first file of each scenario name in this run. Two files with one
// name would share DIR/<name>.json, the second comparing with (or, with --update,
// overwriting) the first one's golden, so the second is refused before it runs.
void check_one(const std::string& f, const CheckOpts& opts, CaseResult& c) {
  auto sc = load_scenario_file(f);
  c.name = sc->name;
  c.loaded = true;
  if (!opts.golden_dir.empty()) {
    const auto owner = opts.golden_owner.find(sc->name);
    std::error_code ignored;
    if (owner != opts.golden_owner.end() && owner->second != f && !std::filesystem::equivalent(owner->second, f, ignored)) {
      InputError e("schema", "the scenario name '" + sc->name + "' is also the name of " + owner->second +
                                 ": both would use the golden " + opts.golden_dir + "/" + sc->name +
                                 ".json (give one of them another name)");
      e.file = f;
      e.json_pointer = "/name";
      throw e;
    }
  }
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
        c.log += (exists ? "UPDATED " : "CREATED ") + golden + "\n";
        for (const auto& d : diffs) c.log += "     " + d + "\n";
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

// One scenario's case, bad input and internal errors included: never throws.
CaseResult run_case(const std::string& f, const CheckOpts& opts) {
  CaseResult c;
  c.name = std::filesystem::path(f).stem().string();
  c.file = f;
  const auto started = std::chrono::steady_clock::now();
  // A file that cannot be read, parsed or validated, or a golden that cannot, is this
  // scenario's failure: the others still run and the JUnit file is still written.
  try {
    check_one(f, opts, c);
  } catch (const InputError& e) {
    c.failures.push_back("bad input: [" + e.kind + "] " + e.describe());
  } catch (const std::exception& e) {
    c.failures.push_back(std::string("could not run: ") + e.what());
  }
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return c;
}

nlohmann::json case_json(const CaseResult& c) {
  return {{"name", c.name}, {"loaded", c.loaded}, {"failures", c.failures}, {"skipped", c.skipped}, {"note", c.note},
          {"seconds", c.seconds}, {"log", c.log}};
}

// -j N: N worker processes (fork), worker k running scenarios k, k+N, k+2N, ... and sending
// each case back as one line of JSON through a pipe; the cases are printed in file order,
// so the output is the serial run's. Processes, not threads: a run uses process-wide state
// (the live-node registry, the run's generator, the interned tables). When a worker dies,
// the scenario it was running fails, named by the signal, and a new worker goes on with the
// rest of its share.
std::vector<CaseResult> run_cases_in_processes(const std::vector<std::string>& files, const CheckOpts& opts) {
  struct Worker {
    pid_t pid;
    int fd;
    size_t next;  // the index of the case it is running: its results arrive in order
    std::string data;
  };
  const size_t stride = static_cast<size_t>(opts.jobs);
  std::vector<CaseResult> cases(files.size());
  std::cout.flush();
  auto start = [&](size_t first) -> Worker {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error(std::string("check -j: pipe: ") + std::strerror(errno));
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error(std::string("check -j: fork: ") + std::strerror(errno));
    if (pid == 0) {
      close(fds[0]);
      for (size_t i = first; i < files.size(); i += stride) {
        const std::string line = case_json(run_case(files[i], opts)).dump() + "\n";
        for (size_t at = 0; at < line.size();) {
          const ssize_t n = write(fds[1], line.data() + at, line.size() - at);
          if (n <= 0) _exit(3);
          at += static_cast<size_t>(n);
        }
      }
      _exit(0);
    }
    close(fds[1]);
    return {pid, fds[0], first, ""};
  };
  std::vector<Worker> running;
  for (size_t k = 0; k < stride && k < files.size(); ++k) running.push_back(start(k));
  while (!running.empty()) {
    std::vector<pollfd> polled;
    for (const Worker& w : running) polled.push_back({w.fd, POLLIN, 0});
    if (poll(polled.data(), polled.size(), -1) < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("check -j: poll: ") + std::strerror(errno));
    }
    for (size_t i = polled.size(); i-- > 0;) {
      if (!polled[i].revents) continue;
      Worker& w = running[i];
      char buf[65536];
      const ssize_t n = read(w.fd, buf, sizeof buf);
      if (n > 0) {
        w.data.append(buf, static_cast<size_t>(n));
        for (size_t eol; (eol = w.data.find('\n')) != std::string::npos; w.data.erase(0, eol + 1), w.next += stride) {
          const nlohmann::json j = nlohmann::json::parse(w.data.substr(0, eol));
          CaseResult& c = cases[w.next];
          c.file = files[w.next];
          c.name = j["name"].get<std::string>();
          c.loaded = j["loaded"].get<bool>();
          c.failures = j["failures"].get<std::vector<std::string>>();
          c.skipped = j["skipped"].get<bool>();
          c.note = j["note"].get<std::string>();
          c.seconds = j["seconds"].get<double>();
          c.log = j["log"].get<std::string>();
        }
        continue;
      }
      close(w.fd);
      int status = 0;
      waitpid(w.pid, &status, 0);
      const size_t stopped_at = w.next;
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
      if (stopped_at >= files.size()) continue;  // its share is done
      CaseResult& c = cases[stopped_at];
      c.file = files[stopped_at];
      c.name = std::filesystem::path(c.file).stem().string();
      c.failures.push_back(WIFSIGNALED(status) ? "crashed: " + std::string(strsignal(WTERMSIG(status)))
                                               : "could not run: exit status " + std::to_string(WEXITSTATUS(status)));
      if (stopped_at + stride < files.size()) running.push_back(start(stopped_at + stride));
    }
  }
  return cases;
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
  cmd->add_option("-j,--jobs", opts->jobs, "run N scenarios at once, each in its own process (same output)")
      ->check(CLI::Range(1, 256));
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
    // Each scenario name's golden belongs to the first file with that name (read before any
    // runs, so that -j's workers agree on it).
    if (!opts->golden_dir.empty()) {
      for (const std::string& f : files) {
        try {
          opts->golden_owner.emplace(load_scenario_file(f)->name, f);
        } catch (const std::exception&) {
          // A bad file is reported when its case runs.
        }
      }
    }
    if (opts->jobs > 1 && files.size() > 1) {
      cases = run_cases_in_processes(files, *opts);
    } else {
      for (const std::string& f : files) cases.push_back(run_case(f, *opts));
    }
    for (const auto& c : cases) std::cout << c.log;
    // The first of two scenarios sharing a name fails too: its golden is ambiguous, so its
    // pass would mean nothing.
    for (CaseResult& c : cases) {
      const auto owner = opts->golden_owner.find(c.name);
      if (owner == opts->golden_owner.end() || owner->second != c.file) continue;
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
