// What agtrace does at the edges of its input and output: a stdout that fails or whose
// reader left, signals while temporary files exist, a Graphviz render that never ends,
// inputs that are not regular files or are nested without bound, two scenarios sharing a
// golden name, and text XML 1.0 cannot carry. Every file lives in a temporary folder; no
// test writes to a device.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "support/command.hpp"

namespace fs = std::filesystem;
using namespace agtrace::test;

namespace {
const char* kSmall = R"JSON({"name": "small", "tensors": {"x": {"shape": [2, 3], "requires_grad": true}},
  "program": ["y = (x * 2).sum()", "y.backward()"]})JSON";
// Its text report with --values is a few MiB: larger than a pipe's buffer, so a reader
// that leaves after one byte is gone before agtrace has written it all.
const char* kBig = R"JSON({"name": "big", "tensors": {"x": {"shape": [300000], "requires_grad": true}},
  "program": ["y = (x * 2).sum()", "y.backward()"]})JSON";

std::string bin() { return std::string("NO_COLOR=1 ") + AGTRACE_BINARY; }

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  return out;
}

// A stand-in for Graphviz's dot on PATH: `body` is its shell script.
std::string fake_dot_dir(const std::string& dir, const std::string& body) {
  const std::string bindir = dir + "/bin";
  fs::create_directories(bindir);
  spit(bindir + "/dot", "#!/bin/sh\n" + body + "\n");
  fs::permissions(bindir + "/dot", fs::perms::owner_all);
  return bindir;
}
}  // namespace

TEST_CASE("a stdout write error is exit 2 with a message", "[cli][robust]") {
  const std::string dir = temp_dir();
  spit(dir + "/s.json", kSmall);
  spit(dir + "/big.json", kBig);
  SECTION("stdout closed") {
    auto r = run_shell("(" + bin() + " run " + dir + "/s.json >&-)");
    CHECK(r.status == 2);
    CHECK(r.err.find("cannot write to standard output: it is closed") != std::string::npos);
  }
  SECTION("a file past its size limit, as a full disk") {
    // ulimit -f 1: writes past 1 KiB fail with EFBIG once SIGXFSZ is ignored.
    auto r = run_shell("(ulimit -f 1; trap '' XFSZ; " + bin() + " run " + dir + "/big.json --values > " + dir +
                       "/out.txt)");
    CHECK(r.status == 2);
    CHECK(r.err.find("cannot write to standard output: File too large") != std::string::npos);
  }
  SECTION("a report file past its size limit: the write error, and no file") {
    for (const std::string format : {"text", "json"}) {
      auto r = run_shell("(ulimit -f 1; trap '' XFSZ; " + bin() + " run " + dir + "/big.json --values --format " +
                         format + " -o " + dir + "/report." + format + ")");
      CHECK(r.status == 2);
      CHECK(r.err.find("cannot write: File too large") != std::string::npos);
      CHECK_FALSE(fs::exists(dir + "/report." + format));
    }
    bool temporary_left = false;
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.path().filename().string().find("report.") != std::string::npos) temporary_left = true;  // .report.text.tmp.PID
    CHECK_FALSE(temporary_left);
  }
  SECTION("check's summary lines are checked too") {
    auto r = run_shell("(" + bin() + " check " + dir + "/s.json >&-)");
    CHECK(r.status == 2);
    CHECK(r.err.find("cannot write to standard output") != std::string::npos);
  }
}

TEST_CASE("a reader that leaves ends agtrace silently, as it ends cat", "[cli][robust]") {
  const std::string dir = temp_dir();
  spit(dir + "/big.json", kBig);
  // With SIGPIPE at its default and with it ignored by the parent (as some CI runners
  // start their jobs): the same quiet end, killed by SIGPIPE (141), nothing on stderr, and
  // the --dot file still written in full.
  for (const std::string trap : {"", "trap '' PIPE; "}) {
    INFO("prefix: " << trap);
    fs::remove(dir + "/g.dot");
    auto r = run_shell("{ " + trap + "(" + bin() + " run " + dir + "/big.json --values --dot " + dir +
                       "/g.dot; echo $? > " + dir + "/status) | head -c 1; }");
    CHECK(r.out.size() == 1);
    CHECK(r.err.empty());
    CHECK(slurp(dir + "/status") == "141\n");
    CHECK(slurp(dir + "/g.dot").find("\n}\n") != std::string::npos);
  }
}

