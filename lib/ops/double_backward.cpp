// Ops used by create_graph=True backward formulas (see double_backward.hpp). Each forward
// is the backward formula PyTorch 1.13 computes; each node's own backward is the second
// derivative from derivatives.yaml.
#include "ops/double_backward.hpp"

#include <optional>

#include "ops/common.hpp"
#include "ops/ops.hpp"
#include "ops/shapes.hpp"
#include "tensor/device_backend.hpp"

namespace agtrace::ops {

using namespace detail;
using autograd::make_node;
using autograd::set_history;

namespace detail {

Value attr_value(const AttrValue& a) {
  return a.kind == AttrValue::Kind::Double ? Value::real(a.d) : Value::integer(a.i);
}

}  // namespace detail

Tensor sum_to_graph(const Tensor& grad, const Shape& shape) {
  // at::sum_to (ATen/ExpandUtils.h): sum() for a 0-d target; else sum over the leading dims
  // and the broadcast size-1 dims with keepdim=True, then view(shape) if leading dims existed.
  if (shape.empty()) return sum(grad, std::nullopt, false);
  const size_t leading = grad->sizes.size() - shape.size();
  std::vector<int64_t> dims;
  for (size_t i = 0; i < leading; ++i) dims.push_back(static_cast<int64_t>(i));
  for (size_t i = leading; i < grad->sizes.size(); ++i)
    if (shape[i - leading] == 1 && grad->sizes[i] != 1) dims.push_back(static_cast<int64_t>(i));
  Tensor g = grad;
  if (!dims.empty()) g = sum(g, dims, true);
  if (leading > 0) g = view(g, std::vector<int64_t>(shape.begin(), shape.end()));
  return g;
}

Tensor validate_grad_output(const Tensor& grad, const autograd::OutputMeta& input) {
  Tensor g = grad;
  if (!g) return g;
  if (g->sizes != input.sizes) g = sum_to_graph(g, input.sizes);
  if (g->dtype() != input.dtype) g = to_dtype(g, input.dtype);
  return g;
}

namespace {

double number_of(const AttrValue& a) { return a.kind == AttrValue::Kind::Double ? a.d : static_cast<double>(a.i); }

// MulBackward1 (derivatives.yaml, mul.Scalar: self: mul_tensor_backward(grad, other,
// self.scalar_type()) = grad * other).
std::vector<Tensor> mul_scalar_backward(Node& n, const std::vector<Tensor>& g) {
  return {as_dtype(kscale(g[0], number_of(n.attr("other"))), n.input_meta[0].dtype)};
}
// at::scalar_to_tensor(other): a 0-d float64 (double) or int64 (integer) tensor, not a
// wrapped number.
Tensor scalar_to_tensor(const AttrValue& a) {
  OpScope scope("scalar_tensor");
  DeviceScope on_cpu("cpu");  // at::scalar_to_tensor's default device is the CPU
  return a.kind == AttrValue::Kind::Double ? scalar_tensor(a.d, DType::Float64)
                                           : scalar_tensor(static_cast<double>(a.i), DType::Int64);
}
// create_graph: grad * at::scalar_to_tensor(other), mul.Tensor (measured: MulBackward1's
// gradient graph node is MulBackward0 with _saved_other an int64 0-d tensor, 8 bytes).
std::vector<Tensor> mul_scalar_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor r = mul(g[0], scalar_to_tensor(n.attr("other")));
  return {r};
}

// DivBackward1 (div.Scalar: self: div_tensor_self_backward(grad, other, ...) = grad / other).
std::vector<Tensor> div_scalar_backward(Node& n, const std::vector<Tensor>& g) {
  const double s = number_of(n.attr("other"));
  Tensor q = kernels::device::on_device(g[0])
                 ? kernels::device::unary(cuda::pw::UnaryOp::DivScalar, g[0], g[0]->dtype(), s)
                 : kernels::unary(g[0], g[0]->dtype(), [s](double v) { return v / s; });
  return {as_dtype(q, n.input_meta[0].dtype)};
}
// create_graph: div_tensor_self_backward(grad, at::scalar_to_tensor(other)) = grad / other,
// div.Tensor (DivBackward0).
std::vector<Tensor> div_scalar_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor r = div(g[0], scalar_to_tensor(n.attr("other")));
  return {r};
}

