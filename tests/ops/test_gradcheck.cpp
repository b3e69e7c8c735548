// Gradient checks by central differences in double for every differentiable op in
// lib/ops/ops.hpp (design note 8, cf. flashlight's jacobianTestImpl).
//
// For each case: float64 leaves, out = f(leaves), loss = sum(out * w) with a fixed
// weight tensor w whose entries are all different and non-zero (so every output element
// and its position matter), run the engine, and compare each leaf's .grad with
// (loss(x + h e_i) - loss(x - h e_i)) / 2h computed with grad mode off.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/engine.hpp"
#include "autograd/grad_mode.hpp"
#include "interp/value.hpp"
#include "ops/ops.hpp"
#include "support/gradcheck.hpp"
#include "tensor/tensor.hpp"

using agtrace::DType;
using agtrace::Shape;
using agtrace::Tensor;
using agtrace::Value;
namespace ops = agtrace::ops;
namespace autograd = agtrace::autograd;

namespace {

using namespace agtrace::test;

// A float64 leaf; requires_grad unless told otherwise.
Tensor leaf(const Shape& shape, const std::vector<double>& values, bool requires_grad = true) {
  REQUIRE(static_cast<int64_t>(values.size()) == agtrace::shape_numel(shape));
  Tensor t = agtrace::tensor_from_values(shape, DType::Float64, values);
  t->requires_grad_flag = requires_grad;
  return t;
}
Tensor leaf(const Shape& shape, double lo, double hi, bool requires_grad = true, double phase = 0.37) {
  return leaf64(shape, lo, hi, requires_grad, phase);
}

Value I(int64_t v) { return Value::integer(v); }
Value F(double v) { return Value::real(v); }
Tensor one() { return ops::wrap_number(I(1)); }
// A non-leaf copy of x (x * 1), so in-place ops are allowed on it.
Tensor nonleaf(const Tensor& x) { return ops::mul(x, one()); }
const std::optional<std::vector<int64_t>> kAll = std::nullopt;
std::optional<std::vector<int64_t>> dims(std::vector<int64_t> d) { return d; }

}  // namespace

// ---------------------------------------------------------------- arithmetic

TEST_CASE("gradcheck: add, incl. alpha, scalars and broadcasting", "[gradcheck][arith]") {
  check_gradients("x + y", {leaf({2, 3}, -1, 1), leaf({2, 3}, -2, 2, true, 0.7)},
                  [](const Inputs& in) { return ops::add(in[0], in[1], I(1)); });
  check_gradients("add alpha=2.5", {leaf({2, 3}, -1, 1), leaf({2, 3}, -2, 2, true, 0.7)},
                  [](const Inputs& in) { return ops::add(in[0], in[1], F(2.5)); });
  check_gradients("x + 2.0", {leaf({2, 3}, -1, 1)},
                  [](const Inputs& in) { return ops::add(in[0], ops::wrap_number(F(2.0)), I(1)); });
  check_gradients("[2,3] + [3]", {leaf({2, 3}, -1, 1), leaf({3}, -2, 2, true, 0.7)},
                  [](const Inputs& in) { return ops::add(in[0], in[1], I(1)); });
  check_gradients("[2,3] + [2,1], alpha=-3", {leaf({2, 3}, -1, 1), leaf({2, 1}, -2, 2, true, 0.7)},
                  [](const Inputs& in) { return ops::add(in[0], in[1], I(-3)); });
  check_gradients("[3] + [2,3]", {leaf({3}, -1, 1), leaf({2, 3}, -2, 2, true, 0.7)},
                  [](const Inputs& in) { return ops::add(in[0], in[1], I(1)); });
  check_gradients("[2,1] + [1,3]", {leaf({2, 1}, -1, 1), leaf({1, 3}, -2, 2, true, 0.7)},
                  [](const Inputs& in) { return ops::add(in[0], in[1], I(1)); });
  check_gradients("[2,3] + [3], only the bias requires grad", {leaf({2, 3}, -1, 1, false), leaf({3}, -2, 2, true, 0.7)},
                  [](const Inputs& in) { return ops::add(in[0], in[1], I(1)); });
}

