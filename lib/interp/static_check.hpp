// What `agtrace validate` can tell without running: every call a statement makes names an
// operation of the op table (`torch.*`, `F.*`, `torch.autograd.*` functions and Tensor
// methods), so a scenario full of operations agtrace lacks is not called valid.
#pragma once
#include <string>
#include <vector>

#include "syntax/ast.hpp"

namespace agtrace::interp {

struct UnknownOperation {
  int column = 0;         // 1-based column of the call's callee in the statement
  std::string spelling;   // "torch.foo", "F.bar", "Tensor.baz"
  std::string hint;       // the nearest supported spelling, or empty
};

// The calls of `stmt` whose callee is no operation agtrace supports, in source order.
std::vector<UnknownOperation> unknown_operations(const syntax::Stmt& stmt);

}  // namespace agtrace::interp
