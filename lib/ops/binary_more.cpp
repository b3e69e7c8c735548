// maximum minimum fmax fmin atan2 hypot remainder fmod lerp addcmul addcdiv dist
// rsub(Tensor, Tensor) addmv addr addbmm baddbmm: forward, node, saved values and backward
// side by side. Node names, saved attributes (dir() order, alphabetical), which are None for
// each requires_grad pattern, dtypes, errors and gradients (ties, NaN, broadcasting) measured
// with /usr/bin/python3 and torch 1.13; formulas from tools/autograd/derivatives.yaml and
// FunctionsManual.cpp (1.13).
#include "ops/binary_more.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "autograd/grad_mode.hpp"
#include "ops/activations.hpp"
#include "ops/double_backward.hpp"
#include "ops/more.hpp"
#include "ops/inplace_util.hpp"
#include "ops/more_util.hpp"
#include "ops/ops.hpp"
#include "ops/shapes.hpp"
#include "ops/table_util.hpp"

namespace agtrace::ops {

using namespace more_detail;

namespace {

double attr_number(const AttrValue& a) { return a.kind == AttrValue::Kind::Double ? a.d : static_cast<double>(a.i); }

// A gradient reduced to input i's shape (the engine's sum_to of a broadcast operand) in its dtype.
Tensor to_input(const Tensor& g, const Node& n, size_t i) {
  return as_dtype(kernels::sum_to(g, n.input_meta[i].sizes), n.input_meta[i].dtype);
}

// The result dtype of an op whose integer inputs give float32 (atan2, and true division).
DType floating_result(const Tensor& a, const Tensor& b) {
  const DType d = kernels::result_type(a, b);
  return is_floating(d) ? d : DType::Float32;
}

// Operands of one dtype, for ops whose mixed-dtype rules agtrace does not mirror.
void require_same_dtype(std::initializer_list<const Tensor*> ts, const std::string& op) {
  const DType d = (*ts.begin())->get()->dtype();
  for (const Tensor* t : ts)
    if ((*t)->dtype() != d) unsupported(op + " with operands of different dtypes");
}

// ================================================================ in-place forms
// The steps of inplace_util.hpp in PyTorch's order: refuse the edit where autograd forbids
// it, check the operands broadcast to self's shape and their type casts to self's, build the
// node before the edit (it may save a clone of the old self), write the values, bump the
// version once, rebase the history. The values are computed on the host from self and the
// operands and written into self: no result tensor is made (PyTorch's in-place kernels
// write self directly, so none shows in the memory accounting).

// t viewed with `shape` by broadcasting (stride 0 along new and size-1 dims): no copy.
Tensor broadcast_alias(const Tensor& t, const Shape& shape) {
  Shape strides(shape.size(), 0);
  const size_t lead = shape.size() - t->sizes.size();
  for (size_t d = 0; d < t->sizes.size(); ++d)
    strides[lead + d] = t->sizes[d] == shape[lead + d] ? t->strides[d] : 0;
  return make_alias(t, shape, strides, t->offset);
}

void check_inplace_operands(const Tensor& self, const std::vector<Tensor>& operands, const std::string& op,
                            bool float_result) {
  require_host(self);
  for (const Tensor& o : operands) require_host(o);
  check_inplace_allowed(self);
  check_no_internal_overlap(self);
  Shape shape = self->sizes;
  for (const Tensor& o : operands) shape = kernels::broadcast_shapes(shape, o->sizes, op);
  if (shape != Shape(self->sizes)) {
    // Measured wording (h[0].addcmul_(t, u) with t of shape (2, 1, 3)).
    ScenarioError e("shape_mismatch", "output with shape " + shape_str(self->sizes) +
                                          " doesn't match the broadcast shape " + shape_str(shape));
    e.facts = {{"op", op}, {"shapes", std::vector<Shape>{self->sizes, shape}}};
    throw e;
  }
  for (const Tensor& o : operands) check_castable(self, o, op);
  if (float_result && !is_floating(self->dtype())) {
    // Measured: an int64 i.atan2_(j) raises although both are integers.
    ScenarioError e("dtype_mismatch", "result type Float can't be cast to the desired output type " +
                                          dtype_scalar_name(self->dtype()));
    e.facts = {{"op", op}};
    throw e;
  }
}

// Edits self with f(self, operand values...) elementwise; `record` builds the node before the
// edit (null: no gradient recorded). Returns the node, recorded as self's history.
template <typename F, typename Record>
Shared<Node> edit_elementwise(const Tensor& self, const std::vector<Tensor>& operands, F&& f, Record&& record) {
  bool grad = needs_grad({&self});
  for (const Tensor& o : operands) grad = grad || needs_grad({&o});
  Shared<Node> node = grad ? record() : nullptr;
  bool meta = self->is_meta();
  for (const Tensor& o : operands) meta = meta || o->is_meta();
  if (!meta) {
    std::vector<double> out = to_values(self);
    std::vector<std::vector<double>> vals;
    for (const Tensor& o : operands) vals.push_back(to_values(broadcast_alias(o, self->sizes)));
    std::vector<double> args(vals.size());
    for (size_t i = 0; i < out.size(); ++i) {
      for (size_t k = 0; k < vals.size(); ++k) args[k] = vals[k][i];
      out[i] = f(out[i], args.data());
    }
    write_values(self, out);
  }
  bump(self);
  if (node) record_history(self, node);
  return node;
}

// The clone of the old self an in-place node saves (measured: `_saved_self` has grad_fn
// CloneBackward0, its own storage, version 0), made only when `needed`.
Tensor old_self(const Tensor& self, bool needed) { return needed ? clone(self) : nullptr; }

// ================================================================ self/other pointwise pairs
// maximum, minimum, fmax, fmin, atan2 and hypot save other and self whatever requires grad
// (both formulas read both): each input's gradient is grad * d(out)/d(input), elementwise.

// `device_self` / `device_other`: the same formulas as lib/cuda's op codes, for maximum and
// minimum (the ops of this family with cuda kernels); Count where there is none.
template <typename FS, typename FO>
std::vector<Tensor> pair_backward(Node& n, const std::vector<Tensor>& g, const char* op, FS&& d_self, FO&& d_other,
                                  cuda::pw::TernaryOp device_self = cuda::pw::TernaryOp::Count,
                                  cuda::pw::TernaryOp device_other = cuda::pw::TernaryOp::Count) {
  Tensor self = n.unpack("self"), other = n.unpack("other");
  Tensor ga, gb;
  if (device_self != cuda::pw::TernaryOp::Count && kernels::device::any_on_device({&g[0], &self, &other})) {
    if (n.next[0].fn) ga = to_input(kernels::device::ternary(device_self, g[0], self, other, g[0]->dtype(), op), n, 0);
    if (n.next[1].fn) gb = to_input(kernels::device::ternary(device_other, g[0], self, other, g[0]->dtype(), op), n, 1);
    return {ga, gb};
  }
  if (n.next[0].fn) ga = to_input(kernels::ternary(g[0], self, other, g[0]->dtype(), d_self, op), n, 0);
  if (n.next[1].fn) gb = to_input(kernels::ternary(g[0], self, other, g[0]->dtype(), d_other, op), n, 1);
  return {ga, gb};
}

// maximum: self: at::where(self == other, grad / 2, grad).masked_fill_(self < other, 0);
// other: the same with self > other. NaN compares false both ways, so both get grad (measured).
std::vector<Tensor> maximum_backward(Node& n, const std::vector<Tensor>& g) {
  return pair_backward(
      n, g, "maximum", [](double gv, double s, double o) { return s == o ? gv / 2 : (s < o ? 0.0 : gv); },
      [](double gv, double s, double o) { return s == o ? gv / 2 : (s > o ? 0.0 : gv); },
      cuda::pw::TernaryOp::MaximumBackwardSelf, cuda::pw::TernaryOp::MaximumBackwardOther);
}
// create_graph=True for maximum / minimum: each input's gradient is
// at::where(self == other, grad / 2, grad).masked_fill_(mask, 0) with mask self < other
// (maximum's self, minimum's other) or self > other (measured: MaskedFillBackward0 over
// WhereBackward0 over (DivBackward1 saving 2, the incoming gradient)). The arguments of
// where are evaluated right to left, as GCC does.
Tensor extreme_grad_graph(const Tensor& grad, const Tensor& self, const Tensor& other, const char* mask_op) {
  Tensor half = div_scalar(grad, Value::integer(2));
  Tensor r = where(compare(self, other, "eq"), half, grad);
  masked_fill_(r, compare(self, other, mask_op), Value::integer(0));
  return r;
}
std::vector<Tensor> extreme_dbackward(Node& n, const std::vector<Tensor>& g, bool is_max) {
  Tensor self = n.unpack("self"), other = n.unpack("other");
  Tensor ga, gb;
  if (n.should_compute_output(0)) ga = extreme_grad_graph(g[0], self, other, is_max ? "lt" : "gt");
  if (n.should_compute_output(1)) gb = extreme_grad_graph(g[0], self, other, is_max ? "gt" : "lt");
  return {ga, gb};
}
std::vector<Tensor> maximum_dbackward(Node& n, const std::vector<Tensor>& g) { return extreme_dbackward(n, g, true); }
std::vector<Tensor> minimum_dbackward(Node& n, const std::vector<Tensor>& g) { return extreme_dbackward(n, g, false); }

// minimum: masked_fill_(self > other, 0) for self, (self < other) for other.
std::vector<Tensor> minimum_backward(Node& n, const std::vector<Tensor>& g) {
  return pair_backward(
      n, g, "minimum", [](double gv, double s, double o) { return s == o ? gv / 2 : (s > o ? 0.0 : gv); },
      [](double gv, double s, double o) { return s == o ? gv / 2 : (s < o ? 0.0 : gv); },
      cuda::pw::TernaryOp::MinimumBackwardSelf, cuda::pw::TernaryOp::MinimumBackwardOther);
}
// fmax: self: grad.masked_fill((self >= other).logical_or_(other.isnan()).logical_not_(), 0);
// other: grad.masked_fill((self >= other).logical_or_(other.isnan()), 0). Ties go to self.
std::vector<Tensor> fmax_backward(Node& n, const std::vector<Tensor>& g) {
  return pair_backward(
      n, g, "fmax", [](double gv, double s, double o) { return (s >= o || std::isnan(o)) ? gv : 0.0; },
      [](double gv, double s, double o) { return (s >= o || std::isnan(o)) ? 0.0 : gv; });
}
// fmin: the same with self <= other.
std::vector<Tensor> fmin_backward(Node& n, const std::vector<Tensor>& g) {
  return pair_backward(
      n, g, "fmin", [](double gv, double s, double o) { return (s <= o || std::isnan(o)) ? gv : 0.0; },
      [](double gv, double s, double o) { return (s <= o || std::isnan(o)) ? 0.0 : gv; });
}
// atan2_backward: recip = (self * self + other * other).reciprocal();
// self: grad * other * recip; other: grad * -self * recip (NaN at (0, 0), measured).
std::vector<Tensor> atan2_backward(Node& n, const std::vector<Tensor>& g) {
  return pair_backward(
      n, g, "atan2", [](double gv, double s, double o) { return gv * o * (1.0 / (s * s + o * o)); },
      [](double gv, double s, double o) { return gv * -s * (1.0 / (s * s + o * o)); });
}
// hypot: self: grad * self / result; other: grad * other / result (NaN at (0, 0), measured).
std::vector<Tensor> hypot_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self"), other = n.unpack("other"), result = n.unpack("result");
  Tensor ga, gb;
  auto f = [](double gv, double x, double r) { return gv * x / r; };
  if (n.next[0].fn) ga = to_input(kernels::ternary(g[0], self, result, g[0]->dtype(), f, "hypot"), n, 0);
  if (n.next[1].fn) gb = to_input(kernels::ternary(g[0], other, result, g[0]->dtype(), f, "hypot"), n, 1);
  return {ga, gb};
}

template <typename F>
Tensor pair_forward(const Tensor& a, const Tensor& b, const char* op, const char* node_name,
                    autograd::BackwardFn backward, DType out, F&& f,
                    cuda::pw::BinaryOp device_op = cuda::pw::BinaryOp::Count,
                    autograd::BackwardFn dbackward = nullptr) {
  OpScope scope(op);
  Tensor r;
  if (device_op != cuda::pw::BinaryOp::Count && kernels::device::any_on_device({&a, &b})) {
    r = kernels::device::binary(device_op, a, b, out, op);
  } else {
    require_host(a);
    require_host(b);
    r = kernels::binary(a, b, out, std::forward<F>(f), op);
  }
  if (needs_grad({&a, &b})) {
    auto node = make_node(node_name, backward, {a, b});
    node->differentiable_backward = dbackward;
    node->save_input("other", b);
    node->save_input("self", a);
    set_history(r, node);
  }
  return r;
}

// ================================================================ remainder, fmod

// at::div(self, other, rounding_mode="floor") for floating values (div_floor_floating):
// through fmod, so that floor(a / b) rounds the way PyTorch's does.
double floor_divide_value(double a, double b) {
  if (b == 0) return a / b;
  const double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
  if (div == 0) return std::copysign(0.0, a / b);
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1;
  return floordiv;
}

// RemainderBackward1: self: grad; other: -grad * self.div(other, rounding_mode="floor").
// FmodBackward1: the same with rounding_mode="trunc". Both Backward0 forms: self: grad.
std::vector<Tensor> modulo_backward(Node& n, const std::vector<Tensor>& g, bool floor) {
  Tensor ga, gb;
  if (n.next[0].fn) ga = to_input(g[0], n, 0);
  if (n.next.size() > 1 && n.next[1].fn) {
    Tensor self = n.unpack("self"), other = n.unpack("other");
    const DType dt = g[0]->dtype();
    gb = to_input(kernels::ternary(
                      g[0], self, other, dt,
                      [floor, dt](double gv, double s, double o) {
                        const double q = floor ? floor_divide_value(s, o) : std::trunc(round_to_dtype(s / o, dt));
                        return -gv * q;
                      },
                      floor ? "remainder" : "fmod"),
                  n, 1);
  }
  return {ga, gb};
}
std::vector<Tensor> remainder_backward(Node& n, const std::vector<Tensor>& g) { return modulo_backward(n, g, true); }
std::vector<Tensor> fmod_backward(Node& n, const std::vector<Tensor>& g) { return modulo_backward(n, g, false); }

double modulo_value(double x, double y, bool integral, bool python_sign) {
  if (integral) {
    const int64_t xi = static_cast<int64_t>(x), yi = static_cast<int64_t>(y);
    int64_t m = xi % yi;
    if (python_sign && m != 0 && ((m < 0) != (yi < 0))) m += yi;
    return static_cast<double>(m);
  }
  double m = std::fmod(x, y);
  if (python_sign && m != 0 && ((y < 0) != (m < 0))) m += y;
  return m;
}

void refuse_integer_division_by_zero(const Tensor& divisor, bool integral, const std::string& op) {
  if (!integral || divisor->is_meta()) return;
  for (double v : to_values(divisor))
    if (v == 0) unsupported(op + " of integers by zero (PyTorch's ZeroDivisionError)");
}

// remainder: Python's sign rule (the result takes the divisor's sign); fmod: C's (the
// dividend's). Integers are computed as integers; integer division by zero raises in
// PyTorch ("ZeroDivisionError"), which agtrace does not mirror.
Tensor modulo(const Tensor& a, const Value& other_value, bool python_sign) {
  const char* op = python_sign ? "remainder" : "fmod";
  OpScope scope(op);
  if (other_value.kind != Value::Kind::Tensor && !other_value.is_number())
    type_error(std::string(op) + "(): argument 'other' must be Tensor or Number, not " + type_name(other_value));
  const bool tensor_other = other_value.kind == Value::Kind::Tensor;
  Tensor b = tensor_other ? other_value.t : wrap_number(other_value);
  require_host(a);
  require_host(b);
  const DType out = kernels::result_type(a, b);
  if (out == DType::Bool) not_implemented(python_sign ? "remainder_cpu" : "fmod_cpu", DType::Bool);
  const bool integral = !is_floating(out);
  refuse_integer_division_by_zero(b, integral, op);
  Tensor r = kernels::binary(
      a, b, out, [integral, python_sign](double x, double y) { return modulo_value(x, y, integral, python_sign); }, op);
  if (tensor_other && needs_grad({&a, &b})) {
    auto node = make_node(python_sign ? "RemainderBackward1" : "FmodBackward1",
                          python_sign ? remainder_backward : fmod_backward, {a, b});
    // Only other's formula reads them: saved when other requires grad (measured).
    node->save_input("other", b, rg(b));
    node->save_input("self", a, rg(b));
    set_history(r, node);
  } else if (!tensor_other && needs_grad({&a})) {
    // The Scalar overload: one edge, nothing saved (measured: dir() has no _saved_other).
    auto node = make_node(python_sign ? "RemainderBackward0" : "FmodBackward0",
                          python_sign ? remainder_backward : fmod_backward, {a});
    set_history(r, node);
  }
  return r;
}

// self.remainder_(other) / self.fmod_(other): the out-of-place node over self's old history;
// a tensor other saves it and a clone of the old self when it requires grad (measured).
void modulo_inplace(const Tensor& self, const Value& other_value, bool python_sign) {
  const std::string op = python_sign ? "remainder_" : "fmod_";
  OpScope scope(op);
  if (other_value.kind != Value::Kind::Tensor && !other_value.is_number())
    type_error(op + "(): argument 'other' must be Tensor or Number, not " + type_name(other_value));
  const bool tensor_other = other_value.kind == Value::Kind::Tensor;
  Tensor b = tensor_other ? other_value.t : wrap_number(other_value);
  check_inplace_operands(self, {b}, op, false);
  if (self->dtype() == DType::Bool) not_implemented(python_sign ? "remainder_cpu" : "fmod_cpu", DType::Bool);
  const bool integral = !is_floating(self->dtype());
  refuse_integer_division_by_zero(b, integral, op);
  edit_elementwise(
      self, {b}, [integral, python_sign](double x, const double* y) { return modulo_value(x, y[0], integral, python_sign); },
      [&] {
        if (!tensor_other)
          return make_node(python_sign ? "RemainderBackward0" : "FmodBackward0",
                           python_sign ? remainder_backward : fmod_backward, {self});
        auto node = make_node(python_sign ? "RemainderBackward1" : "FmodBackward1",
                              python_sign ? remainder_backward : fmod_backward, {self, b});
        node->save_input("other", b, rg(b));
        node->save_input("self", old_self(self, rg(b)), rg(b));
        return node;
      });
}

// ================================================================ lerp

// LerpBackward0 (weight a Scalar): self: grad * (1 - weight); end: grad * weight.
std::vector<Tensor> lerp_scalar_backward(Node& n, const std::vector<Tensor>& g) {
  const double w = attr_number(n.attr("weight"));
  Tensor ga, gb;
  if (n.next[0].fn) ga = to_input(kscale(g[0], 1 - w), n, 0);
  if (n.next[1].fn) gb = to_input(kscale(g[0], w), n, 1);
  return {ga, gb};
}
// create_graph=True: grad * (1 - weight.toDouble()) and grad * weight, each a mul.Scalar
// (measured: MulBackward1 saving other 0.7 for weight 0.3, and 0.3).
std::vector<Tensor> lerp_scalar_dbackward(Node& n, const std::vector<Tensor>& g) {
  const AttrValue& w = n.attr("weight");
  Tensor ga, gb;
  if (n.should_compute_output(0)) ga = mul_scalar(g[0], Value::real(1 - attr_number(w)));
  if (n.should_compute_output(1)) gb = mul_scalar(g[0], attr_value(w));
  return {ga, gb};
}
// LerpBackward1: self: grad * (1 - weight); end: grad * weight; weight: grad * (end - self).
std::vector<Tensor> lerp_tensor_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor w = n.unpack("weight");
  const DType dt = g[0]->dtype();
  Tensor ga, gb, gw;
  if (n.next[0].fn)
    ga = to_input(kernels::binary(g[0], w, dt, [dt](double gv, double x) { return gv * round_to_dtype(1 - x, dt); },
                                  "lerp"),
                  n, 0);
  if (n.next[1].fn) gb = to_input(kmul(g[0], w), n, 1);
  if (n.next[2].fn) {
    Tensor self = n.unpack("self"), end = n.unpack("end");
    gw = to_input(kernels::ternary(g[0], end, self, dt,
                                   [dt](double gv, double e, double s) { return gv * round_to_dtype(e - s, dt); }, "lerp"),
                  n, 2);
  }
  return {ga, gb, gw};
}

