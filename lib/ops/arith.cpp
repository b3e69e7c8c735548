// + - * / neg pow reciprocal and comparisons.
#include <cmath>

#include "ops/activations.hpp"
#include "ops/common.hpp"
#include "ops/double_backward.hpp"
#include "ops/inplace_util.hpp"
#include "ops/ops.hpp"
#include "tensor/device_backend.hpp"
#include "tensor/fast_paths.hpp"

namespace agtrace::ops {

using namespace detail;
using autograd::make_node;
using autograd::set_history;

Tensor wrap_number(const Value& v) {
  static const InternedString kScalarTensor("scalar_tensor");  // every Python number of a program
  OpScope scope(kScalarTensor);
  DeviceScope on_cpu(cpu_device_name());  // a wrapped number is a CPU tensor, whatever the operands
  DType d = v.kind == Value::Kind::Float ? DType::Float64
            : v.kind == Value::Kind::Bool ? DType::Bool
                                          : DType::Int64;
  Tensor t = scalar_tensor(v.number(), d);
  t->is_wrapped_number = true;
  return t;
}

namespace detail {

AttrValue number_attr(const Value& v) {
  return v.kind == Value::Kind::Float ? AttrValue::real(v.f) : AttrValue::integer(static_cast<int64_t>(v.number()));
}
double attr_number(const AttrValue& a) {
  return a.kind == AttrValue::Kind::Double ? a.d : static_cast<double>(a.i);
}

Tensor grad_to_input(const Tensor& g, const Node& n, size_t i) {
  return as_dtype(kernels::sum_to(g, n.input_meta[i].sizes), n.input_meta[i].dtype);
}

// AddBackward0 / SubBackward0: grad_self = grad, grad_other = ±alpha * grad (sum_to for broadcasts).
std::vector<Tensor> add_sub_backward(Node& n, const std::vector<Tensor>& g) {
  static const InternedString kSub("SubBackward0");
  const double sign = n.name == kSub ? -1.0 : 1.0;  // interned: one pointer comparison
  const double scale = sign * attr_number(n.attr("alpha"));
  Tensor ga = n.next[0].fn ? grad_to_input(g[0], n, 0) : nullptr;
  Tensor gb;
  if (n.next[1].fn) gb = grad_to_input(scale == 1.0 ? g[0] : kscale(g[0], scale), n, 1);
  return {ga, gb};
}

// RsubBackward1: rsub(self, other_scalar, alpha) = other - alpha * self.
std::vector<Tensor> rsub_backward(Node& n, const std::vector<Tensor>& g) {
  return {grad_to_input(kscale(g[0], -attr_number(n.attr("alpha"))), n, 0)};
}

// MulBackward0: grad_self = grad * other, grad_other = grad * self.
std::vector<Tensor> mul_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor ga, gb;
  if (n.next[0].fn) ga = grad_to_input(kmul(g[0], n.unpack("other")), n, 0);
  if (n.next[1].fn) gb = grad_to_input(kmul(g[0], n.unpack("self")), n, 1);
  return {ga, gb};
}

// DivBackward0: grad_self = grad / other, grad_other = -grad * self / other^2.
std::vector<Tensor> div_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor other = n.unpack("other");
  Tensor ga, gb;
  if (n.next[0].fn) ga = grad_to_input(kdiv(g[0], other), n, 0);
  if (n.next[1].fn) {
    Tensor self = n.unpack("self");
    if (kernels::device::any_on_device({&g[0], &self, &other})) {
      gb = grad_to_input(kernels::device::ternary(cuda::pw::TernaryOp::DivBackwardOther, g[0], self, other,
                                                  kernels::result_type(self, other), "div"),
                         n, 1);
    } else {
      Tensor q = kernels::binary(self, other, kernels::result_type(self, other),
                                 [](double s, double o) { return -s / (o * o); }, "div");
      gb = grad_to_input(kmul(g[0], q), n, 1);
    }
  }
  return {ga, gb};
}

std::vector<Tensor> neg_backward(Node& n, const std::vector<Tensor>& g) {
  return {grad_to_input(kscale(g[0], -1.0), n, 0)};
}