// TanhBackwardBackward0 (derivatives.yaml tanh_backward: grad_output: tanh_backward(grad,
// output); output: grad * (-2 * output * grad_output)).
// On cuda: the product of three as one result written in place (o * go, then * g, then
// * s), so the accountant sees the one new storage the CPU's fused loop makes.
Tensor device_triple_product(const Tensor& g, const Tensor& o, const Tensor& go, double s, double add = 0) {
  using cuda::pw::BinaryOp;
  using cuda::pw::UnaryOp;
  if (g->sizes != o->sizes || o->sizes != go->sizes) throw_no_device_kernel("cuda");
  Tensor r = kernels::device::unary(UnaryOp::MulScalar, o, g->dtype(), s);
  if (add != 0) kernels::device::unary_inplace(UnaryOp::AddScalar, r, add);
  kernels::device::binary_inplace(BinaryOp::Mul, r, go);
  kernels::device::binary_inplace(BinaryOp::Mul, r, g);
  return r;
}

std::vector<Tensor> tanh_bb_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor go = n.unpack("grad_output"), o = n.unpack("output");
  Tensor a, b;
  if (kernels::device::any_on_device({&g[0], &o, &go})) {
    if (n.next[0].fn) a = kernels::device::binary(cuda::pw::BinaryOp::TanhBackward, g[0], o, g[0]->dtype(), "tanh_backward");
    if (n.next[1].fn) b = device_triple_product(g[0], o, go, -2.0);  // grad * (-2 * output * grad_output)
    return {a, b};
  }
  if (n.next[0].fn)
    a = kernels::binary(g[0], o, g[0]->dtype(), [](double gv, double ov) { return gv * (1.0 - ov * ov); }, "tanh_backward");
  if (n.next[1].fn)
    b = kernels::ternary(g[0], o, go, g[0]->dtype(),
                         [](double gv, double ov, double gov) { return gv * (-2.0 * ov * gov); }, "mul");
  return {a, b};
}
std::vector<Tensor> tanh_bb_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor go = n.unpack("grad_output"), o = n.unpack("output");
  Tensor a, b;
  if (n.should_compute_output(0)) a = tanh_backward_op(g[0], o);
  if (n.should_compute_output(1)) b = mul(g[0], mul(mul_scalar(o, Value::integer(-2)), go));
  return {a, b};
}

// SigmoidBackwardBackward0 (sigmoid_backward: grad_output: sigmoid_backward(grad, output);
// output: grad * grad_output * (-2 * output + 1)).
std::vector<Tensor> sigmoid_bb_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor go = n.unpack("grad_output"), o = n.unpack("output");
  Tensor a, b;
  if (kernels::device::any_on_device({&g[0], &o, &go})) {
    if (n.next[0].fn)
      a = kernels::device::binary(cuda::pw::BinaryOp::SigmoidBackward, g[0], o, g[0]->dtype(), "sigmoid_backward");
    if (n.next[1].fn) b = device_triple_product(g[0], o, go, -2.0, 1.0);  // grad * grad_output * (-2 output + 1)
    return {a, b};
  }
  if (n.next[0].fn)
    a = kernels::binary(g[0], o, g[0]->dtype(), [](double gv, double ov) { return gv * ov * (1.0 - ov); },
                        "sigmoid_backward");
  if (n.next[1].fn)
    b = kernels::ternary(g[0], o, go, g[0]->dtype(),
                         [](double gv, double ov, double gov) { return gv * gov * (-2.0 * ov + 1.0); }, "mul");
  return {a, b};
}

// ThresholdBackwardBackward0 (threshold_backward: grad_output: threshold_backward(grad,
// self, threshold); self: zeros_like(grad)).
std::vector<Tensor> threshold_bb_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self");
  const double th = number_of(n.attr("threshold"));
  Tensor a, b;
  if (n.next[0].fn && kernels::device::any_on_device({&g[0], &self})) {
    if (th != 0.0) throw_no_device_kernel("cuda");
    a = kernels::device::binary(cuda::pw::BinaryOp::ReluBackward, g[0], self, g[0]->dtype(), "threshold_backward");
  } else if (n.next[0].fn) {
    a = kernels::binary(g[0], self, g[0]->dtype(), [th](double gv, double s) { return s <= th ? 0.0 : gv; },
                        "threshold_backward");
  }
  if (n.next[1].fn) b = kernels::full(g[0]->sizes, 0.0, g[0]->dtype(), g[0]->is_meta());
  return {a, b};
}
std::vector<Tensor> threshold_bb_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self");
  Tensor a, b;
  if (n.should_compute_output(0)) a = threshold_backward_op(g[0], self, attr_value(n.attr("threshold")));
  if (n.should_compute_output(1)) b = kernels::full(g[0]->sizes, 0.0, g[0]->dtype(), g[0]->is_meta());
  return {a, b};
}

}  // namespace

