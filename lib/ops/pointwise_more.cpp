// log1p, expm1, softplus, elu (selu), hardtanh (relu6), threshold and logsigmoid: forward,
// node, saved values and backward side by side. Nodes, saved attributes (dir() order,
// alphabetical), the type of each saved number, dtypes and errors measured with
// /usr/bin/python3 and torch 1.13; formulas from tools/autograd/derivatives.yaml and the
// CPU kernels of ATen/native/cpu/Activation.cpp (1.13).
#include <algorithm>
#include <cmath>
#include <string>

#include "ops/activations_inplace.hpp"
#include "ops/more.hpp"
#include "ops/more_util.hpp"

namespace agtrace::ops {

using namespace more_detail;

namespace more_detail {
void refuse_half_on_cpu(const Tensor& a, const std::string& kernel) {
  if (a->dtype() == DType::Float16 && !a->is_meta()) not_implemented(kernel, DType::Float16);
}
}  // namespace more_detail

namespace {

double number_of(const AttrValue& a) { return a.kind == AttrValue::Kind::Double ? a.d : static_cast<double>(a.i); }

// grad * f(saved, node) elementwise, in the input's dtype: the pointwise backward formulas
// below, each a function of one saved tensor (self or result) and the node's numbers.
template <typename F>
std::vector<Tensor> grad_with(Node& n, const std::vector<Tensor>& g, const char* saved, F&& f) {
  Tensor s = n.unpack(saved);
  return {kernels::binary(g[0], s, n.input_meta[0].dtype, std::forward<F>(f), "backward")};
}

// The forward of a pointwise op that saves self or result and some numbers: f computes
// one element; `out` is the result's dtype.
template <typename F>
Tensor pointwise(const Tensor& a, const char* op, const char* node_name, autograd::BackwardFn backward, DType out,
                 bool saves_result, std::initializer_list<std::pair<const char*, Value>> numbers, F&& f) {
  OpScope scope(op);
  require_host(a);
  Tensor r = kernels::unary(a, out, std::forward<F>(f));
  if (needs_grad({&a})) {
    auto node = make_node(node_name, backward, {a});
    set_history(r, node);
    // In dir() order (alphabetical), as PyTorch lists them: the tensor among the numbers.
    const std::string tensor_name = saves_result ? "result" : "self";
    bool tensor_saved = false;
    auto save_tensor = [&] {
      if (saves_result)
        node->save_output("result", r, 0);
      else
        node->save_input("self", a);
      tensor_saved = true;
    };
    for (const auto& [name, v] : numbers) {
      if (!tensor_saved && tensor_name < name) save_tensor();
      node->save_attr(name, number_attr(v));
    }
    if (!tensor_saved) save_tensor();
  }
  return r;
}

DType float_result(const Tensor& a) { return is_floating(a->dtype()) ? a->dtype() : DType::Float32; }

// ---- log1p, expm1

// log1p: log1p_backward(grad, self) = grad / (self + 1)
std::vector<Tensor> log1p_backward(Node& n, const std::vector<Tensor>& g) {
  const DType dt = n.input_meta[0].dtype;
  return grad_with(n, g, "self", [dt](double gv, double s) { return gv / round_to_dtype(s + 1, dt); });
}
// expm1: grad * (result + 1)
std::vector<Tensor> expm1_backward(Node& n, const std::vector<Tensor>& g) {
  const DType dt = n.input_meta[0].dtype;
  return grad_with(n, g, "result", [dt](double gv, double r) { return gv * round_to_dtype(r + 1, dt); });
}

// ---- softplus: softplus_backward(grad, self, beta, threshold):
// z = exp(x * beta); x * beta > threshold ? grad : grad * z / (z + 1)
std::vector<Tensor> softplus_backward(Node& n, const std::vector<Tensor>& g) {
  const double beta = number_of(n.attr("beta")), th = number_of(n.attr("threshold"));
  return grad_with(n, g, "self", [beta, th](double gv, double x) {
    const double z = std::exp(x * beta);
    return x * beta > th ? gv : gv * z / (z + 1);
  });
}

// ---- elu: elu_backward(grad, alpha, scale, input_scale, is_result=false, self):
// x <= 0 ? grad * input_scale * alpha * scale * exp(x * input_scale) : grad * scale
std::vector<Tensor> elu_backward(Node& n, const std::vector<Tensor>& g) {
  const double alpha = number_of(n.attr("alpha")), scale = number_of(n.attr("scale")),
               input_scale = number_of(n.attr("input_scale"));
  return grad_with(n, g, "self", [=](double gv, double x) {
    return x <= 0 ? gv * input_scale * alpha * scale * std::exp(x * input_scale) : gv * scale;
  });
}

// ---- hardtanh: hardtanh_backward(grad, self, min_val, max_val):
// x <= min_val || x >= max_val ? 0 : grad
std::vector<Tensor> hardtanh_backward(Node& n, const std::vector<Tensor>& g) {
  const double lo = number_of(n.attr("min_val")), hi = number_of(n.attr("max_val"));
  return grad_with(n, g, "self", [lo, hi](double gv, double x) { return x <= lo || x >= hi ? 0.0 : gv; });
}

// ---- threshold: threshold_backward(grad, self, threshold): x <= threshold ? 0 : grad
std::vector<Tensor> threshold_backward(Node& n, const std::vector<Tensor>& g) {
  const double th = number_of(n.attr("threshold"));
  return grad_with(n, g, "self", [th](double gv, double x) { return x <= th ? 0.0 : gv; });
}

// ---- logsigmoid: log_sigmoid_backward(grad, self, buffer), buffer = exp(-|x|):
// grad * (max_deriv - sign * z / (1 + z)), max_deriv = x < 0 ? 1 : 0, sign = x < 0 ? 1 : -1
std::vector<Tensor> logsigmoid_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self"), buffer = n.unpack("buffer");
  return {kernels::ternary(
      g[0], self, buffer, n.input_meta[0].dtype,
      [](double gv, double x, double z) {
        const bool negative = x < 0;
        return gv * ((negative ? 1.0 : 0.0) - (negative ? 1.0 : -1.0) * (z / (1 + z)));
      },
      "log_sigmoid_backward")};
}

}  // namespace