// PowBackward0: grad * exponent * self^(exponent - 1); zero for exponent 0.
std::vector<Tensor> pow_scalar_backward(Node& n, const std::vector<Tensor>& g) {
  const double e = attr_number(n.attr("exponent"));
  Tensor self = n.unpack("self");
  if (kernels::device::any_on_device({&g[0], &self}))
    return {grad_to_input(kernels::device::binary(cuda::pw::BinaryOp::PowScalarBackward, g[0], self,
                                                  kernels::promote(g[0]->dtype(), self->dtype()), "pow", e),
                          n, 0)};
  Tensor d = kernels::unary(self, self->dtype(), [e](double s) { return e == 0.0 ? 0.0 : e * std::pow(s, e - 1.0); });
  return {grad_to_input(kmul(g[0], d), n, 0)};
}

// PowBackward2 (pow_backward_exponent with a Scalar base): grad * result * log(self),
// 0 where self == 0 and exponent >= 0.
std::vector<Tensor> pow_number_base_backward(Node& n, const std::vector<Tensor>& g) {
  const double base = attr_number(n.attr("self"));
  Tensor ex = n.unpack("exponent"), result = n.unpack("result");
  Tensor d = kernels::binary(ex, result, result->dtype(), [base](double e, double r) {
    return (base == 0.0 && e >= 0.0) ? 0.0 : r * std::log(base);
  }, "pow");
  return {grad_to_input(kmul(g[0], d), n, 0)};
}

// PowBackward1: grad_self = grad * exp * self^(exp-1); grad_exp = grad * result * log(self),
// masked to 0 where self == 0 and exp >= 0 (derivatives.yaml pow_backward_exponent).
std::vector<Tensor> pow_tensor_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self"), ex = n.unpack("exponent"), result = n.unpack("result");
  Tensor ga, gb;
  if (kernels::device::any_on_device({&g[0], &self, &ex})) {
    using cuda::pw::TernaryOp;
    if (n.next[0].fn)
      ga = grad_to_input(kernels::device::ternary(TernaryOp::PowBackwardSelf, g[0], self, ex, result->dtype(), "pow"),
                         n, 0);
    if (n.next[1].fn)
      gb = grad_to_input(
          kernels::device::ternary(TernaryOp::PowBackwardExponent, g[0], self, ex, result->dtype(), "pow"), n, 1);
    return {ga, gb};
  }
  if (n.next[0].fn) {
    Tensor d = kernels::binary(self, ex, result->dtype(),
                               [](double s, double e) { return e == 0.0 ? 0.0 : e * std::pow(s, e - 1.0); }, "pow");
    ga = grad_to_input(kmul(g[0], d), n, 0);
  }
  if (n.next[1].fn) {
    Tensor d = kernels::ternary(self, ex, result, result->dtype(),
                                [](double s, double e, double r) { return (s == 0.0 && e >= 0.0) ? 0.0 : r * std::log(s); },
                                "pow");
    gb = grad_to_input(kmul(g[0], d), n, 1);
  }
  return {ga, gb};
}

// ReciprocalBackward0: -grad * result^2.
std::vector<Tensor> reciprocal_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor r = n.unpack("result");
  if (kernels::device::any_on_device({&g[0], &r}))
    return {grad_to_input(kernels::device::binary(cuda::pw::BinaryOp::ReciprocalBackward, g[0], r,
                                                  kernels::promote(g[0]->dtype(), r->dtype()), "reciprocal"),
                          n, 0)};
  Tensor d = kernels::unary(r, r->dtype(), [](double v) { return -v * v; });
  return {grad_to_input(kmul(g[0], d), n, 0)};
}

// ---- create_graph=True formulas (derivatives.yaml, torch 1.13), with autograd-aware ops.