TEST_CASE("gradcheck: sub and rsub", "[gradcheck][arith]") {
  check_gradients("x - y", {leaf({2, 3}, -1, 1), leaf({2, 3}, -2, 2, true, 0.7)},
                  [](const Inputs& in) { return ops::sub(in[0], in[1], I(1)); });
  check_gradients("sub alpha=2", {leaf({2, 3}, -1, 1), leaf({2, 3}, -2, 2, true, 0.7)},
                  [](const Inputs& in) { return ops::sub(in[0], in[1], I(2)); });
  check_gradients("sub alpha=0.25, [2,1] - [3]", {leaf({2, 1}, -1, 1), leaf({3}, -2, 2, true, 0.7)},
                  [](const Inputs& in) { return ops::sub(in[0], in[1], F(0.25)); });
  check_gradients("x - 1.5", {leaf({2, 3}, -1, 1)},
                  [](const Inputs& in) { return ops::sub(in[0], ops::wrap_number(F(1.5)), I(1)); });
  check_gradients("1.5 - x", {leaf({2, 3}, -1, 1)}, [](const Inputs& in) { return ops::rsub(in[0], F(1.5), I(1)); });
  check_gradients("rsub alpha=3", {leaf({2, 3}, -1, 1)}, [](const Inputs& in) { return ops::rsub(in[0], F(1.5), I(3)); });
}

TEST_CASE("gradcheck: mul", "[gradcheck][arith]") {
  check_gradients("x * y", {leaf({2, 3}, -1, 1), leaf({2, 3}, -2, 2, true, 0.7)},
                  [](const Inputs& in) { return ops::mul(in[0], in[1]); });
  check_gradients("x * x", {leaf({2, 3}, -1, 1)}, [](const Inputs& in) { return ops::mul(in[0], in[0]); });
  check_gradients("x * 3.0", {leaf({2, 3}, -1, 1)},
                  [](const Inputs& in) { return ops::mul(in[0], ops::wrap_number(F(3.0))); });
  check_gradients("[2,3] * [3]", {leaf({2, 3}, -1, 1), leaf({3}, -2, 2, true, 0.7)},
                  [](const Inputs& in) { return ops::mul(in[0], in[1]); });
  check_gradients("[2,3] * [2,1]", {leaf({2, 3}, -1, 1), leaf({2, 1}, -2, 2, true, 0.7)},
                  [](const Inputs& in) { return ops::mul(in[0], in[1]); });
  check_gradients("[2,1] * [2,3], only the second requires grad", {leaf({2, 1}, -1, 1, false), leaf({2, 3}, -2, 2)},
                  [](const Inputs& in) { return ops::mul(in[0], in[1]); });
}

TEST_CASE("gradcheck: div", "[gradcheck][arith]") {
  check_gradients("x / y", {leaf({2, 3}, -1, 1), leaf({2, 3}, 0.5, 2, true, 0.7)},
                  [](const Inputs& in) { return ops::div(in[0], in[1]); });
  check_gradients("x / 4.0", {leaf({2, 3}, -1, 1)},
                  [](const Inputs& in) { return ops::div(in[0], ops::wrap_number(F(4.0))); });
  check_gradients("[2,3] / [3]", {leaf({2, 3}, -1, 1), leaf({3}, 0.5, 2, true, 0.7)},
                  [](const Inputs& in) { return ops::div(in[0], in[1]); });
  check_gradients("[2,1] / [2,3]", {leaf({2, 1}, -1, 1), leaf({2, 3}, -2, -0.5, true, 0.7)},
                  [](const Inputs& in) { return ops::div(in[0], in[1]); });
  check_gradients("x / y, only y requires grad", {leaf({2, 3}, -1, 1, false), leaf({2, 3}, 0.5, 2, true, 0.7)},
                  [](const Inputs& in) { return ops::div(in[0], in[1]); });
}