// lerp_kernel's formula: |weight| < 0.5 ? self + weight * (end - self)
//                                       : end - (end - self) * (1 - weight), in the dtype.
double lerp_value(double s, double e, double w, DType dt) {
  auto rd = [dt](double v) { return round_to_dtype(v, dt); };
  const double diff = rd(e - s);
  return std::fabs(w) < 0.5 ? rd(s + rd(w * diff)) : rd(e - rd(diff * rd(1 - w)));
}

// "expected dtype float for `end` but got dtype double" (lerp's check, measured).
void check_lerp_dtype(const Tensor& self, const Tensor& t, const char* what) {
  if (t->dtype() == self->dtype()) return;
  auto cname = [](DType d) -> std::string {
    if (d == DType::Float32) return "float";
    if (d == DType::Float64) return "double";
    if (d == DType::Int64) return "long int";
    unsupported("lerp with a " + dtype_name(d) + " operand");
  };
  ScenarioError e("dtype_mismatch", "expected dtype " + cname(self->dtype()) + " for `" + what + "` but got dtype " +
                                        cname(t->dtype()));
  e.facts = {{"op", "lerp"}, {"dtype", dtype_name(t->dtype())}};
  throw e;
}

// ================================================================ addcmul, addcdiv

// AddcmulBackward0: self: grad; tensor1: grad * (tensor2 * value); tensor2: grad * (tensor1 * value).
std::vector<Tensor> addcmul_backward(Node& n, const std::vector<Tensor>& g) {
  const double v = attr_number(n.attr("value"));
  const DType dt = g[0]->dtype();
  auto f = [v, dt](double gv, double t) { return gv * round_to_dtype(t * v, dt); };
  Tensor gs, g1, g2;
  if (n.next[0].fn) gs = to_input(g[0], n, 0);
  if (n.next[1].fn) g1 = to_input(kernels::binary(g[0], n.unpack("tensor2"), dt, f, "addcmul"), n, 1);
  if (n.next[2].fn) g2 = to_input(kernels::binary(g[0], n.unpack("tensor1"), dt, f, "addcmul"), n, 2);
  return {gs, g1, g2};
}
// create_graph=True: self: grad itself; tensor1: grad * (tensor2 * value), tensor2: grad *
// (tensor1 * value) (measured: MulBackward0 over (grad, MulBackward1 saving value as written)).
std::vector<Tensor> addcmul_dbackward(Node& n, const std::vector<Tensor>& g) {
  const Value value = attr_value(n.attr("value"));
  Tensor gs, g1, g2;
  if (n.should_compute_output(0)) gs = g[0];
  if (n.should_compute_output(1)) g1 = mul(g[0], mul_scalar(n.unpack("tensor2"), value));
  if (n.should_compute_output(2)) g2 = mul(g[0], mul_scalar(n.unpack("tensor1"), value));
  return {gs, g1, g2};
}
// AddcdivBackward0: self: grad; tensor1: grad * (value / tensor2);
// tensor2: -grad * value * tensor1 / (tensor2 * tensor2).
std::vector<Tensor> addcdiv_backward(Node& n, const std::vector<Tensor>& g) {
  const double v = attr_number(n.attr("value"));
  const DType dt = g[0]->dtype();
  auto rd = [dt](double x) { return round_to_dtype(x, dt); };
  Tensor t2 = n.unpack("tensor2");
  Tensor gs, g1, g2;
  if (n.next[0].fn) gs = to_input(g[0], n, 0);
  if (n.next[1].fn)
    g1 = to_input(kernels::binary(g[0], t2, dt, [v, rd](double gv, double d) { return gv * rd(v / d); }, "addcdiv"), n, 1);
  if (n.next[2].fn)
    g2 = to_input(kernels::ternary(
                      g[0], n.unpack("tensor1"), t2, dt,
                      [v, rd](double gv, double t, double d) { return rd(rd(rd(-gv * v) * t) / rd(d * d)); }, "addcdiv"),
                  n, 2);
  return {gs, g1, g2};
}