// AddBackward0: self: grad; other: maybe_multiply(grad, alpha) (grad * alpha is
// mul.Scalar, MulBackward1, only when alpha != 1; measured _saved_other 2).
// SubBackward0: other: maybe_multiply(-grad, alpha) (NegBackward0, measured).
std::vector<Tensor> add_sub_dbackward(Node& n, const std::vector<Tensor>& g) {
  const bool is_sub = n.name == "SubBackward0";
  const AttrValue& alpha = n.attr("alpha");
  Tensor ga, gb;
  if (n.should_compute_output(0)) {
    ga = g[0];
  }
  if (n.should_compute_output(1)) {
    gb = is_sub ? neg(g[0]) : g[0];
    if (attr_number(alpha) != 1.0) gb = mul_scalar(gb, attr_value(alpha));
  }
  return {ga, gb};
}

// MulBackward0: self: grad * other; other: grad * self (self's gradient computed first).
std::vector<Tensor> mul_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor ga, gb;
  if (n.should_compute_output(0)) {
    ga = mul(g[0], n.unpack("other"));
  }
  if (n.should_compute_output(1)) {
    gb = mul(g[0], n.unpack("self"));
  }
  return {ga, gb};
}

// DivBackward0: self: grad / other; other: -grad * ((self / other) / other)
// (div_tensor_other_backward; measured MulBackward0 over NegBackward0 and DivBackward0 over
// DivBackward0). The right operand is computed first, as GCC evaluates operator* arguments.
std::vector<Tensor> div_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor other = n.unpack("other");
  Tensor ga, gb;
  if (n.should_compute_output(0)) {
    ga = div(g[0], other);
  }
  if (n.should_compute_output(1)) {
    Tensor self = n.unpack("self");
    Tensor q = div(div(self, other), other);
    gb = mul(neg(g[0]), q);
  }
  return {ga, gb};
}

// NegBackward0: grad.neg().
std::vector<Tensor> neg_dbackward(Node&, const std::vector<Tensor>& g) {
  return {neg(g[0])};
}

// PowBackward0 (pow_backward): zeros_like(self) for exponent 0, else
// grad * (exponent * self.pow(exponent - 1)) with exponent as a double (measured:
// MulBackward0 over MulBackward1 (_saved_other 3.0) over PowBackward0 (_saved_exponent 2.0)).
std::vector<Tensor> pow_scalar_dbackward(Node& n, const std::vector<Tensor>& g) {
  const double e = attr_number(n.attr("exponent"));
  Tensor self = n.unpack("self");
  if (e == 0.0) return {kernels::full(self->sizes, 0.0, self->dtype(), self->is_meta())};
  Tensor d = mul_scalar(pow_scalar(self, Value::real(e - 1.0)), Value::real(e));
  return {mul(g[0], d)};
}

// at::zeros({}, grad.options()).
Tensor zeros_0d(const Tensor& like) {
  OpScope scope("zeros");
  return scalar_tensor(0.0, like->dtype());
}

// PowBackward1 (pow_backward_self / pow_backward_exponent):
//   self: where(exponent == 0, zeros({}), grad * (exponent * self.pow(exponent - 1)))
//   exponent: grad * where(self == 0 & exponent >= 0, zeros({}), result * self.log())
// (measured: WhereBackward0 > MulBackward0 > MulBackward0 > PowBackward1 > SubBackward1 for
// self; MulBackward0 > WhereBackward0 > MulBackward0 > (PowBackward1, LogBackward0) for the
// exponent, LogBackward0 absent for a scalar base as in 2.0 ** x).
// On cuda the masks are PyTorch's own expressions, each a bool tensor on the device:
// exponent == 0, and (self == 0) & (exponent >= 0).
std::vector<Tensor> pow_tensor_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self"), ex = n.unpack("exponent");
  const bool on_device = kernels::device::any_on_device({&self, &ex});
  using cuda::pw::BinaryOp;
  Tensor ga, gb;
  if (n.should_compute_output(0)) {
    Tensor d = mul(ex, pow_tensor(self, sub_scalar(ex, Value::integer(1))));
    Tensor value = mul(g[0], d);
    Tensor cond = on_device ? kernels::device::compare_scalar(BinaryOp::Eq, ex, 0, "eq")
                            : kernels::unary(ex, DType::Bool, [](double e) { return e == 0.0 ? 1.0 : 0.0; });
    ga = where(cond, zeros_0d(g[0]), value);
  }
  if (n.should_compute_output(1)) {
    Tensor result = n.unpack("result");
    Tensor value = mul(result, log(self));
    Tensor cond =
        on_device ? kernels::device::binary(BinaryOp::Mul, kernels::device::compare_scalar(BinaryOp::Eq, self, 0, "eq"),
                                            kernels::device::compare_scalar(BinaryOp::Ge, ex, 0, "ge"), DType::Bool, "logical_and")
                  : kernels::binary(self, ex, DType::Bool,
                                    [](double s, double e) { return (s == 0.0 && e >= 0.0) ? 1.0 : 0.0; }, "logical_and");
    gb = mul(g[0], where(cond, zeros_0d(g[0]), value));
  }
  return {ga, gb};
}