TEST_CASE("gradcheck: neg and reciprocal", "[gradcheck][arith]") {
  check_gradients("-x", {leaf({2, 3}, -1, 1)}, [](const Inputs& in) { return ops::neg(in[0]); });
  check_gradients("reciprocal", {leaf({2, 3}, 0.4, 2)}, [](const Inputs& in) { return ops::reciprocal(in[0]); });
  check_gradients("reciprocal, negative", {leaf({3}, -2, -0.4)}, [](const Inputs& in) { return ops::reciprocal(in[0]); });
}

TEST_CASE("gradcheck: pow with a scalar exponent", "[gradcheck][arith]") {
  check_gradients("x ** 2", {leaf({2, 3}, -1, 1)}, [](const Inputs& in) { return ops::pow_scalar(in[0], I(2)); });
  check_gradients("x ** 3", {leaf({2, 3}, -1, 1)}, [](const Inputs& in) { return ops::pow_scalar(in[0], I(3)); });
  check_gradients("x ** -2", {leaf({2, 3}, 0.5, 2)}, [](const Inputs& in) { return ops::pow_scalar(in[0], I(-2)); });
  check_gradients("x ** 0.5", {leaf({2, 3}, 0.3, 2)}, [](const Inputs& in) { return ops::pow_scalar(in[0], F(0.5)); });
  check_gradients("x ** 2.5", {leaf({2, 3}, 0.3, 2)}, [](const Inputs& in) { return ops::pow_scalar(in[0], F(2.5)); });
  check_gradients("x ** 0 (zero gradient)", {leaf({2, 3}, -1, 1)},
                  [](const Inputs& in) { return ops::pow_scalar(in[0], I(0)); });
}

TEST_CASE("gradcheck: pow with a tensor exponent, and scalar ** tensor", "[gradcheck][arith]") {
  check_gradients("x ** e, both require grad", {leaf({2, 3}, 0.3, 2), leaf({2, 3}, -1.5, 2.5, true, 0.7)},
                  [](const Inputs& in) { return ops::pow_tensor(in[0], in[1]); });
  check_gradients("x ** e, only e requires grad", {leaf({2, 3}, 0.3, 2, false), leaf({2, 3}, -1.5, 2.5, true, 0.7)},
                  [](const Inputs& in) { return ops::pow_tensor(in[0], in[1]); });
  check_gradients("[2,3] ** [3]", {leaf({2, 3}, 0.3, 2), leaf({3}, -1.5, 2.5, true, 0.7)},
                  [](const Inputs& in) { return ops::pow_tensor(in[0], in[1]); });
  check_gradients("[2,1] ** [2,3]", {leaf({2, 1}, 0.3, 2), leaf({2, 3}, -1.5, 2.5, true, 0.7)},
                  [](const Inputs& in) { return ops::pow_tensor(in[0], in[1]); });
  check_gradients("2.0 ** x", {leaf({2, 3}, -1, 1)}, [](const Inputs& in) { return ops::rpow(F(2.0), in[0]); });
  check_gradients("0.5 ** x", {leaf({2, 3}, -1, 1)}, [](const Inputs& in) { return ops::rpow(F(0.5), in[0]); });
}

// ---------------------------------------------------------------- pointwise

TEST_CASE("gradcheck: exp, log, sqrt, tanh, sigmoid, relu", "[gradcheck][unary]") {
  check_gradients("exp", {leaf({2, 3}, -1, 1)}, [](const Inputs& in) { return ops::exp(in[0]); });
  check_gradients("log", {leaf({2, 3}, 0.2, 3)}, [](const Inputs& in) { return ops::log(in[0]); });
  check_gradients("sqrt", {leaf({2, 3}, 0.2, 3)}, [](const Inputs& in) { return ops::sqrt(in[0]); });
  check_gradients("tanh", {leaf({2, 3}, -2, 2)}, [](const Inputs& in) { return ops::tanh(in[0]); });
  check_gradients("sigmoid", {leaf({2, 3}, -3, 3)}, [](const Inputs& in) { return ops::sigmoid(in[0]); });
  // relu away from its kink at 0: both signs present, none within 0.1 of zero.
  check_gradients("relu", {leaf({2, 3}, {-0.9, 0.4, -0.2, 0.7, 1.3, -1.1})},
                  [](const Inputs& in) { return ops::relu(in[0]); });
  check_gradients("exp of a transposed view", {leaf({2, 3}, -1, 1)},
                  [](const Inputs& in) { return ops::exp(ops::t(in[0])); });
}