// self + value * t1 * t2 or self + value * t1 / t2, each step rounded to the dtype (the CPU
// kernel's self_val + scalar_val * t1_val * t2_val in that type).
double addc_value(double s, double a, double b, double v, bool divide, DType dt) {
  auto rd = [dt](double x) { return round_to_dtype(x, dt); };
  return divide ? rd(s + rd(rd(v * a) / b)) : rd(s + rd(rd(v * a) * b));
}

// addcdiv's refusal of integer tensors and addcmul's of a float value with integer
// tensors (which PyTorch truncates); both in and out of place.
void check_addc_value(DType dt, const Value& value, bool divide, const std::string& op) {
  if (!value.is_number()) type_error(op + "(): argument 'value' must be Number, not " + type_name(value));
  if (divide && !is_floating(dt)) {
    // Measured wording (torch 1.13), a RuntimeError.
    throw ScenarioError("unsupported",
                        "Integer division with addcdiv is no longer supported, and in a future  release addcdiv will "
                        "perform a true division of tensor1 and tensor2.");
  }
  if (!is_floating(dt) && value.kind == Value::Kind::Float) unsupported(op + "(value=float) of integer tensors");
}

// The node of addcmul / addcdiv and their in-place forms. addcmul: each tensor read by the
// other's formula only. addcdiv: tensor2 read by both tensors' formulas, so always saved
// (measured, even when only self requires grad).
Shared<Node> addc_node(const Tensor& self, const Tensor& t1, const Tensor& t2, const Value& value, bool divide) {
  auto node = make_node(divide ? "AddcdivBackward0" : "AddcmulBackward0", divide ? addcdiv_backward : addcmul_backward,
                        {self, t1, t2});
  if (!divide) node->differentiable_backward = addcmul_dbackward;
  node->save_input("tensor1", t1, rg(t2));
  node->save_input("tensor2", t2, divide || rg(t1));
  node->save_attr("value", number_attr(value));
  return node;
}

