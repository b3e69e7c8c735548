// create_graph=True (lib/autograd/engine.cpp with Node::differentiable_backward): the
// gradient computation records a graph with PyTorch 1.13's node names, and second-order
// gradients through it match central differences and values measured with torch 1.13.
#include <catch2/catch.hpp>

#include <cmath>
#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "autograd/engine.hpp"
#include "errors.hpp"
#include "interp/value.hpp"
#include "ops/activations.hpp"
#include "ops/nn.hpp"
#include "ops/ops.hpp"
#include "ops/shapes.hpp"
#include "tensor/tensor.hpp"
#include "support/create_graph.hpp"

using agtrace::DType;
using agtrace::ScenarioError;
using agtrace::Shape;
using agtrace::Tensor;
using agtrace::Value;
namespace ops = agtrace::ops;
namespace autograd = agtrace::autograd;

namespace {

const std::optional<std::vector<int64_t>> kAll = std::nullopt;
Tensor leaf(const Shape& shape, const std::vector<double>& v, DType d = DType::Float64) {
  return agtrace::test::cg_leaf(shape, v, d);
}
Tensor total(const Tensor& t) { return agtrace::test::cg_total(t); }
std::vector<Tensor> grad(const Tensor& root, const std::vector<Tensor>& inputs, bool create_graph) {
  return agtrace::test::cg_grad(root, inputs, create_graph);
}
void backward(const Tensor& root, bool create_graph) { agtrace::test::cg_backward(root, create_graph); }
std::vector<std::string> walk(const Tensor& t) { return agtrace::test::cg_walk(t); }
using Fn = agtrace::test::CgFn;
using agtrace::test::check_second_order;

Value I(int64_t v) { return Value::integer(v); }
Value R(double v) { return Value::real(v); }

}  // namespace

TEST_CASE("create_graph: pow's gradient graph is MulBackward0 > MulBackward1 > PowBackward0", "[create_graph]") {
  // Measured (torch 1.13): y = (x ** 3).sum(); g, = autograd.grad(y, [x], create_graph=True):
  // MulBackward0 > MulBackward1 (_saved_other 3.0) > PowBackward0 (_saved_exponent 2.0).
  Tensor x = leaf({3}, {0.5, 1.5, -2.0}, DType::Float32);
  Tensor g = grad(total(ops::pow_scalar(x, I(3))), {x}, true)[0];
  CHECK(walk(g) == std::vector<std::string>{"MulBackward0", "MulBackward1", "PowBackward0", "AccumulateGrad"});
  auto* mul1 = g->grad_fn->next[1].fn.get();
  CHECK(autograd::attr_repr(mul1->attr("other")) == "3.0");
  CHECK(autograd::attr_repr(mul1->next[0].fn->attr("exponent")) == "2.0");
  CHECK(agtrace::to_values(g) == std::vector<double>{0.75, 6.75, 12.0});
  std::vector<Tensor> h = grad(total(g), {x}, false);
  CHECK(agtrace::to_values(h[0]) == std::vector<double>{3.0, 9.0, -12.0});  // torch: [3., 9., -12.]
}

