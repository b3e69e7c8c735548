// Ops that exist for create_graph=True: the overloads and dedicated backward ops that
// PyTorch 1.13's backward formulas call, each recording the node PyTorch records for it
// (measured with /usr/bin/python3, torch 1.13, walking g.grad_fn after
// torch.autograd.grad(..., create_graph=True)).
#pragma once
#include <vector>

#include "autograd/grad_mode.hpp"
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

// at::sgn(self): SgnBackward0 saving result and self; its gradient is zeros for real
// inputs (measured: autograd.grad(x.sgn().sum(), x, create_graph=True) is zeros without a
// graph). abs's create_graph gradient records it (grad * self.sgn()).
Tensor sgn(const Tensor& a);
// t.add(Scalar) from C++ (add.Scalar): AddBackward1, nothing saved (silu's `1.0 + t`).
Tensor add_scalar(const Tensor& a, const Value& other);
// t.sub(Scalar) from C++ (sub.Scalar): SubBackward1, nothing saved (pow_backward_self's
// `exponent - 1`, measured).
Tensor sub_scalar(const Tensor& a, const Value& other);
// at::leaky_relu_backward(grad_output, self, negative_slope, false):
// LeakyReluBackwardBackward0, edges (grad_output, self), saving negative_slope and self.
Tensor leaky_relu_backward_op(const Tensor& grad_output, const Tensor& self, const Value& negative_slope);

// at::select_backward(grad, input_sizes, dim, index): zeros of input_sizes with grad placed
// at the selected slice; SelectBackwardBackward0 saving dim and index as written (measured
// _saved_dim 18446744073709551615, _saved_index 18446744073709551614 for select(-1, -2)).
Tensor select_backward_op(const Tensor& grad, const Shape& input_sizes, int64_t dim, int64_t index);
// at::slice_backward(grad, input_sizes, dim, start, end, step): SliceBackwardBackward0 saving
// dim, end, start, step as SliceBackward0 holds them.
Tensor slice_backward_op(const Tensor& grad, const Shape& input_sizes, int64_t dim, int64_t start, int64_t end,
                         int64_t step);

// PyTorch's validate_outputs (torch/csrc/autograd/engine.cpp) for a gradient computed in
// grad mode: a broadcast gradient is reduced with at::sum_to(grad, shape) (SumBackward0 for a
// 0-d input, else sum(dims, keepdim=True) — SumBackward1 — then .view(shape) — ViewBackward0 —
// when leading dims were added), then cast with grad.to(dtype) (ToCopyBackward0). Measured:
// (x * b) with x [2, 3], b [3] gives b's gradient ViewBackward0 > SumBackward1 > MulBackward0;
// an f32 input of an f64 product gets ToCopyBackward0 > MulBackward0.
Tensor validate_grad_output(const Tensor& grad, const autograd::OutputMeta& input);

// at::sum_to(grad, shape) with autograd-aware ops (the reduction part of the above).
Tensor sum_to_graph(const Tensor& grad, const Shape& shape);

// A first-order gradient `r`, computed by a backward formula under create_graph=True, given
// the history of the dedicated backward op PyTorch's formula calls: `name` (e.g.
// AvgPool2DBackwardBackward0) over `edges` (grad_output first), its saved values written by
// `save`, its own backward `bb`. No differentiable_backward: third order through it raises
// unsupported.
template <typename Save>
Tensor record_backward_op(Tensor r, std::string_view name, autograd::BackwardFn bb, const std::vector<Tensor>& edges,
                          Save&& save) {
  bool any = false;
  for (const Tensor& t : edges) any = any || (t && t->requires_grad());
  if (any && autograd::grad_enabled()) {
    auto node = autograd::make_node(name, bb, edges);
    save(*node);
    autograd::set_history(r, node);
  }
  return r;
}

namespace detail {
// A number saved as a node attribute, back as the Python number it was.
Value attr_value(const autograd::AttrValue& a);
// The create_graph=True formulas of AddBackward0 / SubBackward0 and MulBackward0 (arith.cpp),
// shared with the in-place ops, which record the same nodes.
std::vector<Tensor> add_sub_dbackward(autograd::Node& n, const std::vector<Tensor>& g);
std::vector<Tensor> mul_dbackward(autograd::Node& n, const std::vector<Tensor>& g);
// DivBackward0's (arith.cpp) and the pointwise ops' (unary.cpp: Exp/Tanh/Sigmoid/ReluBackward0)
// create_graph=True formulas, shared with div_ / exp_ / tanh_ / sigmoid_ / relu_.
std::vector<Tensor> div_dbackward(autograd::Node& n, const std::vector<Tensor>& g);
struct PointwiseOp;
autograd::BackwardFn pointwise_dbackward(const PointwiseOp& op);
}  // namespace detail

}  // namespace agtrace::ops
