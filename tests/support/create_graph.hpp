// Shared by the create_graph=True tests: float64 leaves, autograd.grad / backward through
// the engine, the spec's walk of a gradient's graph, and the second-order check (the
// gradient of sum(grad f) by create_graph against central differences of the first-order
// gradient).
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "autograd/engine.hpp"
#include "autograd/node.hpp"
#include "ops/ops.hpp"
#include "tensor/tensor.hpp"

namespace agtrace::test {

inline Tensor cg_leaf(const Shape& shape, const std::vector<double>& v, DType d = DType::Float64) {
  Tensor t = tensor_from_values(shape, d, v);
  t->requires_grad_flag = true;
  return t;
}

inline Tensor cg_total(const Tensor& t) { return ops::sum(t, std::nullopt, false); }

// torch.autograd.grad(root, inputs, create_graph=create_graph, retain_graph=create_graph).
inline std::vector<Tensor> cg_grad(const Tensor& root, const std::vector<Tensor>& inputs, bool create_graph) {
  autograd::BackwardRequest req;
  req.roots = {root};
  req.inputs = inputs;
  req.capture = true;
  req.retain_graph = create_graph;
  req.create_graph = create_graph;
  return autograd::run_backward(req);
}

inline void cg_backward(const Tensor& root, bool create_graph) {
  autograd::BackwardRequest req;
  req.roots = {root};
  req.retain_graph = create_graph;
  req.create_graph = create_graph;
  autograd::run_backward(req);
}

// Depth-first over next_functions, each node once (the spec's walk).
inline std::vector<std::string> cg_walk(const Tensor& t) {
  std::vector<std::string> out;
  std::vector<autograd::Node*> seen, stack{t->grad_fn.get()};
  while (!stack.empty()) {
    autograd::Node* n = stack.back();
    stack.pop_back();
    if (!n || std::find(seen.begin(), seen.end(), n) != seen.end()) continue;
    seen.push_back(n);
    out.push_back(n->name);
    for (auto it = n->next.rbegin(); it != n->next.rend(); ++it)
      if (it->fn) stack.push_back(it->fn.get());
  }
  return out;
}

using CgFn = std::function<Tensor(const std::vector<Tensor>&)>;

// d/dx_k of sum(grad f wrt x_wrt), by create_graph, against central differences of the
// first-order gradient, for every leaf k and element (float64 leaves).
inline void check_second_order(const CgFn& f, const std::vector<Shape>& shapes,
                               const std::vector<std::vector<double>>& values, size_t wrt) {
  std::vector<Tensor> xs;
  for (size_t i = 0; i < shapes.size(); ++i) xs.push_back(cg_leaf(shapes[i], values[i]));
  Tensor g = cg_grad(f(xs), {xs[wrt]}, true)[0];
  REQUIRE(g->requires_grad());
  autograd::BackwardRequest req;
  req.roots = {cg_total(g)};
  req.inputs = xs;
  req.capture = true;
  req.allow_unused = true;
  std::vector<Tensor> h = autograd::run_backward(req);
  // A leaf's .grad with a graph holds that graph, which holds the leaf: PyTorch's create_graph
  // reference cycle, broken as its docs advise (reset .grad after use).
  struct ResetGrads {
    std::vector<Tensor>& leaves;
    ~ResetGrads() {
      for (const Tensor& t : leaves) t->grad.reset();
    }
  } reset_grads{xs};
  for (size_t k = 0; k < xs.size(); ++k) {
    std::vector<double> analytic = h[k] ? to_values(h[k]) : std::vector<double>(values[k].size(), 0.0);
    for (size_t e = 0; e < values[k].size(); ++e) {
      const double eps = 1e-6;
      auto first = [&](double delta) {
        std::vector<Tensor> ys;
        for (size_t i = 0; i < shapes.size(); ++i) {
          std::vector<double> v = values[i];
          if (i == k) v[e] += delta;
          ys.push_back(cg_leaf(shapes[i], v));
        }
        Tensor gi = cg_grad(f(ys), {ys[wrt]}, false)[0];
        double s = 0;
        for (double v : to_values(gi)) s += v;
        return s;
      };
      const double numeric = (first(eps) - first(-eps)) / (2 * eps);
      INFO("input " << k << " element " << e);
      CHECK(analytic[e] == Approx(numeric).epsilon(1e-5).margin(1e-6));
    }
  }
}

}  // namespace agtrace::test
