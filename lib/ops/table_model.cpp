// Op-table fragment: see table.hpp. The layers of lib/ops/model_ops.cpp with the argument
// handling torch.nn.functional 1.13 does in Python before the ATen call: adaptive pooling's
// None entries, interpolate's size / scale_factor / recompute_scale_factor rules and its
// dispatch on mode and rank, group_norm's batch-size check (in model_ops.cpp).
#include <cmath>
#include <optional>

#include "errors.hpp"
#include "ops/model_ops.hpp"
#include "ops/table.hpp"
#include "ops/table_util.hpp"

namespace agtrace::ops {

namespace {

[[noreturn]] void unsupported_call(const std::string& what) {
  throw ScenarioError("unsupported", what + " is not supported");
}

Tensor optional_tensor_arg(const Args& a, const std::string& name) {
  return a.get(name).kind == Value::Kind::None ? nullptr : a.tensor(name);
}

// An int[N] parameter as the argument parser reads it: an int becomes N copies, a tuple or
// list of ints is kept as written (the node saves it so: measured, kernel_size=2 reads back
// as (2, 2), padding=(1,) as (1,)).
std::vector<int64_t> int_array(const Args& a, const std::string& name, size_t copies) {
  const Value& v = a.get(name);
  if (v.kind == Value::Kind::Int) return std::vector<int64_t>(copies, v.i);
  if (v.kind == Value::Kind::Size) return std::vector<int64_t>(v.size.begin(), v.size.end());
  std::vector<int64_t> out;
  if (v.kind == Value::Kind::Tuple || v.kind == Value::Kind::List)
    for (const Value& item : v.items)
      if (item.kind == Value::Kind::Int) out.push_back(item.i);
  if (out.size() != v.items.size() || (v.kind != Value::Kind::Tuple && v.kind != Value::Kind::List))
    type_error(short_fn(a.fn) + "(): argument '" + name + "' must be tuple of ints, not " + type_name(v));
  return out;
}

// F.adaptive_avg_pool2d's _list_with_default: an int is passed on (the parser makes it a
// pair); a sequence's None entries take the input's size at that position.
std::vector<int64_t> adaptive_output_size(const Args& a, const Tensor& input) {
  const Value& v = a.get("output_size");
  if (v.kind == Value::Kind::Int) return {v.i, v.i};
  if (v.kind != Value::Kind::Tuple && v.kind != Value::Kind::List)
    type_error("object of type '" + type_name(v) + "' has no len()");
  const size_t n = v.items.size();
  if (static_cast<size_t>(input->dim()) <= n)
    type_error("Input dimension should be at least " + std::to_string(n + 1));
  std::vector<int64_t> out;
  for (size_t i = 0; i < n; ++i) {
    const Value& item = v.items[i];
    if (item.kind == Value::Kind::None) out.push_back(input->sizes[input->sizes.size() - n + i]);
    else if (item.kind == Value::Kind::Int) out.push_back(item.i);
    else unsupported_call("adaptive_avg_pool2d(output_size=" + type_name(item) + " entry)");
  }
  return out;
}

Value impl_adaptive_avg_pool2d(Args& a, Runtime&) {
  Tensor x = a.tensor("input");
  return T(adaptive_avg_pool2d(x, adaptive_output_size(a, x)));
}

Value impl_adaptive_max_pool2d(Args& a, Runtime&) {
  Tensor x = a.tensor("input");
  auto [out, indices] = adaptive_max_pool2d(x, adaptive_output_size(a, x));
  if (a.flag("return_indices")) return Value::tuple({T(out), T(indices)});
  return T(out);
}

Value impl_adaptive_avg_pool1d(Args& a, Runtime&) {
  return T(adaptive_avg_pool1d(a.tensor("input"), int_array(a, "output_size", 1)));
}

std::optional<int64_t> divisor_override_arg(const Args& a) {
  const Value& d = a.get("divisor_override");
  if (d.kind == Value::Kind::None) return std::nullopt;
  if (d.kind != Value::Kind::Int)
    type_error("avg_pool2d(): argument 'divisor_override' must be int, not " + type_name(d));
  return d.i;
}

Value impl_avg_pool2d(Args& a, Runtime&) {
  AvgPool2dArgs p;
  p.kernel_size = int_array(a, "kernel_size", 2);
  // stride=None becomes an empty list, which the node keeps as () (measured).
  if (a.given("stride")) p.stride = int_array(a, "stride", 2);
  p.padding = int_array(a, "padding", 2);
  p.ceil_mode = a.flag("ceil_mode");
  p.count_include_pad = a.flag("count_include_pad");
  p.divisor_override = divisor_override_arg(a);
  return T(avg_pool2d(a.tensor("input"), p));
}

Value impl_avg_pool1d(Args& a, Runtime&) {
  const std::vector<int64_t> stride = a.given("stride") ? int_array(a, "stride", 1) : std::vector<int64_t>{};
  return T(avg_pool1d(a.tensor("input"), int_array(a, "kernel_size", 1), stride, int_array(a, "padding", 1),
                      a.flag("ceil_mode"), a.flag("count_include_pad")));
}

Value impl_group_norm(Args& a, Runtime&) {
  return T(group_norm(a.tensor("input"), a.integer("num_groups"), optional_tensor_arg(a, "weight"),
                      optional_tensor_arg(a, "bias"), a.number("eps")));
}

Value impl_multi_head_attention_forward(Args& a, Runtime& rt) {
  MhaArgs m;
  m.query = a.tensor("query");
  m.key = a.tensor("key");
  m.value = a.tensor("value");
  m.embed_dim_to_check = a.integer("embed_dim_to_check");
  m.num_heads = a.integer("num_heads");
  m.in_proj_weight = optional_tensor_arg(a, "in_proj_weight");
  m.in_proj_bias = optional_tensor_arg(a, "in_proj_bias");
  m.bias_k = optional_tensor_arg(a, "bias_k");
  m.bias_v = optional_tensor_arg(a, "bias_v");
  m.add_zero_attn = a.flag("add_zero_attn");
  m.dropout_p = a.number("dropout_p");
  m.out_proj_weight = a.tensor("out_proj_weight");
  m.out_proj_bias = optional_tensor_arg(a, "out_proj_bias");
  m.training = a.flag("training");
  m.key_padding_mask = optional_tensor_arg(a, "key_padding_mask");
  m.need_weights = a.flag("need_weights");
  m.attn_mask = optional_tensor_arg(a, "attn_mask");
  m.use_separate_proj_weight = a.flag("use_separate_proj_weight");
  m.q_proj_weight = optional_tensor_arg(a, "q_proj_weight");
  m.k_proj_weight = optional_tensor_arg(a, "k_proj_weight");
  m.v_proj_weight = optional_tensor_arg(a, "v_proj_weight");
  m.static_k = optional_tensor_arg(a, "static_k");
  m.static_v = optional_tensor_arg(a, "static_v");
  m.average_attn_weights = a.flag("average_attn_weights");
  auto [out, weights] = multi_head_attention_forward(m, rt.generator());
  return Value::tuple({T(out), weights ? T(weights) : Value::none()});
}

Value impl_type_as(Args& a, Runtime&) {
  const Value& other = a.get("other");
  if (other.kind != Value::Kind::Tensor)
    type_error("type_as(): argument 'other' (position 1) must be Tensor, not " + type_name(other));
  return T(type_as(a.tensor("self"), other.t));
}

std::string spatial_list(const Tensor& x) {
  return shape_str(Shape(x->sizes.begin() + 2, x->sizes.end()));
}

// A Python tuple or list as Python prints it: (4, 9) / [4, 9], floats as repr.
std::string python_repr(const Value& v) {
  if (v.kind == Value::Kind::Int) return std::to_string(v.i);
  if (v.kind == Value::Kind::Float) return float_repr(v.f);
  if (v.kind != Value::Kind::Tuple && v.kind != Value::Kind::List) return type_name(v);
  std::string out = v.kind == Value::Kind::Tuple ? "(" : "[";
  for (size_t i = 0; i < v.items.size(); ++i) out += (i ? ", " : "") + python_repr(v.items[i]);
  if (v.kind == Value::Kind::Tuple && v.items.size() == 1) out += ",";
  return out + (v.kind == Value::Kind::Tuple ? ")" : "]");
}

// F.interpolate (torch/nn/functional.py, 1.13), its checks in order, then the upsample call
// for nearest (3-D, 4-D input) and bilinear (4-D); other modes and ranks are unsupported.
Value impl_interpolate(Args& a, Runtime&) {
  Tensor x = a.tensor("input");
  // The signature's default mode='nearest' is written None (table string defaults are).
  const Value& mode_v = a.get("mode");
  if (mode_v.kind != Value::Kind::Str && mode_v.kind != Value::Kind::None)
    unsupported_call("interpolate(mode=" + type_name(mode_v) + ")");
  const std::string mode = mode_v.kind == Value::Kind::Str ? mode_v.s : "nearest";
  const bool nearest_like = mode == "nearest" || mode == "area" || mode == "nearest-exact";
  bool align_corners = false;
  if (nearest_like && a.given("align_corners"))
    type_error("align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | "
               "trilinear");
  if (!nearest_like && a.given("align_corners")) align_corners = a.flag("align_corners");
  const int64_t dim = x->dim() - 2;
  const Value& size = a.get("size");
  const Value& scale = a.get("scale_factor");
  std::optional<std::vector<int64_t>> output_size;
  std::optional<std::vector<double>> scale_factors;
  // F.interpolate's size / scale_factor: a sequence of one entry per spatial dim (else the
  // ValueError naming `what`), or one value repeated for each.
  auto per_dim = [&](const Value& v, const std::string& what, const std::string& format) {
    const bool sequence = v.kind == Value::Kind::Tuple || v.kind == Value::Kind::List;
    if (sequence && static_cast<int64_t>(v.items.size()) != dim)
      type_error("Input and " + what + " must have the same number of spatial dimensions, but got input with spatial "
                 "dimensions of " + spatial_list(x) + " and " + (what == "output" ? "output size" : what + " of shape") +
                 " " + python_repr(v) + ". Please provide input tensor in (N, C, d1, d2, ...,dK) format and " + format +
                 " format.");
    return sequence ? v.items : std::vector<Value>(static_cast<size_t>(std::max<int64_t>(dim, 0)), v);
  };
  if (size.kind != Value::Kind::None && scale.kind != Value::Kind::None) {
    type_error("only one of size or scale_factor should be defined");
  } else if (size.kind != Value::Kind::None) {
    std::vector<int64_t> sizes;
    for (const Value& item : per_dim(size, "output", "output size in (o1, o2, ...,oK)")) {
      if (item.kind != Value::Kind::Int) unsupported_call("interpolate(size=" + python_repr(size) + ")");
      sizes.push_back(item.i);
    }
    output_size = sizes;
  } else if (scale.kind != Value::Kind::None) {
    std::vector<double> scales;
    for (const Value& item : per_dim(scale, "scale_factor", "scale_factor in (s1, s2, ...,sK)")) {
      if (!item.is_number() || item.kind == Value::Kind::Bool)
        unsupported_call("interpolate(scale_factor=" + python_repr(scale) + ")");
      scales.push_back(item.kind == Value::Kind::Int ? static_cast<double>(item.i) : item.f);
    }
    scale_factors = scales;
  } else {
    type_error("either size or scale_factor should be defined");
  }
  const Value& recompute = a.get("recompute_scale_factor");
  const bool recompute_on = recompute.kind != Value::Kind::None && a.flag("recompute_scale_factor");
  if (recompute_on && output_size) type_error("recompute_scale_factor is not meaningful with an explicit size.");
  if (recompute_on || (mode == "area" && !output_size)) {
    // The size is computed here and the scale factors dropped (the kernel then uses in / out).
    std::vector<int64_t> sizes;
    for (int64_t i = 0; i < dim; ++i)
      sizes.push_back(static_cast<int64_t>(std::floor(static_cast<double>(x->sizes[static_cast<size_t>(i + 2)]) *
                                                      (*scale_factors)[static_cast<size_t>(i)])));
    output_size = sizes;
    scale_factors.reset();
  }
  if (a.flag("antialias") && !((mode == "bilinear" || mode == "bicubic") && x->dim() == 4))
    type_error("Anti-alias option is only supported for bilinear and bicubic modes");
  if (a.flag("antialias")) unsupported_call("interpolate(antialias=True)");
  if (mode == "nearest" && (x->dim() == 3 || x->dim() == 4)) return T(upsample_nearest(x, output_size, scale_factors));
  if (mode == "bilinear" && x->dim() == 4)
    return T(upsample_bilinear2d(x, output_size, align_corners, scale_factors));
  unsupported_call("interpolate(mode='" + mode + "') of a " + std::to_string(x->dim()) + "-D input");
}

}  // namespace

std::vector<OpEntry> model_ops() {
  return {
      {"adaptive_avg_pool2d", {"F.adaptive_avg_pool2d"}, "(input, output_size)", "nn",
       "AdaptiveAvgPool2DBackward0 / MeanBackward1 (1x1 output)",
       "self (same object); a 1x1 output is input.mean((-1, -2), keepdim=True): MeanBackward1 saving dim, keepdim, "
       "self, self_sym_sizes",
       impl_adaptive_avg_pool2d, {}},
      {"adaptive_max_pool2d", {"F.adaptive_max_pool2d"}, "(input, output_size, return_indices=False)", "nn",
       "AdaptiveMaxPool2DBackward0",
       "result1 = the int64 indices (the returned object; flat within each H*W plane), self (same object)",
       impl_adaptive_max_pool2d, {}},
      {"adaptive_avg_pool1d", {"F.adaptive_avg_pool1d", "torch.adaptive_avg_pool1d"}, "(input, output_size)", "nn",
       "SqueezeBackward1 over AdaptiveAvgPool2DBackward0 (or MeanBackward1) over UnsqueezeBackward0",
       "the 2-D pool's saves on input.unsqueeze(-2) (not the input itself); SqueezeBackward1 saves dim, self_sizes",
       impl_adaptive_avg_pool1d, {}},
      {"avg_pool2d", {"F.avg_pool2d"},
       "(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None)",
       "nn", "AvgPool2DBackward0",
       "ceil_mode, count_include_pad, divisor_override (None when absent), kernel_size, padding, self (same object), "
       "stride (() when not given)",
       impl_avg_pool2d, {}},
      {"avg_pool1d", {"F.avg_pool1d", "torch.avg_pool1d"},
       "(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True)", "nn",
       "SqueezeBackward1 over AvgPool2DBackward0 over UnsqueezeBackward0",
       "AvgPool2DBackward0 of input.unsqueeze(-2) with kernel_size (1, k), stride (1, s), padding (0, p)",
       impl_avg_pool1d, {}},
      {"group_norm", {"F.group_norm"}, "(input, num_groups, weight=None, bias=None, eps=0.00001)", "nn",
       "NativeGroupNormBackward0",
       "C, HxW, N, eps, group, input (same object when contiguous, else a CloneBackward0 copy), result1 = mean and "
       "result2 = rstd ([N, group], saved outputs 1 and 2 of the node: requires_grad True), weight (None when absent; bias not saved); edges (input, "
       "weight|None, bias|None)",
       impl_group_norm, {}},
      {"multi_head_attention_forward", {"F.multi_head_attention_forward"},
       "(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias, bias_k, bias_v, "
       "add_zero_attn, dropout_p, out_proj_weight, out_proj_bias, training=True, key_padding_mask=None, "
       "need_weights=True, attn_mask=None, use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None, "
       "v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True)",
       "nn", "the nodes of its body: AddmmBackward0 / ViewBackward0 (linear), SplitBackward0 (chunk), "
       "TransposeBackward0, DivBackward0, BmmBackward0 or BaddbmmBackward0, SoftmaxBackward0, ...",
       "what each op of 1.13's Python body saves (nothing of its own); bias_k/bias_v, add_zero_attn, static_k/v "
       "and a bool attn_mask with key_padding_mask are unsupported",
       impl_multi_head_attention_forward, {}},
      {"type_as", {"Tensor.type_as"}, "(self, other)", "conversion", "ToCopyBackward0",
       "nothing; the very object when other has self's dtype and device",
       impl_type_as, {}},
      {"interpolate", {"F.interpolate"},
       "(input, size=None, scale_factor=None, mode=None, align_corners=None, recompute_scale_factor=None, "
       "antialias=False)",
       "nn", "UpsampleNearest1DBackward1 / UpsampleNearest2DBackward1 / UpsampleBilinear2DBackward1",
       "align_corners (bilinear), input_sym_sizes, output_size and scale_factors (one of them None, as passed); "
       "modes nearest (3-D, 4-D input; mode=None reads as 'nearest') and bilinear (4-D) only",
       impl_interpolate, {}},
  };
}

}  // namespace agtrace::ops
