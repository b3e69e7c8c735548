// Pointwise math, activations, reductions and selection (lib/ops/activations.cpp):
//  - gradient checks by central differences in float64 (loss = sum(op(x) * w) with a fixed,
//    non-trivial w; h = 1e-6) for every differentiable op;
//  - values PyTorch 1.13 computes at the awkward points (ties, zeros, bounds), measured
//    with /usr/bin/python3 and torch;
//  - fidelity: node names, next_functions, saved attribute names (dir() order),
//    definedness, identity of unpacked saved tensors, attribute values and errors, each
//    checked against real torch 1.13 first.
#include <catch2/catch.hpp>

#include "support/node_checks.hpp"

#include "support/gradcheck.hpp"
#include "support/bf16_kernels.hpp"

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "autograd/engine.hpp"
#include "autograd/grad_mode.hpp"
#include "autograd/node.hpp"
#include "errors.hpp"
#include "interp/value.hpp"
#include "ops/activations.hpp"
#include "ops/ops.hpp"
#include "tensor/tensor.hpp"

using agtrace::DType;
using agtrace::ScenarioError;
using agtrace::Shape;
using agtrace::Tensor;
using agtrace::Value;
using agtrace::autograd::AttrValue;
using agtrace::autograd::Node;
namespace ops = agtrace::ops;
namespace autograd = agtrace::autograd;

using namespace agtrace::test;

namespace {


// ---------------------------------------------------------------- leaves

// Fractional parts of a golden-ratio sequence: deterministic, no two values equal.

// A float64 leaf with values spread over [lo, hi] in a non-monotone order.

Tensor values(const Shape& shape, const std::vector<double>& v, DType d = DType::Float32, bool requires_grad = false) {
  Tensor t = agtrace::tensor_from_values(shape, d, v);
  t->requires_grad_flag = requires_grad;
  return t;
}

// torch.linspace(lo, hi, numel).reshape(shape) (the oracle's A(...)), float32.
Tensor A(const Shape& shape, double lo = -1.0, double hi = 1.0, bool requires_grad = true) {
  return linspace_leaf(shape, lo, hi, requires_grad);
}

Value I(int64_t v) { return Value::integer(v); }
Value F(double v) { return Value::real(v); }
Value S(const std::string& s) { return Value::str(s); }
const Value kNone = Value::none();

// ---------------------------------------------------------------- gradient check

// w: magnitudes in [0.5, 1.5), alternating sign, all different.


void run_backward_of(const Tensor& root) {
  autograd::BackwardRequest req;
  req.roots = {root};
  autograd::run_backward(req);
}

// Compares each leaf's .grad from the engine with central differences of the weighted
// loss (grad mode off), element by element.

// Gradient of sum(op(x) * [1, 2, 3, ...]) (the weights the torch measurements used).
std::vector<double> grad_with_arange_weights(const Tensor& x, const std::function<Tensor(const Tensor&)>& f) {
  x->grad.reset();
  Tensor out = f(x);
  std::vector<double> w;
  for (int64_t i = 0; i < out->numel(); ++i) w.push_back(static_cast<double>(i + 1));
  run_backward_of(ops::sum(ops::mul(out, values(out->sizes, w, out->dtype())), std::nullopt, false));
  return x->grad ? agtrace::to_values(x->grad) : std::vector<double>{};
}

void check_values(const std::vector<double>& got, const std::vector<double>& want, double eps = 1e-6) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    if (std::isnan(want[i]))
      CHECK(std::isnan(got[i]));
    else if (std::isinf(want[i]))
      CHECK(got[i] == want[i]);
    else
      CHECK(got[i] == Approx(want[i]).epsilon(eps).margin(1e-6));
  }
}

// ---------------------------------------------------------------- node introspection






constexpr const char* kAcc = "AccumulateGrad";

// The error kind an op raises ("" when it does not raise).
std::string error_kind(const std::function<void()>& f) {
  try {
    f();
  } catch (const ScenarioError& e) {
    return e.kind;
  }
  return "";
}
std::string error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const ScenarioError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// ================================================================ gradient checks

TEST_CASE("activations gradcheck: abs sin cos rsqrt", "[activations][gradcheck]") {
  // abs away from its kink at 0.
  check_gradients("abs", {values({2, 3}, {-1.3, -0.4, 0.2, 0.9, -2.1, 1.7}, DType::Float64, true)},
            [](const Inputs& in) { return ops::abs(in[0]); });
  check_gradients("sin", {leaf64({2, 3}, -3, 3)}, [](const Inputs& in) { return ops::sin(in[0]); });
  check_gradients("cos", {leaf64({2, 3}, -3, 3)}, [](const Inputs& in) { return ops::cos(in[0]); });
  check_gradients("rsqrt", {leaf64({2, 3}, 0.3, 3)}, [](const Inputs& in) { return ops::rsqrt(in[0]); });
  check_gradients("sin of a non-leaf", {leaf64({4}, -2, 2)},
            [](const Inputs& in) { return ops::sin(ops::mul(in[0], in[0])); });
}

TEST_CASE("activations gradcheck: clamp with both, one or the other bound", "[activations][gradcheck]") {
  // Values chosen away from the bounds (the gradient jumps there).
  const std::vector<double> v{-1.3, -0.4, 0.2, 0.9, -0.1, 0.45, 1.7, -0.7};
  check_gradients("clamp(-0.5, 0.5)", {values({2, 4}, v, DType::Float64, true)},
            [](const Inputs& in) { return ops::clamp(in[0], F(-0.5), F(0.5)); });
  check_gradients("clamp(min=0.0)", {values({2, 4}, v, DType::Float64, true)},
            [](const Inputs& in) { return ops::clamp(in[0], F(0.0), kNone); });
  check_gradients("clamp(max=0.3)", {values({2, 4}, v, DType::Float64, true)},
            [](const Inputs& in) { return ops::clamp(in[0], kNone, F(0.3)); });
  check_gradients("clamp(-1, 1) with int bounds", {values({2, 4}, v, DType::Float64, true)},
            [](const Inputs& in) { return ops::clamp(in[0], I(-1), I(1)); });
}

