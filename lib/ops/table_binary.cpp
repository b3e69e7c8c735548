// Op-table fragment (see table.hpp): the binary and ternary math ops of binary_more.cpp
// (maximum, minimum, fmax, fmin, atan2, hypot, remainder, fmod, lerp, addcmul, addcdiv,
// dist, torch.rsub, addmv, addr, addbmm, baddbmm) and the aliases true_divide (div) and ger
// (outer), with PyTorch's Python signatures (measured with /usr/bin/python3 and torch 1.13).
#include "errors.hpp"
#include "ops/binary_more.hpp"
#include "ops/more.hpp"
#include "ops/ops.hpp"
#include "ops/table.hpp"
#include "ops/table_util.hpp"

namespace agtrace::ops {

namespace {

// torch.maximum(x, 2.0) is a TypeError: `other` must be a Tensor (measured).
Value pair(Args& a, Tensor (*f)(const Tensor&, const Tensor&)) { return T(f(a.tensor("self"), a.tensor("other"))); }
Value impl_maximum(Args& a, Runtime&) { return pair(a, maximum); }
Value impl_minimum(Args& a, Runtime&) { return pair(a, minimum); }
Value impl_fmax(Args& a, Runtime&) { return pair(a, fmax); }
Value impl_fmin(Args& a, Runtime&) { return pair(a, fmin); }
Value impl_atan2(Args& a, Runtime&) { return pair(a, atan2); }
Value impl_hypot(Args& a, Runtime&) { return pair(a, hypot); }

// torch.remainder(2, x) is the Scalar-self overload, whose node is NotImplemented (measured).
Tensor modulo_self(const Args& a) {
  if (a.get("self").is_number()) throw ScenarioError("unsupported", short_fn(a.fn) + "(number, tensor) is not supported");
  return a.tensor("self");
}
Value impl_remainder(Args& a, Runtime&) { return T(remainder(modulo_self(a), a.get("other"))); }
Value impl_fmod(Args& a, Runtime&) { return T(fmod(modulo_self(a), a.get("other"))); }
Value impl_floor_divide(Args& a, Runtime&) { return T(floor_divide(modulo_self(a), a.get("other"))); }

Value impl_lerp(Args& a, Runtime&) { return T(lerp(a.tensor("self"), a.tensor("end"), a.get("weight"))); }
Value impl_addcmul(Args& a, Runtime&) {
  return T(addcmul(a.tensor("self"), a.tensor("tensor1"), a.tensor("tensor2"), a.get("value")));
}
Value impl_addcdiv(Args& a, Runtime&) {
  return T(addcdiv(a.tensor("self"), a.tensor("tensor1"), a.tensor("tensor2"), a.get("value")));
}
Value impl_dist(Args& a, Runtime&) { return T(dist(a.tensor("self"), a.tensor("other"), a.get("p"))); }

// torch.rsub(x, number) is rsub.Scalar (RsubBackward1, one edge); torch.rsub(x, y) is
// rsub.Tensor (RsubBackward0, two edges) (measured). There is no Tensor.rsub.
Value impl_rsub_function(Args& a, Runtime&) {
  const Value& other = a.get("other");
  if (other.kind == Value::Kind::Tensor) return T(rsub_tensor(a.tensor("self"), other.t, a.get("alpha")));
  if (!other.is_number()) type_error("rsub(): argument 'other' must be Tensor or Number, not " + type_name(other));
  return T(rsub(a.tensor("self"), other, a.get("alpha")));
}

// true_divide is div (measured: DivBackward0, a number other saved as a 0-d tensor).
Value impl_true_divide(Args& a, Runtime&) { return T(div(a.tensor("self"), a.tensor_or_number("other"))); }
// ger is outer (measured: MulBackward0 over ReshapeAliasBackward0, "outer: Expected 1-D ...").
Value impl_ger(Args& a, Runtime&) { return T(outer(a.tensor("self"), a.tensor("vec2"))); }

template <Tensor (*F)(const Tensor&, const Tensor&, const Tensor&, const Value&, const Value&)>
Value matrix_op(Args& a, const char* first, const char* second) {
  return T(F(a.tensor("self"), a.tensor(first), a.tensor(second), a.get("beta"), a.get("alpha")));
}
Value impl_addmv(Args& a, Runtime&) { return matrix_op<addmv>(a, "mat", "vec"); }
Value impl_addr(Args& a, Runtime&) { return matrix_op<addr>(a, "vec1", "vec2"); }
Value impl_addbmm(Args& a, Runtime&) { return matrix_op<addbmm>(a, "batch1", "batch2"); }
Value impl_baddbmm(Args& a, Runtime&) { return matrix_op<baddbmm>(a, "batch1", "batch2"); }

// ---- in-place forms: each returns self.
template <void (*F)(const Tensor&, const Tensor&)>
Value pair_(Args& a, Runtime&) {
  F(a.tensor("self"), a.tensor("other"));
  return a.get("self");
}
template <void (*F)(const Tensor&, const Value&)>
Value modulo_(Args& a, Runtime&) {
  F(a.tensor("self"), a.get("other"));
  return a.get("self");
}
template <void (*F)(const Tensor&, const Tensor&, const Tensor&, const Value&)>
Value addc_(Args& a, Runtime&) {
  F(a.tensor("self"), a.tensor("tensor1"), a.tensor("tensor2"), a.get("value"));
  return a.get("self");
}
Value impl_lerp_(Args& a, Runtime&) {
  lerp_(a.tensor("self"), a.tensor("end"), a.get("weight"));
  return a.get("self");
}
// true_divide_ is div_ (measured: DivBackward0 saving other and a clone of the old self).
Value impl_true_divide_(Args& a, Runtime&) {
  div_(a.tensor("self"), a.tensor_or_number("other"));
  return a.get("self");
}
template <void (*F)(const Tensor&, const Tensor&, const Tensor&, const Value&, const Value&)>
Value matrix_op_(Args& a, const char* first, const char* second) {
  F(a.tensor("self"), a.tensor(first), a.tensor(second), a.get("beta"), a.get("alpha"));
  return a.get("self");
}
Value impl_addmv_(Args& a, Runtime&) { return matrix_op_<addmv_>(a, "mat", "vec"); }
Value impl_addr_(Args& a, Runtime&) { return matrix_op_<addr_>(a, "vec1", "vec2"); }
Value impl_addbmm_(Args& a, Runtime&) { return matrix_op_<addbmm_>(a, "batch1", "batch2"); }
Value impl_baddbmm_(Args& a, Runtime&) { return matrix_op_<baddbmm_>(a, "batch1", "batch2"); }

}  // namespace

std::vector<OpEntry> binary_more_ops() {
  const std::string both = "other, self (same objects), whatever requires grad";
  return {
      {"maximum", {"torch.maximum", "Tensor.maximum"}, "(self, other)", "pointwise", "MaximumBackward0",
       both + "; torch.max(a, b) and a.max(b) are this op; ties give grad / 2 to each", impl_maximum, {}},
      {"minimum", {"torch.minimum", "Tensor.minimum"}, "(self, other)", "pointwise", "MinimumBackward0",
       both + "; torch.min(a, b) and a.min(b) are this op; ties give grad / 2 to each", impl_minimum, {}},
      {"fmax", {"torch.fmax", "Tensor.fmax"}, "(self, other)", "pointwise", "FmaxBackward0",
       both + "; the non-NaN side gets the gradient, self on ties", impl_fmax, {}},
      {"fmin", {"torch.fmin", "Tensor.fmin"}, "(self, other)", "pointwise", "FminBackward0",
       both + "; the non-NaN side gets the gradient, self on ties", impl_fmin, {}},
      {"atan2", {"torch.atan2", "Tensor.atan2"}, "(self, other)", "pointwise", "Atan2Backward0", both, impl_atan2, {}},
      {"hypot", {"torch.hypot", "Tensor.hypot"}, "(self, other)", "pointwise", "HypotBackward0",
       "other, result, self; floating dtypes only", impl_hypot, {}},
      {"remainder", {"torch.remainder", "Tensor.remainder"}, "(self, other)", "pointwise",
       "RemainderBackward1 / RemainderBackward0",
       "tensor other: other and self, only when other requires grad; number other: nothing, one edge", impl_remainder,
       {}},
      {"fmod", {"torch.fmod", "Tensor.fmod"}, "(self, other)", "pointwise", "FmodBackward1 / FmodBackward0",
       "tensor other: other and self, only when other requires grad; number other: nothing, one edge", impl_fmod, {}},
      {"floor_divide", {"torch.floor_divide", "Tensor.floor_divide"}, "(self, other)", "pointwise", "-",
       "no node modelled: inputs that require grad are unsupported (PyTorch's node is NotImplemented)",
       impl_floor_divide, {}},
      {"lerp", {"torch.lerp", "Tensor.lerp"}, "(self, end, weight)", "pointwise", "LerpBackward0 / LerpBackward1",
       "number weight: weight (as written); tensor weight: weight always, end and self when weight requires grad",
       impl_lerp, {}},
      {"addcmul", {"torch.addcmul", "Tensor.addcmul"}, "(self, tensor1, tensor2, *, value=1)", "pointwise",
       "AddcmulBackward0", "tensor1 if tensor2 requires grad, tensor2 if tensor1 requires grad, value (as written)",
       impl_addcmul, {}},
      {"addcdiv", {"torch.addcdiv", "Tensor.addcdiv"}, "(self, tensor1, tensor2, *, value=1)", "pointwise",
       "AddcdivBackward0", "tensor1 if tensor2 requires grad, tensor2 always, value (as written)", impl_addcdiv, {}},
      {"dist", {"torch.dist", "Tensor.dist"}, "(self, other, p=2)", "reduction", "DistBackward0",
       "other, p (as written), result (0-d), self", impl_dist, {}},
      {"rsub_function", {"torch.rsub"}, "(self, other, *, alpha=1)", "math", "RsubBackward0 / RsubBackward1",
       "alpha only; tensor other: two edges (other - alpha * self); number other: one edge", impl_rsub_function, {}},
      {"true_divide", {"torch.true_divide", "Tensor.true_divide"}, "(self, other)", "math", "DivBackward0",
       "div: other always; self if other requires grad", impl_true_divide, {}},
      {"ger", {"torch.ger", "Tensor.ger"}, "(self, vec2)", "linalg", "MulBackward0 over ReshapeAliasBackward0",
       "outer: self.reshape(n, 1) * vec2, the mul saves both", impl_ger, {}},
      {"addmv", {"torch.addmv", "Tensor.addmv"}, "(self, mat, vec, *, beta=1, alpha=1)", "linalg", "AddmvBackward0",
       "alpha, beta (as written), mat if vec requires grad, vec if mat requires grad; beta=0 ignores self", impl_addmv, {}},
      {"addr", {"torch.addr", "Tensor.addr"}, "(self, vec1, vec2, *, beta=1, alpha=1)", "linalg", "AddrBackward0",
       "alpha, beta, vec1 if vec2 requires grad, vec2 if vec1 requires grad; beta=0 ignores self", impl_addr, {}},
      {"addbmm", {"torch.addbmm", "Tensor.addbmm"}, "(self, batch1, batch2, *, beta=1, alpha=1)", "linalg",
       "AddbmmBackward0",
       "alpha, batch1 if batch2 requires grad, batch1_argsize_0/1, batch2 if batch1 requires grad, batch2_argsize_2, beta",
       impl_addbmm, {}},
      {"baddbmm", {"torch.baddbmm", "Tensor.baddbmm"}, "(self, batch1, batch2, *, beta=1, alpha=1)", "linalg",
       "BaddbmmBackward0", "alpha, batch1 if batch2 requires grad, batch2 if batch1 requires grad, beta; beta=0 ignores self",
       impl_baddbmm, {}},
      // ---- in-place forms (no maximum_, minimum_, fmax_, fmin_, dist_ in PyTorch 1.13)
      {"atan2_", {"Tensor.atan2_"}, "(self, other)", "inplace", "Atan2Backward0",
       "other, self: a clone of the old self (CloneBackward0, its own storage)", pair_<atan2_>, {}},
      {"hypot_", {"Tensor.hypot_"}, "(self, other)", "inplace", "HypotBackward0",
       "other, result (self after the edit, version bumped), self: a clone of the old self", pair_<hypot_>, {}},
      {"remainder_", {"Tensor.remainder_"}, "(self, other)", "inplace", "RemainderBackward1 / RemainderBackward0",
       "tensor other: other and a clone of the old self, when other requires grad", modulo_<remainder_>, {}},
      {"fmod_", {"Tensor.fmod_"}, "(self, other)", "inplace", "FmodBackward1 / FmodBackward0",
       "tensor other: other and a clone of the old self, when other requires grad", modulo_<fmod_>, {}},
      {"lerp_", {"Tensor.lerp_"}, "(self, end, weight)", "inplace", "LerpBackward0 / LerpBackward1",
       "as lerp; self is a clone of the old self", impl_lerp_, {}},
      {"addcmul_", {"Tensor.addcmul_"}, "(self, tensor1, tensor2, *, value=1)", "inplace", "AddcmulBackward0",
       "as addcmul", addc_<addcmul_>, {}},
      {"addcdiv_", {"Tensor.addcdiv_"}, "(self, tensor1, tensor2, *, value=1)", "inplace", "AddcdivBackward0",
       "as addcdiv", addc_<addcdiv_>, {}},
      {"true_divide_", {"Tensor.true_divide_"}, "(self, other)", "inplace", "DivBackward0",
       "div_: other, a clone of the old self if other requires grad", impl_true_divide_, {}},
      {"addmv_", {"Tensor.addmv_"}, "(self, mat, vec, *, beta=1, alpha=1)", "inplace", "AddmvBackward0", "as addmv",
       impl_addmv_, {}},
      {"addr_", {"Tensor.addr_"}, "(self, vec1, vec2, *, beta=1, alpha=1)", "inplace", "AddrBackward0", "as addr",
       impl_addr_, {}},
      {"addbmm_", {"Tensor.addbmm_"}, "(self, batch1, batch2, *, beta=1, alpha=1)", "inplace", "AddbmmBackward0",
       "as addbmm", impl_addbmm_, {}},
      {"baddbmm_", {"Tensor.baddbmm_"}, "(self, batch1, batch2, *, beta=1, alpha=1)", "inplace", "BaddbmmBackward0",
       "as baddbmm", impl_baddbmm_, {}},
  };
}

}  // namespace agtrace::ops