TEST_CASE("create_graph: node names of each formula's gradient graph", "[create_graph]") {
  Tensor x = leaf({2, 3}, {0.5, 1.5, -2.0, 1.0, -0.3, 2.5}, DType::Float32);
  Tensor p = leaf({2, 3}, {0.5, 1.5, 2.0, 1.0, 0.3, 2.5}, DType::Float32);
  Tensor w = leaf({3, 2}, {0.2, -1.0, 0.7, 0.4, 1.1, -0.6}, DType::Float32);
  using V = std::vector<std::string>;
  // All measured with torch 1.13 (walk of g.grad_fn).
  CHECK(walk(grad(total(ops::mul(x, x)), {x}, true)[0]) ==
        V{"AddBackward0", "MulBackward0", "AccumulateGrad", "MulBackward0"});
  CHECK(walk(grad(total(ops::div(x, p)), {x}, true)[0]) == V{"DivBackward0", "AccumulateGrad"});
  CHECK(walk(grad(total(ops::exp(x)), {x}, true)[0]) == V{"MulBackward0", "ExpBackward0", "AccumulateGrad"});
  CHECK(walk(grad(total(ops::log(p)), {p}, true)[0]) == V{"DivBackward0", "AccumulateGrad"});
  CHECK(walk(grad(total(ops::sqrt(p)), {p}, true)[0]) ==
        V{"DivBackward0", "MulBackward1", "SqrtBackward0", "AccumulateGrad"});
  CHECK(walk(grad(total(ops::tanh(x)), {x}, true)[0]) == V{"TanhBackwardBackward0", "TanhBackward0", "AccumulateGrad"});
  CHECK(walk(grad(total(ops::sigmoid(x)), {x}, true)[0]) ==
        V{"SigmoidBackwardBackward0", "SigmoidBackward0", "AccumulateGrad"});
  CHECK(walk(grad(total(ops::relu(x)), {x}, true)[0]) ==
        V{"ThresholdBackwardBackward0", "ReluBackward0", "AccumulateGrad"});
  CHECK(walk(grad(total(ops::mm(x, w)), {x}, true)[0]) == V{"MmBackward0", "TBackward0", "AccumulateGrad"});
  CHECK(walk(grad(total(ops::pow_scalar(ops::sum(x, std::vector<int64_t>{1}, false), I(2))), {x}, true)[0]) ==
        V{"ExpandBackward0", "UnsqueezeBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "SumBackward1",
          "AccumulateGrad"});
  CHECK(walk(grad(ops::pow_scalar(ops::mean(x, kAll, false), I(2)), {x}, true)[0]) ==
        V{"DivBackward1", "ExpandBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "MeanBackward0",
          "AccumulateGrad"});
  CHECK(walk(grad(total(ops::mul(ops::view(x, {6}), ops::view(x, {6}))), {x}, true)[0]) ==
        V{"AddBackward0", "ReshapeAliasBackward0", "MulBackward0", "ViewBackward0", "AccumulateGrad",
          "ReshapeAliasBackward0", "MulBackward0", "ViewBackward0"});
  // Sub's gradient for other is -grad (NegBackward0); add with alpha 2 multiplies by a Scalar.
  CHECK(walk(grad(total(ops::pow_scalar(ops::sub(x, p, I(1)), I(2))), {p}, true)[0]) ==
        V{"NegBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "SubBackward0", "AccumulateGrad",
          "AccumulateGrad"});
  // The tensor gradient of a wrapped number operand is not needed: no graph at all.
  Tensor gs = grad(total(ops::mul(x, ops::wrap_number(R(3.0)))), {x}, true)[0];
  CHECK_FALSE(gs->requires_grad());
}

TEST_CASE("create_graph: second-order gradients match central differences", "[create_graph]") {
  const std::vector<double> a{0.5, 1.5, -2.0, 1.0, -0.3, 2.5};
  const std::vector<double> b{0.5, 1.5, 2.0, 1.0, 0.3, 2.5};
  const std::vector<double> m{0.2, -1.0, 0.7, 0.4, 1.1, -0.6};
  const Shape s23{2, 3}, s32{3, 2};
  auto sq = [](const Tensor& t) { return ops::pow_scalar(t, I(2)); };
  SECTION("add / sub / neg / mul / div") {
    Fn f = [&](const std::vector<Tensor>& x) {
      Tensor y = ops::add(sq(ops::add(x[0], x[1], I(2))), sq(ops::sub(x[0], x[1], R(0.5))), I(1));
      y = ops::add(y, ops::mul(ops::neg(x[0]), ops::div(x[0], x[1])), I(1));
      y = ops::add(y, ops::mul(ops::mul(x[0], x[1]), x[1]), I(1));
      return total(y);
    };
    check_second_order(f, {s23, s23}, {a, b}, 0);
    check_second_order(f, {s23, s23}, {a, b}, 1);
  }
  SECTION("pointwise") {
    Fn f = [&](const std::vector<Tensor>& x) {
      Tensor y = ops::add(ops::exp(x[0]), sq(ops::log(x[1])), I(1));
      y = ops::add(y, ops::mul(ops::sqrt(x[1]), x[0]), I(1));
      y = ops::add(y, ops::mul(ops::tanh(x[0]), x[1]), I(1));
      y = ops::add(y, ops::mul(ops::sigmoid(x[0]), x[0]), I(1));
      y = ops::add(y, ops::mul(ops::relu(x[0]), x[1]), I(1));
      y = ops::add(y, ops::pow_scalar(x[1], R(2.5)), I(1));
      return total(y);
    };
    check_second_order(f, {s23, s23}, {a, b}, 0);
    check_second_order(f, {s23, s23}, {a, b}, 1);
  }
  SECTION("reductions, mm and views") {
    Fn f = [&](const std::vector<Tensor>& x) {
      Tensor y = sq(total(x[0]));
      y = ops::add(y, total(sq(ops::sum(x[0], std::vector<int64_t>{1}, false))), I(1));
      y = ops::add(y, total(sq(ops::sum(x[0], std::vector<int64_t>{0, 1}, true))), I(1));
      y = ops::add(y, sq(ops::mean(x[0], kAll, false)), I(1));
      y = ops::add(y, total(sq(ops::mean(x[0], std::vector<int64_t>{0}, false))), I(1));
      y = ops::add(y, total(sq(ops::mm(x[0], x[1]))), I(1));
      y = ops::add(y, total(ops::mul(ops::t(x[0]), x[1])), I(1));
      y = ops::add(y, total(sq(ops::mul(ops::view(x[0], {6}), ops::reshape(x[1], {6})))), I(1));
      y = ops::add(y, total(sq(ops::transpose(x[0], 0, 1))), I(1));
      return y;
    };
    check_second_order(f, {s23, s32}, {a, m}, 0);
    check_second_order(f, {s23, s32}, {a, m}, 1);
  }
}

