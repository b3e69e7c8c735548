// Op-table fragment: the autograd API a program calls (see ops/table.hpp) — Tensor.backward
// and torch.autograd.backward with inputs=, retain_grad, grad mode as a call — and the
// tensor-to-Python conversions allclose and tolist.
#include <cmath>

#include "autograd/engine.hpp"
#include "autograd/grad_mode.hpp"
#include "errors.hpp"
#include "ops/table.hpp"
#include "ops/table_util.hpp"

namespace agtrace::ops {

namespace {

Value run_backward_call(Args& a, Runtime& rt, const std::vector<Tensor>& roots, std::vector<Tensor> grads) {
  const bool create = a.flag("create_graph");
  // inputs= (a tensor or a sequence): the engine checks and retains them (autograd/engine.hpp).
  std::vector<Tensor> inputs;
  if (a.given("inputs")) inputs = a.tensors("inputs");
  rt.backward(roots, grads, retain_flag(a, create), create, a.given("inputs") ? &inputs : nullptr, false,
              a.given("inputs"));
  return Value::none();
}

Value impl_backward(Args& a, Runtime& rt) {
  return run_backward_call(a, rt, {a.tensor("self")}, {a.given("gradient") ? a.tensor("gradient") : nullptr});
}

// torch.autograd.backward(tensors, grad_tensors=None, ...): tensors a tensor or a sequence;
// grad_tensors one per tensor, None entries implicit.
Value impl_autograd_backward(Args& a, Runtime& rt) {
  if (a.given("grad_variables"))
    throw ScenarioError("unsupported", "torch.autograd.backward(grad_variables=...) (deprecated): use grad_tensors");
  std::vector<Tensor> roots = a.tensors("tensors");
  std::vector<Tensor> grads(roots.size());
  const Value& g = a.get("grad_tensors");
  if (g.kind == Value::Kind::Tensor) {
    grads[0] = g.t;
  } else if (g.kind == Value::Kind::Tuple || g.kind == Value::Kind::List) {
    if (g.items.size() != roots.size())
      throw ScenarioError("shape_mismatch", "got " + std::to_string(roots.size()) + " tensors and " +
                                                std::to_string(g.items.size()) + " gradients");
    for (size_t i = 0; i < g.items.size(); ++i) {
      const Value& item = g.items[i];
      if (item.kind == Value::Kind::Tensor) grads[i] = item.t;
      else if (item.kind != Value::Kind::None)
        throw ScenarioError("unsupported", "torch.autograd.backward: a grad_tensors entry that is a " +
                                               type_name(item) + " (only tensors and None)");
    }
  } else if (g.kind != Value::Kind::None) {
    type_error("backward(): argument 'grad_tensors' must be a Tensor or a sequence, not " + type_name(g));
  }
  return run_backward_call(a, rt, roots, std::move(grads));
}

Value impl_retain_grad(Args& a, Runtime&) {
  autograd::retain_grad(a.tensor("self"));
  return Value::none();
}

// torch.set_grad_enabled(mode) called as a statement switches grad mode for the statements
// that follow (its constructor sets the mode); the with-block form is the scenario format's
// {"set_grad_enabled": BOOL, "body": [...]}. agtrace returns None where PyTorch returns the
// context-manager object (whose printed form is an address).
Value impl_set_grad_enabled(Args& a, Runtime&) {
  const Value& mode = a.get("mode");
  if (mode.kind != Value::Kind::Bool)
    type_error("set_grad_enabled(): argument 'mode' must be bool, not " + type_name(mode));
  autograd::set_grad_enabled(mode.b);
  return Value::none();
}

// torch.allclose: |a - b| <= atol + rtol * |b| elementwise, after broadcasting; NaNs equal
// only with equal_nan. Compared in double on the host, as the values print.
Value impl_allclose(Args& a, Runtime&) {
  Tensor x = a.tensor("self"), y = a.tensor("other");
  if (x->is_meta() || y->is_meta()) throw ScenarioError("unsupported", "allclose() of meta tensors has no value");
  if (x->dtype() != y->dtype())
    throw ScenarioError("dtype_mismatch", dtype_name(x->dtype()) + " did not match " + dtype_name(y->dtype()));
  if (x->sizes != y->sizes)
    throw ScenarioError("unsupported", "allclose() of tensors of different shapes (broadcasting) is not supported");
  const double rtol = a.number("rtol"), atol = a.number("atol");
  const bool equal_nan = a.flag("equal_nan");
  const std::vector<double> xv = host_values(x), yv = host_values(y);
  for (size_t i = 0; i < xv.size(); ++i) {
    const double p = xv[i], q = yv[i];
    if (std::isnan(p) || std::isnan(q)) {
      if (equal_nan && std::isnan(p) && std::isnan(q)) continue;
      return Value::boolean(false);
    }
    if (p == q) continue;  // equal infinities
    if (!(std::fabs(p - q) <= atol + rtol * std::fabs(q))) return Value::boolean(false);
  }
  return Value::boolean(true);
}

Value element_value(double v, DType d) {
  if (d == DType::Bool) return Value::boolean(v != 0.0);
  if (d == DType::Int64) return Value::integer(static_cast<int64_t>(v));
  return Value::real(v);  // float32 / float16 / bfloat16 widened to a Python float exactly
}

Value nested_list(const std::vector<double>& values, const Shape& sizes, DType d, size_t dim, size_t& next) {
  if (dim == sizes.size()) return element_value(values[next++], d);
  std::vector<Value> items;
  for (int64_t i = 0; i < sizes[dim]; ++i) items.push_back(nested_list(values, sizes, d, dim + 1, next));
  return Value::list(std::move(items));
}

// t.tolist(): nested Python lists of floats, ints or bools; a 0-d tensor gives the number.
Value impl_tolist(Args& a, Runtime&) {
  Tensor t = a.tensor("self");
  if (t->is_meta()) throw ScenarioError("unsupported", "Tensor.tolist() cannot be called on meta tensors");
  const std::vector<double> values = host_values(t);
  size_t next = 0;
  return nested_list(values, t->sizes, t->dtype(), 0, next);
}

}  // namespace

std::vector<OpEntry> autograd_api_ops() {
  const std::string none = "-";
  return {
      {"backward", {"Tensor.backward"}, "(self, gradient=None, retain_graph=None, create_graph=False, inputs=None)",
       "autograd", none,
       "runs the graph; frees saved values unless retain_graph=True; inputs=: only those tensors' .grad are "
       "filled (a non-leaf input retains its grad)",
       impl_backward, {}},
      {"autograd.backward", {"torch.autograd.backward"},
       "(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None, inputs=None)",
       "autograd", none, "as Tensor.backward for a tensor or a sequence of roots", impl_autograd_backward, {}},
      {"retain_grad", {"Tensor.retain_grad"}, "(self)", "autograd", none,
       "a non-leaf's .grad is filled by backward (a gradient, new storage); a no-op on a leaf", impl_retain_grad, {}},
      {"set_grad_enabled", {"torch.set_grad_enabled"}, "(mode)", "autograd", none,
       "as a statement: grad mode for the statements that follow; returns None", impl_set_grad_enabled, {}},
      {"allclose", {"torch.allclose", "Tensor.allclose"}, "(self, other, rtol=0.00001, atol=0.00000001, equal_nan=False)",
       "introspection", none, "a Python bool; same shape and dtype only", impl_allclose, {}},
      {"tolist", {"Tensor.tolist"}, "(self)", "introspection", none, "nested lists of float, int or bool",
       impl_tolist, {}},
  };
}

}  // namespace agtrace::ops
