// Small helpers shared by the op-table fragments.
#pragma once
#include <optional>
#include <string>

#include "ops/table.hpp"

namespace agtrace::ops {

[[noreturn]] void type_error(const std::string& msg);
// "Tensor.view" -> "view", for messages as PyTorch words them ("view(): ...").
std::string short_fn(const std::string& fn);
// The device a tensor is on as Tensor.to spells it: "cpu", "cuda" or "meta".
std::string device_name(const Tensor& t);
// A device as written ('cpu', 'cuda', 'cuda:0', 'meta', or x.device's "cuda:0") to agtrace's
// name for it; another spelling is PyTorch's error.
std::string parse_device(const std::string& spelled);
// The `device=` keyword of Tensor.to and the creation functions: none when absent or None.
std::optional<std::string> device_argument(const Args& a);
// retain_graph= of backward / autograd.grad: defaults to create_graph.
bool retain_flag(const Args& a, bool create_graph);
inline Value T(Tensor t) { return Value::tensor(std::move(t)); }

}  // namespace agtrace::ops
