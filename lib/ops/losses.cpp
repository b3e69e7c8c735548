// Losses: mse_loss, nll_loss and cross_entropy, each with its node, saved values and
// backward formula side by side (derivatives.yaml of PyTorch 1.13; node names, saved
// attributes, total_weight values and error wording measured with /usr/bin/python3 and
// torch 1.13, see shared/oracle/SUMMARY.md rows mse_loss, nll_loss, cross_entropy).
#include <cmath>

#include "ops/activations.hpp"
#include "ops/common.hpp"
#include "ops/double_backward.hpp"
#include "ops/ops.hpp"

namespace agtrace::ops {

using namespace detail;
using namespace act_detail;
using autograd::make_node;
using autograd::set_history;

namespace {

constexpr int64_t kNone = 0, kMean = 1, kSum = 2;  // at::Reduction

std::string shape_list(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// ================================================================ mse_loss

// derivatives.yaml:
//   self:   mse_loss_backward(grad, self, target, reduction)
//   target: mse_loss_backward(grad, target, self, reduction)
// mse_loss_backward(grad, a, b, r) = (r == Mean ? 2 / numel : 2) * (a - b) * grad
std::vector<Tensor> mse_loss_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self"), target = n.unpack("target");
  const bool on_device = kernels::device::any_on_device({&g[0], &self, &target});
  // The CPU backward kernel has no Half (measured: "mse_backward_cpu_out" not implemented for
  // 'Half'); the CUDA one has.
  if (g[0]->dtype() == DType::Float16 && !g[0]->is_meta() && !on_device)
    not_implemented("mse_backward_cpu_out", DType::Float16);
  // The backward kernel takes no promotion: grad, self and target must share the dtype of
  // the gradient it writes (measured: float32 self with float64 or int64 target raises
  // "Found dtype Double but expected Float" at backward, though the forward ran).
  if (self->dtype() != target->dtype()) {
    const bool self_first = static_cast<bool>(n.next[0].fn);
    const DType expected = self_first ? self->dtype() : target->dtype();
    const DType found = self_first ? target->dtype() : self->dtype();
    ScenarioError e("dtype_mismatch", "Found dtype " + scalar_name(found) + " but expected " + scalar_name(expected));
    e.facts = {{"op", "mse_loss_backward"}, {"dtype", dtype_name(found)}};
    throw e;
  }
  const int64_t reduction = n.attr("reduction").i;
  const double norm = reduction == kMean ? 2.0 / static_cast<double>(self->numel()) : 2.0;
  Tensor gs, gt;
  for (size_t i = 0; i < 2; ++i) {
    if (!n.next[i].fn) continue;
    const Tensor& a = i == 0 ? self : target;
    const Tensor& b = i == 0 ? target : self;
    // One kernel, one new storage: norm * (a - b) * grad (a 0-d grad broadcasts).
    if (on_device) {
      (i == 0 ? gs : gt) = kernels::device::mse_loss_backward(g[0], a, b, norm, n.input_meta[i].dtype);
      continue;
    }
    (i == 0 ? gs : gt) = kernels::ternary(a, b, g[0], n.input_meta[i].dtype,
                                          [norm](double x, double y, double gv) { return norm * (x - y) * gv; },
                                          "mse_loss_backward");
  }
  return {gs, gt};
}

// ================================================================ nll_loss

// nll_loss_backward(grad, self, target, weight, reduction, ignore_index, total_weight):
// zeros like self, with -weight[t] * grad (divided by total_weight for Mean; grad[i] per
// sample for None with a batch) at [i, t] for each sample whose target is not ignored.
std::vector<Tensor> nll_loss_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self"), target = n.unpack("target"), total_weight = n.unpack("total_weight");
  Tensor weight = n.unpack("weight");
  const auto& m = n.input_meta[0];
  if (g[0]->is_meta()) return {empty_tensor(m.sizes, m.dtype, true)};
  const int64_t reduction = n.attr("reduction").i;
  const int64_t ignore_index = n.attr("ignore_index").i;
  if (kernels::device::any_on_device({&g[0], &target}))  // gather/scatter kernels, one new storage
    return {kernels::device::nll_loss_backward(g[0], m.sizes, m.dtype, target, weight, total_weight, reduction,
                                               ignore_index)};
  const bool batched = m.sizes.size() == 2;
  const int64_t classes = m.sizes.back();
  std::vector<double> tv = to_values(target), gv = to_values(g[0]);
  std::vector<double> wv = weight ? to_values(weight) : std::vector<double>{};
  const double tw = item(total_weight);
  std::vector<double> out(static_cast<size_t>(shape_numel(m.sizes)), 0.0);
  for (size_t i = 0; i < tv.size(); ++i) {
    const int64_t t = static_cast<int64_t>(tv[i]);
    if (t == ignore_index) continue;
    const double w = weight ? wv[static_cast<size_t>(t)] : 1.0;
    double gi = (reduction == kNone && batched) ? gv[i] : gv[0];
    if (reduction == kMean) gi /= tw;
    out[i * static_cast<size_t>(classes) + static_cast<size_t>(t)] = -w * gi;
  }
  return {make_out(m.sizes, m.dtype, false, out)};
}

// ---- create_graph=True (derivatives.yaml, torch 1.13): the dedicated backward ops
// mse_loss_backward and nll_loss_backward record MseLossBackwardBackward0 and
// NllLossBackwardBackward0 (measured). Third order through them is not mirrored (raises
// unsupported naming the node).

// MseLossBackwardBackward0, edges (grad_output, self, target):
//   grad_output: mse_loss_double_backward_grad_output = 2 (self - target) grad, summed
//                (and / numel for mean) unless reduction is none;
//   self: mse_loss_double_backward(grad * grad_output, self, reduction) = norm grad go;
//   target: minus that.
std::vector<Tensor> mse_bb_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor go = n.unpack("grad_output"), self = n.unpack("self"), target = n.unpack("target");
  const int64_t reduction = n.attr("reduction").i;
  const double norm = reduction == kMean ? 2.0 / static_cast<double>(self->numel()) : 2.0;
  Tensor a, b, c;
  if (kernels::device::any_on_device({&g[0], &go, &self, &target})) {  // the same formulas from device kernels
    if (n.next[0].fn)
      a = reduction == kNone
              ? kernels::device::mse_loss_backward(g[0], self, target, 2.0, n.input_meta[0].dtype)
              : kernels::device::mse_bb_reduced(g[0], self, target, norm, n.input_meta[0].dtype);
    for (size_t i = 1; i < 3; ++i) {
      if (!n.next[i].fn) continue;
      Tensor r = kernels::device::binary(cuda::pw::BinaryOp::Mul, g[0], go, n.input_meta[i].dtype, "mul");
      kernels::device::unary_inplace(cuda::pw::UnaryOp::MulScalar, r, (i == 1 ? 1.0 : -1.0) * norm);
      (i == 1 ? b : c) = r;
    }
    return {a, b, c};
  }
  if (n.next[0].fn) {
    if (reduction == kNone) {
      a = kernels::ternary(self, target, g[0], n.input_meta[0].dtype,
                           [](double x, double y, double gv) { return 2.0 * (x - y) * gv; }, "mul");
    } else {
      std::vector<double> x = to_values(self), y = to_values(target), gv = to_values(g[0]);
      double total = 0;
      for (size_t i = 0; i < x.size(); ++i) total += 2.0 * (x[i] - y[i]) * gv[i];
      if (reduction == kMean) total /= static_cast<double>(x.size());
      a = make_out({}, n.input_meta[0].dtype, g[0]->is_meta(), {total});
    }
  }
  for (size_t i = 1; i < 3; ++i) {
    if (!n.next[i].fn) continue;
    const double sign = i == 1 ? 1.0 : -1.0;
    (i == 1 ? b : c) = kernels::binary(g[0], go, n.input_meta[i].dtype,
                                       [norm, sign](double gv, double gov) { return sign * norm * gv * gov; }, "mul");
  }
  return {a, b, c};
}