// RsubBackward1: maybe_multiply(-grad, alpha) (NegBackward0, then MulBackward1 when
// alpha != 1; measured).
std::vector<Tensor> rsub_dbackward(Node& n, const std::vector<Tensor>& g) {
  const AttrValue& alpha = n.attr("alpha");
  Tensor r = neg(g[0]);
  if (attr_number(alpha) != 1.0) r = mul_scalar(r, attr_value(alpha));
  return {r};
}

// ReciprocalBackward0: -grad * (result * result) (measured: MulBackward0 over NegBackward0
// and MulBackward0; the right operand first, as for div).
std::vector<Tensor> reciprocal_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor r = n.unpack("result");
  Tensor sq = mul(r, r);
  return {mul(neg(g[0]), sq)};
}


double negate(double x) { return -x; }

std::optional<UnaryRecipe> arith_recipe(const std::string& name) {
  if (name != "neg") return std::nullopt;
  return UnaryRecipe{"neg", "NegBackward0", negate, neg_backward, neg_dbackward, UnaryRecipe::Saves::Nothing, false,
                     cuda::pw::UnaryOp::Neg};
}

}  // namespace detail

namespace {
// binary_forward whose float32 loop may be split between threads (add, sub, mul: pure
// formulas; each element computed as in the general loop, so results do not change).
// `device_op`/`s0`: the formula as lib/cuda's op code, for operands on cuda.
template <typename F>
Tensor split_forward(const Tensor& a, const Tensor& b, const std::string& op, F&& f, cuda::pw::BinaryOp device_op,
                     double s0 = 1) {
  const DType out = kernels::result_type(a, b);
  if (kernels::device::any_on_device({&a, &b})) return kernels::device::binary(device_op, a, b, out, op, s0);
  return with_operands_in_common_dtype(a, b, out, f,
                                       [&](auto&& g) { return kernels::binary_split(a, b, out, g, op); });
}
}  // namespace

Tensor add(const Tensor& a, const Tensor& b, const Value& alpha) {
  OpScope scope("add");
  const double al = alpha.number();
  Tensor r = split_forward(a, b, "add", [al](double x, double y) { return x + al * y; }, cuda::pw::BinaryOp::Add, al);
  if (needs_grad({&a, &b})) {
    auto node = make_node("AddBackward0", add_sub_backward, {a, b});
    node->differentiable_backward = add_sub_dbackward;
    node->save_attr("alpha", number_attr(alpha));
    set_history(r, node);
  }
  return r;
}

Tensor sub(const Tensor& a, const Tensor& b, const Value& alpha) {
  OpScope scope("sub");
  const double al = alpha.number();
  Tensor r = split_forward(a, b, "sub", [al](double x, double y) { return x - al * y; }, cuda::pw::BinaryOp::Sub, al);
  if (needs_grad({&a, &b})) {
    auto node = make_node("SubBackward0", add_sub_backward, {a, b});
    node->differentiable_backward = add_sub_dbackward;
    node->save_attr("alpha", number_attr(alpha));
    set_history(r, node);
  }
  return r;
}