TEST_CASE("activations gradcheck: leaky_relu gelu silu", "[activations][gradcheck]") {
  const std::vector<double> v{-1.3, -0.4, 0.2, 0.9, -2.1, 1.7};
  check_gradients("leaky_relu 0.01", {values({2, 3}, v, DType::Float64, true)},
            [](const Inputs& in) { return ops::leaky_relu(in[0], F(0.01)); });
  check_gradients("leaky_relu 0.2", {values({2, 3}, v, DType::Float64, true)},
            [](const Inputs& in) { return ops::leaky_relu(in[0], F(0.2)); });
  check_gradients("leaky_relu slope 2 (int)", {values({2, 3}, v, DType::Float64, true)},
            [](const Inputs& in) { return ops::leaky_relu(in[0], I(2)); });
  check_gradients("gelu none", {leaf64({2, 4}, -3, 3)}, [](const Inputs& in) { return ops::gelu(in[0], "none"); });
  check_gradients("gelu tanh", {leaf64({2, 4}, -3, 3)}, [](const Inputs& in) { return ops::gelu(in[0], "tanh"); });
  check_gradients("silu", {leaf64({2, 4}, -4, 4)}, [](const Inputs& in) { return ops::silu(in[0]); });
}

TEST_CASE("activations gradcheck: softmax and log_softmax over each dim", "[activations][gradcheck]") {
  for (int64_t dim : {0, 1, -1}) {
    check_gradients("softmax dim " + std::to_string(dim), {leaf64({3, 4}, -2, 2)},
              [dim](const Inputs& in) { return ops::softmax(in[0], dim); });
    check_gradients("log_softmax dim " + std::to_string(dim), {leaf64({3, 4}, -2, 2)},
              [dim](const Inputs& in) { return ops::log_softmax(in[0], dim); });
  }
  check_gradients("softmax 3-d, middle dim", {leaf64({2, 3, 2}, -2, 2)},
            [](const Inputs& in) { return ops::softmax(in[0], 1); });
  check_gradients("log_softmax 1-d", {leaf64({5}, -2, 2)}, [](const Inputs& in) { return ops::log_softmax(in[0], 0); });
}

TEST_CASE("activations gradcheck: max, max(dim), amax", "[activations][gradcheck]") {
  // Distinct values: no ties, so the maximum's gradient is well defined.
  check_gradients("max()", {leaf64({2, 3}, -2, 2)}, [](const Inputs& in) { return ops::max_all(in[0]); });
  for (int64_t dim : {0, 1, -1})
    for (bool keep : {false, true})
      check_gradients("max(dim=" + std::to_string(dim) + ", keepdim=" + (keep ? "True" : "False") + ")",
                {leaf64({3, 4}, -2, 2)}, [=](const Inputs& in) { return ops::max_dim(in[0], dim, keep).first; });
  check_gradients("amax(1)", {leaf64({3, 4}, -2, 2)}, [](const Inputs& in) { return ops::amax(in[0], {1}, false); });
  check_gradients("amax((0, 2), keepdim)", {leaf64({2, 3, 2}, -2, 2)},
            [](const Inputs& in) { return ops::amax(in[0], {0, 2}, true); });
  check_gradients("amax() all", {leaf64({2, 3}, -2, 2)}, [](const Inputs& in) { return ops::amax(in[0], {}, false); });
}

TEST_CASE("activations gradcheck: var", "[activations][gradcheck]") {
  const std::optional<std::vector<int64_t>> all = std::nullopt;
  check_gradients("var()", {leaf64({2, 3}, -2, 2)}, [&](const Inputs& in) { return ops::var(in[0], all, 1, false); });
  check_gradients("var(unbiased=False)", {leaf64({2, 3}, -2, 2)},
            [&](const Inputs& in) { return ops::var(in[0], all, 0, false); });
  check_gradients("var(dim=1)", {leaf64({3, 4}, -2, 2)},
            [](const Inputs& in) { return ops::var(in[0], std::vector<int64_t>{1}, 1, false); });
  check_gradients("var(-1, keepdim=True, correction=0)", {leaf64({3, 4}, -2, 2)},
            [](const Inputs& in) { return ops::var(in[0], std::vector<int64_t>{-1}, 0, true); });
  check_gradients("var(dim=0, correction=2)", {leaf64({4, 3}, -2, 2)},
            [](const Inputs& in) { return ops::var(in[0], std::vector<int64_t>{0}, 2, false); });
  check_gradients("var((0, 2))", {leaf64({2, 3, 2}, -2, 2)},
            [](const Inputs& in) { return ops::var(in[0], std::vector<int64_t>{0, 2}, 1, false); });
}

TEST_CASE("activations gradcheck: norm", "[activations][gradcheck]") {
  const std::vector<double> v{-1.3, -0.4, 0.2, 0.9, -2.1, 1.7};
  auto x = [&] { return values({2, 3}, v, DType::Float64, true); };
  check_gradients("norm() (p 'fro')", {x()}, [](const Inputs& in) { return ops::norm_functional(in[0], kNone, std::nullopt, false); });
  check_gradients("norm(dim=1)", {x()},
            [](const Inputs& in) { return ops::norm_functional(in[0], kNone, std::vector<int64_t>{1}, false); });
  check_gradients("norm(dim=(-1, 0)) (sqrt of sum of squares)", {x()},
            [](const Inputs& in) { return ops::norm_functional(in[0], kNone, std::vector<int64_t>{-1, 0}, false); });
  for (double p : {1.0, 1.5, 3.0, 0.5})
    check_gradients("norm(p=" + std::to_string(p) + ", dim=0, keepdim)", {x()},
              [p](const Inputs& in) { return ops::norm_functional(in[0], F(p), std::vector<int64_t>{0}, true); });
  check_gradients("norm(p=inf) (unique maximum)", {x()}, [](const Inputs& in) {
    return ops::norm_functional(in[0], F(std::numeric_limits<double>::infinity()), std::nullopt, false);
  });
  check_gradients("norm(p=2)", {x()}, [](const Inputs& in) { return ops::norm_functional(in[0], I(2), std::nullopt, false); });
}

