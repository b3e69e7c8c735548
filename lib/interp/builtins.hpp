// Python builtins a scenario statement may call besides print/len/shares_storage: float(),
// int() and bool() of a number, a string or a one-element tensor, as Python computes them.
#pragma once
#include <string>
#include <vector>

#include "interp/value.hpp"

namespace agtrace::interp {

bool is_conversion_builtin(const std::string& name);  // "float", "int", "bool"
// name(args...): float('inf'), float('-inf'), float('nan'), float(2), int(2.7), int(t), ...
Value call_conversion_builtin(const std::string& name, const std::vector<Value>& args);

}  // namespace agtrace::interp