Tensor rsub(const Tensor& a, const Value& scalar, const Value& alpha) {
  OpScope scope("rsub");
  Tensor s = wrap_number(scalar);
  const double al = alpha.number();
  Tensor r = binary_forward(s, a, "rsub", [al](double x, double y) { return x - al * y; },
                            cuda::pw::BinaryOp::Sub, al);
  if (needs_grad({&a})) {
    // rsub(Tensor, Scalar) takes the scalar as a plain number: one edge only.
    auto node = make_node("RsubBackward1", rsub_backward, {a});
    node->differentiable_backward = rsub_dbackward;
    node->save_attr("alpha", number_attr(alpha));
    set_history(r, node);
  }
  return r;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  OpScope scope("mul");
  Tensor r = split_forward(a, b, "mul", [](double x, double y) { return x * y; }, cuda::pw::BinaryOp::Mul);
  if (needs_grad({&a, &b})) {
    auto node = make_node("MulBackward0", mul_backward, {a, b}, 2);
    node->differentiable_backward = mul_dbackward;
    // derivatives.yaml: self needed only for other's gradient and vice versa.
    node->save_input("other", b, rg(a));
    node->save_input("self", a, rg(b));
    set_history(r, node);
  }
  return r;
}

Tensor div(const Tensor& a, const Tensor& b) {
  OpScope scope("div");
  Tensor r = binary_forward(a, b, "div", [](double x, double y) { return x / y; }, cuda::pw::BinaryOp::Div, 1,
                            true);
  if (needs_grad({&a, &b})) {
    auto node = make_node("DivBackward0", div_backward, {a, b}, 2);
    node->differentiable_backward = div_dbackward;
    // div always saves other (both gradients use it) and self only for other's gradient.
    node->save_input("other", b, true);
    node->save_input("self", a, rg(b));
    set_history(r, node);
  }
  return r;
}

Tensor neg(const Tensor& a) {
  OpScope scope("neg");
  if (a->dtype() == DType::Bool) {
    ScenarioError e("type_error",
                    "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
                    "invert a mask, use the `~` or `logical_not()` operator instead.");
    throw e;
  }
  Tensor r = kernels::device::on_device(a) ? kernels::device::unary(cuda::pw::UnaryOp::Neg, a, a->dtype())
                                           : kernels::unary(a, a->dtype(), [](double x) { return -x; });
  if (needs_grad({&a})) {
    auto node = make_node("NegBackward0", neg_backward, {a});
    node->differentiable_backward = neg_dbackward;
    set_history(r, node);
  }
  return r;
}

Tensor pow_scalar(const Tensor& a, const Value& exponent) {
  OpScope scope("pow");
  const double e = exponent.number();
  if (!is_floating(a->dtype()) && exponent.kind == Value::Kind::Int && e < 0)
    throw ScenarioError("type_error", "Integers to negative integer powers are not allowed.");
  DType out = a->dtype();
  if (!is_floating(out) && exponent.kind == Value::Kind::Float) out = DType::Float32;
  Tensor r = kernels::device::on_device(a) ? kernels::device::unary(cuda::pw::UnaryOp::PowScalar, a, out, e)
                                           : kernels::unary(a, out, [e](double x) { return std::pow(x, e); });
  if (needs_grad({&a})) {
    auto node = make_node("PowBackward0", pow_scalar_backward, {a});
    node->differentiable_backward = pow_scalar_dbackward;
    node->save_attr("exponent", number_attr(exponent));
    node->save_input("self", a);
    set_history(r, node);
  }
  return r;
}

Tensor pow_tensor(const Tensor& a, const Tensor& exponent) {
  OpScope scope("pow");
  Tensor r = binary_forward(a, exponent, "pow", [](double x, double y) { return std::pow(x, y); },
                            cuda::pw::BinaryOp::Pow);
  if (needs_grad({&a, &exponent})) {
    auto node = make_node("PowBackward1", pow_tensor_backward, {a, exponent});
    node->differentiable_backward = pow_tensor_dbackward;
    set_history(r, node);
    // Saved whatever requires grad (SUMMARY: the set does not change with requires_grad).
    node->save_input("exponent", exponent);
    node->save_output("result", r, 0);
    node->save_input("self", a);
  }
  return r;
}

