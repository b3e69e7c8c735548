// The formulas the CUDA kernels evaluate (lib/cuda/pointwise_formulas.hpp) against agtrace's
// CPU operations, forward and backward, in float64. Part of the main (CPU) suite: it runs in
// every build, so the header compiles without CUDA and the device's formulas cannot drift
// from what the CPU computes even on a machine with no GPU.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "autograd/engine.hpp"
#include "cuda/pointwise_formulas.hpp"
#include "interp/value.hpp"
#include "ops/activations.hpp"
#include "ops/ops.hpp"
#include "support/gradcheck.hpp"

using namespace agtrace;
namespace pw = agtrace::cuda::pw;

namespace {

const Shape kShape = {3, 5};

// Values in [lo, hi] with none within 0.05 of 0 (and of the clamp bounds' ties: spread()
// gives irrational steps).
Tensor leaf(double lo, double hi, double phase = 0.37) {
  std::vector<double> v = test::spread(shape_numel(kShape), lo, hi, phase);
  for (double& x : v)
    if (std::fabs(x) < 0.05) x = x < 0 ? -0.05 - x : 0.05 + x;
  Tensor t = tensor_from_values(kShape, DType::Float64, v);
  t->requires_grad_flag = true;
  return t;
}

void close(double got, double want, const std::string& what, size_t i) {
  INFO(what << " element " << i << ": formula " << got << ", agtrace CPU " << want);
  CHECK(got == Approx(want).epsilon(1e-12).margin(1e-14));
}

// The gradient of sum(f(x) * w) through agtrace's autograd.
Tensor grad_of(const Tensor& x, const Tensor& y, const Tensor& w) {
  x->grad.reset();
  autograd::BackwardRequest req;
  req.roots = {test::weighted_loss(y, w)};
  autograd::run_backward(req);
  REQUIRE(x->grad != nullptr);
  return x->grad;
}

struct UnaryCase {
  pw::UnaryOp fwd;
  pw::BinaryOp bwd;  // Count: none checked here
  bool saves_result;
  double lo, s0, s1;
  std::function<Tensor(const Tensor&)> op;
};

}  // namespace

TEST_CASE("CUDA pointwise formulas match agtrace's CPU unary ops and their gradients", "[cuda_formulas]") {
  const std::vector<UnaryCase> cases = {
      {pw::UnaryOp::Neg, pw::BinaryOp::Count, false, -2, 0, 0, [](const Tensor& x) { return ops::neg(x); }},
      {pw::UnaryOp::Exp, pw::BinaryOp::ExpBackward, true, -2, 0, 0, [](const Tensor& x) { return ops::exp(x); }},
      {pw::UnaryOp::Log, pw::BinaryOp::LogBackward, false, 0.1, 0, 0, [](const Tensor& x) { return ops::log(x); }},
      {pw::UnaryOp::Sqrt, pw::BinaryOp::SqrtBackward, true, 0.1, 0, 0, [](const Tensor& x) { return ops::sqrt(x); }},
      {pw::UnaryOp::Rsqrt, pw::BinaryOp::RsqrtBackward, true, 0.1, 0, 0, [](const Tensor& x) { return ops::rsqrt(x); }},
      {pw::UnaryOp::Tanh, pw::BinaryOp::TanhBackward, true, -2, 0, 0, [](const Tensor& x) { return ops::tanh(x); }},
      {pw::UnaryOp::Sigmoid, pw::BinaryOp::SigmoidBackward, true, -2, 0, 0,
       [](const Tensor& x) { return ops::sigmoid(x); }},
      {pw::UnaryOp::Relu, pw::BinaryOp::ReluBackward, true, -2, 0, 0, [](const Tensor& x) { return ops::relu(x); }},
      {pw::UnaryOp::Gelu, pw::BinaryOp::GeluBackward, false, -2, 0, 0,
       [](const Tensor& x) { return ops::gelu(x, "none"); }},
      {pw::UnaryOp::GeluTanh, pw::BinaryOp::GeluTanhBackward, false, -2, 0, 0,
       [](const Tensor& x) { return ops::gelu(x, "tanh"); }},
      {pw::UnaryOp::Abs, pw::BinaryOp::AbsBackward, false, -2, 0, 0, [](const Tensor& x) { return ops::abs(x); }},
      {pw::UnaryOp::Sin, pw::BinaryOp::SinBackward, false, -2, 0, 0, [](const Tensor& x) { return ops::sin(x); }},
      {pw::UnaryOp::Cos, pw::BinaryOp::CosBackward, false, -2, 0, 0, [](const Tensor& x) { return ops::cos(x); }},
      {pw::UnaryOp::Reciprocal, pw::BinaryOp::ReciprocalBackward, true, -2, 0, 0,
       [](const Tensor& x) { return ops::reciprocal(x); }},
      {pw::UnaryOp::Silu, pw::BinaryOp::SiluBackward, false, -2, 0, 0, [](const Tensor& x) { return ops::silu(x); }},
      {pw::UnaryOp::PowScalar, pw::BinaryOp::PowScalarBackward, false, 0.1, 2.5, 0,
       [](const Tensor& x) { return ops::pow_scalar(x, Value::real(2.5)); }},
      {pw::UnaryOp::PowScalar, pw::BinaryOp::PowScalarBackward, false, -2, 2, 0,
       [](const Tensor& x) { return ops::pow_scalar(x, Value::integer(2)); }},
      {pw::UnaryOp::LeakyRelu, pw::BinaryOp::LeakyReluBackward, false, -2, 0.02, 0,
       [](const Tensor& x) { return ops::leaky_relu(x, Value::real(0.02)); }},
      {pw::UnaryOp::Clamp, pw::BinaryOp::Count, false, -2, -0.5, 0.75,
       [](const Tensor& x) { return ops::clamp(x, Value::real(-0.5), Value::real(0.75)); }},
  };
  for (const UnaryCase& c : cases) {
    const std::string what = pw::op_name(c.fwd);
    Tensor x = leaf(c.lo, 2.0);
    Tensor y = c.op(x);
    const std::vector<double> xv = to_values(x), yv = to_values(y);
    for (size_t i = 0; i < xv.size(); ++i) close(pw::unary_formula<double>(c.fwd, xv[i], c.s0, c.s1), yv[i], what, i);
    Tensor w = test::weights(kShape);
    const std::vector<double> gv = to_values(grad_of(x, y, w)), wv = to_values(w);
    for (size_t i = 0; i < xv.size(); ++i) {
      double want = 0;
      if (c.bwd != pw::BinaryOp::Count)
        want = pw::binary_formula<double>(c.bwd, wv[i], c.saves_result ? yv[i] : xv[i], c.s0);
      else if (c.fwd == pw::UnaryOp::Neg)
        want = -wv[i];
      else  // clamp
        want = pw::ternary_formula<double>(pw::TernaryOp::ClampBackward, wv[i], xv[i], 0.0, c.s0, c.s1);
      close(want, gv[i], what + " backward", i);
    }
  }
}