// The shared forward: self + value * (t1 op t2), one dtype for all three.
Tensor pointwise_three(const Tensor& self, const Tensor& t1, const Tensor& t2, const Value& value, bool divide) {
  const char* op = divide ? "addcdiv" : "addcmul";
  OpScope scope(op);
  require_host(self);
  require_host(t1);
  require_host(t2);
  require_same_dtype({&self, &t1, &t2}, op);
  const DType dt = self->dtype();
  check_addc_value(dt, value, divide, op);
  const double v = value.number();
  Tensor r = kernels::ternary(
      self, t1, t2, dt, [divide, v, dt](double s, double a, double b) { return addc_value(s, a, b, v, divide, dt); },
      op);
  if (needs_grad({&self, &t1, &t2})) set_history(r, addc_node(self, t1, t2, value, divide));
  return r;
}

// ================================================================ dist

// The p-norm of values (norm's reductions: p = 0 counts non-zeros, +-inf is max / min |x|).
double p_norm(const std::vector<double>& d, double p) {
  double acc = 0;
  if (std::isinf(p)) {
    acc = p > 0 ? 0.0 : INFINITY;
    for (double x : d) acc = p > 0 ? std::fmax(acc, std::fabs(x)) : std::fmin(acc, std::fabs(x));
    if (d.empty()) return 0;
    for (double x : d)
      if (std::isnan(x)) return x;
    return acc;
  }
  for (double x : d) acc += p == 0 ? (x != 0 ? 1.0 : 0.0) : (p == 1 ? std::fabs(x) : std::pow(std::fabs(x), p));
  if (p == 0 || p == 1) return acc;
  return p == 2 ? std::sqrt(acc) : std::pow(acc, 1.0 / p);
}

// DistBackward0: self: norm_backward(grad, self - other, p, result); other: minus that.
// norm_backward (FunctionsManual.cpp) for a full reduction: p = 1: sgn(d) * grad; p = 2:
// grad * d / norm (0 where norm == 0); +-inf: sgn(d) * grad / count * (|d| == norm or NaN);
// p < 1: sgn(d) * |d|^(p-1) (0 where d == 0) * grad * norm^(1-p); p < 2: sgn(d) * |d|^(p-1) *
// grad / norm^(p-1); else d * |d|^(p-2) * grad / norm^(p-1), both 0 where norm == 0.
std::vector<Tensor> dist_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self"), other = n.unpack("other"), result = n.unpack("result");
  const double p = attr_number(n.attr("p"));
  const DType dt = g[0]->dtype();
  const Shape shape = kernels::broadcast_shapes(self->sizes, other->sizes, "dist");
  Tensor grad_d = empty_tensor(shape, dt, g[0]->is_meta() || self->is_meta());
  if (!grad_d->is_meta()) {
    Tensor diff = kernels::binary(self, other, dt, [](double a, double b) { return a - b; }, "dist");
    const std::vector<double> d = to_values(diff);
    const double nv = item(result), gv = item(g[0]);
    auto rd = [dt](double v) { return round_to_dtype(v, dt); };
    auto sgn = [](double v) { return v > 0 ? 1.0 : (v < 0 ? -1.0 : 0.0); };
    double count = 0;
    if (std::isinf(p))
      for (double x : d) count += (std::fabs(x) == nv || std::isnan(x)) ? 1 : 0;
    std::vector<double> out(d.size());
    for (size_t i = 0; i < d.size(); ++i) {
      const double x = d[i];
      if (p == 1.0) {
        out[i] = sgn(x) * gv;
      } else if (p == 2.0) {
        out[i] = nv == 0 ? 0.0 : gv * rd(x / nv);
      } else if (std::isinf(p)) {
        out[i] = sgn(x) * ((std::fabs(x) == nv || std::isnan(x)) ? rd(gv / count) : 0.0);
      } else if (p < 1.0) {
        const double scaled = x == 0 ? 0.0 : sgn(x) * rd(std::pow(std::fabs(x), p - 1));
        out[i] = rd(scaled * gv) * rd(std::pow(nv, 1 - p));
      } else {
        const double scale = nv == 0 ? 0.0 : rd(gv / rd(std::pow(nv, p - 1)));
        const double scaled = p < 2.0 ? sgn(x) * rd(std::pow(std::fabs(x), p - 1)) : rd(x * rd(std::pow(std::fabs(x), p - 2)));
        out[i] = scaled * scale;
      }
    }
    write_values(grad_d, out);
  }
  Tensor ga, gb;
  if (n.next[0].fn) ga = to_input(grad_d, n, 0);
  if (n.next[1].fn) gb = to_input(kscale(grad_d, -1.0), n, 1);
  return {ga, gb};
}

// ================================================================ rsub(Tensor, Tensor)

// RsubBackward0: self: maybe_multiply(-grad, alpha); other: grad.
std::vector<Tensor> rsub_tensor_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor ga, gb;
  if (n.next[0].fn) ga = to_input(kscale(g[0], -attr_number(n.attr("alpha"))), n, 0);
  if (n.next[1].fn) gb = to_input(g[0], n, 1);
  return {ga, gb};
}

// create_graph=True: self: maybe_multiply(-grad, alpha) (NegBackward0, then MulBackward1 when
// alpha != 1; measured); other: grad itself.
std::vector<Tensor> rsub_tensor_dbackward(Node& n, const std::vector<Tensor>& g) {
  const AttrValue& alpha = n.attr("alpha");
  Tensor ga, gb;
  if (n.should_compute_output(0)) {
    ga = neg(g[0]);
    if (attr_number(alpha) != 1.0) ga = mul_scalar(ga, attr_value(alpha));
  }
  if (n.should_compute_output(1)) gb = g[0];
  return {ga, gb};
}

// ================================================================ addmv addr addbmm baddbmm

// Row-major (n, m) values of op(a) @ op(b), op a transpose where asked; a is stored row-major
// as (a_rows, a_cols) from a_off on, b as (b_rows, b_cols) from b_off. The precision of
// PyTorch's CPU kernel for `dt` (kernels::gemm).
std::vector<double> product(DType dt, const std::vector<double>& a, size_t a_off, int64_t a_rows, int64_t a_cols,
                            bool ta, const std::vector<double>& b, size_t b_off, int64_t b_rows, int64_t b_cols,
                            bool tb) {
  const int64_t n = ta ? a_cols : a_rows, k = ta ? a_rows : a_cols, m = tb ? b_rows : b_cols;
  std::vector<double> out(static_cast<size_t>(n * m), 0.0);
  const kernels::MatrixRef ar{a.data(), static_cast<int64_t>(a_off), ta ? 1 : a_cols, ta ? a_cols : 1};
  const kernels::MatrixRef br{b.data(), static_cast<int64_t>(b_off), tb ? 1 : b_cols, tb ? b_cols : 1};
  kernels::gemm(dt, ar, br, n, k, m, out.data());
  return out;
}