TEST_CASE("activations gradcheck: where and masked_fill", "[activations][gradcheck]") {
  Tensor cond = values({2, 3}, {1, 0, 0, 1, 1, 0}, DType::Bool);
  check_gradients("where(c, x, y)", {leaf64({2, 3}, -2, 2), leaf64({2, 3}, -1, 1, true, 0.7)},
            [&](const Inputs& in) { return ops::where(cond, in[0], in[1]); });
  check_gradients("where(c, x, 0.0)", {leaf64({2, 3}, -2, 2)},
            [&](const Inputs& in) { return ops::where(cond, in[0], ops::wrap_number(F(0.0))); });
  check_gradients("where(c, x, r) broadcasting r [3]", {leaf64({2, 3}, -2, 2), leaf64({3}, -1, 1, true, 0.7)},
            [&](const Inputs& in) { return ops::where(cond, in[0], in[1]); });
  check_gradients("where(c[0], x [1, 3], y [2, 1]) all broadcast",
            {leaf64({1, 3}, -2, 2), leaf64({2, 1}, -1, 1, true, 0.7)},
            [&](const Inputs& in) { return ops::where(ops::select(cond, 0, 0), in[0], in[1]); });
  check_gradients("masked_fill(m, 0.5)", {leaf64({2, 3}, -2, 2)},
            [&](const Inputs& in) { return ops::masked_fill(in[0], cond, F(0.5)); });
  check_gradients("masked_fill(m, v) with a 0-d tensor v", {leaf64({2, 3}, -2, 2), leaf64({}, 0.5, 1.5)},
            [&](const Inputs& in) { return ops::masked_fill(in[0], cond, Value::tensor(in[1])); });
  check_gradients("masked_fill broadcasting self [3] to the mask [2, 3]", {leaf64({3}, -2, 2)},
            [&](const Inputs& in) { return ops::masked_fill(in[0], cond, F(-1.0)); });
}

// ================================================================ values PyTorch computes

TEST_CASE("activations values: forward results match torch 1.13", "[activations]") {
  Tensor x = A({2, 3});
  // torch: x.softmax(1) rows [0.21198273, 0.31624106, 0.47177625]; F.log_softmax(x, 1)
  // rows [-1.5512505, -1.1512506, -0.7512505].
  check_values(agtrace::to_values(ops::softmax(x, 1)),
               {0.21198272705078125, 0.316241055727005, 0.47177624702453613, 0.21198272705078125, 0.316241055727005,
                0.47177624702453613});
  check_values(agtrace::to_values(ops::log_softmax(x, -1)),
               {-1.5512504577636719, -1.1512506008148193, -0.7512505054473877, -1.5512504577636719,
                -1.1512504816055298, -0.7512505054473877});
  // x.var() 0.56, x.var(1, False) [0.10666667, 0.10666667]; x.norm() 1.67332005,
  // x.norm(dim=1) [1.18321598, 1.18321598]; x.norm(p=0) counts non-zeros: 6.
  check_values(agtrace::to_values(ops::var(x, std::nullopt, 1, false)), {0.5600000023841858});
  check_values(agtrace::to_values(ops::var(x, std::vector<int64_t>{1}, 0, false)), {0.1066666692495346, 0.1066666692495346});
  check_values(agtrace::to_values(ops::norm_functional(x, kNone, std::nullopt, false)), {1.6733200550079346});
  check_values(agtrace::to_values(ops::norm_functional(x, kNone, std::vector<int64_t>{1}, false)),
               {1.1832159757614136, 1.1832159757614136});
  check_values(agtrace::to_values(ops::norm_functional(x, I(0), std::nullopt, false)), {6.0});
  // var with correction >= N: divisor max(0, N - correction) (torch: [inf, nan]).
  Tensor t = values({2, 3}, {2, 1, 0, 1, 1, 1});
  check_values(agtrace::to_values(ops::var(t, std::vector<int64_t>{1}, 4, false)),
               {std::numeric_limits<double>::infinity(), std::nan("")});
  // clamp with min > max gives max everywhere (torch: all -0.5).
  check_values(agtrace::to_values(ops::clamp(x, F(0.5), F(-0.5))), {-0.5, -0.5, -0.5, -0.5, -0.5, -0.5});
  // gelu: torch F.gelu([-1, 0.5, 2]) = [-0.15865529, 0.34573120, 1.95449996]
  check_values(agtrace::to_values(ops::gelu(values({3}, {-1, 0.5, 2}), "none")),
               {-0.1586552858352661, 0.3457311987876892, 1.9544999599456787});
}

