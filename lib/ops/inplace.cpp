// In-place operations. PyTorch checks the edit before doing it (a leaf that requires
// grad may not be edited while grad mode is on), bumps the version counter once, and
// rebases the tensor's history: the new node's first edge is the tensor's old grad_fn,
// and the tensor's grad_fn becomes the new node. The node classes are the out-of-place
// ones (h.add_(y) records AddBackward0), so the backward formulas are shared.
#include <cmath>

#include "ops/common.hpp"
#include "ops/double_backward.hpp"
#include "ops/inplace_util.hpp"
#include "ops/ops.hpp"
#include "tensor/fast_paths.hpp"

namespace agtrace::ops {

using namespace detail;
using autograd::make_node;
using autograd::set_history;
using cuda::pw::BinaryOp;

namespace detail {

// PyTorch's internal-overlap check for in-place arithmetic, grad or not (measured: add_,
// mul_, relu_, exp_ on an expanded tensor raise; zero_ does not, every write being 0).
void check_no_internal_overlap(const Tensor& self) {
  for (size_t d = 0; d < self->sizes.size(); ++d)
    if (self->strides[d] == 0 && self->sizes[d] > 1)
      throw ScenarioError("unsupported",
                          "unsupported operation: more than one element of the written-to tensor refers to a single "
                          "memory location. Please clone() the tensor before performing the operation.");
}

void check_inplace_allowed(const Tensor& self, std::initializer_list<const Tensor*> others) {
  if (!autograd::grad_enabled()) return;
  bool requires = self->requires_grad();
  for (const Tensor* o : others) requires = requires || (*o && (*o)->requires_grad());
  if (!requires) return;
  if (self->is_view()) {
    // handle_view_on_rebase first (measured: a view of a leaf made in no_grad, edited in
    // grad mode, is the no_grad-view error, not the leaf-view one).
    if (self->view_made_in_no_grad || !self->multi_output_node.empty()) autograd::throw_view_rebase_error(self, false);
    if (self->requires_grad() && self->base->is_leaf() && self->base->requires_grad()) {
      ScenarioError e("view_of_leaf_inplace",
                      "a view of a leaf Variable that requires grad is being used in an in-place operation.");
      e.facts = {{"tensor_id", self->id}, {"base_id", self->base->id}};
      throw e;
    }
  }
  if (self->is_leaf() && self->requires_grad_flag) {
    ScenarioError e("leaf_inplace", "a leaf Variable that requires grad is being used in an in-place operation.");
    e.facts = {{"tensor_id", self->id}};
    throw e;
  }
}

// Records the in-place op's node: on a view the base gets CopySlices and the view
// AsStridedBackward0; otherwise the tensor's grad_fn is simply replaced.
void record_history(const Tensor& self, const Shared<autograd::Node>& node) {
  if (self->is_view())
    autograd::rebase_view_history(self, node);
  else
    set_history(self, node);
}

void bump(const Tensor& self) {
  self->version->bump();
  Event e;
  e.kind = Event::Kind::VersionBump;
  e.storage_id = self->storage->id;
  e.version = self->version->version;
  emit(e);
}

// c10::canCast, which in-place ops check the promoted type against: only floating -> integral
// and non-bool -> bool are refused (measured: a float32 h.add_(d) with d float64 is allowed,
// d's gradient float64; an int64 i.add_(0.5) and a bool b.add_(1) raise).
void check_castable(const Tensor& self, const Tensor& other, const std::string& op) {
  const DType rt = kernels::result_type(self, other), to = self->dtype();
  const bool refused = (is_floating(rt) && !is_floating(to) && to != DType::Bool) ||
                       (is_floating(rt) && to == DType::Bool) || (rt != DType::Bool && to == DType::Bool);
  if (refused) {
    ScenarioError e("dtype_mismatch", "result type " + dtype_scalar_name(rt) +
                                          " can't be cast to the desired output type " + dtype_scalar_name(to));
    e.facts = {{"op", op}};
    throw e;
  }
}

}  // namespace detail

namespace {

using Recorder = std::function<Shared<autograd::Node>()>;

// `device_op`/`s0`: f as lib/cuda's op code, for a cuda self.
template <typename F>
void binary_inplace_op(const Tensor& self, const Tensor& other, const std::string& op, F&& f,
                       cuda::pw::BinaryOp device_op, double s0, const Recorder& record) {
  OpScope scope(op);
  check_inplace_allowed(self, {&other});
  check_no_internal_overlap(self);
  check_castable(self, other, op);
  kernels::broadcast_shapes(self->sizes, other->sizes, op);
  // The node is built before the edit: mul_ must save the old value of self.
  Shared<autograd::Node> node = needs_grad({&self, &other}) ? record() : nullptr;
  if (kernels::device::any_on_device({&self, &other}))
    kernels::device::binary_inplace(device_op, self, other, s0);
  else
    kernels::binary_inplace(self, other, f, op);
  bump(self);
  if (node) record_history(self, node);
}

}  // namespace

void add_(const Tensor& self, const Tensor& other, const Value& alpha) {
  const double al = alpha.number();
  binary_inplace_op(self, other, "add_", [al](double x, double y) { return x + al * y; }, BinaryOp::Add, al, [&] {
    auto node = make_node("AddBackward0", add_sub_backward, {self, other});
    node->differentiable_backward = add_sub_dbackward;
    node->save_attr("alpha", number_attr(alpha));
    return node;
  });
}

void sub_(const Tensor& self, const Tensor& other, const Value& alpha) {
  const double al = alpha.number();
  binary_inplace_op(self, other, "sub_", [al](double x, double y) { return x - al * y; }, BinaryOp::Sub, al, [&] {
    auto node = make_node("SubBackward0", add_sub_backward, {self, other});
    node->differentiable_backward = add_sub_dbackward;
    node->save_attr("alpha", number_attr(alpha));
    return node;
  });
}

void mul_(const Tensor& self, const Tensor& other) {
  binary_inplace_op(self, other, "mul_", [](double x, double y) { return x * y; }, BinaryOp::Mul, 1, [&] {
    auto node = make_node("MulBackward0", mul_backward, {self, other});
    node->differentiable_backward = mul_dbackward;
    node->save_input("other", other, rg(self));
    // SUMMARY: h.mul_(y) saves a clone of the old self (own storage, grad_fn CloneBackward0).
    Tensor old_self = rg(other) ? clone(self) : nullptr;
    node->save_input("self", old_self, rg(other));
    return node;
  });
}

void div_(const Tensor& self, const Tensor& other) {
  binary_inplace_op(self, other, "div_", [](double x, double y) { return x / y; }, BinaryOp::Div, 1, [&] {
    auto node = make_node("DivBackward0", div_backward, {self, other});
    node->differentiable_backward = div_dbackward;
    node->save_input("other", other, true);
    Tensor old_self = rg(other) ? clone(self) : nullptr;
    node->save_input("self", old_self, rg(other));
    return node;
  });
}

namespace detail {

void unary_inplace(const Tensor& self, const UnaryRecipe& op) {
  OpScope scope(std::string(op.op) + "_");
  check_inplace_allowed(self);
  check_no_internal_overlap(self);
  if (op.float_only && !is_floating(self->dtype())) {
    ScenarioError e("dtype_mismatch", "result type Float can't be cast to the desired output type " +
                                          dtype_scalar_name(self->dtype()));
    e.facts = {{"op", std::string(op.op) + "_"}};
    throw e;
  }
  const bool grad = needs_grad({&self});
  // original_self = self.clone(), before the node: the clone records CloneBackward0.
  Tensor original = grad && op.saves == UnaryRecipe::Saves::Self ? clone(self) : nullptr;
  Shared<autograd::Node> node = grad ? make_node(op.node, op.backward, {self}) : nullptr;
  // torch 1.13 records the out-of-place node (h.exp_() -> ExpBackward0), whose double
  // backward is the same (measured: ThresholdBackwardBackward0 under relu_'s gradient).
  if (node) node->differentiable_backward = op.dbackward;
  if (node && original) node->save_input("self", original);
  const float* x = op.exact_f32 ? kernels::contiguous_f32(self) : nullptr;
  if (kernels::device::on_device(self)) {
    kernels::device::unary_inplace(op.device_op, self);
  } else if (x) {
    // torchvision's ReLU(inplace=True) on a conv net's activations: in float, in place.
    float* o = self->storage->f32() + self->offset;
    kernels::parallel_for(self->numel(), kernels::kGrain, [&](int64_t b, int64_t e) { op.exact_f32(x + b, o + b, e - b); });
  } else {
    kernels::unary_inplace(self, op.f);
  }
  bump(self);
  if (!node) return;
  record_history(self, node);
  if (op.saves != UnaryRecipe::Saves::Result) return;
  // The saved result is the edited tensor at its new version (SUMMARY: relu_ saves a
  // result sharing storage with h, and its _version is 1).
  node->save_output("result", self, 0);
  // On a view, torch 1.13 saves it with is_inplace_on_view: the view's new grad_fn
  // (AsStridedBackward0), held weakly, is what unpacking it gives while the view lives.
  if (self->is_view() && !node->saved.empty() && node->saved.back().var.defined)
    node->saved.back().var.hooked_state().inplace_view_grad_fn = self->grad_fn;
}

}  // namespace detail

void unary_inplace_named(const Tensor& self, const std::string& name) {
  std::optional<UnaryRecipe> r = pointwise_recipe(name);
  if (!r) r = activation_recipe(name);
  if (!r) r = arith_recipe(name);
  if (!r) throw std::logic_error("unary_inplace_named: no recipe for " + name);
  unary_inplace(self, *r);
}

static void pointwise_inplace(const Tensor& self, const std::string& name) { unary_inplace_named(self, name); }

// x.pow_(e): PowBackward0 (a number e: saves e and a clone of the old self) or PowBackward1
// (a tensor e, edges (self, e): saves e, a clone of the old self and the result, which is
// self after the edit). Measured: x.pow_(w) saves _saved_result on x's storage at version 1.
void pow_(const Tensor& self, const Value& exponent) {
  const bool tensor_exponent = exponent.kind == Value::Kind::Tensor;
  const Tensor exp_t = tensor_exponent ? exponent.t : nullptr;
  OpScope scope("pow_");
  check_inplace_allowed(self, {&exp_t});
  check_no_internal_overlap(self);
  if (tensor_exponent) {
    check_castable(self, exp_t, "pow_");
    kernels::broadcast_shapes(self->sizes, exp_t->sizes, "pow_");
  } else if (!is_floating(self->dtype()) && exponent.kind == Value::Kind::Float) {
    ScenarioError e("dtype_mismatch", "result type Float can't be cast to the desired output type " +
                                          dtype_scalar_name(self->dtype()));
    e.facts = {{"op", "pow_"}};
    throw e;
  }
  const bool grad = tensor_exponent ? needs_grad({&self, &exp_t}) : needs_grad({&self});
  Tensor original = grad ? clone(self) : nullptr;
  Shared<autograd::Node> node;
  if (grad && tensor_exponent) {
    node = make_node("PowBackward1", pow_tensor_backward, {self, exp_t});
    node->differentiable_backward = pow_tensor_dbackward;
    node->save_input("exponent", exp_t);
  } else if (grad) {
    node = make_node("PowBackward0", pow_scalar_backward, {self});
    node->differentiable_backward = pow_scalar_dbackward;
    node->save_attr("exponent", number_attr(exponent));
  }
  if (tensor_exponent) {
    if (kernels::device::any_on_device({&self, &exp_t}))
      kernels::device::binary_inplace(BinaryOp::Pow, self, exp_t, 1);
    else
      kernels::binary_inplace(self, exp_t, [](double x, double y) { return std::pow(x, y); }, "pow_");
  } else {
    const double e = exponent.number();
    if (kernels::device::on_device(self))
      kernels::device::unary_inplace(cuda::pw::UnaryOp::PowScalar, self, e);
    else
      kernels::unary_inplace(self, [e](double x) { return std::pow(x, e); });
  }
  bump(self);
  if (!node) return;
  record_history(self, node);
  if (tensor_exponent) node->save_output("result", self, 0);
  node->save_input("self", original);
}

void relu_(const Tensor& self) { pointwise_inplace(self, "relu"); }
void exp_(const Tensor& self) { pointwise_inplace(self, "exp"); }
void sigmoid_(const Tensor& self) { pointwise_inplace(self, "sigmoid"); }
void tanh_(const Tensor& self) { pointwise_inplace(self, "tanh"); }

namespace {
std::vector<Tensor> zero_backward(autograd::Node& n, const std::vector<Tensor>&) {
  const auto& m = n.input_meta[0];
  return {kernels::full(m.sizes, 0.0, m.dtype, m.meta)};
}
}  // namespace

void zero_(const Tensor& self) {
  OpScope scope("zero_");
  check_inplace_allowed(self);
  Shared<autograd::Node> node = needs_grad({&self}) ? make_node("ZeroBackward0", zero_backward, {self}) : nullptr;
  // derivatives.yaml: `self: zeros_like(grad)`: under create_graph the zeros carry no graph
  // (torch 1.13 records no node for them), so the same formula serves both modes.
  if (node) node->differentiable_backward = zero_backward;
  if (kernels::device::on_device(self))
    kernels::device::fill(self, 0.0);
  else
    kernels::unary_inplace(self, [](double) { return 0.0; });
  bump(self);
  if (node) record_history(self, node);
}

}  // namespace agtrace::ops
