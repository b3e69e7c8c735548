// Runs an external program without a shell: arguments are passed as a list, so no
// scenario name or path is ever interpreted by /bin/sh.
#pragma once
#include <string>
#include <vector>

namespace agtrace {

struct ProcessResult {
  bool started = false;  // false: the program was not found or could not be started
  int status = -1;       // exit status when it ran
  std::string err;       // what it wrote to stderr
};

ProcessResult run_program(const std::vector<std::string>& argv);

// Renders DOT text with Graphviz (`dot -T<format>`) into `out_path`, atomically (a
// temporary file in the same folder, then rename). Throws InputError (kind "io") with a
// clear message when `dot` is missing or fails.
void render_graphviz(const std::string& dot_text, const std::string& format, const std::string& out_path);

}  // namespace agtrace
