// In-place activations, the out-of-place activations they need, softmax(dtype=) and
// cross_entropy(label_smoothing=): forward, node, saved values and backward side by side,
// then this family's op-table fragment. Nodes, dir() of each node, whether a saved tensor
// is the edited result or a clone of the old self, the type of each saved number, dtype
// errors and gradients measured with /usr/bin/python3 and torch 1.13; formulas from
// tools/autograd/derivatives.yaml and ATen/native/cpu/Activation.cpp (1.13).
#include "ops/activations_inplace.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/activations.hpp"
#include "ops/common.hpp"
#include "ops/double_backward.hpp"
#include "ops/indexing.hpp"
#include "ops/inplace_util.hpp"
#include "ops/more.hpp"
#include "ops/more_util.hpp"
#include "ops/ops.hpp"
#include "ops/shapes.hpp"
#include "ops/table.hpp"
#include "ops/table_util.hpp"

namespace agtrace::ops {

using namespace more_detail;

namespace {

// SELU's constants (at::selu = elu(self, SELU_ALPHA, SELU_SCALE); measured _saved_alpha
// 1.6732632423543772, _saved_scale 1.0507009873554805).
constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
constexpr double kSeluScale = 1.0507009873554804934193349852946;

double number_of(const Node& n, const char* name) { return attr_value(n.attr(name)).number(); }

// ---------------------------------------------------------------- dtype rules of the CPU kernels

// Measured: elu_cpu, leaky_relu_cpu, silu_cpu, hardsigmoid_cpu, hardswish_cpu refuse integer
// and Half tensors; mish_cpu refuses BFloat16 too; hardtanh (clamp_scalar_cpu) and
// threshold_cpu take integer tensors, refuse Half, and hardtanh refuses Bool in its own words.
enum class DtypeRule { Floating, FloatingNoBFloat16, Clamp, Threshold };

struct Kernel {
  const char* name;  // "elu_cpu"
  DtypeRule rule;
};

void check_kernel_dtype(const Tensor& t, const Kernel& k) {
  const DType d = t->dtype();
  switch (k.rule) {
    case DtypeRule::Floating:
      require_kernel_dtype(t, k.name, false);
      return;
    case DtypeRule::FloatingNoBFloat16:
      require_kernel_dtype(t, k.name, false);
      if (d == DType::BFloat16 && !t->is_meta()) not_implemented(k.name, d);
      return;
    case DtypeRule::Clamp:
      if (d == DType::Bool) throw ScenarioError("dtype_mismatch", "Bool inputs not supported for hardtanh");
      refuse_half_on_cpu(t, k.name);
      return;
    case DtypeRule::Threshold:
      if (d == DType::Bool || (d == DType::Float16 && !t->is_meta())) not_implemented(k.name, d);
      return;
  }
}

// An integer tensor clamped by a fractional bound: what ATen's integer kernel does with the
// bound was not measured, so it is refused rather than guessed.
void refuse_fractional_bounds(const Tensor& t, std::initializer_list<const Value*> bounds, const char* op) {
  if (is_floating(t->dtype())) return;
  for (const Value* b : bounds)
    if (b->kind == Value::Kind::Float && b->f != std::floor(b->f))
      throw ScenarioError("unsupported", std::string(op) + " of an integer tensor with a fractional bound is not supported");
}

// ---------------------------------------------------------------- saving in dir() order

// A value an activation's node saves beside its main tensor (self or result).
struct Extra {
  const char* name;
  Value number;   // a Python number or bool, saved as an attribute, when `tensor` is null
  Tensor tensor;  // a saved input nobody else holds (rrelu's noise)
};

// Saves the extras and the main tensor (saved by `save_main` under `main_name`) in
// alphabetical order, the order dir(node) lists the _saved_ attributes in.
template <typename SaveMain>
void save_in_dir_order(Node& node, std::vector<Extra> extras, const std::string& main_name, SaveMain&& save_main) {
  std::sort(extras.begin(), extras.end(), [](const Extra& a, const Extra& b) { return std::string(a.name) < b.name; });
  bool main_saved = false;
  for (const Extra& e : extras) {
    if (!main_saved && main_name < e.name) {
      save_main();
      main_saved = true;
    }
    if (e.tensor)
      node.save_input(e.name, e.tensor);
    else if (e.number.kind == Value::Kind::Bool)
      node.save_attr(e.name, AttrValue::boolean(e.number.b));
    else
      node.save_attr(e.name, number_attr(e.number));
  }
  if (!main_saved) save_main();
}

// ---------------------------------------------------------------- the two recipes

struct Recipe {
  const char* op;    // the OpScope: "elu_"
  Kernel kernel;
  const char* node;  // "EluBackward1"
  autograd::BackwardFn backward;
  autograd::BackwardFn dbackward;  // the create_graph=True formula; null where not written
};

// An in-place activation in VariableType's order (inplace_util.hpp): the autograd checks,
// the overlap check (skipped where the kernel allows it), the dtype rule, a clone of the old
// self when the node saves self, the node, the write, one bump, the history rebase; then the
// saved values, the edited tensor at its new version when the node saves `result`.
template <typename F>
void activation_inplace(const Tensor& self, const Recipe& r, bool saves_result, bool checks_overlap,
                        std::vector<Extra> extras, F&& f) {
  OpScope scope(r.op);
  check_inplace_allowed(self);
  if (checks_overlap) check_no_internal_overlap(self);
  check_kernel_dtype(self, r.kernel);
  require_host(self);
  const bool grad = needs_grad({&self});
  Tensor original = grad && !saves_result ? clone(self) : nullptr;
  Shared<Node> node = grad ? make_node(r.node, r.backward, {self}) : nullptr;
  if (node) node->differentiable_backward = r.dbackward;
  kernels::unary_inplace(self, std::forward<F>(f));
  bump(self);
  if (!node) return;
  record_history(self, node);
  if (!saves_result) {
    save_in_dir_order(*node, std::move(extras), "self", [&] { node->save_input("self", original); });
    return;
  }
  save_in_dir_order(*node, std::move(extras), "result", [&] {
    node->save_output("result", self, 0);
    // On a view, torch 1.13 saves it with is_inplace_on_view (as unary_inplace does).
    if (self->is_view() && !node->saved.empty() && node->saved.back().var.defined)
      node->saved.back().var.hooked_state().inplace_view_grad_fn = self->grad_fn;
  });
}

// The out-of-place activation: a new tensor of the input's dtype, the node saving self (the
// same object) among the extras.
template <typename F>
Tensor activation(const Tensor& a, const Recipe& r, std::vector<Extra> extras, F&& f) {
  OpScope scope(r.op);
  check_kernel_dtype(a, r.kernel);
  require_host(a);
  Tensor out = kernels::unary(a, a->dtype(), std::forward<F>(f));
  if (needs_grad({&a})) {
    auto node = make_node(r.node, r.backward, {a});
    node->differentiable_backward = r.dbackward;
    set_history(out, node);
    save_in_dir_order(*node, std::move(extras), "self", [&] { node->save_input("self", a); });
  }
  return out;
}

// grad * f(saved) elementwise, in the input's dtype.
template <typename F>
std::vector<Tensor> grad_with(Node& n, const std::vector<Tensor>& g, const char* saved, F&& f) {
  Tensor s = n.unpack(saved);
  return {kernels::binary(g[0], s, n.input_meta[0].dtype, std::forward<F>(f), "backward")};
}

// ---------------------------------------------------------------- elu, celu, selu

// elu's CPU kernel: x <= 0 ? (exp(x * input_scale) - 1) * alpha * scale : x * scale.
auto elu_formula(double alpha, double scale, double input_scale) {
  return [=](double x) { return x <= 0 ? std::expm1(x * input_scale) * alpha * scale : x * scale; };
}

// elu_backward(grad, alpha, scale, input_scale, is_result=true, result), whose meta function
// refuses a negative alpha with this RuntimeError (measured wording).
std::vector<Tensor> elu_result_grad(Node& n, const std::vector<Tensor>& g, double alpha, double scale,
                                    double input_scale) {
  if (alpha < 0)
    throw ScenarioError("type_error",
                        "In-place elu backward calculation is triggered with a negative slope which is not supported. "
                        "This is caused by calling in-place forward function with a negative slope, please call "
                        "out-of-place version instead.");
  return grad_with(n, g, "result", [=](double gv, double r) {
    return r <= 0 ? gv * input_scale * (r + alpha * scale) : gv * scale;
  });
}

// EluBackward1: elu_backward(grad, alpha, scale, input_scale, true, result).
std::vector<Tensor> elu_inplace_backward(Node& n, const std::vector<Tensor>& g) {
  return elu_result_grad(n, g, number_of(n, "alpha"), number_of(n, "scale"), number_of(n, "input_scale"));
}

// celu's backward uses input_scale = 1.0 / alpha.toFloat() (derivatives.yaml): the
// reciprocal of alpha rounded to float.
double celu_input_scale(double alpha) { return 1.0 / static_cast<double>(static_cast<float>(alpha)); }

// CeluBackward1: elu_backward(grad, alpha, 1, 1.0 / alpha.toFloat(), true, result).
std::vector<Tensor> celu_inplace_backward(Node& n, const std::vector<Tensor>& g) {
  const double alpha = number_of(n, "alpha");
  return elu_result_grad(n, g, alpha, 1.0, celu_input_scale(alpha));
}

// CeluBackward0: elu_backward(grad, alpha, 1, 1.0 / alpha.toFloat(), false, self):
// x <= 0 ? grad * input_scale * alpha * exp(x * input_scale) : grad.
std::vector<Tensor> celu_backward(Node& n, const std::vector<Tensor>& g) {
  const double alpha = number_of(n, "alpha"), is = celu_input_scale(alpha);
  return grad_with(n, g, "self", [=](double gv, double x) { return x <= 0 ? gv * is * alpha * std::exp(x * is) : gv; });
}

// at::celu = elu(self, alpha, 1, 1.0 / alpha), after this check (measured wording).
void check_celu_alpha(const Value& alpha) {
  if (alpha.number() == 0)
    throw ScenarioError("type_error", "ZeroDivisionError: alpha cannot be 0 for CELU");
}

const Recipe kElu_{"elu_", {"elu_cpu", DtypeRule::Floating}, "EluBackward1", elu_inplace_backward, nullptr};
const Recipe kCelu_{"celu_", {"elu_cpu", DtypeRule::Floating}, "CeluBackward1", celu_inplace_backward, nullptr};
const Recipe kCelu{"celu", {"elu_cpu", DtypeRule::Floating}, "CeluBackward0", celu_backward, nullptr};

// ---------------------------------------------------------------- leaky_relu, rrelu

// leaky_relu_backward(grad, result, negative_slope, self_is_result=true) refuses a negative
// slope with this RuntimeError (measured wording, "leakRelu" as PyTorch spells it); zero passes.
void check_result_slope(double slope) {
  if (slope < 0)
    throw ScenarioError("type_error",
                        "In-place leakyReLu backward calculation is triggered with a negative slope which is not "
                        "supported. This is caused by calling in-place forward function with a negative slope, please "
                        "call out-of-place version instead. File an issue at https://github.com/pytorch/pytorch if you "
                        "do require supporting in-place leakRelu backward calculation with negative slope");
}

// LeakyReluBackward1: leaky_relu_backward(grad, result, negative_slope, true), whose own
// derivative is LeakyReluBackwardBackward0 over (grad, result): leaky_relu_backward_op records
// it in grad mode, so the same function serves create_graph=True.
std::vector<Tensor> leaky_relu_inplace_backward(Node& n, const std::vector<Tensor>& g) {
  const Value slope = attr_value(n.attr("negative_slope"));
  check_result_slope(slope.number());
  return {leaky_relu_backward_op(g[0], n.unpack("result"), slope)};
}

// rrelu without training is leaky_relu with slope (lower + upper) / 2 (rrelu_with_noise_out_cpu).
double rrelu_eval_slope(const Value& lower, const Value& upper) { return (lower.number() + upper.number()) / 2; }

// RreluWithNoiseBackward0 / 1 with training=False: rrelu_with_noise_backward(grad, self or
// result, noise, lower, upper, false, is_result) = leaky_relu_backward(grad, self or result,
// (lower + upper) / 2, is_result).
std::vector<Tensor> rrelu_grad(Node& n, const std::vector<Tensor>& g, const char* saved, bool is_result) {
  const double slope = (number_of(n, "lower") + number_of(n, "upper")) / 2;
  if (is_result) check_result_slope(slope);
  return grad_with(n, g, saved, [slope](double gv, double x) { return x > 0 ? gv : gv * slope; });
}
std::vector<Tensor> rrelu_backward(Node& n, const std::vector<Tensor>& g) { return rrelu_grad(n, g, "self", false); }
std::vector<Tensor> rrelu_inplace_backward(Node& n, const std::vector<Tensor>& g) {
  return rrelu_grad(n, g, "result", true);
}

auto leaky_formula(double slope) {
  return [slope](double x) { return x > 0 ? x : x * slope; };
}

const Recipe kLeakyRelu_{"leaky_relu_", {"leaky_relu_cpu", DtypeRule::Floating}, "LeakyReluBackward1",
                         leaky_relu_inplace_backward, leaky_relu_inplace_backward};
const Recipe kRrelu{"rrelu", {"leaky_relu_cpu", DtypeRule::Floating}, "RreluWithNoiseBackward0", rrelu_backward,
                    nullptr};
const Recipe kRrelu_{"rrelu_", {"leaky_relu_cpu", DtypeRule::Floating}, "RreluWithNoiseBackward1",
                     rrelu_inplace_backward, nullptr};

// rrelu's noise: at::rrelu passes at::empty_like(self) to rrelu_with_noise, which saves it
// (its values are never read without training; agtrace's empty tensors hold zeros).
Tensor rrelu_noise(const Tensor& a, bool training, const char* op) {
  if (training)
    throw ScenarioError("unsupported", std::string(op) +
                                           "(training=True) is not supported: its slopes come from PyTorch's generator");
  return empty_tensor(a->sizes, a->dtype(), a->is_meta());
}

// ---------------------------------------------------------------- hardtanh, threshold

// HardtanhBackward0: hardtanh_backward(grad, self, min_val, max_val).
std::vector<Tensor> hardtanh_backward(Node& n, const std::vector<Tensor>& g) {
  const double lo = number_of(n, "min_val"), hi = number_of(n, "max_val");
  return grad_with(n, g, "self", [lo, hi](double gv, double x) { return x <= lo || x >= hi ? 0.0 : gv; });
}

// ThresholdBackward1: threshold_backward(grad, self, threshold); threshold_backward_op records
// ThresholdBackwardBackward0 in grad mode, so it serves create_graph=True as well.
std::vector<Tensor> threshold_inplace_backward(Node& n, const std::vector<Tensor>& g) {
  return {threshold_backward_op(g[0], n.unpack("self"), attr_value(n.attr("threshold")))};
}

// create_graph=True (measured): hardtanh_backward records HardtanhBackwardBackward0, edges
// (grad, self), saving max_val, min_val and self; its formula (derivatives.yaml):
// grad_output: hardtanh_backward(grad, self, min_val, max_val); self: zeros_like(grad).
std::vector<Tensor> hardtanh_bb_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor a, b;
  if (n.should_compute_output(0)) a = hardtanh_backward(n, g)[0];
  if (n.should_compute_output(1)) b = kernels::full(g[0]->sizes, 0.0, n.input_meta[1].dtype, g[0]->is_meta());
  return {a, b};
}

}  // namespace

