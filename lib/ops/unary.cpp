// Pointwise functions. Those whose derivative is cheapest from the output save the
// output (exp, sqrt, tanh, sigmoid, relu: "result"); log saves its input ("self").
#include <cmath>
#include <cstddef>
#include <string_view>
#include <type_traits>

#include "ops/common.hpp"
#include "ops/inplace_util.hpp"
#include "ops/double_backward.hpp"
#include "ops/ops.hpp"
#include "tensor/device_backend.hpp"
#include "tensor/fast_paths.hpp"

namespace agtrace::ops {

using namespace detail;
using autograd::make_node;
using autograd::set_history;
using cuda::pw::BinaryOp;
using cuda::pw::UnaryOp;

namespace {

// The cuda op code of a pointwise node's backward (defined with the table below).
cuda::pw::BinaryOp device_backward_of(const std::string& node_name);

// grad * f(saved value) for a derivative written in terms of one saved value, computed
// in one pass (one new storage, as PyTorch's fused backward kernels allocate).
// On cuda, the node's op code (find_pointwise_node) computes the same product.
template <typename F>
std::vector<Tensor> times_saved(const Tensor& s, const std::vector<Tensor>& g, const Node& n, F f) {
  const DType common = kernels::promote(g[0]->dtype(), s->dtype());
  Tensor r = kernels::device::any_on_device({&g[0], &s})
                 ? kernels::device::binary(device_backward_of(n.name), g[0], s, common, "backward")
                 : kernels::binary(g[0], s, common, [f](double gv, double sv) { return gv * f(sv); }, "backward");
  return {as_dtype(r, n.input_meta[0].dtype)};
}
template <typename F>
std::vector<Tensor> times_saved(Node& n, const std::vector<Tensor>& g, const char* attr, F f) {
  // A float32 saved output is read where it is, without the tensor object unpack makes
  // (Node::saved_output): the same loop as the general path, so the same bits.
  const autograd::SavedVariable* v = n.saved_output(attr);
  if (v && n.input_meta[0].dtype == DType::Float32 && kernels::binary_in_place_f32_fits(g[0], *v->storage, v->sizes)) {
    Node::skip_unpacked_object();  // before the result is made, as unpack would have been
    return {kernels::binary_in_place_f32(g[0], *v->storage, v->sizes, v->strides, v->offset,
                                         [f](double gv, double sv) { return gv * f(sv); })};
  }
  return times_saved(n.unpack(attr), g, n, f);
}

std::vector<Tensor> exp_backward(Node& n, const std::vector<Tensor>& g) {
  return times_saved(n, g, "result", [](double r) { return r; });
}
std::vector<Tensor> log_backward(Node& n, const std::vector<Tensor>& g) {
  return times_saved(n, g, "self", [](double s) { return 1.0 / s; });
}
std::vector<Tensor> sqrt_backward(Node& n, const std::vector<Tensor>& g) {
  return times_saved(n, g, "result", [](double r) { return 1.0 / (2.0 * r); });
}
std::vector<Tensor> tanh_backward(Node& n, const std::vector<Tensor>& g) {
  return times_saved(n, g, "result", [](double r) { return 1.0 - r * r; });
}
std::vector<Tensor> sigmoid_backward(Node& n, const std::vector<Tensor>& g) {
  return times_saved(n, g, "result", [](double r) { return r * (1.0 - r); });
}
// threshold_backward(grad, result, 0): result <= 0 ? 0 : grad, so the gradient passes
// where the output is positive or NaN (measured: relu at NaN has gradient 1).
// In float32 the product grad * (0 or 1) is exact either way, so a float loop (branch-free,
// vectorised) gives the same bits; it was 7.5 % of bench/scenarios/mlp_step.json as a
// branch per element in double (issue #6).
std::vector<Tensor> relu_backward(Node& n, const std::vector<Tensor>& g) {
  if (n.input_meta[0].dtype == DType::Float32) {
    Tensor s = n.unpack("result");
    Tensor r = kernels::binary_exact_f32(g[0], s, kernels::relu_backward_f32);
    if (r) return {r};
    return times_saved(s, g, n, [](double rv) { return rv <= 0.0 ? 0.0 : 1.0; });
  }
  return times_saved(n, g, "result", [](double r) { return r <= 0.0 ? 0.0 : 1.0; });
}

// ---- create_graph=True formulas (derivatives.yaml, torch 1.13; walks measured).
// ExpBackward0: grad * result (MulBackward0).
std::vector<Tensor> exp_dbackward(Node& n, const std::vector<Tensor>& g) {
  return {mul(g[0], n.unpack("result"))};
}
// LogBackward0: grad.div(self) (DivBackward0).
std::vector<Tensor> log_dbackward(Node& n, const std::vector<Tensor>& g) {
  return {div(g[0], n.unpack("self"))};
}
// SqrtBackward0: grad / (2 * result) (DivBackward0 over MulBackward1, _saved_other 2).
std::vector<Tensor> sqrt_dbackward(Node& n, const std::vector<Tensor>& g) {
  return {div(g[0], mul_scalar(n.unpack("result"), Value::integer(2)))};
}
// TanhBackward0: tanh_backward(grad, result) (TanhBackwardBackward0).
std::vector<Tensor> tanh_dbackward(Node& n, const std::vector<Tensor>& g) {
  return {tanh_backward_op(g[0], n.unpack("result"))};
}
// SigmoidBackward0: sigmoid_backward(grad, result) (SigmoidBackwardBackward0).
std::vector<Tensor> sigmoid_dbackward(Node& n, const std::vector<Tensor>& g) {
  return {sigmoid_backward_op(g[0], n.unpack("result"))};
}
// ReluBackward0: threshold_backward(grad, result, 0) (ThresholdBackwardBackward0,
// _saved_threshold 0).
std::vector<Tensor> relu_dbackward(Node& n, const std::vector<Tensor>& g) {
  return {threshold_backward_op(g[0], n.unpack("result"), Value::integer(0))};
}

autograd::BackwardFn differentiable_for(const PointwiseOp& op) {
  const std::string_view name = op.node;  // no string built per op (issue #6)
  if (name == "ExpBackward0") return exp_dbackward;
  if (name == "LogBackward0") return log_dbackward;
  if (name == "SqrtBackward0") return sqrt_dbackward;
  if (name == "TanhBackward0") return tanh_dbackward;
  if (name == "SigmoidBackward0") return sigmoid_dbackward;
  if (name == "ReluBackward0") return relu_dbackward;
  return nullptr;
}

// The formulas, as functions: the table keeps pointers to them (the in-place forms call
// through those), the out-of-place ops below pass them inlined into the elementwise loop
// (a call through a pointer per element was 9 % of bench/scenarios/mlp_step.json).
double exp_f(double x) { return std::exp(x); }
double log_f(double x) { return std::log(x); }
double sqrt_f(double x) { return std::sqrt(x); }
double tanh_f(double x) { return std::tanh(x); }
double sigmoid_f(double x) { return 1.0 / (1.0 + std::exp(-x)); }
// relu is clamp_min(self, 0): NaN and -0.0 pass through (measured: torch.relu of
// [nan, 0., -0.] is [nan, 0., -0.]).
double relu_f(double x) { return x < 0.0 ? 0.0 : x; }

const PointwiseOp kExp{"exp", "ExpBackward0", exp_f, exp_backward, true, true, UnaryOp::Exp, BinaryOp::ExpBackward};
const PointwiseOp kLog{"log", "LogBackward0", log_f, log_backward, false, true, UnaryOp::Log, BinaryOp::LogBackward};
const PointwiseOp kSqrt{"sqrt", "SqrtBackward0", sqrt_f, sqrt_backward, true, true, UnaryOp::Sqrt,
                        BinaryOp::SqrtBackward};
const PointwiseOp kTanh{"tanh", "TanhBackward0", tanh_f, tanh_backward, true, true, UnaryOp::Tanh,
                        BinaryOp::TanhBackward};
const PointwiseOp kSigmoid{"sigmoid", "SigmoidBackward0", sigmoid_f, sigmoid_backward, true, true, UnaryOp::Sigmoid,
                           BinaryOp::SigmoidBackward};
// relu in float is a selection: exact.
const PointwiseOp kRelu{"relu", "ReluBackward0", relu_f, relu_backward, true, false, UnaryOp::Relu,
                        BinaryOp::ReluBackward, kernels::relu_f32};

// f: op.f, passed as a functor so the loop inlines it.
template <typename F>
Tensor pointwise(const Tensor& a, const PointwiseOp& op, F f) {
  OpScope scope(op.op);
  DType out = a->dtype();
  if (op.float_only && !is_floating(out)) out = DType::Float32;
  if (!op.float_only && out == DType::Bool) require_floating(a, op.op);
  Tensor r;
  if (kernels::device::on_device(a)) r = kernels::device::unary(op.device_op, a, out);
  if (!r && out == DType::Float32 && op.exact_f32) r = kernels::unary_exact_f32(a, op.exact_f32);
  if (!r) r = kernels::unary(a, out, f);
  if (needs_grad({&a})) {
    auto node = make_node(op.node, op.backward, {a});
    node->differentiable_backward = differentiable_for(op);
    set_history(r, node);
    if (op.saves_result)
      node->save_output("result", r, 0);
    else
      node->save_input("self", a);
  }
  return r;
}

cuda::pw::BinaryOp device_backward_of(const std::string& node_name) {
  for (const PointwiseOp* p : {&kExp, &kLog, &kSqrt, &kTanh, &kSigmoid, &kRelu})
    if (node_name == p->node) return p->device_backward;
  throw_no_device_kernel("cuda");
}

}  // namespace

Tensor exp(const Tensor& a) { return pointwise(a, kExp, [](double x) { return exp_f(x); }); }
Tensor log(const Tensor& a) { return pointwise(a, kLog, [](double x) { return log_f(x); }); }
Tensor sqrt(const Tensor& a) { return pointwise(a, kSqrt, [](double x) { return sqrt_f(x); }); }
Tensor tanh(const Tensor& a) { return pointwise(a, kTanh, [](double x) { return tanh_f(x); }); }
Tensor sigmoid(const Tensor& a) { return pointwise(a, kSigmoid, [](double x) { return sigmoid_f(x); }); }
Tensor relu(const Tensor& a) { return pointwise(a, kRelu, [](double x) { return relu_f(x); }); }

namespace detail {
const PointwiseOp* find_pointwise(const std::string& name) {
  for (const PointwiseOp* p : {&kExp, &kLog, &kSqrt, &kTanh, &kSigmoid, &kRelu})
    if (name == p->op) return p;
  return nullptr;
}
// The in-place forms (h.exp_(), h.relu_(), ...) record the same nodes, so they share these.
autograd::BackwardFn pointwise_dbackward(const PointwiseOp& op) { return differentiable_for(op); }
std::optional<UnaryRecipe> pointwise_recipe(const std::string& name) {
  const PointwiseOp* p = find_pointwise(name);
  if (!p) return std::nullopt;
  return UnaryRecipe{p->op, p->node, p->f, p->backward, differentiable_for(*p),
                     p->saves_result ? UnaryRecipe::Saves::Result : UnaryRecipe::Saves::Self, p->float_only,
                     p->device_op, p->exact_f32};
}
}  // namespace detail

}  // namespace agtrace::ops
