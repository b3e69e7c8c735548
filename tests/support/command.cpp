#include "support/command.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <vector>

namespace agtrace::test {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void spit(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
}

namespace {
// The directories temp_dir() made, removed when the test process exits (they were left
// behind: thousands of /tmp/agtrace-test-* after a few suite runs).
std::vector<std::string>& made_dirs() {
  static std::vector<std::string> dirs;
  return dirs;
}
void remove_made_dirs() {
  for (const std::string& d : made_dirs()) {
    std::error_code ignored;
    std::filesystem::remove_all(d, ignored);
  }
}
}  // namespace

std::string temp_dir() {
  char tmpl[] = "/tmp/agtrace-test-XXXXXX";
  const char* d = ::mkdtemp(tmpl);
  if (!d) return "/tmp";
  if (made_dirs().empty()) std::atexit(remove_made_dirs);
  made_dirs().push_back(d);
  return d;
}

std::string source_dir() { return AGTRACE_SOURCE_DIR; }

CommandResult run_shell(const std::string& command) {
  std::string dir = temp_dir();
  std::string full = command + " >" + dir + "/out 2>" + dir + "/err </dev/null";
  int raw = std::system(full.c_str());
  CommandResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = slurp(dir + "/out");
  r.err = slurp(dir + "/err");
  std::system(("rm -rf " + dir).c_str());
  return r;
}

CommandResult run_agtrace(const std::string& args) {
  return run_shell(std::string("NO_COLOR=1 ") + AGTRACE_BINARY + " " + args);
}

}  // namespace agtrace::test