std::vector<Tensor> hardtanh_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self");
  return {record_backward_op(hardtanh_backward(n, g)[0], "HardtanhBackwardBackward0", hardtanh_bb_backward,
                             {g[0], self}, [&](Node& bb) {
                               bb.save_attr("max_val", n.attr("max_val"));
                               bb.save_attr("min_val", n.attr("min_val"));
                               bb.save_input("self", self);
                             })};
}

namespace {

const Recipe kHardtanh_{"hardtanh_", {"clamp_scalar_cpu", DtypeRule::Clamp}, "HardtanhBackward0", hardtanh_backward,
                        hardtanh_dbackward};
const Recipe kThreshold_{"threshold_", {"threshold_cpu", DtypeRule::Threshold}, "ThresholdBackward1",
                         threshold_inplace_backward, threshold_inplace_backward};

// ---------------------------------------------------------------- silu, hardsigmoid, hardswish, mish

// HardsigmoidBackward0: hardsigmoid_backward(grad, self): -3 < x < 3 ? grad * (1/6 in the
// dtype) : 0 (measured: the gradient of float32 reads 0.1666666716337204).
std::vector<Tensor> hardsigmoid_backward(Node& n, const std::vector<Tensor>& g) {
  const double sixth = round_to_dtype(1.0 / 6.0, n.input_meta[0].dtype);
  return grad_with(n, g, "self", [sixth](double gv, double x) { return x > -3 && x < 3 ? gv * sixth : 0.0; });
}

// HardswishBackward0: hardswish_backward(grad, self): x < -3 ? 0 : x <= 3 ? grad * (x / 3 +
// 0.5) : grad.
std::vector<Tensor> hardswish_backward(Node& n, const std::vector<Tensor>& g) {
  return grad_with(n, g, "self", [](double gv, double x) { return x < -3 ? 0.0 : x <= 3 ? gv * (x / 3 + 0.5) : gv; });
}

// MishBackward0: mish_backward(grad, self) = grad * (t + x * sigmoid(x) * (1 - t^2)),
// t = tanh(softplus(x)).
std::vector<Tensor> mish_backward(Node& n, const std::vector<Tensor>& g) {
  return grad_with(n, g, "self", [](double gv, double x) {
    const double sig = 1.0 / (1.0 + std::exp(-x));
    const double t = std::tanh(std::log1p(std::exp(x)));
    return gv * (t + x * sig * (1 - t * t));
  });
}

double hardsigmoid_value(double x) { return std::min(std::max(x + 3, 0.0), 6.0) / 6; }
double hardswish_value(double x) { return x * std::min(std::max(x + 3, 0.0), 6.0) / 6; }
double mish_value(double x) { return x * std::tanh(std::log1p(std::exp(x))); }

Recipe silu_recipe() {
  const InplaceSharedFormulas& f = inplace_shared_formulas();
  return {"silu_", {"silu_cpu", DtypeRule::Floating}, "SiluBackward0", f.silu, f.silu_differentiable};
}
const Recipe kHardsigmoid{"hardsigmoid", {"hardsigmoid_cpu", DtypeRule::Floating}, "HardsigmoidBackward0",
                          hardsigmoid_backward, nullptr};
// create_graph=True (measured): hardswish_backward records HardswishBackwardBackward0, edges
// (grad, self), saving grad_output and self; its formula (derivatives.yaml): grad_output:
// hardswish_backward(grad, self); self: where(-3 < self < 3, grad * grad_output / 3.0, 0).
std::vector<Tensor> hardswish_bb_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor a, b;
  if (n.should_compute_output(0)) a = hardswish_backward(n, g)[0];
  if (n.should_compute_output(1)) {
    const DType dt = n.input_meta[1].dtype;
    Tensor product = kernels::binary(g[0], n.unpack("grad_output"), dt, [](double x, double y) { return x * y; }, "mul");
    b = kernels::binary(product, n.unpack("self"), dt,
                        [](double p, double x) { return x > -3 && x < 3 ? p / 3.0 : 0.0; }, "where");
  }
  return {a, b};
}
std::vector<Tensor> hardswish_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self");
  return {record_backward_op(hardswish_backward(n, g)[0], "HardswishBackwardBackward0", hardswish_bb_backward,
                             {g[0], self}, [&](Node& bb) {
                               bb.save_input("grad_output", g[0]);
                               bb.save_input("self", self);
                             })};
}
const Recipe kHardswish{"hardswish", {"hardswish_cpu", DtypeRule::Floating}, "HardswishBackward0", hardswish_backward,
                        hardswish_dbackward};