namespace {
// Starts `agtrace run s.json --svg out/g.svg` with a dot that never finishes, waits until
// the render's temporary DOT file exists, then sends `sig`.
void interrupt_render(int sig) {
  const std::string dir = temp_dir();
  spit(dir + "/s.json", kSmall);
  fs::create_directories(dir + "/out");
  fs::create_directories(dir + "/tmp");
  const std::string path = fake_dot_dir(dir, "exec sleep 30") + ":" + std::getenv("PATH");
  const std::string sc = dir + "/s.json", svg = dir + "/out/g.svg", tmp = dir + "/tmp";
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setenv("PATH", path.c_str(), 1);
    ::setenv("TMPDIR", tmp.c_str(), 1);
    ::signal(SIGINT, SIG_DFL);
    ::execl(AGTRACE_BINARY, AGTRACE_BINARY, "run", sc.c_str(), "--svg", svg.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (entries(dir + "/out").empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // dot started, stderr file made
  CHECK(!entries(dir + "/out").empty());
  CHECK(!entries(tmp).empty());
  ::kill(pid, sig);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == sig);
  CHECK(entries(dir + "/out").empty());  // .agtrace-PID.dot and .agtrace-PID.svg removed
  CHECK(entries(tmp).empty());           // the captured stderr of dot removed
}
}  // namespace

TEST_CASE("SIGTERM and SIGINT remove the temporary files and end as the signal", "[cli][robust]") {
  SECTION("SIGTERM") { interrupt_render(SIGTERM); }
  SECTION("SIGINT") { interrupt_render(SIGINT); }
}

TEST_CASE("a Graphviz render has a time limit, and never replaces a symlink", "[cli][robust]") {
  const std::string dir = temp_dir();
  spit(dir + "/s.json", kSmall);
  SECTION("--render-timeout") {
    const std::string path = fake_dot_dir(dir, "exec sleep 30");
    fs::create_directories(dir + "/out");
    const auto t0 = std::chrono::steady_clock::now();
    auto r = run_shell("PATH=" + path + ":$PATH " + bin() + " run " + dir + "/s.json --svg " + dir +
                       "/out/g.svg --render-timeout 0.5");
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));
    CHECK(r.status == 2);
    CHECK(r.err.find("did not finish within 0.5 s and was stopped") != std::string::npos);
    CHECK(entries(dir + "/out").empty());
  }
  SECTION("a symlink target") {
    const std::string path = fake_dot_dir(dir, "printf '<svg/>' > \"$4\"");
    spit(dir + "/real.svg", "old");
    fs::create_symlink(dir + "/real.svg", dir + "/link.svg");
    auto r = run_shell("PATH=" + path + ":$PATH " + bin() + " run " + dir + "/s.json --svg " + dir + "/link.svg");
    CHECK(r.status == 0);
    CHECK(fs::is_symlink(dir + "/link.svg"));
    CHECK(slurp(dir + "/real.svg") == "<svg/>");
  }
}

TEST_CASE("inputs that are not regular files are read with a bound", "[cli][robust]") {
  const std::string dir = temp_dir();
  spit(dir + "/s.json", kSmall);
  SECTION("a FIFO nobody writes to is an error, not a wait forever") {
    REQUIRE(::mkfifo((dir + "/fifo").c_str(), 0600) == 0);
    auto r = run_shell(std::string("timeout 60 ") + AGTRACE_BINARY + " run " + dir + "/fifo");
    CHECK(r.status == 2);
    CHECK(r.err.find("a FIFO nobody wrote to within 10 s") != std::string::npos);
  }
  SECTION("a FIFO with a writer, and a shell's <(gen), are read") {
    REQUIRE(::mkfifo((dir + "/fifo").c_str(), 0600) == 0);
    // The writer is bounded too (and keeps no descriptor of the test's output), so a
    // failing run leaves no process blocked on the FIFO.
    auto fifo = run_shell("(timeout 20 sh -c 'cat " + dir + "/s.json > " + dir + "/fifo' > " + dir + "/writer.log 2>&1 &) ; " +
                          "timeout 60 " + AGTRACE_BINARY + " run " + dir + "/fifo");
    CHECK(fifo.status == 0);
    CHECK(fifo.out.find("small") != std::string::npos);
    auto subst = run_shell("bash -c '" + bin() + " run <(sleep 1; cat " + dir + "/s.json)'");
    CHECK(subst.status == 0);
    CHECK(subst.out.find("small") != std::string::npos);
    auto diff = run_shell("bash -c '" + bin() + " diff <(cat " + dir + "/s.json) " + dir + "/s.json'");
    CHECK(diff.status == 0);
  }
  SECTION("/dev/zero as a scenario, a diff input or a golden stops at the size limit") {
    auto sc = run_agtrace("run /dev/zero");
    CHECK(sc.status == 2);
    CHECK(sc.err.find("the scenario is larger than 16 MiB") != std::string::npos);
    auto diff = run_agtrace("diff /dev/zero " + dir + "/s.json");
    CHECK(diff.status == 2);
    CHECK(diff.err.find("/dev/zero: the report is larger than 256 MiB") != std::string::npos);
    fs::create_directories(dir + "/golden");
    fs::create_symlink("/dev/zero", dir + "/golden/small.json");
    auto golden = run_agtrace("check " + dir + "/s.json --golden " + dir + "/golden");
    CHECK(golden.status == 1);
    CHECK(golden.out.find("bad input: [limit] " + dir + "/golden/small.json: the golden report is larger than 256 MiB") !=
          std::string::npos);
  }
  SECTION("a directory as a golden or a diff input") {
    fs::create_directories(dir + "/golden/small.json");
    auto golden = run_agtrace("check " + dir + "/s.json --golden " + dir + "/golden");
    CHECK(golden.status == 1);
    CHECK(golden.out.find("it is a directory") != std::string::npos);
    auto diff = run_agtrace("diff " + dir + " " + dir + "/s.json");
    CHECK(diff.status == 2);
    CHECK(diff.err.find("it is a directory") != std::string::npos);
  }
}

