// Ops that exist for create_graph=True: the overloads and dedicated backward ops that
// PyTorch 1.13's backward formulas call, each recording the node PyTorch records for it
// (measured with /usr/bin/python3, torch 1.13, walking g.grad_fn after
// torch.autograd.grad(..., create_graph=True)).
#pragma once
#include "autograd/node.hpp"
#include "interp/value.hpp"
#include "tensor/tensor.hpp"

namespace agtrace::ops {

// tensor * Scalar (at::mul(Tensor, Scalar)): MulBackward1, saving `other` as a number.
// pow_backward's `exponent * self.pow(exponent - 1)` records it (measured: _saved_other 3.0).
Tensor mul_scalar(const Tensor& a, const Value& other);
// tensor / Scalar (at::div(Tensor, Scalar)): DivBackward1, saving `other` (mean_backward's
// `/ numel`, measured: DivBackward1._saved_other 6).
Tensor div_scalar(const Tensor& a, const Value& other);
// at::tanh_backward(grad_output, output) = grad_output * (1 - output^2): TanhBackwardBackward0.
Tensor tanh_backward_op(const Tensor& grad_output, const Tensor& output);
// at::sigmoid_backward(grad_output, output) = grad_output * output * (1 - output):
// SigmoidBackwardBackward0.
Tensor sigmoid_backward_op(const Tensor& grad_output, const Tensor& output);
// at::threshold_backward(grad_output, self, threshold): grad where self > threshold, else 0;
// ThresholdBackwardBackward0 (ReluBackward0's formula with self = result, threshold 0).
Tensor threshold_backward_op(const Tensor& grad_output, const Tensor& self, const Value& threshold);

namespace detail {
// A number saved as a node attribute, back as the Python number it was.
Value attr_value(const autograd::AttrValue& a);
// create_graph formulas do not yet reduce broadcast gradients or cast dtypes
// (PyTorch's validate_outputs sum_to / to); they raise unsupported instead.
void require_same_meta(const Tensor& g, const autograd::Node& n, size_t input);
}  // namespace detail

}  // namespace agtrace::ops