const Recipe kMish{"mish", {"mish_cpu", DtypeRule::FloatingNoBFloat16}, "MishBackward0", mish_backward, nullptr};

// The recipe under another op name: the in-place form of an op that saves self (the same node
// over a clone of the old self), or another spelling of the same op (selu_ of elu_).
Recipe inplace_of(Recipe r, const char* op) {
  r.op = op;
  return r;
}

}  // namespace

// ---------------------------------------------------------------- public entry points

void elu_(const Tensor& self, const Value& alpha, const Value& scale, const Value& input_scale, const char* op) {
  activation_inplace(self, inplace_of(kElu_, op), true, true,
                     {{"alpha", alpha, nullptr}, {"input_scale", input_scale, nullptr}, {"scale", scale, nullptr}},
                     elu_formula(alpha.number(), scale.number(), input_scale.number()));
}

void celu_(const Tensor& self, const Value& alpha) {
  check_celu_alpha(alpha);
  activation_inplace(self, kCelu_, true, true, {{"alpha", alpha, nullptr}},
                     elu_formula(alpha.number(), 1.0, 1.0 / alpha.number()));
}

Tensor celu(const Tensor& a, const Value& alpha) {
  check_celu_alpha(alpha);
  return activation(a, kCelu, {{"alpha", alpha, nullptr}}, elu_formula(alpha.number(), 1.0, 1.0 / alpha.number()));
}

