// Why a node keeps a saved value, derived from the op table's save rules (the `saves`
// column `agtrace ops` prints), not written per scenario: a rule "mat2 if self requires
// grad" means the value is kept only for the gradient of `self` (derivatives.yaml saves an
// operand for the *other* operand's gradient), so it would not be kept if `self` did not
// require grad.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace agtrace {

// node name -> saved attribute -> the input whose requires_grad makes the node keep it.
// Read from every table entry whose node column names one node and whose `saves` text
// holds "<attr> if <input> requires grad".
const std::map<std::string, std::map<std::string, std::string>>& conditional_save_rules();

// The pieces it reads, exposed for tests: the backward node names a `node` column holds
// (matches of [A-Z][A-Za-z0-9]*Backward[0-9]+, in order), and the (attribute, input) pairs of
// a `saves` text (matches of "<identifier> if <identifier> requires grad", in order).
std::vector<std::string> backward_nodes_named(const std::string& column);
std::vector<std::pair<std::string, std::string>> save_rules_in(const std::string& saves);

struct WhySaved {
  std::string needed_for;   // input whose gradient uses the value ("" when all of them may)
  std::string why;          // sentence for reports
  std::string if_not;       // what would change if that input did not require grad
  int64_t bytes_less = 0;   // bytes not saved then (0: no change)
};

// inputs: number of input slots of the node (its next_functions); node_saved_bytes: bytes
// of every tensor the node saves (a single-input node disappears with its input's grad).
WhySaved why_saved(const std::string& node, const std::string& attr, int64_t bytes, size_t inputs,
                   int64_t node_saved_bytes);

}  // namespace agtrace
