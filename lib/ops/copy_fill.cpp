// copy_ and fill_, the writes every `x[index] = value` ends in (PyTorch 1.13's copy_to in
// python_variable_indexing.cpp: copy_ when the sizes match or the value broadcasts, fill_
// for a 0-d value on the CPU). Both are in-place ops: checked, written, bumped once, and
// rebased (on a view, the base gets CopySlices).
#include "ops/common.hpp"
#include "ops/indexing.hpp"
#include "ops/inplace_util.hpp"

namespace agtrace::ops {

using namespace detail;
using autograd::make_node;

namespace {

Tensor zeros_like_grad(const Tensor& g) { return kernels::full(g->sizes, 0.0, g->dtype(), g->is_meta()); }

// CopyBackwards (torch/csrc/autograd/functions/tensor.cpp): self gets zeros_like(grad), src
// grad.to(src's options); the engine reduces a broadcast source's gradient to its shape
// (validate_outputs' sum_to), done here in the formula.
std::vector<Tensor> copy_backward(autograd::Node& n, const std::vector<Tensor>& g) {
  std::vector<Tensor> out(2);
  if (n.should_compute_output(0)) out[0] = zeros_like_grad(g[0]);
  if (n.should_compute_output(1)) out[1] = as_dtype(kernels::sum_to(g[0], n.input_meta[1].sizes), n.input_meta[1].dtype);
  return out;
}

// FillBackward2 (fill_.Scalar): self: zeros_like(grad).
std::vector<Tensor> fill_number_backward(autograd::Node&, const std::vector<Tensor>& g) { return {zeros_like_grad(g[0])}; }

// FillBackward3 (fill_.Tensor): self: zeros_like(grad); value: grad.sum().
std::vector<Tensor> fill_tensor_backward(autograd::Node& n, const std::vector<Tensor>& g) {
  std::vector<Tensor> out(2);
  if (n.should_compute_output(0)) out[0] = zeros_like_grad(g[0]);
  if (n.should_compute_output(1)) out[1] = as_dtype(kernels::sum(g[0], {}, false), n.input_meta[1].dtype);
  return out;
}

// Records `node_name` when autograd tracks the edit: grad mode on, an input requiring grad,
// and a floating self (an integer tensor cannot require grad; measured: an int64
// y.copy_(w) with w requiring grad records nothing).
Shared<autograd::Node> fill_or_copy_node(const char* node_name, autograd::BackwardFn fn, const Tensor& self,
                                         const Tensor& other) {
  if (!needs_grad({&self, &other}) || !is_floating(self->dtype())) return nullptr;
  auto node = other ? make_node(node_name, fn, {self, other}) : make_node(node_name, fn, {self});
  return node;
}

void fill_value(const Tensor& self, double v) {
  if (self->is_meta()) return;
  if (kernels::device::on_device(self)) {
    kernels::device::fill(self, v);
    return;
  }
  write_values(self, std::vector<double>(static_cast<size_t>(self->numel()), v));
}

}  // namespace

void copy_(const Tensor& self, const Tensor& src) {
  OpScope scope("copy_");
  check_inplace_allowed(self, {&src});
  check_no_internal_overlap(self);
  const Shape shape = kernels::broadcast_shapes(self->sizes, src->sizes, "copy_");
  if (shape != self->sizes.vec()) {
    ScenarioError e("shape_mismatch", "output with shape " + shape_str(self->sizes) +
                                          " doesn't match the broadcast shape " + shape_str(shape));
    e.facts = {{"shape", self->sizes}, {"broadcast_shape", shape}};
    throw e;
  }
  Shared<autograd::Node> node = fill_or_copy_node("CopyBackwards", copy_backward, self, src);
  if (node) node->cpp_name_prefix = true;
  if (!self->is_meta() && !src->is_meta()) {
    const bool self_on_device = kernels::device::on_device(self), src_on_device = kernels::device::on_device(src);
    if (self_on_device && (src_on_device || src->dim() == 0) && src->sizes == self->sizes)
      kernels::device::copy_into(self, src);
    else if (self_on_device || src_on_device)
      throw ScenarioError("unsupported", "copy_ across devices or with broadcasting on cuda is not supported yet");
    else
      write_values(self, broadcast_values(src, self->sizes));
  }
  bump(self);
  if (node) record_history(self, node);
}

void fill_number_(const Tensor& self, const Value& value) {
  OpScope scope("fill_");
  check_inplace_allowed(self);
  Shared<autograd::Node> node = fill_or_copy_node("FillBackward2", fill_number_backward, self, nullptr);
  fill_value(self, value.number());
  bump(self);
  if (node) record_history(self, node);
}

void fill_tensor_(const Tensor& self, const Tensor& value) {
  OpScope scope("fill_");
  if (value->dim() != 0) {
    ScenarioError e("shape_mismatch", "fill_ only supports 0-dimension value tensor but got tensor with " +
                                          std::to_string(value->dim()) + " dimensions.");
    e.facts = {{"value_ndim", value->dim()}};
    throw e;
  }
  check_inplace_allowed(self, {&value});
  Shared<autograd::Node> node = fill_or_copy_node("FillBackward3", fill_tensor_backward, self, value);
  if (!self->is_meta() && !value->is_meta()) fill_value(self, host_values(value)[0]);
  bump(self);
  if (node) record_history(self, node);
}

}  // namespace agtrace::ops