void leaky_relu_(const Tensor& self, const Value& negative_slope) {
  activation_inplace(self, kLeakyRelu_, true, true, {{"negative_slope", negative_slope, nullptr}},
                     leaky_formula(negative_slope.number()));
}

void rrelu_(const Tensor& self, const Value& lower, const Value& upper, bool training) {
  OpScope scope("rrelu_");
  Tensor noise = rrelu_noise(self, training, "rrelu_");
  activation_inplace(self, kRrelu_, true, true,
                     {{"lower", lower, nullptr}, {"noise", Value(), noise}, {"training", Value::boolean(false), nullptr},
                      {"upper", upper, nullptr}},
                     leaky_formula(rrelu_eval_slope(lower, upper)));
}

Tensor rrelu(const Tensor& a, const Value& lower, const Value& upper, bool training) {
  OpScope scope("rrelu");
  Tensor noise = rrelu_noise(a, training, "rrelu");
  return activation(a, kRrelu,
                    {{"lower", lower, nullptr}, {"noise", Value(), noise}, {"training", Value::boolean(false), nullptr},
                     {"upper", upper, nullptr}},
                    leaky_formula(rrelu_eval_slope(lower, upper)));
}

void hardtanh_(const Tensor& self, const Value& min_val, const Value& max_val) {
  refuse_fractional_bounds(self, {&min_val, &max_val}, "hardtanh_");
  const double lo = min_val.number(), hi = max_val.number();
  // clamp: min(max(x, min_val), max_val); NaN stays NaN (as the out-of-place hardtanh).
  activation_inplace(self, kHardtanh_, false, true, {{"max_val", max_val, nullptr}, {"min_val", min_val, nullptr}},
                     [lo, hi](double x) { return std::isnan(x) ? x : std::min(std::max(x, lo), hi); });
}