Tensor mul_scalar(const Tensor& a, const Value& other) {
  OpScope scope("mul");
  const double s = other.number();
  DType out = a->dtype();
  if (!is_floating(out) && other.kind == Value::Kind::Float) out = DType::Float32;
  Tensor r = kernels::device::on_device(a) ? kernels::device::unary(cuda::pw::UnaryOp::MulScalar, a, out, s)
                                           : kernels::unary(a, out, [s](double x) { return x * s; });
  if (needs_grad({&a})) {
    auto node = make_node("MulBackward1", mul_scalar_backward, {a});
    node->differentiable_backward = mul_scalar_dbackward;
    node->save_attr("other", number_attr(other));
    set_history(r, node);
  }
  return r;
}

Tensor div_scalar(const Tensor& a, const Value& other) {
  OpScope scope("div");
  const double s = other.number();
  DType out = is_floating(a->dtype()) ? a->dtype() : DType::Float32;
  Tensor r = kernels::device::on_device(a) ? kernels::device::unary(cuda::pw::UnaryOp::DivScalar, a, out, s)
                                           : kernels::unary(a, out, [s](double x) { return x / s; });
  if (needs_grad({&a})) {
    auto node = make_node("DivBackward1", div_scalar_backward, {a});
    node->differentiable_backward = div_scalar_dbackward;
    node->save_attr("other", number_attr(other));
    set_history(r, node);
  }
  return r;
}

namespace {
// The three dedicated backward ops: edges (grad_output, output/self); both tensors saved
// whichever requires grad (measured with torch.ops.aten.*_backward on each combination).
// `device_op`: f as lib/cuda's op code (nullopt: none, the op has no cuda route).
template <typename F>
Tensor pair_op(const char* op, const char* node_name, const Tensor& go, const Tensor& o, F&& f,
               autograd::BackwardFn bw, autograd::BackwardFn dbw, const char* second,
               std::optional<cuda::pw::BinaryOp> device_op) {
  OpScope scope(op);
  Tensor r = device_op && kernels::device::any_on_device({&go, &o})
                 ? kernels::device::binary(*device_op, go, o, kernels::result_type(go, o), op)
                 : kernels::binary(go, o, kernels::result_type(go, o), f, op);
  if (needs_grad({&go, &o})) {
    auto node = make_node(node_name, bw, {go, o});
    node->differentiable_backward = dbw;
    if (std::string(second) == "output") {
      node->save_input("grad_output", go);
      node->save_input("output", o);
    } else {
      node->save_input("self", o);
    }
    set_history(r, node);
    return r;
  }
  return r;
}
}  // namespace

Tensor tanh_backward_op(const Tensor& grad_output, const Tensor& output) {
  return pair_op("tanh_backward", "TanhBackwardBackward0", grad_output, output,
                 [](double g, double o) { return g * (1.0 - o * o); }, tanh_bb_backward, tanh_bb_dbackward, "output",
                 cuda::pw::BinaryOp::TanhBackward);
}

Tensor sigmoid_backward_op(const Tensor& grad_output, const Tensor& output) {
  return pair_op("sigmoid_backward", "SigmoidBackwardBackward0", grad_output, output,
                 [](double g, double o) { return g * o * (1.0 - o); }, sigmoid_bb_backward, nullptr, "output",
                 cuda::pw::BinaryOp::SigmoidBackward);
}

Tensor threshold_backward_op(const Tensor& grad_output, const Tensor& self, const Value& threshold) {
  const double th = threshold.number();
  Tensor r = pair_op("threshold_backward", "ThresholdBackwardBackward0", grad_output, self,
                     [th](double g, double s) { return s <= th ? 0.0 : g; }, threshold_bb_backward,
                     threshold_bb_dbackward, "self",
                     // threshold_backward(grad, self, 0) is relu's backward formula
                     th == 0.0 ? std::optional<cuda::pw::BinaryOp>(cuda::pw::BinaryOp::ReluBackward) : std::nullopt);
  if (r->grad_fn && r->grad_fn->name == "ThresholdBackwardBackward0") r->grad_fn->save_attr("threshold", number_attr(threshold));
  return r;
}