// at::mse_loss_backward(go, a, b, reduction) = norm (a - b) go, recording
// MseLossBackwardBackward0 with edges (go, a, b), saving grad_output, reduction, self = a,
// target = b.
Tensor mse_loss_backward_op(const Tensor& go, const Tensor& a, const Tensor& b, int64_t reduction, DType out) {
  OpScope scope("mse_loss_backward");
  const double norm = reduction == kMean ? 2.0 / static_cast<double>(a->numel()) : 2.0;
  Tensor r = kernels::device::any_on_device({&go, &a, &b})
                 ? kernels::device::mse_loss_backward(go, a, b, norm, out)
                 : kernels::ternary(a, b, go, out,
                                    [norm](double x, double y, double gv) { return norm * (x - y) * gv; },
                                    "mse_loss_backward");
  if (needs_grad({&go, &a, &b})) {
    auto node = make_node("MseLossBackwardBackward0", mse_bb_backward, {go, a, b});
    node->save_input("grad_output", go);
    node->save_attr("reduction", AttrValue::integer(reduction));
    node->save_input("self", a);
    node->save_input("target", b);
    set_history(r, node);
  }
  return r;
}

// MseLossBackward0: self: mse_loss_backward(grad, self, target, reduction); target:
// mse_loss_backward(grad, target, self, reduction) (derivatives.yaml; measured
// MseLossBackwardBackward0 with edges (grad, self, target)).
std::vector<Tensor> mse_loss_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self"), target = n.unpack("target");
  const int64_t reduction = n.attr("reduction").i;
  Tensor gs, gt;
  if (n.should_compute_output(0)) gs = mse_loss_backward_op(g[0], self, target, reduction, n.input_meta[0].dtype);
  if (n.should_compute_output(1)) gt = mse_loss_backward_op(g[0], target, self, reduction, n.input_meta[1].dtype);
  return {gs, gt};
}