void threshold_(const Tensor& self, const Value& threshold, const Value& value) {
  refuse_fractional_bounds(self, {&threshold, &value}, "threshold_");
  const double th = threshold.number(), v = value.number();
  // Measured: threshold_ writes an expanded tensor without the overlap error.
  activation_inplace(self, kThreshold_, false, false, {{"threshold", threshold, nullptr}},
                     [th, v](double x) { return x <= th ? v : x; });
}

void silu_(const Tensor& self) {
  // silu_kernel in the dtype: x / (1 + exp(-x)), each step rounded (as the out-of-place silu).
  const DType dt = self->dtype();
  activation_inplace(self, silu_recipe(), false, true, {},
                     [dt](double x) { return x / round_to_dtype(1.0 + round_to_dtype(std::exp(-x), dt), dt); });
}

void hardsigmoid_(const Tensor& self) {
  activation_inplace(self, inplace_of(kHardsigmoid, "hardsigmoid_"), false, true, {}, hardsigmoid_value);
}
void hardswish_(const Tensor& self) {
  activation_inplace(self, inplace_of(kHardswish, "hardswish_"), false, true, {}, hardswish_value);
}
void mish_(const Tensor& self) { activation_inplace(self, inplace_of(kMish, "mish_"), false, true, {}, mish_value); }

