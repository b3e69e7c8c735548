// Small helpers shared by the op-table fragments.
#pragma once
#include <string>

#include "ops/table.hpp"

namespace agtrace::ops {

[[noreturn]] void type_error(const std::string& msg);
// "Tensor.view" -> "view", for messages as PyTorch words them ("view(): ...").
std::string short_fn(const std::string& fn);
inline Value T(Tensor t) { return Value::tensor(std::move(t)); }

}  // namespace agtrace::ops