TEST_CASE("activations values: gradients at ties, zeros and bounds match torch 1.13", "[activations]") {
  // Weights [1, 2, 3, ...] as in the measurements.
  SECTION("max() splits the gradient evenly among ties") {
    Tensor t = values({2, 3}, {1, 3, 3, 2, 2, 0}, DType::Float32, true);
    check_values(grad_with_arange_weights(t, [](const Tensor& a) { return ops::max_all(a); }),
                 {0, 0.5, 0.5, 0, 0, 0});
  }
  SECTION("amax splits among ties per row; max(dim) takes the first index") {
    Tensor t = values({2, 3}, {1, 3, 3, 2, 2, 0}, DType::Float32, true);
    check_values(grad_with_arange_weights(t, [](const Tensor& a) { return ops::amax(a, {1}, false); }),
                 {0, 0.5, 0.5, 1, 1, 0});
    check_values(grad_with_arange_weights(t, [](const Tensor& a) { return ops::max_dim(a, 1, false).first; }),
                 {0, 1, 0, 2, 0, 0});
    auto [v, idx] = ops::max_dim(t, 1, false);
    CHECK(agtrace::to_values(idx) == std::vector<double>{1, 0});
    CHECK(idx->dtype() == DType::Int64);
  }
  SECTION("norm: zero rows get 0; p=1 uses sgn; p=inf shares among ties; p=0 gives no gradient") {
    Tensor t = values({2, 2}, {0, 0, 3, 4}, DType::Float32, true);
    check_values(grad_with_arange_weights(t, [](const Tensor& a) {
                   return ops::norm_functional(a, kNone, std::vector<int64_t>{1}, false);
                 }),
                 {0, 0, 1.2, 1.6});
    Tensor u = values({2, 2}, {0, 0, -3, 4}, DType::Float32, true);
    check_values(grad_with_arange_weights(u, [](const Tensor& a) {
                   return ops::norm_functional(a, I(1), std::vector<int64_t>{1}, false);
                 }),
                 {0, 0, -2, 2});
    check_values(grad_with_arange_weights(u, [](const Tensor& a) {
                   return ops::norm_functional(a, I(3), std::vector<int64_t>{1}, false);
                 }),
                 {0, 0, -0.8897026777267456, 1.5816936492919922});
    Tensor q = values({2, 2}, {0, 1, -3, 4}, DType::Float32, true);
    check_values(grad_with_arange_weights(q, [](const Tensor& a) {
                   return ops::norm_functional(a, F(0.5), std::vector<int64_t>{1}, false);
                 }),
                 {0, 1, -4.309401035308838, 3.732050895690918});
    Tensor w = values({2, 2}, {1, -4, -4, 4}, DType::Float32, true);
    check_values(grad_with_arange_weights(w, [](const Tensor& a) {
                   return ops::norm_functional(a, F(std::numeric_limits<double>::infinity()), std::vector<int64_t>{1}, false);
                 }),
                 {0, -1, -1, 1});
    CHECK(grad_with_arange_weights(q, [](const Tensor& a) {
            return ops::norm_functional(a, I(0), std::vector<int64_t>{1}, false);
          }).empty());  // torch: x.grad stays None
  }
  SECTION("abs'(0) = 0, clamp passes at both bounds, leaky_relu'(0) = slope") {
    check_values(grad_with_arange_weights(values({3}, {0, -1, 2}, DType::Float32, true),
                                          [](const Tensor& a) { return ops::abs(a); }),
                 {0, -2, 3});
    check_values(grad_with_arange_weights(values({5}, {-1, 1, 2, -2, 0}, DType::Float32, true),
                                          [](const Tensor& a) { return ops::clamp(a, F(-1), F(1)); }),
                 {1, 2, 0, 0, 5});
    check_values(grad_with_arange_weights(values({5}, {-1, 1, 2, -2, 0}, DType::Float32, true),
                                          [](const Tensor& a) { return ops::clamp(a, F(1), F(-1)); }),
                 {0, 0, 0, 0, 0});
    check_values(grad_with_arange_weights(values({3}, {0, -1, 2}, DType::Float32, true),
                                          [](const Tensor& a) { return ops::leaky_relu(a, F(0.1)); }),
                 {0.10000000149011612, 0.20000000298023224, 3.0});
  }
  SECTION("gelu gradients, both approximations") {
    check_values(grad_with_arange_weights(values({3}, {-1, 0.5, 2}, DType::Float32, true),
                                          [](const Tensor& a) { return ops::gelu(a, "none"); }),
                 {-0.08331543207168579, 1.734990119934082, 3.2556958198547363});
    check_values(grad_with_arange_weights(values({3}, {-1, 0.5, 2}, DType::Float32, true),
                                          [](const Tensor& a) { return ops::gelu(a, "tanh"); }),
                 {-0.08296409249305725, 1.7347397804260254, 3.258297920227051});
  }
  SECTION("var: an empty dim list has infinite gradients; dof < 0 flips the sign") {
    const double inf = std::numeric_limits<double>::infinity();
    Tensor t = values({2, 3}, {2, 1, 0, 1, 1, 5}, DType::Float32, true);
    check_values(grad_with_arange_weights(t, [](const Tensor& a) { return ops::var(a, std::vector<int64_t>{}, 1, false); }),
                 {inf, -inf, -inf, -inf, -inf, inf});
    check_values(grad_with_arange_weights(t, [](const Tensor& a) { return ops::var(a, std::nullopt, 7, false); }),
                 {-0.6666667461395264, 1.3333332538604736, 3.3333332538604736, 1.3333332538604736,
                  1.3333332538604736, -6.6666669845581055});
    Tensor u = values({2, 3}, {2, 1, 0, 1, 1, 1}, DType::Float32, true);
    check_values(grad_with_arange_weights(u, [](const Tensor& a) { return ops::var(a, std::vector<int64_t>{1}, 4, false); }),
                 {-2, 0, 2, 0, 0, 0});
    Tensor s = values({}, {2}, DType::Float32, true);
    check_values(grad_with_arange_weights(s, [](const Tensor& a) { return ops::var(a, std::nullopt, 1, false); }), {inf});
  }
  SECTION("var: numel == correction without dim returns a gradient of the wrong shape (torch raises)") {
    Tensor t = values({1}, {2}, DType::Float32, true);
    Tensor v = ops::var(t, std::nullopt, 1, false);
    CHECK(std::isnan(agtrace::item(v)));
    autograd::BackwardRequest req;
    req.roots = {v};
    try {
      autograd::run_backward(req);
      FAIL("expected an error");
    } catch (const ScenarioError& e) {
      CHECK(std::string(e.what()) ==
            "Function VarBackward0 returned an invalid gradient at index 0 - got [] but expected shape compatible with [1]");
    }
  }
  SECTION("masked_fill value gradient sums the masked positions") {
    Tensor x = values({3}, {0, -1, 2}, DType::Float32, true);
    Tensor v = values({}, {5}, DType::Float32, true);
    Tensor m = values({3}, {1, 0, 1}, DType::Bool);
    Tensor out = ops::masked_fill(x, m, Value::tensor(v));
    run_backward_of(ops::sum(ops::mul(out, values({3}, {1, 2, 3})), std::nullopt, false));
    check_values(agtrace::to_values(x->grad), {0, 2, 0});
    check_values(agtrace::to_values(v->grad), {4});
  }
}

// ================================================================ fidelity

TEST_CASE("activations fidelity: pointwise nodes save self or result", "[activations][fidelity]") {
  Tensor x = A({2, 3}), xp = A({2, 3}, 0.5, 2.0);
  struct Case {
    const char* node;
    Tensor out;
    const char* saved;
  };
  const std::vector<Case> cases = {
      {"AbsBackward0", ops::abs(x), "self"},       {"SinBackward0", ops::sin(x), "self"},
      {"CosBackward0", ops::cos(x), "self"},       {"RsqrtBackward0", ops::rsqrt(xp), "result"},
      {"SiluBackward0", ops::silu(x), "self"},
  };
  for (const Case& c : cases) {
    INFO(c.node);
    Node& n = fn(c.out);
    CHECK(n.name == c.node);
    CHECK(next_names(n) == Names{kAcc});
    CHECK(saved_names(n) == Names{c.saved});
    Tensor s = n.unpack(c.saved);
    if (std::string(c.saved) == "self") {
      CHECK(s == (n.name == "RsqrtBackward0" ? xp : x));  // same object
    } else {
      CHECK(s != c.out);  // a new object on the output's storage
      CHECK(s->storage == c.out->storage);
      CHECK(s->grad_fn.get() == &n);
    }
    CHECK(n.saved_bytes() == 24);
  }
  SECTION("a non-leaf input is saved as the same object too") {
    Tensor h = ops::mul(x, ops::wrap_number(F(2.0)));
    Tensor s = ops::sin(h);
    CHECK(fn(s).unpack("self") == h);
    CHECK(next_names(fn(s)) == Names{"MulBackward0"});
  }
  SECTION("dtypes: sin of int64 is float32, abs of int64 stays int64, no node") {
    Tensor xi = values({3}, {1, -2, 3}, DType::Int64);
    CHECK(ops::sin(xi)->dtype() == DType::Float32);
    CHECK(ops::rsqrt(xi)->dtype() == DType::Float32);
    CHECK(ops::abs(xi)->dtype() == DType::Int64);
    CHECK(agtrace::to_values(ops::abs(xi)) == std::vector<double>{1, 2, 3});
    CHECK(ops::abs(xi)->grad_fn == nullptr);
    CHECK(error_message([&] { ops::abs(values({2}, {1, 0}, DType::Bool)); }) ==
          "\"abs_cpu\" not implemented for 'Bool'");
    Tensor xh = values({2}, {0.5, 1}, DType::Float16, true);
    CHECK(error_message([&] { ops::sin(xh); }) == "\"sin_vml_cpu\" not implemented for 'Half'");
    CHECK(error_kind([&] { ops::abs(xh); }).empty());  // abs has a Half CPU kernel
  }
}