Tensor tensor_of(const Shape& shape, DType dt, bool meta, const std::vector<double>& values) {
  Tensor r = empty_tensor(shape, dt, meta);
  if (!meta) write_values(r, values);
  return r;
}

// alpha * product + beta * self (self already expanded to the result's shape); beta == 0
// ignores self, NaN included, as BLAS does (measured for all four ops).
std::vector<double> scaled_sum(std::vector<double> prod, const Tensor& self_expanded, double beta, double alpha,
                               DType dt) {
  std::vector<double> s;
  if (beta != 0) s = to_values(self_expanded);
  for (size_t i = 0; i < prod.size(); ++i) {
    const double p = round_to_dtype(alpha * prod[i], dt);
    prod[i] = beta == 0 ? p : round_to_dtype(p + round_to_dtype(beta * s[i], dt), dt);
  }
  return prod;
}

Tensor expanded_self(const Tensor& self, const Shape& shape) {
  autograd::GradModeGuard no_grad(false);  // expand_size: no node, the same checks as Tensor.expand
  return expand(self, shape);
}

// maybe_multiply(grad, beta) reduced to self's shape: the gradient of every op of this family's self.
Tensor self_grad(const Node& n, const Tensor& g) {
  const double beta = attr_number(n.attr("beta"));
  return to_input(beta == 1.0 ? g : kscale(g, beta), n, 0);
}

// A gradient of `shape` from values computed on the host (empty on meta), times alpha.
Tensor scaled_grad(const Node& n, size_t i, const Tensor& g, const std::vector<double>& values) {
  const double alpha = attr_number(n.attr("alpha"));
  const DType dt = g->dtype();
  std::vector<double> v = values;
  if (alpha != 1.0)
    for (double& x : v) x = round_to_dtype(alpha * x, dt);
  return as_dtype(tensor_of(n.input_meta[i].sizes, dt, g->is_meta(), v), n.input_meta[i].dtype);
}

// The three gradients of the family: self's, then those of the two operands, each the
// host product `first` / `second` computes from the gradient's values (not called on meta).
template <typename F1, typename F2>
std::vector<Tensor> matrix_backward(Node& n, const std::vector<Tensor>& g, F1&& first, F2&& second) {
  const DType dt = g[0]->dtype();
  const bool meta = g[0]->is_meta();
  const std::vector<double> gv = meta ? std::vector<double>{} : to_values(g[0]);
  Tensor gs, g1, g2;
  if (n.next[0].fn) gs = self_grad(n, g[0]);
  if (n.next[1].fn) g1 = scaled_grad(n, 1, g[0], meta ? std::vector<double>{} : first(gv, dt));
  if (n.next[2].fn) g2 = scaled_grad(n, 2, g[0], meta ? std::vector<double>{} : second(gv, dt));
  return {gs, g1, g2};
}

// AddmvBackward0: self: maybe_multiply(grad, beta); mat: maybe_multiply(grad.ger(vec), alpha);
// vec: maybe_multiply(mat.t().mv(grad), alpha).
std::vector<Tensor> addmv_backward(Node& n, const std::vector<Tensor>& g) {
  const int64_t rows = n.input_meta[1].sizes[0], cols = n.input_meta[1].sizes[1];
  return matrix_backward(
      n, g,
      [&](const std::vector<double>& gv, DType dt) {
        return product(dt, gv, 0, rows, 1, false, to_values(n.unpack("vec")), 0, 1, cols, false);
      },
      [&](const std::vector<double>& gv, DType dt) {
        return product(dt, to_values(n.unpack("mat")), 0, rows, cols, true, gv, 0, rows, 1, false);
      });
}

// AddrBackward0: self: maybe_multiply(grad, beta); vec1: maybe_multiply(grad.mv(vec2), alpha);
// vec2: maybe_multiply(grad.t().mv(vec1), alpha).
std::vector<Tensor> addr_backward(Node& n, const std::vector<Tensor>& g) {
  const int64_t rows = n.input_meta[1].sizes[0], cols = n.input_meta[2].sizes[0];
  return matrix_backward(
      n, g,
      [&](const std::vector<double>& gv, DType dt) {
        return product(dt, gv, 0, rows, cols, false, to_values(n.unpack("vec2")), 0, cols, 1, false);
      },
      [&](const std::vector<double>& gv, DType dt) {
        return product(dt, gv, 0, rows, cols, true, to_values(n.unpack("vec1")), 0, rows, 1, false);
      });
}

// Batched products for the batch gradients: batch1[b] = grad_b @ batch2[b]^T and
// batch2[b] = batch1[b]^T @ grad_b, grad_b being grad[b] (baddbmm) or grad itself for every
// b (addbmm: grad.unsqueeze(0).expand(B, n, m)).
std::vector<Tensor> batch_grads(Node& n, const std::vector<Tensor>& g, bool shared_grad) {
  const Shape& s1 = n.input_meta[1].sizes;
  const int64_t B = s1[0], rows = s1[1], k = s1[2], cols = n.input_meta[2].sizes[2];
  const size_t grad_step = shared_grad ? 0 : static_cast<size_t>(rows * cols);
  return matrix_backward(
      n, g,
      [&](const std::vector<double>& gv, DType dt) {
        const std::vector<double> b2 = to_values(n.unpack("batch2"));
        std::vector<double> out;
        for (int64_t b = 0; b < B; ++b) {
          auto part = product(dt, gv, static_cast<size_t>(b) * grad_step, rows, cols, false, b2,
                              static_cast<size_t>(b * k * cols), k, cols, true);
          out.insert(out.end(), part.begin(), part.end());
        }
        return out;
      },
      [&](const std::vector<double>& gv, DType dt) {
        const std::vector<double> b1 = to_values(n.unpack("batch1"));
        std::vector<double> out;
        for (int64_t b = 0; b < B; ++b) {
          auto part = product(dt, b1, static_cast<size_t>(b * rows * k), rows, k, true, gv,
                              static_cast<size_t>(b) * grad_step, rows, cols, false);
          out.insert(out.end(), part.begin(), part.end());
        }
        return out;
      });
}
// AddbmmBackward0: self: maybe_multiply(grad, beta); batch1: maybe_multiply(grad.unsqueeze(0)
// .expand({b1.size(0), b1.size(1), b2.size(2)}).bmm(batch2.transpose(1, 2)), alpha); batch2:
// maybe_multiply(batch1.transpose(1, 2).bmm(grad.unsqueeze(0).expand(...)), alpha).
std::vector<Tensor> addbmm_backward(Node& n, const std::vector<Tensor>& g) { return batch_grads(n, g, true); }
// BaddbmmBackward0: self: maybe_multiply(grad, beta); batch1: maybe_multiply(grad.bmm(
// batch2.transpose(1, 2)), alpha); batch2: maybe_multiply(batch1.transpose(1, 2).bmm(grad), alpha).
std::vector<Tensor> baddbmm_backward(Node& n, const std::vector<Tensor>& g) { return batch_grads(n, g, false); }

ScenarioError shape_error(const std::string& msg, const std::string& op) {
  ScenarioError e("shape_mismatch", msg);
  e.facts = {{"op", op}};
  return e;
}

// The matrix family's common checks: host operands of one non-bool dtype.
void check_matrix_operands(const Tensor& self, const Tensor& a, const Tensor& b, const std::string& op) {
  require_host(self);
  require_host(a);
  require_host(b);
  require_same_dtype({&self, &a, &b}, op);
  if (self->dtype() == DType::Bool) unsupported(op + " of bool tensors");
}

