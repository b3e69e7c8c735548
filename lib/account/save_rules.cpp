#include "account/save_rules.hpp"

#include <vector>

#include "ops/table.hpp"

namespace agtrace {

namespace {
bool is_alnum(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_identifier_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
bool is_identifier_char(char c) { return is_identifier_start(c) || is_digit(c); }
}  // namespace

// Scanned by hand rather than with std::regex: compiling the two expressions and matching
// them over the op table took 4.8 million instructions at every process's start (issue #6:
// cold_start; the seed walk's run went from 4.76 to 4.62 ms, the binary from 4.99 to 4.87
// MB). The results are the regular expressions' own (leftmost matches, each search resuming
// after the previous match; tests/account/test_analysis.cpp checks every table entry
// against std::regex).
std::vector<std::string> backward_nodes_named(const std::string& column) {
  // [A-Z][A-Za-z0-9]*Backward[0-9]+: from an uppercase letter, the longest run of letters and
  // digits up to the last "Backward" in it that a digit follows, and that digit run.
  std::vector<std::string> out;
  const size_t n = column.size();
  size_t i = 0;
  while (i < n) {
    if (!(column[i] >= 'A' && column[i] <= 'Z')) {
      ++i;
      continue;
    }
    size_t run_end = i + 1;
    while (run_end < n && is_alnum(column[run_end])) ++run_end;
    size_t match_end = 0;
    for (size_t k = run_end; k-- > i + 1;) {
      if (k + 8 < run_end && column.compare(k, 8, "Backward") == 0 && is_digit(column[k + 8])) {
        match_end = k + 8;
        while (match_end < run_end && is_digit(column[match_end])) ++match_end;
        break;
      }
    }
    if (match_end == 0) {
      i = run_end;  // no later start inside this run can match either (its candidates are fewer)
      continue;
    }
    out.push_back(column.substr(i, match_end - i));
    i = match_end;
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> save_rules_in(const std::string& saves) {
  // ([A-Za-z_][A-Za-z0-9_]*) if ([A-Za-z_][A-Za-z0-9_]*) requires grad: both names are whole
  // runs of identifier characters (the text after each is a space), tried from every position.
  std::vector<std::pair<std::string, std::string>> out;
  const size_t n = saves.size();
  auto identifier_end = [&](size_t from) {
    while (from < n && is_identifier_char(saves[from])) ++from;
    return from;
  };
  size_t i = 0;
  while (i < n) {
    if (is_identifier_start(saves[i])) {
      const size_t attr_end = identifier_end(i + 1);
      const size_t input = attr_end + 4;
      if (saves.compare(attr_end, 4, " if ") == 0 && input < n && is_identifier_start(saves[input])) {
        const size_t input_end = identifier_end(input + 1);
        if (saves.compare(input_end, 14, " requires grad") == 0) {
          out.emplace_back(saves.substr(i, attr_end - i), saves.substr(input, input_end - input));
          i = input_end + 14;
          continue;
        }
      }
    }
    ++i;
  }
  return out;
}

const std::map<std::string, std::map<std::string, std::string>>& conditional_save_rules() {
  static const auto rules = [] {
    std::map<std::string, std::map<std::string, std::string>> out;
    for (const ops::OpEntry& e : ops::op_table()) {
      const auto nodes = backward_nodes_named(e.node);
      // An entry naming several nodes ("MulBackward0 over ReciprocalBackward0") does not
      // say which node a rule belongs to; only single-node entries are read.
      if (nodes.size() != 1) continue;
      for (auto& [attr, input] : save_rules_in(e.saves)) out[nodes[0]].emplace(std::move(attr), std::move(input));
    }
    return out;
  }();
  return rules;
}

WhySaved why_saved(const std::string& node, const std::string& attr, int64_t bytes, size_t inputs,
                   int64_t node_saved_bytes) {
  WhySaved w;
  const auto& rules = conditional_save_rules();
  auto n = rules.find(node);
  if (n != rules.end()) {
    auto a = n->second.find(attr);
    if (a != n->second.end()) {
      w.needed_for = a->second;
      w.why = "grad of " + a->second + " (saved because " + a->second + " requires grad)";
      w.if_not = "not saved if " + a->second + " did not require grad";
      w.bytes_less = bytes;
      return w;
    }
  }
  const std::string from = attr == "result" ? "computed from the output" : "";
  if (inputs <= 1) {
    w.needed_for = "self";
    w.why = "grad of the only input" + (from.empty() ? std::string() : " (" + from + ")");
    w.if_not = "no node at all if the input did not require grad: the node's " + std::to_string(node_saved_bytes) +
               " saved bytes go";
    w.bytes_less = node_saved_bytes;
    return w;
  }
  w.why = "saved whenever any input requires grad" + (from.empty() ? std::string() : " (" + from + ")");
  w.if_not = "kept while any input requires grad: no change for one input";
  return w;
}

}  // namespace agtrace