// NllLossBackwardBackward0, edges (grad_output, self): grad_output: nll_loss(grad, target,
// weight, reduction, ignore_index); self: zeros_like(grad).
std::vector<Tensor> nll_bb_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor a, b;
  if (n.next[0].fn) {
    autograd::GradModeGuard no_grad(false);
    a = nll_loss(g[0], n.unpack("target"), n.unpack("weight"), n.attr("reduction").i, n.attr("ignore_index").i);
  }
  if (n.next[1].fn) b = kernels::full(g[0]->sizes, 0.0, g[0]->dtype(), g[0]->is_meta());
  return {a, b};
}

// NllLossBackward0: nll_loss_backward(grad, self, target, weight, reduction, ignore_index,
// total_weight) (NllLossBackwardBackward0, measured edges (grad, self), saving
// ignore_index, reduction, target, weight).
std::vector<Tensor> nll_loss_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self");
  Tensor r = nll_loss_backward(n, g)[0];
  if (needs_grad({&g[0], &self})) {
    auto node = make_node("NllLossBackwardBackward0", nll_bb_backward, {g[0], self});
    node->save_attr("ignore_index", n.attr("ignore_index"));
    node->save_attr("reduction", n.attr("reduction"));
    node->save_input("target", n.unpack("target"));
    node->save_input("weight", n.unpack("weight"));
    set_history(r, node);
  }
  return {r};
}

}  // namespace

int64_t reduction_enum(const Value& reduction) {
  // torch.nn._reduction.get_enum; None is what the table passes for the default 'mean'.
  if (reduction.kind == Value::Kind::None) return kMean;
  if (reduction.kind == Value::Kind::Str) {
    if (reduction.s == "none") return kNone;
    if (reduction.s == "mean") return kMean;
    if (reduction.s == "sum") return kSum;
  }
  throw ScenarioError("type_error", print_form(reduction) + " is not a valid value for reduction");
}

