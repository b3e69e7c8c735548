// F.l1_loss, F.smooth_l1_loss, F.binary_cross_entropy, F.binary_cross_entropy_with_logits
// and F.one_hot: forward, node, saved values and backward side by side. Nodes, saved
// attributes (dir() order), edges and errors measured with /usr/bin/python3 and torch 1.13;
// formulas from tools/autograd/derivatives.yaml and FunctionsManual.cpp of 1.13.
#include <algorithm>
#include <cmath>

#include "ops/more.hpp"
#include "ops/more_util.hpp"
#include "ops/ops.hpp"

namespace agtrace::ops {

using namespace more_detail;

namespace {

constexpr int64_t kReduceNone = 0, kReduceMean = 1;  // at::Reduction

// The elementwise losses below take input and target of one shape: F.* otherwise runs on
// torch.broadcast_tensors (ExpandBackward0 nodes under the loss), which is not mirrored.
void require_same_shape(const Tensor& input, const Tensor& target, const char* op) {
  if (input->sizes == target->sizes) return;
  kernels::broadcast_shapes(input->sizes, target->sizes, op);  // the size error first
  unsupported(std::string(op) + " with input and target of different shapes (broadcast)");
}

// A loss of elementwise terms f(x, t), reduced: none keeps the shape, mean divides the sum by
// numel, sum sums. Host or meta data.
template <typename F>
Tensor reduced_loss(const Tensor& input, const Tensor& target, int64_t reduction, F&& f) {
  const bool meta = input->is_meta() || target->is_meta();
  const DType out = input->dtype();
  std::vector<double> vals;
  if (!meta) {
    const std::vector<double> x = to_values(input), t = to_values(target);
    std::vector<double> terms(x.size());
    double total = 0;
    for (size_t i = 0; i < x.size(); ++i) total += terms[i] = f(x[i], t[i]);
    if (reduction == kReduceNone) vals = terms;
    else vals = {reduction == kReduceMean ? total / static_cast<double>(x.size()) : total};
  }
  return make_out(reduction == kReduceNone ? input->sizes.vec() : Shape{}, out, meta, vals);
}

// The gradients (self, target) of a reduced elementwise loss: grad (one per element for
// 'none', else the 0-d grad, divided by numel for 'mean') times d_self(x, t) / d_target(x, t).
template <typename DSelf, typename DTarget>
std::vector<Tensor> reduced_loss_backward(Node& n, const std::vector<Tensor>& g, DSelf&& d_self, DTarget&& d_target) {
  Tensor self = n.unpack("self"), target = n.unpack("target");
  const int64_t reduction = n.attr("reduction").i;
  const double norm = reduction == kReduceMean ? 1.0 / static_cast<double>(self->numel()) : 1.0;
  std::vector<Tensor> out(2);
  for (size_t i = 0; i < 2; ++i) {
    if (!n.next[i].fn) continue;
    const auto& m = n.input_meta[i];
    out[i] = kernels::ternary(self, target, g[0], m.dtype, [&, i](double x, double t, double gv) {
      return norm * gv * (i == 0 ? d_self(x, t) : d_target(x, t));
    }, "loss_backward");
  }
  return out;
}

// ---- smooth_l1_loss: smooth_l1_loss_backward(grad, self, target, reduction, beta) for self,
// its negative for target: d = x - t; |d| < beta ? d / beta : sign(d).
double smooth_l1_derivative(double d, double beta) {
  if (std::fabs(d) < beta) return d / beta;
  return d > 0 ? 1.0 : d < 0 ? -1.0 : 0.0;
}
std::vector<Tensor> smooth_l1_backward(Node& n, const std::vector<Tensor>& g) {
  const double beta = n.attr("beta").d;
  return reduced_loss_backward(
      n, g, [beta](double x, double t) { return smooth_l1_derivative(x - t, beta); },
      [beta](double x, double t) { return -smooth_l1_derivative(x - t, beta); });
}

// ---- binary_cross_entropy: self: binary_cross_entropy_backward = grad * (x - t) /
// max((1 - x) x, EPSILON 1e-12); target: binary_cross_entropy_target_backward =
// grad * -logit(x) (each / numel for 'mean').
std::vector<Tensor> bce_backward(Node& n, const std::vector<Tensor>& g) {
  return reduced_loss_backward(
      n, g, [](double x, double t) { return (x - t) / std::max((1 - x) * x, 1e-12); },
      [](double x, double) { return std::log1p(-x) - std::log(x); });
}

// ---- binary_cross_entropy_with_logits (no weights): self: grad * (sigmoid(x) - t);
// target: grad * -x (each / numel for 'mean').
std::vector<Tensor> bce_logits_backward(Node& n, const std::vector<Tensor>& g) {
  return reduced_loss_backward(
      n, g, [](double x, double t) { return 1.0 / (1.0 + std::exp(-x)) - t; }, [](double x, double) { return -x; });
}

Shared<Node> record_loss(const char* name, autograd::BackwardFn fn, const Tensor& r, const Tensor& input,
                         const Tensor& target) {
  auto node = make_node(name, fn, {input, target});
  set_history(r, node);
  return node;
}

}  // namespace

Tensor l1_loss(const Tensor& input, const Tensor& target, int64_t reduction) {
  // at::l1_loss is composite: (input - target).abs() then mean() / sum() (measured:
  // MeanBackward0 over AbsBackward0 over SubBackward0).
  require_same_shape(input, target, "l1_loss");
  Tensor d = ops::abs(sub(input, target, Value::integer(1)));
  if (reduction == kReduceNone) return d;
  return reduction == kReduceMean ? mean(d, std::nullopt, false) : sum(d, std::nullopt, false);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, int64_t reduction, double beta) {
  OpScope scope("smooth_l1_loss");
  require_host(input);
  require_host(target);
  require_same_shape(input, target, "smooth_l1_loss");
  require_kernel_dtype(input, "smooth_l1_cpu", false);
  Tensor r = reduced_loss(input, target, reduction, [beta](double x, double t) {
    const double z = std::fabs(x - t);
    return z < beta ? 0.5 * z * z / beta : z - 0.5 * beta;
  });
  if (needs_grad({&input, &target})) {
    auto node = record_loss("SmoothL1LossBackward0", smooth_l1_backward, r, input, target);
    node->save_attr("beta", AttrValue::real(beta));
    node->save_attr("reduction", AttrValue::integer(reduction));
    node->save_input("self", input);
    node->save_input("target", target);
  }
  return r;
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, int64_t reduction) {
  OpScope scope("binary_cross_entropy");
  require_host(input);
  require_host(target);
  if (input->sizes != target->sizes)  // measured: F.binary_cross_entropy refuses, it does not broadcast
    throw ScenarioError("shape_mismatch", "Using a target size (" + shape_str(target->sizes) +
                                              ") that is different to the input size (" + shape_str(input->sizes) +
                                              ") is deprecated. Please ensure they have the same size.");
  require_kernel_dtype(input, "binary_cross_entropy", false);
  // -(t log(x) + (1 - t) log(1 - x)), each log clamped at -100 (measured: bce(0, 1) is 100).
  Tensor r = reduced_loss(input, target, reduction, [](double x, double t) {
    return -(t * std::max(std::log(x), -100.0) + (1 - t) * std::max(std::log1p(-x), -100.0));
  });
  if (needs_grad({&input, &target})) {
    auto node = record_loss("BinaryCrossEntropyBackward0", bce_backward, r, input, target);
    node->save_attr("reduction", AttrValue::integer(reduction));
    node->save_input("self", input);
    node->save_input("target", target);
    node->save_input("weight", nullptr);
  }
  return r;
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, int64_t reduction) {
  OpScope scope("binary_cross_entropy_with_logits");
  require_host(input);
  require_host(target);
  if (input->sizes != target->sizes)
    throw ScenarioError("shape_mismatch", "Target size (" + shape_str(target->sizes) +
                                              ") must be the same as input size (" + shape_str(input->sizes) + ")");
  require_kernel_dtype(input, "binary_cross_entropy_with_logits", true);
  // (1 - t) x + m + log(exp(-m) + exp(-x - m)), m = max(-x, 0): the stable form of 1.13.
  Tensor r = reduced_loss(input, target, reduction, [](double x, double t) {
    const double m = std::max(-x, 0.0);
    return (1 - t) * x + m + std::log(std::exp(-m) + std::exp(-x - m));
  });
  if (needs_grad({&input, &target})) {
    auto node = record_loss("BinaryCrossEntropyWithLogitsBackward0", bce_logits_backward, r, input, target);
    node->save_input("pos_weight", nullptr);
    node->save_attr("reduction", AttrValue::integer(reduction));
    node->save_input("self", input);
    node->save_input("target", target);
    node->save_input("weight", nullptr);
  }
  return r;
}

Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  OpScope scope("one_hot");
  require_host(indices);
  if (indices->dtype() != DType::Int64) throw ScenarioError("type_error", "one_hot is only applicable to index tensor.");
  if (indices->is_meta()) unsupported("F.one_hot on the meta device (its size depends on the values)");
  const std::vector<double> v = to_values(indices);
  for (double e : v)
    if (e < 0) throw ScenarioError("index_out_of_range", "Class values must be non-negative.");
  if (num_classes == -1) {
    num_classes = 0;
    for (double e : v) num_classes = std::max(num_classes, static_cast<int64_t>(e) + 1);
  }
  Shape shape = indices->sizes.vec();
  shape.push_back(num_classes);
  std::vector<double> out(static_cast<size_t>(shape_numel(shape)), 0.0);
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] >= static_cast<double>(num_classes))
      throw ScenarioError("index_out_of_range", "Class values must be smaller than num_classes.");
    out[i * static_cast<size_t>(num_classes) + static_cast<size_t>(v[i])] = 1;
  }
  return make_out(shape, DType::Int64, false, out);
}

Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction) {
  // at::kl_div (log_target False): xlogy(target, target) - target * input, then the
  // reduction (measured: SubBackward0 with edges (None, MulBackward0)); F.kl_div's
  // 'batchmean' sums and divides by input.size(0), a Python int (DivBackward0 saving a 0-d
  // int64 other). A target that requires grad would add XlogyBackward0: not mirrored.
  if (target->requires_grad()) unsupported("F.kl_div with a target that requires grad (XlogyBackward0)");
  require_same_shape(input, target, "kl_div");
  Tensor xlogy;
  {
    OpScope scope("xlogy");
    require_host(target);
    xlogy = kernels::unary(target, target->dtype(), [](double t) {
      return std::isnan(t) ? t : t == 0 ? 0.0 : t * std::log(t);
    });
  }
  Tensor terms = sub(xlogy, mul(target, input), Value::integer(1));
  if (reduction == "none") return terms;
  if (reduction == "sum") return sum(terms, std::nullopt, false);
  if (reduction == "mean") return mean(terms, std::nullopt, false);
  if (reduction != "batchmean") throw ScenarioError("type_error", reduction + " is not a valid value for reduction");
  Tensor total = sum(terms, std::nullopt, false);
  return input->dim() == 0 ? total : div(total, wrap_number(Value::integer(input->sizes[0])));
}

}  // namespace agtrace::ops
