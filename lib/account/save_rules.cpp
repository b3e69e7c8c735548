#include "account/save_rules.hpp"

#include <regex>
#include <vector>

#include "ops/table.hpp"

namespace agtrace {

namespace {

std::vector<std::string> backward_nodes_named(const std::string& column) {
  static const std::regex node_re("[A-Z][A-Za-z0-9]*Backward[0-9]+");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(column.begin(), column.end(), node_re); it != std::sregex_iterator(); ++it)
    out.push_back(it->str());
  return out;
}

}  // namespace

const std::map<std::string, std::map<std::string, std::string>>& conditional_save_rules() {
  static const auto rules = [] {
    std::map<std::string, std::map<std::string, std::string>> out;
    static const std::regex rule_re("([A-Za-z_][A-Za-z0-9_]*) if ([A-Za-z_][A-Za-z0-9_]*) requires grad");
    for (const ops::OpEntry& e : ops::op_table()) {
      const auto nodes = backward_nodes_named(e.node);
      // An entry naming several nodes ("MulBackward0 over ReciprocalBackward0") does not
      // say which node a rule belongs to; only single-node entries are read.
      if (nodes.size() != 1) continue;
      for (auto it = std::sregex_iterator(e.saves.begin(), e.saves.end(), rule_re); it != std::sregex_iterator(); ++it)
        out[nodes[0]].emplace((*it)[1].str(), (*it)[2].str());
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
