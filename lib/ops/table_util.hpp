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
// The creation functions' keywords (table.cpp): `dtype=` or `fallback`; `requires_grad=`
// applied (floating dtypes only, PyTorch's error otherwise); `device=` or `fallback`, "meta"
// for every tensor of a meta run.
DType creation_dtype(const Args& a, DType fallback);
Value finish_creation(const Args& a, Tensor t);
std::string creation_device(const Args& a, const Runtime& rt, const std::string& fallback);
// torch.tensor's data (nested lists of numbers) flattened row-major into `out`, its shape
// into `shape`; `kind` raised to 0 bool, 1 int, 2 float by the elements seen.
// Python numbers nested in lists, flattened row-major into `out`; `kind` the widest of 0 bool,
// 1 int, 2 float. `int_beyond_double` (when given) is set by an int beyond 2**53, which an
// int64 tensor would hold rounded (tensor/dtype.hpp).
void flatten_data(const Value& v, Shape& shape, size_t depth, std::vector<double>& out, int& kind,
                  bool* int_beyond_double = nullptr);
// Raises `unsupported` where an int64 tensor would hold a Python int beyond 2**53 rounded.
void require_exact_int64(DType d, bool int_beyond_double);
// retain_graph= of backward / autograd.grad: defaults to create_graph.
bool retain_flag(const Args& a, bool create_graph);
inline Value T(Tensor t) { return Value::tensor(std::move(t)); }

// var's and std's overloads as PyTorch's parser reads them (dim, unbiased, keepdim,
// correction; the bool-only overload): dims nullopt reduces every element. `fn` names the
// op in TypeErrors.
struct VarArgs {
  std::optional<std::vector<int64_t>> dims;
  int64_t correction = 1;
  bool keepdim = false;
};
VarArgs parse_var_args(const Args& a, const std::string& fn);

}  // namespace agtrace::ops
