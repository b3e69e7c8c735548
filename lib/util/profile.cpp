#include "util/profile.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace agtrace::profile {

namespace {

using Clock = std::chrono::steady_clock;

struct Frame {
  Section section;
  std::string name;  // copied: a node may die while its own backward row is open
  int statement;
  Clock::time_point start;
  double child_s = 0.0;     // time of the regions directly inside
  double backward_s = 0.0;  // time of backward passes anywhere inside (forward frames)
};

struct State {
  Clock::time_point started;
  std::vector<Frame> stack;
  std::map<std::tuple<int, int, std::string>, Row> rows;  // (section, statement, name)
};

State& state() {
  static State s;
  return s;
}

bool is_backward(Section s) { return s == Section::OpBackward || s == Section::StatementBackward; }

}  // namespace

bool detail::g_enabled = false;

void set_enabled(bool on) {
  State& s = state();
  detail::g_enabled = on;
  s.stack.clear();
  if (on) {
    s.rows.clear();
    s.started = Clock::now();
  }
}

double elapsed_s() { return std::chrono::duration<double>(Clock::now() - state().started).count(); }

void Scope::begin(Section section, const std::string& name, int statement) {
  active_ = true;
  state().stack.push_back(Frame{section, name, statement, Clock::now()});
}

void Scope::end() {
  State& s = state();
  if (s.stack.empty()) return;
  const Frame f = std::move(s.stack.back());
  s.stack.pop_back();
  const double dt = std::chrono::duration<double>(Clock::now() - f.start).count();
  // A forward row's figure leaves out the backward passes run inside it (`y.backward()`
  // is a statement and an op whose time is the backward pass).
  const double total = is_backward(f.section) ? dt : dt - f.backward_s;
  const double self = dt - f.child_s;  // never includes a nested backward either
  const bool statement_row = f.section == Section::StatementForward || f.section == Section::StatementBackward;
  Row& r = s.rows[{static_cast<int>(f.section), statement_row ? f.statement : -1,
                   statement_row ? std::string() : f.name}];
  if (r.calls == 0) {
    r.section = f.section;
    r.statement = statement_row ? f.statement : -1;
    r.name = statement_row ? std::to_string(f.statement) : f.name;
  }
  r.calls++;
  r.total_s += total;
  r.self_s += self;
  if (!s.stack.empty()) {
    Frame& parent = s.stack.back();
    parent.child_s += dt;
    parent.backward_s += is_backward(f.section) && !is_backward(parent.section) ? dt : f.backward_s;
  }
}

const std::string& operator_op_name(const std::string& symbol) {
  static const std::string add = "add", sub = "sub", mul = "mul", div = "div", pow = "pow", matmul = "matmul";
  // By character, not by string comparisons: every tensor operator of a program asks.
  if (symbol.size() == 1) {
    switch (symbol[0]) {
      case '+': return add;
      case '-': return sub;
      case '*': return mul;
      case '/': return div;
      case '@': return matmul;
      default: return symbol;
    }
  }
  return symbol == "**" ? pow : symbol;
}

std::vector<Row> rows() {
  std::vector<Row> ops, statements;
  for (const auto& [key, r] : state().rows)
    (r.section == Section::OpForward || r.section == Section::OpBackward ? ops : statements).push_back(r);
  std::stable_sort(ops.begin(), ops.end(), [](const Row& a, const Row& b) {
    if (a.section != b.section) return a.section < b.section;
    if (a.total_s != b.total_s) return a.total_s > b.total_s;
    return a.name < b.name;
  });
  std::stable_sort(statements.begin(), statements.end(), [](const Row& a, const Row& b) {
    return std::tie(a.statement, a.section) < std::tie(b.statement, b.section);
  });
  ops.insert(ops.end(), statements.begin(), statements.end());
  return ops;
}

}  // namespace agtrace::profile
