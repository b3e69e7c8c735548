// Helpers shared by the op files: whether to record a node, and small kernels for
// backward formulas.
#pragma once
#include <string>
#include <type_traits>
#include <vector>

#include "autograd/grad_mode.hpp"
#include "autograd/node.hpp"
#include "errors.hpp"
#include "interp/value.hpp"
#include "tensor/events.hpp"
#include "tensor/device_kernels.hpp"
#include "tensor/kernels.hpp"

namespace agtrace::ops::detail {

using autograd::AttrValue;
using autograd::Node;

// PyTorch records a node when grad mode is on and any differentiable input requires grad.
inline bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!autograd::grad_enabled()) return false;
  for (const Tensor* t : inputs)
    if (*t && (*t)->requires_grad()) return true;
  return false;
}

// Whether the gradient for `t` is computed, which decides what a node saves: PyTorch's
// should_compute_output asks whether t's edge is valid, and a view that requires grad only
// through its base has none (measured: b = a[:]; a.requires_grad_(); b * 2 saves nothing).
inline bool rg(const Tensor& t) {
  if (!t) return false;
  autograd::refresh_view_grad_fn(t);
  return t->grad_fn != nullptr || t->requires_grad_flag;
}

// A view of `a`: same storage and version counter; _base is the root of the view family, and
// the view inherits a's CreationMeta (no_grad mode, a split / chunk / unbind output: measured,
// a.unbind(0)[0].view(1).mul_(2) raises view_inplace). views.cpp.
Tensor make_view(const Tensor& a, const Shape& sizes, const Shape& strides, int64_t offset);

// Names the op being computed, so allocations are attributed to it.
struct OpScope {
  OpText previous;  // restored as it was (interned: no lookup again after the op)
  explicit OpScope(std::string_view op) : previous(run_position().op) { run_position().op = op; }
  // An op name interned once by its caller (a static): no lookup per call.
  explicit OpScope(InternedString op) : previous(run_position().op) { run_position().op = op; }
  explicit OpScope(const char* op) : OpScope(std::string_view(op)) {}
  explicit OpScope(const std::string& op) : OpScope(std::string_view(op)) {}
  ~OpScope() { run_position().op = previous; }
};

inline Tensor as_dtype(const Tensor& t, DType d) { return !t || t->dtype() == d ? t : kernels::cast(t, d); }

// TensorIterator casts every input to the common dtype before the kernel: a Python number
// (or 0-d tensor) meeting a half-type tensor is rounded to that type first (measured in
// 1.13, bf16 and f16: a * 0.1767..., a + 0.1, a - 0.3, 0.7 - a equal the float64 result
// with the number rounded to the dtype in all 4096 elements; with the number kept in
// double, 119 (bf16) and 702 (f16) of them differ). Runs `run(f)` with f reading such an
// operand rounded; float32 and float64 results keep f as it is (their fast loops).
template <typename F, typename Run>
Tensor with_operands_in_common_dtype(const Tensor& a, const Tensor& b, DType out, F&& f, Run&& run) {
  const bool half = out == DType::BFloat16 || out == DType::Float16;
  const bool round_a = half && a->dtype() != out, round_b = half && b->dtype() != out;
  if (!round_a && !round_b) return run(f);
  return run([&f, out, round_a, round_b](double x, double y) {
    return f(round_a ? round_to_dtype(x, out) : x, round_b ? round_to_dtype(y, out) : y);
  });
}