Tensor hardsigmoid(const Tensor& a) { return activation(a, kHardsigmoid, {}, hardsigmoid_value); }
Tensor hardswish(const Tensor& a) { return activation(a, kHardswish, {}, hardswish_value); }
Tensor mish(const Tensor& a) { return activation(a, kMish, {}, mish_value); }

// ---------------------------------------------------------------- softmax(dtype=)

Tensor softmax_input(const Tensor& a, std::optional<DType> dtype) {
  // at::softmax(input, dim, dtype): input.toType(dtype) first, which is input itself when the
  // dtype is already its own (measured: no ToCopyBackward0 then).
  return dtype ? to_dtype(a, *dtype) : a;
}

// ---------------------------------------------------------------- cross_entropy(label_smoothing=)

Tensor cross_entropy_label_smoothing(const Tensor& input, const Tensor& target, const Tensor& weight,
                                     int64_t reduction, int64_t ignore_index, double label_smoothing) {
  OpScope scope("cross_entropy");
  require_host(input);  // its index_put_ and masked_select have no cuda route
  if (input->sizes == target->sizes)
    throw ScenarioError("unsupported", "cross_entropy with class-probability targets is not supported");
  if (weight)
    throw ScenarioError("unsupported", "cross_entropy(weight=..., label_smoothing=...) (another decomposition) is not supported");
  const int64_t class_dim = input->dim() == 1 ? 0 : 1;
  const int64_t n_classes = input->sizes[static_cast<size_t>(class_dim)];
  Tensor log_probs = log_softmax(input, class_dim);
  Tensor nll = nll_loss(log_probs, target, weight, reduction, ignore_index);
  Tensor ignore_mask = compare(target, wrap_number(Value::integer(ignore_index)), "eq");
  Tensor smooth = neg(sum(log_probs, std::vector<int64_t>{class_dim}, false));
  // smooth_loss.index_put_({ignore_mask}, 0.0): the 0.0 becomes a 0-d tensor of smooth's dtype
  // (at::indexing::set_item's scalarToTensor), an IndexPutBackward0 edge of None.
  index_put_(smooth, {ignore_mask}, kernels::full({}, 0.0, smooth->dtype(), smooth->is_meta()), false);
  Tensor ret = smooth;
  if (reduction == 1) {
    Tensor kept = kernels::unary(ignore_mask, DType::Bool, [](double m) { return m != 0 ? 0.0 : 1.0; });  // ~ignore_mask
    ret = mean(masked_select(smooth, kept), std::nullopt, false);
  } else if (reduction == 2) {
    ret = sum(smooth, std::nullopt, false);
  }
  // (1 - label_smoothing) * nllloss + ret * (label_smoothing / n_classes): Tensor-Scalar
  // products (MulBackward1 saving the double) under AddBackward0 (measured).
  return add(mul_scalar(nll, Value::real(1 - label_smoothing)),
             mul_scalar(ret, Value::real(label_smoothing / static_cast<double>(n_classes))), Value::integer(1));
}