TEST_CASE("create_graph: second-order values measured with torch 1.13", "[create_graph]") {
  Tensor x = leaf({3}, {0.5, 1.5, -2.0}, DType::Float32);
  auto second = [&](const Tensor& y) {
    Tensor g = grad(y, {x}, true)[0];
    return agtrace::to_values(grad(total(g), {x}, false)[0]);
  };
  auto near = [](const std::vector<double>& got, const std::vector<double>& want) {
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-5).margin(1e-6));
  };
  near(second(total(ops::tanh(x))), {-0.726862, -0.3271326, 0.1362187});
  near(second(total(ops::sigmoid(x))), {-0.0575568, -0.09473022, 0.0799625});
  near(second(total(ops::pow_scalar(ops::relu(x), I(2)))), {2.0, 2.0, 0.0});
  near(second(total(ops::mul(ops::exp(x), x))), {4.121803, 15.68591, 0.0});
}

TEST_CASE("create_graph: backward(create_graph=True) leaves a .grad with a graph", "[create_graph]") {
  // Measured: y.backward(create_graph=True) on a fresh leaf gives x.grad.grad_fn
  // CopyBackwards, next_functions ((None, 0), (MulBackward0, 0)); a second one gives
  // AddBackward0 (x.grad + new, _saved_alpha 1) over (CopyBackwards, ...); a gradient without
  // a graph is copied without one.
  Tensor z = leaf({3}, {0.5, 1.5, -2.0}, DType::Float32);
  backward(total(ops::pow_scalar(z, I(3))), true);
  REQUIRE(z->grad);
  REQUIRE(z->grad->grad_fn);
  CHECK(z->grad->grad_fn->name == "CopyBackwards");
  CHECK(z->grad->grad_fn->qualified_name() == "torch::autograd::CopyBackwards");
  CHECK_FALSE(z->grad->grad_fn->next[0].fn);
  CHECK(z->grad->grad_fn->next[1].fn->name == "MulBackward0");
  Tensor first = z->grad;
  backward(total(ops::mul(z, z)), true);
  CHECK(z->grad != first);
  CHECK(z->grad->grad_fn->name == "AddBackward0");
  CHECK(autograd::attr_repr(z->grad->grad_fn->attr("alpha")) == "1");
  CHECK(z->grad->grad_fn->next[0].fn->name == "CopyBackwards");
  CHECK(agtrace::to_values(z->grad) == std::vector<double>{1.75, 9.75, 8.0});
  Tensor zg = z->grad;
  z->grad = nullptr;
  backward(total(zg), false);
  CHECK(agtrace::to_values(z->grad) == std::vector<double>{5.0, 11.0, -10.0});  // torch: 3*2z + 2

  Tensor w = leaf({2}, {1.0, 2.0}, DType::Float32);
  backward(total(ops::mul(w, ops::wrap_number(Value::real(3.0)))), true);
  CHECK_FALSE(w->grad->grad_fn);
  CHECK_FALSE(w->grad->requires_grad());
}

TEST_CASE("create_graph: a node without a differentiable formula raises unsupported", "[create_graph]") {
  Tensor z = leaf({1, 1, 3, 3}, {0.5, 1.5, 2.0, -0.5, 1.0, 0.25, 0.75, -1.0, 0.3}, DType::Float32);
  Tensor k = leaf({1, 1, 2, 2}, {0.2, -0.4, 0.6, 0.1}, DType::Float32);
  // ConvolutionBackward0 has one (ConvolutionBackwardBackward0); that node has none.
  Tensor y = ops::conv2d(z, k, nullptr, ops::Conv2dArgs{});
  Tensor g = grad(total(ops::mul(y, y)), {z}, true)[0];
  try {
    grad(total(ops::mul(g, g)), {z}, true);
    FAIL("expected unsupported");
  } catch (const ScenarioError& e) {
    CHECK(e.kind == "unsupported");
    CHECK(std::string(e.what()).find("create_graph=True through ConvolutionBackwardBackward0 is not supported yet") !=
          std::string::npos);
  }
}