TEST_CASE("activations fidelity: clamp is ClampBackward1 with min/max attributes", "[activations][fidelity]") {
  Tensor x = A({2, 3});
  SECTION("both bounds") {
    Tensor out_n = ops::clamp(x, F(-0.5), F(0.5));
    Node& n = fn(out_n);
    CHECK(n.name == "ClampBackward1");
    CHECK(next_names(n) == Names{kAcc});
    CHECK(saved_names(n) == Names{"max", "min", "self"});
    CHECK(attr(n, "max") == "0.5");
    CHECK(attr(n, "min") == "-0.5");
    CHECK(n.unpack("self") == x);
  }
  SECTION("x.clamp(min=0.0): max is None") {
    Tensor out_n = ops::clamp(x, F(0.0), kNone);
    Node& n = fn(out_n);
    CHECK(n.name == "ClampBackward1");
    CHECK(attr(n, "max") == "None");
    CHECK(attr(n, "min") == "0.0");
  }
  SECTION("x.clamp(max=0.2), int bounds read back as ints") {
    CHECK(attr(fn(ops::clamp(x, kNone, F(0.2))), "min") == "None");
    Tensor out_n = ops::clamp(x, I(-1), I(1));
    Node& n = fn(out_n);
    CHECK(attr(n, "min") == "-1");
    CHECK(attr(n, "max") == "1");
  }
  SECTION("no bound is an error; int tensors promote with float bounds") {
    CHECK(error_message([&] { ops::clamp(x, kNone, kNone); }) ==
          "torch.clamp: At least one of 'min' or 'max' must not be None");
    Tensor xi = values({3}, {1, -2, 3}, DType::Int64);
    Tensor f = ops::clamp(xi, F(0.5), kNone);
    CHECK(f->dtype() == DType::Float32);
    CHECK(agtrace::to_values(f) == std::vector<double>{1, 0.5, 3});
    Tensor i = ops::clamp(xi, I(0), I(2));
    CHECK(i->dtype() == DType::Int64);
    CHECK(agtrace::to_values(i) == std::vector<double>{1, 0, 2});
    CHECK(ops::clamp(values({2}, {1, 0}, DType::Bool), I(0), kNone)->dtype() == DType::Int64);
  }
}

TEST_CASE("activations fidelity: leaky_relu, gelu", "[activations][fidelity]") {
  Tensor x = A({2, 3});
  Tensor out_l = ops::leaky_relu(x, F(0.01));
  Node& l = fn(out_l);
  CHECK(l.name == "LeakyReluBackward0");
  CHECK(saved_names(l) == Names{"negative_slope", "self"});
  CHECK(attr(l, "negative_slope") == "0.01");
  CHECK(l.unpack("self") == x);
  CHECK(attr(fn(ops::leaky_relu(x, I(1))), "negative_slope") == "1");
  for (const char* ap : {"none", "tanh"}) {
    Tensor out_g = ops::gelu(x, ap);
    Node& g = fn(out_g);
    CHECK(g.name == "GeluBackward0");
    CHECK(saved_names(g) == Names{"approximate", "self"});
    CHECK(attr(g, "approximate") == "'" + std::string(ap) + "'");
    CHECK(g.unpack("self") == x);
  }
  CHECK(error_message([&] { ops::gelu(x, "foo"); }) == "approximate argument must be either none or tanh.");
  Tensor xi = values({3}, {1, -2, 3}, DType::Int64);
  CHECK(error_message([&] { ops::gelu(xi, "none"); }) == "\"GeluKernelImpl\" not implemented for 'Long'");
  CHECK(error_message([&] { ops::silu(xi); }) == "\"silu_cpu\" not implemented for 'Long'");
  CHECK(error_message([&] { ops::leaky_relu(xi, F(0.01)); }) == "\"leaky_relu_cpu\" not implemented for 'Long'");
}

