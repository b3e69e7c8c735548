// The steps every in-place op takes, in PyTorch's order (VariableType's in-place kernels,
// 1.13): refuse a self whose elements overlap, refuse the edit where autograd forbids it,
// build the node before the edit (a formula may need the old value), write, bump the
// version once, then rebase the history (a view's base gets CopySlices). Shared by
// inplace.cpp and every op file that has a `_` form.
#pragma once
#include <string>

#include "autograd/node.hpp"
#include "tensor/tensor.hpp"

namespace agtrace::ops::detail {

// "more than one element of the written-to tensor refers to a single memory location"
// (an expanded self), raised grad mode or not.
void check_no_internal_overlap(const Tensor& self);
// leaf_inplace, view_of_leaf_inplace, view_inplace (an output of split/chunk/unbind).
void check_inplace_allowed(const Tensor& self);
// The new node becomes self's grad_fn, or on a view its base's CopySlices wraps it.
void record_history(const Tensor& self, const Shared<autograd::Node>& node);
// Bumps self's version counter once and announces it.
void bump(const Tensor& self);
// PyTorch's "result type X can't be cast to the desired output type Y".
void check_castable(const Tensor& self, const Tensor& other, const std::string& op);

}  // namespace agtrace::ops::detail
