// Op-table fragment: see table.hpp. Neural-network layers (lib/ops/nn.cpp): the Python
// signatures of torch.nn.functional 1.13, and the argument parsing PyTorch's Python
// layer and argument parser do before the op runs (ints expanded to pairs, stride=None
// becoming [], padding strings, padding_idx normalisation).
#include <optional>

#include "errors.hpp"
#include "ops/nn.hpp"
#include "ops/table.hpp"
#include "ops/table_util.hpp"

namespace agtrace::ops {

namespace {

// An optional tensor argument (None -> null).
Tensor optional_tensor(const Args& a, const std::string& name) {
  const Value& v = a.get(name);
  if (v.kind == Value::Kind::None) return nullptr;
  return a.tensor(name);
}

[[noreturn]] void not_int_list(const Args& a, const std::string& name, const Value& v) {
  type_error(short_fn(a.fn) + "(): argument '" + name + "' must be tuple of ints, not " + type_name(v));
}

// An `int[2]` parameter as Python's argument parser reads it: an int becomes [v, v]
// (measured: padding=1 is saved as (1, 1)); a tuple or list of ints is kept as written
// (padding=(1,) is saved as (1,)). `int_allowed` is false for `int[]` parameters
// (layer_norm's normalized_shape=3 is a TypeError, measured).
std::vector<int64_t> int_list(const Args& a, const std::string& name, bool int_allowed = true) {
  const Value& v = a.get(name);
  if (v.kind == Value::Kind::Int && int_allowed) return {v.i, v.i};
  if (v.kind == Value::Kind::Size) return std::vector<int64_t>(v.size.begin(), v.size.end());
  if (v.kind != Value::Kind::Tuple && v.kind != Value::Kind::List) not_int_list(a, name, v);
  std::vector<int64_t> out;
  for (const Value& item : v.items) {
    if (item.kind != Value::Kind::Int) not_int_list(a, name, v);
    out.push_back(item.i);
  }
  return out;
}

Value impl_layer_norm(Args& a, Runtime&) {
  return T(layer_norm(a.tensor("input"), int_list(a, "normalized_shape", false), optional_tensor(a, "weight"),
                      optional_tensor(a, "bias"), a.number("eps")));
}

Value impl_batch_norm(Args& a, Runtime&) {
  return T(batch_norm(a.tensor("input"), optional_tensor(a, "running_mean"), optional_tensor(a, "running_var"),
                      optional_tensor(a, "weight"), optional_tensor(a, "bias"), a.flag("training"),
                      a.number("momentum"), a.number("eps")));
}

Value impl_dropout(Args& a, Runtime& rt) {
  Tensor x = a.tensor("input");
  const Value& p = a.get("p");
  const double pv = a.number("p");
  // F.dropout checks p in Python before anything else, printing it as Python does.
  check_dropout_probability(pv, p.kind == Value::Kind::Float ? float_repr(p.f) : std::to_string(
                                                                                     static_cast<int64_t>(pv)));
  // dropout(eval) and the in-place form give back the very input object.
  return T(dropout(x, pv, a.flag("training"), a.flag("inplace"), rt.generator()));
}

Value impl_embedding(Args& a, Runtime&) {
  if (a.given("max_norm"))
    throw ScenarioError("unsupported", "embedding(max_norm=...) renormalises the weight in place; not supported");
  if (a.flag("sparse")) throw ScenarioError("unsupported", "embedding(sparse=True): sparse gradients are not supported");
  std::optional<int64_t> padding_idx;
  if (a.given("padding_idx")) padding_idx = a.integer("padding_idx");
  return T(embedding(a.tensor("input"), a.tensor("weight"), padding_idx, a.flag("scale_grad_by_freq"),
                     a.flag("sparse")));
}

Value impl_conv2d(Args& a, Runtime&) {
  Tensor input = a.tensor("input"), weight = a.tensor("weight");
  Tensor bias = optional_tensor(a, "bias");
  Conv2dArgs c;
  c.stride = int_list(a, "stride");
  c.dilation = int_list(a, "dilation");
  c.groups = a.integer("groups");
  const Value& padding = a.get("padding");
  if (padding.kind == Value::Kind::Str) return T(conv2d(input, weight, bias, conv2d_padding_mode(padding.s, input, weight, c)));
  c.padding = int_list(a, "padding");
  return T(conv2d(input, weight, bias, c));
}

// F.conv1d's int arguments become one-entry lists (its IntArrayRef[1] parameters).
std::vector<int64_t> list_1d(const Args& a, const std::string& name) {
  const Value& v = a.get(name);
  if (v.kind == Value::Kind::Int) return {v.i};
  return int_list(a, name);
}

Value impl_conv1d(Args& a, Runtime&) {
  Conv2dArgs c;
  c.stride = list_1d(a, "stride");
  c.dilation = list_1d(a, "dilation");
  c.output_padding = {0};
  c.groups = a.integer("groups");
  const Value& padding = a.get("padding");
  if (padding.kind == Value::Kind::Str)
    return T(conv1d(a.tensor("input"), a.tensor("weight"), optional_tensor(a, "bias"), c, padding.s));
  c.padding = list_1d(a, "padding");
  return T(conv1d(a.tensor("input"), a.tensor("weight"), optional_tensor(a, "bias"), c));
}

Value impl_max_pool2d(Args& a, Runtime&) {
  // F.max_pool2d: stride=None becomes an empty list, which the node keeps as ().
  std::vector<int64_t> stride = a.given("stride") ? int_list(a, "stride") : std::vector<int64_t>{};
  MaxPool2dResult r = max_pool2d(a.tensor("input"), int_list(a, "kernel_size"), stride, int_list(a, "padding"),
                                 int_list(a, "dilation"), a.flag("ceil_mode"));
  if (a.flag("return_indices")) return Value::tuple({T(r.output), T(r.indices)});
  return T(r.output);
}

}  // namespace

std::vector<OpEntry> nn_ops() {
  return {
      {"layer_norm", {"F.layer_norm"}, "(input, normalized_shape, weight=None, bias=None, eps=0.00001)", "nn",
       "NativeLayerNormBackward0",
       "bias, input, weight (same objects; None when absent), normalized_shape, result1 = mean and result2 = rstd "
       "(new tensors of shape [..., 1]; bfloat16 for a bfloat16 input on the CPU, float32 for float16 and "
       "bfloat16 on cuda and meta); edges (input, weight|None, bias|None)",
       impl_layer_norm, {}},
      {"batch_norm", {"F.batch_norm"},
       "(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=0.00001)", "nn",
       "NativeBatchNormBackward0",
       "eps, input, result1 = batch mean and result2 = 1/sqrt(biased var + eps) ([C]; [0] in eval), running_mean, "
       "running_var, weight (same objects), training; training updates the running buffers in place (unbiased "
       "variance, no version bump)",
       impl_batch_norm, {}},
      {"dropout", {"F.dropout"}, "(input, p=0.5, training=True, inplace=False)", "nn",
       "MulBackward0 (CPU) / NativeDropoutBackward0 (cuda)",
       "CPU: other = the mask scaled by 1/(1-p) (new tensor, version 2), self None; cuda with 0 < p < 1 "
       "(at::native_dropout): p and result1 = a bool mask; eval mode or p=0 return the input itself. Mask: one "
       "uniform01() per element of the run-wide generator, kept when u >= p, on both devices",
       impl_dropout, {}},
      {"embedding", {"F.embedding"},
       "(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False)", "nn",
       "EmbeddingBackward0",
       "indices and weight (same objects), padding_idx (-1 reads as 2**64-1), scale_grad_by_freq, sparse; one edge "
       "(weight)",
       impl_embedding, {}},
      {"conv2d", {"F.conv2d", "torch.conv2d"}, "(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1)",
       "nn", "ConvolutionBackward0",
       "input and weight (same objects) whatever requires grad, bias_sym_sizes_opt, stride, padding, dilation, "
       "groups, transposed, output_padding; edges (input, weight, bias|None)",
       impl_conv2d, {}},
      {"conv1d", {"F.conv1d", "torch.conv1d"}, "(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1)",
       "nn", "ConvolutionBackward0",
       "as conv2d, the lists of one entry (padding (1,)); a 2-D (unbatched) input adds UnsqueezeBackward0 before "
       "and SqueezeBackward1 (dim 0) after, the saved input being the [1, C, L] view; no cuda route",
       impl_conv1d, {}},
      {"max_pool2d", {"F.max_pool2d"},
       "(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False)", "nn",
       "MaxPool2DWithIndicesBackward0",
       "self (same object), result1 = int64 indices (flat within each H*W plane), kernel_size, stride (() when not "
       "given), padding, dilation, ceil_mode",
       impl_max_pool2d, {}},
  };
}

}  // namespace agtrace::ops