Tensor rpow(const Value& base, const Tensor& exponent) {
  // torch.pow(Scalar self, Tensor exponent) wraps the base as a 0-d tensor of the result
  // dtype (measured: f32[], 4 B) and records PowBackward1 with edges (None, exponent).
  DType out = exponent->dtype();
  if (!is_floating(out) && base.kind == Value::Kind::Float) out = DType::Float32;
  Tensor b;
  {
    OpScope scope("scalar_tensor");
    DeviceScope on_cpu(cpu_device_name());  // a wrapped number: a CPU scalar on either device
    b = scalar_tensor(base.number(), out);
  }
  return pow_tensor(b, exponent);
}

Tensor pow_number_base(const Value& base, const Tensor& exponent) {
  // aten::pow.Scalar(Scalar self, Tensor exponent), what torch.pow(2, a) calls: PowBackward2
  // saving exponent, result and the number itself (measured: _saved_self 2, 2.5 or True).
  OpScope scope("pow");
  DType out = exponent->dtype();
  if (!is_floating(out) && base.kind == Value::Kind::Float) out = DType::Float32;
  if (!is_floating(out)) throw ScenarioError("unsupported", "torch.pow(number, integer tensor) is not supported");
  if (kernels::device::on_device(exponent))
    throw ScenarioError("unsupported", "torch.pow(number, tensor) on cuda is not supported");
  const double b = base.number();
  Tensor r = kernels::unary(exponent, out, [b](double e) { return std::pow(b, e); });
  if (needs_grad({&exponent})) {
    auto node = make_node("PowBackward2", pow_number_base_backward, {exponent});
    set_history(r, node);
    node->save_input("exponent", exponent);
    node->save_output("result", r, 0);
    node->save_attr("self", number_attr(base));
  }
  return r;
}

Tensor reciprocal(const Tensor& a) {
  OpScope scope("reciprocal");
  DType out = is_floating(a->dtype()) ? a->dtype() : DType::Float32;
  Tensor r = kernels::device::on_device(a) ? kernels::device::unary(cuda::pw::UnaryOp::Reciprocal, a, out)
                                           : kernels::unary(a, out, [](double x) { return 1.0 / x; });
  if (needs_grad({&a})) {
    auto node = make_node("ReciprocalBackward0", reciprocal_backward, {a});
    node->differentiable_backward = reciprocal_dbackward;
    set_history(r, node);
    node->save_output("result", r, 0);
  }
  return r;
}

Tensor compare(const Tensor& a, const Tensor& b, const std::string& op) {
  OpScope scope(op);
  // Comparisons are not differentiable: no node, a bool result.
  std::function<double(double, double)> f;
  if (op == "eq") f = [](double x, double y) { return x == y ? 1.0 : 0.0; };
  else if (op == "ne") f = [](double x, double y) { return x != y ? 1.0 : 0.0; };
  else if (op == "lt") f = [](double x, double y) { return x < y ? 1.0 : 0.0; };
  else if (op == "le") f = [](double x, double y) { return x <= y ? 1.0 : 0.0; };
  else if (op == "gt") f = [](double x, double y) { return x > y ? 1.0 : 0.0; };
  else f = [](double x, double y) { return x >= y ? 1.0 : 0.0; };
  // Compare in the promoted dtype, as PyTorch does.
  DType common = kernels::result_type(a, b);
  if (kernels::device::any_on_device({&a, &b})) {
    using cuda::pw::BinaryOp;
    const BinaryOp code = op == "eq" ? BinaryOp::Eq : op == "ne" ? BinaryOp::Ne : op == "lt" ? BinaryOp::Lt
                          : op == "le" ? BinaryOp::Le : op == "gt" ? BinaryOp::Gt : BinaryOp::Ge;
    return kernels::device::binary(code, a, b, DType::Bool, op, 1, common);
  }
  return kernels::binary(a, b, DType::Bool,
                         [f, common](double x, double y) {
                           return f(round_to_dtype(x, common), round_to_dtype(y, common));
                         },
                         op);
}

}  // namespace agtrace::ops
