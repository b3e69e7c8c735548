// Op-table fragment (see table.hpp): pointwise math, activations, reductions, selection
// and losses. The ops themselves are in activations.cpp and losses.cpp; this file maps
// PyTorch's Python signatures onto them, including the overload rules PyTorch's argument
// parser applies (measured with /usr/bin/python3 and torch 1.13).
//
// Table signatures can only default to None, bools and numbers, so a string default
// (reduction='mean', approximate='none', p='fro') is written None and read as that string.
// The interpreter fills defaults before an impl runs, so an explicit None cannot be told
// from an omitted argument; where PyTorch tells them apart (x.max(dim=None) raises,
// x.var(dim=None, correction=0) is valid while x.var(correction=0) raises) these impls
// follow the omitted-argument reading.
#include "ops/activations.hpp"
#include "ops/binary_more.hpp"
#include "ops/activations_inplace.hpp"
#include "ops/ops.hpp"
#include "ops/table.hpp"
#include "ops/table_util.hpp"

#include "errors.hpp"

namespace agtrace::ops {

namespace {

[[noreturn]] void unsupported(const std::string& what) { throw ScenarioError("unsupported", what); }

// ---------------------------------------------------------------- pointwise math

Value impl_abs(Args& a, Runtime&) { return T(abs(a.tensor("self"))); }
Value impl_sin(Args& a, Runtime&) { return T(sin(a.tensor("self"))); }
Value impl_cos(Args& a, Runtime&) { return T(cos(a.tensor("self"))); }
Value impl_rsqrt(Args& a, Runtime&) { return T(rsqrt(a.tensor("self"))); }

Value impl_clamp(Args& a, Runtime&) {
  for (const char* name : {"min", "max"}) {
    const Value& v = a.get(name);
    if (v.kind == Value::Kind::Tensor)
      unsupported("clamp with a tensor '" + std::string(name) + "' (ClampBackward0) is not supported; pass a number");
    if (v.kind != Value::Kind::None && !v.is_number())
      type_error("clamp(): argument '" + std::string(name) + "' must be Number, not " + type_name(v));
  }
  return T(clamp(a.tensor("self"), a.get("min"), a.get("max")));
}

// ---------------------------------------------------------------- activations

Value impl_leaky_relu(Args& a, Runtime&) {
  const Value& slope = a.get("negative_slope");
  if (!slope.is_number()) type_error("leaky_relu(): argument 'negative_slope' must be Number, not " + type_name(slope));
  Tensor x = a.tensor("input");
  if (!a.flag("inplace")) return T(leaky_relu(x, slope));
  leaky_relu_(x, slope);  // LeakyReluBackward1 saving the result (activations_inplace.cpp)
  return T(x);
}

Value impl_gelu(Args& a, Runtime&) {
  const Value& ap = a.get("approximate");
  if (ap.kind != Value::Kind::None && ap.kind != Value::Kind::Str)
    type_error("gelu(): argument 'approximate' must be str, not " + type_name(ap));
  return T(gelu(a.tensor("input"), ap.kind == Value::Kind::Str ? ap.s : "none"));
}

Value impl_silu(Args& a, Runtime&) {
  Tensor x = a.tensor("input");
  if (!a.flag("inplace")) return T(silu(x));
  silu_(x);  // SiluBackward0 saving a clone of the old self (activations_inplace.cpp)
  return T(x);
}

// dtype= casts first (ToCopyBackward0 under SoftmaxBackward0, measured; activations_inplace.cpp).
Tensor softmax_arg(const Args& a, const char* name) {
  const Value& d = a.get("dtype");
  if (d.kind == Value::Kind::None) return a.tensor(name);
  if (d.kind != Value::Kind::DType) type_error(short_fn(a.fn) + "(): argument 'dtype' must be torch.dtype, not " + type_name(d));
  return softmax_input(a.tensor(name), d.dtype);
}

Value impl_softmax(Args& a, Runtime&) { return T(softmax(softmax_arg(a, "self"), a.integer("dim"))); }
Value impl_log_softmax(Args& a, Runtime&) { return T(log_softmax(softmax_arg(a, "self"), a.integer("dim"))); }
// F.softmax / F.log_softmax: dim may be left out (deprecated implicit choice, same node).
int64_t functional_softmax_dim(const Args& a, const Tensor& x) {
  return a.given("dim") ? a.integer("dim") : implicit_softmax_dim(x->dim());
}
Value impl_f_softmax(Args& a, Runtime&) {
  Tensor x = softmax_arg(a, "input");
  return T(softmax(x, functional_softmax_dim(a, x)));
}
Value impl_f_log_softmax(Args& a, Runtime&) {
  Tensor x = softmax_arg(a, "input");
  return T(log_softmax(x, functional_softmax_dim(a, x)));
}

// ---------------------------------------------------------------- reductions

Value impl_max(Args& a, Runtime&) {
  Tensor x = a.tensor("self");
  const Value& d = a.get("dim");
  // max(input, other) is torch.maximum (measured: MaximumBackward0).
  if (d.kind == Value::Kind::Tensor) return T(maximum(x, d.t));
  a.reject_explicit_none_dim("dim");
  if (d.kind == Value::Kind::None) {
    // Only the (dim, keepdim) overload takes keepdim: x.max(keepdim=True) is a TypeError.
    if (a.given("keepdim"))
      type_error("max() received an invalid combination of arguments - got (keepdim=bool, ), but expected one of: "
                 "(), (Tensor other), (int dim, bool keepdim)");
    return T(max_all(x));
  }
  auto [values, indices] = max_dim(x, a.integer("dim"), a.flag("keepdim"));
  // torch.return_types.max(values, indices): unpacks as a tuple, has .values and .indices.
  return Value::return_type("max", T(values), T(indices));
}

Value impl_amax(Args& a, Runtime&) {
  auto dims = a.dims("dim");
  return T(amax(a.tensor("self"), dims ? *dims : std::vector<int64_t>{}, a.flag("keepdim")));
}

Value impl_var(Args& a, Runtime&) {
  const VarArgs v = parse_var_args(a, "var");
  return T(var(a.tensor("self"), v.dims, v.correction, v.keepdim));
}

Value impl_norm(Args& a, Runtime&) {
  if (a.given("dtype")) unsupported("norm(dtype=...) is not supported");
  return T(norm_functional(a.tensor("self"), a.get("p"), a.dims("dim"), a.flag("keepdim")));
}

// ---------------------------------------------------------------- selection

Tensor tensor_or_wrapped(const Args& a, const char* name) {
  const Value& v = a.get(name);
  if (v.kind == Value::Kind::Tensor) return v.t;
  if (v.is_number()) return wrap_number(v);
  type_error("where(): argument '" + std::string(name) + "' must be Tensor or Number, not " + type_name(v));
}

Value impl_where(Args& a, Runtime&) {
  const bool has_input = a.given("input"), has_other = a.given("other");
  if (!has_input && !has_other)
    unsupported("torch.where(condition) (nonzero indices) is not supported");
  if (!has_input || !has_other) type_error("where() missing an argument: expected (condition, input, other)");
  return T(where(a.tensor("condition"), tensor_or_wrapped(a, "input"), tensor_or_wrapped(a, "other")));
}

Value impl_tensor_where(Args& a, Runtime&) {
  // x.where(condition, y) is torch.where(condition, x, y).
  return T(where(a.tensor("condition"), a.tensor("self"), tensor_or_wrapped(a, "other")));
}

Value impl_masked_fill(Args& a, Runtime&) {
  return T(masked_fill(a.tensor("self"), a.tensor("mask"), a.get("value")));
}

// ---------------------------------------------------------------- losses

void no_legacy_reduction(const Args& a) {
  if (a.given("size_average") || a.given("reduce"))
    unsupported(short_fn(a.fn) + "(size_average=..., reduce=...) (legacy reduction arguments) is not supported");
}

Tensor optional_weight(const Args& a) { return a.given("weight") ? a.tensor("weight") : nullptr; }

Value impl_mse_loss(Args& a, Runtime&) {
  no_legacy_reduction(a);
  Tensor x = a.tensor("input"), y = a.tensor("target");
  return T(mse_loss(x, y, reduction_enum(a.get("reduction"))));
}

Value impl_nll_loss(Args& a, Runtime&) {
  no_legacy_reduction(a);
  Tensor x = a.tensor("input"), t = a.tensor("target"), w = optional_weight(a);
  const int64_t reduction = reduction_enum(a.get("reduction"));
  return T(nll_loss(x, t, w, reduction, a.integer("ignore_index")));
}

Value impl_cross_entropy(Args& a, Runtime&) {
  no_legacy_reduction(a);
  const double label_smoothing = a.number("label_smoothing");
  Tensor x = a.tensor("input"), t = a.tensor("target"), w = optional_weight(a);
  const int64_t reduction = reduction_enum(a.get("reduction"));
  if (label_smoothing != 0.0)
    return T(cross_entropy_label_smoothing(x, t, w, reduction, a.integer("ignore_index"), label_smoothing));
  return T(cross_entropy(x, t, w, reduction, a.integer("ignore_index")));
}

}  // namespace

VarArgs parse_var_args(const Args& a, const std::string& fn) {
  const Value& d = a.get("dim");
  // var(bool unbiased) overload: x.var(False) passes the bool positionally.
  if (d.kind == Value::Kind::Bool) {
    if (a.given("unbiased") || a.given("keepdim") || a.given("correction"))
      type_error(fn + "() received an invalid combination of arguments");
    return {std::nullopt, d.b ? 1 : 0, false};
  }
  const bool has_dim = d.kind != Value::Kind::None;
  if (a.given("unbiased") && a.given("correction"))
    type_error(fn + "() received an invalid combination of arguments - got both unbiased and correction");
  // Without dim only var(bool unbiased) matches: keepdim or correction alone is a TypeError
  // (measured: x.var(keepdim=True), x.var(correction=2)).
  if (!has_dim && (a.given("keepdim") || a.given("correction")))
    type_error(fn + "() received an invalid combination of arguments - got (" +
               std::string(a.given("correction") ? "correction=int" : "keepdim=bool") + ", ), but expected one of: "
               "(tuple of ints dim, *, int correction, bool keepdim), (tuple of ints dim, bool unbiased, bool keepdim), "
               "(bool unbiased)");
  int64_t correction = 1;
  if (a.given("unbiased")) correction = a.flag("unbiased") ? 1 : 0;
  if (a.given("correction")) {
    const Value& c = a.get("correction");
    if (c.kind != Value::Kind::Int)  // 1.13 takes only an int correction (a float is a TypeError)
      type_error(fn + "() received an invalid combination of arguments - got (correction=" + type_name(c) + ")");
    correction = c.i;
  }
  return {a.dims("dim"), correction, a.flag("keepdim")};
}

std::vector<OpEntry> activation_ops() {
  std::vector<OpEntry> t = {
      // ---- pointwise math
      {"abs", {"torch.abs", "Tensor.abs"}, "(self)", "pointwise", "AbsBackward0",
       "self (same object); grad * sgn(self)", impl_abs, {}},
      {"sin", {"torch.sin", "Tensor.sin"}, "(self)", "pointwise", "SinBackward0", "self (same object)", impl_sin, {}},
      {"cos", {"torch.cos", "Tensor.cos"}, "(self)", "pointwise", "CosBackward0", "self (same object)", impl_cos, {}},
      {"rsqrt", {"torch.rsqrt", "Tensor.rsqrt"}, "(self)", "pointwise", "RsqrtBackward0",
       "result (new object, same storage)", impl_rsqrt, {}},
      {"clamp", {"torch.clamp", "Tensor.clamp"}, "(self, min=None, max=None)", "pointwise", "ClampBackward1",
       "max and min (numbers; None when not given), self (same object); tensor bounds not supported", impl_clamp, {}},
      // ---- activations
      {"leaky_relu", {"F.leaky_relu"}, "(input, negative_slope=0.01, inplace=False)", "activation",
       "LeakyReluBackward0 / LeakyReluBackward1", "negative_slope, self (same object); inplace=True: result", impl_leaky_relu, {}},
      {"gelu", {"F.gelu"}, "(input, *, approximate=None)", "activation", "GeluBackward0",
       "approximate ('none' or 'tanh'), self (same object)", impl_gelu, {}},
      {"silu", {"F.silu"}, "(input, inplace=False)", "activation", "SiluBackward0", "self (same object); inplace=True: a clone of the old self", impl_silu, {}},
      {"softmax", {"torch.softmax", "Tensor.softmax"}, "(self, dim, dtype=None)", "activation", "SoftmaxBackward0",
       "dim (as written: -1 reads 18446744073709551615), result; dtype= casts first (ToCopyBackward0)", impl_softmax, {}},
      {"softmax", {"F.softmax"}, "(input, dim=None, _stacklevel=3, dtype=None)", "activation", "SoftmaxBackward0",
       "dim, result (dim None: the deprecated implicit dim); dtype= casts first (ToCopyBackward0)", impl_f_softmax, {}},
      {"log_softmax", {"torch.log_softmax", "Tensor.log_softmax"}, "(self, dim, dtype=None)", "activation",
       "LogSoftmaxBackward0", "dim, result; dtype= casts first (ToCopyBackward0)", impl_log_softmax, {}},
      {"log_softmax", {"F.log_softmax"}, "(input, dim=None, _stacklevel=3, dtype=None)", "activation",
       "LogSoftmaxBackward0", "dim, result; dtype= casts first (ToCopyBackward0)", impl_f_log_softmax, {}},
      // ---- reductions
      {"max", {"torch.max", "Tensor.max"}, "(self, dim=None, keepdim=None)", "reduction",
       "MaxBackward1 / MaxBackward0",
       "all: result and self; by dim: returns (values, indices) and saves dim, indices (the returned object), "
       "keepdim, self_sizes",
       impl_max, {}},
      {"amax", {"torch.amax", "Tensor.amax"}, "(self, dim=None, keepdim=False)", "reduction", "AmaxBackward0",
       "dim (() for all), keepdim, result, self", impl_amax, {}},
      {"var", {"torch.var", "Tensor.var"}, "(self, dim=None, unbiased=None, keepdim=None, *, correction=None)",
       "reduction", "VarBackward0", "correction (1 unbiased, 0 biased), dim (None for all), keepdim, self", impl_var, {}},
      {"norm", {"torch.norm", "Tensor.norm"}, "(self, p=None, dim=None, keepdim=False, dtype=None)", "reduction",
       "NormBackward1 / SqrtBackward0",
       "dim, keepdim, p (2 for 'fro'), result, self; p 'fro' over two dims is sqrt(sum(x * x))", impl_norm, {}},
      // ---- selection
      {"where", {"torch.where"}, "(condition, input=None, other=None)", "selection", "WhereBackward0",
       "condition only (same object); a number operand's edge is None", impl_where, {}},
      {"where", {"Tensor.where"}, "(self, condition, other)", "selection", "WhereBackward0", "condition only",
       impl_tensor_where, {}},
      {"masked_fill", {"torch.masked_fill", "Tensor.masked_fill"}, "(self, mask, value)", "selection",
       "MaskedFillBackward0 / MaskedFillBackward1",
       "mask only (same object); a 0-d tensor value adds an edge (MaskedFillBackward1)", impl_masked_fill, {}},
      // ---- losses
      {"mse_loss", {"F.mse_loss"}, "(input, target, size_average=None, reduce=None, reduction=None)", "loss",
       "MseLossBackward0", "reduction (0 none, 1 mean, 2 sum), self, target (same objects, always both)",
       impl_mse_loss, {}},
      {"nll_loss", {"F.nll_loss"},
       "(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction=None)", "loss",
       "NllLossBackward0",
       "ignore_index (-100 reads 18446744073709551516), reduction, self, target, total_weight (new 0-d), weight",
       impl_nll_loss, {}},
      {"cross_entropy", {"F.cross_entropy"},
       "(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction=None, "
       "label_smoothing=0.0)",
       "loss", "NllLossBackward0 over LogSoftmaxBackward0",
       "log_softmax saves its result, nll_loss saves that same output as self (twice the bytes, one storage); "
       "label_smoothing > 0: AddBackward0 over MulBackward1 (nll) and MulBackward1 over MeanBackward0 / SumBackward0 "
       "over MaskedSelectBackward0 over IndexPutBackward0 over NegBackward0 over SumBackward1 (weight= unsupported)",
       impl_cross_entropy, {}},
  };
  return t;
}

}  // namespace agtrace::ops