TEST_CASE("relu keeps NaN and -0.0, and passes the gradient at NaN, as torch.relu", "[unary][fidelity]") {
  // Measured in torch 1.13: relu([nan, -1, 2, -0.0, 0]) = [nan, 0, 2, -0.0, 0] (clamp_min);
  // its gradient threshold_backward(grad, result, 0) = [1, 0, 1, 0, 0].
  const double nan = std::nan("");
  Tensor x = agtrace::tensor_from_values({5}, DType::Float32, {nan, -1.0, 2.0, -0.0, 0.0});
  x->requires_grad_flag = true;
  Tensor y = ops::relu(x);
  const std::vector<double> v = agtrace::to_values(y);
  CHECK(std::isnan(v[0]));
  CHECK(v[1] == 0.0);
  CHECK(v[2] == 2.0);
  CHECK(v[3] == 0.0);
  CHECK(std::signbit(v[3]));
  CHECK_FALSE(std::signbit(v[4]));
  autograd::BackwardRequest req;
  req.roots = {ops::sum(y, std::nullopt, false)};
  req.grad_roots = {nullptr};
  autograd::run_backward(req);
  REQUIRE(x->grad);
  CHECK(agtrace::to_values(x->grad) == std::vector<double>{1.0, 0.0, 1.0, 0.0, 0.0});
}

// ---------------------------------------------------------------- reductions

TEST_CASE("gradcheck: sum", "[gradcheck][reduce]") {
  check_gradients("sum()", {leaf({2, 3}, -1, 1)}, [](const Inputs& in) { return ops::sum(in[0], kAll, false); });
  check_gradients("sum(dim=1)", {leaf({2, 3}, -1, 1)},
                  [](const Inputs& in) { return ops::sum(in[0], dims({1}), false); });
  check_gradients("sum(dim=0, keepdim)", {leaf({2, 3}, -1, 1)},
                  [](const Inputs& in) { return ops::sum(in[0], dims({0}), true); });
  check_gradients("sum(dim=-1)", {leaf({2, 3}, -1, 1)},
                  [](const Inputs& in) { return ops::sum(in[0], dims({-1}), false); });
  check_gradients("sum(dim=(0, 2)) of [2,3,4]", {leaf({2, 3, 4}, -1, 1)},
                  [](const Inputs& in) { return ops::sum(in[0], dims({0, 2}), false); });
  check_gradients("sum(dim=(-1, 1), keepdim) of [2,3,4]", {leaf({2, 3, 4}, -1, 1)},
                  [](const Inputs& in) { return ops::sum(in[0], dims({-1, 1}), true); });
}

TEST_CASE("gradcheck: mean", "[gradcheck][reduce]") {
  check_gradients("mean()", {leaf({2, 3}, -1, 1)}, [](const Inputs& in) { return ops::mean(in[0], kAll, false); });
  check_gradients("mean(dim=0)", {leaf({2, 3}, -1, 1)},
                  [](const Inputs& in) { return ops::mean(in[0], dims({0}), false); });
  check_gradients("mean(dim=1, keepdim)", {leaf({2, 3}, -1, 1)},
                  [](const Inputs& in) { return ops::mean(in[0], dims({1}), true); });
  check_gradients("mean(dim=-2) of [2,3,4]", {leaf({2, 3, 4}, -1, 1)},
                  [](const Inputs& in) { return ops::mean(in[0], dims({-2}), false); });
  check_gradients("mean(dim=(0, 2)) of [2,3,4]", {leaf({2, 3, 4}, -1, 1)},
                  [](const Inputs& in) { return ops::mean(in[0], dims({0, 2}), false); });
}

// ---------------------------------------------------------------- matrix products

