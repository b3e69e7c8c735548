#include "ops/autocast_policy.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace agtrace::ops {
namespace {

struct Policies {
  CastPolicy cpu = CastPolicy::Unknown, cuda = CastPolicy::Unknown;
};

// The table entries (canonical names) on 1.13's lists, device type by device type.
// AutocastCPU (autocast_mode.cpp, TORCH_LIBRARY_IMPL(aten, AutocastCPU, m)):
//   lower_precision_fp: conv1d/2d/3d, bmm, mm, baddbmm, addmm, addbmm, linear, matmul, ...
//   fp32: the losses (cross_entropy_loss, nll_loss, mse_loss, ...), prod, linalg, fft, ...
//   promote: stack, cat, index_copy -- but cat's registration takes an ITensorListRef that
//   1.13's cached_cast passes through untouched (measured: torch.cat([bf16, f32]) under CPU
//   autocast records CatBackward0 straight over the bf16 input's node, no ToCopyBackward0,
//   its own type promotion giving float32), so cat is listed below as none.
// AutocastCUDA (TORCH_LIBRARY_IMPL(aten, Autocast, m)):
//   lower_precision_fp: convolutions, prelu, addmm, addmv, addr, matmul, einsum, mm, mv, linear,
//   addbmm, baddbmm, bmm, chain_matmul, linalg_multi_dot, the rnn cells
//   fp32: acos asin cosh erfinv exp expm1 log log10 log2 log1p reciprocal rsqrt sinh tan pow
//   softplus layer_norm group_norm norms cosine_similarity the losses dist pdist cdist renorm
//   logsumexp; fp32_set_opt_dtype: prod softmax log_softmax cumprod cumsum sum;
//   fp32_append_dtype: norm; promote: addcdiv addcmul atan2 bilinear cross dot grid_sampler
//   index_put tensordot scatter_add; binary_cross_entropy is banned.
const std::map<std::string, Policies>& listed() {
  using P = CastPolicy;
  static const std::map<std::string, Policies> m = {
      {"addbmm", {P::LowerPrecision, P::LowerPrecision}},
      {"addmm", {P::LowerPrecision, P::LowerPrecision}},
      {"baddbmm", {P::LowerPrecision, P::LowerPrecision}},
      {"bmm", {P::LowerPrecision, P::LowerPrecision}},
      {"conv2d", {P::LowerPrecision, P::LowerPrecision}},
      {"linear", {P::LowerPrecision, P::LowerPrecision}},
      {"matmul", {P::LowerPrecision, P::LowerPrecision}},
      {"mm", {P::LowerPrecision, P::LowerPrecision}},
      {"addmv", {P::None, P::LowerPrecision}},
      {"addr", {P::None, P::LowerPrecision}},
      {"mv", {P::None, P::LowerPrecision}},
      // CPU einsum is CompositeImplicit and reaches bmm (listed) after its permutes and views:
      // the casts land inside its decomposition (measured: ViewBackward0 on top), not modelled.
      {"einsum", {P::Unknown, P::LowerPrecision}},

      {"binary_cross_entropy", {P::Fp32, P::Banned}},
      {"binary_cross_entropy_with_logits", {P::Fp32, P::Fp32}},
      // CUDA cross_entropy is not listed: it decomposes into log_softmax (fp32_set_opt_dtype)
      // and nll_loss (fp32), a graph agtrace cannot check against a GPU here.
      {"cross_entropy", {P::Fp32, P::Unknown}},
      {"kl_div", {P::Fp32, P::Fp32}},
      {"l1_loss", {P::Fp32, P::Fp32}},
      {"mse_loss", {P::Fp32, P::Fp32}},
      {"nll_loss", {P::Fp32, P::Fp32}},
      {"smooth_l1_loss", {P::Fp32, P::Fp32}},
      {"prod", {P::Fp32, P::Fp32SetOptDtype}},
      {"stack", {P::Promote, P::None}},
      {"index_copy", {P::Promote, P::None}},

      {"acos", {P::None, P::Fp32}},
      {"asin", {P::None, P::Fp32}},
      {"cosh", {P::None, P::Fp32}},
      {"erfinv", {P::None, P::Fp32}},
      {"exp", {P::None, P::Fp32}},
      {"expm1", {P::None, P::Fp32}},
      {"log", {P::None, P::Fp32}},
      {"log10", {P::None, P::Fp32}},
      {"log2", {P::None, P::Fp32}},
      {"log1p", {P::None, P::Fp32}},
      {"reciprocal", {P::None, P::Fp32}},
      // number / tensor is tensor.reciprocal() * number: the reciprocal is dispatched.
      {"rdiv", {P::None, P::Fp32}},
      {"rsqrt", {P::None, P::Fp32}},
      {"sinh", {P::None, P::Fp32}},
      {"tan", {P::None, P::Fp32}},
      {"pow", {P::None, P::Fp32}},
      {"rpow", {P::None, P::Fp32}},  // number ** tensor: pow.Scalar
      {"softplus", {P::None, P::Fp32}},
      {"layer_norm", {P::None, P::Fp32}},
      {"dist", {P::None, P::Fp32}},
      {"logsumexp", {P::None, P::Fp32}},
      {"softmax", {P::None, P::Fp32SetOptDtype}},
      {"log_softmax", {P::None, P::Fp32SetOptDtype}},
      {"cumprod", {P::None, P::Fp32SetOptDtype}},
      {"cumsum", {P::None, P::Fp32SetOptDtype}},
      {"sum", {P::None, P::Fp32SetOptDtype}},
      // norm is fp32_append_dtype on CUDA (norm with dtype=float32 appended); normalize and
      // square decompose into norm / pow there. Graphs not measurable here: unknown.
      {"norm", {P::None, P::Unknown}},
      {"normalize", {P::None, P::Unknown}},
      {"square", {P::None, P::Unknown}},
      {"addcdiv", {P::None, P::Promote}},
      {"addcmul", {P::None, P::Promote}},
      {"atan2", {P::None, P::Promote}},
      {"dot", {P::None, P::Promote}},
      {"scatter_add", {P::None, P::Promote}},
  };
  return m;
}

// Entries on neither device's list whose PyTorch counterparts are native ops, views, in-place
// ops (autocast registers only out-of-place ops; in-place ones keep self's dtype), creation,
// conversion or introspection, or CompositeImplicit ops decomposing only into unlisted ops
// (outer/ger: mul; relu6: hardtanh; celu, selu: elu; h/v/dstack: cat; allclose: isclose).
// Everything else -- an entry added later included -- is unknown until someone checks it.
const std::set<std::string>& unlisted() {
  static const std::set<std::string> s = {
      // math and pointwise
      "add", "sub", "rsub", "rsub_function", "mul", "div", "neg", "abs", "sign", "frac", "floor", "ceil", "round",
      "trunc", "sin", "cos", "atan", "tanh", "sqrt", "erf", "erfc", "exp2", "sigmoid", "true_divide", "floor_divide",
      "remainder", "fmod", "hypot", "lerp", "maximum", "minimum", "fmax", "fmin", "where", "clamp", "clamp_min",
      "eq", "ne", "lt", "le", "gt", "ge", "isfinite", "isinf", "isnan", "allclose", "equal", "outer", "ger",
      // activations
      "relu", "relu6", "gelu", "silu", "mish", "elu", "selu", "celu", "hardswish", "hardsigmoid", "hardtanh",
      "leaky_relu", "logsigmoid", "threshold", "rrelu",
      // reductions and selection
      "mean", "median", "nanmedian", "std", "var", "std_mean", "var_mean", "amax", "max", "min", "argmax",
      "argmin", "kthvalue", "topk", "sort", "argsort", "masked_select",
      // nn
      "batch_norm", "dropout", "embedding", "one_hot", "max_pool2d", "cat",
      // pad: constant padding is constant_pad_nd (unlisted); reflect / replicate modes are
      // refused under CPU autocast where their kernels are listed fp32 (see autocast.cpp)
      "pad",
      // indexing
      "gather", "index_select", "index_add", "index_fill", "scatter", "index", "masked_fill",
      // shapes and views
      "T", "mT", "t", "view", "view_as", "reshape", "reshape_as", "expand", "expand_as", "transpose", "swapaxes",
      "swapdims", "permute", "movedim", "squeeze", "unsqueeze", "flatten", "narrow", "select", "slice", "split",
      "split_with_sizes", "chunk", "unbind", "unfold", "unsafe_chunk", "unsafe_split", "unsafe_split_with_sizes",
      "diagonal", "diag", "tril", "triu", "roll", "flip", "repeat", "clone", "contiguous", "detach",
      "broadcast_tensors", "atleast_1d", "atleast_2d", "atleast_3d", "hstack", "vstack", "dstack",
      // conversion
      "to", "float", "double", "half", "bfloat16", "long", "cpu", "cuda", "type",
      // creation
      "arange", "full", "full_like", "empty", "empty_like", "zeros", "zeros_like", "ones", "ones_like", "rand",
      "rand_like", "randn", "randn_like", "randint", "randperm", "tensor", "new_empty", "new_full", "new_ones",
      "new_tensor", "new_zeros", "eye", "bernoulli",
      // introspection and autograd
      "Size", "_is_view", "backward", "autograd.backward", "grad", "retain_grad", "requires_grad_", "data_ptr", "dim", "element_size",
      "is_contiguous", "is_grad_enabled", "set_grad_enabled", "is_autocast_enabled", "is_autocast_cpu_enabled",
      "get_autocast_cpu_dtype", "get_autocast_gpu_dtype", "is_autocast_cache_enabled", "item", "numel", "size", "tolist", "print",
      "shares_storage", "stride", "storage_offset",
  };
  return s;
}

bool in_place(const std::string& op) { return op.size() > 1 && op.back() == '_' && op != "_is_view"; }

}  // namespace

CastPolicy autocast_policy(const std::string& op, const std::string& device_type) {
  auto it = listed().find(op);
  if (it != listed().end()) return device_type == "cuda" ? it->second.cuda : it->second.cpu;
  if (in_place(op) || unlisted().count(op)) return CastPolicy::None;
  return CastPolicy::Unknown;
}

const char* cast_policy_name(CastPolicy p) {
  switch (p) {
    case CastPolicy::None: return "none";
    case CastPolicy::LowerPrecision: return "lower";
    case CastPolicy::Fp32: return "fp32";
    case CastPolicy::Fp32SetOptDtype: return "fp32 (dtype=float32)";
    case CastPolicy::Promote: return "promote";
    case CastPolicy::Banned: return "banned";
    case CastPolicy::Unknown: break;
  }
  return "unknown";
}

std::string autocast_policy_text(const std::string& op) {
  return std::string("cpu ") + cast_policy_name(autocast_policy(op, "cpu")) + ", cuda " +
         cast_policy_name(autocast_policy(op, "cuda"));
}

AutocastQuery& autocast_query() {
  static AutocastQuery state;
  return state;
}

}  // namespace agtrace::ops
