// Tensor.__getitem__ and Tensor.__setitem__ as PyTorch 1.13 runs them
// (torch/csrc/autograd/python_variable_indexing.cpp, aten/src/ATen/TensorIndexing.h).
#pragma once
#include <vector>

#include "interp/value.hpp"

namespace agtrace::interp {

// x[indices]: each entry is what the subscript held (one item, or the items of a tuple).
Value tensor_getitem(const Tensor& t, const std::vector<Value>& indices);
// x[indices] = value: value a Python number or bool, or a tensor.
void tensor_setitem(const Tensor& t, const std::vector<Value>& indices, const Value& value);

}  // namespace agtrace::interp
