// masked_fill_, clamp_, clamp_min_ (and clamp_min, and F.normalize over it): the in-place forms record the
// out-of-place node over the edited tensor, following the steps of ops/inplace_util.hpp
// (overlap, allowed, node before the edit, write, one version bump, history rebased: on a
// view its base's CopySlices). Measured with /usr/bin/python3 and torch 1.13:
// h.masked_fill_(m, 0.5) is MaskedFillBackward0 saving only mask (a 0-d tensor value:
// MaskedFillBackward1 with edges (self, value)); h.clamp_(-1, 1) is ClampBackward1 and
// h.clamp_min_(0.) ClampMinBackward0, each saving a copy of the original self (neither h nor
// on h's storage, version 0), with next_functions h's old grad_fn; h._version goes up by one.
#include <cmath>

#include "ops/inplace_util.hpp"
#include "ops/more.hpp"
#include "ops/more_util.hpp"
#include "ops/ops.hpp"
#include "ops/shapes.hpp"

namespace agtrace::ops {

using namespace more_detail;

namespace {

// ClampMinBackward0: clamp_min_backward = where(self >= min, grad, 0).
std::vector<Tensor> clamp_min_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self");
  const AttrValue& m = n.attr("min");
  const double lo = m.kind == AttrValue::Kind::Double ? m.d : static_cast<double>(m.i);
  return {kernels::binary(g[0], self, n.input_meta[0].dtype, [lo](double gv, double x) { return x >= lo ? gv : 0.0; },
                          "clamp_min_backward")};
}

// The checks every in-place edit makes first (inplace_util.hpp), and the cuda refusal.
void begin_inplace(const Tensor& self, std::initializer_list<const Tensor*> others = {}) {
  require_host(self);
  check_no_internal_overlap(self);
  check_inplace_allowed(self, others);
}

// Ends the edit: one bump, then the node (built before the write) becomes the history.
void end_inplace(const Tensor& self, const Shared<Node>& node) {
  bump(self);
  if (node) record_history(self, node);
}

// A copy of self as it was, for a node whose formula reads the original self.
Tensor original_copy(const Tensor& self) {
  OpScope scope("clone");
  return kernels::copy(self);
}

// clamp as at::clamp's scalar kernel: min(max(x, min), max), NaN kept.
double clamped(double x, bool has_min, double lo, bool has_max, double hi) {
  if (std::isnan(x)) return x;
  if (has_min && x < lo) x = lo;
  if (has_max && x > hi) x = hi;
  return x;
}

void require_number_bound(const Value& v, const char* name) {
  if (v.kind == Value::Kind::Tensor)
    unsupported(std::string("clamp_ with a tensor '") + name + "' (ClampBackward0)");
  if (v.kind != Value::Kind::None && !v.is_number())
    throw ScenarioError("type_error", std::string("clamp_(): argument '") + name + "' must be Number, not " + type_name(v));
}

}  // namespace

void masked_fill_(const Tensor& self, const Tensor& mask, const Value& value) {
  OpScope scope("masked_fill_");
  if (mask->dtype() != DType::Bool)
    unsupported("masked_fill_ with a " + dtype_name(mask->dtype()) + " mask (only torch.bool masks)");
  Tensor vt = masked_fill_value(value, "masked_fill_");
  require_host(vt);
  begin_inplace(self, {&vt});
  kernels::broadcast_shapes(self->sizes, mask->sizes, "masked_fill_");
  Shared<Node> node;
  if (vt ? needs_grad({&self, &vt}) : needs_grad({&self})) {
    const auto& f = inplace_shared_formulas();
    node = vt ? make_node("MaskedFillBackward1", f.masked_fill, {self, vt})
              : make_node("MaskedFillBackward0", f.masked_fill, {self});
    if (!vt) node->differentiable_backward = f.masked_fill_differentiable;
    node->save_input("mask", mask);
  }
  const double fill = vt ? (vt->is_meta() ? 0.0 : item(vt)) : value.number();
  kernels::binary_inplace(self, mask, [fill](double x, double m) { return m != 0 ? fill : x; }, "masked_fill_");
  end_inplace(self, node);
}

void clamp_(const Tensor& self, const Value& min, const Value& max) {
  OpScope scope("clamp_");
  require_number_bound(min, "min");
  require_number_bound(max, "max");
  const bool has_min = min.kind != Value::Kind::None, has_max = max.kind != Value::Kind::None;
  if (!has_min && !has_max)
    throw ScenarioError("type_error", "torch.clamp: At least one of 'min' or 'max' must not be None");
  if ((min.kind == Value::Kind::Float || max.kind == Value::Kind::Float) && !is_floating(self->dtype()))
    throw ScenarioError("dtype_mismatch", "result type Float can't be cast to the desired output type " +
                                              act_detail::scalar_name(self->dtype()));
  refuse_half_on_cpu(self, "clamp_scalar_cpu");
  begin_inplace(self);
  Shared<Node> node;
  if (needs_grad({&self})) {
    const auto& f = inplace_shared_formulas();
    node = make_node("ClampBackward1", f.clamp, {self});
    node->differentiable_backward = f.clamp_differentiable;
    node->save_attr("max", has_max ? number_attr(max) : AttrValue::none());
    node->save_attr("min", has_min ? number_attr(min) : AttrValue::none());
    node->save_input("self", original_copy(self));
  }
  const double lo = has_min ? min.number() : 0.0, hi = has_max ? max.number() : 0.0;
  kernels::unary_inplace(self, [=](double x) { return clamped(x, has_min, lo, has_max, hi); });
  end_inplace(self, node);
}

Tensor clamp_min(const Tensor& a, const Value& min) {
  OpScope scope("clamp_min");
  require_host(a);
  if (!min.is_number()) throw ScenarioError("type_error", "clamp_min(): argument 'min' must be Number, not " + type_name(min));
  refuse_half_on_cpu(a, "clamp_min_scalar_cpu");
  const double lo = min.number();
  const DType out = min.kind == Value::Kind::Float && !is_floating(a->dtype()) ? DType::Float32 : a->dtype();
  Tensor r = kernels::unary(a, out, [lo](double x) { return clamped(x, true, lo, false, 0); });
  if (needs_grad({&a})) {
    auto node = make_node("ClampMinBackward0", clamp_min_backward, {a});
    set_history(r, node);
    node->save_attr("min", number_attr(min));
    node->save_input("self", a);
  }
  return r;
}

void clamp_min_(const Tensor& self, const Value& min) {
  OpScope scope("clamp_min_");
  if (!min.is_number()) throw ScenarioError("type_error", "clamp_min_(): argument 'min' must be Number, not " + type_name(min));
  if (min.kind == Value::Kind::Float && !is_floating(self->dtype()))
    throw ScenarioError("dtype_mismatch", "result type Float can't be cast to the desired output type " +
                                              act_detail::scalar_name(self->dtype()));
  refuse_half_on_cpu(self, "clamp_min_scalar_cpu");
  begin_inplace(self);
  Shared<Node> node;
  if (needs_grad({&self})) {
    node = make_node("ClampMinBackward0", clamp_min_backward, {self});
    node->save_attr("min", number_attr(min));
    node->save_input("self", original_copy(self));
  }
  const double lo = min.number();
  kernels::unary_inplace(self, [lo](double x) { return clamped(x, true, lo, false, 0); });
  end_inplace(self, node);
}

Tensor normalize(const Tensor& a, const Value& p, int64_t dim, const Value& eps) {
  Tensor denominator = clamp_min(norm(a, p, {dim}, true), eps);
  return div(a, expand(denominator, a->sizes.vec()));
}

}  // namespace agtrace::ops