TEST_CASE("gradcheck: mm and 2-D matmul", "[gradcheck][linalg]") {
  check_gradients("mm", {leaf({2, 3}, -1, 1), leaf({3, 4}, -0.5, 0.9, true, 0.7)},
                  [](const Inputs& in) { return ops::mm(in[0], in[1]); });
  check_gradients("mm, only self requires grad", {leaf({2, 3}, -1, 1), leaf({3, 4}, -0.5, 0.9, false, 0.7)},
                  [](const Inputs& in) { return ops::mm(in[0], in[1]); });
  check_gradients("mm, only mat2 requires grad", {leaf({2, 3}, -1, 1, false), leaf({3, 4}, -0.5, 0.9, true, 0.7)},
                  [](const Inputs& in) { return ops::mm(in[0], in[1]); });
  check_gradients("mm with a transposed mat2", {leaf({2, 3}, -1, 1), leaf({4, 3}, -0.5, 0.9, true, 0.7)},
                  [](const Inputs& in) { return ops::mm(in[0], ops::t(in[1])); });
  check_gradients("matmul 2-D", {leaf({2, 3}, -1, 1), leaf({3, 4}, -0.5, 0.9, true, 0.7)},
                  [](const Inputs& in) { return ops::matmul(in[0], in[1]); });
  check_gradients("x @ W + b, then tanh", {leaf({2, 3}, -1, 1), leaf({3, 4}, -0.5, 0.9, true, 0.7), leaf({4}, -0.2, 0.3)},
                  [](const Inputs& in) { return ops::tanh(ops::add(ops::matmul(in[0], in[1]), in[2], I(1))); });
}

// ---------------------------------------------------------------- views and copies

TEST_CASE("gradcheck: view and reshape", "[gradcheck][views]") {
  check_gradients("view(3, 2)", {leaf({2, 3}, -1, 1)}, [](const Inputs& in) { return ops::view(in[0], {3, 2}); });
  check_gradients("view(-1)", {leaf({2, 3}, -1, 1)}, [](const Inputs& in) { return ops::view(in[0], {-1}); });
  check_gradients("view(6, 4) of [2,3,4]", {leaf({2, 3, 4}, -1, 1)},
                  [](const Inputs& in) { return ops::view(in[0], {6, 4}); });
  check_gradients("reshape(6), contiguous", {leaf({2, 3}, -1, 1)},
                  [](const Inputs& in) { return ops::reshape(in[0], {6}); });
  check_gradients("reshape(6) of x.t(), not contiguous", {leaf({2, 3}, -1, 1)},
                  [](const Inputs& in) { return ops::reshape(ops::t(in[0]), {6}); });
  check_gradients("reshape(2, 3) of x.t()", {leaf({2, 3}, -1, 1)},
                  [](const Inputs& in) { return ops::reshape(ops::t(in[0]), {2, 3}); });
  check_gradients("reshape(4, -1) of a transposed [2,3,4]", {leaf({2, 3, 4}, -1, 1)},
                  [](const Inputs& in) { return ops::reshape(ops::transpose(in[0], 0, 2), {4, -1}); });
}

TEST_CASE("gradcheck: t and transpose", "[gradcheck][views]") {
  check_gradients("t()", {leaf({2, 3}, -1, 1)}, [](const Inputs& in) { return ops::t(in[0]); });
  check_gradients("t() of a 1-D tensor", {leaf({3}, -1, 1)}, [](const Inputs& in) { return ops::t(in[0]); });
  check_gradients("transpose(0, 1)", {leaf({2, 3}, -1, 1)},
                  [](const Inputs& in) { return ops::transpose(in[0], 0, 1); });
  check_gradients("transpose(0, 2) of [2,3,4]", {leaf({2, 3, 4}, -1, 1)},
                  [](const Inputs& in) { return ops::transpose(in[0], 0, 2); });
  check_gradients("transpose(-1, -2) of [2,3,4]", {leaf({2, 3, 4}, -1, 1)},
                  [](const Inputs& in) { return ops::transpose(in[0], -1, -2); });
}

