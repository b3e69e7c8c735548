// Runs an external program without a shell: arguments are passed as a list, so no
// scenario name or path is ever interpreted by /bin/sh.
#pragma once
#include <string>
#include <vector>

namespace agtrace {

struct ProcessResult {
  bool started = false;    // false: the program was not found or could not be started
  bool timed_out = false;  // it ran past the time limit and was killed
  int status = -1;         // exit status when it ran
  std::string err;         // what it wrote to stderr
};

// Runs argv[0] (searched on PATH) and waits for it; with `timeout_s` > 0 a program still
// running after that many seconds is killed (SIGKILL) and `timed_out` set. Its stderr is
// captured in a temporary file under $TMPDIR (else /tmp), removed on every exit path.
// `slow_note`, when not empty, is printed on stderr once the wait passes a few seconds.
ProcessResult run_program(const std::vector<std::string>& argv, double timeout_s = 0, const std::string& slow_note = "");

// The default time limit of a Graphviz render (`agtrace run --render-timeout`).
constexpr double kDefaultRenderTimeoutSeconds = 60;
// The most nodes a render is started for (`agtrace run --render-max-nodes`): dot's layout
// of a 30,000-node chain (a 10,000-op program with its saved values) runs for many minutes.
constexpr int64_t kDefaultRenderMaxNodes = 5000;

// The nodes DOT text declares (`  id [attributes];` lines), the legend's included.
int64_t dot_node_count(const std::string& dot_text);

// Renders DOT text with Graphviz (`dot -T<format>`) into `out_path`, atomically (a
// temporary file in the same folder, then rename). Throws InputError (kind "io") with a
// clear message when `dot` is missing, fails or runs past `timeout_s`, and (kind "limit")
// before starting it when the graph declares more than `max_nodes` nodes.
void render_graphviz(const std::string& dot_text, const std::string& format, const std::string& out_path,
                     double timeout_s = kDefaultRenderTimeoutSeconds, int64_t max_nodes = kDefaultRenderMaxNodes);

}  // namespace agtrace