Tensor log1p(const Tensor& a) {
  refuse_half_on_cpu(a, "log1p_vml_cpu");
  return pointwise(a, "log1p", "Log1PBackward0", log1p_backward, float_result(a), false, {},
                   [](double x) { return std::log1p(x); });
}

Tensor expm1(const Tensor& a) {
  refuse_half_on_cpu(a, "expm1_vml_cpu");
  return pointwise(a, "expm1", "Expm1Backward0", expm1_backward, float_result(a), true, {},
                   [](double x) { return std::expm1(x); });
}

Tensor softplus(const Tensor& a, const Value& beta, const Value& threshold) {
  require_kernel_dtype(a, "softplus_cpu", false);  // measured: "softplus_cpu" not implemented for 'Long'
  const double b = beta.number(), th = threshold.number();
  return pointwise(a, "softplus", "SoftplusBackward0", softplus_backward, a->dtype(), false,
                   {{"beta", beta}, {"threshold", threshold}},
                   [b, th](double x) { return x * b > th ? x : std::log1p(std::exp(x * b)) / b; });
}

Tensor elu(const Tensor& a, const Value& alpha, const Value& scale, const Value& input_scale) {
  require_kernel_dtype(a, "elu_cpu", false);  // measured: "elu_cpu" not implemented for 'Long'
  const double al = alpha.number(), sc = scale.number(), is = input_scale.number();
  return pointwise(a, "elu", "EluBackward0", elu_backward, a->dtype(), false,
                   {{"alpha", alpha}, {"input_scale", input_scale}, {"scale", scale}},
                   [=](double x) { return x <= 0 ? std::expm1(x * is) * al * sc : x * sc; });
}

Tensor hardtanh(const Tensor& a, const Value& min_val, const Value& max_val) {
  // Integer tensors keep their dtype (measured: F.hardtanh of int64 [1, 2] is int64 [1, 1]).
  if (a->dtype() == DType::Bool) {
    ScenarioError e("dtype_mismatch", "Bool inputs not supported for hardtanh");  // measured wording
    e.facts = {{"op", "hardtanh"}, {"dtype", "bool"}};
    throw e;
  }
  refuse_half_on_cpu(a, "clamp_scalar_cpu");
  const double lo = min_val.number(), hi = max_val.number();
  Tensor r = pointwise(a, "hardtanh", "HardtanhBackward0", hardtanh_backward, a->dtype(), false,
                       {{"max_val", max_val}, {"min_val", min_val}},
                       // clamp: min(max(x, min_val), max_val), so min_val > max_val gives max_val
                       // everywhere (measured: F.hardtanh(x, 2, 1) is all 1); NaN stays NaN.
                       [lo, hi](double x) { return std::isnan(x) ? x : std::min(std::max(x, lo), hi); });
  if (r->grad_fn) r->grad_fn->differentiable_backward = hardtanh_dbackward;
  return r;
}

Tensor threshold(const Tensor& a, const Value& threshold, const Value& value) {
  if (a->dtype() == DType::Bool || a->dtype() == DType::Float16) not_implemented("threshold_cpu", a->dtype());
  const double th = threshold.number(), v = value.number();
  return pointwise(a, "threshold", "ThresholdBackward0", threshold_backward, a->dtype(), false,
                   {{"threshold", threshold}}, [th, v](double x) { return x <= th ? v : x; });
}

Tensor logsigmoid(const Tensor& a) {
  OpScope scope("log_sigmoid");
  require_host(a);
  require_kernel_dtype(a, "log_sigmoid_cpu", false);  // measured: "log_sigmoid_cpu" not implemented for 'Long'
  // log_sigmoid_forward returns (output, buffer): output = min(x, 0) - log1p(buffer),
  // buffer = exp(-|x|), a tensor of the input's shape on the CPU (and on meta, measured).
  Tensor buffer = kernels::unary(a, a->dtype(), [](double x) { return std::exp(-std::fabs(x)); });
  Tensor r = kernels::binary(a, buffer, a->dtype(),
                             [](double x, double z) { return (0.0 < x ? 0.0 : x) - std::log1p(z); }, "log_sigmoid");
  if (needs_grad({&a})) {
    auto node = make_node("LogSigmoidBackward0", logsigmoid_backward, {a});
    set_history(r, node);
    // The buffer is an output nobody else holds: saved as the node's own reference to it.
    node->save_input("buffer", buffer);
    node->save_input("self", a);
  }
  return r;
}

}  // namespace agtrace::ops