TEST_CASE("gradcheck: select and slice", "[gradcheck][views]") {
  check_gradients("select(0, 1)", {leaf({2, 3}, -1, 1)}, [](const Inputs& in) { return ops::select(in[0], 0, 1); });
  check_gradients("select(1, -1)", {leaf({2, 3}, -1, 1)}, [](const Inputs& in) { return ops::select(in[0], 1, -1); });
  check_gradients("select(-1, 0)", {leaf({2, 3}, -1, 1)}, [](const Inputs& in) { return ops::select(in[0], -1, 0); });
  check_gradients("select(1, 2) of [2,3,4]", {leaf({2, 3, 4}, -1, 1)},
                  [](const Inputs& in) { return ops::select(in[0], 1, 2); });
  check_gradients("x[:, 1:3]", {leaf({2, 3}, -1, 1)},
                  [](const Inputs& in) { return ops::slice(in[0], 1, 1, 3, 1); });
  check_gradients("x[:, ::2]", {leaf({2, 3}, -1, 1)},
                  [](const Inputs& in) { return ops::slice(in[0], 1, std::nullopt, std::nullopt, 2); });
  check_gradients("x[:, -2:]", {leaf({2, 3}, -1, 1)},
                  [](const Inputs& in) { return ops::slice(in[0], 1, -2, std::nullopt, 1); });
  check_gradients("x[:, :-1]", {leaf({2, 3}, -1, 1)},
                  [](const Inputs& in) { return ops::slice(in[0], 1, std::nullopt, -1, 1); });
  check_gradients("slice(dim=-1, 1, 4, step 2) of [2,3,5]", {leaf({2, 3, 5}, -1, 1)},
                  [](const Inputs& in) { return ops::slice(in[0], -1, 1, 4, 2); });
  check_gradients("x[1:, 0] of [3,4] (slice then select)", {leaf({3, 4}, -1, 1)},
                  [](const Inputs& in) { return ops::select(ops::slice(in[0], 0, 1, std::nullopt, 1), 1, 0); });
}

TEST_CASE("gradcheck: clone", "[gradcheck][views]") {
  check_gradients("clone", {leaf({2, 3}, -1, 1)}, [](const Inputs& in) { return ops::clone(in[0]); });
  check_gradients("clone of x.t()", {leaf({2, 3}, -1, 1)}, [](const Inputs& in) { return ops::clone(ops::t(in[0])); });
}

// ---------------------------------------------------------------- in-place ops on a non-leaf

TEST_CASE("gradcheck: add_ and sub_", "[gradcheck][inplace]") {
  check_gradients("h.add_(y)", {leaf({2, 3}, -1, 1), leaf({2, 3}, -2, 2, true, 0.7)}, [](const Inputs& in) {
    Tensor h = nonleaf(in[0]);
    ops::add_(h, in[1], I(1));
    return h;
  });
  check_gradients("h.add_(r, alpha=2), r [3]", {leaf({2, 3}, -1, 1), leaf({3}, -2, 2, true, 0.7)},
                  [](const Inputs& in) {
                    Tensor h = nonleaf(in[0]);
                    ops::add_(h, in[1], I(2));
                    return h;
                  });
  check_gradients("h.add_(1.0)", {leaf({2, 3}, -1, 1)}, [](const Inputs& in) {
    Tensor h = nonleaf(in[0]);
    ops::add_(h, ops::wrap_number(F(1.0)), I(1));
    return h;
  });
  check_gradients("h.sub_(y, alpha=0.5)", {leaf({2, 3}, -1, 1), leaf({2, 3}, -2, 2, true, 0.7)},
                  [](const Inputs& in) {
                    Tensor h = nonleaf(in[0]);
                    ops::sub_(h, in[1], F(0.5));
                    return h;
                  });
}