// Each helper takes the cuda route (tensor/device_kernels.hpp) when an operand is on cuda.
inline Tensor kmul(const Tensor& a, const Tensor& b) {
  const DType out = kernels::result_type(a, b);
  if (kernels::device::any_on_device({&a, &b})) return kernels::device::binary(cuda::pw::BinaryOp::Mul, a, b, out, "mul");
  return with_operands_in_common_dtype(a, b, out, [](double x, double y) { return x * y; },
                                       [&](auto&& g) { return kernels::binary(a, b, out, g, "mul"); });
}
inline Tensor kdiv(const Tensor& a, const Tensor& b) {
  if (kernels::device::any_on_device({&a, &b}))
    return kernels::device::binary(cuda::pw::BinaryOp::Div, a, b, kernels::result_type(a, b), "div");
  return kernels::binary(a, b, kernels::result_type(a, b), [](double x, double y) { return x / y; }, "div");
}
inline Tensor kadd(const Tensor& a, const Tensor& b) {
  if (kernels::device::any_on_device({&a, &b}))
    return kernels::device::binary(cuda::pw::BinaryOp::Add, a, b, kernels::result_type(a, b), "add");
  return kernels::binary(a, b, kernels::result_type(a, b), [](double x, double y) { return x + y; }, "add");
}
inline Tensor kscale(const Tensor& a, double s) {
  if (kernels::device::on_device(a)) return kernels::device::unary(cuda::pw::UnaryOp::MulScalar, a, a->dtype(), s);
  return kernels::unary(a, a->dtype(), [s](double x) { return x * s; });
}
// Gradient for an input: reduced over broadcast dims and in the input's dtype.
inline Tensor grad_for_meta(const Tensor& g, const autograd::OutputMeta&, const Shape& shape, DType d) {
  return as_dtype(kernels::sum_to(g, shape), d);
}

inline void require_floating(const Tensor& t, const std::string& op) {
  if (!is_floating(t->dtype())) {
    ScenarioError e("dtype_mismatch", "\"" + op + "\" not implemented for '" + dtype_name(t->dtype()) + "'");
    e.facts = {{"op", op}, {"dtype", dtype_name(t->dtype())}};
    throw e;
  }
}

// Backward formulas shared by out-of-place and in-place forms (arith.cpp).
AttrValue number_attr(const Value& v);
std::vector<Tensor> add_sub_backward(Node& n, const std::vector<Tensor>& g);
std::vector<Tensor> mul_backward(Node& n, const std::vector<Tensor>& g);
std::vector<Tensor> div_backward(Node& n, const std::vector<Tensor>& g);
std::vector<Tensor> pow_scalar_backward(Node& n, const std::vector<Tensor>& g);
std::vector<Tensor> pow_scalar_dbackward(Node& n, const std::vector<Tensor>& g);
std::vector<Tensor> pow_tensor_backward(Node& n, const std::vector<Tensor>& g);
std::vector<Tensor> pow_tensor_dbackward(Node& n, const std::vector<Tensor>& g);
// The result of a binary arithmetic op in the promoted dtype (a template: f is inlined
// into the elementwise loop).
// `device_op`/`s0`: the same formula as lib/cuda's op code, for operands on cuda.
template <typename F>
Tensor binary_forward(const Tensor& a, const Tensor& b, const std::string& op, F&& f, cuda::pw::BinaryOp device_op,
                      double s0 = 1, bool true_division = false) {
  DType out = kernels::result_type(a, b);
  if (true_division && !is_floating(out)) out = DType::Float32;  // int / int is float (default dtype)
  if (kernels::device::any_on_device({&a, &b})) return kernels::device::binary(device_op, a, b, out, op, s0);
  return kernels::binary(a, b, out, f, op);
}

// Pointwise ops (unary.cpp): one table entry serves f(x) and f_(x).
struct PointwiseOp {
  const char* op;
  const char* node;
  double (*f)(double);
  autograd::BackwardFn backward;
  bool saves_result;  // else saves self
  bool float_only;    // integer inputs promote to float (exp, log, ...); relu keeps dtype
  // The forward and the backward (grad, saved value) as lib/cuda's op codes, for cuda.
  cuda::pw::UnaryOp device_op;
  cuda::pw::BinaryOp device_backward;
  // The formula as a float32 block loop, o[0..n) from x[0..n), for an op whose float result
  // is always the general path's bits (tensor/fast_paths.hpp: relu); null where there is none.
  // The out-of-place op and its in-place form (x.relu_()) both run it.
  void (*exact_f32)(const float* x, float* o, int64_t n) = nullptr;
};
const PointwiseOp* find_pointwise(const std::string& name);

// A host tensor's first element as T: float for a float32 storage, double for the others
// (which hold their elements as doubles); null for a null tensor.
template <typename T>
T* elements_of(const Tensor& t) {
  if (!t) return nullptr;
  if constexpr (std::is_same_v<T, float>) {
    return t->storage->f32() + t->offset;
  } else {
    return t->storage->f64() + t->offset;
  }
}

}  // namespace agtrace::ops::detail