TEST_CASE("goldens and diff inputs are parsed with a depth bound and validated", "[cli][robust]") {
  const std::string dir = temp_dir();
  spit(dir + "/s.json", kSmall);
  fs::create_directories(dir + "/golden");
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  SECTION("a golden nested 200,000 deep") {
    spit(dir + "/golden/small.json", deep);
    auto r = run_agtrace("check " + dir + "/s.json --golden " + dir + "/golden");
    CHECK(r.status == 1);
    CHECK(r.out.find("bad input: [limit] " + dir + "/golden/small.json: /0/0/0/") != std::string::npos);
    CHECK(r.out.find("JSON nested deeper than 512 levels") != std::string::npos);
  }
  SECTION("a golden that is [1]") {
    spit(dir + "/golden/small.json", "[1]");
    auto r = run_agtrace("check " + dir + "/s.json --golden " + dir + "/golden");
    CHECK(r.status == 1);
    CHECK(r.out.find("a golden report is a JSON object (agtrace's JSON report), found array") != std::string::npos);
    CHECK(r.out.find("erase") == std::string::npos);
  }
  SECTION("a golden of the wrong shape") {
    spit(dir + "/golden/small.json", R"({"nodes": 3})");
    auto r = run_agtrace("check " + dir + "/s.json --golden " + dir + "/golden");
    CHECK(r.status == 1);
    CHECK(r.out.find("bad input: [schema]") != std::string::npos);
    CHECK(r.out.find("could not run") == std::string::npos);
  }
  SECTION("a diff input nested 200,000 deep") {
    spit(dir + "/deep.json", deep);
    auto r = run_agtrace("diff " + dir + "/deep.json " + dir + "/s.json");
    CHECK(r.status == 2);
    CHECK(r.err.find("[limit] " + dir + "/deep.json: /0/0/") != std::string::npos);
  }
}

TEST_CASE("two scenarios with one name in a check run both fail, neither golden overwritten", "[cli][robust]") {
  const std::string dir = temp_dir();
  fs::create_directories(dir + "/sc");
  spit(dir + "/sc/a.json", R"JSON({"name": "same", "tensors": {"x": {"shape": [2]}}, "program": ["y = x * 2"]})JSON");
  spit(dir + "/sc/b.json", R"JSON({"name": "same", "tensors": {"x": {"shape": [3]}}, "program": ["y = x * 3"]})JSON");
  auto r = run_agtrace("check " + dir + "/sc --golden " + dir + "/golden --update");
  INFO(r.out);
  CHECK(r.status == 1);
  CHECK(r.out.find("0 passed, 2 failed") != std::string::npos);
  CHECK(r.out.find("the scenario name 'same' is also the name of " + dir + "/sc/a.json") != std::string::npos);
  CHECK(r.out.find("UPDATED") == std::string::npos);
  // The one golden written is a's: shape [2].
  CHECK(slurp(dir + "/golden/same.json").find("[\n        3\n      ]") == std::string::npos);
}

TEST_CASE("JUnit XML carries no character XML 1.0 forbids", "[cli][robust]") {
  const std::string dir = temp_dir();
  // The failure message quotes the printed U+FFFE (and a control character), which XML 1.0
  // cannot carry even as a character reference.
  spit(dir + "/p.json", R"JSON({"name": "p", "tensors": {}, "program": ["print('a\ufffeb\\x01c')"],
    "expect": {"printed": ["something else"]}})JSON");
  auto r = run_agtrace("check " + dir + "/p.json --junit " + dir + "/j.xml");
  CHECK(r.status == 1);
  const std::string xml = slurp(dir + "/j.xml");
  INFO(xml);
  CHECK(xml.find("\xEF\xBF\xBE") == std::string::npos);
  CHECK(xml.find('\x01') == std::string::npos);
  CHECK(xml.find("a\\ufffeb") != std::string::npos);
}