TEST_CASE("CUDA pointwise formulas match agtrace's CPU binary ops and their gradients", "[cuda_formulas]") {
  Tensor a = leaf(0.1, 2.0, 0.13), b = leaf(0.1, 2.0, 0.71);
  const std::vector<double> av = to_values(a), bv = to_values(b);
  Tensor w = test::weights(kShape);
  const std::vector<double> wv = to_values(w);
  struct Case {
    pw::BinaryOp op;
    std::function<Tensor(const Tensor&, const Tensor&)> f;
    double s0;
  };
  const std::vector<Case> forward = {
      {pw::BinaryOp::Add, [](const Tensor& x, const Tensor& y) { return ops::add(x, y, Value::real(0.5)); }, 0.5},
      {pw::BinaryOp::Sub, [](const Tensor& x, const Tensor& y) { return ops::sub(x, y, Value::integer(2)); }, 2},
      {pw::BinaryOp::Mul, [](const Tensor& x, const Tensor& y) { return ops::mul(x, y); }, 1},
      {pw::BinaryOp::Div, [](const Tensor& x, const Tensor& y) { return ops::div(x, y); }, 1},
      {pw::BinaryOp::Pow, [](const Tensor& x, const Tensor& y) { return ops::pow_tensor(x, y); }, 1},
      {pw::BinaryOp::Lt, [](const Tensor& x, const Tensor& y) { return ops::compare(x, y, "lt"); }, 1},
      {pw::BinaryOp::Ge, [](const Tensor& x, const Tensor& y) { return ops::compare(x, y, "ge"); }, 1},
      {pw::BinaryOp::Eq, [](const Tensor& x, const Tensor& y) { return ops::compare(x, x, "eq"); }, 1},
  };
  for (const Case& c : forward) {
    const std::vector<double> got = to_values(c.f(a, b));
    const bool self_only = c.op == pw::BinaryOp::Eq;  // compared with itself: every element equal
    for (size_t i = 0; i < av.size(); ++i)
      close(pw::binary_formula<double>(c.op, av[i], self_only ? av[i] : bv[i], c.s0), got[i], pw::op_name(c.op), i);
  }
  // Gradients of a and b for the loss sum(y * w), starting from no .grad.
  auto grads_of = [&](const Tensor& y) {
    a->grad.reset();
    b->grad.reset();
    autograd::BackwardRequest req;
    req.roots = {test::weighted_loss(y, w)};
    autograd::run_backward(req);
    return std::make_pair(to_values(a->grad), to_values(b->grad));
  };
  // div: grad_self = grad / other (Div), grad_other (DivBackwardOther).
  {
    const auto [ga, gb] = grads_of(ops::div(a, b));
    for (size_t i = 0; i < av.size(); ++i) {
      close(pw::binary_formula<double>(pw::BinaryOp::Div, wv[i], bv[i], 1), ga[i], "div backward self", i);
      close(pw::ternary_formula<double>(pw::TernaryOp::DivBackwardOther, wv[i], av[i], bv[i], 0, 0), gb[i],
            "div backward other", i);
    }
  }
  // pow(tensor, tensor): both gradients.
  {
    const auto [ga, gb] = grads_of(ops::pow_tensor(a, b));
    for (size_t i = 0; i < av.size(); ++i) {
      close(pw::ternary_formula<double>(pw::TernaryOp::PowBackwardSelf, wv[i], av[i], bv[i], 0, 0), ga[i],
            "pow backward self", i);
      close(pw::ternary_formula<double>(pw::TernaryOp::PowBackwardExponent, wv[i], av[i], bv[i], 0, 0), gb[i],
            "pow backward exponent", i);
    }
  }
  // where(condition, x, y)
  Tensor cond = ops::compare(a, b, "gt");
  const std::vector<double> cv = to_values(cond), got = to_values(ops::where(cond, a, b));
  for (size_t i = 0; i < av.size(); ++i)
    close(pw::ternary_formula<double>(pw::TernaryOp::Where, cv[i], av[i], bv[i], 0, 0), got[i], "where", i);
}
