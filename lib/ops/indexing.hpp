// Advanced indexing and the writes `Tensor.__setitem__` makes (advanced_index.cpp,
// copy_fill.cpp). The index lists are the ones PyTorch 1.13's applySlicing records: entry d
// indexes dim d of the (already sliced) tensor, a null entry leaves that dim alone, and a
// bool tensor stands for the long indices of its true positions (it is saved as given).
#pragma once
#include <vector>

#include "interp/value.hpp"
#include "tensor/tensor.hpp"

namespace agtrace::ops {

// self[indices] (aten::index): IndexBackward0 saving `indices` (the list, None for the
// null entries) and `self_sizes`.
Tensor index_advanced(const Tensor& self, const std::vector<Tensor>& indices);
// self[indices] = values in place (aten::index_put_): IndexPutBackward0 saving `indices` and
// `accumulate`; values broadcast to the indexing result and must have self's dtype.
void index_put_(const Tensor& self, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate);
// x[...] on its own: a new tensor object over the same data (AliasBackward0).
Tensor alias(const Tensor& self);
// self.copy_(src): src broadcast to self and cast to its dtype (CopyBackwards).
void copy_(const Tensor& self, const Tensor& src);
// self.fill_(value): a Python number (FillBackward2) or a 0-d tensor (FillBackward3, whose
// second edge takes grad.sum()).
void fill_number_(const Tensor& self, const Value& value);
void fill_tensor_(const Tensor& self, const Tensor& value);

// v's row-major values broadcast to `to` (right-aligned; each of v's sizes 1 or equal).
std::vector<double> broadcast_values(const Tensor& v, const Shape& to);

}  // namespace agtrace::ops
