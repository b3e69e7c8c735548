// Op-table fragment (see table.hpp): min, argmax / argmin, cumsum, prod, logsumexp,
// log1p, expm1, square and the activations softplus, elu, selu, hardtanh, relu6,
// threshold and logsigmoid. The ops are in reduce_more.cpp and pointwise_more.cpp; this
// file maps PyTorch's Python signatures onto them, with the overload rules PyTorch's
// argument parser applies (measured with /usr/bin/python3 and torch 1.13).
#include "errors.hpp"
#include "ops/activations.hpp"
#include "ops/binary_more.hpp"
#include "ops/activations_inplace.hpp"
#include "ops/more.hpp"
#include "ops/more_util.hpp"
#include "ops/ops.hpp"
#include "ops/table.hpp"
#include "ops/table_util.hpp"
#include "tensor/kernels.hpp"

namespace agtrace::ops {

namespace {

using more_detail::unsupported;

// A reduction whose dim-less overload takes no keepdim: x.min(keepdim=True) and
// x.prod(keepdim=True) are TypeErrors (measured), x.min(dim=None) PyTorch's Dimname error.
std::optional<int64_t> optional_dim(const Args& a, const char* fn, const char* overloads) {
  a.reject_explicit_none_dim("dim");
  if (a.given("dim")) return a.integer("dim");
  if (a.given("keepdim"))
    type_error(std::string(fn) + "() received an invalid combination of arguments - got (keepdim=bool, ), but "
               "expected one of: " + overloads);
  return std::nullopt;
}

void no_dtype(const Args& a) {
  // dtype= casts before the op in PyTorch; not mirrored.
  if (a.given("dtype")) unsupported(short_fn(a.fn) + "(dtype=...)");
}

// ---------------------------------------------------------------- reductions

Value impl_min(Args& a, Runtime&) {
  Tensor x = a.tensor("self");
  // min(input, other) is torch.minimum (measured: MinimumBackward0).
  if (a.get("dim").kind == Value::Kind::Tensor) return T(minimum(x, a.get("dim").t));
  const auto dim = optional_dim(a, "min", "(), (Tensor other), (int dim, bool keepdim)");
  if (!dim) return T(min_all(x));
  auto [values, indices] = min_dim(x, *dim, a.flag("keepdim"));
  return Value::return_type("min", T(values), T(indices));
}

Value impl_argmax(Args& a, Runtime&) {
  std::optional<int64_t> dim;
  if (a.given("dim")) dim = a.integer("dim");
  return T(arg_extreme(a.tensor("self"), dim, a.flag("keepdim"), true));
}
Value impl_argmin(Args& a, Runtime&) {
  std::optional<int64_t> dim;
  if (a.given("dim")) dim = a.integer("dim");
  return T(arg_extreme(a.tensor("self"), dim, a.flag("keepdim"), false));
}

Value impl_cumsum(Args& a, Runtime&) {
  no_dtype(a);
  return T(cumsum(a.tensor("self"), a.integer("dim")));
}

Value impl_prod(Args& a, Runtime&) {
  no_dtype(a);
  const auto dim = optional_dim(a, "prod", "(*, torch.dtype dtype), (int dim, bool keepdim, *, torch.dtype dtype)");
  return T(prod(a.tensor("self"), dim, a.flag("keepdim")));
}

Value impl_logsumexp(Args& a, Runtime&) {
  auto dims = a.dims("dim");
  if (!dims) type_error("logsumexp() received an invalid combination of arguments - got (), but expected one of: "
                        "(tuple of ints dim, bool keepdim), (tuple of names dim, bool keepdim)");
  return T(logsumexp(a.tensor("self"), *dims, a.flag("keepdim")));
}

Value impl_std(Args& a, Runtime&) {
  const VarArgs v = parse_var_args(a, "std");
  return T(std_dev(a.tensor("self"), v.dims, v.correction, v.keepdim));
}

// ---------------------------------------------------------------- pointwise

Value impl_log1p(Args& a, Runtime&) { return T(log1p(a.tensor("self"))); }
Value impl_expm1(Args& a, Runtime&) { return T(expm1(a.tensor("self"))); }
Value impl_square(Args& a, Runtime&) {
  // torch.square is at::pow(self, 2): PowBackward0 with exponent 2 (measured); a bool
  // tensor with the int 2 promotes to int64 (measured: square of [True, False] is [1, 0]).
  Tensor x = a.tensor("self");
  if (x->dtype() == DType::Bool) x = kernels::cast(x, DType::Int64);
  return T(pow_scalar(x, Value::integer(2)));
}

const Value& number_arg(const Args& a, const char* name) {
  const Value& v = a.get(name);
  if (!v.is_number()) type_error(short_fn(a.fn) + "(): argument '" + name + "' must be Number, not " + type_name(v));
  return v;
}

// inplace=True is the `_` op (activations_inplace.cpp), which records another node or saves a
// clone of the old self (measured: F.elu(h, inplace=True) is EluBackward1 saving result), and
// returns the input itself.
template <typename Edit>
Value edited(const Tensor& x, Edit&& edit) {
  edit();
  return T(x);
}

Value impl_softplus(Args& a, Runtime&) {
  return T(softplus(a.tensor("input"), number_arg(a, "beta"), number_arg(a, "threshold")));
}
Value impl_elu(Args& a, Runtime&) {
  // F.elu(input, alpha) is at::elu(input, alpha, scale=1, input_scale=1) (ints: measured _saved_scale 1).
  Tensor x = a.tensor("input");
  if (a.flag("inplace")) return edited(x, [&] { elu_(x, number_arg(a, "alpha"), Value::integer(1), Value::integer(1)); });
  return T(elu(x, number_arg(a, "alpha"), Value::integer(1), Value::integer(1)));
}
Value impl_selu(Args& a, Runtime&) {
  // at::selu = elu(self, SELU_ALPHA, SELU_SCALE) (measured: _saved_alpha 1.6732632423543772,
  // _saved_scale 1.0507009873554805, _saved_input_scale 1); selu_ = elu_ with the same.
  const Value alpha = Value::real(1.6732632423543772848170429916717), scale = Value::real(1.0507009873554804934193349852946);
  Tensor x = a.tensor("input");
  if (a.flag("inplace")) return edited(x, [&] { elu_(x, alpha, scale, Value::integer(1)); });
  return T(elu(x, alpha, scale, Value::integer(1)));
}
Value impl_hardtanh(Args& a, Runtime&) {
  Tensor x = a.tensor("input");
  if (a.flag("inplace")) return edited(x, [&] { hardtanh_(x, number_arg(a, "min_val"), number_arg(a, "max_val")); });
  return T(hardtanh(x, number_arg(a, "min_val"), number_arg(a, "max_val")));
}
Value impl_relu6(Args& a, Runtime&) {
  // relu6 is hardtanh(self, 0, 6) with int bounds (measured: _saved_min_val 0, _saved_max_val 6),
  // relu6_ hardtanh_(self, 0, 6) (measured: the same values, a clone of self).
  Tensor x = a.tensor("input");
  if (a.flag("inplace")) return edited(x, [&] { hardtanh_(x, Value::integer(0), Value::integer(6)); });
  return T(hardtanh(x, Value::integer(0), Value::integer(6)));
}
Value impl_threshold(Args& a, Runtime&) {
  Tensor x = a.tensor("input");
  if (a.flag("inplace")) return edited(x, [&] { threshold_(x, number_arg(a, "threshold"), number_arg(a, "value")); });
  return T(threshold(x, number_arg(a, "threshold"), number_arg(a, "value")));
}
Value impl_logsigmoid(Args& a, Runtime&) { return T(logsigmoid(a.tensor("input"))); }

// ---------------------------------------------------------------- copies that move elements

Value impl_tril(Args& a, Runtime&) { return T(tril(a.tensor("self"), a.integer("diagonal"), true)); }
Value impl_triu(Args& a, Runtime&) { return T(tril(a.tensor("self"), a.integer("diagonal"), false)); }
Value impl_flip(Args& a, Runtime&) {
  // x.flip(0, 1), x.flip((0, 1)), torch.flip(x, [0]); x.flip() is PyTorch's TypeError (measured).
  if (a.get("dims").items.empty() && a.get("dims").kind == Value::Kind::Tuple)
    type_error("flip() missing 1 required positional arguments: \"dims\"");
  return T(flip(a.tensor("self"), a.shape("dims")));
}
Value impl_roll(Args& a, Runtime&) {
  auto shifts = a.dims("shifts");
  if (!shifts) type_error("roll(): argument 'shifts' must be tuple of ints, not NoneType");
  auto dims = a.dims("dims");
  return T(roll(a.tensor("self"), *shifts, dims ? *dims : std::vector<int64_t>{}));
}

Value impl_repeat(Args& a, Runtime&) { return T(repeat(a.tensor("self"), a.shape("repeats"))); }
Value impl_gather(Args& a, Runtime&) {
  if (a.flag("sparse_grad")) unsupported("gather(sparse_grad=True)");
  return T(gather(a.tensor("self"), a.integer("dim"), a.tensor("index")));
}
Value impl_masked_select(Args& a, Runtime&) { return T(masked_select(a.tensor("self"), a.tensor("mask"))); }
Value impl_pad(Args& a, Runtime&) {
  const Value& mode = a.get("mode");
  if (mode.kind == Value::Kind::Str && mode.s != "constant")
    unsupported("F.pad(mode='" + mode.s + "') (only mode='constant' is mirrored)");
  auto pad = a.dims("pad");
  if (!pad) type_error("pad(): argument 'pad' must be tuple of ints, not NoneType");
  return T(constant_pad(a.tensor("input"), *pad, a.given("value") ? a.number("value") : 0.0));
}
Value impl_outer(Args& a, Runtime&) { return T(outer(a.tensor("self"), a.tensor("vec2"))); }

Value impl_sort(Args& a, Runtime&) {
  auto [values, indices] = sort(a.tensor("self"), a.integer("dim"), a.flag("descending"), a.flag("stable"));
  return Value::return_type("sort", T(values), T(indices));
}
Value impl_argsort(Args& a, Runtime&) {
  return T(argsort(a.tensor("self"), a.integer("dim"), a.flag("descending")));
}
Value impl_topk(Args& a, Runtime&) {
  if (a.given("sorted") && !a.flag("sorted")) unsupported("topk(sorted=False) (the kernel's unsorted order)");
  auto [values, indices] = topk(a.tensor("self"), a.integer("k"), a.integer("dim"), a.flag("largest"));
  return Value::return_type("topk", T(values), T(indices));
}

// ---------------------------------------------------------------- in-place edits

Value impl_masked_fill_(Args& a, Runtime&) {
  Tensor self = a.tensor("self");
  masked_fill_(self, a.tensor("mask"), a.get("value"));
  return T(self);
}
Value impl_clamp_(Args& a, Runtime&) {
  Tensor self = a.tensor("self");
  clamp_(self, a.get("min"), a.get("max"));
  return T(self);
}
Value impl_clamp_min(Args& a, Runtime&) { return T(clamp_min(a.tensor("self"), a.get("min"))); }
Value impl_clamp_min_(Args& a, Runtime&) {
  Tensor self = a.tensor("self");
  clamp_min_(self, a.get("min"));
  return T(self);
}

Value impl_normalize(Args& a, Runtime&) {
  if (a.given("out")) unsupported("F.normalize(out=...)");
  // eps's default 1e-12 (a float: _saved_min reads 1e-12, measured); the table's
  // signature cannot spell it.
  const Value eps = a.given("eps") ? number_arg(a, "eps") : Value::real(1e-12);
  return T(normalize(a.tensor("input"), number_arg(a, "p"), a.integer("dim"), eps));
}

// ---------------------------------------------------------------- losses

void no_legacy_reduction(const Args& a) {
  if (a.given("size_average") || a.given("reduce")) unsupported(a.fn + "(size_average=..., reduce=...)");
}
Value impl_l1_loss(Args& a, Runtime&) {
  no_legacy_reduction(a);
  return T(l1_loss(a.tensor("input"), a.tensor("target"), reduction_enum(a.get("reduction"))));
}
Value impl_smooth_l1_loss(Args& a, Runtime&) {
  no_legacy_reduction(a);
  return T(smooth_l1_loss(a.tensor("input"), a.tensor("target"), reduction_enum(a.get("reduction")),
                          a.number("beta")));
}
Value impl_bce(Args& a, Runtime&) {
  no_legacy_reduction(a);
  if (a.given("weight")) unsupported("F.binary_cross_entropy(weight=...)");
  return T(binary_cross_entropy(a.tensor("input"), a.tensor("target"), reduction_enum(a.get("reduction"))));
}
Value impl_bce_logits(Args& a, Runtime&) {
  no_legacy_reduction(a);
  if (a.given("weight") || a.given("pos_weight"))
    unsupported("F.binary_cross_entropy_with_logits(weight=..., pos_weight=...)");
  return T(binary_cross_entropy_with_logits(a.tensor("input"), a.tensor("target"),
                                            reduction_enum(a.get("reduction"))));
}
Value impl_kl_div(Args& a, Runtime&) {
  no_legacy_reduction(a);
  if (a.flag("log_target")) unsupported("F.kl_div(log_target=True)");
  const Value& r = a.get("reduction");
  if (r.kind != Value::Kind::None && r.kind != Value::Kind::Str)
    type_error("kl_div(): argument 'reduction' must be str, not " + type_name(r));
  return T(kl_div(a.tensor("input"), a.tensor("target"), r.kind == Value::Kind::Str ? r.s : "mean"));
}
Value impl_one_hot(Args& a, Runtime&) { return T(one_hot(a.tensor("tensor"), a.integer("num_classes"))); }

}  // namespace

std::vector<OpEntry> more_ops() {
  return {
      // ---- reductions
      {"min", {"torch.min", "Tensor.min"}, "(self, dim=None, keepdim=None)", "reduction",
       "MinBackward1 / MinBackward0",
       "all: result and self; by dim: returns torch.return_types.min(values, indices) and saves dim, indices "
       "(the returned object), keepdim, self_sizes",
       impl_min, {}},
      {"argmax", {"torch.argmax", "Tensor.argmax"}, "(self, dim=None, keepdim=False)", "reduction", "-",
       "nothing (int64 result); the first of ties, the first NaN", impl_argmax, {}},
      {"argmin", {"torch.argmin", "Tensor.argmin"}, "(self, dim=None, keepdim=False)", "reduction", "-",
       "nothing (int64 result); the first of ties, the first NaN", impl_argmin, {}},
      {"cumsum", {"torch.cumsum", "Tensor.cumsum"}, "(self, dim, *, dtype=None)", "reduction", "CumsumBackward0",
       "dim (as written); integer inputs give int64", impl_cumsum, {}},
      {"prod", {"torch.prod", "Tensor.prod"}, "(self, dim=None, keepdim=None, *, dtype=None)", "reduction",
       "ProdBackward0 / ProdBackward1", "all: result, self; by dim: dim, keepdim, result, self", impl_prod, {}},
      {"logsumexp", {"torch.logsumexp", "Tensor.logsumexp"}, "(self, dim=None, keepdim=False)", "reduction",
       "LogsumexpBackward0", "dim (a tuple), keepdim, result, self", impl_logsumexp, {}},
      {"std", {"torch.std", "Tensor.std"}, "(self, dim=None, unbiased=None, keepdim=None, *, correction=None)",
       "reduction", "StdBackward0", "correction (1 unbiased, 0 biased), dim (None for all), keepdim, result, self",
       impl_std, {}},
      // ---- pointwise
      {"log1p", {"torch.log1p", "Tensor.log1p"}, "(self)", "pointwise", "Log1PBackward0", "self (same object)",
       impl_log1p, {}},
      {"expm1", {"torch.expm1", "Tensor.expm1"}, "(self)", "pointwise", "Expm1Backward0",
       "result (new object, same storage)", impl_expm1, {}},
      {"square", {"torch.square", "Tensor.square"}, "(self)", "pointwise", "PowBackward0",
       "exponent (2), self (same object): at::pow(self, 2)", impl_square, {}},
      // ---- activations
      {"softplus", {"F.softplus"}, "(input, beta=1, threshold=20)", "activation", "SoftplusBackward0",
       "beta, self (same object), threshold", impl_softplus, {}},
      {"elu", {"F.elu"}, "(input, alpha=1.0, inplace=False)", "activation", "EluBackward0",
       "alpha, input_scale (1), scale (1), self (same object); inplace=True: EluBackward1 saving result", impl_elu, {}},
      {"selu", {"F.selu"}, "(input, inplace=False)", "activation", "EluBackward0",
       "alpha and scale (SELU's constants), input_scale (1), self; inplace=True: EluBackward1 saving result", impl_selu, {}},
      {"hardtanh", {"F.hardtanh"}, "(input, min_val=-1.0, max_val=1.0, inplace=False)", "activation",
       "HardtanhBackward0", "max_val, min_val, self (same object); inplace=True: a clone of the old self", impl_hardtanh, {}},
      {"relu6", {"F.relu6"}, "(input, inplace=False)", "activation", "HardtanhBackward0",
       "max_val (6), min_val (0), self (same object); inplace=True: a clone of the old self", impl_relu6, {}},
      {"threshold", {"F.threshold"}, "(input, threshold, value, inplace=False)", "activation",
       "ThresholdBackward0 / ThresholdBackward1", "self (same object), threshold; inplace=True: ThresholdBackward1 saving a clone", impl_threshold, {}},
      {"logsigmoid", {"F.logsigmoid"}, "(input)", "activation", "LogSigmoidBackward0",
       "buffer (a new tensor of the input's shape), self (same object)", impl_logsigmoid, {}},
      // ---- copies that move elements
      {"tril", {"torch.tril", "Tensor.tril"}, "(self, diagonal=0)", "shape", "TrilBackward0", "diagonal",
       impl_tril, {}},
      {"triu", {"torch.triu", "Tensor.triu"}, "(self, diagonal=0)", "shape", "TriuBackward0", "diagonal",
       impl_triu, {}},
      {"flip", {"torch.flip", "Tensor.flip"}, "(self, *dims)", "shape", "FlipBackward0", "dims (as written)",
       impl_flip, {}},
      {"roll", {"torch.roll", "Tensor.roll"}, "(self, shifts, dims=None)", "shape", "RollBackward0",
       "dims (() without), shifts", impl_roll, {}},
      {"repeat", {"Tensor.repeat"}, "(self, *repeats)", "shape", "RepeatBackward0", "repeats, self_sym_sizes",
       impl_repeat, {}},
      {"gather", {"torch.gather", "Tensor.gather"}, "(self, dim, index, *, sparse_grad=False)", "selection",
       "GatherBackward0", "dim, index (same object), self (same object), sparse_grad", impl_gather, {}},
      {"masked_select", {"torch.masked_select", "Tensor.masked_select"}, "(self, mask)", "selection",
       "MaskedSelectBackward0", "mask, self (same objects)", impl_masked_select, {}},
      {"pad", {"F.pad"}, "(input, pad, mode=None, value=None)", "shape", "ConstantPadNdBackward0",
       "pad (as written); mode='constant' only", impl_pad, {}},
      {"outer", {"torch.outer", "Tensor.outer"}, "(self, vec2)", "linalg",
       "MulBackward0 over ReshapeAliasBackward0", "self.reshape(n, 1) * vec2: the mul saves both", impl_outer, {}},
      {"sort", {"torch.sort", "Tensor.sort"}, "(self, dim=-1, descending=False, *, stable=None)", "selection",
       "SortBackward0",
       "returns torch.return_types.sort(values, indices); saves dim, indices (the returned object), self_sizes; "
       "ties in a slice of more than 16 elements need stable=True",
       impl_sort, {}},
      {"argsort", {"torch.argsort", "Tensor.argsort"}, "(self, dim=-1, descending=False)", "selection", "SortBackward0",
       "sort(...).indices: the sort's node on the dropped values saves the indices", impl_argsort, {}},
      {"topk", {"torch.topk", "Tensor.topk"}, "(self, k, dim=-1, largest=True, sorted=True)", "selection",
       "TopkBackward0",
       "returns torch.return_types.topk(values, indices); saves dim, indices, self_sizes; ties among the "
       "selected values unsupported",
       impl_topk, {}},
      // ---- in-place edits
      {"masked_fill_", {"Tensor.masked_fill_"}, "(self, mask, value)", "inplace",
       "MaskedFillBackward0 / MaskedFillBackward1", "mask (same object); CopySlices on a view", impl_masked_fill_, {}},
      {"clamp_", {"Tensor.clamp_", "torch.clamp_"}, "(self, min=None, max=None)", "inplace", "ClampBackward1",
       "max, min (None when absent), self (a copy of the original)", impl_clamp_, {}},
      {"clamp_min", {"Tensor.clamp_min", "torch.clamp_min"}, "(self, min)", "pointwise", "ClampMinBackward0",
       "min, self (same object)", impl_clamp_min, {}},
      {"clamp_min_", {"Tensor.clamp_min_", "torch.clamp_min_"}, "(self, min)", "inplace", "ClampMinBackward0",
       "min, self (a copy of the original)", impl_clamp_min_, {}},
      {"normalize", {"F.normalize"}, "(input, p=2.0, dim=1, eps=None, out=None)", "pointwise",
       "DivBackward0 over ExpandBackward0 over ClampMinBackward0 over NormBackward1",
       "composite: input / input.norm(p, dim, keepdim=True).clamp_min(eps).expand_as(input)", impl_normalize, {}},
      // ---- losses
      {"l1_loss", {"F.l1_loss"}, "(input, target, size_average=None, reduce=None, reduction=None)", "loss",
       "MeanBackward0 / SumBackward0 over AbsBackward0 over SubBackward0",
       "composite: (input - target).abs().mean() (AbsBackward0 saves the difference)", impl_l1_loss, {}},
      {"smooth_l1_loss", {"F.smooth_l1_loss"},
       "(input, target, size_average=None, reduce=None, reduction=None, beta=1.0)", "loss", "SmoothL1LossBackward0",
       "beta, reduction, self, target (same objects)", impl_smooth_l1_loss, {}},
      {"binary_cross_entropy", {"F.binary_cross_entropy"},
       "(input, target, weight=None, size_average=None, reduce=None, reduction=None)", "loss",
       "BinaryCrossEntropyBackward0", "reduction, self, target, weight (None); weight= not supported", impl_bce, {}},
      {"binary_cross_entropy_with_logits", {"F.binary_cross_entropy_with_logits"},
       "(input, target, weight=None, size_average=None, reduce=None, reduction=None, pos_weight=None)", "loss",
       "BinaryCrossEntropyWithLogitsBackward0",
       "pos_weight (None), reduction, self, target, weight (None); weights not supported", impl_bce_logits, {}},
      {"kl_div", {"F.kl_div"},
       "(input, target, size_average=None, reduce=None, reduction=None, log_target=False)", "loss",
       "SubBackward0 under MeanBackward0 / SumBackward0 / DivBackward0",
       "composite: xlogy(target, target) - target * input, reduced ('batchmean': sum / input.size(0))",
       impl_kl_div, {}},
      {"one_hot", {"F.one_hot"}, "(tensor, num_classes=-1)", "creation", "-", "nothing (int64 result)",
       impl_one_hot, {}},
  };
}

}  // namespace agtrace::ops