Tensor mse_loss(const Tensor& input, const Tensor& target, int64_t reduction) {
  OpScope scope("mse_loss");
  if (input->sizes != target->sizes) {
    kernels::broadcast_shapes(input->sizes, target->sizes, "mse_loss");  // the size error first
    // F.mse_loss warns and runs on torch.broadcast_tensors(input, target), which puts
    // ExpandBackward0 nodes under the loss (measured); not mirrored.
    throw ScenarioError("unsupported", "mse_loss with input and target of different shapes (" +
                                           shape_list(input->sizes) + " and " + shape_list(target->sizes) +
                                           ", broadcast) is not supported");
  }
  // The kernel computes in the promoted dtype (measured: float32 input with float64 target
  // gives a float64 loss, no cast node); integer results and BFloat16 have no CPU kernel.
  const DType out = kernels::result_type(input, target);
  const bool on_device = kernels::device::any_on_device({&input, &target});
  if (!is_floating(out) || (out == DType::BFloat16 && !input->is_meta() && !on_device)) not_implemented("mse_cpu", out);
  const bool meta = input->is_meta() || target->is_meta();
  std::vector<double> vals;
  Shape shape = reduction == kNone ? input->sizes.vec() : Shape{};
  if (!meta && !on_device) {
    std::vector<double> x = to_values(input), y = to_values(target);
    std::vector<double> sq(x.size());
    double total = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double d = round_to_dtype(x[i] - y[i], out);
      sq[i] = d * d;
      total += sq[i];
    }
    if (reduction == kNone) vals = sq;
    else vals = {reduction == kMean ? total / static_cast<double>(x.size()) : total};
  }
  Tensor r = on_device ? kernels::device::mse_loss(input, target, reduction, out) : make_out(shape, out, meta, vals);
  if (needs_grad({&input, &target})) {
    // MseLossBackward0: edges (input, target); saves reduction (int: 1 for 'mean'), self and
    // target, whatever requires grad (SUMMARY section 3: the saved set never changes).
    auto node = make_node("MseLossBackward0", mse_loss_backward, {input, target});
    node->differentiable_backward = mse_loss_dbackward;
    set_history(r, node);
    node->save_attr("reduction", AttrValue::integer(reduction));
    node->save_input("self", input);
    node->save_input("target", target);
  }
  return r;
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t reduction,
                int64_t ignore_index) {
  OpScope scope("nll_loss");
  // at::nll_loss_nd: rank checks first.
  if (input->dim() < 1)
    throw ScenarioError("type_error", "Expected 1 or more dimensions (got " + std::to_string(input->dim()) + ")");
  if (input->dim() != 1) {
    const int64_t tb = target->dim() == 0 ? 0 : target->sizes[0];
    if (input->sizes[0] != tb)
      throw ScenarioError("shape_mismatch", "Expected input batch_size (" + std::to_string(input->sizes[0]) +
                                                ") to match target batch_size (" + std::to_string(tb) + ").");
  }
  if (input->dim() > 2)
    // PyTorch takes the nll_loss2d path (NllLoss2DBackward0 over views), not mirrored.
    throw ScenarioError("unsupported", "nll_loss / cross_entropy on " + std::to_string(input->dim()) +
                                           "-d input is not supported (only (C) and (N, C))");
  // nll_loss_forward's checks (meta function), then the kernel's dtype dispatch.
  if (target->dim() > 1)
    throw ScenarioError("shape_mismatch", "0D or 1D target tensor expected, multi-target not supported");
  const bool no_batch = input->dim() == 1 && target->dim() == 0;
  if (!no_batch && input->sizes[0] != (target->dim() == 0 ? 0 : target->sizes[0]))
    throw ScenarioError("shape_mismatch", "size mismatch (got input: " + shape_list(input->sizes) +
                                              ", target: " + shape_list(target->sizes) + ")");
  const int64_t classes = input->sizes.back();
  if (weight && (weight->dim() != 1 || weight->numel() != classes))
    throw ScenarioError("shape_mismatch", "weight tensor should be defined either for all " + std::to_string(classes) +
                                              " classes or no classes but got weight tensor of shape: " +
                                              shape_list(weight->sizes));
  if (weight && weight->requires_grad())
    throw ScenarioError("type_error", "The function 'nll_loss_forward' is not differentiable with respect to argument "
                                      "'weight'. This input cannot have requires_grad True.");
  require_kernel_dtype(input, "nll_loss_out_frame", false);
  if (target->dtype() != DType::Int64)
    throw ScenarioError("dtype_mismatch", "expected scalar type Long but found " + scalar_name(target->dtype()));
  if (weight && weight->dtype() != input->dtype())
    throw ScenarioError("dtype_mismatch", "expected scalar type " + scalar_name(input->dtype()) + " but found " +
                                              scalar_name(weight->dtype()));

  const bool meta = input->is_meta() || target->is_meta();
  // With a batch and reduction 'none' the loss is per sample and total_weight stays 0;
  // otherwise total_weight is the summed weight of the samples not ignored (measured:
  // 3.0 for 3 targets, 2.0 with one ignored, 0.0 for 'none', 1.0 for a (C) input with 'none').
  const bool per_sample = reduction == kNone && input->dim() == 2;
  Shape shape = per_sample ? Shape{input->sizes[0]} : Shape{};
  std::vector<double> vals;
  double total_weight = 0;
  const bool on_device = kernels::device::any_on_device({&input, &target});
  auto target_out_of_bounds = [&](int64_t t) {
    ScenarioError e("index_out_of_range", "Target " + std::to_string(t) + " is out of bounds.");
    e.facts = {{"op", "nll_loss"}, {"index", t}, {"size", classes}};
    return e;
  };
  kernels::device::NllLossResult dev;
  if (on_device) {
    // The targets checked on the host first (a synchronising copy), with the CPU's error:
    // PyTorch's CUDA kernel checks them on the device (CUDA_KERNEL_ASSERT), a device-side
    // assert that leaves nothing to report.
    if (!meta)
      for (double v : host_values(target)) {
        const auto t = static_cast<int64_t>(v);
        if (t != ignore_index && (t < 0 || t >= classes)) throw target_out_of_bounds(t);
      }
    // the loss and total_weight computed by the device, in the CPU's order
    dev = kernels::device::nll_loss(input, target, weight, reduction, ignore_index, needs_grad({&input}));
  }
  if (!meta && !on_device) {
    std::vector<double> x = to_values(input), tv = to_values(target);
    std::vector<double> wv = weight ? to_values(weight) : std::vector<double>{};
    double total = 0;
    for (size_t i = 0; i < tv.size(); ++i) {
      const int64_t t = static_cast<int64_t>(tv[i]);
      double li = 0;
      if (t != ignore_index) {
        if (t < 0 || t >= classes) throw target_out_of_bounds(t);
        const double w = weight ? wv[static_cast<size_t>(t)] : 1.0;
        li = -w * x[i * static_cast<size_t>(classes) + static_cast<size_t>(t)];
        total_weight += w;
      }
      if (per_sample) vals.push_back(li);
      else total += li;
    }
    if (per_sample) total_weight = 0;
    else vals = {reduction == kMean ? total / total_weight : total};  // 0/0 is NaN when all are ignored
  }
  Tensor r = on_device ? dev.loss : make_out(shape, input->dtype(), meta, vals);
  if (needs_grad({&input})) {
    // NllLossBackward0: one edge (target and weight are not differentiable). Saves
    // ignore_index (int64 read back as uint64: -100 is 18446744073709551516), reduction,
    // self, target (the same objects), total_weight (an op-internal 0-d tensor of the
    // input's dtype, a new storage) and weight (None when not given) (SUMMARY nll_loss).
    Tensor tw = on_device ? dev.total_weight : make_out({}, input->dtype(), meta, {total_weight});
    auto node = make_node("NllLossBackward0", nll_loss_backward, {input});
    node->differentiable_backward = nll_loss_dbackward;
    set_history(r, node);
    node->save_attr("ignore_index", AttrValue::integer(ignore_index, true));
    node->save_attr("reduction", AttrValue::integer(reduction));
    node->save_input("self", input);
    node->save_input("target", target);
    node->save_input("total_weight", tw);
    node->save_input("weight", weight);
  }
  return r;
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t reduction,
                     int64_t ignore_index) {
  OpScope scope("cross_entropy");
  if (input->sizes == target->sizes)
    // at::cross_entropy_loss treats same-shaped targets as class probabilities (another
    // decomposition: DivBackward1 over NegBackward0 ..., measured); not mirrored.
    throw ScenarioError("unsupported", "cross_entropy with class-probability targets is not supported");
  // at::cross_entropy_loss: nll_loss_nd(log_softmax(self, class_dim), target, ...), class_dim
  // 0 for a (C) input, else 1 (measured: LogSoftmaxBackward0 dim=1, and dim=0 for (C)).
  const int64_t class_dim = input->dim() == 1 ? 0 : 1;
  Tensor ls = log_softmax(input, class_dim);
  return nll_loss(ls, target, weight, reduction, ignore_index);
}

}  // namespace agtrace::ops
