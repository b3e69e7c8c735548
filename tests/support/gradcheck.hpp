// Shared by the op tests: float64 leaves with spread-out values, and the central-difference
// gradient check (design note 8: every differentiable op is checked in double).
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "autograd/engine.hpp"
#include "autograd/grad_mode.hpp"
#include "ops/ops.hpp"
#include "tensor/tensor.hpp"

namespace agtrace::test {

using Inputs = std::vector<Tensor>;
using OpFn = std::function<Tensor(const Inputs&)>;
using MultiFn = std::function<std::vector<Tensor>(const Inputs&)>;  // split, chunk, unbind

// Fractional parts of a golden-ratio sequence: deterministic, not monotone, no two equal.
inline double golden(int64_t i, double phase) {
  const double v = phase + 0.6180339887498949 * static_cast<double>(i);
  return v - std::floor(v);
}

// n values spread over [lo, hi].
inline std::vector<double> spread(int64_t n, double lo, double hi, double phase = 0.37) {
  std::vector<double> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(lo + (hi - lo) * golden(i, phase));
  return out;
}

// A float64 leaf with values spread over [lo, hi]; requires grad unless told otherwise.
inline Tensor leaf64(const Shape& shape, double lo, double hi, bool requires_grad = true, double phase = 0.37) {
  Tensor t = tensor_from_values(shape, DType::Float64, spread(shape_numel(shape), lo, hi, phase));
  t->requires_grad_flag = requires_grad;
  return t;
}

// torch.linspace(lo, hi, numel).reshape(shape): the oracle's A(...) leaves, which the
// fidelity tests compare with values measured in PyTorch.
inline Tensor linspace_leaf(const Shape& shape, double lo = -1.0, double hi = 1.0, bool requires_grad = true,
                            DType dtype = DType::Float32) {
  const int64_t n = shape_numel(shape);
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(n == 1 ? lo : lo + (hi - lo) * static_cast<double>(i) / (n - 1));
  Tensor t = tensor_from_values(shape, dtype, v);
  t->requires_grad_flag = requires_grad;
  return t;
}

// Fixed loss weights: magnitudes in [0.5, 1.5), alternating sign, so every output element
// matters; `salt` gives each output of a multi-output op its own weights.
inline Tensor weights(const Shape& shape, int salt = 0) {
  std::vector<double> w;
  for (int64_t i = 0; i < shape_numel(shape); ++i)
    w.push_back((i % 2 ? -1.0 : 1.0) * (0.5 + golden(i, 0.11 * (salt + 1))));
  return tensor_from_values(shape, DType::Float64, w);
}

inline Tensor weighted_loss(const Tensor& out, const Tensor& w) {
  return ops::sum(ops::mul(out, w), std::nullopt, false);
}

// sum_k sum(outs[k] * weights_k) over every output.
inline Tensor weighted_loss(const std::vector<Tensor>& outs) {
  Tensor total;
  for (size_t k = 0; k < outs.size(); ++k) {
    Tensor s = weighted_loss(outs[k], weights(outs[k]->sizes, static_cast<int>(k)));
    total = total ? ops::add(total, s, Value::integer(1)) : s;
  }
  return total;
}

// Each leaf's .grad from the engine against central differences of sum(f(inputs) * w)
// (summed over every output for a multi-output f)
// with h = 1e-6, computed with grad mode off. Leaves are contiguous: element i of a leaf
// is storage element i (Storage::get / set).
inline void check_gradients_multi(const std::string& label, const Inputs& inputs, const MultiFn& f) {
  INFO("case: " << label);
  for (const Tensor& x : inputs) x->grad.reset();
  {
    std::vector<Tensor> outs = f(inputs);
    for (const Tensor& o : outs) REQUIRE(o->dtype() == DType::Float64);
    autograd::BackwardRequest req;
    req.roots = {weighted_loss(outs)};
    autograd::run_backward(req);
  }

  autograd::GradModeGuard no_grad(false);
  const double h = 1e-6;
  auto loss_now = [&] { return item(weighted_loss(f(inputs))); };
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    INFO("input " << k << " shape " << shape_str(x->sizes));
    if (!x->requires_grad_flag) {
      CHECK(x->grad == nullptr);
      continue;
    }
    REQUIRE(x->grad != nullptr);
    REQUIRE(x->grad->sizes == x->sizes);
    CHECK(x->grad->dtype() == x->dtype());
    const std::vector<double> analytic = to_values(x->grad);
    for (int64_t i = 0; i < x->numel(); ++i) {
      Storage& s = *x->storage;
      const double orig = s.get(i);
      s.set(i, orig + h);
      const double up = loss_now();
      s.set(i, orig - h);
      const double down = loss_now();
      s.set(i, orig);
      const double numeric = (up - down) / (2 * h);
      INFO("element " << i << ": analytic " << analytic[static_cast<size_t>(i)] << ", numeric " << numeric);
      CHECK(analytic[static_cast<size_t>(i)] == Approx(numeric).epsilon(1e-6).margin(1e-6));
    }
  }
}

inline void check_gradients(const std::string& label, const Inputs& inputs, const OpFn& f) {
  check_gradients_multi(label, inputs, [&](const Inputs& in) {
    Tensor out = f(in);
    if (autograd::grad_enabled()) REQUIRE(out->requires_grad());  // not in the grad-free loss evaluations
    return std::vector<Tensor>{out};
  });
}

}  // namespace agtrace::test