// The family's node: alpha, the two operands (each saved when the other requires grad),
// addbmm's argsizes in their dir() places, beta. Null when no gradient is recorded.
Shared<Node> matrix_node(const char* name, autograd::BackwardFn backward, const Tensor& self, const char* a_name,
                         const Tensor& a, const char* b_name, const Tensor& b, const Value& beta, const Value& alpha,
                         std::initializer_list<std::pair<const char*, AttrValue>> after_a = {},
                         std::initializer_list<std::pair<const char*, AttrValue>> after_b = {}) {
  if (!needs_grad({&self, &a, &b})) return nullptr;
  auto node = make_node(name, backward, {self, a, b});
  node->save_attr("alpha", number_attr(alpha));
  node->save_input(a_name, a, rg(b));
  for (const auto& [k, v] : after_a) node->save_attr(k, v);
  node->save_input(b_name, b, rg(a));
  for (const auto& [k, v] : after_b) node->save_attr(k, v);
  node->save_attr("beta", number_attr(beta));
  return node;
}

}  // namespace

// ================================================================ entry points

Tensor maximum(const Tensor& a, const Tensor& b) {
  // NaN propagates from either side (measured: maximum([nan, 1], [1, nan]) is all NaN).
  return pair_forward(a, b, "maximum", "MaximumBackward0", maximum_backward, kernels::result_type(a, b),
                      [](double x, double y) { return std::isnan(x) ? x : (std::isnan(y) ? y : (x > y ? x : y)); },
                      cuda::pw::BinaryOp::Maximum, maximum_dbackward);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return pair_forward(a, b, "minimum", "MinimumBackward0", minimum_backward, kernels::result_type(a, b),
                      [](double x, double y) { return std::isnan(x) ? x : (std::isnan(y) ? y : (x < y ? x : y)); },
                      cuda::pw::BinaryOp::Minimum, minimum_dbackward);
}
Tensor fmax(const Tensor& a, const Tensor& b) {
  return pair_forward(a, b, "fmax", "FmaxBackward0", fmax_backward, kernels::result_type(a, b),
                      [](double x, double y) { return std::fmax(x, y); });
}
Tensor fmin(const Tensor& a, const Tensor& b) {
  return pair_forward(a, b, "fmin", "FminBackward0", fmin_backward, kernels::result_type(a, b),
                      [](double x, double y) { return std::fmin(x, y); });
}
Tensor atan2(const Tensor& a, const Tensor& b) {
  return pair_forward(a, b, "atan2", "Atan2Backward0", atan2_backward, floating_result(a, b),
                      [](double y, double x) { return std::atan2(y, x); });
}

Tensor hypot(const Tensor& a, const Tensor& b) {
  OpScope scope("hypot");
  require_host(a);
  require_host(b);
  const DType out = kernels::result_type(a, b);
  if (!is_floating(out)) not_implemented("hypot_cpu", out);  // measured: "hypot_cpu" not implemented for 'Long'
  Tensor r = kernels::binary(a, b, out, [](double x, double y) { return std::hypot(x, y); }, "hypot");
  if (needs_grad({&a, &b})) {
    auto node = make_node("HypotBackward0", hypot_backward, {a, b});
    set_history(r, node);
    node->save_input("other", b);
    node->save_output("result", r, 0);
    node->save_input("self", a);
  }
  return r;
}

Tensor floor_divide(const Tensor& a, const Value& other_value) {
  OpScope scope("floor_divide");
  if (other_value.kind != Value::Kind::Tensor && !other_value.is_number())
    type_error("floor_divide(): argument 'other' must be Tensor or Number, not " + type_name(other_value));
  Tensor b = other_value.kind == Value::Kind::Tensor ? other_value.t : wrap_number(other_value);
  // PyTorch 1.13 records a node named NotImplemented whose backward raises "derivative for
  // aten::floor_divide is not implemented" (measured); agtrace does not model that node.
  if (needs_grad({&a, &b})) unsupported("floor_divide of tensors that require grad (PyTorch's NotImplemented node)");
  require_host(a);
  require_host(b);
  const DType out = kernels::result_type(a, b);
  const bool integral = !is_floating(out);
  refuse_integer_division_by_zero(b, integral, "floor_divide");
  // Rounds toward minus infinity (measured: floor_divide([-3, 3, -7.5], [2, -2, 2]) is
  // [-2, -2, -4]; int64 [-3, 3, 7] // 2 is [-2, 1, 3]).
  return kernels::binary(
      a, b, out,
      [integral](double x, double y) {
        if (!integral) return floor_divide_value(x, y);
        const int64_t xi = static_cast<int64_t>(x), yi = static_cast<int64_t>(y);
        int64_t q = xi / yi;
        if ((xi % yi != 0) && ((xi < 0) != (yi < 0))) --q;
        return static_cast<double>(q);
      },
      "floor_divide");
}

Tensor remainder(const Tensor& a, const Value& other) { return modulo(a, other, true); }
Tensor fmod(const Tensor& a, const Value& other) { return modulo(a, other, false); }

Tensor lerp(const Tensor& self, const Tensor& end, const Value& weight) {
  OpScope scope("lerp");
  require_host(self);
  require_host(end);
  if (!is_floating(self->dtype())) unsupported("lerp of " + dtype_name(self->dtype()) + " tensors");
  check_lerp_dtype(self, end, "end");
  const DType dt = self->dtype();
  if (weight.kind == Value::Kind::Tensor) {
    const Tensor& w = weight.t;
    require_host(w);
    check_lerp_dtype(self, w, "weight");
    Tensor r = kernels::ternary(self, end, w, dt, [dt](double s, double e, double x) { return lerp_value(s, e, x, dt); },
                                "lerp");
    if (needs_grad({&self, &end, &w})) {
      auto node = make_node("LerpBackward1", lerp_tensor_backward, {self, end, w});
      // weight is read by the self and end formulas, self and end only by weight's (measured).
      node->save_input("end", end, rg(w));
      node->save_input("self", self, rg(w));
      node->save_input("weight", w);
      set_history(r, node);
    }
    return r;
  }
  if (!weight.is_number()) type_error("lerp(): argument 'weight' must be Tensor or Number, not " + type_name(weight));
  const double wv = weight.number();
  Tensor r = kernels::binary(self, end, dt, [dt, wv](double s, double e) { return lerp_value(s, e, wv, dt); }, "lerp");
  if (needs_grad({&self, &end})) {
    auto node = make_node("LerpBackward0", lerp_scalar_backward, {self, end});
    node->differentiable_backward = lerp_scalar_dbackward;
    node->save_attr("weight", number_attr(weight));
    set_history(r, node);
  }
  return r;
}

Tensor addcmul(const Tensor& self, const Tensor& t1, const Tensor& t2, const Value& value) {
  return pointwise_three(self, t1, t2, value, false);
}
Tensor addcdiv(const Tensor& self, const Tensor& t1, const Tensor& t2, const Value& value) {
  return pointwise_three(self, t1, t2, value, true);
}

Tensor dist(const Tensor& a, const Tensor& b, const Value& p) {
  OpScope scope("dist");
  require_host(a);
  require_host(b);
  if (!p.is_number()) unsupported("dist(p=" + type_name(p) + ")");
  const DType dt = kernels::result_type(a, b);
  if (!is_floating(dt)) {
    ScenarioError e("dtype_mismatch", "norm(): input dtype should be either floating point or complex. Got " +
                                          dtype_tensor_type(dt).substr(0, dtype_tensor_type(dt).size() - 6) +
                                          " instead.");
    e.facts = {{"op", "dist"}, {"dtype", dtype_name(dt)}};
    throw e;
  }
  const double pv = p.number();
  Tensor diff = kernels::binary(a, b, dt, [](double x, double y) { return x - y; }, "dist");
  Tensor r = empty_tensor(Shape{}, dt, diff->is_meta());
  if (!r->is_meta()) write_values(r, {p_norm(to_values(diff), pv)});
  if (needs_grad({&a, &b})) {
    // p = 0: PyTorch's norm_backward returns an undefined tensor and dist's other formula
    // then fails ("Expected a proper Tensor but got None", measured).
    if (pv == 0) unsupported("dist(p=0) with inputs that require grad (its backward fails in PyTorch)");
    auto node = make_node("DistBackward0", dist_backward, {a, b});
    set_history(r, node);
    node->save_input("other", b);
    node->save_attr("p", number_attr(p));
    node->save_output("result", r, 0);
    node->save_input("self", a);
  }
  return r;
}