// ---------------------------------------------------------------- the table fragment

namespace {

const Value& number_arg(const Args& a, const char* name) {
  const Value& v = a.get(name);
  if (!v.is_number()) type_error(short_fn(a.fn) + "(): argument '" + name + "' must be Number, not " + type_name(v));
  return v;
}

// Runs the in-place `edit` on the tensor argument `name`; the result is that same object.
template <typename Edit>
Value edit_in_place(const Args& a, const char* name, Edit&& edit) {
  Tensor x = a.tensor(name);
  edit(x);
  return T(x);
}

Value impl_elu_(Args& a, Runtime&) {
  return edit_in_place(a, "self", [&](const Tensor& x) {
    elu_(x, number_arg(a, "alpha"), number_arg(a, "scale"), number_arg(a, "input_scale"));
  });
}
Value impl_selu_(Args& a, Runtime&) {
  return edit_in_place(a, "self", [](const Tensor& x) {
    elu_(x, Value::real(kSeluAlpha), Value::real(kSeluScale), Value::integer(1), "selu_");
  });
}
Value impl_celu_(Args& a, Runtime&) {
  return edit_in_place(a, "self", [&](const Tensor& x) { celu_(x, number_arg(a, "alpha")); });
}
Value impl_celu(Args& a, Runtime&) {
  if (!a.flag("inplace")) return T(celu(a.tensor("input"), number_arg(a, "alpha")));
  return edit_in_place(a, "input", [&](const Tensor& x) { celu_(x, number_arg(a, "alpha")); });
}
Value impl_leaky_relu_(Args& a, Runtime&) {
  return edit_in_place(a, "self", [&](const Tensor& x) { leaky_relu_(x, number_arg(a, "negative_slope")); });
}
Value impl_hardtanh_(Args& a, Runtime&) {
  return edit_in_place(a, "self",
                       [&](const Tensor& x) { hardtanh_(x, number_arg(a, "min_val"), number_arg(a, "max_val")); });
}
Value impl_threshold_(Args& a, Runtime&) {
  return edit_in_place(a, "self",
                       [&](const Tensor& x) { threshold_(x, number_arg(a, "threshold"), number_arg(a, "value")); });
}
Value impl_f_relu_(Args& a, Runtime&) {
  return edit_in_place(a, "input", [](const Tensor& x) { relu_(x); });
}
// F.rrelu(inplace=True) is torch.rrelu_ (F.rrelu_'s generator= is not modelled).
Value impl_rrelu(Args& a, Runtime&) {
  const Value &lower = number_arg(a, "lower"), &upper = number_arg(a, "upper");
  if (!a.flag("inplace")) return T(rrelu(a.tensor("input"), lower, upper, a.flag("training")));
  return edit_in_place(a, "input", [&](const Tensor& x) { rrelu_(x, lower, upper, a.flag("training")); });
}
Value impl_rrelu_(Args& a, Runtime&) {
  if (a.given("generator")) throw ScenarioError("unsupported", "rrelu_(generator=...) is not supported");
  return edit_in_place(a, "self", [&](const Tensor& x) {
    rrelu_(x, number_arg(a, "lower"), number_arg(a, "upper"), a.flag("training"));
  });
}

// F.hardsigmoid / F.hardswish / F.mish: inplace=True is torch._C._nn.<op>_.
template <Tensor (*Op)(const Tensor&), void (*Inplace)(const Tensor&)>
Value impl_with_inplace(Args& a, Runtime&) {
  if (!a.flag("inplace")) return T(Op(a.tensor("input")));
  return edit_in_place(a, "input", Inplace);
}

}  // namespace

