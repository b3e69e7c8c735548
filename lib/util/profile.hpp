// `agtrace run --profile`: wall time per operation kind and per statement, forward and
// backward separately, like the key-averages table of PyTorch's profiler.
//
// Timed regions nest: a statement contains the ops it calls, a backward pass contains the
// nodes it runs. Each region's `self` time is its total minus the regions directly inside
// it, so for a statement `self` is the interpreter's and the accountant's own cost. A
// statement's forward time excludes the backward passes it ran (those are its backward
// row). When profiling is off (the default) a Scope costs one branch.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace agtrace::profile {

enum class Section {
  OpForward,          // an op called by the program (key: op name, e.g. "mul", "matmul")
  OpBackward,         // a backward node run by the engine (key: node name, "MulBackward0")
  StatementForward,   // a statement, less the backward passes inside it (key: index)
  StatementBackward,  // the backward passes a statement ran (key: index)
};

struct Row {
  Section section = Section::OpForward;
  std::string name;      // op or node name; for statements, the statement index as text
  int statement = -1;    // statements: the index
  int64_t calls = 0;
  double total_s = 0.0;
  double self_s = 0.0;
};

namespace detail {
extern bool g_enabled;
}  // namespace detail
// Inline: every statement, op and backward node asks (issue #6).
inline bool enabled() { return detail::g_enabled; }
// Starts collecting (clears earlier rows) or stops.
void set_enabled(bool on);
// The rows collected so far: ops in order of total time (largest first, ties by name),
// then statements by index.
std::vector<Row> rows();
// Seconds from set_enabled(true) to now.
double elapsed_s();

// The op a Python operator on tensors calls ("*" -> "mul", "@" -> "matmul"): its row name.
const std::string& operator_op_name(const std::string& symbol);

class Scope {
 public:
  Scope(Section section, const std::string& name, int statement = -1) {
    if (enabled()) begin(section, name, statement);
  }
  // A literal name ("" for statement rows): no string made unless profiling (issue #6).
  Scope(Section section, const char* name, int statement = -1) {
    if (enabled()) begin(section, std::string(name), statement);
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  ~Scope() {
    if (active_) end();
  }

 private:
  void begin(Section section, const std::string& name, int statement);
  void end();
  bool active_ = false;
};

}  // namespace agtrace::profile