Tensor rsub_tensor(const Tensor& a, const Tensor& b, const Value& alpha) {
  OpScope scope("rsub");
  const double al = alpha.number();
  const DType out = kernels::result_type(a, b);
  // other - alpha * self is lib/cuda's Sub with the operands swapped.
  Tensor r = kernels::device::any_on_device({&a, &b})
                 ? kernels::device::binary(cuda::pw::BinaryOp::Sub, b, a, out, "rsub", al)
                 : kernels::binary(a, b, out, [al](double x, double y) { return y - al * x; }, "rsub");
  if (needs_grad({&a, &b})) {
    auto node = make_node("RsubBackward0", rsub_tensor_backward, {a, b});
    node->differentiable_backward = rsub_tensor_dbackward;
    node->save_attr("alpha", number_attr(alpha));
    set_history(r, node);
  }
  return r;
}

namespace {

// addmv's meta function's checks (measured wording); the result's shape.
Shape addmv_shape(const Tensor& self, const Tensor& mat, const Tensor& vec) {
  if (mat->dim() != 2 || vec->dim() != 1 || self->dim() > 1)
    throw shape_error("vector + matrix @ vector expected, got " + std::to_string(self->dim()) + ", " +
                          std::to_string(mat->dim()) + ", " + std::to_string(vec->dim()),
                      "addmv");
  const int64_t self_numel = shape_numel(self->sizes);
  if (mat->sizes[1] != vec->sizes[0] || (mat->sizes[0] != self_numel && self_numel != 1)) {
    if (self->dim() == 0) unsupported("addmv's size error for a 0-d self");
    throw shape_error("size mismatch, got " + std::to_string(self->sizes[0]) + ", " + std::to_string(mat->sizes[0]) +
                          "x" + std::to_string(mat->sizes[1]) + "," + std::to_string(vec->sizes[0]),
                      "addmv");
  }
  check_matrix_operands(self, mat, vec, "addmv");
  return {mat->sizes[0]};
}
std::vector<double> addmv_values(const Tensor& self_e, const Tensor& mat, const Tensor& vec, double beta,
                                 double alpha) {
  const DType dt = mat->dtype();
  return scaled_sum(product(dt, to_values(mat), 0, mat->sizes[0], mat->sizes[1], false, to_values(vec), 0,
                            vec->sizes[0], 1, false),
                    self_e, beta, alpha, dt);
}

Shape addr_shape(const Tensor& self, const Tensor& vec1, const Tensor& vec2) {
  for (const auto& [v, name] : {std::pair<const Tensor*, const char*>{&vec1, "vec1"}, {&vec2, "vec2"}})
    if ((*v)->dim() != 1)
      throw shape_error("addr: Expected 1-D argument " + std::string(name) + ", but got " +
                            std::to_string((*v)->dim()) + "-D",
                        "addr");
  check_matrix_operands(self, vec1, vec2, "addr");
  return {vec1->sizes[0], vec2->sizes[0]};
}
std::vector<double> addr_values(const Tensor& self_e, const Tensor& vec1, const Tensor& vec2, double beta,
                                double alpha) {
  const DType dt = vec1->dtype();
  return scaled_sum(product(dt, to_values(vec1), 0, vec1->sizes[0], 1, false, to_values(vec2), 0, 1, vec2->sizes[0],
                            false),
                    self_e, beta, alpha, dt);
}

// Both batches 3-D with matching batch counts and inner sizes; the messages of addbmm
// ("batch1 and batch2 must have same number of batches, got 4 and 3", "Incompatible matrix
// sizes for bmm (2x5 and 4x3)") and baddbmm ("Expected size for first two dimensions of batch2
// tensor to be: [4, 5] but got: [3, 5].") as measured. The result's shape.
Shape batch_shape(const Tensor& self, const Tensor& b1, const Tensor& b2, bool summed) {
  const char* op = summed ? "addbmm" : "baddbmm";
  if (b1->dim() != 3 || b2->dim() != 3) unsupported(std::string(op) + " of batches that are not 3-D");
  const auto& s1 = b1->sizes;
  const auto& s2 = b2->sizes;
  if (summed) {
    if (s1[0] != s2[0])
      throw shape_error("batch1 and batch2 must have same number of batches, got " + std::to_string(s1[0]) + " and " +
                            std::to_string(s2[0]),
                        op);
    if (s1[2] != s2[1])
      throw shape_error("Incompatible matrix sizes for bmm (" + std::to_string(s1[1]) + "x" + std::to_string(s1[2]) +
                            " and " + std::to_string(s2[1]) + "x" + std::to_string(s2[2]) + ")",
                        op);
  } else if (s1[0] != s2[0] || s1[2] != s2[1]) {
    throw shape_error("Expected size for first two dimensions of batch2 tensor to be: [" + std::to_string(s1[0]) +
                          ", " + std::to_string(s1[2]) + "] but got: [" + std::to_string(s2[0]) + ", " +
                          std::to_string(s2[1]) + "].",
                      op);
  }
  check_matrix_operands(self, b1, b2, op);
  if (summed) return {s1[1], s2[2]};
  return {s1[0], s1[1], s2[2]};
}

// The B products batch1[b] @ batch2[b], one after the other, row-major (B, n, m).
std::vector<double> batch_products(DType dt, const Tensor& b1, const Tensor& b2) {
  const int64_t B = b1->sizes[0], n = b1->sizes[1], k = b1->sizes[2], m = b2->sizes[2];
  const std::vector<double> v1 = to_values(b1), v2 = to_values(b2);
  std::vector<double> out;
  for (int64_t b = 0; b < B; ++b) {
    auto part = product(dt, v1, static_cast<size_t>(b * n * k), n, k, false, v2, static_cast<size_t>(b * k * m), k, m,
                        false);
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}
std::vector<double> addbmm_values(const Tensor& self_e, const Tensor& b1, const Tensor& b2, double beta,
                                  double alpha) {
  // The batch's products summed in batch order, in the dtype (PyTorch's addbmm adds each
  // product into the result in turn).
  const DType dt = b1->dtype();
  const std::vector<double> all = batch_products(dt, b1, b2);
  std::vector<double> summed(static_cast<size_t>(b1->sizes[1] * b2->sizes[2]), 0.0);
  for (size_t i = 0; i < all.size(); ++i) {
    double& acc = summed[i % summed.size()];
    acc = round_to_dtype(acc + all[i], dt);
  }
  return scaled_sum(summed, self_e, beta, alpha, dt);
}
std::vector<double> baddbmm_values(const Tensor& self_e, const Tensor& b1, const Tensor& b2, double beta,
                                   double alpha) {
  return scaled_sum(batch_products(b1->dtype(), b1, b2), self_e, beta, alpha, b1->dtype());
}

// One op of the family, out of place (self expanded to the result's shape, a new result) or
// in place (self must have the result's shape; its elements are overwritten).
using MatrixValues = std::vector<double> (*)(const Tensor&, const Tensor&, const Tensor&, double, double);
template <typename MakeNode>
Tensor matrix_op(const Tensor& self, const Tensor& a, const Tensor& b, const Shape& shape, const Value& beta,
                 const Value& alpha, MatrixValues values, bool in_place, const std::string& op, MakeNode&& make) {
  const bool meta = self->is_meta() || a->is_meta() || b->is_meta();
  if (!in_place) {
    Tensor self_e = expanded_self(self, shape);
    Tensor r = tensor_of(shape, a->dtype(), meta,
                         meta ? std::vector<double>{} : values(self_e, a, b, beta.number(), alpha.number()));
    if (Shared<Node> node = make()) set_history(r, node);
    return r;
  }
  check_inplace_allowed(self);
  check_no_internal_overlap(self);
  if (Shape(self->sizes) != shape) {
    // Measured wording (k[0].baddbmm_ of a (1, 2, 3) product).
    ScenarioError e("shape_mismatch", "Bad in-place call: input tensor size " + shape_str(self->sizes) +
                                          " and output tensor size " + shape_str(shape) + " should match");
    e.facts = {{"op", op}};
    throw e;
  }
  Shared<Node> node = make();
  if (!meta) write_values(self, values(self, a, b, beta.number(), alpha.number()));
  bump(self);
  if (node) record_history(self, node);
  return self;
}

Tensor addmv_impl(const Tensor& self, const Tensor& mat, const Tensor& vec, const Value& beta, const Value& alpha,
                  bool in_place) {
  OpScope scope(in_place ? "addmv_" : "addmv");
  const Shape shape = addmv_shape(self, mat, vec);
  return matrix_op(self, mat, vec, shape, beta, alpha, addmv_values, in_place, "addmv_", [&] {
    return matrix_node("AddmvBackward0", addmv_backward, self, "mat", mat, "vec", vec, beta, alpha);
  });
}
Tensor addr_impl(const Tensor& self, const Tensor& vec1, const Tensor& vec2, const Value& beta, const Value& alpha,
                 bool in_place) {
  OpScope scope(in_place ? "addr_" : "addr");
  const Shape shape = addr_shape(self, vec1, vec2);
  return matrix_op(self, vec1, vec2, shape, beta, alpha, addr_values, in_place, "addr_", [&] {
    return matrix_node("AddrBackward0", addr_backward, self, "vec1", vec1, "vec2", vec2, beta, alpha);
  });
}
Tensor addbmm_impl(const Tensor& self, const Tensor& b1, const Tensor& b2, const Value& beta, const Value& alpha,
                   bool in_place) {
  OpScope scope(in_place ? "addbmm_" : "addbmm");
  const Shape shape = batch_shape(self, b1, b2, true);
  return matrix_op(self, b1, b2, shape, beta, alpha, addbmm_values, in_place, "addbmm_", [&] {
    return matrix_node("AddbmmBackward0", addbmm_backward, self, "batch1", b1, "batch2", b2, beta, alpha,
                       {{"batch1_argsize_0", AttrValue::integer(b1->sizes[0])},
                        {"batch1_argsize_1", AttrValue::integer(b1->sizes[1])}},
                       {{"batch2_argsize_2", AttrValue::integer(b2->sizes[2])}});
  });
}
Tensor baddbmm_impl(const Tensor& self, const Tensor& b1, const Tensor& b2, const Value& beta, const Value& alpha,
                    bool in_place) {
  OpScope scope(in_place ? "baddbmm_" : "baddbmm");
  const Shape shape = batch_shape(self, b1, b2, false);
  return matrix_op(self, b1, b2, shape, beta, alpha, baddbmm_values, in_place, "baddbmm_", [&] {
    return matrix_node("BaddbmmBackward0", baddbmm_backward, self, "batch1", b1, "batch2", b2, beta, alpha);
  });
}

}  // namespace

Tensor addmv(const Tensor& self, const Tensor& mat, const Tensor& vec, const Value& beta, const Value& alpha) {
  return addmv_impl(self, mat, vec, beta, alpha, false);
}
Tensor addr(const Tensor& self, const Tensor& vec1, const Tensor& vec2, const Value& beta, const Value& alpha) {
  return addr_impl(self, vec1, vec2, beta, alpha, false);
}
Tensor addbmm(const Tensor& self, const Tensor& b1, const Tensor& b2, const Value& beta, const Value& alpha) {
  return addbmm_impl(self, b1, b2, beta, alpha, false);
}
Tensor baddbmm(const Tensor& self, const Tensor& b1, const Tensor& b2, const Value& beta, const Value& alpha) {
  return baddbmm_impl(self, b1, b2, beta, alpha, false);
}
void addmv_(const Tensor& self, const Tensor& mat, const Tensor& vec, const Value& beta, const Value& alpha) {
  addmv_impl(self, mat, vec, beta, alpha, true);
}
void addr_(const Tensor& self, const Tensor& vec1, const Tensor& vec2, const Value& beta, const Value& alpha) {
  addr_impl(self, vec1, vec2, beta, alpha, true);
}
void addbmm_(const Tensor& self, const Tensor& b1, const Tensor& b2, const Value& beta, const Value& alpha) {
  addbmm_impl(self, b1, b2, beta, alpha, true);
}
void baddbmm_(const Tensor& self, const Tensor& b1, const Tensor& b2, const Value& beta, const Value& alpha) {
  baddbmm_impl(self, b1, b2, beta, alpha, true);
}

// ---- in-place pointwise forms

void atan2_(const Tensor& self, const Tensor& other) {
  OpScope scope("atan2_");
  check_inplace_operands(self, {other}, "atan2_", true);
  edit_elementwise(self, {other}, [](double y, const double* x) { return std::atan2(y, x[0]); }, [&] {
    auto node = make_node("Atan2Backward0", atan2_backward, {self, other});
    node->save_input("other", other);
    node->save_input("self", old_self(self, true));
    return node;
  });
}

void hypot_(const Tensor& self, const Tensor& other) {
  OpScope scope("hypot_");
  check_inplace_operands(self, {other}, "hypot_", false);
  if (!is_floating(self->dtype())) not_implemented("hypot_cpu", self->dtype());
  Tensor original;  // the clone of the old self, made before the edit
  Shared<Node> node = edit_elementwise(self, {other}, [](double x, const double* y) { return std::hypot(x, y[0]); }, [&] {
    original = old_self(self, true);
    auto n = make_node("HypotBackward0", hypot_backward, {self, other});
    n->save_input("other", other);
    return n;
  });
  if (!node) return;
  // dir() order: other, result (self after the edit: measured version 1, self's storage),
  // self (the clone).
  node->save_output("result", self, 0);
  node->save_input("self", original);
}

void remainder_(const Tensor& self, const Value& other) { modulo_inplace(self, other, true); }
void fmod_(const Tensor& self, const Value& other) { modulo_inplace(self, other, false); }

void lerp_(const Tensor& self, const Tensor& end, const Value& weight) {
  OpScope scope("lerp_");
  const bool tensor_weight = weight.kind == Value::Kind::Tensor;
  if (!tensor_weight && !weight.is_number())
    type_error("lerp_(): argument 'weight' must be Tensor or Number, not " + type_name(weight));
  std::vector<Tensor> operands{end};
  if (tensor_weight) operands.push_back(weight.t);
  check_inplace_operands(self, operands, "lerp_", false);
  // Measured: "lerp_kernel_scalar" not implemented for 'Long'.
  if (!is_floating(self->dtype())) {
    if (tensor_weight) unsupported("lerp_ of " + dtype_name(self->dtype()) + " tensors");
    not_implemented("lerp_kernel_scalar", self->dtype());
  }
  check_lerp_dtype(self, end, "end");
  if (tensor_weight) check_lerp_dtype(self, weight.t, "weight");
  const DType dt = self->dtype();
  const double wv = tensor_weight ? 0.0 : weight.number();
  edit_elementwise(
      self, operands,
      [tensor_weight, wv, dt](double s, const double* o) { return lerp_value(s, o[0], tensor_weight ? o[1] : wv, dt); },
      [&] {
        if (!tensor_weight) {
          auto node = make_node("LerpBackward0", lerp_scalar_backward, {self, end});
          node->differentiable_backward = lerp_scalar_dbackward;
          node->save_attr("weight", number_attr(weight));
          return node;
        }
        const Tensor& w = weight.t;
        auto node = make_node("LerpBackward1", lerp_tensor_backward, {self, end, w});
        node->save_input("end", end, rg(w));
        node->save_input("self", old_self(self, rg(w)), rg(w));
        node->save_input("weight", w);
        return node;
      });
}

namespace {
void addc_inplace(const Tensor& self, const Tensor& t1, const Tensor& t2, const Value& value, bool divide) {
  const std::string op = divide ? "addcdiv_" : "addcmul_";
  OpScope scope(op);
  check_inplace_operands(self, {t1, t2}, op, false);
  require_same_dtype({&self, &t1, &t2}, op);
  const DType dt = self->dtype();
  check_addc_value(dt, value, divide, op);
  const double v = value.number();
  edit_elementwise(
      self, {t1, t2}, [v, divide, dt](double s, const double* o) { return addc_value(s, o[0], o[1], v, divide, dt); },
      [&] { return addc_node(self, t1, t2, value, divide); });
}
}  // namespace

void addcmul_(const Tensor& self, const Tensor& t1, const Tensor& t2, const Value& value) {
  addc_inplace(self, t1, t2, value, false);
}
void addcdiv_(const Tensor& self, const Tensor& t1, const Tensor& t2, const Value& value) {
  addc_inplace(self, t1, t2, value, true);
}

}  // namespace agtrace::ops
