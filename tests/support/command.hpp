// Runs the agtrace binary (or any command) for CLI and golden tests, capturing stdout,
// stderr and the exit status through temporary files.
#pragma once
#include <string>

namespace agtrace::test {

struct CommandResult {
  int status = -1;
  std::string out, err;
};

// `args` is appended to the binary path as written (the caller quotes what needs it).
CommandResult run_agtrace(const std::string& args);
CommandResult run_shell(const std::string& command);

std::string slurp(const std::string& path);
void spit(const std::string& path, const std::string& content);
// A fresh empty folder under /tmp, removed when the test process exits.
std::string temp_dir();
std::string source_dir();  // repository root

}  // namespace agtrace::test