namespace {

// zeros(input_sizes) with grad written through the view `place` gives of it (one new
// storage, as the ATen kernels allocate one zeros tensor).
Tensor scatter_into_zeros(const Tensor& grad, const Shape& input_sizes,
                          const std::function<Tensor(const Tensor&)>& place) {
  Tensor r = kernels::full(input_sizes, 0.0, grad->dtype(), grad->is_meta());
  if (!r->is_meta()) {
    autograd::GradModeGuard no_grad(false);
    if (kernels::device::on_device(r))
      kernels::device::copy_into(place(r), grad);
    else
      write_values(place(r), to_values(grad));
  }
  return r;
}

// SelectBackwardBackward0 (derivatives.yaml select_backward: grad_output: grad.select(dim,
// index)); the same formula records SelectBackward0 under create_graph.
std::vector<Tensor> select_bb_backward(Node& n, const std::vector<Tensor>& g) {
  return {select(g[0], n.attr("dim").i, n.attr("index").i)};
}

// SliceBackwardBackward0 (slice_backward: grad_output: grad.slice(dim, start, end, step)).
std::vector<Tensor> slice_bb_backward(Node& n, const std::vector<Tensor>& g) {
  return {slice(g[0], n.attr("dim").i, n.attr("start").i, n.attr("end").i, n.attr("step").i)};
}

}  // namespace

Tensor select_backward_op(const Tensor& grad, const Shape& input_sizes, int64_t dim, int64_t index) {
  OpScope scope("select_backward");
  Tensor r = scatter_into_zeros(grad, input_sizes, [&](const Tensor& z) { return select(z, dim, index); });
  if (needs_grad({&grad})) {
    auto node = make_node("SelectBackwardBackward0", select_bb_backward, {grad});
    node->differentiable_backward = select_bb_backward;
    node->save_attr("dim", AttrValue::integer(dim, true));
    node->save_attr("index", AttrValue::integer(index, true));
    set_history(r, node);
  }
  return r;
}

Tensor slice_backward_op(const Tensor& grad, const Shape& input_sizes, int64_t dim, int64_t start, int64_t end,
                         int64_t step) {
  OpScope scope("slice_backward");
  Tensor r = scatter_into_zeros(grad, input_sizes, [&](const Tensor& z) { return slice(z, dim, start, end, step); });
  if (needs_grad({&grad})) {
    auto node = make_node("SliceBackwardBackward0", slice_bb_backward, {grad});
    node->differentiable_backward = slice_bb_backward;
    node->save_attr("dim", AttrValue::integer(dim, true));
    node->save_attr("end", AttrValue::integer(end, true));
    node->save_attr("start", AttrValue::integer(start, true));
    node->save_attr("step", AttrValue::integer(step));
    set_history(r, node);
  }
  return r;
}

namespace {
// SgnBackward0 (derivatives.yaml sgn: sgn_backward(result, grad, self)): zeros for real
// inputs, without a graph.
std::vector<Tensor> sgn_backward(Node& n, const std::vector<Tensor>& g) {
  const auto& m = n.input_meta[0];
  return {kernels::full(m.sizes, 0.0, m.dtype, g[0]->is_meta())};
}
// AddBackward1 (add.Scalar: self: grad).
std::vector<Tensor> add_scalar_backward(Node&, const std::vector<Tensor>& g) { return {g[0]}; }
}  // namespace

Tensor sgn(const Tensor& a) {
  OpScope scope("sgn");
  Tensor r = kernels::device::on_device(a)
                 ? kernels::device::unary(cuda::pw::UnaryOp::Sign, a, a->dtype())
                 : kernels::unary(a, a->dtype(), [](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); });
  if (needs_grad({&a})) {
    auto node = make_node("SgnBackward0", sgn_backward, {a});
    node->differentiable_backward = sgn_backward;
    set_history(r, node);
    node->save_output("result", r, 0);
    node->save_input("self", a);
  }
  return r;
}

namespace {
Tensor add_scalar_node(const Tensor& a, const Value& other, double sign, const char* op, const char* node_name) {
  OpScope scope(op);
  const double s = sign * other.number();
  DType out = a->dtype();
  if (!is_floating(out) && other.kind == Value::Kind::Float) out = DType::Float32;
  Tensor r = kernels::device::on_device(a) ? kernels::device::unary(cuda::pw::UnaryOp::AddScalar, a, out, s)
                                           : kernels::unary(a, out, [s](double x) { return x + s; });
  if (needs_grad({&a})) {
    auto node = make_node(node_name, add_scalar_backward, {a});
    node->differentiable_backward = add_scalar_backward;
    set_history(r, node);
  }
  return r;
}

}  // namespace

Tensor add_scalar(const Tensor& a, const Value& other) { return add_scalar_node(a, other, 1.0, "add", "AddBackward1"); }
Tensor sub_scalar(const Tensor& a, const Value& other) { return add_scalar_node(a, other, -1.0, "sub", "SubBackward1"); }

}  // namespace agtrace::ops