TEST_CASE("activations fidelity: softmax and log_softmax save dim and result", "[activations][fidelity]") {
  Tensor x = A({2, 3});
  Tensor s = ops::softmax(x, -1);
  Node& n = fn(s);
  CHECK(n.name == "SoftmaxBackward0");
  CHECK(next_names(n) == Names{kAcc});
  CHECK(saved_names(n) == Names{"dim", "result"});
  CHECK(attr(n, "dim") == "18446744073709551615");
  Tensor r = n.unpack("result");
  CHECK(r != s);
  CHECK(r->storage == s->storage);
  CHECK(n.saved_bytes() == 24);
  Tensor out_l = ops::log_softmax(x, 1);
  Node& l = fn(out_l);
  CHECK(l.name == "LogSoftmaxBackward0");
  CHECK(saved_names(l) == Names{"dim", "result"});
  CHECK(attr(l, "dim") == "1");
  SECTION("implicit dim of F.softmax: 0 for 0-, 1- and 3-d, else 1") {
    CHECK(ops::implicit_softmax_dim(0) == 0);
    CHECK(ops::implicit_softmax_dim(1) == 0);
    CHECK(ops::implicit_softmax_dim(2) == 1);
    CHECK(ops::implicit_softmax_dim(3) == 0);
    CHECK(ops::implicit_softmax_dim(4) == 1);
  }
  SECTION("errors: dim out of range; integer and Half inputs") {
    CHECK(error_message([&] { ops::softmax(x, 2); }) ==
          "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
    Tensor xi = values({2, 2}, {1, 2, 3, 4}, DType::Int64);
    CHECK(error_message([&] { ops::softmax(xi, 0); }) == "\"softmax_kernel_impl\" not implemented for 'Long'");
    CHECK(error_message([&] { ops::log_softmax(xi, 1); }) ==
          "\"log_softmax_lastdim_kernel_impl\" not implemented for 'Long'");
    Tensor xh = values({2, 2}, {1, 2, 3, 4}, DType::Float16, true);
    CHECK(error_message([&] { ops::softmax(xh, 1); }) == "\"softmax_lastdim_kernel_impl\" not implemented for 'Half'");
  }
  SECTION("0-d input: softmax is 1") {
    Tensor z = values({}, {-1}, DType::Float32, true);
    Tensor o = ops::softmax(z, 0);
    CHECK(o->dim() == 0);
    CHECK(agtrace::item(o) == 1.0);
    CHECK(attr(fn(o), "dim") == "0");
  }
}

TEST_CASE("activations fidelity: max and amax", "[activations][fidelity]") {
  Tensor x = A({2, 3});
  SECTION("x.max(): MaxBackward1 saves result and self") {
    Tensor m = ops::max_all(x);
    Node& n = fn(m);
    CHECK(n.name == "MaxBackward1");
    CHECK(saved_names(n) == Names{"result", "self"});
    CHECK(n.unpack("self") == x);
    Tensor r = n.unpack("result");
    CHECK(r != m);
    CHECK(r->storage == m->storage);
    CHECK(n.saved_bytes() == 28);
    CHECK(agtrace::item(m) == 1.0);
  }
  SECTION("x.max(dim=1): MaxBackward0 saves the returned indices object") {
    auto [v, i] = ops::max_dim(x, 1, false);
    Node& n = fn(v);
    CHECK(n.name == "MaxBackward0");
    CHECK(next_names(n) == Names{kAcc});
    CHECK(saved_names(n) == Names{"dim", "indices", "keepdim", "self_sizes"});
    CHECK(attr(n, "dim") == "1");
    CHECK(attr(n, "keepdim") == "False");
    CHECK(attr(n, "self_sizes") == "(2, 3)");
    CHECK(n.unpack("indices") == i);
    CHECK(i->grad_fn == nullptr);
    CHECK_FALSE(i->requires_grad());
    CHECK(n.saved_bytes() == 16);
    CHECK(v->sizes == Shape{2});
    CHECK(agtrace::to_values(i) == std::vector<double>{2, 2});
  }
  SECTION("x.max(-1, keepdim=True): the dim reads back as uint64") {
    auto [v, i] = ops::max_dim(x, -1, true);
    CHECK(attr(fn(v), "dim") == "18446744073709551615");
    CHECK(attr(fn(v), "keepdim") == "True");
    CHECK(i->sizes == Shape({2, 1}));
  }
  SECTION("0-d input: index 0, self_sizes ()") {
    auto [v, i] = ops::max_dim(values({}, {-1}, DType::Float32, true), 0, false);
    CHECK(attr(fn(v), "self_sizes") == "()");
    CHECK(agtrace::item(i) == 0.0);
  }
  SECTION("amax saves dim, keepdim, result and self") {
    Tensor a = ops::amax(x, {1}, false);
    Node& n = fn(a);
    CHECK(n.name == "AmaxBackward0");
    CHECK(saved_names(n) == Names{"dim", "keepdim", "result", "self"});
    CHECK(attr(n, "dim") == "(1,)");
    CHECK(n.unpack("self") == x);
    CHECK(n.unpack("result") != a);
    CHECK(n.saved_bytes() == 32);
    CHECK(attr(fn(ops::amax(x, {}, false)), "dim") == "()");
    CHECK(attr(fn(ops::amax(x, {-1}, true)), "dim") == "(18446744073709551615,)");
    CHECK(error_message([&] { ops::amax(x, {1, 1}, false); }) == "dim 1 appears multiple times in the list of dims");
    CHECK(error_message([&] { ops::amax(values({0, 3}, {}), {0}, false); }) ==
          "amax(): Expected reduction dim 0 to have non-zero size.");
  }
  SECTION("errors: an empty max(); integer inputs keep their dtype") {
    CHECK(error_kind([&] { ops::max_all(values({0}, {})); }) == "shape_mismatch");
    Tensor xi = values({2, 3}, {1, -2, 3, 4, -5, 6}, DType::Int64);
    CHECK(ops::max_all(xi)->dtype() == DType::Int64);
    CHECK(agtrace::item(ops::max_all(xi)) == 6);
    CHECK(agtrace::to_values(ops::amax(xi, {1}, false)) == std::vector<double>{3, 6});
  }
}

TEST_CASE("activations fidelity: var saves correction, dim, keepdim, self", "[activations][fidelity]") {
  Tensor x = A({2, 3});
  SECTION("x.var(): dim None, correction 1") {
    Tensor out_n = ops::var(x, std::nullopt, 1, false);
    Node& n = fn(out_n);
    CHECK(n.name == "VarBackward0");
    CHECK(next_names(n) == Names{kAcc});
    CHECK(saved_names(n) == Names{"correction", "dim", "keepdim", "self"});
    CHECK(attr(n, "correction") == "1");
    CHECK(attr(n, "dim") == "None");
    CHECK(attr(n, "keepdim") == "False");
    CHECK(n.unpack("self") == x);
    CHECK(n.saved_bytes() == 24);
  }
  SECTION("x.var(-1, unbiased=False, keepdim=True)") {
    Tensor v = ops::var(x, std::vector<int64_t>{-1}, 0, true);
    CHECK(attr(fn(v), "correction") == "0");
    CHECK(attr(fn(v), "dim") == "(18446744073709551615,)");
    CHECK(attr(fn(v), "keepdim") == "True");
    CHECK(v->sizes == Shape({2, 1}));
  }
  SECTION("x.var(()) keeps the empty dim list") {
    Tensor v = ops::var(x, std::vector<int64_t>{}, 1, false);
    CHECK(attr(fn(v), "dim") == "()");
    CHECK(v->dim() == 0);
  }
  SECTION("integer input") {
    CHECK(error_message([&] { ops::var(values({2}, {1, 2}, DType::Int64), std::nullopt, 1, false); }) ==
          "std and var only support floating point and complex dtypes");
  }
}

TEST_CASE("activations fidelity: norm as torch.norm dispatches it", "[activations][fidelity]") {
  Tensor x = A({2, 3});
  SECTION("x.norm(): NormBackward1, p 2 (int), dim ()") {
    Tensor r = ops::norm_functional(x, kNone, std::nullopt, false);
    Node& n = fn(r);
    CHECK(n.name == "NormBackward1");
    CHECK(saved_names(n) == Names{"dim", "keepdim", "p", "result", "self"});
    CHECK(attr(n, "dim") == "()");
    CHECK(attr(n, "p") == "2");
    CHECK(n.unpack("self") == x);
    CHECK(n.unpack("result")->storage == r->storage);
    CHECK(n.saved_bytes() == 28);
  }
  SECTION("a number p without dim lists every dim; p keeps its Python type") {
    CHECK(attr(fn(ops::norm_functional(x, I(1), std::nullopt, false)), "dim") == "(0, 1)");
    CHECK(attr(fn(ops::norm_functional(x, F(2.0), std::nullopt, false)), "p") == "2.0");
    CHECK(attr(fn(ops::norm_functional(x, I(3), std::nullopt, false)), "p") == "3");
  }
  SECTION("dims: as written") {
    Tensor out_n = ops::norm_functional(x, kNone, std::vector<int64_t>{-1}, true);
    Node& n = fn(out_n);
    CHECK(attr(n, "dim") == "(18446744073709551615,)");
    CHECK(attr(n, "keepdim") == "True");
    CHECK(attr(fn(ops::norm_functional(x, S("fro"), std::vector<int64_t>{1}, false)), "p") == "2");
    CHECK(attr(fn(ops::norm_functional(x, I(2), std::vector<int64_t>{0, 1}, false)), "dim") == "(0, 1)");
  }
  SECTION("'fro' over two dims: SqrtBackward0 > SumBackward1 (wrapped dims) > MulBackward0") {
    Tensor r = ops::norm_functional(x, kNone, std::vector<int64_t>{-1, 0}, false);
    Node& n = fn(r);
    CHECK(n.name == "SqrtBackward0");
    CHECK(next_names(n) == Names{"SumBackward1"});
    Node& s = *n.next[0].fn;
    CHECK(attr(s, "dim") == "(1, 0)");
    CHECK(next_names(s) == Names{"MulBackward0"});
    CHECK(agtrace::item(r) == Approx(1.6733200550079346));
  }
  SECTION("errors") {
    CHECK(error_message([&] { ops::norm_functional(x, kNone, std::vector<int64_t>{1, 1}, false); }) ==
          "Expected dims to be different, got [1, 1] instead");
    CHECK(error_message([&] { ops::norm_functional(A({2, 2, 2}), kNone, std::vector<int64_t>{0, 1, 2}, false); }) ==
          "Expected at most 2 dimensions, but got 3 dimensions instead.");
    CHECK(error_message([&] { ops::norm_functional(values({2}, {1, 2}, DType::Int64), kNone, std::nullopt, false); }) ==
          "norm(): input dtype should be either floating point or complex. Got Long instead.");
    CHECK(error_kind([&] { ops::norm_functional(x, S("nuc"), std::nullopt, false); }) == "unsupported");
    CHECK(error_message([&] { ops::norm_functional(x, I(1), std::vector<int64_t>{1, 1}, false); }) ==
          "dim 1 appears multiple times in the list of dims");
  }
}

TEST_CASE("activations fidelity: where saves only the condition", "[activations][fidelity]") {
  Tensor x = A({2, 3}), y = A({2, 3}, 0.3, -0.7);
  Tensor m = values({2, 3}, {0, 0, 0, 1, 1, 1}, DType::Bool);
  SECTION("{x, y}") {
    Tensor w = ops::where(m, x, y);
    Node& n = fn(w);
    CHECK(n.name == "WhereBackward0");
    CHECK(next_names(n) == Names{kAcc, kAcc});
    CHECK(saved_names(n) == Names{"condition"});
    CHECK(n.unpack("condition") == m);
    CHECK(n.saved_bytes() == 6);
  }
  SECTION("{x} only, {y} only, a number operand") {
    Tensor yc = A({2, 3}, 0.3, -0.7, false), xc = A({2, 3}, -1, 1, false);
    CHECK(next_names(fn(ops::where(m, x, yc))) == Names{kAcc, "None"});
    CHECK(next_names(fn(ops::where(m, xc, y))) == Names{"None", kAcc});
    Tensor w = ops::where(m, x, ops::wrap_number(F(0.0)));
    CHECK(next_names(fn(w)) == Names{kAcc, "None"});
    CHECK(w->dtype() == DType::Float32);
    CHECK(fn(w).saved_bytes() == 6);
  }
  SECTION("dtypes: numbers promote as Python scalars") {
    CHECK(ops::where(m, ops::wrap_number(I(1)), ops::wrap_number(I(0)))->dtype() == DType::Int64);
    CHECK(ops::where(m, ops::wrap_number(F(1.0)), ops::wrap_number(F(0.0)))->dtype() == DType::Float32);
    Tensor d = values({2, 3}, {1, 2, 3, 4, 5, 6}, DType::Float64, true);
    Tensor w = ops::where(m, x, d);
    CHECK(w->dtype() == DType::Float64);
    run_backward_of(ops::sum(w, std::nullopt, false));
    CHECK(x->grad->dtype() == DType::Float32);  // cast back to each input's dtype
    CHECK(d->grad->dtype() == DType::Float64);
  }
  SECTION("errors") {
    CHECK(error_message([&] { ops::where(x, x, y); }) ==
          "where expected condition to be a boolean tensor, but got a tensor with dtype Float");
    CHECK(error_kind([&] { ops::where(m, x, A({2})); }) == "shape_mismatch");
  }
}

TEST_CASE("activations fidelity: masked_fill saves only the mask", "[activations][fidelity]") {
  Tensor x = A({2, 3});
  Tensor m = values({2, 3}, {0, 0, 0, 1, 1, 1}, DType::Bool);
  SECTION("a number value: MaskedFillBackward0, one edge") {
    Tensor r = ops::masked_fill(x, m, F(0.0));
    Node& n = fn(r);
    CHECK(n.name == "MaskedFillBackward0");
    CHECK(next_names(n) == Names{kAcc});
    CHECK(saved_names(n) == Names{"mask"});
    CHECK(n.unpack("mask") == m);
    CHECK(n.saved_bytes() == 6);
  }
  SECTION("a 0-d tensor value: MaskedFillBackward1, edges (self, value)") {
    Tensor v = values({}, {2}, DType::Float32, false);
    CHECK(next_names(fn(ops::masked_fill(x, m, Value::tensor(v)))) == Names{kAcc, "None"});
    Tensor vr = values({}, {2}, DType::Float32, true);
    Tensor out_n = ops::masked_fill(x, m, Value::tensor(vr));
    Node& n = fn(out_n);
    CHECK(n.name == "MaskedFillBackward1");
    CHECK(next_names(n) == Names{kAcc, kAcc});
    CHECK(saved_names(n) == Names{"mask"});
  }
  SECTION("broadcasting: the mask may be smaller, or self may grow to the mask") {
    Tensor row = values({3}, {0, 1, 0}, DType::Bool);
    Tensor r = ops::masked_fill(x, row, F(1.5));
    CHECK(r->sizes == Shape({2, 3}));
    CHECK(fn(r).unpack("mask") == row);
    Tensor s = ops::masked_fill(A({3}), m, F(1.0));
    CHECK(s->sizes == Shape({2, 3}));
  }
  SECTION("errors and unsupported masks") {
    CHECK(error_kind([&] { ops::masked_fill(x, values({3, 2}, {1, 1, 1, 1, 1, 1}, DType::Bool), F(1.0)); }) ==
          "shape_mismatch");
    CHECK(error_message([&] { ops::masked_fill(x, m, Value::tensor(A({1}))); }) ==
          "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with 1 dimension(s).");
    CHECK(error_kind([&] { ops::masked_fill(x, values({2, 3}, {1, 0, 1, 0, 0, 1}, DType::Int64), F(1.0)); }) ==
          "unsupported");
  }
}

TEST_CASE("activations: no node under no_grad or without requires_grad", "[activations][fidelity]") {
  Tensor c = A({2, 3}, -1, 1, false);
  CHECK(ops::sin(c)->grad_fn == nullptr);
  CHECK(ops::softmax(c, 1)->grad_fn == nullptr);
  CHECK(ops::max_dim(c, 1, false).first->grad_fn == nullptr);
  Tensor x = A({2, 3});
  autograd::GradModeGuard no_grad(false);
  CHECK(ops::gelu(x, "none")->grad_fn == nullptr);
  CHECK(ops::var(x, std::nullopt, 1, false)->grad_fn == nullptr);
  CHECK_FALSE(ops::norm_functional(x, kNone, std::nullopt, false)->requires_grad());
}

namespace {
// x_i = ((37 i) mod 101 - 50) / 16, grad_i = ((7 i) mod 23 - 11) / 8 (64 elements, exact in
// bfloat16); `strided`: x as column 0 of a [64, 2] tensor. Returns the first
// four outputs and their sum, then the same of the input's gradient.
using FirstFourAndSum = std::pair<std::vector<double>, double>;
std::pair<FirstFourAndSum, FirstFourAndSum> bf16_gelu_64(bool strided) {
  std::vector<double> xv, gv;
  for (int64_t i = 0; i < 64; ++i) {
    const double x = static_cast<double>((i * 37) % 101 - 50) / 16.0;
    xv.push_back(x);
    if (strided) xv.push_back(0.0);
    gv.push_back(static_cast<double>((i * 7) % 23 - 11) / 8.0);
  }
  Tensor x = strided ? ops::select(agtrace::tensor_from_values({64, 2}, DType::BFloat16, xv), 1, 0)
                     : agtrace::tensor_from_values({64}, DType::BFloat16, xv);
  Tensor leaf = x;
  leaf->requires_grad_flag = !strided;
  Tensor y = ops::gelu(x, "none");
  auto first4_and_sum = [](const Tensor& t) {
    const std::vector<double> v = agtrace::to_values(t);
    double sum = 0.0;
    for (double e : v) sum += e;
    return FirstFourAndSum(std::vector<double>(v.begin(), v.begin() + 4), sum);
  };
  if (strided) return {first4_and_sum(y), {}};
  agtrace::autograd::BackwardRequest req;
  req.roots = {y};
  req.grad_roots = {agtrace::tensor_from_values({64}, DType::BFloat16, gv)};
  agtrace::autograd::run_backward(req);
  return {first4_and_sum(y), first4_and_sum(leaf->grad)};
}
}  // namespace

TEST_CASE("activations: bfloat16 gelu rounds every step as 1.13's Vectorized<BFloat16> kernel", "[activations][fidelity]") {
  // References: F.gelu and its backward in 1.13 on an AMD EPYC with AVX2 only. The exact gelu
  // rounded once sums to 45.80841064453125, not 45.818603515625.
  const Bf16KernelsOf avx2_machine(agtrace::kernels::Bf16CpuKernels::Cpublas);
  const auto [y, grad] = bf16_gelu_64(false);
  CHECK(y == FirstFourAndSum({-0.0, -0.169921875, 1.3984375, -0.0146484375}, 45.818603515625));
  CHECK(grad == FirstFourAndSum({0.01300048828125, 0.01220703125, 0.421875, -0.04736328125}, 0.52777099609375));
}

TEST_CASE("activations: bfloat16 gelu on a CPU with AVX-512 is oneDNN's, the float formula rounded once", "[activations][fidelity]") {
  // References: the same inputs in 1.13 on an AMD EPYC with AVX-512 (gelu_out_cpu and
  // gelu_backward_out_cpu take oneDNN's gelu_erf for a contiguous input of more than one
  // element). A strided input keeps the every-step rounding there: its outputs are the AVX2
  // machine's above.
  const Bf16KernelsOf avx512_machine(agtrace::kernels::Bf16CpuKernels::OneDnn);
  const auto [y, grad] = bf16_gelu_64(false);
  CHECK(y == FirstFourAndSum({-0.002777099609375, -0.1689453125, 1.3984375, -0.0155029296875}, 45.80841064453125));
  CHECK(grad == FirstFourAndSum({0.01177978515625, 0.01239013671875, 0.421875, -0.047119140625}, 0.526123046875));
  CHECK(bf16_gelu_64(true).first == FirstFourAndSum({-0.0, -0.169921875, 1.3984375, -0.0146484375}, 45.818603515625));
}