std::vector<OpEntry> activation_inplace_ops() {
  const std::string clone = "self: a clone of the old self (CloneBackward0, its own storage)";
  return {
      {"elu_", {"F.elu_"}, "(self, alpha=1, scale=1, input_scale=1)", "inplace", "EluBackward1",
       "alpha, input_scale, result (the edited tensor), scale; a negative alpha raises in backward", impl_elu_, {}},
      {"selu_", {"F.selu_", "torch.selu_"}, "(self)", "inplace", "EluBackward1",
       "elu_ with SELU's alpha and scale, input_scale 1: alpha, input_scale, result, scale", impl_selu_, {}},
      {"celu_", {"F.celu_", "torch.celu_"}, "(self, alpha=1.0)", "inplace", "CeluBackward1",
       "alpha, result (the edited tensor); alpha 0 raises", impl_celu_, {}},
      {"celu", {"F.celu"}, "(input, alpha=1.0, inplace=False)", "activation", "CeluBackward0 / CeluBackward1",
       "alpha, self (same object); inplace=True as celu_", impl_celu, {}},
      {"leaky_relu_", {"F.leaky_relu_"}, "(self, negative_slope=0.01)", "inplace", "LeakyReluBackward1",
       "negative_slope, result (the edited tensor); a negative slope raises in backward", impl_leaky_relu_, {}},
      {"hardtanh_", {"F.hardtanh_"}, "(self, min_val=-1, max_val=1)", "inplace", "HardtanhBackward0",
       "max_val, min_val, " + clone, impl_hardtanh_, {}},
      {"threshold_", {"F.threshold_", "torch.threshold_"}, "(self, threshold, value)", "inplace", "ThresholdBackward1",
       clone + ", threshold", impl_threshold_, {}},
      {"relu_", {"F.relu_"}, "(input)", "inplace", "ReluBackward0", "result (the edited tensor, version 1)",
       impl_f_relu_, {}},
      {"rrelu", {"F.rrelu"}, "(input, lower=0.125, upper=0.3333333333333333, training=False, inplace=False)",
       "activation", "RreluWithNoiseBackward0 / RreluWithNoiseBackward1",
       "lower, noise (a new tensor of the input's shape), self (same object) or result (inplace=True), training, "
       "upper; training=True not supported",
       impl_rrelu, {}},
      {"rrelu_", {"F.rrelu_", "torch.rrelu_"},
       "(self, lower=0.125, upper=0.3333333333333333, training=False, generator=None)", "inplace",
       "RreluWithNoiseBackward1", "lower, noise, result (the edited tensor), training, upper; training=True not supported",
       impl_rrelu_, {}},
      {"hardsigmoid", {"F.hardsigmoid"}, "(input, inplace=False)", "activation", "HardsigmoidBackward0",
       "self (same object); inplace=True: " + clone, impl_with_inplace<hardsigmoid, hardsigmoid_>, {}},
      {"hardswish", {"F.hardswish"}, "(input, inplace=False)", "activation", "HardswishBackward0",
       "self (same object); inplace=True: " + clone, impl_with_inplace<hardswish, hardswish_>, {}},
      {"mish", {"F.mish"}, "(input, inplace=False)", "activation", "MishBackward0",
       "self (same object); inplace=True: " + clone, impl_with_inplace<mish, mish_>, {}},
  };
}

}  // namespace agtrace::ops