TEST_CASE("gradcheck: mul_ and div_", "[gradcheck][inplace]") {
  // Both operands require grad, so mul_ saves a clone of the old self.
  check_gradients("h.mul_(y)", {leaf({2, 3}, -1, 1), leaf({2, 3}, -2, 2, true, 0.7)}, [](const Inputs& in) {
    Tensor h = nonleaf(in[0]);
    ops::mul_(h, in[1]);
    return h;
  });
  check_gradients("h.mul_(r), r [2,1]", {leaf({2, 3}, -1, 1), leaf({2, 1}, -2, 2, true, 0.7)},
                  [](const Inputs& in) {
                    Tensor h = nonleaf(in[0]);
                    ops::mul_(h, in[1]);
                    return h;
                  });
  check_gradients("h.mul_(y), only y requires grad", {leaf({2, 3}, -1, 1, false), leaf({2, 3}, -2, 2, true, 0.7)},
                  [](const Inputs& in) {
                    Tensor h = nonleaf(in[0]);
                    ops::mul_(h, in[1]);
                    return h;
                  });
  check_gradients("h.mul_(2.0)", {leaf({2, 3}, -1, 1)}, [](const Inputs& in) {
    Tensor h = nonleaf(in[0]);
    ops::mul_(h, ops::wrap_number(F(2.0)));
    return h;
  });
  check_gradients("h.div_(y)", {leaf({2, 3}, -1, 1), leaf({2, 3}, 0.5, 2, true, 0.7)}, [](const Inputs& in) {
    Tensor h = nonleaf(in[0]);
    ops::div_(h, in[1]);
    return h;
  });
  check_gradients("h.div_(r), r [3]", {leaf({2, 3}, -1, 1), leaf({3}, -2, -0.5, true, 0.7)},
                  [](const Inputs& in) {
                    Tensor h = nonleaf(in[0]);
                    ops::div_(h, in[1]);
                    return h;
                  });
}

TEST_CASE("gradcheck: relu_, exp_, sigmoid_, tanh_, zero_", "[gradcheck][inplace]") {
  check_gradients("h.relu_()", {leaf({2, 3}, {-0.9, 0.4, -0.2, 0.7, 1.3, -1.1})}, [](const Inputs& in) {
    Tensor h = nonleaf(in[0]);
    ops::relu_(h);
    return h;
  });
  check_gradients("h.exp_()", {leaf({2, 3}, -1, 1)}, [](const Inputs& in) {
    Tensor h = nonleaf(in[0]);
    ops::exp_(h);
    return h;
  });
  check_gradients("h.sigmoid_()", {leaf({2, 3}, -3, 3)}, [](const Inputs& in) {
    Tensor h = nonleaf(in[0]);
    ops::sigmoid_(h);
    return h;
  });
  check_gradients("h.tanh_()", {leaf({2, 3}, -2, 2)}, [](const Inputs& in) {
    Tensor h = nonleaf(in[0]);
    ops::tanh_(h);
    return h;
  });
  check_gradients("h.zero_() then h + x", {leaf({2, 3}, -1, 1)}, [](const Inputs& in) {
    Tensor h = nonleaf(in[0]);
    ops::zero_(h);
    return ops::add(h, ops::mul(in[0], in[0]), I(1));
  });
  check_gradients("h.add_(y).tanh_() (two in-place ops in a row)", {leaf({2, 3}, -1, 1), leaf({3}, -1, 1, true, 0.7)},
                  [](const Inputs& in) {
                    Tensor h = nonleaf(in[0]);
                    ops::add_(h, in[1], I(1));
                    ops::tanh_(h);
                    return h;
                  });
}

// ---------------------------------------------------------------- composites

TEST_CASE("gradcheck: a leaf used on several paths sums its gradients", "[gradcheck]") {
  check_gradients("x * exp(x) + x.t().sum(1)", {leaf({2, 3}, -1, 1)}, [](const Inputs& in) {
    Tensor a = ops::mul(in[0], ops::exp(in[0]));
    Tensor b = ops::sum(ops::t(in[0]), dims({1}), false);  // [3]
    return ops::add(a, b, I(1));
  });
  check_gradients("sigmoid(x @ W).mean(1) / (W ** 2).sum()",
                  {leaf({2, 3}, -1, 1), leaf({3, 4}, -0.5, 0.9, true, 0.7)}, [](const Inputs& in) {
                    Tensor m = ops::mean(ops::sigmoid(ops::mm(in[0], in[1])), dims({1}), false);
                    return ops::div(m, ops::sum(ops::pow_scalar(in[1], I(2)), kAll, false));
                  });
}
